/* test_sum_rows.c: the summary rows of a transaction written with multi-row
 * INSERTs (store/sum_rows.c), on a real SQLite file with the store's
 * schema: every row of every chunk size lands with its values, an empty
 * histogram stays an empty blob (not NULL, which IGNORE would drop), a
 * copied text (sum_gens' JSON columns) outlives its scratch buffer, the
 * first of two rows with one key wins (sum_rows.h invariant 1), and reset
 * drops what a rolled-back transaction left (invariant 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "store_fixture.h"
#include "store_schema.h"
#include "sum_rows.h"

typedef struct {
  sf_dir dir;
  sqlite3 *db;
  sum_rows *r;
} rfx;

static int setup(void **state) {
  rfx *f = calloc(1, sizeof *f);
  assert_non_null(f);
  sf_dir_make(&f->dir);
  assert_int_equal(sqlite3_open(f->dir.db, &f->db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(f->db, STORE_SCHEMA_SQL, NULL, NULL, NULL),
                   SQLITE_OK);
  f->r = sum_rows_new(f->db);
  assert_non_null(f->r);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  rfx *f = *state;
  sum_rows_free(f->r);
  sqlite3_close(f->db);
  sf_dir_remove(&f->dir);
  free(f);
  return 0;
}

static int64_t q(rfx *f, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(f->db, sql, -1, &st, NULL) != SQLITE_OK)
    fail_msg("%s: %s", sql, sqlite3_errmsg(f->db));
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static gtp_str str(const char *s) {
  return (gtp_str){s, strlen(s)};
}

static void add_name(rfx *f, const char *name, int64_t seq, int64_t count,
                     const void *hist, size_t hl) {
  sum_rows_val v[] = {sum_rows_text(str(name)), sum_rows_int(seq),
                      sum_rows_int(1),          sum_rows_int(count),
                      sum_rows_int(count * 10), sum_rows_int(1),
                      sum_rows_int(count),      sum_rows_blob(hist, hl)};
  assert_int_equal(sum_rows_add(f->r, SUM_ROWS_NAMES, v), 0);
}

/* A sum_gens row whose logs column holds one category (the view sum_logs
 * reads it); the text is a scratch buffer's, copied on add. */
static void add_log(rfx *f, int64_t seq, const char *name, int64_t count) {
  char json[64];
  int n =
      snprintf(json, sizeof json, "[[\"%s\",%lld]]", name, (long long)count);
  sum_rows_val v[] = {sum_rows_int(seq),
                      sum_rows_int(0),
                      sum_rows_int(0),
                      sum_rows_int(0),
                      sum_rows_int(0),
                      sum_rows_text_copy(NULL, 0),
                      sum_rows_text_copy(NULL, 0),
                      sum_rows_text_copy(json, (size_t)n)};
  assert_int_equal(sum_rows_add(f->r, SUM_ROWS_GENS, v), 0);
  memset(json, 'x', sizeof json); /* the row holds its own copy */
}

static void flush_in_txn(rfx *f) {
  assert_int_equal(sqlite3_exec(f->db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sum_rows_flush(f->r), SQLITE_OK);
  assert_int_equal(sqlite3_exec(f->db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sum_rows_pending(f->r), 0);
}

/* Every count from 1 to 140 rows (each chunk size, and every remainder
 * after the largest) lands whole, with its values and its blob. */
static void test_sum_rows__every_row_of_every_chunk_lands(void **state) {
  rfx *f = *state;
  int64_t seq = 0, want_rows = 0, want_count = 0;
  static const uint8_t hist[] = {3, 7, 9, 1};
  for (int n = 1; n <= 140; n++) {
    for (int i = 0; i < n; i++) {
      seq++;
      add_name(f, i % 2 ? "request" : "handle", seq, seq, hist,
               (size_t)(seq % 5)); /* blobs of 0-4 bytes */
      add_log(f, seq, "http", 2);
      want_rows++;
      want_count += seq;
    }
    assert_int_equal(sum_rows_pending(f->r), (size_t)(2 * n));
    flush_in_txn(f);
  }
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names"), want_rows);
  assert_int_equal(q(f, "SELECT sum(count) FROM sum_names"), want_count);
  assert_int_equal(q(f, "SELECT sum(total_ns) FROM sum_names"),
                   10 * want_count);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names WHERE hist IS NULL"
                        " OR length(hist) <> seq % 5"),
                   0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names WHERE seq % 5 = 4"
                        " AND hist <> x'03070901'"),
                   0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_logs"), want_rows);
  assert_int_equal(q(f, "SELECT sum(count) FROM sum_logs"), 2 * want_rows);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_gens WHERE spans IS NULL"
                        " AND counters IS NULL AND logs IS NOT NULL"),
                   want_rows);
}

/* Two rows with one key in a flush: the first added is kept (the caller
 * adds a summary's rows last-first, so its last one wins, as REPLACE did),
 * and the other rows of the statement still land. */
static void test_sum_rows__the_first_of_one_key_is_kept(void **state) {
  rfx *f = *state;
  add_name(f, "a", 1, 7, NULL, 0);
  add_name(f, "a", 1, 5, NULL, 0);
  add_name(f, "b", 1, 3, NULL, 0);
  flush_in_txn(f);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_names"), 2);
  assert_int_equal(q(f, "SELECT count FROM sum_names WHERE name = 'a'"), 7);
  assert_int_equal(q(f, "SELECT count FROM sum_names WHERE name = 'b'"), 3);
}

/* Rows of a transaction that rolled back before its flush are dropped by
 * the next transaction's reset, never written with its rows. */
static void
test_sum_rows__reset_drops_a_failed_transactions_rows(void **state) {
  rfx *f = *state;
  add_log(f, 1, "lost", 1);
  add_log(f, 2, "lost", 1);
  sum_rows_reset(f->r);
  assert_int_equal(sum_rows_pending(f->r), 0);
  add_log(f, 3, "kept", 1);
  flush_in_txn(f);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_logs"), 1);
  assert_int_equal(q(f, "SELECT seq FROM sum_logs WHERE name = 'kept'"), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_sum_rows__every_row_of_every_chunk_lands, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_sum_rows__the_first_of_one_key_is_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_sum_rows__reset_drops_a_failed_transactions_rows, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
