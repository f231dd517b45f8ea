/* genpool.c: the generation buffers of gentraced's ingest: a pool of idle
 * buffers kept for reuse, and a filler thread that prepares new ones off
 * the loop thread.
 *
 * Why: a generation is assembled in one buffer of its whole size (up to
 * max-gen-size). A fresh malloc'd buffer costs a page fault per 4 KiB
 * written, on the loop thread, which reads every agent (B2 profile: over
 * half of the loop's time). So buffers the store is done with go to a
 * small pool and are reused for the next generations; when the pool has
 * nothing (the store is behind, or at the start) the filler mallocs the
 * next ones and faults their pages in (MADV_POPULATE_WRITE), and the loop
 * only copies. Buffers under GENPOOL_SMALL skip both: malloc serves them
 * from pages it has mapped already.
 *
 * Ownership: the ingest owns the pool (embedded in struct ingest) and owns
 * the budget: it passes the bytes it holds for agents (`used`, budget.c's
 * budget_used) to each call, and says whether to keep a released buffer
 * (not while paused). The pool calls nothing of the ingest.
 *
 * Threads: the loop thread makes every call; the filler thread touches only
 * the slots, under lock, and only the one it marked BUSY while unlocked.
 *
 * Invariants (genpool_check_invariants checks 1-4 in debug builds, at the
 * end of every call that changes the pool):
 *  1. bytes MUST equal the capacities of the pooled buffers plus the sizes
 *     of the slots not EMPTY (asked for, being prepared, or ready), and
 *     stats.bytes mirrors it, otherwise the bound of 3 would be checked
 *     against a wrong sum and the pool could grow past max-buffer.
 *  2. At most GENPOOL_MAX buffers are pooled, each of at least GENPOOL_SMALL
 *     bytes (smaller ones are freed at once), otherwise the pool would keep
 *     a long tail of buffers too small to serve a generation.
 *  3. bytes MUST stay within max-buffer/8, and a buffer enters the pool or
 *     a slot is asked for only while used + bytes + its size <= max-buffer;
 *     genpool_trim frees pooled, then prepared buffers until used + bytes
 *     <= max-buffer (one being prepared finishes first), otherwise idle
 *     buffers would add to the memory --max-buffer bounds or, kept while
 *     agents wait, hold them back (ingest.c invariant 8).
 *  4. A slot MUST change state only under lock, and the filler owns it only
 *     while BUSY; an EMPTY slot holds no size or data, ASKED, BUSY and
 *     FAILED (the filler's malloc failed) hold a size and no data, READY
 *     its data, otherwise a buffer could be handed out twice or freed
 *     while the filler faults it in. A FAILED slot is the loop's to clear
 *     (it owns bytes): the filler never allocates for it again.
 *  5. A buffer MUST be released only once nothing reads it any more (the
 *     store handed its generation back), otherwise the store would read a
 *     buffer being refilled. The caller's duty: the pool cannot see it.
 */
#include "config.h"

#include "genpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "check.h"

/* Faults in the whole pages of [p, p + n) in one call. A generation buffer
 * is written front to back right after this; page by page, each first
 * touch is a trap into the kernel (B2 profile: over half of the loop's time
 * on a fresh buffer), while MADV_POPULATE_WRITE maps the range in one pass
 * without changing its contents. Best effort: older kernels say EINVAL and
 * the pages fault in as before. */
static void prefault(uint8_t *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
  uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  if (e > a)
    (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)n;
#endif
}

/* Most bytes the pool may hold: a slice of max-buffer, which bounds the
 * pool and the bytes held for agents together (invariant 3). */
static uint64_t pool_limit(const genpool *p) {
  return p->max_buffer / 8;
}

static void pool_account(genpool *p, int64_t delta) {
  p->bytes = (uint64_t)((int64_t)p->bytes + delta);
  __atomic_store_n(&p->stats.bytes, p->bytes, __ATOMIC_RELAXED);
}

/* Room for n more bytes: under the pool's slice, and with the bytes held
 * for agents (used) under max-buffer (invariant 3). */
static int pool_fits(const genpool *p, uint64_t used, size_t n) {
  return p->bytes + n <= pool_limit(p) && used + p->bytes + n <= p->max_buffer;
}

/* A buffer of cap k serves a want of w without stranding memory on one
 * agent: big enough, not more than four times too big. */
static int fits_want(size_t k, size_t w) {
  return k >= w && k / 4 <= w;
}

/* The filler thread: turns ASKED slots into READY buffers, faulting their
 * pages in off the loop thread (invariant 4). */
static void *filler_main(void *arg) {
  genpool *p = arg;
  /* Named so `top -H` and bench_ingest tell its page faults from the
   * loop's and the store's work (the loop stays "gentraced"). */
  (void)pthread_setname_np(pthread_self(), "gt-genpool");
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    genpool_slot *sl = NULL;
    for (unsigned i = 0; i < GENPOOL_FILL_MAX && sl == NULL; i++)
      if (p->fill[i].state == GENPOOL_ASKED)
        sl = &p->fill[i];
    if (sl == NULL) {
      pthread_cond_wait(&p->cond, &p->lock);
      continue;
    }
    /* BUSY: the loop leaves the slot alone until it is READY. */
    sl->state = GENPOOL_BUSY;
    size_t n = sl->size;
    pthread_mutex_unlock(&p->lock);
    uint8_t *d = malloc(n);
    if (d != NULL)
      prefault(d, n - n / 9);
    pthread_mutex_lock(&p->lock);
    if (d == NULL) {
      /* Out of memory: not worth stopping ingest for. The loop clears the
       * slot (it owns bytes) and makes its buffers itself meanwhile, where
       * a failure ends only the connection that needed it. */
      sl->state = GENPOOL_FAILED;
      __atomic_fetch_add(&p->stats.fill_failed, 1, __ATOMIC_RELAXED);
      continue;
    }
    sl->data = d;
    sl->state = GENPOOL_READY;
    __atomic_fetch_add(&p->stats.prepared_ready, 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

void genpool_init(genpool *p, uint64_t max_buffer) {
  p->max_buffer = max_buffer;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  /* Without the thread buffers are simply made on the loop. */
  p->filler_running = pthread_create(&p->filler, NULL, filler_main, p) == 0;
}

void genpool_fini(genpool *p) {
  GTP_ASSERT(genpool_check_invariants(p) == 0);
  if (p->filler_running) {
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->filler, NULL); /* no slot is BUSY after this */
    p->filler_running = 0;
  }
  for (unsigned i = 0; i < GENPOOL_FILL_MAX; i++) {
    genpool_slot *sl = &p->fill[i];
    if (sl->state == GENPOOL_READY)
      free(sl->data);
    if (sl->state != GENPOOL_EMPTY)
      pool_account(p, -(int64_t)sl->size);
    *sl = (genpool_slot){GENPOOL_EMPTY, 0, NULL};
  }
  while (p->npool > 0) {
    genpool_buf b = p->pool[--p->npool];
    pool_account(p, -(int64_t)b.cap);
    free(b.data);
  }
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->lock);
}

/* Asks the filler for buffers of want bytes in its empty slots, as far as
 * the memory bound allows (invariant 3). A slot holding a size that does
 * not fit want is replaced only when no slot fits it, so agents of
 * different generation sizes share the slots instead of each throwing away
 * what was prepared for the other. Called when the pool had nothing. */
static void fill_ask(genpool *p, uint64_t used, size_t want) {
  if (!p->filler_running)
    return;
  uint8_t *drop = NULL;
  unsigned fit = 0, asked = 0;
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < GENPOOL_FILL_MAX; i++) {
    genpool_slot *sl = &p->fill[i];
    if (sl->state == GENPOOL_FAILED) { /* asked again below, if it fits */
      pool_account(p, -(int64_t)sl->size);
      *sl = (genpool_slot){GENPOOL_EMPTY, 0, NULL};
    }
    if (sl->state != GENPOOL_EMPTY && fits_want(sl->size, want))
      fit++;
  }
  for (unsigned i = 0; i < GENPOOL_FILL_MAX; i++) {
    genpool_slot *sl = &p->fill[i];
    if (fit == 0 && drop == NULL &&
        (sl->state == GENPOOL_READY || sl->state == GENPOOL_ASKED)) {
      /* Nothing fits: this one goes (BUSY ones finish first). */
      if (sl->state == GENPOOL_READY) {
        drop = sl->data;
        __atomic_fetch_add(&p->stats.prepared_ready, (uint64_t)-1,
                           __ATOMIC_RELAXED);
      }
      pool_account(p, -(int64_t)sl->size);
      *sl = (genpool_slot){GENPOOL_EMPTY, 0, NULL};
    }
    if (sl->state == GENPOOL_EMPTY && pool_fits(p, used, want)) {
      *sl = (genpool_slot){GENPOOL_ASKED, want, NULL};
      pool_account(p, (int64_t)want);
      asked++;
      fit++;
    }
  }
  if (asked > 0)
    pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  free(drop);
}

/* Takes a prepared buffer that fits want, or NULL. */
static uint8_t *fill_take(genpool *p, size_t want, size_t *cap) {
  if (!p->filler_running)
    return NULL;
  uint8_t *d = NULL;
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < GENPOOL_FILL_MAX && d == NULL; i++) {
    genpool_slot *sl = &p->fill[i];
    if (sl->state == GENPOOL_READY && fits_want(sl->size, want)) {
      d = sl->data;
      *cap = sl->size;
      __atomic_fetch_add(&p->stats.prepared_ready, (uint64_t)-1,
                         __ATOMIC_RELAXED);
      pool_account(p, -(int64_t)sl->size);
      *sl = (genpool_slot){GENPOOL_EMPTY, 0, NULL};
    }
  }
  pthread_mutex_unlock(&p->lock);
  return d;
}

uint8_t *genpool_alloc(genpool *p, uint64_t used, size_t want, size_t touch,
                       size_t *cap) {
  if (want < GENPOOL_SMALL) {
    /* malloc serves these from pages it has mapped already: the pool and
     * the filler thread would only add a hand-off per generation (fleet
     * profile: the filler's wake-ups cost more than the malloc). */
    uint8_t *d = malloc(want);
    *cap = d != NULL ? want : 0;
    return d;
  }
  /* Best fit: the smallest pooled buffer that fits want. */
  unsigned best = p->npool;
  for (unsigned i = 0; i < p->npool; i++) {
    size_t k = p->pool[i].cap;
    if (fits_want(k, want) && (best == p->npool || k < p->pool[best].cap))
      best = i;
  }
  if (best < p->npool) {
    genpool_buf b = p->pool[best];
    p->pool[best] = p->pool[--p->npool];
    pool_account(p, -(int64_t)b.cap);
    __atomic_fetch_add(&p->stats.reused, 1, __ATOMIC_RELAXED);
    *cap = b.cap;
    return b.data; /* its pages are mapped already */
  }
  /* The store has not handed buffers back (it is behind, or this is the
   * start): a prepared one, else one made here; either way ask the filler
   * to prepare the next ones. */
  uint8_t *d = fill_take(p, want, cap);
  if (d != NULL) {
    __atomic_fetch_add(&p->stats.prepared_used, 1, __ATOMIC_RELAXED);
  } else {
    d = malloc(want);
    if (d == NULL) {
      *cap = 0;
      return NULL;
    }
    prefault(d, touch < want ? touch : want);
    *cap = want;
  }
  fill_ask(p, used, want);
  GTP_ASSERT(genpool_check_invariants(p) == 0);
  return d;
}

void genpool_release(genpool *p, uint64_t used, int keep, uint8_t *data,
                     size_t cap) {
  if (data == NULL)
    return;
  if (cap < GENPOOL_SMALL) {
    free(data); /* small ones never pool (genpool_alloc) */
    return;
  }
  /* Keep it only while the pool and the bytes held for agents together
   * stay under max-buffer (invariant 3). */
  if (p->npool < GENPOOL_MAX && keep && pool_fits(p, used, cap)) {
    p->pool[p->npool++] = (genpool_buf){data, cap};
    pool_account(p, (int64_t)cap);
    GTP_ASSERT(genpool_check_invariants(p) == 0);
    return;
  }
  free(data);
}

void genpool_trim(genpool *p, uint64_t used) {
  while (p->npool > 0 && used + p->bytes > p->max_buffer) {
    genpool_buf b = p->pool[--p->npool];
    pool_account(p, -(int64_t)b.cap);
    free(b.data);
  }
  if (!p->filler_running || used + p->bytes <= p->max_buffer)
    return;
  /* Then prepared and asked-for buffers; one being prepared (BUSY) stays
   * and is dropped by the next trim once READY. */
  uint8_t *drop[GENPOOL_FILL_MAX];
  unsigned ndrop = 0;
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < GENPOOL_FILL_MAX; i++) {
    genpool_slot *sl = &p->fill[i];
    if (used + p->bytes <= p->max_buffer)
      break;
    if (sl->state == GENPOOL_READY || sl->state == GENPOOL_ASKED ||
        sl->state == GENPOOL_FAILED) {
      if (sl->state == GENPOOL_READY) {
        drop[ndrop++] = sl->data;
        __atomic_fetch_add(&p->stats.prepared_ready, (uint64_t)-1,
                           __ATOMIC_RELAXED);
      }
      pool_account(p, -(int64_t)sl->size);
      *sl = (genpool_slot){GENPOOL_EMPTY, 0, NULL};
    }
  }
  pthread_mutex_unlock(&p->lock);
  for (unsigned i = 0; i < ndrop; i++)
    free(drop[i]);
  GTP_ASSERT(genpool_check_invariants(p) == 0);
}

/* Checks the slots under lock (invariant 4) and the sums (1-3). */
int genpool_check_invariants(genpool *p) {
  uint64_t sum = 0;
  if (p->npool > GENPOOL_MAX)
    return -2;
  for (unsigned i = 0; i < p->npool; i++) {
    if (p->pool[i].data == NULL || p->pool[i].cap < GENPOOL_SMALL)
      return -2;
    sum += p->pool[i].cap;
  }
  int rc = 0;
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < GENPOOL_FILL_MAX && rc == 0; i++) {
    const genpool_slot *sl = &p->fill[i];
    switch (sl->state) {
    case GENPOOL_EMPTY:
      if (sl->size != 0 || sl->data != NULL)
        rc = -4;
      break;
    case GENPOOL_ASKED:
    case GENPOOL_BUSY:
    case GENPOOL_FAILED:
      if (sl->size == 0 || sl->data != NULL)
        rc = -4;
      break;
    case GENPOOL_READY:
      if (sl->size == 0 || sl->data == NULL)
        rc = -4;
      break;
    default:
      rc = -4;
    }
    sum += sl->size;
  }
  pthread_mutex_unlock(&p->lock);
  if (rc != 0)
    return rc;
  if (sum != p->bytes ||
      __atomic_load_n(&p->stats.bytes, __ATOMIC_RELAXED) != p->bytes)
    return -1;
  if (p->bytes > pool_limit(p))
    return -3;
  return 0;
}

void genpool_stats_get(genpool *p, genpool_stats *out) {
  out->bytes = __atomic_load_n(&p->stats.bytes, __ATOMIC_RELAXED);
  out->reused = __atomic_load_n(&p->stats.reused, __ATOMIC_RELAXED);
  out->prepared_used =
      __atomic_load_n(&p->stats.prepared_used, __ATOMIC_RELAXED);
  out->prepared_ready =
      __atomic_load_n(&p->stats.prepared_ready, __ATOMIC_RELAXED);
  out->fill_failed = __atomic_load_n(&p->stats.fill_failed, __ATOMIC_RELAXED);
}
