/* shared_live.h: this daemon's presence in the shared catalog: a lease in
 * gt_daemons renewed every tick, and the set of sessions connected to it
 * now in gt_conns, so /v1/agents on every daemon says `connected` alike
 * (pg_cat_read_sessions reads it back).
 *
 * The daemon's loop reports each session connecting or leaving with
 * shared_live_set, which only takes a lock; a thread writes the set to the
 * catalog when it changed, at most once a tick. Other daemons see a
 * connect or a leave within about a tick, and a daemon killed with -9
 * stops counting when its lease runs out (lease_ms).
 *
 * Thread: start/stop on the main thread; shared_live_set from any.
 */
#ifndef SHARED_LIVE_H
#define SHARED_LIVE_H

#include <stdint.h>

#include "pg_cat.h"

typedef struct shared_live shared_live;

typedef struct shared_live_config {
  pg_cat *cat;           /* borrowed */
  const char *daemon_id; /* copied */
  int64_t started_ns;    /* wall clock when this run of the daemon began */
  uint32_t tick_ms;      /* 0 = 1000 */
  uint32_t lease_ms;     /* 0 = 5000 */
  void (*log)(void *ctx, const char *kv);
  void *log_ctx;
} shared_live_config;

typedef struct shared_live_stats {
  uint64_t sessions; /* connected now */
  uint64_t writes;   /* set written to the catalog */
  uint64_t errors;   /* catalog calls that failed */
} shared_live_stats;

/* Takes the lease at once (so an unreachable catalog is an error now) and
 * starts the thread. */
int shared_live_start(const shared_live_config *cfg, shared_live **out,
                      char **cause);
/* Stops the thread and gives the lease and the rows back (best effort). */
void shared_live_stop(shared_live *l);
/* A session connected (on 1) or left (on 0). Never waits for the network. */
void shared_live_set(shared_live *l, const uint8_t session[16], int on);
/* Writes the lease and, if changed, the set now (tests). */
int shared_live_sync(shared_live *l);
void shared_live_stats_get(shared_live *l, shared_live_stats *out);

#endif /* SHARED_LIVE_H */
