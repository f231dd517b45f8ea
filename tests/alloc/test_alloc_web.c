/* test_alloc_web.c: every allocation failure of each HTTP endpoint, walked.
 *
 * The server under test is the real web/ server (libmicrohttpd, its own
 * threads) on 127.0.0.1 port 0, on the storage of a real SQLite database
 * (as gentraced runs it) filled through the store's write path
 * (tests/web/webtest_db.c) with one retention pin; the client is
 * tests/web/webtest_http.c on this thread, over a real socket. One run:
 * open the storage and start the server (outside the walk), then with the
 * Nth allocation of the
 * server's threads failing (web/'s own, and SQLite's on the walks that say
 * so), one request, then stop the server (outside the walk again, so that
 * whatever the request left allocated is freed or reported as a leak).
 *
 * Every run must show, whatever N, one of:
 *   - the answer of a run without failures (the failure was absorbed), or
 *     for /metrics any complete 200 (its counters move);
 *   - a clean error: 500 or 503 with a JSON body naming the error;
 *   - a download (200, chunked) that ends early without its terminating
 *     chunk, every byte before the cut the right one: the client sees an
 *     incomplete transfer, never a short trace that looks whole;
 * and never a crash, a leak (the live set of failalloc; LeakSanitizer in
 * the ASan build), another status, or no answer at all.
 *
 * `make check` walks every Nth allocation with N = 1 for web/'s own and
 * N = WEB_SQLITE_STEP when SQLite's fail too (a run makes several times as
 * many); GT_ALLOC_WALK_FULL=1 walks all of them.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "failalloc.h"
#include "hold.h"
#include "storage.h"
#include "webtest_db.h"
#include "webtest_http.h"

#define WALK_MAX 20000
#define WEB_SQLITE_STEP 5

static char dir[64], db[128];
static char sid_hex[33]; /* a session of the fixture database */

static void quiet_log(void *ctx, int level, const char *msg) {
  (void)ctx;
  (void)level;
  (void)msg; /* the walk's failures log by the thousand */
}

static int healthy(void *ctx, const char **reason) {
  (void)ctx;
  (void)reason;
  return 1;
}

static void no_done(void *ctx, store_gen *g) {
  (void)ctx;
  store_gen_free(g); /* nothing is submitted */
}

static void quiet_store_log(void *ctx, const char *kv) {
  (void)ctx;
  (void)kv;
}

static int open_storage(storage **st) {
  storage_config sc;
  memset(&sc, 0, sizeof sc);
  sc.sqlite.path = db;
  sc.sqlite.log = quiet_store_log;
  char *cause = NULL;
  int rc = storage_open(&sc, no_done, NULL, st, &cause);
  if (rc < 0) {
    fprintf(stderr, "storage_open: %s\n", cause ? cause : "?");
    free(cause);
  }
  return rc;
}

/* As gentraced runs it: on the daemon's storage (pins need it). */
static int start(storage *st, web_server **w, uint16_t *port) {
  web_config cfg;
  web_config_init(&cfg);
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  cfg.db_path = db;
  cfg.storage = st;
  cfg.threads = 1;
  cfg.log = quiet_log;
  cfg.healthy = healthy;
  char *cause = NULL;
  int rc = web_start(&cfg, w, port, &cause);
  if (rc < 0) {
    fprintf(stderr, "web_start: %s\n", cause ? cause : "?");
    free(cause);
  }
  return rc;
}

/* ------------------------------------------------------------ endpoints */

typedef struct endpoint {
  const char *name;
  char path[256];
  int exact;        /* the body of a clean run is the only right one */
  int sqlite;       /* walk SQLite's allocations too */
  wt_resp clean;    /* the answer of a run without failures */
  unsigned answers; /* what the walk saw: the clean answer, */
  unsigned errors;  /* 500/503 JSON, */
  unsigned cut;     /* downloads ended early, */
  unsigned broken;  /* and anything else */
} endpoint;

static int is_json_error(const wt_resp *r) {
  return (r->status == 500 || r->status == 503) && r->complete && r->len > 0 &&
         r->body[0] == '{' &&
         strstr((const char *)r->body, "\"error\"") != NULL;
}

static int is_chunked(const wt_resp *r) {
  char te[64];
  return wt_header(r, "Transfer-Encoding", te, sizeof te) &&
         strstr(te, "chunked") != NULL;
}

/* Judges one answer against the clean one; 0 if allowed. */
static int judge(endpoint *e, int rc, const wt_resp *r) {
  if (rc != 0 || r->status == 0) {
    fprintf(stderr, "%s: no answer\n", e->name);
    e->broken++;
    return 1;
  }
  if (r->status == e->clean.status && r->complete &&
      (!e->exact || (r->len == e->clean.len &&
                     memcmp(r->body, e->clean.body, r->len) == 0))) {
    e->answers++;
    return 0;
  }
  if (is_json_error(r)) {
    e->errors++;
    return 0;
  }
  if (r->status == 200 && e->clean.status == 200 && !r->complete &&
      is_chunked(r) && r->len <= e->clean.len &&
      (!e->exact || memcmp(r->body, e->clean.body, r->len) == 0)) {
    e->cut++;
    return 0;
  }

  fprintf(stderr, "%s: status %d, %zu bytes%s: %.200s\n", e->name, r->status,
          r->len, r->complete ? "" : " (cut)", (const char *)r->body);
  e->broken++;
  return 1;
}

static int op_request(void *ctx, const char **why) {
  endpoint *e = ctx;
  long n = fa_pause(); /* the server's start is walked elsewhere */
  web_server *w = NULL;
  storage *st = NULL;
  uint16_t port = 0;
  if (open_storage(&st) != 0 || start(st, &w, &port) != 0) {
    storage_close(st);
    *why = "web_start failed outside the walk";
    return 2;
  }
  fa_sqlite_walk(e->sqlite);
  fa_exempt(1);
  fa_resume(n);
  wt_resp r;
  memset(&r, 0, sizeof r);
  int rc = wt_get(port, e->path, &r);
  fa_pause();
  fa_exempt(0);
  fa_sqlite_walk(0);
  web_stop(w);
  storage_close(st);
  int bad = judge(e, rc, &r);
  wt_resp_free(&r);
  *why = "request failed";
  return bad;
}

static void walk_endpoint(endpoint *e) {
  /* The clean answer, twice: an endpoint whose answer moves between two
   * clean runs cannot be compared byte for byte. */
  web_server *w;
  storage *st;
  uint16_t port;
  assert_int_equal(open_storage(&st), 0);
  assert_int_equal(start(st, &w, &port), 0);
  assert_int_equal(wt_get(port, e->path, &e->clean), 0);
  wt_resp again;
  assert_int_equal(wt_get(port, e->path, &again), 0);
  web_stop(w);
  storage_close(st);
  assert_true(e->clean.status == 200 && e->clean.complete);
  if (e->exact)
    assert_true(again.len == e->clean.len &&
                memcmp(again.body, e->clean.body, again.len) == 0);
  wt_resp_free(&again);

  const char *full = getenv("GT_ALLOC_WALK_FULL");
  long step =
      e->sqlite && !(full && strcmp(full, "1") == 0) ? WEB_SQLITE_STEP : 1;
  fa_report rep;
  int rc = fa_walk_step(e->name, op_request, e, WALK_MAX, step, &rep);
  fprintf(stderr,
          "%s: %ld runs (every %ld): %u clean answers, %u JSON errors, "
          "%u downloads cut, %u broken\n",
          e->name, rep.runs, step, e->answers, e->errors, e->cut, e->broken);
  assert_int_equal(rc, 0);
  assert_int_equal(e->broken, 0);
  assert_true(rep.failures > 0);
  assert_true(rep.runs < WALK_MAX);
  wt_resp_free(&e->clean);
}

#define ENDPOINT_TEST(fn, label, exact_, sqlite_, ...)                         \
  static void fn(void **state) {                                               \
    (void)state;                                                               \
    endpoint e = {.name = label, .exact = exact_, .sqlite = sqlite_};          \
    snprintf(e.path, sizeof e.path, __VA_ARGS__);                              \
    walk_endpoint(&e);                                                         \
  }

#define WINDOW "from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z"

ENDPOINT_TEST(test_alloc_web__healthz, "GET /healthz", 1, 0, "/healthz")
ENDPOINT_TEST(test_alloc_web__metrics, "GET /metrics", 0, 0, "/metrics")
ENDPOINT_TEST(test_alloc_web__agents, "GET /v1/agents", 1, 1, "/v1/agents")
ENDPOINT_TEST(test_alloc_web__session_generations,
              "GET /v1/agents/{session}/generations", 1, 1,
              "/v1/agents/%s/generations", sid_hex)
ENDPOINT_TEST(test_alloc_web__session_generation,
              "GET /v1/agents/{session}/generations/{gen}", 1, 1,
              "/v1/agents/%s/generations/2", sid_hex)
ENDPOINT_TEST(test_alloc_web__trace_native, "GET /v1/trace (native)", 1, 1,
              "/v1/trace?service=frontend&" WINDOW)
ENDPOINT_TEST(test_alloc_web__trace_chrome, "GET /v1/trace (chrome)", 1, 0,
              "/v1/trace?service=frontend&format=chrome&" WINDOW)
ENDPOINT_TEST(test_alloc_web__search, "GET /v1/search", 1, 1,
              "/v1/search?service=frontend&name=request&" WINDOW)
ENDPOINT_TEST(test_alloc_web__summary, "GET /v1/summary", 1, 1,
              "/v1/summary?service=frontend&" WINDOW)
ENDPOINT_TEST(test_alloc_web__feed, "GET /v1/feed", 1, 1,
              "/v1/feed?after=0&limit=10")
ENDPOINT_TEST(test_alloc_web__pins, "GET /v1/pins", 1, 1, "/v1/pins")

/* ------------------------------------------------------------ fixture */

static int setup(void **state) {
  (void)state;
  if (fa_scratch_dir(dir, sizeof dir, "gt-allocweb") != 0)
    return -1;
  snprintf(db, sizeof db, "%s/web.db", dir);
  wt_db d;
  if (wt_db_open(&d, db) != 0)
    return -1;
  /* Two sessions of each service, three generations each. */
  unsigned total = 0;
  for (unsigned s = 0; s < 4; s++)
    for (uint64_t g = 1; g <= 3; g++, total++) {
      gtf_spec sp;
      gtf_spec_init(&sp, s, g);
      if (wt_db_submit(&d, &sp, "{\"env\":\"walk\"}") != 0)
        return -1;
    }
  int rc = wt_db_wait(&d, total, 10000);
  wt_db_close(&d);
  /* One retention pin, for /v1/pins to list. */
  storage *st;
  if (rc != 0 || open_storage(&st) != 0)
    return -1;
  hold_req q = {.service = "frontend",
                .from_ns = 1767225600000000000,
                .to_ns = 1767225660000000000,
                .reason = "walk",
                .created_ns = 1,
                .expires_ns = INT64_MAX};
  hold_added a;
  rc = hold_add(storage_holds(st), &q, 0, &a);
  storage_close(st);
  uint8_t sid[16];
  gtf_session(sid, 0);
  gtp_session_hex(sid, sid_hex);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  fa_unlink_db(db);
  rmdir(dir);
  return 0;
}

int main(void) {
  fa_sqlite_hook(0); /* on for the walks that say so */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_web__healthz),
      cmocka_unit_test(test_alloc_web__metrics),
      cmocka_unit_test(test_alloc_web__agents),
      cmocka_unit_test(test_alloc_web__session_generations),
      cmocka_unit_test(test_alloc_web__session_generation),
      cmocka_unit_test(test_alloc_web__trace_native),
      cmocka_unit_test(test_alloc_web__trace_chrome),
      cmocka_unit_test(test_alloc_web__search),
      cmocka_unit_test(test_alloc_web__summary),
      cmocka_unit_test(test_alloc_web__feed),
      cmocka_unit_test(test_alloc_web__pins),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
