/* bench_hotpath: a fixed number of hot-path events for instruction counting.
 *
 * Wall-clock ns/event (bench_agent, A1) swings with the load of the shared
 * build machine; instruction counts do not. Run it under callgrind and read
 * the inclusive cost of the loop functions, each of which makes
 * exactly N calls (after a warm-up that takes the buffers and fills the
 * string cache):
 *
 *   valgrind --tool=callgrind --callgrind-out-file=cg.out \
 *     ./bench/bench_hotpath 100000
 *   callgrind_annotate --inclusive=yes cg.out | grep loop_
 *
 * Instructions per event = Ir(loop_x) / N (region and task pairs: / 2N). Buffer
 * refills (one per 64 KiB) are included, amortized, as in real use.
 * Not part of make check. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "gentrace.h"

__attribute__((noinline)) static void loop_instant(int n) {
  for (int i = 0; i < n; i++)
    gt_instant("bench.instant");
}

__attribute__((noinline)) static void loop_region(int n) {
  for (int i = 0; i < n; i++) {
    gt_region_begin("bench.region");
    gt_region_end();
  }
}

/* A caller that reuses one char buffer: the cache must check the bytes. */
__attribute__((noinline)) static void loop_reused_buf(int n) {
  char name[32] = "bench.reused.buffer.name";
  for (int i = 0; i < n; i++) {
    __asm__ volatile("" ::"r"(name) : "memory");
    gt_instant(name);
  }
}

__attribute__((noinline)) static void loop_counter(int n) {
  for (int i = 0; i < n; i++)
    gt_counter("bench.counter", i & 1023);
}

__attribute__((noinline)) static void loop_log(int n) {
  for (int i = 0; i < n; i++)
    gt_log("bench.log", "request accepted");
}

/* Per event: a begin/end pair is two events (like loop_region). */
__attribute__((noinline)) static void loop_task(int n) {
  for (int i = 0; i < n; i++)
    gt_task_end(gt_task_begin("bench.task", 0));
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (n <= 0)
    n = 100000;
  gt_config c;
  gt_config_init(&c);
  c.addr = "127.0.0.1:1"; /* no daemon: the recording cost alone */
  c.period_ms = 60000;    /* no generation switch during the loops */
  c.buffer_mb = 64;
  c.spool_mb = 64;
  if (gt_start(&c) != 0) {
    fprintf(stderr, "bench_hotpath: gt_start failed\n");
    return 1;
  }
  loop_instant(1000);
  loop_region(1000);
  loop_reused_buf(1000);
  loop_counter(1000);
  loop_log(1000);
  loop_task(1000);
  loop_instant(n);
  loop_region(n);
  loop_reused_buf(n);
  loop_counter(n);
  loop_log(n);
  loop_task(n);
  gt_stop();
  printf("bench_hotpath: %d events per loop\n", n);
  return 0;
}
