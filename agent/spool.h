/* spool.h: sealed generations held until the daemon ACKs them, plus the
 * flight-recorder ring of recent delivered ones, within a byte budget.
 *
 * States of a generation (gt__gen.state), and who moves it:
 *
 *   QUEUED --gt__spool_next/mark_sent--> SENT --gt__spool_ack--> ACKED
 *      ^                                  |  \--gt__spool_reject--> (freed)
 *      +------gt__spool_requeue-----------+  (connection lost)
 *   QUEUED/ACKED --eviction in gt__spool_add--> (freed)
 *
 * Invariants:
 *  1. The ledger of a generation MUST be fixed at its first transmission and
 *     never change, otherwise a resend after a reconnect could carry a
 *     different ledger than the copy the daemon may already hold.
 *  2. Events and ledger of a generation that leaves without being stored
 *     (evicted, rejected) MUST be carried, exactly once, into the ledger of
 *     the next generation sent, otherwise emitted = stored + ledger breaks.
 *  3. A SENT generation MUST NOT be evicted while its connection is up,
 *     otherwise its ACK could arrive after it was counted as evicted (stored
 *     and counted lost). Eviction takes ACKED first (they are only kept for
 *     the flight recorder), then the oldest QUEUED, else the newcomer.
 *  4. bytes MUST stay <= limit after gt__spool_add returns.
 *  5. Memory of a generation is freed only when its last reference goes
 *     (the snapshot writer pins generations while it writes them unlocked).
 *
 * Thread: every function takes sp->lock itself, except those marked.
 */
#ifndef GT_SPOOL_H
#define GT_SPOOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

enum { GT_GEN_QUEUED = 0, GT_GEN_SENT = 1, GT_GEN_ACKED = 2 };

typedef struct gt__gen {
  struct gt__gen *next;
  uint64_t gen;  /* wire generation number */
  uint8_t *body; /* body records; owned */
  size_t body_len;
  gtp_gen_end end;      /* manifest; ledger valid once ledger_set */
  uint64_t events;      /* non-LOST events: what the ledger counts */
  uint64_t own_dropped; /* drops observed while this generation was open */
  int state;
  int ledger_set;
  int refs; /* protected by the spool lock */
} gt__gen;

typedef struct gt__spool {
  pthread_mutex_t lock;
  size_t limit; /* written once */
  /* Protected by lock. */
  gt__gen *head, *tail; /* oldest first */
  size_t bytes;
  uint64_t pend_dropped, pend_evicted, pend_rejected; /* invariant 2 */
  uint64_t evicted_events, evicted_gens;
  uint64_t rejected_events, rejected_gens;
  uint64_t delivered_events, acked_gens, sent_gens;
  uint64_t last_acked;
} gt__spool;

int gt__spool_init(gt__spool *sp, size_t limit);
void gt__spool_fini(gt__spool *sp); /* frees every generation */

/* A new generation (body malloc'ed, ownership moves in). Evicts as needed;
 * may evict g itself when it alone exceeds the budget. */
void gt__spool_add(gt__spool *sp, gt__gen *g);
/* The oldest QUEUED generation, pinned (release with gt__spool_unref), after
 * marking it SENT and fixing its ledger on first transmission (invariant 1).
 * NULL when nothing is queued. */
gt__gen *gt__spool_next(gt__spool *sp);
void gt__spool_unref(gt__spool *sp, gt__gen *g);
/* Daemon answers. Unknown or already-resolved gens are ignored; return 1 if
 * the generation was found and resolved. */
int gt__spool_ack(gt__spool *sp, uint64_t gen);
int gt__spool_reject(gt__spool *sp, uint64_t gen);
/* WELCOME said everything <= last is committed. */
void gt__spool_committed_upto(gt__spool *sp, uint64_t last);
/* Connection lost: SENT -> QUEUED (resent on the next connection). */
void gt__spool_requeue(gt__spool *sp);
/* 1 when no generation is QUEUED or SENT and no ledger waits to be
 * carried. */
int gt__spool_settled(gt__spool *sp);
/* 1 when nothing is QUEUED or SENT (the ledger may still wait). */
int gt__spool_idle(gt__spool *sp);
/* Pins every held generation, oldest first, into out (up to max); returns
 * the count. Unpin each with gt__spool_unref. */
size_t gt__spool_pin_all(gt__spool *sp, gt__gen **out, size_t max);
size_t gt__spool_count(gt__spool *sp);
/* Generations QUEUED or SENT (not yet resolved) and the events in them.
 * Lock held. */
void gt__spool_pending_locked(const gt__spool *sp, uint64_t *gens,
                              uint64_t *events);
/* 0, or minus the first invariant that does not hold (1: a SENT or ACKED
 * generation without its ledger; 4: bytes over limit or not the sum of the
 * held bodies; 5: a held generation with no reference, or a broken list).
 * Lock held (or no other user). Debug builds check it at each change,
 * counting failures only: this runs inside the host. */
int gt__spool_check_invariants_locked(const gt__spool *sp);

#endif
