/* test_store_read.c: the read side (store/store_read.c) over a database
 * written by the real store. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_read.h"

#define SEC 1000000000LL
/* gen_fixture's epoch: 2026-01-01T00:00:00Z */
#define T0 1767225600000000000LL

/* Sessions of the data set (gen_fixture session numbers). */
enum { S1 = 21, S2 = 22, S3 = 23, S5 = 25 };

typedef struct fx {
  sf_dir dir;
  sf_done done;
  store_reader *r;
  int64_t nrows;
} fx;

static void add(store *s, unsigned session, uint64_t gen, int64_t start,
                int64_t period, const char *service, const char *host,
                const char *tags) {
  sf_gen_opts o = {.session = session,
                   .gen = gen,
                   .start_ns = start,
                   .period_ns = period,
                   .service = service,
                   .host = host,
                   .tags_json = tags};
  if (store_submit(s, sf_gen_new(&o)) != 0)
    abort();
}

/* S1 checkout/h1 env=prod: gens 0..4 over [T0, T0+5s), one second each.
 * S2 checkout/h2 env=dev: gens 0..2 from T0+0.5s.
 * S3 frontend/h1: gens 10, 11 at T0+10s, T0+11s.
 * S5 longsvc/h9: one 100 s generation from T0-50s. */
static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  sf_dir_make(&f->dir);
  sf_done_init(&f->done);
  f->done.keep = 256;
  store_config c = sf_config(&f->dir);
  store *s = NULL;
  char *cause = NULL;
  if (store_open(&c, sf_done_cb, &f->done, &s, &cause) != 0) {
    fprintf(stderr, "store_open: %s\n", cause);
    return -1;
  }
  const char *prod = "{\"env\":\"prod\",\"zone\":\"eu-1\"}";
  for (uint64_t g = 0; g < 5; g++)
    add(s, S1, g, T0 + (int64_t)g * SEC, 0, "checkout", "h1", prod);
  for (uint64_t g = 0; g < 3; g++)
    add(s, S2, g, T0 + SEC / 2 + (int64_t)g * SEC, 0, "checkout", "h2",
        "{\"env\":\"dev\"}");
  add(s, S3, 10, T0 + 10 * SEC, 0, "frontend", "h1", "{}");
  add(s, S3, 11, T0 + 11 * SEC, 0, "frontend", "h1", "{}");
  add(s, S5, 0, T0 - 50 * SEC, 100 * SEC, "longsvc", "h9", "not json");
  f->nrows = 11;
  if (sf_done_wait(&f->done, (size_t)f->nrows) != (size_t)f->nrows)
    return -1;
  store_close(s);
  if (store_reader_open(f->dir.db, &f->r, &cause) != 0) {
    fprintf(stderr, "store_reader_open: %s\n", cause);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  store_reader_close(f->r);
  sf_done_fini(&f->done);
  sf_dir_remove(&f->dir);
  free(f);
  return 0;
}

/* ----------------------------------------------------------- collectors */

typedef struct rows {
  size_t n;
  int stop_after; /* > 0: return 7 after this many rows */
  int64_t seq[64];
  uint64_t gen[64];
  char session[64][33];
  char service[64][16];
} rows;

static int gen_cb(void *ctx, const store_gen_row *row) {
  rows *r = ctx;
  if (r->n < 64) {
    r->seq[r->n] = row->seq;
    r->gen[r->n] = row->gen;
    snprintf(r->session[r->n], 33, "%s", row->session);
    snprintf(r->service[r->n], 16, "%s", row->service);
  }
  r->n++;
  if (r->stop_after && r->n == (size_t)r->stop_after)
    return 7;
  return 0;
}

typedef struct srows {
  size_t n;
  store_session_row row[8];
  char session[8][33];
  char tags[8][64];
} srows;

static int session_cb(void *ctx, const store_session_row *row) {
  srows *r = ctx;
  if (r->n < 8) {
    r->row[r->n] = *row;
    snprintf(r->session[r->n], 33, "%s", row->session);
    snprintf(r->tags[r->n], 64, "%s", row->tags_json);
  }
  r->n++;
  return 0;
}

static const store_session_row *find_session(srows *r, unsigned n,
                                             char tags_out[64]) {
  char hex[33];
  sf_session_hex(n, hex);
  for (size_t i = 0; i < r->n && i < 8; i++)
    if (strcmp(r->session[i], hex) == 0) {
      if (tags_out)
        memcpy(tags_out, r->tags[i], 64);
      return &r->row[i];
    }
  return NULL;
}

static size_t list_sessions(fx *f, const char *service, const char *host,
                            const char *k, const char *v, srows *out) {
  memset(out, 0, sizeof *out);
  store_session_filter flt = {service, host, k, v};
  assert_int_equal(store_read_sessions(f->r, &flt, session_cb, out), 0);
  return out->n;
}

/* --------------------------------------------------------------- tests */

static void test_store_read_sessions__aggregates_per_session(void **state) {
  fx *f = *state;
  srows r;
  assert_int_equal(list_sessions(f, NULL, NULL, NULL, NULL, &r), 4);
  char tags[64];
  const store_session_row *s1 = find_session(&r, S1, tags);
  assert_non_null(s1);
  assert_string_equal(tags, "{\"env\":\"prod\",\"zone\":\"eu-1\"}");
  assert_int_equal(s1->generations, 5);
  assert_int_equal(s1->has_gens, 1);
  assert_int_equal(s1->first_gen, 0);
  assert_int_equal(s1->last_gen, 4);
  gtf_spec sp;
  gtf_spec_init(&sp, S1, 0);
  assert_int_equal(s1->events, 5 * gtf_events(&sp));
  /* Ledger per gen: dropped = gen % 3, evicted = gen % 2 (gen_fixture). */
  assert_int_equal(s1->lost, 0 + 2 + 2 + 1 + 1);
  assert_int_equal(s1->pid, 4000 + S1);
  assert_true(s1->last_seen_ns >= s1->first_seen_ns);
  uint64_t bytes = 0;
  for (size_t i = 0; i < f->done.nkept; i++)
    if (memcmp(f->done.kept[i]->session, sp.session, 16) == 0)
      bytes += f->done.kept[i]->len;
  assert_int_equal(s1->bytes, bytes);
  /* Invalid tag JSON from an agent is stored as an empty object. */
  const store_session_row *s5 = find_session(&r, S5, tags);
  assert_non_null(s5);
  assert_string_equal(tags, "{}");
}

static void test_store_read_sessions__filters_are_exact(void **state) {
  fx *f = *state;
  srows r;
  assert_int_equal(list_sessions(f, "checkout", NULL, NULL, NULL, &r), 2);
  assert_int_equal(list_sessions(f, "check", NULL, NULL, NULL, &r), 0);
  assert_int_equal(list_sessions(f, NULL, "h1", NULL, NULL, &r), 2);
  assert_int_equal(list_sessions(f, "checkout", "h2", NULL, NULL, &r), 1);
  assert_non_null(find_session(&r, S2, NULL));
  assert_int_equal(list_sessions(f, NULL, NULL, "env", "prod", &r), 1);
  assert_non_null(find_session(&r, S1, NULL));
  assert_int_equal(list_sessions(f, NULL, NULL, "env", "dev", &r), 1);
  assert_non_null(find_session(&r, S2, NULL));
  assert_int_equal(list_sessions(f, NULL, NULL, "env", "pro", &r), 0);
  assert_int_equal(list_sessions(f, NULL, NULL, "env", "prod%", &r), 0);
  assert_int_equal(list_sessions(f, NULL, NULL, "zone", NULL, &r), 1);
  assert_int_equal(list_sessions(f, NULL, NULL, "nope", NULL, &r), 0);
}

static void test_store_read_session_gens__range_after_limit(void **state) {
  fx *f = *state;
  char hex[33];
  sf_session_hex(S1, hex);
  rows r = {0};
  assert_int_equal(
      store_read_session_gens(f->r, hex, 0, INT64_MAX, -1, 0, gen_cb, &r), 0);
  assert_int_equal(r.n, 5);
  for (size_t i = 0; i < 5; i++)
    assert_int_equal(r.gen[i], i);
  memset(&r, 0, sizeof r);
  assert_int_equal(store_read_session_gens(f->r, hex, T0 + SEC, T0 + 3 * SEC,
                                           -1, 0, gen_cb, &r),
                   0);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.gen[0], 1);
  assert_int_equal(r.gen[1], 2);
  memset(&r, 0, sizeof r);
  assert_int_equal(
      store_read_session_gens(f->r, hex, 0, INT64_MAX, 1, 2, gen_cb, &r), 0);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.gen[0], 2);
  assert_int_equal(r.gen[1], 3);
  /* Known session, nothing in range: 0 rows, not an error. */
  memset(&r, 0, sizeof r);
  assert_int_equal(store_read_session_gens(f->r, hex, T0 + 100 * SEC, INT64_MAX,
                                           -1, 0, gen_cb, &r),
                   0);
  assert_int_equal(r.n, 0);
  assert_int_equal(store_read_session_gens(f->r,
                                           "00000000000000000000000000000000",
                                           0, INT64_MAX, -1, 0, gen_cb, &r),
                   GTP_E_NOTFOUND);
}

static rows window(fx *f, const char *session_n, const char *service,
                   const char *host, int64_t from, int64_t to) {
  rows r;
  memset(&r, 0, sizeof r);
  store_window_query q = {session_n, service, host, from, to};
  assert_int_equal(store_read_window(f->r, &q, gen_cb, &r), 0);
  return r;
}

static void test_store_read_window__overlap_edges_by_session(void **state) {
  fx *f = *state;
  char hex[33];
  sf_session_hex(S1, hex);
  /* gen 0 ends exactly at from, gen 2 starts exactly at to: both out. */
  rows r = window(f, hex, NULL, NULL, T0 + SEC, T0 + 2 * SEC);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.gen[0], 1);
  r = window(f, hex, NULL, NULL, T0 + SEC - 1, T0 + SEC + 1);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.gen[0], 0);
  assert_int_equal(r.gen[1], 1);
  r = window(f, hex, NULL, NULL, T0 + 5 * SEC, T0 + 6 * SEC);
  assert_int_equal(r.n, 0);
  r = window(f, hex, NULL, NULL, T0 - 10 * SEC, T0);
  assert_int_equal(r.n, 0);
  r = window(f, hex, NULL, NULL, 0, INT64_MAX);
  assert_int_equal(r.n, 5);
  r = window(f, hex, NULL, NULL, T0 + 3 * SEC, T0 + 3 * SEC); /* empty */
  assert_int_equal(r.n, 0);
}

static void
test_store_read_window__service_and_host_in_start_order(void **state) {
  fx *f = *state;
  char h1[33], h2[33];
  sf_session_hex(S1, h1);
  sf_session_hex(S2, h2);
  rows r = window(f, NULL, "checkout", NULL, T0 + SEC, T0 + 2 * SEC);
  assert_int_equal(r.n, 3);
  /* S2 gen 0 [0.5, 1.5), S1 gen 1 [1, 2), S2 gen 1 [1.5, 2.5) */
  assert_string_equal(r.session[0], h2);
  assert_int_equal(r.gen[0], 0);
  assert_string_equal(r.session[1], h1);
  assert_int_equal(r.gen[1], 1);
  assert_string_equal(r.session[2], h2);
  assert_int_equal(r.gen[2], 1);
  assert_string_equal(r.service[0], "checkout");
  r = window(f, NULL, "checkout", "h2", T0 + SEC, T0 + 2 * SEC);
  assert_int_equal(r.n, 2);
  assert_string_equal(r.session[0], h2);
  assert_string_equal(r.session[1], h2);
  r = window(f, NULL, "frontend", "h1", 0, INT64_MAX);
  assert_int_equal(r.n, 2);
  r = window(f, NULL, "nosuch", NULL, 0, INT64_MAX);
  assert_int_equal(r.n, 0);
  store_window_query bad = {NULL, NULL, NULL, 0, 1};
  assert_int_equal(store_read_window(f->r, &bad, gen_cb, &r), GTP_E_BADARG);
}

static void
test_store_read_window__long_generation_found_from_inside(void **state) {
  fx *f = *state;
  /* S5's only generation spans [T0-50s, T0+50s): a window deep inside it
   * must find it although its start is far below the window. */
  rows r = window(f, NULL, "longsvc", NULL, T0 + 40 * SEC, T0 + 41 * SEC);
  assert_int_equal(r.n, 1);
  char hex[33];
  sf_session_hex(S5, hex);
  r = window(f, hex, NULL, NULL, T0 + 49 * SEC, T0 + 60 * SEC);
  assert_int_equal(r.n, 1);
  r = window(f, hex, NULL, NULL, T0 + 50 * SEC, T0 + 60 * SEC);
  assert_int_equal(r.n, 0);
}

/* The scan's lower bound follows the spans of the rows kept now: a row
 * that spans everything is found while it is there (the bound grows with
 * it), and once it is deleted, whichever way, the bound shrinks back with
 * its bucket (gen_spans, schema 10), so one absurd row no longer slows
 * every later query. */
static void
test_store_read_window__span_bound_follows_the_rows_kept(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  store *s = NULL;
  char *cause = NULL;
  assert_int_equal(store_open(&c, sf_done_cb, &f->done, &s, &cause), 0);
  f->done.n = 0;
  /* The absurd row, S1's (checkout), committed by the store (the door
   * checks that refuse it live in the daemon): found from any window. */
  add(s, S1, 99, 1, INT64_MAX - 1, "checkout", "h1", "{}");
  assert_int_equal(sf_done_wait(&f->done, 1), 1);
  assert_int_equal(f->done.recs[0].result, 0);
  store_close(s);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT max(max_span) FROM gen_spans"),
                   INT64_MAX - 1);
  rows r = window(f, NULL, "checkout", NULL, T0 + 1000 * SEC,
                  T0 + 1001 * SEC);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.gen[0], 99);
  assert_int_equal(sf_sql_exec(f->dir.db,
                               "DELETE FROM generations WHERE gen = 99"),
                   SQLITE_OK);
  r = window(f, NULL, "checkout", NULL, T0 + 1000 * SEC, T0 + 1001 * SEC);
  assert_int_equal(r.n, 0);
  /* The bound is the longest kept span (S5's 100 s), read per query:
   * the delete dropped the absurd row's bucket with it. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT max(end_ns - start_ns)"
                                         " FROM generations"),
                   100 * SEC);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT max(max_span) FROM gen_spans"),
                   100 * SEC);
  assert_int_equal(
      sf_sql_int(f->dir.db, "SELECT count(*) FROM gen_spans WHERE bucket = 0"),
      0);
  r = window(f, NULL, "longsvc", NULL, T0 + 40 * SEC, T0 + 41 * SEC);
  assert_int_equal(r.n, 1);
}

static void test_store_read_window__callback_stop_is_returned(void **state) {
  fx *f = *state;
  rows r;
  memset(&r, 0, sizeof r);
  r.stop_after = 2;
  store_window_query q = {NULL, "checkout", NULL, 0, INT64_MAX};
  assert_int_equal(store_read_window(f->r, &q, gen_cb, &r), 7);
  assert_int_equal(r.n, 2);
}

static void test_store_read_feed__seq_order_after_and_limit(void **state) {
  fx *f = *state;
  rows r = {0};
  assert_int_equal(store_read_feed(f->r, 0, 0, gen_cb, &r), 0);
  assert_int_equal(r.n, f->nrows);
  for (size_t i = 0; i < r.n; i++)
    assert_int_equal(r.seq[i], (int64_t)i + 1);
  memset(&r, 0, sizeof r);
  assert_int_equal(store_read_feed(f->r, 3, 2, gen_cb, &r), 0);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.seq[0], 4);
  assert_int_equal(r.seq[1], 5);
  memset(&r, 0, sizeof r);
  assert_int_equal(store_read_feed(f->r, f->nrows, 10, gen_cb, &r), 0);
  assert_int_equal(r.n, 0);
  int64_t max = 0;
  assert_int_equal(store_read_max_seq(f->r, &max), 0);
  assert_int_equal(max, f->nrows);
}

static void test_store_read_feed_since__starts_at_first_commit_after(
    void **state) {
  fx *f = *state;
  /* Commit times 1000 * seq, then a hole (3..7 deleted, as retention or a
   * size limit would). */
  assert_int_equal(
      sf_sql_exec(f->dir.db, "UPDATE generations SET committed_ns = seq * 1000;"
                             "DELETE FROM generations WHERE seq BETWEEN 3 AND 7"),
      SQLITE_OK);
  int64_t after = -1, n = f->nrows;
  assert_true(n >= 10);
  assert_int_equal(store_read_feed_since(f->r, 0, &after), 0);
  assert_int_equal(after, 0); /* everything, from seq 1 */
  assert_int_equal(store_read_feed_since(f->r, 2000, &after), 0);
  assert_int_equal(after, 1);
  assert_int_equal(store_read_feed_since(f->r, 2001, &after), 0);
  assert_int_equal(after, 7); /* seq 8 is the next one kept */
  assert_int_equal(store_read_feed_since(f->r, 4500, &after), 0);
  assert_int_equal(after, 7);
  assert_int_equal(store_read_feed_since(f->r, 9000, &after), 0);
  assert_int_equal(after, 8);
  assert_int_equal(store_read_feed_since(f->r, n * 1000, &after), 0);
  assert_int_equal(after, n - 1);
  /* Nothing since: start at the newest, so only new commits follow. */
  assert_int_equal(store_read_feed_since(f->r, n * 1000 + 1, &after), 0);
  assert_int_equal(after, n);
  rows r = {0};
  assert_int_equal(store_read_feed_since(f->r, 2001, &after), 0);
  assert_int_equal(store_read_feed(f->r, after, 1, gen_cb, &r), 0);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.seq[0], 8);
}

static void test_store_read_explain__window_and_feed_use_indexes(void **state) {
  fx *f = *state;
  const int queries[] = {STORE_RQ_WINDOW_SESSION,      STORE_RQ_WINDOW_SERVICE,
                         STORE_RQ_WINDOW_SERVICE_HOST, STORE_RQ_FEED,
                         STORE_RQ_SESSION_GENS,        STORE_RQ_PAYLOAD};
  for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(store_read_explain(f->r, queries[i], &b), 0);
    gtp_wbuf_put(&b, "", 1);
    const char *plan = (const char *)b.data;
    assert_non_null(strstr(plan, "SEARCH g "));
    /* A full scan of generations would read "SCAN g" (no index). */
    for (const char *l = plan; *l;) {
      const char *nl = strchr(l, '\n');
      size_t len = nl ? (size_t)(nl - l) : strlen(l);
      if (len >= 6 && strncmp(l, "SCAN g", 6) == 0 && (len == 6 || l[6] == ' '))
        fail_msg("query %d scans generations: %.*s", queries[i], (int)len, l);
      l += len + (nl ? 1 : 0);
    }
    if (queries[i] == STORE_RQ_WINDOW_SESSION)
      assert_non_null(strstr(plan, "generations_by_time"));
    gtp_wbuf_fini(&b);
  }
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(store_read_explain(f->r, STORE_RQ_COUNT_, &b), GTP_E_BADARG);
  gtp_wbuf_fini(&b);
}

/* /v1/agents is polled by every open dashboard: the listing reads the
 * totals the triggers keep (schema 2, test_store checks they are exact)
 * instead of aggregating every generation ever kept. Proven by changing a
 * kept total behind the store's back: an aggregating query would not see it.
 * (EXPLAIN cannot tell: walking a session's rows by index looks like a
 * search.) */
static void test_store_read_sessions__read_the_kept_totals(void **state) {
  fx *f = *state;
  char hex[33], sql[200];
  sf_session_hex(S1, hex);
  snprintf(sql, sizeof sql,
           "UPDATE sessions SET events = 123456789, lost = 77"
           " WHERE session = '%s'",
           hex);
  assert_int_equal(sf_sql_exec(f->dir.db, sql), SQLITE_OK);
  srows r;
  assert_int_equal(list_sessions(f, NULL, NULL, NULL, NULL, &r), 4);
  const store_session_row *s1 = find_session(&r, S1, NULL);
  assert_non_null(s1);
  assert_int_equal(s1->events, 123456789);
  assert_int_equal(s1->lost, 77);
  /* first/last gen still come from the rows (two index probes). */
  assert_int_equal(s1->first_gen, 0);
  assert_int_equal(s1->last_gen, 4);
}

static void test_store_read_payload__round_trip_decodes(void **state) {
  fx *f = *state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  for (size_t i = 0; i < f->done.nkept; i++) {
    const store_gen *g = f->done.kept[i];
    gtp_wbuf_reset(&b);
    assert_int_equal(store_read_payload(f->r, g->seq, &b), 0);
    assert_int_equal(b.len, g->len);
    assert_memory_equal(b.data, g->payload, g->len);
    gtp_gen pg;
    size_t used = 0;
    assert_int_equal(gtp_gen_parse(b.data, b.len, &pg, &used), 0);
    assert_int_equal(pg.start.gen, g->gen);
    assert_memory_equal(pg.start.session, g->session, 16);
    gtp_gen_fini(&pg);
    char hex[33];
    gtp_session_hex(g->session, hex);
    gtp_wbuf_reset(&b);
    assert_int_equal(store_read_payload_by_gen(f->r, hex, g->gen, &b), 0);
    assert_int_equal(b.len, g->len);
    assert_memory_equal(b.data, g->payload, g->len);
  }
  /* Appends: a second read lands after the first. */
  gtp_wbuf_reset(&b);
  assert_int_equal(store_read_payload(f->r, 1, &b), 0);
  size_t one = b.len;
  assert_int_equal(store_read_payload(f->r, 1, &b), 0);
  assert_int_equal(b.len, 2 * one);
  assert_memory_equal(b.data, b.data + one, one);
  gtp_wbuf_reset(&b);
  assert_int_equal(store_read_payload(f->r, 9999, &b), GTP_E_NOTFOUND);
  char hex[33];
  sf_session_hex(S1, hex);
  assert_int_equal(store_read_payload_by_gen(f->r, hex, 77, &b),
                   GTP_E_NOTFOUND);
  assert_int_equal(b.len, 0);
  gtp_wbuf_fini(&b);
}

static int corrupt_and_read(fx *f, const char *sql, int64_t seq) {
  assert_int_equal(sf_sql_exec(f->dir.db, sql), SQLITE_OK);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_wbuf_put(&b, "keep", 4);
  int rc = store_read_payload(f->r, seq, &b);
  /* Nothing of a bad row may stay in the caller's buffer. */
  assert_int_equal(b.len, 4);
  gtp_wbuf_fini(&b);
  return rc;
}

static void test_store_read_payload__corrupt_rows_are_errors(void **state) {
  fx *f = *state;
  /* seq 1..5 are S1's compressible fixture gens: stored as zstd. */
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations WHERE seq <= 5"
                              " AND codec = 'zstd'"),
                   5);
  assert_int_equal(
      corrupt_and_read(
          f,
          "UPDATE payloads SET data = x'28b52ffd' || randomblob(60)"
          " WHERE seq = 1",
          1),
      GTP_E_CORRUPT);
  assert_int_equal(corrupt_and_read(f,
                                    "UPDATE payloads SET data = substr(data, 1,"
                                    " length(data) - 9) WHERE seq = 2",
                                    2),
                   GTP_E_CORRUPT);
  assert_int_equal(
      corrupt_and_read(
          f, "UPDATE generations SET bytes = 4000000000 WHERE seq = 3", 3),
      GTP_E_CORRUPT);
  assert_int_equal(
      corrupt_and_read(f, "UPDATE generations SET codec = 'lz4' WHERE seq = 4",
                       4),
      GTP_E_CORRUPT);
  assert_int_equal(
      corrupt_and_read(f, "UPDATE generations SET codec = 'none' WHERE seq = 5",
                       5),
      GTP_E_CORRUPT);
  assert_int_equal(
      corrupt_and_read(f, "UPDATE payloads SET data = x'' WHERE seq = 6", 6),
      GTP_E_CORRUPT);
  /* An untouched row still reads. */
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(store_read_payload(f->r, 7, &b), 0);
  gtp_wbuf_fini(&b);
}

/* Checkpoint with TRUNCATE from a separate writer connection: it only
 * succeeds when no reader holds a transaction. */
static int checkpoint_truncate(const char *db) {
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(h, 100);
    rc = sqlite3_exec(h,
                      "INSERT OR REPLACE INTO meta(key, value)"
                      " VALUES('t', randomblob(1000))",
                      NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK)
    rc = sqlite3_wal_checkpoint_v2(h, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL,
                                   NULL);
  sqlite3_close(h);
  return rc;
}

typedef struct ckpt_ctx {
  const char *db;
  int rc_inside;
} ckpt_ctx;

static int ckpt_inside_cb(void *ctx, const store_gen_row *row) {
  ckpt_ctx *c = ctx;
  c->rc_inside = checkpoint_truncate(c->db);
  return 1;
}

static int noop_gen_cb(void *ctx, const store_gen_row *row) {
  return 0;
}
static int noop_session_cb(void *ctx, const store_session_row *row) {
  return 0;
}

static void test_store_read__no_transaction_outlives_a_call(void **state) {
  fx *f = *state;
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", f->dir.db);
  /* Control: while a call is running (inside its callback) the reader's
   * snapshot blocks the TRUNCATE checkpoint, so the check below can fail. */
  ckpt_ctx c = {f->dir.db, 0};
  store_window_query q = {NULL, "checkout", NULL, 0, INT64_MAX};
  assert_int_equal(store_read_window(f->r, &q, ckpt_inside_cb, &c), 1);
  assert_int_equal(c.rc_inside & 0xff, SQLITE_BUSY);

  /* After each kind of call (including one stopped early) it succeeds. */
  char hex[33];
  sf_session_hex(S1, hex);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int64_t max;
  for (int k = 0; k < 7; k++) {
    switch (k) {
    case 0:
      store_read_window(f->r, &q, noop_gen_cb, NULL);
      break;
    case 1:
      store_read_feed(f->r, 0, 3, noop_gen_cb, NULL);
      break;
    case 2:
      store_read_sessions(f->r, NULL, noop_session_cb, NULL);
      break;
    case 3:
      store_read_session_gens(f->r, hex, 0, INT64_MAX, -1, 2, noop_gen_cb,
                              NULL);
      break;
    case 4:
      store_read_payload(f->r, 2, &b);
      break;
    case 5:
      store_read_max_seq(f->r, &max);
      break;
    case 6: {
      rows r;
      memset(&r, 0, sizeof r);
      r.stop_after = 1;
      store_read_feed(f->r, 0, 0, gen_cb, &r);
      break;
    }
    }
    assert_int_equal(checkpoint_truncate(f->dir.db), SQLITE_OK);
    assert_int_equal(sf_file_size(wal), 0);
  }
  gtp_wbuf_fini(&b);
}

static void
test_store_reader_open__missing_file_fails_with_cause(void **state) {
  fx *f = *state;
  char path[200];
  snprintf(path, sizeof path, "%s/absent.db", f->dir.dir);
  store_reader *r = NULL;
  char *cause = NULL;
  assert_true(store_reader_open(path, &r, &cause) < 0);
  assert_null(r);
  assert_non_null(cause);
  assert_non_null(strstr(cause, "absent.db"));
  free(cause);
  /* Opening read-only must not have created it. */
  assert_int_equal(access(path, F_OK), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_read_sessions__aggregates_per_session),
      T(test_store_read_sessions__filters_are_exact),
      T(test_store_read_session_gens__range_after_limit),
      T(test_store_read_window__overlap_edges_by_session),
      T(test_store_read_window__service_and_host_in_start_order),
      T(test_store_read_window__long_generation_found_from_inside),
      T(test_store_read_window__span_bound_follows_the_rows_kept),
      T(test_store_read_window__callback_stop_is_returned),
      T(test_store_read_feed__seq_order_after_and_limit),
      T(test_store_read_feed_since__starts_at_first_commit_after),
      T(test_store_read_explain__window_and_feed_use_indexes),
      T(test_store_read_sessions__read_the_kept_totals),
      T(test_store_read_payload__round_trip_decodes),
      T(test_store_read_payload__corrupt_rows_are_errors),
      T(test_store_read__no_transaction_outlives_a_call),
      T(test_store_reader_open__missing_file_fails_with_cause),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
