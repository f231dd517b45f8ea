/* test_json.c: the JSON writer and validator of web/. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

static char *take(json *j) {
  size_t n;
  char *s = json_take(j, &n);
  assert_non_null(s);
  assert_int_equal(strlen(s), n);
  return s;
}

static void test_writer__commas_nesting_and_types(void **state) {
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_kv_str(&j, "a", "x");
  json_key(&j, "list");
  json_arr_begin(&j);
  json_u64(&j, UINT64_MAX);
  json_i64(&j, INT64_MIN);
  json_bool(&j, 1);
  json_null(&j);
  json_obj_begin(&j);
  json_obj_end(&j);
  json_arr_begin(&j);
  json_arr_end(&j);
  json_i64_str(&j, 1769051520000000000);
  json_arr_end(&j);
  json_key(&j, "raw");
  json_raw(&j, "{\"k\":1}", 7);
  json_str(&j, NULL); /* value without key is a writer misuse, but still */
  json_obj_end(&j);
  char *s = take(&j);
  assert_string_equal(
      s, "{\"a\":\"x\",\"list\":[18446744073709551615,-9223372036854775808,"
         "true,null,{},[],\"1769051520000000000\"],\"raw\":{\"k\":1},null}");
  free(s);
}

static void test_writer__escapes_hostile_strings(void **state) {
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_kv_str(&j, "q\"k", "a\"b\\c\n\x01\x1f");
  json_key(&j, "bad_utf8");
  json_strn(&j, "\xff\xfe", 2);
  json_obj_end(&j);
  char *s = take(&j);
  assert_true(json_valid(s, strlen(s)));
  assert_non_null(strstr(s, "a\\\"b\\\\c\\"));
  assert_non_null(strstr(s, "\\u0001\\u001f\""));
  assert_null(strchr(s, '\xff'));
  free(s);
}

static void test_writer__unbalanced_or_too_deep_fails(void **state) {
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  size_t n;
  assert_null(json_take(&j, &n)); /* still open */
  json_init(&j, 0);
  for (int i = 0; i < JSON_DEPTH_MAX + 1; i++)
    json_arr_begin(&j);
  for (int i = 0; i < JSON_DEPTH_MAX + 1; i++)
    json_arr_end(&j);
  assert_null(json_take(&j, &n));
  json_init(&j, 0);
  json_arr_end(&j);
  assert_null(json_take(&j, &n));
}

static void test_writer__limit_turns_into_error(void **state) {
  json j;
  json_init(&j, 64);
  json_arr_begin(&j);
  for (int i = 0; i < 100; i++)
    json_str(&j, "0123456789");
  json_arr_end(&j);
  size_t n;
  assert_null(json_take(&j, &n));
}

static void test_valid__accepts_rfc8259(void **state) {
  static const char *const ok[] = {
      "{}",
      "[]",
      " {\"a\" : [1, -2.5e10, 0, true, false, null, \"x\"]} ",
      "\"\\u00e9\\n\"",
      "0",
      "-0.0E+1",
      "{\"k\":{\"k\":{}}}",
      "\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (!json_valid(ok[i], strlen(ok[i])))
      fail_msg("refused: %s", ok[i]);
}

static void test_valid__refuses_broken_and_hostile(void **state) {
  static const char *const bad[] = {"",
                                    "{",
                                    "{\"a\":}",
                                    "{\"a\" 1}",
                                    "[1,]",
                                    "{,}",
                                    "01",
                                    "1.",
                                    "-",
                                    ".5",
                                    "tru",
                                    "nul",
                                    "\"abc",
                                    "\"\\x\"",
                                    "\"\\u12\"",
                                    "{} {}",
                                    "{'a':1}",
                                    "[1 2]",
                                    "{\"a\":1,}",
                                    "\"\x01\"",
                                    "\"\xff\"",
                                    "\"\xc0\xaf\"",
                                    "\"\xed\xa0\x80\"",
                                    "\"\xf4\x90\x80\x80\"",
                                    "\"\xe2\x82\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (json_valid(bad[i], strlen(bad[i])))
      fail_msg("accepted: %s", bad[i]);
  /* Deep nesting is refused, not a stack overflow. */
  char deep[10001];
  memset(deep, '[', 10000);
  deep[10000] = 0;
  assert_false(json_valid(deep, 10000));
  /* Embedded NUL inside a string is a control character. */
  assert_false(json_valid("\"a\0b\"", 5));
  assert_false(json_valid(NULL, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writer__commas_nesting_and_types),
      cmocka_unit_test(test_writer__escapes_hostile_strings),
      cmocka_unit_test(test_writer__unbalanced_or_too_deep_fails),
      cmocka_unit_test(test_writer__limit_turns_into_error),
      cmocka_unit_test(test_valid__accepts_rfc8259),
      cmocka_unit_test(test_valid__refuses_broken_and_hostile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
