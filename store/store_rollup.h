/* store_rollup.h: ten-minute rollups of the summaries' per-name rows
 * (sum_names) in the SQLite catalog, so a summary over a day adds up one
 * row per (slot, service, name) instead of one per generation (a slot is
 * ten minutes of start_ns: a day is 144 of them, and the raw rows a query
 * still reads at its two edges are at most ten minutes' worth each).
 *
 * The rollup of slot H is the sum of the sum_names rows of every generation
 * whose start_ns lies in [H * STORE_ROLLUP_NS, (H + 1) * STORE_ROLLUP_NS),
 * grouped by (service, kind, name): gens (rows), count, total, min, max and
 * the merged histogram. store_summary_put adds a generation's rows in the
 * transaction that writes them (counts and buckets add, min and max are
 * kept exactly by min()/max()). A DELETE of a generation cannot undo a max,
 * so a trigger marks its slot dirty instead (sum_slots_dirty), and the
 * maintenance tick rebuilds a dirty slot from its remaining rows once no
 * delete touched it for STORE_ROLLUP_SETTLE ticks (retention eats the oldest
 * slot a chunk at a time: one rebuild when it is done, not one per chunk).
 * Readers (store_search.c) use the rollup of a slot only when the whole
 * slot is inside the query and the slot is not dirty; the rest comes from
 * the raw rows, so the answer is exactly the raw one at every moment.
 *
 * A database from before schema 6 gets every slot that holds a generation
 * marked dirty (and settled) by the migration: the rollups are then built
 * by the same rebuild, a few slots per tick, while queries read raw rows.
 *
 * Thread: the store thread (the write connection), except
 * store_rollup_register and store_rollup_check_invariants, which take any
 * connection.
 */
#ifndef STORE_ROLLUP_H
#define STORE_ROLLUP_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "summary.h"

/* Ten minutes, in ns: the rollup grain. */
#define STORE_ROLLUP_NS INT64_C(600000000000)
/* Rollups hold generations starting in [0, STORE_ROLLUP_END): the whole
 * slots of int64 ns, so every slot's end fits (the SQL in store_schema.h
 * and store_rollup.c writes it as 9223371600000000000). */
#define STORE_ROLLUP_END (INT64_MAX / STORE_ROLLUP_NS * STORE_ROLLUP_NS)
/* Ticks without a delete before a dirty slot is rebuilt. */
#define STORE_ROLLUP_SETTLE 3

typedef struct store_rollup store_rollup;

/* Registers gt_hist_add(a, b) (a scalar: the merged histogram of two
 * encoded ones) and gt_hist_merge (store_search.c's aggregate) on db. */
int store_rollup_register(sqlite3 *db);

/* Prepares the statements on the write connection (registering the
 * functions first). Returns 0 or a negative code. */
int store_rollup_open(sqlite3 *db, store_rollup **out);
void store_rollup_close(store_rollup *ru);

/* Adds generation seq's sum_names rows (just written) into the sums of the
 * open transaction. Returns an SQLite code. */
int store_rollup_add(store_rollup *ru, int64_t seq);

/* Where a generation's rows go: its start and end (ns) and its session
 * row's service (service_len bytes). */
typedef struct store_rollup_gen {
  int64_t start_ns, end_ns;
  const char *service;
  size_t service_len;
} store_rollup_gen;

/* store_rollup_add for a generation whose sum_names rows were just written
 * from s (store_summary_put) and whose session row's service is known:
 * the same sums, from memory instead of a SELECT. Returns an SQLite code. */
int store_rollup_add_summary(store_rollup *ru, const store_rollup_gen *g,
                             const gtp_summary *s);
/* Writes the sums into sum_slots inside the open transaction and empties
 * them: the writer calls it just before COMMIT. Returns an SQLite code. */
int store_rollup_flush(store_rollup *ru);
/* Drops the sums: the writer calls it when a transaction begins, so a
 * rolled-back one leaves nothing behind. NULL is a no-op. */
void store_rollup_reset(store_rollup *ru);

/* store_rollup_flush for the commit of a batch, with held slots
 * (store_rollup.c invariant 5): the sums of a slot the batch adds to are
 * kept in memory across transactions, the slot marked in sum_slots_dirty
 * (age < 0) so readers take its raw rows meanwhile, and written out (one
 * upsert per key) once no batch added to it for hold_ns, or when too many
 * keys are held. A fleet's transactions all add to the current slot: its
 * keys are written once per slot instead of once per transaction. hold_ns
 * 0: no slot is held (and held ones are written out). The writer calls it
 * before COMMIT, then store_rollup_committed once COMMIT returned (a
 * transaction that does not commit is undone by the next
 * store_rollup_reset). Returns an SQLite code. */
int store_rollup_flush_hold(store_rollup *ru, int64_t hold_ns);
void store_rollup_committed(store_rollup *ru);

/* Writes out the held slots no batch added to for hold_ns (all: every held
 * slot) in a transaction of its own: the maintenance tick, and
 * store_rollup_close. Returns 0 or a negative code (the slots stay held,
 * or, at close, are rebuilt after the next open). */
int store_rollup_release(store_rollup *ru, int all);

/* One maintenance tick: ages the dirty slots and rebuilds up to max_slots
 * settled ones, newest first, each in its own transaction, stopping once
 * budget_ns (monotonic) have passed. *pending = dirty slots left. Returns
 * the number of slots rebuilt, or a negative code. */
int store_rollup_rebuild(store_rollup *ru, int max_slots, int64_t budget_ns,
                         uint64_t *pending);

/* Dirty slots now (for the stats at open). */
int store_rollup_pending(store_rollup *ru, uint64_t *pending);

/* Invariant 1 (store_rollup.c) for one slot (slot >= 0) or every clean slot
 * (slot < 0): the rollup rows equal the aggregate of the slot's raw rows.
 * Returns 0 if they do, 1 if not, or a negative code. Costs a full
 * aggregate: debug builds and tests only. */
int store_rollup_check_invariants(sqlite3 *db, int64_t slot);

#endif
