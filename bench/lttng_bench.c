/* lttng_bench: gentrace against LTTng-UST on the same payload (two 64-bit
 * integers: a gentrace counter's name id and value), for bench/report.
 *
 *   lttng_bench a1 [N]
 *       ns per call, best of 5 runs of N calls (default 500000) each, in
 *       this one process: gt_counter (agent started with no daemon, as in
 *       bench_agent), gt_instant, and the LTTng-UST tracepoint gtbench:ev.
 *       The tracepoint costs what it costs only while a session has it
 *       enabled: bench/report runs this under a snapshot session. Prints
 *       `A1 gt_counter_ns=… gt_instant_ns=… lttng_ns=… gt_dropped=…`.
 *
 *   lttng_bench emit gentrace|lttng RATE THREADS SECONDS
 *       RATE events/s in total over THREADS threads for SECONDS, paced
 *       (each thread emits what its schedule says is due, checking the clock
 *       every 256 events, as bench_b1's agents do). gentrace: gt_counter
 * through the agent (GENTRACE_* environment), then waits up to 30 s until every
 * event is delivered or counted lost. lttng: the tracepoint (the session is
 * bench/report's). Prints `EMIT emitted=… elapsed=… written=… delivered=…
 * dropped=… evicted=… settled=0|1`. With BENCH_READY and BENCH_GO (FIFOs that
 *       bench/lttng.sh holds open read-write), the process first writes one
 *       byte into READY once it can emit (LTTng: registered, which
 *       LTTNG_UST_REGISTER_TIMEOUT=-1 makes the constructor wait for;
 *       gentrace: connected), then waits for end of file on GO: a thousand
 *       processes start at once, their start-up outside the trial.
 *
 * Built by bench/report with cc (LTTng is optional, so it is not in the
 * automake build): -I bench -I agent, libgentrace.a, -llttng-ust -ldl.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include "gentrace.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double run_counter(long n) {
  uint64_t t0 = now_ns();
  for (long i = 0; i < n; i++)
    gt_counter("bench.counter", i);
  return (double)(now_ns() - t0) / (double)n;
}

static double run_instant(long n) {
  uint64_t t0 = now_ns();
  for (long i = 0; i < n; i++)
    gt_instant("bench.instant");
  return (double)(now_ns() - t0) / (double)n;
}

static double run_lttng(long n) {
  uint64_t t0 = now_ns();
  for (long i = 0; i < n; i++)
    lttng_ust_tracepoint(gtbench, ev, 1, i);
  return (double)(now_ns() - t0) / (double)n;
}

static double best(double (*f)(long), long n) {
  double b = 1e18;
  for (int r = 0; r < 5; r++) {
    double v = f(n);
    b = v < b ? v : b;
    /* Give the agent's period (100 ms) a chance to seal, so the 64 MiB
     * pool never fills and no measured call is a cheap drop. */
    struct timespec d = {0, 150000000};
    nanosleep(&d, NULL);
  }
  return b;
}

static int a1(long n) {
  gt_config c;
  gt_config_init(&c);
  c.addr = "127.0.0.1:1"; /* no daemon: recording cost alone (bench_agent) */
  c.period_ms = 100;
  c.buffer_mb = 64;
  c.spool_mb = 256;
  if (gt_start(&c) != 0) {
    fprintf(stderr, "lttng_bench: gt_start failed\n");
    return 1;
  }
  run_counter(n); /* warm: buffers, string cache */
  run_lttng(n);
  double ctr = best(run_counter, n);
  double ins = best(run_instant, n);
  double lt = best(run_lttng, n);
  gt_stats_t s;
  gt_stats(&s);
  printf("A1 gt_counter_ns=%.3f gt_instant_ns=%.3f lttng_ns=%.3f "
         "gt_dropped=%" PRIu64 "\n",
         ctr, ins, lt, s.events_dropped);
  gt_stop();
  return 0;
}

/* The emitters' sleep when ahead of the pace: BENCH_TICK_US (default 200
 * us; bench/lttng.sh and bench_b1 set 10 us per process for many, so a
 * thousand processes wake 100,000 times a second in all, not 5 million). */
static long tick_ns(void) {
  const char *e = getenv("BENCH_TICK_US");
  long us = e != NULL ? atol(e) : 200;
  return (us < 1 ? 1 : us > 999999 ? 999999 : us) * 1000;
}

typedef struct emitter {
  pthread_t th;
  pid_t tid;    /* for BENCH_THREAD_CPU's report */
  double cpu_s; /* its CPU time when it finished (it exits before the end) */
  long tick_ns;
  int lttng;
  uint64_t share, emitted;
  uint64_t t0, span;
  uint64_t end; /* when it emitted its last event */
} emitter;

static void *emit_main(void *arg) {
  emitter *e = arg;
  e->tid = (pid_t)syscall(SYS_gettid);
  uint64_t i = 0;
  while (i < e->share) {
    uint64_t el = now_ns() - e->t0;
    uint64_t due =
        el >= e->span
            ? e->share
            : (uint64_t)((double)e->share * (double)el / (double)e->span);
    if (due <= i) {
      struct timespec d = {0, e->tick_ns};
      nanosleep(&d, NULL);
      continue;
    }
    /* Bursts of at most 256, as b1_agent's emitters (one clock read per
     * burst on both sides). */
    if (due - i > 256)
      due = i + 256;
    if (e->lttng)
      for (; i < due; i++)
        lttng_ust_tracepoint(gtbench, ev, 1, (int64_t)i);
    else
      for (; i < due; i++)
        gt_counter("bench.counter", (int64_t)i);
  }
  e->emitted = i;
  e->end = now_ns();
  struct timespec cpu;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  e->cpu_s = (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9;
  return NULL;
}

/* The start barrier (see the header); nothing without the environment. */
static void barrier(int lt) {
  const char *ready = getenv("BENCH_READY"), *go = getenv("BENCH_GO");
  if (ready == NULL || go == NULL)
    return;
  /* gentrace: ready once connected (as an LTTng app is once registered),
   * so the trial does not include the handshake; at most 60 s. */
  for (int i = 0; !lt && i < 12000; i++) {
    gt_stats_t s;
    gt_stats(&s);
    if (s.connects > 0)
      break;
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
  }
  /* GO first: it must be open before READY says so (the shell closes its
   * end of GO once every process wrote READY). */
  int g = open(go, O_RDONLY | O_CLOEXEC);
  int r = open(ready, O_WRONLY | O_CLOEXEC);
  if (r >= 0) {
    if (write(r, "r", 1) != 1)
      fprintf(stderr, "lttng_bench: READY not written\n");
    close(r);
  }
  char c;
  while (g >= 0 && read(g, &c, 1) > 0)
    ;
  if (g >= 0)
    close(g);
}

/* BENCH_THREAD_CPU: this process's threads and their CPU seconds so far,
 * one line each on stderr: `THREAD role=emitter|main|other tid=...
 * cpu_s=...`: the emitters' own reading when they finished, the others'
 * run time from /proc/self/task/TID/schedstat (nanoseconds). "other" is
 * the agent's thread (gentrace: sealing and sending) or LTTng-UST's
 * listener threads. Printed once the trial settled, before gt_stop. */
static void thread_cpu(const emitter *es, int threads) {
  if (getenv("BENCH_THREAD_CPU") == NULL)
    return;
  for (int i = 0; i < threads; i++)
    fprintf(stderr, "THREAD role=emitter tid=%d cpu_s=%.4f\n", (int)es[i].tid,
            es[i].cpu_s);
  pid_t self = getpid();
  char path[300];
  DIR *d = opendir("/proc/self/task");
  struct dirent *de;
  while (d != NULL && (de = readdir(d)) != NULL) {
    pid_t tid = (pid_t)atoi(de->d_name);
    if (tid <= 0)
      continue;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    unsigned long long run = 0;
    int got = fscanf(f, "%llu", &run);
    fclose(f);
    if (got == 1)
      fprintf(stderr, "THREAD role=%s tid=%d cpu_s=%.4f\n",
              tid == self ? "main" : "other", (int)tid, (double)run / 1e9);
  }
  if (d != NULL)
    closedir(d);
}

static int emit(const char *sys, double rate, int threads, double secs) {
  int lt = strcmp(sys, "lttng") == 0;
  if (!lt && gt_start(NULL) != 0) {
    fprintf(stderr, "lttng_bench: gt_start failed\n");
    return 1;
  }
  barrier(lt);
  emitter *es = calloc((size_t)threads, sizeof *es);
  if (!es)
    return 1;
  uint64_t total = (uint64_t)(rate * secs);
  uint64_t t0 = now_ns();
  for (int i = 0; i < threads; i++) {
    es[i].lttng = lt;
    es[i].tick_ns = tick_ns();
    es[i].share = total / (uint64_t)threads +
                  ((uint64_t)i < total % (uint64_t)threads ? 1 : 0);
    es[i].t0 = t0;
    es[i].span = (uint64_t)(secs * 1e9);
    pthread_create(&es[i].th, NULL, emit_main, &es[i]);
  }
  uint64_t emitted = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(es[i].th, NULL);
    emitted += es[i].emitted;
  }
  /* From the start to the last emitter's last event, read by the emitters
   * themselves (as b1_agent's): main's own wake-up from the join is no
   * part of the trial, and with a thousand processes on two cores it was
   * late by 0.1-0.8 s on its own. */
  uint64_t last = t0;
  for (int i = 0; i < threads; i++)
    last = es[i].end > last ? es[i].end : last;
  double elapsed = (double)(last - t0) / 1e9;
  gt_stats_t s;
  memset(&s, 0, sizeof s);
  int settled = 1;
  if (!lt) {
    uint64_t deadline = now_ns() + 30000000000ull;
    for (;;) {
      gt_stats(&s);
      settled = s.events_written == s.events_delivered + s.events_dropped +
                                        s.events_evicted + s.events_rejected;
      if (settled || now_ns() > deadline)
        break;
      struct timespec d = {0, 20000000};
      nanosleep(&d, NULL);
    }
  }
  thread_cpu(es, threads);
  printf("EMIT start=%.3f emitted=%" PRIu64 " elapsed=%.3f written=%" PRIu64
         " delivered=%" PRIu64 " dropped=%" PRIu64 " evicted=%" PRIu64
         " settled=%d\n",
         (double)t0 / 1e9, emitted, elapsed, s.events_written,
         s.events_delivered, s.events_dropped, s.events_evicted, settled);
  fflush(stdout);
  free(es);
  if (!lt)
    gt_stop();
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "a1") == 0)
    return a1(argc > 2 ? atol(argv[2]) : 500000);
  if (argc == 6 && strcmp(argv[1], "emit") == 0)
    return emit(argv[2], atof(argv[3]), atoi(argv[4]), atof(argv[5]));
  fprintf(stderr, "usage: lttng_bench a1 [N] | emit gentrace|lttng RATE "
                  "THREADS SECONDS\n");
  return 2;
}
