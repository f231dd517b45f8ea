/* test_gowin.c: GOTRACE records (FORMAT.md 4.8) through the validator and
 * proto/gowin.c: Go bytes out in body order, Go sessions told apart by
 * their tags, mixed native/Go generations refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format.h"
#include "gowin.h"

static void put_gotrace(gtp_wbuf *b, const char *p, size_t n) {
  uint8_t h[11];
  h[0] = GTP_REC_GOTRACE;
  size_t k = 1;
  uint64_t v = n;
  do {
    h[k++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    v >>= 7;
  } while (v);
  gtp_wbuf_put(b, h, k);
  gtp_wbuf_put(b, p, n);
}

/* A generation of session s with the given body, manifest matching. */
static void wrap(gtp_wbuf *out, const gtp_gen_start *s, const gtp_wbuf *body) {
  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  gtp_wbuf_init(out, 0);
  assert_int_equal(gtp_put_gen_start(out, s), 0);
  gtp_wbuf_put(out, body->data, body->len);
  assert_int_equal(gtp_manifest_compute(body->data, body->len, &e), 0);
  e.gen = s->gen;
  assert_int_equal(gtp_put_gen_end(out, &e), 0);
}

static void put_clock(gtp_wbuf *b) {
  gtp_clock c = {100, 100, 5000, 200, 200, 5100};
  assert_int_equal(gtp_put_clock(b, &c), 0);
}

static int sink(void *ctx, const void *p, size_t n) {
  gtp_wbuf *b = ctx;
  gtp_wbuf_put(b, p, n);
  return 0;
}

static void gospec(gtp_gen_start *s, const char *ver) {
  memset(s, 0, sizeof *s);
  s->session[0] = 1;
  s->gen = 7;
  s->service = (gtp_str){"svc", 3};
  s->ntags = 2;
  s->tags[0].key = (gtp_str){"format", 6};
  s->tags[0].value = (gtp_str){"go", 2};
  s->tags[1].key = (gtp_str){"go_version", 10};
  s->tags[1].value = (gtp_str){ver, strlen(ver)};
}

static void test_gotrace__chunks_come_out_in_body_order(void **state) {
  (void)state;
  gtp_gen_start s;
  gospec(&s, "1.26");
  gtp_wbuf body, out, go;
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_init(&go, 0);
  put_gotrace(&body, "\x01\x02\x03", 3);
  put_clock(&body); /* records in any order */
  char big[300];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = (char)i;
  put_gotrace(&body, big, sizeof big);
  wrap(&out, &s, &body);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_int_equal(g.end.records, 3);
  assert_int_equal(g.end.batches, 0);
  assert_int_equal(gtp_gowin_minor(&g.start), 26);
  assert_int_equal(gtp_gowin_put(&g, sink, &go), 0);
  assert_int_equal(go.len, 3 + sizeof big);
  assert_memory_equal(go.data, "\x01\x02\x03", 3);
  assert_memory_equal(go.data + 3, big, sizeof big);
  gtp_gen_fini(&g);
  uint8_t h[GTP_GO_HEADER_SIZE];
  gtp_gowin_header(23, h);
  assert_memory_equal(h, "go 1.23 trace\0\0\0", 16);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&go);
}

static void test_gotrace__beside_events_is_corrupt(void **state) {
  (void)state;
  gtp_gen_start s;
  gospec(&s, "1.22");
  gtp_wbuf body, out;
  gtp_wbuf_init(&body, 0);
  put_clock(&body);
  put_gotrace(&body, "x", 1);
  const uint8_t ev[] = {GTP_EV_REGION_END, 0};
  assert_int_equal(gtp_put_batch(&body, 7, 1, 0, 1, ev, sizeof ev), 0);
  wrap(&out, &s, &body);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void test_gowin_minor__from_the_tags(void **state) {
  (void)state;
  gtp_gen_start st;
  gospec(&st, "1.25");
  assert_int_equal(gtp_gowin_minor(&st), 25);
  st.tags[1].value = (gtp_str){"1.21", 4}; /* no generations before 1.22 */
  assert_int_equal(gtp_gowin_minor(&st), GTP_E_VERSION);
  st.tags[1].value = (gtp_str){"1.2x", 4};
  assert_int_equal(gtp_gowin_minor(&st), GTP_E_VERSION);
  st.ntags = 1; /* format=go without go_version */
  assert_int_equal(gtp_gowin_minor(&st), GTP_E_VERSION);
  st.tags[0].value = (gtp_str){"gox", 3};
  assert_int_equal(gtp_gowin_minor(&st), 0);
  st.ntags = 0;
  assert_int_equal(gtp_gowin_minor(&st), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gotrace__chunks_come_out_in_body_order),
      cmocka_unit_test(test_gotrace__beside_events_is_corrupt),
      cmocka_unit_test(test_gowin_minor__from_the_tags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
