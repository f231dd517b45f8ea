/* bare_server: the floor for gentraced's socket work, for bench_fleet.
 *
 * A libuv server that speaks just enough of the agent protocol
 * (proto/PROTOCOL.md) for an agent to stream to it: WELCOME for a HELLO,
 * ACK(gen) for a GEN_END, every other frame read and thrown away. No
 * reassembly, no validation, no storage. Run under the same fleet load as
 * gentraced, its CPU per generation is what the reads and writes alone
 * cost on this machine, so bench_fleet can report gentraced's figure as a
 * ratio to it.
 *
 *   bare_server [port]   listens on 127.0.0.1 (port 0 = any) and prints
 *                        "listening port=N" on stdout once it accepts
 *
 * Like the daemon (invariant 7 of daemon/ingest.c) it reads every
 * connection through one shared buffer and keeps a frame decoder per
 * connection, so it holds no per-connection read buffer either; replies are
 * written with uv_try_write and queued with uv_write only when the socket is
 * full. Stops on SIGTERM/SIGINT.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "frame.h"

#define BARE_READ_BUF (256u << 10)

typedef struct bconn {
  uv_tcp_t tcp;
  gtp_frame_decoder dec;
  int welcomed;
} bconn;

typedef struct bwreq {
  uv_write_t req;
  uint8_t data[64];
} bwreq;

static uint8_t rbuf[BARE_READ_BUF];
static int rbuf_busy;

static void on_closed(uv_handle_t *h) {
  bconn *c = h->data;
  gtp_frame_decoder_fini(&c->dec);
  free(c);
}

static void on_write(uv_write_t *req, int status) {
  (void)status;
  free(req);
}

/* Writes a small reply now, or queues it if the socket is full. */
static void reply(bconn *c, const gtp_wbuf *b) {
  uv_buf_t ub = uv_buf_init((char *)b->data, (unsigned)b->len);
  int n = uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
  if (n == (int)b->len)
    return;
  if (n < 0)
    n = 0;
  bwreq *w = malloc(sizeof *w);
  if (w == NULL || b->len - (size_t)n > sizeof w->data) {
    free(w);
    return;
  }
  memcpy(w->data, b->data + n, b->len - (size_t)n);
  ub = uv_buf_init((char *)w->data, (unsigned)(b->len - (size_t)n));
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write) < 0)
    free(w);
}

static void on_frame(bconn *c, const gtp_frame *f) {
  uint8_t mem[64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  if (f->type == GTP_FR_HELLO && !c->welcomed) {
    gtp_welcome w = {0};
    w.version = GTP_PROTO_VERSION;
    w.idle_timeout_ms = 60000;
    w.max_gen_bytes = 64ull << 20;
    gtp_frame_welcome_encode(&b, &w);
    c->welcomed = 1;
    reply(c, &b);
  } else if (f->type == GTP_FR_GEN_END) {
    gtp_gen_end e;
    if (gtp_frame_gen_end_decode(f->payload, f->len, &e) == 0) {
      gtp_frame_ack_encode(&b, e.gen);
      reply(c, &b);
    }
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)h;
  (void)hint;
  if (rbuf_busy) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  rbuf_busy = 1;
  *buf = uv_buf_init((char *)rbuf, sizeof rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  bconn *c = s->data;
  if (buf->base == (char *)rbuf)
    rbuf_busy = 0;
  if (nread == 0 || nread == UV_ENOBUFS)
    return;
  if (nread < 0) {
    if (!uv_is_closing((uv_handle_t *)s))
      uv_close((uv_handle_t *)s, on_closed);
    return;
  }
  const uint8_t *p = (const uint8_t *)buf->base;
  size_t n = (size_t)nread;
  while (n > 0) {
    size_t used = 0;
    gtp_frame f;
    int rc = gtp_frame_decoder_feed(&c->dec, p, n, &used, &f);
    if (rc < 0) {
      uv_close((uv_handle_t *)s, on_closed);
      return;
    }
    p += used;
    n -= used;
    if (rc == 1)
      on_frame(c, &f);
  }
}

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0)
    return;
  bconn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return;
  uv_tcp_init(server->loop, &c->tcp);
  c->tcp.data = c;
  gtp_frame_decoder_init(&c->dec, GTP_FRAME_MAX);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (uv_is_closing(h))
    return;
  /* Connections carry their bconn in data; the others (listener, signal
   * watchers) live on main's stack. */
  uv_close(h, h->type == UV_TCP && h->data != NULL ? on_closed : NULL);
}

static void on_signal(uv_signal_t *h, int sig) {
  (void)sig;
  uv_stop(h->loop);
}

int main(int argc, char **argv) {
  uv_loop_t *loop = uv_default_loop();
  uv_tcp_t srv;
  struct sockaddr_in sa;
  int port = argc > 1 ? atoi(argv[1]) : 0;
  signal(SIGPIPE, SIG_IGN);
  uv_ip4_addr("127.0.0.1", port, &sa);
  uv_tcp_init(loop, &srv);
  srv.data = NULL; /* not a connection (close_any) */
  int rc = uv_tcp_bind(&srv, (const struct sockaddr *)&sa, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&srv, 1024, on_connection);
  if (rc < 0) {
    fprintf(stderr, "bare_server: listen: %s\n", uv_strerror(rc));
    return 1;
  }
  int sl = sizeof sa;
  uv_tcp_getsockname(&srv, (struct sockaddr *)&sa, &sl);
  uv_signal_t st, si;
  uv_signal_init(loop, &st);
  uv_signal_start(&st, on_signal, SIGTERM);
  uv_signal_init(loop, &si);
  uv_signal_start(&si, on_signal, SIGINT);
  printf("listening port=%u\n", ntohs(sa.sin_port));
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  /* Close every handle (connections free themselves in on_closed), so a
   * leak checker sees nothing left. */
  uv_walk(loop, close_any, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  return 0;
}
