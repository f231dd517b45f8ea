/* varint.h: LEB128 unsigned varints and zigzag, as Go's encoding/binary.
 *
 * Inline because the agent's hot path writes them straight into its buffer.
 * A uvarint is at most GTP_UVARINT_MAX (10) bytes; a decoder that sees an 11th
 * continuation byte, or a 10th byte above 1 (overflow past 64 bits), fails
 * with GTP_E_VARINT. Decoders never read at or past `end`.
 */
#ifndef GTP_VARINT_H
#define GTP_VARINT_H

#include <stddef.h>
#include <stdint.h>

#include "gtp_error.h"

#define GTP_UVARINT_MAX 10

/* Writes v at p (room for GTP_UVARINT_MAX bytes is the caller's duty).
 * Returns the number of bytes written (1..10). */
static inline size_t gtp_uvarint_put(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* Bytes gtp_uvarint_put would write for v. */
static inline size_t gtp_uvarint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Five bytes or more (wall-clock nanoseconds take nine: every CLOCK
 * record), with the first four of p already in v: on from the fifth, not
 * reading those again, with the checks of gtp_uvarint_get's loop. Out of
 * line, so that the common short cases stay small enough to inline. */
__attribute__((noinline, unused)) static int
gtp_uvarint_get_long_(const uint8_t **pp, const uint8_t *end, uint64_t v,
                      uint64_t *out) {
  const uint8_t *p = *pp;
  for (size_t i = 4; i < GTP_UVARINT_MAX; i++) {
    if (end - p <= (ptrdiff_t)i)
      return GTP_E_TRUNC;
    uint8_t b = p[i];
    if (i == GTP_UVARINT_MAX - 1 && b > 1)
      return GTP_E_VARINT;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *pp = p + i + 1;
      *out = v;
      return 0;
    }
  }
  return GTP_E_VARINT;
}

/* Reads one uvarint from [*pp, end). On success advances *pp and returns 0.
 * Returns GTP_E_TRUNC if the input ends inside the varint, GTP_E_VARINT if it
 * is longer than 10 bytes or overflows; *pp is then left unchanged. */
static inline int gtp_uvarint_get(const uint8_t **pp, const uint8_t *end,
                                  uint64_t *out) {
  const uint8_t *p = *pp;
  /* One byte is the common case (small deltas, string ids, flags): a
   * branch instead of the loop (bench_search S3, summary at commit). */
  if (p < end && *p < 0x80) {
    *out = *p;
    *pp = p + 1;
    return 0;
  }
  /* Two to four bytes (values below 2^28: deltas, counter values) without
   * a bounds check per byte when four bytes are there. */
  if (end - p >= 4) {
    uint64_t v = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7;
    if (p[1] < 0x80) {
      *out = v;
      *pp = p + 2;
      return 0;
    }
    v |= (uint64_t)(p[2] & 0x7f) << 14;
    if (p[2] < 0x80) {
      *out = v;
      *pp = p + 3;
      return 0;
    }
    v |= (uint64_t)(p[3] & 0x7f) << 21;
    if (p[3] < 0x80) {
      *out = v;
      *pp = p + 4;
      return 0;
    }
    return gtp_uvarint_get_long_(pp, end, v, out);
  }
  uint64_t v = 0;
  unsigned shift = 0;
  for (size_t i = 0; i < GTP_UVARINT_MAX; i++) {
    if (p >= end)
      return GTP_E_TRUNC;
    uint8_t b = *p++;
    if (i == GTP_UVARINT_MAX - 1 && b > 1)
      return GTP_E_VARINT;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *pp = p;
      *out = v;
      return 0;
    }
    shift += 7;
  }
  return GTP_E_VARINT;
}

static inline uint64_t gtp_zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t gtp_unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Little-endian fixed-width helpers (the format is little-endian throughout).
 */
static inline void gtp_put_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t gtp_get_u32le(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static inline void gtp_put_u16le(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline uint16_t gtp_get_u16le(const uint8_t *p) {
  return (uint16_t)(p[0] | p[1] << 8);
}

#endif /* GTP_VARINT_H */
