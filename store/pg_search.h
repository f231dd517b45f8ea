/* pg_search.h: span search and per-name statistics over the shared store's
 * catalog (the gt_sum_* tables, pg_schema.h): store_search.h's contracts,
 * answered the same way as the SQLite backend for the same generations
 * (same candidates, same per-generation rule for index rows or decoding,
 * same order and cursor).
 *
 * Rows are read a page of candidate generations at a time
 * (PG_SEARCH_PAGE; GENTRACE_TEST_SEARCH_PAGE lowers it for tests), so a
 * search over a long range holds at most one page's rows, never the whole
 * range's.
 *
 * Thread: any; each call borrows a pooled catalog connection per statement
 * and may wait for the network (never on the libuv loop).
 */
#ifndef PG_SEARCH_H
#define PG_SEARCH_H

#include <stdint.h>

#include "pg_cat.h"
#include "store_search.h"
#include "text.h"

#define PG_SEARCH_PAGE 64

/* Reads one generation's bytes (the storage reader's cache or S3). */
typedef int (*pg_search_fetch_fn)(void *ctx, int64_t seq, gtp_wbuf *out);

int pg_search_spans(pg_cat *c, const store_search_query *q,
                    pg_search_fetch_fn fetch, void *fetch_ctx, store_span_cb cb,
                    void *ctx, int64_t *next_seq, uint64_t *next_skip);
int pg_search_summary(pg_cat *c, const store_summary_query *q,
                      store_stats_cb cb, void *ctx, uint64_t *pending);
int pg_search_service_known(pg_cat *c, const char *service);

#endif /* PG_SEARCH_H */
