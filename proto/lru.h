/* lru.h: an intrusive most-recent-first list, for the caches that evict
 * their least recently used entry (store/gencache.c, sym/symcache.c).
 *
 * An entry embeds a gtp_lru_link; the list holds only links, and
 * GTP_LRU_ENTRY gets the entry back. The caller owns the entries and their
 * lock: these helpers only relink.
 *
 * Invariants (the caller's check_invariants walks them):
 *   1. head == NULL iff tail == NULL; head->prev == tail->next == NULL.
 *   2. A link is in at most one list; an unlinked link has prev == next ==
 * NULL.
 */
#ifndef GTP_LRU_H
#define GTP_LRU_H

#include <stddef.h>

typedef struct gtp_lru_link {
  struct gtp_lru_link *prev, *next;
} gtp_lru_link;

typedef struct {
  gtp_lru_link *head, *tail; /* head = most recently used */
} gtp_lru;

/* The entry of type TYPE whose member MEMBER is LINK; NULL for NULL. */
#define GTP_LRU_ENTRY(link, type, member)                                      \
  ((link) ? (type *)(void *)((char *)(link)-offsetof(type, member)) : NULL)

static inline void gtp_lru_unlink(gtp_lru *l, gtp_lru_link *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    l->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    l->tail = e->prev;
  e->prev = e->next = NULL;
}

/* Makes e the most recently used (e must be unlinked). */
static inline void gtp_lru_push(gtp_lru *l, gtp_lru_link *e) {
  e->prev = NULL;
  e->next = l->head;
  if (l->head)
    l->head->prev = e;
  l->head = e;
  if (!l->tail)
    l->tail = e;
}

#endif
