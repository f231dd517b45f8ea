/* store_genrows.h: the generation and payload rows of a transaction's small
 * generations, written with a few multi-row INSERTs instead of two
 * statements per generation (store_commit.c gathers them).
 *
 * Why: a fleet's 10-event generation cost the store thread about 45,000
 * instructions in its two INSERTs (bench_commit, callgrind), part of it
 * per statement rather than per row: opening and closing the cursors of
 * the table and its four indexes, halting and resetting, and the
 * AUTOINCREMENT bookkeeping, which SQLite writes to sqlite_sequence once
 * per statement. A multi-row INSERT into a table with a row trigger
 * first copies its VALUES into a temporary table, which cost more than
 * it saved: generations has no insert trigger since schema 8 (the commit
 * moves the session row itself, store_commit.c), and there is no
 * RETURNING either (its rows also go through a temporary table).
 *
 * Schema 10: seq is bound, not left to SQLite: no AUTOINCREMENT (whose
 * sqlite_sequence page every transaction rewrote), and each statement of
 * rows also raises the span bound of the buckets its rows start in
 * (gen_spans, store_schema.h), one upsert per bucket that writes nothing
 * unless a span is longer than the bound kept.
 *
 * Invariants:
 *   1. Rows are written in the order given, each with seq = the module's
 *      next seq, which then moves on by one, so seq follows that order
 *      (store.c invariant 8). Every seq issued is at most meta.seq_reserved
 *      (raised, STORE_GENROWS_LEASE ahead, in the transaction of the rows
 *      that would pass it); the next seq starts above it at open
 *      (store_setup.c) and never goes back, also when the transaction
 *      rolls back (its seqs are skipped), so no seq is issued twice,
 *      whatever deleted the newest rows. GT_DEBUG builds check each row's
 *      seq.
 *   2. The caller passes only generations not stored yet, of distinct
 *      sessions (store_commit.c checks before): the INSERT is still OR
 *      IGNORE, which cannot abort a multi-row statement halfway (no
 *      statement journal, sum_rows.h invariant 1), and a row that did not
 *      go in (changes < rows) fails the transaction rather than leave the
 *      seqs of invariant 1 unsure.
 *   3. Every payload row is inserted, or the call fails: a payload row
 *      that did not go in fails the transaction instead of leaving a
 *      generation without its bytes.
 *   4. Every row written has its span bucket's gen_spans row with
 *      max_span >= max(end_ns - start_ns, 0), written in the same
 *      transaction, before the call returns.
 *
 * Thread: the store thread (the write connection's).
 */
#ifndef STORE_GENROWS_H
#define STORE_GENROWS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* Rows per call, at most. */
#define STORE_GENROWS_MAX 32
/* Seqs reserved at a time (invariant 1): one meta write per million
 * generations; a restart skips what was left of the last reservation. */
#define STORE_GENROWS_LEASE ((int64_t)1 << 20)

typedef struct store_genrows store_genrows;

/* One generation row. The pointers are borrowed for the call. */
typedef struct store_genrow {
  int64_t sid, gen, start_ns, end_ns, events, bytes, stored_bytes;
  int64_t dropped, evicted, rejected, committed_ns, crc;
  const char *codec;
  const void *data; /* the stored bytes (payloads.data), len > 0 */
  size_t len;
  int64_t seq; /* out: the new row's seq (invariant 1) */
} store_genrow;

/* NULL when out of memory. Statements are prepared on first use. */
store_genrows *store_genrows_new(sqlite3 *db);
void store_genrows_free(store_genrows *r);

/* The seq the next row gets (invariant 1): set once at open, above
 * meta.seq_reserved. */
void store_genrows_set_next(store_genrows *r, int64_t next_seq);

/* Inserts rows[0..n) (n <= STORE_GENROWS_MAX; invariant 2) into
 * generations and their payloads, inside the caller's transaction; sets
 * every rows[i].seq. Returns an SQLite result code. */
int store_genrows_write(store_genrows *r, store_genrow *rows, size_t n);

#endif /* STORE_GENROWS_H */
