/* web.c: the HTTP server of gentraced: lifecycle, routing, auth, CORS,
 * errors, /healthz, /metrics and the dashboard. The API endpoints live in
 * web_list.c, web_trace.c, web_feed.c, web_gotrace.c and web_search.c;
 * what they all use to answer (responses, errors, parameters, readers,
 * download slots) in web_req.c, which calls none of them.
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
#include "symcache.h"
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

/* ---------------------------------------------------------------- auth */

static int authorized(web_req *r) {
  web_server *w = r->w;
  if (!w->read_token)
    return 1;
  int ok = 0, sent = 0;
  const char *t = web_bearer(r);
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
  symcache_metrics(w->syms, b);
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
  if (web_args_text_check(&r))
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
  symcache_config scfg = {cfg->symbols_dir, cfg->symbols_from_host,
                          cfg->symbols_max_modules, cfg->symbols_max_bytes};
  if ((rc = symcache_new(&scfg, &w->syms, cause)) < 0)
    goto fail_strings;
  rc = -ENOMEM;
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
  symcache_free(w->syms);
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
  symcache_free(w->syms); /* after MHD: no download uses it any more */
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
