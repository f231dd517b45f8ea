/* test_reasm.c: daemon/reasm.c, reassembly and validation of generations,
 * called directly on a real connection.
 *
 * The harness is the real ingest on a libuv loop in this thread, listening
 * on 127.0.0.1 port 0, with a real SQLite store in a scratch directory; a
 * protocol client (client.h) connects and says HELLO over a real socket,
 * and once the loop has made the connection ACTIVE the tests hand its conn
 * frames they build themselves (reasm_batch, reasm_gen_end, the staging
 * pair), then read the daemon's replies (ACK, ERROR) on the client and the
 * stored bytes from the database. Invariant checks abort (debug builds).
 */
#include "config.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "client.h"
#include "gtp_error.h"
#include "ingest_int.h"
#include "store_pin.h"
#include "store_read.h"

#define SESSION 7

typedef struct rh {
  char dir[64], db[128];
  uv_loop_t loop;
  store_pins *pins;
  ingest *ing;
  storage *st;
  uint16_t port;
  gtc cli;
  conn *c;
  gtf_spec spec; /* the client's identity (gen 1) */
} rh;

static void pump_once(rh *h) {
  uv_run(&h->loop, UV_RUN_NOWAIT);
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, NULL);
}

/* Runs the loop until *v reaches want (10 s at most). */
static void pump_until(rh *h, const uint64_t *v, uint64_t want) {
  for (int i = 0; i < 10000 && __atomic_load_n(v, __ATOMIC_RELAXED) < want; i++)
    pump_once(h);
  assert_true(__atomic_load_n(v, __ATOMIC_RELAXED) >= want);
  for (int i = 0; i < 5; i++) /* and let the replies go out */
    pump_once(h);
}

/* A daemon whose generations may be at most max_gen bytes (0: default). */
static void rh_open(rh *h, uint64_t max_gen) {
  memset(h, 0, sizeof *h);
  snprintf(h->dir, sizeof h->dir, "/tmp/gt-reasm-XXXXXX");
  assert_non_null(mkdtemp(h->dir));
  snprintf(h->db, sizeof h->db, "%s/t.db", h->dir);
  assert_int_equal(uv_loop_init(&h->loop), 0);
  ingest_config cfg;
  ingest_config_init(&cfg);
  cfg.port = 0;
  cfg.max_clock_skew_ns = 0; /* fixtures are dated 2026-01-01 */
  if (max_gen)
    cfg.max_gen_size = max_gen;
  char *cause = NULL;
  assert_int_equal(ingest_new(&h->loop, &cfg, &h->ing, &cause), 0);
  h->pins = store_pins_new();
  storage_config sc;
  memset(&sc, 0, sizeof sc);
  sc.sqlite.path = h->db;
  sc.sqlite.pins = h->pins;
  int rc = storage_open(&sc, ingest_store_done, h->ing, &h->st, &cause);
  if (rc != 0)
    fail_msg("storage_open: %d %s", rc, cause ? cause : "");
  ingest_set_store(h->ing, h->st);
  assert_int_equal(ingest_start(h->ing, &h->port, &cause), 0);
  /* HELLO from a real client; the loop (this thread) answers it. */
  gtf_spec_init(&h->spec, SESSION, 1);
  assert_int_equal(gtc_connect(&h->cli, h->port), 0);
  assert_int_equal(gtc_send_hello(&h->cli, &h->spec, NULL,
                                  GTP_PROTO_VERSION_MIN, GTP_PROTO_VERSION),
                   0);
  pump_until(h, &h->ing->ctr.handshakes_total, 1);
  h->c = h->ing->conns;
  assert_non_null(h->c);
  assert_int_equal(h->c->state, CONN_ACTIVE);
  gtp_frame f;
  assert_int_equal(gtc_read_frame(&h->cli, &f, GTC_TIMEOUT_MS), 1);
  assert_int_equal(f.type, GTP_FR_WELCOME);
}

static void rh_close(rh *h) {
  gtc_close(&h->cli);
  for (int i = 0; i < 20; i++)
    pump_once(h);
  storage_close(h->st); /* commits what is queued, then the loop frees */
  ingest_free(h->ing);
  store_pins_free(h->pins);
  assert_int_equal(uv_loop_close(&h->loop), 0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", h->dir);
  assert_int_equal(system(cmd), 0);
}

/* Frame f over bytes b (encoded by a gtp_frame_*_encode). */
static gtp_frame frame_of(const gtp_wbuf *b) {
  gtp_frame f = {b->data[4], b->data + GTP_FRAME_HEADER_SIZE,
                 (uint32_t)(b->len - GTP_FRAME_HEADER_SIZE)};
  return f;
}

/* Hands the BATCH of record i of g (generation gen) to reassembly. */
static int batch(rh *h, const gtc_gen *g, uint64_t gen, size_t i) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_batch_encode(&b, gen, g->body.data + g->off[i],
                                          g->off[i + 1] - g->off[i]),
                   0);
  gtp_frame f = frame_of(&b);
  int rc = reasm_batch(h->c, &f);
  gtp_wbuf_fini(&b);
  return rc;
}

static int gen_end(rh *h, const gtp_gen_end *e) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_gen_end_encode(&b, e), 0);
  gtp_frame f = frame_of(&b);
  int rc = reasm_gen_end(h->c, &f);
  gtp_wbuf_fini(&b);
  return rc;
}

/* The next reply on the client: 1 ACK or 2 ERROR, its gen and code. */
static int reply(rh *h, uint64_t *gen, int *code) {
  *gen = 0;
  *code = 0;
  return gtc_read_reply(&h->cli, gen, code, GTC_TIMEOUT_MS);
}

/* Ends generation e.gen, which must then be stored and ACKed: after the
 * store committed it (the loop runs the completion), the client reads its
 * ACK. */
static void end_and_expect_ack(rh *h, const gtp_gen_end *e, uint64_t nth) {
  assert_int_equal(gen_end(h, e), 0);
  assert_int_equal(h->c->ngens, 0); /* handed to the store */
  pump_until(h, &h->ing->ctr.committed, nth);
  uint64_t gen;
  int code;
  assert_int_equal(reply(h, &gen, &code), 1);
  assert_int_equal(gen, e->gen);
}

/* ---------------------------------------------------------------- tests */

static void
test_reasm__records_in_order_store_the_generation_exactly(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtf_spec s = h.spec;
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_true(g.nrec >= 3);
  for (size_t i = 0; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  assert_int_equal(h.c->ngens, 1);
  assert_true(h.c->buffered > 0);
  end_and_expect_ack(&h, &g.end, 1);
  assert_int_equal(h.c->buffered, 0); /* the completion gave it all back */
  /* Stored: GEN_START from HELLO + the records + GEN_END, as the fixture
   * builds the whole generation. */
  store_reader *r;
  char *cause = NULL, hex[33];
  assert_int_equal(store_reader_open(h.db, &r, &cause), 0);
  gtp_session_hex(s.session, hex);
  gtp_wbuf got, want;
  gtp_wbuf_init(&got, 0);
  gtp_wbuf_init(&want, 0);
  assert_int_equal(store_read_payload_by_gen(r, hex, 1, &got), 0);
  assert_int_equal(gtf_generation(&want, &s), 0);
  assert_int_equal(got.len, want.len);
  assert_memory_equal(got.data, want.data, want.len);
  gtp_wbuf_fini(&got);
  gtp_wbuf_fini(&want);
  store_reader_close(r);
  gtc_gen_fini(&g);
  rh_close(&h);
}

static void
test_reasm__wrong_manifest_is_refused_with_its_gen_and_the_conn_goes_on(
    void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtf_spec s = h.spec;
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  for (size_t i = 0; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  gtp_gen_end bad = g.end;
  bad.crc ^= 1;
  assert_int_equal(gen_end(&h, &bad), 0);
  uint64_t gen;
  int code;
  assert_int_equal(reply(&h, &gen, &code), 2);
  assert_int_equal(gen, 1);
  assert_true(code < 0);
  assert_int_equal(h.c->state, CONN_ACTIVE);
  assert_int_equal(h.c->ngens, 0);
  assert_int_equal(h.c->buffered, 0); /* nothing held for it */
  /* The same generation, right this time, is stored. */
  for (size_t i = 0; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  end_and_expect_ack(&h, &g.end, 1);
  gtc_gen_fini(&g);
  rh_close(&h);
}

static void
test_reasm__gen_end_without_batch_is_refused_as_manifest(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &h.spec), 0);
  gtp_gen_end e = g.end;
  e.gen = 42;
  assert_int_equal(gen_end(&h, &e), 0);
  uint64_t gen;
  int code;
  assert_int_equal(reply(&h, &gen, &code), 2);
  assert_int_equal(gen, 42);
  assert_int_equal(code, GTP_E_MANIFEST);
  assert_int_equal(h.c->state, CONN_ACTIVE);
  gtc_gen_fini(&g);
  rh_close(&h);
}

static void
test_reasm__oversized_generation_is_refused_then_swallowed(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 4096); /* a generation may hold 4 KiB of records */
  gtf_spec s = h.spec;
  gtc_gen g;
  assert_int_equal(gtc_gen_build_random(&g, &s, 4, 9), 0);
  assert_true(g.body.len > 8192);
  /* Records until the generation is refused (TOOBIG past 4 KiB). */
  size_t i = 0;
  do
    assert_int_equal(batch(&h, &g, 1, i++), 0);
  while (i < g.nrec && !h.c->gens->rejected);
  assert_true(h.c->gens->rejected);
  uint64_t gen;
  int code;
  assert_int_equal(reply(&h, &gen, &code), 2);
  assert_int_equal(gen, 1);
  assert_int_equal(code, GTP_E_TOOBIG);
  /* Its later frames are swallowed, holding nothing; its GEN_END ends it
   * without another reply. */
  for (; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  assert_int_equal(h.c->buffered, 0);
  assert_int_equal(gen_end(&h, &g.end), 0);
  assert_int_equal(h.c->ngens, 0);
  assert_int_equal(h.c->state, CONN_ACTIVE);
  assert_int_equal(h.ing->ctr.rejected_events, g.end.events);
  gtc_gen_fini(&g);
  rh_close(&h);
}

/* A Go client sends a generation's chunks as they fill; when it drops the
 * generation afterwards it aborts it with an all-zero GEN_END. */
static void
test_reasm__aborted_generation_is_discarded_without_reply(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtf_spec s = h.spec;
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_true(g.nrec >= 2);
  assert_int_equal(batch(&h, &g, 1, 0), 0); /* part of generation 1 */
  assert_int_equal(h.c->ngens, 1);
  gtp_gen_end abort_end;
  memset(&abort_end, 0, sizeof abort_end);
  abort_end.gen = 1;
  assert_int_equal(gen_end(&h, &abort_end), 0);
  assert_int_equal(h.c->ngens, 0);
  assert_int_equal(h.c->buffered, 0);
  assert_int_equal(h.c->state, CONN_ACTIVE);
  assert_int_equal(h.ing->ctr.rejected, 0);
  /* An abort of a generation not open (its frames never came) is as
   * quiet; then generation 1 whole: the first reply is its ACK. */
  abort_end.gen = 77;
  assert_int_equal(gen_end(&h, &abort_end), 0);
  for (size_t i = 0; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  end_and_expect_ack(&h, &g.end, 1);
  assert_int_equal(h.ing->ctr.rejected, 0);
  gtc_gen_fini(&g);
  rh_close(&h);
}

static void test_reasm__too_many_open_generations_close_the_conn(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &h.spec), 0);
  for (uint64_t gen = 1; gen <= OPEN_GENS_MAX; gen++)
    assert_int_equal(batch(&h, &g, gen, 0), 0);
  assert_int_equal(h.c->ngens, OPEN_GENS_MAX);
  assert_int_equal(batch(&h, &g, OPEN_GENS_MAX + 1, 0), -1);
  assert_int_equal(h.c->state, CONN_CLOSING);
  assert_int_equal(h.c->ngens, 0); /* dropped with the connection */
  assert_int_equal(h.c->buffered, 0);
  int code = 0;
  for (int i = 0; i < 20; i++)
    pump_once(&h);
  assert_int_equal(gtc_wait_closed(&h.cli, &code, GTC_TIMEOUT_MS), 1);
  assert_int_equal(code, GTP_E_LIMIT);
  gtc_gen_fini(&g);
  rh_close(&h);
}

/* A BATCH frame read in two parts goes straight into its generation's
 * buffer (ingest.c invariant 9) and ends up as if read whole: the manifest
 * (CRC over every record, in order) then accepts the generation. */
static void test_reasm__staged_frame_is_appended_once_whole(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build_random(&g, &h.spec, 2, 3), 0);
  int staged = 0;
  for (size_t i = 0; i < g.nrec; i++) {
    size_t rlen = g.off[i + 1] - g.off[i];
    if (i == 0 || staged || rlen < STAGE_MIN) {
      assert_int_equal(batch(&h, &g, 1, i), 0);
      continue;
    }
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(
        gtp_frame_batch_encode(&b, 1, g.body.data + g.off[i], rlen), 0);
    size_t first = b.len / 3;
    opengen *og = h.c->gens;
    size_t before = og->buf.len;
    assert_int_equal(reasm_stage_begin(h.c, b.data, first), 1);
    assert_ptr_equal(h.c->stage, og);
    /* What the kernel would write in place: the rest of the frame. */
    size_t rest = h.c->stage_len - h.c->stage_have;
    assert_int_equal(rest, b.len - first);
    memcpy(og->buf.data + og->buf.len + h.c->stage_have, b.data + first, rest);
    assert_int_equal(reasm_stage_read(h.c, rest), 0);
    assert_null(h.c->stage);
    assert_int_equal(og->buf.len, before + rlen);
    gtp_wbuf_fini(&b);
    staged = 1;
  }
  assert_true(staged);
  end_and_expect_ack(&h, &g.end, 1);
  gtc_gen_fini(&g);
  rh_close(&h);
}

/* An event that fails its check (an overlong varint) in a generation whose
 * framing, manifest and CRC are right: the loop parses only the framing,
 * so the store's walk finds it; the generation is refused with its gen and
 * the decode error, nothing of it is stored, its events count as rejected,
 * and the connection goes on (store.h check_events). */
static void
test_reasm__bad_event_is_refused_after_the_store_checks_it(void **st) {
  (void)st;
  rh h;
  rh_open(&h, 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &h.spec), 0);
  /* A copy whose first EVENTS record starts with COUNTER and a delta of
   * ten bytes, the last above 1 (GTP_E_VARINT), manifest sealed over it. */
  gtc_gen bad = g;
  gtp_wbuf_init(&bad.body, 0);
  gtp_wbuf_put(&bad.body, g.body.data, g.body.len);
  int planted = 0;
  for (size_t i = 0; i < bad.nrec && !planted; i++) {
    gtp_record rec;
    gtp_batch b;
    assert_int_equal(gtp_record_parse(bad.body.data + bad.off[i],
                                      bad.off[i + 1] - bad.off[i], &rec),
                     0);
    if (rec.type != GTP_REC_EVENTS)
      continue;
    assert_int_equal(gtp_batch_decode(rec.payload, rec.len, &b), 0);
    assert_true(b.events_len >= 11);
    uint8_t *ev = (uint8_t *)b.events;
    ev[0] = GTP_EV_COUNTER;
    memset(ev + 1, 0xff, 9);
    ev[10] = 0x7f;
    planted = 1;
  }
  assert_true(planted);
  gtp_gen_end e = g.end;
  assert_int_equal(gtp_manifest_compute(bad.body.data, bad.body.len, &e), 0);
  assert_true(e.crc != g.end.crc);
  for (size_t i = 0; i < bad.nrec; i++)
    assert_int_equal(batch(&h, &bad, 1, i), 0);
  assert_int_equal(gen_end(&h, &e), 0);
  assert_int_equal(h.c->ngens, 0); /* handed to the store */
  pump_until(&h, &h.ing->ctr.rejected, 1);
  uint64_t gen;
  int code;
  assert_int_equal(reply(&h, &gen, &code), 2);
  assert_int_equal(gen, 1);
  assert_int_equal(code, GTP_E_VARINT);
  assert_int_equal(h.ing->ctr.committed, 0);
  assert_int_equal(h.ing->ctr.rejected_events, e.events);
  assert_int_equal(h.c->state, CONN_ACTIVE);
  assert_int_equal(h.c->buffered, 0); /* the completion gave it all back */
  /* The same generation, right this time, is stored and ACKed. */
  for (size_t i = 0; i < g.nrec; i++)
    assert_int_equal(batch(&h, &g, 1, i), 0);
  end_and_expect_ack(&h, &g.end, 1);
  gtp_wbuf_fini(&bad.body);
  gtc_gen_fini(&g);
  rh_close(&h);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  gtp_check_set_hook(gtp_check_abort);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_reasm__records_in_order_store_the_generation_exactly),
      cmocka_unit_test(
          test_reasm__wrong_manifest_is_refused_with_its_gen_and_the_conn_goes_on),
      cmocka_unit_test(
          test_reasm__gen_end_without_batch_is_refused_as_manifest),
      cmocka_unit_test(
          test_reasm__oversized_generation_is_refused_then_swallowed),
      cmocka_unit_test(
          test_reasm__aborted_generation_is_discarded_without_reply),
      cmocka_unit_test(test_reasm__too_many_open_generations_close_the_conn),
      cmocka_unit_test(test_reasm__staged_frame_is_appended_once_whole),
      cmocka_unit_test(
          test_reasm__bad_event_is_refused_after_the_store_checks_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
