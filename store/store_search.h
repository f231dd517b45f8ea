/* store_search.h: the read side of summaries: span search and per-name
 * statistics over a time range (GET /v1/search, GET /v1/summary).
 *
 * Search is exact: every span (region or task begun and ended in one
 * generation) whose name, duration and start match is found. Candidate
 * generations come from sum_names (a row for a matching name whose
 * [min_ns, max_ns] meets [min, max]) plus, while a migrated database is
 * still being summarized, the generations without a summary. For each
 * candidate the spans come from sum_spans when the generation's
 * span_floor_ns <= min (every span that long is stored there, summary.h),
 * otherwise from decoding the generation with floor = min.
 *
 * Order: newest first by commit order (seq, descending; for a live agent
 * that is time order), then by start, latest first, within a generation.
 * The cursor is (seq, skip): the generation to resume at and how many of
 * its matching spans were already returned.
 *
 * Thread: like store_read.h, one reader per thread at a time.
 */
#ifndef STORE_SEARCH_H
#define STORE_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "store_read.h"

typedef struct store_search_query {
  const char *service, *session; /* NULL = any */
  const char *name;              /* NULL = any name */
  int prefix;                    /* 1: name is a prefix */
  uint64_t min_ns, max_ns;       /* duration bounds, inclusive */
  int64_t from_ns, to_ns;        /* span start in [from, to) */
  int64_t cursor_seq;            /* 0 = from the newest */
  uint64_t cursor_skip;
  uint32_t limit; /* spans; the callback returning non-zero also stops */
} store_search_query;

typedef struct store_span_row {
  int64_t seq;
  uint64_t gen;
  const char *session, *service, *host; /* borrowed for the call */
  int kind;                             /* GTP_SUM_REGION / GTP_SUM_TASK */
  const char *name;                     /* borrowed, name_len bytes */
  size_t name_len;
  uint64_t thread;
  int64_t start_ns;
  uint64_t dur_ns;
  uint64_t index; /* 0-based rank among the generation's matches */
  int decoded;    /* 1: found by decoding the generation */
} store_span_row;

typedef int (*store_span_cb)(void *ctx, const store_span_row *row);

/* Streams matching spans. On return, *next_seq and *next_skip are the cursor of
 * the next page (next_seq 0: there is none). Returns 0 or a negative code. */
int store_search_spans(store_reader *r, const store_search_query *q,
                       store_span_cb cb, void *ctx, int64_t *next_seq,
                       uint64_t *next_skip);

/* Per-name statistics over the generations overlapping [from, to) of a
 * service or session (NULL: all). Histograms are merged. */
typedef struct store_name_stats {
  int kind;
  const char *name; /* borrowed for the call */
  size_t name_len;
  uint64_t count, total_ns, min_ns, max_ns;
  uint64_t gens; /* generations where it occurs */
  uint64_t hist[68];
} store_name_stats;
typedef int (*store_stats_cb)(void *ctx, const store_name_stats *row);

typedef struct store_summary_query {
  const char *service, *session, *name;
  int prefix;
  int64_t from_ns, to_ns;
  int raw; /* 1: only raw per-generation rows, no rollups (tests) */
} store_summary_query;

/* *pending = generations of the range not summarized yet (their numbers are
 * missing from the answer). Without a session, every whole ten-minute slot of
 * [from, to) whose rollup is exact is read from sum_slots (store_rollup.h)
 * and the rest from the raw rows: the same answer, row for row, as the raw
 * rows alone. Rows come by total, largest first, then kind and name. */
int store_search_summary(store_reader *r, const store_summary_query *q,
                         store_stats_cb cb, void *ctx, uint64_t *pending);

/* 1 if any session of that service is stored, 0 if none, < 0 on error. */
int store_search_service_known(store_reader *r, const char *service);

/* Registers gt_hist_merge() on a reader connection (store_search_summary
 * does on first use). */
int store_search_register(void *sqlite_db);

#endif
