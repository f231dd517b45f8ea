/* store_search.c: span search and per-name statistics from the summary
 * tables (see store_search.h for the contract, store_schema.h for the
 * tables, proto/summary.h for what a summary guarantees).
 *
 * Invariants:
 *   1. A candidate generation MUST be answered from its summary's spans
 *      (sum_gens.spans, sum_json.h) only when its
 *      floor_ns <= the query's min (summary.h: every span that long is
 *      stored), otherwise from its decoded bytes, otherwise short spans of a
 *      capped generation would be missed.
 *   2. Spans of one generation MUST come out in one deterministic order
 *      (start desc, duration desc, thread asc) whichever way they were
 *      found, otherwise the cursor's skip count would skip other spans on
 *      the next page.
 *   3. Every statement is finalized before return: no read transaction
 *      outlives a call (store_read.h invariant 1).
 *
 * Name match: exact, or a prefix as the half-open range [p, p + 0xff...):
 * names compare bytewise (BINARY), so "checkout." matches "checkout.pay"
 * and not "checkoutx".
 */
#include "config.h"

#include "store_search.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "spanbuf.h"
#include "store_int.h"
#include "store_rollup.h"
#include "store_schema.h"
#include "sum_json.h"
#include "summary.h"

_Static_assert(GTP_SUM_BUCKETS == 68, "store_name_stats.hist size");

/* -------------------------------------------------------- gt_hist_merge */

typedef struct hist_acc {
  uint64_t h[GTP_SUM_BUCKETS];
  int bad;
} hist_acc;

static void hist_step(sqlite3_context *cx, int n, sqlite3_value **v) {
  (void)n;
  hist_acc *a = sqlite3_aggregate_context(cx, sizeof *a);
  if (!a)
    return;
  const void *p = sqlite3_value_blob(v[0]);
  int len = sqlite3_value_bytes(v[0]);
  if (len > 0 && gtp_sum_hist_decode(p, (size_t)len, a->h) < 0)
    a->bad = 1;
}

static void hist_final(sqlite3_context *cx) {
  hist_acc *a = sqlite3_aggregate_context(cx, 0);
  uint8_t out[GTP_SUM_HIST_MAX];
  static const uint64_t empty[GTP_SUM_BUCKETS];
  size_t n = gtp_sum_hist_encode(a ? a->h : empty, out);
  sqlite3_result_blob(cx, out, (int)n, SQLITE_TRANSIENT);
}

int store_search_register(void *db) {
  int rc = sqlite3_create_function_v2(db, "gt_hist_merge", 1,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                      NULL, hist_step, hist_final, NULL);
  return rc == SQLITE_OK ? 0 : store_sqlite_err(rc);
}

/* ---------------------------------------------------------------- helpers */

static int prep(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
  if (rc != SQLITE_OK) {
    int e = store_sqlite_err(rc);
    return e ? e : GTP_E_INTERNAL;
  }
  return 0;
}

/* Binds the name range of a query at i (lo) and i+1 (hi) as blobs compared
 * to TEXT: the hi bound of a prefix is the prefix followed by 0xff bytes. */
static void bind_name(sqlite3_stmt *st, int i, const char *name, int prefix,
                      char *hi, size_t hicap) {
  if (!name) {
    sqlite3_bind_text(st, i, "", 0, SQLITE_STATIC);
    sqlite3_bind_null(st, i + 1);
    return;
  }
  size_t n = strlen(name);
  sqlite3_bind_text(st, i, name, (int)n, SQLITE_STATIC);
  if (!prefix) {
    sqlite3_bind_text(st, i + 1, name, (int)n, SQLITE_STATIC);
    return;
  }
  /* hi = name + "\xff\xff\xff\xff": above every UTF-8 continuation. */
  size_t m = n + 4 < hicap ? n : hicap - 5;
  memcpy(hi, name, m);
  memset(hi + m, 0xff, 4);
  sqlite3_bind_text(st, i + 1, hi, (int)(m + 4), SQLITE_STATIC);
}

static int64_t read_below(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int64_t v = 0;
  if (prep(db, "SELECT value FROM meta WHERE key = 'summary_below'", &st) ==
          0 &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* Lowest seq a generation overlapping [from, ...) can have: generations
 * ending at or after from start at or after from - (longest span kept). */
static int64_t seq_floor(sqlite3 *db, int64_t from_ns) {
  if (from_ns <= 0)
    return 0;
  sqlite3_stmt *st = NULL;
  int64_t v = 0;
  if (prep(db,
           "SELECT min(seq) FROM generations WHERE start_ns >= ?1 - "
           "(" STORE_SPAN_MAX_SQL ")",
           &st) == 0) {
    sqlite3_bind_int64(st, 1, from_ns);
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return v;
}

/* ------------------------------------------------------------------ spans */

/* Spans of one generation from its sum_gens.spans text (invariant 1:
 * floor <= min), or only its carried ones (carried_only). */
static int spans_from_index(const store_search_query *q, const void *json,
                            size_t len, int carried_only, spanbuf *out) {
  sum_json_it it;
  sum_json_it_init(&it, json, len);
  sum_json_span sp;
  int rc;
  while ((rc = sum_json_span_next(&it, &sp)) == 1) {
    if ((carried_only && !sp.carried) || sp.thread < 0 || sp.dur_ns < 0 ||
        !spanbuf_name_matches(q, sp.name, sp.name_len) ||
        !spanbuf_span_matches(q, sp.start_ns, (uint64_t)sp.dur_ns))
      continue;
    store_span_row r = {0};
    r.kind = (int)sp.kind;
    r.name = sp.name;
    r.name_len = sp.name_len;
    r.thread = (uint64_t)sp.thread;
    r.start_ns = sp.start_ns;
    r.dur_ns = (uint64_t)sp.dur_ns;
    if ((rc = spanbuf_add(out, &r)) < 0)
      break;
  }
  sum_json_it_fini(&it);
  return rc < 0 ? rc : 0;
}

/* Spans of generation seq from its bytes: every span >= min. */
static int spans_from_bytes(store_reader *r, const store_search_query *q,
                            int64_t seq, spanbuf *out) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, GTP_GEN_MAX_BYTES);
  int err = store_read_payload(r, seq, &b);
  if (err == 0)
    err = spanbuf_decode(out, q, b.data, b.len);
  else if (err == GTP_E_NOTFOUND)
    err = 0; /* deleted meanwhile */
  gtp_wbuf_fini(&b);
  return err;
}

/* Candidates, newest first: generations whose summary has a name that may
 * hold a match, and (while backfilling) generations without a summary. */
#define CAND_SQL(SEQ)                                                          \
  "SELECT c.seq, g.gen, s.session, s.service, s.host, sg.floor_ns,"            \
  " sg.status, sg.spans FROM (SELECT n.seq AS seq FROM sum_names n"            \
  "  WHERE n.name >= ?1 AND (?2 IS NULL OR n.name <= ?2)"                      \
  "  AND n.max_ns >= ?3 AND n.min_ns <= ?4 AND " SEQ " >= ?5 AND " SEQ         \
  " <= ?6"                                                                     \
  " UNION SELECT g2.seq FROM generations g2 WHERE g2.seq <= ?7"                \
  "  AND g2.seq >= ?5 AND g2.seq <= ?6"                                        \
  "  AND NOT EXISTS (SELECT 1 FROM sum_gens x WHERE x.seq = g2.seq)) c"        \
  " JOIN generations g ON g.seq = c.seq"                                       \
  " JOIN sessions s ON s.id = g.session_id"                                    \
  " LEFT JOIN sum_gens sg ON sg.seq = c.seq"                                   \
  " WHERE (?8 IS NULL OR s.service = ?8) AND (?9 IS NULL OR s.session = ?9)"   \
  " AND g.start_ns < ?10 AND g.end_ns >= ?11"                                  \
  " ORDER BY c.seq DESC"
/* With a name, the (name, seq) key finds its rows; "+n.seq" keeps SQLite
 * from scanning the seq index over every name instead (it cannot tell from
 * bound parameters that the seq range is the whole table). */
static const char *const cand_sql_name = CAND_SQL("+n.seq");
static const char *const cand_sql_any = CAND_SQL("n.seq");

int store_search_spans(store_reader *r, const store_search_query *q,
                       store_span_cb cb, void *ctx, int64_t *next_seq,
                       uint64_t *next_skip) {
  sqlite3 *db = store_reader_db(r);
  *next_seq = 0;
  *next_skip = 0;
  sqlite3_stmt *st;
  int err = prep(db, q->name ? cand_sql_name : cand_sql_any, &st);
  if (err)
    return err;
  char hi[1100];
  bind_name(st, 1, q->name, q->prefix, hi, sizeof hi);
  sqlite3_bind_int64(st, 3, (int64_t)q->min_ns);
  sqlite3_bind_int64(st, 4,
                     q->max_ns > INT64_MAX ? INT64_MAX : (int64_t)q->max_ns);
  sqlite3_bind_int64(st, 5, seq_floor(db, q->from_ns));
  sqlite3_bind_int64(st, 6, q->cursor_seq > 0 ? q->cursor_seq : INT64_MAX);
  sqlite3_bind_int64(st, 7, read_below(db));
  if (q->service)
    sqlite3_bind_text(st, 8, q->service, -1, SQLITE_STATIC);
  if (q->session)
    sqlite3_bind_text(st, 9, q->session, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 10, q->to_ns);
  sqlite3_bind_int64(st, 11, q->from_ns);

  spanbuf buf = {0};
  uint32_t sent = 0;
  int rc, stop = 0;
  while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t seq = sqlite3_column_int64(st, 0);
    int summarized = sqlite3_column_type(st, 5) != SQLITE_NULL;
    int64_t floor_ns = sqlite3_column_int64(st, 5);
    int status = sqlite3_column_int(st, 6);
    if (summarized && status != 0)
      continue; /* not decodable: no span of it can be shown */
    spanbuf_clear(&buf);
    const void *json = sqlite3_column_blob(st, 7);
    size_t jlen = json ? (size_t)sqlite3_column_bytes(st, 7) : 0;
    if (summarized && floor_ns >= 0 && (uint64_t)floor_ns <= q->min_ns) {
      err = spans_from_index(q, json, jlen, 0, &buf);
    } else {
      /* The bytes hold the spans begun and ended here; the ones begun in
       * an earlier generation are only in sum_gens.spans (carried). */
      if (summarized)
        err = spans_from_index(q, json, jlen, 1, &buf);
      if (!err)
        err = spans_from_bytes(r, q, seq, &buf);
    }
    if (err)
      break;
    spanbuf_sort(&buf); /* invariant 2 */
    uint64_t skip = seq == q->cursor_seq ? q->cursor_skip : 0;
    for (size_t i = skip; i < buf.n; i++) {
      if (q->limit && sent == q->limit) {
        *next_seq = seq;
        *next_skip = i;
        stop = 1;
        break;
      }
      store_span_row *row = &buf.rows[i];
      row->seq = seq;
      row->gen = (uint64_t)sqlite3_column_int64(st, 1);
      row->session = (const char *)sqlite3_column_text(st, 2);
      row->service = (const char *)sqlite3_column_text(st, 3);
      row->host = (const char *)sqlite3_column_text(st, 4);
      row->index = i;
      sent++;
      if (cb(ctx, row) != 0) {
        stop = 1;
        *next_seq = seq;
        *next_skip = i + 1;
        break;
      }
    }
  }
  if (!stop && !err && rc != SQLITE_DONE)
    err = store_sqlite_err(rc);
  sqlite3_finalize(st);
  spanbuf_fini(&buf);
  return err;
}

/* ---------------------------------------------------------------- summary */

/* The whole slots [*h0, *h1) inside [from, to) that rollups may answer:
 * 1 if there is at least one. Slots start at unix 0 (rollups hold no
 * generation starting before it). */
static int rollup_slots(int64_t from, int64_t to, int64_t *h0, int64_t *h1) {
  const int64_t H = STORE_ROLLUP_NS;
  *h0 = from <= 0 ? 0 : from / H + (from % H != 0);
  *h1 = to <= 0 ? 0 : to / H;
  if (*h1 > STORE_ROLLUP_END / H)
    *h1 = STORE_ROLLUP_END / H;
  return *h1 > *h0;
}

/* The lowest start a generation ending at or after from can have. */
static int64_t start_floor(sqlite3 *db, int64_t from_ns) {
  sqlite3_stmt *st = NULL;
  int64_t span = 0;
  if (prep(db, STORE_SPAN_MAX_SQL, &st) == 0 && sqlite3_step(st) == SQLITE_ROW)
    span = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  if (span < 0)
    span = 0;
  return from_ns < INT64_MIN + span ? INT64_MIN : from_ns - span;
}

/* The summary from rollups: the raw rows of the generations outside the
 * whole slots [?8, ?9) (A: starting before ?10 = ?8 slots, B: at or after
 * ?11 = ?9 slots), of the dirty slots inside (C), and of the generations inside
 * that no rollup holds (D: end before start, which the store never writes
 * but a row may hold), plus the rollup rows of the clean slots inside.
 * (D reads the partial index generations_backward, which holds only
 * those rows, not every generation of the range by start: INDEXED BY,
 * because SQLite rates it as generations_by_start). Each generation is
 * counted by exactly one part (store_rollup.c invariant 1 is what makes the
 * last part equal to its raw rows). Parameters: ?1 service, ?3 to, ?4 from, ?5
 * the range's first seq, ?6/?7 the name range, ?12 the lowest start a
 * generation of the range can have. */
#define SLOT_NS "600000000000"
#define RAW_ROWS(FROM, SVC, NAME, COND)                                        \
  "SELECT n.kind AS kind, n.name AS name, n.count AS cnt, n.total_ns AS tot,"  \
  " n.min_ns AS mn, n.max_ns AS mx, 1 AS gens, n.hist AS hist FROM " FROM      \
  " JOIN sessions s ON s.id = g.session_id JOIN sum_names n ON n.seq = g.seq"  \
  " WHERE " SVC " AND g.start_ns < ?3 AND g.end_ns >= ?4 AND " NAME            \
  " >= ?6 AND (?7 IS NULL OR n.name <= ?7) AND " COND
#define NOT_DIRTY(SLOT)                                                        \
  "NOT EXISTS (SELECT 1 FROM sum_slots_dirty d WHERE d.slot = " SLOT ")"
/* A: the left edge; B: the right edge; C: the dirty slots inside; D: the
 * rows inside that no rollup holds; R: the rollups of the clean slots. */
#define PART_A(SVC, NAME)                                                      \
  RAW_ROWS("generations g", SVC, NAME,                                         \
           "g.start_ns >= ?12 AND g.start_ns < ?10 AND g.seq >= ?5"            \
           " AND n.seq >= ?5")
#define PART_B(SVC, NAME)                                                      \
  RAW_ROWS("generations g", SVC, NAME, "g.start_ns >= ?11")
#define PART_C(SVC, NAME)                                                      \
  RAW_ROWS("sum_slots_dirty d CROSS JOIN generations g", SVC, NAME,            \
           "d.slot >= ?8 AND d.slot < ?9 AND g.start_ns >= d.slot * " SLOT_NS  \
           " AND g.start_ns < (d.slot + 1) * " SLOT_NS)
#define PART_D(SVC, NAME)                                                      \
  RAW_ROWS("(SELECT a.seq AS aseq FROM generations a"                          \
           " INDEXED BY generations_backward WHERE"                            \
           " a.end_ns < a.start_ns AND a.start_ns >= ?10"                      \
           " AND a.start_ns < ?11 LIMIT -1) x CROSS JOIN generations g",       \
           SVC, NAME,                                                          \
           "g.seq = x.aseq AND " NOT_DIRTY("g.start_ns / " SLOT_NS))
#define PART_R(RSVC)                                                           \
  "SELECT r.kind, r.name, r.count, r.total_ns, r.min_ns, r.max_ns, r.gens,"    \
  " r.hist FROM sum_slots r WHERE r.slot >= ?8 AND r.slot < ?9 AND " RSVC      \
  " AND r.name >= ?6 AND (?7 IS NULL OR r.name <= ?7) AND " NOT_DIRTY(         \
      "r.slot")
#define UNION_ALL " UNION ALL "
#define ROLLUP_HEAD                                                            \
  "SELECT kind, name, sum(cnt), sum(tot), min(mn), max(mx), sum(gens),"        \
  " gt_hist_merge(hist) FROM ("
#define ROLLUP_TAIL ") GROUP BY kind, name ORDER BY sum(tot) DESC, kind, name"
#define ROLLUP_SQL(SVC, RSVC, NAME)                                            \
  ROLLUP_HEAD PART_A(SVC, NAME)                                                \
  UNION_ALL PART_B(SVC, NAME)                                                  \
  UNION_ALL PART_C(SVC, NAME)                                                  \
  UNION_ALL PART_D(SVC, NAME)                                                  \
  UNION_ALL PART_R(RSVC)                                                       \
  ROLLUP_TAIL

int store_search_summary(store_reader *r, const store_summary_query *q,
                         store_stats_cb cb, void *ctx, uint64_t *pending) {
  sqlite3 *db = store_reader_db(r);
  *pending = 0;
  sqlite3_stmt *st;
  /* gt_hist_merge is registered on a connection the first time it is
   * needed (registering again would expire the reader's statements). */
  /* Without a name, rows come by seq (sum_names_by_seq from the range's
   * first seq): "+n.name" keeps SQLite off the name key, which read every
   * row of every generation ever kept; with a service, its sessions and
   * their generations of the range come first (the service written as a
   * plain equality, which SQLite can use as a key). 24 h x 100 agents,
   * bench_search S2, CPU time: the last hour of one service 0.20 -> 0.07 s,
   * its day 1.5 -> 0.4 s. With a name, its key. */
#define SUMMARY_SQL(SVC, NAME)                                                 \
  "SELECT n.kind, n.name, sum(n.count), sum(n.total_ns), min(n.min_ns),"       \
  " max(n.max_ns), count(*), gt_hist_merge(n.hist)"                            \
  " FROM generations g JOIN sessions s ON s.id = g.session_id"                 \
  " JOIN sum_names n ON n.seq = g.seq"                                         \
  " WHERE " SVC " AND (?2 IS NULL OR s.session = ?2)"                          \
  " AND g.start_ns < ?3 AND g.end_ns >= ?4 AND g.seq >= ?5 AND n.seq >= ?5"    \
  " AND " NAME " >= ?6 AND (?7 IS NULL OR n.name <= ?7)"                       \
  " GROUP BY n.kind, n.name ORDER BY sum(n.total_ns) DESC, n.kind, n.name"
#define ANY_SVC "(?1 IS NULL OR s.service = ?1)"
#define ANY_RSVC "(?1 IS NULL OR r.service = ?1)"
  /* A session's summary stays raw: rollups are per service, and one
   * session's day is a service's day divided by its sessions. */
  int64_t h0 = 0, h1 = 0;
  int slots =
      !q->raw && !q->session && rollup_slots(q->from_ns, q->to_ns, &h0, &h1);
  const char *sql, *raw_sql;
  raw_sql = q->service ? (q->name ? SUMMARY_SQL("s.service = ?1", "n.name")
                                  : SUMMARY_SQL("s.service = ?1", "+n.name"))
                       : (q->name ? SUMMARY_SQL(ANY_SVC, "n.name")
                                  : SUMMARY_SQL(ANY_SVC, "+n.name"));
  sql = raw_sql;
  if (slots)
    sql =
        q->service
            ? (q->name
                   ? ROLLUP_SQL("s.service = ?1", "r.service = ?1", "n.name")
                   : ROLLUP_SQL("s.service = ?1", "r.service = ?1", "+n.name"))
            : (q->name ? ROLLUP_SQL(ANY_SVC, ANY_RSVC, "n.name")
                       : ROLLUP_SQL(ANY_SVC, ANY_RSVC, "+n.name"));
#undef ANY_SVC
#undef ANY_RSVC
#undef SUMMARY_SQL
  int err = prep(db, sql, &st);
  if (err) {
    int rc = store_search_register(db);
    if (rc)
      return rc;
    err = prep(db, sql, &st);
  }
  if (err && slots) {
    /* A database no daemon has migrated to schema 6 yet: raw rows. */
    slots = 0;
    err = prep(db, raw_sql, &st);
  }
  if (err)
    return err;
  if (q->service)
    sqlite3_bind_text(st, 1, q->service, -1, SQLITE_STATIC);
  if (q->session)
    sqlite3_bind_text(st, 2, q->session, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, q->to_ns);
  sqlite3_bind_int64(st, 4, q->from_ns);
  sqlite3_bind_int64(st, 5, seq_floor(db, q->from_ns));
  char hi[1100];
  bind_name(st, 6, q->name, q->prefix, hi, sizeof hi);
  if (slots) {
    sqlite3_bind_int64(st, 8, h0);
    sqlite3_bind_int64(st, 9, h1);
    sqlite3_bind_int64(st, 10, h0 * STORE_ROLLUP_NS);
    sqlite3_bind_int64(st, 11, h1 * STORE_ROLLUP_NS);
    sqlite3_bind_int64(st, 12, start_floor(db, q->from_ns));
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    store_name_stats ns;
    memset(&ns, 0, sizeof ns);
    ns.kind = sqlite3_column_int(st, 0);
    ns.name = (const char *)sqlite3_column_text(st, 1);
    ns.name_len = (size_t)sqlite3_column_bytes(st, 1);
    if (!ns.name || (q->name && !spanbuf_name_matches(
                                    &(store_search_query){.name = q->name,
                                                          .prefix = q->prefix},
                                    ns.name, ns.name_len)))
      continue;
    ns.count = (uint64_t)sqlite3_column_int64(st, 2);
    ns.total_ns = (uint64_t)sqlite3_column_int64(st, 3);
    ns.min_ns = (uint64_t)sqlite3_column_int64(st, 4);
    ns.max_ns = (uint64_t)sqlite3_column_int64(st, 5);
    ns.gens = (uint64_t)sqlite3_column_int64(st, 6);
    const void *h = sqlite3_column_blob(st, 7);
    int hl = sqlite3_column_bytes(st, 7);
    if (hl > 0)
      gtp_sum_hist_decode(h, (size_t)hl, ns.hist);
    if (cb(ctx, &ns) != 0)
      break;
  }
  int stepped = rc;
  sqlite3_finalize(st);
  if (stepped != SQLITE_DONE && stepped != SQLITE_ROW)
    return store_sqlite_err(stepped);
  /* What the answer is missing while a migrated database is summarized. */
  int64_t below = read_below(db);
  if (below > 0 &&
      prep(db,
           "SELECT count(*) FROM generations g JOIN sessions s ON"
           " s.id = g.session_id WHERE g.seq <= ?1 AND g.start_ns < ?2 AND"
           " g.end_ns >= ?3 AND (?4 IS NULL OR s.service = ?4) AND"
           " (?5 IS NULL OR s.session = ?5) AND NOT EXISTS (SELECT 1 FROM"
           " sum_gens x WHERE x.seq = g.seq)",
           &st) == 0) {
    sqlite3_bind_int64(st, 1, below);
    sqlite3_bind_int64(st, 2, q->to_ns);
    sqlite3_bind_int64(st, 3, q->from_ns);
    if (q->service)
      sqlite3_bind_text(st, 4, q->service, -1, SQLITE_STATIC);
    if (q->session)
      sqlite3_bind_text(st, 5, q->session, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
      *pending = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  return 0;
}

int store_search_service_known(store_reader *r, const char *service) {
  sqlite3 *db = store_reader_db(r);
  sqlite3_stmt *st;
  int err = prep(db, "SELECT 1 FROM sessions WHERE service = ?1 LIMIT 1", &st);
  if (err)
    return err;
  sqlite3_bind_text(st, 1, service, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW)
    return 1;
  return rc == SQLITE_DONE ? 0 : store_sqlite_err(rc);
}
