/* text.h: the one small text layer of gentrace, shared by the agent, the
 * daemon, web/ and the CLI, so that each job below is done in one place:
 *
 *   gtp_wbuf          growable byte buffer whose first error sticks
 *   gtp_utf8_*        UTF-8 decoding and validation (RFC 3629)
 *   gtp_json_escape   JSON string bodies; the one UTF-8 rule (below)
 *   gtp_rfc3339*      RFC 3339 formatting and parsing (offsets, ns)
 *   gtp_dur_parse     the one duration grammar (500ms, 10m, 1h30m, 7d)
 *   gtp_time_parse    the one time grammar (RFC 3339, now-5m, 1732400000s)
 *   gtp_hostport_*    HOST:PORT and [V6]:PORT
 *   gtp_ct_equal      constant-time comparison of secrets
 *   gtp_bytes_cmp     the one byte order of names (bytes, then length)
 *   gtp_hex_digit     the value of one hex digit
 *   gtp_logfmt_*      logfmt values, quoted and escaped
 *   gtp_causef        the `char **cause` message helper
 *
 * The UTF-8 rule: text we write as JSON is escaped, never refused; every
 * byte that does not start a valid UTF-8 sequence is written as \ufffd (one
 * replacement per bad byte), so output is always valid JSON and a bad byte
 * shows where it was. Text we *accept* as an identity (service, host, tag,
 * HTTP parameter) is validated with gtp_utf8_valid and refused when invalid.
 *
 * Everything here is pure (no I/O, no globals, no clock) except the wbuf's
 * realloc and gtp_causef's malloc. Every input is untrusted: lengths are
 * bounded, overflow is an error (GTP_E_BADARG), never a wrap. The agent links
 * this file: nothing here aborts, prints or blocks.
 */
#ifndef GTP_TEXT_H
#define GTP_TEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ buffers */

/* Sink: returns 0, or a negative code that aborts the writer that called
 * it; the writer returns that code. */
typedef int (*gtp_sink_fn)(void *ctx, const void *p, size_t n);

/* Default and largest wbuf limit: one whole generation (format.h's
 * GTP_GEN_MAX_BYTES, checked there). */
#define GTP_WBUF_LIMIT_DEFAULT (256u << 20)

/* Growable output buffer. Allocates with realloc; the first failure sets err
 * (-ENOMEM) and every later put is a no-op, so callers check once at the end.
 * cap never exceeds limit (0 = GTP_WBUF_LIMIT_DEFAULT); going past it sets
 * err = GTP_E_TOOBIG. data is owned by the buffer until gtp_wbuf_fini (or
 * until a caller takes it and zeroes the fields). */
typedef struct gtp_wbuf {
  uint8_t *data;
  size_t len, cap, limit;
  int err;
} gtp_wbuf;

void gtp_wbuf_init(gtp_wbuf *b, size_t limit);
void gtp_wbuf_fini(gtp_wbuf *b);  /* frees data */
void gtp_wbuf_reset(gtp_wbuf *b); /* len = 0, err = 0, keeps memory */
/* Reserves n bytes at the end and returns a pointer to them (len grows by n),
 * or NULL with err set. */
uint8_t *gtp_wbuf_grow(gtp_wbuf *b, size_t n);
void gtp_wbuf_put(gtp_wbuf *b, const void *p, size_t n);
void gtp_wbuf_put_uvarint(gtp_wbuf *b, uint64_t v);
void gtp_wbuf_put_str(gtp_wbuf *b, const char *p,
                      size_t n); /* uvarint len | bytes */
/* Grows the array *p of elements of elem bytes so that it holds at least
 * need of them: capacity first when empty, then doubling (appends stay
 * amortised O(1)). 0, or -ENOMEM (also when need * elem would overflow)
 * with *p and *cap unchanged. */
int gtp_array_grow(void **p, size_t *cap, size_t need, size_t elem,
                   size_t first);
/* A gtp_sink_fn that appends to the gtp_wbuf ctx; returns its err. */
int gtp_wbuf_sink(void *ctx, const void *p, size_t n);
/* Formats printf-style text and hands it to sink in one call (a long text
 * is formatted once on the heap). 0, the sink's error, or -ENOMEM. */
int gtp_sink_vprintf(gtp_sink_fn sink, void *ctx, const char *fmt, va_list ap);
/* Appends printf-formatted text (no NUL); returns b->err. */
int gtp_wbuf_printf(gtp_wbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- UTF-8 */

/* Length of the valid UTF-8 sequence at p (1..4, n > 0) with its code point
 * in *cp, or 0 if the bytes there are not one: overlong forms, surrogates,
 * code points past U+10FFFF and truncated sequences are invalid (RFC 3629).
 * The one decoder of the project. */
size_t gtp_utf8_seq(const uint8_t *p, size_t n, uint32_t *cp);

/* Flags for gtp_utf8_valid. */
#define GTP_UTF8_NO_NUL 1u  /* refuse U+0000 (identities, parameters) */
#define GTP_UTF8_NO_CTRL 2u /* refuse every C0 control and DEL */

/* 1 if [s, s+n) is valid UTF-8 (and obeys flags), else 0. */
int gtp_utf8_valid(const char *s, size_t n, unsigned flags);

/* ----------------------------------------------------------------- JSON */

/* Appends s as a JSON string body (no quotes) with escaping: quote,
 * backslash, control characters as \uXXXX, U+2028/U+2029 escaped (they end
 * a line in JavaScript), invalid UTF-8 bytes as \ufffd (the UTF-8 rule
 * above). Returns 0 or the sink's error. */
int gtp_json_escape(gtp_sink_fn sink, void *ctx, const char *s, size_t n);

/* ------------------------------------------------------------- RFC 3339 */

/* Room for every gtp_rfc3339* result, NUL included. */
#define GTP_RFC3339_MAX 40

/* Formats unix_ns as RFC 3339 UTC with nanoseconds,
 * "2026-11-22T03:04:05.123456789Z" (30 chars + NUL). Every int64_t time
 * (years 1677..2262) fits; times before 1970 are written as such. Returns
 * the length. */
size_t gtp_rfc3339(int64_t unix_ns, char out[GTP_RFC3339_MAX]);
/* The same with frac_digits fractional digits: 0 (no point), 3, 6 or 9;
 * other values are read as 9. Digits are truncated, never rounded up, so a
 * time never moves into the next second. */
size_t gtp_rfc3339_frac(int64_t unix_ns, int frac_digits,
                        char out[GTP_RFC3339_MAX]);
/* Compact form for file names: 20260122T031200Z (16 chars + NUL). */
size_t gtp_rfc3339_compact(int64_t unix_ns, char out[17]);

/* Parses one RFC 3339 date-time: 2026-01-22T03:12:00Z,
 * 2026-01-22T03:12:00.5+02:00 (fractional seconds: any number of digits, the
 * first 9 count; 't', 'z' and a space separator accepted as RFC 3339 section
 * 5.6 allows). Years 1970..2261 (unix ns in int64). 0 or GTP_E_BADARG. */
int gtp_rfc3339_parse(const char *s, int64_t *out_ns);

/* ------------------------------------------------- durations and times */

/* No value of either grammar needs more; longer input is refused. */
#define GTP_TIME_INPUT_MAX 64

/* THE duration grammar, for last=, min=, --retain, config keys and the CLI:
 * one or more <number><unit>, number = digits with an optional fraction,
 * unit = ns, us (or µs), ms, s, m, h, d: 500ms, 30s, 10m, 1h30m, 1.5s, 7d
 * (Go's time.ParseDuration plus days). A bare 0 is zero; any other number
 * without a unit is refused (is 30 seconds or minutes?). Result >= 0.
 * 0 or GTP_E_BADARG. */
int gtp_dur_parse(const char *s, int64_t *out_ns);

/* THE time grammar, for from=, to=, since= and the CLI; result unix ns:
 *   RFC 3339         2026-01-22T03:12:00Z, 2026-01-22T05:12:00.5+02:00
 *   now              now_ns
 *   relative         now-5m, now+1h, -30s, +2m (a duration from now_ns)
 *   unix, with unit  1732400000s, 1732400000000ms, ...us, ...ns
 *   bare integer     unix ns, kept for compatibility, but only when it is
 *                    plainly nanoseconds: >= 10^15 (a bare number below is
 *                    seconds, ms or us by mistake and would mean 1970, so it
 *                    is refused with a hint showing how to write it).
 * Returns 0 or GTP_E_BADARG; on error *why (if not NULL) points at a static
 * sentence saying what was wrong and how to write it. */
int gtp_time_parse(const char *s, int64_t now_ns, int64_t *out_ns,
                   const char **why);

/* The smallest bare integer gtp_time_parse reads as unix ns (2001-09-09 in
 * ns; 31 years after 1970 in us). */
#define GTP_TIME_BARE_NS_MIN INT64_C(1000000000000000)

/* ------------------------------------------------------------ host:port */

/* One parsed address; host points into the parsed string (borrowed), not
 * NUL-terminated, brackets of [V6] removed; host_len 0 for ":PORT". */
typedef struct gtp_hostport {
  const char *host;
  size_t host_len;
  uint16_t port;
} gtp_hostport;

/* Parses [s, s+n) as HOST:PORT, [V6]:PORT or :PORT. PORT is decimal
 * 0..65535; a bare IPv6 address needs brackets (which colon starts the
 * port?). 0 or GTP_E_BADARG. */
int gtp_hostport_parse(const char *s, size_t n, gtp_hostport *out);

/* -------------------------------------------------------------- secrets */

/* 1 if [given, +glen) equals [secret, +slen), else 0. The time depends only
 * on slen (the secret's length, which the caller does not hide), never on
 * where the first difference is or on glen. */
int gtp_ct_equal(const void *given, size_t glen, const void *secret,
                 size_t slen);

/* ---------------------------------------------------------------- order */

/* The order of two byte strings: memcmp's over the shorter length, then
 * the shorter first (a prefix sorts before what extends it). Either pointer
 * may be NULL when its length is 0. Negative, 0 or positive, as memcmp. */
int gtp_bytes_cmp(const void *a, size_t alen, const void *b, size_t blen);

/* ------------------------------------------------------------------ hex */

/* The value (0-15) of hex digit c, either case; -1 for anything else. */
int gtp_hex_digit(int c);

/* --------------------------------------------------------------- logfmt */

/* Writes s as a logfmt value into buf (always NUL-terminated when size > 0;
 * truncated with "..." inside the quotes to fit); returns buf. A plain word
 * (no space, quote, '=', backslash, control or non-ASCII byte) is copied
 * as is, so simple lines stay greppable; anything else is quoted with \",
 * \\, \n and \xHH escapes. NULL is written as "". */
char *gtp_logfmt_quote(char *buf, size_t size, const char *s);

/* Writes "ts=<RFC 3339, ms> level=<level>" into buf: the start of every
 * logfmt line of the project. Returns the length (truncated to size-1). */
size_t gtp_logfmt_prefix(char *buf, size_t size, int64_t unix_ns,
                         const char *level);

/* ---------------------------------------------------------------- cause */

/* Sets *cause (if cause is not NULL) to a malloc'd message from fmt (NULL if
 * that allocation fails; the caller frees it), and returns rc, so a failure
 * path reads `return gtp_causef(cause, GTP_E_BADARG, "...", ...);`. */
int gtp_causef(char **cause, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif /* GTP_TEXT_H */
