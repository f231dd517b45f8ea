/* acklat.h: the daemon's own ACK latency, as Prometheus histograms
 * (gentrace_ack_seconds, gentrace_ack_commit_seconds in /metrics).
 *
 * A fleet benchmark's client measures GEN_END written -> ACK read, which
 * on a loaded machine includes the client's own wait for a CPU. These two
 * tell the daemon's share apart: GEN_END read (validated, handed to the
 * store) -> the store's COMMIT returned, and -> the ACK written to the
 * socket; the difference of the two is the loop's wake-up and queueing.
 *
 * Invariants:
 *   1. Only the loop thread adds (acklat_add); HTTP threads read with
 *      relaxed atomic loads. A scrape may see a count one observation
 *      ahead of its bucket, never a torn value.
 *   2. Buckets are cumulative only when printed; stored per bucket, so one
 *      observation costs one increment, a short search and the sum.
 */
#ifndef ACKLAT_H
#define ACKLAT_H

#include <stdint.h>

#include "text.h"

#define ACKLAT_BUCKETS 20 /* the last is +Inf */

typedef struct acklat {
  uint64_t b[ACKLAT_BUCKETS];
  uint64_t sum_ns;
} acklat;

/* Adds one observation of ns nanoseconds. Thread: loop only. */
void acklat_add(acklat *h, uint64_t ns);

/* Appends h as a Prometheus histogram named name (seconds). */
void acklat_metrics(const acklat *h, gtp_wbuf *b, const char *name,
                    const char *help);

#endif /* ACKLAT_H */
