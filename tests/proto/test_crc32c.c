/* test_crc32c.c: proto/crc32c.c, both paths against the bitwise definition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crc32c.h"
#include "../lib/prng.h"

/* The definition: reflected polynomial 0x82F63B78, init and xorout ~0. */
static uint32_t crc_ref(uint32_t crc, const uint8_t *p, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1));
  }
  return ~crc;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
  return (uint32_t)(xorshift64(&rng_state) >> 11);
}

static void test_crc32c__check_value(void **state) {
  (void)state;
  assert_int_equal(gtp_crc32c(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(gtp__crc32c_sw(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(gtp__crc32c_hw(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(gtp_crc32c(0, "", 0), 0);
}

/* RFC 3720 (iSCSI) appendix B.4 vectors. */
static void test_crc32c__rfc3720_vectors(void **state) {
  (void)state;
  uint8_t b[32];
  memset(b, 0, 32);
  assert_int_equal(gtp_crc32c(0, b, 32), 0x8A9136AAu);
  memset(b, 0xff, 32);
  assert_int_equal(gtp_crc32c(0, b, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)i;
  assert_int_equal(gtp_crc32c(0, b, 32), 0x46DD794Eu);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)(31 - i);
  assert_int_equal(gtp_crc32c(0, b, 32), 0x113FDB5Cu);
}

static void
test_crc32c__paths_agree_at_every_alignment_and_length(void **state) {
  (void)state;
  uint8_t buf[600];
  for (size_t i = 0; i < sizeof(buf); i++)
    buf[i] = (uint8_t)rng();
  for (size_t off = 0; off < 16; off++) {
    for (size_t n = 0; n + off <= 300 + 16 && n <= 300; n++) {
      uint32_t want = crc_ref(0, buf + off, n);
      assert_int_equal(gtp__crc32c_sw(0, buf + off, n), want);
      assert_int_equal(gtp__crc32c_hw(0, buf + off, n), want);
      assert_int_equal(gtp_crc32c(0, buf + off, n), want);
    }
  }
}

static void test_crc32c__chaining_at_every_split_equals_one_call(void **state) {
  (void)state;
  uint8_t buf[257];
  for (size_t i = 0; i < sizeof(buf); i++)
    buf[i] = (uint8_t)rng();
  uint32_t whole = crc_ref(0, buf, sizeof(buf));
  for (size_t cut = 0; cut <= sizeof(buf); cut++) {
    uint32_t c = gtp_crc32c(0, buf, cut);
    assert_int_equal(gtp_crc32c(c, buf + cut, sizeof(buf) - cut), whole);
    c = gtp__crc32c_sw(0, buf, cut);
    assert_int_equal(gtp__crc32c_hw(c, buf + cut, sizeof(buf) - cut), whole);
  }
}

static void test_crc32c__large_random_buffers_match_reference(void **state) {
  (void)state;
  size_t n = 1 << 20;
  uint8_t *buf = malloc(n + 8);
  assert_non_null(buf);
  for (size_t i = 0; i < n + 8; i++)
    buf[i] = (uint8_t)rng();
  for (int round = 0; round < 8; round++) {
    size_t off = rng() % 8, len = n - rng() % 4096;
    uint32_t want = crc_ref(0, buf + off, len);
    assert_int_equal(gtp__crc32c_sw(0, buf + off, len), want);
    assert_int_equal(gtp__crc32c_hw(0, buf + off, len), want);
  }
  free(buf);
}

/* The SSE4.2 path sums three 4 KiB blocks at once and joins them with a
 * shift table: every length around the 12 KiB step, and several steps, with
 * a running CRC and odd alignments, must equal the bitwise definition. */
static void test_crc32c__interleaved_blocks_match_reference(void **state) {
  (void)state;
  enum { BLK3 = 3 * 4096 };
  size_t cap = 4 * BLK3 + 64;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  for (size_t i = 0; i < cap; i++)
    buf[i] = (uint8_t)rng();
  const size_t lens[] = {BLK3 - 1,     BLK3,     BLK3 + 1,     BLK3 + 7,
                         2 * BLK3 - 1, 2 * BLK3, 2 * BLK3 + 9, 4 * BLK3};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    for (size_t off = 0; off < 8; off += 3) {
      uint32_t start = (uint32_t)rng();
      uint32_t want = crc_ref(start, buf + off, lens[i]);
      assert_int_equal(gtp__crc32c_hw(start, buf + off, lens[i]), want);
      assert_int_equal(gtp_crc32c(start, buf + off, lens[i]), want);
    }
  }
  free(buf);
}

static void test_crc32c__every_single_bit_flip_changes_the_crc(void **state) {
  (void)state;
  uint8_t buf[64];
  for (size_t i = 0; i < sizeof(buf); i++)
    buf[i] = (uint8_t)rng();
  uint32_t c0 = gtp_crc32c(0, buf, sizeof(buf));
  for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_not_equal(gtp_crc32c(0, buf, sizeof(buf)), c0);
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
}

static void test_crc32c__hw_reported_on_x86_64(void **state) {
  (void)state;
#if defined(__x86_64__)
  /* Every x86-64 CPU this project targets has SSE4.2; if this fails the
   * fast path is silently off. */
  assert_true(gtp__crc32c_have_hw());
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c__check_value),
      cmocka_unit_test(test_crc32c__rfc3720_vectors),
      cmocka_unit_test(test_crc32c__paths_agree_at_every_alignment_and_length),
      cmocka_unit_test(test_crc32c__chaining_at_every_split_equals_one_call),
      cmocka_unit_test(test_crc32c__large_random_buffers_match_reference),
      cmocka_unit_test(test_crc32c__interleaved_blocks_match_reference),
      cmocka_unit_test(test_crc32c__every_single_bit_flip_changes_the_crc),
      cmocka_unit_test(test_crc32c__hw_reported_on_x86_64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
