/* test_ingest.c: daemon/ingest.c through the real gentraced process on
 * 127.0.0.1 port 0, real sockets and a real SQLite database: the protocol
 * (storing, ACK after commit, errors, hostile peers, sessions, limits,
 * stop, heartbeats). The way to the store and back is in
 * test_ingest_store.c, reads cut across frames in test_ingest_reads.c. */
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
  assert_int_equal(
      gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION, GTP_PROTO_VERSION),
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
    assert_int_equal(
        gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION, GTP_PROTO_VERSION),
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

  /* A trickler: a byte of HELLO every 200 ms, never the last one, so it
   * cannot finish however late the daemon runs. The clock starts before
   * connect: the daemon's timer starts at accept, never earlier, so a test
   * preempted after connect cannot see the timeout come early. */
  int64_t t0 = now_ms();
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.min_version = hl.max_version = 1;
    hl.service = hl.host = hl.agent_version = (gtp_str){"x", 1};
    assert_int_equal(gtp_frame_hello_encode(&b, &hl), 0);
    int closed = 0, code = 0;
    /* gtc_wait_closed clears its code on entry, and a wait can read the
     * ERROR and time out before the EOF: keep the code of every wait. */
    for (size_t i = 0; i < b.len && !closed; i++) {
      int got = 0;
      if (i + 1 < b.len)
        gtc_send_raw(&h, b.data + i, 1);
      closed = gtc_wait_closed(&h, &got, i + 1 < b.len ? 200 : 6000) == 1;
      if (got != 0)
        code = got;
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
  assert_int_equal(
      gtc_send_hello(&h, &s, "s3cret", GTP_PROTO_VERSION, GTP_PROTO_VERSION),
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
  /* The daemon stalls (stopped here, a loaded machine elsewhere) past the
   * timeout while the agent keeps beating. Woken, it runs its timers before
   * it reads: the beats waiting in its socket are not silence. */
  assert_int_equal(kill(d.pid, SIGSTOP), 0);
  t0 = now_ms();
  while (now_ms() - t0 < 1000) {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_frame_heartbeat_encode(&b);
    int rc = gtc_send_raw(&c, b.data, b.len);
    gtp_wbuf_fini(&b);
    if (rc != 0)
      break;
    usleep(100000);
  }
  assert_int_equal(kill(d.pid, SIGCONT), 0);

  /* Still connected: a generation is stored and ACKed. The silence below
   * is timed from before the send: the daemon's last read is after it. */
  t0 = now_ms();
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  expect_ack(&c, 1);
  gtc_gen_fini(&g);

  /* Silent now: HEARTBEATs from the daemon (idle/3), then ERROR(TIMEOUT). */
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

/* A generation within --max-gen-size that alone outgrows
 * --max-conn-buffer would be resent unchanged after every ERROR(LIMIT): it
 * is refused for good (TOOBIG with its gen) and the connection goes on. */
static void
test_ingest__generation_over_the_conn_buffer_is_refused_not_looped(void **st) {
  gtd d;
  const char *args[] = {"--max-gen-size", "256K", "--max-conn-buffer", "64K",
                        NULL};
  start(&d, args, NULL);
  gtc c;
  gtp_welcome w;
  gtf_spec s;
  gtc_gen g;
  uint64_t gen;
  int code;
  spec(&s, 16, 1);
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  assert_int_equal(gtc_gen_build_random(&g, &s, 2, 1), 0);
  assert_true(g.body.len > 65536 && g.body.len < 262144);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  assert_int_equal(gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS), 2);
  assert_int_equal(gen, 1);
  assert_int_equal(code, GTP_E_TOOBIG);
  spec(&s, 16, 2);
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&c, &g), 0);
  gtc_gen_fini(&g);
  expect_ack(&c, 2);
  assert_int_equal(gen_rows(d.db, 1), 0);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-conn-buffer\"}"),
      1);
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
          test_ingest__generation_over_the_conn_buffer_is_refused_not_looped,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__sigterm_acks_complete_generations_then_goodbye,
          teardown),
      cmocka_unit_test_teardown(
          test_ingest__idle_agent_gets_heartbeats_then_timeout, teardown),
      cmocka_unit_test_teardown(
          test_ingest__generation_and_open_limits_are_enforced, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
