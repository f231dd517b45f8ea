/* ingest.c: the agent side of gentraced (libuv).
 *
 * Owns: the listening socket, every agent connection (struct conn), the
 * generations being reassembled on them (struct opengen), the list of
 * completions coming back from the store thread, the list of generations to
 * resubmit after a disk-full stop, and the counters behind /metrics.
 *
 * Connection states (conn.state) and who moves them:
 *
 *   HANDSHAKE --HELLO ok (on_hello)--> ACTIVE
 *   HANDSHAKE/ACTIVE --error, timeout, GOODBYE, EOF, replaced
 *       (ingest_conn_close)--> CLOSING --shutdown flushed, or
 *       CLOSE_GRACE_MS (on_shutdown / on_sweep)--> uv_close --on_closed-->
 *       freed when refs drops to 0
 *   HANDSHAKE/ACTIVE --ingest_stop--> DRAINING --all committed and ACKed
 *       (drain_check)--> GOODBYE(SHUTDOWN) + ingest_conn_close
 *
 * In CLOSING the socket is still read, and the input discarded, until the
 * handle closes: closing with unread input sends RST, which can destroy the
 * ERROR frame the peer has not read yet.
 *
 * Files: reasm.c holds reassembly and validation (BATCH, GEN_END) and the
 * generation buffers (the pool, the filler thread: invariants 8-10),
 * ingest_metrics.c the /metrics text; ingest_int.h their shared state.
 *
 * Invariants:
 *  1. Only the loop thread MUST touch conns, opengens and the retry list;
 *     the store thread only appends to `done_list` under `done_lock` and
 *     calls uv_async_send, otherwise connection state races with commits.
 *  2. A generation MUST reach the store only whole and validated (manifest
 *     and gtp_gen_parse); an opengen dies with its connection, otherwise a
 *     dropped connection could leave half a generation stored.
 *  3. ACK(gen) MUST be sent only from the completion of that generation's
 *     commit (result 0 or 1), otherwise an agent could drop a generation
 *     that a crash then loses.
 *  4. A conn MUST stay allocated while a store_gen points at it (cookie):
 *     every submitted generation holds a reference (refs) and the conn is
 *     freed only when refs reaches 0 after its handle closed, otherwise a
 *     completion would write to freed memory.
 *  5. Every byte the daemon holds for agents (partial frames, open
 *     generations, generations queued at the store or waiting for disk
 *     space) MUST be counted in conn.buffered and ing.buffered; reading
 *     stops while a count is over its limit and resumes below 3/4 of it
 *     (hysteresis), otherwise memory grows with the peers' send rate.
 *     Reading MUST stop only while queued_bytes > 0 (something will drain):
 *     open generations drain only by reading on, so pausing for them would
 *     deadlock; they are bounded by closing the connection (reasm_batch,
 *     and budget.c, which owns the accounting by kind and sheds the
 *     oldest partial work when it alone is over max-buffer).
 *  6. Once a frame closed its conn, nothing more of that read is processed:
 *     conn_handle_frame returns < 0 after ingest_conn_close.
 *  7. Reads use one shared 256 KiB buffer (the decoder copies only partial
 *     frames), so an idle connection holds no read buffer (S1: 10,000 idle
 *     agents in 256 MiB); the one exception is a staged frame (9), whose
 *     buffer is its generation's.
 *  8. Generation buffers the store is done with (and those of refused or
 *     dropped generations) go to a pool of at most GENBUF_POOL_MAX buffers
 *     and max-buffer/8 bytes, reused for the next generations (a fresh
 *     buffer costs a page fault per 4 KiB written). Pooled bytes
 *     (ing.pool_bytes, not part of buffered: they hold nothing for agents)
 *     MUST keep budget_used() + pool_bytes <= max-buffer (budget.c): a
 *     buffer enters the pool only if it fits, and ingest_update_pause
 *     frees pooled (then prepared, 10) buffers before deciding to pause
 *     while the sum is over, otherwise the pool would add to the memory
 *     the limit bounds or hold agents back. A buffer MUST enter the pool only
 * after the store handed its generation back (done callback), otherwise the
 * store would read a buffer being refilled.
 *  9. A BATCH frame of at least STAGE_MIN bytes that starts at a frame
 *     boundary but does not lie whole in a read is staged: its records are
 *     read straight into its generation's buffer past buf.len (no decoder
 *     copy, no second copy), and appended only once whole and checked like
 *     gtp_frame_batch_decode does. Only a frame reasm_batch would append
 *     without refusing anything (open, accepted generation within
 *     max-gen-size and the per-connection open bytes) is staged, so the
 *     outcome never depends on how the bytes arrived. While c->stage is
 *     set, every read MUST go into the staged frame's remaining bytes
 *     (exactly those, so no next frame lands there) and its bytes MUST be
 *     counted in buffered (5); ingest_conn_close and ingest_stop MUST call
 *     reasm_stage_abort before they free the generations, otherwise a read
 *     would write into a freed buffer.
 * 10. When the pool has no buffer for a new generation (the store is
 *     behind, or at the start), the loop asks the filler thread to prepare
 *     the next ones (GENBUF_FILL_MAX at most, of the size just needed):
 *     it mallocs them and faults their pages in off the loop, which then
 *     only copies. A slot's size MUST be counted in ing.pool_bytes from the
 *     ask until the loop takes or frees it (bounded by invariant 8, except
 *     one being prepared, which a trim cannot stop), and a slot MUST change
 *     hands only under fill_lock (the filler owns it only while BUSY),
 *     otherwise a buffer could be handed out twice or freed while faulted in.
 */
#include "config.h"

#include "ingest.h"
#include "ingest_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "frame.h"
#include "gtp_error.h"
#include "iplimit.h"
#include "log.h"
#include "tls_conn.h"
#include "varint.h"

static void conn_update_reading(conn *c);
static void ingest_update_pause(ingest *ing);
static void drain_check(ingest *ing);
static void on_retry(uv_timer_t *t);
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* ------------------------------------------------------------- utilities */

void ingest_config_init(ingest_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = "127.0.0.1";
  cfg->port = 7170;
  cfg->max_connections = 16384;
  cfg->max_conns_per_ip = 256;
  cfg->max_conn_buffer = 64ull << 20;
  cfg->max_buffer = 512ull << 20;
  cfg->max_frame = GTP_FRAME_MAX;
  cfg->max_gen_size = 64ull << 20;
  cfg->handshake_timeout_ms = 10000;
  cfg->idle_timeout_ms = 60000;
  cfg->max_gen_span_ns = 600ull * 1000000000;
  cfg->max_clock_skew_ns = 86400ull * 1000000000;
}

/* The project's one cause helper (proto/text.h); callers here ignore the
 * code. */
#define set_cause(cause, ...) ((void)gtp_causef((cause), 0, __VA_ARGS__))

/* Appends s as a JSON string (quotes included) to b, escaped by the
 * project's one rule (invalid UTF-8 as \ufffd), so the tags stay valid JSON
 * and web/ never has to show them as {}. */
static void json_str(gtp_wbuf *b, const char *s) {
  gtp_wbuf_put(b, "\"", 1);
  gtp_json_escape(gtp_wbuf_sink, b, s, strlen(s));
  gtp_wbuf_put(b, "\"", 1);
}

/* ------------------------------------------------------- buffer accounting */

void ingest_conn_account(conn *c, int64_t delta) {
  ingest *ing = c->ing;
  if (ing->budget_checks && delta < 0 &&
      ((uint64_t)-delta > c->buffered || (uint64_t)-delta > ing->buffered)) {
    fprintf(stderr, "gentraced: buffered bytes would go negative\n");
    abort(); /* budget.c invariant 1, checked in tests */
  }
  c->buffered = (uint64_t)((int64_t)c->buffered + delta);
  ing->buffered = (uint64_t)((int64_t)ing->buffered + delta);
  CTR_SET(ing, buffered, ing->buffered);
}

/* A generation left the store queue (committed, failed or dropped): what
 * was counted for it (pd->held: its buffer and identity copies) stops
 * counting. */
static void conn_dequeue(conn *c, const pending *pd) {
  c->inflight--;
  budget_dequeue(c, pd->held);
}

/* Re-reads the decoder's partial-frame size into the accounts. */
static void conn_account_decoder(conn *c) {
  budget_decoder_sync(c);
}

/* ---------------------------------------------------------------- sessions */

static unsigned sess_hash(const uint8_t s[16]) {
  /* Session ids are random (proto/PROTOCOL.md), so their first bytes hash well;
   * a hostile agent choosing colliding ids only slows its own bucket. */
  uint32_t h = gtp_get_u32le(s) ^ gtp_get_u32le(s + 12);
  return h & (SESS_BUCKETS - 1);
}

/* Returns the live conn of a session. Loop thread (or sess_lock held). */
static conn *sess_find(ingest *ing, const uint8_t s[16]) {
  for (conn *c = ing->sess[sess_hash(s)]; c != NULL; c = c->sess_next)
    if (memcmp(c->session, s, 16) == 0)
      return c;
  return NULL;
}

static void sess_insert(conn *c) {
  ingest *ing = c->ing;
  pthread_mutex_lock(&ing->sess_lock);
  conn **head = &ing->sess[sess_hash(c->session)];
  c->sess_next = *head;
  *head = c;
  c->in_session_map = 1;
  pthread_mutex_unlock(&ing->sess_lock);
}

static void sess_remove(conn *c) {
  ingest *ing = c->ing;
  if (!c->in_session_map)
    return;
  pthread_mutex_lock(&ing->sess_lock);
  for (conn **pp = &ing->sess[sess_hash(c->session)]; *pp != NULL;
       pp = &(*pp)->sess_next) {
    if (*pp == c) {
      *pp = c->sess_next;
      break;
    }
  }
  c->in_session_map = 0;
  pthread_mutex_unlock(&ing->sess_lock);
}

/* ------------------------------------------------------------------ writes */

typedef struct wreq {
  uv_write_t req;
  conn *c;
  size_t len;
  uint8_t data[];
} wreq;

static void on_write(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  conn *c = w->c;
  c->ing->reply_bytes -= w->len;
  CTR_SET(c->ing, budget_replies, c->ing->reply_bytes);
  free(w);
  if (status < 0 && status != UV_ECANCELED && c->state != CONN_CLOSING)
    ingest_conn_close(c, 0, 0, 0, NULL);
}

/* Queues the frames in b (whole frames) on c. The bytes are copied. */
static void conn_send(conn *c, const gtp_wbuf *b) {
  if (b->err || b->len == 0 || c->state == CONN_CLOSING)
    return;
  if (!c->write_overflow && uv_stream_get_write_queue_size(
                                (uv_stream_t *)&c->tcp) > WRITE_QUEUE_MAX) {
    /* A peer that does not read our replies cannot see ACKs either. The
     * flag lets the closing ERROR(LIMIT) itself past this check. */
    c->write_overflow = 1;
    CTR_ADD(c->ing, limit_hits[LIM_WRITE_QUEUE], 1);
    ingest_conn_close(c, GTP_E_LIMIT, 0, 0, "agent does not read replies");
    return;
  }
  if (c->tls != NULL) {
    tls_conn_send(c, b->data, b->len); /* pushes ciphertext below */
    return;
  }
  ingest_conn_write_raw(c, b->data, b->len);
}

void ingest_conn_write_raw(conn *c, const void *p, size_t n) {
  wreq *w = malloc(sizeof *w + n);
  if (w == NULL)
    GTP_OOM();
  w->c = c;
  w->len = n;
  memcpy(w->data, p, n);
  uv_buf_t ub = uv_buf_init((char *)w->data, (unsigned)n);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
  if (rc < 0) {
    free(w);
    if (c->state != CONN_CLOSING)
      ingest_conn_close(c, 0, 0, 0, NULL);
    return;
  }
  /* Replies a peer does not read are memory too (budget.c). */
  c->ing->reply_bytes += w->len;
  CTR_SET(c->ing, budget_replies, c->ing->reply_bytes);
  c->last_tx_ms = uv_now(c->ing->loop);
}

static void send_ack(conn *c, uint64_t gen) {
  uint8_t mem[32];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_ack_encode(&b, gen);
  conn_send(c, &b);
}

void ingest_send_error(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  char r[GTP_REASON_MAX];
  snprintf(r, sizeof r, "%s", reason != NULL ? reason : gtp_strerror(code));
  gtp_frame_error_encode(&b, code, has_gen, gen, r);
  conn_send(c, &b);
}

static void send_goodbye(conn *c, int code, const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_goodbye_encode(&b, code, reason);
  conn_send(c, &b);
}

/* --------------------------------------------------------------- lifecycle */

static void conn_free_identity(conn *c) {
  free(c->service);
  free(c->host);
  free(c->agent_version);
  free(c->tags_json);
  for (uint32_t i = 0; i < c->ntags; i++) {
    free(c->tag_keys[i]);
    free(c->tag_values[i]);
  }
  free(c->tag_keys);
  free(c->tag_values);
}

static void conn_unref(conn *c) {
  if (--c->refs > 0)
    return;
  budget_ident_drop(c);
  conn_free_identity(c);
  free(c);
}

static void on_closed(uv_handle_t *h) {
  conn *c = h->data;
  ingest *ing = c->ing;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    ing->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  ing->nconns--;
  CTR_SET(ing, connections, ing->nconns);
  if (c->ip_held)
    iplimit_release(ing->iplim, c->ipkey);
  c->ip_held = 0;
  ing->handles_open--;
  tls_conn_free(c);
  conn_unref(c);
  drain_check(ing);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  free(req);
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* Ends a connection: drops what it was assembling (invariant 2), sends
 * ERROR (code < 0) or GOODBYE (code 0 with a reason) first, then closes
 * once the write queue flushed or CLOSE_GRACE_MS passed (sweep). */
void ingest_conn_close(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  if (c->state == CONN_CLOSING)
    return;
  ingest *ing = c->ing;
  /* Token refusals are logged by on_hello, rate-limited: one line per
   * refusal here would let a guessing client flood the log. */
  if (code < 0 && code != GTP_E_SHUTDOWN && code != GTP_E_TOKEN) {
    char q[GTP_REASON_MAX + 8];
    log_info("agent connection closed",
             "conn=%" PRIu64 " peer=%s session=%s error=%s reason=%s", c->id,
             c->peer, c->session_hex[0] ? c->session_hex : "none",
             gtp_errname(code),
             log_quote(q, sizeof q, reason ? reason : gtp_strerror(code)));
  } else if (code == 0 && c->session_hex[0]) {
    /* A clean end (GOODBYE, EOF, a failed write): one line, here only,
     * since the CLOSING check above makes every later call a no-op. */
    log_info("agent disconnected", "conn=%" PRIu64 " peer=%s session=%s", c->id,
             c->peer, c->session_hex);
  }
  if (code < 0 && code != GTP_E_SHUTDOWN)
    ingest_send_error(c, code, has_gen, gen, reason);
  else if (reason != NULL)
    send_goodbye(c, code, reason);
  c->state = CONN_CLOSING;
  c->closing_ms = uv_now(ing->loop);
  sess_remove(c);
  reasm_stage_abort(c); /* invariant 9: before its generation goes */
  while (c->gens != NULL) {
    opengen *g = c->gens;
    c->gens = g->next;
    reasm_free(c, g);
  }
  c->ngens = 0;
  gtp_frame_decoder_fini(&c->dec);
  conn_account_decoder(c);
  /* Keep reading (and discarding) until the handle closes: closing a socket
   * with unread input sends RST, which can destroy the ERROR we just queued
   * before the peer reads it. CLOSE_GRACE_MS bounds how long. */
  if (!c->reading &&
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
    c->reading = 1;
  if (c->self_paused) {
    c->self_paused = 0;
    CTR_ADD(ing, paused_now, (uint64_t)-1);
  }
  tls_conn_bye(c); /* TLS: close_notify after the last frame */
  uv_shutdown_t *req = malloc(sizeof *req);
  if (req != NULL) {
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) == 0)
      return;
    free(req);
  }
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* ---------------------------------------------------------------- handshake */

static int on_hello(conn *c, const gtp_frame *f) {
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
  /* Before anything of the session is touched (session_auth.c inv. 1). */
  if (session_auth_hello(c, &h, sess_find(ing, h.session)) < 0)
    return -1;

  memcpy(c->session, h.session, 16);
  gtp_session_hex(c->session, c->session_hex);
  c->version = hi;
  c->service = ingest_xstrndup(h.service.ptr, h.service.len);
  c->host = ingest_xstrndup(h.host.ptr, h.host.len);
  c->agent_version = ingest_xstrndup(h.agent_version.ptr, h.agent_version.len);
  c->pid = h.pid;
  c->process_start_ns = h.process_start_ns;
  c->ntags = h.ntags;
  if (h.ntags > 0) {
    c->tag_keys = ingest_xcalloc(h.ntags, sizeof(char *));
    c->tag_values = ingest_xcalloc(h.ntags, sizeof(char *));
  }
  gtp_wbuf tj;
  gtp_wbuf_init(&tj, 1u << 20);
  gtp_wbuf_put(&tj, "{", 1);
  for (uint32_t i = 0; i < h.ntags; i++) {
    c->tag_keys[i] = ingest_xstrndup(h.tags[i].key.ptr, h.tags[i].key.len);
    c->tag_values[i] =
        ingest_xstrndup(h.tags[i].value.ptr, h.tags[i].value.len);
    if (i > 0)
      gtp_wbuf_put(&tj, ",", 1);
    json_str(&tj, c->tag_keys[i]);
    gtp_wbuf_put(&tj, ":", 1);
    json_str(&tj, c->tag_values[i]);
  }
  gtp_wbuf_put(&tj, "}", 1);
  if (tj.err)
    GTP_OOM();
  c->tags_json = ingest_xstrndup((const char *)tj.data, tj.len);
  gtp_wbuf_fini(&tj);
  budget_ident_set(c); /* held while c lives: counted (budget.c) */

  /* A session reconnecting while its old connection still looks alive
   * (half-open TCP after a network change) replaces it. */
  conn *old = sess_find(ing, c->session);
  if (old != NULL) {
    CTR_ADD(ing, replaced_total, 1);
    log_info("session replaced",
             "session=%s old_conn=%" PRIu64 " new_conn=%" PRIu64,
             c->session_hex, old->id, c->id);
    ingest_conn_close(old, GTP_E_STATE, 0, 0,
                      "replaced by a newer connection of this session");
  }
  sess_insert(c);
  c->state = CONN_ACTIVE;
  c->dec.max = ing->cfg.max_frame; /* was BUDGET_HELLO_FRAME_MAX */
  CTR_ADD(ing, handshakes_total, 1);

  gtp_welcome w = {0};
  w.version = hi;
  w.has_last = storage_last_gen(ing->store, c->session, &w.last_gen) == 1;
  w.idle_timeout_ms = ing->cfg.idle_timeout_ms;
  w.max_gen_bytes = ing->cfg.max_gen_size;
  uint8_t mem[128];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_welcome_encode(&b, &w);
  conn_send(c, &b);
  char qs[128], qh[128];
  log_info("agent connected",
           "conn=%" PRIu64 " peer=%s session=%s service=%s host=%s pid=%" PRIu64
           " version=%u last_gen=%s%" PRIu64,
           c->id, c->peer, c->session_hex, log_quote(qs, sizeof qs, c->service),
           log_quote(qh, sizeof qh, c->host), c->pid, hi,
           w.has_last ? "" : "none/", w.last_gen);
  return c->state == CONN_CLOSING ? -1 : 0;
}

/* ------------------------------------------------------------------ frames */

static int conn_handle_frame(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  CTR_ADD(ing, frames, 1);
  if (c->state == CONN_HANDSHAKE) {
    if (f->type != GTP_FR_HELLO) {
      CTR_ADD(ing, protocol_errors, 1);
      ingest_conn_close(c, GTP_E_STATE, 0, 0, "first frame must be HELLO");
      return -1;
    }
    return on_hello(c, f);
  }
  switch (f->type) {
  case GTP_FR_BATCH:
    return reasm_batch(c, f);
  case GTP_FR_GEN_END:
    return reasm_gen_end(c, f);
  case GTP_FR_HEARTBEAT:
    return 0;
  case GTP_FR_GOODBYE:
    ingest_conn_close(c, 0, 0, 0, NULL);
    return -1;
  case GTP_FR_ERROR: {
    gtp_error_frame ef;
    char q[GTP_REASON_MAX + 8];
    if (gtp_frame_error_decode(f->payload, f->len, &ef) == 0) {
      char r[GTP_REASON_MAX + 1];
      snprintf(r, sizeof r, "%.*s", (int)ef.reason.len, ef.reason.ptr);
      log_warn("agent sent ERROR", "conn=%" PRIu64 " code=%s reason=%s", c->id,
               gtp_errname(ef.code), log_quote(q, sizeof q, r));
    }
    ingest_conn_close(c, 0, 0, 0, NULL);
    return -1;
  }
  case GTP_FR_HELLO:
  case GTP_FR_WELCOME:
  case GTP_FR_ACK:
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, GTP_E_STATE, 0, 0, "frame not allowed after HELLO");
    return -1;
  default:
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, GTP_E_UNKNOWN, 0, 0, "unknown frame type");
    return -1;
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  conn *c = h->data;
  ingest *ing = c->ing;
  if (c->stage != NULL) {
    /* Exactly the staged frame's missing bytes, in place (invariant 9). */
    opengen *g = c->stage;
    *buf = uv_buf_init((char *)g->buf.data + g->buf.len + c->stage_have,
                       (unsigned)(c->stage_len - c->stage_have));
    return;
  }
  /* One read is processed at a time on this loop, so one buffer serves
   * every connection (invariant 7). */
  if (ing->rbuf_busy) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  ing->rbuf_busy = 1;
  /* Near a limit, read only what still fits (at least READ_MIN), so the
   * overshoot past a limit stays small (invariant 5). */
  uint64_t size = READ_BUF_SIZE;
  uint64_t used = budget_used(ing);
  uint64_t room_g = ing->cfg.max_buffer > used ? ing->cfg.max_buffer - used : 0;
  uint64_t room_c = ing->cfg.max_conn_buffer > c->buffered
                        ? ing->cfg.max_conn_buffer - c->buffered
                        : 0;
  if (room_g < size)
    size = room_g;
  if (room_c < size)
    size = room_c;
  if (size < READ_MIN)
    size = READ_MIN;
  *buf = uv_buf_init((char *)ing->rbuf, (unsigned)size);
}

/* Runs the frames in [p, p+n) (plain bytes read, or TLS plaintext). */
void ingest_conn_input(conn *c, const uint8_t *p, size_t n) {
  ingest *ing = c->ing;
  while (n > 0 && c->state != CONN_CLOSING) {
    gtp_frame f;
    size_t used = 0;
    if (c->tls == NULL && gtp_frame_decoder_buffered(&c->dec) == 0 &&
        c->dec.err == 0 && reasm_stage_begin(c, p, n)) {
      /* The rest of this frame is read in place (invariant 9). Feeding
       * nothing releases the decoder's last returned frame. */
      (void)gtp_frame_decoder_feed(&c->dec, NULL, 0, &used, &f);
      break;
    }
    int rc = gtp_frame_decoder_feed(&c->dec, p, n, &used, &f);
    conn_account_decoder(c);
    if (rc < 0) {
      CTR_ADD(ing, protocol_errors, 1);
      int early = rc == GTP_E_TOOBIG && c->state == CONN_HANDSHAKE;
      if (early) {
        CTR_ADD(ing, hello_toobig, 1);
        CTR_ADD(ing, limit_hits[LIM_HELLO_SIZE], 1);
      } else if (rc == GTP_E_TOOBIG) {
        CTR_ADD(ing, limit_hits[LIM_FRAME], 1);
      }
      log_warn("agent frame error", "conn=%" PRIu64 " peer=%s error=%s", c->id,
               c->peer, gtp_errname(rc));
      ingest_conn_close(c, rc, 0, 0,
                        early ? "frame before HELLO larger than 64 KiB"
                        : rc == GTP_E_TOOBIG
                            ? "frame larger than the daemon's maximum"
                            : "bad frame");
      break;
    }
    p += used;
    n -= used;
    if (rc == 0)
      break;
    if (conn_handle_frame(c, &f) < 0)
      break; /* invariant 6 */
  }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  ingest *ing = c->ing;
  int staged = buf->base != (char *)ing->rbuf && c->stage != NULL &&
               buf->base == (char *)c->stage->buf.data + c->stage->buf.len +
                                c->stage_have;
  if (buf->base == (char *)ing->rbuf)
    ing->rbuf_busy = 0;
  if (nread == 0 || nread == UV_ENOBUFS)
    return; /* EAGAIN, or no buffer this time: libuv reads again later */
  if (c->state == CONN_CLOSING) {
    /* Discarding until close (see ingest_conn_close). */
    if (nread < 0 && c->reading) {
      uv_read_stop(s);
      c->reading = 0;
    }
    return;
  }
  if (nread < 0) {
    if (nread != UV_EOF)
      log_info("agent connection error", "conn=%" PRIu64 " error=%s", c->id,
               uv_err_name((int)nread));
    if (c->gens != NULL)
      log_info("agent left mid-generation", "conn=%" PRIu64 " open=%u", c->id,
               c->ngens);
    ingest_conn_close(c, 0, 0, 0, NULL);
    return;
  }
  c->last_rx_ms = uv_now(ing->loop);
  CTR_ADD(ing, bytes, (uint64_t)nread);
  c->refs++; /* keep c across ingest_conn_close inside the loop */
  if (staged) {
    (void)reasm_stage_read(c, (size_t)nread);
    if (c->state != CONN_CLOSING) {
      conn_update_reading(c);
      ingest_update_pause(ing);
    }
    conn_unref(c);
    return;
  }
  if (c->tls != NULL)
    tls_conn_input(c, (const uint8_t *)buf->base, (size_t)nread);
  else
    ingest_conn_input(c, (const uint8_t *)buf->base, (size_t)nread);
  if (c->state != CONN_CLOSING) {
    conn_account_decoder(c);
    conn_update_reading(c);
    ingest_update_pause(ing);
  }
  conn_unref(c);
}

/* Starts or stops reading on c according to the limits (invariant 5). */
static void conn_update_reading(conn *c) {
  ingest *ing = c->ing;
  if (c->state == CONN_CLOSING)
    return;
  /* Pausing helps only while something at the store will drain: bytes of
   * open generations drain only by reading on (their size is bounded by
   * closing the connection instead, in reasm_batch), so pausing for them
   * would deadlock the connection. */
  uint64_t lim = ing->cfg.max_conn_buffer;
  if (!c->self_paused && c->buffered > lim && c->queued_bytes > 0) {
    c->self_paused = 1;
    CTR_ADD(ing, reads_paused, 1);
    CTR_ADD(ing, paused_now, 1);
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
  } else if (c->self_paused &&
             (c->buffered <= lim / 4 * 3 || c->queued_bytes == 0)) {
    c->self_paused = 0;
    CTR_ADD(ing, paused_now, (uint64_t)-1);
  }
  int want = (c->state == CONN_HANDSHAKE || c->state == CONN_ACTIVE) &&
             !c->self_paused && !ing->global_paused;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
      c->reading = 1;
    /* Time spent paused by us is not the agent's idleness. */
    c->last_rx_ms = uv_now(ing->loop);
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

/* Global pause: total buffered bytes over max-buffer, or the disk full. */
static void ingest_update_pause(ingest *ing) {
  int want;
  /* Idle pooled buffers give way to bytes held for agents (invariant 8). */
  genbuf_pool_trim(ing);
  /* Partial work that pausing cannot release is shed (budget.c). */
  budget_enforce(ing);
  /* As per connection: pause only while queued bytes will drain. */
  if (ing->disk_full)
    want = 1;
  else if (ing->queued_bytes == 0)
    want = 0;
  else if (ing->global_paused)
    want = budget_used(ing) > ing->cfg.max_buffer / 4 * 3;
  else
    want = budget_used(ing) > ing->cfg.max_buffer;
  if (want == ing->global_paused)
    return;
  ing->global_paused = want;
  CTR_SET(ing, global_paused, (uint64_t)want);
  if (want) {
    CTR_ADD(ing, reads_paused, 1);
    if (!ing->disk_full)
      CTR_ADD(ing, limit_hits[LIM_BUFFER], 1);
    log_warn("ingest paused", "reason=%s buffered=%" PRIu64,
             ing->disk_full ? "disk-full" : "max-buffer", ing->buffered);
  } else {
    log_info("ingest resumed", "buffered=%" PRIu64, ing->buffered);
  }
  for (conn *c = ing->conns; c != NULL; c = c->next)
    conn_update_reading(c);
}

/* ------------------------------------------------------------- completions */

void ingest_store_done(void *ctx, store_gen *g) {
  ingest *ing = ctx;
  pending *pd = g->cookie;
  if (g->result == 0 && ing->cfg.on_commit != NULL)
    ing->cfg.on_commit(ing->cfg.on_commit_ctx, g->seq);
  pd->next = NULL;
  pthread_mutex_lock(&ing->done_lock);
  *ing->done_tail = pd;
  ing->done_tail = &pd->next;
  pthread_mutex_unlock(&ing->done_lock);
  uv_async_send(&ing->async);
}

static void retry_push(ingest *ing, pending *pd) {
  pd->next = NULL;
  *ing->retry_tail = pd;
  ing->retry_tail = &pd->next;
  ing->retry_n++;
}

static pending *retry_pop(ingest *ing) {
  pending *pd = ing->retry_head;
  if (pd != NULL) {
    ing->retry_head = pd->next;
    if (ing->retry_head == NULL)
      ing->retry_tail = &ing->retry_head;
    ing->retry_n--;
  }
  return pd;
}

/* Resubmits a generation that met a full disk. */
static void resubmit(ingest *ing, pending *pd) {
  pd->g->result = 0;
  ing->inflight++;
  if (storage_submit(ing->store, pd->g) < 0) {
    /* The store is closing: the agent will resend after a restart. */
    ing->inflight--;
    conn *c = pd->c;
    conn_dequeue(c, pd);
    store_gen_free(pd->g);
    free(pd);
    conn_unref(c);
  }
}

static void disk_full_enter(ingest *ing) {
  if (ing->disk_full)
    return;
  ing->disk_full = 1;
  ing->last_probe_ms = uv_now(ing->loop);
  CTR_SET(ing, disk_full, 1);
  CTR_ADD(ing, disk_full_total, 1);
  uint64_t now = uv_now(ing->loop);
  ing->full_logged =
      ing->full_log_ms == 0 || now - ing->full_log_ms >= DISKFULL_LOG_MS;
  if (ing->full_logged) {
    log_error("storage full, ingest paused",
              "queued=%" PRIu64 " pauses_not_logged=%" PRIu64, ing->retry_n,
              ing->full_quiet);
    ing->full_log_ms = now;
    ing->full_quiet = 0;
  } else {
    ing->full_quiet++; /* gentrace_disk_full_total counts every pause */
  }
  ingest_update_pause(ing);
  uv_timer_start(&ing->retry_timer, on_retry, DISKFULL_PROBE_MS / 4,
                 DISKFULL_PROBE_MS / 4);
}

static void disk_full_leave(ingest *ing) {
  if (!ing->disk_full)
    return;
  ing->disk_full = 0;
  CTR_SET(ing, disk_full, 0);
  uv_timer_stop(&ing->retry_timer);
  if (ing->full_logged)
    log_info("storage has room again, ingest resumes", "queued=%" PRIu64,
             ing->retry_n);
  pending *pd;
  while ((pd = retry_pop(ing)) != NULL)
    resubmit(ing, pd);
  ingest_update_pause(ing);
}

/* Applies one completion. */
static void complete(ingest *ing, pending *pd) {
  store_gen *g = pd->g;
  conn *c = pd->c;
  ing->inflight--;
  if (pd == ing->probe) {
    ing->probe = NULL;
  }
  if (g->result == GTP_E_DISKFULL) {
    retry_push(ing, pd);
    disk_full_enter(ing);
    return;
  }
  if (ing->disk_full) {
    /* Something committed: space is back (retention or an operator). */
    disk_full_leave(ing);
  }
  conn_dequeue(c, pd);
  /* The store is done with the payload (invariant 8). */
  genbuf_release(ing, g->payload, pd->cap);
  g->payload = NULL;
  if (g->result == GTP_E_CONFLICT || g->result == GTP_E_TOOBIG) {
    session_auth_store_refused(c, g); /* final for the generation */
  } else if (g->result == 0 || g->result == 1) {
    if (g->result == 0) {
      CTR_ADD(ing, committed, 1);
      CTR_ADD(ing, ledger_dropped, g->end.dropped);
      CTR_ADD(ing, ledger_evicted, g->end.evicted);
      CTR_ADD(ing, ledger_rejected, g->end.rejected);
    } else {
      CTR_ADD(ing, duplicate, 1);
    }
    if (c->state == CONN_ACTIVE || c->state == CONN_DRAINING)
      send_ack(c, g->gen); /* invariant 3 */
  } else {
    /* Not stored and not the agent's fault: no ERROR (the agent would drop
     * the generation); close so it reconnects and resends. */
    CTR_ADD(ing, store_errors, 1);
    log_error("store failed a generation",
              "session=%s gen=%" PRIu64 " error=%s", c->session_hex, g->gen,
              gtp_errname(g->result));
    if (c->state == CONN_ACTIVE)
      ingest_conn_close(c, 0, 0, 0,
                        "daemon storage error; reconnect and resend");
  }
  store_gen_free(g);
  free(pd);
  if (c->state != CONN_CLOSING)
    conn_update_reading(c);
  conn_unref(c);
}

static void on_async(uv_async_t *a) {
  ingest *ing = a->data;
  pthread_mutex_lock(&ing->done_lock);
  pending *list = ing->done_head;
  ing->done_head = NULL;
  ing->done_tail = &ing->done_head;
  pthread_mutex_unlock(&ing->done_lock);
  while (list != NULL) {
    pending *next = list->next;
    complete(ing, list);
    list = next;
  }
  ingest_update_pause(ing);
  drain_check(ing);
}

/* While the disk is full, probe with one generation now and then: the store
 * may have room again (retention, an operator freeing space). */
static void on_retry(uv_timer_t *t) {
  ingest *ing = t->data;
  if (!ing->disk_full || ing->probe != NULL || ing->retry_head == NULL)
    return;
  store_stats st;
  storage_stats_get(ing->store, &st);
  uint64_t now = uv_now(ing->loop);
  if (st.disk_full && now - ing->last_probe_ms < DISKFULL_PROBE_MS)
    return;
  ing->last_probe_ms = now;
  pending *pd = retry_pop(ing);
  ing->probe = pd;
  resubmit(ing, pd);
}

/* ------------------------------------------------------------------- sweep */

static void on_sweep(uv_timer_t *t) {
  ingest *ing = t->data;
  uint64_t now = uv_now(ing->loop);
  uint64_t hb = ing->cfg.idle_timeout_ms / 3;
  conn *next;
  if (ing->tls != NULL)
    tls_server_check_expiry(ing->tls); /* logs once a day in its last week */
  for (conn *c = ing->conns; c != NULL; c = next) {
    next = c->next;
    switch (c->state) {
    case CONN_HANDSHAKE:
      if (now - c->created_ms >= ing->cfg.handshake_timeout_ms) {
        CTR_ADD(ing, limit_hits[LIM_HANDSHAKE_TIMEOUT], 1);
        log_info("handshake timeout", "conn=%" PRIu64 " peer=%s", c->id,
                 c->peer);
        ingest_conn_close(c, GTP_E_TIMEOUT, 0, 0, "no HELLO in time");
      }
      break;
    case CONN_ACTIVE:
      if (!c->reading)
        c->last_rx_ms = now; /* paused by us: not the agent's idleness */
      if (now - c->last_rx_ms >= ing->cfg.idle_timeout_ms) {
        CTR_ADD(ing, limit_hits[LIM_IDLE_TIMEOUT], 1);
        log_info("idle timeout", "conn=%" PRIu64 " session=%s", c->id,
                 c->session_hex);
        ingest_conn_close(c, GTP_E_TIMEOUT, 0, 0, "idle timeout");
      } else if (hb > 0 && now - c->last_tx_ms >= hb) {
        uint8_t mem[8];
        gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
        gtp_frame_heartbeat_encode(&b);
        conn_send(c, &b);
        CTR_ADD(ing, heartbeats_sent, 1);
      }
      break;
    case CONN_DRAINING:
      break;
    case CONN_CLOSING:
      if (now - c->closing_ms >= CLOSE_GRACE_MS &&
          !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
      break;
    }
  }
  if (ing->stopping && !ing->stop_called && !ing->drain_gave_up &&
      now >= ing->drain_deadline_ms) {
    log_warn("drain deadline passed",
             "inflight=%" PRIu64 " waiting_for_disk=%" PRIu64, ing->inflight,
             ing->retry_n);
    /* Generations that cannot commit (disk full) stay unACKed; agents
     * resend them to the next daemon. */
    pending *pd;
    while ((pd = retry_pop(ing)) != NULL) {
      conn *c = pd->c;
      conn_dequeue(c, pd);
      store_gen_free(pd->g);
      free(pd);
      conn_unref(c);
    }
    ing->drain_gave_up = 1;
    drain_check(ing);
  }
}

/* ------------------------------------------------------------------ accept */

/* What tls_conn.c calls back (tls_conn.h). */
static const tls_conn_ops tls_ops = {ingest_conn_input, ingest_conn_write_raw,
                                     ingest_conn_close};

static void free_refused(uv_handle_t *h) {
  free(h->data);
}

static void on_connection(uv_stream_t *server, int status) {
  ingest *ing = server->data;
  if (status < 0) {
    log_warn("accept failed", "error=%s", uv_err_name(status));
    return;
  }
  conn *c = ingest_xcalloc(1, sizeof *c);
  c->ing = ing;
  uv_tcp_init(ing->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, free_refused);
    return;
  }
  if (ing->stopping || ing->nconns >= ing->cfg.max_connections) {
    /* Tell the agent why, best effort, without queueing anything. */
    uint8_t mem[128];
    gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
    if (ing->stopping) {
      gtp_frame_goodbye_encode(&b, GTP_E_SHUTDOWN, "daemon shutting down");
    } else {
      gtp_frame_error_encode(&b, GTP_E_LIMIT, 0, 0,
                             "too many agent connections");
      CTR_ADD(ing, refused_total, 1);
      CTR_ADD(ing, limit_hits[LIM_CONNECTIONS], 1);
    }
    uv_buf_t ub = uv_buf_init((char *)b.data, (unsigned)b.len);
    uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
    uv_close((uv_handle_t *)&c->tcp, free_refused);
    return;
  }
  if (!budget_admit_ip(ing, c)) {
    uv_close((uv_handle_t *)&c->tcp, free_refused);
    return;
  }
  c->id = ++ing->next_id;
  c->refs = 1;
  c->state = CONN_HANDSHAKE;
  c->created_ms = c->last_rx_ms = c->last_tx_ms = uv_now(ing->loop);
  /* Before HELLO frames are small (budget.c invariant 4); on_hello
   * raises the limit to max_frame. */
  gtp_frame_decoder_init(&c->dec, ing->cfg.max_frame < BUDGET_HELLO_FRAME_MAX
                                      ? ing->cfg.max_frame
                                      : BUDGET_HELLO_FRAME_MAX);
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  snprintf(c->peer, sizeof c->peer, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
    char ip[48];
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip,
               ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "%s:%u", ip,
               ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
  }
  c->next = ing->conns;
  if (ing->conns != NULL)
    ing->conns->prev = c;
  ing->conns = c;
  ing->nconns++;
  ing->handles_open++;
  CTR_SET(ing, connections, ing->nconns);
  CTR_ADD(ing, connections_total, 1);
  if (ing->tls != NULL)
    tls_conn_start(c, &tls_ops); /* may close c at once (out of memory) */
  conn_update_reading(c);
}

/* -------------------------------------------------------------- public API */

int ingest_new(uv_loop_t *loop, const ingest_config *cfg, ingest **out,
               char **cause) {
  ingest *ing = calloc(1, sizeof *ing);
  if (ing == NULL) {
    set_cause(cause, "out of memory");
    return -ENOMEM;
  }
  ing->loop = loop;
  ing->cfg = *cfg;
  if (ing->cfg.max_frame == 0 || ing->cfg.max_frame > GTP_FRAME_MAX)
    ing->cfg.max_frame = GTP_FRAME_MAX;
  if (cfg->token != NULL && cfg->token[0] != '\0') {
    ing->token = strdup(cfg->token);
    ing->token_len = strlen(cfg->token);
  }
  ing->rbuf = malloc(READ_BUF_SIZE);
  ing->sess = calloc(SESS_BUCKETS, sizeof(conn *));
  ing->iplim = iplimit_new();
  const char *bc = getenv("GENTRACED_BUDGET_CHECK");
  ing->budget_checks = bc != NULL && strcmp(bc, "1") == 0;
  if (ing->rbuf == NULL || ing->sess == NULL || ing->iplim == NULL ||
      (cfg->token != NULL && cfg->token[0] != '\0' && ing->token == NULL)) {
    free(ing->rbuf);
    free(ing->sess);
    iplimit_free(ing->iplim);
    free(ing->token);
    free(ing);
    set_cause(cause, "out of memory");
    return -ENOMEM;
  }
  ing->cfg.host = NULL;
  ing->cfg.token = NULL;
  ing->retry_tail = &ing->retry_head;
  ing->done_tail = &ing->done_head;
  pthread_mutex_init(&ing->done_lock, NULL);
  pthread_mutex_init(&ing->sess_lock, NULL);
  genbuf_start(ing);
  snprintf(ing->host, sizeof ing->host, "%s",
           cfg->host != NULL ? cfg->host : "127.0.0.1");

  uv_async_init(loop, &ing->async, on_async);
  ing->async.data = ing;
  uv_timer_init(loop, &ing->sweep);
  ing->sweep.data = ing;
  uv_timer_init(loop, &ing->retry_timer);
  ing->retry_timer.data = ing;
  ing->handles_open += 3;
  *out = ing;
  return 0;
}

void ingest_set_store(ingest *ing, storage *s) {
  ing->store = s;
}

int ingest_start(ingest *ing, uint16_t *port, char **cause) {
  struct sockaddr_storage ss;
  int rc;
  if (strchr(ing->host, ':') != NULL)
    rc = uv_ip6_addr(ing->host, ing->cfg.port, (struct sockaddr_in6 *)&ss);
  else
    rc = uv_ip4_addr(ing->host, ing->cfg.port, (struct sockaddr_in *)&ss);
  if (rc < 0) {
    set_cause(cause, "agent-listen: bad address %s (want a numeric IP)",
              ing->host);
    return GTP_E_BADARG;
  }
  uv_tcp_init(ing->loop, &ing->listener);
  ing->listener.data = ing;
  ing->listening = 1;
  ing->handles_open++;
  rc = uv_tcp_bind(&ing->listener, (struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&ing->listener, 1024, on_connection);
  if (rc < 0) {
    set_cause(cause, "agent-listen %s:%u: %s", ing->host, ing->cfg.port,
              uv_strerror(rc));
    return rc;
  }
  int sl = sizeof ss;
  uv_tcp_getsockname(&ing->listener, (struct sockaddr *)&ss, &sl);
  *port =
      ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
  /* The sweep resolves the timeouts to a quarter of the shortest one. */
  uint64_t tick = ing->cfg.handshake_timeout_ms < ing->cfg.idle_timeout_ms
                      ? ing->cfg.handshake_timeout_ms
                      : ing->cfg.idle_timeout_ms;
  tick /= 4;
  if (tick < 20)
    tick = 20;
  if (tick > 1000)
    tick = 1000;
  uv_timer_start(&ing->sweep, on_sweep, tick, tick);
  return 0;
}

static void drain_check(ingest *ing) {
  if (!ing->stopping || ing->stop_called)
    return;
  if ((ing->inflight > 0 || ing->retry_n > 0) && !ing->drain_gave_up)
    return;
  /* Everything submitted is committed and ACKed: say GOODBYE. */
  conn *next;
  for (conn *c = ing->conns; c != NULL; c = next) {
    next = c->next;
    if (c->state != CONN_CLOSING)
      ingest_conn_close(c, GTP_E_SHUTDOWN, 0, 0, "daemon shutting down");
  }
  if (ing->nconns > 0)
    return; /* on_closed calls back here */
  ing->stop_called = 1;
  if (ing->stop_cb != NULL)
    ing->stop_cb(ing->stop_arg);
}

void ingest_stop(ingest *ing, uint64_t drain_ms, void (*done)(void *arg),
                 void *arg) {
  if (ing->stopping)
    return;
  ing->stopping = 1;
  ing->stop_cb = done;
  ing->stop_arg = arg;
  ing->drain_deadline_ms = uv_now(ing->loop) + drain_ms;
  if (ing->listening && !uv_is_closing((uv_handle_t *)&ing->listener)) {
    uv_close((uv_handle_t *)&ing->listener, NULL);
    ing->handles_open--;
  }
  /* Stop reading and drop what is half received; what is complete is at
   * the store and gets ACKed before GOODBYE. */
  for (conn *c = ing->conns; c != NULL; c = c->next) {
    if (c->state == CONN_HANDSHAKE) {
      c->state = CONN_DRAINING;
    } else if (c->state == CONN_ACTIVE) {
      c->state = CONN_DRAINING;
      reasm_stage_abort(c); /* invariant 9 */
      while (c->gens != NULL) {
        opengen *g = c->gens;
        c->gens = g->next;
        reasm_free(c, g);
      }
      c->ngens = 0;
    }
    if (c->reading) {
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->reading = 0;
    }
  }
  log_info("draining", "connections=%" PRIu64 " inflight=%" PRIu64, ing->nconns,
           ing->inflight);
  drain_check(ing);
}

static void on_handle_closed(uv_handle_t *h) {
  (void)h;
}

void ingest_free(ingest *ing) {
  if (ing == NULL)
    return;
  for (conn *c = ing->conns; c != NULL; c = c->next)
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
      uv_close((uv_handle_t *)&c->tcp, on_closed);
  if (ing->listening && !uv_is_closing((uv_handle_t *)&ing->listener))
    uv_close((uv_handle_t *)&ing->listener, on_handle_closed);
  uv_close((uv_handle_t *)&ing->sweep, on_handle_closed);
  uv_close((uv_handle_t *)&ing->retry_timer, on_handle_closed);
  uv_close((uv_handle_t *)&ing->async, on_handle_closed);
  uv_run(ing->loop, UV_RUN_DEFAULT);
  /* Completions that came after a drain gave up waiting for them. Every
   * handle is closed now, so the conns only wait for these references. */
  pending *pd;
  while ((pd = ing->done_head) != NULL) {
    ing->done_head = pd->next;
    store_gen_free(pd->g);
    conn_unref(pd->c);
    free(pd);
  }
  while ((pd = retry_pop(ing)) != NULL) {
    store_gen_free(pd->g);
    conn_unref(pd->c);
    free(pd);
  }
  genbuf_stop(ing); /* after the loop: no genbuf call can race it */
  pthread_mutex_destroy(&ing->done_lock);
  pthread_mutex_destroy(&ing->sess_lock);
  free(ing->sess);
  iplimit_free(ing->iplim);
  free(ing->rbuf);
  free(ing->token);
  free(ing);
}

int ingest_connected(ingest *ing, const char *session_hex) {
  uint8_t s[16];
  if (session_hex == NULL || gtp_session_parse(session_hex, s) < 0)
    return 0;
  pthread_mutex_lock(&ing->sess_lock);
  int found = sess_find(ing, s) != NULL;
  pthread_mutex_unlock(&ing->sess_lock);
  return found;
}
