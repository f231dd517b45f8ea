/* test_store_setup.c: schema 10 as store_setup.c makes and migrates it:
 * seq never issued twice without AUTOINCREMENT (meta.seq_reserved), the span
 * buckets (gen_spans) that bound window queries, and the migration of a
 * schema 9 file in place. Real SQLite files, the real store. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"
#include "store_read.h"
#include "store_schema.h"

#define SEC 1000000000LL

static void close_store(fx *f) {
  store_close(f->s);
  f->s = NULL;
}

/* Commits generation gen of session n starting at start (0: the
 * fixture's), period long (0: 1 s); returns its seq. */
static int64_t commit(fx *f, unsigned n, uint64_t gen, int64_t start,
                      int64_t period) {
  sf_gen_opts o = {
      .session = n, .gen = gen, .start_ns = start, .period_ns = period};
  size_t before = f->done.n;
  assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  assert_int_equal(sf_done_wait(&f->done, before + 1), before + 1);
  assert_int_equal(f->done.recs[before].result, 0);
  return f->done.recs[before].seq;
}

/* Generation rows whose span bucket has no row bounding their span (the
 * invariant window queries rest on): 0. */
static int64_t spans_uncovered(fx *f) {
  return sf_sql_int(f->dir.db,
                    "SELECT count(*) FROM generations g WHERE NOT EXISTS"
                    " (SELECT 1 FROM gen_spans b WHERE b.bucket = g.start_ns"
                    " >> " STORE_SPAN_SHIFT_STR
                    " AND b.max_span >= g.end_ns - g.start_ns)");
}

/* Buckets that hold no generation: 0 once every delete has run. */
static int64_t spans_orphaned(fx *f) {
  return sf_sql_int(
      f->dir.db,
      "SELECT count(*) FROM gen_spans b WHERE NOT EXISTS"
      " (SELECT 1 FROM generations g WHERE g.start_ns >> " STORE_SPAN_SHIFT_STR
      " = b.bucket)");
}

static int64_t reader_max_seq(fx *f) {
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  int64_t max = -1;
  assert_int_equal(store_read_max_seq(r, &max), 0);
  store_reader_close(r);
  return max;
}

static int64_t reserved(fx *f) {
  return sf_sql_int(f->dir.db,
                    "SELECT value FROM meta WHERE key = 'seq_reserved'");
}

/* The newest rows deleted behind the store's back (an operator's DELETE):
 * neither the running store nor one opened later issues their seqs again
 * (every seq issued is below meta.seq_reserved, which the store starts
 * above), and readers' "newest" cursor is the newest kept. */
static void test_store_setup__seq_is_never_issued_twice(void **state) {
  fx *f = *state;
  open_default(f);
  assert_int_equal(reserved(f), 0);
  for (uint64_t g = 1; g <= 5; g++)
    assert_int_equal(commit(f, 1, g, 0, 0), (int64_t)g);
  /* Reserved once, ahead, by the first transaction. */
  assert_true(reserved(f) >= 5);
  int64_t r1 = reserved(f);
  assert_int_equal(sf_sql_exec(f->dir.db, "DELETE FROM generations"
                                          " WHERE seq >= 4"),
                   SQLITE_OK);
  assert_int_equal(reader_max_seq(f), 3);
  /* The running store goes on from its own count. */
  assert_int_equal(commit(f, 1, 6, 0, 0), 6);
  assert_int_equal(reserved(f), r1);
  assert_int_equal(sf_sql_exec(f->dir.db, "DELETE FROM generations"
                                          " WHERE seq = 6"),
                   SQLITE_OK);
  close_store(f);
  open_default(f);
  /* Opened again: above the reservation, so above 4, 5 and 6. */
  int64_t seq = commit(f, 1, 7, 0, 0);
  assert_int_equal(seq, r1 + 1);
  assert_int_equal(reader_max_seq(f), seq);
  assert_true(reserved(f) >= seq);
  /* A row added by hand above the reservation is not issued again. */
  int64_t by_hand = reserved(f) + 10;
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO generations(seq, session_id, gen, start_ns, end_ns,"
           " events, bytes, stored_bytes, dropped, evicted, rejected, codec,"
           " committed_ns) SELECT %lld, session_id, 99, start_ns, end_ns, 1,"
           " 1, 1, 0, 0, 0, 'none', 0 FROM generations LIMIT 1",
           (long long)by_hand);
  assert_int_equal(sf_sql_exec(f->dir.db, sql), SQLITE_OK);
  close_store(f);
  open_default(f);
  seq = commit(f, 1, 8, 0, 0);
  assert_int_equal(seq, by_hand + 1);
  assert_true(reserved(f) >=
              sf_sql_int(f->dir.db, "SELECT max(seq) FROM generations"));
  /* No sqlite_sequence row for generations: nothing writes one. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sqlite_sequence"
                                         " WHERE name = 'generations'"),
                   0);
}

/* Every committed row is bounded by its bucket's row, a bucket's row goes
 * with its last generation (whichever delete), and the bound a reader
 * takes is the largest kept. */
static void test_store_setup__span_buckets_follow_the_rows(void **state) {
  fx *f = *state;
  open_default(f);
  int64_t far = (int64_t)1 << 62; /* after the fixture's bucket */
  commit(f, 1, 1, 0, 0);
  commit(f, 2, 1, 0, 3 * SEC);
  commit(f, 3, 1, far, 40 * SEC);
  commit(f, 3, 2, far + 5 * SEC, 2 * SEC); /* shorter: no write */
  assert_int_equal(spans_uncovered(f), 0);
  assert_int_equal(spans_orphaned(f), 0);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM gen_spans"), 2);
  assert_int_equal(sf_sql_int(f->dir.db, STORE_SPAN_MAX_SQL), 40 * SEC);
  /* One of the far bucket's two rows deleted: the bound stays (a bound,
   * not the exact span); both: the bucket goes. */
  assert_int_equal(
      sf_sql_exec(f->dir.db, "DELETE FROM generations WHERE gen = 2"),
      SQLITE_OK);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM gen_spans"), 2);
  assert_int_equal(sf_sql_exec(f->dir.db, "DELETE FROM generations WHERE"
                                          " start_ns >= 4611686018427387904"),
                   SQLITE_OK);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM gen_spans"), 1);
  assert_int_equal(sf_sql_int(f->dir.db, STORE_SPAN_MAX_SQL), 3 * SEC);
  /* A longer span in a kept bucket raises its bound. */
  commit(f, 4, 1, 0, 9 * SEC);
  assert_int_equal(sf_sql_int(f->dir.db, STORE_SPAN_MAX_SQL), 9 * SEC);
  assert_int_equal(spans_uncovered(f), 0);
  assert_int_equal(spans_orphaned(f), 0);
}

/* What a schema 9 build left: generations with AUTOINCREMENT (its
 * sqlite_sequence ahead of the rows, as after the newest were deleted) and
 * the span index, no gen_spans, no seq_reserved. */
#define MAKE_SCHEMA_9_SQL                                                      \
  "CREATE TABLE g9(seq INTEGER PRIMARY KEY AUTOINCREMENT,"                     \
  " session_id INTEGER NOT NULL REFERENCES sessions(id),"                      \
  " gen INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL," \
  " events INTEGER NOT NULL, bytes INTEGER NOT NULL,"                          \
  " stored_bytes INTEGER NOT NULL, dropped INTEGER NOT NULL,"                  \
  " evicted INTEGER NOT NULL, rejected INTEGER NOT NULL,"                      \
  " status TEXT NOT NULL DEFAULT 'ok', codec TEXT NOT NULL,"                   \
  " committed_ns INTEGER NOT NULL, crc INTEGER, UNIQUE(session_id, gen));"     \
  "INSERT INTO g9 SELECT seq, session_id, gen, start_ns, end_ns, events,"      \
  " bytes, stored_bytes, dropped, evicted, rejected, status, codec,"           \
  " committed_ns, crc FROM generations;"                                       \
  "DROP TABLE generations; ALTER TABLE g9 RENAME TO generations;"              \
  "CREATE INDEX generations_by_time ON generations(session_id, start_ns);"     \
  "CREATE INDEX generations_by_start ON generations(start_ns);"                \
  "CREATE INDEX generations_by_span ON generations(end_ns - "                  \
  "start_ns);" STORE_SCHEMA_DEL_TRIGGER_SQL STORE_SCHEMA_SUMMARY_SQL           \
      STORE_SCHEMA_ROLLUP_SQL "DROP TABLE gen_spans;"                          \
  "UPDATE sqlite_sequence SET seq = 100 WHERE name = 'generations';"           \
  "DELETE FROM meta WHERE key = 'seq_reserved';"                               \
  "UPDATE meta SET value = '9' WHERE key = 'schema_version'"

static void test_store_setup__schema_9_is_migrated_in_place(void **state) {
  fx *f = *state;
  open_default(f);
  for (uint64_t g = 1; g <= 4; g++) {
    commit(f, 20, g, 0, 0);
    commit(f, 21, g, 0, (int64_t)g * SEC);
  }
  close_store(f);
  int64_t events = sf_sql_int(f->dir.db, "SELECT sum(events) FROM sessions");
  assert_int_equal(sf_sql_exec(f->dir.db, MAKE_SCHEMA_9_SQL), SQLITE_OK);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT seq FROM sqlite_sequence"
                                         " WHERE name = 'generations'"),
                   100);
  reader_refuses_older_then_open(f);
  assert_int_equal(
      sf_sql_int(f->dir.db,
                 "SELECT value FROM meta WHERE key = 'schema_version'"),
      10);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   8);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT sum(events) FROM sessions"),
                   events);
  assert_int_equal(
      sf_sql_int(f->dir.db, "SELECT count(*) FROM sqlite_master"
                            " WHERE name IN ('generations_by_span',"
                            " 'generations_v10') OR sql LIKE '%AUTOINCREMENT%'"
                            " AND name = 'generations'"),
      0);
  /* Every index and trigger of a fresh schema 10, and no other. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sqlite_master"
                                         " WHERE tbl_name = 'generations'"
                                         " AND type IN ('index', 'trigger')"),
                   8);
  assert_int_equal(reserved(f), 100);
  assert_int_equal(spans_uncovered(f), 0);
  assert_int_equal(spans_orphaned(f), 0);
  assert_int_equal(sf_sql_int(f->dir.db, STORE_SPAN_MAX_SQL), 4 * SEC);
  /* seq goes on above every seq the old table issued. */
  assert_int_equal(commit(f, 20, 5, 0, 0), 101);
  assert_int_equal(reader_max_seq(f), 101);
  /* The triggers the old table took with it are there again. */
  assert_int_equal(
      sf_sql_exec(f->dir.db, "DELETE FROM generations WHERE gen = 1"),
      SQLITE_OK);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM sessions s WHERE s.gens <>"
                              " (SELECT count(*) FROM generations g"
                              " WHERE g.session_id = s.id)"),
                   0);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM sum_gens WHERE seq NOT IN"
                              " (SELECT seq FROM generations)"),
                   0);
}

/* A fresh file has the same generations indexes and triggers as a
 * migrated one (the count above). */
static void test_store_setup__fresh_schema_has_no_span_index(void **state) {
  fx *f = *state;
  open_default(f);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sqlite_master"
                                         " WHERE tbl_name = 'generations'"
                                         " AND type IN ('index', 'trigger')"),
                   8);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sqlite_master"
                                         " WHERE name = 'generations_by_span'"),
                   0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_setup__seq_is_never_issued_twice),
      T(test_store_setup__span_buckets_follow_the_rows),
      T(test_store_setup__schema_9_is_migrated_in_place),
      T(test_store_setup__fresh_schema_has_no_span_index),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
