/* s3.c: the S3 client of the shared store (see s3.h).
 *
 * Owns: one libcurl easy handle per s3 (its connection is reused across
 * requests), the resolved endpoint, region, credentials, bucket and prefix.
 *
 * Signing: libcurl's CURLOPT_AWS_SIGV4 ("aws:amz:REGION:s3") signs each
 * request. Two things it does not do by itself, both needed by S3 servers
 * (Swift's s3api answers 400 otherwise):
 *   - the x-amz-content-sha256 header. We send the payload's real SHA-256
 *     on PUT, not UNSIGNED-PAYLOAD: the signature then covers the body, so
 *     a server that checks it refuses a body damaged on the way instead of
 *     storing it, and an ACK promises that the stored segment is the one we
 *     built. Hashing a segment costs about a millisecond per MiB, small
 *     beside the PUT. Requests without a body carry the empty string's hash.
 *   - key id and secret go in CURLOPT_USERNAME and CURLOPT_PASSWORD apart:
 *     the key id may hold a colon (Swift tempauth's "account:user"), which
 *     the "user:password" form would split at the wrong place.
 *   Also: no header with an empty value (curl's "Expect:" idiom to drop a
 *   header): this libcurl signs it but does not send it, and the server's
 *   signature then differs (SignatureDoesNotMatch).
 *
 * Invariants:
 *   1. Only keys of [A-Za-z0-9._/-] without ".." MUST reach a URL, otherwise
 *      a key could escape the prefix or need escaping that the signature and
 *      the server disagree on.
 *   2. A response body MUST be bounded by what the caller asked for (range
 *      length or max) before it is buffered, otherwise a hostile or broken
 *      server could make us allocate without limit.
 *   3. A ranged GET MUST return exactly the asked length, otherwise a short
 *      read would hand a truncated generation to a window.
 *   4. Every failure to reach the server (connect, timeout, 5xx) MUST map to
 *      GTP_E_UNAVAIL, otherwise the store could not tell "retry later" from
 *      "this request is wrong".
 */
#include "config.h" /* _GNU_SOURCE: asprintf */

#include "s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"

#define S3_KEY_MAX 512
/* An error body is read only to name the S3 error code. */
#define S3_ERRBODY_MAX 4096
/* One page of a listing: 1,000 keys of at most 512 bytes with their XML. */
#define S3_LIST_BODY_MAX (2u << 20)
#define S3_EMPTY_SHA256                                                        \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct s3 {
  CURL *curl;
  char *endpoint; /* no trailing '/' */
  char *region, *access_key, *secret_key;
  char *bucket, *prefix; /* prefix "" or ending in '/' */
  char *sigv4;           /* "aws:amz:REGION:s3" */
  long connect_timeout_ms, timeout_ms;
  char errbuf[CURL_ERROR_SIZE];
};

/* libcurl's global state MUST be set up once, before any thread uses it. */
static pthread_once_t s3_once = PTHREAD_ONCE_INIT;
static CURLcode s3_global_rc;
static void s3_global_init(void) {
  s3_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *s3_dup_env(const char *field, const char *env1, const char *env2) {
  const char *v = field;
  if (!v || !*v)
    v = env1 ? getenv(env1) : NULL;
  if ((!v || !*v) && env2)
    v = getenv(env2);
  return v && *v ? strdup(v) : NULL;
}

static int s3_fail(char **cause, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s3_fail(char **cause, int rc, const char *fmt, ...) {
  if (cause) {
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
      *cause = NULL;
    va_end(ap);
  }
  return rc;
}

/* Splits s3://BUCKET[/PREFIX] into c->bucket and c->prefix. */
static int s3_parse_url(s3 *c, const char *url, char **cause) {
  if (!url || strncmp(url, "s3://", 5) != 0)
    return s3_fail(cause, GTP_E_BADARG,
                   "objects location '%s' is not s3://BUCKET[/PREFIX]",
                   url ? url : "");
  const char *b = url + 5;
  const char *slash = strchr(b, '/');
  size_t blen = slash ? (size_t)(slash - b) : strlen(b);
  /* Bucket names: 3..63 of [a-z0-9.-] (the S3 rule). */
  if (blen < 3 || blen > 63)
    return s3_fail(cause, GTP_E_BADARG,
                   "bucket name in '%s' must be 3 to 63 "
                   "characters",
                   url);
  for (size_t i = 0; i < blen; i++) {
    char ch = b[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
          ch == '-'))
      return s3_fail(cause, GTP_E_BADARG,
                     "bucket name in '%s' may hold only a-z 0-9 . -", url);
  }
  c->bucket = strndup(b, blen);
  const char *p = slash ? slash + 1 : "";
  size_t plen = strlen(p);
  while (plen > 0 && p[plen - 1] == '/')
    plen--;
  for (size_t i = 0; i < plen; i++) {
    char ch = p[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
          ch == '/'))
      return s3_fail(cause, GTP_E_BADARG,
                     "prefix in '%s' may hold only A-Z a-z 0-9 . - _ /", url);
  }
  if (plen > 200 || strstr(p, ".."))
    return s3_fail(cause, GTP_E_BADARG, "prefix in '%s' is not usable", url);
  if (plen == 0)
    c->prefix = strdup("");
  else if (asprintf(&c->prefix, "%.*s/", (int)plen, p) < 0)
    c->prefix = NULL;
  return c->bucket && c->prefix ? 0 : -ENOMEM;
}

int s3_open(const s3_config *cfg, s3 **out, char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  pthread_once(&s3_once, s3_global_init);
  if (s3_global_rc != CURLE_OK)
    return s3_fail(cause, GTP_E_INTERNAL, "curl_global_init: %s",
                   curl_easy_strerror(s3_global_rc));
  s3 *c = calloc(1, sizeof *c);
  if (!c)
    return -ENOMEM;
  int rc = s3_parse_url(c, cfg->url, cause);
  if (rc < 0)
    goto fail;
  c->endpoint =
      s3_dup_env(cfg->endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
  c->region = s3_dup_env(cfg->region, "AWS_REGION", "AWS_DEFAULT_REGION");
  if (!c->region)
    c->region = strdup("us-east-1");
  c->access_key = s3_dup_env(cfg->access_key, "AWS_ACCESS_KEY_ID", NULL);
  c->secret_key = s3_dup_env(cfg->secret_key, "AWS_SECRET_ACCESS_KEY", NULL);
  if (!c->endpoint) {
    rc = s3_fail(cause, GTP_E_BADARG,
                 "no S3 endpoint: set AWS_ENDPOINT_URL "
                 "(e.g. http://127.0.0.1:8080) or the config key s3_endpoint");
    goto fail;
  }
  if (strncmp(c->endpoint, "http://", 7) &&
      strncmp(c->endpoint, "https://", 8)) {
    rc = s3_fail(cause, GTP_E_BADARG, "S3 endpoint '%s' is not http(s)://",
                 c->endpoint);
    goto fail;
  }
  size_t el = strlen(c->endpoint);
  while (el > 8 && c->endpoint[el - 1] == '/')
    c->endpoint[--el] = '\0';
  if (!c->access_key || !c->secret_key) {
    rc = s3_fail(cause, GTP_E_AUTH,
                 "no S3 credentials: set "
                 "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the config "
                 "keys s3_access_key_id and s3_secret_access_key)");
    goto fail;
  }
  for (const char *r = c->region; *r; r++)
    if (!((*r >= 'a' && *r <= 'z') || (*r >= '0' && *r <= '9') || *r == '-')) {
      rc = s3_fail(cause, GTP_E_BADARG, "S3 region '%s' is not valid",
                   c->region);
      goto fail;
    }
  if (asprintf(&c->sigv4, "aws:amz:%s:s3", c->region) < 0)
    c->sigv4 = NULL;
  c->connect_timeout_ms =
      cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 3000;
  c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 60000;
  c->curl = curl_easy_init();
  if (!c->region || !c->sigv4 || !c->curl) {
    rc = -ENOMEM;
    goto fail;
  }
  *out = c;
  return 0;
fail:
  s3_close(c);
  return rc;
}

void s3_close(s3 *c) {
  if (!c)
    return;
  if (c->curl)
    curl_easy_cleanup(c->curl);
  free(c->endpoint);
  free(c->region);
  free(c->access_key);
  if (c->secret_key) {
    /* The secret does not linger in freed heap. */
    memset(c->secret_key, 0, strlen(c->secret_key));
    free(c->secret_key);
  }
  free(c->bucket);
  free(c->prefix);
  free(c->sigv4);
  free(c);
}

const char *s3_bucket(const s3 *c) {
  return c->bucket;
}

char *s3_root_url(const s3 *c) {
  char *u = NULL;
  if (asprintf(&u, "s3://%s", c->bucket) < 0)
    return NULL;
  return u;
}
const char *s3_prefix(const s3 *c) {
  return c->prefix;
}

static int s3_key_ok(const char *key) {
  size_t n = strlen(key);
  if (n == 0 || n > S3_KEY_MAX || key[0] == '/' || strstr(key, ".."))
    return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = key[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_' ||
          ch == '/'))
      return 0;
  }
  return 1;
}

/* One request's body in either direction. */
typedef struct s3_io {
  const uint8_t *up; /* upload source */
  size_t up_len, up_off;
  uint8_t *buf; /* download sink (malloc'd, grows) */
  size_t len, cap, max;
  int overflow;      /* the server sent more than max */
  const char *query; /* S3_LIST: the canonical query string */
} s3_io;

static size_t s3_read_cb(char *dst, size_t size, size_t nmemb, void *ud) {
  s3_io *io = ud;
  size_t n = size * nmemb, left = io->up_len - io->up_off;
  if (n > left)
    n = left;
  memcpy(dst, io->up + io->up_off, n);
  io->up_off += n;
  return n;
}

static size_t s3_write_cb(char *src, size_t size, size_t nmemb, void *ud) {
  s3_io *io = ud;
  size_t n = size * nmemb;
  if (n > io->max - io->len) {
    io->overflow = 1;
    return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
  }
  if (io->len + n > io->cap) {
    size_t cap = io->cap ? io->cap : 4096;
    while (cap < io->len + n)
      cap *= 2;
    if (cap > io->max)
      cap = io->max;
    uint8_t *b = realloc(io->buf, cap);
    if (!b)
      return 0;
    io->buf = b;
    io->cap = cap;
  }
  memcpy(io->buf + io->len, src, n);
  io->len += n;
  return n;
}

static void s3_hex_sha256(const void *data, size_t len, char hex[65]) {
  unsigned char md[32];
  unsigned int mdlen = 0;
  EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Pulls <Code>...</Code> out of an S3 error body into code (bounded). */
static void s3_error_code(const s3_io *io, char *code, size_t cap) {
  code[0] = '\0';
  if (!io->buf || io->len == 0)
    return;
  const char *b = (const char *)io->buf, *e = b + io->len;
  const char *p = memmem(b, io->len, "<Code>", 6);
  if (!p)
    return;
  p += 6;
  const char *q = memmem(p, (size_t)(e - p), "</Code>", 7);
  if (!q)
    return;
  size_t n = (size_t)(q - p);
  if (n >= cap)
    n = cap - 1;
  for (size_t i = 0; i < n; i++)
    code[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
  code[n] = '\0';
}

enum {
  S3_PUT,
  S3_GET,
  S3_HEAD,
  S3_DELETE,
  S3_PUT_BUCKET,
  S3_HEAD_BUCKET,
  S3_LIST
};
static const char *const s3_verb[] = {"PUT", "GET",  "HEAD", "DELETE",
                                      "PUT", "HEAD", "GET"};

/* Requests by kind (put, get, head, delete, list), process-wide. */
static uint64_t s3_n[S3_OPS], s3_err[S3_OPS], s3_bytes[S3_OPS], s3_ns[S3_OPS];

static int s3_kind(int op) {
  return op == S3_PUT      ? S3_OP_PUT
         : op == S3_GET    ? S3_OP_GET
         : op == S3_DELETE ? S3_OP_DELETE
         : op == S3_LIST   ? S3_OP_LIST
                           : S3_OP_HEAD;
}

static int64_t s3_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Counts one finished request: rc < 0 or a status outside 2xx (404 of a
 * DELETE is success) is an error. */
static void s3_count(int op, int rc, long status, uint64_t bytes, int64_t t0) {
  int k = s3_kind(op);
  int bad = rc < 0 || ((status < 200 || status > 299) &&
                       !(op == S3_DELETE && status == 404));
  __atomic_add_fetch(&s3_n[k], 1, __ATOMIC_RELAXED);
  if (bad)
    __atomic_add_fetch(&s3_err[k], 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s3_bytes[k], bytes, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s3_ns[k], (uint64_t)(s3_mono_ns() - t0),
                     __ATOMIC_RELAXED);
}

void s3_stats_get(s3_stats out[S3_OPS]) {
  for (int k = 0; k < S3_OPS; k++) {
    out[k].requests = __atomic_load_n(&s3_n[k], __ATOMIC_RELAXED);
    out[k].errors = __atomic_load_n(&s3_err[k], __ATOMIC_RELAXED);
    out[k].bytes = __atomic_load_n(&s3_bytes[k], __ATOMIC_RELAXED);
    out[k].ns = __atomic_load_n(&s3_ns[k], __ATOMIC_RELAXED);
  }
}

/* Runs one request. key NULL: the bucket itself. Fills *status. */
static int s3_request(s3 *c, int op, const char *key, s3_io *io,
                      const char *range, long *status, uint64_t *clen,
                      char **cause) {
  char *url = NULL;
  struct curl_slist *h = NULL;
  int rc = 0;
  *status = 0;
  if (key && !s3_key_ok(key))
    return s3_fail(cause, GTP_E_BADARG, "S3 key '%s' is not allowed", key);
  if (asprintf(&url, "%s/%s/%s%s%s%s", c->endpoint, c->bucket,
               key ? c->prefix : "", key ? key : "", io->query ? "?" : "",
               io->query ? io->query : "") < 0)
    return -ENOMEM;

  char hdr[128], hex[65];
  if (op == S3_PUT)
    s3_hex_sha256(io->up, io->up_len, hex);
  else
    memcpy(hex, S3_EMPTY_SHA256, 65);
  snprintf(hdr, sizeof hdr, "x-amz-content-sha256: %s", hex);
  struct curl_slist *t;
  if (!(t = curl_slist_append(h, hdr)))
    goto oom;
  h = t;
  if (op == S3_PUT) {
    if (!(t = curl_slist_append(h, "Content-Type: application/octet-stream")))
      goto oom;
    h = t;
  }
  if (range) {
    snprintf(hdr, sizeof hdr, "Range: %s", range);
    if (!(t = curl_slist_append(h, hdr)))
      goto oom;
    h = t;
  }

  CURL *k = c->curl;
  curl_easy_reset(k); /* keeps the connection cache */
  curl_easy_setopt(k, CURLOPT_URL, url);
  curl_easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(k, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(k, CURLOPT_AWS_SIGV4, c->sigv4);
  curl_easy_setopt(k, CURLOPT_USERNAME, c->access_key);
  curl_easy_setopt(k, CURLOPT_PASSWORD, c->secret_key);
  curl_easy_setopt(k, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(k, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
  curl_easy_setopt(k, CURLOPT_TIMEOUT_MS, c->timeout_ms);
  curl_easy_setopt(k, CURLOPT_ERRORBUFFER, c->errbuf);
  curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, s3_write_cb);
  curl_easy_setopt(k, CURLOPT_WRITEDATA, io);
  c->errbuf[0] = '\0';
  switch (op) {
  case S3_PUT:
  case S3_PUT_BUCKET:
    curl_easy_setopt(k, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(k, CURLOPT_READFUNCTION, s3_read_cb);
    curl_easy_setopt(k, CURLOPT_READDATA, io);
    curl_easy_setopt(k, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->up_len);
    break;
  case S3_HEAD:
  case S3_HEAD_BUCKET:
    curl_easy_setopt(k, CURLOPT_NOBODY, 1L);
    break;
  case S3_DELETE:
    curl_easy_setopt(k, CURLOPT_CUSTOMREQUEST, "DELETE");
    break;
  default:
    break;
  }

  int64_t t0 = s3_mono_ns();
  CURLcode cc = curl_easy_perform(k);
  if (cc == CURLE_OK)
    curl_easy_getinfo(k, CURLINFO_RESPONSE_CODE, status);
  s3_count(op, cc == CURLE_OK ? 0 : -1, *status,
           op == S3_PUT ? io->up_len : io->len, t0);
  const char *what = key ? key : "(bucket)";
  if (cc != CURLE_OK) {
    if (cc == CURLE_WRITE_ERROR && io->overflow) {
      rc = s3_fail(cause, GTP_E_TOOBIG,
                   "S3 %s %s/%s%s: body larger than %zu "
                   "bytes",
                   s3_verb[op], c->bucket, c->prefix, what, io->max);
    } else {
      rc = s3_fail(cause, GTP_E_UNAVAIL, "S3 %s %s: %s (%s)", s3_verb[op], url,
                   c->errbuf[0] ? c->errbuf : curl_easy_strerror(cc),
                   curl_easy_strerror(cc));
    }
    goto done;
  }
  if (clen) {
    curl_off_t cl = -1;
    curl_easy_getinfo(k, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    *clen = cl >= 0 ? (uint64_t)cl : UINT64_MAX;
  }
  goto done;
oom:
  rc = -ENOMEM;
done:
  curl_slist_free_all(h);
  free(url);
  return rc;
}

/* Maps a non-2xx status to a code and message. */
static int s3_status_fail(s3 *c, int op, const char *key, long status,
                          const s3_io *io, char **cause) {
  char code[64];
  s3_error_code(io, code, sizeof code);
  int rc = status == 404                    ? GTP_E_NOTFOUND
           : status == 401 || status == 403 ? GTP_E_AUTH
           : status >= 500 || status == 429 ? GTP_E_UNAVAIL
           : status == 416                  ? GTP_E_TRUNC
                                            : GTP_E_BADARG;
  return s3_fail(cause, rc, "S3 %s %s/%s%s: HTTP %ld%s%s", s3_verb[op],
                 c->bucket, key ? c->prefix : "", key ? key : "", status,
                 code[0] ? " " : "", code);
}

int s3_put(s3 *c, const char *key, const void *data, size_t len, char **cause) {
  if (cause)
    *cause = NULL;
  s3_io io = {.up = data, .up_len = len, .max = S3_ERRBODY_MAX};
  long st;
  int rc = s3_request(c, S3_PUT, key, &io, NULL, &st, NULL, cause);
  if (rc == 0 && (st < 200 || st > 299))
    rc = s3_status_fail(c, S3_PUT, key, st, &io, cause);
  free(io.buf);
  return rc;
}

int s3_get(s3 *c, const char *key, uint64_t off, uint64_t len, size_t max,
           uint8_t **out, size_t *n, char **cause) {
  if (cause)
    *cause = NULL;
  *out = NULL;
  *n = 0;
  char range[64];
  int ranged = len > 0;
  if (ranged) {
    if (len > max || off > UINT64_MAX - len)
      return s3_fail(cause, GTP_E_TOOBIG,
                     "S3 GET %s: range of %" PRIu64
                     " bytes exceeds the bound %zu",
                     key, len, max);
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, off,
             off + len - 1);
    max = (size_t)len;
  }
  /* Error bodies are small; a success body is bounded by max (inv. 2). */
  s3_io io = {.max = max < S3_ERRBODY_MAX ? S3_ERRBODY_MAX : max};
  long st;
  int rc =
      s3_request(c, S3_GET, key, &io, ranged ? range : NULL, &st, NULL, cause);
  if (rc < 0)
    goto fail;
  if (st < 200 || st > 299) {
    rc = s3_status_fail(c, S3_GET, key, st, &io, cause);
    goto fail;
  }
  if (ranged && st == 200) {
    /* A server that ignored the range sent the whole object: take our slice
     * only if it is all there and within the bound we buffered. */
    if (io.len >= off + len) {
      memmove(io.buf, io.buf + off, (size_t)len);
      io.len = (size_t)len;
    }
  }
  if (io.len > max) {
    rc = s3_fail(cause, GTP_E_TOOBIG, "S3 GET %s: body larger than %zu", key,
                 max);
    goto fail;
  }
  if (ranged && io.len != len) { /* invariant 3 */
    rc = s3_fail(cause, GTP_E_TRUNC,
                 "S3 GET %s%s bytes %" PRIu64 "+%" PRIu64 ": got %zu bytes",
                 c->prefix, key, off, len, io.len);
    goto fail;
  }
  if (!io.buf)
    io.buf = malloc(1); /* an empty object is still a buffer */
  if (!io.buf)
    return -ENOMEM;
  *out = io.buf;
  *n = io.len;
  return 0;
fail:
  free(io.buf);
  return rc;
}

int s3_head(s3 *c, const char *key, uint64_t *size, char **cause) {
  if (cause)
    *cause = NULL;
  s3_io io = {.max = S3_ERRBODY_MAX};
  long st;
  uint64_t cl = UINT64_MAX;
  int rc = s3_request(c, S3_HEAD, key, &io, NULL, &st, &cl, cause);
  if (rc == 0 && (st < 200 || st > 299))
    rc = s3_status_fail(c, S3_HEAD, key, st, &io, cause);
  if (rc == 0 && size)
    *size = cl;
  free(io.buf);
  return rc;
}

int s3_delete(s3 *c, const char *key, char **cause) {
  if (cause)
    *cause = NULL;
  s3_io io = {.max = S3_ERRBODY_MAX};
  long st;
  int rc = s3_request(c, S3_DELETE, key, &io, NULL, &st, NULL, cause);
  if (rc == 0 && st != 404 && (st < 200 || st > 299))
    rc = s3_status_fail(c, S3_DELETE, key, st, &io, cause);
  free(io.buf);
  return rc;
}

int s3_check(s3 *c, char **cause) {
  if (cause)
    *cause = NULL;
  s3_io io = {.max = S3_ERRBODY_MAX};
  long st;
  int rc = s3_request(c, S3_HEAD_BUCKET, NULL, &io, NULL, &st, NULL, cause);
  if (rc == 0 && (st < 200 || st > 299))
    rc = s3_status_fail(c, S3_HEAD_BUCKET, NULL, st, &io, cause);
  free(io.buf);
  return rc;
}

int s3_create_bucket(s3 *c, char **cause) {
  if (cause)
    *cause = NULL;
  s3_io io = {.max = S3_ERRBODY_MAX};
  long st;
  int rc = s3_request(c, S3_PUT_BUCKET, NULL, &io, NULL, &st, NULL, cause);
  if (rc == 0 && (st < 200 || st > 299)) {
    char code[64];
    s3_error_code(&io, code, sizeof code);
    if (!(st == 409 && strcmp(code, "BucketAlreadyOwnedByYou") == 0))
      rc = s3_status_fail(c, S3_PUT_BUCKET, NULL, st, &io, cause);
  }
  free(io.buf);
  return rc;
}

/* Appends v to q with '/' as %2F: the keys and prefixes we list hold only
 * [A-Za-z0-9._/-] (invariant 1), so that is the whole SigV4 encoding. */
static void s3_query_put(char *q, size_t cap, const char *name, const char *v) {
  size_t n = strlen(q);
  n += (size_t)snprintf(q + n, cap - n, "%s%s=", n ? "&" : "", name);
  for (; *v && n + 4 < cap; v++) {
    if (*v == '/') {
      memcpy(q + n, "%2F", 3);
      n += 3;
    } else {
      q[n++] = *v;
    }
  }
  q[n] = '\0';
}

/* The text between <tag> and </tag> at or after *p in [*p, e), bounded;
 * *p moves past it. 0 when there is none. */
static int s3_xml_next(const char **p, const char *e, const char *tag,
                       char *out, size_t cap) {
  char open[32], close[32];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *a = memmem(*p, (size_t)(e - *p), open, strlen(open));
  if (!a)
    return 0;
  a += strlen(open);
  const char *b = memmem(a, (size_t)(e - a), close, strlen(close));
  if (!b)
    return 0;
  size_t n = (size_t)(b - a);
  if (n >= cap)
    n = cap - 1;
  memcpy(out, a, n);
  out[n] = '\0';
  *p = b + strlen(close);
  return 1;
}

int s3_list(s3 *c, const char *prefix, s3_list_fn fn, void *ctx, char **cause) {
  if (cause)
    *cause = NULL;
  char full[S3_KEY_MAX + 1];
  snprintf(full, sizeof full, "%s%s", c->prefix, prefix);
  if (prefix[0] && !s3_key_ok(prefix))
    return s3_fail(cause, GTP_E_BADARG, "S3 prefix '%s' is not allowed",
                   prefix);
  char marker[2 * S3_KEY_MAX + 2] = "", last[sizeof marker] = "";
  size_t plen = strlen(c->prefix);
  for (;;) {
    /* ListObjects (version 1, marker paging): parameters in sorted order
     * make the query canonical for the signature as written. */
    char q[3 * (3 * S3_KEY_MAX) + 64] = "";
    if (marker[0])
      s3_query_put(q, sizeof q, "marker", marker);
    s3_query_put(q, sizeof q, "prefix", full);
    s3_io io = {.max = S3_LIST_BODY_MAX, .query = q};
    long st;
    int rc = s3_request(c, S3_LIST, NULL, &io, NULL, &st, NULL, cause);
    if (rc == 0 && (st < 200 || st > 299))
      rc = s3_status_fail(c, S3_LIST, NULL, st, &io, cause);
    if (rc < 0) {
      free(io.buf);
      return rc;
    }
    const char *p = (const char *)io.buf, *e = p ? p + io.len : NULL;
    char trunc[8] = "false", key[sizeof marker], size[32];
    int n = 0, stop = 0;
    if (p) {
      const char *t = p;
      s3_xml_next(&t, e, "IsTruncated", trunc, sizeof trunc);
      /* Each <Contents> holds a <Key> then a <Size>. */
      while (!stop && s3_xml_next(&p, e, "Key", key, sizeof key)) {
        n++;
        memcpy(marker, key, sizeof marker);
        if (!s3_xml_next(&p, e, "Size", size, sizeof size))
          size[0] = '\0';
        /* Only keys we could have written, under our prefix. */
        if (strncmp(key, c->prefix, plen) != 0 || !s3_key_ok(key + plen))
          continue;
        stop = fn(ctx, key + plen, strtoull(size, NULL, 10));
      }
    }
    free(io.buf);
    /* A page must move the marker on, or a broken server loops us. */
    if (stop || strcmp(trunc, "true") != 0 || n == 0 ||
        strcmp(marker, last) <= 0)
      return 0;
    memcpy(last, marker, sizeof last);
  }
}
