/* test_storage_search.c: the search and summary cases of the storage
 * interface's conformance suite (store/storage.h: storage_search_*), run on
 * both backends: the same real generations (tests/proto/gen_fixture.h:
 * "request" regions, "handle" tasks, counters, logs) submitted through the
 * interface must be found the same way -- spans by name, prefix, duration
 * and time, newest first, page by page with the cursor; per-name counts,
 * totals and histograms -- from SQLite and from the shared store (real
 * PostgreSQL and Swift s3api, when tests/store/test_shared.sh provides
 * them). SQLite's answers are also checked against what was emitted, and
 * the two dumps must be byte-identical (seqs written as their rank in
 * commit order, which each backend numbers its own way). */
#include "config.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "conform_fixture.h"
#include "gtp_error.h"

#define NSESS 3
#define NGEN 6
#define T0_NS INT64_C(1767225600000000000) /* 2026-01-01, the fixture's */

/* Generation gen of session s: periods of 0.5, 1 and 1.5 s (so span
 * lengths differ by generation), services api, api, db. */
static store_gen *scenario_gen(unsigned s, uint64_t gen) {
  static const char *svc[NSESS] = {"api", "api", "db"};
  sf_gen_opts o = {.session = s + 1,
                   .gen = gen,
                   .start_ns =
                       T0_NS + (int64_t)gen * 2000000000 + (int64_t)s * 1000000,
                   .period_ns = (int64_t)(1 + gen % 3) * 500000000,
                   .service = svc[s]};
  return sf_gen_new(&o);
}

/* A generation whose bytes are not a generation: summarized as such, and
 * never a search hit on either backend. */
static store_gen *garbage_gen(void) {
  store_gen *g = fixture_gen(0x77, "api", 1, 1767225700, 200);
  g->end.crc = 5;
  return g;
}

typedef struct dump {
  gtp_wbuf b;
  int64_t seqs[64]; /* commit order (the feed's) */
  int nseq;
} dump;

static int cmp_seq(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* A seq's rank in commit order (the feed lists seqs ascending). */
static int rank(const dump *d, int64_t seq) {
  const int64_t *at =
      bsearch(&seq, d->seqs, (size_t)d->nseq, sizeof seq, cmp_seq);
  return at ? (int)(at - d->seqs) : -1;
}

static int feed_row(void *ctx, const store_gen_row *g) {
  dump *d = ctx;
  if (d->nseq < 64)
    d->seqs[d->nseq++] = g->seq;
  return 0;
}

static int span_row(void *ctx, const store_span_row *s) {
  dump *d = ctx;
  gtp_wbuf_printf(&d->b,
                  "span #%d gen=%" PRIu64 " %s %s %s kind=%d %.*s "
                  "thread=%" PRIu64 " start=%" PRId64 " dur=%" PRIu64
                  " index=%" PRIu64 " decoded=%d\n",
                  rank(d, s->seq), s->gen, s->session, s->service, s->host,
                  s->kind, (int)s->name_len, s->name, s->thread, s->start_ns,
                  s->dur_ns, s->index, s->decoded);
  return 0;
}

static int stats_row(void *ctx, const store_name_stats *n) {
  dump *d = ctx;
  gtp_wbuf_printf(&d->b,
                  "name kind=%d %.*s count=%" PRIu64 " total=%" PRIu64
                  " min=%" PRIu64 " max=%" PRIu64 " gens=%" PRIu64 " hist",
                  n->kind, (int)n->name_len, n->name, n->count, n->total_ns,
                  n->min_ns, n->max_ns, n->gens);
  for (int b = 0; b < 68; b++)
    if (n->hist[b])
      gtp_wbuf_printf(&d->b, " %d:%" PRIu64, b, n->hist[b]);
  gtp_wbuf_printf(&d->b, "\n");
  return 0;
}

/* Every page of a search, limit spans a page. */
static void search(storage_reader *r, dump *d, const char *title,
                   store_search_query q, uint32_t limit) {
  gtp_wbuf_printf(&d->b, "-- search %s (limit %u)\n", title, limit);
  q.limit = limit;
  for (int page = 0; page < 1000; page++) {
    int64_t next = 0;
    uint64_t skip = 0;
    assert_int_equal(storage_search_spans(r, &q, span_row, d, &next, &skip), 0);
    if (next == 0)
      return;
    gtp_wbuf_printf(&d->b, "cursor #%d.%" PRIu64 "\n", rank(d, next), skip);
    q.cursor_seq = next;
    q.cursor_skip = skip;
  }
  fail_msg("search %s: too many pages", title);
}

static void summary(storage_reader *r, dump *d, const char *title,
                    store_summary_query q) {
  gtp_wbuf_printf(&d->b, "-- summary %s\n", title);
  uint64_t pending = 99;
  assert_int_equal(storage_search_summary(r, &q, stats_row, d, &pending), 0);
  gtp_wbuf_printf(&d->b, "unsummarized=%" PRIu64 "\n", pending);
}

/* Run between ingest and the queries when set (the upgrade case). */
static void (*before_queries)(const storage_config *cfg);

static char *run_scenario(const storage_config *cfg) {
  sf_done done;
  sf_done_init(&done);
  storage *st = NULL;
  char *cause = NULL;
  int rc = storage_open(cfg, sf_done_cb, &done, &st, &cause);
  if (rc < 0)
    fail_msg("storage_open: %s", cause ? cause : gtp_strerror(rc));
  size_t n = 0;
  for (uint64_t gen = 1; gen <= NGEN; gen++)
    for (unsigned s = 0; s < NSESS; s++, n++)
      assert_int_equal(storage_submit(st, scenario_gen(s, gen)), 0);
  assert_int_equal(storage_submit(st, garbage_gen()), 0);
  n++;
  assert_int_equal(sf_done_wait(&done, n), n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(done.recs[i].result, 0);
  if (before_queries)
    before_queries(cfg);
  storage_reader *r = NULL;
  assert_int_equal(storage_reader_open(st, &r, &cause), 0);
  dump d = {.nseq = 0};
  gtp_wbuf_init(&d.b, 0);
  assert_int_equal(storage_read_feed(r, 0, 0, feed_row, &d), 0);
  assert_int_equal(d.nseq, (int)n);

  char sid2[33];
  sf_session_hex(2, sid2);
  const int64_t all_to = T0_NS + 3600 * INT64_C(1000000000);
  const store_search_query any = {
      .min_ns = 0, .max_ns = UINT64_MAX, .from_ns = 0, .to_ns = all_to};
  store_search_query q = any;
  q.min_ns = 100000000; /* from the index (floor 1 ms) */
  search(r, &d, "over 100ms, fleet", q, 7);
  q.service = "api";
  q.name = "request";
  search(r, &d, "api request over 100ms", q, 5);
  q = any;
  q.name = "re";
  q.prefix = 1;
  q.min_ns = 1000; /* below the floor: decoded */
  search(r, &d, "prefix re*, over 1us (decoded)", q, 4);
  q = any;
  q.session = sid2;
  q.min_ns = 50000000;
  q.max_ns = 300000000;
  search(r, &d, "session 2, 50ms..300ms", q, 100);
  q = any;
  q.name = "handle";
  q.from_ns = T0_NS + 5 * INT64_C(1000000000);
  q.to_ns = T0_NS + 9 * INT64_C(1000000000);
  search(r, &d, "handle, start in [5 s, 9 s)", q, 3);
  q = any;
  q.name = "nothing";
  search(r, &d, "a name nobody used", q, 10);

  const store_summary_query sany = {.from_ns = 0, .to_ns = all_to};
  summary(r, &d, "fleet", sany);
  store_summary_query sq = sany;
  sq.service = "api";
  sq.name = "h";
  sq.prefix = 1;
  summary(r, &d, "api, prefix h*", sq);
  sq = sany;
  sq.session = sid2;
  sq.from_ns = T0_NS + 4 * INT64_C(1000000000);
  summary(r, &d, "session 2 from 4 s", sq);

  gtp_wbuf_printf(&d.b, "-- known api=%d db=%d nope=%d\n",
                  storage_search_service_known(r, "api"),
                  storage_search_service_known(r, "db"),
                  storage_search_service_known(r, "nope"));
  storage_reader_close(r);
  storage_close(st);
  sf_done_fini(&done);
  free(cause);
  gtp_wbuf_put(&d.b, "", 1);
  assert_int_equal(d.b.err, 0);
  return (char *)d.b.data;
}

static char *sqlite_dump;

static void test_storage_search__sqlite_backend_answers(void **state) {
  (void)state;
  sqlite_dump = conform_sqlite(run_scenario);
  /* What the fixture emitted: per thread (3) and generation, two
   * "request" regions and one "handle" task; 3 sessions x 6 generations. */
  assert_non_null(strstr(sqlite_dump, "name kind=1 request count=108 "));
  assert_non_null(strstr(sqlite_dump, "name kind=2 handle count=54 "));
  assert_non_null(strstr(sqlite_dump, "-- known api=1 db=1 nope=0\n"));
  assert_non_null(strstr(sqlite_dump, "decoded=1"));
  assert_non_null(strstr(sqlite_dump, "cursor #"));
  const char *none = strstr(sqlite_dump, "-- search a name nobody used");
  assert_non_null(none);
  assert_true(strncmp(strchr(none, '\n') + 1, "-- summary", 10) == 0);
}

static void
test_storage_search__shared_backend_answers_byte_identical(void **state) {
  (void)state;
  /* Pages of 4 candidate generations: searches cross page edges. */
  setenv("GENTRACE_TEST_SEARCH_PAGE", "4", 1);
  conform_shared("searchconf", run_scenario, sqlite_dump);
}

/* A catalog from before summaries (schema 3): its migration marks the
 * generations then cataloged as below summary_below, without rows. Made
 * here by taking the rows of the 6 oldest generations away. */
static void forget_oldest_summaries(const storage_config *cfg) {
  static const char *const sql[] = {
      "UPDATE gt_meta SET value = (SELECT min(seq) + 5 FROM gt_generations)"
      "::text WHERE key = 'summary_below' RETURNING 1",
      "DELETE FROM gt_sum_gens WHERE seq <= (SELECT value::bigint FROM gt_meta"
      " WHERE key = 'summary_below') RETURNING 1",
      "DELETE FROM gt_sum_names WHERE seq <= (SELECT value::bigint FROM"
      " gt_meta WHERE key = 'summary_below') RETURNING 1",
      "DELETE FROM gt_sum_spans WHERE seq <= (SELECT value::bigint FROM"
      " gt_meta WHERE key = 'summary_below') RETURNING 1",
      "SELECT count(*) FROM gt_sum_gens"};
  for (size_t i = 0; i < sizeof sql / sizeof *sql; i++)
    fixture_sql_int(cfg->catalog, sql[i]);
  assert_int_equal(fixture_sql_int(cfg->catalog, sql[4]), NSESS * NGEN + 1 - 6);
}

static size_t count_lines(const char *text, const char *prefix) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, prefix)) != NULL; p++)
    n += p == text || p[-1] == '\n';
  return n;
}

/* After an upgrade the older generations have no summary: search still
 * finds every span (decoding them), summary counts without them and says
 * how many it left out. */
static void
test_storage_search__shared_generations_from_before_summaries(void **state) {
  (void)state;
  assert_non_null(sqlite_dump);
  char db[256], objects[256];
  if (fixture_shared("searchold", db, sizeof db, objects, sizeof objects))
    skip();
  storage_config cfg = {
      .catalog = db, .objects = objects, .shared = {.max_age_ms = 200}};
  before_queries = forget_oldest_summaries;
  char *old = run_scenario(&cfg);
  before_queries = NULL;
  assert_int_equal(count_lines(old, "span #"),
                   count_lines(sqlite_dump, "span #"));
  /* 6 generations of 3 threads x 2 requests fewer: 108 - 36. */
  assert_non_null(strstr(old, "name kind=1 request count=72 "));
  assert_non_null(strstr(old, "unsummarized=6\n"));
  free(old);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_storage_search__sqlite_backend_answers),
      cmocka_unit_test(
          test_storage_search__shared_backend_answers_byte_identical),
      cmocka_unit_test(
          test_storage_search__shared_generations_from_before_summaries),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(sqlite_dump);
  return rc;
}
