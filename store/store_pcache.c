/* store_pcache.c: the write connection's page cache in an arena of huge
 * pages; every other cache goes to SQLite's default (store_pcache.h says
 * why).
 *
 * Owns: the process's copy of SQLite's default page cache methods, the
 * registry of arena caches (for the counters and the claim's check), and
 * each arena cache: its hash of pages, its LRU list of unpinned pages, its
 * free slots and its arena segments.
 *
 * An arena cache is SQLite's cache contract (sqlite3.h, "Application
 * Defined Page Cache") kept the way the default pcache1 keeps it for one
 * connection:
 *   - xFetch finds a key in the hash and pins it (out of the LRU). On a
 *     miss: createFlag 0 answers NULL; 1 answers NULL when 90% of
 *     cache_size is pinned (SQLite then spills dirty pages and asks with
 *     2); otherwise the least recently used unpinned page is taken over
 *     once the cache is full, else a new page is made. A new page's first
 *     8 bytes of extra space are zeroed (pcache.c reads them to tell a new
 *     page).
 *   - xUnpin puts a page at the LRU's head, or frees it when told to
 *     discard it or when the cache holds more than cache_size pages.
 *   - xRekey moves a page to its new key, dropping an (unpinned) page that
 *     held it; xTruncate drops every page with key >= the limit, pinned or
 *     not; xCachesize evicts unpinned pages down to the new size; xShrink
 *     evicts every unpinned page and unmaps the arena once it is empty.
 * Memory: a page takes an arena slot while fewer than cache_size pages sit
 * in the arena, else a heap block (the pinned overflow SQLite allows with
 * createFlag 2). The arena grows in segments of whole 2 MiB pages, mapped
 * as they are needed up to cache_size slots, and advised MADV_HUGEPAGE;
 * where THP is off the advice fails or is ignored and the segment is plain
 * pages (the same cache, without the TLB gain).
 *
 * Threads: an arena cache belongs to one connection, and the store's write
 * connection is used by one thread at a time (store.c invariant 1), so its
 * state needs no lock. Its counters have one writer at a time (relaxed
 * load + store, no locked instruction on the hot path) and are read by
 * store_pcache_stats_get under reg_lock, which also guards the registry.
 *
 * Invariants (pc_check, GTP_ASSERT in debug builds):
 *   1. Every page held is in exactly one hash chain, the one of its key,
 *      keys are unique, n_page counts them, max_key bounds them and
 *      below_max bounds every one but the page holding max_key,
 *      otherwise a fetch could return a stale copy of a page or xTruncate
 *      could skip one.
 *   2. A page is in the LRU if and only if it is unpinned, and n_lru counts
 *      the LRU; only unpinned pages are recycled or evicted (xTruncate and
 *      a discarding xUnpin excepted, as the contract allows), otherwise
 *      SQLite's pointer to a pinned page would see another page's bytes.
 *   3. After every call, a cache holding more than cache_size pages has no
 *      unpinned page left (n_page > n_max implies n_lru == 0), otherwise
 *      the writer's memory would grow past its cache_size.
 *   4. Arena pages (heap == 0) lie inside a segment and number n_arena <=
 *      max(n_max, n_arena before a shrink of n_max); heap pages number
 *      n_heap; n_arena + n_heap == n_page; arena slots not holding a page
 *      are on the free list or past the bump pointer, otherwise slots leak
 *      or two pages share one.
 *   5. Only caches created under a claim, for a purgeable (file) database,
 *      are arena caches; the rest are forwarded to SQLite's default
 *      methods with their own page objects untouched, otherwise a reader's
 *      connection would take the writer's memory, or pass a default page
 *      to this code.
 */
#include "config.h" /* _GNU_SOURCE: MAP_ANONYMOUS, MADV_HUGEPAGE */

#include "store_pcache.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "gtp_error.h"

/* Segments are whole huge pages, aligned on them. */
#define PC_HUGE (2u << 20)
/* No arena beyond this, whatever cache_size says: the heap serves the
 * rest (a cache_size that large is a configuration error, not a reason to
 * reserve gigabytes). */
#define PC_ARENA_MAX ((size_t)1 << 30)

typedef struct pc_page {
  sqlite3_pcache_page base; /* MUST be first: SQLite hands &base back */
  unsigned key;
  unsigned char heap;                  /* 1: malloc'd block, 0: arena slot */
  unsigned char pinned;                /* 1: fetched and not unpinned since */
  struct pc_page *hnext;               /* hash chain, or the free list */
  struct pc_page *lru_prev, *lru_next; /* unpinned pages only */
} pc_page;

typedef struct pc_seg {
  struct pc_seg *next;
  unsigned char *base;
  size_t len;
} pc_seg;

typedef _Atomic uint64_t pc_ctr;

/* The first member of every cache this module returns: which kind. */
enum { PC_DEFAULT = 0, PC_ARENA = 1 };

typedef struct pc_fwd {
  int kind; /* PC_DEFAULT */
  sqlite3_pcache *inner;
} pc_fwd;

typedef struct pc_cache {
  int kind; /* PC_ARENA */
  /* Written once in xCreate. */
  unsigned claim;
  size_t sz_page, sz_extra, slot;
  /* The owning connection's thread only. */
  unsigned n_max, n90;    /* cache_size in pages, and 90% of it */
  unsigned n_page, n_lru; /* pages held; of them unpinned */
  unsigned n_arena, n_heap;
  unsigned max_key, below_max; /* invariant 1 */
  unsigned n_hash;             /* power of two */
  pc_page **hash;
  pc_page lru; /* anchor: lru_next is the newest, lru_prev the oldest */
  pc_page *free_slots;
  unsigned char *bump, *bump_end; /* untouched slots of the last segment */
  pc_seg *segs;
  size_t arena_len;   /* bytes mapped */
  unsigned arena_cap; /* slots mapped */
  /* One writer at a time (above), read under reg_lock. */
  pc_ctr fetch_arena, fetch_heap, created, refused, recycled, discarded,
      rekeyed, truncated, shrinks, pages_arena, pages_heap, arena_bytes,
      arena_huge, arena_segs, max_pages;
  /* reg_lock. */
  struct pc_cache *reg_next, *reg_prev;
} pc_cache;

/* Written once by store_pcache_install, before SQLite initializes. */
static sqlite3_pcache_methods2 dflt;
static int installed;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pc_cache *reg_head;      /* arena caches alive (reg_lock) */
static store_pcache_stats gone; /* counters of destroyed caches (reg_lock) */
static unsigned claim_seq;      /* reg_lock */

static _Thread_local unsigned claim_id; /* 0: no claim on this thread */

static inline void ctr_add(pc_ctr *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}
static inline void ctr_set(pc_ctr *c, uint64_t v) {
  atomic_store_explicit(c, v, memory_order_relaxed);
}
static inline uint64_t ctr_get(pc_ctr *c) {
  return atomic_load_explicit(c, memory_order_relaxed);
}

/* ------------------------------------------------------------ checks */

static void pc_check(pc_cache *c) {
#if GTP_DEBUG_ENABLED
  unsigned n = 0, arena = 0, unpinned = 0;
  for (unsigned h = 0; h < c->n_hash; h++)
    for (pc_page *p = c->hash[h]; p; p = p->hnext) {
      GTP_ASSERT((p->key & (c->n_hash - 1)) == h); /* 1 */
      GTP_ASSERT(p->key >= 1 && p->key <= c->max_key);
      GTP_ASSERT(p->key <= c->below_max || p->key == c->max_key);
      for (pc_page *q = p->hnext; q; q = q->hnext)
        GTP_ASSERT(q->key != p->key);
      n++;
      arena += !p->heap;
      unpinned += !p->pinned;
      if (!p->heap) { /* 4 */
        int in = 0;
        for (pc_seg *s = c->segs; s && !in; s = s->next)
          in = (unsigned char *)p->base.pBuf >= s->base &&
               (unsigned char *)p->base.pBuf + c->slot <= s->base + s->len;
        GTP_ASSERT(in);
      }
    }
  GTP_ASSERT(n == c->n_page);
  GTP_ASSERT(arena == c->n_arena && n - arena == c->n_heap);
  unsigned lru = 0;
  for (pc_page *p = c->lru.lru_next; p != &c->lru; p = p->lru_next) {
    GTP_ASSERT(!p->pinned && p->lru_next->lru_prev == p); /* 2 */
    lru++;
  }
  GTP_ASSERT(lru == c->n_lru && unpinned == c->n_lru);
  GTP_ASSERT(c->n_page <= c->n_max || c->n_lru == 0); /* 3 */
  unsigned nfree = 0;
  for (pc_page *p = c->free_slots; p; p = p->hnext)
    nfree++;
  unsigned untouched =
      c->bump ? (unsigned)((size_t)(c->bump_end - c->bump) / c->slot) : 0;
  /* A segment's tail shorter than a slot is not a slot. */
  GTP_ASSERT(c->n_arena + nfree + untouched == c->arena_cap); /* 4 */
#else
  (void)c;
#endif
}

/* The cheap part, on every fetch and unpin. */
static inline void pc_check_fast(const pc_cache *c) {
  GTP_ASSERT(c->n_lru <= c->n_page);                  /* 2 */
  GTP_ASSERT(c->n_arena + c->n_heap == c->n_page);    /* 4 */
  GTP_ASSERT(c->n_page <= c->n_max || c->n_lru == 0); /* 3 */
  (void)c;
}

/* ------------------------------------------------------------ lists */

static inline void lru_unlink(pc_cache *c, pc_page *p) {
  p->lru_prev->lru_next = p->lru_next;
  p->lru_next->lru_prev = p->lru_prev;
  p->lru_next = p->lru_prev = NULL;
  p->pinned = 1;
  c->n_lru--;
}

static inline void lru_push(pc_cache *c, pc_page *p) {
  p->lru_next = c->lru.lru_next;
  p->lru_prev = &c->lru;
  c->lru.lru_next->lru_prev = p;
  c->lru.lru_next = p;
  p->pinned = 0;
  c->n_lru++;
}

static inline pc_page **hash_slot(pc_cache *c, unsigned key) {
  return &c->hash[key & (c->n_hash - 1)];
}

/* The key bounds (invariant 1), so that xTruncate at the end of every
 * transaction finds nothing to do without a scan. SQLite creates and
 * drops one page far beyond the file in each write transaction (the
 * page of the lock byte, 2^30 / page size + 1, which it refuses after
 * fetching); with one bound only, every later truncate would scan the
 * whole hash (callgrind: 3,300 scans in 200 transactions). */
static inline void key_added(pc_cache *c, unsigned key) {
  if (key > c->max_key) {
    c->below_max = c->max_key;
    c->max_key = key;
  } else if (key > c->below_max && key != c->max_key) {
    c->below_max = key;
  }
}
static inline void key_removed(pc_cache *c, unsigned key) {
  if (key == c->max_key)
    c->max_key = c->below_max; /* still bounds the rest */
}

static void hash_remove(pc_cache *c, pc_page *p) {
  pc_page **pp = hash_slot(c, p->key);
  while (*pp != p)
    pp = &(*pp)->hnext;
  *pp = p->hnext;
  p->hnext = NULL;
  key_removed(c, p->key);
}

/* Doubles the table once it holds as many pages as buckets. A failed
 * allocation keeps the old table: longer chains, still correct. */
static void hash_grow(pc_cache *c) {
  unsigned n = c->n_hash * 2;
  pc_page **t = calloc(n, sizeof *t);
  if (!t)
    return;
  for (unsigned h = 0; h < c->n_hash; h++) {
    pc_page *p = c->hash[h];
    while (p) {
      pc_page *next = p->hnext;
      p->hnext = t[p->key & (n - 1)];
      t[p->key & (n - 1)] = p;
      p = next;
    }
  }
  free(c->hash);
  c->hash = t;
  c->n_hash = n;
}

/* ------------------------------------------------------------ memory */

/* Maps a segment for about `slots` more slots: whole huge pages, aligned
 * on them. 0, or -1 when the kernel refused (the heap serves the page). */
static int seg_map(pc_cache *c, unsigned slots) {
  size_t len = ((size_t)slots * c->slot + PC_HUGE - 1) & ~(size_t)(PC_HUGE - 1);
  if (c->arena_len + len > PC_ARENA_MAX)
    return -1;
  pc_seg *s = malloc(sizeof *s);
  if (!s)
    return -1;
  /* Over-map by one huge page, then trim both ends to the alignment. */
  unsigned char *m = mmap(NULL, len + PC_HUGE, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    free(s);
    return -1;
  }
  unsigned char *base = (unsigned char *)(((uintptr_t)m + PC_HUGE - 1) &
                                          ~(uintptr_t)(PC_HUGE - 1));
  if (base > m)
    munmap(m, (size_t)(base - m));
  if (base + len < m + len + PC_HUGE)
    munmap(base + len, (size_t)(m + len + PC_HUGE - (base + len)));
#ifdef MADV_HUGEPAGE
  if (madvise(base, len, MADV_HUGEPAGE) == 0)
    ctr_add(&c->arena_huge, 1);
#endif
  s->base = base;
  s->len = len;
  s->next = c->segs;
  c->segs = s;
  c->bump = base;
  c->bump_end = base + (len / c->slot) * c->slot;
  c->arena_len += len;
  c->arena_cap += (unsigned)(len / c->slot);
  ctr_set(&c->arena_bytes, c->arena_len);
  ctr_add(&c->arena_segs, 1);
  return 0;
}

/* Unmaps every segment; no page may be in the arena. */
static void seg_unmap_all(pc_cache *c) {
  GTP_ASSERT(c->n_arena == 0);
  while (c->segs) {
    pc_seg *s = c->segs;
    c->segs = s->next;
    munmap(s->base, s->len);
    free(s);
  }
  c->free_slots = NULL;
  c->bump = c->bump_end = NULL;
  c->arena_len = 0;
  c->arena_cap = 0;
  ctr_set(&c->arena_bytes, 0);
  ctr_set(&c->arena_segs, 0);
  ctr_set(&c->arena_huge, 0);
}

/* Lays a page object over a slot: buffer, header, extra space. */
static pc_page *slot_page(pc_cache *c, unsigned char *m, int heap) {
  pc_page *p = (pc_page *)(m + c->sz_page);
  p->base.pBuf = m;
  p->base.pExtra = (unsigned char *)(p + 1);
  p->heap = (unsigned char)heap;
  return p;
}

/* A slot for a new page: the arena while it holds fewer than cache_size
 * pages (invariant 4), else the heap. NULL when both fail. */
static pc_page *page_alloc(pc_cache *c) {
  if (c->n_arena < c->n_max) {
    pc_page *p = c->free_slots;
    if (p) {
      c->free_slots = p->hnext;
    } else {
      if (c->bump == c->bump_end && c->arena_cap < c->n_max)
        (void)seg_map(c, c->n_max - c->arena_cap);
      if (c->bump != c->bump_end) {
        p = slot_page(c, c->bump, 0);
        c->bump += c->slot;
      }
    }
    if (p) {
      c->n_arena++;
      return p;
    }
  }
  unsigned char *m = malloc(c->slot);
  if (!m)
    return NULL;
  c->n_heap++;
  return slot_page(c, m, 1);
}

/* Drops a page that is out of the hash and the LRU. */
static void page_free(pc_cache *c, pc_page *p) {
  c->n_page--;
  if (p->heap) {
    c->n_heap--;
    free(p->base.pBuf);
  } else {
    c->n_arena--;
    p->hnext = c->free_slots;
    c->free_slots = p;
  }
}

static void publish_pages(pc_cache *c) {
  ctr_set(&c->pages_arena, c->n_arena);
  ctr_set(&c->pages_heap, c->n_heap);
}

/* Evicts the oldest unpinned pages while more than `limit` are held. */
static void evict_to(pc_cache *c, unsigned limit) {
  while (c->n_page > limit && c->n_lru > 0) {
    pc_page *p = c->lru.lru_prev;
    lru_unlink(c, p);
    hash_remove(c, p);
    page_free(c, p);
  }
  publish_pages(c);
}

/* ------------------------------------------------------------ methods */

static int pc_init(void *arg) {
  (void)arg;
  return dflt.xInit ? dflt.xInit(dflt.pArg) : SQLITE_OK;
}

static void pc_shutdown(void *arg) {
  (void)arg;
  if (dflt.xShutdown)
    dflt.xShutdown(dflt.pArg);
}

static sqlite3_pcache *arena_create(int sz_page, int sz_extra) {
  pc_cache *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->kind = PC_ARENA;
  c->claim = claim_id;
  c->sz_page = (size_t)sz_page;
  c->sz_extra = (size_t)sz_extra;
  /* Slots on cache lines, so a page's bytes start on one. */
  c->slot =
      ((size_t)sz_page + sizeof(pc_page) + (size_t)sz_extra + 63) & ~(size_t)63;
  c->n_hash = 256;
  c->hash = calloc(c->n_hash, sizeof *c->hash);
  if (!c->hash) {
    free(c);
    return NULL;
  }
  c->lru.lru_next = c->lru.lru_prev = &c->lru;
  c->lru.pinned = 1;
  pthread_mutex_lock(&reg_lock);
  c->reg_next = reg_head;
  if (reg_head)
    reg_head->reg_prev = c;
  reg_head = c;
  pthread_mutex_unlock(&reg_lock);
  return (sqlite3_pcache *)c;
}

static sqlite3_pcache *pc_create(int sz_page, int sz_extra, int purgeable) {
  if (claim_id != 0 && purgeable && sz_page > 0 && sz_extra >= 8)
    return arena_create(sz_page, sz_extra); /* 5 */
  pc_fwd *f = malloc(sizeof *f);
  if (!f)
    return NULL;
  f->kind = PC_DEFAULT;
  f->inner = dflt.xCreate(sz_page, sz_extra, purgeable);
  if (!f->inner) {
    free(f);
    return NULL;
  }
  return (sqlite3_pcache *)f;
}

static void pc_cachesize(sqlite3_pcache *pc, int n) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    dflt.xCachesize(((pc_fwd *)pc)->inner, n);
    return;
  }
  c->n_max = n > 0 ? (unsigned)n : 0;
  c->n90 = (unsigned)((uint64_t)c->n_max * 9 / 10);
  ctr_set(&c->max_pages, c->n_max);
  evict_to(c, c->n_max);
  pc_check(c);
}

static int pc_pagecount(sqlite3_pcache *pc) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA)
    return dflt.xPagecount(((pc_fwd *)pc)->inner);
  return (int)c->n_page;
}

/* A miss: a new page, the LRU's oldest taken over, or NULL (the contract's
 * createFlag). Apart from the hit path so that path stays short (the
 * registers this one needs cost every hit a save and restore). */
static __attribute__((noinline)) sqlite3_pcache_page *
fetch_miss(pc_cache *c, unsigned key, int create) {
  unsigned pinned = c->n_page - c->n_lru;
  if (create == 0 || (create == 1 && pinned >= c->n90)) {
    ctr_add(&c->refused, 1);
    return NULL;
  }
  if (c->n_page >= c->n_hash)
    hash_grow(c);
  pc_page *p;
  if (c->n_lru > 0 && c->n_page + 1 >= c->n_max) {
    /* Full: the oldest unpinned page takes the new key, in its slot. */
    p = c->lru.lru_prev;
    lru_unlink(c, p);
    hash_remove(c, p);
    ctr_add(&c->recycled, 1);
  } else {
    p = page_alloc(c);
    if (!p)
      return NULL;
    c->n_page++;
  }
  p->key = key;
  p->pinned = 1;
  p->lru_next = p->lru_prev = NULL;
  memset(p->base.pExtra, 0, 8); /* pcache.c: a new page reads as such */
  pc_page **h = hash_slot(c, key);
  p->hnext = *h;
  *h = p;
  key_added(c, key);
  ctr_add(&c->created, 1);
  ctr_add(p->heap ? &c->fetch_heap : &c->fetch_arena, 1);
  publish_pages(c);
  pc_check_fast(c);
  return &p->base;
}

static sqlite3_pcache_page *pc_fetch(sqlite3_pcache *pc, unsigned key,
                                     int create) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA)
    return dflt.xFetch(((pc_fwd *)pc)->inner, key, create);
  pc_page *p = *hash_slot(c, key);
  while (p && p->key != key)
    p = p->hnext;
  if (!p)
    return fetch_miss(c, key, create);
  if (!p->pinned)
    lru_unlink(c, p);
  ctr_add(p->heap ? &c->fetch_heap : &c->fetch_arena, 1);
  return &p->base;
}

static void pc_unpin(sqlite3_pcache *pc, sqlite3_pcache_page *pg, int discard) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    dflt.xUnpin(((pc_fwd *)pc)->inner, pg, discard);
    return;
  }
  pc_page *p = (pc_page *)pg;
  GTP_ASSERT(p->pinned); /* 2 */
  if (discard || c->n_page > c->n_max) {
    if (discard)
      ctr_add(&c->discarded, 1);
    hash_remove(c, p);
    page_free(c, p);
    publish_pages(c);
  } else {
    lru_push(c, p);
  }
  pc_check_fast(c);
}

static void pc_rekey(sqlite3_pcache *pc, sqlite3_pcache_page *pg,
                     unsigned old_key, unsigned new_key) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    dflt.xRekey(((pc_fwd *)pc)->inner, pg, old_key, new_key);
    return;
  }
  pc_page *p = (pc_page *)pg;
  GTP_ASSERT(p->key == old_key);
  /* A page already under new_key is unpinned (the contract) and goes. */
  pc_page *q = *hash_slot(c, new_key);
  while (q && q->key != new_key)
    q = q->hnext;
  if (q && q != p) {
    GTP_ASSERT(!q->pinned);
    if (!q->pinned)
      lru_unlink(c, q);
    hash_remove(c, q);
    page_free(c, q);
    publish_pages(c);
  }
  hash_remove(c, p);
  p->key = new_key;
  pc_page **h = hash_slot(c, new_key);
  p->hnext = *h;
  *h = p;
  key_added(c, new_key);
  ctr_add(&c->rekeyed, 1);
  pc_check_fast(c);
}

/* Drops every page with key >= limit, pinned or not (the contract). */
static void pc_truncate(sqlite3_pcache *pc, unsigned limit) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    dflt.xTruncate(((pc_fwd *)pc)->inner, limit);
    return;
  }
  /* SQLite truncates to the file's size at the end of every transaction:
   * nothing above it is the common case (invariant 1: max_key bounds). */
  if (limit > c->max_key)
    return;
  unsigned dropped = 0;
  /* A short key range visits its buckets only; a long one every bucket. */
  unsigned first = 0, last = c->n_hash - 1;
  if (c->max_key - limit < c->n_hash / 2) {
    first = limit & (c->n_hash - 1);
    last = c->max_key & (c->n_hash - 1);
  }
  for (unsigned h = first;; h = (h + 1) & (c->n_hash - 1)) {
    pc_page **pp = &c->hash[h];
    while (*pp) {
      pc_page *p = *pp;
      if (p->key >= limit) {
        *pp = p->hnext;
        p->hnext = NULL;
        if (!p->pinned)
          lru_unlink(c, p);
        page_free(c, p);
        dropped++;
      } else {
        pp = &p->hnext;
      }
    }
    if (h == last)
      break;
  }
  c->max_key = limit > 0 ? limit - 1 : 0;
  if (c->below_max > c->max_key)
    c->below_max = c->max_key;
  ctr_add(&c->truncated, dropped);
  publish_pages(c);
  pc_check(c);
}

static void arena_destroy(pc_cache *c) {
  for (unsigned h = 0; h < c->n_hash; h++) {
    pc_page *p = c->hash[h];
    while (p) {
      pc_page *next = p->hnext;
      if (p->heap)
        free(p->base.pBuf);
      p = next;
    }
  }
  free(c->hash);
  c->n_arena = 0; /* the slots go with their segments */
  seg_unmap_all(c);
  pthread_mutex_lock(&reg_lock);
  if (c->reg_prev)
    c->reg_prev->reg_next = c->reg_next;
  else
    reg_head = c->reg_next;
  if (c->reg_next)
    c->reg_next->reg_prev = c->reg_prev;
  gone.fetch_arena += ctr_get(&c->fetch_arena);
  gone.fetch_heap += ctr_get(&c->fetch_heap);
  gone.created += ctr_get(&c->created);
  gone.refused += ctr_get(&c->refused);
  gone.recycled += ctr_get(&c->recycled);
  gone.discarded += ctr_get(&c->discarded);
  gone.rekeyed += ctr_get(&c->rekeyed);
  gone.truncated += ctr_get(&c->truncated);
  gone.shrinks += ctr_get(&c->shrinks);
  pthread_mutex_unlock(&reg_lock);
  free(c);
}

static void pc_destroy(sqlite3_pcache *pc) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    dflt.xDestroy(((pc_fwd *)pc)->inner);
    free(pc);
    return;
  }
  pc_check(c);
  arena_destroy(c);
}

static void pc_shrink(sqlite3_pcache *pc) {
  pc_cache *c = (pc_cache *)pc;
  if (c->kind != PC_ARENA) {
    if (dflt.xShrink)
      dflt.xShrink(((pc_fwd *)pc)->inner);
    return;
  }
  evict_to(c, 0);
  if (c->n_arena == 0 && c->segs)
    seg_unmap_all(c); /* gives the memory back to the kernel */
  ctr_add(&c->shrinks, 1);
  pc_check(c);
}

/* ------------------------------------------------------------ public */

static const sqlite3_pcache_methods2 methods = {
    .iVersion = 1,
    .pArg = NULL,
    .xInit = pc_init,
    .xShutdown = pc_shutdown,
    .xCreate = pc_create,
    .xCachesize = pc_cachesize,
    .xPagecount = pc_pagecount,
    .xFetch = pc_fetch,
    .xUnpin = pc_unpin,
    .xRekey = pc_rekey,
    .xTruncate = pc_truncate,
    .xDestroy = pc_destroy,
    .xShrink = pc_shrink,
};

int store_pcache_install(void) {
  if (installed)
    return 0;
  const char *off = getenv("GENTRACE_STORE_PCACHE");
  if (off && strcmp(off, "0") == 0)
    return 0;
  sqlite3_pcache_methods2 d;
  memset(&d, 0, sizeof d);
  if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &d) != SQLITE_OK || !d.xCreate)
    return GTP_E_INTERNAL;
  dflt = d;
  if (sqlite3_config(SQLITE_CONFIG_PCACHE2, &methods) != SQLITE_OK)
    return GTP_E_INTERNAL;
  installed = 1;
  return 0;
}

int store_pcache_installed(void) {
  return installed;
}

void store_pcache_claim_begin(void) {
  GTP_ASSERT(claim_id == 0);
  pthread_mutex_lock(&reg_lock);
  if (++claim_seq == 0) /* 0 means "no claim" */
    claim_seq = 1;
  claim_id = claim_seq;
  pthread_mutex_unlock(&reg_lock);
}

int store_pcache_claim_end(void) {
  int n = 0;
  pthread_mutex_lock(&reg_lock);
  for (pc_cache *c = reg_head; c; c = c->reg_next)
    n += c->claim == claim_id;
  pthread_mutex_unlock(&reg_lock);
  claim_id = 0;
  return n;
}

void store_pcache_stats_get(store_pcache_stats *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&reg_lock);
  *out = gone;
  out->caches = 0;
  for (pc_cache *c = reg_head; c; c = c->reg_next) {
    out->caches++;
    out->fetch_arena += ctr_get(&c->fetch_arena);
    out->fetch_heap += ctr_get(&c->fetch_heap);
    out->created += ctr_get(&c->created);
    out->refused += ctr_get(&c->refused);
    out->recycled += ctr_get(&c->recycled);
    out->discarded += ctr_get(&c->discarded);
    out->rekeyed += ctr_get(&c->rekeyed);
    out->truncated += ctr_get(&c->truncated);
    out->shrinks += ctr_get(&c->shrinks);
    out->pages_arena += ctr_get(&c->pages_arena);
    out->pages_heap += ctr_get(&c->pages_heap);
    out->arena_bytes += ctr_get(&c->arena_bytes);
    out->arena_huge += ctr_get(&c->arena_huge);
    out->arena_segs += ctr_get(&c->arena_segs);
    uint64_t m = ctr_get(&c->max_pages);
    if (m > out->max_pages)
      out->max_pages = m;
  }
  pthread_mutex_unlock(&reg_lock);
}
