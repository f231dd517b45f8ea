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
 * With BENCH_B1_SHARED=1 and the environment of scripts/cluster-up (make
 * bench-b1-shared), the same search runs again against a gentraced on the
 * shared store (PostgreSQL catalog + S3 segments, --segment-max-age from
 * BENCH_B1_SEGMENT_AGE, default the daemon's 2s), counted in the catalog,
 * and a second line `BENCH id=B1-shared` gives its rate beside this run's
 * SQLite rate (BENCH_B1_SHARED=only: the shared run alone, for profiles).
 *
 * The baseline is lttng-relayd's highest zero-loss rate on the same
 * workload (two integers per event); pass it as LTTNG_RATE (events/s) from
 * a measurement in the same run (measured on this machine: about 6.5 M/s with one thread,
 * 11-13 M/s with two), or leave it out and the line says baseline=n/a.
 * This process starts gentraced on 127.0.0.1 port 0 and stops it by PID.
 */
#include "config.h"

#include <errno.h>
#include <libpq-fe.h>
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

/* The same counts from the shared store's catalog. */
static int64_t stored_events_pg(const char *uri, const char *service,
                                int64_t *lost) {
  *lost = -1;
  PGconn *c = PQconnectdb(uri);
  const char *p[] = {service};
  PGresult *r = PQexecParams(
      c,
      "SELECT coalesce(sum(g.events),0), coalesce(sum(g.dropped+g.evicted+"
      "g.rejected),0) FROM gt_generations g JOIN gt_sessions s"
      " ON s.id = g.session_id WHERE s.service = $1",
      1, NULL, p, NULL, NULL, 0);
  int64_t v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    *lost = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
  }
  PQclear(r);
  PQfinish(c);
  return v;
}

/* The shared run's catalog (NULL: the SQLite run). */
static const char *b1_catalog;

/* 1 = zero loss at rate, 0 = loss, < 0 = error. */
static int run_trial(gtd *d, const char *addr, double rate, unsigned threads,
                     double seconds, int idx) {
  char service[64];
  snprintf(service, sizeof service, "b1-%ld-%d", (long)getpid(), idx);
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
  int64_t stored = b1_catalog ? stored_events_pg(b1_catalog, service, &lost)
                              : stored_events(d->db, service, &lost);
  int ok = dropped == 0 && lost == 0 && stored == (int64_t)written;
  fprintf(stderr,
          "bench: B1 rate %.2f M/s: written %llu stored %lld dropped %llu "
          "ledger %lld -> %s\n",
          rate / 1e6, written, (long long)stored, dropped, (long long)lost,
          ok ? "zero loss" : "LOSS");
  return ok;
}

static double b1_search(const char *catalog, unsigned threads,
                        double seconds);

int main(int argc, char **argv) {
  unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
  double seconds = argc > 2 ? atof(argv[2]) : 3;
  double lttng = argc > 3 ? atof(argv[3]) : 0;
  if (threads < 1 || threads > 64 || seconds <= 0) {
    fprintf(stderr, "usage: bench_b1 [THREADS] [SECONDS] [LTTNG_RATE]\n");
    return 2;
  }
  /* BENCH_B1_SHARED=only: the shared run alone (profiling it). */
  const char *sh = getenv("BENCH_B1_SHARED");
  int only = sh && strcmp(sh, "only") == 0;
  double good = only ? 0 : b1_search(NULL, threads, seconds);
  if (good < 0)
    return 1;
  if (only)
    ;
  else if (lttng > 0)
    printf("BENCH id=B1 value=%.2f unit=Mevents/s baseline=lttng-relayd:%.2f "
           "ratio=%.2f bar=1.00 pass=%d\n",
           good / 1e6, lttng / 1e6, good / lttng, good >= lttng);
  else
    printf("BENCH id=B1 value=%.2f unit=Mevents/s baseline=lttng-relayd:n/a "
           "ratio=n/a bar=1.00 pass=0\n",
           good / 1e6);
  if (sh && (strcmp(sh, "1") == 0 || only)) {
    const char *cat = getenv("GENTRACE_CATALOG"),
               *obj = getenv("GENTRACE_OBJECTS");
    if (!cat || !obj) {
      fprintf(stderr, "bench: BENCH_B1_SHARED needs scripts/cluster-up's "
                      "environment (make bench-b1-shared)\n");
      return 1;
    }
    double g2 = b1_search(cat, threads, seconds);
    if (g2 < 0)
      return 1;
    printf("BENCH id=B1-shared value=%.2f unit=Mevents/s(zero-loss,%uthread)"
           " baseline=sqlite:%.2f ratio=%.2f bar=0.50 pass=%d\n",
           g2 / 1e6, threads, good / 1e6, good > 0 ? g2 / good : 0,
           good > 0 && g2 >= good / 2);
  }
  return 0;
}

/* The zero-loss search on a fresh gentraced (catalog NULL: SQLite, else
 * the shared store on catalog and $GENTRACE_OBJECTS). Highest good rate,
 * or -1 when the daemon did not start. */
static double b1_search(const char *catalog, unsigned threads,
                        double seconds) {
  /* gentraced on port 0 through tests/daemon/client.c, stopped by PID. */
  gtd d;
  char addr[64], obj[256];
  const char *age = getenv("BENCH_B1_SEGMENT_AGE");
  snprintf(obj, sizeof obj, "%s/b1-%ld", catalog ? getenv("GENTRACE_OBJECTS")
                                                 : "",
           (long)getpid());
  const char *shared[] = {"--catalog",
                          catalog,
                          "--objects",
                          obj,
                          "--segment-max-age",
                          age ? age : "2s",
                          NULL};
  b1_catalog = catalog;
  if (gtd_init(&d) < 0 || gtd_start(&d, catalog ? shared : NULL, NULL) < 0) {
    fprintf(stderr, "bench: gentraced did not start\n");
    return -1;
  }
  fprintf(stderr, "bench: B1 on %s\n", catalog ? "the shared store" : "SQLite");
  snprintf(addr, sizeof addr, "127.0.0.1:%u", d.agent_port);
  double good = 0, bad = 0, rate = 1e6;
  int idx = 0;
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
