/* pool.c: see pool.h for the invariants. */
#include "config.h"

#include "pool.h"

#include <errno.h>
#include <sys/mman.h>

int gt__pool_init(gt__pool *p, size_t bytes) {
  size_t n = bytes / GT_BUF_SIZE;
  if (n < 2)
    n = 2;
  void *m = mmap(NULL, n * GT_BUF_SIZE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    return -errno;
  int rc = pthread_mutex_init(&p->lock, NULL);
  if (rc != 0) {
    munmap(m, n * GT_BUF_SIZE);
    return -rc;
  }
  p->base = m;
  p->max = n;
  p->free = NULL;
  p->carved = 0;
  p->used = 0;
  return 0;
}

void gt__pool_fini(gt__pool *p) {
  if (p->base == NULL)
    return;
  munmap(p->base, p->max * GT_BUF_SIZE);
  pthread_mutex_destroy(&p->lock);
  p->base = NULL;
}

gt__buf *gt__pool_get(gt__pool *p) {
  gt__buf *b = NULL;
  pthread_mutex_lock(&p->lock);
  if (p->free != NULL) {
    b = p->free;
    p->free = b->next;
  } else if (p->carved < p->max) {
    b = (gt__buf *)(p->base + p->carved * GT_BUF_SIZE);
    p->carved++;
  }
  if (b != NULL)
    p->used++;
  pthread_mutex_unlock(&p->lock);
  if (b == NULL)
    return NULL;
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
  pthread_mutex_lock(&p->lock);
  b->next = p->free;
  p->free = b;
  p->used--;
  pthread_mutex_unlock(&p->lock);
}

size_t gt__pool_used(gt__pool *p) {
  pthread_mutex_lock(&p->lock);
  size_t n = p->used;
  pthread_mutex_unlock(&p->lock);
  return n;
}

size_t gt__pool_bytes(gt__pool *p) {
  pthread_mutex_lock(&p->lock);
  size_t n = p->carved * GT_BUF_SIZE;
  pthread_mutex_unlock(&p->lock);
  return n;
}
