/* intern.c: see intern.h for the invariants. */
#include "config.h"

#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int gt__strtab_init(gt__strtab *t, size_t max_ents, size_t max_bytes) {
  memset(t, 0, sizeof *t);
  t->max_ents = max_ents;
  t->max_bytes = max_bytes;
  t->nslots = pow2_at_least(max_ents * 2);
  t->slots = calloc(t->nslots, sizeof *t->slots);
  t->ents = calloc(max_ents, sizeof *t->ents);
  /* GT_STRCACHE_PAD: the cache check reads whole words (intern.h); zeroed
   * so those bytes are never uninitialized memory. */
  t->arena = calloc(1, max_bytes + GT_STRCACHE_PAD);
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

void gt__strtab_fini(gt__strtab *t) {
  if (t->slots == NULL)
    return;
  free(t->slots);
  free(t->ents);
  free(t->arena);
  pthread_mutex_destroy(&t->lock);
  memset(t, 0, sizeof *t);
}

uint32_t gt__strtab_intern(gt__strtab *t, const char *s, size_t len,
                           const char **copy) {
  if (len > GTP_STRING_MAX)
    len = GTP_STRING_MAX;
  uint32_t h = hash_bytes(s, len);
  uint32_t id = 0;
  pthread_mutex_lock(&t->lock);
  size_t mask = t->nslots - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t v = t->slots[i];
    if (v == 0) {
      if (t->n >= t->max_ents || t->arena_len + len + 1 > t->max_bytes)
        break; /* full: id 0 */
      char *c = t->arena + t->arena_len;
      memcpy(c, s, len);
      c[len] = '\0';
      t->arena_len += len + 1;
      t->ents[t->n] = (gt__strent){c, (uint32_t)len, h};
      t->n++;
      t->slots[i] = (uint32_t)t->n;
      id = (uint32_t)t->n;
      *copy = c;
      break;
    }
    gt__strent *e = &t->ents[v - 1];
    if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0) {
      id = v;
      *copy = e->s;
      break;
    }
  }
  pthread_mutex_unlock(&t->lock);
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
      strs[k] = (gtp_str){t->ents[i].s, t->ents[i].len};
      bytes += t->ents[i].len + 16;
      k++;
      i++;
    }
    if (k == 0) { /* a single string over the chunk size: alone */
      ids[0] = i + 1;
      strs[0] = (gtp_str){t->ents[i].s, t->ents[i].len};
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
  if (t->slots == NULL)
    return; /* never initialized */
  memset(t->slots, 0, t->nslots * sizeof *t->slots);
  t->n = 0;
  t->arena_len = 0;
}

size_t gt__strtab_mem(const gt__strtab *t) {
  return t->nslots * sizeof *t->slots + t->max_ents * sizeof *t->ents +
         t->max_bytes + GT_STRCACHE_PAD;
}

uint32_t gt__stack_hash(const uint64_t *pcs, size_t depth) {
  return hash_bytes(pcs, depth * sizeof *pcs) ^ (uint32_t)depth;
}

int gt__stacktab_init(gt__stacktab *t, size_t max_ents, size_t max_pcs) {
  memset(t, 0, sizeof *t);
  t->max_ents = max_ents;
  t->max_pcs = max_pcs;
  t->nslots = pow2_at_least(max_ents * 2);
  t->slots = calloc(t->nslots, sizeof *t->slots);
  t->ents = calloc(max_ents, sizeof *t->ents);
  t->arena = malloc(max_pcs * sizeof *t->arena);
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

void gt__stacktab_fini(gt__stacktab *t) {
  if (t->slots == NULL)
    return;
  free(t->slots);
  free(t->ents);
  free(t->arena);
  pthread_mutex_destroy(&t->lock);
  memset(t, 0, sizeof *t);
}

uint32_t gt__stacktab_intern(gt__stacktab *t, const uint64_t *pcs, size_t depth,
                             uint32_t h, const uint64_t **copy) {
  uint32_t id = 0;
  pthread_mutex_lock(&t->lock);
  size_t mask = t->nslots - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    uint32_t v = t->slots[i];
    if (v == 0) {
      if (t->n >= t->max_ents || t->arena_len + depth > t->max_pcs)
        break;
      uint64_t *c = t->arena + t->arena_len;
      memcpy(c, pcs, depth * sizeof *pcs);
      t->arena_len += depth;
      t->ents[t->n] = (gt__stackent){c, (uint32_t)depth, h};
      t->n++;
      t->slots[i] = (uint32_t)t->n;
      id = (uint32_t)t->n;
      *copy = c;
      break;
    }
    gt__stackent *e = &t->ents[v - 1];
    if (e->hash == h && e->depth == depth &&
        memcmp(e->pcs, pcs, depth * sizeof *pcs) == 0) {
      id = v;
      *copy = e->pcs;
      break;
    }
  }
  pthread_mutex_unlock(&t->lock);
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
      pcs[k] = t->ents[i].pcs;
      depths[k] = t->ents[i].depth;
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
  if (t->slots == NULL)
    return; /* stacks off: the table was never initialized */
  memset(t->slots, 0, t->nslots * sizeof *t->slots);
  t->n = 0;
  t->arena_len = 0;
}

size_t gt__stacktab_mem(const gt__stacktab *t) {
  return t->nslots * sizeof *t->slots + t->max_ents * sizeof *t->ents +
         t->max_pcs * sizeof *t->arena;
}
