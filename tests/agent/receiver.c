/* receiver.c: see receiver.h. */
#include "config.h"

#include "receiver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"

#define RX_MAX_GENS 4096
#define RX_MAX_REJECT 16
#define RX_MAX_HELLOS 64

struct rx {
  pthread_t thread;
  pthread_mutex_t lock;
  int port;
  int wake[2];
  /* lock */
  int stop, want_listen;
  uint64_t reject[RX_MAX_REJECT];
  size_t nreject;
  rx_gen gens[RX_MAX_GENS];
  size_t ngens;
  uint64_t bad, hellos;
  unsigned refuse_auth; /* HELLOs still to answer with ERROR(AUTH) */
  uint8_t ids[RX_MAX_HELLOS][32]; /* session id + key of each HELLO */
  /* thread only */
  int lfd, cfd;
  gtp_frame_decoder dec;
  gtp_hello hello;
  uint8_t *hello_copy;
  int have_hello;
  uint64_t open_gen;
  gtp_wbuf body;
};

static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void send_all(int fd, const gtp_wbuf *b) {
  size_t off = 0;
  while (off < b->len) {
    ssize_t n = send(fd, b->data + off, b->len - off, MSG_NOSIGNAL);
    if (n <= 0)
      return;
    off += (size_t)n;
  }
}

static void conn_close(rx *r) {
  if (r->cfd >= 0)
    close(r->cfd);
  r->cfd = -1;
  gtp_frame_decoder_fini(&r->dec);
  gtp_frame_decoder_init(&r->dec, GTP_FRAME_MAX);
  r->have_hello = 0;
  free(r->hello_copy);
  r->hello_copy = NULL;
  gtp_wbuf_reset(&r->body);
  r->open_gen = 0;
}

static int has_gen(rx *r, const uint8_t *session, uint64_t gen) {
  for (size_t i = 0; i < r->ngens; i++)
    if (r->gens[i].gen == gen && memcmp(r->gens[i].session, session, 16) == 0)
      return 1;
  return 0;
}

static void on_gen_end(rx *r, const gtp_gen_end *e) {
  gtp_wbuf out;
  gtp_wbuf_init(&out, 0);
  gtp_gen_end got = *e;
  int rc = gtp_manifest_compute(r->body.data, r->body.len, &got);
  if (rc == 0)
    rc = gtp_manifest_check(e, &got);
  pthread_mutex_lock(&r->lock);
  int reject = 0;
  for (size_t i = 0; i < r->nreject; i++)
    if (r->reject[i] == e->gen)
      reject = 1;
  if (rc != 0)
    r->bad++;
  if (rc != 0 || reject) {
    pthread_mutex_unlock(&r->lock);
    gtp_frame_error_encode(&out, rc ? rc : GTP_E_MANIFEST, 1, e->gen,
                           "refused by test");
  } else {
    if (!has_gen(r, r->hello.session, e->gen) && r->ngens < RX_MAX_GENS) {
      gtp_wbuf f;
      gtp_wbuf_init(&f, 0);
      gtp_put_file_header(&f);
      gtp_gen_start gs;
      memset(&gs, 0, sizeof gs);
      memcpy(gs.session, r->hello.session, 16);
      gs.gen = e->gen;
      gs.service = r->hello.service;
      gs.host = r->hello.host;
      gs.agent_version = r->hello.agent_version;
      gs.pid = r->hello.pid;
      gs.process_start_ns = r->hello.process_start_ns;
      gs.ntags = r->hello.ntags;
      memcpy(gs.tags, r->hello.tags, sizeof gs.tags);
      gtp_put_gen_start(&f, &gs);
      gtp_wbuf_put(&f, r->body.data, r->body.len);
      gtp_put_gen_end(&f, e);
      rx_gen *g = &r->gens[r->ngens++];
      g->gen = e->gen;
      memcpy(g->session, r->hello.session, 16);
      g->file = f.data;
      g->file_len = f.len;
      g->end = *e;
    }
    pthread_mutex_unlock(&r->lock);
    gtp_frame_ack_encode(&out, e->gen);
  }
  send_all(r->cfd, &out);
  gtp_wbuf_fini(&out);
  gtp_wbuf_reset(&r->body);
  r->open_gen = 0;
}

static int on_frame(rx *r, const gtp_frame *f) {
  if (!r->have_hello) {
    if (f->type != GTP_FR_HELLO)
      return -1;
    r->hello_copy = malloc(f->len ? f->len : 1);
    memcpy(r->hello_copy, f->payload, f->len);
    if (gtp_frame_hello_decode(r->hello_copy, f->len, &r->hello) != 0)
      return -1;
    r->have_hello = 1;
    pthread_mutex_lock(&r->lock);
    if (r->hellos < RX_MAX_HELLOS) {
      memcpy(r->ids[r->hellos], r->hello.session, 16);
      memcpy(r->ids[r->hellos] + 16, r->hello.session_key, 16);
    }
    int refuse = r->refuse_auth > 0;
    if (refuse) {
      r->refuse_auth--;
      r->hellos++;
    }
    pthread_mutex_unlock(&r->lock);
    if (refuse) {
      /* As gentraced answers a HELLO for a session bound to another key. */
      gtp_wbuf out;
      gtp_wbuf_init(&out, 0);
      gtp_frame_error_encode(&out, GTP_E_AUTH, 0, 0, "refused by test");
      send_all(r->cfd, &out);
      gtp_wbuf_fini(&out);
      return -1;
    }
    gtp_welcome w = {.version = GTP_PROTO_VERSION,
                     .idle_timeout_ms = 3000,
                     .max_gen_bytes = 64u << 20};
    pthread_mutex_lock(&r->lock);
    r->hellos++;
    for (size_t i = 0; i < r->ngens; i++)
      if (memcmp(r->gens[i].session, r->hello.session, 16) == 0 &&
          (!w.has_last || r->gens[i].gen > w.last_gen)) {
        w.has_last = 1;
        w.last_gen = r->gens[i].gen;
      }
    pthread_mutex_unlock(&r->lock);
    gtp_wbuf out;
    gtp_wbuf_init(&out, 0);
    gtp_frame_welcome_encode(&out, &w);
    send_all(r->cfd, &out);
    gtp_wbuf_fini(&out);
    return 0;
  }
  switch (f->type) {
  case GTP_FR_BATCH: {
    uint64_t gen;
    const uint8_t *recs;
    size_t len;
    if (gtp_frame_batch_decode(f->payload, f->len, &gen, &recs, &len) != 0)
      return -1;
    if (r->open_gen != 0 && r->open_gen != gen)
      gtp_wbuf_reset(&r->body); /* resend after a lost connection */
    r->open_gen = gen;
    gtp_wbuf_put(&r->body, recs, len);
    return 0;
  }
  case GTP_FR_GEN_END: {
    gtp_gen_end e;
    if (gtp_frame_gen_end_decode(f->payload, f->len, &e) != 0)
      return -1;
    on_gen_end(r, &e);
    return 0;
  }
  case GTP_FR_HEARTBEAT: {
    gtp_wbuf out;
    gtp_wbuf_init(&out, 0);
    gtp_frame_heartbeat_encode(&out);
    send_all(r->cfd, &out);
    gtp_wbuf_fini(&out);
    return 0;
  }
  case GTP_FR_GOODBYE:
    return -1;
  default:
    return -1;
  }
}

static void *rx_main(void *arg) {
  rx *r = arg;
  uint8_t buf[65536];
  for (;;) {
    pthread_mutex_lock(&r->lock);
    int stop = r->stop, want = r->want_listen;
    pthread_mutex_unlock(&r->lock);
    if (stop)
      break;
    if (!want && r->lfd >= 0) {
      close(r->lfd);
      r->lfd = -1;
      conn_close(r);
    } else if (want && r->lfd < 0) {
      r->lfd = listen_on(r->port);
    }
    struct pollfd p[3] = {
        {r->wake[0], POLLIN, 0}, {r->lfd, POLLIN, 0}, {r->cfd, POLLIN, 0}};
    if (poll(p, 3, 100) <= 0)
      continue;
    if (p[0].revents & POLLIN) {
      char c;
      (void)!read(r->wake[0], &c, 1);
    }
    if (r->lfd >= 0 && (p[1].revents & POLLIN)) {
      int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) {
        conn_close(r); /* one agent at a time: the newest wins */
        r->cfd = fd;
      }
    }
    if (r->cfd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = recv(r->cfd, buf, sizeof buf, 0);
      if (n <= 0) {
        conn_close(r);
        continue;
      }
      const uint8_t *q = buf;
      size_t left = (size_t)n;
      while (left > 0) {
        size_t used = 0;
        gtp_frame f;
        int rc = gtp_frame_decoder_feed(&r->dec, q, left, &used, &f);
        if (rc < 0 || (rc == 1 && on_frame(r, &f) != 0)) {
          conn_close(r);
          break;
        }
        q += used;
        left -= used;
      }
    }
  }
  if (r->lfd >= 0)
    close(r->lfd);
  conn_close(r);
  return NULL;
}

rx *rx_start(void) {
  rx *r = calloc(1, sizeof *r);
  if (r == NULL)
    return NULL;
  pthread_mutex_init(&r->lock, NULL);
  r->cfd = -1;
  r->lfd = listen_on(0);
  if (r->lfd < 0 || pipe(r->wake) != 0) {
    free(r);
    return NULL;
  }
  struct sockaddr_in a;
  socklen_t al = sizeof a;
  getsockname(r->lfd, (struct sockaddr *)&a, &al);
  r->port = ntohs(a.sin_port);
  r->want_listen = 1;
  gtp_frame_decoder_init(&r->dec, GTP_FRAME_MAX);
  gtp_wbuf_init(&r->body, 0);
  pthread_create(&r->thread, NULL, rx_main, r);
  return r;
}

int rx_port(rx *r) {
  return r->port;
}

static void poke(rx *r) {
  (void)!write(r->wake[1], "x", 1);
}

void rx_reject_gen(rx *r, uint64_t gen) {
  pthread_mutex_lock(&r->lock);
  if (r->nreject < RX_MAX_REJECT)
    r->reject[r->nreject++] = gen;
  pthread_mutex_unlock(&r->lock);
}

void rx_vanish(rx *r) {
  pthread_mutex_lock(&r->lock);
  r->want_listen = 0;
  pthread_mutex_unlock(&r->lock);
  poke(r);
}

void rx_return(rx *r) {
  pthread_mutex_lock(&r->lock);
  r->want_listen = 1;
  pthread_mutex_unlock(&r->lock);
  poke(r);
}

void rx_stop(rx *r) {
  pthread_mutex_lock(&r->lock);
  int was = r->stop;
  r->stop = 1;
  pthread_mutex_unlock(&r->lock);
  if (was)
    return;
  poke(r);
  pthread_join(r->thread, NULL);
}

void rx_free(rx *r) {
  rx_stop(r);
  for (size_t i = 0; i < r->ngens; i++)
    free(r->gens[i].file);
  gtp_frame_decoder_fini(&r->dec);
  gtp_wbuf_fini(&r->body);
  close(r->wake[0]);
  close(r->wake[1]);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

size_t rx_count(rx *r) {
  pthread_mutex_lock(&r->lock);
  size_t n = r->ngens;
  pthread_mutex_unlock(&r->lock);
  return n;
}

const rx_gen *rx_get(rx *r, size_t i) {
  return &r->gens[i];
}

uint64_t rx_bad_manifests(rx *r) {
  pthread_mutex_lock(&r->lock);
  uint64_t n = r->bad;
  pthread_mutex_unlock(&r->lock);
  return n;
}

void rx_refuse_auth(rx *r, unsigned n) {
  pthread_mutex_lock(&r->lock);
  r->refuse_auth = n;
  pthread_mutex_unlock(&r->lock);
}

int rx_hello_id(rx *r, size_t i, uint8_t session[16], uint8_t key[16]) {
  pthread_mutex_lock(&r->lock);
  int ok = i < r->hellos && i < RX_MAX_HELLOS;
  if (ok) {
    memcpy(session, r->ids[i], 16);
    memcpy(key, r->ids[i] + 16, 16);
  }
  pthread_mutex_unlock(&r->lock);
  return ok ? 0 : -1;
}

uint64_t rx_hellos(rx *r) {
  pthread_mutex_lock(&r->lock);
  uint64_t n = r->hellos;
  pthread_mutex_unlock(&r->lock);
  return n;
}
