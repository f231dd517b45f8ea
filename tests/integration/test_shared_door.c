/* test_shared_door.c: gentraced on the shared store (real PostgreSQL and
 * Swift s3api from scripts/cluster-up; tests/store/test_shared.sh runs it
 * with the cluster's environment), through real daemons on 127.0.0.1 port
 * 0 and the wire client of tests/daemon/client.c:
 *   - a slow catalog delays the HELLOs that wait for it, not the ACKs of an
 *     agent already streaming (daemon/hello_lookup.c);
 *   - two daemons admit one session id with two keys: exactly one key
 *     stores, the other gets AUTH and nothing of it is cataloged
 *     (store/pg_cat.c invariant 5);
 *   - the door checks answer alike on SQLite and on the shared store;
 *   - an object uploaded by a daemon killed before its commit is swept;
 *   - /v1/agents says `connected` alike on every daemon.
 * Each test gets its own catalog database and object prefix. */
#include "config.h"

#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "gtp_error.h"
#include "s3.h"
#include "sha256.h"
#include "shared_fixture.h"

typedef struct store_loc {
  char cat[256], obj[256];
} store_loc;

static gtd *running[4];

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < 4; i++)
    if (running[i]) {
      gtd_kill9(running[i]);
      gtd_cleanup(running[i]);
      running[i] = NULL;
    }
  return 0;
}

/* A fresh catalog database and object prefix. */
static void fresh(store_loc *l, const char *name) {
  assert_int_equal(fixture_db(name, l->cat, sizeof l->cat), 0);
  snprintf(l->obj, sizeof l->obj, "%s/%s-%ld", getenv("GENTRACE_OBJECTS"), name,
           (long)getpid());
}

/* Starts a daemon in slot i: shared (l) or SQLite (l NULL). */
static gtd *start(int i, const store_loc *l, const char *const *extra) {
  static gtd d[4];
  const char *args[24];
  int n = 0;
  if (l) {
    args[n++] = "--catalog";
    args[n++] = l->cat;
    args[n++] = "--objects";
    args[n++] = l->obj;
    args[n++] = "--segment-max-age";
    args[n++] = "100ms";
  }
  for (; extra && *extra && n < 22; extra++)
    args[n++] = *extra;
  args[n] = NULL;
  assert_int_equal(gtd_init(&d[i]), 0);
  running[i] = &d[i];
  int rc = gtd_start(&d[i], args, NULL);
  if (rc != 0)
    fail_msg("gentraced did not start: %d (log %s)", rc, d[i].log);
  return &d[i];
}

static void stop(int i) {
  assert_int_equal(gtd_stop(running[i]), 0);
  gtd_cleanup(running[i]);
  running[i] = NULL;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sql(const char *uri, const char *q) {
  PGconn *c = PQconnectdb(uri);
  PQsetNoticeProcessor(c, fixture_quiet, NULL);
  PGresult *r = PQexec(c, q);
  if (PQresultStatus(r) != PGRES_COMMAND_OK &&
      PQresultStatus(r) != PGRES_TUPLES_OK)
    fail_msg("%s: %s", q, PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
}

/* Fixture generations a minute back from now, a second each. */
static uint64_t t_base;
static void spec(gtf_spec *s, unsigned session, uint64_t gen) {
  if (t_base == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t_base = (uint64_t)ts.tv_sec * 1000000000ull - 60000000000ull;
  }
  gtf_spec_init(s, session, gen);
  s->threads = 2;
  s->start_real_ns = t_base + (gen % 1000000) * s->period_ns;
}

/* Sends s's generation; 1 = ACKed, 2 = ERROR (*code), 0 = closed. */
static int send_gen(gtc *c, const gtf_spec *s, int *code) {
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, s), 0);
  assert_int_equal(gtc_send_gen(c, &g), 0);
  gtc_gen_fini(&g);
  uint64_t gen = 0;
  int rc = gtc_read_reply(c, &gen, code, GTC_TIMEOUT_MS);
  assert_true(rc >= 0);
  if (rc > 0)
    assert_int_equal(gen, rc == 1 ? s->gen : gen);
  return rc;
}

static void hello(gtc *c, gtd *d, const gtf_spec *s) {
  gtp_welcome w;
  assert_int_equal(gtc_connect(c, d->agent_port), 0);
  assert_int_equal(gtc_hello(c, s, NULL, &w), 0);
}

/* ---- a slow catalog stalls no other agent ---- */

#define HELLO_FN                                                               \
  "CREATE OR REPLACE FUNCTION gt_hello(s text) RETURNS TABLE(key_hash text,"   \
  " last_gen bigint) LANGUAGE plpgsql VOLATILE AS $$ BEGIN %s RETURN QUERY"    \
  " SELECT encode(x.key_hash, 'hex'), x.last_gen FROM gt_sessions x"           \
  " WHERE x.session = s; END $$"

static void
test_shared_door__slow_catalog_delays_hellos_not_other_acks(void **state) {
  store_loc l;
  fresh(&l, "door_slow");
  gtd *d = start(0, &l, NULL);
  gtc a;
  gtf_spec s;
  int code;
  spec(&s, 1, 1);
  hello(&a, d, &s);
  assert_int_equal(send_gen(&a, &s, &code), 1);
  /* Every HELLO lookup now takes 2 s in PostgreSQL. */
  char q[512];
  snprintf(q, sizeof q, HELLO_FN, "PERFORM pg_sleep(2);");
  sql(l.cat, q);
  gtc late[3];
  gtf_spec ls[3];
  int64_t t0 = now_ms();
  for (int i = 0; i < 3; i++) {
    spec(&ls[i], 2 + (unsigned)i, 1);
    assert_int_equal(gtc_connect(&late[i], d->agent_port), 0);
    assert_int_equal(gtc_send_hello(&late[i], &ls[i], NULL, GTP_PROTO_VERSION,
                                    GTP_PROTO_VERSION),
                     0);
  }
  /* Meanwhile the streaming agent's ACKs come at segment pace (100 ms),
   * not after the 6 s the three lookups would hold a loop that waits. */
  int64_t worst = 0;
  for (uint64_t gen = 2; gen <= 6; gen++) {
    spec(&s, 1, gen);
    int64_t t = now_ms();
    assert_int_equal(send_gen(&a, &s, &code), 1);
    if (now_ms() - t > worst)
      worst = now_ms() - t;
  }
  assert_true(worst < 1500);
  /* The late HELLOs are answered once their lookups return: the slowness
   * was real (>= 2 s) and nothing hung. */
  for (int i = 0; i < 3; i++) {
    gtp_frame f;
    assert_int_equal(gtc_read_frame(&late[i], &f, GTC_TIMEOUT_MS), 1);
    assert_int_equal(f.type, GTP_FR_WELCOME);
    gtc_close(&late[i]);
  }
  int64_t waited = now_ms() - t0;
  assert_true(waited >= 1900);
  assert_true(waited < 12000);
  snprintf(q, sizeof q, HELLO_FN, "");
  sql(l.cat, q);
  gtc_close(&a);
  stop(0);
}

/* ---- one session id, two keys, two daemons ---- */

static void
test_shared_door__two_daemons_two_keys_one_session_one_wins(void **state) {
  store_loc l;
  fresh(&l, "door_keys");
  const char *slow[] = {"--segment-max-age", "300ms", NULL};
  gtd *d[2] = {start(0, &l, slow), start(1, &l, slow)};
  gtc c[2];
  gtf_spec s[2];
  for (int i = 0; i < 2; i++) {
    spec(&s[i], 7, 1);
    s[i].service = i ? "door-b" : "door-a";
    s[i].session_key[0] ^= (uint8_t)i; /* two keys for one id */
    hello(&c[i], d[i], &s[i]);         /* nothing bound yet: both in */
  }
  for (uint64_t gen = 1; gen <= 3; gen++)
    for (int i = 0; i < 2; i++) {
      gtc_gen g;
      spec(&s[i], 7, gen);
      s[i].service = i ? "door-b" : "door-a";
      s[i].session_key[0] = (uint8_t)(s[i].session_key[0] ^ (uint8_t)i);
      assert_int_equal(gtc_gen_build(&g, &s[i]), 0);
      assert_int_equal(gtc_send_gen(&c[i], &g), 0);
      gtc_gen_fini(&g);
    }
  int acks[2] = {0, 0}, auth[2] = {0, 0};
  for (int i = 0; i < 2; i++)
    for (;;) {
      uint64_t gen;
      int code = 0;
      int rc = gtc_read_reply(&c[i], &gen, &code, GTC_TIMEOUT_MS);
      if (rc == 1 && ++acks[i] == 3)
        break;
      if (rc == 2) {
        assert_int_equal(code, GTP_E_AUTH);
        auth[i] = 1;
        break;
      }
      if (rc <= 0)
        break;
    }
  int w = acks[0] == 3 ? 0 : 1;
  assert_int_equal(acks[w], 3);
  assert_int_equal(auth[1 - w], 1);
  assert_int_equal(acks[1 - w], 0);
  /* The catalog holds the winner's three generations, service and key,
   * nothing of the loser's. */
  char hex[33], q[300], want[80];
  gtp_session_hex(s[0].session, hex);
  snprintf(q, sizeof q,
           "SELECT count(*) FROM gt_generations g JOIN gt_sessions x ON"
           " x.id = g.session_id WHERE x.session = '%s' AND x.service = '%s'",
           hex, w ? "door-b" : "door-a");
  assert_int_equal(fixture_sql_int(l.cat, q), 3);
  snprintf(q, sizeof q, "SELECT count(*) FROM gt_generations");
  assert_int_equal(fixture_sql_int(l.cat, q), 3);
  uint8_t kh[GTP_SHA256_SIZE];
  gtp_sha256(s[w].session_key, sizeof s[w].session_key, kh);
  char khex[2 * GTP_SHA256_SIZE + 1];
  for (int i = 0; i < GTP_SHA256_SIZE; i++)
    snprintf(khex + 2 * i, 3, "%02x", kh[i]);
  snprintf(want, sizeof want, "'%s'", khex);
  snprintf(q, sizeof q,
           "SELECT count(*) FROM gt_sessions WHERE session = '%s' AND"
           " encode(key_hash, 'hex') = %s",
           hex, want);
  assert_int_equal(fixture_sql_int(l.cat, q), 1);
  /* The loser comes back with its key: refused at HELLO now. */
  gtc_close(&c[1 - w]);
  gtp_welcome wl;
  assert_int_equal(gtc_connect(&c[1 - w], d[1 - w]->agent_port), 0);
  assert_int_equal(gtc_hello(&c[1 - w], &s[1 - w], NULL, &wl), GTP_E_AUTH);
  gtc_close(&c[1 - w]);
  assert_true(gtd_metric(d[1 - w], "gentrace_refused_total{reason=\"auth\"}") >=
              2);
  gtc_close(&c[w]);
  stop(0);
  stop(1);
}

/* ---- the door answers alike on both backends ---- */

#define DOOR_STEPS 10

/* Runs the door sequence on d; out[i] = reply kind * 100000 + code. */
static void door_run(gtd *d, int out[DOOR_STEPS]) {
  gtc c;
  gtf_spec s;
  int code, n = 0;
#define STEP(rc) out[n++] = (rc)*100000 + ((rc) == 2 ? -code : 0)
  spec(&s, 9, 1);
  hello(&c, d, &s);
  code = 0;
  STEP(send_gen(&c, &s, &code)); /* ACK */
  gtc_gen g;
  spec(&s, 9, 2); /* over --max-gen-size: TOOBIG */
  assert_int_equal(gtc_gen_build_random(&g, &s, 2, 1), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  uint64_t gen;
  int rc = gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS);
  STEP(rc);
  spec(&s, 9, 0); /* gen 0: CORRUPT */
  STEP(send_gen(&c, &s, &code));
  spec(&s, 9, 3); /* ledger over 2^48: TOOBIG */
  s.dropped = (1ull << 48) + 1;
  STEP(send_gen(&c, &s, &code));
  spec(&s, 9, 1); /* a resend: duplicate ACK */
  STEP(send_gen(&c, &s, &code));
  spec(&s, 9, 1); /* gen 1 with other bytes: CONFLICT */
  s.threads = 3;
  STEP(send_gen(&c, &s, &code));
  spec(&s, 9, 4);
  STEP(send_gen(&c, &s, &code));
  gtc_close(&c);
  usleep(300000); /* the daemon sees the close */
  /* Another key for the stored session: AUTH at HELLO. */
  spec(&s, 9, 5);
  s.session_key[3] ^= 0x40;
  gtp_welcome w;
  assert_int_equal(gtc_connect(&c, d->agent_port), 0);
  out[n++] = gtc_hello(&c, &s, NULL, &w);
  gtc_close(&c);
  /* The right key: WELCOME with the last stored generation. */
  spec(&s, 9, 5);
  assert_int_equal(gtc_connect(&c, d->agent_port), 0);
  out[n++] = gtc_hello(&c, &s, NULL, &w);
  out[n++] = w.has_last ? (int)w.last_gen : -1;
  gtc_close(&c);
  assert_int_equal(n, DOOR_STEPS);
#undef STEP
}

static void
test_shared_door__door_checks_answer_alike_on_both_backends(void **state) {
  store_loc l;
  fresh(&l, "door_alike");
  const char *lim[] = {"--max-gen-size", "64K", NULL};
  int sq[DOOR_STEPS], sh[DOOR_STEPS];
  door_run(start(0, NULL, lim), sq);
  stop(0);
  door_run(start(0, &l, lim), sh);
  stop(0);
  const int want[DOOR_STEPS] = {100000,
                                200000 - GTP_E_TOOBIG,
                                200000 - GTP_E_CORRUPT,
                                200000 - GTP_E_TOOBIG,
                                100000,
                                200000 - GTP_E_CONFLICT,
                                100000,
                                GTP_E_AUTH,
                                0,
                                4};
  for (int i = 0; i < DOOR_STEPS; i++) {
    if (sq[i] != want[i] || sh[i] != want[i])
      fail_msg("step %d: sqlite %d shared %d want %d", i, sq[i], sh[i],
               want[i]);
  }
}

/* ---- an object whose daemon died before its commit is swept ---- */

typedef struct found {
  char prefix[128];
  char key[600];
  int n;
} found;
static int find_key(void *ctx, const char *key, uint64_t size) {
  found *f = ctx;
  (void)size;
  if (strncmp(key, f->prefix, strlen(f->prefix)) == 0) {
    snprintf(f->key, sizeof f->key, "%s", key);
    f->n++;
  }
  return 0;
}

/* Objects under segments/DAEMON/ of the test's prefix; *key the last. */
static int objects_of(const store_loc *l, const char *daemon, char *key,
                      size_t cap) {
  s3_config cfg = {.url = l->obj};
  s3 *c = NULL;
  char *cause = NULL;
  if (s3_open(&cfg, &c, &cause) < 0)
    fail_msg("s3_open: %s", cause ? cause : "?");
  found f = {.n = 0};
  snprintf(f.prefix, sizeof f.prefix, "segments/%s/", daemon);
  int rc = s3_list(c, "segments/", find_key, &f, &cause);
  s3_close(c);
  if (rc < 0)
    fail_msg("s3_list: %s", cause ? cause : "?");
  free(cause);
  if (key)
    snprintf(key, cap, "%s", f.key);
  return f.n;
}

/* 1 when the bucket-relative key is stored (HEAD: read-after-write
 * consistent, unlike Swift's container listings, which lag). */
static int object_exists(const char *key) {
  char url[300];
  snprintf(url, sizeof url, "%s", getenv("GENTRACE_OBJECTS"));
  s3_config cfg = {.url = url};
  s3 *c = NULL;
  char *cause = NULL;
  if (s3_open(&cfg, &c, &cause) < 0)
    fail_msg("s3_open: %s", cause ? cause : "?");
  int rc = s3_head(c, key, NULL, &cause);
  s3_close(c);
  free(cause);
  if (rc < 0 && rc != GTP_E_NOTFOUND)
    fail_msg("s3_head %s: %d", key, rc);
  return rc == 0;
}

static void test_shared_door__orphan_of_a_daemon_killed_before_commit_is_swept(
    void **state) {
  store_loc l;
  fresh(&l, "door_orphan");
  char dead[64], live[64];
  snprintf(dead, sizeof dead, "door-dead-%ld", (long)getpid());
  snprintf(live, sizeof live, "door-live-%ld", (long)getpid());
  /* Each catalog commit stalls 30 s inside its transaction. */
  const char *stall[] = {"--daemon-id", dead, "--test-store-delay-ms", "30000",
                         NULL};
  gtd *d = start(0, &l, stall);
  gtc c;
  gtf_spec s;
  spec(&s, 12, 1);
  hello(&c, d, &s);
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  char key[600] = "";
  for (int i = 0; i < 100 && objects_of(&l, dead, key, sizeof key) == 0; i++)
    usleep(100000);
  assert_true(key[0] != '\0');
  usleep(200000); /* into the stalled commit */
  gtd_kill9(d);   /* PostgreSQL rolls its transaction back */
  gtd_cleanup(d);
  running[0] = NULL;
  gtc_close(&c);
  char q[800];
  snprintf(q, sizeof q,
           "SELECT count(*) FROM gt_segments WHERE object LIKE"
           " '%%segments/%s/%%'",
           dead);
  assert_int_equal(fixture_sql_int(l.cat, q), 0); /* an orphan */

  const char *sweep[] = {"--daemon-id", live, "--orphan-grace", "1s", NULL};
  gtd *e = start(1, &l, sweep);
  spec(&s, 13, 1);
  hello(&c, e, &s);
  int code;
  assert_int_equal(send_gen(&c, &s, &code), 1);
  gtc_close(&c);
  /* The listing names objects relative to the test's prefix; the catalog
   * and HEAD take them from the bucket's root. */
  char full[700];
  snprintf(full, sizeof full, "%s/%s", strrchr(l.obj, '/') + 1, key);
  assert_true(object_exists(full));
  /* The dead daemon's lease runs out (5 s), then a sweep (every 5 s). */
  int64_t t0 = now_ms();
  while (object_exists(full) && now_ms() - t0 < 40000)
    usleep(250000);
  assert_false(object_exists(full));
  assert_true(gtd_metric(e, "gentrace_shared_orphans_swept_total") >= 1);
  snprintf(q, sizeof q,
           "SELECT count(*) FROM gt_segments WHERE object = '%s' AND"
           " daemon = '(orphan)' AND live_gens = 0",
           full);
  assert_int_equal(fixture_sql_int(l.cat, q), 1);
  /* The live daemon's own (cataloged) objects stay. */
  PGconn *pc = PQconnectdb(l.cat);
  snprintf(q, sizeof q, "SELECT object FROM gt_segments WHERE daemon = '%s'",
           live);
  PGresult *r = PQexec(pc, q);
  assert_true(PQntuples(r) >= 1);
  for (int i = 0; i < PQntuples(r); i++)
    assert_true(object_exists(PQgetvalue(r, i, 0)));
  PQclear(r);
  PQfinish(pc);
  stop(1);
}

/* ---- `connected` alike on every daemon ---- */

/* `connected` of session hex in d's /v1/agents: 1, 0, or -1 not listed. */
static int connected(gtd *d, const char *hex) {
  int status = 0;
  char *body = gtd_http_get(d, "/v1/agents", &status);
  int v = -1;
  const char *p = body ? strstr(body, hex) : NULL;
  const char *k = p ? strstr(p, "\"connected\":") : NULL;
  if (k)
    v = strncmp(k + 12, "true", 4) == 0;
  free(body);
  return v;
}

static int wait_connected(gtd *d, const char *hex, int want, int ms) {
  int64_t t0 = now_ms();
  while (connected(d, hex) != want && now_ms() - t0 < ms)
    usleep(100000);
  return connected(d, hex);
}

static void test_shared_door__connected_agrees_across_daemons(void **state) {
  store_loc l;
  fresh(&l, "door_conn");
  gtd *a = start(0, &l, NULL), *b = start(1, &l, NULL);
  gtc c;
  gtf_spec s;
  int code;
  spec(&s, 14, 1);
  hello(&c, a, &s);
  assert_int_equal(send_gen(&c, &s, &code), 1);
  char hex[33];
  gtp_session_hex(s.session, hex);
  assert_int_equal(connected(a, hex), 1);
  assert_int_equal(wait_connected(b, hex, 1, 6000), 1);
  gtc_close(&c); /* leaves: both say so within a tick or two */
  assert_int_equal(wait_connected(b, hex, 0, 6000), 0);
  assert_int_equal(wait_connected(a, hex, 0, 6000), 0);
  spec(&s, 14, 2);
  hello(&c, a, &s);
  assert_int_equal(wait_connected(b, hex, 1, 6000), 1);
  /* Its daemon killed: the lease runs out and b says disconnected. */
  gtd_kill9(a);
  gtd_cleanup(a);
  running[0] = NULL;
  gtc_close(&c);
  assert_int_equal(wait_connected(b, hex, 0, 15000), 0);
  stop(1);
}

int main(void) {
  if (!getenv("GENTRACE_CATALOG") || !getenv("GENTRACE_OBJECTS")) {
    printf("SKIP: no cluster (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_shared_door__slow_catalog_delays_hellos_not_other_acks,
          teardown),
      cmocka_unit_test_teardown(
          test_shared_door__two_daemons_two_keys_one_session_one_wins,
          teardown),
      cmocka_unit_test_teardown(
          test_shared_door__door_checks_answer_alike_on_both_backends,
          teardown),
      cmocka_unit_test_teardown(
          test_shared_door__orphan_of_a_daemon_killed_before_commit_is_swept,
          teardown),
      cmocka_unit_test_teardown(
          test_shared_door__connected_agrees_across_daemons, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
