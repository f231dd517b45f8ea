/* web_tls.h: HTTPS for gentraced's HTTP API (libmicrohttpd with GnuTLS).
 *
 * web_start reads the PEM files named in web_config (tls_cert, tls_key,
 * tls_client_ca) into memory and hands them to MHD (MHD_USE_TLS with a
 * certificate callback, so they reload on SIGHUP; MEM_TRUST to ask
 * clients for a certificate). With tls_client_ca, every request must come with
 * a client certificate that verifies against it (403 otherwise).
 *
 * Thread: web_tls_load/web_tls_free in web_start/web_stop; the rest from
 * MHD's threads (read-only state).
 */
#ifndef WEB_TLS_H
#define WEB_TLS_H

#include <microhttpd.h>

typedef struct web_tls web_tls;

/* NULL and 0 when cert is NULL (plain HTTP). Else reads the files: 0, or a
 * negative code with *cause malloc'd. */
int web_tls_load(const char *cert, const char *key, const char *client_ca,
                 web_tls **out, char **cause);
void web_tls_free(web_tls *t);
/* Reads the certificate and key again; new handshakes use them, live
 * connections keep theirs. On failure the old ones stay. */
int web_tls_reload(web_tls *t, char **cause);
/* MHD flags to add (MHD_USE_TLS or 0). */
unsigned web_tls_flags(const web_tls *t);
/* MHD options to pass with MHD_OPTION_ARRAY (ends with MHD_OPTION_END;
 * just that without TLS). */
struct MHD_OptionItem *web_tls_options(web_tls *t);
/* 1 if the connection may be served: no client CA, or its client
 * certificate verifies against it. */
int web_tls_client_ok(const web_tls *t, struct MHD_Connection *conn);

#endif
