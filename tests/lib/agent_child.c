/* agent_child.c: the honest agent in a child process (agent_child.h). */
#include "config.h"

#include "agent_child.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gentrace.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct emitter {
  double rate, seconds;
  int pace_ms, settle_gens;
} emitter;

/* One writing thread: a region around every third counter, at rate. */
static void *emit(void *arg) {
  emitter *w = arg;
  double t0 = now_s();
  uint64_t n = 0;
  for (;;) {
    double t = now_s();
    if (t >= t0 + w->seconds)
      break;
    uint64_t due = (uint64_t)((t - t0) * w->rate);
    for (; n < due; n++) {
      if (n % 3 == 0)
        gt_region_begin("work");
      gt_counter("n", (int64_t)n);
      if (n % 3 == 0)
        gt_region_end();
    }
    if (w->pace_ms > 0) {
      struct timespec ts = {0, (long)w->pace_ms * 1000000L};
      nanosleep(&ts, NULL);
    }
  }
  gt_stats_t st;
  gt_stats(&st);
  uint64_t sealed = st.gens_sealed + (uint64_t)w->settle_gens;
  double deadline = now_s() + 30;
  while (w->settle_gens > 0 && gt_stats(&st) == 0 && st.gens_sealed < sealed &&
         now_s() < deadline) {
    gt_counter("n", (int64_t)n++);
    struct timespec ts = {0, 5000000L};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* The child: writes, stops (flushing every generation it holds) and
 * reports the events it wrote on fd. Its exit status. */
static int child(const ac_config *cfg, int fd) {
  gt_config gc;
  gt_config_init(&gc);
  gc.addr = cfg->addr;
  gc.service = cfg->service;
  gc.period_ms = 200;
  gc.buffer_mb = cfg->buffer_mb;
  gc.flush_timeout_ms = cfg->flush_timeout_ms;
  if (gt_start(&gc) != 0)
    return 1;
  pthread_t t[32];
  int nt = cfg->threads < 1 ? 1 : cfg->threads > 32 ? 32 : cfg->threads;
  emitter w = {cfg->rate / nt, cfg->seconds, cfg->pace_ms, cfg->settle_gens};
  for (int i = 0; i < nt; i++)
    pthread_create(&t[i], NULL, emit, &w);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
  gt_stats_t st;
  memset(&st, 0, sizeof st);
  gt_stats(&st);
  gt_stop();
  char line[64];
  int n = snprintf(line, sizeof line, "%llu\n",
                   (unsigned long long)st.events_written);
  return write(fd, line, (size_t)n) == n ? 0 : 1;
}

int ac_start(ac_child *c, const ac_config *cfg) {
  int p[2];
  if (pipe(p) != 0)
    return -errno;
  c->pid = fork();
  if (c->pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    return -e;
  }
  if (c->pid == 0) {
    close(p[0]);
    _exit(child(cfg, p[1]));
  }
  close(p[1]);
  c->fd = p[0];
  return 0;
}

int64_t ac_wait(ac_child *c) {
  char buf[64] = {0};
  ssize_t n = read(c->fd, buf, sizeof buf - 1);
  close(c->fd);
  int status = 0;
  waitpid(c->pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n <= 0)
    return -1;
  return (int64_t)strtoull(buf, NULL, 10);
}

int ac_db_sums(const char *db, const char *service, int64_t *stored,
               int64_t *lost, int64_t *gaps) {
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  int rc = -1;
  *stored = *lost = *gaps = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    goto out;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(
          h,
          "SELECT coalesce(sum(g.events), 0),"
          " coalesce(sum(g.dropped + g.evicted + g.rejected), 0),"
          " coalesce(max(g.gen) - min(g.gen) + 1 - count(*), 0)"
          " FROM generations g JOIN sessions s ON s.id = g.session_id"
          " WHERE s.service = ?",
          -1, &q, NULL) != SQLITE_OK)
    goto out;
  sqlite3_bind_text(q, 1, service, -1, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_ROW)
    goto out;
  *stored = sqlite3_column_int64(q, 0);
  *lost = sqlite3_column_int64(q, 1);
  *gaps = sqlite3_column_int64(q, 2);
  rc = 0;
out:
  sqlite3_finalize(q);
  sqlite3_close(h);
  return rc;
}
