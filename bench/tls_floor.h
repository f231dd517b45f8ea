/* tls_floor.h: the floor under a TLS benchmark, measured in the same run
 * (issue 15). A TLS with no overhead beyond its cipher would add exactly
 * the AEAD's cost per byte to each end; this measures that cost on this
 * CPU with GnuTLS's own AEAD (16 KiB records, thread CPU time), turns it
 * and the plain run's CPU per byte into the best ratio such a TLS could
 * reach, and prints the measured ratio beside that ceiling
 * (ratio_of_ceiling). Used by bench_ingest b2tls and bench_download tls.
 */
#ifndef TLS_FLOOR_H
#define TLS_FLOOR_H

#include <sys/types.h>

/* GnuTLS cipher (gnutls_cipher_algorithm_t) from a cipher suite name as
 * GnuTLS ("AES-256-GCM") or OpenSSL/curl ("TLS_AES_256_GCM_SHA384") print
 * it; AES-256-GCM when the name says nothing known. */
int tls_floor_cipher_by_name(const char *name);
const char *tls_floor_cipher_name(int cipher);

/* ns of thread CPU per byte to seal (*enc) and open (*dec) TLS 1.3-sized
 * records (16 KiB + type, 5 bytes of additional data) with cipher; the
 * median of 3 passes. 0, or -1 if GnuTLS has no such AEAD. */
int tls_floor_aead(int cipher, double *enc_ns, double *dec_ns);

/* CPU seconds of every live thread of pid (/proc/PID/task/TID/schedstat,
 * nanosecond accounting: a 0.3 s run is measured to the microsecond, not
 * to the 10 ms tick of /proc/PID/stat); *loop_s gets the main thread's
 * (gentraced's event loop). Threads that ended are not counted: in
 * gentraced those are the HTTP connections' (one thread each), so the
 * benchmark's own /metrics polls, a TLS handshake each over HTTPS, stay
 * out of the ingest figure. -1 if unreadable. */
double tls_floor_proc_cpu_s(pid_t pid, double *loop_s);

double tls_floor_median(double *v, int n); /* sorts v */

/* The medians of one same-run plain/TLS comparison. "Server" is the daemon
 * side (gentraced for B2, the web server for D1), "peer" the other end
 * (the load generator, curl). ns are CPU ns per payload byte. */
typedef struct tls_floor_fig {
  const char *id;       /* "B2-TLS", "D1-TLS" */
  const char *cipher;   /* negotiated */
  double srv_aead_ns;   /* the server's share of the cipher (dec or enc) */
  double peer_aead_ns;  /* the peer's */
  double srv_plain_ns;  /* server CPU per byte, plain text */
  double srv_tls_ns;    /* server CPU per byte, TLS */
  double peer_plain_ns; /* peer CPU per byte, plain text */
  double peer_tls_ns;   /* peer CPU per byte, TLS */
  double wall_ratio;    /* median of the rounds' TLS/plain throughput */
  double busy_plain;    /* (server + peer CPU s) / wall s, plain: 2 = both */
  double busy_tls;      /*   cores busy all along */
  /* The server's thread that does the TLS (gentraced's loop), plain and
   * TLS, when known (0: not): it alone must grow by at least the cipher. */
  double loop_plain_ns, loop_tls_ns;
} tls_floor_fig;

/* One round of that comparison, the same accounts before their medians
 * (fields as in tls_floor_fig; loop_*: 0 where not known). */
typedef struct tls_floor_round {
  double srv_aead_ns, peer_aead_ns;
  double srv_plain_ns, srv_tls_ns, peer_plain_ns, peer_tls_ns;
  double wall_ratio, busy_plain, busy_tls;
  double loop_plain_ns, loop_tls_ns;
} tls_floor_round;

/* *f = id, cipher's name and, field by field, the median of the n rounds
 * r[0..n-1] (r is left as it is). The one way B2-TLS and D1-TLS turn their
 * rounds into a figure. */
void tls_floor_fig_of(tls_floor_fig *f, const char *id, int cipher,
                      const tls_floor_round *r, int n);

/* Prints the floor's BENCH lines (cipher throughput, the zero-overhead
 * ceilings for server CPU and wall time, the measured ratios as a
 * fraction of them) and a `tls_floor:` line with the per-byte accounts,
 * flagging figures that do not add up. */
void tls_floor_print(const tls_floor_fig *f);

#endif
