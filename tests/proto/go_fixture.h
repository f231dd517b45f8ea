/* go_fixture.h: Go 1.22+ trace generations built byte by byte, for the
 * tests of proto/gotrace.c and proto/goconv.c (static, header-only: each
 * test binary includes it once). */
#ifndef GT_TESTS_GO_FIXTURE_H
#define GT_TESTS_GO_FIXTURE_H

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "varint.h"

typedef struct gb {
  uint8_t buf[8192];
  size_t len;
  uint8_t data[4096]; /* the batch being built */
  size_t dlen;
} gb;

static inline void put(uint8_t *b, size_t *n, uint64_t v) {
  *n += gtp_uvarint_put(b + *n, v);
}
static inline void d_u(gb *g, uint64_t v) {
  put(g->data, &g->dlen, v);
}
static inline void d_b(gb *g, uint8_t v) {
  g->data[g->dlen++] = v;
}
static inline void d_bytes(gb *g, const char *s) {
  size_t n = strlen(s);
  d_u(g, n);
  memcpy(g->data + g->dlen, s, n);
  g->dlen += n;
}

/* Closes the data as one batch with this header. */
static inline void batch(gb *g, uint64_t gen, uint64_t m, uint64_t base) {
  g->buf[g->len++] = 1; /* EvEventBatch */
  put(g->buf, &g->len, gen);
  put(g->buf, &g->len, m);
  put(g->buf, &g->len, base);
  put(g->buf, &g->len, g->dlen);
  memcpy(g->buf + g->len, g->data, g->dlen);
  g->len += g->dlen;
  g->dlen = 0;
}

/* A timed event: type, delta, args. */
static inline void ev(gb *g, uint8_t type, uint64_t dt, int n, ...) {
  va_list ap;
  d_b(g, type);
  d_u(g, dt);
  va_start(ap, n);
  for (int i = 0; i < n; i++)
    d_u(g, va_arg(ap, uint64_t));
  va_end(ap);
}

#define FREQ 15625000u /* Linux: nanotime / 64 */

/* Frequency (and, for 1.25+, a sync batch with a clock snapshot at
 * ts 1000 = unix second 1700000000 + 5 ns). */
static inline void sync_batch(gb *g, uint64_t gen, unsigned version) {
  if (version >= 25) {
    d_b(g, 50);
    d_b(g, 8);
    d_u(g, FREQ);
    d_b(g, 51);
    d_u(g, 10); /* base 990 + 10 = ts 1000 */
    d_u(g, 123456);
    d_u(g, 1700000000);
    d_u(g, 5);
    batch(g, gen, 0, 990);
  } else {
    d_b(g, 8);
    d_u(g, FREQ);
    batch(g, gen, 0, 0);
  }
}

static inline void strings_batch(gb *g, uint64_t gen) {
  static const char *s[] = {NULL,    "job",      "work",
                            "queue", "enqueued", "GC mark termination"};
  d_b(g, 4);
  for (uint64_t i = 1; i < 6; i++) {
    d_b(g, 5);
    d_u(g, i);
    d_bytes(g, s[i]);
  }
  batch(g, gen, 0, 0);
}

/* One generation: M 7 runs G 11, which begins task 3 and region "work",
 * logs, ends the region, blocks; M 9 (flushed first) runs G 12 which ends
 * task 3; a GC with its STW on M 7. */
static inline void workload(gb *g, uint64_t gen, unsigned version) {
  sync_batch(g, gen, version);
  strings_batch(g, gen);
  /* M 9 first in the body, though its events are later. */
  ev(g, 25, 0, 3, 12, 9, 2); /* GoStatus g12 on m9 running  @2000 */
  ev(g, 41, 500, 2, 3, 0);   /* UserTaskEnd task 3           @2500 */
  batch(g, gen, 9, 2000);
  ev(g, 16, 0, 2, 11, 1);        /* GoStart g11                  @1000 */
  ev(g, 40, 100, 4, 3, 0, 1, 0); /* UserTaskBegin 3 "job"        @1100 */
  ev(g, 42, 100, 3, 3, 2, 0);    /* UserRegionBegin "work"       @1200 */
  ev(g, 44, 100, 4, 3, 3, 4, 0); /* UserLog queue=enqueued       @1300 */
  ev(g, 43, 100, 3, 3, 2, 0);    /* UserRegionEnd "work"         @1400 */
  ev(g, 26, 50, 2, 5, 0);        /* STWBegin "GC mark term."     @1450 */
  ev(g, 29, 10, 2, 1, 0);        /* GCBegin seq 1                @1460 */
  ev(g, 27, 10, 0);              /* STWEnd                       @1470 */
  ev(g, 20, 30, 2, 0, 0);        /* GoBlock                      @1500 */
  ev(g, 30, 1000, 1, 1);         /* GCEnd                        @2500 */
  batch(g, gen, 7, 1000);
}

static inline const uint8_t *tail_ptr(gb *g, size_t *len) {
  *len = g->len;
  return g->buf;
}

#endif
