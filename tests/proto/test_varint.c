/* test_varint.c: proto/varint.h (uvarint, zigzag, little-endian helpers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "varint.h"

static const uint64_t edge[] = {0,
                                1,
                                0x7f,
                                0x80,
                                0x3fff,
                                0x4000,
                                (1ull << 21) - 1,
                                1ull << 21,
                                (1ull << 35) - 1,
                                1ull << 35,
                                (1ull << 56) - 1,
                                1ull << 56,
                                (1ull << 63) - 1,
                                1ull << 63,
                                UINT64_MAX - 1,
                                UINT64_MAX};

static void test_uvarint__edge_values_round_trip(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
    uint8_t buf[GTP_UVARINT_MAX + 1];
    memset(buf, 0xee, sizeof(buf));
    size_t n = gtp_uvarint_put(buf, edge[i]);
    assert_int_equal(n, gtp_uvarint_len(edge[i]));
    assert_int_equal(buf[n], 0xee); /* wrote nothing past n */
    const uint8_t *p = buf;
    uint64_t v = 0;
    assert_int_equal(gtp_uvarint_get(&p, buf + n, &v), 0);
    assert_ptr_equal(p, buf + n);
    assert_true(v == edge[i]);
  }
}

static void test_uvarint__lengths_match_7_bit_groups(void **state) {
  (void)state;
  assert_int_equal(gtp_uvarint_len(0), 1);
  assert_int_equal(gtp_uvarint_len(0x7f), 1);
  assert_int_equal(gtp_uvarint_len(0x80), 2);
  assert_int_equal(gtp_uvarint_len(1ull << 62), 9);
  assert_int_equal(gtp_uvarint_len(1ull << 63), 10);
  assert_int_equal(gtp_uvarint_len(UINT64_MAX), GTP_UVARINT_MAX);
}

static void test_uvarint__max_is_ten_bytes_ending_in_one(void **state) {
  (void)state;
  uint8_t buf[GTP_UVARINT_MAX];
  assert_int_equal(gtp_uvarint_put(buf, UINT64_MAX), 10);
  for (int i = 0; i < 9; i++)
    assert_int_equal(buf[i], 0xff);
  assert_int_equal(buf[9], 0x01);
}

static void test_uvarint__tenth_byte_above_one_is_overflow(void **state) {
  (void)state;
  uint8_t buf[10];
  memset(buf, 0xff, 9);
  buf[9] = 0x02;
  const uint8_t *p = buf;
  uint64_t v = 42;
  assert_int_equal(gtp_uvarint_get(&p, buf + 10, &v), GTP_E_VARINT);
  assert_ptr_equal(p, buf);
  assert_true(v == 42);
}

static void test_uvarint__eleven_bytes_is_varint_error(void **state) {
  (void)state;
  uint8_t buf[11];
  memset(buf, 0x80, 10);
  buf[10] = 0x00;
  /* 0x80 as the 10th byte is above 1: rejected there, never reads the 11th. */
  const uint8_t *p = buf;
  uint64_t v;
  assert_int_equal(gtp_uvarint_get(&p, buf + 11, &v), GTP_E_VARINT);
  assert_ptr_equal(p, buf);
}

static void test_uvarint__non_minimal_zero_padding_decodes(void **state) {
  (void)state;
  /* Go accepts over-long encodings within 10 bytes; so do we. */
  const uint8_t buf[] = {0x81, 0x80, 0x80, 0x00};
  const uint8_t *p = buf;
  uint64_t v;
  assert_int_equal(gtp_uvarint_get(&p, buf + 4, &v), 0);
  assert_true(v == 1);
}

static void test_uvarint__every_truncation_is_trunc(void **state) {
  (void)state;
  uint8_t buf[GTP_UVARINT_MAX];
  for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
    size_t n = gtp_uvarint_put(buf, edge[i]);
    for (size_t cut = 0; cut < n; cut++) {
      const uint8_t *p = buf;
      uint64_t v;
      assert_int_equal(gtp_uvarint_get(&p, buf + cut, &v), GTP_E_TRUNC);
      assert_ptr_equal(p, buf);
    }
  }
}

static void test_uvarint__reads_stop_at_end_pointer(void **state) {
  (void)state;
  /* A continuation byte right before end: the decoder must not look at the
   * following byte even though memory is there. */
  const uint8_t buf[] = {0x80, 0x01};
  const uint8_t *p = buf;
  uint64_t v;
  assert_int_equal(gtp_uvarint_get(&p, buf + 1, &v), GTP_E_TRUNC);
  assert_int_equal(gtp_uvarint_get(&p, buf + 2, &v), 0);
  assert_true(v == 128);
}

static void test_zigzag__edge_values(void **state) {
  (void)state;
  assert_true(gtp_zigzag(0) == 0);
  assert_true(gtp_zigzag(-1) == 1);
  assert_true(gtp_zigzag(1) == 2);
  assert_true(gtp_zigzag(-2) == 3);
  assert_true(gtp_zigzag(INT64_MAX) == UINT64_MAX - 1);
  assert_true(gtp_zigzag(INT64_MIN) == UINT64_MAX);
  const int64_t vals[] = {0,  1,   -1,        63,        -64,
                          64, -65, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
    assert_true(gtp_unzigzag(gtp_zigzag(vals[i])) == vals[i]);
  /* Small magnitudes stay small on the wire. */
  assert_int_equal(gtp_uvarint_len(gtp_zigzag(-64)), 1);
}

static void test_le__helpers_are_little_endian(void **state) {
  (void)state;
  uint8_t b[4];
  gtp_put_u32le(b, 0x11223344u);
  assert_int_equal(b[0], 0x44);
  assert_int_equal(b[3], 0x11);
  assert_int_equal(gtp_get_u32le(b), 0x11223344u);
  gtp_put_u32le(b, 0xffffffffu);
  assert_int_equal(gtp_get_u32le(b), 0xffffffffu);
  gtp_put_u16le(b, 0xa1b2);
  assert_int_equal(b[0], 0xb2);
  assert_int_equal(b[1], 0xa1);
  assert_int_equal(gtp_get_u16le(b), 0xa1b2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uvarint__edge_values_round_trip),
      cmocka_unit_test(test_uvarint__lengths_match_7_bit_groups),
      cmocka_unit_test(test_uvarint__max_is_ten_bytes_ending_in_one),
      cmocka_unit_test(test_uvarint__tenth_byte_above_one_is_overflow),
      cmocka_unit_test(test_uvarint__eleven_bytes_is_varint_error),
      cmocka_unit_test(test_uvarint__non_minimal_zero_padding_decodes),
      cmocka_unit_test(test_uvarint__every_truncation_is_trunc),
      cmocka_unit_test(test_uvarint__reads_stop_at_end_pointer),
      cmocka_unit_test(test_zigzag__edge_values),
      cmocka_unit_test(test_le__helpers_are_little_endian),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
