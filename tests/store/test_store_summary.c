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
#include "sum_json.h"

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
                  "DROP TRIGGER generations_sum_del; DROP VIEW sum_spans;"
                  "DROP VIEW sum_counters; DROP VIEW sum_logs;"
                  "DROP TABLE sum_gens; DROP TABLE sum_names;"
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

/* One thread's "request" region begun (begin = 1) or ended in generation
 * gen of a session: a region that spans the edge between two generations. */
static store_gen *region_gen(unsigned session, uint64_t gen, int begin) {
  gtf_spec s;
  gtf_spec_init(&s, session, gen);
  /* gtf_session repeats after 256: a fleet needs more distinct ids. */
  s.session[0] = (uint8_t)session;
  s.session[1] = (uint8_t)(session >> 8);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  size_t body = b.len;
  gtp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = begin ? GTP_EV_REGION_BEGIN : GTP_EV_REGION_END;
  ev.ticks = s.start_ticks + 100;
  ev.args[0] = begin ? GTF_S_REQUEST : 0;
  uint8_t evb[GTP_EVENT_MAX];
  int n = gtp_event_encode(evb, &ev, s.start_ticks);
  assert_true(n > 0);
  gtp_put_batch(&b, gen, 1, s.start_ticks, 1, evb, (size_t)n);
  const uint64_t ids[] = {GTF_S_REQUEST};
  const gtp_str strs[] = {{"request", 7}};
  gtp_put_strings(&b, ids, strs, 1);
  gtp_clock c = {s.start_ticks,
                 s.start_mono_ns,
                 s.start_real_ns,
                 s.start_ticks + s.period_ns / 4,
                 s.start_mono_ns + s.period_ns,
                 s.start_real_ns + s.period_ns};
  gtp_put_clock(&b, &c);
  gtp_gen_end end;
  memset(&end, 0, sizeof end);
  end.gen = gen;
  assert_int_equal(gtp_manifest_compute(b.data + body, b.len - body, &end), 0);
  assert_int_equal(gtp_put_gen_end(&b, &end), 0);
  store_gen *g = calloc(1, sizeof *g);
  assert_non_null(g);
  memcpy(g->session, s.session, 16);
  g->service = sf_strdup(s.service);
  g->host = sf_strdup(s.host);
  g->agent_version = sf_strdup(s.agent_version);
  g->tags_json = sf_strdup("{}");
  g->pid = s.pid;
  g->process_start_ns = s.process_start_ns;
  g->gen = gen;
  g->start_ns = (int64_t)s.start_real_ns;
  g->end_ns = (int64_t)(s.start_real_ns + s.period_ns);
  g->end = end;
  g->payload = b.data;
  g->len = b.len;
  return g;
}

static void submit_wait(fx *f, store_gen *g) {
  size_t before = f->done.n;
  assert_int_equal(store_submit(f->s, g), 0);
  assert_int_equal(sf_done_wait(&f->done, before + 1), before + 1);
}

/* A region begun in one generation and ended in the next is one carried
 * span, for every session of a fleet: many sessions hold an open region at
 * once (some share a home slot of the carry table), and half of them end
 * theirs before the other half, so the entries left behind are found after
 * the table shifted others into the freed slots. */
static void
test_store_summary__regions_across_the_edge_are_carried(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  enum { SESSIONS = 1500 };
  for (unsigned i = 0; i < SESSIONS; i++)
    submit_wait(f, region_gen(i, 1, 1));
  for (unsigned pass = 0; pass < 2; pass++)
    for (unsigned i = pass; i < SESSIONS; i += 2)
      submit_wait(f, region_gen(i, 2, 0));
  assert_int_equal(q(f, "SELECT count(*) FROM sum_spans WHERE carried = 1"),
                   SESSIONS);
  assert_int_equal(
      q(f, "SELECT coalesce(sum(unmatched_ends), 0) FROM sum_gens"), 0);
  assert_int_equal(q(f, "SELECT count(DISTINCT seq) FROM sum_spans"
                        " WHERE carried = 1 AND name = 'request'"),
                   SESSIONS);
  /* Nothing is left open: a third generation with an end has no begin. */
  submit_wait(f, region_gen(7, 3, 0));
  assert_int_equal(q(f, "SELECT count(*) FROM sum_spans WHERE carried = 1"),
                   SESSIONS);
  assert_int_equal(q(f, "SELECT sum(unmatched_ends) FROM sum_gens"), 1);
}

/* A schema 8 database, whose spans, counters and logs are rows of their
 * own tables, is folded into sum_gens' JSON columns at open: the views
 * show exactly the rows the tables held, a name keeps its bytes (quote,
 * backslash, newline, NUL, a byte that is not UTF-8: search decodes the
 * column, sum_json.c), and new commits and deletes work on the new shape. */
static void test_store_summary__schema_8_tables_are_folded(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  submit_n(f, 3, 1, 5);
  submit_wait(f, region_gen(4, 1, 1));
  submit_wait(f, region_gen(4, 2, 0)); /* one carried span */
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(
      sf_sql_exec(
          f->dir.db,
          "CREATE TABLE old_spans AS SELECT * FROM sum_spans;"
          "CREATE TABLE old_counters AS SELECT * FROM sum_counters;"
          "CREATE TABLE old_logs AS SELECT * FROM sum_logs;"
          "DROP TRIGGER generations_sum_del; DROP VIEW sum_spans;"
          "DROP VIEW sum_counters; DROP VIEW sum_logs;"
          "ALTER TABLE sum_gens DROP COLUMN spans;"
          "ALTER TABLE sum_gens DROP COLUMN counters;"
          "ALTER TABLE sum_gens DROP COLUMN logs;" STORE_SCHEMA_SUMMARY_V4_SQL
          "INSERT INTO old_spans VALUES((SELECT min(seq) FROM sum_gens), 2,"
          " CAST(x'61225c0a0062ff' AS TEXT), 3, 4, 5000000, 0);"
          "INSERT INTO sum_spans SELECT * FROM old_spans;"
          "INSERT INTO sum_counters SELECT * FROM old_counters;"
          "INSERT INTO sum_logs SELECT * FROM old_logs;"
          "UPDATE meta SET value = '8' WHERE key = 'schema_version'"),
      SQLITE_OK);
  int64_t nspans = q(f, "SELECT count(*) FROM old_spans");
  assert_true(nspans >= 2);
  assert_true(q(f, "SELECT count(*) FROM old_counters") > 0);
  assert_true(q(f, "SELECT count(*) FROM old_logs") > 0);
  open_store(f, &c);
  assert_int_equal(q(f, "SELECT value FROM meta WHERE key = 'schema_version'"),
                   STORE_SCHEMA_VERSION);
  assert_int_equal(q(f, "SELECT count(*) FROM sqlite_master WHERE type ="
                        " 'table' AND name IN ('sum_spans', 'sum_counters',"
                        " 'sum_logs')"),
                   0);
  static const char *const same[] = {
      "SELECT count(*) FROM (SELECT * FROM old_spans EXCEPT"
      " SELECT * FROM sum_spans)",
      "SELECT count(*) FROM (SELECT * FROM sum_spans WHERE instr(name,"
      " char(10)) = 0 EXCEPT SELECT * FROM old_spans)",
      "SELECT count(*) FROM (SELECT * FROM old_counters EXCEPT"
      " SELECT * FROM sum_counters)",
      "SELECT count(*) FROM (SELECT * FROM sum_counters EXCEPT"
      " SELECT * FROM old_counters)",
      "SELECT count(*) FROM (SELECT * FROM old_logs EXCEPT"
      " SELECT * FROM sum_logs)",
      "SELECT count(*) FROM (SELECT * FROM sum_logs EXCEPT"
      " SELECT * FROM old_logs)",
  };
  /* The one name with a NUL is the one the views cut (json_each). */
  assert_int_equal(q(f, same[0]), 1);
  for (size_t i = 1; i < sizeof same / sizeof same[0]; i++)
    assert_int_equal(q(f, same[i]), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_spans"), nspans);
  /* The column itself holds the name's every byte. */
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(f->dir.db, &db), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT spans FROM sum_gens WHERE seq ="
                                      " (SELECT min(seq) FROM sum_gens)",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  sum_json_it it;
  sum_json_it_init(&it, sqlite3_column_blob(st, 0),
                   (size_t)sqlite3_column_bytes(st, 0));
  sum_json_span sp;
  int found = 0, rc;
  while ((rc = sum_json_span_next(&it, &sp)) == 1)
    found += sp.name_len == 7 && memcmp(sp.name, "a\"\\\n\0b\xff", 7) == 0 &&
             sp.kind == 2 && sp.dur_ns == 5000000 && sp.start_ns == 4;
  assert_int_equal(rc, 0);
  assert_int_equal(found, 1);
  sum_json_it_fini(&it);
  sqlite3_finalize(st);
  sqlite3_close(db);
  /* New commits write the new shape; deleting takes the folded rows. */
  submit_n(f, 3, 6, 2);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_logs WHERE name = 'http'"
                        " AND seq NOT IN (SELECT seq FROM old_logs)"),
                   2);
  assert_int_equal(sf_sql_exec(f->dir.db, "DELETE FROM payloads;"
                                          "DELETE FROM generations"),
                   SQLITE_OK);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_spans"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names"), 0);
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
      cmocka_unit_test_setup_teardown(
          test_store_summary__regions_across_the_edge_are_carried, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_summary__schema_8_tables_are_folded, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
