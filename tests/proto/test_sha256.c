/* test_sha256.c: proto/sha256.c against the FIPS 180-4 / NIST example
 * vectors, including both padding cases (one and two final blocks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sha256.h"

static void hex(const uint8_t d[GTP_SHA256_SIZE], char out[65]) {
  for (int i = 0; i < GTP_SHA256_SIZE; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void check(const void *p, size_t n, const char *want) {
  uint8_t d[GTP_SHA256_SIZE];
  char got[65];
  gtp_sha256(p, n, d);
  hex(d, got);
  assert_string_equal(got, want);
}

static void test_sha256__empty_input(void **st) {
  (void)st;
  check(NULL, 0,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256__abc_one_block(void **st) {
  (void)st;
  check("abc", 3,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_sha256__448_bits_pads_into_a_second_block(void **st) {
  (void)st;
  const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  check(m, strlen(m),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256__896_bits(void **st) {
  (void)st;
  const char *m = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                  "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
  check(m, strlen(m),
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_sha256__one_million_a(void **st) {
  (void)st;
  size_t n = 1000000;
  char *m = malloc(n);
  assert_non_null(m);
  memset(m, 'a', n);
  check(m, n,
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(m);
}

static void test_sha256__every_length_near_the_block_edge_differs(void **st) {
  (void)st;
  /* Lengths 50..70 cross the 55/56-byte padding edge; each digest must be
   * distinct (a padding bug tends to collapse neighbours). */
  uint8_t buf[80], d[21][GTP_SHA256_SIZE];
  memset(buf, 0x61, sizeof buf);
  for (int i = 0; i < 21; i++) {
    gtp_sha256(buf, (size_t)(50 + i), d[i]);
    for (int j = 0; j < i; j++)
      assert_memory_not_equal(d[i], d[j], GTP_SHA256_SIZE);
  }
  /* And 55 'a' (one block) / 56 'a' (two blocks) known values. */
  check(buf, 55,
        "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  check(buf, 56,
        "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256__empty_input),
      cmocka_unit_test(test_sha256__abc_one_block),
      cmocka_unit_test(test_sha256__448_bits_pads_into_a_second_block),
      cmocka_unit_test(test_sha256__896_bits),
      cmocka_unit_test(test_sha256__one_million_a),
      cmocka_unit_test(test_sha256__every_length_near_the_block_edge_differs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
