/* tls.h: the agent's TLS client (GnuTLS), driven by the sender thread.
 *
 * Every call is non-blocking on the sender's non-blocking socket: the
 * handshake and the records return "again" instead of waiting, so the
 * host application never blocks on TLS, and nothing is ever printed.
 *
 * Thread: agent thread only (gt__tls_new/free from gt_start/gt_stop).
 */
#ifndef GT_TLS_H
#define GT_TLS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct gt__tls gt__tls;           /* credentials: CA, cert, key */
typedef struct gt__tls_conn gt__tls_conn; /* one session */

/* ca: PEM file of the CA the daemon's certificate must chain to (NULL =
 * the system's trust store); cert/key: this agent's certificate for mTLS
 * (both or neither). 0, or a negative errno (-EINVAL: unreadable file). */
int gt__tls_new(const char *ca, const char *cert, const char *key,
                gt__tls **out);
void gt__tls_free(gt__tls *t);

/* A session on fd (connected, non-blocking) verifying the daemon's
 * certificate against host. NULL on failure. */
gt__tls_conn *gt__tls_begin(gt__tls *t, int fd, const char *host);
void gt__tls_end(gt__tls_conn *c);
/* 1 handshake done and the daemon trusted, 0 again (poll for
 * gt__tls_want_write ? POLLOUT : POLLIN), < 0 failed. */
int gt__tls_handshake(gt__tls_conn *c);
int gt__tls_want_write(gt__tls_conn *c);
/* 1 if encrypted bytes wait to be sent (poll for POLLOUT, then
 * gt__tls_flush: 1 all sent, 0 some left, -1 with errno). */
int gt__tls_unsent(const gt__tls_conn *c);
int gt__tls_flush(gt__tls_conn *c);
/* Like send/recv: bytes, 0 (recv: EOF), or -1 with errno (EAGAIN). A send
 * encrypts up to 128 KiB of records and writes them with one send; bytes
 * it took but could not write yet stay queued (gt__tls_unsent). */
ssize_t gt__tls_send(gt__tls_conn *c, const void *p, size_t n);
ssize_t gt__tls_recv(gt__tls_conn *c, void *p, size_t n);
/* Decrypted bytes waiting (read them before polling again). */
size_t gt__tls_pending(gt__tls_conn *c);

#endif
