/* store.c: the write side of gentraced's storage: one SQLite connection, one
 * thread, batched transactions, retention, disk-full handling.
 *
 * Owns: the write connection and its prepared statements, the store thread,
 * the compressor threads (each with its zstd context, store_zpol.c), the two
 * queues, the session index (store_index.c), and the counters behind
 * store_stats_get.
 *
 * Files: this one opens, queues, runs the threads and closes; the state is
 * in store_writer.h; store_setup.c holds the open's SQLite steps,
 * store_commit.c the compression and the batch transaction, store_maint.c
 * retention and the rest of the maintenance. Only this file calls the
 * others (no file calls back into it).
 *
 * Flow: store_submit (any thread) appends to the raw queue q under q_lock
 * and signals q_cond. Each of STORE_COMPRESSORS compressor threads pops
 * one generation, reserves the next slot of the bounded compressed queue cq
 * in the same critical section, compresses outside the lock and marks the
 * slot ready (c_cond). The store thread takes up to batch_max leading ready
 * slots, commits them in one transaction, then calls done() for each.
 * Compression is the costliest step per byte (zstd runs at roughly the
 * disk's speed here), so it runs on its own threads, overlapping the writes
 * and fsyncs of the batch before (bench/bench_store.c, C1). Between batches
 * (and on a one-second tick) the store thread runs maintenance: pending
 * rejected counts, retention by age and size, space reclaim, the disk-full
 * probe.
 *
 * Queue states of a generation: q (raw) -> compressor -> cq (compressed) ->
 * store thread batch -> done(). store_close moves nothing itself: it sets
 * closing; the compressors drain q and exit (comp_exited counts them), then
 * the store thread drains cq and exits.
 *
 * Invariants:
 *   1. Only the store thread MUST touch s->db and its statements after
 *      store_open returns, otherwise two threads would interleave statements
 *      of one transaction (the connection is opened NOMUTEX).
 *   2. done() MUST be called only after COMMIT returned (or the transaction
 *      was rolled back), otherwise the loop would ACK a generation a crash
 *      could still lose and the agent would drop it from its spool.
 *   3. A generation already stored under (session_id, gen) (UNIQUE) MUST
 *      be found before its rows are written (store_commit.c: the NOT
 *      EXISTS of ST_SESSION_ADD_CHECKED, else ST_GEN_CRC) and reported as
 *      result 1, and the INSERT stays OR IGNORE with every row counted
 *      (store_genrows.h invariant 2), otherwise a resend after a lost ACK
 *      is stored twice or never ACKed.
 *   4. The in-memory index MUST be updated only after COMMIT succeeded,
 *      otherwise WELCOME could announce a gen that a rollback took away and
 *      the agent would never resend it.
 *   5. A failed transaction MUST be rolled back as a whole and every one of
 *      its generations completed with an error, otherwise a partial batch
 *      would be ACKed for rows that do not exist. SQLite guarantees committed
 *      pages are untouched by a failed write (WAL appends only).
 *   6. Retention MUST never delete a generation with seq >= the lowest pin,
 *      otherwise a running download would find holes in the window it
 *      promised (its headers are already sent).
 *   7. store_submit MUST never wait for the disk or for compression: it
 *      only takes q_lock, which the other threads hold just to move
 *      pointers, otherwise the libuv loop would stall behind a slow fsync.
 *   8. A compressor MUST reserve its cq slot in the same critical section
 *      that pops q (store_submit may fill a slot itself, for a payload too
 *      small to compress, only while q is empty), and the store thread MUST
 *      take only leading ready slots,
 *      otherwise generations of a session would commit out of submission
 *      order and seq (the feed cursor) would not follow arrival.
 *   9. cq MUST stay bounded (cq_cap), otherwise a slow disk would let the
 *      compressor double the memory of everything queued.
 *  10. Index entries of sessions that stored nothing (only rejected
 *      counts: "no-row") MUST stay bounded and expire, and flush_rejected
 *      MUST only visit sessions that have a row (store_index.c invariant
 *      1), otherwise throwaway sessions by the hundred thousand would grow
 *      memory and the per-tick flush (CPU on the store thread, so ACK
 *      latency) forever.
 *  11. A generation whose counts would push its session's totals
 *      (sessions.events, sessions.lost) past INT64_MAX MUST be refused
 *      (GTP_E_TOOBIG), otherwise the totals wrap or turn REAL and the
 *      ledger reads as a small or negative loss.
 *  12. A generation already stored under (session, gen) is a duplicate
 *      (result 1) only if its CRC equals the stored one; otherwise it is
 *      refused (GTP_E_CONFLICT) and the stored row stays, otherwise
 *      whoever sends a generation number first decides what is kept and
 *      the later, different one would be ACKed as stored.
 *  13. Group commit (cfg.linger_ms > 0): the store thread MAY hold ready
 *      generations back for at most linger_ms, and only while the batch is
 *      neither full (batch_max, STORE_LINGER_BYTES, a full cq) nor the store
 *      closing; done() still comes only after COMMIT (2). While it lingers
 *      (s->lingering) the compressors signal it only for a full batch (or
 *      a head from the session committed last: wake_store), so a
 *      transaction of N small generations costs one wake-up, not N; right
 *      after a commit that left cq empty it polls (poll_wait): one
 *      linger_ms unsignalled, then what arrived meanwhile commits. A
 *      fleet of agents each committing a small generation a second
 *      otherwise pays one transaction per generation: with 16 KiB pages,
 *      several whole pages written to the WAL for a few hundred bytes
 *      (bench/bench_fleet.c). Sessions committed before are checked by
 *      cached id (sidc, 4-way sets, store thread only, filled only after
 *      COMMIT like the index, invariant 4; a session not cached is found
 *      by its session index), not by the upsert, and their row is written
 *      once per generation, by ST_SESSION_ADD_CHECKED (store_commit.c),
 *      which also makes the checks; the generation and payload rows of a
 *      transaction go in a few multi-row INSERTs (store_genrows.h).
 *  14. Retention MUST never delete a generation a live retention pin holds
 *      (hold.h): every retention DELETE carries STORE_HOLD_FREE_SQL with
 *      one `now` bound to both the payload and the generation DELETE of a
 *      transaction, otherwise a pin expiring between the two would leave a
 *      generation without its bytes.
 *  15. Compression follows the load (cfg.zstd_fast): a compressor that
 *      leaves more than the backlog (STORE_ZFAST_BACKLOG) in q when it
 *      takes a generation compresses that one at cfg.zstd_fast_level (raw
 *      for 0), the rest at cfg.zstd_level. Either way the frame is an
 *      ordinary zstd frame (or raw) with its codec in the row, so readers
 *      need nothing new, and it changes nothing of invariants 2, 8 and 9:
 *      only how long a compressor holds its slot. Otherwise a burst the
 *      compressors cannot follow at a high level piles up in q until the
 *      agents' spools evict events.
 *
 * Disk full: SQLITE_FULL or an I/O error while writing rolls the batch back,
 * sets disk_full and completes the batch with GTP_E_DISKFULL. While the flag
 * is set, every tick runs retention and then a probe (a 1 MiB write that is
 * committed, then deleted); the flag clears when the probe commits and the
 * file system has some room left. Any batch that commits also clears it.
 *
 * Test hooks: cfg->test_delay_ms sleeps before each transaction; the
 * environment variables GENTRACE_TEST_NOROW_TTL_MS and GENTRACE_TEST_NOROW_MAX
 * shorten and lower the no-row bounds (store_index.h); the
 * environment variable GENTRACE_TEST_MAX_PAGES=N sets PRAGMA max_page_count
 * on the write connection so tests can make the database "full" at will;
 * GENTRACE_BENCH_NO_SUMMARY (set) commits without summaries, for
 * bench_b1's same-run measure of what summarizing costs;
 * GENTRACE_BENCH_NO_WALBUF (set) writes the WAL with the default VFS, one
 * write per frame header and page (store_walbuf.h).
 * GENTRACE_TEST_WAL_PAGES=N sets the WAL target to N pages (checkpoints
 * within seconds in tests); GENTRACE_BENCH_INLINE_CKPT (set) leaves
 * checkpoints inside COMMIT, as before store_ckpt.c, for bench_fleet's
 * same-run before/after.
 * None is meant for production.
 */
#include "config.h" /* _GNU_SOURCE: vasprintf */

#include "store.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "check.h"
#include "gtp_error.h"
#include "store_pcache.h"
#include "store_schema.h"
#include "store_summary.h"
#include "store_walbuf.h"
#include "store_writer.h"

/* Group commit (cfg.linger_ms) stops waiting once the ready generations
 * hold this many bytes: big generations fill a transaction on their own. */
#define STORE_LINGER_BYTES (8ull << 20)

/* --------------------------------------------------------------- index */

/* The session index lives in store_index.c; these are its public face. */

int store_session_key(store *s, const uint8_t session[16],
                      uint8_t hash[STORE_KEY_HASH_SIZE]) {
  return store_index_key(s->idx, session, hash);
}

int store_last_gen(store *s, const uint8_t session[16], uint64_t *gen) {
  return store_index_last_gen(s->idx, session, gen);
}

void store_note_rejected(store *s, const uint8_t session[16], uint64_t events) {
  store_index_note_rejected(s->idx, session, events);
}

/* ---------------------------------------------------------- open/schema */

/* The second half of store_open's setup, undone (store_close, and its
 * fail_db unwind): statements, connection, locks. */
static void close_db(store *s) {
  store_ckpt_stop(s->ckpt, s->db, s->wal_frames); /* before the writer */
  s->ckpt = NULL;
  store_summary_close(s->sum);
  store_genrows_free(s->gr);
  for (int i = 0; i < ST_COUNT_; i++)
    sqlite3_finalize(s->st[i]);
  sqlite3_close_v2(s->db);
  pthread_mutex_destroy(&s->st_lock);
  pthread_mutex_destroy(&s->q_lock);
  pthread_cond_destroy(&s->q_cond);
  pthread_cond_destroy(&s->c_cond);
  pthread_cond_destroy(&s->space_cond);
}

/* The first half, undone: the memory store_open allocated (and q, which
 * only store_submit makes). */
static void free_mem(store *s) {
  free(s->batch);
  free(s->sidc);
  free(s->q);
  free(s->cq);
  store_index_free(s->idx);
  free(s->wal_path);
  free(s->path);
  free(s);
}

static void *store_main(void *arg);
static void *comp_main(void *arg);

void store_process_init(void) {
  (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); /* MISUSE once started */
  /* The writer's page cache of its own; a refusal (SQLite already
   * started) leaves the default cache, which is correct, only slower. */
  (void)store_pcache_install();
}

int store_open(const store_config *cfg, store_done_fn done, void *ctx,
               store **out, char **cause) {
  if (cause)
    *cause = NULL;
  if (!cfg || !cfg->path || !*cfg->path || !done || !out) {
    store_set_cause(cause, "store: no database path or callback");
    return GTP_E_BADARG;
  }
  int err = -ENOMEM;
  store *s = calloc(1, sizeof *s);
  if (!s)
    goto fail_alloc;
  s->cfg = *cfg;
  s->no_summary = getenv("GENTRACE_BENCH_NO_SUMMARY") != NULL;
  s->path = strdup(cfg->path);
  if (asprintf(&s->wal_path, "%s-wal", cfg->path) < 0)
    s->wal_path = NULL;
  if (!s->path || !s->wal_path)
    goto fail_strings;
  s->cfg.path = s->path;
  if (s->cfg.batch_max == 0)
    s->cfg.batch_max = 64;
  if (s->cfg.zstd_level == 0)
    s->cfg.zstd_level = 3;
  s->done = done;
  s->done_ctx = ctx;
  s->idx = store_index_new();
  s->batch = calloc(s->cfg.batch_max, sizeof *s->batch);
  /* Optional: without it every generation takes the upsert. */
  s->sidc = calloc(STORE_SIDC_SLOTS, sizeof *s->sidc);
  /* Two batches' worth: one being committed, the next being compressed. */
  s->cq_cap = 2 * (size_t)s->cfg.batch_max;
  s->cq = calloc(s->cq_cap, sizeof *s->cq);
  if (!s->idx || !s->batch || !s->cq)
    goto fail_strings;

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  /* Ticks are measured on the monotonic clock so a wall-clock step cannot
   * stall retention or the disk-full probe. */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int cond_ok = pthread_cond_init(&s->c_cond, &ca) == 0;
  pthread_condattr_destroy(&ca);
  if (!cond_ok)
    goto fail_strings;
  pthread_cond_init(&s->q_cond, NULL);
  pthread_cond_init(&s->space_cond, NULL);
  pthread_mutex_init(&s->q_lock, NULL);
  pthread_mutex_init(&s->st_lock, NULL);

  /* The WAL's frames in one write per commit (store_walbuf.h);
   * GENTRACE_BENCH_NO_WALBUF (set): the default VFS, for a same-run
   * measure of what that saves. */
  const char *vfs =
      getenv("GENTRACE_BENCH_NO_WALBUF") ? NULL : store_walbuf_vfs();
  /* The write connection's page cache in huge pages (store_pcache.h): the
   * claim spans the open and the pragmas, which settle the page size (a
   * new page size replaces the cache). */
  store_pcache_claim_begin();
  int rc = sqlite3_open_v2(
      s->path, &s->db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
  if (rc != SQLITE_OK) {
    int sys = s->db ? sqlite3_system_errno(s->db) : 0;
    store_set_cause(cause, "%s: cannot open database: %s", s->path,
                    s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    err = sys ? -sys : store_err(rc);
    store_pcache_claim_end();
    goto fail_db;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
  err = store_setup_pragmas(s, cause);
  int claimed = store_pcache_claim_end();
  /* store_pcache.h: exactly the main database's cache, when installed. */
  GTP_ASSERT(err != 0 || claimed == store_pcache_installed());
  (void)claimed;
  if (err != 0)
    goto fail_db;
  if ((err = store_setup_schema(s, cause)) != 0)
    goto fail_db;
  if ((err = store_setup_prepare(s, cause)) != 0)
    goto fail_db;
  if ((err = store_summary_open(s->db, &s->sum)) != 0) {
    store_set_cause(cause, "%s: preparing summaries: %s", s->path,
                    sqlite3_errmsg(s->db));
    goto fail_db;
  }
  {
    uint64_t pending = 0;
    store_summary_backfill(s->sum, 0, &pending); /* reads the count only */
    s->stats.summary_pending = pending;
    store_rollup_pending(store_summary_rollup(s->sum), &pending);
    s->stats.rollup_pending_slots = pending;
  }
  if ((err = store_setup_load_index(s, cause)) != 0)
    goto fail_db;
  s->stats.db_bytes = db_bytes(s);
  s->next_tick_ns = now_ns(CLOCK_MONOTONIC);
  /* Checkpoints off the store thread; without it, SQLite's own inside
   * COMMIT (GENTRACE_BENCH_INLINE_CKPT: benchmarks' same-run before). */
  if (getenv("GENTRACE_BENCH_INLINE_CKPT") == NULL)
    s->ckpt =
        store_ckpt_start(s->db, s->path, s->wal_frames, s->cfg.sync_full);

  rc = pthread_create(&s->thread, NULL, store_main, s);
  if (rc != 0) {
    store_set_cause(cause, "store: cannot start thread: %s", strerror(rc));
    err = -rc;
    goto fail_db;
  }
  s->thread_started = 1;
  for (; s->comp_started < STORE_COMPRESSORS; s->comp_started++) {
    rc = pthread_create(&s->comp_thread[s->comp_started], NULL, comp_main, s);
    if (rc != 0) {
      store_set_cause(cause, "store: cannot start thread: %s", strerror(rc));
      err = -rc;
      goto fail_thread;
    }
  }
  *out = s;
  return 0;

fail_thread:
  /* Nothing was submitted: the started threads find empty queues and exit;
   * the store thread once every compressor, started or not, counts as
   * gone. */
  pthread_mutex_lock(&s->q_lock);
  s->closing = 1;
  s->comp_exited += STORE_COMPRESSORS - s->comp_started;
  pthread_cond_broadcast(&s->q_cond);
  pthread_cond_broadcast(&s->c_cond);
  pthread_mutex_unlock(&s->q_lock);
  for (int i = 0; i < s->comp_started; i++)
    pthread_join(s->comp_thread[i], NULL);
  pthread_join(s->thread, NULL);

fail_db:
  close_db(s);
fail_strings:
  if (err == -ENOMEM && cause && !*cause)
    store_set_cause(cause, "store: out of memory");
  free_mem(s);
fail_alloc:
  if (err == -ENOMEM && cause && !*cause)
    store_set_cause(cause, "store: out of memory");
  return err;
}

/* ---------------------------------------------------------------- queue */

/* Whether the generation just made ready at position pos of cq must wake
 * the store thread (invariant 13): always unless it lingers or polls; then
 * only for a full batch, or when it is the head and comes from the session
 * committed last (one agent sending generation after generation, each
 * waiting for its ACK, gains nothing from waiting: linger lets it through
 * at once). q_lock held. */
static int head_is_last_session(const store *s) {
  return memcmp(s->cq[s->cq_head].g->session, s->last_session, 16) == 0;
}

static int wake_store(const store *s, size_t pos) {
  if (!s->lingering || s->cq_len >= s->cfg.batch_max)
    return 1;
  return pos == 0 && head_is_last_session(s);
}

int store_submit(store *s, store_gen *g) {
  int err = 0;
  /* Before g is queued: from then on the store thread may complete and
   * free it at any time. A binding for a generation refused below is
   * harmless (it is the key the daemon admitted for the session). A
   * binding that could not be made refuses the generation instead: queued,
   * it would leave its session open to any key (store_index.c invariant
   * 5); the caller still owns g and ends that connection. */
  if (g->has_key && !g->key_bound &&
      store_index_bind_key(s->idx, g->session, g->key_hash) < 0)
    return -ENOMEM;
  pthread_mutex_lock(&s->q_lock);
  if (s->closing) {
    err = GTP_E_SHUTDOWN;
    goto out;
  }
  if (g->len < STORE_ZSTD_MIN && s->q_len == 0 && s->cq_len < s->cq_cap) {
    /* Too small to compress (store_commit_compress would store it raw): straight
     * into cq, ready, without waking a compressor. Nothing is in q, so it
     * still follows everything submitted before it (invariant 8). */
    s->cq[(s->cq_head + s->cq_len) % s->cq_cap] =
        (zitem){.g = g,
                 .zlen = g->len,
                 .codec = STORE_CODEC_NONE,
                 .ready = 1,
                 .ready_ns = now_ns(CLOCK_MONOTONIC)};
    s->cq_len++;
    s->q_bytes += g->len;
    __atomic_fetch_add(&s->zgens[STORE_ZG_RAW], 1, __ATOMIC_RELAXED);
    if (wake_store(s, s->cq_len - 1))
      pthread_cond_signal(&s->c_cond); /* invariant 13 */
    goto out;
  }
  if (s->q_len == s->q_cap) {
    size_t ncap = s->q_cap ? s->q_cap * 2 : 64;
    store_gen **n = malloc(ncap * sizeof *n);
    if (!n) {
      err = -ENOMEM;
      goto out;
    }
    for (size_t i = 0; i < s->q_len; i++)
      n[i] = s->q[(s->q_head + i) % s->q_cap];
    free(s->q);
    s->q = n;
    s->q_cap = ncap;
    s->q_head = 0;
  }
  s->q[(s->q_head + s->q_len) % s->q_cap] = g;
  s->q_len++;
  s->q_bytes += g->len;
  s->q_wait_bytes += g->len;
  pthread_cond_signal(&s->q_cond);
out:
  pthread_mutex_unlock(&s->q_lock);
  return err;
}

void store_gen_free(store_gen *g) {
  if (!g)
    return;
  if (!g->ident_borrowed) {
    free(g->service);
    free(g->host);
    free(g->agent_version);
    free(g->tags_json);
  }
  free(g->payload);
  free(g);
}

uint64_t store_scratch_bytes(store *s) {
  return __atomic_load_n(&s->scratch_bytes, __ATOMIC_RELAXED);
}

void store_stats_get(store *s, store_stats *out) {
  pthread_mutex_lock(&s->st_lock);
  *out = s->stats;
  pthread_mutex_unlock(&s->st_lock);
  store_ckpt_stats cs;
  store_ckpt_stats_get(s->ckpt, &cs);
  out->ckpt_passes = cs.passes;
  out->ckpt_pass_ns_total = cs.pass_ns_total;
  out->ckpt_pass_ns_max = cs.pass_ns_max;
  out->ckpt_finishes = cs.finishes;
  out->ckpt_finish_ns_max = cs.finish_ns_max;
  out->ckpt_busy = cs.busy;
  out->zgens_level =
      __atomic_load_n(&s->zgens[STORE_ZG_LEVEL], __ATOMIC_RELAXED);
  out->zgens_fast =
      __atomic_load_n(&s->zgens[STORE_ZG_FAST], __ATOMIC_RELAXED);
  out->zgens_raw =
      __atomic_load_n(&s->zgens[STORE_ZG_RAW], __ATOMIC_RELAXED);
  store_index_stats(s->idx, out);
  /* queued_* live under q_lock because store_submit updates them. */
  pthread_mutex_lock(&s->q_lock);
  out->queued_gens = s->q_len + s->cq_len;
  out->queued_bytes = s->q_bytes;
  pthread_mutex_unlock(&s->q_lock);
}

/* ------------------------------------------------------------- threads */

/* A compressor: q -> compress -> cq, one generation at a time. */
static void *comp_main(void *arg) {
  store *s = arg;
  pthread_setname_np(pthread_self(), "gt-compress"); /* for top, profiles */
  /* Without a context every item is stored raw: slower disk use, but
   * correct, and out of memory here is not worth stopping ingest for. */
  store_zpol *zp = store_zpol_new(s->cfg.zstd_level);
  pthread_mutex_lock(&s->q_lock);
  for (;;) {
    while ((s->q_len == 0 && !s->closing) ||
           (s->q_len > 0 && s->cq_len == s->cq_cap)) /* invariant 9 */
      pthread_cond_wait(s->q_len == 0 ? &s->q_cond : &s->space_cond,
                        &s->q_lock);
    if (s->q_len == 0)
      break; /* closing and drained */
    store_gen *g = s->q[s->q_head];
    s->q_head = (s->q_head + 1) % s->q_cap;
    s->q_len--;
    s->q_wait_bytes -= g->len;
    size_t slot = (s->cq_head + s->cq_len) % s->cq_cap; /* invariant 8 */
    s->cq[slot] = (zitem){.g = g};
    s->cq_len++;
    uint64_t backlog = s->cfg.zstd_fast_backlog ? s->cfg.zstd_fast_backlog
                                                : STORE_ZFAST_BACKLOG;
    int fast = s->q_wait_bytes > backlog; /* invariant 15 */
    pthread_mutex_unlock(&s->q_lock);

    zitem it = {.g = g, .fast = fast};
    if (zp)
      store_commit_compress(s, zp, &it);
    else {
      it = (zitem){.g = g, .zlen = g->len, .codec = STORE_CODEC_NONE};
      __atomic_fetch_add(&s->zgens[STORE_ZG_RAW], 1, __ATOMIC_RELAXED);
    }
    it.ready = 1;
    it.ready_ns = now_ns(CLOCK_MONOTONIC);

    pthread_mutex_lock(&s->q_lock);
    s->cq[slot] = it;
    /* A lingering store thread wakes at its deadline or for a full batch,
     * not once per generation (invariant 13). */
    if (wake_store(s, (slot + s->cq_cap - s->cq_head) % s->cq_cap))
      pthread_cond_signal(&s->c_cond);
  }
  s->comp_exited++;
  pthread_cond_signal(&s->c_cond);
  /* Another compressor may wait for space that will never come while
   * closing with q empty: wake it to see q is drained. */
  pthread_cond_broadcast(&s->q_cond);
  pthread_mutex_unlock(&s->q_lock);
  store_zpol_free(zp);
  return NULL;
}

/* Ready generations at the head of cq (what a batch may take now) and
 * their bytes. q_lock held. */
static size_t ready_prefix(const store *s, uint64_t *bytes) {
  size_t n = 0;
  *bytes = 0;
  while (n < s->cq_len && n < s->cfg.batch_max) {
    const zitem *it = &s->cq[(s->cq_head + n) % s->cq_cap];
    if (!it->ready)
      break;
    *bytes += it->g->len;
    n++;
  }
  return n;
}

/* Group commit's wait (invariant 13), shared by linger and poll_wait:
 * until `until`, unless the batch is full, the store is closing, or the
 * ready head comes from the session committed last (one agent sending
 * generation after generation, each waiting for its ACK, gains nothing
 * from waiting). Returns 1 when the whole wait passed with a generation
 * ready. q_lock held. */
static int group_wait(store *s, int64_t until) {
  struct timespec ts = {(time_t)(until / NS_PER_SEC),
                        (long)(until % NS_PER_SEC)};
  int full = 0;
  s->lingering = 1;
  for (;;) {
    uint64_t bytes;
    size_t n = ready_prefix(s, &bytes);
    if (s->closing || n >= s->cfg.batch_max || bytes >= STORE_LINGER_BYTES ||
        s->cq_len == s->cq_cap || (n > 0 && head_is_last_session(s)))
      break;
    if (now_ns(CLOCK_MONOTONIC) >= until) {
      full = n > 0;
      break;
    }
    pthread_cond_timedwait(&s->c_cond, &s->q_lock, &ts);
  }
  s->lingering = 0;
  return full;
}

/* Group commit (invariant 13): with a generation ready, waits up to
 * linger_ms for more (group_wait's exceptions apply). The deadline runs
 * from when the head became ready: time it spent queued behind the
 * previous commit counts, so no generation waits more than linger_ms
 * beyond the commits ahead of it. q_lock held. */
static void linger(store *s) {
  if (s->cfg.linger_ms == 0 || s->closing || s->cq_len == 0 ||
      !s->cq[s->cq_head].ready)
    return;
  (void)group_wait(s, s->cq[s->cq_head].ready_ns +
                          (int64_t)s->cfg.linger_ms * 1000000);
}

/* Group commit's poll (invariant 13): right after a commit that left cq
 * empty, while a fleet keeps sending, the store thread waits out one
 * linger_ms unsignalled and then commits what came meanwhile (each waited
 * less than linger_ms, as linger() allows). Without it each transaction
 * took two wake-ups (the first arrival's signal, a system call on the
 * submitting loop thread, then the linger deadline); with it, one
 * (bench/RESULTS.md, seventh session). Cut short (closing, a full batch,
 * the session committed last sending again: wake_store) it returns 0 and
 * the usual rules apply; it returns 1 when the whole linger passed and a
 * generation is ready, which is then committed without lingering again.
 * q_lock held. */
static int poll_wait(store *s) {
  if (s->cfg.linger_ms == 0 || s->closing || s->cq_len > 0)
    return 0;
  return group_wait(s, now_ns(CLOCK_MONOTONIC) +
                           (int64_t)s->cfg.linger_ms * 1000000);
}

static void *store_main(void *arg) {
  store *s = arg;
  pthread_setname_np(pthread_self(), "gt-store");
  int poll = 0; /* the last round committed: poll_wait first */
  for (;;) {
    pthread_mutex_lock(&s->q_lock);
    int polled = poll && poll_wait(s);
    while (!(s->cq_len > 0 && s->cq[s->cq_head].ready) &&
           !(s->comp_exited == STORE_COMPRESSORS && s->cq_len == 0)) {
      int64_t wake = s->next_tick_ns;
      if (now_ns(CLOCK_MONOTONIC) >= wake)
        break;
      struct timespec ts = {(time_t)(wake / NS_PER_SEC),
                            (long)(wake % NS_PER_SEC)};
      pthread_cond_timedwait(&s->c_cond, &s->q_lock, &ts);
    }
    if (!polled)
      linger(s);
    size_t n = 0;
    uint64_t bytes = 0;
    while (n < s->cfg.batch_max && s->cq_len > 0 && s->cq[s->cq_head].ready) {
      zitem *it = &s->cq[s->cq_head];
      s->cq_head = (s->cq_head + 1) % s->cq_cap;
      s->cq_len--;
      bytes += it->g->len;
      s->batch[n++] = *it;
    }
    s->q_bytes -= bytes;
    if (n)
      pthread_cond_broadcast(&s->space_cond);
    if (n)
      memcpy(s->last_session, s->batch[n - 1].g->session, 16);
    int stop = s->comp_exited == STORE_COMPRESSORS && s->cq_len == 0;
    pthread_mutex_unlock(&s->q_lock);

    if (n)
      store_commit_batch(s, s->batch, n);
    store_maint_run(s, n > 0);
    poll = n > 0;
    if (stop)
      break;
  }
  return NULL;
}

void store_close(store *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->q_lock);
  s->closing = 1;
  pthread_cond_broadcast(&s->q_cond);
  pthread_mutex_unlock(&s->q_lock);
  /* Compressors first: they drain q into cq and count themselves out; the
   * store thread then commits what is left in cq and stops. */
  for (int i = 0; i < s->comp_started; i++)
    pthread_join(s->comp_thread[i], NULL);
  if (s->thread_started)
    pthread_join(s->thread, NULL);
  close_db(s);
  free_mem(s);
}
