/* store_pcache.h: SQLite's page cache for the store's write connection in an
 * arena of its own, in transparent huge pages; every other connection keeps
 * SQLite's default cache.
 *
 * Why: the store thread commits a group of small generations every ~20 ms
 * and sleeps in between, while the loop thread and (on a test host) the
 * agents run on the same two cores. Each transaction then starts on cold
 * CPU caches and a cold TLB: about 260 us of a fleet transaction is that
 * penalty (bench/RESULTS.md, helper txfixed). The write connection's pages
 * (8 MiB, ~1,900 pages of 4 KiB plus SQLite's per-page headers) scattered
 * over malloc's 4 KiB pages need a TLB entry each; in 2 MiB pages a handful
 * cover them all. SQLite's own SQLITE_CONFIG_PAGECACHE would place them
 * there too, but it is one process-wide block: the HTTP readers' and the
 * checkpointer's caches could take its slots and cap the writer's cache
 * under read load. This cache is per connection instead.
 *
 * How: store_pcache_install (before SQLite initializes, once per process)
 * installs a SQLITE_CONFIG_PCACHE2 that wraps SQLite's default methods.
 * A cache created while its thread holds a claim (store_pcache_claim_begin
 * .. _end, which store_open puts around the writer's sqlite3_open_v2 and
 * the pragmas that settle its page size) is an arena cache
 * (store_pcache.c); every other cache is passed to the default
 * implementation unchanged. A store opened without install (tests, tools,
 * GENTRACE_STORE_PCACHE=0) simply has the default cache everywhere.
 *
 * Thread: install before any SQLite call and before threads use SQLite;
 * a claim is the calling thread's only; stats from any thread.
 */
#ifndef STORE_PCACHE_H
#define STORE_PCACHE_H

#include <stdint.h>

/* Installs the store's page cache as SQLite's. MUST run before SQLite
 * initializes (before any sqlite3_open*, sqlite3_initialize or statement
 * in the process). Returns 0 when installed, or when it is turned off by
 * the environment (GENTRACE_STORE_PCACHE=0: the default cache for every
 * connection); GTP_E_INTERNAL when SQLite refused (already initialized).
 * Idempotent. */
int store_pcache_install(void);

/* 1 when installed in this process (so claims take effect). */
int store_pcache_installed(void);

/* Caches that SQLite creates on this thread from here to claim_end, for a
 * file database (purgeable), are arena caches. Keep the window to one
 * connection's open and the statements that settle its page size: a page
 * size change makes SQLite replace its cache, and a cache created after
 * the window is a default one. Claims do not nest. */
void store_pcache_claim_begin(void);
/* Ends this thread's claim. Returns how many caches created under it are
 * still alive: 1 when installed and one connection was opened (its main
 * database's cache), 0 when not installed. */
int store_pcache_claim_end(void);

/* Counters, summed over every arena cache of the process (alive and
 * destroyed) unless said otherwise. */
typedef struct store_pcache_stats {
  uint64_t caches;      /* arena caches alive */
  uint64_t fetch_arena; /* fetches answered with a page in the arena */
  uint64_t fetch_heap; /* ... with a page on the heap (arena over cache_size) */
  uint64_t created;    /* new pages (a miss with createFlag 1 or 2) */
  uint64_t refused;   /* misses answered NULL (flag 0, or 1 when nearly full) */
  uint64_t recycled;  /* least recently used unpinned page taken over */
  uint64_t discarded; /* pages dropped by a discarding xUnpin */
  uint64_t rekeyed;   /* xRekey calls */
  uint64_t truncated; /* pages dropped by xTruncate */
  uint64_t shrinks;   /* xShrink calls */
  uint64_t pages_arena; /* alive: pages held in arena slots now */
  uint64_t pages_heap;  /* alive: pages held on the heap now */
  uint64_t arena_bytes; /* alive: arena mapped (touched only as used) */
  uint64_t
      arena_huge; /* alive: segments the kernel accepted MADV_HUGEPAGE for */
  uint64_t arena_segs; /* alive: segments mapped */
  uint64_t max_pages;  /* largest cache_size (pages) of an alive arena cache */
} store_pcache_stats;

void store_pcache_stats_get(store_pcache_stats *out);

#endif /* STORE_PCACHE_H */
