/* tls_conn.h: TLS on gentraced's agent port (GnuTLS on the libuv loop).
 *
 * A tls_server holds the credentials loaded from --tls-cert/--tls-key (and
 * --tls-client-ca for mTLS), reloadable on SIGHUP, and the counters behind
 * /metrics. Every agent connection of a TLS listener gets a GnuTLS session
 * whose transport is memory: ciphertext libuv read is pulled from the read
 * buffer, ciphertext GnuTLS writes is pushed into a uv_write. The handshake
 * is non-blocking and bounded by --handshake-timeout (the connection stays
 * in CONN_HANDSHAKE until HELLO).
 *
 * With mTLS, a client certificate whose subjectAltName holds URIs
 * `gentrace:service/NAME` may claim only those services in HELLO.
 *
 * Thread: loop thread only, except tls_server_metrics (any thread).
 */
#ifndef TLS_CONN_H
#define TLS_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

typedef struct tls_server tls_server;
struct ingest;
struct conn;

typedef struct tls_server_config {
  const char *cert_file; /* PEM chain; required */
  const char *key_file;  /* PEM private key; required, not world-readable */
  const char *client_ca_file; /* NULL: no client certificate asked */
  int require_service_san;    /* a client cert must name its services */
} tls_server_config;

/* Loads the credentials. 0, or a negative code with *cause malloc'd
 * (unreadable file, key readable by other users, key not matching). */
int tls_server_new(const tls_server_config *cfg, tls_server **out,
                   char **cause);
/* Loads the files again; new connections use the new credentials, live
 * ones keep theirs. On failure the old credentials stay. */
int tls_server_reload(tls_server *srv, char **cause);
/* Frees srv once no connection uses it (call after ingest_free). */
void tls_server_free(tls_server *srv);
/* Unix time the loaded certificate expires. */
int64_t tls_server_not_after(const tls_server *srv);
/* Logs a warning if the certificate expires within a week (at load, reload
 * and from the sweep once a day). */
void tls_server_check_expiry(tls_server *srv);

/* Serves ing's agent port over TLS; before ingest_start. */
void tls_attach(struct ingest *ing, tls_server *srv);

/* ingest.c's ends of a TLS connection, handed over at start (an interface,
 * so the two modules do not call each other by name): plaintext GnuTLS
 * decrypted goes through the frame loop (input); ciphertext it made is
 * queued on the socket as is (write_raw, copied); close ends c. */
typedef struct tls_conn_ops {
  void (*input)(struct conn *c, const uint8_t *p, size_t n);
  void (*write_raw)(struct conn *c, const void *p, size_t n);
  void (*close)(struct conn *c, int code, int has_gen, uint64_t gen,
                const char *reason);
  /* nread plaintext bytes were decrypted straight into the staged frame's
   * room (c->stage, ingest.c invariant 9): reasm_stage_read. */
  int (*stage_read)(struct conn *c, size_t nread);
} tls_conn_ops;

/* Hooks called by ingest.c for a connection with c->tls set. */
void tls_conn_start(struct conn *c, const tls_conn_ops *ops); /* accepted */
void tls_conn_input(struct conn *c, const uint8_t *p, size_t n);
void tls_conn_send(struct conn *c, const uint8_t *p, size_t n);
void tls_conn_bye(struct conn *c);  /* before shutdown: close_notify */
void tls_conn_free(struct conn *c); /* ingest_conn_closed */
/* HELLO's service against the certificate: 0, or < 0 once the connection
 * was closed with ERROR(AUTH) (counted, logged). */
int tls_conn_check_service(struct conn *c, const char *svc, size_t len);

/* Prometheus text of the TLS counters. Any thread. */
void tls_server_metrics(tls_server *srv, gtp_wbuf *out);

#endif
