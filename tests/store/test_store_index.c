/* test_store_index.c: store/store_index.c, the store's in-memory session
 * index: resume hints, key bindings (first wins), rejected counts waiting
 * for a row, and the bound and expiry of sessions that stored nothing. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "store_index.h"

static void sid(uint8_t out[16], unsigned n) {
  memset(out, 0, 16);
  memcpy(out, &n, sizeof n);
  out[15] = 0x77;
}

static void test_store_index__last_gen_moves_forward_only(void **st) {
  (void)st;
  store_index *x = store_index_new();
  assert_non_null(x);
  uint8_t s[16];
  uint64_t g = 0;
  sid(s, 1);
  assert_int_equal(store_index_last_gen(x, s, &g), 0);
  store_index_note_gen(x, s, 7);
  store_index_note_gen(x, s, 5);
  assert_int_equal(store_index_last_gen(x, s, &g), 1);
  assert_int_equal(g, 7);
  /* Many sessions: the table grows and every one stays findable. */
  for (unsigned i = 100; i < 5100; i++) {
    sid(s, i);
    store_index_note_gen(x, s, i);
  }
  for (unsigned i = 100; i < 5100; i++) {
    sid(s, i);
    assert_int_equal(store_index_last_gen(x, s, &g), 1);
    assert_int_equal(g, i);
  }
  store_index_free(x);
}

static void test_store_index__first_key_binding_wins(void **st) {
  (void)st;
  store_index *x = store_index_new();
  uint8_t s[16], h1[STORE_KEY_HASH_SIZE], h2[STORE_KEY_HASH_SIZE],
      got[STORE_KEY_HASH_SIZE];
  sid(s, 2);
  memset(h1, 0x11, sizeof h1);
  memset(h2, 0x22, sizeof h2);
  assert_int_equal(store_index_key(x, s, got), 0);
  store_index_bind_key(x, s, h1);
  store_index_bind_key(x, s, h2);
  assert_int_equal(store_index_key(x, s, got), 1);
  assert_memory_equal(got, h1, sizeof h1);
  store_index_free(x);
}

static void test_store_index__rejected_waits_for_a_row(void **st) {
  (void)st;
  store_index *x = store_index_new();
  uint8_t a[16], b[16];
  sid(a, 3);
  sid(b, 4);
  store_index_note_gen(x, a, 1);
  store_index_note_rejected(x, a, 10);
  store_index_note_rejected(x, a, 5);
  store_index_note_rejected(x, b, 99); /* no row: not in the snapshot */
  size_t n = 0;
  store_index_rej *l = store_index_rejected(x, &n);
  assert_non_null(l);
  assert_int_equal(n, 1);
  assert_memory_equal(l[0].session, a, 16);
  assert_int_equal(l[0].gens, 2);
  assert_int_equal(l[0].events, 15);
  l[0].applied = 1;
  store_index_rejected_done(x, l, n);
  free(l);
  assert_null(store_index_rejected(x, &n));
  /* b's row appears: its counts become writable. */
  store_index_note_gen(x, b, 1);
  l = store_index_rejected(x, &n);
  assert_int_equal(n, 1);
  assert_memory_equal(l[0].session, b, 16);
  assert_int_equal(l[0].events, 99);
  free(l);
  store_stats ss;
  memset(&ss, 0, sizeof ss);
  store_index_stats(x, &ss);
  assert_int_equal(ss.norow_sessions, 0);
  store_index_free(x);
}

static void test_store_index__unstored_sessions_are_bounded_and_expire(
    void **st) {
  (void)st;
  setenv("GENTRACE_TEST_NOROW_MAX", "100", 1);
  setenv("GENTRACE_TEST_NOROW_TTL_MS", "200", 1);
  store_index *x = store_index_new();
  unsetenv("GENTRACE_TEST_NOROW_MAX");
  unsetenv("GENTRACE_TEST_NOROW_TTL_MS");
  uint8_t s[16];
  for (unsigned i = 0; i < 1000; i++) {
    sid(s, 1000 + i);
    store_index_note_rejected(x, s, 1);
  }
  /* One with a row is never "unstored" and never expires. */
  uint8_t keep[16];
  sid(keep, 5);
  store_index_note_gen(x, keep, 1);
  store_stats ss;
  memset(&ss, 0, sizeof ss);
  store_index_stats(x, &ss);
  assert_int_equal(ss.norow_sessions, 100);
  assert_int_equal(ss.norow_untracked, 900);
  assert_int_equal(ss.index_sessions, 101);
  /* A bound session (key, no row yet) is not unstored either. */
  sid(s, 1000);
  uint8_t h[STORE_KEY_HASH_SIZE];
  memset(h, 1, sizeof h);
  store_index_bind_key(x, s, h);
  store_index_stats(x, &ss);
  assert_int_equal(ss.norow_sessions, 99);
  usleep(300 * 1000);
  store_index_expire(x);
  store_index_stats(x, &ss);
  assert_int_equal(ss.norow_sessions, 0);
  assert_int_equal(ss.index_sessions, 2);
  uint64_t g;
  assert_int_equal(store_index_last_gen(x, keep, &g), 1);
  assert_int_equal(store_index_key(x, s, h), 1);
  /* Room again for new ones. */
  sid(s, 9999);
  store_index_note_rejected(x, s, 1);
  store_index_stats(x, &ss);
  assert_int_equal(ss.norow_sessions, 1);
  store_index_free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_index__last_gen_moves_forward_only),
      cmocka_unit_test(test_store_index__first_key_binding_wins),
      cmocka_unit_test(test_store_index__rejected_waits_for_a_row),
      cmocka_unit_test(
          test_store_index__unstored_sessions_are_bounded_and_expire),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
