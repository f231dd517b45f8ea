/* secret.c: token sources and private file modes (see secret.h).
 *
 * Invariants:
 *  1. A token's value MUST never appear in a message: errors name the
 *     flag, file or variable, never what it held.
 *  2. A token file MUST be checked on the descriptor it is read from
 *     (fstat after open), otherwise it could be swapped between the check
 *     and the read.
 */
#include "config.h"

#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gtp_error.h"
#include "text.h"

#define SECRET_MAX 4096

/* The project's one cause helper (proto/text.h). */
#define fail(cause, rc, ...) gtp_causef((cause), (rc), __VA_ARGS__)

int secret_read_file(const char *path, char **out, char **cause) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    return fail(cause, -e, "%s: %s", path, strerror(e));
  }
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) { /* invariant 2 */
    rc = -errno;
    fail(cause, rc, "%s: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = fail(cause, GTP_E_BADARG, "%s: not a regular file", path);
    goto done;
  }
  if (st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) {
    rc = fail(cause, GTP_E_BADARG,
              "%s: token file is accessible by other users (mode %04o); "
              "make it private: chmod 600 %s",
              path, (unsigned)(st.st_mode & 07777), path);
    goto done;
  }
  char buf[SECRET_MAX + 2];
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = -errno;
      fail(cause, rc, "%s: %s", path, strerror(errno));
      goto done;
    }
    if (n == 0)
      break;
    len += (size_t)n;
    if (len > SECRET_MAX) {
      rc = fail(cause, GTP_E_BADARG, "%s: token file larger than %d bytes",
                path, SECRET_MAX);
      goto done;
    }
  }
  buf[len] = '\0';
  if (memchr(buf, '\0', len) != NULL) {
    rc = fail(cause, GTP_E_BADARG, "%s: token file holds a NUL byte", path);
    goto done;
  }
  char *s = buf, *e = buf + len;
  while (s < e && (*s == ' ' || *s == '\t'))
    s++;
  while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' ||
                   e[-1] == '\t'))
    e--;
  *e = '\0';
  if (s == e) {
    rc = fail(cause, GTP_E_BADARG, "%s: token file is empty", path);
    goto done;
  }
  if (strpbrk(s, "\r\n") != NULL) {
    rc = fail(cause, GTP_E_BADARG,
              "%s: token file holds more than one line", path);
    goto done;
  }
  *out = strdup(s);
  if (*out == NULL)
    rc = fail(cause, -ENOMEM, "%s: out of memory", path);
done:
  explicit_bzero(buf, sizeof buf);
  close(fd);
  return rc;
}

/* One token: flag value in *tok (may be NULL), file path, env name. */
static int resolve_one(char **tok, const char *flag, const char *file,
                       const char *file_flag, const char *env,
                       char **cause) {
  if (*tok != NULL && file != NULL)
    return fail(cause, GTP_E_BADARG,
                "--%s and --%s both given: use one (the file keeps the token "
                "out of the process list)",
                flag, file_flag);
  if (file != NULL) {
    char *t = NULL;
    int rc = secret_read_file(file, &t, cause);
    if (rc < 0)
      return rc;
    *tok = t;
    unsetenv(env);
    return 0;
  }
  const char *v = getenv(env);
  if (*tok == NULL && v != NULL && *v != '\0') {
    *tok = strdup(v);
    if (*tok == NULL)
      return fail(cause, -ENOMEM, "%s: out of memory", env);
  }
  /* Read or not, children (none today) must not inherit it. */
  unsetenv(env);
  return 0;
}

int secret_resolve(conf *c, char **cause) {
  int rc = resolve_one(&c->token, "token", c->token_file, "token-file",
                       "GENTRACED_TOKEN", cause);
  if (rc < 0)
    return rc;
  rc = resolve_one(&c->read_token, "read-token", c->read_token_file,
                   "read-token-file", "GENTRACED_READ_TOKEN", cause);
  if (rc < 0)
    return rc;
  return resolve_one(&c->admin_token, "admin-token", c->admin_token_file,
                     "admin-token-file", "GENTRACED_ADMIN_TOKEN", cause);
}

int secret_private_files(const char *db_path, char **cause) {
  /* SQLite creates -wal and -shm with the mode of the database file, so a
   * database created 0600 here keeps all three private. */
  int fd = open(db_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0)
    close(fd);
  else if (errno != EEXIST)
    return fail(cause, -errno, "%s: cannot create: %s", db_path,
                strerror(errno));
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  int tightened = 0;
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s%s", db_path, suffix[i]) >=
        sizeof path)
      return fail(cause, GTP_E_BADARG, "--db: path too long");
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if ((st.st_mode & 077) == 0)
      continue;
    if (chmod(path, st.st_mode & 07700) != 0) {
      int e = errno;
      return fail(cause, -e, "%s: cannot make it private: %s", path,
                  strerror(e));
    }
    tightened++;
  }
  return tightened;
}
