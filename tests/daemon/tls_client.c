/* tls_client.c: see tls_client.h. */
#include "config.h"

#include "tls_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>

#include "../lib/prng.h"

#define BATCH (128u << 10) /* records per send, as the agent (tls.c) */

typedef struct tls_end {
  gnutls_session_t s;
  gnutls_certificate_credentials_t cred;
  int fd;
  unsigned split;
  uint64_t x;     /* PRNG for split */
  uint8_t *batch; /* split 0: records collected for one send */
  size_t blen;
  int batching;
} tls_end;

static int send_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static ssize_t push(gnutls_transport_ptr_t ptr, const void *p, size_t n) {
  tls_end *e = ptr;
  if (e->batching && e->blen + n <= BATCH + 2 * 16384 + 4096) {
    memcpy(e->batch + e->blen, p, n);
    e->blen += n;
    return (ssize_t)n;
  }
  return send_all(e->fd, p, n) < 0 ? -1 : (ssize_t)n;
}

static ssize_t pull(gnutls_transport_ptr_t ptr, void *p, size_t n) {
  tls_end *e = ptr;
  ssize_t r;
  do
    r = recv(e->fd, p, n, 0);
  while (r < 0 && errno == EINTR);
  return r;
}

static ssize_t tls_xsend(void *ctx, const void *p, size_t n) {
  tls_end *e = ctx;
  if (e->split > 0) {
    size_t k = 1 + (size_t)((lcg64(&e->x) >> 33) % e->split);
    if (n > k)
      n = k; /* one record of k bytes; the caller loops */
  } else if (e->batch != NULL) {
    /* Like the agent: full records into memory, then one send. */
    size_t done = 0;
    e->batching = 1;
    while (done < n && e->blen < BATCH) {
      ssize_t r = gnutls_record_send(e->s, (const uint8_t *)p + done, n - done);
      if (r < 0)
        break;
      done += (size_t)r;
    }
    e->batching = 0;
    int rc = send_all(e->fd, e->batch, e->blen);
    e->blen = 0;
    if (rc < 0 || done == 0) {
      errno = EPIPE;
      return -1;
    }
    return (ssize_t)done;
  }
  ssize_t r;
  do
    r = gnutls_record_send(e->s, p, n);
  while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
  if (r < 0)
    errno = EPIPE;
  return r < 0 ? -1 : r;
}

static ssize_t tls_xrecv(void *ctx, void *p, size_t n) {
  tls_end *e = ctx;
  ssize_t r;
  do
    r = gnutls_record_recv(e->s, p, n);
  while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
  if (r < 0)
    errno = ECONNRESET;
  return r < 0 ? -1 : r;
}

static int wrap(gtc *c, const char *ca_file, const char *cert_file,
                const char *key_file, int wrong_key, unsigned split,
                unsigned seed) {
  tls_end *e = calloc(1, sizeof *e);
  if (e == NULL)
    return -1;
  e->split = split;
  e->x = seed;
  e->fd = c->fd;
  if (split == 0 && (e->batch = malloc(BATCH + 2 * 16384 + 4096)) == NULL)
    goto fail_end;
  if (gnutls_certificate_allocate_credentials(&e->cred) < 0)
    goto fail_end;
  if (gnutls_certificate_set_x509_trust_file(e->cred, ca_file,
                                             GNUTLS_X509_FMT_PEM) <= 0)
    goto fail_cred;
  if (wrong_key)
    gnutls_certificate_set_flags(e->cred,
                                 GNUTLS_CERTIFICATE_SKIP_KEY_CERT_MATCH);
  if (cert_file != NULL &&
      gnutls_certificate_set_x509_key_file(e->cred, cert_file, key_file,
                                           GNUTLS_X509_FMT_PEM) < 0)
    goto fail_cred;
  if (gnutls_init(&e->s, GNUTLS_CLIENT) < 0)
    goto fail_cred;
  gnutls_set_default_priority(e->s);
  gnutls_credentials_set(e->s, GNUTLS_CRD_CERTIFICATE, e->cred);
  gnutls_session_set_verify_cert(e->s, "127.0.0.1", 0);
  gnutls_transport_set_ptr(e->s, e);
  gnutls_transport_set_push_function(e->s, push);
  gnutls_transport_set_pull_function(e->s, pull);
  int rc;
  do
    rc = gnutls_handshake(e->s);
  while (rc < 0 && !gnutls_error_is_fatal(rc));
  if (rc < 0) {
    fprintf(stderr, "TLS handshake: %s\n", gnutls_strerror(rc));
    goto fail_session;
  }
  c->xsend = tls_xsend;
  c->xrecv = tls_xrecv;
  c->xctx = e;
  return 0;
fail_session:
  gnutls_deinit(e->s);
  gnutls_certificate_free_credentials(e->cred);
  free(e->batch);
  free(e);
  return -2; /* the peer refused: not our own set-up */
fail_cred:
  gnutls_certificate_free_credentials(e->cred);
fail_end:
  free(e->batch);
  free(e);
  return -1;
}

int gtc_tls_cipher(const gtc *c) {
  const tls_end *e = c->xctx;
  return e != NULL ? (int)gnutls_cipher_get(e->s) : 0;
}

int gtc_tls_wrap(gtc *c, const char *ca_file, unsigned split, unsigned seed) {
  return wrap(c, ca_file, NULL, NULL, 0, split, seed);
}

int gtc_tls_wrap_cert(gtc *c, const char *ca_file, const char *cert_file,
                      const char *key_file, int wrong_key) {
  return wrap(c, ca_file, cert_file, key_file, wrong_key, 0, 0);
}

void gtc_tls_end(gtc *c) {
  tls_end *e = c->xctx;
  if (e == NULL)
    return;
  gnutls_deinit(e->s);
  gnutls_certificate_free_credentials(e->cred);
  free(e->batch);
  free(e);
  c->xctx = NULL;
  c->xsend = NULL;
  c->xrecv = NULL;
}

int64_t gtd_metric_tls(gtd *d, const char *ca_file, const char *name) {
  gtc c;
  int64_t v = -1;
  if (gtc_connect(&c, d->http_port) < 0)
    return -1;
  if (gtc_tls_wrap(&c, ca_file, 0, 0) < 0) {
    gtc_close(&c);
    return -1;
  }
  static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
  size_t cap = 1u << 20, len = 0;
  char *buf = malloc(cap + 1);
  if (buf != NULL && tls_xsend(c.xctx, req, sizeof req - 1) > 0) {
    ssize_t r;
    while (len < cap && (r = tls_xrecv(c.xctx, buf + len, cap - len)) > 0)
      len += (size_t)r;
    buf[len] = '\0';
    v = gtd_metric_in(buf, name);
  }
  free(buf);
  gtc_tls_end(&c);
  gtc_close(&c);
  return v;
}

int gtc_tls_pki(const char *dir) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "(cd '%s' && "
           "certtool --generate-privkey --key-type=ecdsa --outfile ca.key && "
           "printf 'cn = \"test CA\"\\nca\\ncert_signing_key\\n"
           "expiration_days = 2\\n' > ca.tmpl && "
           "certtool --generate-self-signed --load-privkey ca.key "
           "--template ca.tmpl --outfile ca.pem && "
           "certtool --generate-privkey --key-type=ecdsa --outfile srv.key && "
           "chmod 600 srv.key ca.key && "
           "printf 'cn = \"gentraced\"\\nip_address = \"127.0.0.1\"\\n"
           "tls_www_server\\nexpiration_days = 2\\n' > srv.tmpl && "
           "certtool --generate-certificate --load-privkey srv.key "
           "--load-ca-certificate ca.pem --load-ca-privkey ca.key "
           "--template srv.tmpl --outfile srv.pem) >/dev/null 2>&1",
           dir);
  return system(cmd) == 0 ? 0 : -1;
}

int gtc_tls_pki_clients(const char *dir) {
  char cmd[4096];
  snprintf(
      cmd, sizeof cmd,
      "(cd '%s' && "
      "for k in cli rogue expired other evil; do "
      "certtool --generate-privkey --key-type=ecdsa --outfile $k.key && "
      "chmod 600 $k.key || exit 1; done && "
      "printf 'cn = \"evil CA\"\\nca\\ncert_signing_key\\n' > evil.tmpl && "
      "certtool --generate-self-signed --load-privkey evil.key "
      "--template evil.tmpl --outfile evil.pem && "
      "printf 'cn = \"cli\"\\n"
      "tls_www_client\\nexpiration_days = 2\\n' > cli.tmpl && "
      "certtool --generate-certificate --load-privkey cli.key "
      "--load-ca-certificate ca.pem --load-ca-privkey ca.key "
      "--template cli.tmpl --outfile cli.pem && "
      "certtool --generate-certificate --load-privkey rogue.key "
      "--load-ca-certificate evil.pem --load-ca-privkey evil.key "
      "--template cli.tmpl --outfile rogue.pem && "
      "printf 'cn = \"expired\"\\ntls_www_client\\n"
      "activation_date = \"2020-01-01 00:00:00\"\\n"
      "expiration_date = \"2020-01-02 00:00:00\"\\n' > expired.tmpl && "
      "certtool --generate-certificate --load-privkey expired.key "
      "--load-ca-certificate ca.pem --load-ca-privkey ca.key "
      "--template expired.tmpl --outfile expired.pem) >/dev/null 2>&1",
      dir);
  return system(cmd) == 0 ? 0 : -1;
}
