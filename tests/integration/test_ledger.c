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

#include "agent_child.h"
#include "client.h"
#include "format.h"
#include "store_read.h"

/* The daemon under test: started and stopped through tests/daemon/client.c
 * (port 0, readiness from its `listening` line, stopped by PID). */
static gtd dp;
static char dp_addr[64];

/* The honest agent (tests/lib/agent_child.c) writes for 1.5 s, spinning,
 * then gently until three more generations are sealed; the events it
 * wrote. */
static uint64_t run(const char *service, double rate, uint32_t buffer_mb,
                    int nthreads) {
  ac_config cfg = {.addr = dp_addr,
                   .service = service,
                   .rate = rate,
                   .seconds = 1.5,
                   .threads = nthreads,
                   .buffer_mb = buffer_mb,
                   .flush_timeout_ms = 10000,
                   .settle_gens = 3};
  ac_child c;
  assert_int_equal(ac_start(&c, &cfg), 0);
  int64_t n = ac_wait(&c);
  assert_true(n >= 0);
  return (uint64_t)n;
}

static void db_sums(const char *service, int64_t *stored, int64_t *lost,
                    int64_t *gaps) {
  assert_int_equal(ac_db_sums(dp.db, service, stored, lost, gaps), 0);
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
