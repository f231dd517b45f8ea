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
  double rate; /* events/s of this thread */
  double seconds;
  uint64_t emitted;
  double elapsed; /* seconds it took to emit rate * seconds events */
} worker;

static void *emit(void *arg) {
  worker *w = arg;
  double t0 = now_s();
  uint64_t total = (uint64_t)(w->rate * w->seconds), n = 0;
  while (n < total) {
    uint64_t due = (uint64_t)((now_s() - t0) * w->rate);
    if (due > total)
      due = total;
    /* Bursts of at most 256 keep the pacing smooth at any rate; a thread
     * that fell behind catches up and takes longer (elapsed). */
    uint64_t k = due > n ? due - n : 0;
    if (k > 256)
      k = 256;
    for (uint64_t i = 0; i < k; i++)
      gt_counter("b1", (int64_t)(n + i));
    n += k;
  }
  w->emitted = n;
  w->elapsed = now_s() - t0;
  return NULL;
}

int b1_agent_run(const char *addr, const char *service, double rate,
                 unsigned threads, double seconds, int fd) {
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
  pthread_t t[64];
  worker w[64];
  for (unsigned i = 0; i < threads; i++) {
    w[i].rate = rate / threads;
    w[i].seconds = seconds;
    pthread_create(&t[i], NULL, emit, &w[i]);
  }
  double elapsed = 0;
  for (unsigned i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (w[i].elapsed > elapsed)
      elapsed = w[i].elapsed;
  }
  gt_stats_t st;
  memset(&st, 0, sizeof st);
  /* Written and dropped are final once the threads are done; what the
   * flush in gt_stop delivers is checked in the database. */
  gt_stats(&st);
  gt_stop();
  char line[128];
  int n = snprintf(line, sizeof line, "%llu %llu %.3f\n",
                   (unsigned long long)st.events_written,
                   (unsigned long long)st.events_dropped, elapsed);
  if (write(fd, line, (size_t)n) != n)
    return 1;
  return 0;
}
