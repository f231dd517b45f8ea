/* web_pins.c: retention pins over HTTP (docs/HTTP.md, "Retention pins"):
 *   POST   /v1/pins        admin token; JSON body (pinreq.h) -> 201 + pin
 *   GET    /v1/pins        read token -> {"pins":[...]}, newest first
 *   DELETE /v1/pins/ID     admin token -> 204, 404 unknown
 * and their two lines of /metrics. The pins themselves live in the catalog
 * (store/hold.h), so every daemon of a shared store sees and honours them.
 *
 * POST is the API's only request with a body: MHD hands it over in pieces
 * to on_request (web.c), which passes them here; the body is collected in a
 * buffer of at most WEB_PIN_BODY_MAX bytes that lives in the request's
 * con_cls until on_completed frees it.
 *
 * Invariants:
 *   1. The admin token MUST be checked before any byte of the body is kept,
 *      in constant time, from the Authorization header only (never ?token=,
 *      which ends up in logs), otherwise anyone could make the daemon
 *      buffer bodies or learn the token from timings.
 *   2. A write MUST be refused whole on any error (bad body, cap, storage):
 *      the catalog changes only by hold_add's committed transaction.
 *   3. The body buffer MUST stay within WEB_PIN_BODY_MAX: a body announced
 *      larger (Content-Length) is answered 413 before it is read; one that
 *      grows larger is drained (at most WEB_PIN_DRAIN_MAX more) and
 *      answered 413, or its connection closed.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "hold.h"
#include "httptime.h"
#include "pinreq.h"
#include "storage.h"
#include "web_internal.h"

/* A pin body is a few hundred bytes; this leaves room for a long reason
 * written with \u escapes. */
#define WEB_PIN_BODY_MAX (16u << 10)

/* A body past the cap is drained up to this much (so its client reads the
 * 413), then the connection is closed: a client streaming without end
 * must not hold a connection's thread. */
#define WEB_PIN_DRAIN_MAX (1u << 20)

typedef struct pin_body {
  char *buf;
  size_t len;
  size_t drained; /* bytes past the cap, thrown away */
  int too_big;
} pin_body;

void web_pins_body_free(void *con_cls) {
  pin_body *b = con_cls;
  if (b) {
    free(b->buf);
    free(b);
  }
}

int web_pins_is_write(const char *method, const char *url) {
  return (strcmp(method, "POST") == 0 &&
          (strcmp(url, "/v1/pins") == 0 || strcmp(url, "/v1/pins/") == 0)) ||
         (strcmp(method, "DELETE") == 0 && strncmp(url, "/v1/pins/", 9) == 0);
}

static void put_time(json *j, const char *key, int64_t ns) {
  char t[HTTPTIME_RFC3339_LEN];
  httptime_format(ns, t);
  json_kv_str(j, key, t);
}

static void put_pin(json *j, const hold_row *p) {
  json_obj_begin(j);
  json_kv_i64(j, "id", p->id);
  json_kv_str(j, "service", p->service); /* NULL writes null */
  json_kv_str(j, "session", p->session);
  json_key(j, "from_ns");
  json_i64_str(j, p->from_ns);
  json_key(j, "to_ns");
  json_i64_str(j, p->to_ns);
  put_time(j, "from", p->from_ns);
  put_time(j, "to", p->to_ns);
  json_kv_str(j, "reason", p->reason);
  put_time(j, "created", p->created_ns);
  put_time(j, "expires", p->expires_ns);
  json_kv_u64(j, "bytes", p->bytes);
  json_obj_end(j);
}

static hold *holds_or_501(web_req *r) {
  hold *h = r->w->cfg.storage ? storage_holds(r->w->cfg.storage) : NULL;
  if (!h)
    web_error(r, 501, "not_implemented",
              "pins need gentraced's own storage (this server reads a "
              "database read-only)");
  return h;
}

static int list_one(void *ctx, const hold_row *row) {
  put_pin(ctx, row);
  return 0;
}

enum MHD_Result web_pins_list(web_req *r) {
  static const char *const allowed[] = {NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  hold *h = holds_or_501(r);
  if (!h)
    return r->ret;
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_key(&j, "pins");
  json_arr_begin(&j);
  int rc = hold_list(h, r->now_ns, list_one, &j);
  json_arr_end(&j);
  json_obj_end(&j);
  if (rc < 0) {
    json_fini(&j);
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "cannot list pins: %s", gtp_strerror(rc));
  }
  return web_reply_json(r, 200, &j);
}

/* Invariant 1: 1 when the request carries the admin token; otherwise it
 * has answered 403 (no admin token configured) or 401 and returns 0. */
static int admin_ok(web_req *r) {
  web_server *w = r->w;
  if (!w->admin_token) {
    web_error(r, 403, "forbidden",
              "pins are writable only with an admin token: start gentraced "
              "with --admin-token-file FILE (or --admin-token, or "
              "GENTRACED_ADMIN_TOKEN)");
    return 0;
  }
  const char *t = web_bearer(r);
  if (t && gtp_ct_equal(t, strlen(t), w->admin_token, w->admin_token_len))
    return 1;
  web_auth_refused(r, t != NULL, "admin");
  web_error(r, 401, "unauthorized",
            "missing or wrong admin token (send Authorization: Bearer "
            "ADMIN_TOKEN)");
  return 0;
}

static enum MHD_Result pin_create(web_req *r, hold *h, const pin_body *b) {
  web_server *w = r->w;
  pinreq q;
  char why[300];
  if (b->too_big) /* invariant 3 */
    return web_error(r, 413, "too_large",
                     "body larger than %u bytes; a pin is a small JSON "
                     "object",
                     WEB_PIN_BODY_MAX);
  if (pinreq_parse(b->buf, b->len, r->now_ns, w->pin_max_ttl_ns, &q, why,
                   sizeof why) < 0) {
    atomic_fetch_add_explicit(&w->bad_params, 1, memory_order_relaxed);
    return web_error(r, 400, "bad_body", "%s", why);
  }
  hold_req hr = {
      .service = q.service[0] ? q.service : NULL,
      .session = q.session[0] ? q.session : NULL,
      .from_ns = q.from_ns,
      .to_ns = q.to_ns,
      .reason = q.reason,
      .created_ns = r->now_ns,
      .expires_ns =
          r->now_ns > INT64_MAX - q.ttl_ns ? INT64_MAX : r->now_ns + q.ttl_ns,
  };
  hold_added a;
  int rc = hold_add(h, &hr, w->max_pinned_bytes, &a);
  if (rc == GTP_E_TOOBIG) {
    if (a.count >= HOLD_MAX_PINS)
      return web_error(r, 507, "pin_limit",
                       "%d pins are live, the most allowed; delete one "
                       "(DELETE /v1/pins/ID) first",
                       HOLD_MAX_PINS);
    return web_error(
        r, 507, "pin_limit",
        "pinning this window would make pins hold %" PRIu64
        " bytes, over --max-pinned-bytes %" PRIu64 " (pins hold %" PRIu64
        " now; this window %" PRIu64 "); pin a smaller window or delete a pin",
        a.total_after, w->max_pinned_bytes, a.total_before, a.bytes);
  }
  if (rc < 0)
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "cannot store the pin: %s", gtp_strerror(rc));
  hold_row row = {a.id,      hr.service,    hr.session,    hr.from_ns, hr.to_ns,
                  hr.reason, hr.created_ns, hr.expires_ns, a.bytes};
  json j;
  json_init(&j, 0);
  put_pin(&j, &row);
  size_t len;
  char *body = json_take(&j, &len);
  if (!body)
    return web_error(r, 500, "internal", "could not build the answer");
  body[len] = '\n';
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback(len + 1, body, free);
  if (!resp) {
    free(body);
    return MHD_NO;
  }
  char loc[48];
  snprintf(loc, sizeof loc, "/v1/pins/%" PRId64, a.id);
  MHD_add_response_header(resp, "Content-Type", "application/json");
  MHD_add_response_header(resp, "Location", loc);
  web_log(w, 0,
          "msg=\"pin created\" id=%" PRId64 " bytes=%" PRIu64
          " from_ns=%" PRId64 " to_ns=%" PRId64,
          a.id, a.bytes, hr.from_ns, hr.to_ns);
  return web_queue(r, 201, resp);
}

static enum MHD_Result pin_delete(web_req *r, hold *h) {
  const char *s = r->url + 9; /* after /v1/pins/ */
  int64_t id = 0;
  int ok = *s != 0 && strlen(s) <= 18;
  for (const char *p = s; ok && *p; p++) {
    if (*p < '0' || *p > '9')
      ok = 0;
    else
      id = id * 10 + (*p - '0');
  }
  if (!ok || id <= 0)
    return web_error(r, 404, "not_found",
                     "no pin %.40s (ids are positive "
                     "integers)",
                     s);
  int rc = hold_delete(h, id, r->now_ns);
  if (rc == GTP_E_NOTFOUND)
    return web_error(r, 404, "not_found", "no live pin %" PRId64, id);
  if (rc < 0)
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "cannot delete the pin: %s", gtp_strerror(rc));
  web_log(r->w, 0, "msg=\"pin deleted\" id=%" PRId64, id);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  return web_queue(r, 204, resp);
}

enum MHD_Result web_pins_write(web_req *r, const char *method,
                               const char *upload, size_t *upload_size,
                               void **con_cls) {
  pin_body *b = *con_cls;
  if (!b) { /* the headers: decide before reading any body (invariant 1) */
    static const char *const allowed[] = {NULL};
    if (web_args_check(r, allowed) || !admin_ok(r))
      return r->ret;
    hold *h = holds_or_501(r);
    if (!h)
      return r->ret;
    if (strcmp(method, "DELETE") == 0)
      return pin_delete(r, h);
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > WEB_PIN_BODY_MAX)
      return web_error(r, 413, "too_large",
                       "body larger than %u bytes; a pin is a small JSON "
                       "object",
                       WEB_PIN_BODY_MAX);
    b = calloc(1, sizeof *b);
    if (!b)
      return web_error(r, 500, "internal", "out of memory");
    *con_cls = b;
    return MHD_YES;
  }
  if (*upload_size > 0) { /* a piece of the body (invariant 3) */
    if (!b->too_big && b->len + *upload_size <= WEB_PIN_BODY_MAX) {
      char *nb = realloc(b->buf, b->len + *upload_size + 1);
      if (!nb)
        return MHD_NO;
      memcpy(nb + b->len, upload, *upload_size);
      b->buf = nb;
      b->len += *upload_size;
    } else {
      b->too_big = 1;
      b->drained += *upload_size;
      if (b->drained > WEB_PIN_DRAIN_MAX)
        return MHD_NO; /* invariant 3: close the connection */
    }
    *upload_size = 0;
    return MHD_YES;
  }
  hold *h = holds_or_501(r);
  if (!h)
    return r->ret;
  return pin_create(r, h, b);
}

void web_pins_metrics(web_server *w, gtp_wbuf *b) {
  hold *h = w->cfg.storage ? storage_holds(w->cfg.storage) : NULL;
  uint64_t n = 0, bytes = 0;
  if (!h || hold_totals(h, httptime_now_ns(), &n, &bytes) < 0)
    return; /* no line beats a wrong one */
  gtp_wbuf_printf(b,
                  "# HELP gentrace_pins Live retention pins (POST "
                  "/v1/pins).\n# TYPE gentrace_pins gauge\n"
                  "gentrace_pins %" PRIu64 "\n"
                  "# HELP gentrace_pinned_bytes Stored bytes of the "
                  "generations live pins hold, each counted once.\n"
                  "# TYPE gentrace_pinned_bytes gauge\n"
                  "gentrace_pinned_bytes %" PRIu64 "\n"
                  "# HELP gentrace_pinned_bytes_max The cap on pinned "
                  "bytes (--max-pinned-bytes; 0 = none).\n"
                  "# TYPE gentrace_pinned_bytes_max gauge\n"
                  "gentrace_pinned_bytes_max %" PRIu64 "\n",
                  n, bytes, w->max_pinned_bytes);
}
