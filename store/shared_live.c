/* shared_live.c: this daemon's lease and connected sessions in the shared
 * catalog (see shared_live.h).
 *
 * Owns: one thread; the set of connected sessions (a hash of 16-byte ids
 * with a count each: a session's new connection can arrive before its old
 * one is gone).
 *
 * Invariants:
 *   1. shared_live_set MUST only take the lock, otherwise the daemon's loop
 *      would wait for the catalog.
 *   2. The set MUST be written again after a failed write (dirty stays
 *      set), otherwise a catalog blip would leave other daemons with a
 *      stale list until the next connect or leave.
 *   3. The lease MUST be renewed every tick, at least several ticks before
 *      it runs out, otherwise a live daemon's agents would flicker to
 *      disconnected on other daemons and the orphan sweep could take its
 *      current objects.
 */
#include "config.h"

#include "shared_live.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "gtp_error.h"
#include "pg_live.h"
#include "text.h"

#define LIVE_BUCKETS 4096 /* power of two */

typedef struct entry {
  uint8_t id[16];
  int count;
  struct entry *next;
} entry;

struct shared_live {
  shared_live_config cfg;
  char *daemon_id;
  pthread_t thread;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Protected by lock: */
  int stop, dirty;
  entry *b[LIVE_BUCKETS];
  uint64_t n;
  shared_live_stats st;
  pthread_mutex_t sync_lock; /* one sync at a time (thread vs tests) */
};

static uint32_t live_hash(const uint8_t id[16]) {
  uint32_t h;
  memcpy(&h, id, sizeof h); /* ids are random */
  return h & (LIVE_BUCKETS - 1);
}

void shared_live_set(shared_live *l, const uint8_t session[16], int on) {
  if (!l)
    return;
  pthread_mutex_lock(&l->lock); /* invariant 1 */
  entry **pp = &l->b[live_hash(session)];
  while (*pp && memcmp((*pp)->id, session, 16) != 0)
    pp = &(*pp)->next;
  if (on) {
    if (!*pp) {
      entry *e = calloc(1, sizeof *e);
      if (e) { /* out of memory: the session shows disconnected elsewhere */
        memcpy(e->id, session, 16);
        *pp = e;
        l->n++;
        l->dirty = 1;
      }
    }
    if (*pp)
      (*pp)->count++;
  } else if (*pp && --(*pp)->count <= 0) {
    entry *e = *pp;
    *pp = e->next;
    free(e);
    l->n--;
    l->dirty = 1;
  }
  pthread_mutex_unlock(&l->lock);
}

static void live_log(shared_live *l, int rc, const char *cause) {
  char kv[600];
  snprintf(kv, sizeof kv,
           "msg=\"shared store: cannot publish this daemon's connections;"
           " will retry\" err=\"%s\"",
           cause ? cause : gtp_strerror(rc));
  if (l->cfg.log)
    l->cfg.log(l->cfg.log_ctx, kv);
  else
    fprintf(stderr, "level=warn %s\n", kv);
}

int shared_live_sync(shared_live *l) {
  pthread_mutex_lock(&l->sync_lock);
  char *cause = NULL;
  int rc = pg_live_lease(l->cfg.cat, l->daemon_id, l->cfg.started_ns,
                         l->cfg.lease_ms, &cause); /* invariant 3 */
  char(*ids)[33] = NULL;
  size_t n = 0;
  pthread_mutex_lock(&l->lock);
  int dirty = l->dirty;
  if (rc == 0 && dirty) {
    ids = malloc((l->n ? l->n : 1) * sizeof *ids);
    if (ids) {
      for (int i = 0; i < LIVE_BUCKETS; i++)
        for (entry *e = l->b[i]; e; e = e->next)
          gtp_session_hex(e->id, ids[n++]);
      l->dirty = 0; /* set again below if the write fails */
    }
  }
  pthread_mutex_unlock(&l->lock);
  if (rc == 0 && dirty)
    rc =
        ids ? pg_live_conns(l->cfg.cat, l->daemon_id, ids, n, &cause) : -ENOMEM;
  pthread_mutex_lock(&l->lock);
  if (rc < 0) {
    l->st.errors++;
    if (dirty)
      l->dirty = 1; /* invariant 2 */
  } else if (dirty) {
    l->st.writes++;
  }
  pthread_mutex_unlock(&l->lock);
  if (rc < 0)
    live_log(l, rc, cause);
  free(cause);
  free(ids);
  pthread_mutex_unlock(&l->sync_lock);
  return rc;
}

static void *live_main(void *arg) {
  shared_live *l = arg;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += l->cfg.tick_ms / 1000;
    ts.tv_nsec += (long)(l->cfg.tick_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&l->cond, &l->lock, &ts);
    if (l->stop)
      break;
    pthread_mutex_unlock(&l->lock);
    (void)shared_live_sync(l); /* logs its failures */
    pthread_mutex_lock(&l->lock);
  }
  pthread_mutex_unlock(&l->lock);
  return NULL;
}

int shared_live_start(const shared_live_config *cfg, shared_live **out,
                      char **cause) {
  *out = NULL;
  shared_live *l = calloc(1, sizeof *l);
  if (!l)
    return -ENOMEM;
  l->cfg = *cfg;
  if (!l->cfg.tick_ms)
    l->cfg.tick_ms = 1000;
  if (!l->cfg.lease_ms)
    l->cfg.lease_ms = 5000;
  l->daemon_id = strdup(cfg->daemon_id ? cfg->daemon_id : "");
  l->cfg.daemon_id = l->daemon_id;
  pthread_mutex_init(&l->lock, NULL);
  pthread_mutex_init(&l->sync_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&l->cond, &ca);
  pthread_condattr_destroy(&ca);
  int rc = l->daemon_id ? 0 : -ENOMEM;
  if (rc == 0) {
    rc = pg_live_lease(l->cfg.cat, l->daemon_id, l->cfg.started_ns,
                       l->cfg.lease_ms, cause);
  }
  /* A previous run under the same id may have left rows: start empty. */
  if (rc == 0) {
    char(*none)[33] = NULL;
    rc = pg_live_conns(l->cfg.cat, l->daemon_id, none, 0, cause);
  }
  if (rc == 0 && pthread_create(&l->thread, NULL, live_main, l) != 0)
    rc = -EAGAIN;
  if (rc < 0) {
    shared_live_stop(l);
    return rc;
  }
  l->started = 1;
  *out = l;
  return 0;
}

void shared_live_stop(shared_live *l) {
  if (!l)
    return;
  if (l->started) {
    pthread_mutex_lock(&l->lock);
    l->stop = 1;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    char *cause = NULL;
    (void)pg_live_leave(l->cfg.cat, l->daemon_id, &cause);
    free(cause);
  }
  for (int i = 0; i < LIVE_BUCKETS; i++) {
    entry *e = l->b[i];
    while (e) {
      entry *next = e->next;
      free(e);
      e = next;
    }
  }
  pthread_mutex_destroy(&l->lock);
  pthread_mutex_destroy(&l->sync_lock);
  pthread_cond_destroy(&l->cond);
  free(l->daemon_id);
  free(l);
}

void shared_live_stats_get(shared_live *l, shared_live_stats *out) {
  pthread_mutex_lock(&l->lock);
  *out = l->st;
  out->sessions = l->n;
  pthread_mutex_unlock(&l->lock);
}
