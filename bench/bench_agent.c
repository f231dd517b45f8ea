/* bench_agent: the agent's bars A1 (ns per event), A2 (bytes per event),
 * A3 (slowdown at 100k events/s per thread). Prints BENCH lines (bench/README.md).
 * Not part of make check; run with `make bench-agent`. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "gentrace.h"
#include "../tests/lib/prng.h"

static uint64_t ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bench_line(const char *id, double value, const char *unit,
                       const char *base, double bval, double ratio,
                       const char *bar, int pass) {
  printf("BENCH id=%s value=%.3f unit=%s baseline=%s:%.3f ratio=%.3f bar=%s "
         "pass=%d\n",
         id, value, unit, base, bval, ratio, bar, pass);
}

static volatile uint64_t sink[1024];

/* Baseline of A1: read the TSC and store 8 bytes into a thread-local
 * buffer, the floor of any event recorder. */
static double rdtsc_store_ns(int n) {
  static __thread uint64_t buf[4096];
  uint64_t t0 = ns();
  for (int i = 0; i < n; i++) {
#if defined(__x86_64__)
    buf[i & 4095] = __builtin_ia32_rdtsc();
#else
    buf[i & 4095] = ns();
#endif
    __asm__ volatile("" ::"r"(buf) : "memory");
  }
  sink[0] = buf[n & 4095];
  return (double)(ns() - t0) / n;
}

static double instant_ns(int n) {
  uint64_t t0 = ns();
  for (int i = 0; i < n; i++)
    gt_instant("bench.instant");
  return (double)(ns() - t0) / n;
}

static double region_pair_ns(int n) {
  uint64_t t0 = ns();
  for (int i = 0; i < n; i++) {
    gt_region_begin("bench.region");
    gt_region_end();
  }
  return (double)(ns() - t0) / n;
}

static double best(double (*f)(int), int n, int reps) {
  double b = 1e18;
  for (int r = 0; r < reps; r++) {
    double v = f(n);
    if (v < b)
      b = v;
  }
  return b;
}

static void spin_work(unsigned iters) {
  uint64_t x = 88172645463325252ull;
  for (unsigned i = 0; i < iters; i++)
    xorshift64(&x);
  sink[1] = x;
}

/* ~10 us of work per event = 100k events/s on one thread. */
static double a3_run(unsigned iters, int events, int traced) {
  uint64_t t0 = ns();
  for (int i = 0; i < events; i++) {
    spin_work(iters);
    if (traced)
      gt_counter("a3.progress", i);
  }
  return (double)(ns() - t0);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  gt_config c;
  gt_config_init(&c);
  c.addr = "127.0.0.1:1"; /* no daemon: the recording cost alone */
  c.period_ms = 100;
  c.buffer_mb = 64;
  c.spool_mb = 256;

  /* A3 first, tracing off, to calibrate ~10 us of work. */
  unsigned iters = 1000;
  for (;;) {
    uint64_t t0 = ns();
    spin_work(iters);
    uint64_t d = ns() - t0;
    if (d >= 10000 || iters > (1u << 26))
      break;
    iters *= 2;
  }
  {
    uint64_t t0 = ns();
    for (int i = 0; i < 100; i++)
      spin_work(iters);
    double per = (double)(ns() - t0) / 100;
    iters = (unsigned)(iters * (10000.0 / per));
  }

  if (gt_start(&c) != 0) {
    fprintf(stderr, "bench_agent: gt_start failed\n");
    return 1;
  }
  int n = 2000000;
  instant_ns(n); /* warm: buffers, string cache */
  double base = best(rdtsc_store_ns, n, 5);
  double inst = best(instant_ns, n / 4, 5);
  double pair = best(region_pair_ns, n / 4, 5) / 2;
  bench_line("A1", inst, "ns/event(instant)", "rdtsc+store", base,
             inst / base, "<=2", inst / base <= 2.0);
  bench_line("A1", pair, "ns/event(region_begin+end)/2", "rdtsc+store", base,
             pair / base, "<=2", pair / base <= 2.0);
  /* The LTTng-UST half of A1 is measured by bench/report (bench/lttng_bench,
   * same run), which needs an unprivileged lttng-sessiond; not here. */
  gt_stop();

  /* A2: demo-like mix of regions, instants and counters; bytes of EVENTS
   * records (headers included) per event, from a flight-recorder snapshot. */
  c.period_ms = 10000;
  gt_start(&c);
  static const char *names[] = {"request", "parse", "auth", "db",
                                "db.query", "render", "cache"};
  unsigned seed = 1;
  for (int i = 0; i < 200000; i++) {
    gt_region_begin(names[0]);
    for (int k = 1; k < 6; k++) {
      gt_region_begin(names[k]);
      spin_work(20 + rand_r(&seed) % 200);
      gt_region_end();
    }
    if (i % 10 == 0)
      gt_instant(names[6]);
    gt_counter("latency_us", 50 + rand_r(&seed) % 500);
    gt_region_end();
  }
  char path[] = "/tmp/gentrace-bench-XXXXXX";
  int fd = mkstemp(path);
  gt_snapshot(fd);
  gt_stop();
  struct stat sb;
  fstat(fd, &sb);
  uint8_t *data = malloc((size_t)sb.st_size);
  if (pread(fd, data, (size_t)sb.st_size, 0) != sb.st_size)
    return 1;
  close(fd);
  unlink(path);
  gtp_file_reader fr;
  gtp_gen g;
  uint64_t bytes = 0, events = 0;
  gtp_file_reader_init(&fr, data, (size_t)sb.st_size);
  while (gtp_file_reader_next(&fr, &g) == 1) {
    size_t cur = 0;
    gtp_batch b;
    while (gtp_gen_next_batch(&g, &cur, &b) == 1) {
      bytes += b.events_len + 4 * 5; /* batch header varints, generous */
      events += b.nevents;
    }
    gtp_gen_fini(&g);
  }
  free(data);
  double bpe = events ? (double)bytes / (double)events : 0;
  bench_line("A2", bpe, "bytes/event", "lttng-ust(published)", 18.0, bpe / 18.0,
             "<=8", bpe > 0 && bpe <= 8.0);

  /* A3: interleave off/on runs, best of each. */
  int ev = 100000; /* ~1 s per run */
  double off = 1e30, on = 1e30;
  for (int r = 0; r < 3; r++) {
    double v = a3_run(iters, ev, 0);
    if (v < off)
      off = v;
    c.period_ms = 1000;
    gt_start(&c);
    v = a3_run(iters, ev, 1);
    gt_stop();
    if (v < on)
      on = v;
  }
  double slow = (on / off - 1.0) * 100.0;
  bench_line("A3", slow, "%slowdown@100k_ev/s", "tracing-off", off / 1e6,
             on / off, "<=1%", slow <= 1.0);
  return 0;
}
