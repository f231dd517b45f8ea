/* fleet_gen.h: the body of bench_fleet's small generation (an EVENTS record
 * of instants and "request" region pairs, a STRINGS record and a CLOCK
 * record), shared by the agents of bench/fleet_client.c and by
 * bench/bench_commit.c --fleet-events, so the store's cost is counted on the
 * same generation the fleet sends. */
#ifndef BENCH_FLEET_GEN_H
#define BENCH_FLEET_GEN_H

#include <stdint.h>

#include "format.h"

/* Appends generation gen's body records (nevents events) to body and fills
 * e (gen and manifest). Returns 0 or a negative code. */
int fleet_gen_body(gtp_wbuf *body, uint64_t gen, unsigned nevents,
                   gtp_gen_end *e);

#endif
