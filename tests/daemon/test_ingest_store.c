/* test_ingest_store.c: the ingest's way to the store and back
 * (daemon/ingest_commit.c) through the real gentraced process on
 * 127.0.0.1 port 0: kill -9 loses no ACKed generation, a slow store keeps
 * the buffers bounded, a full disk pauses ingest and resumes. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "daemon_fixture.h"
#include "store_read.h"

/* ---------------------------------------------------------- kill -9 test */

typedef struct sender {
  gtc *c;
  unsigned session;
  uint64_t first, last;
  size_t threads;
} sender;

static void *send_all(void *arg) {
  sender *sd = arg;
  for (uint64_t gen = sd->first; gen <= sd->last; gen++) {
    gtf_spec s;
    gtc_gen g;
    gtf_spec_init(&s, sd->session, gen);
    s.threads = (unsigned)sd->threads;
    s.stacks = 1;
    if (gtc_gen_build(&g, &s) < 0)
      break;
    int rc = gtc_send_gen(sd->c, &g);
    gtc_gen_fini(&g);
    if (rc < 0)
      break; /* the daemon died under us: expected in the kill test */
  }
  return NULL;
}

static void
test_ingest__kill9_loses_no_acked_generation_and_resume_is_exact(void **st) {
  /* A slow store (100 ms per transaction) makes sure the kill lands while
   * generations are still unACKed. gentraced groups up to 2048 generations
   * in one transaction (main.c's batch_max), so N is above that: however
   * fast the sender is, the first commit cannot ACK them all, and the kill
   * comes right after its first ACKs, long before a second commit. */
  enum { N = 2500 };
  gtd d;
  const char *args[] = {"--test-store-delay-ms", "100", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 11, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  sender sd = {&c, 11, 1, N, 4};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, send_all, &sd), 0);
  static uint8_t acked[N + 1];
  memset(acked, 0, sizeof acked);
  unsigned nacked = 0;
  while (nacked < 30) {
    uint64_t gen;
    int code;
    assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 1);
    assert_true(gen >= 1 && gen <= N);
    acked[gen] = 1;
    nacked++;
  }
  gtd_kill9(&d);
  /* ACKs already on the wire were sent after their commit: count them. */
  for (;;) {
    uint64_t gen;
    int code;
    if (gtc_read_reply(&c, &gen, &code, 2000) != 1)
      break;
    acked[gen] = 1;
    nacked++;
  }
  shutdown(c.fd, SHUT_RDWR);
  pthread_join(t, NULL);
  gtc_close(&c);
  assert_true(nacked < N); /* the kill really came mid-ingest */

  sqlite3 *h;
  assert_int_equal(sqlite3_open(d.db, &h), SQLITE_OK);
  sqlite3_stmt *q;
  assert_int_equal(
      sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL), 0);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(q, 0), "ok");
  sqlite3_finalize(q);
  sqlite3_close(h);
  for (uint64_t gen = 1; gen <= N; gen++)
    if (acked[gen])
      assert_int_equal(gen_rows(d.db, gen), 1);

  /* Restart on the same database (a fast store now); the agent resends
   * what is not ACKed. */
  assert_int_equal(gtd_start(&d, NULL, NULL), 0);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(w.has_last, 1);
  for (uint64_t gen = 1; gen <= N; gen++)
    if (acked[gen])
      assert_true(w.last_gen >= gen);
  unsigned resent = 0;
  for (uint64_t gen = 1; gen <= N; gen++) {
    if (acked[gen])
      continue;
    gtc_gen g;
    gtf_spec_init(&s, 11, gen);
    s.threads = 4;
    s.stacks = 1;
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    gtc_gen_fini(&g);
    expect_ack(&c, gen);
    resent++;
  }
  assert_true(resent > 0);
  gtc_close(&c);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), N);
  assert_int_equal(
      db_count(d.db, "SELECT count(DISTINCT gen) FROM generations"), N);
  finish(&d);
}

/* --------------------------------------------------------- backpressure */

static void
test_ingest__slow_store_keeps_buffers_under_limit_and_resumes(void **st) {
  enum { N = 300 };
  gtd d;
  const char *args[] = {"--test-store-delay-ms",
                        "40",
                        "--max-buffer",
                        "96K",
                        "--max-conn-buffer",
                        "96K",
                        NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 12, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  gtc_gen one;
  s.threads = 16;
  assert_int_equal(gtc_gen_build(&one, &s), 0);
  size_t gen_size = one.body.len;
  gtc_gen_fini(&one);
  sender sd = {&c, 12, 1, N, 16};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, send_all, &sd), 0);
  int64_t max_seen = 0;
  unsigned nacked = 0;
  while (nacked < N) {
    uint64_t gen;
    int code;
    int rc = gtc_read_reply(&c, &gen, &code, 50);
    if (rc == 1)
      nacked++;
    else
      assert_int_equal(rc, -ETIMEDOUT);
    int64_t b = gtd_metric(&d, "gentrace_buffered_bytes");
    if (b > max_seen)
      max_seen = b;
  }
  pthread_join(t, NULL);
  gtc_close(&c);
  /* All of it would be ~N * gen_size without backpressure; with it, the
   * limit plus what one read and one frame can add. */
  int64_t bound = 96 * 1024 + 64 * 1024 + 2 * (int64_t)gen_size;
  if (max_seen > bound)
    fail_msg("buffered %lld > bound %lld", (long long)max_seen,
             (long long)bound);
  assert_true((int64_t)(N * gen_size) > 2 * bound);
  assert_true(max_seen > 0);
  assert_true(gtd_metric(&d, "gentrace_reads_paused_total") > 0);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), N);
  assert_int_equal(gtd_metric(&d, "gentrace_buffered_bytes"), 0);
  finish(&d);
}

/* ------------------------------------------------------------- disk full */

static void
test_ingest__disk_full_pauses_ingest_reads_work_then_resumes(void **st) {
  gtd d;
  const char *env[] = {"GENTRACE_TEST_MAX_PAGES=100", NULL};
  start(&d, NULL, env);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 13, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  /* Fill the database (100 pages of 64 KiB) with incompressible
   * generations (~256 KiB each)
   * until one is not ACKed: the store hit its page limit. */
  uint64_t gen = 1, pending = 0;
  for (; gen < 100; gen++) {
    gtc_gen g;
    spec(&s, 13, gen);
    assert_int_equal(gtc_gen_build_random(&g, &s, 4, (unsigned)gen), 0);
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    gtc_gen_fini(&g);
    /* Either the ACK comes, or the daemon reports the disk full (a slow
     * commit on a loaded machine is neither). */
    uint64_t got = 0;
    int code, rc;
    int64_t deadline = now_ms() + 20000;
    while ((rc = gtc_read_reply(&c, &got, &code, 200)) == -ETIMEDOUT &&
           now_ms() < deadline)
      if (gtd_metric(&d, "gentrace_disk_full") == 1)
        break;
    if (rc == -ETIMEDOUT) {
      pending = gen;
      break;
    }
    assert_int_equal(rc, 1);
    assert_int_equal(got, gen);
  }
  assert_true(pending > 1);
  assert_int_equal(gtd_metric(&d, "gentrace_disk_full"), 1);
  int status;
  char *body = gtd_http_get(&d, "/healthz", &status);
  free(body);
  assert_int_equal(status, 503);
  /* Reads keep working. */
  body = gtd_http_get(&d, "/v1/agents", &status);
  assert_int_equal(status, 200);
  assert_non_null(strstr(body, "\"agents\""));
  free(body);
  assert_int_equal(gen_rows(d.db, pending), 0);

  /* An operator frees space (here: deletes the oldest rows). */
  sqlite3 *h;
  assert_int_equal(sqlite3_open(d.db, &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  assert_int_equal(
      sqlite3_exec(h,
                   "BEGIN;"
                   "DELETE FROM payloads WHERE seq IN (SELECT seq FROM "
                   "generations WHERE gen < 8);"
                   "DELETE FROM generations WHERE gen < 8;"
                   "COMMIT;",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);

  /* The paused generation commits and is ACKed without a resend. */
  uint64_t got;
  int code;
  assert_int_equal(gtc_read_reply(&c, &got, &code, 15000), 1);
  assert_int_equal(got, pending);
  assert_int_equal(gen_rows(d.db, pending), 1);
  assert_int_equal(gtd_metric(&d, "gentrace_disk_full"), 0);
  assert_true(gtd_metric(&d, "gentrace_disk_full_total") >= 1);

  /* Full again within the minute (a nearly full disk flaps): the pause is
   * counted, but the error line is not written a second time. */
  uint64_t again = 0;
  for (gen = pending + 1; gen < pending + 100 && !again; gen++) {
    gtc_gen g;
    spec(&s, 13, gen);
    assert_int_equal(gtc_gen_build_random(&g, &s, 4, (unsigned)gen), 0);
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    gtc_gen_fini(&g);
    int rc;
    int64_t deadline = now_ms() + 20000;
    while ((rc = gtc_read_reply(&c, &got, &code, 200)) == -ETIMEDOUT &&
           now_ms() < deadline)
      if (gtd_metric(&d, "gentrace_disk_full") == 1)
        break;
    if (rc == -ETIMEDOUT)
      again = gen;
    else
      assert_int_equal(got, gen);
  }
  assert_true(again > pending);
  assert_true(gtd_metric(&d, "gentrace_disk_full_total") >= 2);
  FILE *lf = fopen(d.log, "r");
  assert_non_null(lf);
  char line[1024];
  int full_lines = 0;
  while (fgets(line, sizeof line, lf) != NULL)
    full_lines += strstr(line, "storage full, ingest paused") != NULL;
  fclose(lf);
  assert_int_equal(full_lines, 1);
  /* Room again, so the drain at the end has nothing left waiting. */
  assert_int_equal(sqlite3_open(d.db, &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  assert_int_equal(
      sqlite3_exec(h,
                   "BEGIN;"
                   "DELETE FROM payloads WHERE seq IN (SELECT seq FROM "
                   "generations WHERE gen < 40);"
                   "DELETE FROM generations WHERE gen < 40;"
                   "COMMIT;",
                   NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(h);
  assert_int_equal(gtc_read_reply(&c, &got, &code, 15000), 1);
  assert_int_equal(got, again);
  gtc_close(&c);
  finish(&d);
}

/* The daemon's own ACK latency (daemon/acklat.c): every ACK is counted in
 * both histograms, and with a store that sleeps 40 ms before each commit
 * none of them lands in a bucket under 40 ms, from the GEN_END read to the
 * COMMIT or to the ACK. */
static void test_ingest__ack_latency_histograms_count_every_ack(void **st) {
  (void)st;
  gtd d;
  const char *args[] = {"--test-store-delay-ms", "40", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 21, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  for (uint64_t gen = 1; gen <= 3; gen++) {
    gtc_gen g;
    spec(&s, 21, gen);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    gtc_gen_fini(&g);
    uint64_t got;
    int code;
    assert_int_equal(gtc_read_reply(&c, &got, &code, 15000), 1);
    assert_int_equal(got, gen);
  }
  gtc_close(&c);
  int status = 0;
  char *m = gtd_http_get(&d, "/metrics", &status);
  assert_non_null(m);
  assert_int_equal(gtd_metric_in(m, "gentrace_ack_seconds_count"), 3);
  assert_int_equal(gtd_metric_in(m, "gentrace_ack_commit_seconds_count"), 3);
  assert_int_equal(gtd_metric_in(m, "gentrace_ack_seconds_bucket{le=\"+Inf\"}"),
                   3);
  assert_int_equal(gtd_metric_in(m, "gentrace_ack_seconds_bucket{le=\"0.03\"}"),
                   0);
  assert_int_equal(
      gtd_metric_in(m, "gentrace_ack_commit_seconds_bucket{le=\"0.03\"}"), 0);
  free(m);
  finish(&d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_ingest__kill9_loses_no_acked_generation_and_resume_is_exact,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__slow_store_keeps_buffers_under_limit_and_resumes,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__disk_full_pauses_ingest_reads_work_then_resumes,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__ack_latency_histograms_count_every_ack, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
