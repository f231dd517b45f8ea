/* intern.h: per-generation string and stack tables, and the per-thread
 * caches in front of them.
 *
 * A generation's events name strings and stacks by small ids that restart
 * every generation (format.h). One gt__strtab / gt__stacktab exists per
 * generation parity; writers of generation G intern into table[G & 1] and the
 * sealer drains and resets it once no thread can still write G.
 *
 * Invariants:
 *  1. A table's storage (entries and the byte arena) MUST NOT move or be
 *     reused before the sealer resets it, otherwise the per-thread caches,
 *     which point into it, would compare against foreign bytes.
 *  2. A cache entry MUST be used only for the generation stamp it was filled
 *     in, and only after the caller's bytes have been compared with the
 *     interned copy (length and every byte), otherwise a caller reusing a
 *     char buffer with new contents would be traced under the old name.
 *     The one exception: an entry marked GT_STRCACHE_FIXED, whose key lay
 *     (bytes and NUL) in a read-only segment of the main program when it
 *     was filled (gt__rodata_has). Those bytes never change and are never
 *     unmapped while the process lives (unlike a shared library's, which
 *     dlclose can unmap and a later mapping reuse), so comparing them again
 *     could only ever succeed.
 *  3. Tables are bounded (entries and bytes fixed at init); a full table
 *     returns id 0 ("no string"/"no stack"), never grows.
 *  4. A string table MUST keep GT_STRCACHE_PAD readable bytes after every
 *     copy's NUL (the arena is allocated that much larger), otherwise the
 *     word-wise cache check could read past the arena.
 *  5. Interning takes no lock (a writer must never wait for another, nor
 *     for the sealer). An entry and its bytes are reserved together by one
 *     compare-and-swap of `top` (so entries stay in arena order and the
 *     bounds of invariant 3 hold exactly), written, and only then published
 *     by a compare-and-swap of an empty slot (release; readers load slots
 *     with acquire), so a slot never names a half-written entry. Two
 *     threads adding the same new string at once both reserve; the loser
 *     of the slot finds the winner's equal entry and uses its id, and its
 *     own entry stays in the table unnamed by any slot: encoded like any
 *     other (an id no event uses), counted against the bounds, never read
 *     through a slot. So every slot names a distinct entry, and entries
 *     may outnumber used slots.
 */
#ifndef GT_INTERN_H
#define GT_INTERN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* One interning table for strings and stacks alike: an open-addressing
 * hash over byte sequences copied into a fixed arena. A string is len bytes
 * (plus the NUL and GT_STRCACHE_PAD the table adds), a stack is depth
 * program counters (8 bytes each). */
typedef struct gt__itab_ent {
  const void *p; /* into arena */
  uint32_t len;  /* in units: bytes of a string, frames of a stack */
  uint32_t hash;
} gt__itab_ent;

typedef struct gt__itab {
  /* Written once at init. */
  size_t max_ents, max_bytes, nslots;
  size_t unit; /* bytes per unit: 1 (strings) or 8 (stacks) */
  size_t nul;  /* bytes written after each copy: 1 (a string's NUL) or 0 */
  size_t pad;  /* readable bytes kept after the arena (invariant 4) */
  /* Shared by the writers without a lock (invariant 5); the sealer reads
   * them plainly once no writer can use the table. */
  _Atomic uint32_t *slots; /* 0 = empty, else entry index + 1 */
  gt__itab_ent *ents;      /* [i] written by the thread that reserved it */
  /* Entries reserved << 32 | arena bytes reserved: one CAS takes both. */
  _Atomic uint64_t top;
  uint8_t *arena; /* malloc'd: 8-byte aligned, so stack copies are too */
} gt__itab;

/* Entries reserved so far (every one written once no writer is left). */
static inline size_t gt__itab_count(const gt__itab *t) {
  return (size_t)(atomic_load_explicit(&((gt__itab *)t)->top,
                                       memory_order_relaxed) >>
                  32);
}

/* Arena bytes reserved so far. */
static inline size_t gt__itab_bytes(const gt__itab *t) {
  return (size_t)(uint32_t)atomic_load_explicit(&((gt__itab *)t)->top,
                                                memory_order_relaxed);
}

/* 0 or -errno. max_bytes: arena bytes (copies and NULs). */
int gt__itab_init(gt__itab *t, size_t max_ents, size_t max_bytes, size_t unit,
                  size_t nul, size_t pad);
void gt__itab_fini(gt__itab *t);
/* Id (>= 1) of the len units at p, adding them if new; 0 when full.
 * *copy receives the interned copy. Lock-free (invariant 5). */
uint32_t gt__itab_intern(gt__itab *t, const void *p, size_t len, uint32_t hash,
                         const void **copy);
void gt__itab_reset(gt__itab *t);
size_t gt__itab_mem(const gt__itab *t);
/* 0, or minus the number of the first invariant that does not hold (1..3
 * of the header above, for this table's own bookkeeping). Caller is the
 * only user. Tests call it; debug builds also check it at
 * each reset (counted, never aborting: this runs inside the host). */
int gt__itab_check_invariants(const gt__itab *t);

/* Strings. */
typedef gt__itab gt__strtab;

int gt__strtab_init(gt__strtab *t, size_t max_ents, size_t max_bytes);
void gt__strtab_fini(gt__strtab *t);
/* Id (>= 1) of s[0..len) in this table, adding it if new; 0 when full.
 * *copy receives the interned copy. Lock-free. */
uint32_t gt__strtab_intern(gt__strtab *t, const char *s, size_t len,
                           const char **copy);
/* Appends STRINGS records (split under GTP_RECORD_MAX). Caller only when no
 * writer can use the table. Returns 0 or the wbuf error. */
int gt__strtab_encode(gt__strtab *t, gtp_wbuf *b);
void gt__strtab_reset(gt__strtab *t);
size_t gt__strtab_mem(const gt__strtab *t);

/* Stacks: the same table over arrays of program counters. */
typedef gt__itab gt__stacktab;

int gt__stacktab_init(gt__stacktab *t, size_t max_ents, size_t max_pcs);
void gt__stacktab_fini(gt__stacktab *t);
uint32_t gt__stacktab_intern(gt__stacktab *t, const uint64_t *pcs, size_t depth,
                             uint32_t hash, const uint64_t **copy);
int gt__stacktab_encode(gt__stacktab *t, gtp_wbuf *b);
void gt__stacktab_reset(gt__stacktab *t);
size_t gt__stacktab_mem(const gt__stacktab *t);
uint32_t gt__stack_hash(const uint64_t *pcs, size_t depth);

/* Per-thread caches: direct-mapped, owner thread only. */
#define GT_STRCACHE_SIZE 256
typedef struct gt__strcache_ent {
  const char *key;  /* caller's pointer */
  const char *copy; /* interned copy (table arena) */
  uint64_t stamp;   /* generation stamp */
  uint32_t len, id; /* len may carry GT_STRCACHE_FIXED */
} gt__strcache_ent;

/* In a cache entry's len: the key is in the main program's read-only
 * bytes, no compare needed (invariant 2). Above any string's length
 * (GTP_STRING_MAX). */
#define GT_STRCACHE_FIXED 0x80000000u

/* Whether [p, p + n) lies inside one read-only segment of the main
 * program (its text and constants: where string literals of the program
 * live). The segments are read once per process (dl_iterate_phdr, first
 * call from gt_start, before any writer runs); afterwards lock-free and
 * cheap (a few compares), called on cache fills only. */
void gt__rodata_init(void);
int gt__rodata_has(const void *p, size_t n);

#define GT_STACKCACHE_SIZE 64
typedef struct gt__stackcache_ent {
  const uint64_t *copy;
  uint64_t stamp;
  uint32_t hash, depth, id;
} gt__stackcache_ent;

static inline size_t gt__strcache_slot(const char *s) {
  uintptr_t k = (uintptr_t)s;
  return (size_t)((k ^ (k >> 9)) * 0x9E3779B97F4A7C15ull >> 56) &
         (GT_STRCACHE_SIZE - 1);
}

/* Bytes a strtab arena keeps readable after its last copy's NUL, so the
 * cache check below may load a whole word that starts at or before a
 * copy's NUL (the bytes past it are masked off, never compared). */
#define GT_STRCACHE_PAD 8

/* Hit only if the entry was filled for this stamp and s still holds the same
 * bytes, NUL included (invariant 2).
 *
 * Word at a time, because the caller's string must be re-read on every
 * event and a byte loop cost ~7 instructions per byte (half of an instant
 * event's cost). Why the 8-byte loads are safe:
 *  - copy: the table keeps GT_STRCACHE_PAD readable bytes after every copy.
 *  - s: s[0] is readable (a string has at least its NUL). The word loads
 *    cover [s, s + n rounded up to 8); when that range stays inside s[0]'s
 *    4096-byte block it stays inside s[0]'s page (pages are multiples of
 *    4096) and cannot fault, even if the caller's string is now shorter
 *    than n. Otherwise (a string near a page end, rare) the byte loop runs,
 *    which stops at the first difference and so never reads past s's NUL.
 * Bytes past the NUL at c[n - 1] are masked off, so what lies beyond either
 * string never decides the result. The loads may cover bytes of
 * neighbouring objects: not a bug, but ASan/TSan would report it, hence
 * no_sanitize. */
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
__attribute__((no_sanitize("address", "thread")))
#endif
static inline uint32_t
gt__strcache_get(const gt__strcache_ent *e, const char *s, uint64_t stamp) {
  if (e->key != s || e->stamp != stamp)
    return 0;
  /* A literal of the main program: its bytes cannot have changed. */
  if (e->len & GT_STRCACHE_FIXED)
    return e->id;
  const char *c = e->copy;
  size_t n = (size_t)e->len + 1; /* bytes to compare, NUL included */
  size_t i = 0;
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (__builtin_expect(((uintptr_t)s & 4095) + ((n + 7) & ~(size_t)7) <= 4096,
                       1)) {
    uint64_t a, b, diff = 0;
    if (n <= 16) {
      /* One or two words (most names): no loop, fewer instructions. The
       * same loads as the loop below makes for such n. */
      __builtin_memcpy(&a, s, 8);
      __builtin_memcpy(&b, c, 8);
      if (n <= 8)
        return ((a ^ b) & (~0ull >> (64 - 8 * n))) == 0 ? e->id : 0;
      diff = a ^ b;
      __builtin_memcpy(&a, s + 8, 8);
      __builtin_memcpy(&b, c + 8, 8);
      diff |= (a ^ b) & (~0ull >> (128 - 8 * n));
      return diff == 0 ? e->id : 0;
    }
    for (; i + 8 < n; i += 8) { /* whole words before the last */
      __builtin_memcpy(&a, s + i, 8);
      __builtin_memcpy(&b, c + i, 8);
      diff |= a ^ b;
    }
    /* Last word: its first n - i (1..8) bytes count. */
    __builtin_memcpy(&a, s + i, 8);
    __builtin_memcpy(&b, c + i, 8);
    diff |= (a ^ b) & (~0ull >> (64 - 8 * (n - i)));
    return diff == 0 ? e->id : 0;
  }
#endif
  for (; i < n; i++)
    if (s[i] != c[i])
      return 0;
  return e->id;
}

/* The event fast paths' hit: an entry of this stamp for a literal of the
 * main program (GT_STRCACHE_FIXED), which needs no compare. Any other hit
 * (a name in a reused buffer, a string of a shared library) is left to the
 * out-of-line continuation, which calls gt__strcache_get: with the compare
 * inlined, its loop's registers made every fast path save two callee-saved
 * registers (4 instructions per event, on every kind). */
static inline uint32_t gt__strcache_get_fixed(const gt__strcache_ent *e,
                                              const char *s, uint64_t stamp) {
  if (e->key != s || e->stamp != stamp || !(e->len & GT_STRCACHE_FIXED))
    return 0;
  return e->id;
}

#endif
