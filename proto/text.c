/* text.c: buffers, UTF-8, JSON escaping, RFC 3339, durations, times,
 * host:port, constant-time compare, logfmt and cause messages (see text.h).
 *
 * Stateless apart from what a gtp_wbuf owns (its byte array). Invariant:
 *  1. A gtp_wbuf MUST stay failed after its first error (every later put is a
 *     no-op), otherwise a writer that checks err once at the end could hand
 *     out a buffer with a hole in the middle.
 *  2. len <= cap <= limit, and data != NULL whenever cap > 0: otherwise a put
 *     would write past the allocation.
 */
#include "config.h" /* _GNU_SOURCE: vasprintf */

#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gtp_error.h"
#include "varint.h"

#define NS_PER_S INT64_C(1000000000)

/* ---------------------------------------------------------------- wbuf */

static void wbuf_check(const gtp_wbuf *b) {
  GTP_ASSERT(b->len <= b->cap || b->err); /* invariant 2 */
  GTP_ASSERT(b->cap <= b->limit);
  GTP_ASSERT(b->cap == 0 || b->data != NULL);
}

void gtp_wbuf_init(gtp_wbuf *b, size_t limit) {
  b->data = NULL;
  b->len = b->cap = 0;
  b->limit = limit ? limit : GTP_WBUF_LIMIT_DEFAULT;
  b->err = 0;
}

void gtp_wbuf_fini(gtp_wbuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void gtp_wbuf_reset(gtp_wbuf *b) {
  b->len = 0;
  b->err = 0;
}

int gtp_array_grow(void **p, size_t *cap, size_t need, size_t elem,
                   size_t first) {
  if (need <= *cap)
    return 0;
  if (elem == 0 || need > SIZE_MAX / elem)
    return -ENOMEM;
  size_t n = *cap ? *cap : first;
  while (n < need)
    n = n > SIZE_MAX / 2 ? need : n * 2;
  if (n > SIZE_MAX / elem)
    n = need;
  void *q = realloc(*p, n * elem);
  if (!q)
    return -ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

uint8_t *gtp_wbuf_grow(gtp_wbuf *b, size_t n) {
  if (b->err) /* invariant 1 */
    return NULL;
  if (n > b->limit - b->len) {
    b->err = GTP_E_TOOBIG;
    return NULL;
  }
  if (n > b->cap - b->len) {
    /* Doubling keeps appends amortised O(1); the limit caps it. */
    size_t want = b->len + n;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
      cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    if (cap > b->limit)
      cap = b->limit;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
      b->err = -ENOMEM;
      return NULL;
    }
    b->data = d;
    b->cap = cap;
  }
  uint8_t *p = b->data + b->len;
  b->len += n;
  wbuf_check(b);
  return p;
}

void gtp_wbuf_put(gtp_wbuf *b, const void *p, size_t n) {
  uint8_t *d = gtp_wbuf_grow(b, n);
  if (d && n)
    memcpy(d, p, n);
}

void gtp_wbuf_put_uvarint(gtp_wbuf *b, uint64_t v) {
  uint8_t tmp[GTP_UVARINT_MAX];
  gtp_wbuf_put(b, tmp, gtp_uvarint_put(tmp, v));
}

void gtp_wbuf_put_str(gtp_wbuf *b, const char *p, size_t n) {
  gtp_wbuf_put_uvarint(b, n);
  gtp_wbuf_put(b, p, n);
}

int gtp_wbuf_sink(void *ctx, const void *p, size_t n) {
  gtp_wbuf *b = ctx;
  gtp_wbuf_put(b, p, n);
  return b->err;
}

int gtp_sink_vprintf(gtp_sink_fn sink, void *ctx, const char *fmt, va_list ap) {
  char small[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  int rc = 0;
  if (n < 0) {
    rc = 0; /* an encoding error: nothing to write, as printf would */
  } else if ((size_t)n < sizeof small) {
    rc = sink(ctx, small, (size_t)n);
  } else {
    /* Longer than the stack buffer: once on the heap, exactly sized. */
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
      rc = -ENOMEM;
    } else {
      vsnprintf(big, (size_t)n + 1, fmt, again);
      rc = sink(ctx, big, (size_t)n);
      free(big);
    }
  }
  va_end(again);
  return rc;
}

int gtp_wbuf_printf(gtp_wbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = gtp_sink_vprintf(gtp_wbuf_sink, b, fmt, ap);
  va_end(ap);
  if (rc < 0 && !b->err)
    b->err = rc; /* invariant 1: a failed append fails the buffer */
  return b->err;
}

/* --------------------------------------------------------------- UTF-8 */

size_t gtp_utf8_seq(const uint8_t *p, size_t n, uint32_t *cp) {
  uint8_t b = p[0];
  size_t need;
  uint32_t v, min;
  if (b < 0x80) {
    *cp = b;
    return 1;
  } else if (b >= 0xc2 && b <= 0xdf) {
    need = 2, v = b & 0x1f, min = 0x80;
  } else if (b >= 0xe0 && b <= 0xef) {
    need = 3, v = b & 0x0f, min = 0x800;
  } else if (b >= 0xf0 && b <= 0xf4) {
    need = 4, v = b & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (n < need)
    return 0;
  for (size_t i = 1; i < need; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    v = v << 6 | (p[i] & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *cp = v;
  return need;
}

int gtp_utf8_valid(const char *s, size_t n, unsigned flags) {
  const uint8_t *p = (const uint8_t *)s, *end = p + n;
  while (p < end) {
    uint32_t cp;
    size_t k = gtp_utf8_seq(p, (size_t)(end - p), &cp);
    if (k == 0)
      return 0;
    if (cp == 0 && (flags & (GTP_UTF8_NO_NUL | GTP_UTF8_NO_CTRL)))
      return 0;
    if ((flags & GTP_UTF8_NO_CTRL) && (cp < 0x20 || cp == 0x7f))
      return 0;
    p += k;
  }
  return 1;
}

/* ---------------------------------------------------------------- JSON */

int gtp_json_escape(gtp_sink_fn sink, void *ctx, const char *s, size_t n) {
  static const char hexd[] = "0123456789abcdef";
  if (n == 0)
    return 0; /* s may be NULL (a missing string): NULL + 0 is undefined */
  const uint8_t *p = (const uint8_t *)s, *end = p + n;
  const uint8_t *run = p; /* start of bytes that pass through unchanged */
  int rc;
  while (p < end) {
    char esc[8];
    size_t elen = 0, adv = 1;
    uint32_t cp;
    if (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
      p++;
      continue;
    }
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\', esc[1] = (char)*p, elen = 2;
    } else if (*p < 0x20) {
      memcpy(esc, "\\u00", 4);
      esc[4] = hexd[*p >> 4], esc[5] = hexd[*p & 15], elen = 6;
    } else {
      adv = gtp_utf8_seq(p, (size_t)(end - p), &cp);
      if (adv == 0) {
        /* The UTF-8 rule (text.h): one replacement per bad byte; simple,
         * and resynchronises at the next byte that can start a sequence. */
        memcpy(esc, "\\ufffd", 6), elen = 6, adv = 1;
      } else if (cp == 0x2028 || cp == 0x2029) {
        /* Valid JSON, but a line terminator to JavaScript: escaped so the
         * output can be embedded in a script. */
        memcpy(esc, cp == 0x2028 ? "\\u2028" : "\\u2029", 6), elen = 6;
      } else {
        p += adv;
        continue;
      }
    }
    if (p > run && (rc = sink(ctx, run, (size_t)(p - run))) < 0)
      return rc;
    if ((rc = sink(ctx, esc, elen)) < 0)
      return rc;
    p += adv;
    run = p;
  }
  if (p > run && (rc = sink(ctx, run, (size_t)(p - run))) < 0)
    return rc;
  return 0;
}

/* ------------------------------------------------------------ calendar */

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil); exact for every year of int64 ns. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int *y, unsigned *m, unsigned *d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = (unsigned)(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = (int64_t)yoe + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int)(yy + (*m <= 2));
}

/* Breaks ns into calendar fields, flooring toward -infinity so times before
 * 1970 still read forward within their second. */
typedef struct civil {
  int y;
  unsigned mo, d, h, mi, s;
  int64_t frac; /* 0..999999999 */
} civil;

static void civil_of(int64_t ns, civil *c) {
  int64_t sec = ns / NS_PER_S, frac = ns % NS_PER_S;
  if (frac < 0) {
    frac += NS_PER_S;
    sec--;
  }
  int64_t days = sec / 86400, rem = sec % 86400;
  if (rem < 0) {
    rem += 86400;
    days--;
  }
  civil_from_days(days, &c->y, &c->mo, &c->d);
  c->h = (unsigned)(rem / 3600);
  c->mi = (unsigned)(rem / 60 % 60);
  c->s = (unsigned)(rem % 60);
  c->frac = frac;
}

size_t gtp_rfc3339_frac(int64_t ns, int frac_digits,
                        char out[GTP_RFC3339_MAX]) {
  civil c;
  civil_of(ns, &c);
  int n = snprintf(out, GTP_RFC3339_MAX, "%04d-%02u-%02uT%02u:%02u:%02u", c.y,
                   c.mo, c.d, c.h, c.mi, c.s);
  if (n < 0)
    n = 0;
  int64_t div = frac_digits == 0   ? 0
                : frac_digits == 3 ? 1000000
                : frac_digits == 6 ? 1000
                                   : 1;
  int digits = frac_digits == 0 || frac_digits == 3 || frac_digits == 6
                   ? frac_digits
                   : 9;
  int m = div ? snprintf(out + n, GTP_RFC3339_MAX - (size_t)n, ".%0*lldZ",
                         digits, (long long)(c.frac / div))
              : snprintf(out + n, GTP_RFC3339_MAX - (size_t)n, "Z");
  return (size_t)n + (m > 0 ? (size_t)m : 0);
}

size_t gtp_rfc3339(int64_t ns, char out[GTP_RFC3339_MAX]) {
  return gtp_rfc3339_frac(ns, 9, out);
}

size_t gtp_rfc3339_compact(int64_t ns, char out[17]) {
  civil c;
  civil_of(ns, &c);
  int n = snprintf(out, 17, "%04d%02u%02uT%02u%02u%02uZ", c.y, c.mo, c.d, c.h,
                   c.mi, c.s);
  return n > 0 ? (size_t)n : 0;
}

static int is_leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(int y, unsigned m) {
  static const unsigned dm[12] = {31, 28, 31, 30, 31, 30,
                                  31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : dm[m - 1];
}

/* Reads exactly n digits. */
static int digits(const char **pp, int n, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < n; i++) {
    if (!is_digit((*pp)[i]))
      return -1;
    v = v * 10 + (unsigned)((*pp)[i] - '0');
  }
  *pp += n;
  *out = v;
  return 0;
}

int gtp_rfc3339_parse(const char *s, int64_t *out) {
  const char *p = s;
  unsigned y, mo, d, h, mi, sec;
  if (!s || strlen(s) > GTP_TIME_INPUT_MAX)
    return GTP_E_BADARG;
  if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
      digits(&p, 2, &d))
    return GTP_E_BADARG;
  if (*p != 'T' && *p != 't' && *p != ' ')
    return GTP_E_BADARG;
  p++;
  if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' ||
      digits(&p, 2, &sec))
    return GTP_E_BADARG;
  /* Years before 1970 cannot be stored as unix ns in a useful way here and
   * 2262 is where int64 ns end; refuse both rather than wrap. */
  if (y < 1970 || y > 2261 || mo < 1 || mo > 12 || d < 1 ||
      d > days_in_month((int)y, mo) || h > 23 || mi > 59 || sec > 60)
    return GTP_E_BADARG;
  int64_t frac = 0;
  if (*p == '.') {
    p++;
    int n = 0;
    int64_t scale = NS_PER_S;
    while (is_digit(*p)) {
      if (n < 9) {
        scale /= 10;
        frac += (*p - '0') * scale;
      }
      n++;
      p++;
    }
    if (n == 0)
      return GTP_E_BADARG;
  }
  int64_t off_s = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    unsigned oh, om;
    if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 ||
        om > 59)
      return GTP_E_BADARG;
    off_s = sign * (int64_t)(oh * 3600 + om * 60);
  } else {
    return GTP_E_BADARG;
  }
  if (*p)
    return GTP_E_BADARG;
  int64_t secs =
      days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off_s;
  if (secs < 0 || secs > INT64_MAX / NS_PER_S - 1)
    return GTP_E_BADARG;
  *out = secs * NS_PER_S + frac;
  return 0;
}

/* ------------------------------------------------------------ durations */

/* Unit suffixes, longest first where one is a prefix of another ("ms"
 * before "m"). The micro sign is accepted in UTF-8 as Go does. */
static const struct {
  const char *name;
  int64_t ns;
} units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000},
    {"ms", 1000000},
    {"s", NS_PER_S},
    {"m", 60 * NS_PER_S},
    {"h", 3600 * NS_PER_S},
    {"d", 86400 * NS_PER_S},
};

int gtp_dur_parse(const char *s, int64_t *out_ns) {
  if (!s || !*s || strlen(s) > GTP_TIME_INPUT_MAX)
    return GTP_E_BADARG;
  if (strcmp(s, "0") == 0) {
    *out_ns = 0;
    return 0;
  }
  int64_t total = 0;
  const char *p = s;
  while (*p) {
    /* <int>[.<frac>]: at least one digit on either side of the point. */
    int64_t whole = 0;
    int nwhole = 0;
    while (is_digit(*p)) {
      if (__builtin_mul_overflow(whole, 10, &whole) ||
          __builtin_add_overflow(whole, *p - '0', &whole))
        return GTP_E_BADARG;
      p++;
      nwhole++;
    }
    int64_t frac = 0, scale = 1;
    int nfrac = 0;
    if (*p == '.') {
      p++;
      while (is_digit(*p)) {
        /* Digits past nanosecond precision of the largest unit cannot
         * matter; drop them instead of overflowing. */
        if (nfrac < 15) {
          frac = frac * 10 + (*p - '0');
          scale *= 10;
        }
        p++;
        nfrac++;
      }
      if (nfrac == 0)
        return GTP_E_BADARG;
    }
    if (nwhole == 0 && nfrac == 0)
      return GTP_E_BADARG;
    int64_t unit = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
      size_t n = strlen(units[i].name);
      if (strncmp(p, units[i].name, n) == 0) {
        unit = units[i].ns;
        p += n;
        break;
      }
    }
    if (unit == 0)
      return GTP_E_BADARG; /* a number without unit (Go refuses it too) */
    int64_t v;
    if (__builtin_mul_overflow(whole, unit, &v))
      return GTP_E_BADARG;
    /* frac * unit can overflow int64 (1e15 * 8.64e13), so scale in double:
     * its 53-bit mantissa keeps well under 1 ns of error for any duration
     * that fits in int64 ns at all. */
    if (frac) {
      double f = (double)frac / (double)scale * (double)unit;
      if (__builtin_add_overflow(v, (int64_t)(f + 0.5), &v))
        return GTP_E_BADARG;
    }
    if (__builtin_add_overflow(total, v, &total))
      return GTP_E_BADARG;
  }
  *out_ns = total;
  return 0;
}

/* ---------------------------------------------------------------- times */

static const char why_time[] =
    "not a time: use RFC 3339 (2026-01-22T03:12:00Z, offsets and "
    "nanoseconds allowed), now, now-5m, -30s, or unix time with a unit "
    "(1732400000s, 1732400000000ms, ...us, ...ns)";
static const char why_bare[] =
    "a bare number below 10^15 is not unix nanoseconds: write its unit, "
    "e.g. 1732400000s for seconds, 1732400000000ms for milliseconds, "
    "1732400000000000us for microseconds (a bare number of nanosecond "
    "magnitude is still read as ns)";

static int time_fail(const char **why, const char *msg) {
  if (why)
    *why = msg;
  return GTP_E_BADARG;
}

/* digits + optional unit (s, ms, us, ns): unix time. 1 = parsed (*out set
 * or error returned in *rc), 0 = not of this shape. */
static int parse_unix(const char *s, int64_t *out, const char **why, int *rc) {
  const char *p = s;
  int64_t v = 0;
  while (is_digit(*p))
    p++;
  if (p == s)
    return 0;
  int64_t mul;
  if (*p == 0)
    mul = 0; /* bare */
  else if (strcmp(p, "s") == 0)
    mul = NS_PER_S;
  else if (strcmp(p, "ms") == 0)
    mul = 1000000;
  else if (strcmp(p, "us") == 0)
    mul = 1000;
  else if (strcmp(p, "ns") == 0)
    mul = 1;
  else
    return 0;
  for (const char *q = s; q < p; q++)
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, *q - '0', &v)) {
      *rc = time_fail(why, why_time);
      return 1;
    }
  if (mul == 0) {
    /* Compatibility: bare digits were unix ns. Only a value of ns
     * magnitude (or 0, the same instant in every unit) keeps that meaning;
     * 1732400000 would be 1970-01-01T00:00:01.7Z, never what was meant. */
    if (v != 0 && v < GTP_TIME_BARE_NS_MIN) {
      *rc = time_fail(why, why_bare);
      return 1;
    }
    mul = 1;
  }
  if (__builtin_mul_overflow(v, mul, &v)) {
    *rc = time_fail(why, why_time);
    return 1;
  }
  *out = v;
  *rc = 0;
  return 1;
}

int gtp_time_parse(const char *s, int64_t now_ns, int64_t *out_ns,
                   const char **why) {
  if (!s || !*s || strlen(s) > GTP_TIME_INPUT_MAX)
    return time_fail(why, why_time);
  const char *rel = NULL;
  if (strncmp(s, "now", 3) == 0) {
    if (s[3] == 0) {
      *out_ns = now_ns;
      return 0;
    }
    rel = s + 3;
  } else if (s[0] == '-' || s[0] == '+') {
    rel = s;
  }
  if (rel) {
    if (*rel != '-' && *rel != '+')
      return time_fail(why, why_time);
    int64_t d, t;
    if (gtp_dur_parse(rel + 1, &d))
      return time_fail(why, why_time);
    if (*rel == '-' ? __builtin_sub_overflow(now_ns, d, &t)
                    : __builtin_add_overflow(now_ns, d, &t))
      return time_fail(why, why_time);
    if (t < 0)
      return time_fail(why, why_time);
    *out_ns = t;
    return 0;
  }
  int rc;
  /* A 4-digit year alone is all digits too, but a bare year is not an RFC
   * 3339 time, so the two shapes never overlap. */
  if (parse_unix(s, out_ns, why, &rc))
    return rc;
  if (gtp_rfc3339_parse(s, out_ns) < 0)
    return time_fail(why, why_time);
  return 0;
}

/* ------------------------------------------------------------ host:port */

int gtp_hostport_parse(const char *s, size_t n, gtp_hostport *out) {
  const char *host = s, *colon;
  size_t hlen;
  if (s == NULL || n == 0)
    return GTP_E_BADARG;
  if (s[0] == '[') {
    const char *close = memchr(s, ']', n);
    if (close == NULL || (size_t)(close - s) + 1 >= n || close[1] != ':')
      return GTP_E_BADARG;
    host = s + 1;
    hlen = (size_t)(close - host);
    colon = close + 1;
  } else {
    colon = NULL;
    for (size_t i = 0; i < n; i++)
      if (s[i] == ':')
        colon = s + i;
    if (colon == NULL)
      return GTP_E_BADARG;
    hlen = (size_t)(colon - s);
    if (memchr(s, ':', hlen) != NULL) /* bare IPv6 needs brackets */
      return GTP_E_BADARG;
  }
  const char *p = colon + 1, *end = s + n;
  if (p == end || end - p > 5)
    return GTP_E_BADARG;
  unsigned port = 0;
  for (; p < end; p++) {
    if (!is_digit(*p))
      return GTP_E_BADARG;
    port = port * 10 + (unsigned)(*p - '0');
  }
  if (port > 65535)
    return GTP_E_BADARG;
  out->host = host;
  out->host_len = hlen;
  out->port = (uint16_t)port;
  return 0;
}

/* -------------------------------------------------------------- secrets */

int gtp_ct_equal(const void *given, size_t glen, const void *secret,
                 size_t slen) {
  const volatile uint8_t *g = given, *k = secret;
  /* Every byte of the secret is visited whatever the input; a shorter
   * input is read at index 0 again (never past its end), and the length
   * difference is folded into the same accumulator. */
  unsigned diff = glen != slen;
  for (size_t i = 0; i < slen; i++) {
    uint8_t gb = glen ? g[i < glen ? i : 0] : 0;
    diff |= (unsigned)(gb ^ k[i]);
  }
  return diff == 0;
}

/* ---------------------------------------------------------------- order */

int gtp_bytes_cmp(const void *a, size_t alen, const void *b, size_t blen) {
  size_t m = alen < blen ? alen : blen;
  int c = m ? memcmp(a, b, m) : 0;
  return c ? c : (alen > blen) - (alen < blen);
}

/* --------------------------------------------------------------- logfmt */

static int logfmt_plain(const char *s) {
  if (*s == '\0')
    return 0;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f)
      return 0;
  }
  return 1;
}

char *gtp_logfmt_quote(char *buf, size_t size, const char *s) {
  if (size == 0)
    return buf;
  if (s == NULL)
    s = "";
  if (logfmt_plain(s)) {
    size_t n = strlen(s);
    if (n < size) {
      memcpy(buf, s, n + 1);
      return buf;
    }
  }
  /* Quoted: room for the closing quote, "..." and NUL is kept back so a
   * truncated value still parses. */
  size_t o = 0;
  if (size < 8) {
    buf[0] = '\0';
    return buf;
  }
  buf[o++] = '"';
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char esc[8];
    size_t n;
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      n = 2;
    } else if (c == '\n') {
      memcpy(esc, "\\n", 2);
      n = 2;
    } else if (c < ' ' || c == 0x7f) {
      n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", c);
    } else {
      esc[0] = (char)c;
      n = 1;
    }
    if (o + n + 5 > size) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    memcpy(buf + o, esc, n);
    o += n;
  }
  buf[o++] = '"';
  buf[o] = '\0';
  return buf;
}

size_t gtp_logfmt_prefix(char *buf, size_t size, int64_t unix_ns,
                         const char *level) {
  char ts[GTP_RFC3339_MAX], lv[32];
  gtp_rfc3339_frac(unix_ns, 3, ts);
  int n = snprintf(buf, size, "ts=%s level=%s", ts,
                   gtp_logfmt_quote(lv, sizeof lv, level));
  if (n < 0)
    return 0;
  return (size_t)n < size ? (size_t)n : (size ? size - 1 : 0);
}

/* ---------------------------------------------------------------- cause */

int gtp_causef(char **cause, int rc, const char *fmt, ...) {
  if (cause != NULL) {
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
      *cause = NULL;
    va_end(ap);
  }
  return rc;
}

/* ------------------------------------------------------------------ hex */

int gtp_hex_digit(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}
