/* pinreq.c: the POST /v1/pins body (see pinreq.h).
 *
 * The body is first checked whole by json_valid (strict RFC 8259, bounded
 * nesting, valid UTF-8 inside strings); only then is the top-level object
 * walked, so the walker below may rely on well-formed input and stays
 * small. It still bounds every copy by its destination.
 *
 * Invariants:
 *   1. Every member MUST be known and appear once, otherwise a typo
 *      ("servce") or a repeated key would silently change what is pinned.
 *   2. Decoded text MUST hold no NUL (\u0000) and no lone surrogate, and
 *      fit its buffer whole (no truncation), otherwise what is stored would
 *      differ from what was sent.
 */
#include "config.h"

#include "pinreq.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "text.h"

typedef struct walk {
  const unsigned char *p, *end;
} walk;

static void ws(walk *w) {
  while (w->p < w->end &&
         (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
    w->p++;
}

static int bad(char *why, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, cap, fmt, ap);
  va_end(ap);
  return -1;
}

static uint32_t hex4(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v = v << 4 | (uint32_t)gtp_hex_digit(p[i]);
  return v;
}

static size_t put_utf8(uint32_t cp, char *o) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes the string at w->p (its opening quote) into out (cap bytes with
 * the NUL). 1 ok, 0 too long, -1 NUL or lone surrogate (invariant 2). */
static int string_(walk *w, char *out, size_t cap) {
  size_t n = 0;
  int rc = 1;
  w->p++;
  while (w->p < w->end && *w->p != '"') {
    char tmp[4];
    size_t k;
    if (*w->p != '\\') {
      tmp[0] = (char)*w->p++;
      k = 1;
    } else {
      unsigned char e = w->p[1];
      w->p += 2;
      if (e != 'u') {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        tmp[0] = to[strchr(from, e) - from];
        k = 1;
      } else {
        uint32_t cp = hex4(w->p);
        w->p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && w->end - w->p >= 6 &&
            w->p[0] == '\\' && w->p[1] == 'u') {
          uint32_t lo = hex4(w->p + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            w->p += 6;
          }
        }
        if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
          rc = -1;
        k = put_utf8(cp, tmp);
      }
    }
    if (n + k >= cap) {
      if (rc > 0)
        rc = 0;
    } else {
      memcpy(out + n, tmp, k);
      n += k;
    }
  }
  w->p++; /* closing quote (json_valid saw it) */
  out[n] = 0;
  return rc;
}

/* The raw text of a number (as written) into out. 1 ok, 0 too long. */
static int number_(walk *w, char *out, size_t cap) {
  const unsigned char *s = w->p;
  while (w->p < w->end && *w->p && strchr("+-0123456789.eE", *w->p))
    w->p++;
  size_t n = (size_t)(w->p - s);
  if (n >= cap)
    return 0;
  memcpy(out, s, n);
  out[n] = 0;
  return 1;
}

enum { M_SERVICE, M_SESSION, M_FROM, M_TO, M_REASON, M_TTL, M_N };
static const char *const names[M_N] = {"service", "session", "from",
                                       "to",      "reason",  "ttl"};

static int session_hex(const char *s, char out[33]) {
  if (strlen(s) != 32)
    return 0;
  for (int i = 0; i < 32; i++) {
    int v = gtp_hex_digit((unsigned char)s[i]);
    if (v < 0)
      return 0;
    out[i] = "0123456789abcdef"[v];
  }
  out[32] = 0;
  return 1;
}

static int time_of(const char *name, const char *text, int64_t now,
                   int64_t *out, char *why, size_t cap) {
  const char *err = NULL;
  if (gtp_time_parse(text, now, out, &err) == 0)
    return 0;
  return bad(why, cap, "%s: %s", name, err ? err : "not a time");
}

int pinreq_parse(const char *body, size_t len, int64_t now_ns,
                 int64_t max_ttl_ns, pinreq *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  if (!body || len == 0)
    return bad(why, cap,
               "empty body: send a JSON object like {\"service\":\"S\","
               "\"from\":\"now-10m\",\"to\":\"now\",\"reason\":\"...\"}");
  if (!json_valid(body, len))
    return bad(why, cap,
               "body is not valid JSON (or holds invalid UTF-8, or nests "
               "too deep)");
  walk w = {(const unsigned char *)body, (const unsigned char *)body + len};
  ws(&w);
  if (*w.p != '{')
    return bad(why, cap, "body must be a JSON object");
  w.p++;
  int seen[M_N] = {0};
  /* Values as text: times and ttl need little room; reason and service
   * are decoded straight into out. */
  char text[M_N][GTP_TIME_INPUT_MAX + 1];
  for (;;) {
    ws(&w);
    if (*w.p == '}')
      break;
    if (*w.p == ',') {
      w.p++;
      ws(&w);
    }
    char key[32];
    int k = string_(&w, key, sizeof key);
    int m = -1;
    for (int i = 0; k > 0 && i < M_N; i++)
      if (strcmp(key, names[i]) == 0)
        m = i;
    if (m < 0) /* invariant 1 */
      return bad(why, cap,
                 "%.31s: unknown member (allowed: service, session, from, "
                 "to, reason, ttl)",
                 k > 0 ? key : "(a long name)");
    if (seen[m])
      return bad(why, cap, "%s: given twice", names[m]);
    seen[m] = 1;
    ws(&w);
    w.p++; /* ':' */
    ws(&w);
    unsigned char c = *w.p;
    if (c == 'n') { /* null: as if absent */
      w.p += 4;
      seen[m] = 2;
      continue;
    }
    if (c != '"' &&
        (c == '{' || c == '[' || c == 't' || c == 'f' || m == M_SERVICE ||
         m == M_SESSION || m == M_REASON || m == M_TTL))
      return bad(why, cap, "%s: must be a string", names[m]);
    int r;
    if (c != '"')
      r = number_(&w, text[m], sizeof text[m]);
    else if (m == M_SERVICE)
      r = string_(&w, out->service, sizeof out->service);
    else if (m == M_REASON)
      r = string_(&w, out->reason, sizeof out->reason);
    else
      r = string_(&w, text[m], sizeof text[m]);
    if (r < 0) /* invariant 2 */
      return bad(why, cap, "%s: holds a NUL character or a lone surrogate",
                 names[m]);
    if (r == 0)
      return bad(why, cap, "%s: too long (at most %d bytes)", names[m],
                 m == M_SERVICE  ? PINREQ_SERVICE_MAX
                 : m == M_REASON ? (int)sizeof out->reason - 1
                                 : GTP_TIME_INPUT_MAX);
  }
  int has_svc = seen[M_SERVICE] == 1, has_ses = seen[M_SESSION] == 1;
  if (has_svc == has_ses)
    return bad(why, cap,
               has_svc ? "give either service or session, not both"
                       : "service or session: one is required");
  if (has_svc && (out->service[0] == 0 ||
                  !gtp_utf8_valid(out->service, strlen(out->service),
                                  GTP_UTF8_NO_NUL | GTP_UTF8_NO_CTRL)))
    return bad(why, cap,
               "service: must be a non-empty name without "
               "control characters");
  if (has_ses && !session_hex(text[M_SESSION], out->session))
    return bad(why, cap, "session: not a session id (32 hex digits)");
  if (seen[M_FROM] != 1 || seen[M_TO] != 1)
    return bad(why, cap,
               "%s: required (a time: RFC 3339, now-1h, "
               "1732400000s or unix ns)",
               seen[M_FROM] != 1 ? "from" : "to");
  if (time_of("from", text[M_FROM], now_ns, &out->from_ns, why, cap) < 0 ||
      time_of("to", text[M_TO], now_ns, &out->to_ns, why, cap) < 0)
    return -1;
  if (out->from_ns >= out->to_ns)
    return bad(why, cap, "from: must be before to (the window is [from, to))");
  if (seen[M_REASON] != 1)
    return bad(why, cap,
               "reason: required (why this window is kept, at "
               "most %d bytes)",
               (int)sizeof out->reason - 1);
  out->ttl_ns = PINREQ_TTL_DEFAULT_NS;
  if (seen[M_TTL] == 1 &&
      (gtp_dur_parse(text[M_TTL], &out->ttl_ns) != 0 || out->ttl_ns <= 0))
    return bad(why, cap, "ttl: not a positive duration (like 12h, 7d)");
  if (out->ttl_ns > max_ttl_ns)
    return bad(why, cap,
               "ttl: longer than the longest allowed (--pin-max-ttl, %lld "
               "days)",
               (long long)(max_ttl_ns / (86400 * INT64_C(1000000000))));
  return 0;
}
