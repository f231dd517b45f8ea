/* clock.h: the agent's tick clock.
 *
 * rdtsc shifted right by gt__clock_shift when the TSC is invariant (cpuid
 * 0x80000007 EDX bit 8), else CLOCK_MONOTONIC in ns. The shift is chosen at
 * init so one tick stays <= 32 ns (format bar), because fewer ticks per
 * event delta means fewer varint bytes. Readers map ticks to time through
 * each generation's CLOCK record, so the rate need not be known exactly.
 */
#ifndef GT_CLOCK_H
#define GT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Hidden: read on every event; without it a -fPIC build (libgentrace.so)
 * loads each through the GOT. */
extern int gt__clock_tsc /* written once by gt__clock_init */
    __attribute__((visibility("hidden")));
extern unsigned gt__clock_shift __attribute__((visibility("hidden")));

/* Idempotent; thread-safe (pthread_once). */
void gt__clock_init(void);

static inline uint64_t gt__ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gt__ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_expect(gt__clock_tsc, 1))
    return __builtin_ia32_rdtsc() >> gt__clock_shift;
#endif
  return gt__ns(CLOCK_MONOTONIC);
}

/* The TSC alone, for paths that already know gt__clock_tsc is set: no
 * clock_gettime call in them, so they need no register saves. */
static inline uint64_t gt__ticks_tsc(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc() >> gt__clock_shift;
#else
  return gt__ticks(); /* never reached: gt__clock_tsc is 0 here */
#endif
}

#endif
