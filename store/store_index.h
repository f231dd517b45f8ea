/* store_index.h: the store's in-memory session index (internal to store/):
 * per session, the last committed gen (WELCOME's resume hint), the hash of
 * the key bound to it (protocol v2 ownership) and rejected counts waiting to
 * be written to its row. See store_index.c for the design note.
 *
 * Thread: every function is safe from any thread (one mutex inside).
 */
#ifndef STORE_INDEX_H
#define STORE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Sessions that stored nothing but had generations rejected ("no-row"):
 * at most this many are tracked, each for this long after its last
 * rejection (GENTRACE_TEST_NOROW_MAX / GENTRACE_TEST_NOROW_TTL_MS lower
 * them for tests). */
#define STORE_INDEX_NOROW_MAX 65536
#define STORE_INDEX_NOROW_TTL_NS (600ll * 1000000000)
#define STORE_INDEX_NOROW_SWEEP_NS (60ll * 1000000000)

typedef struct store_index store_index;

/* NULL when out of memory. */
store_index *store_index_new(void);
void store_index_free(store_index *x);

/* A generation of the session committed (its row exists). 0, or -ENOMEM
 * when a new entry could not be made (an existing one never allocates). */
int store_index_note_gen(store_index *x, const uint8_t session[16],
                         uint64_t gen);
/* Binds hash to the session unless it has a key already (first wins). 0
 * (bound now or before), or -ENOMEM: nothing bound, and the caller must
 * not act as if it were (store_submit refuses the generation). */
int store_index_bind_key(store_index *x, const uint8_t session[16],
                         const uint8_t hash[STORE_KEY_HASH_SIZE]);
/* 1 and *hash filled, or 0 without a bound key. */
int store_index_key(store_index *x, const uint8_t session[16],
                    uint8_t hash[STORE_KEY_HASH_SIZE]);
/* 1 and *gen set, or 0 if the session has committed nothing. */
int store_index_last_gen(store_index *x, const uint8_t session[16],
                         uint64_t *gen);
/* Counts a rejected generation (bounded for no-row sessions). */
void store_index_note_rejected(store_index *x, const uint8_t session[16],
                               uint64_t events);
/* Forgets no-row entries past their TTL (cheap unless a sweep is due). */
void store_index_expire(store_index *x);

/* Rejected counts waiting for a sessions row that exists. */
typedef struct store_index_rej {
  uint8_t session[16];
  uint64_t gens, events;
  int applied; /* set by the caller: written to the row */
} store_index_rej;
/* A malloc'd snapshot of them (*n entries), or NULL when there are none. */
store_index_rej *store_index_rejected(store_index *x, size_t *n);
/* Subtracts the entries the caller marked applied. */
void store_index_rejected_done(store_index *x, const store_index_rej *list,
                               size_t n);

/* Fills out->index_sessions, norow_sessions and norow_untracked. */
void store_index_stats(store_index *x, store_stats *out);

#endif
