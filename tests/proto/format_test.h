/* format_test.h: helpers shared by the tests of proto/format.c
 * (test_format*.c, split by responsibility: events, records and tables,
 * generations and manifests, files and the rest). Header-only. */
#ifndef FORMAT_TEST_H
#define FORMAT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crc32c.h"
#include "format.h"
#include "gen_fixture.h"
#include "varint.h"
#include "../lib/prng.h"

static uint64_t rng_state __attribute__((unused));
static inline uint64_t rng(void) {
  return xorshift64(&rng_state);
}

static inline int str_eq(gtp_str s, const char *want) {
  return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* One generation as a file (header + generation). */
static inline void one_gen_file(gtp_wbuf *b, unsigned sess, uint64_t gen) {
  gtf_spec s;
  gtf_spec_init(&s, sess, gen);
  gtp_wbuf_init(b, 0);
  assert_int_equal(gtp_put_file_header(b), 0);
  assert_int_equal(gtf_generation(b, &s), 0);
}

/* Wraps hand-made body bytes into a generation whose manifest matches them
 * (so the deeper checks, not the CRC, decide), optionally with another
 * GEN_END gen. */
static inline void wrap_body(gtp_wbuf *out, const gtf_spec *s,
                             const uint8_t *body, size_t len,
                             uint64_t end_gen) {
  gtp_gen_end e;
  memset(&e, 0, sizeof(e));
  gtp_wbuf_init(out, 0);
  assert_int_equal(gtf_gen_start(out, s), 0);
  gtp_wbuf_put(out, body, len);
  assert_int_equal(gtp_manifest_compute(body, len, &e), 0);
  e.gen = end_gen;
  assert_int_equal(gtp_put_gen_end(out, &e), 0);
}

static inline void put_clock_simple(gtp_wbuf *b) {
  gtp_clock c = {100, 1000, 2000, 200, 1400, 2400};
  assert_int_equal(gtp_put_clock(b, &c), 0);
}

/* Decodes one event encoded alone, checking it consumed all bytes. */
static inline void event_round_trip(const gtp_event *in, uint64_t prev) {
  uint8_t buf[GTP_EVENT_MAX + GTP_LOG_MAX];
  int n = gtp_event_encode(buf, in, prev);
  assert_true(n > 0);
  const gtp_event_info *info = gtp_event_info_get(in->type);
  assert_true((size_t)n <=
              GTP_EVENT_MAX + (info->has_message ? in->msg_len : 0));
  gtp_batch b = {0, 1, prev, 1, buf, (size_t)n};
  gtp_event_iter it;
  gtp_event out;
  gtp_event_iter_init(&it, &b);
  assert_int_equal(gtp_event_next(&it, &out), 1);
  assert_int_equal(out.type, in->type);
  assert_true(out.ticks == in->ticks);
  for (unsigned i = 0; i < info->nargs; i++)
    assert_true(out.args[i] == in->args[i]);
  for (unsigned i = info->nargs; i < GTP_EVENT_ARGS_MAX; i++)
    assert_true(out.args[i] == 0);
  if (info->has_message) {
    assert_int_equal(out.msg_len, in->msg_len);
    if (in->msg_len)
      assert_memory_equal(out.msg, in->msg, in->msg_len);
  } else {
    assert_null(out.msg);
  }
  assert_int_equal(gtp_event_next(&it, &out), 0);
}

/* Runs the iterator over raw event bytes with a claimed count. */
static inline int events_walk(const uint8_t *p, size_t n, uint64_t count,
                              int *produced) {
  gtp_batch b = {0, 1, 0, count, p, n};
  gtp_event_iter it;
  gtp_event ev;
  int rc;
  *produced = 0;
  gtp_event_iter_init(&it, &b);
  while ((rc = gtp_event_next(&it, &ev)) == 1)
    (*produced)++;
  return rc;
}

#endif
