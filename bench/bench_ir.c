/* bench_ir: a fixed ingest workload for instruction counts (callgrind).
 *
 *   bench_ir GENS [small|large]
 *
 * Starts gentraced ($GENTRACED, e.g. a script that runs it under
 * `valgrind --tool=callgrind`; else $top_builddir/daemon/gentraced) on
 * 127.0.0.1 port 0, connects one agent session and sends GENS generations
 * one at a time, each in one write after the ACK of the one before (so
 * every commit is a transaction of one generation and neither the store's
 * work nor the loop's wake-ups depend on timing), then stops gentraced with
 * SIGTERM (a profiler wrapper writes its output on that exit) and removes its
 * files. `small`: the fixture generation of tests/proto/gen_fixture.h (about 1
 * KB, the per-generation cost); `large`: one incompressible 64 KiB EVENTS
 * record each (the per-byte cost, read in place).
 *
 * Two runs with different GENS, differenced, give instructions per
 * generation with start-up and shutdown cancelled out: bench/ir.sh does
 * that, and bench/RESULTS.md has the figures. Uses only calls that
 * tests/daemon/client.c has had since wave 1, so the same file builds
 * against older trees for a before/after comparison.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

int main(int argc, char **argv) {
  long gens = argc >= 2 ? atol(argv[1]) : 0;
  int large = argc >= 3 && strcmp(argv[2], "large") == 0;
  if (gens < 1 || (argc >= 3 && !large && strcmp(argv[2], "small") != 0)) {
    fprintf(stderr, "usage: bench_ir GENS [small|large]\n");
    return 2;
  }
  gtd d;
  if (gtd_init(&d) < 0 || gtd_start(&d, NULL, NULL) < 0) {
    fprintf(stderr, "bench_ir: gentraced did not start\n");
    return 1;
  }
  gtc c;
  gtf_spec s;
  gtf_spec_init(&s, 5, 1);
  gtp_welcome w;
  int rc = gtc_connect(&c, d.agent_port);
  if (rc == 0)
    rc = gtc_hello(&c, &s, NULL, &w);
  for (long i = 1; rc == 0 && i <= gens; i++) {
    gtf_spec si = s;
    si.gen = (uint64_t)i;
    gtc_gen g;
    rc = large ? gtc_gen_build_random(&g, &si, 1, (unsigned)i)
               : gtc_gen_build(&g, &si);
    /* The whole generation in one write, so the daemon reads it in one
     * or two reads however the machine is loaded: the loop's count of
     * wake-ups per generation (and its instructions) stays put. */
    gtp_wbuf f;
    gtp_wbuf_init(&f, 0);
    for (size_t r = 0; rc == 0 && r < g.nrec; r++)
      rc = gtp_frame_batch_encode(&f, si.gen, g.body.data + g.off[r],
                                  g.off[r + 1] - g.off[r]);
    if (rc == 0)
      rc = gtp_frame_gen_end_encode(&f, &g.end);
    if (rc == 0)
      rc = gtc_send_raw(&c, f.data, f.len);
    gtp_wbuf_fini(&f);
    uint64_t acked = 0;
    int code = 0;
    if (rc == 0)
      rc = gtc_read_reply(&c, &acked, &code, GTC_TIMEOUT_MS) == 1 &&
                   acked == (uint64_t)i
               ? 0
               : -1;
    gtc_gen_fini(&g);
  }
  gtc_close(&c);
  int st = gtd_stop(&d);
  gtd_cleanup(&d);
  if (rc != 0 || st != 0) {
    fprintf(stderr, "bench_ir: failed (send %d, gentraced exit %d)\n", rc, st);
    return 1;
  }
  printf("bench_ir: %ld %s generations stored\n", gens,
         large ? "large" : "small");
  return 0;
}
