/* store_pin.c: the set of low-water marks that keep retention away from
 * generations a running download still has to read.
 *
 * Owns: a fixed array of STORE_PINS_CAP slots and the mutex guarding it.
 *
 * Invariants:
 *   1. Every slot access MUST happen under p->lock, otherwise retention on the
 *      store thread could read a half-updated minimum while an HTTP thread
 *      moves its pin, and delete a generation that download still needs.
 *   2. A handle MUST stay valid from store_pins_add until store_pins_remove,
 *      and slots are never moved, otherwise a download would move someone
 *      else's pin.
 *   3. The capacity MUST be fixed, otherwise a flood of downloads could grow
 *      memory without bound; past it store_pins_add says GTP_E_LIMIT and the
 *      caller answers 503.
 */
#include "store_pin.h"

#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "gtp_error.h"

/* One pin per running download; web caps its connections far below this. */
#define STORE_PINS_CAP 1024

struct store_pins {
  pthread_mutex_t lock;
  /* Protected by lock: */
  int used[STORE_PINS_CAP];
  int64_t seq[STORE_PINS_CAP];
  int hint; /* a slot likely free, so add is O(1) in the common case */
  int count;
};

/* Lock held. 0, or minus the first invariant broken (3: count is not the
 * number of used slots, or the hint is out of the array). */
static int pins_check_locked(const store_pins *p) {
  int n = 0;
  for (int i = 0; i < STORE_PINS_CAP; i++)
    n += p->used[i] != 0;
  if (n != p->count || p->count > STORE_PINS_CAP || p->hint < 0 ||
      p->hint >= STORE_PINS_CAP)
    return -3;
  return 0;
}

int store_pins_check_invariants(store_pins *p) {
  pthread_mutex_lock(&p->lock);
  int rc = pins_check_locked(p);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

store_pins *store_pins_new(void) {
  store_pins *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    return NULL;
  }
  return p;
}

void store_pins_free(store_pins *p) {
  if (!p)
    return;
  pthread_mutex_destroy(&p->lock);
  free(p);
}

int store_pins_add(store_pins *p, int64_t min_seq) {
  if (!p)
    return GTP_E_BADARG;
  int h = GTP_E_LIMIT;
  pthread_mutex_lock(&p->lock);
  if (p->count < STORE_PINS_CAP) {
    for (int i = 0; i < STORE_PINS_CAP; i++) {
      int slot = (p->hint + i) % STORE_PINS_CAP;
      if (!p->used[slot]) {
        p->used[slot] = 1;
        p->seq[slot] = min_seq;
        p->hint = (slot + 1) % STORE_PINS_CAP;
        p->count++;
        h = slot;
        break;
      }
    }
  }
  GTP_ASSERT(pins_check_locked(p) == 0);
  pthread_mutex_unlock(&p->lock);
  return h;
}

void store_pins_move(store_pins *p, int handle, int64_t min_seq) {
  if (!p || handle < 0 || handle >= STORE_PINS_CAP)
    return;
  pthread_mutex_lock(&p->lock);
  if (p->used[handle])
    p->seq[handle] = min_seq;
  pthread_mutex_unlock(&p->lock);
}

void store_pins_remove(store_pins *p, int handle) {
  if (!p || handle < 0 || handle >= STORE_PINS_CAP)
    return;
  pthread_mutex_lock(&p->lock);
  if (p->used[handle]) {
    p->used[handle] = 0;
    p->count--;
    p->hint = handle;
  }
  GTP_ASSERT(pins_check_locked(p) == 0);
  pthread_mutex_unlock(&p->lock);
}

int64_t store_pins_min(store_pins *p) {
  int64_t min = INT64_MAX;
  if (!p)
    return min;
  pthread_mutex_lock(&p->lock);
  for (int i = 0, seen = 0; i < STORE_PINS_CAP && seen < p->count; i++) {
    if (!p->used[i])
      continue;
    seen++;
    if (p->seq[i] < min)
      min = p->seq[i];
  }
  pthread_mutex_unlock(&p->lock);
  return min;
}
