/* fleet.h: what bench_fleet's parts share (bench/bench_fleet.c runs the
 * servers and the load, bench/fleet_client.c is the agents' side in the
 * worker processes, bench/fleet_report.c prints the figures): the options,
 * the latency histogram and the results the workers write into memory
 * shared with the parent. */
#ifndef BENCH_FLEET_H
#define BENCH_FLEET_H

#include <stdint.h>
#include <stddef.h>

#define RING 16           /* generations in flight per agent */
#define HBUCKETS 2560     /* latency histogram (log-linear, microseconds) */
#define DRAIN_MS 30000    /* outstanding ACKs get this long after the run */
#define CONNECT_MS 120000 /* every agent must be welcomed within this */
#define FLEET_THREADS 32  /* server threads followed in /proc */
#define FLEET_MAX_REPS 64 /* --reps */

typedef struct opts {
  unsigned agents, procs, events, seconds, connect_rate;
  unsigned period_ms;
  unsigned reps; /* repeats per server, alternated (--reps) */
  int idle, soak;
  const char *server;      /* both, gentraced, bare */
  const char *client_prio; /* idle, nice, normal (fleet_client_prio_check) */
  const char *id;
} opts;

/* Log-linear latency histogram in microseconds (fleet_report.c). */
typedef struct hist {
  uint64_t n, max_us;
  uint32_t b[HBUCKETS];
} hist;

void fleet_hist_add(hist *h, uint64_t us);
void fleet_hist_merge(hist *to, const hist *from);
/* The p-th percentile (0-100) in ms, from bucket values clamped to the max. */
double fleet_hist_pct_ms(const hist *h, double p);

/* One worker's results, in memory shared with the parent. */
typedef struct wres {
  volatile int welcomed_all; /* every agent of this worker has WELCOME */
  volatile int done;         /* run over, outstanding ACKs waited for */
  uint64_t welcomed, connect_fail, sent, acked, dup, refused, lost_conns;
  uint64_t unacked, skipped, heartbeats;
  uint64_t first_send_ns, last_ack_ns;
  hist welcome, ack;
  /* The ACK split at the client's socket (kernel receive timestamps,
   * SO_TIMESTAMPNS): GEN_END written -> the ACK arrived in the socket (the
   * server and loopback), and arrived -> read (the client's own delay, e.g.
   * waiting for a CPU at nice 19). Both are reported, neither hidden. */
  hist ack_in, ack_wait;
  uint64_t ack_nots; /* ACKs read without a timestamp (not split) */
} wres;

typedef struct shared {
  volatile int64_t go_ns; /* start of the run, set by the parent */
  volatile int release;   /* workers may close and exit */
  uint32_t *acked;        /* per agent: highest gen ACKed (contiguous) */
  wres w[];
} shared;

/* Monotonic now in ns; a sleep of ms milliseconds. */
int64_t fleet_now_ns(void);
void fleet_sleep_ms(unsigned ms);

/* 0 when name is a --client-prio the workers know, else -1. */
int fleet_client_prio_check(const char *name);

/* The worker process k of the load: connects agents first .. first+n-1 to
 * 127.0.0.1:port, waits for sh->go_ns, sends, drains, reports into
 * sh->w[k] and acked[], and exits when sh->release is set. Never returns. */
void fleet_client_run(const opts *o, unsigned k, unsigned first, unsigned n,
                      uint16_t port, const uint8_t salt[8], shared *sh,
                      uint32_t *acked) __attribute__((noreturn));

/* One server thread over a run: its share per generation ACKed (the
 * "per generation by thread" table). */
typedef struct fleet_thread {
  char name[16]; /* comm */
  int tid;
  double cpu_s; /* over the run */
  double wake;  /* times put on a CPU, per generation */
  double us;    /* CPU per generation */
  double sys;   /* the kernel's share of its CPU, % */
  int shown;    /* enough CPU or wake-ups to be in the table */
} fleet_thread;

typedef struct result {
  char name[48]; /* the server, and "rep i/N" when there are repeats */
  int ok;        /* the run itself worked (agents connected, server alive) */
  unsigned agents, welcomed;
  uint64_t sent, acked, dup, refused, lost, unacked, skipped, connect_fail;
  double cpu_s, wall_s, rss0_kib, rss_kib;
  double us_per_gen, cpu_per_mev, core_pct, bytes_per_agent;
  double io_bytes;                     /* written to storage during the run */
  hist welcome, ack, ack_in, ack_wait; /* ack_in, ack_wait: see wres */
  uint64_t ack_nots;
  uint64_t missing, extra, checked; /* store verification (gentraced) */
  int verified;
  double client_cpu_s; /* the worker processes' CPU over the same span */
  /* gentraced's own ACK latency (/metrics histograms, acklat.h) over the
   * run: upper bounds of the buckets holding p50 and p99, ms. */
  double d_ack50, d_ack99, d_commit50, d_commit99;
  char load[64]; /* /proc/loadavg at the start and the end */
  unsigned nthreads;
  fleet_thread thr[FLEET_THREADS];
  /* gentraced's transactions over the run (/metrics), -1 without. */
  double txns, commit_ms; /* commit_ms: mean per transaction */
  int exact;              /* this repeat passed every exactness check */
} result;

/* The details of one server's run on stderr. */
void fleet_report_print(const opts *o, const result *r);
/* One run's "per generation by thread" line on stderr. */
void fleet_report_threads(const result *r);
/* The same line as the medians (min-max) of n repeats rs[0..n-1] of one
 * server, threads matched by name and order among equal names. */
void fleet_report_threads_median(const result *rs, unsigned n);
/* The BENCH lines (stdout) of the o->reps repeats: gt[] is gentraced's
 * results (want_gt), bare[] the same-run floor's (want_bare; its figures
 * print as nan without). Each figure is the median of the repeats, with
 * min, max and reps beside it when o->reps > 1; ratio = median / median. */
void fleet_report_bench(const opts *o, const result *gt, const result *bare,
                        int want_bare, int want_gt);

#endif
