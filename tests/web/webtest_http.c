/* webtest_http.c: see webtest_http.h. */
#include "config.h"

#include "webtest_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int dechunk(const uint8_t *p, size_t n, uint8_t **out, size_t *olen,
                   int *complete) {
  uint8_t *b = malloc(n + 1);
  size_t o = 0, i = 0;
  *complete = 0;
  if (!b)
    return -1;
  while (i < n) {
    char *end;
    unsigned long sz = strtoul((const char *)p + i, &end, 16);
    const uint8_t *crlf = memmem(p + i, n - i, "\r\n", 2);
    if (!crlf || (const uint8_t *)end > crlf)
      break;
    i = (size_t)(crlf - p) + 2;
    if (sz == 0) {
      *complete = 1;
      break;
    }
    if (sz > n - i)
      break;
    memcpy(b + o, p + i, sz);
    o += sz;
    i += sz + 2;
  }
  b[o] = 0;
  *out = b;
  *olen = o;
  return 0;
}

int wt_open(uint16_t port, const char *method, const char *path,
            const char *extra, int rcvbuf) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  struct timeval tv = {70, 0}; /* longer than the longest feed wait */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  /* Before connect, so the advertised window stays small. */
  if (rcvbuf > 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    close(fd);
    return -1;
  }
  char req[4096];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "%s\r\n",
                   method, path, extra ? extra : "");
  if (write(fd, req, (size_t)n) != n) {
    close(fd);
    return -1;
  }
  return fd;
}

int wt_finish(int fd, const uint8_t *prefix, size_t prefix_len, wt_resp *out) {
  memset(out, 0, sizeof *out);
  size_t cap = prefix_len + (1 << 16), len = prefix_len;
  uint8_t *raw = malloc(cap);
  if (prefix_len)
    memcpy(raw, prefix, prefix_len);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      raw = realloc(raw, cap);
    }
    ssize_t r = read(fd, raw + len, cap - len);
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  close(fd);
  uint8_t *hend = memmem(raw, len, "\r\n\r\n", 4);
  if (!hend || sscanf((char *)raw, "HTTP/1.%*d %d", &out->status) != 1) {
    free(raw);
    return -1;
  }
  size_t hlen = (size_t)(hend - raw) + 2;
  out->headers = malloc(hlen + 1);
  memcpy(out->headers, raw, hlen);
  out->headers[hlen] = 0;
  const uint8_t *body = hend + 4;
  size_t blen = len - (size_t)(body - raw);
  char te[64];
  if (wt_header(out, "Transfer-Encoding", te, sizeof te) &&
      strcasecmp(te, "chunked") == 0) {
    dechunk(body, blen, &out->body, &out->len, &out->complete);
  } else {
    out->body = malloc(blen + 1);
    memcpy(out->body, body, blen);
    out->body[blen] = 0;
    out->len = blen;
    char cl[32];
    out->complete = !wt_header(out, "Content-Length", cl, sizeof cl) ||
                    strtoull(cl, NULL, 10) == blen;
  }
  free(raw);
  return 0;
}

int wt_request(uint16_t port, const char *method, const char *path,
               const char *extra, wt_resp *out) {
  memset(out, 0, sizeof *out);
  int fd = wt_open(port, method, path, extra, 0);
  if (fd < 0)
    return -1;
  return wt_finish(fd, NULL, 0, out);
}

int wt_get(uint16_t port, const char *path, wt_resp *out) {
  return wt_request(port, "GET", path, NULL, out);
}

void wt_resp_free(wt_resp *r) {
  free(r->headers);
  free(r->body);
  memset(r, 0, sizeof *r);
}

int wt_header(const wt_resp *r, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  const char *p = r->headers ? strstr(r->headers, "\r\n") : NULL;
  while (p && p[2]) {
    p += 2;
    if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (*v == ' ')
        v++;
      const char *e = strstr(v, "\r\n");
      size_t n = e ? (size_t)(e - v) : strlen(v);
      if (n >= cap)
        n = cap - 1;
      memcpy(out, v, n);
      out[n] = 0;
      return 1;
    }
    p = strstr(p, "\r\n");
  }
  return 0;
}

int wt_py(const wt_resp *r, const char *expr, char *out, size_t cap) {
  char bodyf[] = "/tmp/gt-webtest-body-XXXXXX";
  char exprf[] = "/tmp/gt-webtest-expr-XXXXXX";
  int bfd = mkstemp(bodyf), efd = mkstemp(exprf);
  if (bfd < 0 || efd < 0)
    return -1;
  if (write(bfd, r->body, r->len) != (ssize_t)r->len ||
      write(efd, expr, strlen(expr)) != (ssize_t)strlen(expr))
    return -1;
  close(bfd);
  close(efd);
  /* $PYTHON wins; else the system interpreter directly, which starts about
   * 5x faster than a version-manager shim found first in PATH. */
  const char *py = getenv("PYTHON");
  if (!py || !*py)
    py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char cmd[768];
  snprintf(cmd, sizeof cmd,
           "%s -c 'import json,sys\n"
           "d=json.load(open(sys.argv[1],encoding=\"utf-8\"))\n"
           "print(eval(open(sys.argv[2]).read()))' %s %s 2>&1",
           py, bodyf, exprf);
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  if (p) {
    n = fread(out, 1, cap - 1, p);
  }
  out[n] = 0;
  while (n > 0 && out[n - 1] == '\n')
    out[--n] = 0;
  int st = p ? pclose(p) : -1;
  unlink(bodyf);
  unlink(exprf);
  return st;
}
