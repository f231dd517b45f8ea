/* test_rlimits.c: daemon/rlimits.c, the limits gentraced sets for itself. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "rlimits.h"

/* The soft limit comes up to what is asked, within the hard limit. */
static void test_rlimits_raise_nofile__soft_up_to_hard(void **state) {
  (void)state;
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max < 64)
    skip();
  struct rlimit low = {32, rl.rlim_max};
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  uint64_t soft = 0, hard = 0;
  assert_int_equal(rlimits_raise_nofile(48, &soft, &hard), 0);
  assert_int_equal(soft, 48);
  assert_int_equal(hard, rl.rlim_max);
  /* Asking past the hard limit gives at least the hard limit. */
  assert_int_equal(
      rlimits_raise_nofile((uint64_t)rl.rlim_max + 1000, &soft, &hard), 0);
  assert_true(soft >= (uint64_t)rl.rlim_max);
  /* Never lowered. */
  uint64_t before = soft;
  assert_int_equal(rlimits_raise_nofile(16, &soft, &hard), 0);
  assert_int_equal(soft, before);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static void *report_nice(void *arg) {
  *(int *)arg = rlimits_nice_of(0);
  return NULL;
}

/* Threads created between begin and end carry the boost; the caller gets
 * its own value back. Without the privilege nothing changes. */
static void test_rlimits_nice__only_threads_created_inside(void **state) {
  (void)state;
  int mine = rlimits_nice_of(0), saved = 99;
  int rc = rlimits_nice_begin(3, &saved);
  if (rc == 0)
    assert_int_equal(saved, mine);
  int child = 99;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, report_nice, &child), 0);
  pthread_join(t, NULL);
  rlimits_nice_end(3, saved);
  if (rc == 0)
    assert_int_equal(child, mine - 3 < -20 ? -20 : mine - 3);
  else
    assert_true(rc == -EACCES || rc == -EPERM);
  assert_int_equal(rlimits_nice_of(0), mine);
  /* A thread created afterwards is back to the default. */
  assert_int_equal(pthread_create(&t, NULL, report_nice, &child), 0);
  pthread_join(t, NULL);
  assert_int_equal(child, mine);
  /* boost 0 changes nothing. */
  assert_int_equal(rlimits_nice_begin(0, &saved), 0);
  assert_int_equal(rlimits_nice_of(0), mine);
  rlimits_nice_end(0, saved);
  assert_int_equal(rlimits_nice_of(0), mine);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rlimits_raise_nofile__soft_up_to_hard),
      cmocka_unit_test(test_rlimits_nice__only_threads_created_inside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
