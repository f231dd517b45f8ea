/* sum_carry.c: spans across generation edges (see sum_carry.h).
 *
 * Invariants:
 *   1. An entry MUST sit at most CARRY_RUN - 1 slots after its home with no
 *      empty slot in between (linear probing, backward-shift deletion),
 *      otherwise a lookup stopping at the first empty slot would miss it.
 *   2. A generation MUST be paired only with what gen - 1 of its session
 *      left open, otherwise a gap (a generation lost or out of order) would
 *      pair an END with the wrong begin.
 */
#include "config.h"

#include "sum_carry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Carry: per session, the regions and tasks open after its last committed
 * generation (names copied into one owned block). Only sessions with
 * something open have an entry; at most STORE_CARRY_MAX of them (a full
 * probe run evicts the entry at its first slot: that session's next spans
 * across the edge are then counted as unmatched). */
#define STORE_CARRY_MAX 65536 /* power of two */
typedef struct carry_ent {
  uint8_t session[16];
  uint64_t gen;
  gtp_sum_open *opens; /* NULL = empty slot */
  size_t n;
  char *names; /* owned block the opens' names point into */
} carry_ent;

struct sum_carry {
  carry_ent *slots; /* STORE_CARRY_MAX slots, calloc'd on first use */
};

sum_carry *sum_carry_new(void) {
  return calloc(1, sizeof(sum_carry));
}

static void carry_clear(carry_ent *e) {
  free(e->opens);
  free(e->names);
  memset(e, 0, sizeof *e);
}

/* Open addressing with linear probing and backward-shift deletion: an
 * entry sits at most CARRY_RUN - 1 slots after its home with no empty slot
 * in between, so a session without an entry (the common case: nothing
 * left open) costs one probe up to the first empty slot, not a walk of
 * the whole run (fleet profile: that walk was the largest self cost of
 * store_summary_put at 10,000 agents). */
#define CARRY_RUN 64

static size_t carry_home(const uint8_t session[16]) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < 16; i++)
    h = (h ^ session[i]) * 1099511628211ull;
  return (size_t)h & (STORE_CARRY_MAX - 1);
}

static carry_ent *carry_find(sum_carry *ss, const uint8_t session[16]) {
  size_t home = carry_home(session);
  for (size_t k = 0; k < CARRY_RUN; k++) {
    carry_ent *e = &ss->slots[(home + k) & (STORE_CARRY_MAX - 1)];
    if (!e->opens)
      return NULL;
    if (memcmp(e->session, session, 16) == 0)
      return e;
  }
  return NULL;
}

/* An empty slot for a session without an entry; a full run evicts the
 * entry at its home (that session's spans across the edge then count as
 * unmatched). */
static carry_ent *carry_take(sum_carry *ss, const uint8_t session[16]) {
  size_t home = carry_home(session);
  for (size_t k = 0; k < CARRY_RUN; k++) {
    carry_ent *e = &ss->slots[(home + k) & (STORE_CARRY_MAX - 1)];
    if (!e->opens)
      return e;
  }
  carry_ent *e = &ss->slots[home];
  carry_clear(e);
  return e;
}

/* Empties slot e and shifts the entries after it back, so no lookup stops
 * early at the hole. */
static void carry_remove(sum_carry *ss, carry_ent *e) {
  carry_clear(e);
  size_t hole = (size_t)(e - ss->slots);
  for (size_t k = 1; k < STORE_CARRY_MAX; k++) {
    size_t j = (hole + k) & (STORE_CARRY_MAX - 1);
    carry_ent *n = &ss->slots[j];
    if (!n->opens)
      return;
    size_t home = carry_home(n->session);
    /* n may move to the hole when the hole lies in [home, j). */
    if (((j - home) & (STORE_CARRY_MAX - 1)) >=
        ((j - hole) & (STORE_CARRY_MAX - 1))) {
      ss->slots[hole] = *n;
      memset(n, 0, sizeof *n);
      hole = j;
      k = 0;
    }
  }
}

/* Pairs the item's unmatched ends with what the session's previous
 * generation left open, and records what stays open for the next one. */
int sum_carry_apply(sum_carry *ss, const uint8_t session[16], uint64_t gen,
                    store_sum_item *it) {
  if (!ss->slots) {
    if (it->sum.nopens == 0)
      return 0; /* nothing carried yet, nothing to carry */
    ss->slots = calloc(STORE_CARRY_MAX, sizeof *ss->slots);
    if (!ss->slots)
      return -ENOMEM;
  }
  carry_ent *e = carry_find(ss, session);
  if (e == NULL && it->sum.nopens == 0)
    return 0; /* the common case: nothing open before or after */
  int linked = e != NULL && e->gen + 1 == gen;
  gtp_sum_open *left = NULL;
  size_t nleft = 0;
  int rc = gtp_summary_carry(&it->sum, linked ? e->opens : NULL,
                             linked ? e->n : 0, &left, &nleft);
  if (rc < 0)
    return rc;
  /* Copy the names: they point into this generation's bytes or e->names. */
  size_t bytes = 1;
  for (size_t i = 0; i < nleft; i++)
    bytes += left[i].name.len;
  char *names = nleft ? malloc(bytes) : NULL;
  if (nleft && !names) {
    free(left);
    return -ENOMEM;
  }
  size_t at = 0;
  for (size_t i = 0; i < nleft; i++) {
    if (left[i].name.len)
      memcpy(names + at, left[i].name.ptr, left[i].name.len);
    left[i].name.ptr = names + at;
    at += left[i].name.len;
  }
  if (e != NULL) {
    /* The spans just carried borrow names from e's block: the item keeps
     * it until it is freed (after the rows are written). */
    free(it->carry_names);
    it->carry_names = e->names;
    e->names = NULL;
    free(e->opens);
    e->opens = NULL;
  }
  if (nleft == 0) {
    free(left);
    if (e != NULL)
      carry_remove(ss, e);
    return 0;
  }
  if (e == NULL)
    e = carry_take(ss, session);
  memcpy(e->session, session, 16);
  e->gen = gen;
  e->opens = left;
  e->n = nleft;
  e->names = names;
  return 0;
}

void sum_carry_free(sum_carry *ss) {
  if (!ss)
    return;
  if (ss->slots) {
    for (size_t i = 0; i < STORE_CARRY_MAX; i++)
      carry_clear(&ss->slots[i]);
    free(ss->slots);
  }
  free(ss);
}
