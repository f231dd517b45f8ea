/* test_pool.c: the bounded buffer pool. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool__exhausts_at_budget_and_recycles),
      cmocka_unit_test(test_pool__tiny_budget_still_has_two),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
