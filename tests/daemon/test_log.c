/* test_log.c: logfmt lines, quoting, reopen, and whole lines from threads. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_log_quote__plain_and_special(void **state) {
  char b[64];
  assert_string_equal(log_quote(b, sizeof b, "plain"), "plain");
  assert_string_equal(log_quote(b, sizeof b, ""), "\"\"");
  assert_string_equal(log_quote(b, sizeof b, "a b"), "\"a b\"");
  assert_string_equal(log_quote(b, sizeof b, "k=v"), "\"k=v\"");
  assert_string_equal(log_quote(b, sizeof b, "say \"hi\"\n"),
                      "\"say \\\"hi\\\"\\n\"");
  char small[12];
  log_quote(small, sizeof small, "a very long value indeed");
  assert_true(strlen(small) < sizeof small);
  assert_non_null(strstr(small, "...\""));
}

static void test_log_msg__logfmt_line_and_reopen(void **state) {
  char path[] = "/tmp/test_log_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(log_open(path), 0);
  log_info("listening", "agent=%s http=%s", "127.0.0.1:1", "127.0.0.1:2");
  log_debug("hidden", NULL);
  char moved[64];
  snprintf(moved, sizeof moved, "%s.1", path);
  assert_int_equal(rename(path, moved), 0);
  assert_int_equal(log_reopen(), 0);
  log_warn("after rotate", "n=%d", 3);
  log_close();

  char *old = slurp(moved);
  assert_non_null(old);
  assert_non_null(strstr(old, " level=info msg=listening agent=127.0.0.1:1 "
                              "http=127.0.0.1:2\n"));
  assert_true(strncmp(old, "ts=20", 5) == 0);
  assert_null(strstr(old, "hidden"));
  char *cur = slurp(path);
  assert_non_null(cur);
  assert_non_null(strstr(cur, "level=warn msg=\"after rotate\" n=3\n"));
  unlink(path);
  unlink(moved);
}

static void *spam(void *arg) {
  for (int i = 0; i < 500; i++)
    log_info("spam", "thread=%d i=%d pad=%s", (int)(intptr_t)arg, i,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  return NULL;
}

static void test_log_msg__threads_never_mix_lines(void **state) {
  char path[] = "/tmp/test_log_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(log_open(path), 0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, spam, (void *)(intptr_t)i), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  log_close();
  char *all = slurp(path);
  int lines = 0;
  for (char *l = all; *l; lines++) {
    char *nl = strchr(l, '\n');
    assert_non_null(nl);
    *nl = '\0';
    assert_true(strncmp(l, "ts=", 3) == 0);
    assert_non_null(strstr(l, " msg=spam thread="));
    assert_non_null(strstr(l, "xxxxxxxx"));
    l = nl + 1;
  }
  assert_int_equal(lines, 2000);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_quote__plain_and_special),
      cmocka_unit_test(test_log_msg__logfmt_line_and_reopen),
      cmocka_unit_test(test_log_msg__threads_never_mix_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
