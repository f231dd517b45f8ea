/* test_conf.c: flags, config file, sizes, durations and addresses. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "conf.h"
#include "gtp_error.h"

static void test_conf_init__defaults_match_design(void **state) {
  conf c;
  conf_init(&c);
  assert_string_equal(c.agent_listen.host, "127.0.0.1");
  assert_int_equal(c.agent_listen.port, 7170);
  assert_int_equal(c.http_listen.port, 7171);
  assert_string_equal(c.db, "./gentrace.db");
  assert_null(c.token);
  assert_int_equal(c.max_connections, 16384);
  assert_int_equal(c.max_conns_per_ip, 256);
  assert_int_equal(c.max_conn_buffer, 64ull << 20);
  assert_int_equal(c.max_buffer, 512ull << 20);
  assert_int_equal(c.max_frame, 1u << 20);
  assert_int_equal(c.max_gen_size, 64ull << 20);
  assert_int_equal(c.max_window_bytes, 1ull << 30);
  assert_int_equal(c.handshake_timeout_ns, 10000000000ll);
  assert_int_equal(c.idle_timeout_ns, 60000000000ll);
  assert_int_equal(c.sync_full, 0);
  assert_int_equal(c.commit_linger_ns, 20000000ll);
  assert_int_equal(c.loop_coalesce_ns, 2000000ll);
  conf_fini(&c);
}

static void test_conf_parse_size__suffixes(void **state) {
  uint64_t v;
  assert_int_equal(conf_parse_size("0", &v), 0);
  assert_int_equal(v, 0);
  assert_int_equal(conf_parse_size("64K", &v), 0);
  assert_int_equal(v, 65536);
  assert_int_equal(conf_parse_size("512M", &v), 0);
  assert_int_equal(v, 512ull << 20);
  assert_int_equal(conf_parse_size("10G", &v), 0);
  assert_int_equal(v, 10ull << 30);
  assert_int_equal(conf_parse_size("2GiB", &v), 0);
  assert_int_equal(v, 2ull << 30);
  assert_int_equal(conf_parse_size("1t", &v), 0);
  assert_int_equal(v, 1ull << 40);
}

static void test_conf_parse_size__garbage_is_badarg(void **state) {
  uint64_t v = 7;
  assert_int_equal(conf_parse_size("", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("G", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("10X", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("-1", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("10G ", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("99999999999999999999", &v), GTP_E_BADARG);
  assert_int_equal(conf_parse_size("99999999999T", &v), GTP_E_BADARG);
  assert_int_equal(v, 7);
}

static void expect_text_error(const char *text, const char *want);

static void test_conf_parse_duration__units(void **state) {
  int64_t ns;
  assert_int_equal(conf_parse_duration("30s", &ns), 0);
  assert_int_equal(ns, 30000000000ll);
  assert_int_equal(conf_parse_duration("5m", &ns), 0);
  assert_int_equal(ns, 300000000000ll);
  assert_int_equal(conf_parse_duration("1h", &ns), 0);
  assert_int_equal(ns, 3600000000000ll);
  assert_int_equal(conf_parse_duration("7d", &ns), 0);
  assert_int_equal(ns, 7 * 86400000000000ll);
  assert_int_equal(conf_parse_duration("250ms", &ns), 0);
  assert_int_equal(ns, 250000000ll);
  assert_int_equal(conf_parse_duration("1h30m", &ns), 0);
  assert_int_equal(ns, 5400000000000ll);
  assert_int_equal(conf_parse_duration("1.5s", &ns), 0);
  assert_int_equal(ns, 1500000000ll);
  assert_int_equal(conf_parse_duration("0", &ns), 0);
  assert_int_equal(ns, 0);
}

/* Issue 13: one duration grammar everywhere; a bare number is ambiguous
 * (seconds? minutes?) and refused, with a hint naming the unit to add. */
static void
test_conf_parse_duration__bare_number_is_refused_with_hint(void **state) {
  int64_t ns = 7;
  assert_int_equal(conf_parse_duration("12", &ns), GTP_E_BADARG);
  assert_int_equal(ns, 7);
  expect_text_error("retain = 3600\n",
                    "etc/g.conf:1: retain: \"3600\" has no unit: write 3600s");
}

static void test_conf_parse_duration__garbage_is_badarg(void **state) {
  int64_t ns;
  assert_int_equal(conf_parse_duration("", &ns), GTP_E_BADARG);
  assert_int_equal(conf_parse_duration("5 m", &ns), GTP_E_BADARG);
  assert_int_equal(conf_parse_duration("1w", &ns), GTP_E_BADARG);
  assert_int_equal(conf_parse_duration("s", &ns), GTP_E_BADARG);
  assert_int_equal(conf_parse_duration("999999999999d", &ns), GTP_E_BADARG);
}

static void test_conf_parse_addr__forms(void **state) {
  conf_addr a;
  char buf[300];
  assert_int_equal(conf_parse_addr("0.0.0.0:0", &a), 0);
  assert_string_equal(a.host, "0.0.0.0");
  assert_int_equal(a.port, 0);
  assert_int_equal(conf_parse_addr(":7000", &a), 0);
  assert_string_equal(a.host, "127.0.0.1");
  assert_int_equal(a.port, 7000);
  assert_int_equal(conf_parse_addr("[::1]:99", &a), 0);
  assert_string_equal(a.host, "::1");
  conf_addr_format(&a, buf, sizeof buf);
  assert_string_equal(buf, "[::1]:99");
  assert_int_equal(conf_parse_addr("localhost", &a), GTP_E_BADARG);
  assert_int_equal(conf_parse_addr("h:65536", &a), GTP_E_BADARG);
  assert_int_equal(conf_parse_addr("::1:80", &a), GTP_E_BADARG);
  assert_int_equal(conf_parse_addr("h:8x", &a), GTP_E_BADARG);
}

#define ARGV(...)                                                              \
  char *argv[] = {"gentraced", __VA_ARGS__};                                   \
  int argc = (int)(sizeof argv / sizeof argv[0])

static void test_conf_parse_args__flags_both_forms(void **state) {
  conf c;
  char *cause = NULL;
  conf_init(&c);
  ARGV("--agent-listen", "127.0.0.1:0", "--http-listen=127.0.0.1:0", "--db",
       "/tmp/x.db", "--retain=7d", "--max-db-size", "10G", "--sync", "full",
       "--token", "s3cret", "--max-frame", "512K", "--idle-timeout", "5s",
       "--commit-linger", "0", "--loop-coalesce", "0");
  assert_int_equal(conf_parse_args(&c, argc, argv, &cause), CONF_RUN);
  assert_null(cause);
  assert_int_equal(c.agent_listen.port, 0);
  assert_int_equal(c.http_listen.port, 0);
  assert_string_equal(c.db, "/tmp/x.db");
  assert_int_equal(c.retain_ns, 7 * 86400000000000ll);
  assert_int_equal(c.max_db_size, 10ull << 30);
  assert_int_equal(c.sync_full, 1);
  assert_string_equal(c.token, "s3cret");
  assert_int_equal(c.max_frame, 524288);
  assert_int_equal(c.idle_timeout_ns, 5000000000ll);
  assert_int_equal(c.commit_linger_ns, 0);
  assert_int_equal(c.loop_coalesce_ns, 0);
  conf_fini(&c);
}

/* --tls-require-service-san is a flag without a value: it must not eat
 * the next flag; in a config file it takes yes/no. */
static void test_conf_parse_args__tls_flags(void **state) {
  (void)state;
  conf c;
  char *cause = NULL;
  conf_init(&c);
  ARGV("--tls-cert", "/x/c.pem", "--tls-require-service-san", "--tls-key",
       "/x/k.pem", "--tls-client-ca=/x/ca.pem", "--http-tls-client-ca",
       "/x/hca.pem");
  assert_int_equal(conf_parse_args(&c, argc, argv, &cause), CONF_RUN);
  assert_null(cause);
  assert_string_equal(c.tls_cert, "/x/c.pem");
  assert_string_equal(c.tls_key, "/x/k.pem");
  assert_string_equal(c.tls_client_ca, "/x/ca.pem");
  assert_string_equal(c.http_tls_client_ca, "/x/hca.pem");
  assert_int_equal(c.tls_require_service_san, 1);
  conf_fini(&c);

  conf_init(&c);
  assert_int_equal(
      conf_parse_text(&c, "t.conf", "tls-require-service-san = no\n", &cause),
      0);
  assert_int_equal(c.tls_require_service_san, 0);
  assert_true(conf_parse_text(&c, "t.conf", "tls-require-service-san = maybe\n",
                              &cause) < 0);
  assert_non_null(strstr(cause, "t.conf:1"));
  free(cause);
  conf_fini(&c);
}

static void test_conf_parse_args__help_and_version(void **state) {
  conf c;
  char *cause = NULL;
  conf_init(&c);
  {
    ARGV("--db", "x", "--help");
    assert_int_equal(conf_parse_args(&c, argc, argv, &cause), CONF_HELP);
  }
  {
    ARGV("--version");
    assert_int_equal(conf_parse_args(&c, argc, argv, &cause), CONF_VERSION);
  }
  assert_non_null(strstr(conf_usage(), "--max-conn-buffer SIZE"));
  assert_null(strstr(conf_usage(), "test-store-delay"));
  conf_fini(&c);
}

static void expect_arg_error(const char *want, int argc, char **argv) {
  conf c;
  char *cause = NULL;
  conf_init(&c);
  assert_true(conf_parse_args(&c, argc, argv, &cause) < 0);
  assert_non_null(cause);
  if (strstr(cause, want) == NULL)
    fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
  free(cause);
  conf_fini(&c);
}

static void test_conf_parse_args__errors_name_the_flag(void **state) {
  {
    ARGV("--bogus", "1");
    expect_arg_error("unknown flag \"--bogus\"", argc, argv);
  }
  {
    ARGV("--db");
    expect_arg_error("--db needs a value", argc, argv);
  }
  {
    ARGV("--max-buffer", "lots");
    expect_arg_error("--max-buffer: bad size \"lots\"", argc, argv);
  }
  {
    ARGV("--sync", "sometimes");
    expect_arg_error("--sync: \"sometimes\" is not normal or full", argc, argv);
  }
  {
    ARGV("--max-frame", "2M");
    expect_arg_error("--max-frame: 2M is out of range", argc, argv);
  }
  {
    /* Below the agent's BATCH frame size every agent would be refused. */
    ARGV("--max-frame", "64K");
    expect_arg_error("--max-frame: 64K is out of range", argc, argv);
  }
  {
    /* ACKs wait out the linger: more than a second is a mistake. */
    ARGV("--commit-linger", "2s");
    expect_arg_error("--commit-linger: 2s is out of range", argc, argv);
  }
  {
    ARGV("--loop-coalesce", "1s");
    expect_arg_error("--loop-coalesce: 1s is out of range", argc, argv);
  }
  {
    ARGV("stray");
    expect_arg_error("unexpected argument \"stray\"", argc, argv);
  }
  {
    ARGV("--max-connections", "0");
    expect_arg_error("--max-connections: 0 is out of range", argc, argv);
  }
  {
    ARGV("--max-conns-per-ip", "0");
    expect_arg_error("--max-conns-per-ip: 0 is out of range", argc, argv);
  }
}

static void test_conf_parse_text__keys_comments_quotes(void **state) {
  conf c;
  char *cause = NULL;
  conf_init(&c);
  const char *text = "# gentraced.conf\n"
                     "\n"
                     "db = /var/lib/gentrace/g.db   # trailing comment\n"
                     "  agent-listen=0.0.0.0:7170\r\n"
                     "token = \"a b#c\"\n"
                     "max-gen-size = 16M\n"
                     "handshake-timeout = 2s";
  assert_int_equal(conf_parse_text(&c, "g.conf", text, &cause), 0);
  assert_null(cause);
  assert_string_equal(c.db, "/var/lib/gentrace/g.db");
  assert_string_equal(c.agent_listen.host, "0.0.0.0");
  assert_string_equal(c.token, "a b#c");
  assert_int_equal(c.max_gen_size, 16ull << 20);
  assert_int_equal(c.handshake_timeout_ns, 2000000000ll);
  conf_fini(&c);
}

static void expect_text_error(const char *text, const char *want) {
  conf c;
  char *cause = NULL;
  conf_init(&c);
  assert_int_equal(conf_parse_text(&c, "etc/g.conf", text, &cause),
                   GTP_E_BADARG);
  assert_non_null(cause);
  if (strstr(cause, want) == NULL)
    fail_msg("cause \"%s\" lacks \"%s\"", cause, want);
  free(cause);
  conf_fini(&c);
}

static void test_conf_parse_text__errors_name_file_and_line(void **state) {
  expect_text_error("db = x\nnonsense\n",
                    "etc/g.conf:2: expected `key = value`");
  expect_text_error("# c\n\nfrobnicate = 1\n",
                    "etc/g.conf:3: unknown key \"frobnicate\"");
  expect_text_error("retain = forever\n",
                    "etc/g.conf:1: retain: bad duration \"forever\"");
  expect_text_error("config = other.conf\n", "etc/g.conf:1: config files");
}

static void test_conf_parse_args__command_line_wins_over_file(void **state) {
  char path[] = "/tmp/test_conf_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "db = from-file.db\nmax-buffer = 1G\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);

  conf c;
  char *cause = NULL;
  conf_init(&c);
  /* The flag comes before --config and must still win. */
  ARGV("--db", "from-flag.db", "--config", path);
  assert_int_equal(conf_parse_args(&c, argc, argv, &cause), CONF_RUN);
  assert_string_equal(c.db, "from-flag.db");
  assert_int_equal(c.max_buffer, 1ull << 30);
  assert_string_equal(c.config, path);
  conf_fini(&c);
  unlink(path);
}

static void test_conf_parse_args__missing_config_file_names_it(void **state) {
  ARGV("--config", "/nonexistent/gentraced.conf");
  expect_arg_error("/nonexistent/gentraced.conf: No such file", argc, argv);
}

/* Defaults and parsed values stay within the option table's bounds; a
 * value forced past them is reported (the check can fail). */
static void
test_conf_check_invariants__defaults_parsed_and_broken(void **state) {
  conf c;
  conf_init(&c);
  assert_int_equal(conf_check_invariants(&c), 0);
  char *argv[] = {"gentraced",   "--retain", "1h30m",
                  "--max-frame", "512K",     NULL};
  char *cause = NULL;
  assert_int_equal(conf_parse_args(&c, 5, argv, &cause), CONF_RUN);
  assert_int_equal(c.retain_ns, 5400 * 1000000000ll);
  assert_int_equal(conf_check_invariants(&c), 0);
  c.max_frame = 1;
  assert_int_equal(conf_check_invariants(&c), -2);
  conf_fini(&c);
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: stop at a break */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conf_init__defaults_match_design),
      cmocka_unit_test(test_conf_check_invariants__defaults_parsed_and_broken),
      cmocka_unit_test(test_conf_parse_size__suffixes),
      cmocka_unit_test(test_conf_parse_size__garbage_is_badarg),
      cmocka_unit_test(test_conf_parse_duration__units),
      cmocka_unit_test(test_conf_parse_duration__garbage_is_badarg),
      cmocka_unit_test(
          test_conf_parse_duration__bare_number_is_refused_with_hint),
      cmocka_unit_test(test_conf_parse_addr__forms),
      cmocka_unit_test(test_conf_parse_args__flags_both_forms),
      cmocka_unit_test(test_conf_parse_args__help_and_version),
      cmocka_unit_test(test_conf_parse_args__tls_flags),
      cmocka_unit_test(test_conf_parse_args__errors_name_the_flag),
      cmocka_unit_test(test_conf_parse_text__keys_comments_quotes),
      cmocka_unit_test(test_conf_parse_text__errors_name_file_and_line),
      cmocka_unit_test(test_conf_parse_args__command_line_wins_over_file),
      cmocka_unit_test(test_conf_parse_args__missing_config_file_names_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
