/* hello_lookup.c: a HELLO's store lookups on libuv's thread pool (see
 * hello_lookup.h).
 *
 * Owns: one request per lookup, from hello_lookup_start until its cb
 * returned.
 *
 * Invariants:
 *   1. The pool thread MUST touch only the request (session copy, answer)
 *      and the storage, never the connection, otherwise it would race the
 *      loop, which may close and free the connection meanwhile (the
 *      caller keeps its own reference until cb).
 *   2. cb MUST run exactly once per queued lookup, also when the loop
 *      cancels it, otherwise the caller's reference and its count of
 *      lookups in flight would leak and shutdown would wait forever.
 */
#include "config.h"

#include "hello_lookup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"

typedef struct lookup {
  uv_work_t work;
  storage *st;
  uint8_t session[16];
  storage_hello_answer answer;
  hello_lookup_cb cb;
  void *arg;
} lookup;

static void lookup_work(uv_work_t *w) {
  lookup *l = w->data;
  storage_hello(l->st, l->session, &l->answer); /* invariant 1 */
}

static void lookup_done(uv_work_t *w, int status) {
  lookup *l = w->data;
  if (status == UV_ECANCELED) {
    memset(&l->answer, 0, sizeof l->answer);
    l->answer.key_rc = GTP_E_SHUTDOWN;
  }
  l->cb(l->arg, &l->answer); /* invariant 2 */
  free(l);
}

int hello_lookup_start(uv_loop_t *loop, storage *st, const uint8_t session[16],
                       hello_lookup_cb cb, void *arg) {
  lookup *l = calloc(1, sizeof *l);
  if (l == NULL)
    return -ENOMEM;
  l->work.data = l;
  l->st = st;
  memcpy(l->session, session, sizeof l->session);
  l->cb = cb;
  l->arg = arg;
  int rc = uv_queue_work(loop, &l->work, lookup_work, lookup_done);
  if (rc < 0) {
    free(l);
    return rc;
  }
  return 0;
}
