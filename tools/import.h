/* import.h: `gentrace import`: a Go trace file as gentrace generations.
 *
 * import_build turns a whole Go trace file into the body records and
 * manifests of gentrace generations, all in memory and all validated before
 * anything leaves the process (so an import stores everything or nothing of
 * a bad file):
 *
 *   Go 1.22-1.26   one generation per Go generation: its bytes unchanged in
 *                  GOTRACE records, and a CLOCK record (ticks = the Go
 *                  timestamps in ns; wall clock from the trace's clock
 *                  snapshot, 1.25+, else the file's modification time taken
 *                  as the end of the trace). Tags format=go, go_version.
 *   Go 1.11-1.21   decoded by proto/goold.c and written as native
 *                  generations, one per second of trace time: user regions,
 *                  tasks and logs on their goroutines (threads "G<id>"), GC
 *                  and stop-the-world as regions on threads "GC" and "STW".
 *                  Tag go_version. Wall clock: the file's modification time
 *                  is the end of the trace.
 *
 * import_send streams them to gentraced over the agent protocol, one
 * generation at a time, waiting for each ACK.
 */
#ifndef GT_TOOLS_IMPORT_H
#define GT_TOOLS_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct import_gen {
  uint64_t gen;
  uint8_t *body; /* body records; owned */
  size_t body_len;
  gtp_gen_end end; /* manifest (gen, records, batches, bytes, crc, events) */
} import_gen;

typedef struct import_set {
  unsigned version; /* NN of go 1.NN */
  int go_format;    /* 1: GOTRACE generations (1.22+), 0: native */
  import_gen *gens;
  size_t ngens;
  int64_t start_ns, end_ns;      /* wall clock of the whole trace */
  uint64_t regions, tasks, logs; /* begins, as decoded */
} import_set;

/* Builds every generation of the Go trace file data[0..len). mtime_ns is
 * the file's modification time. On error returns a negative code with
 * *err_off the offset in the file; *version is set as soon as the header
 * was read (0 before). */
int import_build(const uint8_t *data, size_t len, int64_t mtime_ns,
                 import_set *s, size_t *err_off);
void import_free(import_set *s);

/* Sends s as a new session to addr ("host:port"). identity: service, host
 * and tags already filled by the caller (session id too). Returns 0 when
 * every generation was ACKed; else a negative code, with *acked the number
 * stored and msg (if the daemon said why) filled. */
int import_send(const char *addr, const gtp_gen_start *id, const char *token,
                const import_set *s, size_t *acked, char *msg, size_t msglen);

#endif
