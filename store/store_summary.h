/* store_summary.h: writing generation summaries (proto/summary.h) into the
 * SQLite catalog beside the generation, and summarizing old generations in
 * the background (backfill).
 *
 * Split in two so the costly part runs off the store thread: store_sum_build
 * is pure (the bytes in, a summary out) and runs on a compressor thread;
 * store_summary_put only inserts rows, inside the transaction that commits
 * the generation. A shared backend computes the same summary with
 * store_sum_build (or gtp_summary_compute) and writes it its own way.
 *
 * Thread: store_sum_build/free on any thread; the rest on the store thread
 * (the write connection's, store.c invariant 1).
 */
#ifndef STORE_SUMMARY_H
#define STORE_SUMMARY_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store_rollup.h"
#include "summary.h"

/* A generation's summary, with the parsed generation its names borrow from
 * (which borrows the payload bytes: they must outlive the item). status is 0,
 * or the code that kept the generation from being summarized (it is then
 * recorded as such, with no rows). */
typedef struct store_sum_item {
  gtp_gen g;
  gtp_summary sum;
  int status;
  int bad;           /* store_sum_build_checked: 0, or the error that makes the
                        generation invalid (it must not be stored) */
  char *carry_names; /* names of spans carried in (owned) */
} store_sum_item;

/* NULL only when out of memory (the generation is then left for backfill). */
store_sum_item *store_sum_build(const uint8_t *payload, size_t len);
/* For a generation its submitter parsed only lazily (store_gen's
 * check_events): store_sum_build, and in the same walk over the events the
 * check gtp_gen_parse makes (gtp_summary_compute_check), into it->bad.
 * summarize 0 (summaries off): the check alone, no summary (status
 * -ENOMEM: no rows). A summary that ran out of memory has status -ENOMEM
 * and still its verdict. NULL when out of memory before any verdict. */
store_sum_item *store_sum_build_checked(const uint8_t *payload, size_t len,
                                        int summarize);
void store_sum_free(store_sum_item *it);
/* Heap bytes an item holds (for the memory budget). */
uint64_t store_sum_bytes(const store_sum_item *it);

typedef struct store_summary store_summary;

int store_summary_open(sqlite3 *db, store_summary **out);
void store_summary_close(store_summary *ss);

/* Adds the rows of generation seq to the caller's transaction.
 * With a session (not NULL), first pairs the generation's unmatched ends
 * with what the session's previous generation (gen - 1) left open
 * (gtp_summary_carry; the open list lives in memory, so a restart or a
 * generation arriving out of order loses that pairing). where (not NULL):
 * the generation's times and its session row's service, so the rollup
 * takes the rows from memory (store_rollup_add_summary) instead of reading
 * them back. Returns an SQLite result code. */
int store_summary_put(store_summary *ss, int64_t seq, const uint8_t session[16],
                      uint64_t gen, store_sum_item *it,
                      const store_rollup_gen *where);

/* store_summary_put keeps the rows of a transaction in memory (sum_rows.h):
 * its owner calls store_summary_reset after BEGIN and store_summary_flush
 * before COMMIT (an SQLite result code), which writes them with a few
 * multi-row INSERTs. The summaries put must outlive the flush (the rows
 * borrow their names). A put without where flushes at once. */
int store_summary_flush(store_summary *ss);
void store_summary_reset(store_summary *ss);

/* Backfill: summarizes up to max_gens generations that have none, newest
 * first, in one transaction of its own. Returns how many it summarized
 * (>= 0) or a negative SQLite-mapped code; *pending = generations still
 * without a summary afterwards. */
int store_summary_backfill(store_summary *ss, int max_gens, uint64_t *pending);

/* The ten-minute rollups store_summary_put adds to (store_rollup.h), for the
 * maintenance tick's rebuild; NULL for NULL. */
store_rollup *store_summary_rollup(store_summary *ss);

#endif
