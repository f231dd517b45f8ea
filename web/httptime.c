/* httptime.c: time and duration parsing for the HTTP API (see httptime.h). */
#include "config.h"

#include "httptime.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"

/* No query parameter needs more; bounding the length keeps every loop below
 * trivially bounded too. */
#define HTTPTIME_INPUT_MAX 64

#define NS_PER_S INT64_C(1000000000)

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

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

int httpdur_parse(const char *s, int64_t *out_ns) {
  if (!s || !*s || strlen(s) > HTTPTIME_INPUT_MAX)
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

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil); exact for every year this parser admits. */
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

static int parse_rfc3339(const char *p, int64_t *out) {
  unsigned y, mo, d, h, mi, sec;
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
  if (secs < 0)
    return GTP_E_BADARG;
  *out = secs * NS_PER_S + frac;
  return 0;
}

int httptime_parse(const char *s, int64_t now_ns, int64_t *out_ns) {
  if (!s || !*s || strlen(s) > HTTPTIME_INPUT_MAX)
    return GTP_E_BADARG;
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
      return GTP_E_BADARG;
    int64_t d, t;
    if (httpdur_parse(rel + 1, &d))
      return GTP_E_BADARG;
    if (*rel == '-' ? __builtin_sub_overflow(now_ns, d, &t)
                    : __builtin_add_overflow(now_ns, d, &t))
      return GTP_E_BADARG;
    if (t < 0)
      return GTP_E_BADARG;
    *out_ns = t;
    return 0;
  }
  const char *p = s;
  while (is_digit(*p))
    p++;
  if (*p == 0) {
    /* All digits: unix nanoseconds. A 4-digit year alone would also be all
     * digits, but a bare year is not a valid RFC 3339 time, so nothing is
     * ambiguous. */
    int64_t v = 0;
    for (p = s; *p; p++)
      if (__builtin_mul_overflow(v, 10, &v) ||
          __builtin_add_overflow(v, *p - '0', &v))
        return GTP_E_BADARG;
    *out_ns = v;
    return 0;
  }
  return parse_rfc3339(s, out_ns);
}

void httptime_format(int64_t ns, char out[HTTPTIME_RFC3339_LEN]) {
  if (ns < 0)
    ns = 0;
  int64_t secs = ns / NS_PER_S, frac = ns % NS_PER_S;
  int64_t days = secs / 86400, rem = secs % 86400;
  int y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  /* The buffer is sized for 4-digit years; int64 ns end in 2262. */
  snprintf(out, HTTPTIME_RFC3339_LEN, "%04d-%02u-%02uT%02u:%02u:%02u.%09uZ", y,
           m, d, (unsigned)(rem / 3600), (unsigned)(rem / 60 % 60),
           (unsigned)(rem % 60), (unsigned)frac);
}

void httptime_format_compact(int64_t ns, char out[17]) {
  if (ns < 0)
    ns = 0;
  int64_t secs = ns / NS_PER_S;
  int64_t days = secs / 86400, rem = secs % 86400;
  int y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  snprintf(out, 17, "%04d%02u%02uT%02u%02u%02uZ", y, m, d,
           (unsigned)(rem / 3600), (unsigned)(rem / 60 % 60),
           (unsigned)(rem % 60));
}

int64_t httptime_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}
