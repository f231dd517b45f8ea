/* pg_cat.h: the shared store's catalog in PostgreSQL: sessions, segments
 * and generations located as (segment object, offset, length), the feed
 * cursor, and the reads the HTTP API needs (same rows and callbacks as the
 * SQLite reader, store_read.h, so both backends answer alike).
 *
 * Thread: any; each call borrows a pooled connection for its duration and
 * may wait for the network: never call it on the libuv loop.
 */
#ifndef PG_CAT_H
#define PG_CAT_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "store_read.h"

typedef struct pg_cat pg_cat;

/* Connects (one connection now: an unreachable catalog is GTP_E_UNAVAIL
 * with *cause), migrates the schema, prepares statements. pool: connections
 * at most. */
int pg_cat_open(const char *conninfo, int pool, pg_cat **out, char **cause);
void pg_cat_close(pg_cat *c);

/* One generation of a segment to catalog. */
typedef struct pg_cat_gen {
  const store_gen *g; /* identity, span, ledger (borrowed) */
  uint64_t off, len;  /* its bytes in the segment object */
  const char *codec;  /* STORE_CODEC_* of those bytes */
  /* Its summary rows (pg_sum.h), copied in the same transaction when the
   * generation is new; NULL: none (out of memory when it was built). */
  const struct pg_sum *sum;
  /* Filled by pg_cat_commit_segment on success: */
  int result;  /* 0 new, 1 already cataloged with the same CRC
                  (a resend), GTP_E_CONFLICT: cataloged with
                  another CRC (refused), GTP_E_AUTH: the session
                  is bound to another key hash (refused, nothing
                  of it stored; the first key committed wins) */
  int64_t seq; /* feed cursor of a new row, 0 for a resend */
} pg_cat_gen;

/* Catalogs one stored segment object and its generations in one
 * transaction. Sequence numbers are taken under gt_counter's row lock held
 * to COMMIT, so seq order is commit order on every daemon. A generation
 * already cataloged (same session and gen) is result 1 and adds nothing;
 * a segment whose every generation was a resend is cataloged dead at once
 * (its object is deleted later). Committing the same object again (a retry
 * after a lost COMMIT reply) reports every generation as a resend.
 * Returns 0, or a negative code with *cause: nothing was committed then;
 * GTP_E_NOTFOUND: the orphan sweep deleted this object meanwhile (it took
 * this daemon for dead), so upload the segment again under a new name. */
int pg_cat_commit_segment(pg_cat *c, const char *object, uint64_t bytes,
                          const char *daemon, pg_cat_gen *gens, size_t n,
                          char **cause);

/* The connection pool, for the catalog's other modules (pg_live.c). */
struct pg *pg_cat_pool(pg_cat *c);

/* Test hook: sleep ms between inserting the generations (seqs taken) and
 * COMMIT, to show a late commit cannot be skipped by the feed. */
void pg_cat_set_test_delay(pg_cat *c, unsigned ms);
/* Test hook: how many commits have entered that delay (their seqs taken,
 * the counter's row locked) and how many have left it (COMMIT next), so a
 * test waits for the state itself rather than for a guessed time. */
unsigned pg_cat_test_delays_begun(pg_cat *c);
unsigned pg_cat_test_delays_done(pg_cat *c);

/* Last cataloged gen of a session (for WELCOME, on any daemon): 1 and *gen
 * set, 0 when it has none, or a negative code. */
int pg_cat_last_gen(pg_cat *c, const uint8_t session[16], uint64_t *gen,
                    char **cause);

/* The key hash bound to a session in the catalog (any daemon's commits):
 * 1 and hash filled, 0 none bound, or a negative code. */
int pg_cat_session_key(pg_cat *c, const uint8_t session[16],
                       uint8_t hash[STORE_KEY_HASH_SIZE], char **cause);

/* A HELLO's lookup in one round trip (gt_hello): the bound key hash and
 * the last cataloged gen, each with its flag. 0 or a negative code. */
typedef struct pg_cat_hello_row {
  int has_key, has_last;
  uint8_t key[STORE_KEY_HASH_SIZE];
  uint64_t last_gen;
} pg_cat_hello_row;
int pg_cat_hello(pg_cat *c, const uint8_t session[16], pg_cat_hello_row *out,
                 char **cause);

/* Adds to a session's daemon-side rejected counts (no-op when unknown). */
int pg_cat_note_rejected(pg_cat *c, const uint8_t session[16], uint64_t gens,
                         uint64_t events, char **cause);

/* Reads: as the store_read_* calls of the same names (store_read.h). */
int pg_cat_read_sessions(pg_cat *c, const store_session_filter *f,
                         store_session_cb cb, void *ctx);
int pg_cat_read_session_gens(pg_cat *c, const char *session, int64_t from_ns,
                             int64_t to_ns, int64_t after, uint32_t limit,
                             store_gen_cb cb, void *ctx);
int pg_cat_read_window(pg_cat *c, const store_window_query *q, store_gen_cb cb,
                       void *ctx);
int pg_cat_read_feed(pg_cat *c, int64_t after_seq, uint32_t limit,
                     store_gen_cb cb, void *ctx);
int pg_cat_read_max_seq(pg_cat *c, int64_t *seq);
int pg_cat_read_feed_since(pg_cat *c, int64_t since_ns, int64_t *after_seq);

/* Where one generation's bytes are. object is malloc'd (caller frees). */
typedef struct pg_cat_loc {
  int64_t seq;
  char *object;
  uint64_t off, len;
  char codec[16];
  uint64_t bytes; /* uncompressed length */
} pg_cat_loc;
/* GTP_E_NOTFOUND when no such generation is cataloged. */
int pg_cat_locate(pg_cat *c, int64_t seq, pg_cat_loc *out);
int pg_cat_locate_by_gen(pg_cat *c, const char *session, uint64_t gen,
                         pg_cat_loc *out);

/* ---- cluster retention (store/shared_retain.c drives these) ---- */

/* Publishes this daemon's lowest pinned seq (INT64_MAX: none) for ttl_ms;
 * retention on every daemon keeps seqs >= the lowest unexpired pin. */
int pg_cat_pin_publish(pg_cat *c, const char *daemon, int64_t min_seq,
                       int64_t ttl_ms, char **cause);

/* One retention pass, if no other daemon runs one (PostgreSQL advisory
 * lock, taken without waiting): deletes generations that ended before
 * cutoff_ns (0 = no age limit), then the oldest ones while the stored bytes
 * exceed max_bytes (0 = no limit; down to max - max/16), never a seq at or
 * above the lowest pin of any daemon, at most limit rows. Segments whose
 * last generation goes are marked dead. Returns rows deleted (>= 0), or a
 * negative code; *ran is 0 when another daemon held the lock. */
int pg_cat_retain(pg_cat *c, int64_t cutoff_ns, uint64_t max_bytes,
                  uint32_t limit, int *ran, char **cause);

/* Dead segments (no live generation) that died before grace_ms ago: calls
 * fn(object) for up to limit of them; when fn returns 0 the row is removed.
 * Returns the number removed or a negative code. */
int pg_cat_sweep_dead(pg_cat *c, int64_t grace_ms, uint32_t limit,
                      int (*fn)(void *ctx, const char *object), void *ctx,
                      char **cause);

#endif /* PG_CAT_H */
