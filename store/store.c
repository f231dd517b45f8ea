/* store.c: the write side of gentraced's storage: one SQLite connection, one
 * thread, batched transactions, retention, disk-full handling.
 *
 * Owns: the write connection and its prepared statements, the store thread,
 * the compressor thread, the two queues, the session index (store_index.c), the
 * zstd compression context, and the counters behind store_stats_get.
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
 *   3. A generation MUST be inserted with INSERT OR IGNORE on
 *      UNIQUE(session_id, gen) and reported as result 1 when ignored,
 *      otherwise a resend after a lost ACK is stored twice or never ACKed.
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
 *      (s->lingering) the compressors signal it only for a full batch, so a
 *      transaction of N small generations costs one wake-up, not N. A
 *      fleet of agents each committing a small generation a second
 *      otherwise pays one transaction per generation: with 16 KiB pages,
 *      several whole pages written to the WAL for a few hundred bytes
 *      (bench/bench_fleet.c). Sessions committed before move their row
      forward by cached id (sidc, store thread only, filled only after
      COMMIT like the index, invariant 4), not by the upsert.
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
 * on the write connection so tests can make the database "full" at will.
 * Neither is meant for production.
 */
#include "config.h" /* _GNU_SOURCE: vasprintf */

#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "gtp_error.h"
#include "store_index.h"
#include "store_int.h"
#include "store_schema.h"
#include "store_summary.h"

#define NS_PER_SEC 1000000000LL
/* Maintenance tick: retention, rejected counts and the disk-full probe run at
 * most this often when idle (and retention after commits at this pace). */
#define STORE_TICK_NS (NS_PER_SEC)
/* Waiting this long for the lock is long enough to ride out a reader's
 * short transaction, yet bounded so a stuck peer process cannot hang us. */
#define STORE_BUSY_MS 5000
/* Checkpoints wait less: a TRUNCATE checkpoint needs every reader gone, and
 * the store thread must not stall ingest for it; the next one catches up. */
#define STORE_CKPT_BUSY_MS 100
/* 16 KiB pages for new databases (an existing file keeps its own). Each
 * commit writes every page it touched whole to the WAL, and a fleet's
 * small generations touch pages spread over the sessions table and the
 * two session-keyed generations indexes: with 64 KiB pages, 10,000 agents
 * on 2 s generations of 190 bytes made the daemon write 6.8 KB per
 * generation to disk and its ACK p99 passed a second while checkpoints
 * fell behind; 16 KiB halved the bytes, cut the store thread's CPU by a
 * quarter and brought ACK p99 to about 100 ms (bench_fleet, bench/
 * RESULTS.md). Large blobs still span few overflow pages: C1 (1 MiB
 * generations) was within its run-to-run noise of 64 KiB. */
#define STORE_PAGE_SIZE 16384
/* Generations summarized per maintenance tick by the backfill: bounded so
 * the ingest's commits never wait long behind it. */
#define STORE_BACKFILL_PER_TICK 256
/* The write connection's page cache, set explicitly once the page size is
 * known: SQLite turns its default (-2000 KiB) into a page count with the
 * page size current at open (4 KiB), so with 64 KiB pages the default
 * became 500 pages = 32 MiB, and the daemon's RSS crept up by one
 * committed payload per generation until it got there (soak). */
#define STORE_CACHE_KIB 2048
/* WAL grows to about this before an automatic checkpoint; large enough to
 * batch checkpoint I/O, small enough to bound recovery and disk use. */
#define STORE_WAL_TARGET (64ull << 20)
/* Retention deletes in chunks so no single transaction grows large. */
#define STORE_DELETE_CHUNK 1024
/* Freed pages beyond this are returned to the file system. */
#define STORE_VACUUM_BYTES (8ull << 20)
#define STORE_PROBE_BYTES (1 << 20)
/* Size retention deletes down to max - max/STORE_SIZE_SLACK. */
#define STORE_SIZE_SLACK 16
/* Below this much free file-system space the disk still counts as full. */
#define STORE_MIN_FREE_BYTES (8ull << 20)
/* Group commit (cfg.linger_ms) stops waiting once the ready generations
 * hold this many bytes: big generations fill a transaction on their own. */
#define STORE_LINGER_BYTES (8ull << 20)
/* Sessions whose sessions.id the store thread remembers (invariant 13):
 * direct-mapped, so a fleet larger than this only pays the upsert for the
 * sessions that collide; the table's pages are touched as slots fill. */
#define STORE_SIDC_SLOTS 65536
/* Payloads below this are stored raw: zstd's fixed cost per call (about
 * 4.4 us here, level 1, reused context) buys under 15% of a few hundred
 * bytes (bench/RESULTS.md, fleet section), and skipping it lets such a
 * generation bypass the compressor threads (store_submit). */
#define STORE_ZSTD_MIN 512
/* Compressor threads: two keep up with the disk on a 2-core machine. */
#define STORE_COMPRESSORS 2

enum {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_UPSERT_SESSION,
  ST_TOUCH_SESSION,
  ST_INSERT_GEN,
  ST_INSERT_PAYLOAD,
  ST_SET_META,
  ST_REJECTED,
  ST_GEN_CRC,
  ST_AGE_DEL_PAYLOADS,
  ST_AGE_DEL_GENS,
  ST_SIZE_SCAN,
  ST_SIZE_DEL_PAYLOADS,
  ST_SIZE_DEL_GENS,
  ST_COUNT_
};

static const char *const store_sql[ST_COUNT_] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* Identity comes from the first HELLO; later rows only move last_seen
     * and last_gen forward. tags must be valid JSON so readers can filter
     * with json_each without erroring on one bad row. */
    [ST_UPSERT_SESSION] =
        "INSERT INTO sessions(session, service, host, pid, process_start_ns,"
        " agent_version, tags, first_seen_ns, last_seen_ns, last_gen, key_hash)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6,"
        " CASE WHEN json_valid(?7) THEN ?7 ELSE '{}' END, ?8, ?8, ?9, ?10)"
        " ON CONFLICT(session) DO UPDATE SET"
        " last_seen_ns = max(last_seen_ns, excluded.last_seen_ns),"
        " last_gen = CASE WHEN last_gen IS NULL OR excluded.last_gen > last_gen"
        " THEN excluded.last_gen ELSE last_gen END,"
        " key_hash = coalesce(key_hash, excluded.key_hash)"
        " RETURNING id, events, lost",
    /* A session whose row this store committed before (its id cached in
     * sidc): only last_seen, last_gen (and a key not bound yet) move, by
     * primary key: no INSERT attempt, conflict and json_valid per
     * generation (fleet profile: the upsert was 60% of the SQLite work of a
     * small generation). The session text guards against a row an
     * operator deleted and whose id was reused. */
    [ST_TOUCH_SESSION] =
        "UPDATE sessions SET last_seen_ns = max(last_seen_ns, ?2),"
        " last_gen = CASE WHEN last_gen IS NULL OR ?3 > last_gen"
        " THEN ?3 ELSE last_gen END,"
        " key_hash = coalesce(key_hash, ?5)"
        " WHERE id = ?1 AND session = ?4 RETURNING events, lost",
    [ST_INSERT_GEN] =
        "INSERT OR IGNORE INTO generations(session_id, gen, start_ns, end_ns,"
        " events, bytes, stored_bytes, dropped, evicted, rejected, status,"
        " codec, committed_ns, crc)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'ok', ?11, ?12, ?13)",
    [ST_INSERT_PAYLOAD] = "INSERT INTO payloads(seq, data) VALUES(?1, ?2)",
    [ST_GEN_CRC] =
        "SELECT crc FROM generations WHERE session_id = ?1 AND gen = ?2",
    [ST_SET_META] = "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)",
    [ST_REJECTED] =
        "UPDATE sessions SET rejected = rejected + ?2,"
        " rejected_events = rejected_events + ?3 WHERE session = ?1",
    /* end < cutoff implies start < cutoff, which lets the start_ns index
     * find the candidates without scanning every generation. */
    [ST_AGE_DEL_PAYLOADS] =
        "DELETE FROM payloads WHERE seq IN (SELECT seq FROM generations"
        " WHERE start_ns < ?1 AND end_ns < ?1 AND seq < ?2 LIMIT ?3)",
    [ST_AGE_DEL_GENS] =
        "DELETE FROM generations WHERE seq IN (SELECT seq FROM generations"
        " WHERE start_ns < ?1 AND end_ns < ?1 AND seq < ?2 LIMIT ?3)",
    [ST_SIZE_SCAN] = "SELECT seq, stored_bytes FROM generations"
                     " WHERE seq < ?1 ORDER BY seq LIMIT ?2",
    [ST_SIZE_DEL_PAYLOADS] = "DELETE FROM payloads WHERE seq <= ?1",
    [ST_SIZE_DEL_GENS] = "DELETE FROM generations WHERE seq <= ?1",
};

/* A generation with its compressed bytes, between the two threads. */
typedef struct zitem {
  store_gen *g;
  uint8_t *z; /* malloc'd compressed payload, NULL when stored raw */
  size_t zlen;
  const char *codec; /* STORE_CODEC_* */
  int ready;         /* compressed; the store thread may take it */
  int64_t sid;       /* sessions.id, set by store_one */
  int64_t ready_ns;  /* when it became ready (monotonic): linger's start */
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

  /* Store thread only (invariant 1). */
  sqlite3 *db;
  sqlite3_stmt *st[ST_COUNT_];
  store_summary *sum; /* summary writer and backfill */
  sidc_ent *sidc; /* sessions.id of sessions committed (invariant 13) */
  zitem *batch;
  int64_t max_span_ns; /* longest end - start committed (meta.max_span_ns) */
  int64_t next_tick_ns;
  int size_stuck; /* over max_db_bytes but nothing deletable: wait a tick */
  uint8_t last_session[16]; /* of the last generation committed */

  /* Protected by q_lock. */
  pthread_mutex_t q_lock;
  pthread_cond_t q_cond;     /* q got an item, or closing */
  pthread_cond_t c_cond;     /* cq got an item, or the compressor exited */
  pthread_cond_t space_cond; /* cq has room again */
  store_gen **q;
  size_t q_head, q_len, q_cap;
  zitem *cq;
  size_t cq_head, cq_len, cq_cap;
  uint64_t q_bytes; /* payload bytes in q and cq */
  /* Compressed copies and compression buffers alive now (atomic; read by
   * the ingest loop for its memory budget, store_scratch_bytes). */
  uint64_t scratch_bytes;
  int closing;
  int comp_exited; /* compressors that have exited */
  int lingering;   /* the store thread waits out cfg.linger_ms */

  /* Thread-safe on its own (store_index.c). */
  store_index *idx;

  /* Protected by st_lock (queued_* are unused here: see q_len, q_bytes). */
  pthread_mutex_t st_lock;
  store_stats stats;
};

/* ------------------------------------------------------------- helpers */

static int64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

/* The daemon logs logfmt to stderr; only unexpected SQLite failures land
 * here (disk full is reported through store_stats_get instead). */
static void store_log_error(store *s, const char *what, int rc) {
  char kv[768], qmsg[160], qdb[300], qerr[300];
  char msg[128];
  snprintf(msg, sizeof msg, "store: %s failed", what);
  snprintf(kv, sizeof kv, "msg=%s db=%s sqlite=%d err=%s",
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
static int rc_is_full(int rc) {
  int p = rc & 0xff;
  return p == SQLITE_FULL || p == SQLITE_IOERR;
}

static uint64_t file_size(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return 0;
  return (uint64_t)st.st_size;
}

static uint64_t db_bytes(store *s) {
  return file_size(s->path) + file_size(s->wal_path);
}

static void stats_set_disk_full(store *s, int full) {
  pthread_mutex_lock(&s->st_lock);
  s->stats.disk_full = full;
  pthread_mutex_unlock(&s->st_lock);
}

static int stats_disk_full(store *s) {
  pthread_mutex_lock(&s->st_lock);
  int full = s->stats.disk_full;
  pthread_mutex_unlock(&s->st_lock);
  return full;
}

static int exec_sql(sqlite3 *db, const char *sql) {
  return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Runs a prepared statement that returns no rows, then resets it so it
 * holds no lock or transaction afterwards. */
static int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static int64_t pragma_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* --------------------------------------------------------------- index */

/* The session index lives in store_index.c; these are its public face. */

int store_session_key(store *s, const uint8_t session[16],
                      uint8_t hash[STORE_KEY_HASH_SIZE]) {
  return store_index_key(s->idx, session, hash);
}

/* The sid cache (invariant 13): direct-mapped, store thread only. */
static size_t sidc_slot(const uint8_t key[16]) {
  uint64_t a, b;
  memcpy(&a, key, 8);
  memcpy(&b, key + 8, 8);
  uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  return (size_t)(h & (STORE_SIDC_SLOTS - 1));
}

/* The cached sessions.id of a session, 0 if none. */
static int64_t sidc_get(const store *s, const uint8_t key[16]) {
  if (s->sidc == NULL)
    return 0;
  const sidc_ent *e = &s->sidc[sidc_slot(key)];
  return e->sid > 0 && memcmp(e->key, key, 16) == 0 ? e->sid : 0;
}

/* Caches sid, only after the COMMIT that holds its row. */
static void sidc_put(store *s, const uint8_t key[16], int64_t sid) {
  if (s->sidc == NULL || sid <= 0)
    return;
  sidc_ent *e = &s->sidc[sidc_slot(key)];
  memcpy(e->key, key, 16);
  e->sid = sid;
}

int store_last_gen(store *s, const uint8_t session[16], uint64_t *gen) {
  return store_index_last_gen(s->idx, session, gen);
}

void store_note_rejected(store *s, const uint8_t session[16], uint64_t events) {
  store_index_note_rejected(s->idx, session, events);
}

/* ---------------------------------------------------------- open/schema */

static int load_index(store *s, char **cause) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db,
                              "SELECT session, last_gen, key_hash FROM sessions"
                              " WHERE last_gen NOT NULL OR key_hash NOT NULL",
                              -1, &st, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(st)) {
    const char *hex = (const char *)sqlite3_column_text(st, 0);
    uint8_t key[16];
    if (!hex || gtp_session_parse(hex, key) != 0)
      continue; /* not ours to judge here; readers show it as is */
    if (sqlite3_column_type(st, 1) != SQLITE_NULL)
      store_index_note_gen(s->idx, key, (uint64_t)sqlite3_column_int64(st, 1));
    if (sqlite3_column_bytes(st, 2) == STORE_KEY_HASH_SIZE)
      store_index_bind_key(s->idx, key, sqlite3_column_blob(st, 2));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    store_set_cause(cause, "%s: loading sessions: %s", s->path,
                    sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  s->max_span_ns =
      pragma_int(s->db, "SELECT value FROM meta WHERE key = 'max_span_ns'");
  if (s->max_span_ns < 0)
    s->max_span_ns = 0;
  return 0;
}

/* Creates the schema on a fresh database, checks or migrates an existing
 * one. Runs in one IMMEDIATE transaction so two daemons racing on a new file
 * cannot both create it. */
static int setup_schema(store *s, char **cause) {
  int rc = exec_sql(s->db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: cannot lock database: %s", s->path,
                    sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  int64_t ntables = pragma_int(s->db, "SELECT count(*) FROM sqlite_master");
  int64_t has_meta = pragma_int(
      s->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
             " AND name = 'meta'");
  int err = 0;
  if (ntables < 0 || has_meta < 0) {
    rc = sqlite3_errcode(s->db);
    store_set_cause(cause, "%s: cannot read database: %s", s->path,
                    sqlite3_errmsg(s->db));
    err = store_err(rc) ? store_err(rc) : GTP_E_CORRUPT;
    goto fail;
  }
  if (ntables > 0 && !has_meta) {
    store_set_cause(
        cause, "%s: not a gentrace database (it has tables but no meta table)",
        s->path);
    err = GTP_E_VERSION;
    goto fail;
  }
  int64_t version = 0;
  if (has_meta) {
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(
        s->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st,
        NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      version = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (version <= 0) {
      store_set_cause(cause, "%s: not a gentrace database (no schema_version)",
                      s->path);
      err = GTP_E_VERSION;
      goto fail;
    }
  }
  if (version > STORE_SCHEMA_VERSION) {
    store_set_cause(
        cause,
        "%s: database schema version %" PRId64
        " is newer than this gentraced supports (%d); upgrade gentraced"
        " or use another --db",
        s->path, version, STORE_SCHEMA_VERSION);
    err = GTP_E_VERSION;
    goto fail;
  }
  if (version == 0) {
    rc = exec_sql(s->db, STORE_SCHEMA_SQL);
    if (rc == SQLITE_OK)
      rc = exec_sql(s->db, "INSERT INTO meta(key, value) VALUES"
                           " ('schema_version', '4')");
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: creating schema: %s", s->path,
                      sqlite3_errmsg(s->db));
      err = store_err(rc);
      goto fail;
    }
  }
  /* Migrations: version N-1 -> N steps, each inside this same transaction
   * (a failure leaves the file as it was). migrate[N] takes N-1 to N. */
  static const char *const migrate[] = {NULL, NULL, STORE_MIGRATE_2_SQL,
                                        STORE_MIGRATE_3_SQL,
                                        STORE_MIGRATE_4_SQL};
  _Static_assert(sizeof migrate / sizeof migrate[0] ==
                     STORE_SCHEMA_VERSION + 1,
                 "one migration per schema version");
  for (int64_t v = version; v >= 1 && v < STORE_SCHEMA_VERSION; v++) {
    rc = exec_sql(s->db, migrate[v + 1]);
    if (rc != SQLITE_OK) {
      store_set_cause(cause,
                      "%s: migrating schema %" PRId64 " to %" PRId64 ": %s",
                      s->path, v, v + 1, sqlite3_errmsg(s->db));
      err = store_err(rc);
      goto fail;
    }
  }
  rc = exec_sql(s->db, "COMMIT");
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: committing schema: %s", s->path,
                    sqlite3_errmsg(s->db));
    err = store_err(rc);
    goto fail;
  }
  return 0;
fail:
  if (!sqlite3_get_autocommit(s->db))
    exec_sql(s->db, "ROLLBACK");
  return err ? err : GTP_E_INTERNAL;
}

_Static_assert(STORE_SCHEMA_VERSION == 4,
               "store.c writes schema_version 4 on a fresh database; add a "
               "migration step and update that insert when bumping");

static int setup_pragmas(store *s, char **cause) {
  char sql[256];
  /* page_size and auto_vacuum only take effect before the first table
   * exists, so they are set on an empty file only. */
  if (pragma_int(s->db, "SELECT count(*) FROM sqlite_master") == 0) {
    snprintf(sql, sizeof sql,
             "PRAGMA page_size = %d; PRAGMA auto_vacuum = INCREMENTAL;",
             STORE_PAGE_SIZE);
    int rc = exec_sql(s->db, sql);
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: %s", s->path, sqlite3_errmsg(s->db));
      return store_err(rc);
    }
  }
  sqlite3_stmt *st = NULL;
  int rc =
      sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
  const char *mode = NULL;
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    mode = (const char *)sqlite3_column_text(st, 0);
  int wal = mode && strcmp(mode, "wal") == 0;
  sqlite3_finalize(st);
  if (!wal) {
    store_set_cause(
        cause,
        "%s: cannot switch to WAL mode (%s); gentraced needs a local "
        "file system with shared memory",
        s->path, sqlite3_errmsg(s->db));
    return GTP_E_INTERNAL;
  }
  int64_t page = pragma_int(s->db, "PRAGMA page_size");
  if (page <= 0)
    page = 4096;
  snprintf(sql, sizeof sql,
           "PRAGMA cache_size = -%d; PRAGMA synchronous = %s;"
           " PRAGMA journal_size_limit = %llu;"
           " PRAGMA wal_autocheckpoint = %llu; PRAGMA foreign_keys = OFF;",
           STORE_CACHE_KIB, s->cfg.sync_full ? "FULL" : "NORMAL",
           (unsigned long long)STORE_WAL_TARGET,
           (unsigned long long)(STORE_WAL_TARGET / (uint64_t)page));
  rc = exec_sql(s->db, sql);
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: %s", s->path, sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  const char *maxp = getenv("GENTRACE_TEST_MAX_PAGES");
  if (maxp && *maxp) {
    char *end = NULL;
    unsigned long long n = strtoull(maxp, &end, 10);
    if (*end == '\0' && n > 0) {
      snprintf(sql, sizeof sql, "PRAGMA max_page_count = %llu", n);
      exec_sql(s->db, sql);
    }
  }
  return 0;
}

static int prepare_all(store *s, char **cause) {
  for (int i = 0; i < ST_COUNT_; i++) {
    int rc = sqlite3_prepare_v3(s->db, store_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: preparing \"%s\": %s", s->path, store_sql[i],
                      sqlite3_errmsg(s->db));
      return store_err(rc) ? store_err(rc) : GTP_E_INTERNAL;
    }
  }
  return 0;
}

static void *store_main(void *arg);
static void *comp_main(void *arg);

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

  int rc = sqlite3_open_v2(
      s->path, &s->db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    int sys = s->db ? sqlite3_system_errno(s->db) : 0;
    store_set_cause(cause, "%s: cannot open database: %s", s->path,
                    s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
    err = sys ? -sys : store_err(rc);
    goto fail_db;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
  if ((err = setup_pragmas(s, cause)) != 0)
    goto fail_db;
  if ((err = setup_schema(s, cause)) != 0)
    goto fail_db;
  if ((err = prepare_all(s, cause)) != 0)
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
  }
  if ((err = load_index(s, cause)) != 0)
    goto fail_db;
  s->stats.db_bytes = db_bytes(s);
  s->next_tick_ns = now_ns(CLOCK_MONOTONIC);

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
  store_summary_close(s->sum);
  for (int i = 0; i < ST_COUNT_; i++)
    sqlite3_finalize(s->st[i]);
  sqlite3_close_v2(s->db);
  pthread_mutex_destroy(&s->st_lock);
  pthread_mutex_destroy(&s->q_lock);
  pthread_cond_destroy(&s->q_cond);
  pthread_cond_destroy(&s->c_cond);
  pthread_cond_destroy(&s->space_cond);
fail_strings:
  if (err == -ENOMEM && cause && !*cause)
    store_set_cause(cause, "store: out of memory");
  free(s->batch);
  free(s->sidc);
  free(s->cq);
  store_index_free(s->idx);
  free(s->wal_path);
  free(s->path);
  free(s);
fail_alloc:
  if (err == -ENOMEM && cause && !*cause)
    store_set_cause(cause, "store: out of memory");
  return err;
}

/* ---------------------------------------------------------------- queue */

int store_submit(store *s, store_gen *g) {
  int err = 0;
  /* Before g is queued: from then on the store thread may complete and
   * free it at any time. A binding for a generation refused below is
   * harmless (it is the key the daemon admitted for the session). */
  if (g->has_key)
    store_index_bind_key(s->idx, g->session, g->key_hash);
  pthread_mutex_lock(&s->q_lock);
  if (s->closing) {
    err = GTP_E_SHUTDOWN;
    goto out;
  }
  if (g->len < STORE_ZSTD_MIN && s->q_len == 0 && s->cq_len < s->cq_cap) {
    /* Too small to compress (compress_item would store it raw): straight
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
    if (!s->lingering || s->cq_len >= s->cfg.batch_max)
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
  pthread_cond_signal(&s->q_cond);
out:
  pthread_mutex_unlock(&s->q_lock);
  return err;
}

void store_gen_free(store_gen *g) {
  if (!g)
    return;
  free(g->service);
  free(g->host);
  free(g->agent_version);
  free(g->tags_json);
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
  store_index_stats(s->idx, out);
  /* queued_* live under q_lock because store_submit updates them. */
  pthread_mutex_lock(&s->q_lock);
  out->queued_gens = s->q_len + s->cq_len;
  out->queued_bytes = s->q_bytes;
  pthread_mutex_unlock(&s->q_lock);
}

/* ---------------------------------------------------------- the commit */

static const char *str_or(const char *p, const char *def) {
  return p ? p : def;
}

/* Compresses the payload of it->g into a new buffer. Compression that does
 * not shrink the payload is not kept: the reader then skips the
 * decompression. Thread: a compressor, with its own cctx. */
static void compress_item(store *s, ZSTD_CCtx *cctx, zitem *it) {
  const store_gen *g = it->g;
  it->z = NULL;
  it->zlen = g->len;
  it->codec = STORE_CODEC_NONE;
  /* The summary is computed here, off the store thread, like compression. */
  it->sum = store_sum_build(g->payload, g->len);
  __atomic_fetch_add(&s->scratch_bytes, store_sum_bytes(it->sum),
                     __ATOMIC_RELAXED);
  if (g->len < STORE_ZSTD_MIN)
    return;
  size_t bound = ZSTD_compressBound(g->len);
  uint8_t *z = malloc(bound);
  if (!z)
    return; /* storing raw is always correct */
  __atomic_fetch_add(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
  size_t n =
      ZSTD_compressCCtx(cctx, z, bound, g->payload, g->len, s->cfg.zstd_level);
  if (ZSTD_isError(n) || n >= g->len) {
    free(z);
    __atomic_fetch_sub(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
    return;
  }
  /* Give back the slack of the worst-case bound: queued items stay small. */
  uint8_t *fit = realloc(z, n);
  it->z = fit ? fit : z;
  it->zlen = n;
  /* What stays alive until the commit frees it: the n-byte copy. */
  __atomic_fetch_sub(&s->scratch_bytes, bound - n, __ATOMIC_RELAXED);
  it->codec = STORE_CODEC_ZSTD;
}

/* Moves a known session's row forward (ST_TOUCH_SESSION): *found = 0 if
 * the row is gone. Returns an SQLite code. */
static int touch_session(store *s, const store_gen *g, const char *hex,
                         int64_t sid, int64_t now_real, int64_t *tot_events,
                         int64_t *tot_lost, int *found) {
  sqlite3_stmt *st = s->st[ST_TOUCH_SESSION];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, now_real);
  sqlite3_bind_int64(st, 3, (int64_t)g->gen);
  sqlite3_bind_text(st, 4, hex, 32, SQLITE_STATIC);
  if (g->has_key)
    sqlite3_bind_blob(st, 5, g->key_hash, STORE_KEY_HASH_SIZE, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 5);
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) {
    *tot_events = sqlite3_column_int64(st, 0);
    *tot_lost = sqlite3_column_int64(st, 1);
    rc = sqlite3_step(st); /* RETURNING: run the statement to completion */
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Makes the session's row or moves it forward (identity from the first
 * HELLO); *sid = its id. Returns an SQLite code. */
static int upsert_session(store *s, const store_gen *g, const char *hex,
                          int64_t now_real, int64_t *sid, int64_t *tot_events,
                          int64_t *tot_lost) {
  sqlite3_stmt *st = s->st[ST_UPSERT_SESSION];
  sqlite3_bind_text(st, 1, hex, 32, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, str_or(g->service, ""), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, str_or(g->host, ""), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (int64_t)g->pid);
  sqlite3_bind_int64(st, 5, (int64_t)g->process_start_ns);
  sqlite3_bind_text(st, 6, str_or(g->agent_version, ""), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 7, str_or(g->tags_json, "{}"), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 8, now_real);
  sqlite3_bind_int64(st, 9, (int64_t)g->gen);
  if (g->has_key)
    sqlite3_bind_blob(st, 10, g->key_hash, STORE_KEY_HASH_SIZE, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 10);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *sid = sqlite3_column_int64(st, 0);
    *tot_events = sqlite3_column_int64(st, 1);
    *tot_lost = sqlite3_column_int64(st, 2);
    rc = sqlite3_step(st); /* RETURNING: run the statement to completion */
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Inserts one generation inside the open transaction. Returns an SQLite
 * code; sets g->result (0, 1 or a refusal), g->seq and g->stored_bytes on
 * success, and it->sid. */
static int store_one(store *s, zitem *it, int64_t now_real, int64_t *span) {
  store_gen *g = it->g;
  char hex[33];
  gtp_session_hex(g->session, hex);
  int64_t sid = sidc_get(s, g->session), tot_events = 0, tot_lost = 0;
  int rc = SQLITE_OK, found = 0;
  if (sid > 0) {
    rc = touch_session(s, g, hex, sid, now_real, &tot_events, &tot_lost,
                       &found);
    if (rc != SQLITE_OK)
      return rc;
    if (!found)
      sid = 0; /* the row is gone: the upsert makes it again */
  }
  if (sid == 0) {
    rc = upsert_session(s, g, hex, now_real, &sid, &tot_events, &tot_lost);
    if (rc != SQLITE_OK)
      return rc;
  }
  it->sid = sid;
  sqlite3_stmt *st;
  /* Invariant 11: the session totals (triggers) must not wrap. */
  uint64_t lost = 0, ev = 0;
  int over = __builtin_add_overflow(g->end.dropped, g->end.evicted, &lost) ||
             __builtin_add_overflow(lost, g->end.rejected, &lost) ||
             tot_events < 0 || tot_lost < 0 ||
             __builtin_add_overflow(g->end.events, (uint64_t)tot_events, &ev) ||
             __builtin_add_overflow(lost, (uint64_t)tot_lost, &lost) ||
             ev > INT64_MAX || lost > INT64_MAX || g->gen > INT64_MAX;
  if (over) {
    g->result = GTP_E_TOOBIG;
    g->seq = 0;
    g->stored_bytes = 0;
    return SQLITE_OK;
  }

  const void *data = it->z ? it->z : g->payload;
  size_t n = it->zlen;
  const char *codec = it->codec;
  st = s->st[ST_INSERT_GEN];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, (int64_t)g->gen);
  sqlite3_bind_int64(st, 3, g->start_ns);
  sqlite3_bind_int64(st, 4, g->end_ns);
  sqlite3_bind_int64(st, 5, (int64_t)g->end.events);
  sqlite3_bind_int64(st, 6, (int64_t)g->len);
  sqlite3_bind_int64(st, 7, (int64_t)n);
  sqlite3_bind_int64(st, 8, (int64_t)g->end.dropped);
  sqlite3_bind_int64(st, 9, (int64_t)g->end.evicted);
  sqlite3_bind_int64(st, 10, (int64_t)g->end.rejected);
  sqlite3_bind_text(st, 11, codec, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 12, now_real);
  sqlite3_bind_int64(st, 13, (int64_t)g->end.crc);
  rc = step_done(st);
  if (rc != SQLITE_OK)
    return rc;
  if (sqlite3_changes(s->db) == 0) {
    /* Invariant 3: already stored. The same bytes (CRC) are a resend after
     * a lost ACK; other bytes under the same (session, gen) are refused
     * and the stored ones stay. A NULL crc (a row from before schema 3)
     * cannot tell, so it is taken as the same. */
    st = s->st[ST_GEN_CRC];
    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, (int64_t)g->gen);
    rc = sqlite3_step(st);
    int same = rc != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL ||
               (uint64_t)sqlite3_column_int64(st, 0) == g->end.crc;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      return rc;
    g->result = same ? 1 : GTP_E_CONFLICT;
    g->seq = 0;
    g->stored_bytes = 0;
    return SQLITE_OK;
  }
  int64_t seq = sqlite3_last_insert_rowid(s->db);
  st = s->st[ST_INSERT_PAYLOAD];
  sqlite3_bind_int64(st, 1, seq);
  sqlite3_bind_blob64(st, 2, data, n, SQLITE_STATIC);
  rc = step_done(st);
  sqlite3_clear_bindings(st);
  /* Small generations skip the compressors (store_submit's fast path):
   * their summary is made here, cheap at that size. */
  if (it->sum == NULL) {
    it->sum = store_sum_build(g->payload, g->len);
    __atomic_fetch_add(&s->scratch_bytes, store_sum_bytes(it->sum),
                       __ATOMIC_RELAXED);
  }
  if (rc == SQLITE_OK && it->sum != NULL) /* same transaction */
    rc = store_summary_put(s->sum, seq, g->session, g->gen, it->sum);
  if (rc != SQLITE_OK)
    return rc;
  g->result = 0;
  g->seq = seq;
  g->stored_bytes = n;
  if (g->end_ns > g->start_ns && g->end_ns - g->start_ns > *span)
    *span = g->end_ns - g->start_ns;
  return SQLITE_OK;
}

static void rollback(store *s) {
  if (!sqlite3_get_autocommit(s->db))
    step_done(s->st[ST_ROLLBACK]);
}

static int set_meta_int(store *s, const char *key, int64_t v) {
  sqlite3_stmt *st = s->st[ST_SET_META];
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, v);
  return step_done(st);
}

static void commit_batch(store *s, zitem *items, size_t n) {
  if (s->cfg.test_delay_ms) {
    struct timespec d = {s->cfg.test_delay_ms / 1000,
                         (long)(s->cfg.test_delay_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR)
      ;
  }
  int64_t t0 = now_ns(CLOCK_MONOTONIC);
  int64_t now_real = now_ns(CLOCK_REALTIME);
  int64_t span = s->max_span_ns;
  int rc = step_done(s->st[ST_BEGIN]);
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
    rc = store_one(s, &items[i], now_real, &span);
  if (rc == SQLITE_OK && span > s->max_span_ns)
    rc = set_meta_int(s, "max_span_ns", span);
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  int64_t dt = now_ns(CLOCK_MONOTONIC) - t0;

  if (rc != SQLITE_OK && n > 1 && !rc_is_full(rc)) {
    /* Not a space problem, so possibly one bad generation: retry each in
     * its own transaction so the others are not refused with it (a refused
     * generation is not resent by the agent). */
    store_log_error(s, "batch commit (retrying one by one)", rc);
    rollback(s);
    for (size_t i = 0; i < n; i++)
      commit_batch(s, &items[i], 1);
    return;
  }
  if (rc != SQLITE_OK) {
    int res;
    if (rc_is_full(rc)) {
      res = GTP_E_DISKFULL;
      stats_set_disk_full(s, 1);
    } else {
      /* Constraint errors (e.g. a trigger) are the generation's fault, not
       * the store's: the agent must not resend it. */
      res = (rc & 0xff) == SQLITE_CONSTRAINT ? GTP_E_CORRUPT
            : store_err(rc)                  ? store_err(rc)
                                             : GTP_E_INTERNAL;
      store_log_error(s, "commit", rc);
    }
    rollback(s); /* invariant 5 */
    for (size_t i = 0; i < n; i++) {
      items[i].g->result = res;
      items[i].g->seq = 0;
      items[i].g->stored_bytes = 0;
    }
  } else {
    s->max_span_ns = span;
    uint64_t ok = 0, okb = 0, dup = 0;
    for (size_t i = 0; i < n; i++) {
      /* invariant 4 */
      store_index_note_gen(s->idx, items[i].g->session, items[i].g->gen);
      sidc_put(s, items[i].g->session, items[i].sid); /* invariant 13 */
      if (items[i].g->result == 1) {
        dup++;
      } else if (items[i].g->result == 0) {
        ok++;
        okb += items[i].g->len;
      }
    }
    pthread_mutex_lock(&s->st_lock);
    s->stats.committed_gens += ok;
    s->stats.committed_bytes += okb;
    s->stats.duplicate_gens += dup;
    s->stats.transactions++;
    s->stats.commit_ns_total += (uint64_t)dt;
    if ((uint64_t)dt > s->stats.commit_ns_max)
      s->stats.commit_ns_max = (uint64_t)dt;
    s->stats.disk_full = 0; /* a commit is the best proof of free space */
    pthread_mutex_unlock(&s->st_lock);
  }
  for (size_t i = 0; i < n; i++) {
    if (items[i].z != NULL)
      __atomic_fetch_sub(&s->scratch_bytes, items[i].zlen, __ATOMIC_RELAXED);
    free(items[i].z);
    items[i].z = NULL;
    __atomic_fetch_sub(&s->scratch_bytes, store_sum_bytes(items[i].sum),
                       __ATOMIC_RELAXED);
    store_sum_free(items[i].sum);
    items[i].sum = NULL;
    s->done(s->done_ctx, items[i].g); /* invariant 2: after COMMIT returned */
  }
}

/* ---------------------------------------------------------- maintenance */

/* Writes the rejected counts noted by store_note_rejected. Counts for a
 * session without a row yet stay pending until its first commit (or expire:
 * invariant 10). The snapshot is taken under the index's lock and written
 * without it (store_note_rejected may run meanwhile); what was written is
 * subtracted once COMMIT returned. */
static void flush_rejected(store *s) {
  size_t m = 0;
  store_index_rej *list = store_index_rejected(s->idx, &m);
  if (list == NULL)
    return;
  int rc = step_done(s->st[ST_BEGIN]);
  for (size_t i = 0; rc == SQLITE_OK && i < m; i++) {
    char hex[33];
    gtp_session_hex(list[i].session, hex);
    sqlite3_stmt *st = s->st[ST_REJECTED];
    sqlite3_bind_text(st, 1, hex, 32, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (int64_t)list[i].gens);
    sqlite3_bind_int64(st, 3, (int64_t)list[i].events);
    rc = step_done(st);
    list[i].applied = rc == SQLITE_OK && sqlite3_changes(s->db) > 0;
  }
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  if (rc != SQLITE_OK) {
    rollback(s);
    if (rc_is_full(rc))
      stats_set_disk_full(s, 1);
    free(list);
    return;
  }
  store_index_rejected_done(s->idx, list, m);
  free(list);
}

static void note_deleted(store *s, uint64_t n) {
  pthread_mutex_lock(&s->st_lock);
  s->stats.retention_deleted_gens += n;
  pthread_mutex_unlock(&s->st_lock);
}

/* Runs the two DELETEs of one chunk (payloads first: they are found through
 * the generations rows) in one transaction. Returns the number of
 * generations deleted, or < 0. */
static int64_t delete_chunk(store *s, sqlite3_stmt *pay, sqlite3_stmt *gen) {
  int rc = step_done(s->st[ST_BEGIN]);
  if (rc == SQLITE_OK)
    rc = step_done(pay);
  int64_t n = 0;
  if (rc == SQLITE_OK) {
    rc = step_done(gen);
    n = sqlite3_changes(s->db);
  }
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  if (rc != SQLITE_OK) {
    rollback(s);
    if (!rc_is_full(rc))
      store_log_error(s, "retention", rc);
    return -1;
  }
  return n;
}

/* Deletes generations that ended before now - retain, below the lowest pin
 * (invariant 6). Returns how many were deleted. */
static uint64_t retain_by_age(store *s) {
  if (s->cfg.retain_ns <= 0)
    return 0;
  int64_t cutoff = now_ns(CLOCK_REALTIME) - s->cfg.retain_ns;
  uint64_t total = 0;
  for (;;) {
    int64_t pin = store_pins_min(s->cfg.pins);
    sqlite3_stmt *p = s->st[ST_AGE_DEL_PAYLOADS];
    sqlite3_stmt *g = s->st[ST_AGE_DEL_GENS];
    sqlite3_stmt *both[2] = {p, g};
    for (int i = 0; i < 2; i++) {
      sqlite3_bind_int64(both[i], 1, cutoff);
      sqlite3_bind_int64(both[i], 2, pin);
      sqlite3_bind_int64(both[i], 3, STORE_DELETE_CHUNK);
    }
    int64_t n = delete_chunk(s, p, g);
    if (n <= 0)
      break;
    total += (uint64_t)n;
    note_deleted(s, (uint64_t)n);
    /* After a long downtime there may be millions to delete: leave the
     * rest to the next tick so queued commits are not held up behind it. */
    if (n < STORE_DELETE_CHUNK || total >= 16 * STORE_DELETE_CHUNK)
      break;
  }
  return total;
}

/* Returns freed pages to the file system and empties the WAL so the files
 * shrink. force: do both even below the thresholds. */
static void reclaim(store *s, int force) {
  int64_t page = pragma_int(s->db, "PRAGMA page_size");
  int64_t freel = pragma_int(s->db, "PRAGMA freelist_count");
  if (page > 0 && freel > 0 &&
      (force || (uint64_t)(freel * page) >= STORE_VACUUM_BYTES))
    exec_sql(s->db, "PRAGMA incremental_vacuum");
  if (force || file_size(s->wal_path) > STORE_WAL_TARGET) {
    sqlite3_busy_timeout(s->db, STORE_CKPT_BUSY_MS);
    sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL,
                              NULL);
    sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
  }
}

/* Deletes the oldest whole generations (lowest seq, below the lowest pin)
 * until main db + WAL fit max_db_bytes, or nothing more may be deleted.
 * It deletes down to a little below the limit (STORE_SIZE_SLACK) so that a
 * database at its limit pays the delete + checkpoint once per few MB of
 * ingest, not after every transaction. Sets s->size_stuck when pins (or an
 * empty table) keep it over the limit, so commits do not retry until the
 * next tick. */
static uint64_t retain_by_size(store *s) {
  uint64_t max = s->cfg.max_db_bytes;
  s->size_stuck = 0;
  if (max == 0)
    return 0;
  uint64_t size = db_bytes(s);
  if (size <= max)
    return 0;
  reclaim(s, 1); /* freed pages or a full WAL may be all that is over */
  size = db_bytes(s);
  if (size <= max)
    return 0;
  uint64_t target = max - max / STORE_SIZE_SLACK;
  uint64_t total = 0;
  for (int round = 0; round < 64 && size > target; round++) {
    uint64_t excess = size - target, acc = 0;
    int64_t pin = store_pins_min(s->cfg.pins), cut = 0;
    sqlite3_stmt *st = s->st[ST_SIZE_SCAN];
    sqlite3_bind_int64(st, 1, pin);
    sqlite3_bind_int64(st, 2, STORE_DELETE_CHUNK);
    while (acc < excess && sqlite3_step(st) == SQLITE_ROW) {
      cut = sqlite3_column_int64(st, 0);
      /* A row costs a little beyond its blob: count it, or tiny
       * generations would take many rounds. */
      acc += (uint64_t)sqlite3_column_int64(st, 1) + 128;
    }
    sqlite3_reset(st);
    if (cut == 0)
      break; /* nothing deletable: all pinned, or the database is empty */
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_PAYLOADS], 1, cut);
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_GENS], 1, cut);
    int64_t n =
        delete_chunk(s, s->st[ST_SIZE_DEL_PAYLOADS], s->st[ST_SIZE_DEL_GENS]);
    if (n < 0)
      break;
    total += (uint64_t)n;
    note_deleted(s, (uint64_t)n);
    reclaim(s, 1);
    size = db_bytes(s);
  }
  s->size_stuck = size > max;
  return total;
}

/* Disk-full probe: a real committed write of STORE_PROBE_BYTES, then its
 * removal. The flag clears only when both commit and the file system has
 * room beyond the probe. */
static void probe_disk(store *s) {
  char sql[160];
  snprintf(sql, sizeof sql,
           "INSERT OR REPLACE INTO meta(key, value)"
           " VALUES('disk_probe', zeroblob(%d))",
           STORE_PROBE_BYTES);
  int rc = exec_sql(s->db, sql);
  int rc2 = exec_sql(s->db, "DELETE FROM meta WHERE key = 'disk_probe'");
  if (rc != SQLITE_OK || rc2 != SQLITE_OK)
    return;
  struct statvfs vfs;
  char *dir = strdup(s->path);
  if (!dir)
    return;
  char *slash = strrchr(dir, '/');
  const char *d = ".";
  if (slash) {
    slash[slash == dir ? 1 : 0] = '\0';
    d = dir;
  }
  int room = statvfs(d, &vfs) != 0 ||
             (uint64_t)vfs.f_bavail * vfs.f_frsize >= STORE_MIN_FREE_BYTES;
  free(dir);
  if (room)
    stats_set_disk_full(s, 0);
}

/* Thread: store only. committed: a batch just committed (retention then
 * runs at once if the tick is due, keeping the size bound tight). */
/* Summaries of generations stored before schema 4, a few hundred per tick
 * (store_summary.c). Progress goes to the log and to store_stats. */
static void backfill_tick(store *s) {
  uint64_t pending = 0;
  if (s->sum == NULL || s->stats.summary_pending == 0)
    return;
  int n = store_summary_backfill(s->sum, STORE_BACKFILL_PER_TICK, &pending);
  if (n < 0) {
    store_log_error(s, "summary backfill", sqlite3_errcode(s->db));
    return;
  }
  pthread_mutex_lock(&s->st_lock);
  s->stats.summary_backfilled += (uint64_t)n;
  s->stats.summary_pending = pending;
  pthread_mutex_unlock(&s->st_lock);
  char kv[160];
  snprintf(kv, sizeof kv,
           "msg=\"summary backfill\" summarized=%d pending=%llu", n,
           (unsigned long long)pending);
  if (s->cfg.log)
    s->cfg.log(s->cfg.log_ctx, kv);
  else
    fprintf(stderr, "level=info %s\n", kv);
}

static void maintain(store *s, int committed) {
  int64_t now = now_ns(CLOCK_MONOTONIC);
  int tick = now >= s->next_tick_ns;
  uint64_t deleted = 0;
  if (tick) {
    s->next_tick_ns = now + STORE_TICK_NS;
    flush_rejected(s);
    store_index_expire(s->idx);
    deleted += retain_by_age(s);
  }
  if (tick || (committed && !s->size_stuck))
    deleted += retain_by_size(s);
  /* Also on a tick when long readers kept the automatic (PASSIVE)
   * checkpoints from resetting the WAL, so it kept growing. */
  if (deleted || (tick && file_size(s->wal_path) > 2 * STORE_WAL_TARGET))
    reclaim(s, 0);
  if (tick && stats_disk_full(s))
    probe_disk(s);
  if (tick && !stats_disk_full(s))
    backfill_tick(s);
  if (tick || committed) {
    uint64_t b = db_bytes(s);
    pthread_mutex_lock(&s->st_lock);
    s->stats.db_bytes = b;
    pthread_mutex_unlock(&s->st_lock);
  }
}

/* A compressor: q -> compress -> cq, one generation at a time. */
static void *comp_main(void *arg) {
  store *s = arg;
  /* Without a context every item is stored raw: slower disk use, but
   * correct, and out of memory here is not worth stopping ingest for. */
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
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
    size_t slot = (s->cq_head + s->cq_len) % s->cq_cap; /* invariant 8 */
    s->cq[slot] = (zitem){.g = g};
    s->cq_len++;
    pthread_mutex_unlock(&s->q_lock);

    zitem it = {.g = g};
    if (cctx)
      compress_item(s, cctx, &it);
    else
      it = (zitem){.g = g, .zlen = g->len, .codec = STORE_CODEC_NONE};
    it.ready = 1;
    it.ready_ns = now_ns(CLOCK_MONOTONIC);

    pthread_mutex_lock(&s->q_lock);
    s->cq[slot] = it;
    /* A lingering store thread wakes at its deadline or for a full batch,
     * not once per generation (invariant 13). */
    if (!s->lingering || s->cq_len >= s->cfg.batch_max)
      pthread_cond_signal(&s->c_cond);
  }
  s->comp_exited++;
  pthread_cond_signal(&s->c_cond);
  /* Another compressor may wait for space that will never come while
   * closing with q empty: wake it to see q is drained. */
  pthread_cond_broadcast(&s->q_cond);
  pthread_mutex_unlock(&s->q_lock);
  ZSTD_freeCCtx(cctx);
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

/* Group commit (invariant 13): with a generation ready, waits up to
 * linger_ms for more, unless the batch is full, the store is closing, or
 * the head comes from the same session as the last commit (one agent
 * sending generation after generation, each waiting for its ACK, gains
 * nothing from waiting). q_lock held. */
static void linger(store *s) {
  if (s->cfg.linger_ms == 0 || s->closing || s->cq_len == 0 ||
      !s->cq[s->cq_head].ready ||
      memcmp(s->cq[s->cq_head].g->session, s->last_session, 16) == 0)
    return;
  /* From when the head became ready: time it spent queued behind the
   * previous commit counts, so no generation waits more than linger_ms
   * beyond the commits ahead of it. */
  int64_t until =
      s->cq[s->cq_head].ready_ns + (int64_t)s->cfg.linger_ms * 1000000;
  struct timespec ts = {(time_t)(until / NS_PER_SEC),
                        (long)(until % NS_PER_SEC)};
  s->lingering = 1;
  for (;;) {
    uint64_t bytes;
    size_t n = ready_prefix(s, &bytes);
    if (s->closing || n >= s->cfg.batch_max || bytes >= STORE_LINGER_BYTES ||
        s->cq_len == s->cq_cap || now_ns(CLOCK_MONOTONIC) >= until)
      break;
    pthread_cond_timedwait(&s->c_cond, &s->q_lock, &ts);
  }
  s->lingering = 0;
}

static void *store_main(void *arg) {
  store *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->q_lock);
    while (!(s->cq_len > 0 && s->cq[s->cq_head].ready) &&
           !(s->comp_exited == STORE_COMPRESSORS && s->cq_len == 0)) {
      int64_t wake = s->next_tick_ns;
      if (now_ns(CLOCK_MONOTONIC) >= wake)
        break;
      struct timespec ts = {(time_t)(wake / NS_PER_SEC),
                            (long)(wake % NS_PER_SEC)};
      pthread_cond_timedwait(&s->c_cond, &s->q_lock, &ts);
    }
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
    int stop = s->comp_exited == STORE_COMPRESSORS && s->cq_len == 0;
    pthread_mutex_unlock(&s->q_lock);

    if (n) {
      memcpy(s->last_session, s->batch[n - 1].g->session, 16);
      commit_batch(s, s->batch, n);
    }
    maintain(s, n > 0);
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
  store_summary_close(s->sum);
  for (int i = 0; i < ST_COUNT_; i++)
    sqlite3_finalize(s->st[i]);
  sqlite3_close_v2(s->db);
  pthread_mutex_destroy(&s->st_lock);
  pthread_mutex_destroy(&s->q_lock);
  pthread_cond_destroy(&s->q_cond);
  pthread_cond_destroy(&s->c_cond);
  pthread_cond_destroy(&s->space_cond);
  free(s->batch);
  free(s->sidc);
  free(s->q);
  free(s->cq);
  store_index_free(s->idx);
  free(s->wal_path);
  free(s->path);
  free(s);
}
