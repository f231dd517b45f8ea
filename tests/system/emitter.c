/* emitter: a synthetic traced service with exact event counts, for the
 * whole-system scenarios (tests/system/). Built on the public agent API only
 * (gentrace.h, libgentrace), configured from GENTRACE_* like any service.
 *
 *   emitter --events N --seconds T [--threads K] [--settle-ms MS] [--label L]
 *
 * Emits exactly N events, spread over K threads, paced evenly over T seconds
 * (each thread emits what its share of the schedule says is due, then sleeps
 * a millisecond), cycling through every kind the API has: region begin/end,
 * counter, instant, log, task begin/end. No thread names: the agent repeats
 * THREAD_NAME in every generation and excludes the repeats from its ledger
 * identity, so leaving them out keeps "events in the trace" one number.
 *
 * At the end it waits (at most --settle-ms, default 30000) until the agent
 * has accounted for every event (written = delivered + dropped + evicted +
 * rejected), because gt_stats() reads zeros once gt_stop() has run; then it
 * prints one line of key=value pairs, calls gt_stop() (which seals the last,
 * possibly empty, generation that carries any pending ledger) and exits 0.
 * settled=0 in the line says the agent never caught up (daemon unreachable).
 *
 * SIGTERM/SIGINT end the emission early (the line then shows fewer events
 * than asked); exit status 1 on a bad gt_start, 2 on usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gentrace.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct worker {
  pthread_t th;
  int index;
  uint64_t share;   /* events this thread must emit */
  uint64_t emitted; /* events it did emit (written by the thread only) */
  int64_t start_ns, span_ns;
} worker;

/* One event of the cycle; returns nothing, emits exactly one API call that
 * the agent counts as one written event. */
static void emit_one(uint64_t j, uint64_t *task, char *msg, size_t msgsz) {
  switch (j % 8) {
  case 0:
    gt_region_begin("request");
    break;
  case 1:
    gt_counter("depth", (int64_t)(j % 1000) - 500);
    break;
  case 2:
    gt_instant("tick");
    break;
  case 3:
    *task = gt_task_begin("job", 0);
    break;
  case 4:
    snprintf(msg, msgsz, "event %" PRIu64 " of the emitter", j);
    gt_log("emitter", msg);
    break;
  case 5:
    gt_task_end(*task);
    break;
  case 6:
    gt_instant("tock");
    break;
  default:
    gt_region_end();
    break;
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t task = 0;
  char msg[64];
  while (w->emitted < w->share && !stop_flag) {
    int64_t el = mono_ns() - w->start_ns;
    uint64_t due = w->share;
    if (el < w->span_ns)
      due = (uint64_t)((double)w->share * (double)el / (double)w->span_ns);
    while (w->emitted < due)
      emit_one(w->emitted++, &task, msg, sizeof msg);
    if (w->emitted < w->share) {
      /* Sleep about 16 events' worth (1-20 ms): fine pacing for fast
       * emitters without thousands of wakeups a second for slow ones
       * (the soak runs 50 of them on 2 cores). */
      int64_t gap = w->span_ns / (int64_t)w->share * 16;
      gap = gap < 1000000 ? 1000000 : gap > 20000000 ? 20000000 : gap;
      struct timespec d = {0, (long)gap};
      nanosleep(&d, NULL);
    }
  }
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f, "usage: emitter --events N --seconds T [--threads K] "
             "[--settle-ms MS] [--label L]\n");
}

static int settled(const gt_stats_t *s) {
  return s->events_written == s->events_delivered + s->events_dropped +
                                  s->events_evicted + s->events_rejected;
}

int main(int argc, char **argv) {
  uint64_t events = 0;
  double seconds = -1;
  int threads = 4;
  long settle_ms = 30000;
  const char *label = "emitter";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      usage(stderr);
      return 2;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--events"))
      events = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--seconds"))
      seconds = atof(v);
    else if (!strcmp(a, "--threads"))
      threads = atoi(v);
    else if (!strcmp(a, "--settle-ms"))
      settle_ms = atol(v);
    else if (!strcmp(a, "--label"))
      label = v;
    else {
      usage(stderr);
      return 2;
    }
  }
  if (events == 0 || seconds < 0 || threads < 1 || threads > 256 ||
      settle_ms < 0) {
    usage(stderr);
    return 2;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  int rc = gt_start(NULL);
  if (rc != 0) {
    fprintf(stderr, "emitter: gt_start: %s\n", strerror(-rc));
    return 1;
  }
  worker *ws = calloc((size_t)threads, sizeof *ws);
  if (!ws) {
    gt_stop();
    return 1;
  }
  int64_t t0 = mono_ns();
  int started = 0;
  for (int i = 0; i < threads; i++) {
    ws[i].index = i;
    ws[i].share = events / (uint64_t)threads +
                  ((uint64_t)i < events % (uint64_t)threads ? 1 : 0);
    ws[i].start_ns = t0;
    ws[i].span_ns = (int64_t)(seconds * 1e9);
    if (ws[i].span_ns < 1)
      ws[i].span_ns = 1;
    if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) != 0)
      break;
    started++;
  }
  uint64_t emitted = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(ws[i].th, NULL);
    emitted += ws[i].emitted;
  }
  double elapsed = (double)(mono_ns() - t0) / 1e9;

  /* Wait until every event is delivered or counted as lost; the open
   * generation is sealed by the agent's period, so this converges within
   * about one period plus a round trip while the daemon is reachable. */
  gt_stats_t s;
  int64_t deadline = mono_ns() + (int64_t)settle_ms * 1000000;
  for (;;) {
    gt_stats(&s);
    if (settled(&s) || mono_ns() >= deadline)
      break;
    struct timespec d = {0, 20000000};
    nanosleep(&d, NULL);
  }
  printf("EMITTER label=%s asked=%" PRIu64 " emitted=%" PRIu64
         " written=%" PRIu64 " delivered=%" PRIu64 " dropped=%" PRIu64
         " evicted=%" PRIu64 " rejected=%" PRIu64 " gens_sealed=%" PRIu64
         " gens_acked=%" PRIu64 " gens_evicted=%" PRIu64
         " gens_rejected=%" PRIu64 " connects=%" PRIu64 " mem_in_use=%" PRIu64
         " mem_limit=%" PRIu64 " settled=%d elapsed=%.3f\n",
         label, events, emitted, s.events_written, s.events_delivered,
         s.events_dropped, s.events_evicted, s.events_rejected, s.gens_sealed,
         s.gens_acked, s.gens_evicted, s.gens_rejected, s.connects,
         s.mem_in_use, s.mem_limit, settled(&s), elapsed);
  fflush(stdout);
  free(ws);
  gt_stop();
  return 0;
}
