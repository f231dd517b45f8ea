/* sumsort.h: the rows of a /v1/summary answer, collected from either
 * backend and handed on in one total order, so SQLite and the shared
 * catalog answer byte for byte alike whatever order their GROUP BY leaves
 * ties in (internal to store/: storage.c uses it).
 *
 * Order: total_ns descending, then kind, then name bytes ascending.
 *
 * Thread: a sumsort belongs to one caller.
 */
#ifndef SUMSORT_H
#define SUMSORT_H

#include <stddef.h>

#include "store_search.h"

typedef struct sumsort {
  store_name_stats *rows; /* names owned (copies) */
  size_t n, cap;
  int err; /* first error of sumsort_add (sticky) */
} sumsort;

/* A store_stats_cb (ctx = the sumsort): keeps a copy of the row. Returns
 * non-zero (stop) when out of memory, which sumsort_emit then reports. */
int sumsort_add(void *ctx, const store_name_stats *row);
/* Sorts and hands every row to cb (stopping when it returns non-zero).
 * 0, or -ENOMEM when a row could not be kept. */
int sumsort_emit(sumsort *s, store_stats_cb cb, void *ctx);
void sumsort_fini(sumsort *s);

#endif /* SUMSORT_H */
