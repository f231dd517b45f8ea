/* bench_crc: CRC-32C throughput, the checksum over every byte ingested (B2)
 * and every generation sealed.
 *
 *   bench_crc [KiB]     buffer size (default 256: a BATCH frame's worth)
 *
 * Prints, from the same run: gtp_crc32c (three interleaved streams on
 * SSE4.2), a single dependent crc32 chain over the same bytes (what
 * gtp_crc32c did before the interleave: the baseline), and memcpy of the
 * same bytes (the memory bound). Best of several rounds, so a preempted
 * round on a shared machine does not count. Never part of make check.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32c.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t one_chain(uint32_t c,
                                                           const uint8_t *p,
                                                           size_t n) {
  uint64_t c64 = ~c;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  uint32_t r = (uint32_t)c64;
  while (n--)
    r = _mm_crc32_u8(r, *p++);
  return ~r;
}
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum { ROUNDS = 7 };
static volatile uint32_t sink;

/* GB/s of the best round; each round runs fn over buf for ~total bytes. */
#define BEST(expr)                                                             \
  ({                                                                           \
    double best = 0;                                                           \
    for (int r = 0; r < ROUNDS; r++) {                                         \
      double t0 = now_s();                                                     \
      for (size_t i = 0; i < reps; i++)                                        \
        expr;                                                                  \
      double gbs = (double)n * (double)reps / (now_s() - t0) / 1e9;            \
      if (gbs > best)                                                          \
        best = gbs;                                                            \
    }                                                                          \
    best;                                                                      \
  })

int main(int argc, char **argv) {
  size_t kib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
  if (kib == 0 || kib > (1u << 20)) {
    fprintf(stderr, "usage: bench_crc [KiB 1..1048576]\n");
    return 2;
  }
  size_t n = kib << 10;
  size_t reps = (256u << 20) / n + 1;
  uint8_t *buf = malloc(n), *dst = malloc(n);
  if (!buf || !dst)
    return 1;
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)(i * 2654435761u >> 13);
  double crc = BEST(sink ^= gtp_crc32c(0, buf, n));
  double cpy = BEST((memcpy(dst, buf, n), sink ^= dst[i % n]));
#if defined(__x86_64__)
  if (one_chain(0, buf, n) != gtp_crc32c(0, buf, n)) {
    fprintf(stderr, "bench_crc: the two CRCs disagree\n");
    return 1;
  }
  double one = gtp__crc32c_have_hw() ? BEST(sink ^= one_chain(0, buf, n)) : 0;
#else
  double one = 0;
#endif
  printf("BENCH id=CRC value=%.2f unit=GB/s(%zuKiB) baseline=one-chain:%.2f "
         "ratio=%.2f memcpy=%.2f\n",
         crc, kib, one, one > 0 ? crc / one : 0, cpy);
  free(buf);
  free(dst);
  return 0;
}
