/* test_pool.c: the bounded buffer pool. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <sys/mman.h>

#include "check.h"
#include "pool.h"

static void test_pool__exhausts_at_budget_and_recycles(void **state) {
  (void)state;
  gt__pool p;
  assert_int_equal(gt__pool_init(&p, 4 * GT_BUF_SIZE), 0);
  gt__buf *b[5];
  for (int i = 0; i < 4; i++) {
    b[i] = gt__pool_get(&p);
    assert_non_null(b[i]);
    assert_ptr_equal(b[i]->pos, b[i]->data);
    assert_int_equal(b[i]->end - b[i]->data, GT_BUF_DATA);
  }
  assert_null(gt__pool_get(&p)); /* budget reached: never grows */
  assert_int_equal(gt__pool_used(&p), 4);
  b[0]->pos += 100;
  b[0]->nevents = 7;
  gt__pool_put(&p, b[0]);
  b[4] = gt__pool_get(&p);
  assert_ptr_equal(b[4], b[0]);
  assert_int_equal(b[4]->nevents, 0); /* handed out reset */
  assert_ptr_equal(b[4]->pos, b[4]->data);
  assert_int_equal(gt__pool_bytes(&p), 4 * GT_BUF_SIZE);
  for (int i = 1; i < 5; i++)
    gt__pool_put(&p, b[i]);
  assert_int_equal(gt__pool_used(&p), 0);
  gt__pool_fini(&p);
}

static void test_pool__tiny_budget_still_has_two(void **state) {
  (void)state;
  gt__pool p;
  assert_int_equal(gt__pool_init(&p, 1), 0);
  gt__buf *a = gt__pool_get(&p), *b = gt__pool_get(&p);
  assert_non_null(a);
  assert_non_null(b);
  assert_null(gt__pool_get(&p));
  gt__pool_put(&p, a);
  gt__pool_put(&p, b);
  gt__pool_fini(&p);
}

/* Invariant 1 and 2 under contention: threads take and return buffers as
 * fast as they can (refill storms); each writes its own mark into every
 * buffer it holds and checks it is still there before returning it, so a
 * buffer handed to two owners at once (an ABA slip in the lock-free stack)
 * shows as a torn mark. Runs under TSan in CI. */
enum { STRESS_THREADS = 4, STRESS_ROUNDS = 1000000, STRESS_HOLD = 3 };
static pthread_barrier_t stress_start;
typedef struct stress {
  gt__pool *p;
  uint64_t id;
  uint64_t got, empty, torn;
} stress;

static void *stress_main(void *arg) {
  stress *st = arg;
  gt__buf *held[STRESS_HOLD] = {0};
  pthread_barrier_wait(&stress_start); /* all at once: real contention */
  for (unsigned r = 0; r < STRESS_ROUNDS; r++) {
    unsigned k = r % STRESS_HOLD;
    if (held[k] != NULL) {
      uint64_t mark;
      memcpy(&mark, held[k]->data, sizeof mark);
      if (mark != (st->id << 32 | r % 997) || held[k]->tid != st->id)
        st->torn++;
      gt__pool_put(st->p, held[k]);
      held[k] = NULL;
    }
    gt__buf *b = gt__pool_get(st->p);
    if (b == NULL) {
      st->empty++;
      continue;
    }
    st->got++;
    /* Mark it for the round it will be returned in (r + STRESS_HOLD). */
    uint64_t mark = st->id << 32 | (r + STRESS_HOLD) % 997;
    memcpy(b->data, &mark, sizeof mark);
    b->tid = st->id;
    held[k] = b;
  }
  for (unsigned k = 0; k < STRESS_HOLD; k++)
    if (held[k] != NULL)
      gt__pool_put(st->p, held[k]);
  return NULL;
}

static void test_pool__concurrent_refills_never_share_a_buffer(void **state) {
  (void)state;
  gt__pool p;
  /* Fewer buffers than threads * held: the pool runs dry and refills
   * race the returns, which is where a lock-free stack goes wrong. */
  assert_int_equal(gt__pool_init(&p, 8 * GT_BUF_SIZE), 0);
  pthread_t th[STRESS_THREADS];
  stress st[STRESS_THREADS];
  pthread_barrier_init(&stress_start, NULL, STRESS_THREADS);
  for (int i = 0; i < STRESS_THREADS; i++) {
    st[i] = (stress){.p = &p, .id = (uint64_t)i + 1};
    assert_int_equal(pthread_create(&th[i], NULL, stress_main, &st[i]), 0);
  }
  uint64_t got = 0, empty = 0;
  for (int i = 0; i < STRESS_THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(st[i].torn, 0);
    got += st[i].got;
    empty += st[i].empty;
  }
  pthread_barrier_destroy(&stress_start);
  assert_true(got > 0);
  assert_int_equal(gt__pool_used(&p), 0);
  assert_int_equal(gt__pool_bytes(&p), 8 * GT_BUF_SIZE); /* never past max */
  /* Every buffer is back exactly once: all 8 come out, then none. */
  gt__buf *all[9];
  for (int i = 0; i < 8; i++) {
    all[i] = gt__pool_get(&p);
    assert_non_null(all[i]);
    for (int j = 0; j < i; j++)
      assert_ptr_not_equal(all[i], all[j]);
  }
  assert_null(gt__pool_get(&p));
  for (int i = 0; i < 8; i++)
    gt__pool_put(&p, all[i]);
  print_message("pool stress: %llu gets, %llu found the pool dry\n",
                (unsigned long long)got, (unsigned long long)empty);
  gt__pool_fini(&p);
}

/* The pool's bookkeeping holds after use, and a buffer returned twice (a
 * cycle on the free stack) is caught, not walked forever. */
static void test_pool__check_invariants_catches_a_double_put(void **state) {
  (void)state;
  gt__pool p;
  assert_int_equal(gt__pool_init(&p, 4 * GT_BUF_SIZE), 0);
  gt__buf *a = gt__pool_get(&p), *b = gt__pool_get(&p), *c = gt__pool_get(&p);
  gt__pool_put(&p, a);
  gt__pool_put(&p, b);
  assert_int_equal(gt__pool_check_invariants(&p), 0);
  gt__pool_put(&p, b); /* the bug: b twice */
  assert_int_equal(gt__pool_check_invariants(&p), -1);
  (void)c;
  munmap(p.base, p.max * GT_BUF_SIZE); /* not fini: it would assert */
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: stop at a break */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool__exhausts_at_budget_and_recycles),
      cmocka_unit_test(test_pool__tiny_budget_still_has_two),
      cmocka_unit_test(test_pool__concurrent_refills_never_share_a_buffer),
      cmocka_unit_test(test_pool__check_invariants_catches_a_double_put),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
