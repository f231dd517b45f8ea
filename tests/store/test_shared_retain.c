/* test_shared_retain.c: cluster retention of the shared store
 * (store/shared_retain.c, pg_cat_retain/sweep) on real PostgreSQL and
 * Swift s3api: catalog rows go first, segment objects only once nothing in
 * them is live; a pin on another daemon holds; one daemon at a time. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "pg_cat.h"
#include "s3.h"
#include "segment.h"
#include "shared_fixture.h"
#include "shared_retain.h"

static char db[256];
static char objects[256];

typedef struct acks {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  store_gen *g[64];
  int n;
} acks;

static void on_done(void *ctx, store_gen *g) {
  acks *a = ctx;
  pthread_mutex_lock(&a->lock);
  a->g[a->n++] = g;
  pthread_cond_broadcast(&a->cond);
  pthread_mutex_unlock(&a->lock);
}

/* Stores gens as one segment (all submitted before it closes) and returns
 * their seqs in seq_out. */
static void store_segment(store_gen **g, int n, int64_t *seq_out) {
  acks a = {.n = 0};
  pthread_mutex_init(&a.lock, NULL);
  pthread_cond_init(&a.cond, NULL);
  segment_config cfg = {.catalog = db,
                        .s3 = {.url = objects},
                        .daemon_id = "retain-w",
                        .max_age_ms = 300};
  segment_store *s = NULL;
  char *cause = NULL;
  if (segment_open(&cfg, on_done, &a, &s, &cause))
    fail_msg("segment_open: %s", cause);
  for (int i = 0; i < n; i++)
    assert_int_equal(segment_submit(s, g[i]), 0);
  segment_close(s); /* stores and catalogs what is queued */
  assert_int_equal(a.n, n);
  for (int i = 0; i < n; i++) {
    assert_int_equal(a.g[i]->result, 0);
    seq_out[i] = a.g[i]->seq;
    store_gen_free(a.g[i]);
  }
}

static long long sql(const char *q) {
  return fixture_sql_int(db, q);
}

static shared_retain *start(pg_cat *c, const char *id, store_pins *pins,
                            int64_t retain_ns, uint64_t max_bytes,
                            s3_config *s3c) {
  *s3c = (s3_config){.url = objects};
  shared_retain_config cfg = {.cat = c,
                              .s3 = s3c,
                              .daemon_id = id,
                              .pins = pins,
                              .retain_ns = retain_ns,
                              .max_bytes = max_bytes,
                              .tick_ms = 3600000, /* tests tick by hand */
                              .grace_zero = 1};
  shared_retain *r = NULL;
  char *cause = NULL;
  if (shared_retain_start(&cfg, &r, &cause))
    fail_msg("start: %s", cause);
  return r;
}

static int object_exists(const char *object) {
  /* Catalog keys are bucket-relative (the prefix is in them). */
  s3_config cfg = {.url = getenv("GENTRACE_OBJECTS")};
  s3 *c = NULL;
  char *cause = NULL;
  assert_int_equal(s3_open(&cfg, &c, &cause), 0);
  int rc = s3_head(c, object, NULL, &cause);
  free(cause);
  s3_close(c);
  assert_true(rc == 0 || rc == GTP_E_NOTFOUND);
  return rc == 0;
}

static char *object_of(int64_t seq, pg_cat *c) {
  pg_cat_loc loc;
  assert_int_equal(pg_cat_locate(c, seq, &loc), 0);
  return loc.object;
}

static int64_t now_s(void) {
  return (int64_t)time(NULL);
}

static void reset_catalog(void) {
  PGconn *k = PQconnectdb(db);
  PQclear(PQexec(k, "DELETE FROM gt_generations; DELETE FROM gt_segments;"
                    " DELETE FROM gt_pins"));
  PQfinish(k);
}

static void
test_shared_retain__age_deletes_rows_then_only_dead_objects(void **state) {
  reset_catalog();
  pg_cat *c = NULL;
  char *cause = NULL;
  assert_int_equal(pg_cat_open(db, 2, &c, &cause), 0);
  /* Segment 1: three old generations. Segment 2: one old, one new. */
  store_gen *s1[3] = {fixture_gen(1, "ret", 1, 1000, 500),
                      fixture_gen(1, "ret", 2, 1001, 500),
                      fixture_gen(1, "ret", 3, 1002, 500)};
  store_gen *s2[2] = {fixture_gen(2, "ret", 1, 1000, 500),
                      fixture_gen(2, "ret", 2, now_s(), 500)};
  int64_t q1[3], q2[2];
  store_segment(s1, 3, q1);
  store_segment(s2, 2, q2);
  char *o1 = object_of(q1[0], c), *o2 = object_of(q2[0], c);
  assert_string_not_equal(o1, o2);
  assert_true(object_exists(o1) && object_exists(o2));

  s3_config s3c;
  shared_retain *r = start(c, "retain-a", NULL, 3600LL * 1000000000, 0, &s3c);
  assert_int_equal(shared_retain_run_once(r), 0);
  shared_retain_stats st;
  shared_retain_stats_get(r, &st);
  assert_int_equal(st.passes, 1);
  assert_int_equal(st.deleted_gens, 4);
  assert_int_equal(st.deleted_objects, 1);
  /* Rows first; the all-old segment's object is gone, the mixed one stays
   * (its new generation is live and still reads). */
  assert_int_equal(sql("SELECT count(*) FROM gt_generations"), 1);
  assert_false(object_exists(o1));
  assert_true(object_exists(o2));
  assert_int_equal(sql("SELECT count(*) FROM gt_segments"), 1);
  assert_int_equal(sql("SELECT gens FROM gt_sessions WHERE session LIKE '02%'"),
                   1);
  pg_cat_loc loc;
  assert_int_equal(pg_cat_locate(c, q2[1], &loc), 0);
  free(loc.object);
  shared_retain_stop(r);
  free(o1);
  free(o2);
  pg_cat_close(c);
}

static void test_shared_retain__a_pin_on_another_daemon_holds(void **state) {
  reset_catalog();
  pg_cat *c = NULL;
  char *cause = NULL;
  assert_int_equal(pg_cat_open(db, 2, &c, &cause), 0);
  store_gen *g[3] = {fixture_gen(3, "pin", 1, 1000, 200),
                     fixture_gen(3, "pin", 2, 1001, 200),
                     fixture_gen(3, "pin", 3, 1002, 200)};
  int64_t q[3];
  store_segment(g, 3, q);
  /* Daemon B serves a download from gen 2 on; daemon A runs retention. */
  store_pins *pins_b = store_pins_new();
  int h = store_pins_add(pins_b, q[1]);
  s3_config s3a, s3b;
  shared_retain *b = start(c, "retain-b", pins_b, 0, 0, &s3b);
  shared_retain *a = start(c, "retain-a", NULL, 3600LL * 1000000000, 0, &s3a);
  assert_int_equal(shared_retain_run_once(b), 0); /* publishes its pin */
  assert_int_equal(shared_retain_run_once(a), 0);
  assert_int_equal(sql("SELECT count(*) FROM gt_generations"), 2);
  char *o = object_of(q[2], c);
  assert_true(object_exists(o));
  /* The download ends: B's next tick drops its pin, A's pass finishes. */
  store_pins_remove(pins_b, h);
  assert_int_equal(shared_retain_run_once(b), 0);
  assert_int_equal(shared_retain_run_once(a), 0);
  assert_int_equal(sql("SELECT count(*) FROM gt_generations"), 0);
  assert_false(object_exists(o));
  free(o);
  shared_retain_stop(a);
  shared_retain_stop(b);
  store_pins_free(pins_b);
  pg_cat_close(c);
}

static void test_shared_retain__one_daemon_at_a_time(void **state) {
  reset_catalog();
  pg_cat *c = NULL;
  char *cause = NULL;
  assert_int_equal(pg_cat_open(db, 2, &c, &cause), 0);
  store_gen *g[1] = {fixture_gen(4, "lock", 1, 1000, 100)};
  int64_t q[1];
  store_segment(g, 1, q);
  /* Another daemon is mid-pass: it holds the advisory lock. */
  PGconn *k = PQconnectdb(db);
  PQclear(PQexec(k, "BEGIN; SELECT pg_advisory_xact_lock(6774726574)"));
  s3_config s3c;
  shared_retain *r = start(c, "retain-a", NULL, 3600LL * 1000000000, 0, &s3c);
  assert_int_equal(shared_retain_run_once(r), 0);
  shared_retain_stats st;
  shared_retain_stats_get(r, &st);
  assert_int_equal(st.passes, 0);
  assert_int_equal(st.skipped, 1);
  assert_int_equal(sql("SELECT count(*) FROM gt_generations"), 1);
  PQclear(PQexec(k, "COMMIT"));
  PQfinish(k);
  assert_int_equal(shared_retain_run_once(r), 0);
  assert_int_equal(sql("SELECT count(*) FROM gt_generations"), 0);
  shared_retain_stop(r);
  pg_cat_close(c);
}

static void test_shared_retain__size_limit_deletes_oldest_first(void **state) {
  reset_catalog();
  pg_cat *c = NULL;
  char *cause = NULL;
  assert_int_equal(pg_cat_open(db, 2, &c, &cause), 0);
  store_gen *g[8];
  for (int i = 0; i < 8; i++) {
    g[i] = fixture_gen(5, "size", (uint64_t)i + 1, now_s(), 4000);
    for (int k = 0; k < 4000; k++) /* incompressible: 4000 stored bytes */
      g[i]->payload[k] = (uint8_t)((k * 2654435761u + (unsigned)i * 97u) >> 13);
  }
  int64_t q[8];
  store_segment(g, 8, q);
  long long total = sql("SELECT sum(stored_bytes) FROM gt_generations");
  s3_config s3c;
  shared_retain *r = start(c, "retain-a", NULL, 0, (uint64_t)total / 2, &s3c);
  assert_int_equal(shared_retain_run_once(r), 0);
  long long left = sql("SELECT sum(stored_bytes) FROM gt_generations");
  assert_true(left <= total / 2);
  assert_true(left > 0);
  /* The survivors are the newest. */
  long long minseq = sql("SELECT min(seq) FROM gt_generations");
  assert_true(minseq > q[0]);
  assert_int_equal(sql("SELECT max(seq) FROM gt_generations"), q[7]);
  shared_retain_stop(r);
  pg_cat_close(c);
}

int main(void) {
  if (!getenv("GENTRACE_CATALOG") || !getenv("GENTRACE_OBJECTS")) {
    printf("SKIP: no shared store (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  if (fixture_db("retain", db, sizeof db) != 0)
    return 1;
  snprintf(objects, sizeof objects, "%s/retain-%ld", getenv("GENTRACE_OBJECTS"),
           (long)getpid());
  pg_cat *c = NULL;
  char *cause = NULL;
  if (pg_cat_open(db, 1, &c, &cause))
    return 1; /* creates the schema */
  pg_cat_close(c);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_shared_retain__age_deletes_rows_then_only_dead_objects),
      cmocka_unit_test(test_shared_retain__a_pin_on_another_daemon_holds),
      cmocka_unit_test(test_shared_retain__one_daemon_at_a_time),
      cmocka_unit_test(test_shared_retain__size_limit_deletes_oldest_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
