/* clock.c: picks the tick source once (see clock.h). */
#include "config.h"

#include "clock.h"

#include <pthread.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int gt__clock_tsc;
unsigned gt__clock_shift;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void clock_pick(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
    return;
  if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8)))
    return;
  /* Measure the TSC rate over ~2 ms of CLOCK_MONOTONIC to pick the largest
   * shift keeping a tick <= 32 ns. */
  uint64_t n0 = gt__ns(CLOCK_MONOTONIC), t0 = __builtin_ia32_rdtsc();
  uint64_t n1;
  do
    n1 = gt__ns(CLOCK_MONOTONIC);
  while (n1 - n0 < 2000000);
  uint64_t t1 = __builtin_ia32_rdtsc();
  double per_ns = (double)(t1 - t0) / (double)(n1 - n0); /* TSC per ns */
  if (per_ns < 0.05)
    return; /* implausible: keep the monotonic clock */
  unsigned shift = 0;
  while (shift < 16 && (double)(2u << shift) / per_ns <= 32.0)
    shift++;
  gt__clock_shift = shift;
  gt__clock_tsc = 1;
#endif
}

void gt__clock_init(void) {
  pthread_once(&once, clock_pick);
}
