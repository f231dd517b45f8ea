/* genpool.h: gentraced's generation buffers: a pool of idle ones kept for
 * reuse and a filler thread that prepares new ones off the loop thread.
 * The ingest owns one (embedded in struct ingest) and hands it the bytes it
 * holds for agents (`used`, budget_used()) on every call, so the pool and
 * those bytes together stay under max-buffer; the pool knows nothing of
 * connections. See genpool.c for the design note and invariants.
 */
#ifndef GENPOOL_H
#define GENPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GENPOOL_MAX 8      /* idle buffers kept (invariant 2) */
#define GENPOOL_FILL_MAX 2 /* buffers the filler prepares ahead (inv. 4) */
#define GENPOOL_SMALL (64u << 10) /* smaller: plain malloc (invariant 2) */

/* One buffer the filler thread prepares (invariant 4):
 * EMPTY -loop asks-> ASKED -filler-> BUSY -filler-> READY -loop takes->
 * EMPTY; the loop may also cancel ASKED or free READY (back to EMPTY).
 * BUSY -filler, out of memory-> FAILED -loop-> EMPTY: the loop makes its
 * buffers itself until the next ask. */
enum genpool_fill {
  GENPOOL_EMPTY,
  GENPOOL_ASKED,
  GENPOOL_BUSY,
  GENPOOL_READY,
  GENPOOL_FAILED
};
typedef struct genpool_slot {
  enum genpool_fill state;
  size_t size;   /* bytes asked for; counted in bytes until taken */
  uint8_t *data; /* READY: malloc'd, size bytes, pages mapped */
} genpool_slot;

/* An idle buffer (malloc'd, cap bytes) kept for reuse. */
typedef struct genpool_buf {
  uint8_t *data;
  size_t cap;
} genpool_buf;

/* What /metrics shows; read from any thread (relaxed atomics). */
typedef struct genpool_stats {
  uint64_t bytes;          /* pooled + prepared or asked for */
  uint64_t reused;         /* allocations served from the pool */
  uint64_t prepared_used;  /* allocations served by the filler */
  uint64_t prepared_ready; /* slots READY now */
  uint64_t fill_failed;    /* buffers the filler could not allocate */
} genpool_stats;

typedef struct genpool {
  /* Written once by genpool_init. */
  uint64_t max_buffer;
  int filler_running; /* the filler thread was started */
  pthread_t filler;

  /* Loop thread only. */
  genpool_buf pool[GENPOOL_MAX];
  unsigned npool;
  uint64_t bytes; /* invariant 1 */

  /* Protected by lock: the filler's slots (invariant 4). */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  genpool_slot fill[GENPOOL_FILL_MAX];
  int stop;

  genpool_stats stats; /* relaxed atomics */
} genpool;

/* Starts the filler (without it, buffers are simply made on the loop).
 * max_buffer: the daemon's --max-buffer. */
void genpool_init(genpool *p, uint64_t max_buffer);
/* Joins the filler and frees every pooled or prepared buffer. No other
 * genpool call may run at the same time or after. */
void genpool_fini(genpool *p);
/* A buffer of at least want bytes (pooled, prepared or new, its first
 * `touch` bytes faulted in) and its capacity in *cap; NULL (and *cap = 0)
 * when malloc fails. used: the bytes the caller holds for agents. */
uint8_t *genpool_alloc(genpool *p, uint64_t used, size_t want, size_t touch,
                       size_t *cap);
/* Keeps data (cap bytes, from genpool_alloc) for reuse, or frees it. keep
 * = 0 frees it in any case (the daemon is paused: no new generations). The
 * caller MUST be done with data: nothing else may read it (the store). */
void genpool_release(genpool *p, uint64_t used, int keep, uint8_t *data,
                     size_t cap);
/* Frees pooled, then prepared buffers until used + bytes <= max_buffer
 * (one being prepared stays until it is READY). */
void genpool_trim(genpool *p, uint64_t used);
/* A copy of the counters; any thread. */
void genpool_stats_get(genpool *p, genpool_stats *out);
/* Checks invariants 1-4 (0, or the number of the one broken, negated).
 * Loop thread. */
int genpool_check_invariants(genpool *p);

#endif
