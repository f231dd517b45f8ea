/* sumsort.c: a summary answer's rows in one order (see sumsort.h).
 *
 * Invariants:
 *   1. The order MUST be total over (kind, name), the grouping key, so the
 *      same rows always come out the same way on either backend.
 */
#include "config.h"

#include "sumsort.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

int sumsort_add(void *ctx, const store_name_stats *row) {
  sumsort *s = ctx;
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 32;
    store_name_stats *r = realloc(s->rows, nc * sizeof *r);
    if (!r) {
      s->err = -ENOMEM;
      return 1;
    }
    s->rows = r;
    s->cap = nc;
  }
  char *name = malloc(row->name_len + 1);
  if (!name) {
    s->err = -ENOMEM;
    return 1;
  }
  if (row->name_len)
    memcpy(name, row->name, row->name_len);
  name[row->name_len] = 0;
  s->rows[s->n] = *row;
  s->rows[s->n].name = name;
  s->n++;
  return 0;
}

static int cmp_row(const void *a, const void *b) {
  const store_name_stats *x = a, *y = b;
  if (x->total_ns != y->total_ns)
    return x->total_ns > y->total_ns ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  return gtp_bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

int sumsort_emit(sumsort *s, store_stats_cb cb, void *ctx) {
  if (s->err)
    return s->err;
  if (s->n > 1)
    qsort(s->rows, s->n, sizeof *s->rows, cmp_row); /* invariant 1 */
  for (size_t i = 0; i < s->n; i++)
    if (cb(ctx, &s->rows[i]) != 0)
      break;
  return 0;
}

void sumsort_fini(sumsort *s) {
  for (size_t i = 0; i < s->n; i++)
    free((char *)s->rows[i].name);
  free(s->rows);
  memset(s, 0, sizeof *s);
}
