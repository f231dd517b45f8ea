/* prng.h: the deterministic generators tests, fuzzers and benchmarks draw
 * their noise from: the same numbers on every run and every machine, so a
 * failure or a figure reproduces, and no libc state (rand() is shared with
 * whatever else runs in the process). Each takes the caller's state, so
 * that every user keeps its own seed and sequence.
 *
 * Header-only (static inline), included by relative path ("../lib/prng.h"
 * from tests/X/, "../tests/lib/prng.h" from bench/) so that no target needs
 * another include path; the libFuzzer builds compile it straight from
 * source. Production code keeps its own (agent/sender.c's backoff jitter):
 * nothing in agent/ may include a test header.
 */
#ifndef GT_TESTS_PRNG_H
#define GT_TESTS_PRNG_H

#include <stdint.h>

/* Marsaglia's xorshift64 (shifts 13, 7, 17): *s moves on and is returned.
 * *s MUST NOT be 0, which maps to itself. */
static inline uint64_t xorshift64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x;
}

/* xorshift64* (shifts 12, 25, 27, then a multiply that mixes the high
 * bits into the low ones): better low bits than xorshift64. *s MUST NOT be
 * 0. */
static inline uint64_t xorshift64star(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Knuth's MMIX linear congruential step: *s moves on and is returned. Its
 * low bits are weak: take the high ones (x >> 33). Any seed will do. */
static inline uint64_t lcg64(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s;
}

#endif
