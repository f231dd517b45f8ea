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
 *       every 64 events). gentrace: gt_counter through the agent (GENTRACE_*
 *       environment), then waits up to 30 s until every event is delivered
 *       or counted lost. lttng: the tracepoint (the session is bench/report's).
 *       Prints `EMIT emitted=… elapsed=… written=… delivered=… dropped=…
 *       evicted=… settled=0|1`.
 *
 * Built by bench/report with cc (LTTng is optional, so it is not in the
 * automake build): -I bench -I agent, libgentrace.a, -llttng-ust -ldl.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

typedef struct emitter {
  pthread_t th;
  int lttng;
  uint64_t share, emitted;
  uint64_t t0, span;
} emitter;

static void *emit_main(void *arg) {
  emitter *e = arg;
  uint64_t i = 0;
  while (i < e->share) {
    uint64_t el = now_ns() - e->t0;
    uint64_t due =
        el >= e->span
            ? e->share
            : (uint64_t)((double)e->share * (double)el / (double)e->span);
    if (due <= i) {
      struct timespec d = {0, 200000};
      nanosleep(&d, NULL);
      continue;
    }
    if (due - i > 64)
      due = i + 64;
    if (e->lttng)
      for (; i < due; i++)
        lttng_ust_tracepoint(gtbench, ev, 1, (int64_t)i);
    else
      for (; i < due; i++)
        gt_counter("bench.counter", (int64_t)i);
  }
  e->emitted = i;
  return NULL;
}

static int emit(const char *sys, double rate, int threads, double secs) {
  int lt = strcmp(sys, "lttng") == 0;
  if (!lt && gt_start(NULL) != 0) {
    fprintf(stderr, "lttng_bench: gt_start failed\n");
    return 1;
  }
  emitter *es = calloc((size_t)threads, sizeof *es);
  if (!es)
    return 1;
  uint64_t total = (uint64_t)(rate * secs);
  uint64_t t0 = now_ns();
  for (int i = 0; i < threads; i++) {
    es[i].lttng = lt;
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
  double elapsed = (double)(now_ns() - t0) / 1e9;
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
  printf("EMIT emitted=%" PRIu64 " elapsed=%.3f written=%" PRIu64
         " delivered=%" PRIu64 " dropped=%" PRIu64 " evicted=%" PRIu64
         " settled=%d\n",
         emitted, elapsed, s.events_written, s.events_delivered,
         s.events_dropped, s.events_evicted, settled);
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
