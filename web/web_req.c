/* web_req.c: what every handler of the HTTP API uses to answer a request
 * (web.c's design note and invariants 1, 2, 5 and 6): the log line, the
 * answers (CORS, held bytes, JSON errors), the query parameters (checked
 * whole, then parsed by the project's one time and duration grammar), the
 * download slots, the pooled readers, the slow-client guard of a
 * connection, and the count and log line of a refused token.
 *
 * Below both web.c (routing, auth, lifecycle) and the endpoint files
 * (web_list.c, web_trace.c, web_feed.c, web_gotrace.c, web_search.c,
 * web_pins.c): they
 * all call it and it calls none of them, so no two files of web/ call
 * each other.
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
#include <strings.h>

#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"

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
        "X-Gentrace-End-Ns, Content-Disposition, Retry-After, Location");
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
  struct MHD_Response *resp;
  if (body) {
    body[len] = '\n';
    /* Freed through this file's free, the allocator that made it (the
     * allocation walk, tests/alloc, accounts for every block). */
    resp =
        MHD_create_response_from_buffer_with_free_callback(len + 1, body, free);
    if (!resp)
      free(body);
  } else {
    /* No memory for the message: the client still gets an answer, the
     * one error that needs none. */
    static const char oom[] =
        "{\"error\":\"internal\",\"message\":\"out of memory\"}\n";
    status = 500;
    len = sizeof oom - 2;
    resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom,
                                           MHD_RESPMEM_PERSISTENT);
  }
  if (!resp)
    return r->ret = MHD_NO;
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
int web_args_text_check(web_req *r) {
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

/* ---------------------------------------------------------------- JSON */

/* "key":"RFC 3339" and "key_ns":"digits" side by side. */
void web_put_time(json *j, const char *key, int64_t ns) {
  char t[HTTPTIME_RFC3339_LEN];
  char k[48];
  httptime_format(ns, t);
  json_kv_str(j, key, t);
  snprintf(k, sizeof k, "%s_ns", key);
  json_key(j, k);
  json_i64_str(j, ns);
}

/* ------------------------------------------------------------- guard */

/* The guard's tracker of a connection (NULL if it has none). */
slowguard_conn *web_conn_guard(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? (slowguard_conn *)ci->socket_context : NULL;
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

const char *web_bearer(web_req *r) {
  const char *h =
      MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7) != 0)
    return NULL;
  const char *t = h + 7;
  while (*t == ' ')
    t++;
  return t;
}

/* Counts a refused read or admin token and logs it, at most once per
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
