/* ingest_hello.c: the handshake of an agent connection (PROTOCOL.md section
 * 5): version, token, mTLS service and session key checks (session_auth.c),
 * the identity copied from HELLO, the replacement of a half-open older
 * connection of the same session, and WELCOME with the last generation
 * stored. Called by the frame loop (ingest_read.c) for the first frame;
 * the invariants are ingest.c's.
 *
 * On the shared store the key binding and the last generation come from
 * the PostgreSQL catalog: that round trip runs on libuv's thread pool
 * (hello_lookup.h) so a slow catalog never stalls the loop. Meanwhile the
 * connection does not read (hello_wait) and holds a reference; the answer
 * decides the key (session_auth_decide) and sends WELCOME. SQLite answers
 * from memory, on the loop as before.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "frame.h"
#include "gtp_error.h"
#include "hello_lookup.h"
#include "ingest_int.h"
#include "log.h"
#include "tls_conn.h"

/* Appends s as a JSON string (quotes included) to b, escaped by the
 * project's one rule (invalid UTF-8 as \ufffd), so the tags stay valid JSON
 * and web/ never has to show them as {}. */
static void json_str(gtp_wbuf *b, gtp_str s) {
  gtp_wbuf_put(b, "\"", 1);
  gtp_json_escape(gtp_wbuf_sink, b, s.ptr, s.len);
  gtp_wbuf_put(b, "\"", 1);
}

/* Copies HELLO's identity strings into c (owned, NUL-terminated), renders
 * its tags as one JSON object and encodes the identity part of the session's
 * GEN_STARTs (c->gs_ident). 0, or -ENOMEM with none of it kept (c's identity
 * fields stay NULL, so c can be closed as is). The decoder refused a NUL in
 * any of these strings (gtp_frame_hello_decode), so the copies are whole. */
static int hello_identity(conn *c, const gtp_hello *h) {
  gtp_wbuf tj, gi;
  gtp_wbuf_init(&tj, 1u << 20);
  gtp_wbuf_init(&gi, 1u << 20);
  c->service = strndup(h->service.ptr, h->service.len);
  c->host = strndup(h->host.ptr, h->host.len);
  c->agent_version = strndup(h->agent_version.ptr, h->agent_version.len);
  if (c->service == NULL || c->host == NULL || c->agent_version == NULL)
    goto fail;
  gtp_wbuf_put(&tj, "{", 1);
  for (uint32_t i = 0; i < h->ntags; i++) {
    if (i > 0)
      gtp_wbuf_put(&tj, ",", 1);
    json_str(&tj, h->tags[i].key);
    gtp_wbuf_put(&tj, ":", 1);
    json_str(&tj, h->tags[i].value);
  }
  gtp_wbuf_put(&tj, "}", 1);
  if (tj.err == 0)
    c->tags_json = strndup((const char *)tj.data, tj.len);
  if (c->tags_json == NULL)
    goto fail;
  /* Built once here (about 1 KiB of struct): each generation only copies
   * the bytes (reasm.c). */
  gtp_gen_start s;
  memset(&s, 0, sizeof s);
  s.service = h->service;
  s.host = h->host;
  s.agent_version = h->agent_version;
  s.pid = h->pid;
  s.process_start_ns = h->process_start_ns;
  s.ntags = h->ntags;
  memcpy(s.tags, h->tags, h->ntags * sizeof s.tags[0]);
  if (gtp_put_gen_start_ident(&gi, &s) < 0)
    goto fail; /* HELLO's bounds are GEN_START's: only ENOMEM is left */
  /* Exactly its bytes: they are what budget.c counts. */
  c->gs_ident = malloc(gi.len);
  if (c->gs_ident == NULL)
    goto fail;
  memcpy(c->gs_ident, gi.data, gi.len);
  c->gs_ident_len = gi.len;
  gtp_wbuf_fini(&gi);
  gtp_wbuf_fini(&tj);
  return 0;
fail:
  gtp_wbuf_fini(&tj);
  gtp_wbuf_fini(&gi);
  ingest_conn_free_identity(c);
  return -ENOMEM;
}

static int hello_welcome(conn *c, int has_last, uint64_t last);
static void hello_answered(void *arg, const storage_hello_answer *a);

int ingest_hello(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  gtp_hello h;
  int rc = gtp_frame_hello_decode(f->payload, f->len, &h);
  if (rc == GTP_E_CORRUPT && h.bad_field != NULL)
    return session_auth_bad_text(c, &h);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, rc, 0, 0, "bad HELLO");
    return -1;
  }
  uint32_t lo = h.min_version > GTP_PROTO_VERSION_MIN ? h.min_version
                                                      : GTP_PROTO_VERSION_MIN;
  uint32_t hi =
      h.max_version < GTP_PROTO_VERSION ? h.max_version : GTP_PROTO_VERSION;
  if (lo > hi) {
    char r[160];
    snprintf(r, sizeof r, "daemon speaks versions %u..%u, agent %u..%u%s",
             GTP_PROTO_VERSION_MIN, GTP_PROTO_VERSION, h.min_version,
             h.max_version,
             h.max_version < GTP_PROTO_VERSION_MIN
                 ? ": agent too old, upgrade it (version 2 adds session keys)"
                 : "");
    CTR_ADD(ing, protocol_errors, 1);
    log_warn("agent refused", "conn=%" PRIu64 " peer=%s error=VERSION", c->id,
             c->peer);
    ingest_conn_close(c, GTP_E_VERSION, 0, 0, r);
    return -1;
  }
  if (ing->token != NULL &&
      !gtp_ct_equal(h.token.ptr, h.token.len, ing->token, ing->token_len)) {
    CTR_ADD(ing, limit_hits[LIM_TOKEN], 1);
    uint64_t now = uv_now(ing->loop);
    if (ing->token_log_ms == 0 || now - ing->token_log_ms >= TOKEN_LOG_MS) {
      log_warn("agent refused",
               "conn=%" PRIu64 " peer=%s error=TOKEN "
               "refusals_not_logged=%" PRIu64,
               c->id, c->peer, ing->token_quiet);
      ing->token_log_ms = now;
      ing->token_quiet = 0;
    } else {
      ing->token_quiet++; /* limit_hits{limit="token"} counts every one */
    }
    ingest_conn_close(c, GTP_E_TOKEN, 0, 0, "wrong or missing token");
    return -1;
  }
  /* mTLS: the certificate names the services it may claim (tls_conn.c). */
  if (tls_conn_check_service(c, h.service.ptr, h.service.len) < 0)
    return -1;
  /* The shared store answers the key and the last gen from its catalog:
   * asked on the thread pool, decided when the answer is back (below). */
  int shared = ing->store != NULL && storage_is_shared(ing->store);
  if (shared) {
    session_auth_key(c, &h);
  } else {
    /* Before anything of the session is touched (session_auth.c inv. 1). */
    if (session_auth_hello(c, &h, ingest_sess_find(ing, h.session)) < 0)
      return -1;
  }

  memcpy(c->session, h.session, 16);
  gtp_session_hex(c->session, c->session_hex);
  c->version = hi;
  c->pid = h.pid;
  c->process_start_ns = h.process_start_ns;
  if (hello_identity(c, &h) < 0) {
    ingest_conn_nomem(c, "HELLO identity");
    return -1;
  }
  budget_ident_set(c); /* held while c lives: counted (budget.c) */
  if (shared) {
    c->hello_wait = 1; /* stops reading (see ing->update_reading) */
    c->refs++;
    ing->lookups++;
    if (hello_lookup_start(ing->loop, ing->store, c->session, hello_answered,
                           c) < 0) {
      storage_hello_answer a = {.key_rc = GTP_E_UNAVAIL};
      hello_answered(c, &a);
    }
    return c->state == CONN_CLOSING ? -1 : 0;
  }
  uint64_t last = 0;
  int has_last = storage_last_gen(ing->store, c->session, &last) == 1;
  return hello_welcome(c, has_last, last);
}

/* The identity is in c and its key checked: make c the session's live
 * connection and send WELCOME. 0, or -1 once c was closed. */
static int hello_welcome(conn *c, int has_last, uint64_t last) {
  ingest *ing = c->ing;
  /* A session reconnecting while its old connection still looks alive
   * (half-open TCP after a network change) replaces it. */
  conn *old = ingest_sess_find(ing, c->session);
  if (old != NULL) {
    CTR_ADD(ing, replaced_total, 1);
    log_info("session replaced",
             "session=%s old_conn=%" PRIu64 " new_conn=%" PRIu64,
             c->session_hex, old->id, c->id);
    ingest_conn_close(old, GTP_E_STATE, 0, 0,
                      "replaced by a newer connection of this session");
  }
  ingest_sess_insert(c);
  c->state = CONN_ACTIVE;
  c->dec.max = ing->cfg.max_frame; /* was BUDGET_HELLO_FRAME_MAX */
  CTR_ADD(ing, handshakes_total, 1);

  gtp_welcome w = {0};
  w.version = c->version;
  w.has_last = has_last;
  w.last_gen = last;
  w.idle_timeout_ms = ing->cfg.idle_timeout_ms;
  w.max_gen_bytes = ing->cfg.max_gen_size;
  uint8_t mem[128];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_welcome_encode(&b, &w);
  ingest_conn_send(c, &b);
  char qs[128], qh[128];
  log_info("agent connected",
           "conn=%" PRIu64 " peer=%s session=%s service=%s host=%s pid=%" PRIu64
           " version=%u last_gen=%s%" PRIu64,
           c->id, c->peer, c->session_hex, log_quote(qs, sizeof qs, c->service),
           log_quote(qh, sizeof qh, c->host), c->pid, c->version,
           w.has_last ? "" : "none/", w.last_gen);
  return c->state == CONN_CLOSING ? -1 : 0;
}

/* The shared store's answer to a HELLO (hello_lookup.h), on the loop. The
 * key is decided against the live connection found now, not the one when
 * the HELLO came (it may have gone or come meanwhile). */
static void hello_answered(void *arg, const storage_hello_answer *a) {
  conn *c = arg;
  ingest *ing = c->ing;
  ing->lookups--;
  c->hello_wait = 0;
  if (c->state != CONN_CLOSING) {
    if (a->key_rc == GTP_E_SHUTDOWN)
      ingest_conn_close(c, GTP_E_SHUTDOWN, 0, 0, "daemon shutting down");
    else if (session_auth_decide(c, ingest_sess_find(ing, c->session),
                                 a->key_rc, a->key) == 0 &&
             hello_welcome(c, a->has_last, a->last_gen) == 0) {
      ing->update_reading(c); /* reads on */
      ing->update_pause(ing);
    }
  }
  ingest_conn_unref(c);
  ingest_drain_check(ing);
}
