/* goold.h: reader of the old Go execution-trace format (Go 1.11-1.21, no
 * generations), for `gentrace import`.
 *
 * The old format is one stream of per-P batches (EvBatch), with a string
 * dictionary, stacks and the tick frequency mixed in. Like Go's own parser
 * of it, the reader keeps, per P, the goroutine running there (EvGoStart*
 * sets it, the events that stop a goroutine clear it), so each user event
 * is attributed to its goroutine. It keeps only what gentrace shows (user
 * tasks, regions and logs, GC cycles and stop-the-world pauses), ordered by
 * time (stable: file order breaks ties), with timestamps in nanoseconds
 * since the trace's first event.
 *
 * Bounded and hostile-input safe: every length is checked against the bytes
 * left and Go's own limits (length-prefixed arguments <= 2048 bytes,
 * strings <= 1e6 bytes); tables grow with the input, at most one entry per
 * 2 input bytes.
 */
#ifndef GTP_GOOLD_H
#define GTP_GOOLD_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "gotrace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_GOOLD_MIN_VERSION 11
#define GTP_GOOLD_MAX_VERSION 21

typedef struct gtp_goold_event {
  uint8_t kind; /* enum gtp_go_kind: regions, tasks, logs, GC, STW */
  int64_t ns;   /* since the first event of the trace */
  uint64_t g;   /* goroutine, 0 = none known */
  uint64_t p;   /* P of the batch (UINT64_MAX for none) */
  uint64_t task, parent;
  uint64_t name_id; /* string id: region/task name, log key */
  gtp_str name;     /* resolved name_id, or the STW kind */
  gtp_str value;    /* log message (inline in the trace) */
} gtp_goold_event;

typedef struct gtp_goold {
  unsigned version;        /* 11..21 */
  uint64_t freq;           /* ticks per second */
  int64_t span_ns;         /* first to last event of any kind */
  gtp_goold_event *events; /* sorted by ns; owned */
  size_t nevents;
  gtp_string_ent *strings; /* sorted by id; owned array, borrowed bytes */
  size_t nstrings;
  uint64_t kinds[GTP_GO_KIND_COUNT_];
} gtp_goold;

/* Parses a whole old-format file (with its 16-byte header). Returns 0, or
 * GTP_E_VERSION (not 1.11-1.21), GTP_E_MAGIC, GTP_E_TRUNC, GTP_E_VARINT,
 * GTP_E_TOOBIG, GTP_E_UNKNOWN (an event type the version does not have),
 * GTP_E_CORRUPT, -ENOMEM, with *err_off the offset of the event that
 * failed. Borrows p (strings), which must outlive t. */
int gtp_goold_parse(const uint8_t *p, size_t len, gtp_goold *t,
                    size_t *err_off);
void gtp_goold_fini(gtp_goold *t);

#ifdef __cplusplus
}
#endif
#endif /* GTP_GOOLD_H */
