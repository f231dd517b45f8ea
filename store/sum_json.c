/* sum_json.c: summary spans, counters and logs as JSON text (see
 * sum_json.h for the format and why).
 *
 * Invariants:
 *   1. sum_json_span_next returns exactly the values sum_json_spans wrote,
 *      names byte for byte (NUL and non-UTF-8 bytes included), so a span
 *      found through sum_gens.spans equals the one the summary held.
 *   2. The decoder never reads outside [p, end) and never allocates more
 *      than the text's length for a name.
 */
#include "config.h"

#include "sum_json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"

/* ----------------------------------------------------------- the writer */

static void put_i64(gtp_wbuf *b, int64_t v) {
  char tmp[24];
  size_t n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    tmp[sizeof tmp - 1 - n++] = '-';
  gtp_wbuf_put(b, tmp + sizeof tmp - n, n);
}

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* A JSON string: '"', '\\' and bytes below 0x20 escaped, others as they
 * are (sum_json.h: names keep their bytes). */
static void put_str(gtp_wbuf *b, gtp_str s) {
  static const char hex[] = "0123456789abcdef";
  if (s.len == 0) { /* an unnamed one's ptr may be NULL */
    gtp_wbuf_put(b, "\"\"", 2);
    return;
  }
  const uint8_t *p = (const uint8_t *)s.ptr;
  gtp_wbuf_put(b, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < s.len; i++) {
    uint8_t c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    gtp_wbuf_put(b, p + run, i - run);
    run = i + 1;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      gtp_wbuf_put(b, e, 2);
    } else {
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      gtp_wbuf_put(b, e, 6);
    }
  }
  gtp_wbuf_put(b, p + run, s.len - run);
  gtp_wbuf_put(b, "\"", 1);
}

int sum_json_spans(gtp_wbuf *b, const gtp_summary *s) {
  for (size_t i = 0; i < s->nspans; i++) {
    const gtp_sum_span *sp = &s->spans[i];
    const gtp_sum_name *n = &s->names[sp->name];
    gtp_wbuf_put(b, i ? ",[" : "[[", 2);
    put_i64(b, n->kind);
    gtp_wbuf_put(b, ",", 1);
    put_str(b, n->name);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, clamp64(sp->thread));
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, sp->start_ns);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, clamp64(sp->dur_ns));
    gtp_wbuf_put(b, sp->carried ? ",1]" : ",0]", 3);
  }
  if (s->nspans)
    gtp_wbuf_put(b, "]", 1);
  return b->err;
}

static int same(gtp_str a, gtp_str b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

typedef struct {
  gtp_str name;
  size_t i;
} keyed;

static int cmp_keyed(const void *pa, const void *pb) {
  const keyed *a = pa, *b = pb;
  size_t m = a->name.len < b->name.len ? a->name.len : b->name.len;
  int c = m ? memcmp(a->name.ptr, b->name.ptr, m) : 0;
  if (c)
    return c;
  if (a->name.len != b->name.len)
    return a->name.len < b->name.len ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* drop[i] = 1 for every entry a later one of the same name replaces (the
 * last one wins, as the keyed rows did). names(ctx, i) gives entry i's
 * name. Returns 0 or -ENOMEM. */
static int mark_replaced(size_t n, gtp_str (*name)(const void *, size_t),
                         const void *ctx, uint8_t *drop) {
  memset(drop, 0, n);
  if (n <= 16) { /* the usual few: no allocation */
    for (size_t i = 0; i < n; i++)
      for (size_t j = i + 1; j < n && !drop[i]; j++)
        drop[i] = (uint8_t)same(name(ctx, i), name(ctx, j));
    return 0;
  }
  keyed *k = malloc(n * sizeof *k);
  if (!k)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    k[i] = (keyed){name(ctx, i), i};
  qsort(k, n, sizeof *k, cmp_keyed);
  for (size_t i = 0; i + 1 < n; i++)
    if (same(k[i].name, k[i + 1].name))
      drop[k[i].i] = 1; /* a later index of the same name follows */
  free(k);
  return 0;
}

static gtp_str counter_name(const void *ctx, size_t i) {
  return ((const gtp_summary *)ctx)->counters[i].name;
}

static gtp_str log_name(const void *ctx, size_t i) {
  return ((const gtp_summary *)ctx)->logs[i].name;
}

/* The drop marks of n entries, on the stack when few. */
static uint8_t *drops(size_t n, uint8_t *small, size_t cap,
                      gtp_str (*name)(const void *, size_t), const void *s) {
  uint8_t *d = n <= cap ? small : malloc(n);
  if (d && mark_replaced(n, name, s, d) < 0) {
    if (d != small)
      free(d);
    d = NULL;
  }
  return d;
}

int sum_json_counters(gtp_wbuf *b, const gtp_summary *s) {
  size_t n = s->ncounters;
  if (n == 0)
    return b->err;
  uint8_t small[64];
  uint8_t *drop = drops(n, small, sizeof small, counter_name, s);
  if (!drop)
    return b->err = -ENOMEM;
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    if (drop[i])
      continue;
    const gtp_sum_counter *c = &s->counters[i];
    gtp_wbuf_put(b, first ? "[[" : ",[", 2);
    first = 0;
    put_str(b, c->name);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, clamp64(c->count));
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, c->min);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, c->max);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, c->last);
    gtp_wbuf_put(b, "]", 1);
  }
  gtp_wbuf_put(b, "]", 1);
  if (drop != small)
    free(drop);
  return b->err;
}

int sum_json_logs(gtp_wbuf *b, const gtp_summary *s) {
  size_t n = s->nlogs;
  if (n == 0)
    return b->err;
  uint8_t small[64];
  uint8_t *drop = drops(n, small, sizeof small, log_name, s);
  if (!drop)
    return b->err = -ENOMEM;
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    if (drop[i])
      continue;
    gtp_wbuf_put(b, first ? "[[" : ",[", 2);
    first = 0;
    put_str(b, s->logs[i].name);
    gtp_wbuf_put(b, ",", 1);
    put_i64(b, clamp64(s->logs[i].count));
    gtp_wbuf_put(b, "]", 1);
  }
  gtp_wbuf_put(b, "]", 1);
  if (drop != small)
    free(drop);
  return b->err;
}

/* ----------------------------------------------------------- the reader */

void sum_json_it_init(sum_json_it *it, const void *p, size_t len) {
  memset(it, 0, sizeof *it);
  it->p = p;
  it->end = it->p + len;
  it->state = len ? 0 : 2;
}

void sum_json_it_fini(sum_json_it *it) {
  free(it->name);
  memset(it, 0, sizeof *it);
}

static void blanks(sum_json_it *it) {
  while (it->p < it->end &&
         (*it->p == ' ' || *it->p == '\n' || *it->p == '\t' || *it->p == '\r'))
    it->p++;
}

static int eat(sum_json_it *it, char c) {
  blanks(it);
  if (it->p == it->end || *it->p != (uint8_t)c)
    return 0;
  it->p++;
  return 1;
}

static int get_i64(sum_json_it *it, int64_t *v) {
  blanks(it);
  int neg = it->p < it->end && *it->p == '-';
  it->p += neg;
  uint64_t u = 0;
  const uint8_t *start = it->p;
  while (it->p < it->end && *it->p >= '0' && *it->p <= '9') {
    unsigned d = (unsigned)(*it->p++ - '0');
    if (u > (UINT64_C(1) << 63) / 10 ||
        u * 10 + d > (UINT64_C(1) << 63) - (neg ? 0 : 1))
      return GTP_E_CORRUPT;
    u = u * 10 + d;
  }
  if (it->p == start)
    return GTP_E_CORRUPT;
  *v = neg ? (int64_t)(0 - u) : (int64_t)u;
  return 0;
}

static int hexval(uint8_t c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* A string into it->name (invariant 2: at most as long as the text). */
static int get_str(sum_json_it *it, size_t *len) {
  if (!eat(it, '"'))
    return GTP_E_CORRUPT;
  size_t need = (size_t)(it->end - it->p) + 1;
  if (need > it->name_cap) {
    char *nn = realloc(it->name, need);
    if (!nn)
      return -ENOMEM;
    it->name = nn;
    it->name_cap = need;
  }
  size_t n = 0;
  while (it->p < it->end && *it->p != '"') {
    uint8_t c = *it->p++;
    if (c != '\\') {
      it->name[n++] = (char)c;
      continue;
    }
    if (it->p == it->end)
      return GTP_E_CORRUPT;
    c = *it->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c ? strchr(from, c) : NULL;
    if (k) {
      it->name[n++] = to[k - from];
    } else if (c == 'u' && it->end - it->p >= 4) {
      int h[4];
      for (int i = 0; i < 4; i++)
        h[i] = hexval(it->p[i]);
      /* Only \u00XX is ever written (a byte below 0x20). */
      if (h[0] != 0 || h[1] != 0 || h[2] < 0 || h[3] < 0)
        return GTP_E_CORRUPT;
      it->name[n++] = (char)(h[2] << 4 | h[3]);
      it->p += 4;
    } else {
      return GTP_E_CORRUPT;
    }
  }
  if (it->p == it->end)
    return GTP_E_CORRUPT;
  it->p++; /* the closing quote */
  it->name[n] = 0;
  *len = n;
  return 0;
}

int sum_json_span_next(sum_json_it *it, sum_json_span *out) {
  if (it->state == 2)
    return 0;
  if (it->state == 0) {
    if (!eat(it, '['))
      return GTP_E_CORRUPT;
    it->state = 1;
    if (eat(it, ']'))
      goto end;
  } else if (eat(it, ']')) {
    goto end;
  } else if (!eat(it, ',')) {
    return GTP_E_CORRUPT;
  }
  int rc = 0;
  size_t len = 0;
  if (!eat(it, '[') || (rc = get_i64(it, &out->kind)) < 0 || !eat(it, ',') ||
      (rc = get_str(it, &len)) < 0 || !eat(it, ',') ||
      (rc = get_i64(it, &out->thread)) < 0 || !eat(it, ',') ||
      (rc = get_i64(it, &out->start_ns)) < 0 || !eat(it, ',') ||
      (rc = get_i64(it, &out->dur_ns)) < 0 || !eat(it, ',') ||
      (rc = get_i64(it, &out->carried)) < 0 || !eat(it, ']'))
    return rc == -ENOMEM ? rc : GTP_E_CORRUPT;
  out->name = it->name;
  out->name_len = len;
  return 1;
end:
  it->state = 2;
  blanks(it);
  return it->p == it->end ? 0 : GTP_E_CORRUPT;
}
