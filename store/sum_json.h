/* sum_json.h: a generation summary's long spans, counters and log counts
 * as JSON text, the columns sum_gens.spans, .counters and .logs (schema 9,
 * store_schema.h).
 *
 * Why: until schema 8 they were rows of three tables (sum_spans with an
 * index on (seq, name), sum_counters, sum_logs): six B-tree inserts for a
 * fleet's 10-event generation, and three more B-trees whose pages every
 * transaction rewrote. Nothing reads them but per generation (search reads
 * one generation's spans at a time; counters and logs are kept, not yet
 * served), so they now live in the generation's sum_gens row, one append.
 * The views sum_spans, sum_counters and sum_logs (json_each over these
 * columns) show them as the old tables for SQL readers.
 *
 * Format (every value an integer or a string; arrays only):
 *   spans     [[kind, "name", thread, start_ns, dur_ns, carried], ...]
 *   counters  [["name", count, min, max, last], ...]
 *   logs      [["name", count], ...]
 * in the summary's order. A summary with none writes nothing (the column
 * is NULL). Strings escape only '"', '\\' and bytes below 0x20 (\u00XX):
 * every other byte is copied as it is, so a name that is not UTF-8 keeps
 * its bytes. SQLite's JSON functions read that text; sum_json_span_next
 * reads it back exactly, NUL bytes included (SQLite's json_each ends a
 * string at \u0000, so search decodes the spans itself).
 *
 * Counters and logs were keyed (seq, name): when a summary names one twice
 * (a string table may repeat a text) only the last entry is written, as
 * the keyed rows kept it.
 *
 * Pure: no I/O, no globals. The decoder takes stored text as untrusted:
 * every read is bounded by its end, bad text is GTP_E_CORRUPT.
 */
#ifndef SUM_JSON_H
#define SUM_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "summary.h"
#include "text.h"

/* Append s's spans, counters or logs to b (nothing when it has none).
 * Return b->err (0, -ENOMEM or GTP_E_TOOBIG). */
int sum_json_spans(gtp_wbuf *b, const gtp_summary *s);
int sum_json_counters(gtp_wbuf *b, const gtp_summary *s);
int sum_json_logs(gtp_wbuf *b, const gtp_summary *s);

/* One span read back. name points into the iterator's buffer: valid until
 * the next call or sum_json_it_fini. */
typedef struct sum_json_span {
  int64_t kind, thread, start_ns, dur_ns, carried;
  const char *name;
  size_t name_len;
} sum_json_span;

typedef struct sum_json_it {
  const uint8_t *p, *end;
  int state; /* 0 before '[', 1 inside, 2 done */
  char *name;
  size_t name_cap;
} sum_json_it;

/* Reads the spans text [p, p + len) (len 0: no spans). */
void sum_json_it_init(sum_json_it *it, const void *p, size_t len);
void sum_json_it_fini(sum_json_it *it);
/* 1 and *out filled, 0 at the end, GTP_E_CORRUPT on bad text, -ENOMEM. */
int sum_json_span_next(sum_json_it *it, sum_json_span *out);

#endif /* SUM_JSON_H */
