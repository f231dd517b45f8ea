/* ingest.c: the agent side of gentraced (libuv).
 *
 * Owns: the listening socket, every agent connection (struct conn), the
 * generations being reassembled on them (struct opengen), the list of
 * completions coming back from the store thread, the list of generations to
 * resubmit after a disk-full stop, and the counters behind /metrics.
 *
 * Connection states (conn.state) and who moves them:
 *
 *   HANDSHAKE --HELLO ok (ingest_hello)--> ACTIVE
 *   HANDSHAKE/ACTIVE --error, timeout, GOODBYE, EOF, replaced
 *       (ingest_conn_close)--> CLOSING --shutdown flushed, or
 *       CLOSE_GRACE_MS (on_shutdown / on_sweep)--> uv_close --ingest_conn_closed-->
 *       freed when refs drops to 0
 *   HANDSHAKE/ACTIVE --ingest_stop--> DRAINING --all committed and ACKed
 *       (ingest_drain_check)--> GOODBYE(SHUTDOWN) + ingest_conn_close
 *
 * In CLOSING the socket is still read, and the input discarded, until the
 * handle closes: closing with unread input sends RST, which can destroy the
 * ERROR frame the peer has not read yet.
 *
 * Files: this one holds the public API, accepting and the sweep (timeouts,
 * heartbeats, the drain deadline); ingest_conn.c a connection's
 * primitives (accounts, session table, replies, close), which every other
 * file calls and which calls none of them; ingest_read.c the frame loop
 * and the read pauses; ingest_hello.c the handshake; ingest_commit.c the
 * completions from the store and the disk-full retries. reasm.c holds
 * reassembly and validation (BATCH, GEN_END), genpool.c the generation
 * buffers (the pool, the filler thread: invariants 8 and 10),
 * ingest_metrics.c the /metrics text; ingest_int.h their shared state.
 *
 * Invariants:
 *  1. Only the loop thread MUST touch conns, opengens and the retry list;
 *     the store thread only pushes to `done` (donelist.c, which wakes the
 *     loop once per batch), otherwise connection state races with
 *     commits.
 *  2. A generation MUST reach the store only whole and validated (manifest
 *     and gtp_gen_verify_known, gtp_gen_parse's checks; on SQLite those of
 *     gtp_gen_parse_lazy, with the events checked by the store before it
 *     writes anything: check_events); an
 *     opengen dies with its connection, otherwise a dropped connection
 *     could leave half a generation stored.
 *  3. ACK(gen) MUST be sent only from the completion of that generation's
 *     commit (result 0 or 1), otherwise an agent could drop a generation
 *     that a crash then loses.
 *  4. A conn MUST stay allocated while a store_gen points at it (cookie):
 *     every submitted generation holds a reference (refs) and the conn is
 *     freed only when refs reaches 0 after its handle closed, otherwise a
 *     completion would write to freed memory. The same reference keeps the
 *     conn's identity strings alive and unchanged for the store_gens that
 *     borrow them (store.h ident_borrowed): every store_gen is freed
 *     before its reference is dropped.
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
 *  8. Generations are assembled in buffers of the pool (genpool.c), and
 *     buffers the store is done with (and those of refused or dropped
 *     generations) go back to it. Its bytes (ing.pool.bytes: idle buffers
 *     and those the filler prepares, not part of buffered: they hold
 *     nothing for agents) MUST keep budget_used() + pool bytes <=
 *     max-buffer (budget.c): every genpool call gets budget_used(), a
 *     buffer is kept only while not paused, and ingest_update_pause trims
 *     the pool before deciding to pause while the sum is over, otherwise
 *     the pool would add to the memory the limit bounds or hold agents
 *     back. A buffer MUST go back only after the store handed its
 *     generation back (done callback), otherwise the store would read a
 *     buffer being refilled (genpool.c invariant 5).
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
 *     ingest_conn_drop_gens, which forgets it before it frees the
 *     generations, otherwise a read would write into a freed buffer.
 * 10. When the pool has no buffer for a new generation (the store is
 *     behind, or at the start), its filler thread prepares the next ones
 *     off the loop, which then only copies (genpool.c invariants 1-4).
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
#include <sys/ioctl.h>

#include "budget.h"
#include "frame.h"
#include "gtp_error.h"
#include "iplimit.h"
#include "log.h"
#include "tls_conn.h"
#include "varint.h"

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
  cfg->loop_coalesce_ns = 2000000;
}

/* The project's one cause helper (proto/text.h); callers here ignore the
 * code. */
#define set_cause(cause, ...) ((void)gtp_causef((cause), 0, __VA_ARGS__))

/* ------------------------------------------------------------------- sweep */

/* Whether the kernel holds bytes from c the loop has not read yet. Timers
 * run before the loop polls, so after a stall of the daemon itself (a
 * loaded machine) an agent's heartbeat may be waiting there: that agent
 * was not idle. */
static int has_unread(conn *c) {
  uv_os_fd_t fd;
  int n = 0;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
      ioctl(fd, FIONREAD, &n) != 0)
    return 0;
  return n > 0;
}

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
      if (now - c->last_rx_ms >= ing->cfg.idle_timeout_ms && has_unread(c))
        c->last_rx_ms = now;
      if (now - c->last_rx_ms >= ing->cfg.idle_timeout_ms) {
        CTR_ADD(ing, limit_hits[LIM_IDLE_TIMEOUT], 1);
        log_info("idle timeout", "conn=%" PRIu64 " session=%s", c->id,
                 c->session_hex);
        ingest_conn_close(c, GTP_E_TIMEOUT, 0, 0, "idle timeout");
      } else if (hb > 0 && now - c->last_tx_ms >= hb) {
        uint8_t mem[8];
        gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
        gtp_frame_heartbeat_encode(&b);
        ingest_conn_send(c, &b);
        CTR_ADD(ing, heartbeats_sent, 1);
      }
      break;
    case CONN_DRAINING:
      break;
    case CONN_CLOSING:
      if (now - c->closing_ms >= CLOSE_GRACE_MS &&
          !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, ingest_conn_closed);
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
    while ((pd = ingest_retry_pop(ing)) != NULL) {
      conn *c = pd->c;
      ingest_conn_dequeue(c, pd);
      ingest_pending_free(ing, pd);
      ingest_conn_unref(c);
    }
    ing->drain_gave_up = 1;
    ingest_drain_check(ing);
  }
}

/* ------------------------------------------------------------------ accept */

/* What tls_conn.c calls back (tls_conn.h). */
static const tls_conn_ops tls_ops = {ingest_conn_input, ingest_conn_write_raw,
                                     ingest_conn_close, reasm_stage_read};

static void free_refused(uv_handle_t *h) {
  free(h->data);
}

static void on_connection(uv_stream_t *server, int status);

/* The nomem handle closed: a connection that came meanwhile waits in libuv,
 * which stops watching the listener until one is accepted; take it now. */
static void nomem_closed(uv_handle_t *h) {
  ingest *ing = h->data;
  ing->nomem_busy = 0;
  if (ing->nomem_waiting && ing->listening && !ing->stopping &&
      !uv_is_closing((uv_handle_t *)&ing->listener)) {
    ing->nomem_waiting = 0;
    on_connection((uv_stream_t *)&ing->listener, 0);
  }
}

/* No memory for a new connection's state: accept it into the one handle
 * the ingest keeps for this, tell the agent (ERROR ENOMEM, best effort, it
 * reconnects with backoff) and close it. Not accepting at all would stop
 * libuv accepting anything. While that handle is busy the connection waits
 * in libuv and nomem_closed takes it. */
static void refuse_nomem(ingest *ing) {
  CTR_ADD(ing, oom, 1);
  log_warn("out of memory", "what=connection");
  if (ing->nomem_busy) {
    ing->nomem_waiting = 1;
    return;
  }
  if (uv_tcp_init(ing->loop, &ing->nomem_tcp) != 0)
    return;
  ing->nomem_busy = 1;
  ing->nomem_tcp.data = ing;
  if (uv_accept((uv_stream_t *)&ing->listener,
                (uv_stream_t *)&ing->nomem_tcp) == 0) {
    uint8_t mem[128];
    gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
    gtp_frame_error_encode(&b, -ENOMEM, 0, 0,
                           "daemon out of memory (connection); retry");
    uv_buf_t ub = uv_buf_init((char *)b.data, (unsigned)b.len);
    uv_try_write((uv_stream_t *)&ing->nomem_tcp, &ub, 1);
  }
  uv_close((uv_handle_t *)&ing->nomem_tcp, nomem_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  ingest *ing = server->data;
  if (status < 0) {
    log_warn("accept failed", "error=%s", uv_err_name(status));
    return;
  }
  conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    refuse_nomem(ing);
    return;
  }
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
  /* Before HELLO frames are small (budget.c invariant 4); ingest_hello
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
  ingest_conn_update_reading(c);
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
  const char *qr = getenv("GENTRACED_TEST_QUEUE_REPLIES");
  ing->queue_replies = qr != NULL && strcmp(qr, "1") == 0;
  int dl_rc = donelist_init(&ing->done);
  if (ing->rbuf == NULL || ing->sess == NULL || ing->iplim == NULL ||
      (cfg->token != NULL && cfg->token[0] != '\0' && ing->token == NULL) ||
      dl_rc < 0) {
    if (dl_rc == 0)
      donelist_fini(&ing->done);
    free(ing->rbuf);
    free(ing->sess);
    iplimit_free(ing->iplim);
    free(ing->token);
    free(ing);
    if (dl_rc < 0) {
      set_cause(cause, "eventfd for the store's completions: %s",
                strerror(-dl_rc));
      return dl_rc;
    }
    set_cause(cause, "out of memory");
    return -ENOMEM;
  }
  ing->cfg.host = NULL;
  ing->cfg.token = NULL;
  ing->retry_tail = &ing->retry_head;
  pthread_mutex_init(&ing->sess_lock, NULL);
  genpool_init(&ing->pool, ing->cfg.max_buffer);
  snprintf(ing->host, sizeof ing->host, "%s",
           cfg->host != NULL ? cfg->host : "127.0.0.1");

  /* The frame loop's read callbacks, for ingest_conn_close (ingest_conn.c
   * calls nothing above it). */
  ing->read_alloc = ingest_read_alloc;
  ing->read_cb = ingest_read_cb;
  ing->update_reading = ingest_conn_update_reading;
  ing->update_pause = ingest_update_pause;
  /* The store's completions (donelist.c: an eventfd, no uv_async_t spin). */
  uv_poll_init(loop, &ing->done_poll, donelist_fd(&ing->done));
  ing->done_poll.data = ing;
  uv_poll_start(&ing->done_poll, UV_READABLE, ingest_commit_poll);
  uv_timer_init(loop, &ing->sweep);
  ing->sweep.data = ing;
  uv_timer_init(loop, &ing->retry_timer);
  ing->retry_timer.data = ing;
  ing->handles_open += 3;
  loopcoal_init(&ing->coal, loop, ing->cfg.loop_coalesce_ns);
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
      ingest_conn_drop_gens(c); /* invariants 2 and 9 */
    }
    if (c->reading) {
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->reading = 0;
    }
  }
  log_info("draining", "connections=%" PRIu64 " inflight=%" PRIu64, ing->nconns,
           ing->inflight);
  ingest_drain_check(ing);
}

static void on_handle_closed(uv_handle_t *h) {
  (void)h;
}

void ingest_free(ingest *ing) {
  if (ing == NULL)
    return;
  for (conn *c = ing->conns; c != NULL; c = c->next)
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
      uv_close((uv_handle_t *)&c->tcp, ingest_conn_closed);
  if (ing->listening && !uv_is_closing((uv_handle_t *)&ing->listener))
    uv_close((uv_handle_t *)&ing->listener, on_handle_closed);
  uv_close((uv_handle_t *)&ing->sweep, on_handle_closed);
  uv_close((uv_handle_t *)&ing->retry_timer, on_handle_closed);
  uv_close((uv_handle_t *)&ing->done_poll, on_handle_closed);
  loopcoal_close(&ing->coal, on_handle_closed);
  uv_run(ing->loop, UV_RUN_DEFAULT);
  /* Completions that came after a drain gave up waiting for them. Every
   * handle is closed now, so the conns only wait for these references. */
  pending *pd;
  for (donelist_node *n = donelist_take(&ing->done), *next; n != NULL;
       n = next) {
    next = n->next;
    pd = ingest_done_pending(n);
    conn *c = pd->c;
    ingest_pending_free(ing, pd);
    ingest_conn_unref(c);
  }
  while ((pd = ingest_retry_pop(ing)) != NULL) {
    conn *c = pd->c;
    ingest_pending_free(ing, pd);
    ingest_conn_unref(c);
  }
  ingest_pending_fini(ing);
  genpool_fini(&ing->pool); /* after the loop: no genpool call races it */
  donelist_fini(&ing->done);
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
  int found = ingest_sess_find(ing, s) != NULL;
  pthread_mutex_unlock(&ing->sess_lock);
  return found;
}
