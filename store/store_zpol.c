/* store_zpol.c: a compressor's zstd context and its per-session choice of
 * the shortest match (see store_zpol.h for why).
 *
 * State: one ZSTD_CCtx at the store's level, a scratch buffer for the
 * measured slices, and a direct-mapped table of sessions, each with the
 * shortest match chosen for it and how many more generations that choice
 * holds.
 *
 * Invariants:
 *   1. Every frame is a whole, ordinary zstd frame whatever the choice:
 *      the shortest match only changes how zstd searches, never the
 *      format, so readers (and downloads that pass stored frames on) need
 *      nothing new. Otherwise the choice would have to be stored.
 *   2. Memory is fixed at creation (the table, one scratch buffer of
 *      ZSTD_compressBound(STORE_ZPOL_PROBE)), whatever the sessions or
 *      sizes: otherwise a fleet of sessions would grow each compressor.
 *   3. A measurement compresses at most 3 x STORE_ZPOL_PROBE bytes, once
 *      per STORE_ZPOL_HOLD generations of a session of at least
 *      STORE_ZPOL_MIN bytes: at most 3 x 64 KiB / (32 x 256 KiB) = 2.3%
 *      more zstd work, 0.15% for 4 MiB generations.
 *   4. A frame at another level (store_zpol_compress_at: the store's fast
 *      level while the compressors are behind) leaves the context at the
 *      store's level, otherwise the next ordinary frame would silently be
 *      made at the fast one.
 */
#include "config.h"

#include "store_zpol.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

typedef struct zpol_slot {
  uint8_t session[16];
  uint8_t mml;  /* 0: empty */
  uint8_t left; /* generations before the next measurement */
} zpol_slot;

struct store_zpol {
  ZSTD_CCtx *cctx;
  uint8_t *scratch; /* invariant 2 */
  size_t scratch_cap;
  int level; /* the store's level, restored after a fast frame */
  int last_mml;
  uint64_t probes;
  zpol_slot slots[STORE_ZPOL_SLOTS];
};

store_zpol *store_zpol_new(int level) {
  store_zpol *z = calloc(1, sizeof *z);
  if (!z)
    goto fail_z;
  z->level = level;
  z->cctx = ZSTD_createCCtx();
  if (!z->cctx)
    goto fail_cctx;
  if (ZSTD_isError(
          ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level)))
    goto fail_scratch;
  z->scratch_cap = ZSTD_compressBound(STORE_ZPOL_PROBE);
  z->scratch = malloc(z->scratch_cap);
  if (!z->scratch)
    goto fail_scratch;
  return z;
fail_scratch:
  ZSTD_freeCCtx(z->cctx);
fail_cctx:
  free(z);
fail_z:
  return NULL;
}

void store_zpol_free(store_zpol *z) {
  if (!z)
    return;
  ZSTD_freeCCtx(z->cctx);
  free(z->scratch);
  free(z);
}

static zpol_slot *slot_of(store_zpol *z, const uint8_t session[16]) {
  uint64_t a, b;
  memcpy(&a, session, 8);
  memcpy(&b, session + 8, 8);
  uint64_t h = (a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xBF58476D1CE4E5B9ull;
  return &z->slots[(h >> 40) % STORE_ZPOL_SLOTS];
}

/* One frame of src at shortest match mml (0: zstd's own). */
static size_t frame(store_zpol *z, int mml, const uint8_t *src, size_t len,
                    void *dst, size_t cap) {
  size_t rc = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_minMatch, mml);
  return ZSTD_isError(rc) ? rc : ZSTD_compress2(z->cctx, dst, cap, src, len);
}

/* The measurement: a slice from the middle, at 5, 6 and 7 (invariant 3).
 * The shorter of 5 and 6 that stores less (5 only when 2% less: it is the
 * dearer search), and only when it stores at most STORE_ZPOL_GAIN of 7. */
static int measure(store_zpol *z, const uint8_t *src, size_t len) {
  size_t n = len < STORE_ZPOL_PROBE ? len : STORE_ZPOL_PROBE;
  const uint8_t *p = src + (len - n) / 2;
  size_t sz[3];
  z->probes++;
  for (int m = 5; m <= 7; m++) {
    sz[m - 5] = frame(z, m, p, n, z->scratch, z->scratch_cap);
    if (ZSTD_isError(sz[m - 5]))
      return 7;
  }
  int best = sz[0] * 100 < sz[1] * 98 ? 5 : 6;
  return sz[best - 5] * 100 <= sz[2] * STORE_ZPOL_GAIN ? best : 7;
}

size_t store_zpol_compress(store_zpol *z, const uint8_t session[16],
                           const uint8_t *src, size_t len, void *dst,
                           size_t cap) {
  int mml = 0;
  if (len >= STORE_ZPOL_MIN) {
    zpol_slot *sl = slot_of(z, session);
    if (sl->mml == 0 || sl->left == 0 || memcmp(sl->session, session, 16)) {
      memcpy(sl->session, session, 16);
      sl->mml = (uint8_t)measure(z, src, len);
      sl->left = STORE_ZPOL_HOLD;
    }
    sl->left--;
    mml = sl->mml;
  }
  z->last_mml = mml;
  return frame(z, mml, src, len, dst, cap);
}

size_t store_zpol_compress_at(store_zpol *z, int level, const uint8_t *src,
                              size_t len, void *dst, size_t cap) {
  size_t rc = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(rc))
    rc = frame(z, 0, src, len, dst, cap);
  /* Back to the store's level (invariant 4): frame() sets the shortest
   * match before every other frame. */
  size_t back =
      ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, z->level);
  z->last_mml = 0;
  return ZSTD_isError(back) ? back : rc;
}

int store_zpol_last_mml(const store_zpol *z) {
  return z->last_mml;
}

uint64_t store_zpol_probes(const store_zpol *z) {
  return z->probes;
}
