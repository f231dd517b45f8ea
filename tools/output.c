/* output.c: buffered, atomic output for the CLI, and text formatting.
 *
 * Invariants.
 *  1. With -o FILE, bytes MUST only ever be written to a temporary file in
 *     FILE's directory, renamed over FILE after the last byte was written
 *     and the descriptor closed without error, otherwise a failed run (bad
 *     input halfway, disk full) would leave a truncated FILE that looks like
 *     a result.
 *  2. After the first write error every write MUST be a no-op and close
 *     MUST report it, otherwise output could have a hole in the middle.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chrome.h"
#include "cli.h"

int cli_output_open(cli_output *o, const char *path) {
  o->fd = STDOUT_FILENO;
  o->path = NULL;
  o->tmp = NULL;
  o->err = 0;
  o->len = 0;
  if (!path || !strcmp(path, "-"))
    return 0;
  o->path = path;
  size_t n = strlen(path);
  o->tmp = malloc(n + sizeof ".tmp.XXXXXX");
  if (!o->tmp) {
    fprintf(stderr, "gentrace: %s: %s\n", path, gtp_strerror(-ENOMEM));
    return -ENOMEM;
  }
  memcpy(o->tmp, path, n);
  memcpy(o->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  int fd = mkostemp(o->tmp, O_CLOEXEC);
  if (fd < 0) {
    int e = -errno;
    fprintf(stderr, "gentrace: %s: %s\n", path, gtp_strerror(e));
    free(o->tmp);
    o->tmp = NULL;
    return e;
  }
  /* mkstemp creates 0600; a result file gets the usual 0666 & ~umask. */
  mode_t um = umask(0);
  umask(um);
  fchmod(fd, 0666 & ~um);
  o->fd = fd;
  return 0;
}

static void flush(cli_output *o) {
  size_t off = 0;
  while (!o->err && off < o->len) {
    ssize_t n = write(o->fd, o->buf + off, o->len - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      o->err = -errno;
      break;
    }
    off += (size_t)n;
  }
  o->len = 0;
}

void cli_output_write(cli_output *o, const void *p, size_t n) {
  if (o->err)
    return;
  if (n > sizeof o->buf - o->len) {
    flush(o);
    if (n >= sizeof o->buf) {
      const char *c = p;
      while (!o->err && n) {
        ssize_t w = write(o->fd, c, n);
        if (w < 0) {
          if (errno != EINTR)
            o->err = -errno;
          continue;
        }
        c += w;
        n -= (size_t)w;
      }
      return;
    }
  }
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

void cli_output_puts(cli_output *o, const char *s) {
  cli_output_write(o, s, strlen(s));
}

void cli_output_printf(cli_output *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = gtp_sink_vprintf(cli_output_sink, o, fmt, ap);
  va_end(ap);
  if (rc < 0 && !o->err)
    o->err = rc;
}

int cli_output_sink(void *ctx, const void *p, size_t n) {
  cli_output *o = ctx;
  cli_output_write(o, p, n);
  return o->err;
}

int cli_output_close(cli_output *o, bool ok) {
  int rc = 0;
  /* On stdout, what was produced before a failure is still shown: a dump
   * of a damaged file prints every event up to the damage. A file is
   * discarded instead (invariant 1). */
  if (ok || !o->tmp)
    flush(o);
  rc = o->err;
  if (o->tmp) {
    if (close(o->fd) < 0 && !rc)
      rc = -errno;
    if (ok && !rc && rename(o->tmp, o->path) < 0)
      rc = -errno;
    if (!ok || rc)
      unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
  }
  if (ok && rc)
    fprintf(stderr, "gentrace: %s: %s\n", o->path ? o->path : "stdout",
            gtp_strerror(rc));
  return rc;
}

void cli_rfc3339(int64_t ns, char out[40]) {
  if (!gtp_rfc3339(ns, out))
    snprintf(out, 40, "@%lld", (long long)ns);
}

/* Length of a valid UTF-8 sequence at p that is not a C1 control
 * (U+0080..U+009F: terminals act on them), or 0. */
static size_t utf8_ok(const unsigned char *p, size_t n) {
  uint32_t cp;
  size_t k = gtp_utf8_seq(p, n, &cp);
  return k && cp >= 0xa0 ? k : 0;
}

void cli_output_escaped(cli_output *o, const char *s, size_t n, bool quote) {
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  const unsigned char *run = p;
  while (p < end) {
    unsigned char c = *p;
    char esc[5];
    size_t elen = 0;
    if (c >= 0x20 && c < 0x7f && c != '\\' && !(quote && c == '"')) {
      p++;
      continue;
    }
    if (c >= 0x80) {
      size_t k = utf8_ok(p, (size_t)(end - p));
      if (k) {
        p += k;
        continue;
      }
    }
    switch (c) {
    case '\\':
    case '"':
      esc[0] = '\\', esc[1] = (char)c, elen = 2;
      break;
    case '\t':
      memcpy(esc, "\\t", 2), elen = 2;
      break;
    case '\n':
      memcpy(esc, "\\n", 2), elen = 2;
      break;
    case '\r':
      memcpy(esc, "\\r", 2), elen = 2;
      break;
    default:
      snprintf(esc, sizeof esc, "\\x%02x", c);
      elen = 4;
    }
    cli_output_write(o, run, (size_t)(p - run));
    cli_output_write(o, esc, elen);
    p++;
    run = p;
  }
  cli_output_write(o, run, (size_t)(p - run));
}

int cli_io_open(const cli_opts *opt, cli_input *in, cli_output **o,
                bool open_output) {
  *o = malloc(sizeof **o);
  if (*o == NULL) {
    fprintf(stderr, "gentrace: out of memory\n");
    return -1;
  }
  if (cli_input_open(in, opt->args[0]))
    goto fail_input;
  if (open_output && cli_output_open(*o, opt->out))
    goto fail_output;
  return 0;

fail_output:
  cli_input_close(in);
fail_input:
  free(*o);
  *o = NULL;
  return -1;
}

void cli_io_close(cli_input *in, cli_output *o) {
  cli_input_close(in);
  free(o);
}
