/* test_gencache.c: the shared readers' bounded generation cache
 * (store/gencache.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gencache.h"

static void
test_gencache__hit_returns_the_bytes_and_miss_nothing(void **state) {
  gencache *c = gencache_new(1 << 20);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gencache_get(c, 5, &b), 0);
  assert_int_equal(b.len, 0);
  gencache_put(c, 5, (const uint8_t *)"hello", 5);
  gencache_put(c, 5, (const uint8_t *)"other", 5); /* first one stays */
  assert_int_equal(gencache_get(c, 5, &b), 1);
  assert_int_equal(b.len, 5);
  assert_memory_equal(b.data, "hello", 5);
  assert_int_equal(gencache_bytes(c), 5);
  gtp_wbuf_fini(&b);
  gencache_free(c);
}

static void
test_gencache__stays_within_its_bound_evicting_least_recent(void **state) {
  uint8_t blob[1000];
  memset(blob, 7, sizeof blob);
  gencache *c = gencache_new(10000); /* entries up to 1250 bytes */
  for (int64_t s = 1; s <= 10; s++)
    gencache_put(c, s, blob, sizeof blob);
  assert_int_equal(gencache_bytes(c), 10000);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gencache_get(c, 1, &b), 1); /* 1 is now most recent */
  gencache_put(c, 11, blob, sizeof blob);      /* evicts 2, the oldest */
  assert_true(gencache_bytes(c) <= 10000);
  assert_int_equal(gencache_get(c, 2, &b), 0);
  assert_int_equal(gencache_get(c, 1, &b), 1);
  assert_int_equal(gencache_get(c, 11, &b), 1);
  /* Too big for one entry (over an eighth): not cached, nothing evicted. */
  uint8_t big[2000] = {0};
  gencache_put(c, 12, big, sizeof big);
  assert_int_equal(gencache_get(c, 12, &b), 0);
  assert_int_equal(gencache_get(c, 3, &b), 1);
  gtp_wbuf_fini(&b);
  gencache_free(c);
}

static void test_gencache__many_seqs_in_one_bucket_chain(void **state) {
  gencache *c = gencache_new(1 << 24);
  uint8_t v[8];
  for (int64_t s = 0; s < 20000; s++) {
    memcpy(v, &s, 8);
    gencache_put(c, s, v, 8);
  }
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  for (int64_t s = 0; s < 20000; s += 997) {
    gtp_wbuf_reset(&b);
    assert_int_equal(gencache_get(c, s, &b), 1);
    int64_t got;
    memcpy(&got, b.data, 8);
    assert_int_equal(got, s);
  }
  gtp_wbuf_fini(&b);
  gencache_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gencache__hit_returns_the_bytes_and_miss_nothing),
      cmocka_unit_test(
          test_gencache__stays_within_its_bound_evicting_least_recent),
      cmocka_unit_test(test_gencache__many_seqs_in_one_bucket_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
