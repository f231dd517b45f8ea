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
#include "text.h"

/* ----------------------------------------------------------- the writer */

/* The writer formats into room reserved for the worst case (gtp_wbuf_grow)
 * and gives back what it did not use: one call per entry instead of one
 * per piece (a small generation's spans, counter and logs took 4,900
 * instructions through gtp_wbuf_put per piece, bench_commit). */
#define I64_MAX_CHARS 20 /* "-9223372036854775808" */

static char *put_i64(char *o, int64_t v) {
  static const char two[] = "00010203040506070809"
                            "10111213141516171819"
                            "20212223242526272829"
                            "30313233343536373839"
                            "40414243444546474849"
                            "50515253545556575859"
                            "60616263646566676869"
                            "70717273747576777879"
                            "80818283848586878889"
                            "90919293949596979899";
  char tmp[I64_MAX_CHARS];
  size_t n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  while (u >= 100) {
    unsigned d = (unsigned)(u % 100) * 2;
    u /= 100;
    tmp[sizeof tmp - 1 - n++] = two[d + 1];
    tmp[sizeof tmp - 1 - n++] = two[d];
  }
  if (u >= 10) {
    tmp[sizeof tmp - 1 - n++] = two[u * 2 + 1];
    tmp[sizeof tmp - 1 - n++] = two[u * 2];
  } else {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + u);
  }
  if (v < 0)
    *o++ = '-';
  memcpy(o, tmp + sizeof tmp - n, n);
  return o + n;
}

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Room for a name as a JSON string: quotes, and 6 bytes per byte at worst
 * (\u00XX). SIZE_MAX when it would not fit a size_t (the wbuf refuses). */
static size_t str_room(gtp_str s) {
  return s.len > (SIZE_MAX - 64) / 6 ? SIZE_MAX : 2 + 6 * s.len;
}

/* A JSON string: '"', '\\' and bytes below 0x20 escaped, others as they
 * are (sum_json.h: names keep their bytes). */
static char *put_str(char *o, gtp_str s) {
  static const char hex[] = "0123456789abcdef";
  const uint8_t *p = (const uint8_t *)s.ptr;
  *o++ = '"';
  for (size_t i = 0; i < s.len; i++) {
    uint8_t c = p[i];
    if (c >= 0x20 && c != '"' && c != '\\') {
      *o++ = (char)c;
    } else if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else {
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      o += 6;
    }
  }
  *o++ = '"';
  return o;
}

/* Reserves room bytes at the end of b: the start, or NULL (b->err set). */
static char *reserve(gtp_wbuf *b, size_t room) {
  return room == SIZE_MAX ? (b->err = b->err ? b->err : GTP_E_TOOBIG, NULL)
                          : (char *)gtp_wbuf_grow(b, room);
}

/* Gives back what the entry at start did not use of its room. */
static void trim(gtp_wbuf *b, const char *start, size_t room, const char *o) {
  b->len -= room - (size_t)(o - start);
}

int sum_json_spans(gtp_wbuf *b, const gtp_summary *s) {
  for (size_t i = 0; i < s->nspans && !b->err; i++) {
    const gtp_sum_span *sp = &s->spans[i];
    const gtp_sum_name *n = &s->names[sp->name];
    size_t room = str_room(n->name);
    room = room == SIZE_MAX ? room : room + 4 * I64_MAX_CHARS + 16;
    char *start = reserve(b, room), *o = start;
    if (!o)
      break;
    memcpy(o, i ? ",[" : "[[", 2);
    o = put_i64(o + 2, n->kind);
    *o++ = ',';
    o = put_str(o, n->name);
    *o++ = ',';
    o = put_i64(o, clamp64(sp->thread));
    *o++ = ',';
    o = put_i64(o, sp->start_ns);
    *o++ = ',';
    o = put_i64(o, clamp64(sp->dur_ns));
    memcpy(o, sp->carried ? ",1]" : ",0]", 3);
    o += 3;
    if (i + 1 == s->nspans)
      *o++ = ']';
    trim(b, start, room, o);
  }
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
  int c = gtp_bytes_cmp(a->name.ptr, a->name.len, b->name.ptr, b->name.len);
  if (c)
    return c;
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
  for (size_t i = 0; i < n && !b->err; i++) {
    if (drop[i])
      continue;
    const gtp_sum_counter *c = &s->counters[i];
    size_t room = str_room(c->name);
    room = room == SIZE_MAX ? room : room + 4 * I64_MAX_CHARS + 16;
    char *start = reserve(b, room), *o = start;
    if (!o)
      break;
    memcpy(o, first ? "[[" : ",[", 2);
    first = 0;
    o = put_str(o + 2, c->name);
    *o++ = ',';
    o = put_i64(o, clamp64(c->count));
    *o++ = ',';
    o = put_i64(o, c->min);
    *o++ = ',';
    o = put_i64(o, c->max);
    *o++ = ',';
    o = put_i64(o, c->last);
    *o++ = ']';
    trim(b, start, room, o);
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
  for (size_t i = 0; i < n && !b->err; i++) {
    if (drop[i])
      continue;
    size_t room = str_room(s->logs[i].name);
    room = room == SIZE_MAX ? room : room + I64_MAX_CHARS + 8;
    char *start = reserve(b, room), *o = start;
    if (!o)
      break;
    memcpy(o, first ? "[[" : ",[", 2);
    first = 0;
    o = put_str(o + 2, s->logs[i].name);
    *o++ = ',';
    o = put_i64(o, clamp64(s->logs[i].count));
    *o++ = ']';
    trim(b, start, room, o);
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
        h[i] = gtp_hex_digit(it->p[i]);
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
