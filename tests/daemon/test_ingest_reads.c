/* test_ingest_reads.c: the frame loop's reads (daemon/ingest_read.c,
 * reasm.c staging, the generation buffers) through the real gentraced
 * process on 127.0.0.1 port 0: BATCH frames cut across reads are stored
 * exactly, bad or abandoned cut frames leave nothing held, and a store
 * behind hands new generations prepared buffers. */
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
