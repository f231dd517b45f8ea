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
 *  1. Every answer MUST carry Access-Control-Allow-Origin (web_queue adds
 *     it), otherwise browser tools cannot read errors or windows.
 *  2. Every error answer MUST be JSON {"error","message"} (web_error),
 *     otherwise clients cannot tell a bad parameter from a proxy failure.
 *  3. web_stop MUST set `stopping` and wake feed waiters before
 *     MHD_stop_daemon, otherwise it would wait up to 60 s for long polls.
 *  4. The read token MUST be compared in constant time, otherwise response
 *     timing leaks how much of a guess was right.
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
#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"

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

enum MHD_Result web_queue(web_req *r, unsigned status,
                          struct MHD_Response *resp) {
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
  MHD_add_response_header(
      resp, "Access-Control-Expose-Headers",
      "X-Gentrace-Generations, X-Gentrace-Sessions, X-Gentrace-Lost-Events, "
      "X-Gentrace-Start, X-Gentrace-End, X-Gentrace-Start-Ns, "
      "X-Gentrace-End-Ns, Content-Disposition");
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

enum MHD_Result web_reply(web_req *r, unsigned status, const char *ctype,
                          char *body, size_t len) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(body);
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

store_reader *web_reader_get(web_req *r) {
  store_reader *sr;
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

void web_reader_put(web_req *r, store_reader *sr) {
  readpool_put(r->w->pool, sr);
}

/* ---------------------------------------------------------------- auth */

static int authorized(web_req *r) {
  web_server *w = r->w;
  if (!w->read_token)
    return 1;
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
  if (!t)
    return 0;
  /* Invariant 4: gtp_ct_equal's time depends only on the token's length. */
  return gtp_ct_equal(t, strlen(t), w->read_token, w->read_token_len);
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
    store_reader *sr;
    int rc = readpool_get(w->pool, 1000, &sr);
    if (rc == 0) {
      int64_t seq;
      rc = store_read_max_seq(sr, &seq);
      readpool_put(w->pool, sr);
    }
    if (rc < 0) {
      ok = 0;
      reason =
          rc == GTP_E_LIMIT ? "database readers busy" : "database not readable";
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

static void put_metric(gtp_wbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put_metric(gtp_wbuf *b, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0)
    gtp_wbuf_put(b, line,
                 (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

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
  if (b.err) {
    gtp_wbuf_fini(&b);
    return web_error(r, 500, "internal", "metrics too large");
  }
  return web_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8",
                   (char *)b.data, b.len);
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
                          "GET, HEAD, OPTIONS");
  MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                          "Authorization");
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
  return web_error(r, 404, "not_found", "no such path: %.200s", u);
}

/* The guard's tracker of a connection (NULL if it has none). */
static slowguard_conn *conn_guard(struct MHD_Connection *conn) {
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
    *socket_context = ci ? slowguard_conn_started(w->guard, ci->connect_fd)
                         : NULL;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    slowguard_conn_closed(w->guard, *socket_context);
    *socket_context = NULL;
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe) {
  slowguard_request_done(conn_guard(conn));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  web_req r = {.w = cls, .conn = conn, .url = url, .ret = MHD_NO};
  /* The headers are in: from here on the idle timeout, not the headers
   * deadline, watches this connection (long polls, downloads). */
  slowguard_request_began(conn_guard(conn));
  r.now_ns = httptime_now_ns();
  /* Every method is answered on the first call: GET, HEAD and OPTIONS carry
   * no body, and a body sent with another method is never read (MHD closes
   * the connection after the 405). */
  if (strcmp(method, "OPTIONS") == 0)
    return preflight(&r);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return web_error(&r, 405, "method_not_allowed",
                     "%.16s not allowed; this API is read-only (GET)", method);
  if (atomic_load_explicit(&r.w->stopping, memory_order_relaxed))
    return web_error(&r, 503, "overloaded", "server is shutting down");
  return route(&r);
}

/* ------------------------------------------------------------ lifecycle */

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
  if (!cfg->db_path) {
    if (cause)
      *cause = strdup("web: no database path");
    return GTP_E_BADARG;
  }
  web_server *w = calloc(1, sizeof *w);
  if (!w)
    goto fail_alloc;
  w->cfg = *cfg;
  w->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
  w->db_path = strdup(cfg->db_path);
  w->read_token =
      cfg->read_token && *cfg->read_token ? strdup(cfg->read_token) : NULL;
  if (!w->host || !w->db_path ||
      (cfg->read_token && *cfg->read_token && !w->read_token))
    goto fail_strings;
  w->read_token_len = w->read_token ? strlen(w->read_token) : 0;
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
  /* Downloads are the heavy requests (a generation in memory each, one
   * pool reader per step); beyond a quarter of the connections they get
   * 503 so metadata requests still get through. */
  w->max_downloads =
      w->cfg.max_connections / 4 ? w->cfg.max_connections / 4 : 1;

  pthread_mutex_init(&w->feed_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->feed_cond, &ca);
  pthread_condattr_destroy(&ca);

  char *pcause = NULL;
  rc = readpool_new(w->db_path, w->cfg.threads, &w->pool, &pcause);
  if (rc < 0) {
    if (cause)
      *cause = dup_cause("web: cannot open %s: %s", w->db_path,
                         pcause ? pcause : gtp_strerror(rc));
    free(pcause);
    goto fail_pool;
  }
  {
    store_reader *sr;
    if (readpool_get(w->pool, 0, &sr) == 0) {
      int64_t seq = 0;
      if (store_read_max_seq(sr, &seq) == 0)
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
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
                   MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
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
      MHD_OPTION_NOTIFY_CONNECTION, on_connection,
      w, MHD_OPTION_NOTIFY_COMPLETED, on_completed, w, MHD_OPTION_END);
  if (!w->mhd) {
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
  pthread_cond_destroy(&w->feed_cond);
  pthread_mutex_destroy(&w->feed_lock);
fail_strings:
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
  slowguard_free(w->guard);
  readpool_free(w->pool);
  pthread_cond_destroy(&w->feed_cond);
  pthread_mutex_destroy(&w->feed_lock);
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
