/* webtest_http.h: a tiny HTTP/1.1 client for the web tests (no libcurl),
 * plus a bridge to python3's json module to check answers independently of
 * web/json.c. */
#ifndef WEBTEST_HTTP_H
#define WEBTEST_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct wt_resp {
  int status;
  char *headers; /* raw header block, NUL-terminated */
  uint8_t *body; /* de-chunked, NUL-terminated (not counted in len) */
  size_t len;
  int complete; /* 1 if the body ended properly (chunked terminator seen) */
} wt_resp;

/* Sends `method path` with extra header lines (each ending in \r\n, may be
 * NULL) to 127.0.0.1:port with Connection: close, reads to EOF. 0 or -1. */
int wt_request(uint16_t port, const char *method, const char *path,
               const char *extra, wt_resp *out);
int wt_get(uint16_t port, const char *path, wt_resp *out);
/* The two halves of wt_request, for tests that stall a response: wt_open
 * connects (rcvbuf > 0 sets SO_RCVBUF first) and sends; wt_finish reads to
 * EOF, after `prefix` bytes the caller already read, and closes fd. */
int wt_open(uint16_t port, const char *method, const char *path,
            const char *extra, int rcvbuf);
int wt_finish(int fd, const uint8_t *prefix, size_t prefix_len, wt_resp *out);
void wt_resp_free(wt_resp *r);

/* Value of a header (case-insensitive name) copied into out; 1 found. */
int wt_header(const wt_resp *r, const char *name, char *out, size_t cap);

/* Runs python3: d = json.loads(body); prints eval(expr). Copies stdout
 * (trailing newline removed) to out. Returns python's exit status (0 = ok,
 * e.g. non-zero when the body is not JSON or the expression raised). */
int wt_py(const wt_resp *r, const char *expr, char *out, size_t cap);

#endif
