/* donelist.h: the completions the store thread hands back to the loop,
 * with one wake-up per batch and no spin (see donelist.c's design note). */
#ifndef GT_DONELIST_H
#define GT_DONELIST_H

#include <pthread.h>
#include <stdint.h>

/* Embedded in what the list carries (intrusive: no allocation per push). */
typedef struct donelist_node {
  struct donelist_node *next;
} donelist_node;

typedef struct donelist {
  pthread_mutex_t lock;
  donelist_node *head, **tail; /* under lock */
  int fd; /* eventfd: readable while a wake-up is owed (invariant 1) */
  /* Pushes that found the list empty and so wrote fd (relaxed atomic;
   * gentrace_ingest_store_wakeups_total). */
  uint64_t wakes;
} donelist;

/* 0, or -errno when no eventfd could be made. */
int donelist_init(donelist *dl);
/* Closes the fd; nodes still in the list are the caller's (take them
 * first). */
void donelist_fini(donelist *dl);

/* The fd the consumer polls for reading (uv_poll_t, UV_READABLE). */
static inline int donelist_fd(const donelist *dl) {
  return dl->fd;
}

/* Appends n; when it found the list empty, makes fd readable. Returns 1
 * then, 0 when a wake-up was already owed for the nodes before it. Any
 * thread. */
int donelist_push(donelist *dl, donelist_node *n);

/* donelist_push for the chain first .. last (linked by next, last's next
 * is set to NULL): one lock and at most one write of fd for all of them,
 * as if first were pushed with the others behind it. Returns as
 * donelist_push. Any thread. */
int donelist_push_chain(donelist *dl, donelist_node *first,
                        donelist_node *last);

/* Clears fd, then takes the whole list, oldest first (NULL when empty).
 * The consumer's thread, when fd is readable (or at the end). */
donelist_node *donelist_take(donelist *dl);

#endif
