/* spool.c: see spool.h for the states and invariants. */
#include "config.h"

#include "spool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int gt__spool_init(gt__spool *sp, size_t limit) {
  memset(sp, 0, sizeof *sp);
  sp->limit = limit;
  int rc = pthread_mutex_init(&sp->lock, NULL);
  return rc ? -rc : 0;
}

static void gen_free(gt__gen *g) {
  free(g->body);
  free(g);
}

/* Lock held. */
static void unref_locked(gt__spool *sp, gt__gen *g) {
  (void)sp;
  if (--g->refs == 0)
    gen_free(g);
}

void gt__spool_fini(gt__spool *sp) {
  gt__gen *g = sp->head;
  while (g != NULL) {
    gt__gen *n = g->next;
    unref_locked(sp, g);
    g = n;
  }
  sp->head = sp->tail = NULL;
  pthread_mutex_destroy(&sp->lock);
}

/* Lock held. Unlinks g (must be in the list). */
static void unlink_locked(gt__spool *sp, gt__gen *g) {
  gt__gen **pp = &sp->head, *prev = NULL;
  while (*pp != g) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  *pp = g->next;
  if (sp->tail == g)
    sp->tail = prev;
  g->next = NULL;
  sp->bytes -= g->body_len;
}

/* Lock held. g leaves without being stored: carry its events (as `cause`)
 * and its ledger into the next generation sent (invariant 2). */
static void carry_locked(gt__spool *sp, const gt__gen *g, uint64_t *cause) {
  *cause += g->events;
  if (g->ledger_set) {
    sp->pend_dropped += g->end.dropped;
    sp->pend_evicted += g->end.evicted;
    sp->pend_rejected += g->end.rejected;
  } else {
    sp->pend_dropped += g->own_dropped;
  }
}

/* Lock held. Evicts g (not linked or linked). */
static void evict_locked(gt__spool *sp, gt__gen *g, int linked) {
  if (linked)
    unlink_locked(sp, g);
  if (g->state != GT_GEN_ACKED) {
    carry_locked(sp, g, &sp->pend_evicted);
    sp->evicted_events += g->events;
    sp->evicted_gens++;
  }
  unref_locked(sp, g);
}

void gt__spool_add(gt__spool *sp, gt__gen *g) {
  pthread_mutex_lock(&sp->lock);
  g->next = NULL;
  g->refs = 1;
  g->state = GT_GEN_QUEUED;
  g->ledger_set = 0;
  while (sp->bytes + g->body_len > sp->limit) {
    gt__gen *victim = NULL;
    for (gt__gen *v = sp->head; v != NULL; v = v->next)
      if (v->state == GT_GEN_ACKED) {
        victim = v;
        break;
      }
    if (victim == NULL)
      for (gt__gen *v = sp->head; v != NULL; v = v->next)
        if (v->state == GT_GEN_QUEUED) {
          victim = v;
          break;
        }
    if (victim == NULL)
      break;
    evict_locked(sp, victim, 1);
  }
  if (sp->bytes + g->body_len > sp->limit) {
    evict_locked(sp, g, 0); /* invariant 4: the newcomer itself */
  } else {
    if (sp->tail)
      sp->tail->next = g;
    else
      sp->head = g;
    sp->tail = g;
    sp->bytes += g->body_len;
  }
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
}

gt__gen *gt__spool_next(gt__spool *sp) {
  pthread_mutex_lock(&sp->lock);
  gt__gen *g = sp->head;
  while (g != NULL && g->state != GT_GEN_QUEUED)
    g = g->next;
  if (g != NULL) {
    g->state = GT_GEN_SENT;
    if (!g->ledger_set) {
      g->end.dropped = g->own_dropped + sp->pend_dropped;
      g->end.evicted = sp->pend_evicted;
      g->end.rejected = sp->pend_rejected;
      sp->pend_dropped = sp->pend_evicted = sp->pend_rejected = 0;
      g->ledger_set = 1;
      sp->sent_gens++;
    }
    g->refs++;
  }
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return g;
}

void gt__spool_unref(gt__spool *sp, gt__gen *g) {
  pthread_mutex_lock(&sp->lock);
  unref_locked(sp, g);
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
}

static gt__gen *find_locked(gt__spool *sp, uint64_t gen) {
  for (gt__gen *g = sp->head; g != NULL; g = g->next)
    if (g->gen == gen)
      return g;
  return NULL;
}

/* Lock held. */
static void deliver_locked(gt__spool *sp, gt__gen *g) {
  g->state = GT_GEN_ACKED;
  sp->delivered_events += g->events;
  sp->acked_gens++;
  if (g->gen > sp->last_acked)
    sp->last_acked = g->gen;
}

/* Resolves the SENT generation gen: delivered (ACK) or refused by the
 * daemon (its events and ledger carried on, invariant 2). Only a
 * transmitted generation can be resolved: an answer for a QUEUED one would
 * come from a confused peer, and trusting it could hide loss. */
static int resolve(gt__spool *sp, uint64_t gen, int acked) {
  int found = 0;
  pthread_mutex_lock(&sp->lock);
  gt__gen *g = find_locked(sp, gen);
  if (g != NULL && g->state == GT_GEN_SENT) {
    if (acked) {
      deliver_locked(sp, g);
    } else {
      unlink_locked(sp, g);
      carry_locked(sp, g, &sp->pend_rejected);
      sp->rejected_events += g->events;
      sp->rejected_gens++;
      unref_locked(sp, g);
    }
    found = 1;
  }
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return found;
}

int gt__spool_ack(gt__spool *sp, uint64_t gen) {
  return resolve(sp, gen, 1);
}

int gt__spool_reject(gt__spool *sp, uint64_t gen) {
  return resolve(sp, gen, 0);
}

void gt__spool_committed_upto(gt__spool *sp, uint64_t last) {
  pthread_mutex_lock(&sp->lock);
  /* Only generations that were transmitted before can be committed; a
   * WELCOME claiming more (a daemon whose database was replaced) must not
   * make us count never-sent generations as delivered. */
  for (gt__gen *g = sp->head; g != NULL; g = g->next)
    if (g->gen <= last && g->state != GT_GEN_ACKED && g->ledger_set)
      deliver_locked(sp, g);
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
}

void gt__spool_requeue(gt__spool *sp) {
  pthread_mutex_lock(&sp->lock);
  for (gt__gen *g = sp->head; g != NULL; g = g->next)
    if (g->state == GT_GEN_SENT)
      g->state = GT_GEN_QUEUED;
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
}

int gt__spool_idle(gt__spool *sp) {
  pthread_mutex_lock(&sp->lock);
  int idle = 1;
  for (gt__gen *g = sp->head; g != NULL; g = g->next)
    if (g->state != GT_GEN_ACKED)
      idle = 0;
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return idle;
}

int gt__spool_settled(gt__spool *sp) {
  if (!gt__spool_idle(sp))
    return 0;
  pthread_mutex_lock(&sp->lock);
  int s =
      sp->pend_dropped == 0 && sp->pend_evicted == 0 && sp->pend_rejected == 0;
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return s;
}

size_t gt__spool_pin_all(gt__spool *sp, gt__gen **out, size_t max) {
  size_t n = 0;
  pthread_mutex_lock(&sp->lock);
  for (gt__gen *g = sp->head; g != NULL && n < max; g = g->next) {
    g->refs++;
    out[n++] = g;
  }
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return n;
}

size_t gt__spool_count(gt__spool *sp) {
  size_t n = 0;
  pthread_mutex_lock(&sp->lock);
  for (gt__gen *g = sp->head; g != NULL; g = g->next)
    n++;
  GTP_ASSERT(gt__spool_check_invariants_locked(sp) == 0);
  pthread_mutex_unlock(&sp->lock);
  return n;
}

void gt__spool_pending_locked(const gt__spool *sp, uint64_t *gens,
                              uint64_t *events) {
  *gens = *events = 0;
  for (const gt__gen *g = sp->head; g != NULL; g = g->next)
    if (g->state != GT_GEN_ACKED) {
      (*gens)++;
      *events += g->events;
    }
}

int gt__spool_check_invariants_locked(const gt__spool *sp) {
  size_t bytes = 0;
  const gt__gen *last = NULL;
  for (const gt__gen *g = sp->head; g != NULL; g = g->next) {
    if (g->refs < 1 || g->state < GT_GEN_QUEUED || g->state > GT_GEN_ACKED)
      return -5;
    if (g->state != GT_GEN_QUEUED && !g->ledger_set)
      return -1;
    bytes += g->body_len;
    last = g;
  }
  if (last != sp->tail)
    return -5;
  if (bytes != sp->bytes || sp->bytes > sp->limit)
    return -4;
  return 0;
}
