/* intern.c: see intern.h for the invariants. One table (gt__itab) serves
 * strings and stacks; the gt__strtab_* and gt__stacktab_* functions only
 * say which units, terminator and padding a table uses, and how its
 * entries are encoded. */
#include "config.h"

#include "intern.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
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
  /* top packs both counts in 32 bits each. */
  if (max_ents >= UINT32_MAX || max_bytes >= UINT32_MAX)
    return -EINVAL;
  t->max_ents = max_ents;
  t->max_bytes = max_bytes;
  t->unit = unit;
  t->nul = nul;
  t->pad = pad;
  t->nslots = pow2_at_least(max_ents * 2);
  t->slots = calloc(t->nslots, sizeof *t->slots);
  t->ents = calloc(max_ents ? max_ents : 1, sizeof *t->ents);
  /* The padding is zeroed so the strings' word-wise cache check
   * (intern.h) never reads uninitialized memory. */
  t->arena =
      pad ? calloc(1, max_bytes + pad) : malloc(max_bytes ? max_bytes : 1);
  if (t->slots == NULL || t->ents == NULL || t->arena == NULL) {
    free((void *)t->slots);
    free(t->ents);
    free(t->arena);
    memset(t, 0, sizeof *t);
    return -ENOMEM;
  }
  atomic_init(&t->top, 0);
  return 0;
}

void gt__itab_fini(gt__itab *t) {
  if (t->slots == NULL)
    return;
  free((void *)t->slots);
  free(t->ents);
  free(t->arena);
  memset(t, 0, sizeof *t);
}

/* Reserves one entry and `bytes` arena bytes together (invariant 5):
 * the entry's index, or -1 when either bound would be passed (invariant 3:
 * a full table never grows). */
static long itab_reserve(gt__itab *t, size_t bytes, size_t *off) {
  uint64_t top = atomic_load_explicit(&t->top, memory_order_relaxed);
  for (;;) {
    uint64_t n = top >> 32, len = (uint32_t)top;
    if (n >= t->max_ents || len + bytes > t->max_bytes)
      return -1;
    if (atomic_compare_exchange_weak_explicit(
            &t->top, &top, (n + 1) << 32 | (len + bytes), memory_order_relaxed,
            memory_order_relaxed)) {
      *off = (size_t)len;
      return (long)n;
    }
  }
}

static int itab_same(const gt__itab *t, uint32_t v, const void *p, size_t len,
                     uint32_t h) {
  const gt__itab_ent *e = &t->ents[v - 1];
  return e->hash == h && e->len == len && memcmp(e->p, p, len * t->unit) == 0;
}

uint32_t gt__itab_intern(gt__itab *t, const void *p, size_t len, uint32_t h,
                         const void **copy) {
  size_t bytes = len * t->unit, mask = t->nslots - 1;
  long mine = -1; /* the entry this call reserved and wrote, if any */
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    /* Acquire: an entry named by a slot is whole (invariant 5). */
    uint32_t v = atomic_load_explicit(&t->slots[i], memory_order_acquire);
    if (v == 0) {
      if (mine < 0) {
        size_t off;
        mine = itab_reserve(t, bytes + t->nul, &off);
        if (mine < 0)
          return 0;
        uint8_t *c = t->arena + off;
        if (bytes)
          memcpy(c, p, bytes);
        if (t->nul)
          c[bytes] = 0;
        t->ents[mine] = (gt__itab_ent){c, (uint32_t)len, h};
      }
      uint32_t id = (uint32_t)mine + 1;
      if (atomic_compare_exchange_strong_explicit(&t->slots[i], &v, id,
                                                  memory_order_release,
                                                  memory_order_acquire)) {
        *copy = t->ents[mine].p;
        return id;
      }
      /* Another writer took this slot first: v is its entry, whole. */
    }
    if (itab_same(t, v, p, len, h)) {
      /* An entry this call reserved, if any, stays unnamed (invariant 5). */
      *copy = t->ents[v - 1].p;
      return v;
    }
  }
}

void gt__itab_reset(gt__itab *t) {
  if (t->slots == NULL)
    return; /* never initialized (stacks off) */
  GTP_ASSERT(gt__itab_check_invariants(t) == 0);
  /* No writer can use the table (the sealer's protocol): plain stores. */
  memset((void *)t->slots, 0, t->nslots * sizeof *t->slots);
  atomic_store_explicit(&t->top, 0, memory_order_relaxed);
}

size_t gt__itab_mem(const gt__itab *t) {
  return t->nslots * sizeof *t->slots + t->max_ents * sizeof *t->ents +
         t->max_bytes + t->pad;
}

int gt__itab_check_invariants(const gt__itab *t) {
  if (t->slots == NULL)
    return 0;
  size_t n = gt__itab_count(t), arena_len = gt__itab_bytes(t);
  /* 3: bounded. */
  if (n > t->max_ents || arena_len > t->max_bytes ||
      t->nslots < 2 * t->max_ents)
    return -3;
  /* 1: every entry points into the arena, in order, without overlap. */
  const uint8_t *next = t->arena;
  for (size_t i = 0; i < n; i++) {
    const gt__itab_ent *e = &t->ents[i];
    if ((const uint8_t *)e->p != next)
      return -1;
    next += (size_t)e->len * t->unit + t->nul;
  }
  if (next != t->arena + arena_len)
    return -1;
  /* 5: every slot names an entry, none named twice (entries a lost race
   * left unnamed are allowed). A bitmap would need memory; the table is
   * small and this runs in debug builds and tests only. */
  size_t used = 0;
  for (size_t i = 0; i < t->nslots; i++) {
    uint32_t v = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
    if (v > n)
      return -3;
    if (v == 0)
      continue;
    used++;
    const gt__itab_ent *e = &t->ents[v - 1];
    /* Named twice: the entry's own probe sequence reaches another slot
     * holding it before an empty one. */
    size_t mask = t->nslots - 1;
    for (size_t j = e->hash & mask; j != i; j = (j + 1) & mask) {
      uint32_t w = atomic_load_explicit(&t->slots[j], memory_order_relaxed);
      if (w == 0)
        return -3; /* unreachable from its own hash */
      if (w == v)
        return -3;
    }
  }
  return used <= n ? 0 : -3;
}

/* ------------------------------------------- the main program's rodata */

/* Read-only PT_LOAD segments of the main program: [lo, hi) each. Written
 * once (pthread_once) before the first session's stamp is published, read
 * by writers after they loaded the stamp (acquire), so never torn. */
#define RODATA_MAX 4
static struct { uintptr_t lo, hi; } rodata[RODATA_MAX];
static unsigned rodata_n;
static pthread_once_t rodata_once = PTHREAD_ONCE_INIT;

static int rodata_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  /* The first object is the main program. */
  for (int i = 0; i < info->dlpi_phnum && rodata_n < RODATA_MAX; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W))
      continue;
    uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
    rodata[rodata_n].lo = lo;
    rodata[rodata_n].hi = lo + ph->p_memsz;
    rodata_n++;
  }
  return 1; /* stop: only the main program */
}

static void rodata_scan(void) {
  dl_iterate_phdr(rodata_cb, NULL);
}

void gt__rodata_init(void) {
  pthread_once(&rodata_once, rodata_scan);
}

int gt__rodata_has(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p;
  for (unsigned i = 0; i < rodata_n; i++)
    if (a >= rodata[i].lo && a < rodata[i].hi && n <= rodata[i].hi - a)
      return 1;
  return 0;
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
  size_t i = 0, n = gt__itab_count(t);
  while (i < n) {
    size_t k = 0, bytes = 0;
    while (i < n && k < 256 && bytes + t->ents[i].len < (512u << 10)) {
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
  size_t i = 0, n = gt__itab_count(t);
  while (i < n) {
    size_t k = 0;
    /* 256 stacks x 128 frames x 10 bytes stays under GTP_RECORD_MAX. */
    while (i < n && k < 256) {
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
