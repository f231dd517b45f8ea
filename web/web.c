/* web.c: the HTTP server of gentraced: lifecycle, routing, auth, CORS,
 * errors, /healthz, /metrics and the dashboard. The API endpoints live in
 * web_list.c, web_trace.c and web_feed.c.
 *
 * Threads: libmicrohttpd in thread-per-connection mode. Long polls
 * (/v1/feed) and streamed downloads then simply block their own thread,
 * which keeps each handler a straight line; the connection limit bounds the
 * threads. SQLite work goes through a bounded pool of read connections.
 *
 * Owns: the MHD daemon, the reader pool, copies of the config strings.
 * Invariants:
 *  1. Access-Control-Allow-Origin MUST be sent only to an Origin named in
 *     cfg.cors_origins (web_queue decides for every answer), otherwise any
 *     web page the user visits could read traces from a daemon on
 *     localhost. Same-origin pages (the dashboard) need no header.
 *  2. Every error answer MUST be JSON {"error","message"} (web_error),
 *     otherwise clients cannot tell a bad parameter from a proxy failure.
 *  3. web_stop MUST set `stopping` and wake feed waiters before
 *     MHD_stop_daemon, otherwise it would wait up to 60 s for long polls.
 *  4. The read token MUST be compared in constant time, otherwise response
 *     timing leaks how much of a guess was right; a failed token is counted
 *     and logged (rate-limited) but never written anywhere.
 *  5. Every query parameter MUST be checked whole (its decoded length, not
 *     strlen) for NUL and invalid UTF-8 before any handler reads it,
 *     otherwise `service=victim%00x` would be read as `victim`.
 *  6. Answers built whole (JSON listings, /metrics) MUST be counted in
 *     held_bytes from web_reply until MHD frees them, and refused (503)
 *     past WEB_HELD_MAX, otherwise many slow clients of large listings
 *     would hold memory without bound. Error answers are small and never
 *     refused, so a 503 can always be said. One answer alone may exceed the
 *     cap (when nothing else is held), so no listing is refused forever.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "assets.h"
#include "chrome.h"
#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"
#include "web_tls.h"

void web_config_init(web_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = "127.0.0.1";
  cfg->port = 7171;
  cfg->max_window_bytes = UINT64_C(1) << 30;
  cfg->max_connections = 256;
  cfg->per_ip_connections = 32;
  cfg->timeout_s = 30;
  cfg->threads = 4;
}

/* ------------------------------------------------------------- logging */

void web_log(web_server *w, int level, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (w->cfg.log) {
    w->cfg.log(w->cfg.ctx, level, line);
    return;
  }
  static const char *const names[] = {"info", "warn", "error"};
  char head[96];
  gtp_logfmt_prefix(head, sizeof head, httptime_now_ns(),
                    names[level < 0   ? 0
                          : level > 2 ? 2
                                      : level]);
  fprintf(stderr, "%s %s\n", head, line);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap) {
  web_server *w = cls;
  char msg[512], q[640];
  int n = snprintf(msg, sizeof msg, "http: ");
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  /* MHD ends its messages with a newline; the value is quoted and escaped
   * by the project's one logfmt rule (proto/text.h). */
  size_t len = strlen(msg);
  while (len > 0 && msg[len - 1] == '\n')
    msg[--len] = '\0';
  web_log(w, 1, "msg=%s", gtp_logfmt_quote(q, sizeof q, msg));
}

/* ----------------------------------------------------------- responses */

static int code_index(unsigned status) {
  switch (status) {
#define WEB_CODE_CASE_(c)                                                      \
  case c:                                                                      \
    return WEB_CODE_##c;
    WEB_CODES(WEB_CODE_CASE_)
#undef WEB_CODE_CASE_
  default:
    return WEB_CODE_OTHER;
  }
}

/* The value for Access-Control-Allow-Origin, or NULL when the request's
 * Origin is not allowed (invariant 1). Entries of w->cors are compared
 * whole: "https://ui.perfetto.dev" does not allow
 * "https://ui.perfetto.dev.evil.example". */
static const char *cors_allow(web_req *r) {
  const char *list = r->w->cors;
  if (!list)
    return NULL;
  const char *origin =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
  size_t olen = origin ? strlen(origin) : 0;
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 1 && *p == '*')
      return "*";
    if (olen && n == olen && memcmp(p, origin, n) == 0)
      return origin;
    p += n + (e ? 1 : 0);
  }
  return NULL;
}

enum MHD_Result web_queue(web_req *r, unsigned status,
                          struct MHD_Response *resp) {
  if (!resp)
    return MHD_NO;
  const char *allow = cors_allow(r);
  if (allow) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    MHD_add_response_header(
        resp, "Access-Control-Expose-Headers",
        "X-Gentrace-Generations, X-Gentrace-Sessions, X-Gentrace-Lost-Events, "
        "X-Gentrace-Start, X-Gentrace-End, X-Gentrace-Start-Ns, "
        "X-Gentrace-End-Ns, Content-Disposition, Retry-After");
  }
  /* The answer depends on Origin once CORS is on: caches must know. */
  if (r->w->cors)
    MHD_add_response_header(resp, "Vary", "Origin");
  /* API answers are never cached; the dashboard's assets set their own
   * (revalidated with an ETag). */
  if (!MHD_get_response_header(resp, "Cache-Control"))
    MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  atomic_fetch_add_explicit(&r->w->requests[code_index(status)], 1,
                            memory_order_relaxed);
  enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
  MHD_destroy_response(resp);
  r->ret = ret;
  return ret;
}

/* A built answer waiting for its client, counted in held_bytes until MHD
 * frees it (invariant 6). */
typedef struct held_answer {
  web_server *w;
  char *body;
  size_t len;
} held_answer;

static void held_free(void *cls) {
  held_answer *h = cls;
  atomic_fetch_sub_explicit(&h->w->held_bytes, h->len, memory_order_relaxed);
  free(h->body);
  free(h);
}

enum MHD_Result web_reply(web_req *r, unsigned status, const char *ctype,
                          char *body, size_t len) {
  web_server *w = r->w;
  held_answer *h = malloc(sizeof *h);
  if (!h) {
    free(body);
    return web_error(r, 500, "internal", "out of memory");
  }
  /* Invariant 6: listings are built whole (bounded per request by their
   * limits); slow clients must not make them pile up without bound. */
  uint64_t was =
      atomic_fetch_add_explicit(&w->held_bytes, len, memory_order_relaxed);
  if (was + len > WEB_HELD_MAX && was > 0) {
    atomic_fetch_sub_explicit(&w->held_bytes, len, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->held_refused, 1, memory_order_relaxed);
    free(body);
    free(h);
    return web_error(r, 503, "overloaded",
                     "answers waiting for their clients already hold %u MiB; "
                     "retry shortly",
                     (unsigned)(WEB_HELD_MAX >> 20));
  }
  *h = (held_answer){w, body, len};
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback_cls(len, body,
                                                             held_free, h);
  if (!resp) {
    held_free(h);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", ctype);
  atomic_fetch_add_explicit(&r->w->bytes_sent, len, memory_order_relaxed);
  return web_queue(r, status, resp);
}

enum MHD_Result web_reply_json(web_req *r, unsigned status, json *j) {
  size_t len;
  char *body = json_take(j, &len);
  if (!body)
    return web_error(r, 500, "internal", "could not build the answer");
  /* A newline at the end makes curl output end cleanly in a terminal. */
  body[len] = '\n';
  return web_reply(r, status, "application/json", body, len + 1);
}

unsigned web_rc_status(int rc) {
  return rc == GTP_E_UNAVAIL || rc == GTP_E_LIMIT ? 503 : 500;
}

const char *web_rc_code(int rc) {
  return rc == GTP_E_UNAVAIL ? "unavailable"
         : rc == GTP_E_LIMIT ? "overloaded"
                             : "internal";
}

enum MHD_Result web_error(web_req *r, unsigned status, const char *code,
                          const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_kv_str(&j, "error", code);
  json_kv_str(&j, "message", msg);
  json_obj_end(&j);
  size_t len;
  char *body = json_take(&j, &len);
  if (!body)
    return r->ret = MHD_NO;
  body[len] = '\n';
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len + 1, body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(body);
    return r->ret = MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  if (status == 405)
    MHD_add_response_header(resp, "Allow", "GET, HEAD, OPTIONS");
  if (status == 401)
    MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
  if (status == 503)
    MHD_add_response_header(resp, "Retry-After", "1");
  atomic_fetch_add_explicit(&r->w->bytes_sent, len + 1, memory_order_relaxed);
  return web_queue(r, status, resp);
}

/* ---------------------------------------------------------- parameters */

const char *web_arg(web_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct args_ctx {
  const char *const *allowed;
  const char *bad;
} args_ctx;

static enum MHD_Result args_iter(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value) {
  args_ctx *a = cls;
  if (strcmp(key, "token") == 0)
    return MHD_YES;
  for (const char *const *p = a->allowed; p && *p; p++)
    if (strcmp(key, *p) == 0)
      return MHD_YES;
  a->bad = key;
  return MHD_NO;
}

/* Invariant 5: MHD hands out decoded values as C strings; the _n iterator
 * gives their real lengths, so a %00 inside shows as a length mismatch. */
typedef struct text_ctx {
  const char *bad; /* parameter name (NUL-terminated prefix) */
  size_t bad_len;
  const char *why;
} text_ctx;

static int text_ok(const char *p, size_t n) {
  if (!p)
    return n == 0;
  if (strlen(p) != n)
    return 0;
  const uint8_t *u = (const uint8_t *)p;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = gtp_utf8_seq(u + i, n - i, &cp);
    if (k == 0)
      return 0;
    i += k;
  }
  return 1;
}

static enum MHD_Result text_iter(void *cls, enum MHD_ValueKind kind,
                                 const char *key, size_t key_size,
                                 const char *value, size_t value_size) {
  text_ctx *t = cls;
  (void)kind;
  if (!text_ok(key, key_size)) {
    t->bad = key;
    t->bad_len = key_size;
    t->why = "its name holds a NUL byte or invalid UTF-8";
    return MHD_NO;
  }
  if (!text_ok(value, value_size)) {
    t->bad = key;
    t->bad_len = key_size;
    t->why = "holds a NUL byte or invalid UTF-8";
    return MHD_NO;
  }
  return MHD_YES;
}

/* Answers 400 and returns -1 if any query parameter is not clean text. */
static int args_text_check(web_req *r) {
  text_ctx t = {0};
  MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, text_iter, &t);
  if (!t.bad && !t.why)
    return 0;
  atomic_fetch_add_explicit(&r->w->bad_params, 1, memory_order_relaxed);
  /* The name itself may be what is broken: show at most 64 bytes of it,
   * cut at the first NUL; json escaping replaces invalid bytes. */
  size_t n = t.bad ? strnlen(t.bad, t.bad_len < 64 ? t.bad_len : 64) : 0;
  web_error(r, 400, "bad_parameter", "%.*s: %s", (int)n, t.bad ? t.bad : "",
            t.why);
  return -1;
}

int web_args_check(web_req *r, const char *const *allowed) {
  args_ctx a = {allowed, NULL};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, args_iter, &a);
  if (!a.bad)
    return 0;
  /* Refusing unknown names catches typos (form=, sesion=) that would
   * otherwise silently widen a query. */
  char allowed_list[256] = "";
  size_t off = 0;
  for (const char *const *p = allowed; p && *p; p++)
    off += (size_t)snprintf(
        allowed_list + off,
        off < sizeof allowed_list ? sizeof allowed_list - off : 0, "%s%s",
        off ? ", " : "", *p);
  web_error(r, 400, "bad_parameter", "%.64s: unknown parameter (allowed: %s)",
            a.bad, allowed_list[0] ? allowed_list : "none");
  return -1;
}

int web_arg_time(web_req *r, const char *name, int64_t *out) {
  const char *v = web_arg(r, name);
  if (!v)
    return 0;
  const char *why = NULL;
  if (gtp_time_parse(v, r->now_ns, out, &why) == 0)
    return 1;
  web_error(r, 400, "bad_parameter", "%s: %s", name, why);
  return -1;
}

int web_arg_dur(web_req *r, const char *name, int64_t *out) {
  const char *v = web_arg(r, name);
  if (!v)
    return 0;
  if (httpdur_parse(v, out) == 0 && *out > 0)
    return 1;
  web_error(r, 400, "bad_parameter",
            "%s: not a positive duration (like 30s, 5m, 1h, 500ms)", name);
  return -1;
}

int web_arg_u64(web_req *r, const char *name, uint64_t min, uint64_t max,
                uint64_t *out) {
  const char *v = web_arg(r, name);
  if (!v)
    return 0;
  uint64_t x = 0;
  const char *p = v;
  int ok = *p != 0 && strlen(v) <= 20;
  for (; ok && *p; p++) {
    if (*p < '0' || *p > '9' || __builtin_mul_overflow(x, 10, &x) ||
        __builtin_add_overflow(x, (uint64_t)(*p - '0'), &x))
      ok = 0;
  }
  if (ok && x >= min && x <= max) {
    *out = x;
    return 1;
  }
  web_error(r, 400, "bad_parameter",
            "%s: not an integer in [%" PRIu64 ", %" PRIu64 "]", name, min, max);
  return -1;
}

int web_session_valid(const char *s, char out[33]) {
  if (!s || strlen(s) != 32)
    return 0;
  for (int i = 0; i < 32; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'F')
      c = (char)(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return 0;
    out[i] = c;
  }
  out[32] = 0;
  return 1;
}

int web_arg_session(web_req *r, const char *name, char out[33]) {
  const char *v = web_arg(r, name);
  if (!v)
    return 0;
  if (web_session_valid(v, out))
    return 1;
  web_error(r, 400, "bad_parameter", "%s: not a session id (32 hex digits)",
            name);
  return -1;
}

void web_dl_slot_put(web_server *w) {
  atomic_fetch_sub_explicit(&w->active_downloads, 1, memory_order_relaxed);
}

/* Takes a place among --http-max-downloads (web_trace.c invariant 4,
 * web_gotrace.c invariant 4), or answers 503 with Retry-After and returns
 * -1. Here beside the reader pool, so every download handler shares them
 * without calling into another handler's file. */
int web_dl_slot_take(web_req *r) {
  web_server *w = r->w;
  if ((unsigned)atomic_fetch_add_explicit(
          &w->active_downloads, 1, memory_order_relaxed) < w->max_downloads)
    return 0;
  web_dl_slot_put(w);
  atomic_fetch_add_explicit(&w->downloads_refused, 1, memory_order_relaxed);
  web_error(r, 503, "overloaded",
            "too many downloads running (%u, the --http-max-downloads "
            "limit); retry shortly",
            w->max_downloads);
  return -1;
}

storage_reader *web_reader_get(web_req *r) {
  storage_reader *sr;
  int rc = readpool_get(r->w->pool, WEB_POOL_WAIT_MS, &sr);
  if (rc == 0)
    return sr;
  if (rc == GTP_E_LIMIT)
    web_error(r, 503, "overloaded",
              "every database reader is busy; retry shortly");
  else
    web_error(r, 500, "internal", "cannot open the database: %s",
              gtp_strerror(rc));
  return NULL;
}

void web_reader_put(web_req *r, storage_reader *sr) {
  readpool_put(r->w->pool, sr);
}

/* ---------------------------------------------------------------- auth */

/* The client's address as text, for log lines. */
static void peer_name(struct MHD_Connection *conn, char *out, size_t cap) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  snprintf(out, cap, "unknown");
  if (!ci || !ci->client_addr)
    return;
  socklen_t len = ci->client_addr->sa_family == AF_INET6
                      ? sizeof(struct sockaddr_in6)
                      : sizeof(struct sockaddr_in);
  if (getnameinfo(ci->client_addr, len, out, (socklen_t)cap, NULL, 0,
                  NI_NUMERICHOST) != 0)
    snprintf(out, cap, "unknown");
}

/* Counts a failed read token and logs it, at most once per
 * WEB_AUTH_LOG_EVERY_NS (a guessing client must not flood the log); the
 * line says how many were not logged since. Never logs the token. */
void web_auth_refused(web_req *r, int sent, const char *which) {
  web_server *w = r->w;
  atomic_fetch_add_explicit(&w->auth_failures[sent ? 1 : 0], 1,
                            memory_order_relaxed);
  int64_t now = httptime_now_ns();
  uint64_t suppressed = 0;
  int log = 0;
  pthread_mutex_lock(&w->auth_log_lock);
  if (now >= w->auth_log_next_ns) {
    log = 1;
    suppressed = w->auth_log_suppressed;
    w->auth_log_suppressed = 0;
    w->auth_log_next_ns = now + WEB_AUTH_LOG_EVERY_NS;
  } else {
    w->auth_log_suppressed++;
  }
  pthread_mutex_unlock(&w->auth_log_lock);
  if (!log)
    return;
  char peer[64];
  peer_name(r->conn, peer, sizeof peer);
  web_log(w, 1,
          "msg=\"http %s token refused\" peer=%s reason=%s "
          "not_logged_since_last=%" PRIu64,
          which, peer, sent ? "wrong" : "missing", suppressed);
}

static int authorized(web_req *r) {
  web_server *w = r->w;
  if (!w->read_token)
    return 1;
  int ok = 0, sent = 0;
  const char *h =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
  const char *t = NULL;
  if (h && strncasecmp(h, "Bearer ", 7) == 0) {
    t = h + 7;
    while (*t == ' ')
      t++;
  }
  if (!t)
    t = web_arg(r, "token");
  if (t) {
    sent = 1;
    /* Invariant 4: gtp_ct_equal's time depends only on the token's
     * length. */
    ok = gtp_ct_equal(t, strlen(t), w->read_token, w->read_token_len);
  }
  if (!ok)
    web_auth_refused(r, sent, "read");
  return ok;
}

/* ------------------------------------------------- health, metrics, page */

static enum MHD_Result healthz(web_req *r) {
  static const char *const allowed[] = {NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  web_server *w = r->w;
  const char *reason = NULL;
  int ok = 1;
  if (w->cfg.healthy && !w->cfg.healthy(w->cfg.ctx, &reason)) {
    ok = 0;
    if (!reason)
      reason = "daemon not ready";
  }
  if (ok) {
    /* Health includes being able to read the database right now. */
    storage_reader *sr;
    int rc = readpool_get(w->pool, 1000, &sr);
    if (rc == 0) {
      int64_t seq;
      rc = storage_read_max_seq(sr, &seq);
      readpool_put(w->pool, sr);
    }
    if (rc < 0) {
      ok = 0;
      /* Only the shared backend's catalog answers UNAVAIL (its reads go to
       * PostgreSQL); the writer may not have noticed the outage yet. */
      reason = rc == GTP_E_LIMIT     ? "database readers busy"
               : rc == GTP_E_UNAVAIL ? "catalog (PostgreSQL) not readable"
                                     : "database not readable";
    }
  }
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_kv_str(&j, "status", ok ? "ok" : "unavailable");
  if (!ok)
    json_kv_str(&j, "reason", reason);
  json_obj_end(&j);
  return web_reply_json(r, ok ? 200 : 503, &j);
}

#define put_metric gtp_wbuf_printf /* the text layer's formatted append */

static void web_metrics_bounds(web_server *w, gtp_wbuf *b);

static enum MHD_Result metrics(web_req *r) {
  static const char *const allowed[] = {NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  web_server *w = r->w;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 64u << 20);
  if (w->cfg.metrics)
    w->cfg.metrics(w->cfg.ctx, &b);
  put_metric(&b, "# HELP gentrace_http_requests_total HTTP answers by "
                 "status code.\n# TYPE gentrace_http_requests_total counter\n");
  static const char *const names[] = {
#define WEB_CODE_NAME_(c) #c,
      WEB_CODES(WEB_CODE_NAME_)
#undef WEB_CODE_NAME_
          "other"};
  for (int i = 0; i < WEB_NCODES; i++)
    put_metric(
        &b, "gentrace_http_requests_total{code=\"%s\"} %" PRIuFAST64 "\n",
        names[i], atomic_load_explicit(&w->requests[i], memory_order_relaxed));
  put_metric(&b,
             "# HELP gentrace_http_sent_bytes_total Body bytes handed to "
             "HTTP clients.\n# TYPE gentrace_http_sent_bytes_total "
             "counter\ngentrace_http_sent_bytes_total %" PRIuFAST64 "\n",
             atomic_load_explicit(&w->bytes_sent, memory_order_relaxed));
  put_metric(&b,
             "# HELP gentrace_http_active_downloads Trace downloads being "
             "streamed.\n# TYPE gentrace_http_active_downloads "
             "gauge\ngentrace_http_active_downloads %d\n",
             atomic_load_explicit(&w->active_downloads, memory_order_relaxed));
  put_metric(&b,
             "# HELP gentrace_http_feed_waiters Feed requests waiting for "
             "a commit.\n# TYPE gentrace_http_feed_waiters "
             "gauge\ngentrace_http_feed_waiters %d\n",
             atomic_load_explicit(&w->feed_waiters, memory_order_relaxed));
  put_metric(&b,
             "# HELP gentrace_http_skipped_generations_total Generations "
             "deleted between listing and sending a window.\n# TYPE "
             "gentrace_http_skipped_generations_total "
             "counter\ngentrace_http_skipped_generations_total %" PRIuFAST64
             "\n",
             atomic_load_explicit(&w->skipped_gens, memory_order_relaxed));
  put_metric(&b,
             "# HELP gentrace_http_slow_clients_cut_total Connections cut "
             "because a request's headers did not arrive within the HTTP "
             "timeout.\n# TYPE gentrace_http_slow_clients_cut_total "
             "counter\ngentrace_http_slow_clients_cut_total %" PRIu64 "\n",
             slowguard_cuts(w->guard));
  web_metrics_bounds(w, &b);
  web_pins_metrics(w, &b);
  if (b.err) {
    gtp_wbuf_fini(&b);
    return web_error(r, 500, "internal", "metrics too large");
  }
  return web_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                   (char *)b.data, b.len);
}

/* The limits of the trust-and-bounds work: each one shows here when it
 * bites. */
static void web_metrics_bounds(web_server *w, gtp_wbuf *b) {
#define LD_(f) atomic_load_explicit(&w->f, memory_order_relaxed)
  put_metric(b,
             "# HELP gentrace_http_max_downloads Trace downloads allowed at "
             "once (--http-max-downloads).\n# TYPE "
             "gentrace_http_max_downloads gauge\n"
             "gentrace_http_max_downloads %u\n"
             "# HELP gentrace_http_downloads_refused_total Downloads "
             "answered 503 because --http-max-downloads were running.\n"
             "# TYPE gentrace_http_downloads_refused_total counter\n"
             "gentrace_http_downloads_refused_total %" PRIuFAST64 "\n",
             w->max_downloads, LD_(downloads_refused));
  put_metric(b,
             "# HELP gentrace_http_max_long_polls Feed requests allowed to "
             "wait at once (--http-max-long-polls).\n# TYPE "
             "gentrace_http_max_long_polls gauge\n"
             "gentrace_http_max_long_polls %u\n"
             "# HELP gentrace_http_long_polls_refused_total Feed requests "
             "answered 503 instead of waiting, because "
             "--http-max-long-polls were waiting.\n# TYPE "
             "gentrace_http_long_polls_refused_total counter\n"
             "gentrace_http_long_polls_refused_total %" PRIuFAST64 "\n",
             w->max_long_polls, LD_(long_polls_refused));
  put_metric(b,
             "# HELP gentrace_http_downloads_ended_early_total Downloads "
             "that ended before their last generation because retention "
             "deleted the rest while they were sent.\n# TYPE "
             "gentrace_http_downloads_ended_early_total counter\n"
             "gentrace_http_downloads_ended_early_total %" PRIuFAST64 "\n",
             LD_(ended_early));
  put_metric(b,
             "# HELP gentrace_http_send_timeouts_total Downloads cut "
             "because the client took longer than --http-send-timeout to "
             "take one block.\n# TYPE gentrace_http_send_timeouts_total "
             "counter\ngentrace_http_send_timeouts_total %" PRIuFAST64 "\n",
             LD_(send_timeouts));
  put_metric(b,
             "# HELP gentrace_http_auth_failures_total Requests refused "
             "401 for a missing or wrong read or admin token.\n# TYPE "
             "gentrace_http_auth_failures_total counter\n"
             "gentrace_http_auth_failures_total{reason=\"missing\"} "
             "%" PRIuFAST64 "\n"
             "gentrace_http_auth_failures_total{reason=\"wrong\"} "
             "%" PRIuFAST64 "\n",
             LD_(auth_failures[0]), LD_(auth_failures[1]));
  put_metric(b,
             "# HELP gentrace_http_held_answer_bytes Bytes of built answers "
             "(listings, metrics) waiting for their clients.\n# TYPE "
             "gentrace_http_held_answer_bytes gauge\n"
             "gentrace_http_held_answer_bytes %" PRIuFAST64 "\n"
             "# HELP gentrace_http_held_answers_refused_total Answers "
             "refused 503 because built answers already held the cap.\n"
             "# TYPE gentrace_http_held_answers_refused_total counter\n"
             "gentrace_http_held_answers_refused_total %" PRIuFAST64 "\n",
             LD_(held_bytes), LD_(held_refused));
  put_metric(b,
             "# HELP gentrace_http_bad_text_parameters_total Requests "
             "refused 400 for a query parameter holding a NUL byte or "
             "invalid UTF-8.\n# TYPE "
             "gentrace_http_bad_text_parameters_total counter\n"
             "gentrace_http_bad_text_parameters_total %" PRIuFAST64 "\n",
             LD_(bad_params));
#undef LD_
}

/* The dashboard's files (assets.h). They need no token: they hold no data,
 * and the page forwards ?token= to the API calls itself. */
static enum MHD_Result dashboard(web_req *r, const web_asset *a) {
  const char *inm =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "If-None-Match");
  int fresh = web_asset_etag_match(inm, a->etag);
  size_t n = fresh ? 0 : a->len;
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      n, (void *)a->data, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  if (!fresh)
    MHD_add_response_header(resp, "Content-Type", a->ctype);
  MHD_add_response_header(resp, "ETag", a->etag);
  /* no-cache = keep it but ask every time: a new daemon may bring a new
   * page, and the revalidation is a cheap 304. */
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:; "
                          "object-src 'none'; base-uri 'none'; "
                          "frame-ancestors 'none'");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  atomic_fetch_add_explicit(&r->w->bytes_sent, n, memory_order_relaxed);
  return web_queue(r, fresh ? 304 : 200, resp);
}

static enum MHD_Result preflight(web_req *r) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                          "GET, HEAD, POST, DELETE, OPTIONS");
  MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                          "Authorization, Content-Type");
  MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
  MHD_add_response_header(resp, "Allow", "GET, HEAD, OPTIONS");
  return web_queue(r, 204, resp);
}

/* -------------------------------------------------------------- routing */

/* Routes /v1/agents/{session}/generations[/{gen}]. */
static enum MHD_Result route_agent(web_req *r, const char *rest) {
  char sid[33];
  const char *slash = strchr(rest, '/');
  size_t idlen = slash ? (size_t)(slash - rest) : strlen(rest);
  char id[40];
  if (idlen == 0 || idlen >= sizeof id)
    return web_error(r, 404, "not_found", "no such path: %.200s", r->url);
  memcpy(id, rest, idlen);
  id[idlen] = 0;
  if (!slash || strncmp(slash, "/generations", 12) != 0 ||
      (slash[12] != 0 && slash[12] != '/'))
    return web_error(r, 404, "not_found", "no such path: %.200s", r->url);
  if (!web_session_valid(id, sid))
    return web_error(r, 400, "bad_parameter",
                     "session: not a session id (32 hex digits)");
  const char *gen = slash + 12;
  if (*gen == 0 || strcmp(gen, "/") == 0)
    return web_session_gens(r, sid);
  return web_session_gen(r, sid, gen + 1);
}

static enum MHD_Result route(web_req *r) {
  const char *u = r->url;
  if (strcmp(u, "/healthz") == 0)
    return healthz(r);
  const web_asset *asset = web_asset_find(u);
  if (asset)
    return dashboard(r, asset);
  if (!authorized(r))
    return web_error(r, 401, "unauthorized",
                     "missing or wrong read token (send Authorization: "
                     "Bearer TOKEN or ?token=TOKEN)");
  if (strcmp(u, "/metrics") == 0)
    return metrics(r);
  if (strcmp(u, "/v1/agents") == 0 || strcmp(u, "/v1/agents/") == 0)
    return web_agents(r);
  if (strncmp(u, "/v1/agents/", 11) == 0)
    return route_agent(r, u + 11);
  if (strcmp(u, "/v1/trace") == 0)
    return web_trace(r);
  if (strcmp(u, "/v1/feed") == 0)
    return web_feed(r);
  if (strcmp(u, "/v1/search") == 0)
    return web_search(r);
  if (strcmp(u, "/v1/summary") == 0)
    return web_summary(r);
  if (strcmp(u, "/v1/pins") == 0 || strcmp(u, "/v1/pins/") == 0)
    return web_pins_list(r);
  return web_error(r, 404, "not_found", "no such path: %.200s", u);
}

/* The guard's tracker of a connection (NULL if it has none). */
slowguard_conn *web_conn_guard(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? (slowguard_conn *)ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  web_server *w = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context =
        ci ? slowguard_conn_started(w->guard, ci->connect_fd) : NULL;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    slowguard_conn_closed(w->guard, *socket_context);
    *socket_context = NULL;
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  slowguard_request_done(web_conn_guard(conn));
  web_pins_body_free(*con_cls);
  *con_cls = NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  web_req r = {.w = cls, .conn = conn, .url = url, .ret = MHD_NO};
  r.now_ns = httptime_now_ns();
  if (*con_cls) /* the rest of a pin's body (web_pins.c) */
    return web_pins_write(&r, method, upload_data, upload_data_size,
                          con_cls);
  /* The headers are in: from here on the idle timeout, not the headers
   * deadline, watches this connection (long polls, downloads). */
  slowguard_request_began(web_conn_guard(conn));
  /* Every method but a pin's POST is answered on the first call: GET, HEAD
   * and OPTIONS carry no body, and a body sent with another method is
   * never read (MHD closes the connection after the 405). */
  if (strcmp(method, "OPTIONS") == 0)
    return preflight(&r);
  int pin_write = web_pins_is_write(method, url);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 && !pin_write)
    return web_error(&r, 405, "method_not_allowed",
                     "%.16s not allowed; this API is read-only (GET), but "
                     "for POST /v1/pins and DELETE /v1/pins/ID",
                     method);
  if (atomic_load_explicit(&r.w->stopping, memory_order_relaxed))
    return web_error(&r, 503, "overloaded", "server is shutting down");
  if (!web_tls_client_ok(r.w->tls, conn))
    return web_error(&r, 403, "forbidden",
                     "a client certificate signed by the HTTP client CA is "
                     "required");
  if (args_text_check(&r))
    return r.ret;
  if (pin_write)
    return web_pins_write(&r, method, upload_data, upload_data_size, con_cls);
  return route(&r);
}

/* ------------------------------------------------------------ lifecycle */

int web_tls_reload_files(web_server *w, char **cause) {
  return web_tls_reload(w->tls, cause);
}

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
                   int *v6) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  char ps[8];
  snprintf(ps, sizeof ps, "%u", (unsigned)port);
  int rc = getaddrinfo(host && *host ? host : NULL, ps, &hints, &res);
  if (rc != 0 || !res)
    return GTP_E_BADARG;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *v6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  return 0;
}

static char *dup_cause(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return strdup(msg);
}

int web_start(const web_config *cfg, web_server **out, uint16_t *port,
              char **cause) {
  int rc = -ENOMEM;
  if (!cfg->db_path && !cfg->storage) {
    if (cause)
      *cause = strdup("web: no database path or storage");
    return GTP_E_BADARG;
  }
  web_server *w = calloc(1, sizeof *w);
  if (!w)
    goto fail_alloc;
  w->cfg = *cfg;
  w->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
  w->db_path =
      strdup(cfg->db_path ? cfg->db_path : storage_describe(cfg->storage));
  w->read_token =
      cfg->read_token && *cfg->read_token ? strdup(cfg->read_token) : NULL;
  if (!w->host || !w->db_path ||
      (cfg->read_token && *cfg->read_token && !w->read_token))
    goto fail_strings;
  w->cors = cfg->cors_origins && *cfg->cors_origins ? strdup(cfg->cors_origins)
                                                    : NULL;
  if (cfg->cors_origins && *cfg->cors_origins && !w->cors)
    goto fail_strings;
  w->cfg.cors_origins = w->cors;
  w->read_token_len = w->read_token ? strlen(w->read_token) : 0;
  if (cfg->admin_token && *cfg->admin_token) {
    w->admin_token = strdup(cfg->admin_token);
    if (!w->admin_token)
      goto fail_strings;
    w->admin_token_len = strlen(w->admin_token);
  }
  w->cfg.admin_token = w->admin_token;
  w->max_pinned_bytes = cfg->max_pinned_bytes;
  w->pin_max_ttl_ns = cfg->pin_max_ttl_ns > 0 ? cfg->pin_max_ttl_ns
                                              : 90 * 86400 * INT64_C(1000000000);
  w->cfg.host = w->host;
  w->cfg.db_path = w->db_path;
  w->cfg.read_token = w->read_token;
  if (!w->cfg.max_window_bytes)
    w->cfg.max_window_bytes = UINT64_C(1) << 30;
  if (!w->cfg.max_connections)
    w->cfg.max_connections = 256;
  if (!w->cfg.per_ip_connections)
    w->cfg.per_ip_connections = 32;
  if (!w->cfg.timeout_s)
    w->cfg.timeout_s = 30;
  if (!w->cfg.threads)
    w->cfg.threads = 4;
  /* Downloads are the heavy requests (up to three generations in memory
   * each: the one being sent and two read ahead); past the cap they get 503
   * so memory stays bounded and metadata requests still get through. */
  w->max_downloads = w->cfg.max_downloads ? w->cfg.max_downloads : 16;
  /* Parked feeds hold a connection each for up to a minute: keep them
   * below the connection limit so they never lock out other requests. */
  unsigned lp = w->cfg.max_long_polls ? w->cfg.max_long_polls
                                      : w->cfg.max_connections / 2;
  if (lp >= w->cfg.max_connections)
    lp = w->cfg.max_connections - 1;
  w->max_long_polls = lp;
  w->send_timeout_ns =
      (int64_t)(w->cfg.send_timeout_s ? w->cfg.send_timeout_s : 120) *
      1000000000;
  pthread_mutex_init(&w->auth_log_lock, NULL);

  pthread_mutex_init(&w->feed_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->feed_cond, &ca);
  pthread_condattr_destroy(&ca);

  char *pcause = NULL;
  storage *st = cfg->storage;
  if (!st) {
    rc = storage_open_sqlite_readonly(w->db_path, &w->own_st, &pcause);
    st = w->own_st;
  }
  if (st)
    rc = readpool_new(st, w->cfg.threads, &w->pool, &pcause);
  if (rc < 0) {
    if (cause)
      *cause = dup_cause("web: cannot open %s: %s", w->db_path,
                         pcause ? pcause : gtp_strerror(rc));
    free(pcause);
    goto fail_pool;
  }
  {
    storage_reader *sr;
    if (readpool_get(w->pool, 0, &sr) == 0) {
      int64_t seq = 0;
      if (storage_read_max_seq(sr, &seq) == 0)
        w->last_seq = seq;
      readpool_put(w->pool, sr);
    }
  }

  struct sockaddr_storage ss;
  int v6 = 0;
  if (resolve(w->host, cfg->port, &ss, &v6) < 0) {
    rc = GTP_E_BADARG;
    if (cause)
      *cause = dup_cause("web: cannot resolve listen address '%s'", w->host);
    goto fail_daemon;
  }
  /* Each request's headers must arrive within the HTTP timeout in total,
   * not just without an idle gap: MHD's own timeout alone lets a client
   * trickling a byte at a time hold a connection forever. */
  rc = slowguard_new((int64_t)w->cfg.timeout_s * 1000000000, &w->guard);
  if (rc < 0) {
    if (cause)
      *cause = dup_cause("web: cannot start the slow-client guard: %s",
                         gtp_strerror(rc));
    goto fail_daemon;
  }
  {
    char *tcause = NULL;
    rc = web_tls_load(cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, &w->tls,
                      &tcause);
    if (rc < 0) {
      if (cause)
        *cause = tcause;
      else
        free(tcause);
      goto fail_daemon;
    }
  }
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0) |
                   web_tls_flags(w->tls);
  w->mhd = MHD_start_daemon(
      flags, cfg->port, NULL, NULL, on_request, w,
      /* The logger first, so MHD never prints on its own. */
      MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, w, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)w->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)w->cfg.per_ip_connections, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)w->cfg.timeout_s,
      /* MHD fills each chunk of a streamed body from the connection's
       * memory pool: at the 32 KiB default a window download was ~8,500
       * send() calls of 32 KB for 270 MB; 1 MiB chunks cut the server's CPU
       * per download by about a fifth (bench_download, D1). The pool is
       * mapped lazily, so an idle or small request touches a few KiB. */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)((1u << 20) + (64u << 10)),
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, w,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, w, MHD_OPTION_ARRAY,
      web_tls_options(w->tls), MHD_OPTION_END);
  if (!w->mhd) {
    web_tls_free(w->tls);
    w->tls = NULL;
    rc = -errno ? -errno : GTP_E_INTERNAL;
    if (cause)
      *cause = dup_cause("web: cannot listen on %s:%u: %s", w->host,
                         (unsigned)cfg->port, strerror(errno));
    goto fail_daemon;
  }
  const union MHD_DaemonInfo *di =
      MHD_get_daemon_info(w->mhd, MHD_DAEMON_INFO_BIND_PORT);
  if (port)
    *port = di ? di->port : cfg->port;
  *out = w;
  return 0;

fail_daemon:
  slowguard_free(w->guard);
  readpool_free(w->pool);
fail_pool:
  storage_close(w->own_st);
  pthread_cond_destroy(&w->feed_cond);
  pthread_mutex_destroy(&w->feed_lock);
  pthread_mutex_destroy(&w->auth_log_lock);
fail_strings:
  free(w->admin_token);
  free(w->cors);
  free(w->host);
  free(w->db_path);
  free(w->read_token);
  free(w);
fail_alloc:
  if (rc == -ENOMEM && cause && !*cause)
    *cause = strdup("web: out of memory");
  return rc;
}

void web_stop(web_server *w) {
  if (!w)
    return;
  /* Invariant 3: wake long polls first so MHD can join their threads. */
  pthread_mutex_lock(&w->feed_lock);
  atomic_store(&w->stopping, 1);
  pthread_cond_broadcast(&w->feed_cond);
  pthread_mutex_unlock(&w->feed_lock);
  MHD_stop_daemon(w->mhd);
  web_tls_free(w->tls); /* after MHD (web_tls.c invariant 1) */
  slowguard_free(w->guard);
  readpool_free(w->pool);
  storage_close(w->own_st);
  pthread_cond_destroy(&w->feed_cond);
  pthread_mutex_destroy(&w->feed_lock);
  pthread_mutex_destroy(&w->auth_log_lock);
  free(w->admin_token);
  free(w->cors);
  free(w->host);
  free(w->db_path);
  free(w->read_token);
  free(w);
}

void web_notify_commit(web_server *w, int64_t seq) {
  if (!w)
    return;
  pthread_mutex_lock(&w->feed_lock);
  if (seq > w->last_seq) {
    w->last_seq = seq;
    pthread_cond_broadcast(&w->feed_cond);
  }
  pthread_mutex_unlock(&w->feed_lock);
}
