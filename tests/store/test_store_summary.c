/* test_store_summary.c: summaries in the catalog (store/store_summary.c):
 * written with the generation, deleted with it, and built in the background
 * for a database migrated from schema 3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"
#include "store_schema.h"

static void submit_n(fx *f, unsigned session, uint64_t first, uint64_t n) {
  size_t before = f->done.n;
  for (uint64_t g = first; g < first + n; g++) {
    sf_gen_opts o = {.session = session, .gen = g};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  assert_int_equal(sf_done_wait(&f->done, before + n), before + n);
}

static int64_t q(fx *f, const char *sql) {
  return sf_sql_int(f->dir.db, sql);
}

/* Every committed generation has its summary, with the counts the fixture
 * emitted (gen_fixture.h: per thread two "request" regions, one "handle"
 * task, one counter sample, two "http" logs). */
static void
test_store_summary__commit_writes_rows_with_the_generation(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  submit_n(f, 3, 1, 5);
  assert_int_equal(q(f, "SELECT count(*) FROM generations"), 5);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens WHERE status = 0"), 5);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens g WHERE NOT EXISTS"
                        " (SELECT 1 FROM generations WHERE seq = g.seq)"),
                   0);
  assert_int_equal(
      q(f, "SELECT sum(count) FROM sum_names WHERE name = 'request'"), 5 * 6);
  assert_int_equal(q(f, "SELECT sum(count) FROM sum_names WHERE name = 'handle'"
                        " AND kind = 2"),
                   5 * 3);
  assert_int_equal(q(f, "SELECT sum(count) FROM sum_logs WHERE name = 'http'"),
                   5 * 6);
  assert_int_equal(
      q(f, "SELECT sum(count) FROM sum_counters WHERE name = 'queue_depth'"),
      5 * 3);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.summary_pending, 0);
}

/* Retention (and any other DELETE of a generation) takes its summary. */
static void test_store_summary__retention_deletes_the_summary(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.retain_ns = 3600LL * 1000000000LL; /* the fixture's 2026-01-01 is older */
  open_store(f, &c);
  submit_n(f, 3, 1, 4);
  store_stats st;
  assert_true(SF_WAIT_STATS(f->s, st, 10000, st.retention_deleted_gens >= 4));
  assert_int_equal(q(f, "SELECT count(*) FROM generations"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_logs"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_counters"), 0);
}

/* A schema 3 database gets the tables at open and its generations' summaries
 * in the background, with the progress in store_stats. */
static void test_store_summary__schema_3_is_backfilled(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  submit_n(f, 5, 1, 300); /* more than one tick's worth */
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "DROP TRIGGER generations_sum_del; DROP TABLE sum_gens;"
                  "DROP TABLE sum_names; DROP TABLE sum_spans;"
                  "DROP TABLE sum_counters; DROP TABLE sum_logs;"
                  "UPDATE meta SET value = '3' WHERE key = 'schema_version'"),
      SQLITE_OK);
  f->done.n = 0;
  open_store(f, &c);
  assert_int_equal(q(f, "SELECT value FROM meta WHERE key = 'schema_version'"),
                   STORE_SCHEMA_VERSION);
  store_stats st;
  assert_true(
      SF_WAIT_STATS(f->s, st, 20000,
                    st.summary_pending == 0 && st.summary_backfilled == 300));
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens WHERE status = 0"), 300);
  assert_int_equal(
      q(f, "SELECT sum(count) FROM sum_names WHERE name = 'request'"), 300 * 6);
  /* New commits are summarized at once, beside the backfilled ones. */
  submit_n(f, 5, 301, 2);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens"), 302);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_store_summary__commit_writes_rows_with_the_generation, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_summary__retention_deletes_the_summary, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_store_summary__schema_3_is_backfilled, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
