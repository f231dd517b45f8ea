/* store_writer.h: the write side's state, shared by the files that make up
 * the writer: store.c (open, queue, threads, close; its header holds the
 * design note and the numbered invariants), store_setup.c (pragmas, schema,
 * statements, index load), store_commit.c (compression and the batch
 * transaction) and store_maint.c (rejected counts, retention, reclaim, the
 * disk-full probe, the summary backfill). Not part of the storage
 * library's interface (store.h).
 *
 * Calls go one way: store.c calls the three others; they call only the
 * helpers below and the lower modules (store_index, store_summary,
 * store_pin), never back into store.c.
 */
#ifndef STORE_WRITER_H
#define STORE_WRITER_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "store.h"
#include "store_genrows.h"
#include "store_index.h"
#include "store_ckpt.h"
#include "store_int.h"
#include "store_summary.h"
#include "store_zpol.h"

#define NS_PER_SEC 1000000000LL
/* Waiting this long for the lock is long enough to ride out a reader's
 * short transaction, yet bounded so a stuck peer process cannot hang us. */
#define STORE_BUSY_MS 5000
/* WAL grows to about this before an automatic checkpoint; large enough to
 * batch checkpoint I/O, small enough to bound recovery and disk use. */
#define STORE_WAL_TARGET (64ull << 20)
/* Sessions whose sessions.id the store thread remembers (invariant 13), in
 * sets of STORE_SIDC_WAYS (store_commit.c), so a fleet larger than a set
 * holds only pays the upsert for the sessions a full set evicts; the
 * table's pages are touched as slots fill. */
#define STORE_SIDC_SLOTS 65536
#define STORE_SIDC_WAYS 4
/* Payloads below this are stored raw: zstd's fixed cost per call (about
 * 4.4 us here, level 1, reused context) buys under 15% of a few hundred
 * bytes (bench/RESULTS.md, fleet section), and skipping it lets such a
 * generation bypass the compressor threads (store_submit). */
#define STORE_ZSTD_MIN 512
/* Compressor threads: two keep up with the disk on a 2-core machine. */
#define STORE_COMPRESSORS 2
/* Behind (cfg.zstd_fast, invariant 15): more than this waits for a
 * compressor once it took its generation, i.e. every compressor is busy
 * and a generation of some size (B1's are ~8 MB) or a few hundred of a
 * fleet's wait behind them. The backlog must stay well under what an
 * agent's spool holds (64 MiB by default) while ACKs wait: 8 MiB let a
 * level-6 store lose events to evictions at 16 M/s with the fast level
 * on (bench/RESULTS.md, eighth session). */
#define STORE_ZFAST_BACKLOG (1ull << 20)
/* How a generation was stored, the index of store.zgens (invariant 15). */
enum store_zgen { STORE_ZG_LEVEL, STORE_ZG_FAST, STORE_ZG_RAW, STORE_ZG_N_ };

enum {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_UPSERT_SESSION,
  ST_TOUCH_SESSION,
  ST_SET_META,
  ST_REJECTED,
  ST_GEN_CRC,
  ST_AGE_DEL_PAYLOADS,
  ST_AGE_DEL_GENS,
  ST_SIZE_SCAN,
  ST_SIZE_DEL_PAYLOADS,
  ST_SIZE_DEL_GENS,
  ST_SESSION_CHECK,
  ST_SESSION_ADD_CHECKED,
  ST_SESSION_ADD,
  ST_SESSION_ID,
  ST_COUNT_
};

/* A generation with its compressed bytes, between the two threads. */
typedef struct zitem {
  store_gen *g;
  uint8_t *z; /* malloc'd compressed payload, NULL when stored raw */
  size_t zlen;
  const char *codec;   /* STORE_CODEC_* */
  int ready;           /* compressed; the store thread may take it */
  int fast;            /* compress at cfg.zstd_fast_level (invariant 15) */
  int64_t sid;         /* sessions.id, set by store_one */
  int64_t ready_ns;    /* when it became ready (monotonic): linger's start */
  store_sum_item *sum; /* its summary (store_summary.h), NULL: backfill */
} zitem;

typedef struct sidc_ent {
  uint8_t key[16];
  int64_t sid; /* 0: empty */
} sidc_ent;

struct store {
  /* Written once in store_open, read-only afterwards. */
  store_config cfg; /* cfg.path points at path */
  char *path;
  char *wal_path;
  store_done_fn done;
  void *done_ctx;
  pthread_t thread, comp_thread[STORE_COMPRESSORS];
  int thread_started, comp_started;
  /* Benchmarks only (GENTRACE_BENCH_NO_SUMMARY set): commit without
   * summaries, so bench_b1 can measure what summarizing costs. */
  int no_summary;

  /* Store thread only (invariant 1). */
  sqlite3 *db;
  sqlite3_stmt *st[ST_COUNT_];
  store_summary *sum;  /* summary writer and backfill */
  store_genrows *gr;   /* generations and payloads, multi-row */
  sidc_ent *sidc;      /* sessions.id of sessions committed (invariant 13) */
  unsigned sidc_evict; /* the way a full set gives up next */
  zitem *batch;
  int64_t max_span_ns; /* longest end - start committed (meta.max_span_ns) */
  int64_t next_tick_ns;
  int size_stuck; /* over max_db_bytes but nothing deletable: wait a tick */

  /* Protected by q_lock. */
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;     /* q got an item, or closing */
  pthread_cond_t c_cond;     /* cq got an item, or the compressor exited */
  pthread_cond_t space_cond; /* cq has room again */
  store_gen **q;
  size_t q_head, q_len, q_cap;
  zitem *cq;
  size_t cq_head, cq_len, cq_cap;
  uint64_t q_bytes;      /* payload bytes in q and cq */
  uint64_t q_wait_bytes; /* of them, in q: waiting for a compressor */
  /* Compressed copies and compression buffers alive now (atomic; read by
   * the ingest loop for its memory budget, store_scratch_bytes). */
  uint64_t scratch_bytes;
  /* How the compressors stored generations (atomic), indexed by
   * store_zgen: store_stats' zgens_*. */
  uint64_t zgens[STORE_ZG_N_];
  int closing;
  int comp_exited;          /* compressors that have exited */
  int lingering;            /* the store thread waits out cfg.linger_ms */
  uint8_t last_session[16]; /* of the last generation committed */

  /* Thread-safe on its own (store_index.c). */
  store_index *idx;
  /* The checkpointer (store_ckpt.c), NULL when it could not start or
   * GENTRACE_BENCH_INLINE_CKPT is set; wal_frames: the WAL target in
   * frames (store_setup_pragmas). */
  struct store_ckpt *ckpt;
  int64_t wal_frames;

  /* Protected by st_lock (queued_* are unused here: see q_len, q_bytes). */
  pthread_mutex_t st_lock;
  store_stats stats;
};

/* ------------------------------------------------------------- helpers */

static inline int64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* The daemon logs logfmt to stderr; only unexpected SQLite failures land
 * here (disk full is reported through store_stats_get instead). */
static inline void store_log_error(store *s, const char *what, int rc) {
  char kv[768], qmsg[160], qdb[300], qerr[300];
  char msg[128];
  snprintf(msg, sizeof msg, "store: %s failed", what);
  snprintf(
      kv, sizeof kv, "msg=%s db=%s sqlite=%d err=%s",
      gtp_logfmt_quote(qmsg, sizeof qmsg, msg),
      gtp_logfmt_quote(qdb, sizeof qdb, s->path), rc,
      gtp_logfmt_quote(qerr, sizeof qerr,
                       s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc)));
  if (s->cfg.log) {
    s->cfg.log(s->cfg.log_ctx, kv);
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char head[96];
  gtp_logfmt_prefix(head, sizeof head,
                    (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, "error");
  fprintf(stderr, "%s %s\n", head, kv);
}

#define store_err(rc) store_sqlite_err(rc)

/* A write failed because the disk (or the test page limit) is full, or the
 * file system refused the write: pause ingest and probe, never crash. */
static inline int rc_is_full(int rc) {
  int p = rc & 0xff;
  return p == SQLITE_FULL || p == SQLITE_IOERR;
}

static inline uint64_t file_size(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return 0;
  return (uint64_t)st.st_size;
}

static inline uint64_t db_bytes(store *s) {
  return file_size(s->path) + file_size(s->wal_path);
}

static inline void stats_set_disk_full(store *s, int full) {
  pthread_mutex_lock(&s->st_lock);
  s->stats.disk_full = full;
  pthread_mutex_unlock(&s->st_lock);
}

static inline int stats_disk_full(store *s) {
  pthread_mutex_lock(&s->st_lock);
  int full = s->stats.disk_full;
  pthread_mutex_unlock(&s->st_lock);
  return full;
}

static inline int exec_sql(sqlite3 *db, const char *sql) {
  return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Runs a prepared statement that returns no rows, then resets it so it
 * holds no lock or transaction afterwards. */
static inline int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static inline int64_t pragma_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static inline void rollback(store *s) {
  if (!sqlite3_get_autocommit(s->db))
    step_done(s->st[ST_ROLLBACK]);
}

/* ------------------------------------------------------- the other files */

/* store_setup.c: the steps of store_open on the write connection, in this
 * order; each sets *cause on failure and returns 0 or an error code. */
int store_setup_pragmas(store *s, char **cause);
int store_setup_schema(store *s, char **cause);
int store_setup_prepare(store *s, char **cause);
int store_setup_load_index(store *s, char **cause);

/* store_commit.c. Compresses (and summarizes) it->g into it with the
 * compressor's own context (store_zpol.h: zstd at the store's level, the
 * shortest match chosen per session). Thread: a compressor. */
void store_commit_compress(store *s, store_zpol *zp, zitem *it);
/* it->sum: the generation's summary and, for check_events, the check of
 * its events (one walk); a no-op when made already. Any thread. */
void store_commit_summarize(store *s, zitem *it);
/* Commits items[0..n) in one transaction and completes each with done()
 * (invariants 2-5, 11-13); thread: store only. */
void store_commit_batch(store *s, zitem *items, size_t n);

/* store_maint.c: maintenance between batches and on the tick. committed: a
 * batch just committed. Thread: store only. */
void store_maint_run(store *s, int committed);

#endif
