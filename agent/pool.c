/* pool.c: see pool.h for the invariants. */
#include "config.h"

#include "pool.h"

#include <errno.h>
#include <sys/mman.h>

#include "check.h"

int gt__pool_init(gt__pool *p, size_t bytes) {
  size_t n = bytes / GT_BUF_SIZE;
  if (n < 2)
    n = 2;
  if (n > UINT32_MAX - 1)
    n = UINT32_MAX - 1; /* indexes travel in 32 bits (invariant 2) */
  void *m = mmap(NULL, n * GT_BUF_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return -errno;
  p->base = m;
  p->max = n;
  atomic_init(&p->head, 0);
  atomic_init(&p->carved, 0);
  atomic_init(&p->used, 0);
  return 0;
}

void gt__pool_fini(gt__pool *p) {
  if (p->base == NULL)
    return;
  /* Debug builds count a broken pool here; inside a host nothing aborts. */
  GTP_ASSERT(gt__pool_check_invariants(p) == 0);
  munmap(p->base, p->max * GT_BUF_SIZE);
  p->base = NULL;
}

static gt__buf *buf_at(gt__pool *p, uint32_t idx) {
  return (gt__buf *)(p->base + (size_t)idx * GT_BUF_SIZE);
}

/* Invariant 2: pop from the free stack; the tag makes a stale next fail. */
static gt__buf *pop_free(gt__pool *p) {
  uint64_t h = atomic_load_explicit(&p->head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)h;
    if (top == 0)
      return NULL;
    gt__buf *b = buf_at(p, top - 1);
    uint32_t next = atomic_load_explicit(&b->free_next, memory_order_relaxed);
    uint64_t nh = (((h >> 32) + 1) << 32) | next;
    /* acquire: the previous owner's writes to b happen before ours. */
    if (atomic_compare_exchange_weak_explicit(
            &p->head, &h, nh, memory_order_acquire, memory_order_acquire))
      return b;
  }
}

static gt__buf *carve(gt__pool *p) {
  size_t c = atomic_load_explicit(&p->carved, memory_order_relaxed);
  while (c < p->max)
    if (atomic_compare_exchange_weak_explicit(
            &p->carved, &c, c + 1, memory_order_relaxed, memory_order_relaxed))
      return buf_at(p, (uint32_t)c);
  return NULL;
}

gt__buf *gt__pool_get(gt__pool *p) {
  gt__buf *b = pop_free(p);
  if (b == NULL)
    b = carve(p);
  if (b == NULL)
    return NULL;
  atomic_fetch_add_explicit(&p->used, 1, memory_order_relaxed);
  b->next = NULL;
  b->gen = 0;
  b->tid = 0;
  b->base_ticks = 0;
  b->last_ticks = 0;
  b->nevents = 0;
  b->nlost = 0;
  b->pos = b->data;
  b->end = b->data + GT_BUF_DATA;
  return b;
}

void gt__pool_put(gt__pool *p, gt__buf *b) {
  uint32_t idx = (uint32_t)(((uint8_t *)b - p->base) / GT_BUF_SIZE);
  atomic_fetch_sub_explicit(&p->used, 1, memory_order_relaxed);
  uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
  uint64_t nh;
  do {
    atomic_store_explicit(&b->free_next, (uint32_t)h, memory_order_relaxed);
    nh = (((h >> 32) + 1) << 32) | (idx + 1);
    /* release: our writes to b (and free_next) reach the next popper. */
  } while (!atomic_compare_exchange_weak_explicit(
      &p->head, &h, nh, memory_order_release, memory_order_relaxed));
}

size_t gt__pool_used(gt__pool *p) {
  return atomic_load_explicit(&p->used, memory_order_relaxed);
}

size_t gt__pool_bytes(gt__pool *p) {
  return atomic_load_explicit(&p->carved, memory_order_relaxed) * GT_BUF_SIZE;
}

int gt__pool_check_invariants(gt__pool *p) {
  size_t carved = atomic_load_explicit(&p->carved, memory_order_relaxed);
  size_t used = atomic_load_explicit(&p->used, memory_order_relaxed);
  if (carved > p->max)
    return -3;
  /* Walk the free stack: each index carved, none twice (a cycle would
   * exceed carved steps). */
  size_t nfree = 0;
  uint32_t top = (uint32_t)atomic_load_explicit(&p->head, memory_order_relaxed);
  while (top != 0) {
    if (top - 1 >= carved || ++nfree > carved)
      return -1;
    top = atomic_load_explicit(&buf_at(p, top - 1)->free_next,
                               memory_order_relaxed);
  }
  return nfree + used == carved ? 0 : -1;
}
