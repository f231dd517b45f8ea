/* test_sender.c: reconnect backoff and address parsing. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "sender.h"

static void test_backoff__doubles_with_jitter_up_to_max(void **state) {
  (void)state;
  uint64_t cur = 100, rng = 12345;
  uint64_t prev_cur = cur;
  int saw_jitter = 0;
  for (int i = 0; i < 20; i++) {
    uint64_t d = gt__backoff_next(&cur, 10000, &rng);
    assert_true(d >= prev_cur / 2 && d <= prev_cur);
    if (d != prev_cur)
      saw_jitter = 1;
    assert_true(cur == (prev_cur * 2 > 10000 ? 10000 : prev_cur * 2));
    prev_cur = cur;
  }
  assert_int_equal(cur, 10000);
  assert_true(saw_jitter);
}

static void nolog(int level, const char *fmt, ...) {
  (void)level;
  (void)fmt;
}

static void test_sender__parses_address_list(void **state) {
  (void)state;
  gt__ident id;
  memset(&id, 0, sizeof id);
  gt__spool sp;
  gt__spool_init(&sp, 1 << 20);
  gt__sender s;
  assert_int_equal(
      gt__sender_init(&s, "127.0.0.1:7170,[::1]:7171,db:1", &id, &sp, nolog),
      0);
  assert_int_equal(s.naddrs, 3);
  assert_string_equal(s.hosts[1], "::1");
  assert_string_equal(s.ports[1], "7171");
  assert_string_equal(s.hosts[2], "db");
  gt__sender_fini(&s);
  assert_int_equal(gt__sender_init(&s, "nohost", &id, &sp, nolog), -EINVAL);
  assert_int_equal(gt__sender_init(&s, "", &id, &sp, nolog), -EINVAL);
  assert_int_equal(gt__sender_init(&s, "h:", &id, &sp, nolog), -EINVAL);
  gt__spool_fini(&sp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backoff__doubles_with_jitter_up_to_max),
      cmocka_unit_test(test_sender__parses_address_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
