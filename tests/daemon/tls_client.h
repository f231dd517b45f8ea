/* tls_client.h: the TLS end of a gtc (client.h) for tests and benchmarks
 * of gentraced's TLS ports: a throwaway PKI made with certtool, a blocking
 * GnuTLS session over a connected gtc, and /metrics over HTTPS.
 */
#ifndef GTC_TLS_CLIENT_H
#define GTC_TLS_CLIENT_H

#include <stdint.h>

#include "client.h"

/* A CA (dir/ca.pem) and a server certificate for 127.0.0.1 (dir/srv.pem,
 * dir/srv.key, mode 600), valid two days. 0 or -1 (certtool missing). */
int gtc_tls_pki(const char *dir);

/* Client certificates for mTLS tests, beside gtc_tls_pki's in dir:
 * cli.pem (signed by ca.pem, naming no service), rogue.pem
 * (signed by another CA, evil.pem), expired.pem (ca.pem's, expired in
 * 2020), each with NAME.key, and other.key (a key of no certificate).
 * 0 or -1. */
int gtc_tls_pki_clients(const char *dir);

/* gtc_tls_wrap presenting a client certificate (cert_file, key_file; NULL:
 * none). wrong_key: key_file need not match the certificate (an attacker
 * holding a certificate but not its key; GnuTLS refuses that pair unless
 * told not to check). The handshake may "succeed" on the client's side
 * even when the server then refuses the certificate (TLS 1.3: the client
 * finishes first). 0, -1 (the files would not load), or -2 (the
 * handshake failed). */
int gtc_tls_wrap_cert(gtc *c, const char *ca_file, const char *cert_file,
                      const char *key_file, int wrong_key);

/* Wraps c's connected socket in TLS trusting ca_file and runs the
 * handshake. split 0: full 16 KiB records, 128 KiB of them per send, as
 * the agent writes;
 * split > 0: into records of random sizes 1..split (seeded), so record
 * boundaries fall anywhere inside and across frames. 0 or -1. */
int gtc_tls_wrap(gtc *c, const char *ca_file, unsigned split, unsigned seed);
/* The cipher the session of gtc_tls_wrap negotiated, as GnuTLS's
 * gnutls_cipher_algorithm_t (0 without a session). */
int gtc_tls_cipher(const gtc *c);
/* Ends the session of gtc_tls_wrap (before gtc_close). */
void gtc_tls_end(gtc *c);

/* gtd_metric over HTTPS (the HTTP port serves TLS when the agent port
 * does), trusting ca_file. -1 if missing. */
int64_t gtd_metric_tls(gtd *d, const char *ca_file, const char *name);

#endif
