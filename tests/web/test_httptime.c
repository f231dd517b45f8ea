/* test_httptime.c: time and duration parsing of the HTTP API. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "httptime.h"

#define SEC INT64_C(1000000000)
/* 2026-01-22T03:12:00Z */
#define T_REF INT64_C(1769051520000000000)

static int64_t dur(const char *s) {
  int64_t v = -1;
  assert_int_equal(httpdur_parse(s, &v), 0);
  return v;
}

static int64_t tm(const char *s) {
  int64_t v = -1;
  assert_int_equal(httptime_parse(s, T_REF, &v), 0);
  return v;
}

static void test_dur__units_and_sequences(void **state) {
  assert_int_equal(dur("30s"), 30 * SEC);
  assert_int_equal(dur("5m"), 300 * SEC);
  assert_int_equal(dur("1h"), 3600 * SEC);
  assert_int_equal(dur("500ms"), SEC / 2);
  assert_int_equal(dur("250us"), 250000);
  assert_int_equal(dur("250\xc2\xb5s"), 250000);
  assert_int_equal(dur("7ns"), 7);
  assert_int_equal(dur("2d"), 2 * 86400 * SEC);
  assert_int_equal(dur("1h30m"), 5400 * SEC);
  assert_int_equal(dur("1.5s"), 1500 * 1000000);
  assert_int_equal(dur(".5m"), 30 * SEC);
  assert_int_equal(dur("0"), 0);
  assert_int_equal(dur("0s"), 0);
}

static void test_dur__garbage_is_badarg(void **state) {
  static const char *const bad[] = {
      "",
      "s",
      "30",
      "30x",
      "-5s",
      "5 s",
      "1.s",
      ".s",
      "5mins",
      "1e3s",
      "99999999999999999999s",
      "3000000h", /* past int64 ns */
      "1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h"
      "1h1h1h1h1h1h1h1h1h1h1h1h1h"}; /* longer than any parameter */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 42;
    assert_int_equal(httpdur_parse(bad[i], &v), GTP_E_BADARG);
    assert_int_equal(v, 42); /* untouched on error */
  }
  int64_t v;
  assert_int_equal(httpdur_parse(NULL, &v), GTP_E_BADARG);
}

static void test_time__rfc3339_forms(void **state) {
  assert_int_equal(tm("2026-01-22T03:12:00Z"), T_REF);
  assert_int_equal(tm("2026-01-22t03:12:00z"), T_REF);
  assert_int_equal(tm("2026-01-22 03:12:00Z"), T_REF);
  assert_int_equal(tm("2026-01-22T03:12:00.5Z"), T_REF + SEC / 2);
  assert_int_equal(tm("2026-01-22T03:12:00.000000001Z"), T_REF + 1);
  /* digits past ns are dropped, not rounded into a wrong second */
  assert_int_equal(tm("2026-01-22T03:12:00.9999999999Z"), T_REF + SEC - 1);
  assert_int_equal(tm("2026-01-22T05:12:00+02:00"), T_REF);
  assert_int_equal(tm("2026-01-21T22:42:00-04:30"), T_REF);
  assert_int_equal(tm("1970-01-01T00:00:00Z"), 0);
  assert_int_equal(tm("2024-02-29T00:00:00Z"), INT64_C(1709164800) * SEC);
  assert_int_equal(tm("2000-03-01T00:00:00Z"), INT64_C(951868800) * SEC);
}

static void test_time__unix_ns_and_relative(void **state) {
  assert_int_equal(tm("1769051520000000000"), T_REF);
  assert_int_equal(tm("0"), 0);
  assert_int_equal(tm("now"), T_REF);
  assert_int_equal(tm("-30s"), T_REF - 30 * SEC);
  assert_int_equal(tm("now-5m"), T_REF - 300 * SEC);
  assert_int_equal(tm("+1h"), T_REF + 3600 * SEC);
  assert_int_equal(tm("-1h30m"), T_REF - 5400 * SEC);
}

static void test_time__invalid_is_badarg(void **state) {
  static const char *const bad[] = {
      "",
      "yesterday",
      "2026-01-22",
      "2026-01-22T03:12:00",      /* no zone */
      "2026-13-01T00:00:00Z",     /* month */
      "2026-02-29T00:00:00Z",     /* not a leap year */
      "2026-01-32T00:00:00Z",     /* day */
      "2026-01-22T24:00:00Z",     /* hour */
      "2026-01-22T03:60:00Z",     /* minute */
      "2026-01-22T03:12:61Z",     /* second */
      "2026-01-22T03:12:00.Z",    /* empty fraction */
      "2026-01-22T03:12:00+2:00", /* offset digits */
      "2026-01-22T03:12:00Zjunk",
      "1969-12-31T23:59:59Z", /* before the epoch */
      "9999-01-01T00:00:00Z", /* past int64 ns */
      "99999999999999999999", /* past int64 */
      "now-",
      "now5m",
      "-5",
      "-1000000d", /* before the epoch */
      "12a",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 42;
    if (httptime_parse(bad[i], T_REF, &v) != GTP_E_BADARG)
      fail_msg("accepted: '%s'", bad[i]);
    assert_int_equal(v, 42);
  }
}

static void test_format__rfc3339_roundtrip(void **state) {
  char out[HTTPTIME_RFC3339_LEN];
  httptime_format(T_REF + 123456789, out);
  assert_string_equal(out, "2026-01-22T03:12:00.123456789Z");
  int64_t back;
  assert_int_equal(httptime_parse(out, 0, &back), 0);
  assert_int_equal(back, T_REF + 123456789);
  httptime_format(0, out);
  assert_string_equal(out, "1970-01-01T00:00:00.000000000Z");
  httptime_format(-5, out);
  assert_string_equal(out, "1970-01-01T00:00:00.000000000Z");
  httptime_format(INT64_MAX, out);
  assert_string_equal(out, "2262-04-11T23:47:16.854775807Z");
  /* every day boundary of a leap year round-trips */
  for (int64_t d = 0; d < 366; d++) {
    int64_t t = INT64_C(1704067200) * SEC + d * 86400 * SEC + 7;
    httptime_format(t, out);
    assert_int_equal(httptime_parse(out, 0, &back), 0);
    assert_int_equal(back, t);
  }
  char c[17];
  httptime_format_compact(T_REF, c);
  assert_string_equal(c, "20260122T031200Z");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dur__units_and_sequences),
      cmocka_unit_test(test_dur__garbage_is_badarg),
      cmocka_unit_test(test_time__rfc3339_forms),
      cmocka_unit_test(test_time__unix_ns_and_relative),
      cmocka_unit_test(test_time__invalid_is_badarg),
      cmocka_unit_test(test_format__rfc3339_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
