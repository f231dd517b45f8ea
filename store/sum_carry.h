/* sum_carry.h: spans across generation edges. Per session, the regions and
 * tasks its last committed generation left open, so that the next
 * generation's unmatched ENDs are paired with them (gtp_summary_carry) and
 * the span counted where it ends. Both writers keep one: the SQLite store
 * thread (store_summary.c) and the shared store's packer (segment.c), each
 * in the order it commits a session's generations.
 *
 * The table is in memory: a restart, or a session's generation arriving out
 * of order or at another daemon, loses the pairing across that one edge
 * (those ENDs stay unmatched), never a generation.
 *
 * Thread: one owner thread per table.
 */
#ifndef SUM_CARRY_H
#define SUM_CARRY_H

#include <stdint.h>

#include "store_summary.h"

typedef struct sum_carry sum_carry;

/* NULL when out of memory (the slots are allocated on first use). */
sum_carry *sum_carry_new(void);
void sum_carry_free(sum_carry *c);

/* Pairs it's unmatched ends with what gen - 1 of the session left open and
 * records what stays open after it. The spans carried in borrow names that
 * it->carry_names then owns. 0 or -ENOMEM (only this edge's pairing lost). */
int sum_carry_apply(sum_carry *c, const uint8_t session[16], uint64_t gen,
                    store_sum_item *it);

#endif /* SUM_CARRY_H */
