/* ingest_conn.c: one agent connection's primitives, below everything else
 * of the ingest (ingest.c's design note and invariants): its byte
 * accounts, the session table, replies (ACK, ERROR, GOODBYE and the raw
 * writes under TLS), and its end (ingest_conn_close, the last unref, the
 * drain check that ends a stop).
 *
 * Calls go down only: the frame loop (ingest_read.c), the handshake
 * (ingest_hello.c), the completions (ingest_commit.c), reassembly, the
 * budget and session_auth.c call this file; it calls none of them. The
 * read callbacks a closing connection discards its input with are the
 * frame loop's, handed over as ing->read_alloc and ing->read_cb.
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
#include "ingest_int.h"
#include "iplimit.h"
#include "log.h"
#include "tls_conn.h"
#include "varint.h"

/* ------------------------------------------------------- buffer accounting */

/* A generation left the store queue (committed, failed or dropped): what
 * was counted for it (pd->held: its buffer) stops
 * counting. */
void ingest_conn_dequeue(conn *c, const pending *pd) {
  c->inflight--;
  budget_dequeue(c, pd->held);
}

/* Re-reads the decoder's partial-frame size into the accounts. */
void ingest_conn_account_decoder(conn *c) {
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
conn *ingest_sess_find(ingest *ing, const uint8_t s[16]) {
  for (conn *c = ing->sess[sess_hash(s)]; c != NULL; c = c->sess_next)
    if (memcmp(c->session, s, 16) == 0)
      return c;
  return NULL;
}

void ingest_sess_insert(conn *c) {
  ingest *ing = c->ing;
  pthread_mutex_lock(&ing->sess_lock);
  conn **head = &ing->sess[sess_hash(c->session)];
  c->sess_next = *head;
  *head = c;
  c->in_session_map = 1;
  pthread_mutex_unlock(&ing->sess_lock);
  /* Shared store: other daemons' /v1/agents learn it within a tick. */
  if (ing->store != NULL)
    storage_session_live(ing->store, c->session, 1);
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
  if (ing->store != NULL)
    storage_session_live(ing->store, c->session, 0);
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
void ingest_conn_send(conn *c, const gtp_wbuf *b) {
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
  if (c->write_failed)
    return; /* the stream may end inside a frame: nothing more is sent */
  /* Most replies (an ACK is 11 bytes) fit the socket at once: written
   * directly they cost one write(2), where a queued uv_write also costs an
   * allocation, a completion callback on the next loop pass and an
   * epoll_ctl to stop watching for POLLOUT (fleet profile: 0.3 epoll_ctl
   * per generation). uv_try_write refuses (EAGAIN) while earlier replies
   * are queued, so the order of replies is kept. */
  int tw =
      c->ing->queue_replies
          ? UV_EAGAIN
          : uv_try_write((uv_stream_t *)&c->tcp,
                         (uv_buf_t[]){uv_buf_init((char *)p, (unsigned)n)}, 1);
  if (tw >= 0 && (size_t)tw == n) {
    c->last_tx_ms = uv_now(c->ing->loop);
    return;
  }
  if (tw < 0 && tw != UV_EAGAIN) {
    if (c->state != CONN_CLOSING)
      ingest_conn_close(c, 0, 0, 0, NULL);
    return;
  }
  if (tw > 0) {
    p = (const uint8_t *)p + tw;
    n -= (size_t)tw;
  }
  wreq *w = malloc(sizeof *w + n);
  if (w == NULL) {
    /* The reply cannot be queued, and a part of it may be on the wire
     * already: the peer cannot be told any more, so nothing else is
     * written (not even the ERROR) and the connection ends. */
    c->write_failed = 1;
    if (c->state != CONN_CLOSING)
      ingest_conn_nomem(c, "reply queue");
    else
      CTR_ADD(c->ing, oom, 1);
    return;
  }
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

void ingest_send_ack(conn *c, uint64_t gen) {
  uint8_t mem[32];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_ack_encode(&b, gen);
  ingest_conn_send(c, &b);
}

void ingest_send_error(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  char r[GTP_REASON_MAX];
  snprintf(r, sizeof r, "%s", reason != NULL ? reason : gtp_strerror(code));
  gtp_frame_error_encode(&b, code, has_gen, gen, r);
  ingest_conn_send(c, &b);
}

void ingest_conn_nomem(conn *c, const char *what) {
  CTR_ADD(c->ing, oom, 1);
  log_warn("out of memory", "conn=%" PRIu64 " peer=%s what=%s", c->id, c->peer,
           what);
  char r[96];
  snprintf(r, sizeof r, "daemon out of memory (%s); reconnect and resend",
           what);
  /* No generation in the ERROR: one with a generation would make the agent
   * drop it (final), one without makes it resend everything unACKed. */
  ingest_conn_close(c, -ENOMEM, 0, 0, r);
}

void ingest_refuse_gen(conn *c, uint64_t gen, uint64_t events, int code,
                       const char *why) {
  ingest *ing = c->ing;
  CTR_ADD(ing, rejected, 1);
  CTR_ADD(ing, rejected_events, events);
  storage_note_rejected(ing->store, c->session, events);
  log_warn("generation rejected",
           "conn=%" PRIu64 " session=%s gen=%" PRIu64 " error=%s", c->id,
           c->session_hex, gen, gtp_errname(code));
  if (c->state == CONN_ACTIVE || c->state == CONN_DRAINING)
    ingest_send_error(c, code, 1, gen, why);
}

static void send_goodbye(conn *c, int code, const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_goodbye_encode(&b, code, reason);
  ingest_conn_send(c, &b);
}

/* --------------------------------------------------------------- lifecycle */

void ingest_conn_free_gen(conn *c, opengen *g) {
  budget_gen_drop(c, g);
  genpool_release(&c->ing->pool, budget_used(c->ing), !c->ing->global_paused,
                  g->buf.data, g->buf.cap);
  g->buf.data = NULL;
  free(g);
}

void ingest_conn_drop_gens(conn *c) {
  /* Invariant 9: a staged frame is forgotten before its generation goes,
   * or the next read would land in a freed buffer. */
  c->stage = NULL;
  c->stage_have = c->stage_len = 0;
  while (c->gens != NULL) {
    opengen *g = c->gens;
    c->gens = g->next;
    ingest_conn_free_gen(c, g);
  }
  c->ngens = 0;
}

void ingest_conn_free_identity(conn *c) {
  free(c->service);
  free(c->host);
  free(c->agent_version);
  free(c->tags_json);
  free(c->gs_ident);
  c->service = c->host = c->agent_version = c->tags_json = NULL;
  c->gs_ident = NULL;
  c->gs_ident_len = 0;
}

void ingest_conn_unref(conn *c) {
  if (--c->refs > 0)
    return;
  budget_ident_drop(c);
  ingest_conn_free_identity(c);
  free(c);
}

void ingest_conn_closed(uv_handle_t *h) {
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
  ingest_conn_unref(c);
  ingest_drain_check(ing);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  free(req);
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, ingest_conn_closed);
}

/* Ends a connection: drops what it was assembling (invariant 2), sends
 * ERROR (code < 0) or GOODBYE (code 0 with a reason) first, then closes
 * once the write queue flushed or CLOSE_GRACE_MS passed (sweep). */
void ingest_conn_close(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  if (c->state == CONN_CLOSING)
    return;
  ingest *ing = c->ing;
  /* Token refusals are logged by ingest_hello, rate-limited: one line per
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
  ingest_conn_drop_gens(c); /* invariants 2 and 9 */
  gtp_frame_decoder_fini(&c->dec);
  ingest_conn_account_decoder(c);
  /* Keep reading (and discarding) until the handle closes: closing a socket
   * with unread input sends RST, which can destroy the ERROR we just queued
   * before the peer reads it. CLOSE_GRACE_MS bounds how long. */
  if (!c->reading &&
      uv_read_start((uv_stream_t *)&c->tcp, ing->read_alloc, ing->read_cb) == 0)
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
  uv_close((uv_handle_t *)&c->tcp, ingest_conn_closed);
}

/* ------------------------------------------------------------------- drain */

void ingest_drain_check(ingest *ing) {
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
  if (ing->nconns > 0 || ing->lookups > 0)
    return; /* ingest_conn_closed and the lookups call back here */
  ing->stop_called = 1;
  if (ing->stop_cb != NULL)
    ing->stop_cb(ing->stop_arg);
}
