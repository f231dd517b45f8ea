/* symreq.c: see symreq.h. The name cache is open addressing over a
 * power-of-two table, grown up to SYMREQ_NAMES_MAX slots in use. */
#include "config.h"

#include "symreq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SYMREQ_NAMES_MAX (1u << 16)
#define SYMREQ_BYTES_MAX (16u << 20)

typedef struct name_ent {
  uint64_t hash; /* 0 = empty */
  uint64_t off;
  uint8_t bid_len;
  uint8_t bid[GTP_BUILDID_MAX];
  int named; /* 0: the cache could not name it (cached as such) */
  char *name;
  size_t len;
} name_ent;

struct symreq {
  gtp_symbolizer sym;
  symcache *cache;
  symcache_budget budget;
  name_ent *tab;
  size_t cap, used, bytes;
};

static uint64_t key_hash(const gtp_module *m, uint64_t off) {
  uint64_t h = 14695981039346656037ull ^ off;
  for (size_t i = 0; i < m->build_id_len; i++)
    h = (h ^ m->build_id[i]) * 1099511628211ull;
  h ^= h >> 29;
  return h ? h : 1;
}

static name_ent *slot(symreq *r, uint64_t h, const gtp_module *m,
                      uint64_t off) {
  size_t mask = r->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    name_ent *e = &r->tab[i];
    if (e->hash == 0)
      return e;
    if (e->hash == h && e->off == off && e->bid_len == m->build_id_len &&
        !memcmp(e->bid, m->build_id, m->build_id_len)) /* invariant 1 */
      return e;
  }
}

static int grow(symreq *r) {
  size_t nc = r->cap ? r->cap * 2 : 1024;
  name_ent *old = r->tab;
  size_t oc = r->cap;
  name_ent *t = calloc(nc, sizeof *t);
  if (!t)
    return -ENOMEM;
  r->tab = t;
  r->cap = nc;
  for (size_t i = 0; i < oc; i++) {
    if (!old[i].hash)
      continue;
    size_t j = old[i].hash & (nc - 1);
    while (t[j].hash)
      j = (j + 1) & (nc - 1);
    t[j] = old[i];
  }
  free(old);
  return 0;
}

static int resolve(void *ctx, const gtp_module *m, uint64_t off,
                   gtp_wbuf *out) {
  symreq *r = ctx;
  if (m->build_id_len == 0 || m->build_id_len > GTP_BUILDID_MAX)
    return 0;
  uint64_t h = key_hash(m, off);
  name_ent *e = r->cap ? slot(r, h, m, off) : NULL;
  if (e && e->hash) {
    if (e->named)
      gtp_wbuf_put(out, e->name, e->len);
    return e->named;
  }
  size_t mark = out->len;
  int rc = symcache_resolve(r->cache, m, off, &r->budget, out);
  if (rc < 0)
    return rc;
  if (rc == SYMCACHE_OVER_BUDGET)
    return 0;
  /* Remember it, within the bounds (a budget refusal, above, is not
   * remembered: it says nothing about the frame). */
  if (r->used >= SYMREQ_NAMES_MAX || r->bytes >= SYMREQ_BYTES_MAX)
    return rc;
  if ((r->used + 1) * 2 > r->cap) {
    if (grow(r) < 0)
      return rc; /* not remembered; the name is fine */
  }
  e = slot(r, h, m, off);
  size_t len = rc == 1 ? out->len - mark : 0;
  char *copy = NULL;
  if (len) {
    if (!(copy = malloc(len)))
      return rc;
    memcpy(copy, out->data + mark, len);
  }
  e->hash = h;
  e->off = off;
  e->bid_len = (uint8_t)m->build_id_len;
  memcpy(e->bid, m->build_id, m->build_id_len);
  e->named = rc == 1;
  e->name = copy;
  e->len = len;
  r->used++;
  r->bytes += len + sizeof *e;
  return rc;
}

symreq *symreq_new(symcache *cache) {
  symreq *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->cache = cache;
  r->budget.loads = SYMREQ_LOADS;
  r->budget.lookups = SYMREQ_LOOKUPS;
  r->sym.resolve = resolve;
  r->sym.ctx = r;
  return r;
}

void symreq_free(symreq *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->cap; i++)
    free(r->tab[i].name);
  free(r->tab);
  free(r);
}

const gtp_symbolizer *symreq_symbolizer(symreq *r) {
  return &r->sym;
}
