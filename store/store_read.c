/* store_read.c: the read side of storage, one read-only SQLite connection
 * per reader (web/ keeps a pool of them).
 *
 * Owns: the connection, its cached prepared statements, and a zstd
 * decompression context.
 *
 * Invariants:
 *   1. Every call MUST end its read transaction before returning (statements
 *      reset, explicit transactions committed, also on error and when the
 *      callback stops early), otherwise a slow HTTP client would pin an old
 *      WAL snapshot and starve the writer's checkpoints: the WAL would grow
 *      without bound.
 *   2. Strings handed to callbacks MUST be used only during the callback:
 *      they point into SQLite's row buffer, which the next step overwrites.
 *   3. Decompression MUST be bounded by the row's own recorded size and by
 *      GTP_GEN_MAX_BYTES before any allocation, otherwise one corrupt or
 *      hostile row could make the daemon allocate gigabytes.
 *   4. The connection MUST be opened read-only, otherwise a bug in the web
 *      layer could write to the database behind the store thread's back.
 *
 * Window queries use the generations_by_time index: start_ns < to bounds the
 * scan from above, and start_ns >= from - max_span from below, which is
 * exact because end - start <= max_span for every row. max_span is the
 * largest bound of gen_spans (schema 10: per 73-minute bucket of start, a
 * bound of its rows' spans, dropped with the bucket's last row), read per
 * query; schemas 3-9 read the longest span kept from an index; before,
 * it was the longest ever committed (meta.max_span_ns), so one absurd row
 * (a CLOCK spanning [0, INT64_MAX]) made every later query scan from the
 * start, even after retention deleted it. gentraced now refuses spans over
 * --max-gen-span, so the bound stays small.
 */
#include "config.h" /* _GNU_SOURCE: vasprintf */

#include "store_read.h"

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gtp_error.h"
#include "store_int.h"
#include "store_schema.h"

#define READ_BUSY_MS 5000
/* Each reader's page cache in KiB (see the PRAGMA in store_reader_open). */
#define READ_CACHE_KIB_STR "2048"

#define GEN_COLS                                                               \
  "g.seq, s.session, s.service, s.host, g.gen, g.start_ns, g.end_ns,"          \
  " g.events, g.bytes, g.stored_bytes, g.dropped, g.evicted, g.rejected,"      \
  " g.status, g.codec, g.committed_ns"

enum {
  RQ_BEGIN = STORE_RQ_COUNT_,
  RQ_COMMIT,
  RQ_SESSION_ID,
  RQ_MAX_SPAN,
  RQ_MAX_SEQ,
  RQ_PAYLOAD_GEN,
  RQ_SEQ_AT,
  RQ_ALL_
};

static const char *const read_sql[RQ_ALL_] = {
    /* One row per session: the totals are kept by triggers (schema 2),
     * first/last gen are two probes of UNIQUE(session_id, gen); nothing
     * here walks a session's generations. */
    [STORE_RQ_SESSIONS] =
        "SELECT s.session, s.service, s.host, s.agent_version, s.tags, s.pid,"
        " s.process_start_ns, s.first_seen_ns, s.last_seen_ns, s.gens,"
        " (SELECT min(gen) FROM generations WHERE session_id = s.id),"
        " (SELECT max(gen) FROM generations WHERE session_id = s.id),"
        " s.events, s.bytes, s.lost, s.rejected FROM sessions s"
        " WHERE (?1 IS NULL OR s.service = ?1) AND (?2 IS NULL OR s.host = ?2)"
        " AND (?3 IS NULL OR EXISTS (SELECT 1 FROM json_each(s.tags) j"
        " WHERE j.key = ?3 AND (?4 IS NULL OR (j.type = 'text' AND j.value = "
        "?4))))"
        " ORDER BY s.service, s.host, s.first_seen_ns, s.id",
    [STORE_RQ_SESSION_GENS] =
        "SELECT " GEN_COLS " FROM generations g JOIN sessions s"
        " ON s.id = g.session_id"
        " WHERE g.session_id = ?1 AND g.gen > ?2 AND g.start_ns < ?4"
        " AND g.end_ns > ?3 ORDER BY g.gen LIMIT ?5",
    [STORE_RQ_WINDOW_SESSION] =
        "SELECT " GEN_COLS " FROM sessions s JOIN generations g"
        " ON g.session_id = s.id"
        " WHERE s.session = ?1 AND g.start_ns < ?3 AND g.start_ns >= ?4"
        " AND g.end_ns > ?2 ORDER BY g.start_ns, g.seq",
    [STORE_RQ_WINDOW_SERVICE] =
        "SELECT " GEN_COLS " FROM sessions s JOIN generations g"
        " ON g.session_id = s.id"
        " WHERE s.service = ?1 AND g.start_ns < ?3 AND g.start_ns >= ?4"
        " AND g.end_ns > ?2 ORDER BY g.start_ns, g.seq",
    [STORE_RQ_WINDOW_SERVICE_HOST] =
        "SELECT " GEN_COLS " FROM sessions s JOIN generations g"
        " ON g.session_id = s.id"
        " WHERE s.service = ?1 AND s.host = ?5 AND g.start_ns < ?3"
        " AND g.start_ns >= ?4 AND g.end_ns > ?2 ORDER BY g.start_ns, g.seq",
    [STORE_RQ_FEED] = "SELECT " GEN_COLS " FROM generations g JOIN sessions s"
                      " ON s.id = g.session_id"
                      " WHERE g.seq > ?1 ORDER BY g.seq LIMIT ?2",
    [STORE_RQ_PAYLOAD] =
        "SELECT g.codec, g.bytes, p.data FROM generations g JOIN payloads p"
        " ON p.seq = g.seq WHERE g.seq = ?1",
    [RQ_BEGIN] = "BEGIN",
    [RQ_COMMIT] = "COMMIT",
    [RQ_SESSION_ID] = "SELECT id FROM sessions WHERE session = ?1",
    [RQ_MAX_SPAN] = STORE_SPAN_MAX_SQL,
    [RQ_MAX_SEQ] = STORE_MAX_SEQ_SQL,
    [RQ_SEQ_AT] = "SELECT seq, committed_ns FROM generations WHERE seq >= ?1"
                  " ORDER BY seq LIMIT 1",
    [RQ_PAYLOAD_GEN] =
        "SELECT g.codec, g.bytes, p.data FROM sessions s"
        " JOIN generations g ON g.session_id = s.id"
        " JOIN payloads p ON p.seq = g.seq WHERE s.session = ?1 AND g.gen = ?2",
};

struct store_reader {
  sqlite3 *db;
  sqlite3_stmt *st[RQ_ALL_]; /* prepared on first use */
  ZSTD_DCtx *dctx;
};

#define read_err(rc) store_sqlite_err(rc)

sqlite3 *store_reader_db(store_reader *r) {
  return r->db;
}

int store_reader_open(const char *path, store_reader **out, char **cause) {
  if (cause)
    *cause = NULL;
  if (!path || !*path || !out) {
    store_set_cause(cause, "store_reader: no database path");
    return GTP_E_BADARG;
  }
  int err = -ENOMEM;
  store_reader *r = calloc(1, sizeof *r);
  if (!r)
    goto fail_alloc;
  r->dctx = ZSTD_createDCtx();
  if (!r->dctx)
    goto fail_db;
  int rc = sqlite3_open_v2(path, &r->db,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: cannot open database read-only: %s", path,
                    r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
    err = read_err(rc);
    goto fail_db;
  }
  sqlite3_extended_result_codes(r->db, 1);
  sqlite3_busy_timeout(r->db, READ_BUSY_MS);
  /* Refuse a database this build cannot read before any query runs. */
  sqlite3_stmt *st = NULL;
  rc = sqlite3_prepare_v2(r->db,
                          "SELECT value FROM meta WHERE key = 'schema_version'",
                          -1, &st, NULL);
  int64_t version = -1;
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
    version = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (version < 0) {
    store_set_cause(cause, "%s: not a gentrace database (%s)", path,
                    sqlite3_errmsg(r->db));
    err = (rc & 0xff) == SQLITE_ERROR || rc == SQLITE_DONE ? GTP_E_VERSION
                                                           : read_err(rc);
    goto fail_db;
  }
  if (version > STORE_SCHEMA_VERSION) {
    store_set_cause(cause,
                    "%s: database schema version %" PRId64
                    " is newer than this build supports (%d)",
                    path, version, STORE_SCHEMA_VERSION);
    err = GTP_E_VERSION;
    goto fail_db;
  }
  /* The version query read the header, so the page size is now the
   * file's: only now does a cache size in KiB mean what it says (SQLite
   * sized the default cache with 4 KiB pages, 32 MiB at our 64 KiB). */
  sqlite3_exec(r->db, "PRAGMA cache_size = -" READ_CACHE_KIB_STR, NULL, NULL,
               NULL);
  if (version < STORE_SCHEMA_VERSION) {
    /* The queries use columns of the current version; the writer
     * (store_open) migrates, and gentraced opens it before any reader. */
    store_set_cause(cause,
                    "%s: database schema version %" PRId64
                    " is older than this build reads (%d); open it with"
                    " this gentraced once to migrate it",
                    path, version, STORE_SCHEMA_VERSION);
    err = GTP_E_VERSION;
    goto fail_db;
  }
  *out = r;
  return 0;
fail_db:
  sqlite3_close_v2(r->db);
  ZSTD_freeDCtx(r->dctx);
  free(r);
fail_alloc:
  if (err == -ENOMEM && cause && !*cause)
    store_set_cause(cause, "store_reader: out of memory");
  return err;
}

void store_reader_close(store_reader *r) {
  if (!r)
    return;
  for (int i = 0; i < RQ_ALL_; i++)
    sqlite3_finalize(r->st[i]);
  sqlite3_close_v2(r->db);
  ZSTD_freeDCtx(r->dctx);
  free(r);
}

/* Returns the cached statement for q, reset and with cleared bindings. */
static int get_stmt(store_reader *r, int q, sqlite3_stmt **out) {
  if (!r->st[q]) {
    int rc = sqlite3_prepare_v3(r->db, read_sql[q], -1,
                                SQLITE_PREPARE_PERSISTENT, &r->st[q], NULL);
    if (rc != SQLITE_OK)
      return read_err(rc) ? read_err(rc) : GTP_E_INTERNAL;
  }
  sqlite3_reset(r->st[q]);
  sqlite3_clear_bindings(r->st[q]);
  *out = r->st[q];
  return 0;
}

static int run_simple(store_reader *r, int q) {
  sqlite3_stmt *st;
  int err = get_stmt(r, q, &st);
  if (err)
    return err;
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : read_err(rc);
}

static int tx_begin(store_reader *r) {
  return run_simple(r, RQ_BEGIN);
}

/* Ends the read transaction (invariant 1). A read-only COMMIT cannot fail
 * for lack of space; if it fails anyway, ROLLBACK is the fallback. */
static void tx_end(store_reader *r) {
  if (sqlite3_get_autocommit(r->db))
    return;
  if (run_simple(r, RQ_COMMIT) != 0 && !sqlite3_get_autocommit(r->db))
    sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
}

static const char *col_text(sqlite3_stmt *st, int i) {
  const char *p = (const char *)sqlite3_column_text(st, i);
  return p ? p : "";
}

static void bind_opt_text(sqlite3_stmt *st, int i, const char *v) {
  if (v)
    sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

/* A user's row callback with its context, for step_rows. */
typedef struct row_sink {
  void (*fn)(void); /* the caller's typed callback, cast back before use */
  void *ctx;
} row_sink;

/* Steps st, handing each row to `row` (which reads the columns into the
 * caller's row type and calls the sink); stops at the first nonzero answer
 * and returns it. Resets the statement before returning, whatever happens,
 * so a pooled reader never keeps a read transaction open. */
static int step_rows(sqlite3_stmt *st, int (*row)(sqlite3_stmt *, row_sink *),
                     row_sink *k) {
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int stop = row(st, k);
    if (stop) {
      sqlite3_reset(st);
      return stop;
    }
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : read_err(rc);
}

static int session_row(sqlite3_stmt *st, row_sink *k) {
  store_session_row row = {
      .session = col_text(st, 0),
      .service = col_text(st, 1),
      .host = col_text(st, 2),
      .agent_version = col_text(st, 3),
      .tags_json = col_text(st, 4),
      .pid = (uint64_t)sqlite3_column_int64(st, 5),
      .started_ns = sqlite3_column_int64(st, 6),
      .first_seen_ns = sqlite3_column_int64(st, 7),
      .last_seen_ns = sqlite3_column_int64(st, 8),
      .generations = (uint64_t)sqlite3_column_int64(st, 9),
      .first_gen = (uint64_t)sqlite3_column_int64(st, 10),
      .last_gen = (uint64_t)sqlite3_column_int64(st, 11),
      .events = (uint64_t)sqlite3_column_int64(st, 12),
      .bytes = (uint64_t)sqlite3_column_int64(st, 13),
      .lost = (uint64_t)sqlite3_column_int64(st, 14),
      .rejected_gens = (uint64_t)sqlite3_column_int64(st, 15),
  };
  row.has_gens = row.generations > 0;
  return ((store_session_cb)k->fn)(k->ctx, &row);
}

static int gen_row(sqlite3_stmt *st, row_sink *k) {
  store_gen_row row = {
      .seq = sqlite3_column_int64(st, 0),
      .session = col_text(st, 1),
      .service = col_text(st, 2),
      .host = col_text(st, 3),
      .gen = (uint64_t)sqlite3_column_int64(st, 4),
      .start_ns = sqlite3_column_int64(st, 5),
      .end_ns = sqlite3_column_int64(st, 6),
      .events = (uint64_t)sqlite3_column_int64(st, 7),
      .bytes = (uint64_t)sqlite3_column_int64(st, 8),
      .stored_bytes = (uint64_t)sqlite3_column_int64(st, 9),
      .dropped = (uint64_t)sqlite3_column_int64(st, 10),
      .evicted = (uint64_t)sqlite3_column_int64(st, 11),
      .rejected = (uint64_t)sqlite3_column_int64(st, 12),
      .status = col_text(st, 13),
      .codec = col_text(st, 14),
      .committed_ns = sqlite3_column_int64(st, 15),
  };
  return ((store_gen_cb)k->fn)(k->ctx, &row);
}

int store_read_sessions(store_reader *r, const store_session_filter *f,
                        store_session_cb cb, void *ctx) {
  sqlite3_stmt *st;
  int err = get_stmt(r, STORE_RQ_SESSIONS, &st);
  if (err)
    return err;
  store_session_filter none = {0};
  if (!f)
    f = &none;
  bind_opt_text(st, 1, f->service);
  bind_opt_text(st, 2, f->host);
  bind_opt_text(st, 3, f->tag_key);
  bind_opt_text(st, 4, f->tag_key ? f->tag_value : NULL);
  row_sink k = {(void (*)(void))cb, ctx};
  return step_rows(st, session_row, &k);
}

/* Steps a statement returning GEN_COLS, handing each row to cb. Resets the
 * statement before returning, whatever happens. */
static int stream_gens(sqlite3_stmt *st, store_gen_cb cb, void *ctx) {
  row_sink k = {(void (*)(void))cb, ctx};
  return step_rows(st, gen_row, &k);
}

int store_read_session_gens(store_reader *r, const char *session,
                            int64_t from_ns, int64_t to_ns, int64_t after,
                            uint32_t limit, store_gen_cb cb, void *ctx) {
  if (!session)
    return GTP_E_BADARG;
  int err = tx_begin(r);
  if (err)
    return err;
  sqlite3_stmt *st;
  int64_t sid = -1;
  if ((err = get_stmt(r, RQ_SESSION_ID, &st)) != 0)
    goto out;
  sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    sid = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW) {
    err = rc == SQLITE_DONE ? GTP_E_NOTFOUND : read_err(rc);
    goto out;
  }
  if ((err = get_stmt(r, STORE_RQ_SESSION_GENS, &st)) != 0)
    goto out;
  sqlite3_bind_int64(st, 1, sid);
  /* gen is stored as a signed 64-bit integer; after < 0 means none. */
  if (after < 0)
    sqlite3_bind_int64(st, 2, INT64_MIN);
  else
    sqlite3_bind_int64(st, 2, after);
  sqlite3_bind_int64(st, 3, from_ns);
  sqlite3_bind_int64(st, 4, to_ns);
  sqlite3_bind_int64(st, 5, limit ? (int64_t)limit : -1);
  err = stream_gens(st, cb, ctx);
out:
  tx_end(r);
  return err;
}

/* The longest span of the rows kept, inside the caller's transaction (so
 * it holds for the rows the query sees); 0 without rows. */
static int read_max_span(store_reader *r, int64_t *span) {
  sqlite3_stmt *st;
  int err = get_stmt(r, RQ_MAX_SPAN, &st);
  if (err)
    return err;
  *span = 0;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    *span = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  if (*span < 0)
    *span = 0;
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : read_err(rc);
}

/* The window's statement with its parameters bound. */
static int bind_window(store_reader *r, const store_window_query *q,
                       int64_t span, sqlite3_stmt **out) {
  int which = q->session ? STORE_RQ_WINDOW_SESSION
              : q->host  ? STORE_RQ_WINDOW_SERVICE_HOST
                         : STORE_RQ_WINDOW_SERVICE;
  sqlite3_stmt *st;
  int err = get_stmt(r, which, &st);
  if (err)
    return err;
  /* Lowest start a row overlapping [from, to) can have; saturating so an
   * open start (INT64_MIN or 0) does not wrap. */
  int64_t lo = q->from_ns < INT64_MIN + span ? INT64_MIN : q->from_ns - span;
  sqlite3_bind_text(st, 1, q->session ? q->session : q->service, -1,
                    SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, q->from_ns);
  sqlite3_bind_int64(st, 3, q->to_ns);
  sqlite3_bind_int64(st, 4, lo);
  if (which == STORE_RQ_WINDOW_SERVICE_HOST)
    sqlite3_bind_text(st, 5, q->host, -1, SQLITE_STATIC);
  *out = st;
  return 0;
}

int store_read_window(store_reader *r, const store_window_query *q,
                      store_gen_cb cb, void *ctx) {
  if (!q || (!q->session && !q->service))
    return GTP_E_BADARG;
  if (q->to_ns <= q->from_ns)
    return 0; /* an empty range overlaps nothing */
  int err = tx_begin(r);
  if (err)
    return err;
  int64_t span;
  sqlite3_stmt *st;
  if ((err = read_max_span(r, &span)) == 0 &&
      (err = bind_window(r, q, span, &st)) == 0)
    err = stream_gens(st, cb, ctx);
  tx_end(r);
  return err;
}

int store_read_feed(store_reader *r, int64_t after_seq, uint32_t limit,
                    store_gen_cb cb, void *ctx) {
  sqlite3_stmt *st;
  int err = get_stmt(r, STORE_RQ_FEED, &st);
  if (err)
    return err;
  sqlite3_bind_int64(st, 1, after_seq);
  sqlite3_bind_int64(st, 2, limit ? (int64_t)limit : -1);
  return stream_gens(st, cb, ctx);
}

int store_read_max_seq(store_reader *r, int64_t *seq) {
  sqlite3_stmt *st;
  int err = get_stmt(r, RQ_MAX_SEQ, &st);
  if (err)
    return err;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    *seq = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? 0 : read_err(rc);
}

/* The first generation at or after seq: 1 with (*got, *committed), 0 if
 * there is none, or a negative code. */
static int seq_at(store_reader *r, int64_t seq, int64_t *got,
                  int64_t *committed) {
  sqlite3_stmt *st;
  int err = get_stmt(r, RQ_SEQ_AT, &st);
  if (err)
    return err;
  sqlite3_bind_int64(st, 1, seq);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *got = sqlite3_column_int64(st, 0);
    *committed = sqlite3_column_int64(st, 1);
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : read_err(rc);
}

/* Binary search over seq (the rowid) on committed_ns, which the single
 * writer stamps in commit order: about 2 log2(rows) index probes, whatever
 * the size of the database, inside one read transaction so retention
 * cannot move the rows between probes. */
int store_read_feed_since(store_reader *r, int64_t since_ns,
                          int64_t *after_seq) {
  int err = tx_begin(r);
  if (err)
    return err;
  int64_t max = 0, s = 0, c = 0;
  err = store_read_max_seq(r, &max);
  /* Invariants of the loop: rows with seq < lo were committed before
   * since_ns; rows with seq >= hi at or after it (or do not exist). */
  int64_t lo = 0, hi = max + 1;
  while (err == 0 && lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int found = seq_at(r, mid, &s, &c);
    if (found < 0)
      err = found;
    else if (!found || s >= hi || c >= since_ns)
      hi = mid;
    else
      lo = s + 1;
  }
  if (err == 0) {
    int found = seq_at(r, lo, &s, &c);
    if (found < 0)
      err = found;
    else
      *after_seq = found ? s - 1 : max;
  }
  tx_end(r);
  return err;
}

/* Appends the decompressed payload of the row st points at to out.
 * Invariant 3: the size is checked against the row and the format limit
 * before anything is allocated. */
static int decode_payload(store_reader *r, sqlite3_stmt *st, gtp_wbuf *out) {
  const char *codec = (const char *)sqlite3_column_text(st, 0);
  int64_t want = sqlite3_column_int64(st, 1);
  const void *data = sqlite3_column_blob(st, 2);
  size_t n = (size_t)sqlite3_column_bytes(st, 2);
  if (!codec || want <= 0 || (uint64_t)want > GTP_GEN_MAX_BYTES ||
      (n > 0 && !data))
    return GTP_E_CORRUPT;
  if (strcmp(codec, STORE_CODEC_NONE) == 0) {
    if ((int64_t)n != want)
      return GTP_E_CORRUPT;
    gtp_wbuf_put(out, data, n);
    return out->err;
  }
  if (strcmp(codec, STORE_CODEC_ZSTD) != 0)
    return GTP_E_CORRUPT;
  unsigned long long fsize = ZSTD_getFrameContentSize(data, n);
  if (fsize == ZSTD_CONTENTSIZE_ERROR || fsize == ZSTD_CONTENTSIZE_UNKNOWN ||
      fsize != (unsigned long long)want)
    return GTP_E_CORRUPT;
  size_t before = out->len;
  uint8_t *dst = gtp_wbuf_grow(out, (size_t)fsize);
  if (!dst)
    return out->err ? out->err : -ENOMEM;
  size_t got = ZSTD_decompressDCtx(r->dctx, dst, (size_t)fsize, data, n);
  if (ZSTD_isError(got) || got != (size_t)fsize) {
    out->len = before; /* nothing half-written stays in the caller's buffer */
    return GTP_E_CORRUPT;
  }
  return 0;
}

/* Payload lookups are one statement each: the implicit transaction ends at
 * the reset, so no transaction outlives the call (invariant 1). */
static int payload_query(store_reader *r, sqlite3_stmt *st, gtp_wbuf *out) {
  int rc = sqlite3_step(st);
  int err;
  if (rc == SQLITE_ROW)
    err = decode_payload(r, st, out);
  else
    err = rc == SQLITE_DONE ? GTP_E_NOTFOUND : read_err(rc);
  sqlite3_reset(st);
  return err;
}

int store_read_payload(store_reader *r, int64_t seq, gtp_wbuf *out) {
  sqlite3_stmt *st;
  int err = get_stmt(r, STORE_RQ_PAYLOAD, &st);
  if (err)
    return err;
  sqlite3_bind_int64(st, 1, seq);
  return payload_query(r, st, out);
}

/* Appends the row's payload as one zstd frame (store_read_payload_zstd). */
static int stored_frame(sqlite3_stmt *st, gtp_wbuf *out) {
  const char *codec = (const char *)sqlite3_column_text(st, 0);
  int64_t want = sqlite3_column_int64(st, 1);
  const void *data = sqlite3_column_blob(st, 2);
  size_t n = (size_t)sqlite3_column_bytes(st, 2);
  if (!codec || want <= 0 || (uint64_t)want > GTP_GEN_MAX_BYTES ||
      (n > 0 && !data))
    return GTP_E_CORRUPT;
  if (strcmp(codec, STORE_CODEC_ZSTD) == 0) {
    /* One whole frame of the recorded size: a concatenation of such
     * frames is a valid zstd stream of the concatenated payloads. */
    if (ZSTD_getFrameContentSize(data, n) != (unsigned long long)want ||
        ZSTD_findFrameCompressedSize(data, n) != n)
      return GTP_E_CORRUPT;
    gtp_wbuf_put(out, data, n);
    return out->err;
  }
  if (strcmp(codec, STORE_CODEC_NONE) != 0 || (int64_t)n != want)
    return GTP_E_CORRUPT;
  size_t bound = ZSTD_compressBound(n);
  size_t before = out->len;
  uint8_t *dst = gtp_wbuf_grow(out, bound);
  if (!dst)
    return out->err ? out->err : -ENOMEM;
  size_t got = ZSTD_compress(dst, bound, data, n, 1);
  if (ZSTD_isError(got)) {
    out->len = before;
    return -ENOMEM;
  }
  out->len = before + got;
  return 0;
}

int store_read_payload_zstd(store_reader *r, int64_t seq, gtp_wbuf *out) {
  sqlite3_stmt *st;
  int err = get_stmt(r, STORE_RQ_PAYLOAD, &st);
  if (err)
    return err;
  sqlite3_bind_int64(st, 1, seq);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW)
    err = stored_frame(st, out);
  else
    err = rc == SQLITE_DONE ? GTP_E_NOTFOUND : read_err(rc);
  sqlite3_reset(st);
  return err;
}

int store_read_payload_by_gen(store_reader *r, const char *session,
                              uint64_t gen, gtp_wbuf *out) {
  if (!session)
    return GTP_E_BADARG;
  sqlite3_stmt *st;
  int err = get_stmt(r, RQ_PAYLOAD_GEN, &st);
  if (err)
    return err;
  sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (int64_t)gen);
  return payload_query(r, st, out);
}

int store_read_explain(store_reader *r, int query, gtp_wbuf *out) {
  if (query < 0 || query >= STORE_RQ_COUNT_)
    return GTP_E_BADARG;
  char *sql = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", read_sql[query]);
  if (!sql)
    return -ENOMEM;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL);
  sqlite3_free(sql);
  if (rc != SQLITE_OK)
    return read_err(rc) ? read_err(rc) : GTP_E_INTERNAL;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *detail = (const char *)sqlite3_column_text(st, 3);
    if (detail) {
      gtp_wbuf_put(out, detail, strlen(detail));
      gtp_wbuf_put(out, "\n", 1);
    }
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return read_err(rc);
  return out->err;
}
