/* fleet_client: the agents' side of bench_fleet, run in each worker
 * process (bench/bench_fleet.c's design note): N agents speaking the real
 * wire protocol over non-blocking sockets and one epoll set, each bound to
 * its own loopback address, sending a generation each period, staggered,
 * and timing WELCOME and ACK.
 *
 * Invariants:
 *   1. An ACK counts only for a generation in flight on that connection;
 *      any other (twice, never sent) is counted as dup.
 *   2. acked[i] is the contiguous prefix of agent i's ACKed generations,
 *      which the parent checks against the store.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fleet.h"
#include "format.h"
#include "frame.h"
#include "varint.h"

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

int64_t fleet_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fleet_sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* -------------------------------------------------------------- agents */

enum { A_IDLE, A_CONNECTING, A_HELLO, A_ACTIVE, A_DEAD };

typedef struct agent {
  int fd;
  unsigned idx; /* global agent number */
  int state;
  int64_t hello_ns, last_tx_ns;
  uint64_t next_gen; /* next generation to send (from 1) */
  uint64_t acked;    /* generations 1..acked all ACKed */
  uint64_t ring_gen[RING];
  int64_t ring_t[RING]; /* 0 = slot free */
  unsigned inflight;
  gtp_frame_decoder dec;
  uint8_t *out; /* unsent bytes (the socket was full) */
  size_t out_len;
} agent;

typedef struct worker {
  const opts *o;
  unsigned k, first, n; /* agents first .. first+n-1 */
  uint16_t port;
  uint8_t salt[8];
  int ep;
  agent *a;
  wres *r;
  uint32_t *acked;
  int64_t hb_ns;
  int64_t hb_walk_ns; /* the last walk over the agents for heartbeats */
  gtp_wbuf wb;
  gtp_wbuf gb;     /* the encoded generation gb_gen (no session in it) */
  uint64_t gb_gen; /* every agent of a round sends the same bytes */
} worker;

/* Agent idx's session id: idx + 1 in the first 4 bytes (the store check
 * reads it back), the run's salt, and 8 bytes mixed from both (splitmix64's
 * finalizer), so the ids spread over any hash of them as a real agent's 128
 * random bits do. Ids counting up in their high bytes did not: the
 * daemon's direct-mapped session cache found no two of 10,000 in one slot,
 * where random ids put 14% of them there (bench/RESULTS.md, ninth
 * session). */
static void agent_session(const worker *w, unsigned idx, uint8_t s[16]) {
  uint64_t x;
  memcpy(&x, w->salt, 8);
  x += (idx + 1) * 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  gtp_put_u32le(s, idx + 1);
  memcpy(s + 4, w->salt, 4);
  memcpy(s + 8, &x, 8);
}

static void agent_kill(worker *w, agent *a) {
  if (a->state == A_DEAD)
    return;
  if (a->state == A_ACTIVE)
    w->r->lost_conns++;
  else
    w->r->connect_fail++;
  epoll_ctl(w->ep, EPOLL_CTL_DEL, a->fd, NULL);
  close(a->fd);
  a->fd = -1;
  a->state = A_DEAD;
}

/* Writes what is queued, then p[0..n). Unsent bytes wait for EPOLLOUT. */
static void agent_write(worker *w, agent *a, const uint8_t *p, size_t n) {
  if (a->out_len == 0) {
    ssize_t k = send(a->fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno != EAGAIN && errno != EINTR) {
      agent_kill(w, a);
      return;
    }
    if (k < 0)
      k = 0;
    p += k;
    n -= (size_t)k;
    if (n == 0)
      return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                             .data.u32 = (uint32_t)(a - w->a)};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, a->fd, &ev);
  }
  uint8_t *o = realloc(a->out, a->out_len + n);
  if (o == NULL) {
    agent_kill(w, a);
    return;
  }
  memcpy(o + a->out_len, p, n);
  a->out = o;
  a->out_len += n;
}

static void agent_flush(worker *w, agent *a) {
  if (a->out_len == 0)
    return;
  ssize_t k = send(a->fd, a->out, a->out_len, MSG_NOSIGNAL);
  if (k < 0 && errno != EAGAIN && errno != EINTR) {
    agent_kill(w, a);
    return;
  }
  if (k <= 0)
    return;
  memmove(a->out, a->out + k, a->out_len - (size_t)k);
  a->out_len -= (size_t)k;
  if (a->out_len == 0) {
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u32 = (uint32_t)(a - w->a)};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, a->fd, &ev);
  }
}

static void agent_send_hello(worker *w, agent *a) {
  gtp_hello h;
  memset(&h, 0, sizeof h);
  h.min_version = GTP_PROTO_VERSION;
  h.max_version = GTP_PROTO_VERSION;
  agent_session(w, a->idx, h.session);
  /* Protocol v2: a per-session key (the real agent draws 128 random bits;
   * any fixed bytes per session serve the benchmark). */
  for (unsigned i = 0; i < GTP_SESSION_KEY_SIZE; i++)
    h.session_key[i] = (uint8_t)(h.session[i] * 31u + 7u);
  char svc[32], host[32];
  snprintf(svc, sizeof svc, "svc-%u", a->idx % 100);
  snprintf(host, sizeof host, "fleet-%u", a->idx / 20);
  h.service = (gtp_str){svc, strlen(svc)};
  h.host = (gtp_str){host, strlen(host)};
  h.agent_version = (gtp_str){"bench-fleet", 11};
  h.pid = 10000 + a->idx;
  h.process_start_ns = 1767225600000000000ull;
  h.ntags = 1;
  h.tags[0].key = (gtp_str){"fleet", 5};
  h.tags[0].value = (gtp_str){"bench", 5};
  gtp_wbuf_reset(&w->wb);
  gtp_frame_hello_encode(&w->wb, &h);
  a->hello_ns = a->last_tx_ns = fleet_now_ns();
  a->state = A_HELLO;
  agent_write(w, a, w->wb.data, w->wb.len);
}

/* One small generation: a BATCH frame holding an EVENTS record of o->events
 * instants and region pairs, a STRINGS record and a CLOCK record, then the
 * GEN_END frame with its manifest. */
static int build_gen(worker *w, uint64_t gen, unsigned nevents) {
  uint8_t ev_buf[16384];
  size_t ev_len = 0;
  uint64_t base = 1000000000ull + gen * 250000000ull, prev = base;
  for (unsigned i = 0; i < nevents && ev_len + 64 < sizeof ev_buf; i++) {
    gtp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = i % 3 == 0   ? GTP_EV_INSTANT
              : i % 3 == 1 ? GTP_EV_REGION_BEGIN
                           : GTP_EV_REGION_END;
    ev.ticks = base + (uint64_t)i * 1000;
    ev.args[0] = ev.type == GTP_EV_REGION_END ? 0 : 1 + (i % 3 == 0);
    int n = gtp_event_encode(ev_buf + ev_len, &ev, prev);
    if (n < 0)
      return n;
    ev_len += (size_t)n;
    prev = ev.ticks;
  }
  gtp_wbuf body;
  uint8_t body_mem[20000];
  body = (gtp_wbuf){body_mem, 0, sizeof body_mem, sizeof body_mem, 0};
  gtp_put_batch(&body, gen, 1, base, nevents, ev_buf, ev_len);
  static const uint64_t ids[] = {1, 2};
  const gtp_str strs[] = {{"request", 7}, {"tick", 4}};
  gtp_put_strings(&body, ids, strs, 2);
  gtp_clock c;
  c.start_ticks = base;
  c.start_mono_ns = base * 4;
  c.start_real_ns = 1767225600000000000ull + gen * 1000000000ull;
  c.end_ticks = base + 250000000ull;
  c.end_mono_ns = c.start_mono_ns + 1000000000ull;
  c.end_real_ns = c.start_real_ns + 1000000000ull;
  gtp_put_clock(&body, &c);
  if (body.err)
    return body.err;
  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  e.gen = gen;
  int rc = gtp_manifest_compute(body.data, body.len, &e);
  if (rc < 0)
    return rc;
  gtp_wbuf_reset(&w->gb);
  gtp_frame_batch_encode(&w->gb, gen, body.data, body.len);
  gtp_frame_gen_end_encode(&w->gb, &e);
  w->gb_gen = w->gb.err ? 0 : gen;
  return w->gb.err;
}

static void agent_send_gen(worker *w, agent *a, int64_t now) {
  if (a->inflight >= RING || a->ring_t[a->next_gen % RING] != 0) {
    w->r->skipped++; /* the real agent would spool it; counted */
    return;
  }
  uint64_t gen = a->next_gen++;
  /* Encoded once per round, not per agent: the client's CPU per
   * generation stays small beside the server's (bench/RESULTS.md). */
  if (w->gb_gen != gen && build_gen(w, gen, w->o->events) < 0) {
    fprintf(stderr, "bench_fleet: cannot build a generation\n");
    exit(2);
  }
  unsigned slot = (unsigned)(gen % RING);
  a->ring_gen[slot] = gen;
  a->ring_t[slot] = now;
  a->inflight++;
  a->last_tx_ns = now;
  w->r->sent++;
  if (w->r->first_send_ns == 0)
    w->r->first_send_ns = (uint64_t)now;
  agent_write(w, a, w->gb.data, w->gb.len);
}

/* rx_ns: when the bytes holding f arrived in the socket (monotonic, from
 * the kernel's receive timestamp), 0 when unknown. */
static void on_frame(worker *w, agent *a, const gtp_frame *f, int64_t now,
                     int64_t rx_ns) {
  switch (f->type) {
  case GTP_FR_WELCOME: {
    gtp_welcome wl;
    if (a->state != A_HELLO ||
        gtp_frame_welcome_decode(f->payload, f->len, &wl) < 0) {
      agent_kill(w, a);
      return;
    }
    fleet_hist_add(&w->r->welcome, (uint64_t)(now - a->hello_ns) / 1000);
    a->state = A_ACTIVE;
    w->r->welcomed++;
    if (wl.idle_timeout_ms > 0 && w->hb_ns == 0)
      w->hb_ns = (int64_t)wl.idle_timeout_ms * 1000000 / 3;
    break;
  }
  case GTP_FR_ACK: {
    uint64_t gen;
    if (gtp_frame_ack_decode(f->payload, f->len, &gen) < 0) {
      agent_kill(w, a);
      return;
    }
    unsigned slot = (unsigned)(gen % RING);
    if (a->ring_t[slot] == 0 || a->ring_gen[slot] != gen) {
      w->r->dup++; /* twice, or never sent */
      return;
    }
    fleet_hist_add(&w->r->ack, (uint64_t)(now - a->ring_t[slot]) / 1000);
    if (rx_ns >= a->ring_t[slot] && rx_ns <= now) {
      fleet_hist_add(&w->r->ack_in, (uint64_t)(rx_ns - a->ring_t[slot]) / 1000);
      fleet_hist_add(&w->r->ack_wait, (uint64_t)(now - rx_ns) / 1000);
    } else {
      w->r->ack_nots++;
    }
    a->ring_t[slot] = 0;
    a->inflight--;
    w->r->acked++;
    w->r->last_ack_ns = (uint64_t)now;
    /* ACKs come in order on one connection; acked = contiguous prefix. */
    while (a->acked + 1 < a->next_gen && a->ring_t[(a->acked + 1) % RING] == 0)
      a->acked++;
    w->acked[a->idx] = (uint32_t)a->acked;
    break;
  }
  case GTP_FR_ERROR:
    w->r->refused++;
    agent_kill(w, a);
    break;
  case GTP_FR_GOODBYE:
    agent_kill(w, a);
    break;
  default:
    break; /* HEARTBEAT */
  }
}

/* The kernel's receive time of the newest bytes a recvmsg returned
 * (SCM_TIMESTAMPNS, CLOCK_REALTIME), on the monotonic clock; 0 without. */
static int64_t rx_mono_ns(struct msghdr *mh, int64_t now_mono) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL;
       c = CMSG_NXTHDR(mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS)
      continue;
    struct timespec ts, real;
    memcpy(&ts, CMSG_DATA(c), sizeof ts);
    clock_gettime(CLOCK_REALTIME, &real);
    int64_t age = ((int64_t)real.tv_sec - ts.tv_sec) * 1000000000 +
                  (real.tv_nsec - ts.tv_nsec);
    return age >= 0 ? now_mono - age : 0;
  }
  return 0;
}

static void agent_read(worker *w, agent *a, uint8_t *buf, size_t cap) {
  for (;;) {
    union {
      char b[CMSG_SPACE(sizeof(struct timespec))];
      struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, cap};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.b,
                        .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(a->fd, &mh, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return;
    if (n <= 0) {
      agent_kill(w, a);
      return;
    }
    int64_t now = fleet_now_ns();
    int64_t rx = rx_mono_ns(&mh, now);
    const uint8_t *p = buf;
    size_t left = (size_t)n;
    while (left > 0 && a->state != A_DEAD) {
      size_t used;
      gtp_frame f;
      int rc = gtp_frame_decoder_feed(&a->dec, p, left, &used, &f);
      if (rc < 0) {
        agent_kill(w, a);
        return;
      }
      p += used;
      left -= used;
      if (rc == 1)
        on_frame(w, a, &f, now, rx);
    }
    if (a->state == A_DEAD || (size_t)n < cap)
      return;
  }
}

static int agent_connect(worker *w, agent *a) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  /* Receive timestamps: the ACK's latency split at the socket (wres). */
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  /* Every agent its own source address, 127.0.(1+i/250).(1+i%250), as
   * hosts of a fleet have (gentraced admits --max-conns-per-ip per
   * address); binding before connect also spreads the ephemeral ports. */
  struct sockaddr_in src = {.sin_family = AF_INET};
  src.sin_addr.s_addr =
      htonl(0x7f000101u + (a->idx / 250) * 256u + a->idx % 250);
  if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(w->port)};
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 &&
      errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return -e;
  }
  a->fd = fd;
  a->state = A_CONNECTING;
  a->next_gen = 1;
  gtp_frame_decoder_init(&a->dec, 1u << 16);
  struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN,
                           .data.u32 = (uint32_t)(a - w->a)};
  epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev);
  return 0;
}

static void handle_events(worker *w, int timeout_ms, uint8_t *buf, size_t cap) {
  struct epoll_event evs[512];
  int n = epoll_wait(w->ep, evs, 512, timeout_ms);
  for (int i = 0; i < n; i++) {
    agent *a = &w->a[evs[i].data.u32];
    if (a->state == A_DEAD)
      continue;
    if (a->state == A_CONNECTING) {
      int err = 0;
      socklen_t sl = sizeof err;
      getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
      if (err != 0) {
        agent_kill(w, a);
        continue;
      }
      struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[i].data.u32};
      epoll_ctl(w->ep, EPOLL_CTL_MOD, a->fd, &ev);
      agent_send_hello(w, a);
      continue;
    }
    if (evs[i].events & EPOLLOUT)
      agent_flush(w, a);
    if (a->state != A_DEAD && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
      agent_read(w, a, buf, cap);
  }
}

/* Walks the agents at most every 1/16 of the heartbeat interval: a walk
 * per wake-up (one per generation sent at 10,000 agents) cost the client
 * more CPU than the generation itself. */
static void heartbeats(worker *w, int64_t now) {
  if (w->hb_ns == 0 || now - w->hb_walk_ns < w->hb_ns / 16)
    return;
  w->hb_walk_ns = now;
  uint8_t mem[16];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_heartbeat_encode(&b);
  for (unsigned i = 0; i < w->n; i++) {
    agent *a = &w->a[i];
    if (a->state == A_ACTIVE && now - a->last_tx_ns >= w->hb_ns) {
      a->last_tx_ns = now;
      w->r->heartbeats++;
      agent_write(w, a, b.data, b.len);
    }
  }
}

/* The worker process: connect, wait for go, send, drain, report. */
static void worker_main(worker *w, shared *sh) {
  static uint8_t buf[65536];
  const opts *o = w->o;
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  w->a = calloc(w->n, sizeof *w->a);
  gtp_wbuf_init(&w->wb, 0);
  gtp_wbuf_init(&w->gb, 0);
  if (w->ep < 0 || w->a == NULL)
    _exit(2);
  /* Connect at the worker's share of the connect rate. */
  double rate = (double)o->connect_rate / o->procs;
  int64_t t0 = fleet_now_ns(), deadline = t0 + (int64_t)CONNECT_MS * 1000000;
  unsigned started = 0;
  while (w->r->welcomed + w->r->connect_fail < w->n &&
         fleet_now_ns() < deadline) {
    int64_t now = fleet_now_ns();
    unsigned due = (unsigned)((double)(now - t0) / 1e9 * rate) + 1;
    while (started < w->n && started < due) {
      agent *a = &w->a[started];
      a->idx = w->first + started;
      started++;
      if (agent_connect(w, a) < 0) {
        a->state = A_DEAD;
        w->r->connect_fail++;
      }
    }
    handle_events(w, 1, buf, sizeof buf);
  }
  w->r->welcomed_all = 1;
  while (sh->go_ns == 0)
    handle_events(w, 5, buf, sizeof buf);

  int64_t go = sh->go_ns, period = (int64_t)o->period_ms * 1000000;
  int64_t end = go + (int64_t)o->seconds * 1000000000;
  if (!o->idle) {
    /* Agent i (global) starts at go + i/N of a period; the worker walks its
     * agents in that order, round after round. */
    uint64_t round = 0;
    unsigned cur = 0;
    for (;;) {
      int64_t due = go + (int64_t)round * period +
                    period * (int64_t)w->a[cur].idx / (int64_t)o->agents;
      if (due >= end)
        break;
      int64_t now = fleet_now_ns();
      if (now >= due) {
        agent *a = &w->a[cur];
        if (a->state == A_ACTIVE)
          agent_send_gen(w, a, now);
        if (++cur == w->n) {
          cur = 0;
          round++;
        }
        continue;
      }
      handle_events(w, (int)((due - now + 999999) / 1000000), buf, sizeof buf);
      heartbeats(w, now);
    }
    /* Outstanding ACKs. */
    int64_t dl = fleet_now_ns() + (int64_t)DRAIN_MS * 1000000;
    for (;;) {
      uint64_t out = 0;
      for (unsigned i = 0; i < w->n; i++)
        if (w->a[i].state == A_ACTIVE)
          out += w->a[i].inflight;
      if (out == 0 || fleet_now_ns() >= dl) {
        w->r->unacked = out;
        break;
      }
      handle_events(w, 10, buf, sizeof buf);
    }
  } else {
    while (fleet_now_ns() < end) {
      handle_events(w, 100, buf, sizeof buf);
      heartbeats(w, fleet_now_ns());
    }
  }
  w->r->done = 1;
  /* Keep the connections until the parent has read the server's figures. */
  while (!sh->release) {
    handle_events(w, 50, buf, sizeof buf);
    heartbeats(w, fleet_now_ns());
  }
  _exit(0);
}

/* --client-prio: how the worker processes share the CPUs with the server.
 * In a real fleet the agents run on other hosts; on one machine a client
 * that competes with the server at the same priority takes the CPU the
 * server's ACKs wait for, in both arms. idle: SCHED_IDLE (runs only when
 * nothing else of normal priority wants the CPU) at nice 19; nice: nice
 * 19 alone; normal: as started (the set-up of the figures before
 * 2026-11-25 18:00 in bench/RESULTS.md). */
int fleet_client_prio_check(const char *name) {
  return strcmp(name, "idle") == 0 || strcmp(name, "nice") == 0 ||
                 strcmp(name, "normal") == 0
             ? 0
             : -1;
}

static void client_prio_apply(const char *name) {
  if (strcmp(name, "normal") == 0)
    return;
  if (setpriority(PRIO_PROCESS, 0, 19) < 0)
    fprintf(stderr, "bench_fleet: setpriority: %s\n", strerror(errno));
  if (strcmp(name, "idle") == 0) {
    struct sched_param sp = {.sched_priority = 0};
    if (sched_setscheduler(0, SCHED_IDLE, &sp) < 0)
      fprintf(stderr, "bench_fleet: SCHED_IDLE: %s\n", strerror(errno));
  }
}

void fleet_client_run(const opts *o, unsigned k, unsigned first, unsigned n,
                      uint16_t port, const uint8_t salt[8], shared *sh,
                      uint32_t *acked) {
  client_prio_apply(o->client_prio);
  worker w = {.o = o, .k = k, .first = first, .n = n, .port = port};
  memcpy(w.salt, salt, 8);
  w.r = &sh->w[k];
  w.acked = acked;
  worker_main(&w, sh);
  _exit(0); /* worker_main exits itself */
}
