/* shared_retain.c: cluster retention of the shared store (see
 * shared_retain.h).
 *
 * Owns: one thread, one S3 client (this thread's), the stats.
 *
 * Invariants:
 *   1. Catalog rows MUST be deleted before their object, and an object only
 *      once its segment has no live generation, otherwise a window could
 *      list a generation whose bytes are gone.
 *   2. A pass MUST skip seqs at or above the lowest unexpired pin of any
 *      daemon, otherwise a download running on another daemon would find
 *      holes in the window it promised.
 *   3. This daemon's pin MUST be published before its retention pass, so a
 *      local download is protected even when this daemon holds the lock.
 */
#include "config.h"

#include "shared_retain.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"
#include "shared_orphan.h"

#define RETAIN_LIMIT 10000
#define SWEEP_LIMIT 100
/* A pin row outlives this many missed ticks before it expires. */
#define PIN_TTL_TICKS 6

struct shared_retain {
  shared_retain_config cfg;
  char *daemon_id, *prefix;
  int64_t orphan_last_ns; /* run_lock: when the orphan sweep last ran */
  s3 *s3;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;                 /* protected by lock */
  shared_retain_stats st;   /* protected by lock */
  pthread_mutex_t run_lock; /* one tick at a time (thread vs tests) */
};

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void rlog(shared_retain *r, const char *kv) {
  if (r->cfg.log)
    r->cfg.log(r->cfg.log_ctx, kv);
  else
    fprintf(stderr, "level=warn %s\n", kv);
}

static int sweep_one(void *ctx, const char *object) {
  shared_retain *r = ctx;
  char *cause = NULL;
  int rc = s3_delete(r->s3, object, &cause);
  if (rc < 0) {
    char kv[600];
    snprintf(kv, sizeof kv,
             "msg=\"retention: cannot delete a dead segment; "
             "will retry\" err=\"%s\"",
             cause ? cause : "");
    rlog(r, kv);
  }
  free(cause);
  return rc;
}

/* One orphan sweep; run_lock held. */
static int orphans_locked(shared_retain *r) {
  shared_orphan_result res;
  char *cause = NULL;
  int rc = shared_orphan_sweep(r->cfg.cat, r->s3, r->prefix,
                               (int64_t)r->cfg.orphan_grace_ms, &res, &cause);
  r->orphan_last_ns = real_ns();
  if (rc < 0) {
    char kv[600];
    snprintf(kv, sizeof kv,
             "msg=\"orphan sweep failed; will retry\" err=\"%s\"",
             cause ? cause : gtp_strerror(rc));
    rlog(r, kv);
  } else if (res.swept > 0) {
    char kv[200];
    snprintf(kv, sizeof kv,
             "msg=\"orphan sweep deleted segment objects nobody cataloged\""
             " swept=%llu listed=%llu",
             (unsigned long long)res.swept, (unsigned long long)res.listed);
    rlog(r, kv);
  }
  free(cause);
  pthread_mutex_lock(&r->lock);
  r->st.orphan_sweeps++;
  r->st.orphans_swept += res.swept;
  if (rc < 0)
    r->st.orphan_errors++;
  pthread_mutex_unlock(&r->lock);
  return rc;
}

int shared_retain_sweep_orphans(shared_retain *r) {
  pthread_mutex_lock(&r->run_lock);
  int rc = orphans_locked(r);
  pthread_mutex_unlock(&r->run_lock);
  return rc;
}

int shared_retain_run_once(shared_retain *r) {
  pthread_mutex_lock(&r->run_lock);
  char *cause = NULL;
  int64_t pin = r->cfg.pins ? store_pins_min(r->cfg.pins) : INT64_MAX;
  int rc = pg_cat_pin_publish(r->cfg.cat, r->daemon_id, pin,
                              (int64_t)r->cfg.tick_ms * PIN_TTL_TICKS, &cause);
  int ran = 0, deleted = 0, swept = 0;
  if (rc == 0 && (r->cfg.retain_ns > 0 || r->cfg.max_bytes > 0)) {
    int64_t cutoff = r->cfg.retain_ns > 0 ? real_ns() - r->cfg.retain_ns : 0;
    free(cause);
    cause = NULL;
    deleted = pg_cat_retain(r->cfg.cat, cutoff, r->cfg.max_bytes, RETAIN_LIMIT,
                            &ran, &cause);
    rc = deleted < 0 ? deleted : 0;
  }
  if (rc == 0) {
    free(cause);
    cause = NULL;
    swept = pg_cat_sweep_dead(r->cfg.cat,
                              r->cfg.grace_zero ? -1 : (int64_t)r->cfg.grace_ms,
                              SWEEP_LIMIT, sweep_one, r, &cause);
    rc = swept < 0 ? swept : 0;
  }
  free(cause);
  /* Orphans: every half grace period, on every daemon (a sweep is safe to
   * run twice at once: shared_orphan.c marks before it deletes). */
  int64_t every = (int64_t)r->cfg.orphan_grace_ms / 2 * 1000000LL;
  if (every < (int64_t)r->cfg.tick_ms * 1000000LL)
    every = (int64_t)r->cfg.tick_ms * 1000000LL;
  if (real_ns() - r->orphan_last_ns >= every)
    orphans_locked(r);
  pthread_mutex_lock(&r->lock);
  r->st.last_rc = rc;
  if (ran)
    r->st.passes++;
  else if (r->cfg.retain_ns > 0 || r->cfg.max_bytes > 0)
    r->st.skipped++;
  if (deleted > 0)
    r->st.deleted_gens += (uint64_t)deleted;
  if (swept > 0)
    r->st.deleted_objects += (uint64_t)swept;
  pthread_mutex_unlock(&r->lock);
  pthread_mutex_unlock(&r->run_lock);
  return rc;
}

static void *retain_main(void *arg) {
  shared_retain *r = arg;
  /* The first pass waits a tick too: a daemon just started has nothing
   * urgent to delete, and callers (tests) can act before it. */
  pthread_mutex_lock(&r->lock);
  for (;;) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += r->cfg.tick_ms / 1000;
    ts.tv_nsec += (long)(r->cfg.tick_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
      ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    while (!r->stop &&
           pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT) {
    }
    if (r->stop)
      break;
    pthread_mutex_unlock(&r->lock);
    shared_retain_run_once(r); /* errors: retried next tick */
    pthread_mutex_lock(&r->lock);
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

/* Undoes what start set up once the thread is gone (or never ran). */
static void retain_free(shared_retain *r) {
  s3_close(r->s3);
  pthread_mutex_destroy(&r->lock);
  pthread_mutex_destroy(&r->run_lock);
  pthread_cond_destroy(&r->cond);
  free(r->daemon_id);
  free(r->prefix);
  free(r);
}

int shared_retain_start(const shared_retain_config *cfg, shared_retain **out,
                        char **cause) {
  *out = NULL;
  shared_retain *r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  r->cfg = *cfg;
  if (!r->cfg.tick_ms)
    r->cfg.tick_ms = 5000;
  if (!r->cfg.grace_ms)
    r->cfg.grace_ms = 60000;
  if (!r->cfg.orphan_grace_ms)
    r->cfg.orphan_grace_ms = 600000;
  r->daemon_id = strdup(cfg->daemon_id ? cfg->daemon_id : "");
  r->prefix = strdup(cfg->prefix ? cfg->prefix : "");
  r->cfg.daemon_id = r->daemon_id;
  r->cfg.prefix = r->prefix;
  /* The first orphan sweep waits a grace period: daemons killed before
   * this one started get theirs swept then. */
  r->orphan_last_ns = real_ns();
  int rc =
      r->daemon_id && r->prefix ? s3_open(cfg->s3, &r->s3, cause) : -ENOMEM;
  if (rc == 0) {
    /* The catalog's keys are bucket-relative: delete from the root. */
    s3_config root = *cfg->s3;
    root.url = s3_root_url(r->s3);
    s3_close(r->s3);
    r->s3 = NULL;
    rc = root.url ? s3_open(&root, &r->s3, cause) : -ENOMEM;
    free((char *)root.url);
  }
  if (rc < 0) {
    free(r->daemon_id);
    free(r->prefix);
    free(r);
    return rc;
  }
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->run_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cond, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&r->thread, NULL, retain_main, r) != 0) {
    retain_free(r);
    return -EAGAIN;
  }
  *out = r;
  return 0;
}

void shared_retain_stop(shared_retain *r) {
  if (!r)
    return;
  pthread_mutex_lock(&r->lock);
  r->stop = 1;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
  pthread_join(r->thread, NULL);
  /* Our pin goes with us (else it would hold retention until it expires). */
  char *cause = NULL;
  pg_cat_pin_publish(r->cfg.cat, r->daemon_id, INT64_MAX, 0, &cause);
  free(cause);
  retain_free(r);
}

void shared_retain_stats_get(shared_retain *r, shared_retain_stats *out) {
  pthread_mutex_lock(&r->lock);
  *out = r->st;
  pthread_mutex_unlock(&r->lock);
}
