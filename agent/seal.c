/* seal.c: sealing a generation: the stamp moves on, an asymmetric barrier
 * (membarrier) makes every writer's seq visible, the sealer waits until no
 * thread is inside the old generation, then takes its buffers and tables,
 * encodes them into one body and hands it to the spool. Keeps invariants 2,
 * 3 and 5 of agent.c. Thread: the agent thread, gt_snapshot and gt_start's
 * failure path, always under A.seal_lock.
 */
#include "config.h"

#include "agent_int.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "varint.h"

/* ---------------------------------------------------------------- seal */

void clock_now(uint64_t *ticks, uint64_t *mono, uint64_t *real) {
  *mono = gt__ns(CLOCK_MONOTONIC);
  *ticks = gt__ticks();
  *real = gt__ns(CLOCK_REALTIME);
}

/* Waits until t has left generation `old` (invariant 2). Returns 0, or -1
 * if it did not within the bound (a stopped or stuck thread). */
static int wait_left(gt__thread *t) {
#if GT_TSAN
  uint64_t s = atomic_load_explicit(&t->seq, memory_order_seq_cst);
#else
  uint64_t s = atomic_load_explicit(&t->seq, memory_order_acquire);
#endif
  if ((s & 1) == 0)
    return 0;
  uint64_t start = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(&t->seq, memory_order_acquire) != s)
      return 0;
    if (i < 64)
      continue;
    if (start == 0)
      start = gt__ns(CLOCK_MONOTONIC) / 1000000;
    else if (gt__ns(CLOCK_MONOTONIC) / 1000000 - start > 1000)
      return -1;
    if (i < 1024)
      sched_yield();
    else
      usleep(100);
  }
}

int membarrier_ok;

static void barrier_all(void) {
#if !GT_TSAN
  if (membarrier_ok)
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static gt__gen *build_gen(uint64_t stamp, gt__buf *bufs, const gtp_clock *ck,
                          uint64_t dropped, uint64_t *lost) {
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  uint64_t wire = stamp - A.stamp_base;
  uint64_t events = 0;
  for (gt__buf *b = bufs; b != NULL; b = b->next) {
    if (b->nevents == 0)
      continue;
    gtp_put_batch(&w, wire, b->tid, b->base_ticks, b->nevents, b->data,
                  (size_t)(b->pos - b->data));
    events += b->nevents - b->nlost;
  }
  gt__strtab_encode(&A.str[stamp & 1], &w);
  if (stacks_on) {
    gt__stacktab_encode(&A.stk[stamp & 1], &w);
    gt__modules_encode(&w);
  }
  gtp_put_clock(&w, ck);
  gt__gen *g = calloc(1, sizeof *g);
  if (g == NULL || w.err != 0 ||
      gtp_manifest_compute(w.data, w.len, &g->end) != 0) {
    logf_(GT_LOG_ERROR, "gentrace: cannot seal generation %llu",
          (unsigned long long)wire);
    free(g);
    gtp_wbuf_fini(&w);
    *lost += events;
    return NULL;
  }
  g->gen = wire;
  g->end.gen = wire;
  g->body = w.data;
  g->body_len = w.len;
  g->events = events;
  g->own_dropped = dropped;
  return g;
}

/* Waits for t to leave generation `old`, takes its buffer of that
 * generation onto *list and adds its drop counter to *dropped. */
static void take_thread(gt__thread *t, uint64_t old, gt__buf **list,
                        uint64_t *dropped) {
  unsigned par = old & 1;
  if (wait_left(t) != 0) {
    /* Never hang the sealer: leave that thread's buffer with it; it is
     * counted as dropped when the thread next refills (see refill()). */
    A.abandoned = 1;
    logf_(GT_LOG_WARN, "gentrace: thread %llu stuck in a write",
          (unsigned long long)t->tid);
  } else {
    gt__buf *b = atomic_load_explicit(&t->bufs[par], memory_order_acquire);
    if (b != NULL && b->gen == old) {
      atomic_store_explicit(&t->bufs[par], NULL, memory_order_relaxed);
      b->next = *list;
      *list = b;
    }
  }
  *dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
}

/* Seals the open generation and opens the next (or none when final).
 * Caller holds seal_lock. */
void seal(int final) {
  uint64_t old = A.open_stamp;
  if (old == 0)
    return;
  uint64_t next = final ? 0 : old + 1;
  gtp_clock ck = A.open_clock;
  clock_now(&ck.end_ticks, &ck.end_mono_ns, &ck.end_real_ns);
  if (!final) {
    unsigned np = next & 1;
    /* No writer is in generation `next` yet: the stamp store below
     * publishes these resets before anyone can add to them. */
    atomic_store_explicit(&A.gen_bytes[np], 0, memory_order_relaxed);
    atomic_store_explicit(&A.cut_signalled[np], 0, memory_order_relaxed);
    A.open_clock.start_ticks = ck.end_ticks;
    A.open_clock.start_mono_ns = ck.end_mono_ns;
    A.open_clock.start_real_ns = ck.end_real_ns;
    stamp_last = next;
  }
  A.open_stamp = next;
  atomic_store_explicit(&stamp_now, next, memory_order_seq_cst);
  barrier_all();

  unsigned par = old & 1;
  gt__buf *list = NULL;
  /* Waiting for threads happens without reg_lock, so a thread registering
   * meanwhile never waits behind a preempted writer. During a session only
   * the sealer frees thread structs, so the snapshot stays valid. */
  pthread_mutex_lock(&reg_lock);
  size_t nt = 0;
  for (gt__thread *t = reg_head; t != NULL; t = t->next)
    nt++;
  gt__thread **arr = malloc((nt ? nt : 1) * sizeof *arr);
  nt = 0;
  if (arr != NULL)
    for (gt__thread *t = reg_head; t != NULL; t = t->next)
      arr[nt++] = t;
  /* Threads freed below fold their counters into folded_dropped: take the
   * sum now, so each drop is counted once (invariant 5). */
  uint64_t total_dropped = folded_dropped;
  if (arr != NULL)
    pthread_mutex_unlock(&reg_lock);
  if (arr != NULL) {
    for (size_t i = 0; i < nt; i++)
      take_thread(arr[i], old, &list, &total_dropped);
  } else { /* out of memory: the same walk, holding the lock */
    for (gt__thread *t = reg_head; t != NULL; t = t->next)
      take_thread(t, old, &list, &total_dropped);
  }
  if (arr != NULL)
    pthread_mutex_lock(&reg_lock);
  thread_reap_locked();
  pthread_mutex_unlock(&reg_lock);
  free(arr);

  gt__buf *full =
      atomic_exchange_explicit(&A.full[par], NULL, memory_order_acquire);
  /* Batches in write order per thread: full buffers (oldest last in the
   * list) come before the thread's current one. Reverse `full` so the
   * oldest is first, then append the current buffers. */
  gt__buf *ordered = NULL;
  while (full != NULL) {
    gt__buf *n = full->next;
    full->next = ordered;
    ordered = full;
    full = n;
  }
  gt__buf **tail = &ordered;
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = list;

  uint64_t dropped = total_dropped - A.dropped_accounted;
  A.dropped_accounted = total_dropped;
  uint64_t lost = A.sealing_lost;
  A.sealing_lost = 0;
  gt__gen *g = build_gen(old, ordered, &ck, dropped + lost, &A.sealing_lost);
  for (gt__buf *b = ordered, *n; b != NULL; b = n) {
    n = b->next;
    gt__pool_put(&A.pool, b);
  }
  gt__strtab_reset(&A.str[par]);
  gt__stacktab_reset(&A.stk[par]);
  if (g != NULL) {
    A.gens_sealed++;
    A.bytes_sealed += g->body_len;
    gt__spool_add(&A.spool, g);
  }
}

/* A generation with no events that only carries a ledger left over from
 * generations that were evicted or rejected after the last seal. */
void seal_ledger_only(void) {
  uint64_t stamp = ++stamp_last;
  uint64_t ticks, mono, real;
  clock_now(&ticks, &mono, &real);
  gtp_clock ck = {ticks, mono, real, ticks, mono, real};
  gt__gen *g = build_gen(stamp, NULL, &ck, 0, &A.sealing_lost);
  if (g != NULL) {
    A.gens_sealed++;
    A.bytes_sealed += g->body_len;
    gt__spool_add(&A.spool, g);
  }
}
