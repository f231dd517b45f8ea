/* acklat.c: ACK latency histograms (acklat.h has the design note and the
 * invariants). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>

#include "acklat.h"

/* Upper bounds in microseconds: fine around the 50 ms goal, coarse past
 * a second. */
static const uint64_t bound_us[ACKLAT_BUCKETS - 1] = {
    500,    1000,   2000,    5000,    10000,  20000,  30000,
    40000,  50000,  75000,   100000,  150000, 200000, 300000,
    500000, 750000, 1000000, 2000000, 5000000};

void acklat_add(acklat *h, uint64_t ns) {
  uint64_t us = ns / 1000;
  unsigned i = 0;
  while (i < ACKLAT_BUCKETS - 1 && us > bound_us[i])
    i++;
  /* Invariant 1: the loop thread is the only writer. */
  __atomic_store_n(&h->b[i], h->b[i] + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&h->sum_ns, h->sum_ns + ns, __ATOMIC_RELAXED);
}

void acklat_metrics(const acklat *h, gtp_wbuf *b, const char *name,
                    const char *help) {
  char line[256];
  int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s histogram\n",
                   name, help, name);
  gtp_wbuf_put(b, line, (size_t)n);
  uint64_t cum = 0;
  for (unsigned i = 0; i < ACKLAT_BUCKETS; i++) {
    cum += __atomic_load_n(&h->b[i], __ATOMIC_RELAXED);
    if (i < ACKLAT_BUCKETS - 1)
      n = snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %" PRIu64 "\n",
                   name, (double)bound_us[i] / 1e6, cum);
    else
      n = snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n",
                   name, cum);
    gtp_wbuf_put(b, line, (size_t)n);
  }
  n = snprintf(line, sizeof line, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name,
               (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9,
               name, cum);
  gtp_wbuf_put(b, line, (size_t)n);
}
