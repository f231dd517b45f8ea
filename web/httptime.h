/* httptime.h: web/'s names for the project's one time and duration grammar
 * (proto/text.h: gtp_time_parse, gtp_dur_parse, gtp_rfc3339), plus the
 * wall clock that anchors relative times. Thin inline adapters, so the HTTP
 * API, the daemon's flags and the CLI cannot drift apart.
 *
 * Accepted times: RFC 3339 (offsets, nanoseconds), now, now-5m, -30s, unix
 * time with a unit (1732400000s, ...ms, ...us, ...ns), and, for
 * compatibility, a bare integer of nanosecond magnitude (>= 10^15). A bare
 * number below that is refused: it is seconds or milliseconds by mistake.
 * Durations: 500ms, 30s, 5m, 1h30m, 1.5s, 7d.
 */
#ifndef WEB_HTTPTIME_H
#define WEB_HTTPTIME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "text.h"

/* Length of an httptime_format result, NUL included:
 * "2026-01-22T03:12:00.123456789Z". */
#define HTTPTIME_RFC3339_LEN 31

/* Parses s (NUL-terminated) as a duration in ns (>= 0). 0 or GTP_E_BADARG. */
static inline int httpdur_parse(const char *s, int64_t *out_ns) {
  return gtp_dur_parse(s, out_ns);
}

/* Parses s as a time (unix ns). now_ns anchors relative times. 0 or
 * GTP_E_BADARG (gtp_time_parse gives the reason). */
static inline int httptime_parse(const char *s, int64_t now_ns,
                                 int64_t *out_ns) {
  return gtp_time_parse(s, now_ns, out_ns, NULL);
}

/* Formats ns (unix, UTC) as RFC 3339 with 9 fractional digits. Times before
 * 1970 are clamped to 1970 (the API never answers with earlier ones). */
static inline void httptime_format(int64_t ns, char out[HTTPTIME_RFC3339_LEN]) {
  char t[GTP_RFC3339_MAX];
  size_t n = gtp_rfc3339(ns < 0 ? 0 : ns, t);
  memcpy(out, t, n < HTTPTIME_RFC3339_LEN ? n + 1 : HTTPTIME_RFC3339_LEN);
  out[HTTPTIME_RFC3339_LEN - 1] = '\0';
}

/* Compact form for file names: 20260122T031200Z (17 bytes with NUL). */
static inline void httptime_format_compact(int64_t ns, char out[17]) {
  gtp_rfc3339_compact(ns < 0 ? 0 : ns, out);
}

/* CLOCK_REALTIME in unix ns. */
static inline int64_t httptime_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

#endif
