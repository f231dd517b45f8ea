/* symfile.c: see symfile.h for the rule. Stateless apart from the rules
 * themselves, which are fixed at start. */
#include "config.h"

#include "symfile.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gtp_error.h"
#include "text.h"

void symfile_rules_fini(symfile_rules *r) {
  for (size_t i = 0; i < r->nroots; i++)
    free(r->roots[i]);
  free(r->roots);
  free(r->dir);
  memset(r, 0, sizeof *r);
}

/* Adds one allowed root (resolved, so "/opt/app/../x" cannot widen it). */
static int add_root(symfile_rules *r, const char *p, size_t n, char **cause) {
  char want[PATH_MAX], got[PATH_MAX];
  if (n == 0)
    return 0;
  if (n >= sizeof want || p[0] != '/')
    return gtp_causef(cause, GTP_E_BADARG,
                      "--symbols-from-host: \"%.*s\" is not an absolute "
                      "directory (yes, no, or directories separated by ':')",
                      (int)(n > 200 ? 200 : n), p);
  memcpy(want, p, n);
  want[n] = '\0';
  struct stat st;
  if (!realpath(want, got) || stat(got, &st) || !S_ISDIR(st.st_mode))
    return gtp_causef(cause, GTP_E_BADARG,
                      "--symbols-from-host: %s is not a directory", want);
  char **nr = realloc(r->roots, (r->nroots + 1) * sizeof *nr);
  if (!nr)
    return -ENOMEM;
  r->roots = nr;
  if (!(r->roots[r->nroots] = strdup(got)))
    return -ENOMEM;
  r->nroots++;
  return 0;
}

int symfile_rules_init(symfile_rules *r, const char *dir, const char *from_host,
                       uint64_t max_file_bytes, char **cause) {
  memset(r, 0, sizeof *r);
  r->max_file_bytes = max_file_bytes;
  int rc = 0;
  if (dir && dir[0]) {
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
      rc = gtp_causef(cause, GTP_E_BADARG, "--symbols: %s is not a directory",
                      dir);
      goto fail;
    }
    if (!(r->dir = strdup(dir))) {
      rc = -ENOMEM;
      goto fail;
    }
  }
  if (!from_host || !strcmp(from_host, "yes")) {
    r->from_host = 1;
    return 0;
  }
  if (!strcmp(from_host, "no"))
    return 0;
  r->from_host = 1;
  for (const char *p = from_host;;) {
    size_t n = strcspn(p, ":,");
    if ((rc = add_root(r, p, n, cause)) < 0)
      goto fail;
    if (!p[n])
      break;
    p += n + 1;
  }
  if (r->nroots == 0) {
    rc = gtp_causef(cause, GTP_E_BADARG,
                    "--symbols-from-host: expected yes, no or directories");
    goto fail;
  }
  return 0;
fail:
  symfile_rules_fini(r);
  return rc;
}

/* Whether path (resolved) is dir itself or inside it. */
static int under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return 1;
  return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* The kernel's file systems: reading them is never about symbols. */
static int pseudo(const char *path) {
  return under(path, "/proc") || under(path, "/sys") || under(path, "/dev");
}

/* Opens a resolved path that must be a regular file within the size cap:
 * stat first, so no device or FIFO is ever opened, then the same inode. */
static int open_regular(const char *path, uint64_t max, int *fd, uint64_t *size,
                        const char **why) {
  struct stat a, b;
  if (stat(path, &a)) {
    *why = "missing";
    return -1;
  }
  if (!S_ISREG(a.st_mode)) {
    *why = "not a regular file";
    return -1;
  }
  if ((uint64_t)a.st_size > max) {
    *why = "larger than the symbol cache";
    return -1;
  }
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (f < 0) {
    *why = "cannot be opened";
    return -1;
  }
  if (fstat(f, &b) || !S_ISREG(b.st_mode) || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino || (uint64_t)b.st_size > max) {
    close(f);
    *why = "changed while opened";
    return -1;
  }
  *fd = f;
  *size = (uint64_t)b.st_size;
  return 0;
}

int symfile_open_host(const symfile_rules *r, const char *path, size_t len,
                      int *fd, uint64_t *size, const char **why) {
  char want[PATH_MAX], got[PATH_MAX];
  if (!r->from_host) {
    *why = "host files off (--symbols-from-host no)";
    return -1;
  }
  if (len == 0 || len >= sizeof want || path[0] != '/' ||
      memchr(path, '\0', len)) {
    *why = "not an absolute path";
    return -1;
  }
  memcpy(want, path, len);
  want[len] = '\0';
  /* Both as named and resolved: /proc/self/exe is a link elsewhere. */
  if (pseudo(want)) {
    *why = "under /proc, /sys or /dev";
    return -1;
  }
  if (!realpath(want, got)) {
    *why = "missing";
    return -1;
  }
  if (pseudo(got)) {
    *why = "under /proc, /sys or /dev";
    return -1;
  }
  int ok = r->nroots == 0;
  for (size_t i = 0; i < r->nroots && !ok; i++)
    ok = under(got, r->roots[i]);
  if (!ok) {
    *why = "outside the allowed roots";
    return -1;
  }
  return open_regular(got, r->max_file_bytes, fd, size, why);
}

int symfile_open_tree(const symfile_rules *r, const uint8_t *bid, size_t n,
                      const char *suffix, int *fd, uint64_t *size) {
  if (!r->dir || n < 2 || n > 64)
    return -1;
  char hex[2 * 64 + 1];
  for (size_t i = 0; i < n; i++)
    snprintf(hex + 2 * i, 3, "%02x", bid[i]);
  char path[PATH_MAX];
  int len = snprintf(path, sizeof path, "%s/.build-id/%.2s/%s%s", r->dir, hex,
                     hex + 2, suffix);
  if (len < 0 || (size_t)len >= sizeof path)
    return -1;
  const char *why;
  return open_regular(path, r->max_file_bytes, fd, size, &why);
}

int symfile_build_id_is(int fd, const uint8_t *bid, size_t n) {
  elf_version(EV_CURRENT); /* idempotent; libelf needs it once */
  Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  if (!e)
    return 0;
  const void *got = NULL;
  ssize_t len = dwelf_elf_gnu_build_id(e, &got);
  int same = len > 0 && (size_t)len == n && memcmp(got, bid, n) == 0;
  elf_end(e);
  return same;
}
