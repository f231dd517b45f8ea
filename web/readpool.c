/* readpool.c: bounded pool of read-only store connections.
 *
 * Owns: every storage_reader it opened (idle ones in `idle`, lent ones
 * counted in `open - nidle`).
 * Invariants:
 *  1. open MUST NOT exceed size, otherwise a burst of requests would open
 *     unbounded SQLite connections (file descriptors, page caches).
 *  2. A borrowed reader MUST come back through readpool_put before
 *     readpool_free, otherwise it leaks with its connection.
 *  3. Waiters wait on `cond` with a deadline, never forever, so a stuck
 *     reader turns into 503s instead of a hung server.
 */
#include "config.h"

#include "readpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gtp_error.h"
#include "text.h"

struct readpool {
  storage *st; /* borrowed; written once before use */
  unsigned size;
  /* Protected by lock. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  storage_reader **idle;
  unsigned nidle;
  unsigned open;
};

/* Lock held. 0, or minus the first invariant broken (1: more open than
 * size, or more idle than open; 2: an idle slot without its reader). */
static int pool_check_locked(const readpool *p) {
  if (p->open > p->size || p->nidle > p->open)
    return -1;
  for (unsigned i = 0; i < p->nidle; i++)
    if (p->idle[i] == NULL)
      return -2;
  return 0;
}

int readpool_check_invariants(readpool *p) {
  pthread_mutex_lock(&p->lock);
  int rc = pool_check_locked(p);
  pthread_mutex_unlock(&p->lock);
  return rc;
}

int readpool_new(storage *st, unsigned size, readpool **out, char **cause) {
  int rc = -ENOMEM;
  if (size == 0)
    size = 1;
  readpool *p = calloc(1, sizeof *p);
  if (!p)
    goto fail_alloc;
  p->size = size;
  p->st = st;
  p->idle = calloc(size, sizeof *p->idle);
  if (!p->idle)
    goto fail_fields;
  storage_reader *r;
  rc = storage_reader_open(st, &r, cause);
  if (rc < 0)
    goto fail_fields;
  p->idle[p->nidle++] = r;
  p->open = 1;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&p->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&p->lock, NULL);
  *out = p;
  return 0;

fail_fields:
  free(p->idle);
  free(p);
fail_alloc:
  if (rc == -ENOMEM && cause && !*cause)
    gtp_causef(cause, rc, "readpool: out of memory");
  return rc;
}

void readpool_free(readpool *p) {
  if (!p)
    return;
  for (unsigned i = 0; i < p->nidle; i++)
    storage_reader_close(p->idle[i]);
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->lock);
  free(p->idle);
  free(p);
}

int readpool_get(readpool *p, unsigned wait_ms, storage_reader **out) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += wait_ms / 1000;
  deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (p->nidle > 0) {
      *out = p->idle[--p->nidle];
      GTP_ASSERT(pool_check_locked(p) == 0);
      pthread_mutex_unlock(&p->lock);
      return 0;
    }
    if (p->open < p->size) {
      /* Reserve the slot before dropping the lock (invariant 1), open
       * outside it: opening touches the disk. */
      p->open++;
      pthread_mutex_unlock(&p->lock);
      char *cause = NULL;
      int rc = storage_reader_open(p->st, out, &cause);
      free(cause);
      if (rc < 0) {
        pthread_mutex_lock(&p->lock);
        p->open--;
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
      }
      return rc;
    }
    if (pthread_cond_timedwait(&p->cond, &p->lock, &deadline) == ETIMEDOUT &&
        p->nidle == 0) {
      pthread_mutex_unlock(&p->lock);
      return GTP_E_LIMIT;
    }
  }
}

void readpool_put(readpool *p, storage_reader *r) {
  pthread_mutex_lock(&p->lock);
  GTP_ASSERT(p->nidle < p->open); /* a reader this pool lent (invariant 2) */
  p->idle[p->nidle++] = r;
  GTP_ASSERT(pool_check_locked(p) == 0);
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}
