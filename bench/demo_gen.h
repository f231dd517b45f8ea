/* demo_gen.h: generations shaped like examples/demo.c's trace, for
 * download benchmarks (bench_download demo).
 *
 * The demo service traces each request on a worker thread as nested
 * regions (request > parse, auth, db > db.query x1-3, render), an async
 * task handed to a mailer thread (smtp.send region, task end), an access
 * log line and a latency counter, while an acceptor thread counts the
 * queue depth; an auth error now and then. This generator writes that mix
 * with the demo's durations (spin times of 5-100 us, gaps between
 * requests) on 4 workers, so the stored bytes compress like a real demo
 * window (about 40% with zstd level 1, against 73% for bench_download's
 * default synthetic regions and counters), but at any size and in
 * milliseconds rather than the demo's 150 KB of trace per second.
 * Deterministic: the same gen gives the same bytes.
 */
#ifndef GT_BENCH_DEMO_GEN_H
#define GT_BENCH_DEMO_GEN_H

#include <stdint.h>

#include "format.h"

/* Appends one whole generation (GEN_START, strings, batches of about
 * `bytes` event bytes in all, CLOCK, GEN_END) to b and fills *end.
 * t0_ns: wall time of generation 0; each generation spans one second.
 * 0 or -1. */
int demo_gen_build(gtp_wbuf *b, const uint8_t session[16], uint64_t gen,
                   int64_t t0_ns, size_t bytes, gtp_gen_end *end);

#endif
