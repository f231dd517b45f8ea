/* donelist.h: the completions the store thread hands back to the loop,
 * with one wake-up per batch (see donelist.c's design note). */
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
  /* Pushes that found the list empty and so told their caller to wake the
   * consumer (relaxed atomic; gentrace_ingest_store_wakeups_total). */
  uint64_t wakes;
} donelist;

void donelist_init(donelist *dl);
/* The list must be empty (donelist_take until NULL) before. */
void donelist_fini(donelist *dl);

/* Appends n. Returns 1 when the caller MUST then wake the consumer (for
 * gentraced: uv_async_send), 0 when a wake-up is already owed for the
 * nodes before it (invariant 1). Any thread. */
int donelist_push(donelist *dl, donelist_node *n);

/* Takes the whole list, oldest first (NULL when empty). The consumer's
 * thread. */
donelist_node *donelist_take(donelist *dl);

#endif
