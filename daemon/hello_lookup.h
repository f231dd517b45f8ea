/* hello_lookup.h: a HELLO's store lookups (the session's bound key hash
 * and its last committed generation) off the event loop.
 *
 * On the shared backend each lookup is a catalog round trip: about a
 * millisecond when PostgreSQL is well, seconds when it is slow. Run on the
 * loop, one slow lookup would stall every agent connection of the daemon;
 * here it runs on libuv's thread pool and the loop gets the answer back
 * through the pool's completion (uv_queue_work), meanwhile serving the
 * other connections.
 *
 * Thread: hello_lookup_start on the loop thread; cb runs on it too.
 */
#ifndef HELLO_LOOKUP_H
#define HELLO_LOOKUP_H

#include <stdint.h>
#include <uv.h>

#include "storage.h"

/* Called exactly once on the loop thread with the answer (key_rc
 * GTP_E_SHUTDOWN when the loop cancelled the lookup before it ran). */
typedef void (*hello_lookup_cb)(void *arg, const storage_hello_answer *a);

/* Queues storage_hello(st, session) on the thread pool. 0, or a negative
 * code when nothing was queued (cb will not run). */
int hello_lookup_start(uv_loop_t *loop, storage *st, const uint8_t session[16],
                       hello_lookup_cb cb, void *arg);

#endif /* HELLO_LOOKUP_H */
