/* client.h: a small blocking agent-protocol client and daemon launcher for
 * tests that need exact control over the bytes on the wire (the real agent,
 * libgentrace, is used in tests/integration/).
 *
 * Every call has a timeout (GTC_TIMEOUT_MS) so a broken daemon fails a test
 * instead of hanging it. Nothing here is thread-safe; use one gtc per
 * thread.
 */
#ifndef GTC_CLIENT_H
#define GTC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"
#include "frame.h"
#include "gen_fixture.h"

#define GTC_TIMEOUT_MS 10000

typedef struct gtc {
  int fd;
  gtp_frame_decoder dec;
  uint8_t in[65536];
  size_t in_off, in_len;
  /* Optional transport over fd (bench_ingest's TLS runs): set after
   * gtc_connect; NULL = the socket itself. Blocking, send/recv results. */
  ssize_t (*xsend)(void *ctx, const void *p, size_t n);
  ssize_t (*xrecv)(void *ctx, void *p, size_t n);
  void *xctx;
} gtc;

/* Connects to 127.0.0.1:port. 0 or -errno. */
int gtc_connect(gtc *c, uint16_t port);
/* The same from source address src (e.g. "127.0.0.2": all of 127/8 is
 * loopback), for tests of per-address limits. 0 or -errno. */
int gtc_connect_from(gtc *c, const char *src, uint16_t port);
void gtc_close(gtc *c);
/* An attacker that connects from src and sends all but the last byte of a
 * 64 KiB HELLO frame, then stalls (sent without waiting: a paused daemon
 * must not stall the caller). 0 or -errno. */
int gtc_stall_hello(gtc *c, const char *src, uint16_t port);
/* Writes all n bytes. 0 or -errno (-EPIPE when the daemon closed). */
int gtc_send_raw(gtc *c, const void *p, size_t n);
/* Sends HELLO for spec s's identity (tags env=prod, zone=eu-1, matching
 * gtf_gen_start) with the given token (NULL = none) and versions. */
int gtc_send_hello(gtc *c, const gtf_spec *s, const char *token,
                   uint32_t min_version, uint32_t max_version);
/* HELLO + WELCOME. Returns 0 with *w filled, or the code of an ERROR frame
 * the daemon answered with, or -errno / GTP_E_* on a transport problem. */
int gtc_hello(gtc *c, const gtf_spec *s, const char *token, gtp_welcome *w);

/* A generation cut into frames: one BATCH per body record, then GEN_END. */
typedef struct gtc_gen {
  gtp_wbuf body;   /* body records */
  gtp_gen_end end; /* manifest */
  size_t off[64];  /* record offsets; off[nrec] = body.len */
  size_t nrec;
} gtc_gen;
int gtc_gen_build(gtc_gen *g, const gtf_spec *s);
void gtc_gen_fini(gtc_gen *g);
/* A generation of s's session and gen whose events are LOG events with
 * random (incompressible) messages, about `bytes` long in `batches` EVENTS
 * records, plus STRINGS and CLOCK. For tests that must fill a disk. */
int gtc_gen_build_random(gtc_gen *g, const gtf_spec *s, size_t batches,
                         unsigned seed);
/* A generation that expands when rendered: one interned string of name_len
 * bytes (at most GTP_STRING_MAX) named by nevents INSTANT events (so its
 * Chrome JSON is about nevents * name_len bytes while it stores in a few
 * KB). For tests of bounded downloads. */
int gtc_gen_build_long_names(gtc_gen *g, const gtf_spec *s, size_t name_len,
                             size_t nevents);
/* Sends BATCH frame i (one record) of g. */
int gtc_send_batch(gtc *c, const gtc_gen *g, size_t i);
int gtc_send_gen_end(gtc *c, const gtc_gen *g);
/* All BATCH frames then GEN_END. */
int gtc_send_gen(gtc *c, const gtc_gen *g);

/* Reads the next frame, skipping HEARTBEATs. 1 = *f filled (valid until
 * the next read), 0 = the daemon closed the connection, < 0 = error or
 * timeout (-ETIMEDOUT). */
int gtc_read_frame(gtc *c, gtp_frame *f, int timeout_ms);
/* The same, optionally returning HEARTBEAT frames too. */
int gtc_read_any(gtc *c, gtp_frame *f, int timeout_ms, int skip_heartbeats);
/* Reads until an ACK or ERROR: returns 1 (ACK, *gen set), 2 (ERROR, *gen
 * and *code set), 0 EOF, < 0 error. */
int gtc_read_reply(gtc *c, uint64_t *gen, int *code, int timeout_ms);
/* Waits until the daemon closes the connection (1), or an error (< 0). Any
 * ERROR frame seen before is stored in *code (0 if none). */
int gtc_wait_closed(gtc *c, int *code, int timeout_ms);

/* ---------------------------------------------------------------- daemon */

typedef struct gtd {
  pid_t pid;
  uint16_t agent_port, http_port;
  char dir[256]; /* private temp directory */
  char db[300];
  char log[300];
} gtd;

/* Makes a temp dir with a db path in it (no daemon yet). */
int gtd_init(gtd *d);
/* Starts $top_builddir/daemon/gentraced on 127.0.0.1 port 0 (both ports)
 * with --db d->db --log d->log --max-clock-skew 0 (fixtures are dated
 * 2026-01-01) plus extra args (NULL-terminated), env
 * entries "K=V" added (NULL-terminated, may be NULL); waits for the
 * `listening` line and parses the ports. 0 or a negative code. */
int gtd_start(gtd *d, const char *const *args, const char *const *env);
/* SIGTERM and wait: returns the exit status (or -1 if it had to be killed
 * after the timeout). */
int gtd_stop(gtd *d);
/* SIGKILL and reap. */
void gtd_kill9(gtd *d);
/* 1 if the process is still running. */
int gtd_alive(gtd *d);
/* Removes the temp dir and its files. */
void gtd_cleanup(gtd *d);
/* GET path on the HTTP port; returns the malloc'd body (NUL-terminated) and
 * sets *status, or NULL. */
char *gtd_http_get(gtd *d, const char *path, int *status);
/* Reads a metric value from /metrics (name with labels exactly as printed,
 * e.g. "gentrace_buffered_bytes"); -1 if missing. */
int64_t gtd_metric(gtd *d, const char *name);
/* The same from a /metrics text already fetched (NUL-terminated). */
int64_t gtd_metric_in(const char *text, const char *name);
/* The same for a value with a fraction (seconds); -1 if missing. */
double gtd_metric_f_in(const char *text, const char *name);
/* Of the observations histogram name gained between the /metrics texts m0
 * and m1: the upper bound (le, in the metric's unit) of the first bucket
 * holding fraction p of them; INFINITY for +Inf, -1 with none. */
double gtd_metric_hist_pct(const char *m0, const char *m1, const char *name,
                           double p);
/* 1 if the log contains s. */
int gtd_log_has(gtd *d, const char *s);

/* ------------------------------------------------------ /proc of a pid */

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"), -1 if missing. */
long gtd_proc_kib(pid_t pid, const char *field);
/* CPU seconds (user + system, every thread) pid has used so far, < 0 if
 * unknown. */
double gtd_proc_cpu_s(pid_t pid);

#endif
