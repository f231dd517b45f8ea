/* gencache.c: the shared readers' generation cache (see gencache.h).
 *
 * Owns: the entries (each one malloc'd block: header + bytes), a hash table
 * by seq (chained) and an LRU list.
 *
 * Invariants:
 *   1. bytes MUST equal the sum of the entries' lengths and stay <= max,
 *      otherwise the cache's memory would not be bounded.
 *   2. An entry MUST be in the table and in the list together, otherwise an
 *      eviction could free an entry still reachable by lookup.
 */
#include "gencache.h"
#include "lru.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GC_BUCKETS 4096

typedef struct gc_ent {
  int64_t seq;
  size_t len;
  struct gc_ent *next_hash;
  gtp_lru_link lru;
  uint8_t data[];
} gc_ent;

struct gencache {
  pthread_mutex_t lock;
  uint64_t max, bytes;   /* protected by lock, invariant 1 */
  uint64_t hits, misses; /* protected by lock */
  gc_ent *table[GC_BUCKETS];
  gtp_lru lru;
};

static size_t gc_slot(int64_t seq) {
  return (size_t)((uint64_t)seq * 0x9e3779b97f4a7c15ull >> 52) % GC_BUCKETS;
}

gencache *gencache_new(uint64_t max_bytes) {
  gencache *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  pthread_mutex_init(&c->lock, NULL);
  c->max = max_bytes;
  return c;
}

void gencache_free(gencache *c) {
  if (!c)
    return;
  for (gtp_lru_link *l = c->lru.head, *n; l; l = n) {
    n = l->next;
    free(GTP_LRU_ENTRY(l, gc_ent, lru));
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static void gc_drop(gencache *c, gc_ent *e) {
  gc_ent **p = &c->table[gc_slot(e->seq)];
  while (*p && *p != e)
    p = &(*p)->next_hash;
  if (*p)
    *p = e->next_hash;
  gtp_lru_unlink(&c->lru, &e->lru);
  c->bytes -= e->len;
  free(e);
}

int gencache_get(gencache *c, int64_t seq, gtp_wbuf *out) {
  pthread_mutex_lock(&c->lock);
  gc_ent *e = c->table[gc_slot(seq)];
  while (e && e->seq != seq)
    e = e->next_hash;
  if (!e) {
    c->misses++;
    pthread_mutex_unlock(&c->lock);
    return 0;
  }
  c->hits++;
  gtp_lru_unlink(&c->lru, &e->lru);
  gtp_lru_push(&c->lru, &e->lru);
  gtp_wbuf_put(out, e->data, e->len);
  pthread_mutex_unlock(&c->lock);
  return 1;
}

int gencache_has(gencache *c, int64_t seq) {
  pthread_mutex_lock(&c->lock);
  gc_ent *e = c->table[gc_slot(seq)];
  while (e && e->seq != seq)
    e = e->next_hash;
  pthread_mutex_unlock(&c->lock);
  return e != NULL;
}

void gencache_put(gencache *c, int64_t seq, const uint8_t *data, size_t len) {
  if (len > c->max / 8)
    return;
  gc_ent *e = malloc(sizeof *e + len);
  if (!e)
    return;
  e->seq = seq;
  e->len = len;
  memcpy(e->data, data, len);
  pthread_mutex_lock(&c->lock);
  size_t slot = gc_slot(seq);
  for (gc_ent *x = c->table[slot]; x; x = x->next_hash)
    if (x->seq == seq) { /* raced with another reader: keep the first */
      pthread_mutex_unlock(&c->lock);
      free(e);
      return;
    }
  while (c->bytes + len > c->max && c->lru.tail)
    gc_drop(c, GTP_LRU_ENTRY(c->lru.tail, gc_ent, lru));
  e->next_hash = c->table[slot];
  c->table[slot] = e;
  gtp_lru_push(&c->lru, &e->lru);
  c->bytes += len;
  pthread_mutex_unlock(&c->lock);
}

uint64_t gencache_bytes(gencache *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t b = c->bytes;
  pthread_mutex_unlock(&c->lock);
  return b;
}

void gencache_counts(gencache *c, uint64_t *hits, uint64_t *misses) {
  pthread_mutex_lock(&c->lock);
  *hits = c->hits;
  *misses = c->misses;
  pthread_mutex_unlock(&c->lock);
}
