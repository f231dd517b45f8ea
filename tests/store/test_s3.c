/* test_s3.c: the S3 client (store/s3.c) against a real Swift s3api server
 * (started by tests/store/test_shared.sh through scripts/cluster-up; the
 * environment names it). Skips when no endpoint is set. */
#include "config.h"

#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "s3.h"

static char objects_url[256];

/* Asserts success and shows the client's message when it is not. */
#define OK(call)                                                               \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != 0)                                                              \
      fail_msg("%s: %d %s", #call, rc_, cause ? cause : "");                   \
  } while (0)

static s3 *open_client(void) {
  s3_config cfg = {.url = objects_url};
  s3 *c = NULL;
  char *cause = NULL;
  int rc = s3_open(&cfg, &c, &cause);
  if (rc != 0)
    fail_msg("s3_open: %s", cause ? cause : "?");
  return c;
}

/* A key no earlier run or test used. */
static void fresh_key(char *out, size_t cap, const char *what) {
  static unsigned n;
  snprintf(out, cap, "t/%s-%ld-%u", what, (long)getpid(), n++);
}

static void fill(uint8_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    b[i] = (uint8_t)(seed >> 16);
  }
}

static void test_s3__put_then_get_returns_the_same_bytes(void **state) {
  s3 *c = open_client();
  char key[128], *cause = NULL;
  fresh_key(key, sizeof key, "roundtrip");
  size_t n = (3u << 20) + 17; /* bigger than one curl buffer */
  uint8_t *data = malloc(n);
  fill(data, n, 7);
  OK(s3_put(c, key, data, n, &cause));
  uint8_t *got = NULL;
  size_t gn = 0;
  int rc = s3_get(c, key, 0, 0, n, &got, &gn, &cause);
  if (rc)
    fail_msg("get: %s", cause);
  assert_int_equal(gn, n);
  assert_memory_equal(got, data, n);
  free(got);
  uint64_t size = 0;
  OK(s3_head(c, key, &size, &cause));
  assert_int_equal(size, n);
  free(data);
  s3_close(c);
}

static void test_s3__ranged_get_returns_exactly_the_slice(void **state) {
  s3 *c = open_client();
  char key[128], *cause = NULL;
  fresh_key(key, sizeof key, "range");
  uint8_t data[10000];
  fill(data, sizeof data, 3);
  OK(s3_put(c, key, data, sizeof data, &cause));
  uint8_t *got = NULL;
  size_t gn = 0;
  OK(s3_get(c, key, 1234, 4321, 1 << 20, &got, &gn, &cause));
  assert_int_equal(gn, 4321);
  assert_memory_equal(got, data + 1234, 4321);
  free(got);
  /* The last byte alone. */
  OK(s3_get(c, key, 9999, 1, 1 << 20, &got, &gn, &cause));
  assert_int_equal(gn, 1);
  assert_int_equal(got[0], data[9999]);
  free(got);
  /* A range running past the end is short: an error, never a short buffer. */
  int rc = s3_get(c, key, 9000, 2000, 1 << 20, &got, &gn, &cause);
  assert_int_equal(rc, GTP_E_TRUNC);
  assert_null(got);
  assert_non_null(cause);
  free(cause);
  /* A range wholly past the end: 416 from the server. */
  rc = s3_get(c, key, 20000, 10, 1 << 20, &got, &gn, &cause);
  assert_true(rc == GTP_E_TRUNC);
  free(cause);
  s3_close(c);
}

static void test_s3__body_over_the_bound_is_toobig(void **state) {
  s3 *c = open_client();
  char key[128], *cause = NULL;
  fresh_key(key, sizeof key, "bound");
  uint8_t data[100000];
  fill(data, sizeof data, 9);
  OK(s3_put(c, key, data, sizeof data, &cause));
  uint8_t *got = NULL;
  size_t gn = 0;
  assert_int_equal(s3_get(c, key, 0, 0, 50000, &got, &gn, &cause),
                   GTP_E_TOOBIG);
  assert_null(got);
  free(cause);
  /* A range longer than the bound is refused before any request. */
  assert_int_equal(s3_get(c, key, 0, 60000, 50000, &got, &gn, &cause),
                   GTP_E_TOOBIG);
  free(cause);
  s3_close(c);
}

static void
test_s3__absent_object_is_notfound_and_delete_is_idempotent(void **state) {
  s3 *c = open_client();
  char key[128], *cause = NULL;
  fresh_key(key, sizeof key, "gone");
  uint8_t *got = NULL;
  size_t gn = 0;
  assert_int_equal(s3_get(c, key, 0, 0, 1024, &got, &gn, &cause),
                   GTP_E_NOTFOUND);
  free(cause);
  assert_int_equal(s3_head(c, key, NULL, &cause), GTP_E_NOTFOUND);
  free(cause);
  OK(s3_put(c, key, "abc", 3, &cause));
  OK(s3_delete(c, key, &cause));
  assert_int_equal(s3_head(c, key, NULL, &cause), GTP_E_NOTFOUND);
  free(cause);
  OK(s3_delete(c, key, &cause));
  s3_close(c);
}

typedef struct listed {
  char key[8][128];
  uint64_t size[8];
  int n;
} listed;
static int collect_key(void *ctx, const char *key, uint64_t size) {
  listed *l = ctx;
  if (l->n < 8) {
    snprintf(l->key[l->n], sizeof l->key[0], "%s", key);
    l->size[l->n++] = size;
  }
  return 0;
}

static void test_s3__list_names_the_keys_under_a_prefix_in_order(void **state) {
  char url[300], dir[64], key[128], *cause = NULL;
  snprintf(url, sizeof url, "%s/lp%ld/", objects_url, (long)getpid());
  s3_config cfg = {.url = url};
  s3 *c = NULL;
  OK(s3_open(&cfg, &c, &cause));
  snprintf(dir, sizeof dir, "segments/d-%ld", (long)getpid());
  /* Three under dir/ (put out of order), one beside it. */
  const char *names[] = {"b.gts", "a.gts", "c/d.gts"};
  for (int i = 0; i < 3; i++) {
    snprintf(key, sizeof key, "%s/%s", dir, names[i]);
    OK(s3_put(c, key, "0123456789", (size_t)(3 + i), &cause));
  }
  OK(s3_put(c, "segments/other.gts", "x", 1, &cause));
  listed l = {.n = 0};
  char pre[80];
  snprintf(pre, sizeof pre, "%s/", dir);
  OK(s3_list(c, pre, collect_key, &l, &cause));
  assert_int_equal(l.n, 3);
  snprintf(key, sizeof key, "%s/a.gts", dir);
  assert_string_equal(l.key[0], key); /* relative to the client's prefix */
  assert_int_equal(l.size[0], 4);
  snprintf(key, sizeof key, "%s/b.gts", dir);
  assert_string_equal(l.key[1], key);
  assert_int_equal(l.size[1], 3);
  snprintf(key, sizeof key, "%s/c/d.gts", dir);
  assert_string_equal(l.key[2], key);
  /* Nothing under an unused prefix; a bad prefix is refused. */
  l.n = 0;
  OK(s3_list(c, "nothing-here/", collect_key, &l, &cause));
  assert_int_equal(l.n, 0);
  assert_int_equal(s3_list(c, "../x", collect_key, &l, &cause), GTP_E_BADARG);
  free(cause);
  s3_close(c);
}

static void test_s3__prefix_places_objects_under_it(void **state) {
  char url[300], key[128], *cause = NULL;
  snprintf(url, sizeof url, "%s/pre/fix/", objects_url);
  s3_config cfg = {.url = url};
  s3 *p = NULL;
  OK(s3_open(&cfg, &p, &cause));
  assert_string_equal(s3_prefix(p), "pre/fix/");
  fresh_key(key, sizeof key, "prefixed");
  OK(s3_put(p, key, "hello", 5, &cause));
  s3 *c = open_client();
  char full[200];
  snprintf(full, sizeof full, "pre/fix/%s", key);
  uint8_t *got = NULL;
  size_t gn = 0;
  OK(s3_get(c, full, 0, 0, 100, &got, &gn, &cause));
  assert_int_equal(gn, 5);
  assert_memory_equal(got, "hello", 5);
  free(got);
  s3_close(c);
  s3_close(p);
}

static void
test_s3__bad_keys_and_urls_are_refused_without_a_request(void **state) {
  s3 *c = open_client();
  char *cause = NULL;
  const char *bad[] = {"", "/abs", "a/../b", "sp ace", "q?x", "h#", "%41"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(s3_put(c, bad[i], "x", 1, &cause), GTP_E_BADARG);
    free(cause);
    cause = NULL;
  }
  s3_close(c);
  const char *urls[] = {"http://x/y", "s3://", "s3://AB", "s3://a_b_c",
                        "s3://ok-bucket/bad prefix"};
  for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
    s3_config cfg = {.url = urls[i]};
    s3 *x = NULL;
    assert_int_equal(s3_open(&cfg, &x, &cause), GTP_E_BADARG);
    assert_null(x);
    assert_non_null(cause);
    free(cause);
    cause = NULL;
  }
}

static void test_s3__wrong_secret_is_auth(void **state) {
  s3_config cfg = {.url = objects_url, .secret_key = "not-the-secret"};
  s3 *c = NULL;
  char *cause = NULL;
  OK(s3_open(&cfg, &c, &cause));
  assert_int_equal(s3_put(c, "t/denied", "x", 1, &cause), GTP_E_AUTH);
  assert_non_null(strstr(cause, "403"));
  free(cause);
  assert_int_equal(s3_check(c, &cause), GTP_E_AUTH);
  free(cause);
  s3_close(c);
}

static void test_s3__unreachable_endpoint_is_unavail_and_quick(void **state) {
  /* A port that was free a moment ago: nothing listens there. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  close(fd);
  char ep[64];
  snprintf(ep, sizeof ep, "http://127.0.0.1:%d", ntohs(a.sin_port));
  s3_config cfg = {.url = objects_url,
                   .endpoint = ep,
                   .connect_timeout_ms = 500,
                   .timeout_ms = 2000};
  s3 *c = NULL;
  char *cause = NULL;
  OK(s3_open(&cfg, &c, &cause));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(s3_put(c, "t/x", "x", 1, &cause), GTP_E_UNAVAIL);
  assert_non_null(cause);
  free(cause);
  assert_int_equal(s3_check(c, &cause), GTP_E_UNAVAIL);
  free(cause);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_true(t1.tv_sec - t0.tv_sec < 10);
  s3_close(c);
}

static void
test_s3__create_bucket_is_idempotent_and_check_sees_it(void **state) {
  char url[128], *cause = NULL;
  snprintf(url, sizeof url, "s3://gt-test-%ld", (long)getpid());
  s3_config cfg = {.url = url};
  s3 *c = NULL;
  OK(s3_open(&cfg, &c, &cause));
  assert_int_equal(s3_check(c, &cause), GTP_E_NOTFOUND);
  free(cause);
  int rc = s3_create_bucket(c, &cause);
  if (rc)
    fail_msg("create: %s", cause);
  OK(s3_create_bucket(c, &cause));
  OK(s3_check(c, &cause));
  s3_close(c);
}

int main(void) {
  const char *b = getenv("GENTRACE_OBJECTS");
  if (!getenv("AWS_ENDPOINT_URL") || !b) {
    printf("SKIP: no S3 endpoint (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  snprintf(objects_url, sizeof objects_url, "%s", b);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_s3__put_then_get_returns_the_same_bytes),
      cmocka_unit_test(test_s3__ranged_get_returns_exactly_the_slice),
      cmocka_unit_test(test_s3__body_over_the_bound_is_toobig),
      cmocka_unit_test(
          test_s3__absent_object_is_notfound_and_delete_is_idempotent),
      cmocka_unit_test(test_s3__prefix_places_objects_under_it),
      cmocka_unit_test(test_s3__list_names_the_keys_under_a_prefix_in_order),
      cmocka_unit_test(
          test_s3__bad_keys_and_urls_are_refused_without_a_request),
      cmocka_unit_test(test_s3__wrong_secret_is_auth),
      cmocka_unit_test(test_s3__unreachable_endpoint_is_unavail_and_quick),
      cmocka_unit_test(test_s3__create_bucket_is_idempotent_and_check_sees_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
