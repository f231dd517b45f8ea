/* test_tls_conn.c: daemon/tls_conn.c against the real gentraced over TLS:
 * large BATCH frames are decrypted straight into their generation's buffer
 * (invariant 5; ingest.c invariant 9) whatever the TLS record boundaries,
 * and stored byte for byte.
 */
#define _GNU_SOURCE /* memmem */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "store_read.h"
#include "tls_client.h"

static gtd *current;

static int teardown(void **state) {
  (void)state;
  if (current != NULL)
    gtd_cleanup(current);
  current = NULL;
  return 0;
}

/* A daemon serving TLS with a fresh PKI in its own directory. */
static void start_tls(gtd *d, char *ca, size_t cap) {
  assert_int_equal(gtd_init(d), 0);
  current = d;
  if (gtc_tls_pki(d->dir) < 0)
    fail_msg("certtool could not make the test certificates");
  char cert[400], key[400];
  snprintf(cert, sizeof cert, "%s/srv.pem", d->dir);
  snprintf(key, sizeof key, "%s/srv.key", d->dir);
  snprintf(ca, cap, "%s/ca.pem", d->dir);
  const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
  int rc = gtd_start(d, args, NULL);
  if (rc != 0)
    fail_msg("gentraced did not start: %d (log %s)", rc, d->log);
}

/* The stored payload of (session, gen) holds g's body records unchanged,
 * and parses with every event. */
static void assert_body_stored(const char *db, const gtf_spec *s,
                               const gtc_gen *g) {
  store_reader *r;
  char *cause = NULL;
  assert_int_equal(store_reader_open(db, &r, &cause), 0);
  char hex[33];
  gtp_session_hex(s->session, hex);
  gtp_wbuf got;
  gtp_wbuf_init(&got, 0);
  assert_int_equal(store_read_payload_by_gen(r, hex, s->gen, &got), 0);
  if (memmem(got.data, got.len, g->body.data, g->body.len) == NULL)
    fail_msg("generation %llu: the stored bytes differ from those sent",
             (unsigned long long)s->gen);
  gtp_gen pg;
  size_t used;
  assert_int_equal(gtp_gen_parse(got.data, got.len, &pg, &used), 0);
  assert_int_equal(pg.end.events, g->end.events);
  gtp_gen_fini(&pg);
  gtp_wbuf_fini(&got);
  store_reader_close(r);
}

/* Streams `ngens` generations of ~63 KiB BATCH frames over one TLS
 * connection whose records are cut at `split` (0: full records), three
 * generations' frames back to back in one send, as an agent's buffer holds
 * them, so records also straddle frames. */
static void stream(gtd *d, const char *ca, unsigned session, unsigned split,
                   uint64_t ngens) {
  gtc c;
  assert_int_equal(gtc_connect(&c, d->agent_port), 0);
  assert_int_equal(gtc_tls_wrap(&c, ca, split, 7 + session), 0);
  gtf_spec s;
  gtf_spec_init(&s, session, 1);
  gtp_welcome w;
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  enum { PER_SEND = 3 };
  for (uint64_t first = 1; first <= ngens; first += PER_SEND) {
    gtc_gen g[PER_SEND];
    gtf_spec sp[PER_SEND];
    gtp_wbuf out;
    gtp_wbuf_init(&out, 0);
    for (unsigned k = 0; k < PER_SEND; k++) {
      uint64_t gen = first + k;
      gtf_spec_init(&sp[k], session, gen);
      assert_int_equal(gtc_gen_build_random(&g[k], &sp[k], 1 + gen % 3,
                                            (unsigned)(gen * 31)),
                       0);
      for (size_t i = 0; i < g[k].nrec; i++)
        gtp_frame_batch_encode(&out, gen, g[k].body.data + g[k].off[i],
                               g[k].off[i + 1] - g[k].off[i]);
      gtp_frame_gen_end_encode(&out, &g[k].end);
    }
    assert_false(out.err);
    assert_int_equal(gtc_send_raw(&c, out.data, out.len), 0);
    gtp_wbuf_fini(&out);
    for (unsigned k = 0; k < PER_SEND; k++) {
      uint64_t got = 0;
      int code = 0;
      int rc = gtc_read_reply(&c, &got, &code, GTC_TIMEOUT_MS);
      if (rc != 1 || got != first + k)
        fail_msg("generation %llu: rc=%d code=%d gen=%llu (split %u)",
                 (unsigned long long)(first + k), rc, code,
                 (unsigned long long)got, split);
      assert_body_stored(d->db, &sp[k], &g[k]);
      gtc_gen_fini(&g[k]);
    }
  }
  gtc_tls_end(&c);
  gtc_close(&c);
}

/* Records of every size from 1 byte to 16 KiB, so a record ends inside a
 * frame header, inside a staged frame, and straddles the end of a staged
 * frame and the start of the next: every generation is acknowledged and
 * stored exactly, and the large frames took the staged path (no copy
 * through the decoder). */
static void
test_tls_conn__records_of_any_size_store_staged_frames_exactly(void **st) {
  (void)st;
  gtd d;
  char ca[400];
  start_tls(&d, ca, sizeof ca);
  stream(&d, ca, 71, 16384, 12);
  int64_t staged =
      gtd_metric_tls(&d, ca, "gentrace_ingest_staged_frames_total");
  assert_true(staged > 0);
  /* Full records as an agent sends them: the same. */
  stream(&d, ca, 72, 0, 12);
  assert_true(gtd_metric_tls(&d, ca, "gentrace_ingest_staged_frames_total") >
              staged);
  assert_int_equal(gtd_metric_tls(&d, ca, "gentrace_tls_failures_total"), 0);
  assert_int_equal(gtd_stop(&d), 0);
  gtd_cleanup(&d);
  current = NULL;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_tls_conn__records_of_any_size_store_staged_frames_exactly,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
