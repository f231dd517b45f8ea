/* test_genpool.c: daemon/genpool.c, the generation buffers of the ingest:
 * reuse, the bounds of the pool against --max-buffer, trimming, and the
 * filler thread. Invariant checks abort the test on failure (debug
 * builds), and each test also calls genpool_check_invariants itself. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "check.h"
#include "genpool.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static genpool_stats stats(genpool *p) {
  genpool_stats s;
  genpool_stats_get(p, &s);
  return s;
}

/* Waits (5 s at most) until the filler has a buffer ready. */
static void wait_prepared(genpool *p, uint64_t n) {
  for (int i = 0; i < 5000 && stats(p).prepared_ready < n; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_true(stats(p).prepared_ready >= n);
}

static void test_genpool__small_buffers_are_malloc_and_never_pooled(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 64 * MIB);
  size_t cap = 0;
  uint8_t *d = genpool_alloc(&p, 0, 4 * KIB, 4 * KIB, &cap);
  assert_non_null(d);
  assert_int_equal(cap, 4 * KIB);
  memset(d, 0xab, cap);
  genpool_release(&p, 0, 1, d, cap);
  assert_int_equal(p.npool, 0);
  assert_int_equal(stats(&p).bytes, 0);
  assert_int_equal(genpool_check_invariants(&p), 0);
  genpool_fini(&p);
}

static void
test_genpool__released_buffer_serves_the_next_fitting_want(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 64 * MIB);
  size_t cap = 0;
  uint8_t *d = genpool_alloc(&p, 0, MIB, MIB, &cap);
  assert_non_null(d);
  assert_true(cap >= MIB);
  memset(d, 1, cap);
  genpool_release(&p, 0, 1, d, cap);
  assert_int_equal(p.npool, 1);
  assert_true(stats(&p).bytes >= cap); /* plus what the filler was asked */
  assert_int_equal(genpool_check_invariants(&p), 0);
  /* A bit smaller fits; far smaller would strand memory and does not. */
  size_t cap2 = 0;
  uint8_t *d2 = genpool_alloc(&p, 0, 900 * KIB, 900 * KIB, &cap2);
  assert_ptr_equal(d2, d);
  assert_int_equal(cap2, cap);
  assert_int_equal(stats(&p).reused, 1);
  assert_int_equal(p.npool, 0);
  genpool_release(&p, 0, 1, d2, cap2);
  size_t cap3 = 0;
  uint8_t *d3 = genpool_alloc(&p, 0, 100 * KIB, 100 * KIB, &cap3);
  assert_ptr_not_equal(d3, d);
  assert_int_equal(stats(&p).reused, 1);
  genpool_release(&p, 0, 0, d3, cap3);
  assert_int_equal(genpool_check_invariants(&p), 0);
  genpool_fini(&p);
}

static void
test_genpool__pool_stays_in_its_slice_and_under_the_budget(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 8 * MIB); /* pool slice: 1 MiB */
  genpool_trim(&p, 8 * MIB); /* drop what the filler may be asked */
  uint8_t *a = malloc(768 * KIB), *b = malloc(768 * KIB);
  uint8_t *c = malloc(128 * KIB), *e = malloc(128 * KIB);
  assert_true(a && b && c && e);
  genpool_release(&p, 0, 1, a, 768 * KIB); /* kept */
  genpool_release(&p, 0, 1, b, 768 * KIB); /* over the slice: freed */
  assert_int_equal(p.npool, 1);
  assert_true(stats(&p).bytes <= MIB);
  /* Bytes held for agents leave no room: not kept. */
  genpool_release(&p, 8 * MIB - 800 * KIB, 1, c, 128 * KIB);
  assert_int_equal(p.npool, 1);
  /* Paused (keep = 0): not kept either, room or not. */
  genpool_release(&p, 0, 0, e, 128 * KIB);
  assert_int_equal(p.npool, 1);
  assert_int_equal(genpool_check_invariants(&p), 0);
  genpool_fini(&p);
  assert_int_equal(p.npool, 0);
  assert_int_equal(stats(&p).bytes, 0);
}

static void test_genpool__trim_frees_until_under_max_buffer(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 64 * MIB); /* pool slice: 8 MiB */
  for (int i = 0; i < 4; i++) {
    uint8_t *d = malloc(MIB);
    assert_non_null(d);
    genpool_release(&p, 0, 1, d, MIB);
  }
  assert_int_equal(p.npool, 4);
  /* The agents now hold all but 2 MiB: two pooled buffers must go. */
  genpool_trim(&p, 62 * MIB);
  assert_int_equal(p.npool, 2);
  assert_true(62 * MIB + stats(&p).bytes <= 64 * MIB);
  genpool_trim(&p, 64 * MIB);
  assert_int_equal(p.npool, 0);
  assert_int_equal(genpool_check_invariants(&p), 0);
  genpool_fini(&p);
}

static void test_genpool__filler_prepares_what_the_next_alloc_takes(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 64 * MIB);
  assert_true(p.filler_running);
  size_t cap1 = 0, cap2 = 0;
  uint8_t *d1 = genpool_alloc(&p, 0, 2 * MIB, 64 * KIB, &cap1);
  assert_non_null(d1);
  assert_int_equal(stats(&p).prepared_used, 0);
  wait_prepared(&p, 1); /* the first alloc asked the filler */
  uint8_t *d2 = genpool_alloc(&p, 0, 2 * MIB, 64 * KIB, &cap2);
  assert_non_null(d2);
  assert_int_equal(stats(&p).prepared_used, 1);
  memset(d2, 7, cap2); /* the whole buffer is ours */
  assert_int_equal(genpool_check_invariants(&p), 0);
  genpool_release(&p, 0, 1, d1, cap1);
  genpool_release(&p, 0, 1, d2, cap2);
  assert_true(stats(&p).bytes <= 8 * MIB);
  genpool_fini(&p); /* frees pooled and prepared buffers (LeakSanitizer) */
  assert_int_equal(stats(&p).bytes, 0);
}

/* The check sees each broken invariant (and so is no check that cannot
 * fail). */
static void test_genpool__check_catches_a_wrong_sum_slot_or_bound(void **st) {
  (void)st;
  genpool p = {0};
  genpool_init(&p, 64 * MIB);
  uint8_t *d = malloc(MIB);
  assert_non_null(d);
  genpool_release(&p, 0, 1, d, MIB);
  assert_int_equal(genpool_check_invariants(&p), 0);
  p.bytes++; /* 1: the sum */
  assert_int_equal(genpool_check_invariants(&p), -1);
  p.bytes--;
  p.pool[0].cap = 4 * KIB; /* 2: a small buffer pooled */
  assert_int_equal(genpool_check_invariants(&p), -2);
  p.pool[0].cap = MIB;
  p.max_buffer = 4 * MIB; /* 3: over the slice (max/8 = 512 KiB) */
  assert_int_equal(genpool_check_invariants(&p), -3);
  p.max_buffer = 64 * MIB;
  genpool_trim(&p, 64 * MIB); /* drops the pooled buffer */
  pthread_mutex_lock(&p.lock);
  genpool_slot saved = p.fill[0];
  p.fill[0] = (genpool_slot){GENPOOL_READY, MIB, NULL}; /* 4: no data */
  pthread_mutex_unlock(&p.lock);
  assert_int_equal(genpool_check_invariants(&p), -4);
  pthread_mutex_lock(&p.lock);
  p.fill[0] = saved;
  pthread_mutex_unlock(&p.lock);
  genpool_fini(&p);
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_genpool__small_buffers_are_malloc_and_never_pooled),
      cmocka_unit_test(
          test_genpool__released_buffer_serves_the_next_fitting_want),
      cmocka_unit_test(
          test_genpool__pool_stays_in_its_slice_and_under_the_budget),
      cmocka_unit_test(test_genpool__trim_frees_until_under_max_buffer),
      cmocka_unit_test(test_genpool__filler_prepares_what_the_next_alloc_takes),
      cmocka_unit_test(test_genpool__check_catches_a_wrong_sum_slot_or_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
