/* sender.h: the agent's connection to gentraced (proto/PROTOCOL.md).
 *
 * States (gt__sender.state) and the function that moves between them, all
 * driven from the agent thread by gt__sender_poll/gt__sender_step:
 *
 *   BACKOFF --(timer)--> CONNECTING --(connected)--> HELLO_SENT
 *   HELLO_SENT --(WELCOME)--> STREAMING
 *   any --(error, timeout, GOODBYE, EOF)--> BACKOFF (next address first;
 *          after the whole list failed, exponential backoff with jitter)
 *
 * Invariants:
 *  1. The socket MUST be non-blocking and every send MUST use MSG_NOSIGNAL,
 *     otherwise a dead daemon could block the agent thread or kill the host
 *     with SIGPIPE.
 *  2. On leaving STREAMING every SENT generation MUST go back to QUEUED
 *     (gt__spool_requeue), otherwise a generation lost with the connection
 *     would never be resent nor counted.
 *  3. Frames read are bounded by GTP_FRAME_MAX before any buffering (the
 *     frame decoder's invariant 1).
 *  4. Records sent without a copy (zc) point into the body of `cur`, which
 *     stays pinned until every byte of them went out: the next frame is
 *     built, and `cur` released at GEN_END, only once out and zc are both
 *     empty; otherwise the kernel could read a freed body.
 *
 * Thread: agent thread only (the struct is not shared).
 */
#ifndef GT_SENDER_H
#define GT_SENDER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "spool.h"

enum {
  GT_SEND_BACKOFF = 0,
  GT_SEND_CONNECTING = 1,
  GT_SEND_HELLO_SENT = 2,
  GT_SEND_STREAMING = 3,
};

#define GT_ADDRS_MAX 8

typedef struct gt__ident {
  uint8_t session[16];
  /* Proves ownership of the session to the daemon (HELLO, protocol v2):
   * random, drawn with the session id, never logged. */
  uint8_t session_key[GTP_SESSION_KEY_SIZE];
  char *service, *host, *token;
  uint64_t pid, start_ns;
  uint32_t ntags;
  gtp_tag tags[GTP_TAGS_MAX];
  char *tags_buf; /* owns the bytes the tags point into */
} gt__ident;

typedef void (*gt__logf)(int level, const char *fmt, ...);

/* Exponential backoff with jitter: returns the delay before the next attempt
 * (uniform in [cur/2, cur]) and doubles cur up to max. rng is a xorshift
 * state (non-zero). */
uint64_t gt__backoff_next(uint64_t *cur_ms, uint64_t max_ms, uint64_t *rng);

typedef struct gt__sender {
  /* Written once by init. */
  char *hosts[GT_ADDRS_MAX], *ports[GT_ADDRS_MAX];
  size_t naddrs;
  const gt__ident *id;
  gt__spool *sp;
  gt__logf log;
  /* Agent thread only. */
  int state;
  int fd;
  size_t addr_idx;
  uint64_t backoff_ms, rng;
  uint64_t deadline_ms; /* connect/handshake deadline, or next attempt */
  uint64_t last_tx_ms, last_rx_ms;
  uint64_t hb_ms, idle_ms; /* from WELCOME */
  gtp_wbuf out;
  size_t out_off;
  gtp_frame_decoder dec;
  gt__gen *cur;   /* generation being transmitted (pinned) */
  size_t cur_off; /* next body byte to frame */
  int more;       /* do_write stopped at its budget with frames to send */
  /* A BATCH frame's records sent from the pinned body of `cur` itself
   * (plain TCP): out holds the frame's head, these the records, and
   * do_write hands both to one sendmsg. zc_off == zc_len: none. */
  const uint8_t *zc;
  size_t zc_len, zc_off;
  /* Statistics (read by gt_stats under no lock: relaxed snapshots). */
  uint64_t bytes_sent, connects;
  uint64_t auth_refused; /* ERROR(AUTH) answers to HELLO */
  /* TLS (agent/tls.c): set by gt_start after init when GENTRACE_TLS_* are
   * given (owned by the agent); tc is the session of the connection; the
   * handshake runs in CONNECTING, after the TCP connect. */
  struct gt__tls *tls;
  struct gt__tls_conn *tc;
  uint64_t tls_failures; /* handshakes failed (untrusted daemon, refused) */
} gt__sender;

int gt__sender_init(gt__sender *s, const char *addrs, const gt__ident *id,
                    gt__spool *sp, gt__logf log);
void gt__sender_fini(gt__sender *s);
/* Fills pfd (fd -1 when none) and returns the poll timeout in ms. */
int gt__sender_poll(gt__sender *s, uint64_t now_ms, struct pollfd *pfd);
/* Does whatever is due: I/O for revents, timers, queued generations. */
void gt__sender_step(gt__sender *s, uint64_t now_ms, short revents);
/* Sends GOODBYE if streaming and closes (best effort, non-blocking). */
void gt__sender_close(gt__sender *s);
/* 1 when the out buffer is empty (everything handed to the kernel). */
int gt__sender_drained(const gt__sender *s);

#endif
