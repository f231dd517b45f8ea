/* session_auth.h: who may speak for a session (protocol v2 session keys)
 * and what a generation may claim (validation at the door): the checks of
 * PROTOCOL.md 6.9-6.11 that daemon/ingest.c and daemon/reasm.c call. See
 * session_auth.c for the design note and invariants.
 *
 * Thread: loop only, except session_auth_metrics (HTTP threads; it reads
 * relaxed atomics).
 */
#ifndef SESSION_AUTH_H
#define SESSION_AUTH_H

#include <stdint.h>

#include "format.h"
#include "frame.h"

struct conn;
struct ingest;
struct store_gen;

/* Refusal counters, one per reason, in /metrics as
 * gentrace_refused_total{reason="..."}. */
enum trust_id {
  TR_AUTH,      /* HELLO with another key than the session's */
  TR_CONFLICT,  /* re-sent generation with other bytes (CRC) */
  TR_GEN_RANGE, /* generation number 0 or >= 2^63 */
  TR_CLOCK,     /* CLOCK over --max-gen-span or --max-clock-skew */
  TR_LEDGER,    /* ledger count over GTP_LEDGER_MAX or session overflow */
  TR_TEXT,      /* identity with NUL or invalid UTF-8 */
  TR_COUNT_
};

/* Largest dropped, evicted or rejected count one generation may claim
 * (2^48: more events than an agent can write in a generation at any
 * realistic rate), so a sum of them can never wrap 64 bits. */
#define GTP_LEDGER_MAX (1ull << 48)

/* HELLO, after decode, version and token checks: hashes the key into
 * c->key_hash and checks it against the session's live connection `live`
 * (may be NULL) or the key bound in the store. 0 = accepted; else c was
 * closed with ERROR(AUTH), nothing else changed, and -1 is returned. */
int session_auth_hello(struct conn *c, const gtp_hello *h, struct conn *live);
/* The same in two steps, for a lookup run off the loop (hello_lookup.h):
 * session_auth_key records the HELLO's session id and key hash in c;
 * session_auth_decide checks them against `live` (may be NULL) or the
 * store's answer (key_rc 1: key bound, 0: none, < 0: cannot check now,
 * refused with ERROR(UNAVAIL)). Same result as session_auth_hello. */
void session_auth_key(struct conn *c, const gtp_hello *h);
int session_auth_decide(struct conn *c, struct conn *live, int key_rc,
                        const uint8_t *key);

/* HELLO that did not decode because of its text (h->bad_field set): counts
 * it and closes c with ERROR(CORRUPT) naming the field. Returns -1. */
int session_auth_bad_text(struct conn *c, const gtp_hello *h);

/* 1 if gen is a valid generation number ([1, 2^63)), else counts it and
 * returns 0 with *why set for the ERROR reason. */
int session_auth_gen_ok(struct conn *c, uint64_t gen, const char **why);

/* The door checks of a checked generation: its CLOCK k (order, span,
 * distance from the daemon's clock) and its ledger counts e. 0, or a
 * negative code with *why (a static or thread-unsafe buffer, valid until
 * the next call) for the ERROR reason; counted. */
int session_auth_gen_check(struct conn *c, const gtp_clock *k,
                           const gtp_gen_end *e, const char **why);

/* A completion the store refused (GTP_E_CONFLICT or GTP_E_TOOBIG): counts
 * and logs it, adds its events to the session's rejected count and sends
 * ERROR(code, gen) if the connection is still up. GTP_E_AUTH (the shared
 * store bound the session to another key at commit): counts it and closes
 * the connection with ERROR(AUTH), noting nothing on the session. */
void session_auth_store_refused(struct conn *c, const struct store_gen *g);

/* Appends the refusal counters and the session bookkeeping gauges to b. */
void session_auth_metrics(struct ingest *ing, gtp_wbuf *b);

#endif
