/* tls.c: see tls.h.
 *
 * Invariants:
 *  1. A record send that said "again" MUST be repeated with the same bytes
 *     (GnuTLS's non-blocking contract): gt__tls_send caps a call at one
 *     record and the sender retries from the same out_off, whose bytes do
 *     not change until sent.
 *  2. Sends use MSG_NOSIGNAL | MSG_DONTWAIT, otherwise a dead daemon could
 *     kill the host with SIGPIPE or block the agent thread (sender.h
 *     invariant 1).
 *  3. Ciphertext goes out in the order GnuTLS produced it: the push function
 *     only appends to the connection's buffer (cbuf), and every send goes
 *     through flush_out, which sends from its start. gt__tls_send encrypts
 *     up to CBUF_BATCH bytes of records before one send, instead of one
 *     send per 16 KiB record (a syscall and a wakeup of the daemon each).
 *     While cbuf holds unsent bytes the session wants to write
 *     (gt__tls_want_write, gt__tls_unsent), otherwise the sender would poll
 *     for input while the daemon waits for our bytes.
 */
#include "config.h"

#include "tls.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>

#define RECORD_MAX 16384
/* Records encrypted before one send (invariant 3), and the buffer: room for
 * the batch plus a record and its overhead, and for handshake flights. */
#define CBUF_BATCH (128u << 10)
#define CBUF_CAP (CBUF_BATCH + 2 * RECORD_MAX + 4096)

struct gt__tls {
  gnutls_certificate_credentials_t x;
  gnutls_priority_t prio;
};

struct gt__tls_conn {
  gnutls_session_t s;
  int fd;
  uint8_t *cbuf; /* ciphertext not sent yet: cbuf[0..clen) (invariant 3) */
  size_t clen;
};

int gt__tls_new(const char *ca, const char *cert, const char *key,
                gt__tls **out) {
  if ((cert == NULL) != (key == NULL))
    return -EINVAL;
  gt__tls *t = calloc(1, sizeof *t);
  if (t == NULL)
    return -ENOMEM;
  if (gnutls_certificate_allocate_credentials(&t->x) < 0)
    goto fail_alloc;
  int rc = ca != NULL ? gnutls_certificate_set_x509_trust_file(
                            t->x, ca, GNUTLS_X509_FMT_PEM)
                      : gnutls_certificate_set_x509_system_trust(t->x);
  if (rc <= 0)
    goto fail_creds;
  if (cert != NULL && gnutls_certificate_set_x509_key_file(
                          t->x, cert, key, GNUTLS_X509_FMT_PEM) < 0)
    goto fail_creds;
  if (gnutls_priority_init(
          &t->prio, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", NULL) < 0)
    goto fail_creds;
  *out = t;
  return 0;
fail_creds:
  gnutls_certificate_free_credentials(t->x);
fail_alloc:
  free(t);
  return -EINVAL;
}

void gt__tls_free(gt__tls *t) {
  if (t == NULL)
    return;
  gnutls_priority_deinit(t->prio);
  gnutls_certificate_free_credentials(t->x);
  free(t);
}

/* Sends what cbuf holds: 1 all sent, 0 some left (EAGAIN), -1 errno set. */
static int flush_out(gt__tls_conn *c) {
  size_t off = 0;
  int rc = 1;
  while (off < c->clen) {
    ssize_t r = send(c->fd, c->cbuf + off, c->clen - off,
                     MSG_NOSIGNAL | MSG_DONTWAIT); /* invariant 2 */
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
      break;
    }
    off += (size_t)r;
  }
  if (off > 0) {
    int e = errno;
    memmove(c->cbuf, c->cbuf + off, c->clen - off);
    c->clen -= off;
    errno = e;
  }
  return rc;
}

static ssize_t push(gnutls_transport_ptr_t p, const void *buf, size_t n) {
  gt__tls_conn *c = p;
  if (c->clen + n > CBUF_CAP) {
    int f = flush_out(c);
    if (f < 0 || c->clen + n > CBUF_CAP) {
      gnutls_transport_set_errno(c->s, f < 0 ? errno : EAGAIN);
      return -1;
    }
  }
  memcpy(c->cbuf + c->clen, buf, n);
  c->clen += n;
  return (ssize_t)n;
}

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t n) {
  gt__tls_conn *c = p;
  ssize_t r = recv(c->fd, buf, n, MSG_DONTWAIT);
  if (r < 0)
    gnutls_transport_set_errno(c->s, errno);
  return r;
}

gt__tls_conn *gt__tls_begin(gt__tls *t, int fd, const char *host) {
  gt__tls_conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->fd = fd;
  c->cbuf = malloc(CBUF_CAP);
  if (c->cbuf == NULL ||
      gnutls_init(&c->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0) {
    free(c->cbuf);
    free(c);
    return NULL;
  }
  gnutls_priority_set(c->s, t->prio);
  gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, t->x);
  /* Names only (not IP literals) go into SNI. */
  if (host != NULL && strchr(host, ':') == NULL &&
      strspn(host, "0123456789.") != strlen(host))
    gnutls_server_name_set(c->s, GNUTLS_NAME_DNS, host, strlen(host));
  /* The handshake fails unless the daemon's certificate chains to the CA
   * and names host (DNS or IP SAN). */
  gnutls_session_set_verify_cert(c->s, host, 0);
  gnutls_transport_set_ptr(c->s, c);
  gnutls_transport_set_push_function(c->s, push);
  gnutls_transport_set_pull_function(c->s, pull);
  return c;
}

void gt__tls_end(gt__tls_conn *c) {
  if (c == NULL)
    return;
  gnutls_deinit(c->s);
  free(c->cbuf);
  free(c);
}

int gt__tls_handshake(gt__tls_conn *c) {
  int f = flush_out(c); /* our last flight first (invariant 3) */
  if (f < 0)
    return -1;
  if (f == 0)
    return 0;
  int rc = gnutls_handshake(c->s);
  if (flush_out(c) < 0)
    return -1;
  if (rc == 0)
    return 1; /* a Finished still in cbuf goes before the first record */
  if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED ||
      !gnutls_error_is_fatal(rc))
    return 0;
  return -1;
}

int gt__tls_want_write(gt__tls_conn *c) {
  return c->clen > 0 || gnutls_record_get_direction(c->s) == 1;
}

int gt__tls_unsent(const gt__tls_conn *c) {
  return c != NULL && c->clen > 0;
}

int gt__tls_flush(gt__tls_conn *c) {
  return flush_out(c);
}

static ssize_t to_errno(ssize_t r) {
  if (r >= 0)
    return r;
  /* EPROTO: a TLS failure (e.g. the daemon's alert refusing our
   * certificate, which TLS 1.3 sends after the client's handshake ended). */
  errno = r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED       ? EAGAIN
          : r == GNUTLS_E_PUSH_ERROR || r == GNUTLS_E_PULL_ERROR ? ECONNRESET
                                                                 : EPROTO;
  return -1;
}

ssize_t gt__tls_send(gt__tls_conn *c, const void *p, size_t n) {
  int f = flush_out(c); /* earlier records first (invariant 3) */
  if (f <= 0) {
    if (f == 0)
      errno = EAGAIN;
    return -1;
  }
  /* Whole records into cbuf, then one send. A record that says "again"
   * (cbuf full) ends the batch: what was taken is reported, and the next
   * call starts with that record's bytes (invariant 1). */
  size_t done = 0;
  while (done < n && c->clen < CBUF_BATCH) {
    size_t k = n - done < RECORD_MAX ? n - done : RECORD_MAX;
    ssize_t r = gnutls_record_send(c->s, (const uint8_t *)p + done, k);
    if (r < 0) {
      if (done == 0)
        return to_errno(r);
      break; /* reported by the next call */
    }
    done += (size_t)r;
  }
  if (flush_out(c) < 0 && done == 0)
    return -1;
  return (ssize_t)done;
}

ssize_t gt__tls_recv(gt__tls_conn *c, void *p, size_t n) {
  ssize_t r = gnutls_record_recv(c->s, p, n);
  if (c->clen > 0) {
    int e = errno;
    (void)flush_out(c); /* e.g. a key update's answer; errors surface on send */
    errno = e;
  }
  if (r == GNUTLS_E_REHANDSHAKE || r == GNUTLS_E_WARNING_ALERT_RECEIVED) {
    errno = EAGAIN;
    return -1;
  }
  return to_errno(r);
}

size_t gt__tls_pending(gt__tls_conn *c) {
  return gnutls_record_check_pending(c->s);
}
