/* pg_sum.c: generation summaries into the PostgreSQL catalog (see
 * pg_sum.h; the tables are pg_schema.h's gt_sum_*).
 *
 * Invariants:
 *   1. A summary's rows MUST be copied in the transaction that inserts its
 *      generation, otherwise an ACKed generation could lack its summary
 *      (search would miss its spans) or a failed commit leave rows of a
 *      generation that does not exist.
 *   2. Rows MUST be unique on the tables' keys before COPY, the last of a
 *      key winning (as SQLite's INSERT OR REPLACE does), otherwise a
 *      generation naming one string twice would fail its whole segment's
 *      commit, again on every retry.
 *   3. Names MUST go in as bytea (hex), never text, otherwise a name with a
 *      NUL or invalid UTF-8 byte would fail the commit; bytea compares
 *      bytewise, like SQLite's BINARY.
 */
#include "config.h"

#include "pg_sum.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "pg.h"
#include "store_summary.h"
#include "text.h"
#include "varint.h"

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* COPY text of a bytea: \\x then hex (the backslash escaped for COPY). */
static void put_bytea(gtp_wbuf *b, const void *p, size_t n) {
  static const char d[] = "0123456789abcdef";
  uint8_t *o = gtp_wbuf_grow(b, 3 + 2 * n);
  if (!o)
    return;
  o[0] = '\\';
  o[1] = '\\';
  o[2] = 'x';
  const uint8_t *s = p;
  for (size_t i = 0; i < n; i++) {
    o[3 + 2 * i] = (uint8_t)d[s[i] >> 4];
    o[4 + 2 * i] = (uint8_t)d[s[i] & 15];
  }
}

/* Invariant 2: which entries to keep, the last of each key. */
typedef struct key_ref {
  uint8_t kind;
  gtp_str name;
  size_t at;
} key_ref;

static int cmp_key(const void *a, const void *b) {
  const key_ref *x = a, *y = b;
  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  int c = gtp_bytes_cmp(x->name.ptr, x->name.len, y->name.ptr, y->name.len);
  if (c)
    return c;
  return x->at < y->at ? -1 : x->at > y->at;
}

/* keep[i] = 1 for the last entry of each key among refs[0..n). */
static int keep_last(key_ref *refs, size_t n, uint8_t **keep) {
  *keep = calloc(n ? n : 1, 1);
  if (!*keep)
    return -ENOMEM;
  if (n > 1)
    qsort(refs, n, sizeof *refs, cmp_key);
  for (size_t i = 0; i < n; i++)
    if (i + 1 == n || refs[i].kind != refs[i + 1].kind ||
        refs[i].name.len != refs[i + 1].name.len ||
        (refs[i].name.len &&
         memcmp(refs[i].name.ptr, refs[i + 1].name.ptr, refs[i].name.len)))
      (*keep)[refs[i].at] = 1;
  return 0;
}

/* The spans, one row per (kind, name) (pg_sum.h), in the summary's order
 * within a row. */
static int put_spans(pg_sum *ps, const gtp_summary *s) {
  if (s->nspans == 0)
    return 0;
  key_ref *refs = malloc(s->nspans * sizeof *refs);
  if (!refs)
    return -ENOMEM;
  gtp_wbuf blob;
  gtp_wbuf_init(&blob, 0);
  for (size_t i = 0; i < s->nspans; i++) {
    const gtp_sum_name *n = &s->names[s->spans[i].name];
    refs[i] = (key_ref){n->kind, n->name, i};
  }
  if (s->nspans > 1)
    qsort(refs, s->nspans, sizeof *refs, cmp_key); /* by key, then order */
  for (size_t i = 0; i < s->nspans && !blob.err;) {
    size_t j = i;
    uint64_t max = 0;
    int carried = 0;
    gtp_wbuf_reset(&blob);
    for (; j < s->nspans && refs[j].kind == refs[i].kind &&
           refs[j].name.len == refs[i].name.len &&
           (!refs[i].name.len ||
            !memcmp(refs[j].name.ptr, refs[i].name.ptr, refs[i].name.len));
         j++) {
      const gtp_sum_span *sp = &s->spans[refs[j].at];
      /* Clamped as SQLite's integer columns are, so both answer alike. */
      gtp_wbuf_put_uvarint(&blob, (uint64_t)clamp64(sp->thread));
      gtp_wbuf_put_uvarint(&blob, gtp_zigzag(sp->start_ns));
      gtp_wbuf_put_uvarint(&blob, (uint64_t)clamp64(sp->dur_ns));
      gtp_wbuf_put(&blob, sp->carried ? "\1" : "\0", 1);
      max = sp->dur_ns > max ? sp->dur_ns : max;
      carried |= sp->carried != 0;
    }
    gtp_wbuf_printf(&ps->spans, "%d\t", refs[i].kind);
    put_bytea(&ps->spans, refs[i].name.ptr, refs[i].name.len);
    gtp_wbuf_printf(&ps->spans, "\t%" PRId64 "\t%d\t", clamp64(max), carried);
    put_bytea(&ps->spans, blob.data, blob.len);
    gtp_wbuf_put(&ps->spans, "\n", 1);
    i = j;
  }
  int rc = blob.err;
  gtp_wbuf_fini(&blob);
  free(refs);
  return rc;
}

int pg_sum_span_next(const uint8_t **p, const uint8_t *end, pg_sum_span *s) {
  if (*p >= end)
    return 0;
  uint64_t z;
  if (gtp_uvarint_get(p, end, &s->thread) < 0 ||
      gtp_uvarint_get(p, end, &z) < 0 ||
      gtp_uvarint_get(p, end, &s->dur_ns) < 0 || *p >= end)
    return GTP_E_CORRUPT;
  s->start_ns = gtp_unzigzag(z);
  s->carried = *(*p)++ != 0;
  return 1;
}

static int encode(pg_sum *ps, const store_sum_item *it) {
  const gtp_summary *s = &it->sum;
  int ok = it->status == 0;
  gtp_wbuf_printf(&ps->gen, "%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%d\n",
                  ok ? clamp64(s->span_floor_ns) : 0, clamp64(s->open_at_end),
                  clamp64(s->unmatched_ends), it->status);
  if (!ok)
    return ps->gen.err;
  size_t most = s->nnames > s->ncounters ? s->nnames : s->ncounters;
  most = most > s->nlogs ? most : s->nlogs;
  key_ref *refs = malloc((most ? most : 1) * sizeof *refs);
  uint8_t *keep = NULL;
  if (!refs)
    return -ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < s->nnames; i++)
    refs[i] = (key_ref){s->names[i].kind, s->names[i].name, i};
  if ((rc = keep_last(refs, s->nnames, &keep)) < 0)
    goto out;
  uint8_t hist[GTP_SUM_HIST_MAX];
  for (size_t i = 0; i < s->nnames; i++) {
    const gtp_sum_name *n = &s->names[i];
    if (!keep[i])
      continue;
    put_bytea(&ps->names, n->name.ptr, n->name.len);
    gtp_wbuf_printf(&ps->names,
                    "\t%d\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                    "\t",
                    n->kind, clamp64(n->count), clamp64(n->total_ns),
                    clamp64(n->min_ns), clamp64(n->max_ns));
    put_bytea(&ps->names, hist, gtp_sum_hist_encode(n->hist, hist));
    gtp_wbuf_put(&ps->names, "\n", 1);
  }
  free(keep);
  keep = NULL;
  if ((rc = put_spans(ps, s)) < 0)
    goto out;
  for (size_t i = 0; i < s->ncounters; i++)
    refs[i] = (key_ref){0, s->counters[i].name, i};
  if ((rc = keep_last(refs, s->ncounters, &keep)) < 0)
    goto out;
  for (size_t i = 0; i < s->ncounters; i++) {
    const gtp_sum_counter *c = &s->counters[i];
    if (!keep[i])
      continue;
    put_bytea(&ps->counters, c->name.ptr, c->name.len);
    gtp_wbuf_printf(&ps->counters,
                    "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\n",
                    clamp64(c->count), c->min, c->max, c->last);
  }
  free(keep);
  for (size_t i = 0; i < s->nlogs; i++)
    refs[i] = (key_ref){0, s->logs[i].name, i};
  if ((rc = keep_last(refs, s->nlogs, &keep)) < 0)
    goto out;
  for (size_t i = 0; i < s->nlogs; i++) {
    if (!keep[i])
      continue;
    put_bytea(&ps->logs, s->logs[i].name.ptr, s->logs[i].name.len);
    gtp_wbuf_printf(&ps->logs, "\t%" PRId64 "\n", clamp64(s->logs[i].count));
  }
out:
  free(keep);
  free(refs);
  if (rc == 0)
    rc = ps->gen.err        ? ps->gen.err
         : ps->names.err    ? ps->names.err
         : ps->spans.err    ? ps->spans.err
         : ps->counters.err ? ps->counters.err
                            : ps->logs.err;
  return rc;
}

pg_sum *pg_sum_build(const uint8_t session[16], uint64_t gen,
                     const uint8_t *payload, size_t len, sum_carry *carry) {
  pg_sum *ps = calloc(1, sizeof *ps);
  if (!ps)
    return NULL;
  gtp_wbuf_init(&ps->gen, 0);
  gtp_wbuf_init(&ps->names, 0);
  gtp_wbuf_init(&ps->spans, 0);
  gtp_wbuf_init(&ps->counters, 0);
  gtp_wbuf_init(&ps->logs, 0);
  store_sum_item *it = store_sum_build(payload, len);
  if (!it) {
    pg_sum_free(ps);
    return NULL;
  }
  /* Out of memory while carrying loses only this edge's pairing. */
  if (carry && it->status == 0)
    (void)sum_carry_apply(carry, session, gen, it);
  int rc = encode(ps, it);
  store_sum_free(it);
  if (rc < 0) {
    pg_sum_free(ps);
    return NULL;
  }
  return ps;
}

void pg_sum_free(pg_sum *s) {
  if (!s)
    return;
  gtp_wbuf_fini(&s->gen);
  gtp_wbuf_fini(&s->names);
  gtp_wbuf_fini(&s->spans);
  gtp_wbuf_fini(&s->counters);
  gtp_wbuf_fini(&s->logs);
  free(s);
}

uint64_t pg_sum_bytes(const pg_sum *s) {
  if (!s)
    return 0;
  return sizeof *s + s->gen.cap + s->names.cap + s->spans.cap +
         s->counters.cap + s->logs.cap;
}

/* Appends each line of rows with "seq\t" in front. */
static void put_lines(gtp_wbuf *out, int64_t seq, const gtp_wbuf *rows) {
  const uint8_t *p = rows->data, *end = rows->data + rows->len;
  while (p < end) {
    const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    gtp_wbuf_printf(out, "%" PRId64 "\t", seq);
    gtp_wbuf_put(out, p, n);
    p += n;
  }
}

int pg_sum_copy(PGconn *k, const pg_cat_gen *gens, size_t n, char **cause) {
  static const struct {
    const char *sql;
    size_t off;
  } tables[] = {
      {"COPY gt_sum_gens(seq, floor_ns, open_at_end, unmatched_ends, status)"
       " FROM STDIN",
       offsetof(pg_sum, gen)},
      {"COPY gt_sum_names(seq, name, kind, count, total_ns, min_ns, max_ns,"
       " hist) FROM STDIN",
       offsetof(pg_sum, names)},
      {"COPY gt_sum_spans(seq, kind, name, max_ns, carried, spans)"
       " FROM STDIN",
       offsetof(pg_sum, spans)},
      {"COPY gt_sum_counters(seq, name, count, min, max, last) FROM STDIN",
       offsetof(pg_sum, counters)},
      {"COPY gt_sum_logs(seq, name, count) FROM STDIN", offsetof(pg_sum, logs)},
  };
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int rc = 0;
  for (size_t t = 0; rc == 0 && t < sizeof tables / sizeof *tables; t++) {
    gtp_wbuf_reset(&b);
    for (size_t i = 0; i < n; i++) {
      const pg_cat_gen *x = &gens[i];
      if (x->result != 0 || x->seq <= 0 || !x->sum)
        continue;
      put_lines(&b, x->seq,
                (const gtp_wbuf *)((const char *)x->sum + tables[t].off));
    }
    if (b.err)
      rc = b.err;
    else if (b.len > 0) /* invariant 1: the caller's transaction */
      rc = pg_copy(k, tables[t].sql, b.data, b.len, cause);
  }
  gtp_wbuf_fini(&b);
  return rc;
}
