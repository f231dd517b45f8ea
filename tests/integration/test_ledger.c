/* test_ledger.c: the loss ledger adds up exactly end to end. Threads of a
 * child process write events through the real agent into the real
 * gentraced and end with gt_stop(); the database must then hold
 *   events written = events stored + dropped + evicted + rejected
 * exactly, with nothing lost at a gentle rate and with the ledger carrying
 * the difference when the agent's buffers are made too small on purpose. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "format.h"
#include "gentrace.h"
#include "store_read.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The daemon under test: started and stopped through tests/daemon/client.c
 * (port 0, readiness from its `listening` line, stopped by PID). */
static gtd dp;
static char dp_addr[64];

typedef struct worker {
  double rate, seconds;
} worker;

static void *emit(void *arg) {
  worker *w = arg;
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
  }
  /* Then gently until the agent sealed three more generations: a thread
   * that dropped writes its LOST marker first into the next buffer it
   * gets, and on a starved machine the burst can end before any buffer
   * came back to the pool (no marker anywhere). */
  gt_stats_t st;
  gt_stats(&st);
  uint64_t sealed = st.gens_sealed;
  double deadline = now_s() + 30;
  while (gt_stats(&st) == 0 && st.gens_sealed < sealed + 3 &&
         now_s() < deadline) {
    gt_counter("n", (int64_t)n++);
    usleep(5000);
  }
  return NULL;
}

/* Child process: writes, stops, reports events written. */
static int child(const char *service, double rate, uint32_t buffer_mb,
                 int nthreads, int fd) {
  gt_config cfg;
  gt_config_init(&cfg);
  cfg.addr = dp_addr;
  cfg.service = service;
  cfg.period_ms = 200;
  cfg.buffer_mb = buffer_mb;
  cfg.flush_timeout_ms = 10000;
  if (gt_start(&cfg) != 0)
    return 1;
  pthread_t t[32];
  worker w = {rate / nthreads, 1.5};
  for (int i = 0; i < nthreads; i++)
    pthread_create(&t[i], NULL, emit, &w);
  for (int i = 0; i < nthreads; i++)
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

static uint64_t run(const char *service, double rate, uint32_t buffer_mb,
                    int nthreads) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    _exit(child(service, rate, buffer_mb, nthreads, p[1]));
  }
  close(p[1]);
  char buf[64] = {0};
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  int status;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_true(n > 0);
  return strtoull(buf, NULL, 10);
}

static void db_sums(const char *service, int64_t *stored, int64_t *lost,
                    int64_t *gaps) {
  sqlite3 *h;
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_open_v2(dp.db, &h, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  assert_int_equal(
      sqlite3_prepare_v2(
          h,
          "SELECT sum(g.events), sum(g.dropped + g.evicted + g.rejected),"
          " max(g.gen) - min(g.gen) + 1 - count(*)"
          " FROM generations g JOIN sessions s ON s.id = g.session_id"
          " WHERE s.service = ?",
          -1, &q, NULL),
      SQLITE_OK);
  sqlite3_bind_text(q, 1, service, -1, SQLITE_STATIC);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  *stored = sqlite3_column_int64(q, 0);
  *lost = sqlite3_column_int64(q, 1);
  *gaps = sqlite3_column_int64(q, 2);
  sqlite3_finalize(q);
  sqlite3_close(h);
}

/* Events stored for the service, LOST markers excluded (they record a
 * loss, they are not events anyone wrote), decoded from the payloads. */
static int64_t stored_user_events(const char *service, int64_t *markers) {
  store_reader *r;
  char *cause = NULL;
  assert_int_equal(store_reader_open(dp.db, &r, &cause), 0);
  sqlite3 *h;
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_open_v2(dp.db, &h, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(h,
                                      "SELECT g.seq FROM generations g JOIN "
                                      "sessions s ON s.id = g.session_id "
                                      "WHERE s.service = ?",
                                      -1, &q, NULL),
                   SQLITE_OK);
  sqlite3_bind_text(q, 1, service, -1, SQLITE_STATIC);
  int64_t n = 0;
  *markers = 0;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  while (sqlite3_step(q) == SQLITE_ROW) {
    gtp_wbuf_reset(&b);
    assert_int_equal(store_read_payload(r, sqlite3_column_int64(q, 0), &b), 0);
    gtp_gen g;
    size_t used;
    assert_int_equal(gtp_gen_parse(b.data, b.len, &g, &used), 0);
    size_t cur = 0;
    gtp_batch bt;
    while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
      gtp_event_iter it;
      gtp_event ev;
      gtp_event_iter_init(&it, &bt);
      int rc;
      while ((rc = gtp_event_next(&it, &ev)) == 1) {
        if (ev.type == GTP_EV_LOST)
          (*markers)++;
        else
          n++;
      }
      assert_int_equal(rc, 0);
    }
    gtp_gen_fini(&g);
  }
  gtp_wbuf_fini(&b);
  sqlite3_finalize(q);
  sqlite3_close(h);
  store_reader_close(r);
  return n;
}

static int setup(void **state) {
  if (gtd_init(&dp) < 0 || gtd_start(&dp, NULL, NULL) < 0)
    return -1;
  snprintf(dp_addr, sizeof dp_addr, "127.0.0.1:%u", dp.agent_port);
  return 0;
}

static int teardown(void **state) {
  gtd_kill9(&dp);
  gtd_cleanup(&dp);
  return 0;
}

static void test_ledger__gentle_rate_stores_every_event(void **state) {
  uint64_t written = run("ledger-gentle", 200000, 8, 2);
  int64_t stored, lost, gaps;
  db_sums("ledger-gentle", &stored, &lost, &gaps);
  assert_true(written > 100000);
  assert_int_equal(lost, 0);
  assert_int_equal(gaps, 0);
  assert_int_equal(stored, (int64_t)written);
  int64_t markers;
  assert_int_equal(stored_user_events("ledger-gentle", &markers), stored);
  assert_int_equal(markers, 0);
}

static void
test_ledger__tiny_buffers_drop_and_the_ledger_says_so(void **state) {
  /* 1 MiB of buffers is 16 buffers of 64 KiB; 24 writing threads each
   * need one of their own per generation, so the pool runs dry whatever the
   * size cut does (it cuts at half the pool) and however fast the sealer. */
  uint64_t written = run("ledger-tiny", 4e6, 1, 24);
  int64_t stored, lost, gaps;
  db_sums("ledger-tiny", &stored, &lost, &gaps);
  assert_true(lost > 0);
  assert_int_equal(gaps, 0);
  int64_t markers;
  int64_t user = stored_user_events("ledger-tiny", &markers);
  assert_true(markers > 0);
  assert_int_equal(user + markers, stored);
  assert_int_equal(user + lost, (int64_t)written);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ledger__gentle_rate_stores_every_event),
      cmocka_unit_test(test_ledger__tiny_buffers_drop_and_the_ledger_says_so),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
