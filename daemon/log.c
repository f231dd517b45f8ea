/* log.c: logfmt lines, thread-safe, reopenable.
 *
 * Invariants:
 *  1. A line MUST reach the fd in one write(2) made under `lock`, otherwise
 *     lines from the loop, the store thread and HTTP threads interleave
 *     mid-line and the log cannot be parsed.
 *  2. log_reopen MUST open the new file before closing the old one, otherwise
 *     a failed reopen (disk full, permissions) would leave us with no log.
 *  3. The logger MUST never fail its caller: lines that do not fit the line
 *     buffer are truncated, write errors are ignored.
 */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "text.h"

#define LOG_LINE_MAX 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Protected by lock. */
static int log_fd = 2;
static char *log_path;
static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int open_file(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  return fd < 0 ? -errno : fd;
}

int log_open(const char *path) {
  if (path == NULL || strcmp(path, "-") == 0)
    return 0;
  int fd = open_file(path);
  if (fd < 0)
    return fd;
  char *dup = strdup(path);
  if (dup == NULL) {
    close(fd);
    return -ENOMEM;
  }
  pthread_mutex_lock(&lock);
  if (log_fd > 2)
    close(log_fd);
  log_fd = fd;
  free(log_path);
  log_path = dup;
  pthread_mutex_unlock(&lock);
  return 0;
}

int log_reopen(void) {
  int rc = 0;
  pthread_mutex_lock(&lock);
  if (log_path != NULL) {
    int fd = open_file(log_path);
    if (fd < 0) {
      rc = fd;
    } else {
      close(log_fd);
      log_fd = fd;
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

void log_close(void) {
  pthread_mutex_lock(&lock);
  if (log_fd > 2)
    close(log_fd);
  log_fd = 2;
  free(log_path);
  log_path = NULL;
  pthread_mutex_unlock(&lock);
}

void log_set_level(enum log_level lvl) {
  pthread_mutex_lock(&lock);
  min_level = lvl;
  pthread_mutex_unlock(&lock);
}

char *log_quote(char *buf, unsigned size, const char *s) {
  return gtp_logfmt_quote(buf, size, s); /* the project's one logfmt rule */
}

/* Appends "ts=... level=..." for lvl at line; returns its length or -1. */
static int log_prefix(char *line, size_t size, enum log_level lvl) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int)gtp_logfmt_prefix(line, size,
                                (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
                                level_names[lvl]);
}

/* Ends the line and writes it with one write(2), so lines never mix. */
static void log_emit(enum log_level lvl, char *line, size_t len, size_t size) {
  if (len >= size - 1)
    len = size - 2;
  line[len++] = '\n';
  pthread_mutex_lock(&lock);
  if (lvl >= min_level) {
    ssize_t w;
    do {
      w = write(log_fd, line, len);
    } while (w < 0 && errno == EINTR);
  }
  pthread_mutex_unlock(&lock);
}

/* Length after appending n more bytes that snprintf reported for a line of
 * size bytes holding len (output truncated to fit, NUL kept). */
static size_t log_grow(size_t len, int n, size_t size) {
  if (n <= 0)
    return len;
  return (size_t)n < size - len ? len + (size_t)n : size - 1;
}

/* Starts a line with ts and level (an unknown level logs as error);
 * returns its length. */
static size_t log_start(char *line, size_t size, enum log_level *lvl) {
  if (*lvl < LOG_DEBUG || *lvl > LOG_ERROR)
    *lvl = LOG_ERROR;
  size_t n = log_grow(0, log_prefix(line, size, *lvl), size);
  /* The prefix is about 40 bytes; the bound keeps room for the message. */
  return n < size / 2 ? n : size / 2;
}

void log_msg(enum log_level lvl, const char *msg, const char *fields, ...) {
  char line[LOG_LINE_MAX];
  char qmsg[512];
  size_t len = log_start(line, sizeof line, &lvl);
  int n = snprintf(line + len, sizeof line - len, " msg=%s",
                   log_quote(qmsg, sizeof qmsg, msg));
  len = log_grow(len, n, sizeof line);
  if (fields != NULL && *fields != '\0' && len + 2 < sizeof line) {
    va_list ap;
    line[len++] = ' ';
    va_start(ap, fields);
    n = vsnprintf(line + len, sizeof line - len, fields, ap);
    va_end(ap);
    len = log_grow(len, n, sizeof line);
  }
  log_emit(lvl, line, len, sizeof line);
}

void log_kv(enum log_level lvl, const char *kv) {
  char line[LOG_LINE_MAX];
  size_t len = log_start(line, sizeof line, &lvl);
  int n = snprintf(line + len, sizeof line - len, " %s", kv ? kv : "");
  len = log_grow(len, n, sizeof line);
  log_emit(lvl, line, len, sizeof line);
}
