/* gencache.h: a bounded, thread-safe cache of decompressed generations by
 * seq, shared by the shared store's readers: windows read by several HTTP
 * clients (or again) fetch each generation from S3 once, and while S3 is
 * unreachable what is cached can still be served.
 *
 * LRU by whole generations; an entry larger than an eighth of the bound is
 * not cached (one window must not wipe the cache). Seqs are never reused
 * (retention only deletes), so an entry never goes stale.
 *
 * Thread: any (one mutex).
 */
#ifndef GENCACHE_H
#define GENCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct gencache gencache;

gencache *gencache_new(uint64_t max_bytes);
void gencache_free(gencache *c);
/* 1 and the bytes appended to out on a hit; 0 on a miss. */
int gencache_get(gencache *c, int64_t seq, gtp_wbuf *out);
/* 1 when seq is cached (does not touch the LRU order). */
int gencache_has(gencache *c, int64_t seq);
/* Copies data in (best effort: no room or no memory = not cached). */
void gencache_put(gencache *c, int64_t seq, const uint8_t *data, size_t len);
/* Bytes held now (tests, metrics). */
uint64_t gencache_bytes(gencache *c);
/* gencache_get's hits and misses so far (metrics). */
void gencache_counts(gencache *c, uint64_t *hits, uint64_t *misses);

#endif /* GENCACHE_H */
