/* import_send.c: an import set to gentraced over the agent protocol
 * (PROTOCOL.md), like an agent: HELLO, WELCOME, then per generation its
 * body records in BATCH frames and its manifest in GEN_END, waiting for the
 * ACK before the next one. Blocking sockets with generous timeouts: this is
 * a one-shot CLI, not an agent inside someone's process.
 *
 * Nothing is sent before the WELCOME's limits were checked against every
 * generation, so a daemon that would refuse one for its size refuses the
 * import before it stores anything.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "frame.h"
#include "import.h"

#define IO_TIMEOUT_S 60
#define BATCH_PAYLOAD_MAX (256u << 10) /* the reference agent's frame size */

static int dial(const char *addr) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
    return GTP_E_BADARG;
  size_t hl = (size_t)(colon - addr);
  memcpy(host, addr, hl);
  host[hl] = 0;
  if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [v6]:port */
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = 0;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
    return -EHOSTUNREACH;
  int fd = -1, err = -ECONNREFUSED;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = -errno;
      continue;
    }
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
      break;
    err = -errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd >= 0 ? fd : err;
}

static int send_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return errno == EAGAIN ? GTP_E_TIMEOUT : -errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

typedef struct rd {
  int fd;
  gtp_frame_decoder dec;
  uint8_t buf[64 << 10];
  size_t at, len;
} rd;

/* The next frame from the daemon, HEARTBEATs skipped. */
static int read_frame(rd *r, gtp_frame *f) {
  for (;;) {
    while (r->at < r->len) {
      size_t used;
      int rc = gtp_frame_decoder_feed(&r->dec, r->buf + r->at, r->len - r->at,
                                      &used, f);
      r->at += used;
      if (rc < 0)
        return rc;
      if (rc == 1 && f->type != GTP_FR_HEARTBEAT)
        return 0;
    }
    ssize_t n = recv(r->fd, r->buf, sizeof r->buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno == EAGAIN ? GTP_E_TIMEOUT : -errno;
    if (n == 0)
      return GTP_E_SHUTDOWN; /* closed without a word */
    r->at = 0;
    r->len = (size_t)n;
  }
}

/* An ERROR or GOODBYE frame as a code and a message. */
static int peer_error(const gtp_frame *f, char *msg, size_t msglen) {
  if (f->type == GTP_FR_ERROR) {
    gtp_error_frame e;
    if (gtp_frame_error_decode(f->payload, f->len, &e) == 0) {
      snprintf(msg, msglen, "%.*s", (int)e.reason.len, e.reason.ptr);
      return e.code < 0 ? e.code : GTP_E_CORRUPT;
    }
  } else if (f->type == GTP_FR_GOODBYE) {
    gtp_goodbye g;
    if (gtp_frame_goodbye_decode(f->payload, f->len, &g) == 0) {
      snprintf(msg, msglen, "%.*s", (int)g.reason.len, g.reason.ptr);
      return g.code < 0 ? g.code : GTP_E_SHUTDOWN;
    }
  }
  snprintf(msg, msglen, "unexpected %s frame", gtp_frame_name(f->type));
  return GTP_E_STATE;
}

/* BATCH frames of whole records, each payload <= BATCH_PAYLOAD_MAX. */
static int send_body(int fd, gtp_wbuf *w, const import_gen *g) {
  const uint8_t *p = g->body, *end = g->body + g->body_len;
  while (p < end) {
    const uint8_t *q = p;
    gtp_record rec;
    while (q < end && gtp_record_parse(q, (size_t)(end - q), &rec) == 0 &&
           (q == p || (size_t)(q - p) + rec.size <= BATCH_PAYLOAD_MAX - 16))
      q += rec.size;
    if (q == p)
      return GTP_E_CORRUPT; /* built by import_build: cannot happen */
    gtp_wbuf_reset(w);
    int rc = gtp_frame_batch_encode(w, g->gen, p, (size_t)(q - p));
    if (rc || (rc = send_all(fd, w->data, w->len)))
      return rc;
    p = q;
  }
  return 0;
}

int import_send(const char *addr, const gtp_gen_start *id, const char *token,
                const import_set *s, size_t *acked, char *msg, size_t msglen) {
  *acked = 0;
  msg[0] = 0;
  int fd = dial(addr);
  if (fd < 0)
    return fd;
  rd *r = calloc(1, sizeof *r);
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  int rc = -ENOMEM;
  if (!r)
    goto out;
  r->fd = fd;
  gtp_frame_decoder_init(&r->dec, 0);

  gtp_hello h = {.min_version = GTP_PROTO_VERSION,
                 .max_version = GTP_PROTO_VERSION,
                 .service = id->service,
                 .host = id->host,
                 .agent_version = id->agent_version,
                 .pid = id->pid,
                 .process_start_ns = id->process_start_ns,
                 .ntags = id->ntags};
  memcpy(h.session, id->session, 16);
  /* Protocol v2: the session key proves ownership of the session; an
   * import is a new session, so a fresh key drawn here is its only one. */
  if (getrandom(h.session_key, sizeof h.session_key, 0) !=
      (ssize_t)sizeof h.session_key) {
    rc = -errno;
    goto out_dec;
  }
  memcpy(h.tags, id->tags, sizeof h.tags);
  if (token)
    h.token = (gtp_str){token, strlen(token)};
  if ((rc = gtp_frame_hello_encode(&w, &h)) ||
      (rc = send_all(fd, w.data, w.len)))
    goto out_dec;
  gtp_frame f;
  if ((rc = read_frame(r, &f)))
    goto out_dec;
  if (f.type != GTP_FR_WELCOME) {
    rc = peer_error(&f, msg, msglen);
    goto out_dec;
  }
  gtp_welcome wel;
  if ((rc = gtp_frame_welcome_decode(f.payload, f.len, &wel)))
    goto out_dec;
  for (size_t i = 0; i < s->ngens; i++)
    if (wel.max_gen_bytes && s->gens[i].body_len + 8192 > wel.max_gen_bytes) {
      snprintf(msg, msglen,
               "generation %zu is %zu bytes, the daemon takes at most %llu",
               i + 1, s->gens[i].body_len,
               (unsigned long long)wel.max_gen_bytes);
      rc = GTP_E_TOOBIG;
      goto out_dec;
    }
  for (size_t i = 0; i < s->ngens; i++) {
    const import_gen *g = &s->gens[i];
    if ((rc = send_body(fd, &w, g)))
      goto out_dec;
    gtp_wbuf_reset(&w);
    if ((rc = gtp_frame_gen_end_encode(&w, &g->end)) ||
        (rc = send_all(fd, w.data, w.len)))
      goto out_dec;
    if ((rc = read_frame(r, &f)))
      goto out_dec;
    uint64_t ack;
    if (f.type != GTP_FR_ACK) {
      rc = peer_error(&f, msg, msglen);
      goto out_dec;
    }
    if ((rc = gtp_frame_ack_decode(f.payload, f.len, &ack)))
      goto out_dec;
    if (ack != g->gen) {
      snprintf(msg, msglen, "ACK for generation %llu, expected %llu",
               (unsigned long long)ack, (unsigned long long)g->gen);
      rc = GTP_E_GEN;
      goto out_dec;
    }
    (*acked)++;
  }
  gtp_wbuf_reset(&w);
  if (gtp_frame_goodbye_encode(&w, 0, "import done") == 0)
    (void)send_all(fd, w.data, w.len);
  rc = 0;
out_dec:
  gtp_frame_decoder_fini(&r->dec);
out:
  free(r);
  gtp_wbuf_fini(&w);
  close(fd);
  return rc;
}
