/* test_format.c: proto/format.c, the trace format writer and reader. */
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

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int str_eq(gtp_str s, const char *want) {
  return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* One generation as a file (header + generation). */
static void one_gen_file(gtp_wbuf *b, unsigned sess, uint64_t gen) {
  gtf_spec s;
  gtf_spec_init(&s, sess, gen);
  gtp_wbuf_init(b, 0);
  assert_int_equal(gtp_put_file_header(b), 0);
  assert_int_equal(gtf_generation(b, &s), 0);
}

/* Wraps hand-made body bytes into a generation whose manifest matches them
 * (so the deeper checks, not the CRC, decide), optionally with another
 * GEN_END gen. */
static void wrap_body(gtp_wbuf *out, const gtf_spec *s, const uint8_t *body,
                      size_t len, uint64_t end_gen) {
  gtp_gen_end e;
  memset(&e, 0, sizeof(e));
  gtp_wbuf_init(out, 0);
  assert_int_equal(gtf_gen_start(out, s), 0);
  gtp_wbuf_put(out, body, len);
  assert_int_equal(gtp_manifest_compute(body, len, &e), 0);
  e.gen = end_gen;
  assert_int_equal(gtp_put_gen_end(out, &e), 0);
}

static void put_clock_simple(gtp_wbuf *b) {
  gtp_clock c = {100, 1000, 2000, 200, 1400, 2400};
  assert_int_equal(gtp_put_clock(b, &c), 0);
}

/* Decodes one event encoded alone, checking it consumed all bytes. */
static void event_round_trip(const gtp_event *in, uint64_t prev) {
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

/* ------------------------------------------------------------- events */

static void
test_event_info__every_type_is_described_and_round_trips(void **state) {
  (void)state;
  const char *names[GTP_EV_COUNT_] = {0};
  for (unsigned t = 1; t < GTP_EV_COUNT_; t++) {
    const gtp_event_info *info = gtp_event_info_get((uint8_t)t);
    assert_non_null(info);
    assert_non_null(info->name);
    assert_true(info->nargs <= GTP_EVENT_ARGS_MAX);
    assert_true(info->str_mask >> info->nargs == 0);
    assert_true(info->signed_mask >> info->nargs == 0);
    assert_true(info->stack_arg <= info->nargs);
    for (unsigned u = 1; u < t; u++)
      assert_string_not_equal(names[u], info->name);
    names[t] = info->name;
    gtp_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = (uint8_t)t;
    ev.ticks = 77 + t;
    for (unsigned i = 0; i < info->nargs; i++)
      ev.args[i] = 1000 * t + i;
    if (info->has_message) {
      ev.msg = (const uint8_t *)"hello";
      ev.msg_len = 5;
    }
    event_round_trip(&ev, 70);
  }
  /* The contract the agent, CLI and Chrome writer rely on. */
  assert_int_equal(gtp_event_info_get(GTP_EV_COUNTER)->signed_mask, 0x2);
  assert_int_equal(gtp_event_info_get(GTP_EV_TASK_BEGIN)->str_mask, 0x4);
  assert_int_equal(gtp_event_info_get(GTP_EV_LOG_STACK)->stack_arg, 2);
  assert_true(gtp_event_info_get(GTP_EV_LOG)->has_message);
  assert_int_equal(gtp_event_info_get(GTP_EV_REGION_END)->nargs, 0);
}

static void test_event_info__unknown_types_are_null(void **state) {
  (void)state;
  assert_null(gtp_event_info_get(0));
  assert_null(gtp_event_info_get(GTP_EV_COUNT_));
  assert_null(gtp_event_info_get(255));
}

static void test_event__max_values_round_trip_for_every_type(void **state) {
  (void)state;
  for (unsigned t = 1; t < GTP_EV_COUNT_; t++) {
    const gtp_event_info *info = gtp_event_info_get((uint8_t)t);
    gtp_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = (uint8_t)t;
    ev.ticks = UINT64_MAX; /* 10-byte delta from 0 */
    for (unsigned i = 0; i < info->nargs; i++)
      ev.args[i] =
          (info->signed_mask >> i & 1) ? (uint64_t)INT64_MIN : UINT64_MAX;
    event_round_trip(&ev, 0);
    for (unsigned i = 0; i < info->nargs; i++)
      if (info->signed_mask >> i & 1)
        ev.args[i] = (uint64_t)INT64_MAX;
    event_round_trip(&ev, 0);
  }
}

static void test_event__negative_counter_round_trips_small(void **state) {
  (void)state;
  const int64_t vals[] = {-1, -64, -65, -1000000, INT64_MIN, 0, 1, INT64_MAX};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
    gtp_event ev = {GTP_EV_COUNTER, 5, {9, (uint64_t)vals[i], 0}, NULL, 0};
    event_round_trip(&ev, 5);
  }
  /* -1 is one byte on the wire (zigzag), not ten. */
  uint8_t buf[GTP_EVENT_MAX];
  gtp_event ev = {GTP_EV_COUNTER, 5, {9, (uint64_t)-1, 0}, NULL, 0};
  assert_int_equal(gtp_event_encode(buf, &ev, 5), 4);
}

static void
test_event__empty_and_longest_log_messages_round_trip(void **state) {
  (void)state;
  static uint8_t msg[GTP_LOG_MAX];
  for (size_t i = 0; i < sizeof(msg); i++)
    msg[i] = (uint8_t)(i * 7); /* includes NUL and non-UTF-8 bytes */
  gtp_event ev = {GTP_EV_LOG, 10, {3, 0, 0}, msg, 0};
  event_round_trip(&ev, 0);
  ev.msg = NULL; /* an empty message needs no pointer */
  event_round_trip(&ev, 0);
  ev.msg = msg;
  ev.msg_len = GTP_LOG_MAX;
  event_round_trip(&ev, 0);
  ev.type = GTP_EV_LOG_STACK;
  ev.args[1] = 12;
  event_round_trip(&ev, 0);
}

static void test_event_encode__log_over_limit_is_toobig(void **state) {
  (void)state;
  static uint8_t buf[GTP_EVENT_MAX + GTP_LOG_MAX + 1];
  static uint8_t msg[GTP_LOG_MAX + 1];
  gtp_event ev = {GTP_EV_LOG, 10, {3, 0, 0}, msg, GTP_LOG_MAX + 1};
  assert_int_equal(gtp_event_encode(buf, &ev, 0), GTP_E_TOOBIG);
}

static void
test_event_encode__unknown_type_or_time_going_back_fails(void **state) {
  (void)state;
  uint8_t buf[GTP_EVENT_MAX];
  gtp_event ev = {0, 10, {0, 0, 0}, NULL, 0};
  assert_int_equal(gtp_event_encode(buf, &ev, 0), GTP_E_UNKNOWN);
  ev.type = GTP_EV_COUNT_;
  assert_int_equal(gtp_event_encode(buf, &ev, 0), GTP_E_UNKNOWN);
  ev.type = GTP_EV_INSTANT;
  assert_int_equal(gtp_event_encode(buf, &ev, 11), GTP_E_BADARG);
}

/* Runs the iterator over raw event bytes with a claimed count. */
static int events_walk(const uint8_t *p, size_t n, uint64_t count,
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

static void
test_event_next__count_and_bytes_disagreeing_is_manifest(void **state) {
  (void)state;
  const uint8_t two[] = {GTP_EV_INSTANT, 1, 5, GTP_EV_REGION_END, 2};
  int n;
  assert_int_equal(events_walk(two, sizeof(two), 2, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(events_walk(two, sizeof(two), 3, &n), GTP_E_MANIFEST);
  assert_int_equal(n, 2);
  assert_int_equal(events_walk(two, sizeof(two), 1, &n), GTP_E_MANIFEST);
  assert_int_equal(n, 1);
}

static void test_event_next__unknown_type_is_unknown(void **state) {
  (void)state;
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 5, 200, 1};
  int n;
  assert_int_equal(events_walk(ev, sizeof(ev), 2, &n), GTP_E_UNKNOWN);
  assert_int_equal(n, 1);
  const uint8_t zero[] = {0, 1};
  assert_int_equal(events_walk(zero, sizeof(zero), 1, &n), GTP_E_UNKNOWN);
}

static void test_event_next__every_truncation_of_an_event_errors(void **state) {
  (void)state;
  uint8_t buf[128];
  gtp_event ev = {
      GTP_EV_LOG_STACK, 300, {70000, 9, 0}, (const uint8_t *)"message", 7};
  int len = gtp_event_encode(buf, &ev, 0);
  assert_true(len > 4);
  for (int cut = 1; cut < len; cut++) {
    int n;
    int rc = events_walk(buf, (size_t)cut, 1, &n);
    assert_true(rc == GTP_E_TRUNC);
    assert_int_equal(n, 0);
  }
  int n;
  assert_int_equal(events_walk(buf, (size_t)len, 1, &n), 0);
}

static void test_event_next__log_length_over_limit_is_toobig(void **state) {
  (void)state;
  uint8_t buf[32];
  size_t n = 0;
  buf[n++] = GTP_EV_LOG;
  buf[n++] = 0;
  buf[n++] = 1;
  n += gtp_uvarint_put(buf + n, GTP_LOG_MAX + 1);
  int k;
  assert_int_equal(events_walk(buf, n, 1, &k), GTP_E_TOOBIG);
}

static void test_event_next__bad_varint_arg_is_varint(void **state) {
  (void)state;
  uint8_t buf[16] = {GTP_EV_TASK_END, 0};
  memset(buf + 2, 0xff, 10); /* 10th byte 0xff: overflow */
  int k;
  assert_int_equal(events_walk(buf, 12, 1, &k), GTP_E_VARINT);
}

static void test_event_next__ticks_wrapping_past_2_64_is_corrupt(void **state) {
  (void)state;
  uint8_t buf[32];
  size_t n = 0;
  buf[n++] = GTP_EV_REGION_END;
  n += gtp_uvarint_put(buf + n, UINT64_MAX);
  buf[n++] = GTP_EV_REGION_END;
  buf[n++] = 1; /* one more tick wraps */
  int k;
  assert_int_equal(events_walk(buf, n, 2, &k), GTP_E_CORRUPT);
  assert_int_equal(k, 1);
}

/* ------------------------------------------------------ header, records */

static void test_file_header__round_trip_and_each_error(void **state) {
  (void)state;
  uint8_t h[GTP_FILE_HEADER_SIZE];
  gtp_file_header_write(h);
  assert_memory_equal(h, "gentrace\x01\x00\x01\x00\x00\x00\x00\x00", 16);
  assert_int_equal(gtp_file_header_check(h, 16), 0);
  for (size_t n = 0; n < 16; n++)
    assert_int_equal(gtp_file_header_check(h, n), GTP_E_TRUNC);
  h[10] = 9; /* newer minor: still readable */
  assert_int_equal(gtp_file_header_check(h, 16), 0);
  h[8] = 2; /* other major */
  assert_int_equal(gtp_file_header_check(h, 16), GTP_E_VERSION);
  h[8] = 1;
  h[0] = 'G';
  assert_int_equal(gtp_file_header_check(h, 16), GTP_E_MAGIC);
}

static void test_record_parse__framing_errors(void **state) {
  (void)state;
  gtp_record rec;
  uint8_t buf[16] = {GTP_REC_CLOCK, 3, 1, 2, 3};
  assert_int_equal(gtp_record_parse(buf, 5, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_CLOCK);
  assert_int_equal(rec.len, 3);
  assert_int_equal(rec.size, 5);
  assert_ptr_equal(rec.payload, buf + 2);
  for (size_t n = 0; n < 5; n++)
    assert_int_equal(gtp_record_parse(buf, n, &rec), GTP_E_TRUNC);
  buf[0] = 0;
  assert_int_equal(gtp_record_parse(buf, 5, &rec), GTP_E_CORRUPT);
  buf[0] = 99; /* unknown types parse: readers skip them */
  assert_int_equal(gtp_record_parse(buf, 5, &rec), 0);
  size_t n = 1 + gtp_uvarint_put(buf + 1, GTP_RECORD_MAX + 1);
  assert_int_equal(gtp_record_parse(buf, n, &rec), GTP_E_TOOBIG);
  memset(buf + 1, 0xff, 10);
  assert_int_equal(gtp_record_parse(buf, 11, &rec), GTP_E_VARINT);
}

static void
test_gen_start__round_trip_with_every_tag_at_the_limit(void **state) {
  (void)state;
  static char big[GTP_IDENT_STR_MAX];
  memset(big, 'k', sizeof(big));
  gtp_gen_start s, out;
  memset(&s, 0, sizeof(s));
  for (int i = 0; i < 16; i++)
    s.session[i] = (uint8_t)(0xf0 + i);
  s.gen = UINT64_MAX;
  s.service = (gtp_str){big, GTP_IDENT_STR_MAX};
  s.host = (gtp_str){"h", 1};
  s.agent_version = (gtp_str){"", 0};
  s.pid = 4194304;
  s.process_start_ns = 1767225600123456789ull;
  s.ntags = GTP_TAGS_MAX;
  for (unsigned i = 0; i < GTP_TAGS_MAX; i++) {
    s.tags[i].key = (gtp_str){big, i + 1};
    s.tags[i].value = (gtp_str){big, GTP_IDENT_STR_MAX - i};
  }
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_gen_start(&b, &s), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.size, b.len);
  assert_int_equal(rec.type, GTP_REC_GEN_START);
  assert_int_equal(gtp_gen_start_decode(rec.payload, rec.len, &out), 0);
  assert_memory_equal(out.session, s.session, 16);
  assert_true(out.gen == UINT64_MAX);
  assert_int_equal(out.service.len, GTP_IDENT_STR_MAX);
  assert_true(str_eq(out.host, "h"));
  assert_int_equal(out.agent_version.len, 0);
  assert_true(out.pid == s.pid && out.process_start_ns == s.process_start_ns);
  assert_int_equal(out.ntags, GTP_TAGS_MAX);
  for (unsigned i = 0; i < GTP_TAGS_MAX; i++) {
    assert_int_equal(out.tags[i].key.len, i + 1);
    assert_int_equal(out.tags[i].value.len, GTP_IDENT_STR_MAX - i);
  }
  /* Trailing byte. */
  uint8_t *copy = malloc(rec.len + 1);
  memcpy(copy, rec.payload, rec.len);
  copy[rec.len] = 0;
  assert_int_equal(gtp_gen_start_decode(copy, rec.len + 1, &out),
                   GTP_E_CORRUPT);
  /* Every truncation. */
  for (size_t n = 0; n < rec.len; n += 7)
    assert_true(gtp_gen_start_decode(copy, n, &out) < 0);
  free(copy);
  gtp_wbuf_fini(&b);
}

static void
test_gen_start__over_limit_is_toobig_and_appends_nothing(void **state) {
  (void)state;
  static char big[GTP_IDENT_STR_MAX + 1];
  gtp_gen_start s;
  memset(&s, 0, sizeof(s));
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_wbuf_put(&b, "x", 1);
  s.host = (gtp_str){big, sizeof(big)};
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  s.host = (gtp_str){big, 1};
  s.ntags = GTP_TAGS_MAX + 1;
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  s.ntags = 1;
  s.tags[0].value = (gtp_str){big, sizeof(big)};
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  assert_int_equal(b.len, 1);
  assert_int_equal(b.err, 0);

  /* Decoder side: a host length one over the limit, and 33 tags. */
  uint8_t p[64] = {0};
  size_t n = 16;
  p[n++] = 1;                                         /* gen */
  p[n++] = 0;                                         /* service */
  n += gtp_uvarint_put(p + n, GTP_IDENT_STR_MAX + 1); /* host */
  gtp_gen_start out;
  assert_int_equal(gtp_gen_start_decode(p, sizeof(p), &out), GTP_E_TOOBIG);
  n = 17;
  p[n++] = 0;            /* service */
  p[n++] = 0;            /* host */
  p[n++] = 1;            /* pid */
  p[n++] = 1;            /* start */
  p[n++] = 0;            /* agent version */
  p[n++] = GTP_TAGS_MAX; /* ntags = 32 but no bytes */
  assert_int_equal(gtp_gen_start_decode(p, n, &out), GTP_E_TRUNC);
  p[n - 1] = GTP_TAGS_MAX + 1;
  assert_int_equal(gtp_gen_start_decode(p, n, &out), GTP_E_TOOBIG);
  gtp_wbuf_fini(&b);
}

static void test_clock__round_trip_and_going_back_is_corrupt(void **state) {
  (void)state;
  gtp_clock c = {UINT64_MAX - 5, 0, UINT64_MAX, UINT64_MAX, 10, 0}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_clock(&b, &c), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_clock_decode(rec.payload, rec.len, &out), 0);
  assert_memory_equal(&out, &c, sizeof(c));
  gtp_wbuf_reset(&b);
  gtp_clock back = {10, 0, 0, 9, 0, 0};
  assert_int_equal(gtp_put_clock(&b, &back), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_clock_decode(rec.payload, rec.len, &out), GTP_E_CORRUPT);
  gtp_wbuf_fini(&b);
}

static void test_gen_end__round_trip_with_max_values(void **state) {
  (void)state;
  gtp_gen_end e = {UINT64_MAX, 1, 2, 3, 0xdeadbeef, UINT64_MAX, 7, 8, 9}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_gen_end(&b, &e), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_GEN_END);
  assert_int_equal(gtp_gen_end_decode(rec.payload, rec.len, &out), 0);
  assert_true(out.gen == e.gen && out.records == e.records &&
              out.batches == e.batches && out.bytes == e.bytes &&
              out.crc == e.crc && out.events == e.events &&
              out.dropped == e.dropped && out.evicted == e.evicted &&
              out.rejected == e.rejected);
  /* The bare payload encoder writes exactly the record's payload. */
  gtp_wbuf p;
  gtp_wbuf_init(&p, 0);
  assert_int_equal(gtp_gen_end_encode(&p, &e), 0);
  assert_int_equal(p.len, rec.len);
  assert_memory_equal(p.data, rec.payload, rec.len);
  for (size_t n = 0; n < rec.len; n++)
    assert_int_equal(gtp_gen_end_decode(rec.payload, n, &out), GTP_E_TRUNC);
  gtp_wbuf_fini(&p);
  gtp_wbuf_fini(&b);
}

static void test_batch__round_trip_and_limits(void **state) {
  (void)state;
  static uint8_t ev[GTP_BATCH_MAX + 1];
  memset(ev, GTP_EV_REGION_END, sizeof(ev)); /* 0x02 0x02 ... */
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(
      gtp_put_batch(&b, 7, 1234, 99, GTP_BATCH_MAX / 2, ev, GTP_BATCH_MAX), 0);
  gtp_record rec;
  gtp_batch bt;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_EVENTS);
  assert_int_equal(gtp_batch_decode(rec.payload, rec.len, &bt), 0);
  assert_true(bt.gen == 7 && bt.thread == 1234 && bt.base_ticks == 99);
  assert_true(bt.nevents == GTP_BATCH_MAX / 2);
  assert_int_equal(bt.events_len, GTP_BATCH_MAX);
  gtp_event_iter it;
  gtp_event e;
  uint64_t n = 0;
  int rc;
  gtp_event_iter_init(&it, &bt);
  while ((rc = gtp_event_next(&it, &e)) == 1) {
    n++;
    assert_true(e.ticks == 99 + 2 * n);
  }
  assert_int_equal(rc, 0);
  assert_true(n == GTP_BATCH_MAX / 2);

  size_t before = b.len;
  assert_int_equal(gtp_put_batch(&b, 7, 1, 0, 1, ev, GTP_BATCH_MAX + 1),
                   GTP_E_TOOBIG);
  assert_int_equal(gtp_put_batch(&b, 7, 1, 0, 3, ev, 5), GTP_E_BADARG);
  assert_int_equal(b.len, before);

  /* Decoder: an events part over the limit, and a count over bytes/2. */
  gtp_wbuf_reset(&b);
  gtp_wbuf_put_uvarint(&b, 7);
  gtp_wbuf_put_uvarint(&b, 1);
  gtp_wbuf_put_uvarint(&b, 0);
  gtp_wbuf_put_uvarint(&b, 1);
  gtp_wbuf_put(&b, ev, GTP_BATCH_MAX + 1);
  assert_int_equal(gtp_batch_decode(b.data, b.len, &bt), GTP_E_TOOBIG);
  const uint8_t hdr[] = {7,
                         1,
                         0,
                         3,
                         GTP_EV_REGION_END,
                         1,
                         GTP_EV_REGION_END,
                         1,
                         GTP_EV_REGION_END};
  assert_int_equal(gtp_batch_decode(hdr, sizeof(hdr), &bt), GTP_E_MANIFEST);
  for (size_t k = 0; k < 4; k++)
    assert_int_equal(gtp_batch_decode(hdr, k, &bt), GTP_E_TRUNC);
  gtp_wbuf_fini(&b);
}

static void test_tables__strings_stacks_modules_round_trip(void **state) {
  (void)state;
  static char longest[GTP_STRING_MAX];
  memset(longest, 'z', sizeof(longest));
  const uint64_t ids[] = {5, 1, UINT64_MAX};
  const gtp_str strs[] = {{"five", 4}, {"", 0}, {longest, GTP_STRING_MAX}};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_strings(&b, ids, strs, 3), 0);
  gtp_record rec;
  gtp_table_iter it;
  uint64_t id;
  gtp_str s;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_STRINGS);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(gtp_strings_next(&it, &id, &s), 1);
    assert_true(id == ids[i]);
    assert_int_equal(s.len, strs[i].len);
    assert_memory_equal(s.ptr, strs[i].ptr, s.len);
  }
  assert_int_equal(gtp_strings_next(&it, &id, &s), 0);

  static uint64_t deep[GTP_STACK_DEPTH_MAX];
  for (unsigned i = 0; i < GTP_STACK_DEPTH_MAX; i++)
    deep[i] = UINT64_MAX - i;
  const uint64_t one[] = {0x401000};
  const uint64_t *pcs[] = {deep, one, NULL};
  const size_t depths[] = {GTP_STACK_DEPTH_MAX, 1, 0};
  const uint64_t sids[] = {3, 1, 2};
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_stacks(&b, sids, pcs, depths, 3), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  for (int i = 0; i < 3; i++) {
    uint64_t got[GTP_STACK_DEPTH_MAX];
    size_t nf;
    assert_int_equal(gtp_stacks_next(&it, &id, got, &nf), 1);
    assert_true(id == sids[i]);
    assert_int_equal(nf, depths[i]);
    if (nf)
      assert_memory_equal(got, pcs[i], nf * sizeof(uint64_t));
  }
  assert_int_equal(gtp_stacks_next(&it, &id, NULL, &(size_t){0}), 0);

  static uint8_t bid[GTP_BUILDID_MAX];
  memset(bid, 0xab, sizeof(bid));
  gtp_module mods[2] = {{{"/bin/x", 6}, 0x400000, 0x1000, bid, sizeof(bid)},
                        {{"", 0}, UINT64_MAX, 0, NULL, 0}};
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_modules(&b, mods, 2), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_MODULES);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  gtp_module m;
  assert_int_equal(gtp_modules_next(&it, &m), 1);
  assert_true(str_eq(m.path, "/bin/x"));
  assert_true(m.base == 0x400000 && m.size == 0x1000);
  assert_int_equal(m.build_id_len, GTP_BUILDID_MAX);
  assert_memory_equal(m.build_id, bid, GTP_BUILDID_MAX);
  assert_int_equal(gtp_modules_next(&it, &m), 1);
  assert_true(m.base == UINT64_MAX && m.path.len == 0 && m.build_id_len == 0);
  assert_int_equal(gtp_modules_next(&it, &m), 0);
  gtp_wbuf_fini(&b);
}

static void test_tables__writers_refuse_over_limit_entries(void **state) {
  (void)state;
  static char big[GTP_STRING_MAX + 1];
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  const uint64_t id1 = 1, id0 = 0;
  const gtp_str s_big = {big, sizeof(big)}, s_ok = {"a", 1};
  assert_int_equal(gtp_put_strings(&b, &id1, &s_big, 1), GTP_E_TOOBIG);
  assert_int_equal(gtp_put_strings(&b, &id0, &s_ok, 1), GTP_E_BADARG);
  /* Many strings whose sum exceeds one record. */
  enum { N = 20 };
  uint64_t ids[N];
  gtp_str strs[N];
  for (int i = 0; i < N; i++) {
    ids[i] = (uint64_t)i + 1;
    strs[i] = (gtp_str){big, GTP_STRING_MAX};
  }
  assert_int_equal(gtp_put_strings(&b, ids, strs, N), GTP_E_TOOBIG);
  static uint64_t deep[GTP_STACK_DEPTH_MAX + 1];
  const uint64_t *pcs[] = {deep};
  const size_t depth = GTP_STACK_DEPTH_MAX + 1;
  assert_int_equal(gtp_put_stacks(&b, &id1, pcs, &depth, 1), GTP_E_TOOBIG);
  gtp_module m = {{"p", 1}, 0, 0, (const uint8_t *)big, GTP_BUILDID_MAX + 1};
  assert_int_equal(gtp_put_modules(&b, &m, 1), GTP_E_TOOBIG);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.err, 0);
  gtp_wbuf_fini(&b);
}

static void test_tables__hostile_counts_ids_and_lengths_fail(void **state) {
  (void)state;
  gtp_table_iter it;
  uint64_t id;
  gtp_str s;
  /* A count of 2^62 entries in 3 bytes. */
  uint8_t p[32];
  size_t n = gtp_uvarint_put(p, 1ull << 62);
  p[n++] = 1;
  p[n++] = 0;
  assert_int_equal(gtp_table_iter_init(&it, p, n), GTP_E_TRUNC);
  /* id 0. */
  const uint8_t zero_id[] = {1, 0, 1, 'a'};
  assert_int_equal(gtp_table_iter_init(&it, zero_id, sizeof(zero_id)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_CORRUPT);
  /* A string over GTP_STRING_MAX. */
  n = 0;
  p[n++] = 1;
  p[n++] = 1;
  n += gtp_uvarint_put(p + n, GTP_STRING_MAX + 1);
  assert_int_equal(gtp_table_iter_init(&it, p, n), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_TOOBIG);
  /* A string longer than the record. */
  const uint8_t short_str[] = {1, 1, 5, 'a', 'b'};
  assert_int_equal(gtp_table_iter_init(&it, short_str, sizeof(short_str)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_TRUNC);
  /* Trailing bytes after the last entry. */
  const uint8_t trailing[] = {1, 1, 1, 'a', 0};
  assert_int_equal(gtp_table_iter_init(&it, trailing, sizeof(trailing)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), 1);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_CORRUPT);
  /* A stack deeper than the limit. */
  uint64_t pcs[GTP_STACK_DEPTH_MAX];
  size_t nf;
  uint8_t deep[8] = {1, 1};
  n = 2 + gtp_uvarint_put(deep + 2, GTP_STACK_DEPTH_MAX + 1);
  assert_int_equal(gtp_table_iter_init(&it, deep, n + 2), 0);
  assert_int_equal(gtp_stacks_next(&it, &id, pcs, &nf), GTP_E_TOOBIG);
  /* A build id over the limit. */
  const uint8_t mod[] = {1, 0, 0, 0, GTP_BUILDID_MAX + 1, 0, 0};
  gtp_module m;
  assert_int_equal(gtp_table_iter_init(&it, mod, sizeof(mod)), 0);
  assert_int_equal(gtp_modules_next(&it, &m), GTP_E_TOOBIG);
}

static void test_wbuf__limit_is_a_sticky_toobig(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 100);
  assert_int_equal(b.limit, 100);
  gtp_wbuf_put(&b, "0123456789", 10);
  for (int i = 0; i < 9; i++)
    gtp_wbuf_put(&b, "0123456789", 10);
  assert_int_equal(b.len, 100);
  assert_int_equal(b.err, 0);
  assert_true(b.cap <= 100);
  assert_null(gtp_wbuf_grow(&b, 1));
  assert_int_equal(b.err, GTP_E_TOOBIG);
  gtp_wbuf_put_uvarint(&b, 1); /* no-op once failed */
  assert_int_equal(b.len, 100);
  assert_int_equal(gtp_put_clock(&b, &(gtp_clock){0}), GTP_E_TOOBIG);
  gtp_wbuf_reset(&b);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.err, 0);
  gtp_wbuf_put_str(&b, "abc", 3);
  assert_int_equal(b.len, 4);
  assert_memory_equal(b.data,
                      "\x03"
                      "abc",
                      4);
  gtp_wbuf_fini(&b);
  assert_null(b.data);
  gtp_wbuf_init(&b, 0);
  assert_int_equal(b.limit, GTP_GEN_MAX_BYTES);
  gtp_wbuf_fini(&b);
}

/* ---------------------------------------------------------- generations */

static void check_fixture_gen(const gtp_gen *g, const gtf_spec *s) {
  assert_memory_equal(g->start.session, s->session, 16);
  assert_true(g->start.gen == s->gen && g->end.gen == s->gen);
  assert_true(str_eq(g->start.service, s->service));
  assert_true(str_eq(g->start.host, s->host));
  assert_true(g->start.pid == s->pid);
  assert_int_equal(g->start.ntags, 2);
  assert_true(str_eq(g->start.tags[1].value, "eu-1"));
  assert_true(g->clock.start_real_ns == s->start_real_ns);
  assert_true(g->end.events == gtf_events(s));
  assert_true(g->end.batches == s->threads);
  assert_true(g->end.records == s->threads + 4);
  assert_true(g->end.dropped == s->dropped && g->end.evicted == s->evicted);
  assert_int_equal(g->nstrings, 5 + s->threads);
  for (size_t i = 0; i < g->nstrings; i++)
    assert_true(g->strings[i].id == i + 1); /* sorted */
  assert_true(str_eq(gtp_gen_string(g, GTF_S_QUEUE), "queue_depth"));
  assert_true(str_eq(gtp_gen_string(g, GTF_S_THREAD0), "worker-0"));
  assert_null(gtp_gen_string(g, 0).ptr);
  assert_null(gtp_gen_string(g, 1000).ptr);
  assert_int_equal(g->nstacks, 2);
  const gtp_stack_ent *st = gtp_gen_stack(g, 1);
  assert_non_null(st);
  assert_int_equal(st->nframes, 3);
  const uint8_t *fp = st->frames;
  uint64_t pc;
  assert_int_equal(gtp_uvarint_get(&fp, st->frames + st->frames_len, &pc), 0);
  assert_true(pc == 0x401000);
  assert_null(gtp_gen_stack(g, 3));
  assert_int_equal(g->nmodules, 2);
  assert_int_equal(g->modules[0].build_id_len, 20);
  assert_true(g->base + g->size ==
              g->body + g->body_len +
                  (g->size - (size_t)(g->body - g->base) - g->body_len));
}

static void test_gen_parse__fixture_generation_is_complete(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 1, 41);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g;
  size_t used = 0;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, &used), 0);
  assert_int_equal(used, b.len);
  assert_int_equal(g.size, b.len);
  assert_ptr_equal(g.base, b.data);
  check_fixture_gen(&g, &s);
  /* The manifest's CRC is the CRC of the body bytes. */
  assert_int_equal(gtp_crc32c(0, g.body, g.body_len), g.end.crc);
  assert_true(g.end.bytes == g.body_len);
  gtp_gen_fini(&g);
  assert_null(g.strings);
  gtp_wbuf_fini(&b);
}

static void
test_gen_parse__every_event_decodes_in_order_with_its_args(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 7);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  static const uint8_t want[] = {
      GTP_EV_THREAD_NAME,   GTP_EV_REGION_BEGIN,
      GTP_EV_INSTANT,       GTP_EV_COUNTER,
      GTP_EV_LOG,           GTP_EV_TASK_BEGIN,
      GTP_EV_TASK_END,      GTP_EV_REGION_END,
      GTP_EV_LOST,          GTP_EV_REGION_BEGIN_STACK,
      GTP_EV_INSTANT_STACK, GTP_EV_LOG_STACK,
      GTP_EV_REGION_END};
  size_t cur = 0;
  gtp_batch bt;
  unsigned nb = 0;
  int seen[GTF_THREADS_MAX] = {0};
  while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
    unsigned t = (unsigned)(bt.thread - 1000);
    assert_true(t < s.threads);
    seen[t]++;
    nb++;
    gtp_event_iter it;
    gtp_event ev;
    uint64_t last = bt.base_ticks;
    size_t k = 0;
    int rc;
    gtp_event_iter_init(&it, &bt);
    while ((rc = gtp_event_next(&it, &ev)) == 1) {
      assert_true(k < sizeof(want));
      assert_int_equal(ev.type, want[k]);
      assert_true(ev.ticks > last);
      last = ev.ticks;
      int64_t wall = gtp_gen_wall_ns(&g, ev.ticks);
      assert_true(wall > (int64_t)s.start_real_ns &&
                  wall < (int64_t)(s.start_real_ns + s.period_ns));
      if (ev.type == GTP_EV_COUNTER)
        assert_true((int64_t)ev.args[1] == gtf_counter_value(&s, t));
      if (ev.type == GTP_EV_TASK_BEGIN) {
        assert_true(ev.args[0] == gtf_task_id(&s, t));
        assert_true(str_eq(gtp_gen_string(&g, ev.args[2]), "handle"));
      }
      if (ev.type == GTP_EV_THREAD_NAME)
        assert_int_equal(gtp_gen_string(&g, ev.args[0]).ptr[7], '0' + t);
      if (ev.type == GTP_EV_LOG) {
        assert_true(ev.msg_len > 10);
        assert_memory_equal(ev.msg, "GET /cart", 9);
      }
      if (ev.type == GTP_EV_LOST)
        assert_true(ev.args[0] == 3 + t);
      if (gtp_event_info_get(ev.type)->stack_arg)
        assert_non_null(gtp_gen_stack(
            &g, ev.args[gtp_event_info_get(ev.type)->stack_arg - 1]));
      k++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(k, sizeof(want));
  }
  assert_int_equal(nb, s.threads);
  for (unsigned t = 0; t < s.threads; t++)
    assert_int_equal(seen[t], 1);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__arbitrary_generation_numbers(void **state) {
  (void)state;
  const uint64_t gens[] = {0,         1, 127, 128, 1ull << 40, UINT64_MAX - 1,
                           UINT64_MAX};
  for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
    gtf_spec s;
    gtf_spec_init(&s, (unsigned)i, gens[i]);
    s.threads = 1 + (unsigned)i % 4;
    s.stacks = (int)(i % 2);
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(gtf_generation(&b, &s), 0);
    gtp_gen g;
    assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
    check_fixture_gen(&g, &s);
    gtp_gen_fini(&g);
    gtp_wbuf_fini(&b);
  }
}

/* Rewrites the GEN_END of a one-generation buffer with e. */
static void replace_gen_end(gtp_wbuf *b, const gtp_gen *g,
                            const gtp_gen_end *e) {
  b->len = (size_t)(g->body - b->data) + g->body_len;
  assert_int_equal(gtp_put_gen_end(b, e), 0);
}

static void test_gen_parse__manifest_mismatch_is_manifest(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 3);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g, g2;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  gtp_gen_end good = g.end;
  gtp_gen_end bad;
  uint64_t *fields[] = {&bad.records, &bad.batches, &bad.bytes, &bad.events};
  for (size_t i = 0; i < 4; i++) {
    bad = good;
    *fields[i] += 1;
    replace_gen_end(&b, &g, &bad);
    assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), GTP_E_MANIFEST);
    assert_null(g2.strings);
  }
  bad = good;
  bad.crc ^= 1;
  replace_gen_end(&b, &g, &bad);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), GTP_E_CRC);
  /* Ledger fields are not part of the manifest. */
  bad = good;
  bad.dropped = 12345;
  replace_gen_end(&b, &g, &bad);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), 0);
  assert_true(g2.end.dropped == 12345);
  gtp_gen_fini(&g2);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__any_body_byte_changed_is_crc(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 3);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g, g2;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  size_t first = (size_t)(g.body - b.data);
  for (size_t i = first; i < first + g.body_len; i++) {
    b.data[i] ^= 0x10;
    int rc = gtp_gen_parse(b.data, b.len, &g2, NULL);
    /* A changed record length shifts the framing before the CRC is
     * reached; every other change is caught by the CRC. */
    assert_true(rc < 0);
    if (rc != GTP_E_CRC)
      assert_true(rc == GTP_E_TRUNC || rc == GTP_E_TOOBIG ||
                  rc == GTP_E_CORRUPT || rc == GTP_E_VARINT);
    b.data[i] ^= 0x10;
  }
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__generation_mismatches_are_gen(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  uint8_t ev[4];
  size_t n = 0;
  ev[n++] = GTP_EV_INSTANT;
  ev[n++] = 1;
  ev[n++] = 1;
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_batch(&body, 11, 1, 0, 1, ev, n), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_GEN);
  gtp_wbuf_fini(&out);
  gtp_wbuf_reset(&body);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 1, ev, n), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  wrap_body(&out, &s, body.data, body.len, 9);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_GEN);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void test_gen_parse__clock_missing_or_twice_is_corrupt(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  wrap_body(&out, &s, body.data, 0, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  put_clock_simple(&body);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_true(g.clock.end_mono_ns == 1400);
  assert_int_equal(g.nstrings + g.nstacks + g.nmodules, 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  put_clock_simple(&body);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void
test_gen_parse__duplicate_ids_across_records_are_corrupt(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  const uint64_t a[] = {1, 2}, c[] = {3, 2};
  const gtp_str sa[] = {{"a", 1}, {"b", 1}};
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_strings(&body, a, sa, 2), 0);
  assert_int_equal(gtp_put_strings(&body, c, sa, 1), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  /* Two STRINGS records with distinct ids merge into one table. */
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_int_equal(g.nstrings, 3);
  assert_true(str_eq(gtp_gen_string(&g, 3), "a"));
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  assert_int_equal(gtp_put_strings(&body, c, sa, 2), 0); /* 3 and 2 again */
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);

  gtp_wbuf_reset(&body);
  put_clock_simple(&body);
  const uint64_t pc = 1, *pcs[] = {&pc, &pc};
  const size_t d[] = {1, 1};
  const uint64_t sid[] = {4, 4};
  assert_int_equal(gtp_put_stacks(&body, sid, pcs, d, 2), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void
test_gen_parse__unknown_record_and_event_types_are_tolerated(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  /* A record type from a newer minor. */
  const uint8_t future[] = {42, 3, 'x', 'y', 'z'};
  gtp_wbuf_put(&body, future, sizeof(future));
  /* A batch whose second event has a type from a newer minor. */
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, 100, 1, 7, 7, 7};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_true(g.end.records == 3);
  size_t cur = 0;
  gtp_batch bt;
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &bt), 1);
  gtp_event_iter it;
  gtp_event e;
  gtp_event_iter_init(&it, &bt);
  assert_int_equal(gtp_event_next(&it, &e), 1);
  assert_int_equal(gtp_event_next(&it, &e), GTP_E_UNKNOWN);
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &bt), 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void test_gen_parse__bad_event_stream_in_a_batch_fails(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  /* Count 2 but the bytes hold one event and a half. */
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, GTP_EV_COUNTER, 1};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_TRUNC);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

/* gtp_gen_parse validates batches with its own fast walk; it must accept
 * exactly the batches gtp_event_next decodes (an unknown type aside). Random
 * short event streams, mostly well-formed, decide it. */
static void test_gen_parse__batch_check_agrees_with_event_next(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  rng_state = 0x853c49e6748fea9bull;
  int accepted = 0, refused = 0;
  for (int round = 0; round < 3000; round++) {
    uint8_t ev[64];
    size_t n = 0;
    uint64_t count = 0;
    size_t want = 2 + rng() % 40;
    while (n < want) {
      uint64_t r = rng();
      if (r % 16 == 0) {
        ev[n++] = (uint8_t)(rng() % 256); /* any byte at all */
      } else {
        gtp_event e;
        memset(&e, 0, sizeof(e));
        e.type = (uint8_t)(1 + r % (GTP_EV_COUNT_ - 1));
        e.ticks = rng() % 4 ? rng() % 300 : rng();
        e.args[0] = rng() % 200;
        e.args[1] = rng() % 3 ? rng() % 100 : rng();
        e.args[2] = rng() % 5;
        e.msg = (const uint8_t *)"abcdef";
        e.msg_len = rng() % 7;
        uint8_t tmp[GTP_EVENT_MAX + 8];
        int k = gtp_event_encode(tmp, &e, 0);
        assert_true(k > 0);
        if (n + (size_t)k > sizeof(ev))
          break;
        memcpy(ev + n, tmp, (size_t)k);
        n += (size_t)k;
        count++;
      }
    }
    if (rng() % 4 == 0 && n > 1)
      n -= 1 + rng() % (n - 1); /* cut */
    if (rng() % 4 == 0)
      count += rng() % 3;
    if (count > n / 2)
      count = n / 2;
    int k, rc_iter = events_walk(ev, n, count, &k);
    gtp_wbuf body, out;
    gtp_gen g;
    gtp_wbuf_init(&body, 0);
    put_clock_simple(&body);
    assert_int_equal(gtp_put_batch(&body, 10, 1, 0, count, ev, n), 0);
    wrap_body(&out, &s, body.data, body.len, 10);
    int rc = gtp_gen_parse(out.data, out.len, &g, NULL);
    if (rc_iter == 0 || rc_iter == GTP_E_UNKNOWN) {
      assert_int_equal(rc, 0);
      gtp_gen_fini(&g);
      accepted++;
    } else {
      assert_int_equal(rc, rc_iter);
      refused++;
    }
    gtp_wbuf_fini(&out);
    gtp_wbuf_fini(&body);
  }
  assert_true(accepted > 300 && refused > 300);
}

static void test_gen_parse__structure_errors(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf b;
  gtp_gen g;
  gtp_wbuf_init(&b, 0);
  /* Does not start with GEN_START. */
  put_clock_simple(&b);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_CORRUPT);
  /* GEN_START, then another GEN_START before any GEN_END. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  put_clock_simple(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_CORRUPT);
  /* No GEN_END at all. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  put_clock_simple(&b);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_TRUNC);
  assert_int_equal(gtp_gen_parse(b.data, 0, &g, NULL), GTP_E_TRUNC);
  gtp_wbuf_fini(&b);
}

static void test_manifest__check_tells_crc_from_counts(void **state) {
  (void)state;
  gtp_gen_end a = {1, 2, 3, 4, 5, 6, 7, 8, 9}, b = a;
  assert_int_equal(gtp_manifest_check(&a, &b), 0);
  b.crc = 6;
  assert_int_equal(gtp_manifest_check(&a, &b), GTP_E_CRC);
  b.events = 7;
  assert_int_equal(gtp_manifest_check(&a, &b), GTP_E_MANIFEST);
  b = a;
  b.gen = 99; /* gen and ledger are not manifest fields */
  b.dropped = 99;
  assert_int_equal(gtp_manifest_check(&a, &b), 0);
}

static void
test_manifest__compute_refuses_framing_records_in_a_body(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 1);
  gtp_wbuf b;
  gtp_gen_end e;
  gtp_wbuf_init(&b, 0);
  put_clock_simple(&b);
  assert_int_equal(gtp_manifest_compute(b.data, b.len, &e), 0);
  assert_true(e.records == 1 && e.batches == 0 && e.bytes == b.len);
  assert_int_equal(gtp_manifest_compute(b.data, 0, &e), 0);
  assert_true(e.records == 0 && e.crc == 0);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  assert_int_equal(gtp_manifest_compute(b.data, b.len, &e), GTP_E_CORRUPT);
  gtp_wbuf_fini(&b);
}

static void test_manifest__wire_body_matches_stored_generation(void **state) {
  (void)state;
  /* The agent's view: body records + GEN_END payload. The daemon prepends a
   * GEN_START and appends the GEN_END record; the result must parse. */
  gtf_spec s;
  gtf_spec_init(&s, 5, 77);
  gtp_wbuf body, end, stored;
  gtp_gen_end e, e2;
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_init(&end, 0);
  gtp_wbuf_init(&stored, 0);
  assert_int_equal(gtf_body(&body, &s, &e), 0);
  assert_int_equal(gtp_gen_end_encode(&end, &e), 0);
  assert_int_equal(gtp_gen_end_decode(end.data, end.len, &e2), 0);
  assert_int_equal(gtf_gen_start(&stored, &s), 0);
  gtp_wbuf_put(&stored, body.data, body.len);
  assert_int_equal(gtp_put_gen_end(&stored, &e2), 0);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(stored.data, stored.len, &g, NULL), 0);
  check_fixture_gen(&g, &s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&end);
  gtp_wbuf_fini(&stored);
}

/* ------------------------------------------------------------ files */

/* Reads a whole file; returns the count of generations or the error; the
 * generation numbers and session numbers go to gens/sess if given. */
static int read_all(const uint8_t *p, size_t n, uint64_t *gens,
                    uint8_t (*sess)[16], size_t max, size_t *err_off) {
  gtp_file_reader r;
  gtp_gen g;
  int rc = gtp_file_reader_init(&r, p, n), count = 0;
  if (rc < 0)
    return rc;
  while ((rc = gtp_file_reader_next(&r, &g)) == 1) {
    if ((size_t)count < max) {
      if (gens)
        gens[count] = g.start.gen;
      if (sess)
        memcpy(sess[count], g.start.session, 16);
    }
    /* Touch everything a consumer would. */
    size_t cur = 0;
    gtp_batch bt;
    while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
      gtp_event_iter it;
      gtp_event ev;
      gtp_event_iter_init(&it, &bt);
      while (gtp_event_next(&it, &ev) == 1) {
        (void)gtp_gen_wall_ns(&g, ev.ticks);
        (void)gtp_gen_string(&g, ev.args[0]);
      }
    }
    gtp_gen_fini(&g);
    count++;
  }
  if (err_off)
    *err_off = r.offset;
  return rc < 0 ? rc : count;
}

static void
test_file_reader__several_sessions_read_back_in_order(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 3, 4, 1000), 0);
  uint64_t gens[12];
  uint8_t sess[12][16];
  assert_int_equal(read_all(b.data, b.len, gens, sess, 12, NULL), 12);
  for (unsigned i = 0; i < 12; i++) {
    uint8_t want[16];
    gtf_session(want, i % 3);
    assert_true(gens[i] == 1000 + i / 3);
    assert_memory_equal(sess[i], want, 16);
  }
  /* Header alone is a valid empty file. */
  assert_int_equal(read_all(b.data, GTP_FILE_HEADER_SIZE, NULL, NULL, 0, NULL),
                   0);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__skips_unknown_records_and_a_second_header(void **state) {
  (void)state;
  gtp_wbuf a, b;
  gtp_wbuf_init(&b, 0);
  one_gen_file(&a, 0, 5);
  gtp_wbuf_put(&b, a.data, a.len);
  const uint8_t future[] = {200, 2, 0xaa, 0xbb};
  gtp_wbuf_put(&b, future, sizeof(future));
  gtp_wbuf_fini(&a);
  one_gen_file(&a, 1, 6); /* as `cat a b` makes it: with its own header */
  gtp_wbuf_put(&b, a.data, a.len);
  gtp_wbuf_put(&b, future, sizeof(future));
  uint64_t gens[4];
  assert_int_equal(read_all(b.data, b.len, gens, NULL, 4, NULL), 2);
  assert_true(gens[0] == 5 && gens[1] == 6);
  /* A second header of another major is an error. */
  size_t second = a.len + sizeof(future);
  b.data[second + 8] = 9;
  assert_int_equal(read_all(b.data, b.len, NULL, NULL, 0, NULL), GTP_E_VERSION);
  gtp_wbuf_fini(&a);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__error_offset_is_the_failing_generation_start(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 1, 3, 0), 0);
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  size_t second = r.offset;
  gtp_gen_fini(&g);
  b.data[b.len - 3] ^= 0xff; /* inside the last GEN_END */
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  gtp_gen_fini(&g);
  size_t third = r.offset;
  assert_true(third > second);
  assert_true(gtp_file_reader_next(&r, &g) < 0);
  assert_int_equal(r.offset, third);
  assert_null(g.strings);
  /* A stray body record at top level. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_file_header(&b), 0);
  put_clock_simple(&b);
  size_t off;
  assert_int_equal(read_all(b.data, b.len, NULL, NULL, 0, &off), GTP_E_CORRUPT);
  assert_int_equal(off, GTP_FILE_HEADER_SIZE);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__every_truncation_point_errors_or_is_a_prefix(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 2, 2, 30), 0);
  /* Boundaries where a shorter file is still whole. */
  size_t bounds[8], nb = 0;
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  bounds[nb++] = r.offset;
  while (gtp_file_reader_next(&r, &g) == 1) {
    gtp_gen_fini(&g);
    bounds[nb++] = r.offset;
  }
  assert_int_equal(nb, 5);
  assert_int_equal(bounds[nb - 1], b.len);
  for (size_t cut = 0; cut < b.len; cut++) {
    /* A fresh allocation of exactly cut bytes so ASan sees any overread. */
    uint8_t *p = malloc(cut ? cut : 1);
    memcpy(p, b.data, cut);
    int rc = read_all(p, cut, NULL, NULL, 0, NULL);
    int whole = -1;
    for (size_t i = 0; i < nb; i++)
      if (bounds[i] == cut)
        whole = (int)i;
    if (whole >= 0)
      assert_int_equal(rc, whole);
    else
      assert_true(rc < 0);
    free(p);
  }
  gtp_wbuf_fini(&b);
}

static void test_file_reader__random_bit_flips_never_crash(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 2, 2, 500), 0);
  /* Which bytes are body bytes: a flip there must be an error. */
  uint8_t *is_body = calloc(b.len, 1);
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  while (gtp_file_reader_next(&r, &g) == 1) {
    memset(is_body + (g.body - b.data), 1, g.body_len);
    gtp_gen_fini(&g);
  }
  uint8_t *p = malloc(b.len);
  rng_state = 0x2545F4914F6CDD1Dull;
  int errors = 0, oks = 0;
  for (int round = 0; round < 4000; round++) {
    memcpy(p, b.data, b.len);
    int nflips = 1 + (int)(rng() % 3), body_hit = 0;
    for (int k = 0; k < nflips; k++) {
      size_t at = (size_t)(rng() % b.len);
      p[at] ^= (uint8_t)(1u << (rng() % 8));
      body_hit |= is_body[at];
    }
    int rc = read_all(p, b.len, NULL, NULL, 0, NULL);
    if (rc < 0)
      errors++;
    else
      oks++;
    /* CRC-32C catches every 1..3-bit error in these lengths. */
    if (body_hit && memcmp(p, b.data, b.len) != 0)
      assert_true(rc < 0);
  }
  /* Both outcomes happen: flips in identity strings still decode. */
  assert_true(errors > 2000);
  assert_true(oks > 0);
  free(p);
  free(is_body);
  gtp_wbuf_fini(&b);
}

/* ------------------------------------------------------------ clock */

static gtp_gen clock_gen(gtp_clock c) {
  gtp_gen g;
  memset(&g, 0, sizeof(g));
  g.clock = c;
  return g;
}

static void test_wall_ns__within_1us_over_a_1s_generation(void **state) {
  (void)state;
  /* A 2.9 GHz TSC shifted right by 5 (about 11 ns per tick), a monotonic
   * clock that started 3 days ago and a wall clock in 2026; the real tick
   * rate is known, so each event's true time is too. */
  const long double hz = 2.9e9L / 32;
  const uint64_t mono0 = 259200000000000ull, real0 = 1767225600000000000ull;
  const uint64_t tick0 = 987654321012ull;
  gtp_clock c;
  c.start_ticks = tick0;
  c.start_mono_ns = mono0;
  c.start_real_ns = real0;
  c.end_mono_ns = mono0 + 1000000000ull;
  c.end_ticks = tick0 + (uint64_t)(1e9L * hz / 1e9L);
  c.end_real_ns = real0 + 1000000000ull;
  gtp_gen g = clock_gen(c);
  for (uint64_t ns = 0; ns <= 1000000000ull; ns += 7919 * 1009) {
    uint64_t ticks = tick0 + (uint64_t)((long double)ns * hz / 1e9L);
    int64_t got = gtp_gen_wall_ns(&g, ticks);
    int64_t err = got - (int64_t)(real0 + ns);
    assert_true(err > -1000 && err < 1000);
  }
  /* Exact at both ends. */
  assert_true(gtp_gen_wall_ns(&g, c.start_ticks) == (int64_t)real0);
  assert_true(gtp_gen_wall_ns(&g, c.end_ticks) ==
              (int64_t)(real0 + 1000000000ull));
}

static void test_wall_ns__equal_ticks_and_times_before_start(void **state) {
  (void)state;
  gtp_clock c = {1000, 0, 5000000, 1000, 0, 5000000};
  gtp_gen g = clock_gen(c);
  /* No span: 1 ns per tick. */
  assert_true(gtp_gen_wall_ns(&g, 1000) == 5000000);
  assert_true(gtp_gen_wall_ns(&g, 1500) == 5000500);
  assert_true(gtp_gen_wall_ns(&g, 0) == 4999000);
  /* 4 ns per tick, ticks before the start extrapolate backwards. */
  gtp_clock c2 = {1000, 100, 8000, 2000, 4100, 12000};
  g = clock_gen(c2);
  assert_true(gtp_gen_wall_ns(&g, 900) == 7600);
  assert_true(gtp_gen_wall_ns(&g, 0) == 4000);
  assert_true(gtp_gen_wall_ns(&g, 2500) == 14000);
  /* Huge values saturate instead of wrapping. */
  gtp_clock c3 = {0, 0, (uint64_t)INT64_MAX - 10, 1, 1000, 0};
  g = clock_gen(c3);
  assert_true(gtp_gen_wall_ns(&g, UINT64_MAX) == INT64_MAX);
  gtp_clock c4 = {UINT64_MAX - 1, 0, 0, UINT64_MAX, 1000, 0};
  g = clock_gen(c4);
  assert_true(gtp_gen_wall_ns(&g, 0) == INT64_MIN);
}

/* ---------------------------------------------------------- session */

static void test_session__hex_round_trip_and_bad_input(void **state) {
  (void)state;
  uint8_t s[16], back[16];
  char hex[33];
  for (int i = 0; i < 16; i++)
    s[i] = (uint8_t)(i * 17 + 9);
  gtp_session_hex(s, hex);
  assert_int_equal(strlen(hex), 32);
  assert_string_equal(hex, "091a2b3c4d5e6f8091a2b3c4d5e6f708");
  assert_int_equal(gtp_session_parse(hex, back), 0);
  assert_memory_equal(s, back, 16);
  assert_int_equal(gtp_session_parse("091A2B3C4D5E6F8091A2B3C4D5E6F708", back),
                   0);
  assert_memory_equal(s, back, 16);
  memset(back, 0x77, 16);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f70", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f7080", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f7g8", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("", back), GTP_E_BADARG);
  assert_int_equal(gtp_session_parse(NULL, back), GTP_E_BADARG);
  assert_int_equal(back[0], 0x77); /* untouched on error */
}

/* The worked example of FORMAT.md section 10, byte for byte: keeps the spec
 * and the writer from drifting apart. */
static void test_spec__format_md_worked_example_is_exact(void **state) {
  (void)state;
  static const uint8_t want[] = {
      0x67, 0x65, 0x6e, 0x74, 0x72, 0x61, 0x63, 0x65, 0x01, 0x00, 0x01, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x01, 0x1d, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
      0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x03,
      0x73, 0x76, 0x63, 0x01, 0x68, 0x07, 0xe8, 0x07, 0x01, 0x31, 0x00, 0x03,
      0x06, 0x01, 0x01, 0x03, 0x72, 0x65, 0x71, 0x02, 0x09, 0x01, 0x09, 0x64,
      0x02, 0x01, 0x05, 0x01, 0x02, 0x03, 0x06, 0x0b, 0x64, 0xe8, 0x07, 0x88,
      0x27, 0xc8, 0x01, 0xf8, 0x0a, 0x98, 0x2a, 0x07, 0x0c, 0x01, 0x03, 0x01,
      0x20, 0x83, 0x5a, 0x91, 0xc4, 0x02, 0x02, 0x00, 0x00};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_file_header(&b), 0);
  gtp_gen_start s;
  memset(&s, 0, sizeof(s));
  for (int i = 0; i < 16; i++)
    s.session[i] = (uint8_t)(0x11 * i);
  s.gen = 1;
  s.service = (gtp_str){"svc", 3};
  s.host = (gtp_str){"h", 1};
  s.pid = 7;
  s.process_start_ns = 1000;
  s.agent_version = (gtp_str){"1", 1};
  assert_int_equal(gtp_put_gen_start(&b, &s), 0);
  size_t body = b.len;
  const uint64_t id = 1;
  const gtp_str req = {"req", 3};
  assert_int_equal(gtp_put_strings(&b, &id, &req, 1), 0);
  uint8_t ev[2 * GTP_EVENT_MAX];
  gtp_event e1 = {GTP_EV_REGION_BEGIN, 105, {1, 0, 0}, NULL, 0};
  gtp_event e2 = {GTP_EV_REGION_END, 108, {0, 0, 0}, NULL, 0};
  int n1 = gtp_event_encode(ev, &e1, 100);
  int n2 = gtp_event_encode(ev + n1, &e2, 105);
  assert_int_equal(gtp_put_batch(&b, 1, 9, 100, 2, ev, (size_t)(n1 + n2)), 0);
  gtp_clock c = {100, 1000, 5000, 200, 1400, 5400};
  assert_int_equal(gtp_put_clock(&b, &c), 0);
  gtp_gen_end e;
  memset(&e, 0, sizeof(e));
  e.gen = 1;
  e.dropped = 2;
  assert_int_equal(gtp_manifest_compute(b.data + body, b.len - body, &e), 0);
  assert_int_equal(e.crc, 0xc4915a83u);
  assert_int_equal(gtp_put_gen_end(&b, &e), 0);
  assert_int_equal(b.len, sizeof(want));
  assert_memory_equal(b.data, want, sizeof(want));
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, want, sizeof(want)), 0);
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  assert_true(gtp_gen_wall_ns(&g, 105) == 5020);
  assert_true(gtp_gen_wall_ns(&g, 108) == 5032);
  gtp_gen_fini(&g);
  assert_int_equal(gtp_file_reader_next(&r, &g), 0);
  gtp_wbuf_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_event_info__every_type_is_described_and_round_trips),
      cmocka_unit_test(test_event_info__unknown_types_are_null),
      cmocka_unit_test(test_event__max_values_round_trip_for_every_type),
      cmocka_unit_test(test_event__negative_counter_round_trips_small),
      cmocka_unit_test(test_event__empty_and_longest_log_messages_round_trip),
      cmocka_unit_test(test_event_encode__log_over_limit_is_toobig),
      cmocka_unit_test(
          test_event_encode__unknown_type_or_time_going_back_fails),
      cmocka_unit_test(
          test_event_next__count_and_bytes_disagreeing_is_manifest),
      cmocka_unit_test(test_event_next__unknown_type_is_unknown),
      cmocka_unit_test(test_event_next__every_truncation_of_an_event_errors),
      cmocka_unit_test(test_event_next__log_length_over_limit_is_toobig),
      cmocka_unit_test(test_event_next__bad_varint_arg_is_varint),
      cmocka_unit_test(test_event_next__ticks_wrapping_past_2_64_is_corrupt),
      cmocka_unit_test(test_file_header__round_trip_and_each_error),
      cmocka_unit_test(test_record_parse__framing_errors),
      cmocka_unit_test(test_gen_start__round_trip_with_every_tag_at_the_limit),
      cmocka_unit_test(
          test_gen_start__over_limit_is_toobig_and_appends_nothing),
      cmocka_unit_test(test_clock__round_trip_and_going_back_is_corrupt),
      cmocka_unit_test(test_gen_end__round_trip_with_max_values),
      cmocka_unit_test(test_batch__round_trip_and_limits),
      cmocka_unit_test(test_tables__strings_stacks_modules_round_trip),
      cmocka_unit_test(test_tables__writers_refuse_over_limit_entries),
      cmocka_unit_test(test_tables__hostile_counts_ids_and_lengths_fail),
      cmocka_unit_test(test_wbuf__limit_is_a_sticky_toobig),
      cmocka_unit_test(test_gen_parse__fixture_generation_is_complete),
      cmocka_unit_test(
          test_gen_parse__every_event_decodes_in_order_with_its_args),
      cmocka_unit_test(test_gen_parse__arbitrary_generation_numbers),
      cmocka_unit_test(test_gen_parse__manifest_mismatch_is_manifest),
      cmocka_unit_test(test_gen_parse__any_body_byte_changed_is_crc),
      cmocka_unit_test(test_gen_parse__generation_mismatches_are_gen),
      cmocka_unit_test(test_gen_parse__clock_missing_or_twice_is_corrupt),
      cmocka_unit_test(
          test_gen_parse__duplicate_ids_across_records_are_corrupt),
      cmocka_unit_test(
          test_gen_parse__unknown_record_and_event_types_are_tolerated),
      cmocka_unit_test(test_gen_parse__bad_event_stream_in_a_batch_fails),
      cmocka_unit_test(test_gen_parse__batch_check_agrees_with_event_next),
      cmocka_unit_test(test_gen_parse__structure_errors),
      cmocka_unit_test(test_manifest__check_tells_crc_from_counts),
      cmocka_unit_test(
          test_manifest__compute_refuses_framing_records_in_a_body),
      cmocka_unit_test(test_manifest__wire_body_matches_stored_generation),
      cmocka_unit_test(test_file_reader__several_sessions_read_back_in_order),
      cmocka_unit_test(
          test_file_reader__skips_unknown_records_and_a_second_header),
      cmocka_unit_test(
          test_file_reader__error_offset_is_the_failing_generation_start),
      cmocka_unit_test(
          test_file_reader__every_truncation_point_errors_or_is_a_prefix),
      cmocka_unit_test(test_file_reader__random_bit_flips_never_crash),
      cmocka_unit_test(test_wall_ns__within_1us_over_a_1s_generation),
      cmocka_unit_test(test_wall_ns__equal_ticks_and_times_before_start),
      cmocka_unit_test(test_session__hex_round_trip_and_bad_input),
      cmocka_unit_test(test_spec__format_md_worked_example_is_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
