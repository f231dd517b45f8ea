/* pg_search.c: /v1/search and /v1/summary on the PostgreSQL catalog (see
 * pg_search.h; store_search.c is the SQLite twin whose rules this follows).
 *
 * Invariants:
 *   1. A candidate generation MUST be answered from gt_sum_spans only when
 *      its floor_ns <= the query's min (every span that long is stored
 *      there), otherwise from its decoded bytes plus its carried rows, as
 *      on SQLite, otherwise short spans of a capped generation would be
 *      missed and the backends would disagree.
 *   2. Candidates MUST be visited in seq order, descending, one page at a
 *      time, the next page strictly below the last seq seen, otherwise a
 *      generation could be answered twice or skipped.
 *   3. No result outlives the call, and each holds at most one page of
 *      candidates (and their span rows).
 *
 * Names are bytea in the catalog (pg_sum.c invariant 3): they go out as
 * hex parameters and come back through encode(..., 'hex').
 */
#include "config.h"

#include "pg_search.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "pg.h"
#include "pg_sum.h"
#include "spanbuf.h"
#include "summary.h"

/* ------------------------------------------------------------- helpers */

typedef struct params {
  char num[16][24];
  int n;
} params;

static const char *pnum(params *p, int64_t v) {
  char *s = p->num[p->n++ % 16];
  snprintf(s, 24, "%" PRId64, v);
  return s;
}

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t val_i(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col))
    return 0;
  return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* "\x" + hex of p[0..n) (+ 4 0xff bytes when hi), a bytea parameter.
 * malloc'd; NULL when out of memory. */
static char *bytea_param(const char *p, size_t n, int hi) {
  static const char d[] = "0123456789abcdef";
  size_t m = n + (hi ? 4 : 0);
  char *s = malloc(3 + 2 * m);
  if (!s)
    return NULL;
  s[0] = '\\';
  s[1] = 'x';
  for (size_t i = 0; i < m; i++) {
    uint8_t b = i < n ? (uint8_t)p[i] : 0xff;
    s[2 + 2 * i] = d[b >> 4];
    s[3 + 2 * i] = d[b & 15];
  }
  s[2 + 2 * m] = 0;
  return s;
}

/* The name range [lo, hi] of a query (store_search.c's bind_name): no
 * name: "" and NULL; exact: name, name; prefix: name, name + 0xff x 4. */
static int name_range(const char *name, int prefix, char **lo, char **hi) {
  *lo = *hi = NULL;
  if (!name) {
    *lo = strdup("\\x");
    return *lo ? 0 : -ENOMEM;
  }
  size_t n = strlen(name);
  *lo = bytea_param(name, n, 0);
  *hi = bytea_param(name, n, prefix);
  if (!*lo || !*hi) {
    free(*lo);
    free(*hi);
    *lo = *hi = NULL;
    return -ENOMEM;
  }
  return 0;
}

/* Hex text into bytes, in place (out may be s); returns the length. */
static size_t unhex(const char *s, size_t n, char *out) {
  size_t k = 0;
  for (size_t i = 0; i + 1 < n; i += 2) {
    int a = gtp_hex_digit((unsigned char)s[i]),
        b = gtp_hex_digit((unsigned char)s[i + 1]);
    if (a < 0 || b < 0)
      break;
    out[k++] = (char)(a << 4 | b);
  }
  return k;
}

/* Runs sql on a pooled connection: the result, or NULL with *rc. */
static PGresult *run(pg_cat *c, const char *sql, int np, const char *const *p,
                     int *rc) {
  PGconn *k;
  *rc = pg_get(pg_cat_pool(c), &k, NULL);
  if (*rc < 0)
    return NULL;
  PGresult *r = pg_exec_sql(k, sql, np, p, rc, NULL);
  pg_put(pg_cat_pool(c), k);
  return r;
}

/* One integer of a one-row statement (0 when NULL or no row). */
static int run_int(pg_cat *c, const char *sql, int np, const char *const *p,
                   int64_t *v) {
  int rc;
  PGresult *r = run(c, sql, np, p, &rc);
  if (!r)
    return rc;
  *v = PQntuples(r) > 0 ? val_i(r, 0, 0) : 0;
  PQclear(r);
  return 0;
}

static int read_below(pg_cat *c, int64_t *below) {
  return run_int(c,
                 "SELECT value::bigint FROM gt_meta"
                 " WHERE key = 'summary_below'",
                 0, NULL, below);
}

/* Lowest seq a generation overlapping [from, ...) can have (store_search.c
 * seq_floor; max_span_ns bounds every generation's length). */
static int seq_floor(pg_cat *c, int64_t from_ns, int64_t *floor) {
  *floor = 0;
  if (from_ns <= 0)
    return 0;
  params pp = {.n = 0};
  const char *p[] = {pnum(&pp, from_ns)};
  return run_int(
      c,
      "SELECT min(seq) FROM gt_generations WHERE start_ns >= $1::bigint"
      " - coalesce((SELECT value::bigint FROM gt_meta"
      " WHERE key = 'max_span_ns'), 0)",
      1, p, floor);
}

/* -------------------------------------------------------------- search */

/* Candidates, newest first, one page below $6 (store_search.c CAND_SQL). */
static const char cand_sql[] =
    "SELECT c.seq, g.gen, s.session, s.service, s.host, sg.floor_ns,"
    " sg.status FROM (SELECT n.seq AS seq FROM gt_sum_names n"
    "  WHERE n.name >= $1::bytea AND ($2::bytea IS NULL OR n.name <= $2)"
    "  AND n.max_ns >= $3::bigint AND n.min_ns <= $4::bigint"
    "  AND n.seq >= $5::bigint AND n.seq <= $6::bigint"
    " UNION SELECT g2.seq FROM gt_generations g2 WHERE g2.seq <= $7::bigint"
    "  AND g2.seq >= $5::bigint AND g2.seq <= $6::bigint"
    "  AND NOT EXISTS (SELECT 1 FROM gt_sum_gens x WHERE x.seq = g2.seq)) c"
    " JOIN gt_generations g ON g.seq = c.seq"
    " JOIN gt_sessions s ON s.id = g.session_id"
    " LEFT JOIN gt_sum_gens sg ON sg.seq = c.seq"
    " WHERE ($8::text IS NULL OR s.service = $8)"
    " AND ($9::text IS NULL OR s.session = $9)"
    " AND g.start_ns < $10::bigint AND g.end_ns >= $11::bigint"
    " ORDER BY c.seq DESC LIMIT $12::bigint";

/* The index rows of a page (one per generation, kind and name, the spans
 * packed: pg_sum.h) that may hold a match: of the generations in $5
 * (floor <= min) every one, of the others in $1 those with carried spans
 * (the caller keeps only those of them). */
static const char spans_sql[] =
    "SELECT seq, kind, encode(name, 'hex'), encode(spans, 'hex')"
    " FROM gt_sum_spans WHERE seq = ANY($1::bigint[])"
    " AND name >= $2::bytea AND ($3::bytea IS NULL OR name <= $3)"
    " AND max_ns >= $4::bigint"
    " AND (carried = 1 OR seq = ANY($5::bigint[]))"
    " ORDER BY seq DESC";

/* "{a,b,...}" of the seqs of candidates [i0, i1) that pass pick (1 all
 * summarized, 2 the ones answered from the index). */
static char *seq_array(const PGresult *r, int i0, int i1, uint64_t min_ns,
                       int pick) {
  char *s = malloc((size_t)(i1 - i0) * 21 + 3);
  if (!s)
    return NULL;
  size_t k = 0;
  s[k++] = '{';
  for (int i = i0; i < i1; i++) {
    if (PQgetisnull(r, i, 5) || val_i(r, i, 6) != 0)
      continue; /* not summarized, or not decodable */
    int64_t floor_ns = val_i(r, i, 5);
    if (pick == 2 && !(floor_ns >= 0 && (uint64_t)floor_ns <= min_ns))
      continue;
    k += (size_t)sprintf(s + k, "%s%s", k > 1 ? "," : "", PQgetvalue(r, i, 0));
  }
  s[k++] = '}';
  s[k] = 0;
  return s;
}

/* The spans of one gt_sum_spans row that match q (only the carried ones
 * unless the generation is answered from the index). 0 or -ENOMEM. */
static int add_group(spanbuf *buf, const store_search_query *q,
                     const PGresult *rows, int ri, int from_index) {
  const char *hex = PQgetvalue(rows, ri, 2);
  size_t hl = (size_t)PQgetlength(rows, ri, 2);
  const char *shex = PQgetvalue(rows, ri, 3);
  size_t sl = (size_t)PQgetlength(rows, ri, 3);
  char *name = malloc(hl / 2 + 1), *packed = malloc(sl / 2 + 1);
  int err = name && packed ? 0 : -ENOMEM;
  store_span_row r = {0};
  r.kind = (int)val_i(rows, ri, 1);
  r.name = name;
  r.name_len = name ? unhex(hex, hl, name) : 0;
  if (!err && spanbuf_name_matches(q, r.name, r.name_len)) {
    const uint8_t *p = (const uint8_t *)packed,
                  *end = p + unhex(shex, sl, packed);
    pg_sum_span sp;
    while (!err && pg_sum_span_next(&p, end, &sp) == 1) {
      if (!from_index && !sp.carried)
        continue; /* the bytes answer for the rest */
      r.thread = sp.thread;
      r.start_ns = sp.start_ns;
      r.dur_ns = sp.dur_ns;
      if (spanbuf_span_matches(q, r.start_ns, r.dur_ns))
        err = spanbuf_add(buf, &r);
    }
  }
  free(name);
  free(packed);
  return err;
}

typedef struct search_ctx {
  pg_cat *c;
  const store_search_query *q;
  char *lo, *hi;
  params pp;
} search_ctx;

/* The index rows of candidates [i0, i1), seq descending. */
static PGresult *chunk_spans(search_ctx *x, const PGresult *cand, int i0,
                             int i1, int *rc) {
  char *all = seq_array(cand, i0, i1, x->q->min_ns, 1);
  char *idx = seq_array(cand, i0, i1, x->q->min_ns, 2);
  PGresult *r = NULL;
  if (!all || !idx) {
    *rc = -ENOMEM;
  } else {
    const char *p[] = {all, x->lo, x->hi, pnum(&x->pp, clamp64(x->q->min_ns)),
                       idx};
    r = run(x->c, spans_sql, 5, p, rc);
  }
  free(all);
  free(idx);
  return r;
}

/* Candidates per page: PG_SEARCH_PAGE, or GENTRACE_TEST_SEARCH_PAGE (1 or
 * more) so tests cross page edges with a few generations. */
static int page_size(void) {
  const char *v = getenv("GENTRACE_TEST_SEARCH_PAGE");
  int n = v ? atoi(v) : 0;
  return n >= 1 && n <= PG_SEARCH_PAGE ? n : PG_SEARCH_PAGE;
}

int pg_search_spans(pg_cat *c, const store_search_query *q,
                    pg_search_fetch_fn fetch, void *fetch_ctx, store_span_cb cb,
                    void *ctx, int64_t *next_seq, uint64_t *next_skip) {
  const int page = page_size();
  *next_seq = 0;
  *next_skip = 0;
  search_ctx x = {.c = c, .q = q};
  int64_t floor = 0, below = 0;
  int err = name_range(q->name, q->prefix, &x.lo, &x.hi);
  if (!err)
    err = seq_floor(c, q->from_ns, &floor);
  if (!err)
    err = read_below(c, &below);
  spanbuf buf = {0};
  gtp_wbuf bytes;
  gtp_wbuf_init(&bytes, GTP_GEN_MAX_BYTES);
  int64_t top = q->cursor_seq > 0 ? q->cursor_seq : INT64_MAX;
  uint32_t sent = 0;
  int stop = 0;
  while (!err && !stop) {
    x.pp.n = 0;
    const char *p[] = {x.lo,
                       x.hi,
                       pnum(&x.pp, clamp64(q->min_ns)),
                       pnum(&x.pp, clamp64(q->max_ns)),
                       pnum(&x.pp, floor),
                       pnum(&x.pp, top),
                       pnum(&x.pp, below),
                       q->service,
                       q->session,
                       pnum(&x.pp, q->to_ns),
                       pnum(&x.pp, q->from_ns),
                       pnum(&x.pp, page)};
    PGresult *cand = run(c, cand_sql, 12, p, &err);
    if (!cand)
      break;
    int n = PQntuples(cand);
    /* The index rows come for chunks of 1, 2, 4, ... candidates: a page
     * that fills within the first generations reads no more of them. */
    PGresult *rows = NULL;
    int ri = 0, nrows = 0, chunk_end = 0, chunk = 1;
    for (int i = 0; !err && !stop && i < n; i++) {
      if (i == chunk_end) {
        PQclear(rows);
        chunk_end = i + chunk < n ? i + chunk : n;
        chunk = chunk < PG_SEARCH_PAGE ? chunk * 2 : chunk;
        if (!(rows = chunk_spans(&x, cand, i, chunk_end, &err)))
          break;
        ri = 0;
        nrows = PQntuples(rows);
      }
      int64_t seq = val_i(cand, i, 0);
      int summarized = !PQgetisnull(cand, i, 5);
      int64_t floor_ns = val_i(cand, i, 5);
      top = seq - 1; /* invariant 2 */
      /* Index rows of later (higher) seqs were consumed; skip to seq's. */
      while (ri < nrows && val_i(rows, ri, 0) > seq)
        ri++;
      if (summarized && val_i(cand, i, 6) != 0)
        continue; /* not decodable: no span of it can be shown */
      spanbuf_clear(&buf);
      int from_index = summarized && floor_ns >= 0 &&
                       (uint64_t)floor_ns <= q->min_ns; /* invariant 1 */
      if (!from_index) {
        /* invariant 1: the bytes hold the spans begun and ended here */
        gtp_wbuf_reset(&bytes);
        int rc = fetch(fetch_ctx, seq, &bytes);
        if (rc == 0 && bytes.err)
          rc = bytes.err;
        if (rc == 0)
          err = spanbuf_decode(&buf, q, bytes.data, bytes.len);
        else if (rc != GTP_E_NOTFOUND) /* deleted meanwhile: none */
          err = rc;
      }
      for (; !err && ri < nrows && val_i(rows, ri, 0) == seq; ri++)
        err = add_group(&buf, q, rows, ri, from_index);
      if (err)
        break;
      spanbuf_sort(&buf);
      uint64_t skip = seq == q->cursor_seq ? q->cursor_skip : 0;
      for (size_t k = skip; k < buf.n; k++) {
        if (q->limit && sent == q->limit) {
          *next_seq = seq;
          *next_skip = k;
          stop = 1;
          break;
        }
        store_span_row *row = &buf.rows[k];
        row->seq = seq;
        row->gen = (uint64_t)val_i(cand, i, 1);
        row->session = PQgetvalue(cand, i, 2);
        row->service = PQgetvalue(cand, i, 3);
        row->host = PQgetvalue(cand, i, 4);
        row->index = k;
        sent++;
        if (cb(ctx, row) != 0) {
          stop = 1;
          *next_seq = seq;
          *next_skip = k + 1;
          break;
        }
      }
    }
    PQclear(rows);
    PQclear(cand);
    if (n < page)
      break; /* the last page */
  }
  spanbuf_fini(&buf);
  gtp_wbuf_fini(&bytes);
  free(x.lo);
  free(x.hi);
  return err;
}

/* ------------------------------------------------------------- summary */

int pg_search_summary(pg_cat *c, const store_summary_query *q,
                      store_stats_cb cb, void *ctx, uint64_t *pending) {
  *pending = 0;
  char *lo, *hi;
  int64_t floor = 0;
  int err = name_range(q->name, q->prefix, &lo, &hi);
  if (err)
    return err;
  err = seq_floor(c, q->from_ns, &floor);
  PGresult *r = NULL;
  params pp = {.n = 0};
  if (!err) {
    const char *p[] = {q->service,
                       q->session,
                       pnum(&pp, q->to_ns),
                       pnum(&pp, q->from_ns),
                       pnum(&pp, floor),
                       lo,
                       hi};
    r = run(c,
            "SELECT n.kind, encode(n.name, 'hex'),"
            " least(sum(n.count), 9223372036854775807)::bigint,"
            " least(sum(n.total_ns), 9223372036854775807)::bigint,"
            " min(n.min_ns), max(n.max_ns), count(*),"
            " string_agg(encode(n.hist, 'hex'), ',')"
            " FROM gt_generations g JOIN gt_sessions s ON s.id = g.session_id"
            " JOIN gt_sum_names n ON n.seq = g.seq"
            " WHERE ($1::text IS NULL OR s.service = $1)"
            " AND ($2::text IS NULL OR s.session = $2)"
            " AND g.start_ns < $3::bigint AND g.end_ns >= $4::bigint"
            " AND g.seq >= $5::bigint AND n.seq >= $5::bigint"
            " AND n.name >= $6::bytea AND ($7::bytea IS NULL OR n.name <= $7)"
            " GROUP BY n.kind, n.name",
            7, p, &err);
  }
  free(lo);
  free(hi);
  int n = r ? PQntuples(r) : 0;
  char *name = NULL, *h = NULL;
  for (int i = 0; !err && i < n; i++) {
    store_name_stats ns;
    memset(&ns, 0, sizeof ns);
    ns.kind = (int)val_i(r, i, 0);
    size_t hl = (size_t)PQgetlength(r, i, 1);
    free(name);
    if (!(name = malloc(hl / 2 + 1))) {
      err = -ENOMEM;
      break;
    }
    ns.name = name;
    ns.name_len = unhex(PQgetvalue(r, i, 1), hl, name);
    name[ns.name_len] = 0;
    if (q->name &&
        !spanbuf_name_matches(
            &(store_search_query){.name = q->name, .prefix = q->prefix},
            ns.name, ns.name_len))
      continue;
    ns.count = (uint64_t)val_i(r, i, 2);
    ns.total_ns = (uint64_t)val_i(r, i, 3);
    ns.min_ns = (uint64_t)val_i(r, i, 4);
    ns.max_ns = (uint64_t)val_i(r, i, 5);
    ns.gens = (uint64_t)val_i(r, i, 6);
    /* The histograms of every generation, merged (decode adds). */
    const char *s = PQgetvalue(r, i, 7);
    size_t sl = (size_t)PQgetlength(r, i, 7);
    free(h);
    if (!(h = malloc(sl / 2 + 1))) {
      err = -ENOMEM;
      break;
    }
    for (size_t at = 0; at < sl;) {
      const char *comma = memchr(s + at, ',', sl - at);
      size_t part = comma ? (size_t)(comma - (s + at)) : sl - at;
      size_t bl = unhex(s + at, part, h);
      (void)gtp_sum_hist_decode((const uint8_t *)h, bl, ns.hist);
      at += part + 1;
    }
    if (cb(ctx, &ns) != 0)
      break;
  }
  free(name);
  free(h);
  PQclear(r);
  if (err)
    return err;
  /* What the answer is missing: generations cataloged before summaries. */
  int64_t below = 0;
  if ((err = read_below(c, &below)) < 0)
    return err;
  if (below > 0) {
    pp.n = 0;
    const char *p[] = {pnum(&pp, below), pnum(&pp, q->to_ns),
                       pnum(&pp, q->from_ns), q->service, q->session};
    int64_t v = 0;
    err = run_int(c,
                  "SELECT count(*) FROM gt_generations g JOIN gt_sessions s"
                  " ON s.id = g.session_id WHERE g.seq <= $1::bigint"
                  " AND g.start_ns < $2::bigint AND g.end_ns >= $3::bigint"
                  " AND ($4::text IS NULL OR s.service = $4)"
                  " AND ($5::text IS NULL OR s.session = $5)"
                  " AND NOT EXISTS (SELECT 1 FROM gt_sum_gens x"
                  " WHERE x.seq = g.seq)",
                  5, p, &v);
    *pending = (uint64_t)v;
  }
  return err;
}

int pg_search_service_known(pg_cat *c, const char *service) {
  const char *p[] = {service};
  int64_t v = 0;
  int rc = run_int(c, "SELECT 1 FROM gt_sessions WHERE service = $1 LIMIT 1", 1,
                   p, &v);
  return rc < 0 ? rc : v == 1;
}
