/* daemon_fixture.h: helpers shared by the tests that run the real
 * gentraced (tests/daemon/test_ingest*.c, test_session_auth.c): start and stop
 * a daemon so a failing test still kills it (teardown), read the database it
 * writes, and wait for the replies of the protocol client (client.h).
 * Header-only, static functions; each test binary includes it once. */
#ifndef DAEMON_FIXTURE_H
#define DAEMON_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "store_read.h"

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The daemon of the running test, killed by teardown if the test fails. */
static gtd *current;

static inline int teardown(void **state) {
  if (current != NULL)
    gtd_cleanup(current);
  current = NULL;
  return 0;
}

static inline void start(gtd *d, const char *const *args,
                         const char *const *env) {
  assert_int_equal(gtd_init(d), 0);
  current = d;
  int rc = gtd_start(d, args, env);
  if (rc != 0)
    fail_msg("gentraced did not start: %d (log %s)", rc, d->log);
}

static inline void finish(gtd *d) {
  if (d->pid > 0)
    assert_int_equal(gtd_stop(d), 0);
  gtd_cleanup(d);
  current = NULL;
}

static inline int64_t db_count(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st;
  int64_t v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return -1;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

static inline int64_t gen_rows(const char *db, uint64_t gen) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM generations WHERE gen=%llu",
           (unsigned long long)gen);
  return db_count(db, sql);
}

/* The stored bytes of (session, gen) equal what the fixture builds. */
static inline void assert_stored_exactly(const char *db, const gtf_spec *s) {
  store_reader *r;
  char *cause = NULL;
  assert_int_equal(store_reader_open(db, &r, &cause), 0);
  char hex[33];
  gtp_session_hex(s->session, hex);
  gtp_wbuf got, want;
  gtp_wbuf_init(&got, 0);
  gtp_wbuf_init(&want, 0);
  assert_int_equal(store_read_payload_by_gen(r, hex, s->gen, &got), 0);
  assert_int_equal(gtf_generation(&want, s), 0);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.data, want.data, want.len);
  /* And it decodes as a generation with every event. */
  gtp_gen g;
  size_t used;
  assert_int_equal(gtp_gen_parse(got.data, got.len, &g, &used), 0);
  assert_int_equal(g.end.events, gtf_events(s));
  assert_int_equal(g.start.gen, s->gen);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&got);
  gtp_wbuf_fini(&want);
  store_reader_close(r);
}

static inline void spec(gtf_spec *s, unsigned session, uint64_t gen) {
  gtf_spec_init(s, session, gen);
  s->threads = 4;
  s->stacks = 1;
}

static inline void expect_ack(gtc *c, uint64_t want_gen) {
  uint64_t gen = 0;
  int code = 0;
  int rc = gtc_read_reply(c, &gen, &code, GTC_TIMEOUT_MS);
  if (rc != 1)
    fail_msg("wanted ACK %llu, got rc=%d code=%d gen=%llu",
             (unsigned long long)want_gen, rc, code, (unsigned long long)gen);
  assert_int_equal(gen, want_gen);
}

/* Waits until the daemon closed c, with ERROR want_code unless 0; the
 * daemon must still run. */
static inline void expect_closed_with(gtd *d, gtc *c, int want_code) {
  int code = 0;
  int rc = gtc_wait_closed(c, &code, GTC_TIMEOUT_MS);
  if (rc != 1)
    fail_msg("connection not closed: rc=%d", rc);
  if (want_code != 0)
    assert_int_equal(code, want_code);
  gtc_close(c);
  assert_true(gtd_alive(d));
}

#endif
