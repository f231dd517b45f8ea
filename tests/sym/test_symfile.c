/* test_symfile.c: which files the symbolizer may open (sym/symfile.c):
 * module paths from agents are hostile, so devices, FIFOs, /proc, files
 * outside the allowed roots (symlinks resolved) and oversized files are
 * refused before anything reads them; the build-id tree's layout. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "self_module.h"
#include "symfile.h"

static char root[64], outside[64];

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/gt-symfile-XXXXXX");
  snprintf(outside, sizeof outside, "/tmp/gt-symout-XXXXXX");
  if (!mkdtemp(root) || !mkdtemp(outside))
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, outside);
  return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++)
    fputc('x', f);
  assert_int_equal(fclose(f), 0);
}

static void rules_parse_and_refuse_bad_values(void **state) {
  (void)state;
  symfile_rules r;
  char *cause = NULL;
  const char *bad[] = {"maybe", "/no/such/dir", "relative/dir", ":", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(symfile_rules_init(&r, NULL, bad[i], 1 << 20, &cause),
                     GTP_E_BADARG);
    assert_non_null(cause);
    assert_non_null(strstr(cause, "--symbols-from-host"));
    free(cause);
    cause = NULL;
  }
  assert_int_equal(symfile_rules_init(&r, "/no/such/dir", "yes", 1, &cause),
                   GTP_E_BADARG);
  assert_non_null(strstr(cause, "--symbols"));
  free(cause);
  cause = NULL;
  assert_int_equal(symfile_rules_init(&r, NULL, "no", 1, &cause), 0);
  assert_int_equal(r.from_host, 0);
  symfile_rules_fini(&r);
  assert_int_equal(symfile_rules_init(&r, root, "yes", 1, &cause), 0);
  assert_int_equal(r.from_host, 1);
  assert_int_equal(r.nroots, 0);
  symfile_rules_fini(&r);
  char two[160];
  snprintf(two, sizeof two, "%s:%s", root, outside);
  assert_int_equal(symfile_rules_init(&r, NULL, two, 1, &cause), 0);
  assert_int_equal(r.nroots, 2);
  symfile_rules_fini(&r);
}

/* Expects path to be refused with a reason containing why. */
static void refused(const symfile_rules *r, const char *path, size_t len,
                    const char *why) {
  int fd = -1;
  uint64_t size;
  const char *got = NULL;
  assert_int_equal(symfile_open_host(r, path, len, &fd, &size, &got), -1);
  assert_int_equal(fd, -1);
  if (!got || !strstr(got, why))
    fail_msg("%s: refused for \"%s\", want \"%s\"", path, got ? got : "?", why);
}

static void hostile_module_paths_are_refused(void **state) {
  (void)state;
  symfile_rules r;
  char *cause = NULL;
  assert_int_equal(symfile_rules_init(&r, NULL, "yes", 64, &cause), 0);
  refused(&r, "relative/x", 10, "absolute");
  refused(&r, "/tmp/a\0b", 8, "absolute"); /* a NUL inside */
  refused(&r, "", 0, "absolute");
  refused(&r, "/proc/self/exe", 14, "/proc");
  refused(&r, "/proc/self/mem", 14, "/proc");
  refused(&r, "/dev/zero", 9, "/dev");
  refused(&r, "/sys/kernel/notes", 17, "/sys");
  refused(&r, "/no/such/file", 13, "missing");
  char p[200];
  /* A FIFO is never opened (opening it would block the request). */
  snprintf(p, sizeof p, "%s/fifo", root);
  assert_int_equal(mkfifo(p, 0600), 0);
  refused(&r, p, strlen(p), "not a regular file");
  refused(&r, root, strlen(root), "not a regular file");
  /* Larger than the cache may hold. */
  snprintf(p, sizeof p, "%s/big", root);
  write_file(p, 100);
  refused(&r, p, strlen(p), "larger");
  /* A small regular file is opened (its build id is the caller's check). */
  snprintf(p, sizeof p, "%s/small", root);
  write_file(p, 10);
  int fd = -1;
  uint64_t size = 0;
  const char *why = NULL;
  assert_int_equal(symfile_open_host(&r, p, strlen(p), &fd, &size, &why), 0);
  assert_true(fd >= 0);
  assert_int_equal(size, 10);
  close(fd);
  symfile_rules_fini(&r);

  /* Host files off: even the good file is refused. */
  assert_int_equal(symfile_rules_init(&r, NULL, "no", 64, &cause), 0);
  refused(&r, p, strlen(p), "off");
  symfile_rules_fini(&r);
}

static void roots_hold_after_symlinks_are_resolved(void **state) {
  (void)state;
  char in[200], out[200], link[200], sibling[200];
  snprintf(in, sizeof in, "%s/in", root);
  snprintf(out, sizeof out, "%s/secret", outside);
  snprintf(link, sizeof link, "%s/link", root);
  write_file(in, 10);
  write_file(out, 10);
  assert_int_equal(symlink(out, link), 0);
  symfile_rules r;
  char *cause = NULL;
  assert_int_equal(symfile_rules_init(&r, NULL, root, 64, &cause), 0);
  int fd = -1;
  uint64_t size;
  const char *why;
  assert_int_equal(symfile_open_host(&r, in, strlen(in), &fd, &size, &why), 0);
  close(fd);
  refused(&r, out, strlen(out), "outside the allowed roots");
  refused(&r, link, strlen(link), "outside the allowed roots");
  /* ".." cannot climb out, and a sibling whose name starts like the root
   * is not inside it. */
  char up[300];
  snprintf(up, sizeof up, "%s/../%s/secret", root, strrchr(outside, '/') + 1);
  refused(&r, up, strlen(up), "outside the allowed roots");
  snprintf(sibling, sizeof sibling, "%sx", root);
  write_file(sibling, 10);
  refused(&r, sibling, strlen(sibling), "outside the allowed roots");
  unlink(sibling);
  symfile_rules_fini(&r);
}

static void build_id_tree_layout_and_check(void **state) {
  (void)state;
  self_module s;
  assert_int_equal(self_module_get(&s, ""), 0);
  char hex[2 * GTP_BUILDID_MAX + 1];
  for (size_t i = 0; i < s.m.build_id_len; i++)
    snprintf(hex + 2 * i, 3, "%02x", s.bid[i]);
  char dir[600], path[1200], cmd[6000];
  snprintf(dir, sizeof dir, "%s/tree/.build-id/%.2s", root, hex);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
  assert_int_equal(system(cmd), 0);
  snprintf(path, sizeof path, "%s/%s.debug", dir, hex + 2);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", s.path, path);
  assert_int_equal(system(cmd), 0);
  snprintf(dir, sizeof dir, "%s/tree", root);
  symfile_rules r;
  char *cause = NULL;
  assert_int_equal(symfile_rules_init(&r, dir, "no", 1u << 30, &cause), 0);
  int fd = -1;
  uint64_t size;
  /* The .debug file is there, the plain binary is not. */
  assert_int_equal(
      symfile_open_tree(&r, s.bid, s.m.build_id_len, "", &fd, &size), -1);
  assert_int_equal(
      symfile_open_tree(&r, s.bid, s.m.build_id_len, ".debug", &fd, &size), 0);
  assert_int_equal(symfile_build_id_is(fd, s.bid, s.m.build_id_len), 1);
  s.bid[5] ^= 1;
  assert_int_equal(symfile_build_id_is(fd, s.bid, s.m.build_id_len), 0);
  close(fd);
  /* Another build id finds nothing; a 1-byte one is not a path. */
  assert_int_equal(
      symfile_open_tree(&r, s.bid, s.m.build_id_len, ".debug", &fd, &size), -1);
  assert_int_equal(symfile_open_tree(&r, s.bid, 1, ".debug", &fd, &size), -1);
  symfile_rules_fini(&r);
  /* A non-ELF file has no build id. */
  snprintf(path, sizeof path, "%s/notelf", root);
  write_file(path, 100);
  fd = open(path, O_RDONLY);
  assert_true(fd >= 0);
  assert_int_equal(symfile_build_id_is(fd, s.bid, s.m.build_id_len), 0);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rules_parse_and_refuse_bad_values),
      cmocka_unit_test(hostile_module_paths_are_refused),
      cmocka_unit_test(roots_hold_after_symlinks_are_resolved),
      cmocka_unit_test(build_id_tree_layout_and_check),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
