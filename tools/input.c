/* input.c: loads one trace input, a file (mapped) or stdin/a pipe (read).
 *
 * Regular files are mapped read-only: a window download can be gigabytes
 * and the decoders only borrow from the bytes, so mapping costs no copy and
 * no memory beyond the page cache. Everything else (stdin, FIFOs, process
 * substitution) is read into a buffer that doubles up to CLI_STDIN_MAX;
 * past that the input is refused with a message rather than eating memory.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "goconv.h"
#include "gotrace.h"

static int read_all(cli_input *in, int fd) {
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  if (!buf)
    return -ENOMEM;
  for (;;) {
    if (len == cap) {
      if (cap >= CLI_STDIN_MAX) {
        free(buf);
        fprintf(stderr,
                "gentrace: %s: input larger than 4 GiB; "
                "save it to a file and pass the file name instead\n",
                in->name);
        return GTP_E_TOOBIG;
      }
      size_t ncap = cap * 2 > CLI_STDIN_MAX ? CLI_STDIN_MAX : cap * 2;
      uint8_t *nb = realloc(buf, ncap);
      if (!nb) {
        free(buf);
        return -ENOMEM;
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n == 0)
      break;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = -errno;
      free(buf);
      return e;
    }
    len += (size_t)n;
  }
  in->heap = buf;
  in->data = buf;
  in->len = len;
  return 0;
}

int cli_input_open(cli_input *in, const char *name) {
  memset(in, 0, sizeof *in);
  in->name = name;
  bool is_stdin = !strcmp(name, "-");
  int fd = is_stdin ? STDIN_FILENO : open(name, O_RDONLY | O_CLOEXEC);
  int rc = 0;
  if (fd < 0) {
    rc = -errno;
    goto fail;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    goto fail_fd;
  }
  if (S_ISDIR(st.st_mode)) {
    rc = -EISDIR;
    goto fail_fd;
  }
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      in->map = m;
      in->data = m;
      in->len = (size_t)st.st_size;
      /* One pass front to back: let the kernel read ahead. */
      madvise(m, in->len, MADV_SEQUENTIAL);
      goto done;
    }
  }
  /* Pipes, empty files and unmappable files. */
  rc = read_all(in, fd);
  if (rc == GTP_E_TOOBIG)
    goto fail_quiet;
  if (rc < 0)
    goto fail_fd;
done:
  if (!is_stdin)
    close(fd);
  return 0;

fail_fd:
  if (!is_stdin)
    close(fd);
fail:
  fprintf(stderr, "gentrace: %s: %s\n", name, gtp_strerror(rc));
  return rc;
fail_quiet:
  if (!is_stdin)
    close(fd);
  return rc;
}

void cli_input_close(cli_input *in) {
  if (in->map)
    munmap(in->map, in->len);
  free(in->heap);
  memset(in, 0, sizeof *in);
}

void cli_bad_input(const char *name, size_t offset, int code) {
  fprintf(stderr, "gentrace: %s: offset %zu: %s\n", name, offset,
          gtp_strerror(code));
}

int cli_gen_events(const gtp_gen *g, const uint8_t *data, size_t *err_off,
                   cli_event_fn *fn, void *ctx) {
  size_t cursor = 0;
  gtp_batch b;
  int rc;
  while ((rc = gtp_gen_next_batch(g, &cursor, &b)) == 1) {
    gtp_event_iter it;
    gtp_event ev;
    if (fn)
      fn(ctx, NULL);
    gtp_event_iter_init(&it, &b);
    for (;;) {
      const uint8_t *at = it.p;
      rc = gtp_event_next(&it, &ev);
      if (rc == 0)
        break;
      if (rc < 0) {
        *err_off = (size_t)(at - data);
        return rc;
      }
      if (fn)
        fn(ctx, &ev);
    }
  }
  if (rc < 0)
    *err_off = (size_t)(g->base - data);
  return rc;
}

int cli_each_gen(const cli_input *in, cli_gen_fn *fn, void *ctx) {
  gtp_file_reader r;
  int rc = gtp_file_reader_init(&r, in->data, in->len);
  if (rc < 0) {
    cli_bad_input(in->name, 0, rc);
    return rc;
  }
  for (;;) {
    gtp_gen g;
    /* Where this generation starts: the offset a callback's error is
     * reported at unless it names the failing event. */
    size_t err_off = r.offset;
    rc = gtp_file_reader_next(&r, &g);
    if (rc == 0)
      return 0;
    if (rc < 0) {
      /* The reader leaves its offset at the record it could not read. */
      cli_bad_input(in->name, r.offset, rc);
      return rc;
    }
    rc = fn(ctx, in, &g, &err_off);
    gtp_gen_fini(&g);
    if (rc < 0)
      cli_bad_input(in->name, err_off, rc);
    if (rc == CLI_EACH_STOP)
      return 0;
    if (rc)
      return rc;
  }
}

const gtp_gen *cli_gen_native(const gtp_gen *g, gtp_wbuf *buf, gtp_gen *ng,
                              int *rc) {
  *rc = 0;
  if (!gtp_gen_is_go(g))
    return g;
  size_t used;
  if ((*rc = gtp_goconv_gen(g, buf, NULL)) ||
      (*rc = gtp_gen_parse(buf->data, buf->len, ng, &used)))
    return NULL;
  return ng;
}
