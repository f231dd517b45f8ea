/* ingest_read.c: the per-connection frame loop (ingest.c's design note):
 * the shared read buffer (invariant 7), a staged BATCH read in place
 * (invariant 9), the frame decoder and the dispatch of each frame to the
 * handshake (ingest_hello.c) or reassembly (reasm.c), and the pauses of
 * reading per connection and for the whole daemon (invariant 5).
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
#include "log.h"
#include "tls_conn.h"

static int conn_handle_frame(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  CTR_ADD(ing, frames, 1);
  if (c->state == CONN_HANDSHAKE) {
    if (f->type != GTP_FR_HELLO) {
      CTR_ADD(ing, protocol_errors, 1);
      ingest_conn_close(c, GTP_E_STATE, 0, 0, "first frame must be HELLO");
      return -1;
    }
    return ingest_hello(c, f);
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

void ingest_read_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  conn *c = h->data;
  ingest *ing = c->ing;
  if (c->stage != NULL && c->tls == NULL) {
    /* Exactly the staged frame's missing bytes, in place (invariant 9).
     * Over TLS the ciphertext goes to the shared buffer and GnuTLS
     * decrypts into the staged room (tls_conn_input). */
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
    if (c->hello_wait) {
      /* Bytes after HELLO before WELCOME: an agent waits for WELCOME
       * (PROTOCOL.md 5), and the frames cannot be taken before the HELLO
       * is decided (ingest_hello.c). */
      CTR_ADD(ing, protocol_errors, 1);
      ingest_conn_close(c, GTP_E_STATE, 0, 0, "frame before WELCOME");
      break;
    }
    gtp_frame f;
    size_t used = 0;
    if (gtp_frame_decoder_buffered(&c->dec) == 0 && c->dec.err == 0 &&
        reasm_stage_begin(c, p, n)) {
      /* The rest of this frame is read in place (invariant 9). Feeding
       * nothing releases the decoder's last returned frame. */
      (void)gtp_frame_decoder_feed(&c->dec, NULL, 0, &used, &f);
      break;
    }
    int rc = gtp_frame_decoder_feed(&c->dec, p, n, &used, &f);
    ingest_conn_account_decoder(c);
    if (rc == -ENOMEM) {
      /* No room for a partial frame: not the agent's fault (no protocol
       * error); it reconnects and resends. */
      ingest_conn_nomem(c, "frame buffer");
      break;
    }
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

void ingest_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
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
  loopcoal_note_read(&ing->coal, (size_t)nread); /* a bulk sender? */
  c->refs++; /* keep c across ingest_conn_close inside the loop */
  if (staged) {
    (void)reasm_stage_read(c, (size_t)nread);
    if (c->state != CONN_CLOSING) {
      ingest_conn_update_reading(c);
      ingest_update_pause(ing);
    }
    ingest_conn_unref(c);
    return;
  }
  if (c->tls != NULL)
    tls_conn_input(c, (const uint8_t *)buf->base, (size_t)nread);
  else
    ingest_conn_input(c, (const uint8_t *)buf->base, (size_t)nread);
  if (c->state != CONN_CLOSING) {
    ingest_conn_account_decoder(c);
    ingest_conn_update_reading(c);
    ingest_update_pause(ing);
  }
  ingest_conn_unref(c);
}

/* Starts or stops reading on c according to the limits (invariant 5). */
void ingest_conn_update_reading(conn *c) {
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
             !c->self_paused && !ing->global_paused && !c->hello_wait;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, ingest_read_alloc,
                      ingest_read_cb) == 0)
      c->reading = 1;
    /* Time spent paused by us is not the agent's idleness. */
    c->last_rx_ms = uv_now(ing->loop);
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

/* Global pause: total buffered bytes over max-buffer, or the disk full. */
void ingest_update_pause(ingest *ing) {
  int want;
  /* Idle pooled buffers give way to bytes held for agents (invariant 8). */
  genpool_trim(&ing->pool, budget_used(ing));
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
    ingest_conn_update_reading(c);
}
