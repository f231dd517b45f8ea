/* spanbuf.c: a search's spans of one generation (see spanbuf.h).
 *
 * Invariants:
 *   1. Rows MUST come out of spanbuf_sort in one total order whichever way
 *      they were found (index rows or decoded bytes, SQLite or PostgreSQL),
 *      otherwise a cursor's skip count would skip other spans on the next
 *      page and the two backends would answer differently.
 */
#include "config.h"

#include "spanbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "summary.h"
#include "text.h"

void spanbuf_clear(spanbuf *b) {
  for (size_t i = 0; i < b->n; i++)
    free(b->names[i]);
  b->n = 0;
}

void spanbuf_fini(spanbuf *b) {
  spanbuf_clear(b);
  free(b->rows);
  free(b->names);
  memset(b, 0, sizeof *b);
}

int spanbuf_add(spanbuf *b, const store_span_row *r) {
  if (b->n == b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 64;
    store_span_row *nr = realloc(b->rows, nc * sizeof *nr);
    if (!nr)
      return -ENOMEM;
    b->rows = nr;
    char **nn = realloc(b->names, nc * sizeof *nn);
    if (!nn)
      return -ENOMEM;
    b->names = nn;
    b->cap = nc;
  }
  char *copy = malloc(r->name_len + 1);
  if (!copy)
    return -ENOMEM;
  if (r->name_len)
    memcpy(copy, r->name, r->name_len);
  copy[r->name_len] = 0;
  b->rows[b->n] = *r;
  b->rows[b->n].name = copy;
  b->names[b->n] = copy;
  b->n++;
  return 0;
}

static int cmp_span(const void *a, const void *b) {
  const store_span_row *x = a, *y = b;
  if (x->start_ns != y->start_ns)
    return x->start_ns > y->start_ns ? -1 : 1;
  if (x->dur_ns != y->dur_ns)
    return x->dur_ns > y->dur_ns ? -1 : 1;
  if (x->thread != y->thread)
    return x->thread < y->thread ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  return gtp_bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

void spanbuf_sort(spanbuf *b) {
  if (b->n > 1) /* qsort(NULL, 0) is undefined */
    qsort(b->rows, b->n, sizeof *b->rows, cmp_span); /* invariant 1 */
}

int spanbuf_name_matches(const store_search_query *q, const char *p,
                         size_t len) {
  if (!q->name)
    return 1;
  size_t n = strlen(q->name);
  if (q->prefix)
    return len >= n && memcmp(p, q->name, n) == 0;
  return len == n && memcmp(p, q->name, n) == 0;
}

int spanbuf_span_matches(const store_search_query *q, int64_t start,
                         uint64_t dur) {
  return dur >= q->min_ns && dur <= q->max_ns && start >= q->from_ns &&
         start < q->to_ns;
}

int spanbuf_decode(spanbuf *b, const store_search_query *q, const uint8_t *p,
                   size_t len) {
  gtp_gen g;
  size_t used;
  int rc = gtp_gen_parse(p, len, &g, &used);
  if (rc == -ENOMEM)
    return rc; /* not "no spans": the answer would miss them */
  if (rc < 0)
    return 0; /* not decodable: holds no span anyone can see */
  gtp_summary s;
  int err = gtp_summary_compute_spans(&g, q->min_ns, SIZE_MAX, &s);
  for (size_t i = 0; err == 0 && i < s.nspans; i++) {
    const gtp_sum_span *sp = &s.spans[i];
    const gtp_sum_name *n = &s.names[sp->name];
    if (!spanbuf_name_matches(q, n->name.ptr, n->name.len) ||
        !spanbuf_span_matches(q, sp->start_ns, sp->dur_ns))
      continue;
    store_span_row row = {0};
    row.kind = n->kind;
    row.name = n->name.ptr;
    row.name_len = n->name.len;
    row.thread = sp->thread;
    row.start_ns = sp->start_ns;
    row.dur_ns = sp->dur_ns;
    row.decoded = 1;
    err = spanbuf_add(b, &row);
  }
  gtp_summary_fini(&s); /* safe after a failed compute too */
  gtp_gen_fini(&g);
  return err == -ENOMEM ? err : 0;
}
