/* pg_sum.h: generation summaries (proto/summary.h) in the shared store's
 * PostgreSQL catalog: the gt_sum_* tables of pg_schema.h, the same rows
 * SQLite keeps in its sum_* tables (store_schema.h).
 *
 * Split like the SQLite writer: pg_sum_build is the costly, pure part (the
 * generation's bytes in, its rows encoded out; run by the segment packer
 * while it still holds the bytes), pg_sum_copy only streams the rows of a
 * segment's new generations into the tables with COPY, inside the
 * transaction that catalogs them (pg_cat_commit_segment).
 *
 * Thread: build/free on any thread (a sum_carry belongs to one); copy on
 * the thread that holds the connection.
 */
#ifndef PG_SUM_H
#define PG_SUM_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "pg_cat.h"
#include "sum_carry.h"
#include "text.h"

/* One generation's rows as COPY text lines (tab-separated, names as bytea
 * hex), each without its seq column, which the commit puts in front.
 * Spans go one row per (kind, name), packed: for each span, in the order
 * the summary lists them, uvarint thread | uvarint zigzag(start_ns) |
 * uvarint dur_ns | u8 carried (pg_sum_span_next reads them back). */
typedef struct pg_sum {
  gtp_wbuf gen, names, spans, counters, logs;
} pg_sum;

/* Summarizes the generation payload[0..len) of session/gen, pairing its
 * ENDs across the edge with carry (NULL: no pairing). A generation that
 * does not decode gets its status row alone (search then knows no span of
 * it can be shown). NULL only when out of memory. */
pg_sum *pg_sum_build(const uint8_t session[16], uint64_t gen,
                     const uint8_t *payload, size_t len, sum_carry *carry);
void pg_sum_free(pg_sum *s);
/* Heap bytes s holds (the writer's memory budget counts them). */
uint64_t pg_sum_bytes(const pg_sum *s);

/* One span of a packed gt_sum_spans.spans value: 1 and *s filled, 0 at
 * the end, GTP_E_CORRUPT on bad bytes. */
typedef struct pg_sum_span {
  uint64_t thread, dur_ns;
  int64_t start_ns;
  int carried;
} pg_sum_span;
int pg_sum_span_next(const uint8_t **p, const uint8_t *end, pg_sum_span *s);

/* Copies the summaries of gens[i] with result 0 (new, seq set) and a sum,
 * on k inside the caller's transaction. 0 or a negative code with
 * *cause (the caller rolls back). */
int pg_sum_copy(PGconn *k, const pg_cat_gen *gens, size_t n, char **cause);

#endif /* PG_SUM_H */
