/* store_ckpt.c: WAL checkpoints off the store thread.
 *
 * Why: SQLite's automatic checkpoint runs inside the COMMIT that passes
 * the WAL target (store_writer.h, 64 MiB). It syncs the WAL, copies every
 * page of it into the database file and syncs that: 100-400 ms here, and
 * every ACK of the transactions queued behind it waits that long. With
 * 10,000 agents writing about 20 MB/s that is one stall every 3 s, enough
 * to set the fleet's ACK p99 (bench/RESULTS.md, fleetack section).
 *
 * How: a thread with its own connection runs PASSIVE checkpoints, which
 * take no lock a writer needs, so COMMITs go on while it copies and syncs.
 * A PASSIVE pass copies the frames that were in the WAL when it began;
 * under continuous writes the WAL then never is fully copied when a
 * transaction starts, so SQLite never restarts it from the beginning and
 * it would grow without bound. So the store thread finishes: once a pass
 * is done and the frames appended since are few (target / 16), its WAL
 * hook marks a finish due, and store_ckpt_finish (store_maint.c, after
 * the batch's done() calls, so its ACKs are on their way) runs a PASSIVE
 * checkpoint of that remainder on the write connection; the next
 * transaction then restarts the WAL. Only the transactions queued behind
 * the finish wait for it: its copy is small, but it syncs the WAL and the
 * database file (1-21 ms here, at worst 81-101 ms when the disk was busy,
 * against 100-650 ms for the whole WAL inside COMMIT). The checkpointer
 * repeats passes until one copies few frames (each copies what came in
 * during the one before, shorter each time while the disk copies faster
 * than ingest writes), so the remainder is what one short pass lets in;
 * if the hook still finds too many, it asks for more passes. If it never
 * catches up (readers holding old snapshots, a slow disk), store_maint.c's
 * TRUNCATE at twice the target bounds the WAL as before.
 *
 * ACK semantics do not change: an ACK still follows COMMIT returned on the
 * write connection, with the same synchronous setting; checkpoints only
 * move committed pages from the WAL into the database file.
 *
 * Invariants:
 *   1. Only the checkpointer thread uses c->db after store_ckpt_start; the
 *      store thread only sets want under c->lock and signals.
 *   2. The store thread's finish runs only while no pass is under way
 *      (busy and want clear under c->lock), so the two connections never
 *      contend for the checkpoint lock and a COMMIT never waits for a pass.
 *   3. The WAL hook (inside COMMIT) never does I/O and never waits for
 *      the checkpointer: it takes c->lock, which no one holds across I/O.
 *      The finish runs outside COMMIT and copies at most about
 *      c->remainder frames.
 *   4. store_ckpt_stop joins the thread before the write connection
 *      closes, and gives the write connection its automatic checkpoint
 *      back, so a store without the thread behaves as before.
 */
#include "config.h"

#include "store_ckpt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Passes per request at most: under writes faster than the disk copies,
 * the hook asks again rather than this thread looping on. */
#define STORE_CKPT_PASSES 8

struct store_ckpt {
  sqlite3 *db; /* invariant 1 */
  pthread_t th;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int want, busy, stop;
  int passed;          /* a pass ended since the last finish */
  int finish_due;      /* the hook asks store_ckpt_finish to run */
  int64_t copied;      /* frames the last pass left copied */
  int64_t target;      /* WAL frames at which a pass starts */
  int64_t remainder;   /* at most this many frames left: finish */
  store_ckpt_stats st; /* under lock */
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The write connection's hook: runs on the store thread inside each
 * COMMIT with the WAL's size in frames; it only decides (invariant 3). */
static int wal_hook(void *ctx, sqlite3 *db, const char *name, int nframe) {
  (void)db;
  (void)name;
  store_ckpt *c = ctx;
  if (nframe < c->target)
    return SQLITE_OK;
  pthread_mutex_lock(&c->lock);
  if (c->busy || c->want || c->stop) { /* invariant 2 */
    pthread_mutex_unlock(&c->lock);
    return SQLITE_OK;
  }
  if (c->passed && nframe - c->copied <= c->remainder) {
    c->finish_due = 1; /* store_ckpt_finish, after this batch's done() */
  } else {
    c->finish_due = 0;
    c->want = 1;
    pthread_cond_signal(&c->cond);
  }
  pthread_mutex_unlock(&c->lock);
  return SQLITE_OK;
}

void store_ckpt_finish(store_ckpt *c, sqlite3 *wdb) {
  if (c == NULL)
    return;
  pthread_mutex_lock(&c->lock);
  int due = c->finish_due && !c->busy && !c->want; /* invariant 2 */
  c->finish_due = 0;
  if (due)
    c->passed = 0;
  pthread_mutex_unlock(&c->lock);
  if (!due)
    return;
  int64_t t0 = mono_ns();
  (void)sqlite3_wal_checkpoint_v2(wdb, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
                                  NULL);
  uint64_t dt = (uint64_t)(mono_ns() - t0);
  pthread_mutex_lock(&c->lock);
  c->st.finishes++;
  if (dt > c->st.finish_ns_max)
    c->st.finish_ns_max = dt;
  pthread_mutex_unlock(&c->lock);
}

static void *ckpt_main(void *arg) {
  store_ckpt *c = arg;
  /* Named like the store's other threads, for top -H and per-thread CPU
   * figures (bench/b1_threads.sh). */
  (void)pthread_setname_np(pthread_self(), "gt-ckpt");
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (!c->want && !c->stop)
      pthread_cond_wait(&c->cond, &c->lock);
    if (c->stop)
      break;
    c->want = 0;
    c->busy = 1;
    pthread_mutex_unlock(&c->lock);
    /* Passes until one finds few frames to copy: each copies what was
     * appended during the one before, so the remainder left to the
     * store thread's finish is what one short pass lets in. */
    int rc = SQLITE_OK, nlog = 0, nckpt = 0, last = -1;
    for (int k = 0; k < STORE_CKPT_PASSES; k++) {
      int64_t t0 = mono_ns();
      rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE,
                                     &nlog, &nckpt);
      uint64_t dt = (uint64_t)(mono_ns() - t0);
      pthread_mutex_lock(&c->lock);
      c->st.passes++;
      c->st.pass_ns_total += dt;
      if (dt > c->st.pass_ns_max)
        c->st.pass_ns_max = dt;
      int stop = c->stop;
      pthread_mutex_unlock(&c->lock);
      /* Few new frames, or fewer than before (the WAL restarted). */
      if (rc != SQLITE_OK || stop ||
          (last >= 0 && nckpt - last <= c->remainder))
        break;
      last = nckpt;
    }
    pthread_mutex_lock(&c->lock);
    c->busy = 0;
    /* A failed pass (disk full, I/O error) leaves the finish to a later
     * pass; store_maint.c's reclaim bounds the WAL meanwhile. */
    c->passed = rc == SQLITE_OK;
    c->copied = nckpt;
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

store_ckpt *store_ckpt_start(sqlite3 *wdb, const char *path,
                             int64_t target_frames, int sync_full) {
  store_ckpt *c = calloc(1, sizeof *c);
  if (c == NULL)
    goto fail_alloc;
  c->target = target_frames > 0 ? target_frames : 1;
  c->remainder = c->target / 16 > 0 ? c->target / 16 : 1;
  if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK)
    goto fail_db;
  /* The checkpoint's syncs follow this connection's setting: the same as
   * the writer's, so the database file is as durable as before. */
  if (sqlite3_exec(c->db,
                   sync_full ? "PRAGMA synchronous = FULL"
                             : "PRAGMA synchronous = NORMAL",
                   NULL, NULL, NULL) != SQLITE_OK)
    goto fail_db;
  pthread_mutex_init(&c->lock, NULL);
  pthread_cond_init(&c->cond, NULL);
  if (pthread_create(&c->th, NULL, ckpt_main, c) != 0)
    goto fail_thread;
  sqlite3_wal_hook(wdb, wal_hook, c); /* replaces the automatic one */
  return c;

fail_thread:
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
fail_db:
  sqlite3_close_v2(c->db);
  free(c);
fail_alloc:
  return NULL;
}

void store_ckpt_stop(store_ckpt *c, sqlite3 *wdb, int64_t target_frames) {
  if (c == NULL)
    return;
  pthread_mutex_lock(&c->lock);
  c->stop = 1;
  pthread_cond_signal(&c->cond);
  pthread_mutex_unlock(&c->lock);
  pthread_join(c->th, NULL); /* invariant 4 */
  if (wdb != NULL)
    sqlite3_wal_autocheckpoint(wdb, (int)target_frames);
  sqlite3_close_v2(c->db);
  pthread_cond_destroy(&c->cond);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

void store_ckpt_stats_get(store_ckpt *c, store_ckpt_stats *out) {
  if (c == NULL) {
    *out = (store_ckpt_stats){0};
    return;
  }
  pthread_mutex_lock(&c->lock);
  *out = c->st;
  out->busy = c->busy || c->want;
  pthread_mutex_unlock(&c->lock);
}
