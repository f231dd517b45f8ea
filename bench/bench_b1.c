/* bench_b1: B1, the highest paced event rate that reaches committed rows
 * with zero loss: threads of one process call gt_counter at a fixed total
 * rate for a few seconds through the real agent into the real gentraced;
 * a rate passes when nothing was dropped, evicted or rejected and the
 * events stored in SQLite equal the events written. Rates double until one
 * fails, then a binary search narrows the edge.
 *
 *   bench_b1 [THREADS] [SECONDS] [LTTNG_RATE]
 *
 * GENTRACE_BUFFER_MB, GENTRACE_PERIOD_MS and GENTRACE_SPOOL_MB set the
 * agent's buffer pool, generation period and spool (defaults 8, 1000, 64).
 *
 * The baseline is lttng-relayd's highest zero-loss rate on the same
 * workload (two integers per event); pass it as LTTNG_RATE (events/s) from
 * a measurement in the same run (measured on this machine: about 6.5 M/s with
 * one thread, 11-13 M/s with two), or leave it out and the line says
 * baseline=n/a. This process starts gentraced on 127.0.0.1 port 0 and stops it
 * by PID.
 *
 * BENCH_B1_SUMMARY=ab: instead, what summarizing at commit costs (issue 17,
 * goal <= 5% of B1), in one run: B1 is searched ROUNDS times (default 2,
 * BENCH_B1_ROUNDS) with gentraced summarizing and as often without
 * (GENTRACE_BENCH_NO_SUMMARY), alternating, best of each kept; then one
 * trial of each at half the lower edge measures gentraced's CPU time per
 * stored event (/proc/PID/stat). Prints B1_summary (edge with / without)
 * and B1_summary_cpu (daemon CPU per event with / without).
 * BENCH_B1_CPU_RATE=R skips the edges and compares the CPU at R events/s.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
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
} worker;

static void *emit(void *arg) {
  worker *w = arg;
  double t0 = now_s(), end = t0 + w->seconds;
  uint64_t n = 0;
  for (;;) {
    double t = now_s();
    if (t >= end)
      break;
    uint64_t due = (uint64_t)((t - t0) * w->rate);
    /* Bursts of at most 256 keep the pacing smooth at any rate. */
    uint64_t k = due > n ? due - n : 0;
    if (k > 256)
      k = 256;
    for (uint64_t i = 0; i < k; i++)
      gt_counter("b1", (int64_t)(n + i));
    n += k;
  }
  w->emitted = n;
  return NULL;
}

/* Child: one trial at `rate` total; writes "written dropped" to fd. */
static int trial_child(const char *addr, const char *service, double rate,
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
  for (unsigned i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  gt_stats_t st;
  memset(&st, 0, sizeof st);
  /* Written and dropped are final once the threads are done; what the
   * flush in gt_stop delivers is checked in the database. */
  gt_stats(&st);
  gt_stop();
  char line[128];
  int n = snprintf(line, sizeof line, "%llu %llu\n",
                   (unsigned long long)st.events_written,
                   (unsigned long long)st.events_dropped);
  if (write(fd, line, (size_t)n) != n)
    return 1;
  return 0;
}

static int64_t stored_events(const char *db, const char *service,
                             int64_t *lost) {
  sqlite3 *h;
  sqlite3_stmt *q;
  int64_t v = -1;
  *lost = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return -1;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(
          h,
          "SELECT coalesce(sum(g.events),0),"
          " coalesce(sum(g.dropped+g.evicted+g.rejected),0),"
          " coalesce(sum(g.evicted),0), coalesce(max(s.rejected_events),0)"
          " FROM generations g JOIN sessions s"
          " ON s.id = g.session_id WHERE s.service = ?",
          -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, service, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) {
      v = sqlite3_column_int64(q, 0);
      *lost = sqlite3_column_int64(q, 1);
      fprintf(stderr, "bench: ledger: evicted %lld, daemon-rejected %lld\n",
              (long long)sqlite3_column_int64(q, 2),
              (long long)sqlite3_column_int64(q, 3));
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(h);
  return v;
}

/* CPU time (user + system) of a process so far, in ns; -1 unknown. */
static double proc_cpu_ns(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long long ut = 0, st = 0;
  if (!p ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
             &ut, &st) != 2)
    return -1;
  return (double)(ut + st) * 1e9 / (double)sysconf(_SC_CLK_TCK);
}

/* 1 = zero loss at rate, 0 = loss, < 0 = error. */
static int run_trial(gtd *d, const char *addr, double rate, unsigned threads,
                     double seconds, int idx) {
  char service[64];
  snprintf(service, sizeof service, "b1-%d", idx);
  int p[2];
  if (pipe(p) < 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    _exit(trial_child(addr, service, rate, threads, seconds, p[1]));
  }
  close(p[1]);
  char buf[128] = {0};
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  int status;
  waitpid(pid, &status, 0);
  unsigned long long written = 0, dropped = 0;
  if (n <= 0 || sscanf(buf, "%llu %llu", &written, &dropped) != 2)
    return -1;
  int64_t lost;
  int64_t stored = stored_events(d->db, service, &lost);
  int ok = dropped == 0 && lost == 0 && stored == (int64_t)written;
  fprintf(stderr,
          "bench: B1 rate %.2f M/s: written %llu stored %lld dropped %llu "
          "ledger %lld -> %s\n",
          rate / 1e6, written, (long long)stored, dropped, (long long)lost,
          ok ? "zero loss" : "LOSS");
  return ok;
}

/* The B1 search on one gentraced started with env (may be NULL): the
 * highest zero-loss rate, or < 0 when the daemon did not start. With
 * cpu_rate > 0, also one trial at that rate first, its daemon CPU per
 * stored event in *cpu_ns (ns). */
static double b1_edge(const char *const *env, unsigned threads, double seconds,
                      double cpu_rate, double *cpu_ns) {
  /* gentraced on port 0 through tests/daemon/client.c, stopped by PID. */
  gtd d;
  char addr[64];
  if (gtd_init(&d) < 0 || gtd_start(&d, NULL, env) < 0) {
    fprintf(stderr, "bench: gentraced did not start\n");
    return -1;
  }
  snprintf(addr, sizeof addr, "127.0.0.1:%u", d.agent_port);
  double good = 0, bad = 0, rate = 1e6;
  int idx = 0;
  if (cpu_rate > 0) {
    double c0 = proc_cpu_ns(d.pid);
    int r = run_trial(&d, addr, cpu_rate, threads, seconds, idx++);
    double c1 = proc_cpu_ns(d.pid);
    *cpu_ns = r == 1 && c0 >= 0 ? (c1 - c0) / (cpu_rate * seconds) : -1;
    gtd_stop(&d);
    gtd_cleanup(&d);
    return 0;
  }
  while (rate <= 512e6) {
    int r = run_trial(&d, addr, rate, threads, seconds, idx++);
    if (r < 0)
      break;
    if (r == 0) {
      bad = rate;
      break;
    }
    good = rate;
    rate *= 2;
  }
  for (int i = 0; i < 3 && bad > 0 && good > 0; i++) {
    double mid = (good + bad) / 2;
    int r = run_trial(&d, addr, mid, threads, seconds, idx++);
    if (r < 0)
      break;
    if (r)
      good = mid;
    else
      bad = mid;
  }
  gtd_stop(&d);
  gtd_cleanup(&d);
  return good;
}

/* BENCH_B1_SUMMARY=ab (see the header). */
static int summary_ab(unsigned threads, double seconds) {
  static const char *const off[] = {"GENTRACE_BENCH_NO_SUMMARY=1", NULL};
  const char *r = getenv("BENCH_B1_ROUNDS");
  int rounds = r ? atoi(r) : 2;
  /* BENCH_B1_CPU_RATE=R: only the CPU comparison, at R events/s (a loaded
   * machine moves the edges by more than the effect). */
  const char *cr = getenv("BENCH_B1_CPU_RATE");
  if (cr)
    rounds = 0;
  double with = 0, without = 0;
  for (int i = 0; i < rounds; i++) {
    double a = b1_edge(NULL, threads, seconds, 0, NULL);
    double b = b1_edge(off, threads, seconds, 0, NULL);
    if (a < 0 || b < 0)
      return 1;
    fprintf(stderr, "bench: round %d: B1 %.2f M/s summarizing, %.2f M/s not\n",
            i + 1, a / 1e6, b / 1e6);
    with = a > with ? a : with;
    without = b > without ? b : without;
  }
  double ratio = without > 0 ? with / without : 0;
  if (rounds > 0)
    printf("BENCH id=B1_summary value=%.2f unit=Mevents/s "
           "baseline=B1_no_summary:%.2f ratio=%.3f bar=0.95 pass=%d\n",
           with / 1e6, without / 1e6, ratio, ratio >= 0.95);
  double rate = cr ? atof(cr) : (with < without ? with : without) / 2;
  double cw = -1, co = -1;
  if (rate > 0) {
    b1_edge(NULL, threads, seconds, rate, &cw);
    b1_edge(off, threads, seconds, rate, &co);
  }
  printf("BENCH id=B1_summary_cpu value=%.1f unit=ns/event "
         "baseline=no_summary:%.1f ratio=%.3f bar=1.05 pass=%d\n",
         cw, co, co > 0 ? cw / co : 0, co > 0 && cw > 0 && cw <= 1.05 * co);
  fprintf(stderr,
          "bench: daemon CPU at %.2f M/s: %.1f ns/event summarizing, "
          "%.1f ns/event not\n",
          rate / 1e6, cw, co);
  return 0;
}

int main(int argc, char **argv) {
  unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
  double seconds = argc > 2 ? atof(argv[2]) : 3;
  double lttng = argc > 3 ? atof(argv[3]) : 0;
  if (threads < 1 || threads > 64 || seconds <= 0) {
    fprintf(stderr, "usage: bench_b1 [THREADS] [SECONDS] [LTTNG_RATE]\n");
    return 2;
  }
  const char *ab = getenv("BENCH_B1_SUMMARY");
  if (ab && strcmp(ab, "ab") == 0)
    return summary_ab(threads, seconds);
  double good = b1_edge(NULL, threads, seconds, 0, NULL);
  if (good < 0)
    return 1;
  if (lttng > 0)
    printf("BENCH id=B1 value=%.2f unit=Mevents/s baseline=lttng-relayd:%.2f "
           "ratio=%.2f bar=1.00 pass=%d\n",
           good / 1e6, lttng / 1e6, good / lttng, good >= lttng);
  else
    printf("BENCH id=B1 value=%.2f unit=Mevents/s baseline=lttng-relayd:n/a "
           "ratio=n/a bar=1.00 pass=0\n",
           good / 1e6);
  return 0;
}
