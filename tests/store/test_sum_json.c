/* test_sum_json.c: a summary's spans, counters and logs as sum_gens' JSON
 * columns (store/sum_json.c): the spans read back byte for byte (quotes,
 * backslashes, control bytes, NUL and non-UTF-8 in names), SQLite's JSON
 * functions read the same text (the views of store_schema.h), a counter or
 * log named twice keeps its last entry, and the decoder refuses bad text
 * without reading past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "sum_json.h"

static const char weird[] = "a\"b\\c\n\x01\x00z\xff\xc3\xa9";
#define WEIRD_LEN (sizeof weird - 1)

static gtp_sum_name names[] = {
    {.kind = GTP_SUM_REGION, .name = {"request", 7}},
    {.kind = GTP_SUM_TASK, .name = {weird, WEIRD_LEN}},
    {.kind = GTP_SUM_REGION, .name = {"", 0}},
};
static gtp_sum_span spans[] = {
    {.name = 0, .thread = 7, .start_ns = -5, .dur_ns = 2000000},
    {.name = 1, .thread = 0, .start_ns = INT64_MAX, .dur_ns = 0, .carried = 1},
    {.name = 2, .thread = UINT64_MAX, .start_ns = INT64_MIN, .dur_ns = 1},
};

static gtp_summary summary(void) {
  gtp_summary s;
  memset(&s, 0, sizeof s);
  s.names = names;
  s.nnames = 3;
  s.spans = spans;
  s.nspans = 3;
  return s;
}

/* Every span comes back as written; thread is clamped to int64. */
static void test_sum_json__spans_read_back_exactly(void **state) {
  (void)state;
  gtp_summary s = summary();
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(sum_json_spans(&b, &s), 0);
  sum_json_it it;
  sum_json_it_init(&it, b.data, b.len);
  sum_json_span sp;
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(sum_json_span_next(&it, &sp), 1);
    const gtp_sum_name *n = &names[spans[i].name];
    assert_int_equal(sp.kind, n->kind);
    assert_int_equal(sp.name_len, n->name.len);
    assert_memory_equal(sp.name, n->name.ptr ? n->name.ptr : "", n->name.len);
    assert_int_equal(sp.thread, spans[i].thread > INT64_MAX
                                    ? INT64_MAX
                                    : (int64_t)spans[i].thread);
    assert_int_equal(sp.start_ns, spans[i].start_ns);
    assert_int_equal(sp.dur_ns, (int64_t)spans[i].dur_ns);
    assert_int_equal(sp.carried, spans[i].carried);
  }
  assert_int_equal(sum_json_span_next(&it, &sp), 0);
  assert_int_equal(sum_json_span_next(&it, &sp), 0);
  sum_json_it_fini(&it);
  /* No spans: nothing written, and nothing read from an empty text. */
  gtp_wbuf_reset(&b);
  s.nspans = 0;
  assert_int_equal(sum_json_spans(&b, &s), 0);
  assert_int_equal(b.len, 0);
  sum_json_it_init(&it, NULL, 0);
  assert_int_equal(sum_json_span_next(&it, &sp), 0);
  sum_json_it_fini(&it);
  gtp_wbuf_fini(&b);
}

/* The first column of sql with ?1 = text and ?2 = the name up to its NUL. */
static int64_t q_int(sqlite3 *db, const char *sql, const void *text,
                     size_t len) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  sqlite3_bind_text(st, 1, text, (int)len, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, weird, (int)strlen(weird), SQLITE_STATIC);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* SQLite's json_each reads the text the views read: every value, and a
 * name's bytes up to a NUL (why search decodes the spans itself). */
static void test_sum_json__sqlite_reads_the_same_text(void **state) {
  (void)state;
  gtp_summary s = summary();
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(sum_json_spans(&b, &s), 0);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
  assert_int_equal(q_int(db, "SELECT json_valid(?1)", b.data, b.len), 1);
  assert_int_equal(q_int(db,
                         "SELECT sum(json_extract(value, '$[3]') = -5"
                         " AND json_extract(value, '$[1]') = 'request'"
                         " AND json_extract(value, '$[4]') = 2000000)"
                         " FROM json_each(?1)",
                         b.data, b.len),
                   1);
  assert_int_equal(q_int(db,
                         "SELECT json_extract(value, '$[1]') = ?2"
                         " FROM json_each(?1) WHERE key = 1",
                         b.data, b.len),
                   1);
  assert_int_equal(q_int(db,
                         "SELECT json_extract(value, '$[2]') FROM json_each(?1)"
                         " WHERE key = 2",
                         b.data, b.len),
                   INT64_MAX);
  sqlite3_close(db);
  gtp_wbuf_fini(&b);
}

/* A counter or a log category named twice keeps its last entry (the keyed
 * rows of schemas 4-8 did), also past the few that need no sort. */
static void test_sum_json__a_name_twice_keeps_the_last(void **state) {
  (void)state;
  enum { N = 40 };
  gtp_sum_counter c[N];
  gtp_sum_log l[N];
  static const char *const nm[] = {"queue", "depth", "queue"};
  for (size_t n = 3; n <= N; n += N - 3) {
    memset(c, 0, sizeof c);
    memset(l, 0, sizeof l);
    char buf[N][8];
    for (size_t i = 0; i < n; i++) {
      const char *name = nm[i % 3];
      if (i >= 3) { /* distinct names past the first three */
        snprintf(buf[i], sizeof buf[i], "c%zu", i);
        name = buf[i];
      }
      c[i] = (gtp_sum_counter){.name = {name, strlen(name)},
                               .count = i + 1,
                               .min = -(int64_t)i,
                               .max = (int64_t)i,
                               .last = (int64_t)i * 10};
      l[i] = (gtp_sum_log){.name = {name, strlen(name)}, .count = i + 1};
    }
    gtp_summary s;
    memset(&s, 0, sizeof s);
    s.counters = c;
    s.ncounters = n;
    s.logs = l;
    s.nlogs = n;
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(sum_json_counters(&b, &s), 0);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(
        q_int(db, "SELECT count(*) FROM json_each(?1)", b.data, b.len),
        (int64_t)n - 1);
    assert_int_equal(q_int(db,
                           "SELECT json_extract(value, '$[4]') FROM"
                           " json_each(?1) WHERE json_extract(value, '$[0]')"
                           " = 'queue'",
                           b.data, b.len),
                     20);
    gtp_wbuf_reset(&b);
    assert_int_equal(sum_json_logs(&b, &s), 0);
    assert_int_equal(q_int(db,
                           "SELECT sum(json_extract(value, '$[1]')) FROM"
                           " json_each(?1)",
                           b.data, b.len),
                     (int64_t)(n * (n + 1) / 2 - 1));
    sqlite3_close(db);
    gtp_wbuf_fini(&b);
  }
}

/* Bad text is GTP_E_CORRUPT, read within its bounds (under ASan, the
 * copies below end exactly where their text does). */
static void test_sum_json__bad_text_is_refused_in_bounds(void **state) {
  (void)state;
  static const char *const bad[] = {
      "[",
      "[[1,\"a\",1,2,3,0]",
      "[[1,\"a\",1,2,3]]",
      "[[1,\"a,1,2,3,0]]",
      "[[1,\"a\\",
      "[[1,\"a\\u12\",1,2,3,0]]",
      "[[1,\"a\\u0100\",1,2,3,0]]",
      "[[1,\"a\\q\",1,2,3,0]]",
      "[[1,a,1,2,3,0]]",
      "[[1,\"a\",1,2,99999999999999999999,0]]",
      "[[1,\"a\",1,2,-,0]]",
      "[[1,\"a\",1,2,3,0]]x",
      "[[1,\"a\",1,2,3,0][1,\"a\",1,2,3,0]]",
      "{}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t n = strlen(bad[i]);
    char *copy = malloc(n);
    assert_non_null(copy);
    memcpy(copy, bad[i], n);
    sum_json_it it;
    sum_json_it_init(&it, copy, n);
    sum_json_span sp;
    int rc;
    while ((rc = sum_json_span_next(&it, &sp)) == 1)
      ;
    if (rc != GTP_E_CORRUPT)
      fail_msg("accepted: %s", bad[i]);
    sum_json_it_fini(&it);
    free(copy);
  }
  /* The extremes of int64 and an empty list are fine. */
  static const char good[] =
      "[ [1, \"\", 9223372036854775807, -9223372036854775808, 0, 1] ]";
  sum_json_it it;
  sum_json_it_init(&it, good, sizeof good - 1);
  sum_json_span sp;
  assert_int_equal(sum_json_span_next(&it, &sp), 1);
  assert_int_equal(sp.thread, INT64_MAX);
  assert_int_equal(sp.start_ns, INT64_MIN);
  assert_int_equal(sp.name_len, 0);
  assert_int_equal(sum_json_span_next(&it, &sp), 0);
  sum_json_it_fini(&it);
  sum_json_it_init(&it, "[]", 2);
  assert_int_equal(sum_json_span_next(&it, &sp), 0);
  sum_json_it_fini(&it);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum_json__spans_read_back_exactly),
      cmocka_unit_test(test_sum_json__sqlite_reads_the_same_text),
      cmocka_unit_test(test_sum_json__a_name_twice_keeps_the_last),
      cmocka_unit_test(test_sum_json__bad_text_is_refused_in_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
