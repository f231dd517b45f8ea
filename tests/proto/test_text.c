/* test_text.c: proto/text.c, the one text layer: each grammar as a table of
 * what it accepts (with the value) and what it refuses. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "text.h"

#define S INT64_C(1000000000)
/* 2026-01-22T03:12:00Z */
#define T_REF (INT64_C(1769051520) * S)

static void test_dur_parse__one_grammar_table(void **state) {
  static const struct {
    const char *in;
    int64_t ns;
  } ok[] = {
      {"0", 0},
      {"500ms", 500000000},
      {"30s", 30 * S},
      {"10m", 600 * S},
      {"1h30m", 5400 * S},
      {"7d", 7 * 86400 * S},
      {"1.5s", S * 3 / 2},
      {"250us", 250000},
      {"\xc2\xb5s", 0},
      {"3ns", 3},
      {"2h45m30s", (2 * 3600 + 45 * 60 + 30) * S},
  };
  static const char *const bad[] = {
      "",
      "12",
      "s",
      "5 m",
      "1w",
      "1.s",
      ".s",
      "-5s",
      "1h-",
      "99999999999999d",
      "1h30",
      "nan",
      "1e3s",
      "1234567890123456789012345678901234567890123456789012345678901234567s"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t v = -1;
    if (strcmp(ok[i].in, "\xc2\xb5s") == 0)
      continue; /* a unit alone is not a duration; checked below */
    if (gtp_dur_parse(ok[i].in, &v) != 0 || v != ok[i].ns)
      fail_msg("\"%s\": rc or value %lld", ok[i].in, (long long)v);
  }
  int64_t v = -1;
  assert_int_equal(gtp_dur_parse("3\xc2\xb5s", &v), 0);
  assert_int_equal(v, 3000);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 42;
    if (gtp_dur_parse(bad[i], &v) != GTP_E_BADARG || v != 42)
      fail_msg("\"%s\" accepted", bad[i]);
  }
  assert_int_equal(gtp_dur_parse(NULL, &v), GTP_E_BADARG);
}

static void test_time_parse__one_grammar_table(void **state) {
  static const struct {
    const char *in;
    int64_t ns;
  } ok[] = {
      {"now", T_REF},
      {"now-5m", T_REF - 300 * S},
      {"now+1h", T_REF + 3600 * S},
      {"-30s", T_REF - 30 * S},
      {"+2m", T_REF + 120 * S},
      {"2026-01-22T03:12:00Z", T_REF},
      {"2026-01-22T05:12:00+02:00", T_REF},
      {"2026-01-22t03:12:00.5z", T_REF + S / 2},
      {"2026-01-22 03:12:00.123456789Z", T_REF + 123456789},
      {"2026-01-21T22:12:00.000000001-05:00", T_REF + 1},
      {"1769051520s", T_REF},
      {"1769051520000ms", T_REF},
      {"1769051520000000us", T_REF},
      {"1769051520000000000ns", T_REF},
      /* Compatibility: bare digits of ns magnitude stay unix ns. */
      {"1769051520000000000", T_REF},
      {"1000000000000000", INT64_C(1000000000000000)},
      {"0", 0},
  };
  static const char *const bad[] = {"",
                                    "yesterday",
                                    "now-",
                                    "now-5",
                                    "now*5m",
                                    "2026-01-22",
                                    "2026-13-01T00:00:00Z",
                                    "2026-02-29T00:00:00Z",
                                    "2026-01-22T03:12:00",
                                    "2026-01-22T03:12:00+2:00",
                                    "1969-12-31T23:59:59Z",
                                    "2262-01-01T00:00:00Z",
                                    "1769051520h",
                                    "99999999999999999999",
                                    "9999999999999999999s",
                                    "-999999999d",
                                    "2026-01-22T03:12:00Zjunk"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    int64_t v = -1;
    const char *why = NULL;
    if (gtp_time_parse(ok[i].in, T_REF, &v, &why) != 0 || v != ok[i].ns)
      fail_msg("\"%s\": %s, value %lld", ok[i].in, why ? why : "-",
               (long long)v);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v = 42;
    const char *why = NULL;
    if (gtp_time_parse(bad[i], T_REF, &v, &why) != GTP_E_BADARG || v != 42)
      fail_msg("\"%s\" accepted", bad[i]);
    assert_non_null(why);
    assert_non_null(strstr(why, "1732400000s"));
  }
}

/* Issue 13: from=1732400000 (seconds) used to be read as ns, i.e. 1970. */
static void
test_time_parse__bare_seconds_refused_with_how_to_write_it(void **state) {
  static const char *const plainly_not_ns[] = {"1732400000", "1732400000000",
                                               "999999999999999", "1"};
  for (size_t i = 0; i < sizeof plainly_not_ns / sizeof plainly_not_ns[0];
       i++) {
    int64_t v = 42;
    const char *why = NULL;
    assert_int_equal(gtp_time_parse(plainly_not_ns[i], T_REF, &v, &why),
                     GTP_E_BADARG);
    assert_int_equal(v, 42);
    assert_non_null(strstr(why, "write its unit"));
    assert_non_null(strstr(why, "1732400000s"));
  }
  assert_int_equal(gtp_time_parse("x", 0, &(int64_t){0}, NULL), GTP_E_BADARG);
}

static void test_rfc3339__format_parse_round_trip(void **state) {
  char out[GTP_RFC3339_MAX];
  assert_int_equal(gtp_rfc3339(T_REF + 123456789, out), 30);
  assert_string_equal(out, "2026-01-22T03:12:00.123456789Z");
  gtp_rfc3339(0, out);
  assert_string_equal(out, "1970-01-01T00:00:00.000000000Z");
  gtp_rfc3339(-1, out); /* floors: the last ns of 1969 */
  assert_string_equal(out, "1969-12-31T23:59:59.999999999Z");
  gtp_rfc3339(INT64_MAX, out);
  assert_string_equal(out, "2262-04-11T23:47:16.854775807Z");
  gtp_rfc3339(INT64_MIN, out);
  assert_string_equal(out, "1677-09-21T00:12:43.145224192Z");
  gtp_rfc3339_frac(T_REF + 999999999, 3, out);
  assert_string_equal(out, "2026-01-22T03:12:00.999Z"); /* truncated */
  gtp_rfc3339_frac(T_REF + 5000, 6, out);
  assert_string_equal(out, "2026-01-22T03:12:00.000005Z");
  gtp_rfc3339_frac(T_REF + 5000, 0, out);
  assert_string_equal(out, "2026-01-22T03:12:00Z");
  char c[17];
  assert_int_equal(gtp_rfc3339_compact(T_REF, c), 16);
  assert_string_equal(c, "20260122T031200Z");
  /* Every formatted time parses back to itself. */
  for (int64_t t = 0; t < INT64_C(9000000000000000000);
       t += INT64_C(123456789123456789)) {
    int64_t back = -1;
    gtp_rfc3339(t, out);
    assert_int_equal(gtp_rfc3339_parse(out, &back), 0);
    assert_int_equal(back, t);
  }
}

static void test_hostport__forms_and_refusals(void **state) {
  static const struct {
    const char *in, *host;
    unsigned port;
  } ok[] = {{"127.0.0.1:7170", "127.0.0.1", 7170},
            {"[::1]:0", "::1", 0},
            {"collector.example:65535", "collector.example", 65535},
            {":7171", "", 7171}};
  static const char *const bad[] = {"127.0.0.1", "::1:7170", "[::1]7170",
                                    "[::1:7170", "h:",       "h:65536",
                                    "h:7a",      "h:123456", "",
                                    "h:-1"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    gtp_hostport hp;
    assert_int_equal(gtp_hostport_parse(ok[i].in, strlen(ok[i].in), &hp), 0);
    assert_int_equal(hp.host_len, strlen(ok[i].host));
    assert_memory_equal(hp.host, ok[i].host, hp.host_len);
    assert_int_equal(hp.port, ok[i].port);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gtp_hostport hp;
    if (gtp_hostport_parse(bad[i], strlen(bad[i]), &hp) != GTP_E_BADARG)
      fail_msg("\"%s\" accepted", bad[i]);
  }
  /* The length bounds the parse: nothing past n is read. */
  gtp_hostport hp;
  assert_int_equal(gtp_hostport_parse("h:71,h:72", 4, &hp), 0);
  assert_int_equal(hp.port, 71);
}

static void
test_ct_equal__equal_only_when_bytes_and_lengths_match(void **state) {
  assert_true(gtp_ct_equal("secret", 6, "secret", 6));
  assert_false(gtp_ct_equal("secreT", 6, "secret", 6));
  assert_false(gtp_ct_equal("secret!", 7, "secret", 6));
  assert_false(gtp_ct_equal("secre", 5, "secret", 6));
  assert_false(gtp_ct_equal("", 0, "secret", 6));
  assert_false(gtp_ct_equal("ssssss", 1, "ssssss", 6)); /* prefix repeated */
}

static void test_bytes_cmp__bytes_first_then_the_shorter(void **state) {
  assert_int_equal(gtp_bytes_cmp("abc", 3, "abc", 3), 0);
  assert_true(gtp_bytes_cmp("abc", 3, "abd", 3) < 0);
  assert_true(gtp_bytes_cmp("b", 1, "abc", 3) > 0);  /* bytes before length */
  assert_true(gtp_bytes_cmp("ab", 2, "abc", 3) < 0); /* a prefix first */
  assert_true(gtp_bytes_cmp("abc", 3, "ab", 2) > 0);
  assert_true(gtp_bytes_cmp("a\0b", 3, "a\0c", 3) < 0); /* past a NUL */
  assert_true(gtp_bytes_cmp("\xff", 1, "\x01", 1) > 0); /* unsigned bytes */
  assert_int_equal(gtp_bytes_cmp(NULL, 0, NULL, 0), 0);
  assert_true(gtp_bytes_cmp(NULL, 0, "a", 1) < 0);
}

static void test_utf8_valid__rules_and_flags(void **state) {
  assert_true(gtp_utf8_valid("caf\xc3\xa9", 5, 0));
  assert_false(gtp_utf8_valid("caf\xc3", 4, 0));          /* truncated */
  assert_false(gtp_utf8_valid("\xc0\xaf", 2, 0));         /* overlong */
  assert_false(gtp_utf8_valid("\xed\xa0\x80", 3, 0));     /* surrogate */
  assert_false(gtp_utf8_valid("\xf4\x90\x80\x80", 4, 0)); /* > U+10FFFF */
  assert_true(gtp_utf8_valid("a\0b", 3, 0));
  assert_false(gtp_utf8_valid("a\0b", 3, GTP_UTF8_NO_NUL));
  assert_true(gtp_utf8_valid("a\tb", 3, GTP_UTF8_NO_NUL));
  assert_false(gtp_utf8_valid("a\tb", 3, GTP_UTF8_NO_CTRL));
  assert_false(gtp_utf8_valid("a\x7f", 2, GTP_UTF8_NO_CTRL));
}

static void test_json_escape__invalid_utf8_becomes_fffd(void **state) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  const char in[] = "a\"\\\n\x01\xff\xe2\x80\xa8\xc3\xa9z";
  assert_int_equal(gtp_json_escape(gtp_wbuf_sink, &b, in, sizeof in - 1), 0);
  gtp_wbuf_put(&b, "", 1);
  assert_int_equal(b.err, 0);
  assert_string_equal((char *)b.data,
                      "a\\\"\\\\\\u000a\\u0001\\ufffd\\u2028\xc3\xa9z");
  gtp_wbuf_fini(&b);
}

static void test_logfmt__every_value_escaped(void **state) {
  char buf[64];
  assert_string_equal(gtp_logfmt_quote(buf, sizeof buf, "plain"), "plain");
  assert_string_equal(gtp_logfmt_quote(buf, sizeof buf, ""), "\"\"");
  assert_string_equal(gtp_logfmt_quote(buf, sizeof buf, NULL), "\"\"");
  assert_string_equal(gtp_logfmt_quote(buf, sizeof buf, "a b=\"c\"\n\\"),
                      "\"a b=\\\"c\\\"\\n\\\\\"");
  assert_string_equal(gtp_logfmt_quote(buf, sizeof buf, "x\x01y"),
                      "\"x\\x01y\"");
  char small[12];
  gtp_logfmt_quote(small, sizeof small, "a long value with spaces");
  assert_string_equal(small, "\"a long...\"");
  char line[96];
  size_t n = gtp_logfmt_prefix(line, sizeof line, T_REF + 7000000, "warn");
  assert_string_equal(line, "ts=2026-01-22T03:12:00.007Z level=warn");
  assert_int_equal(n, strlen(line));
}

static void test_causef__sets_message_and_returns_code(void **state) {
  char *cause = NULL;
  assert_int_equal(gtp_causef(&cause, GTP_E_BADARG, "%s:%d: bad", "f", 3),
                   GTP_E_BADARG);
  assert_string_equal(cause, "f:3: bad");
  free(cause);
  assert_int_equal(gtp_causef(NULL, -5, "ignored"), -5);
}

static void test_wbuf__first_error_sticks(void **state) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 300);
  gtp_wbuf_put(&b, "0123456789", 10);
  uint8_t big[400] = {0};
  gtp_wbuf_put(&b, big, sizeof big);
  assert_int_equal(b.err, GTP_E_TOOBIG);
  gtp_wbuf_put(&b, "x", 1);
  assert_int_equal(b.len, 10);
  assert_true(b.cap <= 300);
  assert_int_equal(gtp_wbuf_sink(&b, "y", 1), GTP_E_TOOBIG);
  gtp_wbuf_reset(&b);
  gtp_wbuf_put_str(&b, "ab", 2);
  assert_int_equal(b.len, 3);
  assert_memory_equal(b.data,
                      "\x02"
                      "ab",
                      3);
  gtp_wbuf_fini(&b);
}

static void test_wbuf_printf__short_and_long_lines(void **state) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_wbuf_printf(&b, "a=%d ", 1), 0);
  char big[600];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(gtp_wbuf_printf(&b, "%s|", big), 0);
  assert_int_equal(b.len, 4 + 599 + 1);
  assert_memory_equal(b.data, "a=1 xx", 6);
  assert_int_equal(b.data[b.len - 1], '|');
  gtp_wbuf_fini(&b);
  gtp_wbuf_init(&b, 10);
  assert_int_equal(gtp_wbuf_printf(&b, "%s", big), GTP_E_TOOBIG);
  gtp_wbuf_fini(&b);
}

/* gtp_array_grow: first capacity, doubling to cover need, and a need whose
 * bytes would overflow refused with the array left as it was. */
static void test_array_grow__doubles_and_refuses_overflow(void **state) {
  (void)state;
  uint32_t *a = NULL;
  size_t cap = 0;
  assert_int_equal(gtp_array_grow((void **)&a, &cap, 1, sizeof *a, 16), 0);
  assert_int_equal(cap, 16);
  a[15] = 7;
  assert_int_equal(gtp_array_grow((void **)&a, &cap, 16, sizeof *a, 16), 0);
  assert_int_equal(cap, 16);
  assert_int_equal(gtp_array_grow((void **)&a, &cap, 100, sizeof *a, 16), 0);
  assert_int_equal(cap, 128);
  assert_int_equal(a[15], 7);
  uint32_t *keep = a;
  assert_int_equal(
      gtp_array_grow((void **)&a, &cap, SIZE_MAX / 2, sizeof *a, 16), -ENOMEM);
  assert_ptr_equal(a, keep);
  assert_int_equal(cap, 128);
  free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dur_parse__one_grammar_table),
      cmocka_unit_test(test_array_grow__doubles_and_refuses_overflow),
      cmocka_unit_test(test_time_parse__one_grammar_table),
      cmocka_unit_test(
          test_time_parse__bare_seconds_refused_with_how_to_write_it),
      cmocka_unit_test(test_rfc3339__format_parse_round_trip),
      cmocka_unit_test(test_hostport__forms_and_refusals),
      cmocka_unit_test(test_ct_equal__equal_only_when_bytes_and_lengths_match),
      cmocka_unit_test(test_bytes_cmp__bytes_first_then_the_shorter),
      cmocka_unit_test(test_utf8_valid__rules_and_flags),
      cmocka_unit_test(test_json_escape__invalid_utf8_becomes_fffd),
      cmocka_unit_test(test_logfmt__every_value_escaped),
      cmocka_unit_test(test_causef__sets_message_and_returns_code),
      cmocka_unit_test(test_wbuf__first_error_sticks),
      cmocka_unit_test(test_wbuf_printf__short_and_long_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
