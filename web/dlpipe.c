/* dlpipe.c: the bounded pipe of dlpipe.h: a ring buffer, a mutex and one
 * condition variable both sides wait on (one waiter each at most).
 *
 * Invariants:
 *  1. len <= cap at all times: the producer waits for room instead of
 *     growing the buffer, otherwise memory would follow the output size.
 *  2. Every change of len, wclosed or rclosed MUST broadcast under the
 *     lock, otherwise the other side could sleep through it forever.
 *  3. After rclosed, writes MUST fail at once (never wait), otherwise a
 *     producer would hang on a consumer that went away.
 */
#include "config.h"

#include "dlpipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"

struct dlpipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Protected by mu. */
  unsigned char *buf;
  size_t cap, head, len; /* bytes at buf[head..head+len) modulo cap */
  int wclosed, rclosed, status;
};

int dlpipe_new(size_t cap, dlpipe **out) {
  dlpipe *p = calloc(1, sizeof *p);
  if (!p || !cap || !(p->buf = malloc(cap))) {
    free(p);
    return -ENOMEM;
  }
  p->cap = cap;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  *out = p;
  return 0;
}

void dlpipe_free(dlpipe *p) {
  if (!p)
    return;
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p->buf);
  free(p);
}

int dlpipe_write(dlpipe *p, const void *data, size_t n) {
  const unsigned char *src = data;
  pthread_mutex_lock(&p->mu);
  while (n > 0) {
    while (!p->rclosed && p->len == p->cap)
      pthread_cond_wait(&p->cv, &p->mu); /* invariant 1 */
    if (p->rclosed) {                   /* invariant 3 */
      pthread_mutex_unlock(&p->mu);
      return GTP_E_SHUTDOWN;
    }
    size_t tail = (p->head + p->len) % p->cap;
    size_t room = p->cap - p->len;
    size_t k = p->cap - tail < room ? p->cap - tail : room;
    if (k > n)
      k = n;
    memcpy(p->buf + tail, src, k);
    p->len += k;
    src += k;
    n -= k;
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
  return 0;
}

void dlpipe_close_write(dlpipe *p, int status) {
  pthread_mutex_lock(&p->mu);
  p->wclosed = 1;
  p->status = status;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

size_t dlpipe_read(dlpipe *p, void *buf, size_t max, int *status) {
  unsigned char *dst = buf;
  size_t got = 0;
  pthread_mutex_lock(&p->mu);
  while (p->len == 0 && !p->wclosed)
    pthread_cond_wait(&p->cv, &p->mu);
  while (got < max && p->len > 0) {
    size_t k = p->cap - p->head < p->len ? p->cap - p->head : p->len;
    if (k > max - got)
      k = max - got;
    memcpy(dst + got, p->buf + p->head, k);
    p->head = (p->head + k) % p->cap;
    p->len -= k;
    got += k;
  }
  if (got)
    pthread_cond_broadcast(&p->cv);
  else
    *status = p->status;
  pthread_mutex_unlock(&p->mu);
  return got;
}

void dlpipe_close_read(dlpipe *p) {
  pthread_mutex_lock(&p->mu);
  p->rclosed = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}
