/* store_index.c: the store's in-memory session index.
 *
 * Owns: one open-addressing hash table (linear probing, keyed with a
 * per-process seed) of entries per session, and its mutex.
 *
 * An entry exists for a session that committed something (has_gen: its
 * row exists, last_gen is WELCOME's resume hint), that has a key bound
 * (has_key: by a submitted generation or its row), or that had generations
 * rejected without ever storing anything ("no-row": only rejected counts,
 * noted_ns = when the last one was). Rejected counts of a session with a
 * row are written to it by the store thread (store_index_rejected /
 * _rejected_done); those of a no-row session wait for its first commit.
 *
 * Invariants:
 *  1. No-row entries MUST stay at most norow_max and MUST be dropped
 *     norow_ttl_ns after their last rejection, and the flush snapshot MUST
 *     only hold sessions with a row, otherwise throwaway sessions by the
 *     hundred thousand would grow memory and the store thread's per-second
 *     flush (so ACK latency) forever.
 *  2. rej_pending MUST equal the number of entries with has_gen and
 *     rej_gens > 0, otherwise the snapshot would be cut short or sized
 *     wrong.
 *  3. A key binding MUST never change once made (first wins), otherwise a
 *     later HELLO could re-bind a session it does not own. Nor does it go:
 *     an entry with a key is never a no-row entry, the only kind expired,
 *     so a submitter that bound a key once may skip binding it again
 *     (store_gen.key_bound).
 *  4. Finding an entry that exists MUST NOT allocate, otherwise a
 *     resubmitted generation (its key bound already) or a commit's
 *     note_gen after its submit's bind could fail for want of memory the
 *     entry never needed.
 *  5. bind_key and note_gen MUST report a failure to allocate a new entry
 *     (-ENOMEM), otherwise a generation would be queued for a session
 *     whose key is silently unbound, and any later HELLO for it (its
 *     connection gone) would be let in with another key until a restart
 *     reloaded the binding from the row.
 */
#include "config.h"

#include "store_index.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct idx_ent {
  uint8_t key[16];
  uint8_t used;
  uint8_t has_gen; /* committed: the sessions row exists */
  uint8_t has_key; /* key_hash is bound */
  uint64_t last_gen;
  uint64_t rej_gens, rej_events; /* not yet written to the row */
  int64_t noted_ns;              /* last rejection (monotonic), or 0 */
  uint8_t key_hash[STORE_KEY_HASH_SIZE];
} idx_ent;

struct store_index {
  /* Written once in store_index_new. */
  uint64_t seed;
  uint64_t norow_max;
  int64_t norow_ttl_ns, norow_every_ns;
  /* Protected by lock. */
  pthread_mutex_t lock;
  idx_ent *tab;
  size_t cap, len;
  uint64_t rej_pending; /* invariant 2 */
  uint64_t norow, norow_untracked;
  int64_t next_sweep_ns;
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) {
  /* splitmix64 finalizer: spreads the seed over every bit. */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

store_index *store_index_new(void) {
  store_index *x = calloc(1, sizeof *x);
  if (x == NULL)
    return NULL;
  x->seed = mix64((uint64_t)mono_ns() ^ (uint64_t)(uintptr_t)x ^
                  ((uint64_t)getpid() << 32));
  x->norow_max = STORE_INDEX_NOROW_MAX;
  x->norow_ttl_ns = STORE_INDEX_NOROW_TTL_NS;
  x->norow_every_ns = STORE_INDEX_NOROW_SWEEP_NS;
  const char *v = getenv("GENTRACE_TEST_NOROW_MAX");
  if (v != NULL && atoll(v) > 0 && atoll(v) < STORE_INDEX_NOROW_MAX)
    x->norow_max = (uint64_t)atoll(v);
  v = getenv("GENTRACE_TEST_NOROW_TTL_MS");
  if (v != NULL && atoll(v) > 0) {
    x->norow_ttl_ns = atoll(v) * 1000000;
    x->norow_every_ns = x->norow_ttl_ns / 2;
  }
  pthread_mutex_init(&x->lock, NULL);
  return x;
}

void store_index_free(store_index *x) {
  if (x == NULL)
    return;
  pthread_mutex_destroy(&x->lock);
  free(x->tab);
  free(x);
}

/* Keyed with a per-process seed: session ids come from the network, so a
 * peer must not be able to pick ids that all land in one probe run. */
static size_t slot(const store_index *x, const uint8_t key[16]) {
  uint64_t a, b;
  memcpy(&a, key, 8);
  memcpy(&b, key + 8, 8);
  return (size_t)(mix64(a ^ x->seed) ^ mix64(b + x->seed)) & (x->cap - 1);
}

/* Moves every used entry of old[0..ocap) into a fresh table of x->cap
 * slots (keep: which to keep, NULL = all). Lock held. */
static void rehash(store_index *x, idx_ent *n, const idx_ent *old,
                   size_t ocap, int (*keep)(const store_index *,
                                            const idx_ent *, int64_t),
                   int64_t now) {
  size_t len = 0;
  for (size_t i = 0; i < ocap; i++) {
    if (!old[i].used || (keep != NULL && !keep(x, &old[i], now)))
      continue;
    size_t j = slot(x, old[i].key);
    while (n[j].used)
      j = (j + 1) & (x->cap - 1);
    n[j] = old[i];
    len++;
  }
  x->tab = n;
  x->len = len;
}

static int grow(store_index *x) {
  size_t ncap = x->cap ? x->cap * 2 : 256;
  idx_ent *n = calloc(ncap, sizeof *n);
  if (n == NULL)
    return -ENOMEM;
  idx_ent *old = x->tab;
  size_t ocap = x->cap;
  x->cap = ncap;
  rehash(x, n, old, ocap, NULL, 0);
  free(old);
  return 0;
}

/* Finds (or with create, inserts) the entry of key. Lock held. NULL if
 * absent (or out of memory when creating). An entry that exists is found
 * without allocating (invariant 4): the table grows only for a new one. */
static idx_ent *find(store_index *x, const uint8_t key[16], int create) {
  if (x->cap == 0 && (!create || grow(x) != 0))
    return NULL;
  size_t j = slot(x, key);
  while (x->tab[j].used) {
    if (memcmp(x->tab[j].key, key, 16) == 0)
      return &x->tab[j];
    j = (j + 1) & (x->cap - 1);
  }
  if (!create)
    return NULL;
  if ((x->len + 1) * 10 > x->cap * 7) {
    if (grow(x) != 0)
      return NULL;
    j = slot(x, key);
    while (x->tab[j].used)
      j = (j + 1) & (x->cap - 1);
  }
  idx_ent *e = &x->tab[j];
  memset(e, 0, sizeof *e);
  memcpy(e->key, key, 16);
  e->used = 1;
  x->len++;
  return e;
}

/* 1 if e only holds rejected counts of a session that stored nothing. */
static int is_norow(const idx_ent *e) {
  return !e->has_gen && !e->has_key && e->noted_ns != 0;
}

int store_index_note_gen(store_index *x, const uint8_t session[16],
                         uint64_t gen) {
  pthread_mutex_lock(&x->lock);
  idx_ent *e = find(x, session, 1);
  if (e && (!e->has_gen || gen > e->last_gen)) {
    if (is_norow(e))
      x->norow--;
    if (!e->has_gen && e->rej_gens > 0)
      x->rej_pending++; /* its row exists now: the flush can write */
    e->has_gen = 1;
    e->last_gen = gen;
  }
  pthread_mutex_unlock(&x->lock);
  return e ? 0 : -ENOMEM;
}

int store_index_bind_key(store_index *x, const uint8_t session[16],
                         const uint8_t hash[STORE_KEY_HASH_SIZE]) {
  pthread_mutex_lock(&x->lock);
  idx_ent *e = find(x, session, 1);
  if (e && !e->has_key) { /* invariant 3 */
    if (is_norow(e))
      x->norow--;
    e->has_key = 1;
    memcpy(e->key_hash, hash, STORE_KEY_HASH_SIZE);
  }
  pthread_mutex_unlock(&x->lock);
  return e ? 0 : -ENOMEM; /* invariant 5: the caller must not go on */
}

int store_index_key(store_index *x, const uint8_t session[16],
                    uint8_t hash[STORE_KEY_HASH_SIZE]) {
  int found = 0;
  pthread_mutex_lock(&x->lock);
  idx_ent *e = find(x, session, 0);
  if (e && e->has_key) {
    memcpy(hash, e->key_hash, STORE_KEY_HASH_SIZE);
    found = 1;
  }
  pthread_mutex_unlock(&x->lock);
  return found;
}

int store_index_last_gen(store_index *x, const uint8_t session[16],
                         uint64_t *gen) {
  int found = 0;
  pthread_mutex_lock(&x->lock);
  idx_ent *e = find(x, session, 0);
  if (e && e->has_gen) {
    *gen = e->last_gen;
    found = 1;
  }
  pthread_mutex_unlock(&x->lock);
  return found;
}

void store_index_note_rejected(store_index *x, const uint8_t session[16],
                               uint64_t events) {
  int64_t now = mono_ns();
  pthread_mutex_lock(&x->lock);
  idx_ent *e = find(x, session, 0);
  if (e == NULL) {
    if (x->norow >= x->norow_max) { /* invariant 1 */
      x->norow_untracked++;
      pthread_mutex_unlock(&x->lock);
      return;
    }
    e = find(x, session, 1);
    if (e)
      x->norow++;
  }
  if (e) {
    if (e->has_gen && e->rej_gens == 0)
      x->rej_pending++;
    /* Saturating: a count that wrapped would read as a small loss. */
    e->rej_gens += e->rej_gens < UINT64_MAX;
    e->rej_events = events > UINT64_MAX - e->rej_events
                        ? UINT64_MAX
                        : e->rej_events + events;
    e->noted_ns = now;
  }
  pthread_mutex_unlock(&x->lock);
}

static int keep_live(const store_index *x, const idx_ent *e, int64_t now) {
  return !is_norow(e) || now - e->noted_ns <= x->norow_ttl_ns;
}

void store_index_expire(store_index *x) {
  int64_t now = mono_ns();
  pthread_mutex_lock(&x->lock);
  if (x->norow == 0 || now < x->next_sweep_ns || x->cap == 0) {
    pthread_mutex_unlock(&x->lock);
    return;
  }
  x->next_sweep_ns = now + x->norow_every_ns;
  /* Open addressing has no cheap delete: rebuild without the expired. */
  idx_ent *n = calloc(x->cap, sizeof *n);
  if (n == NULL) {
    pthread_mutex_unlock(&x->lock);
    return;
  }
  idx_ent *old = x->tab;
  rehash(x, n, old, x->cap, keep_live, now);
  uint64_t norow = 0;
  for (size_t i = 0; i < x->cap; i++)
    norow += x->tab[i].used && is_norow(&x->tab[i]);
  x->norow = norow;
  pthread_mutex_unlock(&x->lock);
  free(old);
}

store_index_rej *store_index_rejected(store_index *x, size_t *n) {
  *n = 0;
  pthread_mutex_lock(&x->lock);
  size_t cap = (size_t)x->rej_pending;
  pthread_mutex_unlock(&x->lock);
  if (cap == 0)
    return NULL;
  store_index_rej *list = calloc(cap, sizeof *list);
  if (list == NULL)
    return NULL;
  size_t m = 0;
  pthread_mutex_lock(&x->lock);
  for (size_t i = 0; i < x->cap && m < cap; i++) {
    idx_ent *e = &x->tab[i];
    if (e->used && e->has_gen && e->rej_gens) { /* invariant 1 */
      memcpy(list[m].session, e->key, 16);
      list[m].gens = e->rej_gens;
      list[m].events = e->rej_events;
      m++;
    }
  }
  pthread_mutex_unlock(&x->lock);
  *n = m;
  return list;
}

void store_index_rejected_done(store_index *x, const store_index_rej *list,
                               size_t n) {
  pthread_mutex_lock(&x->lock);
  for (size_t i = 0; i < n; i++) {
    if (!list[i].applied)
      continue;
    idx_ent *e = find(x, list[i].session, 0);
    if (!e)
      continue;
    e->rej_gens -= list[i].gens;
    e->rej_events -= list[i].events;
    if (e->rej_gens == 0)
      x->rej_pending--;
  }
  pthread_mutex_unlock(&x->lock);
}

void store_index_stats(store_index *x, store_stats *out) {
  pthread_mutex_lock(&x->lock);
  out->index_sessions = x->len;
  out->norow_sessions = x->norow;
  out->norow_untracked = x->norow_untracked;
  pthread_mutex_unlock(&x->lock);
}
