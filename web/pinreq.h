/* pinreq.h: the body of POST /v1/pins, parsed and checked whole before
 * anything is stored (docs/HTTP.md, "Retention pins"):
 *
 *   {"service":"S"} or {"session":"HEX"} (exactly one), "from", "to" (the
 *   API's time grammar, gtp_time_parse: RFC 3339, now-5m, 1732400000s, or
 *   unix ns; as a JSON string or number), "reason" (a string of at most
 *   HOLD_REASON_MAX bytes), optional "ttl" (a duration string, default
 *   PINREQ_TTL_DEFAULT_NS, at most the caller's max).
 *
 * Pure: no I/O, no globals; the body is hostile (any bytes, any length the
 * caller accepted). Every failure names the member and what is wrong.
 */
#ifndef PINREQ_H
#define PINREQ_H

#include <stddef.h>
#include <stdint.h>

#define PINREQ_TTL_DEFAULT_NS (7 * 86400 * INT64_C(1000000000))
/* Longest service name accepted (sessions are 32 hex digits). */
#define PINREQ_SERVICE_MAX 256

typedef struct pinreq {
  char service[PINREQ_SERVICE_MAX + 1]; /* "" when a session is pinned */
  char session[33];                     /* "" when a service is pinned */
  int64_t from_ns, to_ns;
  char reason[512 + 1]; /* HOLD_REASON_MAX + NUL */
  int64_t ttl_ns;
} pinreq;

/* 0 with *out filled, or -1 with a sentence in why (NUL-terminated, at most
 * cap bytes). now_ns anchors relative times; max_ttl_ns bounds ttl. */
int pinreq_parse(const char *body, size_t len, int64_t now_ns,
                 int64_t max_ttl_ns, pinreq *out, char *why, size_t cap);

#endif /* PINREQ_H */
