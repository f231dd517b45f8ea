/* test_pg_cat.c: the PostgreSQL catalog (store/pg.c, store/pg_cat.c)
 * against a real PostgreSQL (tests/store/test_shared.sh starts it). */
#include "config.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "pg.h"
#include "pg_cat.h"
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
  OK(pg_cat_open(db, 3, &c, &cause));
  return c;
}

/* Commits gens[0..n) as one segment named object; returns the code. */
static int commit(pg_cat *c, const char *object, store_gen **g, size_t n,
                  pg_cat_gen *out) {
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    out[i] =
        (pg_cat_gen){.g = g[i], .off = off, .len = g[i]->len, .codec = "none"};
    off += g[i]->len;
  }
  char *cause = NULL;
  int rc = pg_cat_commit_segment(c, object, off, "test", out, n, &cause);
  if (rc < 0)
    fprintf(stderr, "commit: %s\n", cause ? cause : "");
  free(cause);
  return rc;
}

typedef struct rows {
  int64_t seq[256];
  uint64_t gen[256];
  char session[256][33];
  int n;
} rows;

static int collect(void *ctx, const store_gen_row *r) {
  rows *x = ctx;
  if (x->n < 256) {
    x->seq[x->n] = r->seq;
    x->gen[x->n] = r->gen;
    snprintf(x->session[x->n], 33, "%s", r->session);
    x->n++;
  }
  return 0;
}

static void
test_pg_cat__open_migrates_once_even_when_daemons_race(void **state) {
  char uri[256];
  assert_int_equal(fixture_db("migrate", uri, sizeof uri), 0);
  pg_cat *c[4] = {0};
  char *cause = NULL;
  /* Four opens in a row on a fresh database and again: one schema. */
  for (int i = 0; i < 4; i++)
    OK(pg_cat_open(uri, 1, &c[i], &cause));
  assert_int_equal(fixture_sql_int(uri, "SELECT value::int FROM gt_meta WHERE"
                                        " key = 'schema_version'"),
                   pg_schema_version());
  assert_int_equal(fixture_sql_int(uri, "SELECT count(*) FROM gt_counter"), 1);
  for (int i = 0; i < 4; i++)
    pg_cat_close(c[i]);
}

typedef struct opener {
  const char *uri;
  int rc;
} opener;
static void *open_thread(void *arg) {
  opener *o = arg;
  pg_cat *c = NULL;
  char *cause = NULL;
  o->rc = pg_cat_open(o->uri, 1, &c, &cause);
  if (o->rc)
    fprintf(stderr, "open: %s\n", cause);
  free(cause);
  pg_cat_close(c);
  return NULL;
}

static void test_pg_cat__concurrent_first_opens_all_succeed(void **state) {
  char uri[256];
  assert_int_equal(fixture_db("race", uri, sizeof uri), 0);
  pthread_t t[4];
  opener o[4];
  for (int i = 0; i < 4; i++) {
    o[i] = (opener){.uri = uri, .rc = 1};
    pthread_create(&t[i], NULL, open_thread, &o[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(o[i].rc, 0);
  }
}

static void test_pg_cat__unreachable_or_bad_uri_is_a_clear_error(void **state) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &al);
  close(fd);
  char uri[128];
  snprintf(uri, sizeof uri, "postgresql://postgres@127.0.0.1:%d/x",
           ntohs(a.sin_port));
  pg_cat *c = NULL;
  char *cause = NULL;
  assert_int_equal(pg_cat_open(uri, 1, &c, &cause), GTP_E_UNAVAIL);
  assert_null(c);
  assert_non_null(strstr(cause, "cannot connect"));
  free(cause);
  cause = NULL;
  assert_int_equal(pg_cat_open("mysql://x", 1, &c, &cause), GTP_E_BADARG);
  free(cause);
}

static void
test_pg_cat__segment_rows_locate_and_list_in_commit_order(void **state) {
  pg_cat *c = open_cat();
  store_gen *g[4] = {
      fixture_gen(1, "svc", 1, 100, 50), fixture_gen(2, "svc", 1, 100, 70),
      fixture_gen(1, "svc", 2, 101, 30), fixture_gen(2, "svc", 2, 101, 10)};
  pg_cat_gen out[4];
  int64_t before;
  assert_int_equal(pg_cat_read_max_seq(c, &before), 0);
  assert_int_equal(commit(c, "seg/a1", g, 4, out), 0);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(out[i].result, 0);
    assert_int_equal(out[i].seq, before + 1 + i); /* arrival order */
  }
  pg_cat_loc loc;
  assert_int_equal(pg_cat_locate(c, out[2].seq, &loc), 0);
  assert_string_equal(loc.object, "seg/a1");
  assert_int_equal(loc.off, 120);
  assert_int_equal(loc.len, 30);
  assert_string_equal(loc.codec, "none");
  free(loc.object);
  char hex[33];
  fixture_hex(g[3]->session, hex);
  assert_int_equal(pg_cat_locate_by_gen(c, hex, 2, &loc), 0);
  assert_int_equal(loc.off, 150);
  free(loc.object);
  assert_int_equal(pg_cat_locate_by_gen(c, hex, 99, &loc), GTP_E_NOTFOUND);

  rows f = {.n = 0};
  assert_int_equal(pg_cat_read_feed(c, before, 0, collect, &f), 0);
  assert_int_equal(f.n, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(f.seq[i], out[i].seq);
  uint64_t last = 0;
  char *cause = NULL;
  assert_int_equal(pg_cat_last_gen(c, g[0]->session, &last, &cause), 1);
  assert_int_equal(last, 2);
  uint8_t none[16] = {0xee};
  assert_int_equal(pg_cat_last_gen(c, none, &last, &cause), 0);

  /* Window over [100.5 s, 100.9 s): the two gens starting at 100 s. */
  rows w = {.n = 0};
  store_window_query q = {
      .service = "svc", .from_ns = 100500000000LL, .to_ns = 100900000000LL};
  assert_int_equal(pg_cat_read_window(c, &q, collect, &w), 0);
  assert_int_equal(w.n, 2);
  assert_int_equal(w.seq[0], out[0].seq);
  assert_int_equal(w.seq[1], out[1].seq);
  q.service = NULL;
  q.session = hex;
  q.to_ns = 200000000000LL;
  w.n = 0;
  assert_int_equal(pg_cat_read_window(c, &q, collect, &w), 0);
  assert_int_equal(w.n, 2); /* session 2: gens 1 and 2 */
  w.n = 0;
  assert_int_equal(
      pg_cat_read_session_gens(c, hex, 0, INT64_MAX, 1, 0, collect, &w), 0);
  assert_int_equal(w.n, 1);
  assert_int_equal(w.gen[0], 2);
  assert_int_equal(
      pg_cat_read_session_gens(c, "00", 0, INT64_MAX, -1, 0, collect, &w),
      GTP_E_NOTFOUND);
  for (int i = 0; i < 4; i++)
    store_gen_free(g[i]);
  pg_cat_close(c);
}

typedef struct sess_rows {
  int n;
  uint64_t gens[16], events[16];
  char tags[16][64];
} sess_rows;
static int collect_sessions(void *ctx, const store_session_row *r) {
  sess_rows *s = ctx;
  if (s->n < 16) {
    s->gens[s->n] = r->generations;
    s->events[s->n] = r->events;
    snprintf(s->tags[s->n], 64, "%s", r->tags_json);
    s->n++;
  }
  return 0;
}

static void
test_pg_cat__resends_are_duplicates_and_their_segment_is_dead(void **state) {
  pg_cat *c = open_cat();
  store_gen *g[2] = {fixture_gen(7, "dup", 1, 300, 10),
                     fixture_gen(7, "dup", 2, 301, 10)};
  pg_cat_gen out[2];
  assert_int_equal(commit(c, "seg/d1", g, 1, out), 0);
  assert_int_equal(out[0].result, 0);
  /* The agent resends gen 1 (ACK lost) along with gen 2. */
  assert_int_equal(commit(c, "seg/d2", g, 2, out), 0);
  assert_int_equal(out[0].result, 1);
  assert_int_equal(out[1].result, 0);
  /* A resend-only segment is dead at once. */
  assert_int_equal(commit(c, "seg/d3", g, 2, out), 0);
  assert_int_equal(out[0].result, 1);
  assert_int_equal(out[1].result, 1);
  assert_true(fixture_sql_int(db, "SELECT dead_ns FROM gt_segments WHERE"
                                  " object = 'seg/d3'") > 0);
  assert_int_equal(fixture_sql_int(db, "SELECT live_gens FROM gt_segments"
                                       " WHERE object = 'seg/d2'"),
                   1);
  /* The same object again (a retry after a lost COMMIT reply). */
  assert_int_equal(commit(c, "seg/d2", g, 2, out), 0);
  assert_int_equal(out[0].result, 1);
  assert_int_equal(out[1].result, 1);
  /* Totals count each generation once. */
  sess_rows s = {.n = 0};
  store_session_filter f = {.service = "dup"};
  assert_int_equal(pg_cat_read_sessions(c, &f, collect_sessions, &s), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.gens[0], 2);
  assert_int_equal(s.events[0], 10 * 1 + 7 + 10 * 2 + 7);
  assert_string_equal(s.tags[0], "{\"az\":\"b\"}");
  for (int i = 0; i < 2; i++)
    store_gen_free(g[i]);
  pg_cat_close(c);
}

static void test_pg_cat__session_filters_and_bad_tags(void **state) {
  pg_cat *c = open_cat();
  store_gen *g = fixture_gen(9, "tagged", 1, 400, 5);
  free(g->tags_json);
  g->tags_json = strdup("{not json");
  pg_cat_gen out[1];
  assert_int_equal(commit(c, "seg/t1", &g, 1, out), 0);
  store_gen *h = fixture_gen(10, "tagged", 1, 400, 5);
  assert_int_equal(commit(c, "seg/t2", &h, 1, out), 0);
  sess_rows s = {.n = 0};
  store_session_filter f = {
      .service = "tagged", .tag_key = "az", .tag_value = "b"};
  assert_int_equal(pg_cat_read_sessions(c, &f, collect_sessions, &s), 0);
  assert_int_equal(s.n, 1);
  s.n = 0;
  f.tag_key = NULL;
  f.tag_value = NULL;
  assert_int_equal(pg_cat_read_sessions(c, &f, collect_sessions, &s), 0);
  assert_int_equal(s.n, 2);
  assert_string_equal(s.tags[0], "{}"); /* first seen first: the bad one */
  store_gen_free(g);
  store_gen_free(h);
  pg_cat_close(c);
}

/* Two "daemons" (two catalogs on one database). A takes its seqs and then
 * stalls before COMMIT; B commits meanwhile; a reader follows the feed the
 * whole time. The reader must never see a seq and later find a smaller one
 * appear: B waits for A (gt_counter's row lock), so seqs become visible in
 * order. */
typedef struct slow_commit {
  pg_cat *c;
  store_gen *g[3];
  pg_cat_gen out[3];
  int rc;
} slow_commit;
static void *slow_thread(void *arg) {
  slow_commit *s = arg;
  s->rc = commit(s->c, "seg/slow", s->g, 3, s->out);
  return NULL;
}

typedef struct follower {
  pg_cat *c;
  int stop; /* __atomic: set by the test, read by the follower */
  int64_t cursor;
  int out_of_order, seen;
} follower;
static int follow_row(void *ctx, const store_gen_row *r) {
  follower *f = ctx;
  if (r->seq <= f->cursor)
    f->out_of_order++;
  f->cursor = r->seq;
  f->seen++;
  return 0;
}
static void *follow_thread(void *arg) {
  follower *f = arg;
  /* Polls like the feed endpoint: rows after the cursor, in seq order. A
   * seq that became visible only after the cursor passed it is lost to a
   * real feed client; here it shows as a row missing from seen. */
  while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
    pg_cat_read_feed(f->c, f->cursor, 0, follow_row, f);
    usleep(20000);
  }
  pg_cat_read_feed(f->c, f->cursor, 0, follow_row, f);
  return NULL;
}

static void
test_pg_cat__feed_never_skips_a_generation_committed_late(void **state) {
  pg_cat *a = open_cat(), *b = open_cat(), *r = open_cat();
  int64_t start;
  assert_int_equal(pg_cat_read_max_seq(r, &start), 0);
  follower f = {.c = r, .cursor = start};
  pthread_t ft, st;
  pthread_create(&ft, NULL, follow_thread, &f);

  slow_commit s = {.c = a};
  for (int i = 0; i < 3; i++)
    s.g[i] = fixture_gen(20, "late", i + 1, 500 + i, 8);
  pg_cat_set_test_delay(a, 1500);
  pthread_create(&st, NULL, slow_thread, &s);
  /* A holds its seqs, uncommitted: waited for, not guessed (a loaded
   * machine may take longer than any fixed sleep to get A there, and B
   * would then commit first). */
  for (int i = 0; i < 60000 && !pg_cat_test_delays_begun(a); i++)
    usleep(1000);
  assert_int_equal(pg_cat_test_delays_begun(a), 1);

  store_gen *g[2] = {fixture_gen(21, "late", 1, 500, 8),
                     fixture_gen(21, "late", 2, 501, 8)};
  pg_cat_gen out[2];
  assert_int_equal(commit(b, "seg/fast", g, 2, out), 0);
  /* B had to wait for A: it could not return before A left its delay to
   * COMMIT (the counter's row lock). Exact, where a bound on B's time was
   * not: a starved test thread can reach B's commit late in A's delay. */
  assert_int_equal(pg_cat_test_delays_done(a), 1);
  pthread_join(st, NULL);
  assert_int_equal(s.rc, 0);
  /* B was ordered after A: larger seqs. */
  for (int i = 0; i < 3; i++)
    assert_true(s.out[i].seq < out[0].seq);

  usleep(200000);
  __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
  pthread_join(ft, NULL);
  assert_int_equal(f.out_of_order, 0);
  assert_int_equal(f.seen, 5); /* all five, none skipped */
  assert_int_equal(f.cursor, out[1].seq);
  for (int i = 0; i < 3; i++)
    store_gen_free(s.g[i]);
  for (int i = 0; i < 2; i++)
    store_gen_free(g[i]);
  pg_cat_close(a);
  pg_cat_close(b);
  pg_cat_close(r);
}

/* ---- session keys bound at commit (pg_cat.c invariant 5) ---- */

typedef struct racer {
  pg_cat *cat;
  store_gen *g[3];
  pg_cat_gen out[3];
  char object[64];
  int rc;
} racer;

static void *race_commit(void *arg) {
  racer *r = arg;
  r->rc = commit(r->cat, r->object, r->g, 3, r->out);
  return NULL;
}

static void keyed(store_gen *g, uint8_t key) {
  g->has_key = 1;
  memset(g->key_hash, key, sizeof g->key_hash);
}

static void
test_pg_cat__two_keys_racing_for_one_session_exactly_one_wins(void **state) {
  /* Two catalogs (two daemons' pools); each commits gens 1..3 of one new
   * session under its own key, both inside their transactions at once
   * (the test delay holds each COMMIT). */
  for (int round = 0; round < 4; round++) {
    racer r[2];
    uint8_t sid = (uint8_t)(0x40 + round);
    for (int d = 0; d < 2; d++) {
      r[d].cat = open_cat();
      pg_cat_set_test_delay(r[d].cat, 150);
      snprintf(r[d].object, sizeof r[d].object, "seg/race%d-%d", round, d);
      for (int i = 0; i < 3; i++) {
        r[d].g[i] = fixture_gen(sid, d ? "loser?" : "winner?", (uint64_t)i + 1,
                                400 + i, 20);
        keyed(r[d].g[i], (uint8_t)(0xa0 + d));
      }
    }
    pthread_t t[2];
    for (int d = 0; d < 2; d++)
      assert_int_equal(pthread_create(&t[d], NULL, race_commit, &r[d]), 0);
    for (int d = 0; d < 2; d++)
      pthread_join(t[d], NULL);
    int winners = 0, w = 0;
    for (int d = 0; d < 2; d++) {
      assert_int_equal(r[d].rc, 0);
      int ok = 0, auth = 0;
      for (int i = 0; i < 3; i++) {
        ok += r[d].out[i].result == 0;
        auth += r[d].out[i].result == GTP_E_AUTH;
      }
      assert_true((ok == 3 && auth == 0) || (ok == 0 && auth == 3));
      if (ok == 3) {
        winners++;
        w = d;
      }
    }
    assert_int_equal(winners, 1);
    /* The catalog holds the winner's three rows and key, nothing of the
     * loser's: no row, its segment dead, the session's totals. */
    char hex[33], sql[256];
    fixture_hex(r[0].g[0]->session, hex);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM gt_generations g JOIN gt_sessions s ON"
             " s.id = g.session_id WHERE s.session = '%s'",
             hex);
    assert_int_equal(fixture_sql_int(db, sql), 3);
    snprintf(sql, sizeof sql,
             "SELECT get_byte(key_hash, 0) * 1000 + gens * 100 + last_gen"
             " FROM gt_sessions WHERE session = '%s'",
             hex);
    assert_int_equal(fixture_sql_int(db, sql), (0xa0 + w) * 1000 + 303);
    snprintf(sql, sizeof sql,
             "SELECT live_gens * 10 + (dead_ns IS NOT NULL)::int FROM"
             " gt_segments WHERE object = '%s'",
             r[1 - w].object);
    assert_int_equal(fixture_sql_int(db, sql), 1);
    for (int d = 0; d < 2; d++) {
      for (int i = 0; i < 3; i++)
        store_gen_free(r[d].g[i]);
      pg_cat_close(r[d].cat);
    }
  }
}

static void
test_pg_cat__a_segment_mixing_keys_stores_only_the_bound_ones(void **state) {
  pg_cat *c = open_cat();
  /* Bound to key 1 by gen 1. */
  store_gen *a = fixture_gen(0x50, "mix", 1, 500, 10);
  keyed(a, 1);
  pg_cat_gen out[3];
  assert_int_equal(commit(c, "seg/mix1", &a, 1, out), 0);
  assert_int_equal(out[0].result, 0);
  /* One segment: gen 9 under key 2 first, then gens 2 and 3 under key 1. */
  store_gen *g[3] = {fixture_gen(0x50, "mix", 9, 501, 10),
                     fixture_gen(0x50, "mix", 2, 502, 10),
                     fixture_gen(0x50, "mix", 3, 503, 10)};
  keyed(g[0], 2);
  keyed(g[1], 1);
  keyed(g[2], 1);
  assert_int_equal(commit(c, "seg/mix2", g, 3, out), 0);
  assert_int_equal(out[0].result, GTP_E_AUTH);
  assert_int_equal(out[0].seq, 0);
  assert_int_equal(out[1].result, 0);
  assert_int_equal(out[2].result, 0);
  uint64_t last = 0;
  char *cause = NULL;
  assert_int_equal(pg_cat_last_gen(c, a->session, &last, &cause), 1);
  assert_int_equal(last, 3); /* not 9: that one was refused */
  char hex[33], sql[200];
  fixture_hex(a->session, hex);
  snprintf(sql, sizeof sql,
           "SELECT gens * 1000 + events FROM gt_sessions WHERE session = '%s'",
           hex);
  assert_int_equal(fixture_sql_int(db, sql),
                   3 * 1000 + (10 + 0x50) + (20 + 0x50) + (30 + 0x50));
  uint8_t bound[STORE_KEY_HASH_SIZE];
  assert_int_equal(pg_cat_session_key(c, a->session, bound, &cause), 1);
  assert_int_equal(bound[0], 1);
  store_gen_free(a);
  for (int i = 0; i < 3; i++)
    store_gen_free(g[i]);
  pg_cat_close(c);
}

int main(void) {
  if (!getenv("GENTRACE_CATALOG")) {
    printf("SKIP: no catalog (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  if (fixture_db("pg_cat", db, sizeof db) != 0) {
    printf("cannot create the test database\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pg_cat__open_migrates_once_even_when_daemons_race),
      cmocka_unit_test(test_pg_cat__concurrent_first_opens_all_succeed),
      cmocka_unit_test(test_pg_cat__unreachable_or_bad_uri_is_a_clear_error),
      cmocka_unit_test(
          test_pg_cat__segment_rows_locate_and_list_in_commit_order),
      cmocka_unit_test(
          test_pg_cat__resends_are_duplicates_and_their_segment_is_dead),
      cmocka_unit_test(test_pg_cat__session_filters_and_bad_tags),
      cmocka_unit_test(
          test_pg_cat__feed_never_skips_a_generation_committed_late),
      cmocka_unit_test(
          test_pg_cat__two_keys_racing_for_one_session_exactly_one_wins),
      cmocka_unit_test(
          test_pg_cat__a_segment_mixing_keys_stores_only_the_bound_ones),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
