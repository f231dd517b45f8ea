/* bench_pool: buffer refills under contention, the agent's only hot-path
 * step that touches shared state (once per 64 KiB of events per thread).
 *
 *   bench_pool [threads]   (default 4: more than this machine's CPUs, so
 *                           a preempted thread sits inside its get/put)
 *
 * Same run, same threads, same pattern (take a buffer, touch it, return it,
 * with some held so the pool runs dry): the agent's lock-free pool
 * (agent/pool.c) against a mutex-guarded free list as the pool was before
 * (the baseline). Prints refills per second for both, best of 5 rounds.
 * Never part of make check.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"

enum { ROUNDS = 5, OPS = 400000, HOLD = 2, NBUF = 8 };

/* The baseline: the previous pool's shape (one mutex, an intrusive list). */
typedef struct mpool {
  pthread_mutex_t lock;
  uint8_t *base;
  gt__buf *free;
  size_t carved, max;
} mpool;

static gt__buf *mpool_get(mpool *p) {
  gt__buf *b = NULL;
  pthread_mutex_lock(&p->lock);
  if (p->free) {
    b = p->free;
    p->free = b->next;
  } else if (p->carved < p->max) {
    b = (gt__buf *)(p->base + p->carved++ * GT_BUF_SIZE);
  }
  pthread_mutex_unlock(&p->lock);
  if (b) {
    b->pos = b->data;
    b->nevents = 0;
  }
  return b;
}

static void mpool_put(mpool *p, gt__buf *b) {
  pthread_mutex_lock(&p->lock);
  b->next = p->free;
  p->free = b;
  pthread_mutex_unlock(&p->lock);
}

typedef struct arg {
  int lockfree;
  gt__pool *lp;
  mpool *mp;
  pthread_barrier_t *go;
  uint64_t refills;
} arg;

static void *worker(void *v) {
  arg *a = v;
  gt__buf *held[HOLD] = {0};
  pthread_barrier_wait(a->go);
  for (unsigned i = 0; i < OPS; i++) {
    unsigned k = i % HOLD;
    if (held[k])
      a->lockfree ? gt__pool_put(a->lp, held[k]) : mpool_put(a->mp, held[k]);
    held[k] = a->lockfree ? gt__pool_get(a->lp) : mpool_get(a->mp);
    if (held[k]) {
      held[k]->data[0] = (uint8_t)i; /* a writer touches its buffer */
      a->refills++;
    }
  }
  for (unsigned k = 0; k < HOLD; k++)
    if (held[k])
      a->lockfree ? gt__pool_put(a->lp, held[k]) : mpool_put(a->mp, held[k]);
  return NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Refills per second of one round. */
static double round_rate(int lockfree, int nth) {
  gt__pool lp;
  mpool mp;
  if (gt__pool_init(&lp, NBUF * GT_BUF_SIZE) != 0)
    exit(1);
  pthread_mutex_init(&mp.lock, NULL);
  mp.base = lp.base; /* the same mapping: only one of them runs */
  mp.free = NULL;
  mp.carved = 0;
  mp.max = NBUF;
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)nth + 1);
  pthread_t th[64];
  arg a[64];
  for (int i = 0; i < nth; i++) {
    a[i] = (arg){lockfree, &lp, &mp, &go, 0};
    pthread_create(&th[i], NULL, worker, &a[i]);
  }
  double t0 = now_s();
  pthread_barrier_wait(&go);
  uint64_t n = 0;
  for (int i = 0; i < nth; i++) {
    pthread_join(th[i], NULL);
    n += a[i].refills;
  }
  double t = now_s() - t0;
  pthread_barrier_destroy(&go);
  pthread_mutex_destroy(&mp.lock);
  gt__pool_fini(&lp);
  return (double)n / t;
}

int main(int argc, char **argv) {
  int nth = argc > 1 ? atoi(argv[1]) : 4;
  if (nth < 1 || nth > 64) {
    fprintf(stderr, "usage: bench_pool [threads 1..64]\n");
    return 2;
  }
  double lf = 0, mx = 0;
  for (int r = 0; r < ROUNDS; r++) { /* interleaved: same machine state */
    double x = round_rate(1, nth), y = round_rate(0, nth);
    if (x > lf)
      lf = x;
    if (y > mx)
      mx = y;
  }
  printf("BENCH id=POOL value=%.1f unit=Mrefills/s(%dthreads) "
         "baseline=mutex-pool:%.1f ratio=%.2f\n",
         lf / 1e6, nth, mx / 1e6, mx > 0 ? lf / mx : 0);
  return 0;
}
