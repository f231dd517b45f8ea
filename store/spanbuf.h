/* spanbuf.h: the spans of one candidate generation of a search, gathered
 * from the summary rows or decoded from the generation's bytes, in the one
 * order every backend answers in (internal to store/: store_search.c for
 * SQLite, pg_search.c for the shared catalog).
 *
 * Order (store_search.h): start desc, duration desc, thread asc, kind asc,
 * name bytes asc; a cursor's skip count relies on it being total.
 *
 * Thread: a spanbuf belongs to one caller.
 */
#ifndef SPANBUF_H
#define SPANBUF_H

#include <stddef.h>
#include <stdint.h>

#include "store_search.h"

typedef struct spanbuf {
  store_span_row *rows;
  size_t n, cap;
  char **names; /* owned copies, one per row */
} spanbuf;

/* Empties b (keeps its arrays); spanbuf_fini frees them. */
void spanbuf_clear(spanbuf *b);
void spanbuf_fini(spanbuf *b);
/* Appends a copy of r (its name copied). 0 or -ENOMEM. */
int spanbuf_add(spanbuf *b, const store_span_row *r);
/* Sorts the rows into the search order. */
void spanbuf_sort(spanbuf *b);

/* 1 when name p[0..len) matches the query's name (exact or prefix; any
 * when q->name is NULL). */
int spanbuf_name_matches(const store_search_query *q, const char *p,
                         size_t len);
/* 1 when a span of that start and duration passes the query's bounds. */
int spanbuf_span_matches(const store_search_query *q, int64_t start,
                         uint64_t dur);

/* Appends the spans of one generation's bytes that match q (every span of
 * it at least q->min_ns long, begun and ended in it), marked decoded.
 * Bytes that do not parse hold no span anyone can see: 0. 0 or -ENOMEM. */
int spanbuf_decode(spanbuf *b, const store_search_query *q, const uint8_t *p,
                   size_t len);

#endif /* SPANBUF_H */
