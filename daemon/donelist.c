/* donelist.c: the completions the store thread hands back to the loop.
 *
 * Why: the store commits a transaction of many generations (a fleet's
 * holds 20-200) and hands each back on its own. They went through a
 * uv_async_t: libuv coalesces the sends (one eventfd write per callback),
 * but in libuv 1.44 a send marks the handle busy around its write(2), and
 * a loop that wakes on that write while the sender has not yet left it
 * spins (up to 997 `pause`s, then sched_yield, over and over) until the
 * sender is done: about once per transaction, a few to tens of
 * microseconds of the loop thread each (strace of the loop at 300 agents
 * on 1 s periods: 51-83 sched_yield in 4 s, about 1,200 generations).
 * Here the "wake-up owed" state is the list itself, under its lock, and
 * the wake-up an eventfd the loop polls: nothing to spin on, and one
 * write(2) per batch, by the push that found the list empty. The store
 * thread pushes a transaction's completions as one chain
 * (donelist_push_chain): one lock per transaction instead of one per
 * generation, which the loop's take contended; a chain is one push for
 * the argument below (its nodes enter and leave the list together).
 *
 * Why that loses no completion (invariant 1): call T a take and X a push
 * whose node T does not get (X came after T's swap under the lock). Either
 * X found the list empty: it writes fd after its unlock, so after T read
 * fd, and fd stays readable until the next take reads it; that take comes
 * later and gets X's node. Or X found nodes there: the first of them, F,
 * came after T's swap too, found the list empty and writes fd after T's
 * read: the same holds for F, and the take that gets F's node gets X's
 * (X was pushed before that take's swap, since X found F's node). A take
 * that reads fd and then finds nothing (its wake-up's nodes went to the
 * take before it) costs one spurious wake-up. Several pushing threads
 * change nothing: the order is the lock's.
 *
 * Invariants:
 *  1. A push that found the list empty MUST make fd readable after it
 *     released the lock, and a take MUST clear fd before it takes the
 *     list, and the consumer MUST take whenever fd is readable, otherwise
 *     a node could wait for a wake-up that never comes (and its ACK with
 *     it): the argument above.
 *  2. head and tail MUST only be touched under lock: the store thread (or
 *     several) pushes while the loop takes.
 */
#include "config.h"

#include "donelist.h"

#include <errno.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <unistd.h>

int donelist_init(donelist *dl) {
  dl->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (dl->fd < 0)
    return -errno;
  pthread_mutex_init(&dl->lock, NULL);
  dl->head = NULL;
  dl->tail = &dl->head;
  dl->wakes = 0;
  return 0;
}

void donelist_fini(donelist *dl) {
  pthread_mutex_destroy(&dl->lock);
  close(dl->fd);
  dl->fd = -1;
}

int donelist_push(donelist *dl, donelist_node *n) {
  return donelist_push_chain(dl, n, n);
}

int donelist_push_chain(donelist *dl, donelist_node *first,
                        donelist_node *last) {
  last->next = NULL;
  pthread_mutex_lock(&dl->lock);
  int was_empty = dl->head == NULL;
  *dl->tail = first;
  dl->tail = &last->next;
  pthread_mutex_unlock(&dl->lock);
  if (was_empty) {
    uint64_t one = 1;
    /* Cannot fail but by EINTR: the counter would have to reach 2^64 - 2
     * (every take clears it). */
    while (write(dl->fd, &one, sizeof one) < 0 && errno == EINTR)
      ;
    __atomic_fetch_add(&dl->wakes, 1, __ATOMIC_RELAXED);
  }
  return was_empty;
}

donelist_node *donelist_take(donelist *dl) {
  uint64_t v;
  /* Before the swap (invariant 1); EAGAIN: nothing was owed. */
  while (read(dl->fd, &v, sizeof v) < 0 && errno == EINTR)
    ;
  pthread_mutex_lock(&dl->lock);
  donelist_node *list = dl->head;
  dl->head = NULL;
  dl->tail = &dl->head;
  pthread_mutex_unlock(&dl->lock);
  return list;
}
