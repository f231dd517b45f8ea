/* test_pinreq.c: the POST /v1/pins body parser (web/pinreq.c): what it
 * accepts, the sentence it gives for what it refuses, and that hostile
 * input (every truncation of a good body, random bytes, random edits)
 * never crashes it nor yields an inconsistent request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pinreq.h"
#include "../lib/prng.h"

#define NS INT64_C(1000000000)
#define NOW (INT64_C(1795600000) * NS)
#define MAXTTL (90 * 86400 * NS)

static int parse(const char *body, pinreq *q, char *why) {
  return pinreq_parse(body, strlen(body), NOW, MAXTTL, q, why, 300);
}

static void test_pinreq__service_pin_with_defaults(void **state) {
  (void)state;
  pinreq q;
  char why[300];
  assert_int_equal(parse("{\"service\":\"checkout\",\"from\":\"now-10m\","
                         "\"to\":\"now\",\"reason\":\"slow\"}",
                         &q, why),
                   0);
  assert_string_equal(q.service, "checkout");
  assert_string_equal(q.session, "");
  assert_true(q.from_ns == NOW - 600 * NS && q.to_ns == NOW);
  assert_string_equal(q.reason, "slow");
  assert_true(q.ttl_ns == PINREQ_TTL_DEFAULT_NS);
}

static void test_pinreq__session_pin_numbers_nulls_escapes(void **state) {
  (void)state;
  pinreq q;
  char why[300];
  /* Upper-case hex is taken as lower case; null stands for absent; times
   * as JSON numbers (unix ns) or strings with a unit; escapes decoded,
   * a surrogate pair into one 4-byte character. */
  assert_int_equal(
      parse(" {\"session\":\"00112233445566778899AABBCCDDEEFF\","
            "\"service\":null, \"from\":1795599000000000000,"
            "\"to\":\"1795599060s\",\"reason\":\"a\\n\\u00e9\\ud83d\\ude00\","
            "\"ttl\":\"12h\"} ",
            &q, why),
      0);
  assert_string_equal(q.session, "00112233445566778899aabbccddeeff");
  assert_string_equal(q.service, "");
  assert_true(q.from_ns == INT64_C(1795599000) * NS);
  assert_true(q.to_ns == INT64_C(1795599060) * NS);
  assert_string_equal(q.reason, "a\n\xc3\xa9\xf0\x9f\x98\x80");
  assert_true(q.ttl_ns == 12 * 3600 * NS);
}

static void test_pinreq__reason_of_512_bytes_fits_513_does_not(void **state) {
  (void)state;
  char body[1200], why[300];
  pinreq q;
  char r[600];
  memset(r, 'x', 512);
  r[512] = 0;
  snprintf(body, sizeof body,
           "{\"service\":\"s\",\"from\":\"now-1m\",\"to\":\"now\","
           "\"reason\":\"%s\"}",
           r);
  assert_int_equal(parse(body, &q, why), 0);
  assert_int_equal(strlen(q.reason), 512);
  r[512] = 'x';
  r[513] = 0;
  snprintf(body, sizeof body,
           "{\"service\":\"s\",\"from\":\"now-1m\",\"to\":\"now\","
           "\"reason\":\"%s\"}",
           r);
  assert_int_equal(parse(body, &q, why), -1);
  assert_non_null(strstr(why, "reason: too long"));
}

static void test_pinreq__refusals_name_the_problem(void **state) {
  (void)state;
  static const struct {
    const char *body, *why;
  } cases[] = {
      {"", "empty body"},
      {"nope", "not valid JSON"},
      {"[1]", "must be a JSON object"},
      {"{}", "one is required"},
      {"{\"service\":\"a\",\"session\":\"00112233445566778899aabbccddeeff\","
       "\"from\":\"now-1m\",\"to\":\"now\",\"reason\":\"r\"}",
       "not both"},
      {"{\"service\":\"a\",\"from\":\"now\",\"to\":\"now-1m\",\"reason\":"
       "\"r\"}",
       "must be before to"},
      {"{\"service\":\"a\",\"to\":\"now\",\"reason\":\"r\"}", "from: required"},
      {"{\"service\":\"a\",\"from\":\"now-1m\",\"to\":\"now\"}",
       "reason: required"},
      {"{\"service\":\"a\",\"from\":\"x\",\"to\":\"now\",\"reason\":\"r\"}",
       "from: "},
      {"{\"service\":\"a\",\"from\":1732400000,\"to\":\"now\",\"reason\":"
       "\"r\"}",
       "from: "},
      {"{\"service\":\"a\",\"from\":\"now-1m\",\"to\":\"now\",\"reason\":\"r\","
       "\"ttl\":\"91d\"}",
       "--pin-max-ttl"},
      {"{\"service\":\"a\",\"from\":\"now-1m\",\"to\":\"now\",\"reason\":\"r\","
       "\"ttl\":\"0\"}",
       "ttl: not a positive duration"},
      {"{\"service\":\"a\",\"from\":\"now-1m\",\"to\":\"now\",\"reason\":\"r\","
       "\"extra\":1}",
       "extra: unknown member"},
      {"{\"service\":\"a\",\"service\":\"b\"}", "service: given twice"},
      {"{\"service\":true}", "service: must be a string"},
      {"{\"reason\":{\"a\":1}}", "reason: must be a string"},
      {"{\"service\":\"a\\u0000b\"}", "NUL character or a lone surrogate"},
      {"{\"service\":\"\\udc00\"}", "NUL character or a lone surrogate"},
      {"{\"service\":\"a\\tb\",\"from\":\"now-1m\",\"to\":\"now\","
       "\"reason\":\"r\"}",
       "without control characters"},
      {"{\"session\":\"0011\",\"from\":\"now-1m\",\"to\":\"now\","
       "\"reason\":\"r\"}",
       "not a session id"},
      {"{\"service\":\"\xff\"}", "not valid JSON"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pinreq q;
    char why[300] = "";
    int rc = parse(cases[i].body, &q, why);
    if (rc != -1 || !strstr(why, cases[i].why))
      fail_msg("case %zu (%s): rc %d, why \"%s\", want \"%s\"", i,
               cases[i].body, rc, why, cases[i].why);
  }
}

/* A request the parser accepted is whole and consistent. */
static void check_consistent(const pinreq *q) {
  assert_true((q->service[0] != 0) != (q->session[0] != 0));
  assert_true(q->from_ns < q->to_ns);
  assert_true(q->ttl_ns > 0 && q->ttl_ns <= MAXTTL);
  assert_true(strlen(q->reason) <= 512);
}

static void test_pinreq__hostile_input_never_crashes(void **state) {
  (void)state;
  static const char good[] =
      "{\"service\":\"checkout\",\"from\":\"2026-11-25T10:00:00Z\","
      "\"to\":\"2026-11-25T11:00:00Z\",\"reason\":\"r \\u00e9\","
      "\"ttl\":\"1h\"}";
  pinreq q;
  char why[300];
  size_t n = strlen(good);
  assert_int_equal(pinreq_parse(good, n, NOW, MAXTTL, &q, why, sizeof why), 0);
  check_consistent(&q);
  /* Every truncation; a malloc'd copy of exactly that length, so ASan sees
   * any read past the end. */
  for (size_t k = 0; k < n; k++) {
    char *b = malloc(k ? k : 1);
    assert_non_null(b);
    memcpy(b, good, k);
    assert_int_equal(pinreq_parse(b, k, NOW, MAXTTL, &q, why, sizeof why), -1);
    free(b);
  }
  /* Random single-byte edits and random bytes. */
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 20000; i++) {
    xorshift64(&x);
    size_t len = i % 2 ? n : 1 + x % 64;
    char *b = malloc(len);
    assert_non_null(b);
    if (i % 2) {
      memcpy(b, good, n);
      b[(x >> 8) % n] = (char)(x >> 32);
    } else {
      for (size_t k = 0; k < len; k++)
        b[k] = (char)(x >> (k % 7 * 8));
    }
    if (pinreq_parse(b, len, NOW, MAXTTL, &q, why, sizeof why) == 0)
      check_consistent(&q);
    else
      assert_true(why[0] != 0);
    free(b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pinreq__service_pin_with_defaults),
      cmocka_unit_test(test_pinreq__session_pin_numbers_nulls_escapes),
      cmocka_unit_test(test_pinreq__reason_of_512_bytes_fits_513_does_not),
      cmocka_unit_test(test_pinreq__refusals_name_the_problem),
      cmocka_unit_test(test_pinreq__hostile_input_never_crashes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
