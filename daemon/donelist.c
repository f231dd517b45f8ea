/* donelist.c: the completions the store thread hands back to the loop.
 *
 * Why: the store commits a transaction of many generations (a fleet's
 * transaction holds 20-200) and hands each back on its own. Waking the
 * loop for each (uv_async_send per generation) cost a system call per
 * generation on the store thread and, in libuv 1.44, a spin of the loop
 * (uv__async_io waits with `pause` and sched_yield while a sender is
 * inside uv_async_send) about 1.6 times per transaction at 10,000 agents.
 * The loop takes the whole list each time it runs, so one wake-up per
 * batch of pushes is enough: only a push that finds the list empty asks
 * for one.
 *
 * Why that loses no completion (invariant 1): call F the push that found
 * the list empty, and X any later push before the next take (X found F's
 * node there). The take that removes F's node is the first take after F,
 * and it also removes X's node: X found F's node still in the list, so
 * that take comes after X. F's caller wakes the consumer after its push
 * (uv_async_send after the unlock); libuv runs the async callback at least
 * once after a uv_async_send (a send that finds the handle already pending
 * coalesces with a callback that has not cleared it yet, so that callback
 * starts later still), and the callback takes the list. So a take after F
 * happens, and it takes X too. Several pushing threads change nothing in
 * this argument: the order is the lock's.
 *
 * Invariants:
 *  1. A push MUST return 1 exactly when it found the list empty, and its
 *     caller MUST then wake the consumer, whose wake-up handler MUST take
 *     the whole list (donelist_take), otherwise a completion pushed onto a
 *     non-empty list could wait for a wake-up that never comes, and its
 *     ACK with it.
 *  2. head and tail MUST only be touched under lock: the store thread (or
 *     several) pushes while the loop takes.
 */
#include "config.h"

#include "donelist.h"

#include <stddef.h>

void donelist_init(donelist *dl) {
  pthread_mutex_init(&dl->lock, NULL);
  dl->head = NULL;
  dl->tail = &dl->head;
  dl->wakes = 0;
}

void donelist_fini(donelist *dl) {
  pthread_mutex_destroy(&dl->lock);
}

int donelist_push(donelist *dl, donelist_node *n) {
  n->next = NULL;
  pthread_mutex_lock(&dl->lock);
  int was_empty = dl->head == NULL;
  *dl->tail = n;
  dl->tail = &n->next;
  pthread_mutex_unlock(&dl->lock);
  if (was_empty)
    __atomic_fetch_add(&dl->wakes, 1, __ATOMIC_RELAXED);
  return was_empty;
}

donelist_node *donelist_take(donelist *dl) {
  pthread_mutex_lock(&dl->lock);
  donelist_node *list = dl->head;
  dl->head = NULL;
  dl->tail = &dl->head;
  pthread_mutex_unlock(&dl->lock);
  return list;
}
