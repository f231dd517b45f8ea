/* test_pg_live.c: daemons' leases and connections, and the orphan sweep's
 * catalog side (store/pg_live.c), against a real PostgreSQL
 * (tests/store/test_shared.sh starts it). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "pg_cat.h"
#include "pg_live.h"
#include "shared_fixture.h"

static char db[256];

#define OK(call)                                                               \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ < 0)                                                               \
      fail_msg("%s: %d %s", #call, rc_, cause ? cause : "");                   \
  } while (0)

static pg_cat *open_cat(void) {
  pg_cat *c = NULL;
  char *cause = NULL;
  OK(pg_cat_open(db, 2, &c, &cause));
  return c;
}

/* Catalogs one generation of session sid in object. */
static int commit_one(pg_cat *c, const char *object, uint8_t sid,
                      uint64_t gen) {
  store_gen *g = fixture_gen(sid, "live", gen, 700, 16);
  pg_cat_gen x = {.g = g, .off = 0, .len = g->len, .codec = "none"};
  char *cause = NULL;
  int rc = pg_cat_commit_segment(c, object, g->len, "d-live", &x, 1, &cause);
  free(cause);
  store_gen_free(g);
  return rc;
}

static void
test_pg_live__orphans_are_uncataloged_objects_nobody_can_commit(void **state) {
  pg_cat *c = open_cat();
  char *cause = NULL;
  OK(pg_live_lease(c, "d-live", 1000, 60000, &cause));
  OK(pg_live_lease(c, "d-again", 5000, 60000, &cause)); /* restarted at 5000 */
  OK(pg_live_lease(c, "d-gone", 0, -1000, &cause));     /* lease ran out */
  assert_int_equal(commit_one(c, "p/segments/d-live/2000-1.gts", 0x31, 1), 0);
  pg_live_obj o[] = {
      {.object = "p/segments/d-live/2000-1.gts",
       .daemon = "d-live",
       .put_ns = 2000}, /* cataloged */
      {.object = "p/segments/d-live/2001-2.gts",
       .daemon = "d-live",
       .put_ns = 2001}, /* its daemon may still commit it */
      {.object = "p/segments/d-again/4000-1.gts",
       .daemon = "d-again",
       .put_ns = 4000}, /* from the run before the restart */
      {.object = "p/segments/d-again/6000-1.gts",
       .daemon = "d-again",
       .put_ns = 6000}, /* of the current run */
      {.object = "p/segments/d-gone/100-1.gts",
       .daemon = "d-gone",
       .put_ns = 100},
      {.object = "p/segments/d-never/1-1.gts",
       .daemon = "d-never",
       .put_ns = 1},
  };
  const int want[] = {0, 0, 1, 0, 1, 1};
  OK(pg_live_orphans(c, o, 6, &cause));
  for (int i = 0; i < 6; i++)
    if (o[i].orphan != want[i])
      fail_msg("%s: orphan %d, want %d", o[i].object, o[i].orphan, want[i]);
  pg_cat_close(c);
}

static void test_pg_live__a_swept_object_fails_its_late_commit(void **state) {
  pg_cat *c = open_cat();
  char *cause = NULL;
  const char *obj = "p/segments/d-cut/3000-1.gts";
  assert_int_equal(pg_live_orphan_mark(c, obj, 99, &cause), 1);
  assert_int_equal(pg_live_orphan_mark(c, obj, 99, &cause), 0);
  /* Its daemon was only cut off and commits it now: told to upload again,
   * nothing cataloged. */
  long long before = fixture_sql_int(db, "SELECT count(*) FROM gt_generations");
  assert_int_equal(commit_one(c, obj, 0x32, 1), GTP_E_NOTFOUND);
  assert_int_equal(fixture_sql_int(db, "SELECT count(*) FROM gt_generations"),
                   before);
  /* The same generation under a new name stores. */
  assert_int_equal(commit_one(c, "p/segments/d-cut/3001-2.gts", 0x32, 1), 0);
  /* A cataloged object is never marked. */
  assert_int_equal(
      pg_live_orphan_mark(c, "p/segments/d-cut/3001-2.gts", 1, &cause), 0);
  /* The swept row is dead, kept a day, so the dead sweep leaves it now. */
  assert_true(fixture_sql_int(db, "SELECT count(*) FROM gt_segments WHERE"
                                  " daemon = '(orphan)' AND live_gens = 0 AND"
                                  " dead_ns > (extract(epoch from now())"
                                  " * 1e9)::bigint") == 1);
  free(cause);
  pg_cat_close(c);
}

typedef struct conn_rows {
  char session[8][33];
  int connected[8];
  int n;
} conn_rows;
static int collect(void *ctx, const store_session_row *r) {
  conn_rows *x = ctx;
  if (x->n < 8) {
    snprintf(x->session[x->n], 33, "%s", r->session);
    x->connected[x->n++] = r->connected_any;
  }
  return 0;
}
/* connected_any of session sid (first byte) in the listing. */
static int listed_connected(pg_cat *c, uint8_t sid) {
  conn_rows x = {.n = 0};
  store_session_filter f = {.service = "live"};
  assert_int_equal(pg_cat_read_sessions(c, &f, collect, &x), 0);
  store_gen *g = fixture_gen(sid, "live", 1, 0, 1);
  char hex[33];
  fixture_hex(g->session, hex);
  store_gen_free(g);
  for (int i = 0; i < x.n; i++)
    if (strcmp(x.session[i], hex) == 0)
      return x.connected[i];
  return -1;
}

static void
test_pg_live__connections_count_while_their_lease_runs(void **state) {
  pg_cat *c = open_cat();
  char *cause = NULL;
  assert_int_equal(commit_one(c, "p/segments/d-live/7000-1.gts", 0x41, 1), 0);
  assert_int_equal(commit_one(c, "p/segments/d-live/7000-2.gts", 0x42, 1), 0);
  char ids[2][33];
  store_gen *a = fixture_gen(0x41, "live", 1, 0, 1),
            *b = fixture_gen(0x42, "live", 1, 0, 1);
  fixture_hex(a->session, ids[0]);
  fixture_hex(b->session, ids[1]);
  store_gen_free(a);
  store_gen_free(b);
  OK(pg_live_lease(c, "d-1", 1, 60000, &cause));
  OK(pg_live_conns(c, "d-1", ids, 2, &cause));
  assert_int_equal(listed_connected(c, 0x41), 1);
  assert_int_equal(listed_connected(c, 0x42), 1);
  OK(pg_live_conns(c, "d-1", ids, 1, &cause)); /* the second left */
  assert_int_equal(listed_connected(c, 0x41), 1);
  assert_int_equal(listed_connected(c, 0x42), 0);
  /* Another daemon's connection counts too; an expired lease does not. */
  OK(pg_live_lease(c, "d-2", 1, 60000, &cause));
  OK(pg_live_conns(c, "d-2", ids + 1, 1, &cause));
  assert_int_equal(listed_connected(c, 0x42), 1);
  OK(pg_live_lease(c, "d-2", 1, -1, &cause));
  assert_int_equal(listed_connected(c, 0x42), 0);
  OK(pg_live_leave(c, "d-1", &cause));
  assert_int_equal(listed_connected(c, 0x41), 0);
  assert_int_equal(fixture_sql_int(db, "SELECT count(*) FROM gt_conns WHERE"
                                       " daemon = 'd-1'"),
                   0);
  pg_cat_close(c);
}

int main(void) {
  if (!getenv("GENTRACE_CATALOG")) {
    printf("SKIP: no catalog (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  if (fixture_db("pg_live", db, sizeof db) != 0) {
    printf("cannot create the test database\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_pg_live__orphans_are_uncataloged_objects_nobody_can_commit),
      cmocka_unit_test(test_pg_live__a_swept_object_fails_its_late_commit),
      cmocka_unit_test(test_pg_live__connections_count_while_their_lease_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
