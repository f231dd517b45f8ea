/* bench_overload: what an event costs the emitting thread when the agent is
 * far past its edge (the buffer pool dry), against the same run's events
 * while the pool has room. One emitting thread, unpaced, the agent's
 * sender pointed at a closed port (sending plays no part in the pool: a
 * generation's buffers go back to the pool when it is sealed).
 *
 *   bench_overload [N] [REPS]   N events per trial (default 5000000),
 *                               REPS repeats (default 3)
 *   bench_overload MODE N       one trial, for callgrind: MODE is room,
 *                               held or dry (below), no BENCH line
 *
 * Trials (the emitter's own CPU time per event, CLOCK_THREAD_CPUTIME_ID,
 * so load on the machine does not count; wall time beside it):
 *   room  a 64 MiB pool, no generation cut: every event recorded
 *   held  every pool buffer taken out by the bench (A1_full's set-up):
 *         every event dropped
 *   dry   a 1 MiB pool (16 buffers, cut at 8) and a 1 ms period: the
 *         agent's thread seals and gives buffers back while the emitter
 *         drains them, as in a B1 trial far past the edge (most events
 *         dropped, the rest recorded; the drop share is printed). On
 *         an idle second core the agent's thread keeps up and little is
 *         dropped: `taskset -c 1 bench_overload` puts the emitter and
 *         the agent's thread on one CPU, as a loaded machine does
 * Also printed per trial: the emitter's voluntary context switches (a
 * blocking call on the event path would show as one per event or per
 * buffer) and involuntary ones (preemption by the rest of the machine).
 * Not a test: figures never fail anything. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "agent_int.h"
#include "gentrace.h"

#define MAXREPS 32

static double clock_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct trial {
  double cpu_ns, wall_ns, drop_share;
  long vcsw, ivcsw;
  uint64_t gens;
} trial;

static int run(const char *mode, int n, trial *out) {
  gt_config c;
  gt_config_init(&c);
  c.addr = "127.0.0.1:1";
  c.spool_mb = 4;
  c.flush_timeout_ms = 1; /* nothing to deliver to: do not wait */
  int held_mode = strcmp(mode, "held") == 0, dry = strcmp(mode, "dry") == 0;
  c.buffer_mb = dry ? 1 : held_mode ? 4 : 64;
  c.period_ms = dry ? 1 : 300000;
  if (gt_start(&c) != 0)
    return -1;
  gt_counter("bench.overload", 0); /* register, take a buffer */
  gt__buf *held = NULL, *b;
  if (held_mode) {
    while ((b = gt__pool_get(&gt__A.pool)) != NULL) {
      b->next = held;
      held = b;
    }
    for (int i = 0; i < 1000000; i++) { /* fill the thread's own buffer */
      gt_stats_t s;
      gt_counter("bench.overload", i);
      if ((i & 1023) == 0 && gt_stats(&s) == 0 && s.events_dropped > 0)
        break;
    }
  }
  gt_stats_t s0, s1;
  gt_stats(&s0);
  struct rusage r0, r1;
  getrusage(RUSAGE_THREAD, &r0);
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
  for (int i = 0; i < n; i++)
    gt_counter("bench.overload", i);
  double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID), w1 = clock_s(CLOCK_MONOTONIC);
  getrusage(RUSAGE_THREAD, &r1);
  gt_stats(&s1);
  out->cpu_ns = (c1 - c0) * 1e9 / n;
  out->wall_ns = (w1 - w0) * 1e9 / n;
  out->drop_share = (double)(s1.events_dropped - s0.events_dropped) / n;
  out->vcsw = r1.ru_nvcsw - r0.ru_nvcsw;
  out->ivcsw = r1.ru_nivcsw - r0.ru_nivcsw;
  out->gens = s1.gens_sealed - s0.gens_sealed;
  while (held != NULL) {
    b = held;
    held = b->next;
    gt__pool_put(&gt__A.pool, b);
  }
  gt_stop();
  return 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double med(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  if (argc == 3 &&
      (strcmp(argv[1], "room") == 0 || strcmp(argv[1], "held") == 0 ||
       strcmp(argv[1], "dry") == 0)) {
    trial t;
    return run(argv[1], atoi(argv[2]), &t) == 0 ? 0 : 1;
  }
  int n = argc > 1 ? atoi(argv[1]) : 5000000;
  int reps = argc > 2 ? atoi(argv[2]) : 3;
  if (n < 1000)
    n = 1000;
  reps = reps < 1 ? 1 : reps > MAXREPS ? MAXREPS : reps;
  static const char *modes[] = {"room", "held", "dry"};
  double cpu[3][MAXREPS], wall[3][MAXREPS], share[3][MAXREPS];
  for (int r = 0; r < reps; r++)
    for (int m = 0; m < 3; m++) { /* interleaved: load swings hit all */
      trial t;
      if (run(modes[m], n, &t) != 0)
        return 1;
      cpu[m][r] = t.cpu_ns;
      wall[m][r] = t.wall_ns;
      share[m][r] = t.drop_share;
      printf("TRIAL mode=%s events=%d cpu_ns=%.2f wall_ns=%.2f dropped=%.1f%% "
             "gens=%llu vcsw=%ld ivcsw=%ld\n",
             modes[m], n, t.cpu_ns, t.wall_ns, t.drop_share * 100,
             (unsigned long long)t.gens, t.vcsw, t.ivcsw);
    }
  double base = med(cpu[0], reps);
  for (int m = 1; m < 3; m++) {
    double v = med(cpu[m], reps), w = med(wall[m], reps);
    double sh = med(share[m], reps);
    printf("BENCH id=A1_overload_%s value=%.2f wall=%.2f unit=ns/event("
           "emitter-cpu,%.0f%%-dropped) baseline=room:%.2f ratio=%.3f "
           "bar=none pass=1\n",
           modes[m], v, w, sh * 100, base, v / base);
  }
  return 0;
}
