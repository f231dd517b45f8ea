/* pool.h: the bounded pool of per-thread event buffers (64 KiB each).
 *
 * Owns one anonymous mapping of `max` buffers, carved on first use, so the
 * pool costs address space up front but memory only for buffers ever used.
 *
 * Invariants:
 *  1. A buffer MUST be owned by exactly one of: the free list, one thread's
 *     generation slot, one generation's full list, or the sealer; otherwise
 *     two writers could interleave events in it.
 *  2. get and put MUST NOT lock or wait (an application thread refills its
 *     buffer here, and a preempted lock holder would stall every other
 *     writer): the free list is a Treiber stack whose head packs the top
 *     buffer's index with a 32-bit tag bumped by every push and pop, so a
 *     pop that read a stale `free_next` fails its compare-and-swap instead
 *     of linking a buffer that was taken meanwhile (ABA); carving is a
 *     compare-and-swap on `carved` bounded by `max`.
 *  3. gt__pool_get MUST return NULL rather than grow past `max`, otherwise
 *     memory would not be bounded; callers count the events they drop.
 */
#ifndef GT_POOL_H
#define GT_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GT_BUF_SIZE (64u << 10)

typedef struct gt__buf {
  struct gt__buf *next; /* list link (free list or a full list) */
  uint64_t gen;         /* internal generation stamp this buffer belongs to */
  uint64_t tid;         /* kernel thread id of the writer */
  uint64_t base_ticks;  /* ticks of the batch start */
  uint64_t last_ticks;  /* ticks of the last event written */
  uint32_t nevents;     /* events written, LOST markers included */
  uint32_t nlost;       /* LOST markers among them */
  uint8_t *pos, *end;   /* write cursor; end leaves room for one event */
  /* Free list link: index + 1 of the next free buffer (0: none). Atomic
   * because a pop may read it while another pop takes the buffer. */
  _Atomic uint32_t free_next;
  uint8_t data[];
} gt__buf;

/* Bytes of events one buffer can hold: the EVENTS record header (four
 * uvarints) must fit beside them under GTP_BATCH_MAX. */
#define GT_BUF_DATA (GT_BUF_SIZE - 128)

typedef struct gt__pool {
  uint8_t *base; /* mapping, max * GT_BUF_SIZE bytes; written once at init */
  size_t max;    /* written once at init, < 2^32 */
  /* Free stack head: tag << 32 | (index + 1) of the top buffer (0: empty). */
  _Atomic uint64_t head;
  _Atomic size_t carved; /* buffers handed out of the mapping so far */
  _Atomic size_t used;   /* buffers not on the free list */
} gt__pool;

/* Reserves room for `bytes` (rounded down to whole buffers, at least 2).
 * 0 or -errno. */
int gt__pool_init(gt__pool *p, size_t bytes);
/* 0, or minus the first invariant that does not hold (1: a buffer on the
 * free stack twice or out of range, or free + used != carved; 3: more
 * carved than max). Only when no thread uses the pool (tests, fini). */
int gt__pool_check_invariants(gt__pool *p);
/* Unmaps everything; every buffer must have been returned. */
void gt__pool_fini(gt__pool *p);
/* A reset buffer (pos at data, counts 0) or NULL when exhausted. */
gt__buf *gt__pool_get(gt__pool *p);
void gt__pool_put(gt__pool *p, gt__buf *b);
/* Buffers currently handed out. */
size_t gt__pool_used(gt__pool *p);
/* Bytes of buffers ever touched (the pool's memory in use). */
size_t gt__pool_bytes(gt__pool *p);

#endif
