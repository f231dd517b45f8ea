/* web_tls.c: HTTPS for the HTTP API (see web_tls.h).
 *
 * The certificate and key reach MHD through its certificate callback
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), not MEM_KEY/MEM_CERT, so a SIGHUP can
 * swap them (web_tls_reload): each handshake takes the current version.
 * GnuTLS's callback carries no context pointer, so the current version is
 * one process-wide atomic pointer: one HTTPS server per process.
 *
 * Invariants:
 *  1. Every version of the credentials (and the PEM texts MHD was given)
 *     stays allocated until web_tls_free, after MHD_stop_daemon: a session
 *     that took a version may use it until it ends, otherwise a reload
 *     could free what a live handshake reads. Reloads are rare (each keeps
 *     a few KiB).
 *  2. With a client CA, a request is answered only once the client's
 *     certificate verified (web_tls_client_ok): MHD asks for a certificate
 *     (MEM_TRUST) but does not refuse a client without one.
 */
#include "config.h"

#include "web_tls.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "gtp_error.h"

#define PEM_MAX (1u << 20) /* a certificate chain or key is a few KiB */

typedef struct version {
  struct version *prev; /* older versions, kept (invariant 1) */
  gnutls_pcert_st pcert[16];
  unsigned npcert;
  gnutls_privkey_t key;
} version;

struct web_tls {
  char *cert_path, *key_path;
  char *ca; /* PEM text, NUL-terminated (invariant 1) */
  version *cur;
  struct MHD_OptionItem opts[5];
};

static version *_Atomic current; /* what the next handshake uses */

static struct MHD_OptionItem no_tls[1] = {{MHD_OPTION_END, 0, NULL}};

static int read_pem(const char *flag, const char *path, int secret, char **out,
                    char **cause) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    if (asprintf(cause, "%s %s: %s", flag, path, strerror(errno)) < 0)
      *cause = NULL;
    return GTP_E_TLS;
  }
  struct stat st;
  if (secret && fstat(fileno(f), &st) == 0 &&
      (st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    fclose(f);
    if (asprintf(cause,
                 "%s %s is readable by other users (mode %04o): chmod 600 it",
                 flag, path, (unsigned)(st.st_mode & 07777)) < 0)
      *cause = NULL;
    return GTP_E_TLS;
  }
  char *buf = malloc(PEM_MAX + 1);
  size_t n = buf != NULL ? fread(buf, 1, PEM_MAX + 1, f) : 0;
  fclose(f);
  if (buf == NULL || n == 0 || n > PEM_MAX) {
    free(buf);
    if (asprintf(cause, "%s %s: %s", flag, path,
                 buf == NULL ? "out of memory"
                 : n == 0    ? "empty"
                             : "larger than 1 MiB") < 0)
      *cause = NULL;
    return GTP_E_TLS;
  }
  buf[n] = '\0';
  *out = buf;
  return 0;
}

static void version_free(version *v) {
  while (v != NULL) {
    version *p = v->prev;
    for (unsigned i = 0; i < v->npcert; i++)
      gnutls_pcert_deinit(&v->pcert[i]);
    if (v->key != NULL)
      gnutls_privkey_deinit(v->key);
    free(v);
    v = p;
  }
}

static int version_load(const char *cert, const char *key, version **out,
                        char **cause) {
  char *cpem = NULL, *kpem = NULL;
  int rc = read_pem("--tls-cert", cert, 0, &cpem, cause);
  if (rc == 0)
    rc = read_pem("--tls-key", key, 1, &kpem, cause);
  version *v = rc == 0 ? calloc(1, sizeof *v) : NULL;
  if (rc == 0 && v == NULL)
    rc = GTP_E_TLS;
  if (rc == 0) {
    gnutls_datum_t cd = {(unsigned char *)cpem, (unsigned)strlen(cpem)};
    gnutls_datum_t kd = {(unsigned char *)kpem, (unsigned)strlen(kpem)};
    v->npcert = 16;
    int g = gnutls_pcert_list_import_x509_raw(v->pcert, &v->npcert, &cd,
                                              GNUTLS_X509_FMT_PEM, 0);
    if (g < 0)
      v->npcert = 0;
    if (g >= 0)
      g = gnutls_privkey_init(&v->key);
    if (g >= 0)
      g = gnutls_privkey_import_x509_raw(v->key, &kd, GNUTLS_X509_FMT_PEM, NULL,
                                         0);
    if (g < 0) {
      if (asprintf(cause, "--tls-cert %s / --tls-key %s: %s", cert, key,
                   gnutls_strerror(g)) < 0)
        *cause = NULL;
      rc = GTP_E_TLS;
    }
  }
  free(cpem);
  if (kpem != NULL)
    memset(kpem, 0, strlen(kpem));
  free(kpem);
  if (rc < 0) {
    version_free(v);
    return rc;
  }
  *out = v;
  return 0;
}

static int cert_cb(gnutls_session_t s, const gnutls_datum_t *req_ca_dn,
                   int nreqs, const gnutls_pk_algorithm_t *pk, int npk,
                   gnutls_pcert_st **pcert, unsigned int *pcert_length,
                   gnutls_privkey_t *privkey) {
  (void)s, (void)req_ca_dn, (void)nreqs, (void)pk, (void)npk;
  version *v = atomic_load(&current);
  if (v == NULL)
    return -1;
  *pcert = v->pcert;
  *pcert_length = v->npcert;
  *privkey = v->key;
  return 0;
}

int web_tls_reload(web_tls *t, char **cause) {
  if (t == NULL)
    return 0;
  version *v;
  int rc = version_load(t->cert_path, t->key_path, &v, cause);
  if (rc < 0)
    return rc;
  v->prev = t->cur; /* kept until web_tls_free (invariant 1) */
  t->cur = v;
  atomic_store(&current, v);
  return 0;
}

int web_tls_load(const char *cert, const char *key, const char *client_ca,
                 web_tls **out, char **cause) {
  *out = NULL;
  if (cert == NULL)
    return 0;
  web_tls *t = calloc(1, sizeof *t);
  if (t == NULL)
    return GTP_E_TLS;
  t->cert_path = strdup(cert);
  t->key_path = key != NULL ? strdup(key) : NULL;
  int rc = t->cert_path != NULL && t->key_path != NULL
               ? version_load(cert, key, &t->cur, cause)
               : GTP_E_TLS;
  if (rc == 0 && client_ca != NULL)
    rc = read_pem("--http-tls-client-ca", client_ca, 0, &t->ca, cause);
  if (rc < 0) {
    web_tls_free(t);
    return rc;
  }
  atomic_store(&current, t->cur);
  int i = 0;
  t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                                         (void *)cert_cb};
  /* TLS 1.3, 1.2 allowed, as on the agent port. */
  t->opts[i++] = (struct MHD_OptionItem){
      MHD_OPTION_HTTPS_PRIORITIES, 0,
      (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
  if (t->ca != NULL)
    t->opts[i++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, t->ca};
  t->opts[i] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  *out = t;
  return 0;
}

void web_tls_free(web_tls *t) {
  if (t == NULL)
    return;
  version *expect = t->cur;
  atomic_compare_exchange_strong(&current, &expect, NULL);
  version_free(t->cur);
  free(t->cert_path);
  free(t->key_path);
  free(t->ca);
  free(t);
}

unsigned web_tls_flags(const web_tls *t) {
  return t != NULL ? MHD_USE_TLS : 0;
}

struct MHD_OptionItem *web_tls_options(web_tls *t) {
  return t != NULL ? t->opts : no_tls;
}

int web_tls_client_ok(const web_tls *t, struct MHD_Connection *conn) {
  if (t == NULL || t->ca == NULL)
    return 1;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (ci == NULL || ci->tls_session == NULL)
    return 0;
  gnutls_session_t s = (gnutls_session_t)ci->tls_session;
  unsigned status = 0;
  unsigned n = 0;
  if (gnutls_certificate_get_peers(s, &n) == NULL || n == 0)
    return 0;
  return gnutls_certificate_verify_peers2(s, &status) == 0 && status == 0;
}
