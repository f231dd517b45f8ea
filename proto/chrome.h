/* chrome.h: streaming writer of Chrome Trace Event JSON (Perfetto loads it).
 * One writer shared by `gentrace convert --to chrome` and the HTTP
 * `format=chrome` export. Mapping (docs/HTTP.md shows it from the outside):
 *
 *   {"traceEvents":[ ... ],"metadata":{"gentrace_start_ns":"…", ...}}
 *   one synthetic pid per session (1, 2, ... in order of first appearance)
 *   with a process_name metadata event "service (host pid)"; tid = agent
 *   thread id with thread_name metadata from THREAD_NAME events; regions B/E
 *   (a region still open at the end is closed at the window end, one ended
 *   in the window but begun before it opens at the window start, both
 *   flagged in args); instants i; counters C with args.value; logs i with
 *   name = category and args.message; tasks b/e with id = task id (cat
 *   "task"), paired by id across threads and generations, open and
 *   pre-window ones closed/opened at the window edges like regions; LOST
 *   markers and
 *   the ledger of each generation as i named gentrace.lost with args.count;
 *   ts in microseconds (fractional, 3 decimals) from the window start.
 *
 * Memory: the writer keeps per (session, thread) open-region depths and the
 * session -> pid map, allocated with malloc and bounded by the number of
 * threads and sessions seen, plus bounded task tables (open tasks, and task
 * ends waiting for a begin later in the same generation); everything else
 * streams straight to the sink.
 */
#ifndef GTP_CHROME_H
#define GTP_CHROME_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "stackname.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gtp_sink_fn (the writer's output) is declared in text.h. */
typedef struct gtp_chrome gtp_chrome; /* opaque */

/* window_start_ns: unix ns that ts 0 stands for; 0 = the start of the first
 * generation written. window_end_ns: where open regions are closed; 0 = the
 * latest event or generation end seen. Returns NULL on ENOMEM. */
gtp_chrome *gtp_chrome_new(gtp_sink_fn sink, void *ctx, int64_t window_start_ns,
                           int64_t window_end_ns);
/* Names stack frames through sym (borrowed; outlives the writer) instead
 * of hex pcs (stackname.h); the metadata then counts how frames were named
 * ("gentrace_frames"). Call before the first generation. */
void gtp_chrome_set_symbolizer(gtp_chrome *c, const gtp_symbolizer *sym);
/* Writes the opening of the document (idempotent; called by the others). */
int gtp_chrome_begin(gtp_chrome *c);
/* Writes every event of one parsed generation. Generations of one session
 * should come in order; sessions may interleave. */
int gtp_chrome_gen(gtp_chrome *c, const gtp_gen *g);
/* Closes open regions, writes metadata and the closing brackets. */
int gtp_chrome_end(gtp_chrome *c);
/* Frees the writer (does not call end). NULL is fine. */
void gtp_chrome_free(gtp_chrome *c);

/* gtp_json_escape, gtp_utf8_seq and gtp_rfc3339, once here, now live in
 * text.h, the project's one text layer. */

#ifdef __cplusplus
}
#endif
#endif
