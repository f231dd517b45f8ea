/* test_web.c: the HTTP API over real sockets on 127.0.0.1 (port 0), backed
 * by a real SQLite database written through the store's own write path.
 * Answers are checked with python3's json module (independent of web/'s
 * JSON writer) and trace files with the real gtp_file_reader. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "chrome.h"
#include "format.h"
#include "json.h"
#include "web.h"
#include "webtest_db.h"
#include "webtest_http.h"

#define NSESS 4
#define NGENS 10
#define T0 INT64_C(1767225600000000000) /* gtf fixtures: 2026-01-01T00:00Z */
#define SEC INT64_C(1000000000)

static char dir[64], dbpath[128];
static wt_db db;
static web_server *srv;
static uint16_t port;
static unsigned submitted;
static volatile int healthy_flag = 1;
static char sid[NSESS][33];

/* Real callbacks with real values, as daemon/main.c would pass. */
static void cb_metrics(void *ctx, gtp_wbuf *out) {
  static const char m[] = "gentraced_test_sessions 4\n";
  gtp_wbuf_put(out, m, sizeof m - 1);
}
static int cb_healthy(void *ctx, const char **reason) {
  if (healthy_flag)
    return 1;
  *reason = "storage full; ingest paused";
  return 0;
}
static int cb_connected(void *ctx, const char *session) {
  return strcmp(session, sid[0]) == 0;
}

static void spec_for(gtf_spec *s, unsigned n, uint64_t gen) {
  gtf_spec_init(s, n, gen);
  if (n == 3)
    s->host = "host-b";
}

static const char *tags_for(unsigned n) {
  return n == 2 ? "{\"env\":\"staging\"}"
                : "{\"env\":\"prod\",\"zone\":\"eu-1\"}";
}

static unsigned start_timeout_s; /* 0 = the default */

static int start_server(web_server **w, uint16_t *p, const char *token,
                        uint64_t max_window) {
  web_config cfg;
  web_config_init(&cfg);
  cfg.port = 0;
  if (start_timeout_s)
    cfg.timeout_s = start_timeout_s;
  cfg.db_path = dbpath;
  cfg.read_token = token;
  /* The usual one (docs/HTTP.md); every other origin gets no grant. */
  cfg.cors_origins = "https://ui.perfetto.dev";
  if (max_window)
    cfg.max_window_bytes = max_window;
  cfg.metrics = cb_metrics;
  cfg.healthy = cb_healthy;
  cfg.connected = cb_connected;
  char *cause = NULL;
  int rc = web_start(&cfg, w, p, &cause);
  if (rc < 0)
    fprintf(stderr, "web_start: %s\n", cause ? cause : "?");
  free(cause);
  return rc;
}

static int setup(void **state) {
  snprintf(dir, sizeof dir, "/tmp/gt-webtest-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  snprintf(dbpath, sizeof dbpath, "%s/gentrace.db", dir);
  if (wt_db_open(&db, dbpath) < 0)
    return -1;
  for (unsigned n = 0; n < NSESS; n++) {
    uint8_t s[16];
    gtf_session(s, n);
    gtp_session_hex(s, sid[n]);
  }
  /* Commit order = submission order: gen-major, like a fleet. */
  for (unsigned g = 0; g < NGENS; g++)
    for (unsigned n = 0; n < NSESS; n++) {
      gtf_spec s;
      spec_for(&s, n, g);
      if (wt_db_submit(&db, &s, tags_for(n)) < 0)
        return -1;
      submitted++;
    }
  if (wt_db_wait(&db, submitted, 20000) < 0 || db.failed)
    return -1;
  if (start_server(&srv, &port, NULL, 0) < 0)
    return -1;
  wt_db_set_notify(&db, srv);
  return 0;
}

static int teardown(void **state) {
  wt_db_set_notify(&db, NULL);
  web_stop(srv);
  wt_db_close(&db);
  char p[160];
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", dbpath, sfx[i]);
    unlink(p);
  }
  rmdir(dir);
  return 0;
}

/* ---------------------------------------------------------------- helpers */

static void get(const char *path, wt_resp *r) {
  assert_int_equal(wt_get(port, path, r), 0);
}

/* Asserts that python's eval of expr over the JSON body prints "True". */
static void assert_py(const wt_resp *r, const char *expr) {
  char out[4096];
  int st = wt_py(r, expr, out, sizeof out);
  if (st != 0 || strcmp(out, "True") != 0)
    fprintf(stderr, "python check failed: %s\n  -> %s\n  body: %.600s\n", expr,
            out, (const char *)r->body);
  assert_int_equal(st, 0);
  assert_string_equal(out, "True");
}

static void assert_error(const char *path, int status, const char *code) {
  wt_resp r;
  get(path, &r);
  if (r.status != status)
    fprintf(stderr, "%s -> %d %s\n", path, r.status, (const char *)r.body);
  assert_int_equal(r.status, status);
  assert_true(json_valid((const char *)r.body, r.len));
  char expr[256];
  snprintf(expr, sizeof expr,
           "d['error']=='%s' and isinstance(d['message'],str) and "
           "len(d['message'])>0 and sorted(d)==['error','message']",
           code);
  assert_py(&r, expr);
  char v[64];
  /* CORS answers only an allowed Origin; this request sent none. */
  assert_false(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  wt_resp_free(&r);
}

typedef struct file_stats {
  int gens, bad;
  uint64_t events;
  uint64_t gen_of[64];
  char sess_of[64][33];
} file_stats;

/* Parses a whole trace file with the real reader. */
static int read_file(const wt_resp *r, file_stats *fs) {
  memset(fs, 0, sizeof *fs);
  gtp_file_reader fr;
  int rc = gtp_file_reader_init(&fr, r->body, r->len);
  if (rc < 0)
    return rc;
  gtp_gen g;
  while ((rc = gtp_file_reader_next(&fr, &g)) == 1) {
    if (fs->gens < 64) {
      fs->gen_of[fs->gens] = g.start.gen;
      gtp_session_hex(g.start.session, fs->sess_of[fs->gens]);
    }
    fs->gens++;
    fs->events += g.end.events;
    gtp_gen_fini(&g);
  }
  return rc;
}

static uint64_t fixture_events(unsigned n, uint64_t gen) {
  gtf_spec s;
  spec_for(&s, n, gen);
  return gtf_events(&s);
}

/* ------------------------------------------------------------------ tests */

static void test_healthz__ok_then_503_with_reason(void **state) {
  wt_resp r;
  get("/healthz", &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "d=={'status':'ok'}");
  wt_resp_free(&r);
  healthy_flag = 0;
  get("/healthz", &r);
  healthy_flag = 1;
  assert_int_equal(r.status, 503);
  assert_py(&r, "d['status']!='ok' and 'storage full' in d['reason']");
  wt_resp_free(&r);
}

static void test_metrics__daemon_part_and_web_counters(void **state) {
  wt_resp r;
  get("/healthz", &r); /* at least one 200 counted */
  wt_resp_free(&r);
  get("/metrics", &r);
  assert_int_equal(r.status, 200);
  const char *b = (const char *)r.body;
  assert_non_null(strstr(b, "gentraced_test_sessions 4\n"));
  assert_non_null(strstr(b, "gentrace_http_requests_total{code=\"200\"} "));
  assert_null(strstr(b, "gentrace_http_requests_total{code=\"200\"} 0\n"));
  assert_non_null(strstr(b, "gentrace_http_sent_bytes_total "));
  assert_non_null(strstr(b, "gentrace_http_active_downloads 0\n"));
  assert_non_null(strstr(b, "gentrace_http_feed_waiters "));
  char ct[128];
  assert_true(wt_header(&r, "Content-Type", ct, sizeof ct));
  assert_non_null(strstr(ct, "text/plain"));
  wt_resp_free(&r);
}

static void test_dashboard__serves_html_that_uses_the_api(void **state) {
  wt_resp r;
  get("/", &r);
  assert_int_equal(r.status, 200);
  char ct[128];
  assert_true(wt_header(&r, "Content-Type", ct, sizeof ct));
  assert_non_null(strstr(ct, "text/html"));
  assert_non_null(strstr((const char *)r.body, "/v1/agents"));
  assert_non_null(strstr((const char *)r.body, "/v1/feed"));
  wt_resp_free(&r);
}

static void test_agents__shape_counts_and_connected(void **state) {
  wt_resp r;
  get("/v1/agents", &r);
  assert_int_equal(r.status, 200);
  char v[64];
  assert_false(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  assert_py(&r, "len(d['agents'])==4");
  assert_py(&r, "all(set(['session','service','host','pid','tags','started',"
                "'last_seen','connected','generations','first_gen','last_gen',"
                "'events','bytes','lost','started_ns','last_seen_ns'])<=set(a)"
                " for a in d['agents'])");
  char expr[1024];
  snprintf(expr, sizeof expr,
           "all(a['generations']==10 and a['first_gen']==0 and "
           "a['last_gen']==9 and a['events']==10*%" PRIu64 " and "
           "isinstance(a['started_ns'],str) and "
           "int(a['started_ns'])==1767225600000000000 and "
           "a['started'].startswith('2026-01-01T00:00:00') and "
           "a['started'].endswith('Z') and "
           "a['connected']==(a['session']=='%s') and a['bytes']>0 "
           "for a in d['agents'])",
           fixture_events(0, 0), sid[0]);
  assert_py(&r, expr);
  /* Ledger: gtf dropped = gen%%3, evicted = gen%%2 over gens 0..9 = 9+5. */
  assert_py(&r, "all(a['lost']==14 for a in d['agents'])");
  assert_py(&r, "len(set(a['session'] for a in d['agents']))==4 and "
                "any(a['tags']=={'env':'staging'} for a in d['agents'])");
  wt_resp_free(&r);
}

static void test_agents__filters_by_service_host_and_tag(void **state) {
  wt_resp r;
  get("/v1/agents?service=checkout", &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "len(d['agents'])==2 and "
                "all(a['service']=='checkout' for a in d['agents'])");
  wt_resp_free(&r);
  get("/v1/agents?host=host-b", &r);
  char expr[256];
  snprintf(expr, sizeof expr, "[a['session'] for a in d['agents']]==['%s']",
           sid[3]);
  assert_py(&r, expr);
  wt_resp_free(&r);
  get("/v1/agents?tag=env:staging", &r);
  snprintf(expr, sizeof expr, "[a['session'] for a in d['agents']]==['%s']",
           sid[2]);
  assert_py(&r, expr);
  wt_resp_free(&r);
  get("/v1/agents?service=nosuch", &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "d=={'agents':[]}");
  wt_resp_free(&r);
  assert_error("/v1/agents?tag=nocolon", 400, "bad_parameter");
}

static void test_generations__shape_and_ranges(void **state) {
  char path[256];
  wt_resp r;
  snprintf(path, sizeof path, "/v1/agents/%s/generations", sid[1]);
  get(path, &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "[g['gen'] for g in d['generations']]==list(range(10))");
  assert_py(&r, "all(set(['gen','start','end','start_ns','end_ns','events',"
                "'bytes','stored_bytes','lost','status'])<=set(g) and "
                "int(g['end_ns'])-int(g['start_ns'])==10**9 and "
                "int(g['start_ns'])==1767225600000000000+g['gen']*10**9 and "
                "g['status']=='ok' and g['stored_bytes']>0 and "
                "g['lost']==g['gen']%3+g['gen']%2 for g in d['generations'])");
  wt_resp_free(&r);

  /* [from, to) overlap: from inside gen 2, to inside gen 5 -> 2..5. */
  snprintf(path, sizeof path,
           "/v1/agents/%s/generations?from=2026-01-01T00:00:02.5Z"
           "&to=%" PRId64,
           sid[1], T0 + 5 * SEC + SEC / 2);
  get(path, &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "[g['gen'] for g in d['generations']]==[2,3,4,5]");
  wt_resp_free(&r);

  snprintf(path, sizeof path, "/v1/agents/%s/generations?after=5&limit=3",
           sid[1]);
  get(path, &r);
  assert_py(&r, "[g['gen'] for g in d['generations']]==[6,7,8]");
  wt_resp_free(&r);

  snprintf(path, sizeof path, "/v1/agents/%s/generations",
           "0123456789abcdef0123456789abcdef");
  assert_error(path, 404, "not_found");
  assert_error("/v1/agents/nothex/generations", 400, "bad_parameter");
  snprintf(path, sizeof path, "/v1/agents/%s/generations?limit=0", sid[1]);
  assert_error(path, 400, "bad_parameter");
  snprintf(path, sizeof path, "/v1/agents/%s/generations?from=yesterday",
           sid[1]);
  assert_error(path, 400, "bad_parameter");
}

static void test_generation__download_is_one_exact_generation(void **state) {
  char path[256];
  wt_resp r;
  snprintf(path, sizeof path, "/v1/agents/%s/generations/7", sid[2]);
  get(path, &r);
  assert_int_equal(r.status, 200);
  assert_true(r.complete);
  file_stats fs;
  assert_int_equal(read_file(&r, &fs), 0);
  assert_int_equal(fs.gens, 1);
  assert_int_equal(fs.gen_of[0], 7);
  assert_string_equal(fs.sess_of[0], sid[2]);
  assert_int_equal(fs.events, fixture_events(2, 7));
  char v[256];
  assert_true(wt_header(&r, "Content-Type", v, sizeof v));
  assert_string_equal(v, "application/octet-stream");
  assert_true(wt_header(&r, "Content-Disposition", v, sizeof v));
  assert_non_null(strstr(v, "attachment; filename=\"frontend-"));
  assert_non_null(strstr(v, ".gentrace\""));
  wt_resp_free(&r);

  snprintf(path, sizeof path, "/v1/agents/%s/generations/7?format=chrome",
           sid[2]);
  get(path, &r);
  assert_int_equal(r.status, 200);
  assert_true(json_valid((const char *)r.body, r.len));
  assert_py(&r, "len(d['traceEvents'])>0 and "
                "any(e.get('ph')=='C' for e in d['traceEvents'])");
  wt_resp_free(&r);

  snprintf(path, sizeof path, "/v1/agents/%s/generations/99", sid[2]);
  assert_error(path, 404, "not_found");
  snprintf(path, sizeof path, "/v1/agents/%s/generations/x1", sid[2]);
  assert_error(path, 404, "not_found");
}

static void test_trace__session_window_is_exactly_the_overlap(void **state) {
  char path[256];
  wt_resp r;
  snprintf(path, sizeof path,
           "/v1/trace?session=%s&from=%" PRId64 "&to=%" PRId64, sid[0],
           T0 + 2 * SEC + SEC / 2, T0 + 5 * SEC + SEC / 2);
  get(path, &r);
  assert_int_equal(r.status, 200);
  assert_true(r.complete);
  file_stats fs;
  assert_int_equal(read_file(&r, &fs), 0);
  assert_int_equal(fs.gens, 4);
  uint64_t want = 0;
  for (int i = 0; i < 4; i++) {
    assert_int_equal(fs.gen_of[i], 2 + i); /* in time order */
    assert_string_equal(fs.sess_of[i], sid[0]);
    want += fixture_events(0, 2 + (uint64_t)i);
  }
  assert_int_equal(fs.events, want);
  char v[256];
  assert_true(wt_header(&r, "X-Gentrace-Generations", v, sizeof v));
  assert_string_equal(v, "4");
  assert_true(wt_header(&r, "X-Gentrace-Sessions", v, sizeof v));
  assert_string_equal(v, "1");
  assert_true(wt_header(&r, "X-Gentrace-Lost-Events", v, sizeof v));
  /* gens 2..5: dropped 2,0,1,2 + evicted 0,1,0,1 */
  assert_string_equal(v, "7");
  assert_true(wt_header(&r, "X-Gentrace-Start", v, sizeof v));
  assert_string_equal(v, "2026-01-01T00:00:02.000000000Z");
  assert_true(wt_header(&r, "Content-Disposition", v, sizeof v));
  assert_string_equal(v, "attachment; filename=\"frontend-20260101T000002Z."
                         "gentrace\"");
  assert_false(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  wt_resp_free(&r);
}

static void test_trace__service_window_merges_its_sessions(void **state) {
  wt_resp r;
  get("/v1/trace?service=frontend&from=2026-01-01T01:00:03%2B01:00"
      "&to=2026-01-01T00:00:05Z",
      &r);
  assert_int_equal(r.status, 200);
  file_stats fs;
  assert_int_equal(read_file(&r, &fs), 0);
  /* sessions 0 and 2 (frontend), gens 3 and 4 each, in time order */
  assert_int_equal(fs.gens, 4);
  assert_int_equal(fs.gen_of[0], 3);
  assert_int_equal(fs.gen_of[1], 3);
  assert_int_equal(fs.gen_of[2], 4);
  assert_int_equal(fs.gen_of[3], 4);
  assert_int_equal(fs.events,
                   2 * fixture_events(0, 3) + 2 * fixture_events(0, 4));
  char v[64];
  assert_true(wt_header(&r, "X-Gentrace-Sessions", v, sizeof v));
  assert_string_equal(v, "2");
  wt_resp_free(&r);

  /* host narrows a service: checkout = sessions 1 (host-a) and 3 (host-b). */
  get("/v1/trace?service=checkout&host=host-b&from=2026-01-01T00:00:00Z"
      "&to=2026-01-01T00:00:10Z",
      &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(read_file(&r, &fs), 0);
  assert_int_equal(fs.gens, 10);
  for (int i = 0; i < 10; i++)
    assert_string_equal(fs.sess_of[i], sid[3]);
  wt_resp_free(&r);
}

static void test_trace__chrome_window_is_json(void **state) {
  wt_resp r;
  get("/v1/trace?service=checkout&from=2026-01-01T00:00:00Z"
      "&to=2026-01-01T00:00:02Z&format=chrome",
      &r);
  assert_int_equal(r.status, 200);
  assert_true(r.complete);
  assert_true(json_valid((const char *)r.body, r.len));
  assert_py(&r, "len(d['traceEvents'])>0 and 'metadata' in d and "
                "len(set(e['pid'] for e in d['traceEvents']))==2");
  char v[256];
  assert_true(wt_header(&r, "Content-Type", v, sizeof v));
  assert_string_equal(v, "application/json");
  assert_true(wt_header(&r, "Content-Disposition", v, sizeof v));
  assert_non_null(strstr(v, ".json\""));
  wt_resp_free(&r);
}

static void test_trace__empty_window_is_a_valid_empty_file(void **state) {
  wt_resp r;
  get("/v1/trace?service=frontend&from=2030-01-01T00:00:00Z"
      "&to=2030-01-01T00:01:00Z",
      &r);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, GTP_FILE_HEADER_SIZE);
  file_stats fs;
  assert_int_equal(read_file(&r, &fs), 0);
  assert_int_equal(fs.gens, 0);
  char v[64];
  assert_true(wt_header(&r, "X-Gentrace-Generations", v, sizeof v));
  assert_string_equal(v, "0");
  wt_resp_free(&r);
  /* last= relative to now: the fixtures are in the past, so empty too. */
  get("/v1/trace?service=frontend&last=30s&format=chrome", &r);
  assert_int_equal(r.status, 200);
  assert_py(&r, "d['traceEvents']==[]");
  wt_resp_free(&r);
}

static void test_trace__over_max_window_bytes_is_413(void **state) {
  web_server *w2;
  uint16_t p2;
  assert_int_equal(start_server(&w2, &p2, NULL, 5000), 0);
  wt_resp r;
  assert_int_equal(wt_get(p2,
                          "/v1/trace?service=frontend&from=2026-01-01T00:00:00Z"
                          "&to=2026-01-01T00:00:10Z",
                          &r),
                   0);
  assert_int_equal(r.status, 413);
  assert_py(&r, "d['error']=='window_too_large' and 'session=' in "
                "d['message'] and 'host=' in d['message']");
  wt_resp_free(&r);
  /* One generation fits under the same limit. */
  char path[256];
  snprintf(path, sizeof path,
           "/v1/trace?session=%s&from=%" PRId64 "&to=%" PRId64, sid[0],
           T0 + SEC / 2, T0 + SEC / 2 + 1);
  assert_int_equal(wt_get(p2, path, &r), 0);
  assert_int_equal(r.status, 200);
  wt_resp_free(&r);
  web_stop(w2);
}

static void test_errors__every_bad_parameter_class_is_400_json(void **state) {
  static const char *const bad[] = {
      "/v1/trace?service=frontend&from=garbage",
      "/v1/trace?service=frontend&from=2026-13-01T00:00:00Z",
      "/v1/trace?service=frontend&from=2026-01-01T00:00:00",
      "/v1/trace?service=frontend&to=now",
      "/v1/trace?service=frontend&last=abc",
      "/v1/trace?service=frontend&last=0s",
      "/v1/trace?service=frontend&last=5m&from=-1h",
      "/v1/trace?service=frontend&from=-1m&to=-2m",
      "/v1/trace?service=frontend&format=xml",
      "/v1/trace?session=xyz",
      "/v1/trace?session=0123456789abcdef0123456789abcdef&service=a",
      "/v1/trace?from=-1m",
      "/v1/trace?service=frontend&form=-1m",
      "/v1/feed?wait=61",
      "/v1/feed?wait=-1",
      "/v1/feed?limit=0",
      "/v1/feed?limit=10001",
      "/v1/feed?after=abc",
      "/v1/feed?after=99999999999999999999999",
      "/v1/agents?bogus=1",
      "/healthz?x=1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_error(bad[i], 400, "bad_parameter");
}

/* A NUL (%00) or invalid UTF-8 in any parameter, name or value, is refused
 * with a 400 naming it, never cut at the NUL: service=victim%00x must not
 * read as service=victim. */
static void test_errors__nul_and_invalid_utf8_parameters_are_400(void **state) {
  static const struct {
    const char *path, *name;
  } bad[] = {
      {"/v1/trace?service=frontend%00x", "service"},
      {"/v1/trace?service=%ff%fe", "service"},
      {"/v1/trace?service=ab%c0%af", "service"},       /* overlong '/' */
      {"/v1/trace?service=ab%ed%a0%80", "service"},    /* surrogate */
      {"/v1/trace?service=frontend&host=h%00", "host"},
      {"/v1/agents?service=frontend%00", "service"},
      {"/v1/feed?after=1%00", "after"},
      {"/v1/trace?service=frontend&format=chrome%00x", "format"},
      {"/healthz?x=%80", "x"},
      {"/v1/trace?service=frontend&fo%00rm=chrome", "fo"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    wt_resp r;
    assert_int_equal(wt_get(port, bad[i].path, &r), 0);
    if (r.status != 400)
      fail_msg("%s: status %d, want 400", bad[i].path, r.status);
    char expr[128];
    snprintf(expr, sizeof expr,
             "d['error']=='bad_parameter' and d['message'].startswith('%s:')",
             bad[i].name);
    assert_py(&r, expr);
    wt_resp_free(&r);
  }
  /* Valid UTF-8 passes the door (and finds nothing). */
  wt_resp r;
  assert_int_equal(wt_get(port, "/v1/agents?service=caf%C3%A9", &r), 0);
  assert_int_equal(r.status, 200);
  assert_py(&r, "len(d['agents'])==0");
  wt_resp_free(&r);
  get("/metrics", &r);
  assert_non_null(strstr((const char *)r.body,
                         "gentrace_http_bad_text_parameters_total 10\n"));
  wt_resp_free(&r);
}

static void test_errors__404_405_and_cors_preflight(void **state) {
  assert_error("/v2/nothing", 404, "not_found");
  assert_error("/v1/agents/0123456789abcdef0123456789abcdef/x", 404,
               "not_found");
  wt_resp r;
  assert_int_equal(
      wt_request(port, "POST", "/v1/agents", "Content-Length: 2\r\n", &r), 0);
  assert_int_equal(r.status, 405);
  char v[128];
  assert_true(wt_header(&r, "Allow", v, sizeof v));
  assert_non_null(strstr(v, "GET"));
  assert_py(&r, "d['error']=='method_not_allowed'");
  wt_resp_free(&r);
  assert_int_equal(wt_request(port, "DELETE", "/v1/feed", NULL, &r), 0);
  assert_int_equal(r.status, 405);
  wt_resp_free(&r);

  assert_int_equal(
      wt_request(port, "OPTIONS", "/v1/trace",
                 "Origin: http://example.com\r\n"
                 "Access-Control-Request-Method: GET\r\n"
                 "Access-Control-Request-Headers: authorization\r\n",
                 &r),
      0);
  assert_int_equal(r.status, 204);
  /* Not an allowed origin: no CORS grant, so the browser refuses. */
  assert_false(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  wt_resp_free(&r);
  /* Nor an origin that merely starts like an allowed one. */
  assert_int_equal(wt_request(port, "GET", "/v1/agents",
                              "Origin: https://ui.perfetto.dev.evil.example\r\n",
                              &r),
                   0);
  assert_int_equal(r.status, 200);
  assert_false(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  wt_resp_free(&r);
  assert_int_equal(wt_request(port, "GET", "/v1/agents",
                              "Origin: https://ui.perfetto.dev\r\n", &r),
                   0);
  assert_int_equal(r.status, 200);
  assert_true(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  assert_string_equal(v, "https://ui.perfetto.dev");
  assert_true(wt_header(&r, "Vary", v, sizeof v));
  assert_string_equal(v, "Origin");
  wt_resp_free(&r);
  assert_int_equal(
      wt_request(port, "OPTIONS", "/v1/trace",
                 "Origin: https://ui.perfetto.dev\r\n"
                 "Access-Control-Request-Method: GET\r\n"
                 "Access-Control-Request-Headers: authorization\r\n",
                 &r),
      0);
  assert_int_equal(r.status, 204);
  assert_true(wt_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
  assert_string_equal(v, "https://ui.perfetto.dev");
  assert_true(wt_header(&r, "Access-Control-Allow-Methods", v, sizeof v));
  assert_non_null(strstr(v, "GET"));
  assert_true(wt_header(&r, "Access-Control-Allow-Headers", v, sizeof v));
  assert_non_null(strstr(v, "Authorization"));
  wt_resp_free(&r);

  assert_int_equal(wt_request(port, "HEAD", "/v1/agents", NULL, &r), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.len, 0);
  wt_resp_free(&r);
}

static void test_auth__read_token_guards_the_api(void **state) {
  web_server *w2;
  uint16_t p2;
  assert_int_equal(start_server(&w2, &p2, "s3cret-token", 0), 0);
  wt_resp r;
  static const char *const guarded[] = {"/v1/agents", "/metrics",
                                        "/v1/feed?after=0",
                                        "/v1/trace?service=frontend"};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(wt_get(p2, guarded[i], &r), 0);
    assert_int_equal(r.status, 401);
    assert_py(&r, "d['error']=='unauthorized'");
    wt_resp_free(&r);
  }
  assert_int_equal(wt_request(p2, "GET", "/v1/agents",
                              "Authorization: Bearer s3cret-tokeX\r\n", &r),
                   0);
  assert_int_equal(r.status, 401);
  wt_resp_free(&r);
  assert_int_equal(wt_request(p2, "GET", "/v1/agents",
                              "Authorization: Bearer s3cret-token-longer\r\n",
                              &r),
                   0);
  assert_int_equal(r.status, 401);
  wt_resp_free(&r);
  assert_int_equal(wt_request(p2, "GET", "/v1/agents",
                              "Authorization: Bearer s3cret-token\r\n", &r),
                   0);
  assert_int_equal(r.status, 200);
  assert_py(&r, "len(d['agents'])==4");
  wt_resp_free(&r);
  assert_int_equal(wt_get(p2, "/v1/agents?token=s3cret-token", &r), 0);
  assert_int_equal(r.status, 200);
  wt_resp_free(&r);
  /* Health checks and the page itself stay open. */
  assert_int_equal(wt_get(p2, "/healthz", &r), 0);
  assert_int_equal(r.status, 200);
  wt_resp_free(&r);
  web_stop(w2);
}

/* A client that trickles its request headers a byte at a time never trips
 * the idle timeout; the headers deadline (the HTTP timeout, in total) cuts
 * it, counts it, and leaves other clients alone. */
static void test_limits__slowloris_headers_are_cut(void **state) {
  web_server *w2;
  uint16_t p2;
  start_timeout_s = 2;
  int rc = start_server(&w2, &p2, NULL, 0);
  start_timeout_s = 0;
  assert_int_equal(rc, 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p2)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  int64_t t0 = wt_mono_ns(), cut_after = -1;
  for (size_t i = 0; i < sizeof req - 1; i++) {
    /* Each byte well inside the 2 s idle timeout. */
    if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1) {
      cut_after = wt_mono_ns() - t0;
      break;
    }
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, 200) == 1) {
      char c;
      if (recv(fd, &c, 1, MSG_DONTWAIT) <= 0) {
        cut_after = wt_mono_ns() - t0;
        break;
      }
    }
  }
  close(fd);
  /* Cut after the 2 s deadline (not at once), well before the 24 s the
   * whole trickle would take; generous bounds. */
  assert_true(cut_after >= 0);
  assert_true(cut_after >= 1 * SEC);
  assert_true(cut_after < 10 * SEC);
  wt_resp r;
  assert_int_equal(wt_get(p2, "/metrics", &r), 0);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr((char *)r.body, "gentrace_http_slow_clients_cut_total 1\n"));
  wt_resp_free(&r);
  web_stop(w2);
}

/* Pages through the feed with `limit`, returning "sess:gen" items joined by
 * spaces and the final cursor. */
static void feed_all(unsigned limit, char *items, size_t cap, char *cursor,
                     size_t ccap) {
  snprintf(cursor, ccap, "0");
  items[0] = 0;
  size_t off = 0;
  for (int page = 0; page < 100; page++) {
    char path[128];
    snprintf(path, sizeof path, "/v1/feed?after=%s&limit=%u", cursor, limit);
    wt_resp r;
    get(path, &r);
    assert_int_equal(r.status, 200);
    char out[4096];
    assert_int_equal(
        wt_py(&r,
              "d['cursor']+'|'+' '.join(g['session'][:6]+':'+str(g['gen'])"
              " for g in d['generations'])",
              out, sizeof out),
        0);
    wt_resp_free(&r);
    char *bar = strchr(out, '|');
    assert_non_null(bar);
    *bar = 0;
    if (bar[1] == 0) {
      assert_string_equal(out, cursor); /* nothing new: cursor stays */
      return;
    }
    assert_string_not_equal(out, cursor);
    snprintf(cursor, ccap, "%.31s", out);
    off += (size_t)snprintf(items + off, cap - off, "%s%s", off ? " " : "",
                            bar + 1);
  }
  fail_msg("feed did not end");
}

static void test_feed__pages_never_repeat_or_skip(void **state) {
  char want[4096] = "", got[4096], cursor[32], all_cursor[32];
  size_t off = 0;
  for (unsigned g = 0; g < NGENS; g++)
    for (unsigned n = 0; n < NSESS; n++)
      off += (size_t)snprintf(want + off, sizeof want - off, "%s%.6s:%u",
                              off ? " " : "", sid[n], g);
  feed_all(1000, got, sizeof got, all_cursor, sizeof all_cursor);
  assert_string_equal(got, want); /* commit order, every one once */
  feed_all(7, got, sizeof got, cursor, sizeof cursor);
  assert_string_equal(got, want);
  assert_string_equal(cursor, all_cursor);

  /* The shape of one entry. */
  wt_resp r;
  get("/v1/feed?after=0&limit=1", &r);
  assert_py(&r, "len(d['generations'])==1 and isinstance(d['cursor'],str) "
                "and set(['session','service','host','gen','start','end',"
                "'events','bytes','lost'])<=set(d['generations'][0])");
  wt_resp_free(&r);
}

static void test_feed__since_starts_at_a_time(void **state) {
  char items[4096], all_cursor[32];
  feed_all(1000, items, sizeof items, all_cursor, sizeof all_cursor);
  /* Everything here committed in the last hour: since=-1h is the whole
   * feed, from its first generation. */
  wt_resp r, a;
  get("/v1/feed?since=-1h&limit=1000", &r);
  assert_int_equal(r.status, 200);
  get("/v1/feed?after=0&limit=1000", &a);
  assert_int_equal(a.status, 200);
  assert_int_equal(r.len, a.len);
  assert_memory_equal(r.body, a.body, a.len);
  wt_resp_free(&r);
  wt_resp_free(&a);
  /* A time after the last commit: nothing yet, and the cursor is the
   * newest, so following it yields only new commits. */
  get("/v1/feed?since=now%2B1h", &r);
  assert_int_equal(r.status, 200);
  char out[64], want[80];
  assert_int_equal(wt_py(&r, "str(len(d['generations']))+'|'+d['cursor']",
                         out, sizeof out),
                   0);
  snprintf(want, sizeof want, "0|%s", all_cursor);
  assert_string_equal(out, want);
  wt_resp_free(&r);
  static const char *const bad[] = {"/v1/feed?since=yesterday",
                                    "/v1/feed?since=-1h&after=0", NULL};
  for (size_t i = 0; bad[i]; i++) {
    get(bad[i], &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr((char *)r.body, "since"));
    wt_resp_free(&r);
  }
}

typedef struct poll_arg {
  char path[128];
  wt_resp r;
  int64_t done_ns;
} poll_arg;

static void *poll_thread(void *p) {
  poll_arg *a = p;
  wt_get(port, a->path, &a->r);
  a->done_ns = wt_mono_ns();
  return NULL;
}

static void test_feed__long_poll_answers_soon_after_a_commit(void **state) {
  char items[4096], cursor[32];
  feed_all(1000, items, sizeof items, cursor, sizeof cursor);
  poll_arg a = {0};
  snprintf(a.path, sizeof a.path, "/v1/feed?after=%s&wait=30", cursor);
  int64_t t0 = wt_mono_ns();
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, poll_thread, &a), 0);
  /* Wait until the request is really parked (the gauge says so), instead
   * of sleeping a guessed time. */
  for (int i = 0; i < 500; i++) {
    wt_resp m;
    get("/metrics", &m);
    int parked = strstr((char *)m.body, "gentrace_http_feed_waiters 1\n") != 0;
    wt_resp_free(&m);
    if (parked)
      break;
    usleep(10000);
  }
  gtf_spec s;
  spec_for(&s, 1, NGENS); /* a new generation of session 1 */
  assert_int_equal(wt_db_submit(&db, &s, tags_for(1)), 0);
  submitted++;
  assert_int_equal(wt_db_wait(&db, submitted, 10000), 0);
  pthread_join(th, NULL);
  assert_int_equal(a.r.status, 200);
  char expr[256];
  snprintf(expr, sizeof expr,
           "[(g['session'],g['gen']) for g in d['generations']]=="
           "[('%s',%u)] and int(d['cursor'])>%s",
           sid[1], NGENS, cursor);
  assert_py(&a.r, expr);
  wt_resp_free(&a.r);
  pthread_mutex_lock(&db.lock);
  int64_t notified = db.notify_mono_ns;
  pthread_mutex_unlock(&db.lock);
  /* Generous bound: far below the 30 s wait. */
  assert_true(a.done_ns - notified < 5 * SEC);
  assert_true(a.done_ns - t0 < 15 * SEC);

  /* Nothing new with wait=0: at once, same cursor, empty list. */
  snprintf(a.path, sizeof a.path, "/v1/feed?after=999999&wait=0");
  get(a.path, &a.r);
  assert_py(&a.r, "d=={'generations':[],'cursor':'999999'}");
  wt_resp_free(&a.r);
}

static void test_feed__after_latest_starts_at_the_newest_commit(void **state) {
  char items[4096], cursor[32];
  feed_all(1000, items, sizeof items, cursor, sizeof cursor);
  wt_resp r;
  get("/v1/feed?after=latest", &r);
  assert_int_equal(r.status, 200);
  char expr[128];
  snprintf(expr, sizeof expr, "d=={'generations':[],'cursor':'%s'}", cursor);
  assert_py(&r, expr);
  wt_resp_free(&r);
  get("/v1/feed?after=newest", &r);
  assert_int_equal(r.status, 400);
  wt_resp_free(&r);
}

static uint16_t stop_port;
static void *poll_stop_thread(void *p) {
  wt_resp *r = p;
  wt_get(stop_port, "/v1/feed?after=999999&wait=60", r);
  return NULL;
}

static void test_feed__stop_ends_waiting_polls_at_once(void **state) {
  web_server *w2;
  assert_int_equal(start_server(&w2, &stop_port, NULL, 0), 0);
  wt_resp r = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, poll_stop_thread, &r), 0);
  for (int i = 0; i < 500; i++) {
    wt_resp m;
    assert_int_equal(wt_get(stop_port, "/metrics", &m), 0);
    int parked = strstr((char *)m.body, "gentrace_http_feed_waiters 1\n") != 0;
    wt_resp_free(&m);
    if (parked)
      break;
    usleep(10000);
  }
  int64_t t0 = wt_mono_ns();
  web_stop(w2);
  int64_t took = wt_mono_ns() - t0;
  pthread_join(th, NULL);
  assert_true(took < 10 * SEC); /* not the 60 s wait */
  wt_resp_free(&r);
}

/* Deletes generations >= from_gen of a session behind the store's back
 * (what a bug or another daemon could do; retention itself honours pins). */
static void delete_gens(const char *session, int64_t from_gen) {
  sqlite3 *h;
  assert_int_equal(sqlite3_open(dbpath, &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 10000);
  char sql[512];
  snprintf(sql, sizeof sql,
           "BEGIN;"
           "DELETE FROM payloads WHERE seq IN (SELECT g.seq FROM generations g"
           " JOIN sessions s ON s.id=g.session_id WHERE s.session='%s'"
           " AND g.gen>=%" PRId64 ");"
           "DELETE FROM generations WHERE seq IN (SELECT g.seq FROM"
           " generations g JOIN sessions s ON s.id=g.session_id"
           " WHERE s.session='%s' AND g.gen>=%" PRId64 ");"
           "COMMIT;",
           session, from_gen, session, from_gen);
  assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
}

static int64_t seq_of(const char *session, int64_t gen) {
  sqlite3 *h;
  sqlite3_stmt *st;
  int64_t seq = -1;
  assert_int_equal(sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  assert_int_equal(
      sqlite3_prepare_v2(h,
                         "SELECT g.seq FROM generations g JOIN sessions s ON "
                         "s.id=g.session_id WHERE s.session=?1 AND g.gen=?2",
                         -1, &st, NULL),
      SQLITE_OK);
  sqlite3_bind_text(st, 1, session, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, gen);
  if (sqlite3_step(st) == SQLITE_ROW)
    seq = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return seq;
}

/* A window bigger than every socket buffer on the way: while the client
 * stalls, nothing holds retention back (no pins); when generations the
 * download still had to send are deleted, it ends there: the file holds
 * exactly the generations before the first deleted one (valid), the
 * transfer ends without its last chunk (incomplete), and the metrics say
 * so. Runs last: it adds a session the other tests do not expect. */
static void test_trace__stalled_download_ends_early_when_retention_deletes(
    void **state) {
  enum { BIG = 24, DEL_FROM = 21 };
  const int64_t t1 = T0 + 100000 * SEC;
  uint8_t s[16];
  char big[33];
  gtf_session(s, 9);
  gtp_session_hex(s, big);
  for (unsigned g = 0; g < BIG; g++) {
    assert_int_equal(wt_db_submit_big(&db, s, g, t1 + (int64_t)g * SEC, 16), 0);
    submitted++;
  }
  assert_int_equal(wt_db_wait(&db, submitted, 60000), 0);

  char path[256];
  snprintf(path, sizeof path,
           "/v1/trace?session=%s&from=%" PRId64 "&to=%" PRId64, big, t1,
           t1 + BIG * SEC);
  int fd = wt_open(port, "GET", path, NULL, 4096);
  assert_true(fd >= 0);
  uint8_t head[8192];
  size_t n = 0;
  while (n < sizeof head && !memmem(head, n, "\r\n\r\n", 4)) {
    ssize_t r = read(fd, head + n, sizeof head - n);
    assert_true(r > 0);
    n += (size_t)r;
  }
  /* The response is under way; the store may delete what it has not sent
   * yet (here behind its back, as retention would). */
  assert_true(seq_of(big, DEL_FROM) > 0);
  delete_gens(big, DEL_FROM);

  wt_resp r;
  assert_int_equal(wt_finish(fd, head, n, &r), 0);
  assert_int_equal(r.status, 200);
  assert_false(r.complete); /* the client can tell */
  char v[64];
  assert_true(wt_header(&r, "X-Gentrace-Generations", v, sizeof v));
  assert_int_equal(atoi(v), BIG); /* promised before the deletion */
  file_stats fs;
  assert_int_equal(read_file(&r, &fs), 0);
  assert_int_equal(fs.gens, DEL_FROM);
  for (int i = 0; i < DEL_FROM; i++)
    assert_int_equal(fs.gen_of[i], i);
  wt_resp_free(&r);
  /* dl_free runs when MHD is done with the connection: give it a moment. */
  for (int i = 0; i < 500; i++) {
    get("/metrics", &r);
    int done = strstr((const char *)r.body,
                      "gentrace_http_downloads_ended_early_total 1\n") != NULL;
    if (done)
      break;
    wt_resp_free(&r);
    usleep(10000);
  }
  assert_non_null(strstr((const char *)r.body,
                         "gentrace_http_downloads_ended_early_total 1\n"));
  assert_non_null(strstr((const char *)r.body,
                         "gentrace_http_skipped_generations_total 3\n"));
  wt_resp_free(&r);
}

int main(void) {
  /* Window downloads here use two read-ahead workers, whatever the CPUs,
   * so that path runs (and under TSan in CI); the system and integration
   * tests keep the one-worker path of a 2-CPU machine. */
  setenv("GENTRACE_TEST_DL_WORKERS", "2", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_healthz__ok_then_503_with_reason),
      cmocka_unit_test(test_metrics__daemon_part_and_web_counters),
      cmocka_unit_test(test_dashboard__serves_html_that_uses_the_api),
      cmocka_unit_test(test_agents__shape_counts_and_connected),
      cmocka_unit_test(test_agents__filters_by_service_host_and_tag),
      cmocka_unit_test(test_generations__shape_and_ranges),
      cmocka_unit_test(test_generation__download_is_one_exact_generation),
      cmocka_unit_test(test_trace__session_window_is_exactly_the_overlap),
      cmocka_unit_test(test_trace__service_window_merges_its_sessions),
      cmocka_unit_test(test_trace__chrome_window_is_json),
      cmocka_unit_test(test_trace__empty_window_is_a_valid_empty_file),
      cmocka_unit_test(test_trace__over_max_window_bytes_is_413),
      cmocka_unit_test(test_errors__every_bad_parameter_class_is_400_json),
      cmocka_unit_test(test_errors__nul_and_invalid_utf8_parameters_are_400),
      cmocka_unit_test(test_errors__404_405_and_cors_preflight),
      cmocka_unit_test(test_auth__read_token_guards_the_api),
      cmocka_unit_test(test_limits__slowloris_headers_are_cut),
      cmocka_unit_test(test_feed__pages_never_repeat_or_skip),
      cmocka_unit_test(test_feed__since_starts_at_a_time),
      cmocka_unit_test(test_feed__long_poll_answers_soon_after_a_commit),
      cmocka_unit_test(test_feed__after_latest_starts_at_the_newest_commit),
      cmocka_unit_test(test_feed__stop_ends_waiting_polls_at_once),
      cmocka_unit_test(
          test_trace__stalled_download_ends_early_when_retention_deletes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
