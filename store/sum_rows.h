/* sum_rows.h: the summary rows of one transaction, gathered in memory and
 * written with multi-row INSERTs just before COMMIT.
 *
 * Why: one sqlite3_step per summary row cost about 9,000 instructions, most
 * of it per statement (the transaction check, opening and closing the
 * table's and its index's cursors, halting, resetting), not per row: a
 * small fleet generation had about seven rows (bench/RESULTS.md, "summary
 * rows in one statement per table"), three since schema 9 (a sum_gens row
 * that carries the spans, counters and logs as JSON text, sum_json.h, and
 * one sum_names row per name). A statement of up to SUM_ROWS_CHUNK_MAX
 * rows pays that once.
 *
 * The rows borrow their text (names) from the summaries they come from:
 * those must outlive the next sum_rows_flush or sum_rows_reset. Histogram
 * blobs are copied (they are encoded into a scratch buffer per row).
 *
 * Invariants:
 *   1. Rows are INSERT OR IGNORE, never REPLACE or plain INSERT: SQLite
 *      gives a multi-row INSERT that may abort halfway a statement journal,
 *      which copies every page the statement touches (16 KiB each); IGNORE
 *      cannot abort. The only conflicts possible are within one summary
 *      (a string table that repeats a name: seq is new for every summary,
 *      AUTOINCREMENT), and sum_rows_add_* callers add one summary's rows of
 *      a unique table last-first, so the last one wins, as REPLACE did.
 *   2. Nothing is buffered across transactions: the owner calls
 *      sum_rows_reset after BEGIN, and sum_rows_flush empties the buffer
 *      whether it succeeds or not.
 *
 * Thread: the store thread (the write connection's).
 */
#ifndef SUM_ROWS_H
#define SUM_ROWS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "summary.h"

typedef struct sum_rows sum_rows;

/* The tables, in the order sum_rows_flush writes them. */
enum { SUM_ROWS_GENS, SUM_ROWS_NAMES, SUM_ROWS_TABLES_ };

#define SUM_ROWS_CHUNK_MAX 64

/* NULL when out of memory. Statements are prepared on first use. */
sum_rows *sum_rows_new(sqlite3 *db);
void sum_rows_free(sum_rows *r);

/* Appends one row to table t: vals[] are the columns in the table's order
 * (see sum_rows.c); texts are sqlite values made by the helpers below. 0 or
 * -ENOMEM. */
typedef struct {
  int type;      /* SQLITE_INTEGER, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL */
  int64_t i;     /* INTEGER */
  const void *p; /* TEXT (borrowed unless copy) or BLOB (copied on add) */
  size_t len;
  int copy; /* TEXT: copied on add (a scratch buffer's) */
} sum_rows_val;

int sum_rows_add(sum_rows *r, int t, const sum_rows_val *vals);

static inline sum_rows_val sum_rows_int(int64_t v) {
  return (sum_rows_val){SQLITE_INTEGER, v, NULL, 0, 0};
}
static inline sum_rows_val sum_rows_text(gtp_str s) {
  return (sum_rows_val){SQLITE_TEXT, 0, s.len ? s.ptr : "", s.len, 0};
}
static inline sum_rows_val sum_rows_blob(const void *p, size_t len) {
  return (sum_rows_val){SQLITE_BLOB, 0, p, len, 0};
}
/* A text copied on add, or NULL when len is 0 (sum_gens' JSON columns). */
static inline sum_rows_val sum_rows_text_copy(const void *p, size_t len) {
  return len ? (sum_rows_val){SQLITE_TEXT, 0, p, len, 1}
             : (sum_rows_val){SQLITE_NULL, 0, NULL, 0, 0};
}

/* Rows buffered (all tables). */
size_t sum_rows_pending(const sum_rows *r);

/* Writes every buffered row inside the caller's transaction and empties
 * the buffer (invariant 2). Returns an SQLite result code. */
int sum_rows_flush(sum_rows *r);

/* Drops every buffered row (invariant 2). */
void sum_rows_reset(sum_rows *r);

/* The text of a multi-row statement: head, then nrows groups of ncols
 * parameters "(?,..,?)" joined by commas, then tail (NULL: none); *len its
 * length. malloc'd; NULL when out of memory. Also store_genrows.c's. */
char *sum_rows_values_sql(const char *head, unsigned ncols, unsigned nrows,
                          const char *tail, size_t *len);

#endif /* SUM_ROWS_H */
