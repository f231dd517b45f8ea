/* test_secret.c: token files and environment (daemon/secret.c), and the
 * list option behind --cors-origin (daemon/conf.c). Real files in a temp
 * directory. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "gtp_error.h"
#include "secret.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gt-secret-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char *put(const char *name, const char *text, size_t len,
                       mode_t mode) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  fclose(f);
  assert_int_equal(chmod(path, mode), 0);
  return path;
}

static void test_read_file__private_file_gives_its_line(void **state) {
  (void)state;
  char *t = NULL, *cause = NULL;
  const char *p = put("ok", "  s3cret \r\n", 11, 0600);
  assert_int_equal(secret_read_file(p, &t, &cause), 0);
  assert_string_equal(t, "s3cret");
  free(t);
  /* Group read is fine (a group of service accounts). */
  p = put("grp", "abc", 3, 0640);
  assert_int_equal(secret_read_file(p, &t, &cause), 0);
  assert_string_equal(t, "abc");
  free(t);
}

static void test_read_file__readable_by_others_is_refused_with_the_fix(
    void **state) {
  (void)state;
  static const mode_t bad[] = {0644, 0604, 0602, 0620, 0666};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *t = NULL, *cause = NULL;
    const char *p = put("open", "s3cret-open\n", 12, bad[i]);
    assert_int_equal(secret_read_file(p, &t, &cause), GTP_E_BADARG);
    assert_null(t);
    assert_non_null(cause);
    assert_non_null(strstr(cause, "chmod 600"));
    assert_null(strstr(cause, "s3cret")); /* never the token */
    free(cause);
  }
}

static void test_read_file__bad_contents_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *text;
    size_t len;
    const char *why;
  } bad[] = {
      {"", 0, "empty"},
      {" \n\n", 3, "empty"},
      {"a\nb\n", 4, "more than one line"},
      {"a\0b", 3, "NUL"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *t = NULL, *cause = NULL;
    const char *p = put("bad", bad[i].text, bad[i].len, 0600);
    assert_int_equal(secret_read_file(p, &t, &cause), GTP_E_BADARG);
    assert_non_null(strstr(cause, bad[i].why));
    free(cause);
  }
  char *big = malloc(5000);
  memset(big, 'x', 5000);
  char *t = NULL, *cause = NULL;
  const char *p = put("big", big, 5000, 0600);
  free(big);
  assert_int_equal(secret_read_file(p, &t, &cause), GTP_E_BADARG);
  assert_non_null(strstr(cause, "larger"));
  free(cause);
  assert_true(secret_read_file("/nonexistent/token", &t, &cause) < 0);
  assert_non_null(strstr(cause, "/nonexistent/token"));
  free(cause);
}

static void test_resolve__file_then_environment_and_no_both(void **state) {
  (void)state;
  conf c;
  char *cause = NULL;
  const char *p = put("read", "from-file\n", 10, 0600);

  /* The file. */
  conf_init(&c);
  c.read_token_file = strdup(p);
  setenv("GENTRACED_READ_TOKEN", "from-env", 1);
  assert_int_equal(secret_resolve(&c, &cause), 0);
  assert_string_equal(c.read_token, "from-file");
  assert_null(c.token);
  assert_null(getenv("GENTRACED_READ_TOKEN")); /* children never see it */
  conf_fini(&c);

  /* The environment, when no flag nor file. */
  conf_init(&c);
  setenv("GENTRACED_TOKEN", "agent-env", 1);
  setenv("GENTRACED_READ_TOKEN", "read-env", 1);
  assert_int_equal(secret_resolve(&c, &cause), 0);
  assert_string_equal(c.token, "agent-env");
  assert_string_equal(c.read_token, "read-env");
  assert_null(getenv("GENTRACED_TOKEN"));
  conf_fini(&c);

  /* A flag wins over the environment. */
  conf_init(&c);
  c.token = strdup("agent-flag");
  setenv("GENTRACED_TOKEN", "agent-env", 1);
  assert_int_equal(secret_resolve(&c, &cause), 0);
  assert_string_equal(c.token, "agent-flag");
  conf_fini(&c);

  /* A flag and a file for the same token: refused, naming both. */
  conf_init(&c);
  c.read_token = strdup("x");
  c.read_token_file = strdup(p);
  assert_int_equal(secret_resolve(&c, &cause), GTP_E_BADARG);
  assert_non_null(strstr(cause, "--read-token and --read-token-file"));
  free(cause);
  conf_fini(&c);
}

static void test_conf__cors_origin_is_a_list(void **state) {
  (void)state;
  conf c;
  char *cause = NULL;
  conf_init(&c);
  assert_null(c.cors_origins); /* CORS off by default */
  char *argv[] = {"gentraced", "--cors-origin", "https://ui.perfetto.dev",
                  "--cors-origin=http://a.example,http://b.example", NULL};
  assert_int_equal(conf_parse_args(&c, 4, argv, &cause), CONF_RUN);
  assert_string_equal(c.cors_origins, "https://ui.perfetto.dev,"
                                      "http://a.example,http://b.example");
  conf_fini(&c);
  static const char *const bad[] = {"", "a,,b", ",a", "a b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conf_init(&c);
    char *av[] = {"gentraced", "--cors-origin", (char *)bad[i], NULL};
    assert_int_equal(conf_parse_args(&c, 3, av, &cause), GTP_E_BADARG);
    assert_non_null(strstr(cause, "--cors-origin"));
    free(cause);
    conf_fini(&c);
  }
}

static void test_private_files__creates_0600_and_tightens(void **state) {
  (void)state;
  char db[128], wal[140];
  snprintf(db, sizeof db, "%s/new.db", dir);
  char *cause = NULL;
  assert_int_equal(secret_private_files(db, &cause), 0);
  struct stat st;
  assert_int_equal(stat(db, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(chmod(db, 0644), 0);
  snprintf(wal, sizeof wal, "%s-wal", db);
  put("new.db-wal", "", 0, 0664);
  assert_int_equal(secret_private_files(db, &cause), 2);
  assert_int_equal(stat(db, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(stat(wal, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(secret_private_files(db, &cause), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_file__private_file_gives_its_line),
      cmocka_unit_test(
          test_read_file__readable_by_others_is_refused_with_the_fix),
      cmocka_unit_test(test_read_file__bad_contents_are_refused),
      cmocka_unit_test(test_resolve__file_then_environment_and_no_both),
      cmocka_unit_test(test_conf__cors_origin_is_a_list),
      cmocka_unit_test(test_private_files__creates_0600_and_tightens),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
