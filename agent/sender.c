/* sender.c: see sender.h for the states and invariants. */
#include "config.h"

#include "sender.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "gentrace.h"
#include "text.h"
#include "tls.h"

#define CONNECT_TIMEOUT_MS 3000
#define HANDSHAKE_TIMEOUT_MS 5000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
/* Frames are filled up to this many payload bytes, well under
 * GTP_FRAME_MAX, so the out buffer stays small. */
#define FRAME_TARGET (256u << 10)
/* Bytes handed to the kernel per do_write call at most. The agent thread
 * seals and sends in one loop: when the daemon reads as fast as we write
 * (a spool backlog draining), an unbounded do_write kept sending for tens
 * of milliseconds while the emitting threads' cut request waited and the
 * buffer pool ran dry (B1, one agent past 20 M events/s). With the budget
 * the loop comes back to the cut request every ~1 MiB (~1 ms). */
#define SEND_BUDGET (1u << 20)

uint64_t gt__backoff_next(uint64_t *cur_ms, uint64_t max_ms, uint64_t *rng) {
  uint64_t x = *rng ? *rng : 0x9E3779B97F4A7C15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *rng = x;
  uint64_t cur = *cur_ms ? *cur_ms : 1;
  uint64_t half = cur / 2;
  uint64_t d = half + (half ? x % (cur - half + 1) : 0);
  *cur_ms = cur * 2 > max_ms ? max_ms : cur * 2;
  return d;
}

int gt__sender_init(gt__sender *s, const char *addrs, const gt__ident *id,
                    gt__spool *sp, gt__logf log) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  s->id = id;
  s->sp = sp;
  s->log = log;
  const char *p = addrs;
  while (*p && s->naddrs < GT_ADDRS_MAX) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    /* host:port, host may be [v6]: the project's one parser (text.h). */
    gtp_hostport hp;
    char port[8];
    if (gtp_hostport_parse(p, n, &hp) < 0 || hp.host_len == 0)
      goto bad;
    snprintf(port, sizeof port, "%u", (unsigned)hp.port);
    s->hosts[s->naddrs] = strndup(hp.host, hp.host_len);
    s->ports[s->naddrs] = strdup(port);
    if (!s->hosts[s->naddrs] || !s->ports[s->naddrs]) {
      s->naddrs++;
      gt__sender_fini(s);
      return -ENOMEM;
    }
    s->naddrs++;
    p += n;
    if (*p == ',')
      p++;
  }
  if (s->naddrs == 0)
    goto bad;
  s->rng = id->pid * 0x9E3779B97F4A7C15ull ^ (uint64_t)id->session[0] << 8 ^
           id->start_ns;
  s->backoff_ms = BACKOFF_MIN_MS;
  s->state = GT_SEND_BACKOFF;
  s->deadline_ms = 0; /* first attempt at once */
  gtp_wbuf_init(&s->out, 0);
  gtp_frame_decoder_init(&s->dec, GTP_FRAME_MAX);
  return 0;
bad:
  gt__sender_fini(s);
  return -EINVAL;
}

void gt__sender_fini(gt__sender *s) {
  gt__tls_end(s->tc);
  s->tc = NULL;
  gt__tls_free(s->tls);
  s->tls = NULL;
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  if (s->cur)
    gt__spool_unref(s->sp, s->cur);
  s->cur = NULL;
  for (size_t i = 0; i < s->naddrs; i++) {
    free(s->hosts[i]);
    free(s->ports[i]);
  }
  s->naddrs = 0;
  gtp_wbuf_fini(&s->out);
  gtp_frame_decoder_fini(&s->dec);
}

/* Leaves the connection; invariant 2. `failed` moves to the next address
 * (and to backoff after the last one). */
static void drop_conn(gt__sender *s, uint64_t now, int failed,
                      const char *why) {
  gt__tls_end(s->tc);
  s->tc = NULL;
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  if (s->state == GT_SEND_STREAMING || s->state == GT_SEND_HELLO_SENT)
    s->log(GT_LOG_INFO, "gentrace: connection to %s:%s closed: %s",
           s->hosts[s->addr_idx], s->ports[s->addr_idx], why);
  if (s->cur)
    gt__spool_unref(s->sp, s->cur);
  s->cur = NULL;
  s->cur_off = 0;
  s->zc = NULL;
  s->zc_len = s->zc_off = 0;
  gt__spool_requeue(s->sp);
  gtp_wbuf_reset(&s->out);
  s->out_off = 0;
  s->more = 0;
  gtp_frame_decoder_fini(&s->dec);
  gtp_frame_decoder_init(&s->dec, GTP_FRAME_MAX);
  s->state = GT_SEND_BACKOFF;
  if (failed && s->addr_idx + 1 < s->naddrs) {
    s->addr_idx++; /* fail over in order, at once */
    s->deadline_ms = now;
    return;
  }
  s->addr_idx = 0;
  s->deadline_ms =
      now + gt__backoff_next(&s->backoff_ms, BACKOFF_MAX_MS, &s->rng);
}

static void start_connect(gt__sender *s, uint64_t now) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc =
      getaddrinfo(s->hosts[s->addr_idx], s->ports[s->addr_idx], &hints, &res);
  if (rc != 0 || res == NULL) {
    s->log(GT_LOG_WARN, "gentrace: cannot resolve %s: %s",
           s->hosts[s->addr_idx], gai_strerror(rc));
    drop_conn(s, now, 1, "resolve");
    return;
  }
  int fd =
      socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    drop_conn(s, now, 1, "socket");
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  rc = connect(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    close(fd);
    drop_conn(s, now, 1, "connect");
    return;
  }
  s->fd = fd;
  s->state = GT_SEND_CONNECTING;
  s->deadline_ms = now + CONNECT_TIMEOUT_MS;
}

/* Bytes to write: frames not handed to the socket or TLS yet, or records
 * the TLS layer batched but could not send yet (tls.c invariant 3). */
static int out_pending(const gt__sender *s) {
  return s->out_off < s->out.len || s->zc_off < s->zc_len ||
         gt__tls_unsent(s->tc) || s->more;
}

/* The socket or, with TLS, its session: send/recv semantics. */
static ssize_t io_send(gt__sender *s, const void *p, size_t n) {
  if (s->tc != NULL)
    return gt__tls_send(s->tc, p, n);
  return send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static ssize_t io_recv(gt__sender *s, void *p, size_t n) {
  if (s->tc != NULL)
    return gt__tls_recv(s->tc, p, n);
  return recv(s->fd, p, n, MSG_DONTWAIT);
}

/* TLS handshake step in CONNECTING: 1 done (send HELLO), 0 again, -1
 * dropped (counted: the host never sees TLS errors, gt_stats does). */
static int tls_step(gt__sender *s, uint64_t now) {
  if (s->tc == NULL) {
    s->tc = gt__tls_begin(s->tls, s->fd, s->hosts[s->addr_idx]);
    if (s->tc == NULL) {
      drop_conn(s, now, 1, "TLS session");
      return -1;
    }
    s->deadline_ms = now + HANDSHAKE_TIMEOUT_MS;
  }
  int rc = gt__tls_handshake(s->tc);
  if (rc < 0) {
    __atomic_store_n(&s->tls_failures, s->tls_failures + 1, __ATOMIC_RELAXED);
    s->log(GT_LOG_WARN, "gentrace: TLS handshake with %s:%s failed",
           s->hosts[s->addr_idx], s->ports[s->addr_idx]);
    drop_conn(s, now, 1, "TLS handshake");
    return -1;
  }
  return rc;
}

static void send_hello(gt__sender *s, uint64_t now) {
  const gt__ident *id = s->id;
  gtp_hello h;
  memset(&h, 0, sizeof h);
  h.min_version = GTP_PROTO_VERSION_MIN;
  h.max_version = GTP_PROTO_VERSION;
  memcpy(h.session, id->session, 16);
  memcpy(h.session_key, id->session_key, sizeof h.session_key);
  h.service = (gtp_str){id->service, strlen(id->service)};
  h.host = (gtp_str){id->host, strlen(id->host)};
  h.agent_version = (gtp_str){PACKAGE_VERSION, strlen(PACKAGE_VERSION)};
  h.pid = id->pid;
  h.process_start_ns = id->start_ns;
  h.ntags = id->ntags;
  memcpy(h.tags, id->tags, sizeof(gtp_tag) * id->ntags);
  h.token =
      (gtp_str){id->token ? id->token : "", id->token ? strlen(id->token) : 0};
  if (gtp_frame_hello_encode(&s->out, &h) != 0) {
    drop_conn(s, now, 1, "hello encode");
    return;
  }
  s->state = GT_SEND_HELLO_SENT;
  s->deadline_ms = now + HANDSHAKE_TIMEOUT_MS;
  s->last_rx_ms = now;
}

/* Frames the next part of the generation being sent into s->out. */
static void fill_out(gt__sender *s) {
  if (s->cur == NULL) {
    s->cur = gt__spool_next(s->sp);
    s->cur_off = 0;
    if (s->cur == NULL)
      return;
  }
  gt__gen *g = s->cur;
  if (s->cur_off < g->body_len) {
    size_t start = s->cur_off, end = start;
    while (end < g->body_len) {
      gtp_record rec;
      if (gtp_record_parse(g->body + end, g->body_len - end, &rec) != 0)
        break; /* cannot happen: we wrote it */
      if (end > start && end - start + rec.size > FRAME_TARGET)
        break;
      end += rec.size;
    }
    if (end == start) { /* unparsable body: give up on it */
      s->cur_off = g->body_len;
    } else if (s->tc == NULL &&
               gtp_frame_batch_head_encode(&s->out, g->gen, end - start) ==
                   0) {
      /* The frame's head here, its records from the body (invariant 4):
       * gtp_frame_batch_encode's bytes without copying the records. */
      s->zc = g->body + start;
      s->zc_len = end - start;
      s->zc_off = 0;
      s->cur_off = end;
    } else {
      gtp_frame_batch_encode(&s->out, g->gen, g->body + start, end - start);
      s->cur_off = end;
    }
    return;
  }
  gtp_frame_gen_end_encode(&s->out, &g->end);
  gt__spool_unref(s->sp, g);
  s->cur = NULL;
  s->cur_off = 0;
}

static void do_write(gt__sender *s, uint64_t now) {
  size_t budget = SEND_BUDGET;
  s->more = 0;
  for (;;) {
    if (s->out_off == s->out.len && s->zc_off == s->zc_len) {
      s->zc = NULL;
      s->zc_len = s->zc_off = 0;
      if (budget == 0 && s->state == GT_SEND_STREAMING) {
        /* More may be queued: poll for POLLOUT and come back (above). */
        s->more = 1;
        return;
      }
      gtp_wbuf_reset(&s->out);
      s->out_off = 0;
      if (s->state != GT_SEND_STREAMING)
        return;
      fill_out(s);
      if (s->out.err) {
        drop_conn(s, now, 0, "out of memory");
        return;
      }
      if (s->out.len == 0) {
        /* Nothing new: records batched by the TLS layer still go out. */
        if (s->tc != NULL && gt__tls_unsent(s->tc) &&
            gt__tls_flush(s->tc) < 0 && errno != EINTR)
          drop_conn(s, now, 0, strerror(errno));
        return;
      }
    }
    ssize_t n;
    if (s->zc_off < s->zc_len) {
      /* Head and records in one call (plain TCP only: fill_out). */
      struct iovec iov[2];
      int k = 0;
      if (s->out_off < s->out.len)
        iov[k++] = (struct iovec){s->out.data + s->out_off,
                                  s->out.len - s->out_off};
      iov[k++] = (struct iovec){(void *)(s->zc + s->zc_off),
                                s->zc_len - s->zc_off};
      struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)k};
      n = sendmsg(s->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = io_send(s, s->out.data + s->out_off, s->out.len - s->out_off);
    }
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return;
      drop_conn(s, now, 0, strerror(errno));
      return;
    }
    size_t head = s->out.len - s->out_off;
    head = (size_t)n < head ? (size_t)n : head;
    s->out_off += head;
    s->zc_off += (size_t)n - head;
    budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
    /* gt_stats reads these from other threads. */
    __atomic_store_n(&s->bytes_sent, s->bytes_sent + (size_t)n,
                     __ATOMIC_RELAXED);
    s->last_tx_ms = now;
  }
}

static void on_frame(gt__sender *s, uint64_t now, const gtp_frame *f) {
  switch (f->type) {
  case GTP_FR_WELCOME: {
    gtp_welcome w;
    if (s->state != GT_SEND_HELLO_SENT ||
        gtp_frame_welcome_decode(f->payload, f->len, &w) != 0 ||
        w.version < GTP_PROTO_VERSION_MIN || w.version > GTP_PROTO_VERSION) {
      drop_conn(s, now, 1, "bad WELCOME");
      return;
    }
    if (w.has_last)
      gt__spool_committed_upto(s->sp, w.last_gen);
    s->idle_ms = w.idle_timeout_ms ? w.idle_timeout_ms : 60000;
    s->hb_ms = s->idle_ms / 3;
    if (s->hb_ms > 10000)
      s->hb_ms = 10000;
    if (s->hb_ms < 50)
      s->hb_ms = 50;
    s->state = GT_SEND_STREAMING;
    s->backoff_ms = BACKOFF_MIN_MS;
    __atomic_store_n(&s->connects, s->connects + 1, __ATOMIC_RELAXED);
    s->log(GT_LOG_INFO, "gentrace: connected to %s:%s", s->hosts[s->addr_idx],
           s->ports[s->addr_idx]);
    return;
  }
  case GTP_FR_ACK: {
    uint64_t gen;
    if (s->state != GT_SEND_STREAMING ||
        gtp_frame_ack_decode(f->payload, f->len, &gen) != 0) {
      drop_conn(s, now, 0, "bad ACK");
      return;
    }
    gt__spool_ack(s->sp, gen);
    return;
  }
  case GTP_FR_ERROR: {
    gtp_error_frame e;
    if (gtp_frame_error_decode(f->payload, f->len, &e) != 0) {
      drop_conn(s, now, 0, "bad ERROR");
      return;
    }
    if (e.has_gen && s->state == GT_SEND_STREAMING) {
      s->log(GT_LOG_WARN, "gentrace: generation %llu rejected: %.*s",
             (unsigned long long)e.gen, (int)e.reason.len, e.reason.ptr);
      gt__spool_reject(s->sp, e.gen);
      return;
    }
    /* AUTH: the daemon holds another key for this session id, e.g. a
     * forked child that kept its parent's session (it should not: gt_start
     * draws a new id and key) or a peer that took an unused id first. Like
     * TOKEN it cannot succeed at once: counted, logged, backoff. */
    if (e.code == GTP_E_AUTH)
      __atomic_store_n(&s->auth_refused, s->auth_refused + 1, __ATOMIC_RELAXED);
    s->log(GT_LOG_WARN, "gentrace: daemon error %s: %.*s", gtp_errname(e.code),
           (int)e.reason.len, e.reason.ptr);
    drop_conn(s, now, s->state != GT_SEND_STREAMING, "ERROR");
    return;
  }
  case GTP_FR_HEARTBEAT:
    return;
  case GTP_FR_GOODBYE:
    drop_conn(s, now, 0, "GOODBYE");
    return;
  default:
    drop_conn(s, now, 0, "unexpected frame");
    return;
  }
}

static void do_read(gt__sender *s, uint64_t now) {
  uint8_t buf[16384];
  for (int rounds = 0;
       (rounds < 64 || (s->tc != NULL && gt__tls_pending(s->tc) > 0)) &&
       s->fd >= 0;
       rounds++) {
    ssize_t n = io_recv(s, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EPROTO && s->tc != NULL && s->state != GT_SEND_STREAMING)
        __atomic_store_n(&s->tls_failures, s->tls_failures + 1,
                         __ATOMIC_RELAXED); /* refused after our handshake */
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        drop_conn(s, now, s->state != GT_SEND_STREAMING, strerror(errno));
      return;
    }
    if (n == 0) {
      drop_conn(s, now, s->state != GT_SEND_STREAMING, "EOF");
      return;
    }
    s->last_rx_ms = now;
    const uint8_t *p = buf;
    size_t left = (size_t)n;
    while (left > 0 && s->fd >= 0) {
      size_t used = 0;
      gtp_frame f;
      int rc = gtp_frame_decoder_feed(&s->dec, p, left, &used, &f);
      if (rc < 0) {
        drop_conn(s, now, 0, gtp_strerror(rc));
        return;
      }
      p += used;
      left -= used;
      if (rc == 1)
        on_frame(s, now, &f);
    }
  }
}

int gt__sender_poll(gt__sender *s, uint64_t now, struct pollfd *pfd) {
  pfd->fd = s->fd;
  pfd->events = 0;
  pfd->revents = 0;
  uint64_t due = UINT64_MAX;
  switch (s->state) {
  case GT_SEND_BACKOFF:
    due = s->deadline_ms;
    pfd->fd = -1;
    break;
  case GT_SEND_CONNECTING:
    pfd->events = s->tc == NULL || gt__tls_want_write(s->tc) ? POLLOUT : POLLIN;
    due = s->deadline_ms;
    break;
  case GT_SEND_HELLO_SENT:
    pfd->events = POLLIN | (out_pending(s) ? POLLOUT : 0);
    due = s->deadline_ms;
    break;
  case GT_SEND_STREAMING:
    pfd->events = POLLIN | (out_pending(s) ? POLLOUT : 0);
    due = s->last_tx_ms + s->hb_ms;
    if (s->last_rx_ms + 3 * s->idle_ms < due)
      due = s->last_rx_ms + 3 * s->idle_ms;
    break;
  }
  if (due == UINT64_MAX)
    return -1;
  return due <= now ? 0 : (int)(due - now > 60000 ? 60000 : due - now);
}

void gt__sender_step(gt__sender *s, uint64_t now, short revents) {
  switch (s->state) {
  case GT_SEND_BACKOFF:
    if (now >= s->deadline_ms)
      start_connect(s, now);
    return;
  case GT_SEND_CONNECTING: {
    if (s->tc != NULL && (revents & (POLLIN | POLLOUT | POLLERR | POLLHUP))) {
      if (tls_step(s, now) <= 0) {
        if (s->state == GT_SEND_CONNECTING && now >= s->deadline_ms)
          drop_conn(s, now, 1, "TLS handshake timeout");
        return;
      }
      send_hello(s, now);
      if (s->state == GT_SEND_HELLO_SENT)
        do_write(s, now);
      return;
    }
    if (revents & (POLLOUT | POLLERR | POLLHUP)) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
          err != 0) {
        drop_conn(s, now, 1, strerror(err ? err : errno));
        return;
      }
      if (s->tls != NULL && tls_step(s, now) <= 0)
        return; /* handshaking (or dropped): poll for its direction */
      send_hello(s, now);
      if (s->state == GT_SEND_HELLO_SENT)
        do_write(s, now);
      return;
    }
    if (now >= s->deadline_ms)
      drop_conn(s, now, 1, "connect timeout");
    return;
  }
  case GT_SEND_HELLO_SENT:
    if (revents & (POLLIN | POLLERR | POLLHUP))
      do_read(s, now);
    if (s->state == GT_SEND_HELLO_SENT && (revents & POLLOUT))
      do_write(s, now);
    if (s->state == GT_SEND_HELLO_SENT && now >= s->deadline_ms)
      drop_conn(s, now, 1, "handshake timeout");
    if (s->state == GT_SEND_STREAMING)
      do_write(s, now);
    return;
  case GT_SEND_STREAMING:
    if (revents & (POLLIN | POLLERR | POLLHUP))
      do_read(s, now);
    if (s->state != GT_SEND_STREAMING)
      return;
    if (now >= s->last_rx_ms + 3 * s->idle_ms) {
      drop_conn(s, now, 0, "daemon silent");
      return;
    }
    if (s->out_off == s->out.len && s->zc_off == s->zc_len &&
        now >= s->last_tx_ms + s->hb_ms && s->cur == NULL) {
      gtp_wbuf_reset(&s->out);
      s->out_off = 0;
      gtp_frame_heartbeat_encode(&s->out);
    }
    do_write(s, now);
    return;
  }
}

void gt__sender_close(gt__sender *s) {
  if (s->fd >= 0 && s->state == GT_SEND_STREAMING && s->out_off == s->out.len &&
      s->zc_off == s->zc_len) {
    gtp_wbuf_reset(&s->out);
    if (gtp_frame_goodbye_encode(&s->out, 0, "agent stopping") == 0)
      (void)!io_send(s, s->out.data, s->out.len);
  }
  gt__tls_end(s->tc);
  s->tc = NULL;
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  s->state = GT_SEND_BACKOFF;
}

int gt__sender_drained(const gt__sender *s) {
  return !out_pending(s) && s->cur == NULL;
}
