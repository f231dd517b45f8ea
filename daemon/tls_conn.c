/* tls_conn.c: TLS on the agent port (see tls_conn.h).
 *
 * Design: GnuTLS never touches the socket. Its pull function hands it the
 * ciphertext of the current libuv read (tls_conn_input sets in/in_len) and
 * says EAGAIN when that is used up; GnuTLS keeps a partial record in its own
 * buffer until the next read brings the rest. Its push function copies the
 * ciphertext into a uv_write (ingest_conn_write_raw), which never blocks.
 * So the handshake and every record run to EAGAIN on the loop and never
 * wait, and a peer that stalls mid-handshake only holds its connection
 * until the handshake timeout (the connection stays in CONN_HANDSHAKE until
 * HELLO, so the sweep's timer covers TLS and HELLO together).
 *
 * Invariants:
 *  1. No plaintext frame MUST reach ingest before the handshake completed
 *     and (with --tls-client-ca) the client certificate verified, otherwise
 *     an untrusted client could stream.
 *  2. A connection holds a reference on the credentials it was created
 *     with (creds.refs); a reload swaps srv->cur for new connections only,
 *     and credentials are freed when their last session is, otherwise a
 *     reload would free what a live GnuTLS session reads.
 *  3. Every TLS connection counts TLS_CONN_BYTES in ing->tls_bytes, part of
 *     budget_used (GnuTLS holds up to a record in and a record out for it;
 *     the plaintext it yields goes to the frame decoder, counted there),
 *     otherwise --max-buffer would not bound TLS peers.
 *  4. With service names in the certificate, a HELLO for any other service
 *     MUST be refused before anything of the session is touched (called
 *     before session_auth_hello), otherwise a refused claim could bind a
 *     session key or store a generation.
 *  5. While a frame is staged (c->stage), plaintext MUST be decrypted into
 *     the staged room only, and never more than its missing bytes (GnuTLS
 *     keeps the rest of a record for the next call), otherwise the next
 *     frame would land inside the generation. This is how large BATCH
 *     frames skip the plaintext buffer and the decoder's copy over TLS as
 *     they skip the decoder in plain text: ciphertext is copied once into
 *     GnuTLS and decrypted once into its final place.
 */
#include "config.h"

#include "tls_conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "gtp_error.h"
#include "ingest_int.h"
#include "log.h"

#define TLS_CONN_BYTES (40u << 10) /* invariant 3 */
#define TLS_PLAIN_BUF (64u << 10)
#define SAN_MAX 32 /* service names per certificate */
#define SAN_PREFIX "gentrace:service/"
#define EXPIRY_WARN_S (7 * 86400)

typedef struct creds {
  gnutls_certificate_credentials_t x;
  int refs; /* the server's + one per session (invariant 2) */
} creds;

struct tls_server {
  tls_server_config cfg; /* owned copies of the paths */
  creds *cur;
  gnutls_priority_t prio;
  uint8_t *plain; /* one plaintext buffer for every connection (one read at
                     a time on the loop) */
  int64_t not_after;
  int64_t expiry_logged_s;
  /* Counters: written by the loop, read by HTTP threads (relaxed). */
  uint64_t handshakes, failed, untrusted, service_refused, reloads,
      reload_failed;
};

struct tls_conn {
  gnutls_session_t s;
  const tls_conn_ops *ops; /* ingest.c's side */
  creds *cr;
  const uint8_t *in; /* ciphertext of the current read */
  size_t in_len;
  int done;        /* handshake complete and verified (invariant 1) */
  int any_service; /* certificate names no service */
  unsigned nsvc;
  char *svc[SAN_MAX];
};

#define ADD(f) __atomic_fetch_add(&srv->f, 1, __ATOMIC_RELAXED)
#define GET(f) __atomic_load_n(&srv->f, __ATOMIC_RELAXED)

static int cause_set(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int cause_set(char **cause, const char *fmt, ...) {
  if (cause != NULL) {
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
      *cause = NULL;
    va_end(ap);
  }
  return GTP_E_TLS;
}

static void creds_unref(creds *cr) {
  if (cr != NULL && --cr->refs == 0) {
    gnutls_certificate_free_credentials(cr->x);
    free(cr);
  }
}

/* A private key others can read is no secret: refuse it (like ssh). */
static int key_private(const char *path, char **cause) {
  struct stat st;
  if (stat(path, &st) < 0)
    return cause_set(cause, "--tls-key %s: %s", path, strerror(errno));
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0)
    return cause_set(cause,
                     "--tls-key %s is readable by other users (mode %04o): "
                     "chmod 600 it",
                     path, (unsigned)(st.st_mode & 07777));
  return 0;
}

static int64_t cert_not_after(gnutls_certificate_credentials_t x) {
  gnutls_x509_crt_t *crts = NULL;
  unsigned n = 0;
  int64_t t = 0;
  if (gnutls_certificate_get_x509_crt(x, 0, &crts, &n) == 0 && n > 0) {
    t = (int64_t)gnutls_x509_crt_get_expiration_time(crts[0]);
    for (unsigned i = 0; i < n; i++)
      gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);
  }
  return t;
}

static int creds_load(const tls_server_config *cfg, creds **out,
                      int64_t *not_after, char **cause) {
  int rc = key_private(cfg->key_file, cause);
  if (rc < 0)
    return rc;
  creds *cr = calloc(1, sizeof *cr);
  if (cr == NULL)
    return cause_set(cause, "out of memory");
  if (gnutls_certificate_allocate_credentials(&cr->x) < 0) {
    free(cr);
    return cause_set(cause, "out of memory");
  }
  cr->refs = 1;
  rc = gnutls_certificate_set_x509_key_file(cr->x, cfg->cert_file,
                                            cfg->key_file, GNUTLS_X509_FMT_PEM);
  if (rc < 0) {
    cause_set(cause, "--tls-cert %s / --tls-key %s: %s", cfg->cert_file,
              cfg->key_file, gnutls_strerror(rc));
    goto fail_creds;
  }
  if (cfg->client_ca_file != NULL) {
    rc = gnutls_certificate_set_x509_trust_file(cr->x, cfg->client_ca_file,
                                                GNUTLS_X509_FMT_PEM);
    if (rc <= 0) {
      cause_set(cause, "--tls-client-ca %s: %s", cfg->client_ca_file,
                rc == 0 ? "no certificate in it" : gnutls_strerror(rc));
      goto fail_creds;
    }
  }
  *not_after = cert_not_after(cr->x);
  *out = cr;
  return 0;
fail_creds:
  creds_unref(cr);
  return GTP_E_TLS;
}

static char *dup_or_null(const char *s) {
  return s != NULL ? strdup(s) : NULL;
}

int tls_server_new(const tls_server_config *cfg, tls_server **out,
                   char **cause) {
  if (cfg->cert_file == NULL || cfg->key_file == NULL)
    return cause_set(cause, "--tls-cert and --tls-key go together");
  tls_server *srv = calloc(1, sizeof *srv);
  if (srv == NULL)
    return cause_set(cause, "out of memory");
  srv->cfg.cert_file = dup_or_null(cfg->cert_file);
  srv->cfg.key_file = dup_or_null(cfg->key_file);
  srv->cfg.client_ca_file = dup_or_null(cfg->client_ca_file);
  srv->cfg.require_service_san = cfg->require_service_san;
  srv->plain = malloc(TLS_PLAIN_BUF);
  int rc;
  if (srv->plain == NULL || srv->cfg.cert_file == NULL ||
      srv->cfg.key_file == NULL) {
    rc = cause_set(cause, "out of memory");
    goto fail_srv;
  }
  /* TLS 1.3, 1.2 allowed; nothing older. */
  if (gnutls_priority_init(
          &srv->prio, "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2", NULL) < 0) {
    rc = cause_set(cause, "GnuTLS priority string refused");
    goto fail_srv;
  }
  if ((rc = creds_load(&srv->cfg, &srv->cur, &srv->not_after, cause)) < 0)
    goto fail_prio;
  tls_server_check_expiry(srv);
  *out = srv;
  return 0;
fail_prio:
  gnutls_priority_deinit(srv->prio);
fail_srv:
  free(srv->plain);
  free((char *)srv->cfg.cert_file);
  free((char *)srv->cfg.key_file);
  free((char *)srv->cfg.client_ca_file);
  free(srv);
  return rc;
}

int tls_server_reload(tls_server *srv, char **cause) {
  creds *cr;
  int64_t na;
  int rc = creds_load(&srv->cfg, &cr, &na, cause);
  if (rc < 0) {
    ADD(reload_failed);
    return rc;
  }
  creds_unref(srv->cur); /* live sessions keep theirs (invariant 2) */
  srv->cur = cr;
  __atomic_store_n(&srv->not_after, na, __ATOMIC_RELAXED);
  srv->expiry_logged_s = 0;
  ADD(reloads);
  tls_server_check_expiry(srv);
  return 0;
}

void tls_server_free(tls_server *srv) {
  if (srv == NULL)
    return;
  creds_unref(srv->cur);
  gnutls_priority_deinit(srv->prio);
  free(srv->plain);
  free((char *)srv->cfg.cert_file);
  free((char *)srv->cfg.key_file);
  free((char *)srv->cfg.client_ca_file);
  free(srv);
}

int64_t tls_server_not_after(const tls_server *srv) {
  return __atomic_load_n(&srv->not_after, __ATOMIC_RELAXED);
}

void tls_server_check_expiry(tls_server *srv) {
  int64_t now = (int64_t)time(NULL);
  int64_t left = tls_server_not_after(srv) - now;
  if (left >= EXPIRY_WARN_S)
    return;
  if (srv->expiry_logged_s != 0 && now - srv->expiry_logged_s < 86400)
    return;
  srv->expiry_logged_s = now;
  char q[600];
  log_warn(left > 0 ? "TLS certificate expires within a week"
                    : "TLS certificate has expired",
           "cert=%s seconds_left=%" PRId64,
           log_quote(q, sizeof q, srv->cfg.cert_file), left);
}

void tls_attach(ingest *ing, tls_server *srv) {
  ing->tls = srv;
}

/* ---------------------------------------------------------------- transport */

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t len) {
  conn *c = p;
  tls_conn *t = c->tls;
  if (t->in_len == 0) {
    gnutls_transport_set_errno(t->s, EAGAIN);
    return -1;
  }
  size_t n = len < t->in_len ? len : t->in_len;
  memcpy(buf, t->in, n);
  t->in += n;
  t->in_len -= n;
  return (ssize_t)n;
}

static ssize_t push(gnutls_transport_ptr_t p, const void *buf, size_t len) {
  conn *c = p;
  c->tls->ops->write_raw(c, buf, len);
  return (ssize_t)len; /* queued: a uv_write never blocks */
}

void tls_conn_start(conn *c, const tls_conn_ops *ops) {
  ingest *ing = c->ing;
  tls_server *srv = ing->tls;
  tls_conn *t = calloc(1, sizeof *t);
  if (t == NULL || gnutls_init(&t->s, GNUTLS_SERVER | GNUTLS_NONBLOCK) < 0) {
    /* Out of memory (GnuTLS fails only so here): closed untold, since a
     * plain ERROR frame means nothing to a TLS client; it reconnects. */
    CTR_ADD(ing, oom, 1);
    log_warn("out of memory", "conn=%" PRIu64 " what=tls-session", c->id);
    free(t);
    ops->close(c, 0, 0, 0, NULL);
    return;
  }
  t->ops = ops;
  t->cr = srv->cur;
  t->cr->refs++;
  gnutls_priority_set(t->s, srv->prio);
  gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, t->cr->x);
  if (srv->cfg.client_ca_file != NULL)
    gnutls_certificate_server_set_request(t->s, GNUTLS_CERT_REQUIRE);
  gnutls_transport_set_ptr(t->s, c);
  gnutls_transport_set_pull_function(t->s, pull);
  gnutls_transport_set_push_function(t->s, push);
  c->tls = t;
  ing->tls_bytes += TLS_CONN_BYTES; /* invariant 3 */
  CTR_SET(ing, budget_tls, ing->tls_bytes);
}

void tls_conn_free(conn *c) {
  tls_conn *t = c->tls;
  if (t == NULL)
    return;
  c->tls = NULL;
  c->ing->tls_bytes -= TLS_CONN_BYTES;
  CTR_SET(c->ing, budget_tls, c->ing->tls_bytes);
  gnutls_deinit(t->s);
  creds_unref(t->cr);
  for (unsigned i = 0; i < t->nsvc; i++)
    free(t->svc[i]);
  free(t);
}

/* ------------------------------------------------------------- handshake */

static void refuse(conn *c, const char *why, const char *detail);

/* Closes c after telling the peer why in a fatal alert (alert < 0: the
 * one GnuTLS finds for that error code). Without it a TLS 1.3 client,
 * whose handshake ended before ours, would see a bare EOF and could not
 * tell a refused certificate from a daemon going away. The alert goes out
 * through push before the close, which flushes queued writes. */
static void refuse_alert(conn *c, int alert, const char *why,
                         const char *detail) {
  gnutls_session_t s = c->tls->s;
  if (alert < 0)
    (void)gnutls_alert_send_appropriate(s, alert);
  else
    (void)gnutls_alert_send(s, GNUTLS_AL_FATAL,
                            (gnutls_alert_description_t)alert);
  refuse(c, why, detail);
}

static void refuse(conn *c, const char *why, const char *detail) {
  char q[256], w[64];
  log_warn("agent TLS refused", "conn=%" PRIu64 " peer=%s reason=%s detail=%s",
           c->id, c->peer, log_quote(w, sizeof w, why),
           log_quote(q, sizeof q, detail));
  c->tls->ops->close(c, 0, 0, 0, NULL);
}

/* Reads the peer certificate's service names (SAN URIs). */
static int read_services(conn *c, tls_conn *t) {
  unsigned n = 0;
  const gnutls_datum_t *raw = gnutls_certificate_get_peers(t->s, &n);
  if (raw == NULL || n == 0)
    return -1;
  gnutls_x509_crt_t crt;
  if (gnutls_x509_crt_init(&crt) < 0)
    return -1;
  if (gnutls_x509_crt_import(crt, &raw[0], GNUTLS_X509_FMT_DER) < 0) {
    gnutls_x509_crt_deinit(crt);
    return -1;
  }
  const size_t plen = sizeof SAN_PREFIX - 1;
  for (unsigned seq = 0; seq < 1024; seq++) {
    char name[512];
    size_t len = sizeof name;
    int type = gnutls_x509_crt_get_subject_alt_name(crt, seq, name, &len, NULL);
    if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
      break;
    if (type == GNUTLS_E_SHORT_MEMORY_BUFFER)
      continue; /* longer than any service name we accept */
    if (type != GNUTLS_SAN_URI || len <= plen || len >= sizeof name ||
        memcmp(name, SAN_PREFIX, plen) != 0)
      continue;
    if (t->nsvc == SAN_MAX)
      break;
    t->svc[t->nsvc] = strndup(name + plen, len - plen);
    if (t->svc[t->nsvc] != NULL)
      t->nsvc++;
  }
  gnutls_x509_crt_deinit(crt);
  (void)c;
  return 0;
}

/* Runs the handshake on; 1 when done and verified, 0 waiting for bytes,
 * -1 when c was closed. */
static int handshake(conn *c, tls_conn *t) {
  tls_server *srv = c->ing->tls;
  int rc = gnutls_handshake(t->s);
  if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED)
    return 0;
  if (rc < 0) {
    ADD(failed);
    refuse_alert(c, rc, "handshake", gnutls_strerror(rc));
    return -1;
  }
  if (srv->cfg.client_ca_file != NULL) {
    unsigned status = 0;
    rc = gnutls_certificate_verify_peers2(t->s, &status);
    if (rc < 0 || status != 0) {
      gnutls_datum_t out = {NULL, 0};
      if (rc >= 0)
        gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509,
                                                     &out, 0);
      ADD(untrusted);
      ADD(failed);
      refuse_alert(
          c,
          rc < 0                                         ? rc
          : (status & GNUTLS_CERT_SIGNER_NOT_FOUND) != 0 ? GNUTLS_A_UNKNOWN_CA
          : (status & GNUTLS_CERT_EXPIRED) != 0 ? GNUTLS_A_CERTIFICATE_EXPIRED
                                                : GNUTLS_A_BAD_CERTIFICATE,
          "client certificate",
          rc < 0             ? gnutls_strerror(rc)
          : out.data != NULL ? (const char *)out.data
                             : "untrusted");
      gnutls_free(out.data);
      return -1;
    }
    if (read_services(c, t) < 0) {
      ADD(failed);
      refuse_alert(c, GNUTLS_A_BAD_CERTIFICATE, "client certificate",
                   "unreadable");
      return -1;
    }
    if (t->nsvc == 0 && srv->cfg.require_service_san) {
      ADD(untrusted);
      ADD(failed);
      refuse_alert(c, GNUTLS_A_ACCESS_DENIED, "client certificate",
                   "names no service (--tls-require-service-san)");
      return -1;
    }
  }
  t->any_service = t->nsvc == 0;
  t->done = 1;
  ADD(handshakes);
  return 1;
}

void tls_conn_input(conn *c, const uint8_t *p, size_t n) {
  tls_conn *t = c->tls;
  tls_server *srv = c->ing->tls;
  t->in = p;
  t->in_len = n;
  if (!t->done && handshake(c, t) <= 0)
    goto out;
  while (c->state != CONN_CLOSING) {
    ssize_t r;
    if (c->stage != NULL) {
      /* Decrypt straight into the staged frame's room, exactly its missing
       * bytes (invariant 5; ingest.c invariant 9). */
      opengen *g = c->stage;
      r = gnutls_record_recv(t->s, g->buf.data + g->buf.len + c->stage_have,
                             c->stage_len - c->stage_have);
      if (r > 0) {
        (void)t->ops->stage_read(c, (size_t)r);
        continue;
      }
    } else {
      r = gnutls_record_recv(t->s, srv->plain, TLS_PLAIN_BUF);
      if (r > 0) {
        t->ops->input(c, srv->plain, (size_t)r);
        continue;
      }
    }
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      break;
    if (r == 0) { /* close_notify: like EOF */
      t->ops->close(c, 0, 0, 0, NULL);
      break;
    }
    if (!gnutls_error_is_fatal((int)r))
      continue; /* e.g. a TLS 1.3 key update, handled by GnuTLS */
    ADD(failed);
    refuse(c, "record", gnutls_strerror((int)r));
    break;
  }
out:
  t->in = NULL;
  t->in_len = 0;
}

void tls_conn_send(conn *c, const uint8_t *p, size_t n) {
  tls_conn *t = c->tls;
  if (!t->done)
    return; /* nothing to say in plain text to a TLS peer */
  while (n > 0) {
    ssize_t r = gnutls_record_send(t->s, p, n);
    if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
      continue; /* cannot happen: push never says EAGAIN */
    if (r < 0)
      return;
    p += r;
    n -= (size_t)r;
  }
}

void tls_conn_bye(conn *c) {
  tls_conn *t = c->tls;
  if (t != NULL && t->done)
    (void)gnutls_bye(t->s, GNUTLS_SHUT_WR);
}

int tls_conn_check_service(conn *c, const char *svc, size_t len) {
  tls_conn *t = c->tls;
  if (t == NULL || t->any_service)
    return 0;
  for (unsigned i = 0; i < t->nsvc; i++)
    if (strlen(t->svc[i]) == len && memcmp(t->svc[i], svc, len) == 0)
      return 0;
  tls_server *srv = c->ing->tls;
  ADD(service_refused);
  char q[300], r[300];
  snprintf(r, sizeof r, "%.*s", (int)(len > 256 ? 256 : len), svc);
  log_warn("agent refused",
           "conn=%" PRIu64 " peer=%s error=AUTH reason=\"service not in the "
           "client certificate\" service=%s",
           c->id, c->peer, log_quote(q, sizeof q, r));
  t->ops->close(c, GTP_E_AUTH, 0, 0,
                "the client certificate does not name this service");
  return -1;
}

/* ---------------------------------------------------------------- metrics */

void tls_server_metrics(tls_server *srv, gtp_wbuf *b) {
  char line[2048];
  int64_t left = tls_server_not_after(srv) - (int64_t)time(NULL);
  int n = snprintf(
      line, sizeof line,
      "# HELP gentrace_tls_cert_expiry_seconds Seconds until the loaded "
      "TLS certificate expires (negative: expired).\n"
      "# TYPE gentrace_tls_cert_expiry_seconds gauge\n"
      "gentrace_tls_cert_expiry_seconds %" PRId64 "\n"
      "# HELP gentrace_tls_handshakes_total Agent TLS handshakes completed.\n"
      "# TYPE gentrace_tls_handshakes_total counter\n"
      "gentrace_tls_handshakes_total %" PRIu64 "\n"
      "# HELP gentrace_tls_failures_total Agent TLS connections refused "
      "(handshake, certificate, record).\n"
      "# TYPE gentrace_tls_failures_total counter\n"
      "gentrace_tls_failures_total %" PRIu64 "\n"
      "# HELP gentrace_tls_untrusted_total Client certificates refused.\n"
      "# TYPE gentrace_tls_untrusted_total counter\n"
      "gentrace_tls_untrusted_total %" PRIu64 "\n"
      "# HELP gentrace_tls_service_refused_total HELLOs for a service the "
      "client certificate does not name.\n"
      "# TYPE gentrace_tls_service_refused_total counter\n"
      "gentrace_tls_service_refused_total %" PRIu64 "\n"
      "# HELP gentrace_tls_reloads_total Credential reloads (SIGHUP).\n"
      "# TYPE gentrace_tls_reloads_total counter\n"
      "gentrace_tls_reloads_total{result=\"ok\"} %" PRIu64 "\n"
      "gentrace_tls_reloads_total{result=\"failed\"} %" PRIu64 "\n",
      left, GET(handshakes), GET(failed), GET(untrusted), GET(service_refused),
      GET(reloads), GET(reload_failed));
  if (n > 0)
    gtp_wbuf_put(b, line,
                 (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
