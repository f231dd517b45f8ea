/* web_tls.c: HTTPS for the HTTP API (see web_tls.h).
 *
 * Invariants:
 *  1. The PEM texts MHD was given stay allocated until web_tls_free, after
 *     MHD_stop_daemon, otherwise MHD could read freed memory.
 *  2. With a client CA, a request is answered only once the client's
 *     certificate verified (web_tls_client_ok): MHD asks for a certificate
 *     (MEM_TRUST) but does not refuse a client without one.
 */
#include "config.h"

#include "web_tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gnutls/gnutls.h>

#include "gtp_error.h"

#define PEM_MAX (1u << 20) /* a certificate chain or key is a few KiB */

struct web_tls {
  char *cert, *key, *ca; /* PEM text, NUL-terminated (invariant 1) */
  struct MHD_OptionItem opts[5];
};

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

int web_tls_load(const char *cert, const char *key, const char *client_ca,
                 web_tls **out, char **cause) {
  *out = NULL;
  if (cert == NULL)
    return 0;
  web_tls *t = calloc(1, sizeof *t);
  if (t == NULL)
    return GTP_E_TLS;
  int rc = read_pem("--tls-cert", cert, 0, &t->cert, cause);
  if (rc == 0)
    rc = read_pem("--tls-key", key, 1, &t->key, cause);
  if (rc == 0 && client_ca != NULL)
    rc = read_pem("--http-tls-client-ca", client_ca, 0, &t->ca, cause);
  if (rc < 0) {
    web_tls_free(t);
    return rc;
  }
  int i = 0;
  t->opts[i++] =
      (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t->cert};
  t->opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t->key};
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
  free(t->cert);
  if (t->key != NULL)
    memset(t->key, 0, strlen(t->key));
  free(t->key);
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
