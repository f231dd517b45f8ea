/* b1_agent.c: see b1_agent.h. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b1_agent.h"
#include "gentrace.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct worker {
  long tick_ns; /* the sleep when ahead of the pace (BENCH_TICK_US) */
  double rate;  /* events/s of this thread */
  double seconds;
  uint64_t emitted;
  double elapsed; /* seconds it took to emit rate * seconds events */
  double cpu_s;   /* its CPU time when it finished */
  double t0;      /* the trial's start (after the barrier) */
} worker;

static double cpu_clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *emit(void *arg) {
  worker *w = arg;
  /* Paced and timed from the start of the trial, taken before the threads
   * were created (as lttng_bench's emitters are): a thread that waits for
   * its first CPU is late by that much. */
  double t0 = w->t0;
  uint64_t total = (uint64_t)(w->rate * w->seconds), n = 0;
  while (n < total) {
    uint64_t due = (uint64_t)((now_s() - t0) * w->rate);
    if (due > total)
      due = total;
    /* Bursts of at most 256 keep the pacing smooth at any rate; a thread
     * that fell behind catches up and takes longer (elapsed). */
    uint64_t k = due > n ? due - n : 0;
    if (k == 0) {
      /* Ahead of the pace: sleep as lttng_bench's emitter does (200 us,
       * or BENCH_TICK_US), instead of spinning on the clock. With hundreds
       * of agent processes on two cores the spinning took the CPU the
       * others needed to keep their own pace (100 agents fell behind even
       * at 125 events/s each). */
      struct timespec d = {0, w->tick_ns};
      nanosleep(&d, NULL);
      continue;
    }
    if (k > 256)
      k = 256;
    for (uint64_t i = 0; i < k; i++)
      gt_counter("b1", (int64_t)(n + i));
    n += k;
  }
  w->emitted = n;
  w->elapsed = now_s() - t0;
  w->cpu_s = cpu_clock_s(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

/* See b1_agent.h: connected, one byte on ready_fd, then end of file on
 * go_fd (the caller's last write end closed). */
static void barrier(int ready_fd, int go_fd) {
  if (ready_fd < 0)
    return;
  for (int i = 0; i < 12000; i++) {
    gt_stats_t s;
    gt_stats(&s);
    if (s.connects > 0)
      break;
    struct timespec d = {0, 5000000};
    nanosleep(&d, NULL);
  }
  if (write(ready_fd, "r", 1) != 1)
    fprintf(stderr, "b1_agent: ready not written\n");
  close(ready_fd);
  char c;
  while (go_fd >= 0 && read(go_fd, &c, 1) > 0)
    ;
  if (go_fd >= 0)
    close(go_fd);
}

int b1_agent_run(const char *addr, const char *service, double rate,
                 unsigned threads, double seconds, int fd, int ready_fd,
                 int go_fd) {
  gt_config cfg;
  gt_config_init(&cfg);
  cfg.addr = addr;
  cfg.service = service;
  cfg.flush_timeout_ms = 10000;
  /* The agent's knobs from the environment, so runs can vary them. */
  const char *e;
  if ((e = getenv("GENTRACE_BUFFER_MB")) != NULL)
    cfg.buffer_mb = (uint32_t)atoi(e);
  if ((e = getenv("GENTRACE_PERIOD_MS")) != NULL)
    cfg.period_ms = (uint32_t)atoi(e);
  if ((e = getenv("GENTRACE_SPOOL_MB")) != NULL)
    cfg.spool_mb = (uint32_t)atoi(e);
  if (gt_start(&cfg) != 0)
    return 1;
  barrier(ready_fd, go_fd);
  pthread_t t[64];
  worker w[64];
  const char *tk = getenv("BENCH_TICK_US");
  long tick_us = tk != NULL ? atol(tk) : 200;
  tick_us = tick_us < 1 ? 1 : tick_us > 999999 ? 999999 : tick_us;
  double t0 = now_s();
  for (unsigned i = 0; i < threads; i++) {
    w[i].t0 = t0;
    w[i].tick_ns = tick_us * 1000;
    w[i].rate = rate / threads;
    w[i].seconds = seconds;
    pthread_create(&t[i], NULL, emit, &w[i]);
  }
  double elapsed = 0, emit_cpu = 0;
  unsigned long long emitted = 0;
  for (unsigned i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (w[i].elapsed > elapsed)
      elapsed = w[i].elapsed;
    emit_cpu += w[i].cpu_s;
    emitted += w[i].emitted;
  }
  /* BENCH_THREAD_CPU (as lttng_bench's): the emitters' CPU seconds and the
   * rest of this process's so far (start-up, the agent's thread), on
   * stderr. */
  if (getenv("BENCH_THREAD_CPU") != NULL)
    fprintf(stderr,
            "THREAD role=emitter cpu_s=%.4f\nTHREAD role=rest cpu_s=%.4f\n",
            emit_cpu, cpu_clock_s(CLOCK_PROCESS_CPUTIME_ID) - emit_cpu);
  gt_stats_t st;
  memset(&st, 0, sizeof st);
  /* Written and dropped are final once the threads are done; what the
   * flush in gt_stop delivers is checked in the database. */
  gt_stats(&st);
  gt_stop();
  /* The agent's other losses, final only now (gt_stats after gt_stop): a
   * generation pushed out of the spool (ACKs behind by more than the
   * spool) is `evicted`, not `dropped`, and the last ones may be evicted
   * during the flush, after the line below was read. The store's ledger
   * counts all three as lost. */
  gt_stats_t fin;
  if (gt_stats(&fin) == 0 && fin.events_evicted + fin.events_rejected > 0)
    fprintf(stderr, "b1_agent: dropped %llu evicted %llu rejected %llu\n",
            (unsigned long long)fin.events_dropped,
            (unsigned long long)fin.events_evicted,
            (unsigned long long)fin.events_rejected);
  char line[160];
  int n = snprintf(line, sizeof line, "%llu %llu %.3f %llu\n",
                   (unsigned long long)st.events_written,
                   (unsigned long long)st.events_dropped, elapsed, emitted);
  if (write(fd, line, (size_t)n) != n)
    return 1;
  return 0;
}
