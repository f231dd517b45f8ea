/* perfetto.h: streaming writer of Perfetto's protobuf trace format (the
 * `Trace` message: a sequence of `TracePacket`s with TrackDescriptors and
 * TrackEvents), which the Perfetto UI and trace processor open natively.
 * Shared by `gentrace convert --to perfetto` and HTTP `format=perfetto`.
 *
 * Mapping (fields used are listed in docs/HTTP.md "format=perfetto"):
 *   one process track per session (synthetic pid 1, 2, ... in order of
 *   first appearance, name "service (host pid)"); one thread track per agent
 *   thread (tid, name from THREAD_NAME); regions SLICE_BEGIN/SLICE_END (an
 *   END without its BEGIN in the window is skipped); instants and logs
 *   INSTANT (a log is named by its category, with a debug annotation
 *   "message"); counters COUNTER on a counter track per (session, name);
 *   LOST markers and generation ledgers INSTANT "gentrace.lost" with a
 *   "count" annotation; tasks INSTANT "task begin/end: name"; an event's
 *   stack as the debug annotation "stack", an array of frame names
 *   (stackname.h), innermost first. Timestamps are
 *   unix nanoseconds. A Go session's generation (GOTRACE records) is written
 *   in its native form (proto/goconv.h: goroutines as threads). Every packet
 *   is on sequence 1; the first clears incremental state (none is used:
 *   names are inline, never interned).
 *
 * Memory: per session a thread table and a counter-name table, bounded by
 * the threads and counter names seen; each packet is built in a scratch
 * buffer of its own size and sent to the sink at once.
 */
#ifndef GTP_PERFETTO_H
#define GTP_PERFETTO_H

#include <stddef.h>
#include <stdint.h>

#include "chrome.h" /* gtp_sink_fn */
#include "format.h"
#include "stackname.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gtp_perfetto gtp_perfetto; /* opaque */

/* Returns NULL on ENOMEM. */
gtp_perfetto *gtp_perfetto_new(gtp_sink_fn sink, void *ctx);
/* Names stack frames through sym (borrowed) instead of hex pcs. */
void gtp_perfetto_set_symbolizer(gtp_perfetto *p, const gtp_symbolizer *sym);
/* Writes every event of one parsed generation (sessions may interleave). */
int gtp_perfetto_gen(gtp_perfetto *p, const gtp_gen *g);
/* Ends the trace (nothing to close in protobuf; flushes). */
int gtp_perfetto_end(gtp_perfetto *p);
void gtp_perfetto_free(gtp_perfetto *p); /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
