/* httptime.h: the times and durations the HTTP API accepts, and the RFC 3339
 * rendering it answers with.
 *
 * Accepted times (httptime_parse):
 *   RFC 3339          2026-01-22T03:12:00Z, 2026-01-22T03:12:00.5+02:00
 *                     (fractional seconds up to 9 digits; 't', 'z' and a
 *                     space separator accepted as RFC 3339 section 5.6 allows)
 *   unix nanoseconds  1769051520000000000 (digits only)
 *   relative          now, -30s, now-5m, -1h30m (relative to now_ns)
 * Durations (httpdur_parse): a run of <number><unit> with units ns, us, ms,
 *   s, m, h, d, e.g. 30s, 5m, 1h30m, 500ms, 1.5s (Go's time.ParseDuration
 *   plus days); a bare 0 is zero.
 *
 * Pure functions, no allocation, no globals; every input is untrusted and
 * every overflow is an error (GTP_E_BADARG), never a wrap.
 */
#ifndef WEB_HTTPTIME_H
#define WEB_HTTPTIME_H

#include <stddef.h>
#include <stdint.h>

/* Length of an httptime_format result, NUL included:
 * "2026-01-22T03:12:00.123456789Z". */
#define HTTPTIME_RFC3339_LEN 31

/* Parses s (NUL-terminated) as a duration in ns (>= 0). 0 or GTP_E_BADARG. */
int httpdur_parse(const char *s, int64_t *out_ns);

/* Parses s as a time (unix ns). now_ns anchors relative times. 0 or
 * GTP_E_BADARG. */
int httptime_parse(const char *s, int64_t now_ns, int64_t *out_ns);

/* Formats ns (unix, UTC) as RFC 3339 with 9 fractional digits. Times before
 * 1970 or after 9999 are clamped to those years' edges. */
void httptime_format(int64_t ns, char out[HTTPTIME_RFC3339_LEN]);

/* Compact form for file names: 20260122T031200Z (17 bytes with NUL). */
void httptime_format_compact(int64_t ns, char out[17]);

/* CLOCK_REALTIME in unix ns. */
int64_t httptime_now_ns(void);

#endif
