/* test_iplimit.c: daemon/iplimit.c, the count of connections per peer
 * address behind --max-conns-per-ip. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "iplimit.h"

static void key4(const char *ip, uint8_t k[16]) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(1234);
  assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
  assert_int_equal(iplimit_key((struct sockaddr *)&sa, k), 0);
}

static void key6(const char *ip, uint8_t k[16]) {
  struct sockaddr_in6 sa;
  memset(&sa, 0, sizeof sa);
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(1234);
  assert_int_equal(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
  assert_int_equal(iplimit_key((struct sockaddr *)&sa, k), 0);
}

static void test_iplimit__refuses_past_max_and_frees_on_release(void **st) {
  (void)st;
  iplimit *l = iplimit_new();
  assert_non_null(l);
  uint8_t a[16], b[16];
  key4("127.0.0.7", a);
  key4("127.0.0.2", b);
  for (int i = 0; i < 3; i++)
    assert_int_equal(iplimit_acquire(l, a, 3), 1);
  assert_int_equal(iplimit_acquire(l, a, 3), 0); /* the fourth */
  assert_int_equal(iplimit_count(l, a), 3);
  assert_int_equal(iplimit_acquire(l, b, 3), 1); /* another address */
  iplimit_release(l, a);
  assert_int_equal(iplimit_acquire(l, a, 3), 1); /* a slot back */
  for (int i = 0; i < 3; i++)
    iplimit_release(l, a);
  assert_int_equal(iplimit_count(l, a), 0);
  iplimit_release(l, a); /* unknown: nothing happens */
  assert_int_equal(iplimit_count(l, b), 1);
  assert_int_equal(iplimit_acquire(l, b, 0), 0); /* max 0 admits nobody */
  iplimit_free(l);
}

static void test_iplimit__ipv6_counts_by_64_and_mapped_v4_as_v4(void **st) {
  (void)st;
  uint8_t a[16], b[16], c[16], m[16], v4[16];
  key6("2001:db8:1:2::1", a);
  key6("2001:db8:1:2:ffff:1:2:3", b);
  key6("2001:db8:1:3::1", c);
  assert_memory_equal(a, b, 16); /* same /64 */
  assert_memory_not_equal(a, c, 16);
  key6("::ffff:10.1.2.3", m);
  key4("10.1.2.3", v4);
  assert_memory_equal(m, v4, 16);
  iplimit *l = iplimit_new();
  assert_int_equal(iplimit_acquire(l, a, 1), 1);
  assert_int_equal(iplimit_acquire(l, b, 1), 0); /* one host, one /64 */
  assert_int_equal(iplimit_acquire(l, c, 1), 1);
  iplimit_free(l); /* frees the entries still counted */
}

static void test_iplimit__many_addresses_each_counted_apart(void **st) {
  (void)st;
  iplimit *l = iplimit_new();
  uint8_t k[16];
  char ip[32];
  for (unsigned i = 0; i < 20000; i++) {
    snprintf(ip, sizeof ip, "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
    key4(ip, k);
    assert_int_equal(iplimit_acquire(l, k, 1), 1);
  }
  for (unsigned i = 0; i < 20000; i++) {
    snprintf(ip, sizeof ip, "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
    key4(ip, k);
    assert_int_equal(iplimit_count(l, k), 1);
    iplimit_release(l, k);
    assert_int_equal(iplimit_count(l, k), 0);
  }
  iplimit_free(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_iplimit__refuses_past_max_and_frees_on_release),
      cmocka_unit_test(test_iplimit__ipv6_counts_by_64_and_mapped_v4_as_v4),
      cmocka_unit_test(test_iplimit__many_addresses_each_counted_apart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
