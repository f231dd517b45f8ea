/* test_ingest.c: daemon/ingest.c through the real gentraced process on
 * 127.0.0.1 port 0, real sockets and a real SQLite database. */
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
#include "store_read.h"

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The daemon of the running test, killed by teardown if the test fails. */
static gtd *current;

static int teardown(void **state) {
  if (current != NULL)
    gtd_cleanup(current);
  current = NULL;
  return 0;
}

static void start(gtd *d, const char *const *args, const char *const *env) {
  assert_int_equal(gtd_init(d), 0);
  current = d;
  int rc = gtd_start(d, args, env);
  if (rc != 0)
    fail_msg("gentraced did not start: %d (log %s)", rc, d->log);
}

static void finish(gtd *d) {
  if (d->pid > 0)
    assert_int_equal(gtd_stop(d), 0);
  gtd_cleanup(d);
  current = NULL;
}

static int64_t db_count(const char *db, const char *sql) {
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

static int64_t gen_rows(const char *db, uint64_t gen) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM generations WHERE gen=%llu",
           (unsigned long long)gen);
  return db_count(db, sql);
}

/* The stored bytes of (session, gen) equal what the fixture builds. */
static void assert_stored_exactly(const char *db, const gtf_spec *s) {
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

static void spec(gtf_spec *s, unsigned session, uint64_t gen) {
  gtf_spec_init(s, session, gen);
  s->threads = 4;
  s->stacks = 1;
}

static void expect_ack(gtc *c, uint64_t want_gen) {
  uint64_t gen = 0;
  int code = 0;
  int rc = gtc_read_reply(c, &gen, &code, GTC_TIMEOUT_MS);
  if (rc != 1)
    fail_msg("wanted ACK %llu, got rc=%d code=%d gen=%llu",
             (unsigned long long)want_gen, rc, code, (unsigned long long)gen);
  assert_int_equal(gen, want_gen);
}

/* ------------------------------------------------------------------ tests */

static void test_ingest__interleaved_threads_stored_once_and_decode(void **st) {
  gtd d;
  start(&d, NULL, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s[3];
  gtc_gen g[3];
  for (int i = 0; i < 3; i++) {
    spec(&s[i], 1, 10 + (uint64_t)i);
    assert_int_equal(gtc_gen_build(&g[i], &s[i]), 0);
  }
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s[0], NULL, &w), 0);
  assert_int_equal(w.version, GTP_PROTO_VERSION);
  assert_int_equal(w.has_last, 0);
  assert_int_equal(w.max_gen_bytes, 64ull << 20);
  /* Three generations open at once, their records interleaved as batches
   * from several threads arrive. */
  for (size_t r = 0; r < 16; r++)
    for (int i = 0; i < 3; i++)
      if (r < g[i].nrec)
        assert_int_equal(gtc_send_batch(&c, &g[i], r), 0);
  for (int i = 2; i >= 0; i--)
    assert_int_equal(gtc_send_gen_end(&c, &g[i]), 0);
  uint64_t seen = 0;
  for (int i = 0; i < 3; i++) {
    uint64_t gen;
    int code;
    assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 1);
    assert_true(gen >= 10 && gen <= 12);
    seen |= 1u << (gen - 10);
  }
  assert_int_equal(seen, 7);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(gen_rows(d.db, s[i].gen), 1);
    assert_stored_exactly(d.db, &s[i]);
  }
  /* A resend is a duplicate: ACKed, not stored twice. */
  assert_int_equal(gtc_send_gen(&c, &g[1]), 0);
  expect_ack(&c, 11);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), 3);
  gtc_close(&c);

  /* A reconnect of the same session learns the last committed gen. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s[0], NULL, &w), 0);
  assert_int_equal(w.has_last, 1);
  assert_int_equal(w.last_gen, 12);
  gtc_close(&c);
  assert_int_equal(gtd_metric(&d, "gentrace_generations_committed_total"), 3);
  assert_int_equal(gtd_metric(&d, "gentrace_generations_duplicate_total"), 1);
  for (int i = 0; i < 3; i++)
    gtc_gen_fini(&g[i]);
  finish(&d);
}

static void
test_ingest__ack_arrives_only_after_the_row_is_committed(void **st) {
  gtd d;
  const char *args[] = {"--test-store-delay-ms", "150", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  gtc_gen g;
  spec(&s, 2, 1);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  for (uint64_t gen = 1; gen <= 4; gen++) {
    gtc_gen_fini(&g);
    spec(&s, 2, gen);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    int64_t t0 = now_ms();
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    expect_ack(&c, gen);
    /* The store sleeps 150 ms before each commit: an early ACK shows. */
    assert_true(now_ms() - t0 >= 140);
    assert_int_equal(gen_rows(d.db, gen), 1);
  }
  gtc_gen_fini(&g);
  gtc_close(&c);
  finish(&d);
}

static void
test_ingest__bad_generation_gets_error_and_connection_goes_on(void **st) {
  gtd d;
  start(&d, NULL, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  gtc_gen g;
  spec(&s, 3, 5);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  /* Flip the last byte of the body (inside the CLOCK payload). */
  g.body.data[g.body.len - 1] ^= 0x01;
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  uint64_t gen;
  int code;
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 5);
  assert_true(code == GTP_E_CRC || code == GTP_E_MANIFEST);
  /* A GEN_END whose counts lie. */
  g.body.data[g.body.len - 1] ^= 0x01;
  g.end.gen = 6;
  g.end.events += 1;
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 6);
  assert_int_equal(code, GTP_E_MANIFEST);
  /* Out of order: a GEN_END with no BATCH before it. */
  g.end.gen = 99;
  assert_int_equal(gtc_send_gen_end(&c, &g), 0);
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 99);
  assert_int_equal(code, GTP_E_MANIFEST);
  /* Records of generation 5 framed as generation 8: the EVENTS gen does not
   * match, caught when the generation is parsed. */
  g.end.events -= 1;
  g.end.gen = 8;
  {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    for (size_t i = 0; i < g.nrec; i++)
      gtp_frame_batch_encode(&b, 8, g.body.data + g.off[i],
                             g.off[i + 1] - g.off[i]);
    gtp_frame_gen_end_encode(&b, &g.end);
    assert_int_equal(gtc_send_raw(&c, b.data, b.len), 0);
    gtp_wbuf_fini(&b);
  }
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 8);
  assert_int_equal(code, GTP_E_GEN);
  /* The same connection still stores a good generation. */
  gtc_gen_fini(&g);
  spec(&s, 3, 7);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  expect_ack(&c, 7);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), 1);
  assert_int_equal(gtd_metric(&d, "gentrace_generations_rejected_total"), 4);
  /* Their events (as each GEN_END announced) count as rejected: E, E+1,
   * E+1 and E. */
  spec(&s, 3, 5);
  int64_t e = (int64_t)gtf_events(&s);
  assert_int_equal(
      gtd_metric(&d, "gentrace_ledger_events_total{cause=\"rejected\"}"),
      4 * e + 2);
  gtc_gen_fini(&g);
  gtc_close(&c);
  finish(&d);
}

/* A well-behaved agent that must lose nothing while hostile peers come and
 * go. */
typedef struct good {
  gtc c;
  unsigned session;
  uint64_t next_gen;
} good;

static void good_open(good *gd, gtd *d, unsigned session, const char *tok) {
  gtf_spec s;
  gtp_welcome w;
  spec(&s, session, 1);
  gd->session = session;
  gd->next_gen = 1;
  assert_int_equal(gtc_connect(&gd->c, d->agent_port), 0);
  assert_int_equal(gtc_hello(&gd->c, &s, tok, &w), 0);
}

static void good_send_one(good *gd) {
  gtf_spec s;
  gtc_gen g;
  spec(&s, gd->session, gd->next_gen);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&gd->c, &g), 0);
  expect_ack(&gd->c, gd->next_gen);
  gd->next_gen++;
  gtc_gen_fini(&g);
}

static void expect_closed_with(gtd *d, gtc *c, int want_code) {
  int code = 0;
  int rc = gtc_wait_closed(c, &code, GTC_TIMEOUT_MS);
  if (rc != 1)
    fail_msg("connection not closed: rc=%d", rc);
  if (want_code != 0)
    assert_int_equal(code, want_code);
  gtc_close(c);
  assert_true(gtd_alive(d));
}

static void
test_ingest__hostile_peers_are_cut_off_and_others_lose_nothing(void **st) {
  gtd d;
  const char *args[] = {"--token", "s3cret",      "--handshake-timeout",
                        "1s",      "--max-frame", "512K",
                        NULL};
  start(&d, args, NULL);
  good gd;
  good_open(&gd, &d, 9, "s3cret");
  good_send_one(&gd);
  gtc h;
  gtf_spec s;
  spec(&s, 20, 1);

  /* Random bytes. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  uint8_t junk[4096];
  srand(42);
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)rand();
  junk[4] = 0x77; /* an unknown frame type if the length passes */
  gtc_send_raw(&h, junk, sizeof junk);
  expect_closed_with(&d, &h, 0);
  good_send_one(&gd);

  /* A frame announcing more than --max-frame: ERROR TOOBIG, closed. Before
   * HELLO the limit is 64 KiB (hello-size), after it --max-frame. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  uint8_t hdr[GTP_FRAME_HEADER_SIZE];
  gtp_frame_header_put(hdr, GTP_FR_HELLO, 512 * 1024 + 1);
  assert_int_equal(gtc_send_raw(&h, hdr, sizeof hdr), 0);
  expect_closed_with(&d, &h, GTP_E_TOOBIG);
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  assert_int_equal(gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION,
                                  GTP_PROTO_VERSION),
                   0);
  gtp_frame_header_put(hdr, GTP_FR_BATCH, 512 * 1024 + 1);
  assert_int_equal(gtc_send_raw(&h, hdr, sizeof hdr), 0);
  expect_closed_with(&d, &h, GTP_E_TOOBIG);
  good_send_one(&gd);

  /* A frame before HELLO. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_frame_heartbeat_encode(&b);
    gtp_frame_ack_encode(&b, 1);
    assert_int_equal(gtc_send_raw(&h, b.data, b.len), 0);
    gtp_wbuf_fini(&b);
  }
  expect_closed_with(&d, &h, GTP_E_STATE);

  /* Wrong version. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  assert_int_equal(gtc_send_hello(&h, &s, "s3cret", 90, 99), 0);
  expect_closed_with(&d, &h, GTP_E_VERSION);

  /* Wrong and missing token. */
  gtp_welcome w;
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  assert_int_equal(gtc_hello(&h, &s, "s3creT", &w), GTP_E_TOKEN);
  expect_closed_with(&d, &h, 0);
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  assert_int_equal(gtc_hello(&h, &s, NULL, &w), GTP_E_TOKEN);
  expect_closed_with(&d, &h, 0);
  good_send_one(&gd);

  /* Truncated frame, then the peer goes away. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION,
                                    GTP_PROTO_VERSION),
                     0);
    gtc_gen g;
    spec(&s, 20, 1);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    gtp_frame_batch_encode(&b, 1, g.body.data, g.off[1]);
    assert_int_equal(gtc_send_raw(&h, b.data, b.len - 3), 0);
    gtp_wbuf_fini(&b);
    gtc_gen_fini(&g);
  }
  gtc_close(&h);

  /* A trickler: a byte of HELLO every 200 ms, never finishing in time. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  int64_t t0 = now_ms();
  {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.min_version = hl.max_version = 1;
    hl.service = hl.host = hl.agent_version = (gtp_str){"x", 1};
    assert_int_equal(gtp_frame_hello_encode(&b, &hl), 0);
    int closed = 0, code = 0;
    for (size_t i = 0; i < b.len && !closed; i++) {
      gtc_send_raw(&h, b.data + i, 1);
      closed = gtc_wait_closed(&h, &code, 200) == 1;
    }
    gtp_wbuf_fini(&b);
    assert_true(closed);
    assert_int_equal(code, GTP_E_TIMEOUT);
    gtc_close(&h);
  }
  int64_t took = now_ms() - t0;
  assert_true(took >= 900 && took < 6000);

  /* One that says HELLO, floods generations and never reads a reply. */
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  assert_int_equal(gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION,
                                  GTP_PROTO_VERSION),
                   0);
  for (uint64_t gen = 1; gen <= 200; gen++) {
    gtc_gen g;
    spec(&s, 20, gen);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    assert_int_equal(gtc_send_gen(&h, &g), 0);
    gtc_gen_fini(&g);
  }
  good_send_one(&gd);
  gtc_close(&h);

  /* Interleaved with all that, the good agent keeps storing. */
  good_send_one(&gd);
  gtc_close(&gd.c);
  /* The good agent's generations, plus the flooder's 200. */
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"),
                   (int64_t)gd.next_gen - 1 + 200);
  assert_true(gtd_metric(&d, "gentrace_protocol_errors_total") >= 3);
  assert_true(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-frame\"}") >= 1);
  assert_true(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"hello-size\"}") >= 1);
  assert_int_equal(gtd_metric(&d, "gentrace_limit_hits_total{limit=\"token\"}"),
                   2);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"handshake-timeout\"}"),
      1);
  finish(&d);
}

static void
test_ingest__second_connection_of_a_session_replaces_first(void **st) {
  gtd d;
  start(&d, NULL, NULL);
  good a, b;
  good_open(&a, &d, 4, NULL);
  good_send_one(&a);
  good_open(&b, &d, 4, NULL);
  expect_closed_with(&d, &a.c, GTP_E_STATE);
  b.next_gen = 2;
  good_send_one(&b);
  gtc_close(&b.c);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), 2);
  finish(&d);
}

static void test_ingest__max_connections_refuses_with_limit(void **st) {
  gtd d;
  const char *args[] = {"--max-connections", "2", NULL};
  start(&d, args, NULL);
  good a, b;
  good_open(&a, &d, 5, NULL);
  good_open(&b, &d, 6, NULL);
  gtc h;
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  expect_closed_with(&d, &h, GTP_E_LIMIT);
  good_send_one(&a);
  gtc_close(&a.c);
  gtc_close(&b.c);
  assert_int_equal(gtd_metric(&d, "gentrace_agent_connections_refused_total"),
                   1);
  finish(&d);
}

static void
test_ingest__sigterm_acks_complete_generations_then_goodbye(void **st) {
  gtd d;
  const char *args[] = {"--test-store-delay-ms", "100", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 7, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  for (uint64_t gen = 1; gen <= 5; gen++) {
    gtc_gen g;
    spec(&s, 7, gen);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    assert_int_equal(gtc_send_gen(&c, &g), 0);
    gtc_gen_fini(&g);
  }
  /* Wait until the daemon has all five (frames counted), then stop it
   * while the slow store still holds most of them. */
  int64_t deadline = now_ms() + 10000;
  while (gtd_metric(&d, "gentrace_frames_received_total") <
             1 + 5 * (int64_t)(4 + 4 + 1) &&
         now_ms() < deadline) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  kill(d.pid, SIGTERM);
  uint64_t acked = 0;
  int goodbye = 0;
  for (;;) {
    gtp_frame f;
    int rc = gtc_read_frame(&c, &f, GTC_TIMEOUT_MS);
    if (rc != 1)
      break;
    if (f.type == GTP_FR_ACK) {
      assert_int_equal(goodbye, 0); /* every ACK comes before GOODBYE */
      acked++;
    } else if (f.type == GTP_FR_GOODBYE) {
      gtp_goodbye gb;
      assert_int_equal(gtp_frame_goodbye_decode(f.payload, f.len, &gb), 0);
      assert_int_equal(gb.code, GTP_E_SHUTDOWN);
      goodbye = 1;
    }
  }
  assert_int_equal(acked, 5);
  assert_int_equal(goodbye, 1);
  gtc_close(&c);
  assert_int_equal(gtd_stop(&d), 0);
  assert_int_equal(db_count(d.db, "SELECT count(*) FROM generations"), 5);
  finish(&d);
}

static void test_ingest__idle_agent_gets_heartbeats_then_timeout(void **st) {
  gtd d;
  const char *args[] = {"--idle-timeout", "600ms", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 14, 1);

  /* An agent that sends HEARTBEAT every 150 ms outlives the timeout. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(w.idle_timeout_ms, 600);
  int64_t t0 = now_ms();
  unsigned beats = 0;
  while (now_ms() - t0 < 1500) {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_frame_heartbeat_encode(&b);
    assert_int_equal(gtc_send_raw(&c, b.data, b.len), 0);
    gtp_wbuf_fini(&b);
    gtp_frame f;
    int rc = gtc_read_any(&c, &f, 150, 0);
    if (rc == 1) {
      assert_int_equal(f.type, GTP_FR_HEARTBEAT);
      beats++;
    } else {
      assert_int_equal(rc, -ETIMEDOUT);
    }
  }
  /* Still connected: a generation is stored and ACKed. */
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  expect_ack(&c, 1);
  gtc_gen_fini(&g);

  /* Silent now: HEARTBEATs from the daemon (idle/3), then ERROR(TIMEOUT). */
  t0 = now_ms();
  unsigned daemon_beats = 0;
  int code = 0;
  for (;;) {
    gtp_frame f;
    int rc = gtc_read_any(&c, &f, GTC_TIMEOUT_MS, 0);
    if (rc != 1)
      break;
    if (f.type == GTP_FR_HEARTBEAT) {
      daemon_beats++;
    } else if (f.type == GTP_FR_ERROR) {
      gtp_error_frame e;
      assert_int_equal(gtp_frame_error_decode(f.payload, f.len, &e), 0);
      code = e.code;
    }
  }
  int64_t took = now_ms() - t0;
  assert_int_equal(code, GTP_E_TIMEOUT);
  assert_true(daemon_beats >= 1);
  assert_true(took >= 500 && took < 5000);
  gtc_close(&c);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"idle-timeout\"}"), 1);
  assert_true(gtd_metric(&d, "gentrace_heartbeats_sent_total") >= 1);
  finish(&d);
}

static void test_ingest__generation_and_open_limits_are_enforced(void **st) {
  gtd d;
  const char *args[] = {"--max-gen-size", "64K", "--max-conn-buffer", "256K",
                        NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  gtc_gen g;
  uint64_t gen;
  int code;
  spec(&s, 15, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(w.max_gen_bytes, 65536);

  /* Over --max-gen-size (two ~63 KiB batches): refused at once, the rest
   * swallowed up to its GEN_END, the connection goes on. */
  assert_int_equal(gtc_gen_build_random(&g, &s, 2, 1), 0);
  assert_true(g.body.len > 65536);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 1);
  assert_int_equal(code, GTP_E_TOOBIG);
  spec(&s, 15, 2);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  expect_ack(&c, 2);
  assert_int_equal(gen_rows(d.db, 1), 0);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-gen-size\"}"), 1);

  /* A 65th generation open at once: ERROR(LIMIT) and the connection ends. */
  for (uint64_t i = 0; i < 65; i++) {
    spec(&s, 15, 100 + i);
    assert_int_equal(gtc_gen_build(&g, &s), 0);
    gtc_send_batch(&c, &g, 0);
    gtc_gen_fini(&g);
  }
  expect_closed_with(&d, &c, GTP_E_LIMIT);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"open-generations\"}"),
      1);

  /* Open generations beyond --max-conn-buffer (five of ~63 KiB, none
   * finished): ERROR(LIMIT), closed. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  for (uint64_t i = 0; i < 5; i++) {
    spec(&s, 15, 200 + i);
    assert_int_equal(gtc_gen_build_random(&g, &s, 1, (unsigned)i), 0);
    gtc_send_batch(&c, &g, 0); /* STRINGS */
    gtc_send_batch(&c, &g, 1); /* EVENTS; CLOCK and GEN_END never come */
    gtc_gen_fini(&g);
  }
  expect_closed_with(&d, &c, GTP_E_LIMIT);
  assert_true(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-conn-buffer\"}") >=
      1);
  finish(&d);
}

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

/* ------------------------------------------------- frames cut across reads */

/* Waits until the daemon's metric reaches v (it has read what was sent). */
static void wait_metric_at_least(gtd *d, const char *name, int64_t v) {
  int64_t t0 = now_ms();
  while (gtd_metric(d, name) < v) {
    if (now_ms() - t0 > GTC_TIMEOUT_MS)
      fail_msg("%s stayed below %lld", name, (long long)v);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
}

/* Sends one BATCH frame of gen holding records [p, p+n) in two writes,
 * waiting between them until the daemon has read the first: it then holds
 * a frame cut after `first` bytes, which it reads the rest of in place. */
static void send_batch_cut(gtd *d, gtc *c, uint64_t gen, const uint8_t *p,
                           size_t n, size_t first) {
  gtp_wbuf f;
  gtp_wbuf_init(&f, 0);
  assert_int_equal(gtp_frame_batch_encode(&f, gen, p, n), 0);
  assert_true(first < f.len);
  int64_t base = gtd_metric(d, "gentrace_bytes_received_total");
  assert_int_equal(gtc_send_raw(c, f.data, first), 0);
  wait_metric_at_least(d, "gentrace_bytes_received_total",
                       base + (int64_t)first);
  assert_int_equal(gtc_send_raw(c, f.data + first, f.len - first), 0);
  gtp_wbuf_fini(&f);
}

/* Waits until no agent is connected, then nothing may be held for agents:
 * staged bytes were counted and uncounted exactly (invariants 5, 9). */
static void expect_nothing_buffered(gtd *d) {
  wait_metric_at_least(d, "gentrace_agent_connections_total", 1);
  int64_t t0 = now_ms();
  while (gtd_metric(d, "gentrace_agent_connections") != 0) {
    if (now_ms() - t0 > GTC_TIMEOUT_MS)
      fail_msg("connections did not close");
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(gtd_metric(d, "gentrace_buffered_bytes"), 0);
  assert_true(gtd_alive(d));
}

static void
test_ingest__batch_frames_cut_across_reads_are_stored_exactly(void **st) {
  gtd d;
  start(&d, NULL, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 21, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  int64_t staged0 = gtd_metric(&d, "gentrace_ingest_staged_frames_total");
  assert_int_equal(staged0, 0);
  for (uint64_t gen = 1; gen <= 3; gen++) {
    gtc_gen g;
    s.gen = gen;
    /* STRINGS, three ~63 KiB EVENTS records, CLOCK. */
    assert_int_equal(gtc_gen_build_random(&g, &s, 3, (unsigned)gen), 0);
    assert_int_equal(g.nrec, 5);
    assert_int_equal(gtc_send_batch(&c, &g, 0), 0); /* opens the gen */
    for (size_t r = 1; r < g.nrec; r++) {
      size_t n = g.off[r + 1] - g.off[r];
      /* Cut inside the header, the gen varint, and the records. */
      size_t first = r == 1 ? 3 : r == 2 ? 6 : 100;
      if (first >= n)
        first = n / 2 + 1;
      send_batch_cut(&d, &c, gen, g.body.data + g.off[r], n, first);
    }
    assert_int_equal(gtc_send_gen_end(&c, &g), 0);
    expect_ack(&c, gen);

    /* Stored byte for byte: GEN_START, the body as sent, GEN_END. */
    store_reader *rd;
    char *cause = NULL;
    assert_int_equal(store_reader_open(d.db, &rd, &cause), 0);
    char hex[33];
    gtp_session_hex(s.session, hex);
    gtp_wbuf got;
    gtp_wbuf_init(&got, 0);
    assert_int_equal(store_read_payload_by_gen(rd, hex, gen, &got), 0);
    gtp_record start_rec;
    assert_int_equal(gtp_record_parse(got.data, got.len, &start_rec), 0);
    assert_int_equal(start_rec.type, GTP_REC_GEN_START);
    assert_true(got.len > start_rec.size + g.body.len);
    assert_memory_equal(got.data + start_rec.size, g.body.data, g.body.len);
    gtp_gen parsed;
    size_t used;
    assert_int_equal(gtp_gen_parse(got.data, got.len, &parsed, &used), 0);
    assert_int_equal(used, got.len);
    gtp_gen_fini(&parsed);
    gtp_wbuf_fini(&got);
    store_reader_close(rd);
    gtc_gen_fini(&g);
  }
  /* The EVENTS frames (cut after their gen varint) were read in place;
   * frames cut inside the header or the varint may not be. */
  assert_true(gtd_metric(&d, "gentrace_ingest_staged_frames_total") >= 3);
  /* Generations 2 and 3 were assembled in buffers the store handed back. */
  assert_true(gtd_metric(&d, "gentrace_ingest_buffer_pool_reused_total") >= 2);
  assert_true(gtd_metric(&d, "gentrace_ingest_buffer_pool_bytes") > 0);
  assert_int_equal(gtd_metric(&d, "gentrace_buffered_bytes"), 0);
  gtc_close(&c);
  finish(&d);
}

static void
test_ingest__cut_batch_frame_bad_or_abandoned_leaves_nothing_held(void **st) {
  gtd d;
  start(&d, NULL, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  gtc_gen g;
  spec(&s, 22, 1);
  assert_int_equal(gtc_gen_build_random(&g, &s, 1, 7), 0);
  size_t ev_off = g.off[1], ev_len = g.off[2] - g.off[1];
  assert_true(ev_len > 32 * 1024);

  /* A GEN_START smuggled after a big EVENTS record in a cut frame: refused
   * like an uncut one (CORRUPT, connection closed). */
  gtp_wbuf whole, bad;
  gtp_wbuf_init(&whole, 0);
  gtp_wbuf_init(&bad, 0);
  assert_int_equal(gtf_generation(&whole, &s), 0);
  gtp_record gs;
  assert_int_equal(gtp_record_parse(whole.data, whole.len, &gs), 0);
  assert_int_equal(gs.type, GTP_REC_GEN_START);
  gtp_wbuf_put(&bad, g.body.data + ev_off, ev_len);
  gtp_wbuf_put(&bad, whole.data, gs.size);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(gtc_send_batch(&c, &g, 0), 0);
  send_batch_cut(&d, &c, 1, bad.data, bad.len, 100);
  expect_closed_with(&d, &c, GTP_E_CORRUPT);
  assert_int_equal(gtd_metric(&d, "gentrace_ingest_staged_frames_total"), 1);
  expect_nothing_buffered(&d);

  /* An agent that goes away in the middle of a cut frame. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(gtc_send_batch(&c, &g, 0), 0);
  gtp_wbuf f;
  gtp_wbuf_init(&f, 0);
  assert_int_equal(gtp_frame_batch_encode(&f, 1, g.body.data + ev_off, ev_len),
                   0);
  int64_t base = gtd_metric(&d, "gentrace_bytes_received_total");
  assert_int_equal(gtc_send_raw(&c, f.data, f.len / 2), 0);
  wait_metric_at_least(&d, "gentrace_bytes_received_total",
                       base + (int64_t)(f.len / 2));
  assert_int_equal(gtd_metric(&d, "gentrace_ingest_staged_frames_total"), 2);
  assert_true(gtd_metric(&d, "gentrace_buffered_bytes") >=
              (int64_t)(f.len / 2) - 16);
  gtc_close(&c);
  expect_nothing_buffered(&d);

  /* The daemon goes on: the same generation, sent whole, is stored. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  expect_ack(&c, 1);
  assert_int_equal(gen_rows(d.db, 1), 1);
  gtc_close(&c);
  gtp_wbuf_fini(&f);
  gtp_wbuf_fini(&whole);
  gtp_wbuf_fini(&bad);
  gtc_gen_fini(&g);
  finish(&d);
}

static void
test_ingest__store_behind_new_generations_get_prepared_buffers(void **st) {
  /* The store holds every generation for 1.5 s, so none hands its
   * buffer back: from the second generation on the loop asks the filler
   * thread for buffers, and the third is assembled in one. */
  gtd d;
  const char *args[] = {"--test-store-delay-ms", "1500", NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  spec(&s, 23, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  gtc_gen g[3];
  for (uint64_t gen = 1; gen <= 3; gen++) {
    s.gen = gen;
    assert_int_equal(gtc_gen_build_random(&g[gen - 1], &s, 3, (unsigned)gen),
                     0);
    if (gen == 3) /* the filler has a buffer ready */
      wait_metric_at_least(&d, "gentrace_ingest_buffer_prepared_ready", 1);
    assert_int_equal(gtc_send_gen(&c, &g[gen - 1]), 0);
    if (gen == 2) /* generation 2 was read: its buffer was made here */
      wait_metric_at_least(&d, "gentrace_frames_received_total",
                           (int64_t)(1 + 2 * g[0].nrec + 2));
  }
  assert_int_equal(gtd_metric(&d, "gentrace_ingest_buffer_pool_reused_total"),
                   0);
  for (uint64_t gen = 1; gen <= 3; gen++)
    expect_ack(&c, gen);
  assert_true(gtd_metric(&d, "gentrace_ingest_buffer_prepared_used_total") >=
              1);
  /* Prepared and pooled bytes stay within the max-buffer slice. */
  assert_true(gtd_metric(&d, "gentrace_ingest_buffer_pool_bytes") <=
              (512ll << 20) / 8);
  for (uint64_t gen = 1; gen <= 3; gen++) {
    s.gen = gen;
    store_reader *rd;
    char *cause = NULL;
    assert_int_equal(store_reader_open(d.db, &rd, &cause), 0);
    char hex[33];
    gtp_session_hex(s.session, hex);
    gtp_wbuf got;
    gtp_wbuf_init(&got, 0);
    assert_int_equal(store_read_payload_by_gen(rd, hex, gen, &got), 0);
    gtp_record start_rec;
    assert_int_equal(gtp_record_parse(got.data, got.len, &start_rec), 0);
    assert_memory_equal(got.data + start_rec.size, g[gen - 1].body.data,
                        g[gen - 1].body.len);
    gtp_wbuf_fini(&got);
    store_reader_close(rd);
    gtc_gen_fini(&g[gen - 1]);
  }
  assert_int_equal(gtd_metric(&d, "gentrace_buffered_bytes"), 0);
  gtc_close(&c);
  finish(&d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_ingest__interleaved_threads_stored_once_and_decode, teardown),
      cmocka_unit_test_teardown(
          test_ingest__ack_arrives_only_after_the_row_is_committed, teardown),
      cmocka_unit_test_teardown(
          test_ingest__bad_generation_gets_error_and_connection_goes_on,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__hostile_peers_are_cut_off_and_others_lose_nothing,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__second_connection_of_a_session_replaces_first, teardown),
      cmocka_unit_test_teardown(test_ingest__max_connections_refuses_with_limit,
                                teardown),
      cmocka_unit_test_teardown(
          test_ingest__sigterm_acks_complete_generations_then_goodbye,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__idle_agent_gets_heartbeats_then_timeout, teardown),
      cmocka_unit_test_teardown(
          test_ingest__generation_and_open_limits_are_enforced, teardown),
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
          test_ingest__batch_frames_cut_across_reads_are_stored_exactly,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__cut_batch_frame_bad_or_abandoned_leaves_nothing_held,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__store_behind_new_generations_get_prepared_buffers,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
