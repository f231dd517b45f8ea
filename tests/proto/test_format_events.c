/* test_format_events: proto/format.c, events: encoding, decoding and every
 * malformed event. */
#include "format_test.h"

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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
