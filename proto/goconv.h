/* goconv.h: a Go generation as a native one.
 *
 * A gentrace generation of a Go session carries the runtime's own trace
 * bytes (GOTRACE records). Viewers and tools that speak the native event
 * model (the Chrome writer, `gentrace stat`, `dump`, `convert`) read it
 * through this converter: it decodes the Go bytes with proto/gotrace.c and
 * writes a native generation with the same identity and loss ledger, where
 *
 *   goroutine G          -> thread tid = G, thread_name "G<id>"
 *   user region          -> region_begin / region_end on its goroutine
 *   user task            -> task_begin (id, parent, name) / task_end, on
 *                           whatever goroutine began or ended it
 *   user log             -> log, category = key, message = value
 *   GC cycle             -> region "GC" on thread GTP_GOCONV_TID_GC
 *   stop-the-world       -> region named by its kind on GTP_GOCONV_TID_STW
 *   event on no known G  -> thread GTP_GOCONV_TID_M | M id, "M<id>"
 *
 * Times are the Go timestamps mapped to wall clock (gtp_go_wall_ns: the
 * generation's clock snapshot, or its CLOCK record); the native CLOCK is
 * 1 tick = 1 ns from the earlier of the CLOCK start and the first event.
 * Go bytes this reader refuses do not fail the conversion: the native
 * generation then holds one log event, category "gentrace.go_undecodable",
 * whose message names the Go version, the error and its offset, so a
 * window with one bad generation still converts and says where.
 */
#ifndef GTP_GOCONV_H
#define GTP_GOCONV_H

#include <stdint.h>

#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_GOCONV_TID_GC ((1ull << 48) + 1)
#define GTP_GOCONV_TID_STW ((1ull << 48) + 2)
#define GTP_GOCONV_TID_M (1ull << 49)

/* Appends the native generation for g (which gtp_gen_is_go) to out.
 * Returns 0, -ENOMEM, or GTP_E_TOOBIG (the native form would pass
 * GTP_GEN_MAX_BYTES / out's limit). *go_rc (if not NULL) gets the Go
 * reader's verdict: 0, or the code written into the undecodable log. */
int gtp_goconv_gen(const gtp_gen *g, gtp_wbuf *out, int *go_rc);

#ifdef __cplusplus
}
#endif
#endif /* GTP_GOCONV_H */
