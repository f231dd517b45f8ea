/* intern.c: see intern.h for the invariants. One table (gt__itab) serves
 * strings and stacks; the gt__strtab_* and gt__stacktab_* functions only
 * say which units, terminator and padding a table uses, and how its
 * entries are encoded. */
#include "config.h"

#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint32_t hash_bytes(const void *p, size_t n) {
  /* FNV-1a: short names, few entries; quality is ample for open addressing
   * with a load factor under 1/2. */
  const uint8_t *b = p;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 16777619u;
  }
  return h;
}

static size_t pow2_at_least(size_t n) {
  size_t s = 16;
  while (s < n)
    s <<= 1;
  return s;
}

/* ------------------------------------------------------------ the table */

int gt__itab_init(gt__itab *t, size_t max_ents, size_t max_bytes, size_t unit,
                  size_t nul, size_t pad) {
  memset(t, 0, sizeof *t);
  t->max_ents = max_ents;
  t->max_bytes = max_bytes;
  t->unit = unit;
  t->nul = nul;
  t->pad = pad;
  t->nslots = pow2_at_least(max_ents * 2);
  t->slots = calloc(t->nslots, sizeof *t->slots);
  t->ents = calloc(max_ents, sizeof *t->ents);
  /* The padding is zeroed so the strings' word-wise cache check
   * (intern.h) never reads uninitialized memory. */
  t->arena =
      pad ? calloc(1, max_bytes + pad) : malloc(max_bytes ? max_bytes : 1);
  int rc = pthread_mutex_init(&t->lock, NULL);
  if (t->slots == NULL || t->ents == NULL || t->arena == NULL || rc != 0) {
    free(t->slots);
    free(t->ents);
    free(t->arena);
    if (rc == 0)
      pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof *t);
    return rc ? -rc : -ENOMEM;
  }
  return 0;
}

void gt__itab_fini(gt__itab *t) {
  if (t->slots == NULL)
    return;
  free(t->slots);
  free(t->ents);
  free(t->arena);
  pthread_mutex_destroy(&t->lock);
  memset(t, 0, sizeof *t);
}

uint32_t gt__itab_intern(gt__itab *t, const void *p, size_t len, uint32_t h,
                         const void **copy) {
  size_t bytes = len * t->unit;
  uint32_t id = 0;
  pthread_mutex_lock(&t->lock);
  size_t mask = t->nslots - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t v = t->slots[i];
    if (v == 0) {
      /* Invariant 3: a full table answers 0, never grows. */
      if (t->n >= t->max_ents || t->arena_len + bytes + t->nul > t->max_bytes)
        break;
      uint8_t *c = t->arena + t->arena_len;
      if (bytes)
        memcpy(c, p, bytes);
      if (t->nul)
        c[bytes] = 0;
      t->arena_len += bytes + t->nul;
      t->ents[t->n] = (gt__itab_ent){c, (uint32_t)len, h};
      t->n++;
      t->slots[i] = (uint32_t)t->n;
      id = (uint32_t)t->n;
      *copy = c;
      break;
    }
    gt__itab_ent *e = &t->ents[v - 1];
    if (e->hash == h && e->len == len && memcmp(e->p, p, bytes) == 0) {
      id = v;
      *copy = e->p;
      break;
    }
  }
  pthread_mutex_unlock(&t->lock);
  return id;
}

void gt__itab_reset(gt__itab *t) {
  if (t->slots == NULL)
    return; /* never initialized (stacks off) */
  GTP_ASSERT(gt__itab_check_invariants(t) == 0);
  memset(t->slots, 0, t->nslots * sizeof *t->slots);
  t->n = 0;
  t->arena_len = 0;
}

size_t gt__itab_mem(const gt__itab *t) {
  return t->nslots * sizeof *t->slots + t->max_ents * sizeof *t->ents +
         t->max_bytes + t->pad;
}

int gt__itab_check_invariants(const gt__itab *t) {
  if (t->slots == NULL)
    return 0;
  /* 3: bounded. */
  if (t->n > t->max_ents || t->arena_len > t->max_bytes ||
      t->nslots < 2 * t->max_ents)
    return -3;
  /* 1: every entry points into the arena, in order, without overlap. */
  const uint8_t *next = t->arena;
  for (size_t i = 0; i < t->n; i++) {
    const gt__itab_ent *e = &t->ents[i];
    if ((const uint8_t *)e->p != next)
      return -1;
    next += (size_t)e->len * t->unit + t->nul;
  }
  if (next != t->arena + t->arena_len)
    return -1;
  /* Each entry is reachable from exactly one slot. */
  size_t used = 0;
  for (size_t i = 0; i < t->nslots; i++) {
    if (t->slots[i] > t->n)
      return -3;
    used += t->slots[i] != 0;
  }
  return used == t->n ? 0 : -3;
}

/* --------------------------------------------------------------- strings */

int gt__strtab_init(gt__strtab *t, size_t max_ents, size_t max_bytes) {
  return gt__itab_init(t, max_ents, max_bytes, 1, 1, GT_STRCACHE_PAD);
}

void gt__strtab_fini(gt__strtab *t) {
  gt__itab_fini(t);
}

uint32_t gt__strtab_intern(gt__strtab *t, const char *s, size_t len,
                           const char **copy) {
  if (len > GTP_STRING_MAX)
    len = GTP_STRING_MAX;
  const void *c = NULL;
  uint32_t id = gt__itab_intern(t, s, len, hash_bytes(s, len), &c);
  if (id)
    *copy = c;
  return id;
}

int gt__strtab_encode(gt__strtab *t, gtp_wbuf *b) {
  /* One STRINGS record per chunk that stays well under GTP_RECORD_MAX. */
  uint64_t ids[256];
  gtp_str strs[256];
  size_t i = 0;
  while (i < t->n) {
    size_t k = 0, bytes = 0;
    while (i < t->n && k < 256 && bytes + t->ents[i].len < (512u << 10)) {
      ids[k] = i + 1;
      strs[k] = (gtp_str){t->ents[i].p, t->ents[i].len};
      bytes += t->ents[i].len + 16;
      k++;
      i++;
    }
    if (k == 0) { /* a single string over the chunk size: alone */
      ids[0] = i + 1;
      strs[0] = (gtp_str){t->ents[i].p, t->ents[i].len};
      k = 1;
      i++;
    }
    int rc = gtp_put_strings(b, ids, strs, k);
    if (rc < 0)
      return rc;
  }
  return b->err;
}

void gt__strtab_reset(gt__strtab *t) {
  gt__itab_reset(t);
}

size_t gt__strtab_mem(const gt__strtab *t) {
  return gt__itab_mem(t);
}

/* ---------------------------------------------------------------- stacks */

uint32_t gt__stack_hash(const uint64_t *pcs, size_t depth) {
  return hash_bytes(pcs, depth * sizeof *pcs) ^ (uint32_t)depth;
}

int gt__stacktab_init(gt__stacktab *t, size_t max_ents, size_t max_pcs) {
  return gt__itab_init(t, max_ents, max_pcs * sizeof(uint64_t),
                       sizeof(uint64_t), 0, 0);
}

void gt__stacktab_fini(gt__stacktab *t) {
  gt__itab_fini(t);
}

uint32_t gt__stacktab_intern(gt__stacktab *t, const uint64_t *pcs, size_t depth,
                             uint32_t h, const uint64_t **copy) {
  const void *c = NULL;
  uint32_t id = gt__itab_intern(t, pcs, depth, h, &c);
  if (id)
    *copy = c;
  return id;
}

int gt__stacktab_encode(gt__stacktab *t, gtp_wbuf *b) {
  uint64_t ids[256];
  const uint64_t *pcs[256];
  size_t depths[256];
  size_t i = 0;
  while (i < t->n) {
    size_t k = 0;
    /* 256 stacks x 128 frames x 10 bytes stays under GTP_RECORD_MAX. */
    while (i < t->n && k < 256) {
      ids[k] = i + 1;
      pcs[k] = t->ents[i].p;
      depths[k] = t->ents[i].len;
      k++;
      i++;
    }
    int rc = gtp_put_stacks(b, ids, pcs, depths, k);
    if (rc < 0)
      return rc;
  }
  return b->err;
}

void gt__stacktab_reset(gt__stacktab *t) {
  gt__itab_reset(t);
}

size_t gt__stacktab_mem(const gt__stacktab *t) {
  return gt__itab_mem(t);
}
