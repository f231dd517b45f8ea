/* store_ckpt.c: the checkpoint thread (store_ckpt.h has the why).
 *
 * Invariants:
 *   1. The checkpoint connection is used by the checkpoint thread only,
 *      from its start to its join; the write connection never checkpoints
 *      automatically while the hook is installed (the hook replaces
 *      SQLite's own) and gets its automatic checkpoint back at stop, before
 *      it closes.
 *   2. A checkpoint is PASSIVE: it never waits for, nor blocks, the writer
 *      or a reader; what it cannot copy now is copied by a later one.
 *   3. want is set only under lock and cleared by the thread before it
 *      checkpoints, so a request made during a checkpoint gets a checkpoint
 *      after it: the WAL never stays past the threshold unasked.
 */
#include "config.h"

#include "store_ckpt.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "gtp_error.h"
#include "store_int.h"

struct store_ckpt {
  sqlite3 *db; /* the checkpoint connection (invariant 1) */
  int target;  /* WAL frames that ask for a checkpoint */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int want, stop; /* under lock (invariant 3) */
  uint64_t runs;  /* under lock */
};

static void *ckpt_main(void *arg) {
  store_ckpt *c = arg;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (!c->want && !c->stop)
      pthread_cond_wait(&c->cond, &c->lock);
    if (c->stop)
      break;
    c->want = 0;
    pthread_mutex_unlock(&c->lock);
    /* Errors (a full disk, an I/O error) leave the frames in the WAL,
     * where they stay readable and the next request copies them: the
     * automatic checkpoint ignored them the same way. */
    (void)sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                    NULL, NULL);
    pthread_mutex_lock(&c->lock);
    c->runs++;
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* The write connection's WAL hook, after each commit: frames = the WAL's
 * size in frames since it last restarted. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int frames) {
  (void)db;
  (void)name;
  store_ckpt *c = arg;
  if (frames >= c->target) {
    pthread_mutex_lock(&c->lock);
    if (!c->want) {
      c->want = 1;
      pthread_cond_signal(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
  }
  return SQLITE_OK;
}

int store_ckpt_start(sqlite3 *db, const char *path, int sync_full,
                     int target_frames, store_ckpt **out) {
  *out = NULL;
  store_ckpt *c = calloc(1, sizeof *c);
  if (!c)
    return -ENOMEM;
  c->target = target_frames > 0 ? target_frames : 1;
  int err = 0;
  int rc = sqlite3_open_v2(path, &c->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(c->db,
                      sync_full ? "PRAGMA synchronous = FULL;"
                                  " PRAGMA cache_size = -256"
                                : "PRAGMA synchronous = NORMAL;"
                                  " PRAGMA cache_size = -256",
                      NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    err = store_sqlite_err(rc) ? store_sqlite_err(rc) : GTP_E_INTERNAL;
    goto fail_db;
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  rc = pthread_create(&c->thread, NULL, ckpt_main, c);
  if (rc != 0) {
    err = -rc;
    goto fail_thread;
  }
  sqlite3_wal_hook(db, wal_hook, c); /* replaces the automatic checkpoint */
  *out = c;
  return 0;

fail_thread:
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
fail_db:
  sqlite3_close_v2(c->db);
  free(c);
  return err;
}

void store_ckpt_stop(store_ckpt *c, sqlite3 *db) {
  if (!c)
    return;
  pthread_mutex_lock(&c->lock);
  c->stop = 1;
  pthread_cond_signal(&c->cond);
  pthread_mutex_unlock(&c->lock);
  pthread_join(c->thread, NULL);
  sqlite3_wal_autocheckpoint(db, c->target); /* invariant 1 */
  sqlite3_close_v2(c->db);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

uint64_t store_ckpt_runs(store_ckpt *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t n = c->runs;
  pthread_mutex_unlock(&c->lock);
  return n;
}
