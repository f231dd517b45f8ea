/* test_store_pin.c: the retention pins (store/store_pin.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "check.h"
#include "gtp_error.h"
#include "store_pin.h"

static void test_store_pins__empty_min_is_int64_max(void **state) {
  store_pins *p = store_pins_new();
  assert_non_null(p);
  assert_true(store_pins_min(p) == INT64_MAX);
  store_pins_free(p);
}

static void test_store_pins__min_follows_add_move_remove(void **state) {
  store_pins *p = store_pins_new();
  int a = store_pins_add(p, 50);
  int b = store_pins_add(p, 20);
  int c = store_pins_add(p, 70);
  assert_true(a >= 0 && b >= 0 && c >= 0);
  assert_true(a != b && b != c && a != c);
  assert_int_equal(store_pins_min(p), 20);
  store_pins_move(p, b, 60); /* the download moved past its first gens */
  assert_int_equal(store_pins_min(p), 50);
  store_pins_remove(p, a);
  assert_int_equal(store_pins_min(p), 60);
  store_pins_remove(p, b);
  store_pins_remove(p, c);
  assert_true(store_pins_min(p) == INT64_MAX);
  /* A removed handle is inert: moving it pins nothing. */
  store_pins_move(p, a, 1);
  assert_true(store_pins_min(p) == INT64_MAX);
  store_pins_free(p);
}

static void test_store_pins__full_set_is_limit_then_reusable(void **state) {
  store_pins *p = store_pins_new();
  int h[1024];
  for (int i = 0; i < 1024; i++) {
    h[i] = store_pins_add(p, 1000 + i);
    assert_true(h[i] >= 0);
  }
  assert_int_equal(store_pins_add(p, 1), GTP_E_LIMIT);
  assert_int_equal(store_pins_min(p), 1000);
  store_pins_remove(p, h[0]);
  assert_int_equal(store_pins_min(p), 1001);
  int again = store_pins_add(p, 5);
  assert_true(again >= 0);
  assert_int_equal(store_pins_min(p), 5);
  for (int i = 1; i < 1024; i++)
    store_pins_remove(p, h[i]);
  store_pins_remove(p, again);
  assert_true(store_pins_min(p) == INT64_MAX);
  store_pins_free(p);
}

static void test_store_pins__bad_handles_are_ignored(void **state) {
  store_pins *p = store_pins_new();
  int h = store_pins_add(p, 9);
  store_pins_move(p, -1, 1);
  store_pins_move(p, 5000, 1);
  store_pins_remove(p, -3);
  store_pins_remove(p, 1 << 20);
  assert_int_equal(store_pins_min(p), 9);
  store_pins_remove(p, h);
  store_pins_free(p);
}

/* Threads pin and unpin while one thread watches the minimum: it must never
 * see a value below the floor every pin stays above. */
typedef struct race {
  store_pins *p;
  int bad;
} race;

static void *pinner(void *arg) {
  race *r = arg;
  for (int i = 0; i < 20000; i++) {
    int h = store_pins_add(r->p, 100 + i % 50);
    if (h < 0) {
      r->bad = 1;
      break;
    }
    store_pins_move(r->p, h, 200 + i % 50);
    store_pins_remove(r->p, h);
  }
  return NULL;
}

static void test_store_pins__concurrent_use_keeps_min_consistent(void **state) {
  race r = {store_pins_new(), 0};
  int floor_h = store_pins_add(r.p, 150);
  pthread_t t[3];
  for (int i = 0; i < 3; i++)
    pthread_create(&t[i], NULL, pinner, &r);
  for (int i = 0; i < 20000; i++) {
    int64_t m = store_pins_min(r.p);
    if (m < 100 || m > 150)
      r.bad = 2;
  }
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  assert_int_equal(r.bad, 0);
  assert_int_equal(store_pins_min(r.p), 150);
  store_pins_remove(r.p, floor_h);
  store_pins_free(r.p);
}

/* The slot count matches the used slots through add and remove churn. */
static void test_store_pins__check_invariants_through_churn(void **state) {
  (void)state;
  store_pins *p = store_pins_new();
  assert_non_null(p);
  int h[100];
  for (int i = 0; i < 100; i++)
    h[i] = store_pins_add(p, i);
  for (int i = 0; i < 100; i += 3)
    store_pins_remove(p, h[i]);
  store_pins_remove(p, h[0]); /* twice: ignored, the count stays right */
  assert_int_equal(store_pins_check_invariants(p), 0);
  store_pins_free(p);
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: stop at a break */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_pins__empty_min_is_int64_max),
      cmocka_unit_test(test_store_pins__check_invariants_through_churn),
      cmocka_unit_test(test_store_pins__min_follows_add_move_remove),
      cmocka_unit_test(test_store_pins__full_set_is_limit_then_reusable),
      cmocka_unit_test(test_store_pins__bad_handles_are_ignored),
      cmocka_unit_test(test_store_pins__concurrent_use_keeps_min_consistent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
