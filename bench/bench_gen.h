/* bench_gen.h: the store_gen a benchmark hands to store_submit, with the
 * identity and times a daemon would have copied from HELLO and the CLOCK
 * record, so that bench_shared, bench_pgsum, bench_search and
 * bench_download fill them one way. The payload (and its manifest in
 * g->end) stays the caller's to build and attach.
 */
#ifndef GT_BENCH_GEN_H
#define GT_BENCH_GEN_H

#include <stdint.h>

#include "store.h"

/* Who sent a generation. NULL strings take "bench", "h" and "bench"; the
 * tags are always "{}". */
typedef struct bench_gen_id {
  const char *service, *host, *agent_version;
  uint64_t pid, process_start_ns;
} bench_gen_id;

/* A new store_gen (free with store_gen_free) for session, numbered gen,
 * spanning [start_ns, start_ns + period_ns), identity copied from *id;
 * payload NULL, len 0, end zero. Aborts when out of memory: a benchmark
 * has nothing to measure then. */
store_gen *bench_gen_new(const uint8_t session[16], const bench_gen_id *id,
                         uint64_t gen, int64_t start_ns, int64_t period_ns);

#endif
