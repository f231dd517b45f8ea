/* shared_retain.h: cluster retention of the shared store. Every daemon runs
 * one; a pass runs on one daemon at a time (PostgreSQL advisory lock):
 * catalog rows first (by age, then by size), then the segment objects of
 * which nothing is live any more, after a grace period so a reader that
 * located a generation just before can still fetch it. Each daemon also
 * publishes its lowest download pin to the catalog (renewed each tick,
 * expiring when the daemon dies), so a download on any daemon holds
 * retention on every daemon.
 *
 * Thread: start/stop from the main thread; run_once from any (tests).
 */
#ifndef SHARED_RETAIN_H
#define SHARED_RETAIN_H

#include <stdint.h>

#include "pg_cat.h"
#include "s3.h"
#include "store_pin.h"

typedef struct shared_retain shared_retain;

typedef struct shared_retain_config {
  pg_cat *cat;           /* borrowed */
  const s3_config *s3;   /* opened once at start (strings copied by s3) */
  const char *daemon_id; /* names this daemon's pin row */
  store_pins *pins;      /* this daemon's download pins; NULL = none */
  int64_t retain_ns;     /* 0 = keep forever */
  uint64_t max_bytes;    /* 0 = unlimited */
  uint32_t tick_ms;      /* 0 = 5000 */
  uint32_t grace_ms;     /* dead object kept this long; 0 = 60000 */
  int grace_zero;        /* tests: delete dead objects at once */
  /* The orphan sweep (shared_orphan.h): objects under PREFIX/segments/
   * nobody cataloged, older than orphan_grace_ms (0 = 600000); it runs
   * every half grace period (at least a tick). */
  const char *prefix; /* "" or ending in '/'; copied */
  uint32_t orphan_grace_ms;
  void (*log)(void *ctx, const char *kv);
  void *log_ctx;
} shared_retain_config;

typedef struct shared_retain_stats {
  uint64_t passes, skipped; /* ran here / another daemon held the lock */
  uint64_t deleted_gens, deleted_objects;
  uint64_t orphan_sweeps, orphans_swept, orphan_errors;
  int last_rc;
} shared_retain_stats;

int shared_retain_start(const shared_retain_config *cfg, shared_retain **out,
                        char **cause);
void shared_retain_stop(shared_retain *r);
/* One tick now: publish the pin, a retention pass, a sweep, and the orphan
 * sweep when it is due. shared_retain_sweep_orphans: an orphan sweep now
 * (tests). */
int shared_retain_run_once(shared_retain *r);
int shared_retain_sweep_orphans(shared_retain *r);
void shared_retain_stats_get(shared_retain *r, shared_retain_stats *out);

#endif /* SHARED_RETAIN_H */
