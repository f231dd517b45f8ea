/* store_genrows.c: multi-row INSERTs of generations and payloads (see
 * store_genrows.h for why and the invariants). */
#include "config.h"

#include "store_genrows.h"

#include <stdlib.h>

#include "check.h"
#include "store_schema.h" /* STORE_SPAN_SHIFT */
#include "sum_rows.h"     /* sum_rows_values_sql */

/* One statement per table for any count of rows up to STORE_GENROWS_MAX,
 * each count prepared on first use: a call of n rows runs one INSERT of n
 * rows per table, not a chunk of each power of two (21 rows were 16 + 4 +
 * 1: three statements' starts, cursors and halts per table, each on cold
 * caches in a fleet's transaction; bench/RESULTS.md, ninth session). */
#define NCHUNK (STORE_GENROWS_MAX + 1)

#define GEN_COLS 14
static const char gen_head[] =
    "INSERT OR IGNORE INTO generations(seq, session_id, gen, start_ns, end_ns,"
    " events, bytes, stored_bytes, dropped, evicted, rejected, codec,"
    " committed_ns, crc) VALUES";
static const char pay_head[] =
    "INSERT OR IGNORE INTO payloads(seq, data) VALUES";
/* Invariant 4: an existing bucket's row is written only when the bound
 * grows (the DO UPDATE's WHERE), so a fleet's transactions leave it alone. */
static const char span_sql[] =
    "INSERT INTO gen_spans(bucket, max_span) VALUES(?1, ?2)"
    " ON CONFLICT(bucket) DO UPDATE SET max_span = excluded.max_span"
    " WHERE excluded.max_span > max_span";

/* Invariant 1: the reservation moves (a page written) only when the rows
 * of this call would pass it. */
static const char reserve_sql[] =
    "INSERT INTO meta(key, value) VALUES('seq_reserved', ?1)"
    " ON CONFLICT(key) DO UPDATE SET value = excluded.value"
    " WHERE CAST(value AS INTEGER) < ?2";

struct store_genrows {
  sqlite3 *db;
  sqlite3_stmt *gen[NCHUNK], *pay[NCHUNK], *span, *reserve;
  int64_t next_seq; /* invariant 1 */
};

store_genrows *store_genrows_new(sqlite3 *db) {
  store_genrows *r = calloc(1, sizeof *r);
  if (r)
    r->db = db;
  return r;
}

void store_genrows_free(store_genrows *r) {
  if (!r)
    return;
  for (size_t c = 0; c < NCHUNK; c++) {
    sqlite3_finalize(r->gen[c]);
    sqlite3_finalize(r->pay[c]);
  }
  sqlite3_finalize(r->span);
  sqlite3_finalize(r->reserve);
  free(r);
}

void store_genrows_set_next(store_genrows *r, int64_t next_seq) {
  r->next_seq = next_seq;
}

static sqlite3_stmt *stmt(store_genrows *r, sqlite3_stmt **slot,
                          const char *head, unsigned ncols, unsigned nrows,
                          const char *tail, int *rc) {
  if (*slot)
    return *slot;
  size_t len = 0;
  char *sql = sum_rows_values_sql(head, ncols, nrows, tail, &len);
  if (!sql) {
    *rc = SQLITE_NOMEM;
    return NULL;
  }
  *rc = sqlite3_prepare_v3(r->db, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           slot, NULL);
  free(sql);
  return *rc == SQLITE_OK ? *slot : NULL;
}

/* Invariant 1 for rows[0..k), against the rows themselves: a SELECT per
 * row, debug builds only. Returns an SQLite code: a statement that fails
 * (out of memory: the allocation walk fails SQLite's allocations too)
 * checks nothing but fails the transaction, because SQLite rolls the
 * whole transaction back when a statement runs out of memory, and the
 * commit must not go on without one. */
static int genrows_check_invariants(store_genrows *r, const store_genrow *rows,
                                    unsigned k) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(
      r->db, "SELECT seq FROM generations WHERE session_id = ?1 AND gen = ?2",
      -1, &q, NULL);
  for (unsigned i = 0; rc == SQLITE_OK && i < k; i++) {
    sqlite3_bind_int64(q, 1, rows[i].sid);
    sqlite3_bind_int64(q, 2, rows[i].gen);
    int step = sqlite3_step(q);
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
      rc = step;
      break;
    }
    GTP_ASSERT(step == SQLITE_ROW && sqlite3_column_int64(q, 0) == rows[i].seq);
    sqlite3_reset(q);
  }
  sqlite3_finalize(q);
  return rc;
}

/* The generation rows of rows[0..k), 1 <= k <= STORE_GENROWS_MAX; their
 * seq from the last one's (invariant 1). */
static int write_gens(store_genrows *r, store_genrow *rows, unsigned k) {
  int rc = SQLITE_OK;
  sqlite3_stmt *st = stmt(r, &r->gen[k], gen_head, GEN_COLS, k, NULL, &rc);
  if (!st)
    return rc;
  for (unsigned i = 0; i < k; i++) {
    const store_genrow *g = &rows[i];
    int b = (int)i * GEN_COLS;
    rows[i].seq = r->next_seq + (int64_t)i; /* invariant 1 */
    sqlite3_bind_int64(st, b + 1, rows[i].seq);
    sqlite3_bind_int64(st, b + 2, g->sid);
    sqlite3_bind_int64(st, b + 3, g->gen);
    sqlite3_bind_int64(st, b + 4, g->start_ns);
    sqlite3_bind_int64(st, b + 5, g->end_ns);
    sqlite3_bind_int64(st, b + 6, g->events);
    sqlite3_bind_int64(st, b + 7, g->bytes);
    sqlite3_bind_int64(st, b + 8, g->stored_bytes);
    sqlite3_bind_int64(st, b + 9, g->dropped);
    sqlite3_bind_int64(st, b + 10, g->evicted);
    sqlite3_bind_int64(st, b + 11, g->rejected);
    sqlite3_bind_text(st, b + 12, g->codec, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, b + 13, g->committed_ns);
    sqlite3_bind_int64(st, b + 14, g->crc);
  }
  r->next_seq += k; /* taken whatever happens next: never issued twice */
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE)
    return rc;
  if (sqlite3_changes(r->db) != (int)k)
    return SQLITE_CONSTRAINT; /* invariant 2 */
  return GTP_DEBUG_ENABLED ? genrows_check_invariants(r, rows, k) : SQLITE_OK;
}

/* The span of a row as its bucket's bound counts it: at least 0. */
static int64_t span_of(const store_genrow *g) {
  int64_t d;
  if (__builtin_sub_overflow(g->end_ns, g->start_ns, &d))
    return g->end_ns > g->start_ns ? INT64_MAX : 0;
  return d > 0 ? d : 0;
}

/* Invariant 4 for rows[0..n): one upsert per bucket, with the longest span
 * of its rows (a fleet's rows of one statement share one bucket). */
static int write_spans(store_genrows *r, const store_genrow *rows, size_t n) {
  int rc = SQLITE_OK;
  if (!r->span &&
      (rc = sqlite3_prepare_v3(r->db, span_sql, -1, SQLITE_PREPARE_PERSISTENT,
                               &r->span, NULL)) != SQLITE_OK)
    return rc;
  _Static_assert(STORE_GENROWS_MAX <= 32, "one bit per row in done");
  uint32_t done = 0; /* rows whose bucket was written */
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
    if (done & (1u << i))
      continue;
    int64_t bucket = rows[i].start_ns >> STORE_SPAN_SHIFT;
    int64_t max = span_of(&rows[i]);
    for (size_t j = i + 1; j < n; j++)
      if (rows[j].start_ns >> STORE_SPAN_SHIFT == bucket) {
        done |= 1u << j;
        if (span_of(&rows[j]) > max)
          max = span_of(&rows[j]);
      }
    sqlite3_bind_int64(r->span, 1, bucket);
    sqlite3_bind_int64(r->span, 2, max);
    rc = sqlite3_step(r->span);
    sqlite3_reset(r->span);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  return rc;
}

/* The payloads of rows[0..k), 1 <= k <= STORE_GENROWS_MAX. */
static int write_payloads(store_genrows *r, store_genrow *rows, unsigned k) {
  int rc = SQLITE_OK;
  sqlite3_stmt *st = stmt(r, &r->pay[k], pay_head, 2, k, NULL, &rc);
  if (!st)
    return rc;
  for (unsigned j = 0; j < k; j++) {
    sqlite3_bind_int64(st, 2 * (int)j + 1, rows[j].seq);
    sqlite3_bind_blob64(st, 2 * (int)j + 2, rows[j].data,
                        (sqlite3_uint64)rows[j].len, SQLITE_STATIC);
  }
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  if (rc == SQLITE_OK && sqlite3_changes(r->db) != (int)k)
    rc = SQLITE_CONSTRAINT; /* invariant 3 */
  return rc;
}

/* Invariant 1: meta.seq_reserved at least the last seq of n rows. */
static int reserve_seqs(store_genrows *r, size_t n) {
  int rc = SQLITE_OK;
  if (!r->reserve && (rc = sqlite3_prepare_v3(r->db, reserve_sql, -1,
                                              SQLITE_PREPARE_PERSISTENT,
                                              &r->reserve, NULL)) != SQLITE_OK)
    return rc;
  int64_t last = r->next_seq + (int64_t)n - 1;
  sqlite3_bind_int64(r->reserve, 1, last + STORE_GENROWS_LEASE);
  sqlite3_bind_int64(r->reserve, 2, last);
  rc = sqlite3_step(r->reserve);
  sqlite3_reset(r->reserve);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int store_genrows_write(store_genrows *r, store_genrow *rows, size_t n) {
  if (n == 0)
    return SQLITE_OK;
  if (n > STORE_GENROWS_MAX)
    return SQLITE_MISUSE;
  int rc = reserve_seqs(r, n);
  if (rc == SQLITE_OK)
    rc = write_gens(r, rows, (unsigned)n);
  if (rc == SQLITE_OK)
    rc = write_spans(r, rows, n);
  return rc == SQLITE_OK ? write_payloads(r, rows, (unsigned)n) : rc;
}
