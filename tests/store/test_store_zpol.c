/* test_store_zpol.c: store/store_zpol.c, a compressor's choice of zstd's
 * shortest match per session, with the real zstd: what it chooses for
 * event bytes that repeat in 6-byte runs and for bytes that do not, that
 * every frame decompresses to its input whatever the choice, and how
 * often it measures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "store_zpol.h"
#include "varint.h"
#include "../lib/prng.h"

enum { LEN = 1u << 20 };

/* B1's events as the agent writes them: COUNTER (4), a tick delta of 0
 * or 1, name id 1, the zigzag of a value counting up from v (2^21: 7-byte
 * events; 2^14: 6-byte ones). */
static size_t b1_bytes_from(uint8_t *p, size_t cap, uint64_t v) {
  uint64_t seed = 7;
  size_t n = 0;
  while (n + 16 <= cap) {
    p[n++] = 4;
    p[n++] = (uint8_t)(xorshift64(&seed) % 10 < 6 ? 0 : 1);
    p[n++] = 1;
    n += gtp_uvarint_put(p + n, gtp_zigzag((int64_t)v++));
  }
  return n;
}

static size_t b1_bytes(uint8_t *p, size_t cap) {
  return b1_bytes_from(p, cap, 1u << 21);
}

/* Bytes whose repeats are no longer in 6-byte runs than in 7: random. */
static size_t random_bytes(uint8_t *p, size_t cap) {
  uint64_t seed = 11;
  for (size_t i = 0; i < cap; i++)
    p[i] = (uint8_t)xorshift64(&seed);
  return cap;
}

/* Compresses src for session s, checks the frame decompresses to src, and
 * returns its size. */
static size_t roundtrip(store_zpol *z, uint8_t s, const uint8_t *src,
                        size_t len) {
  uint8_t session[16] = {s, 1, 2, 3};
  size_t cap = ZSTD_compressBound(len);
  uint8_t *dst = malloc(cap), *back = malloc(len + 1);
  assert_non_null(dst);
  assert_non_null(back);
  size_t n = store_zpol_compress(z, session, src, len, dst, cap);
  assert_false(ZSTD_isError(n));
  assert_int_equal(ZSTD_decompress(back, len + 1, dst, n), len);
  assert_memory_equal(back, src, len);
  free(dst);
  free(back);
  return n;
}

/* Counter events that repeat in runs of their length less one get that
 * shortest match, and store at under half of what zstd's own 7 would
 * (B1: 0.20 against 0.48-0.53). */
static void check_counters(uint64_t from, int want) {
  uint8_t *src = malloc(LEN);
  assert_non_null(src);
  size_t len = b1_bytes_from(src, LEN, from);
  store_zpol *z = store_zpol_new(1);
  assert_non_null(z);
  size_t n = roundtrip(z, 1, src, len);
  assert_int_equal(store_zpol_last_mml(z), want);
  /* zstd's own choice for the same bytes, for the comparison */
  ZSTD_CCtx *c = ZSTD_createCCtx();
  size_t cap = ZSTD_compressBound(len);
  uint8_t *dst = malloc(cap);
  size_t own = ZSTD_compressCCtx(c, dst, cap, src, len, 1);
  assert_false(ZSTD_isError(own));
  assert_true(n * 2 < own);
  ZSTD_freeCCtx(c);
  free(dst);
  store_zpol_free(z);
  free(src);
}

static void test_zpol__seven_byte_counter_events_take_six(void **state) {
  (void)state;
  check_counters(1u << 21, 6);
}

static void test_zpol__six_byte_counter_events_take_five(void **state) {
  (void)state;
  check_counters(1u << 14, 5);
}

/* Bytes that 5 and 6 do not shrink more keep 7 (they would cost CPU). */
static void test_zpol__bytes_without_short_repeats_keep_seven(void **state) {
  (void)state;
  uint8_t *src = malloc(LEN);
  assert_non_null(src);
  size_t len = random_bytes(src, LEN);
  store_zpol *z = store_zpol_new(1);
  assert_non_null(z);
  roundtrip(z, 2, src, len);
  assert_int_equal(store_zpol_last_mml(z), 7);
  store_zpol_free(z);
  free(src);
}

/* A choice holds for STORE_ZPOL_HOLD generations of its session, then is
 * measured again; another session is measured on its own; a payload under
 * STORE_ZPOL_MIN is never measured and gets zstd's own choice. */
static void test_zpol__measures_once_per_hold(void **state) {
  (void)state;
  uint8_t *src = malloc(LEN);
  assert_non_null(src);
  size_t len = b1_bytes(src, STORE_ZPOL_MIN + 64); /* just over the minimum */
  assert_true(len >= STORE_ZPOL_MIN);
  store_zpol *z = store_zpol_new(1);
  assert_non_null(z);
  for (int i = 0; i < STORE_ZPOL_HOLD; i++)
    roundtrip(z, 3, src, len);
  assert_int_equal(store_zpol_probes(z), 1);
  roundtrip(z, 3, src, len);
  assert_int_equal(store_zpol_probes(z), 2);
  roundtrip(z, 4, src, len);
  assert_int_equal(store_zpol_probes(z), 3);
  roundtrip(z, 5, src, STORE_ZPOL_MIN - 1);
  assert_int_equal(store_zpol_last_mml(z), 0);
  assert_int_equal(store_zpol_probes(z), 3);
  store_zpol_free(z);
  free(src);
}

/* A frame at a fast negative level (what a compressor makes while behind)
 * and the same bytes at zstd's own level -5 are one and the same frame, it
 * decompresses to its input, and the next ordinary frame is exactly the one
 * a context that never made a fast frame makes (invariant 4). */
static void test_zpol__fast_frame_leaves_the_store_level(void **state) {
  (void)state;
  uint8_t *src = malloc(LEN);
  assert_non_null(src);
  size_t len = b1_bytes(src, LEN);
  size_t cap = ZSTD_compressBound(len);
  uint8_t *a = malloc(cap), *b = malloc(cap), *back = malloc(len);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(back);
  store_zpol *z = store_zpol_new(1), *fresh = store_zpol_new(1);
  assert_non_null(z);
  assert_non_null(fresh);
  uint8_t session[16] = {6};
  size_t nf = store_zpol_compress_at(z, -5, src, len, a, cap);
  assert_false(ZSTD_isError(nf));
  assert_int_equal(ZSTD_decompress(back, len, a, nf), len);
  assert_memory_equal(back, src, len);
  size_t n5 = ZSTD_compress(b, cap, src, len, -5);
  assert_int_equal(nf, n5);
  assert_memory_equal(a, b, nf);
  assert_int_equal(store_zpol_probes(z), 0); /* no measurement */
  size_t n = store_zpol_compress(z, session, src, len, a, cap);
  size_t m = store_zpol_compress(fresh, session, src, len, b, cap);
  assert_false(ZSTD_isError(n));
  assert_int_equal(n, m);
  assert_memory_equal(a, b, n);
  assert_true(n < nf); /* level 1 with its chosen match: smaller */
  store_zpol_free(z);
  store_zpol_free(fresh);
  free(src);
  free(a);
  free(b);
  free(back);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zpol__seven_byte_counter_events_take_six),
      cmocka_unit_test(test_zpol__six_byte_counter_events_take_five),
      cmocka_unit_test(test_zpol__bytes_without_short_repeats_keep_seven),
      cmocka_unit_test(test_zpol__measures_once_per_hold),
      cmocka_unit_test(test_zpol__fast_frame_leaves_the_store_level),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
