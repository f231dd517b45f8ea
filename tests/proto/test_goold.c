/* test_goold.c: the old Go trace format reader (proto/goold.c) on traces
 * built byte by byte (Go 1.11-1.21 layout): goroutine per P across
 * batches, task ends on another goroutine, the stable time order, the log
 * value inline, STW kinds per version, and hostile inputs. Real Go 1.19
 * traces are read by tests/tools/test_import.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "goold.h"
#include "varint.h"

typedef struct ob {
  uint8_t b[4096];
  size_t n;
} ob;

static void u(ob *o, uint64_t v) {
  o->n += gtp_uvarint_put(o->b + o->n, v);
}
static void byte(ob *o, uint8_t v) {
  o->b[o->n++] = v;
}

/* An event with inline args (1..3 of them, timestamp delta first). */
static void inl(ob *o, uint8_t typ, int n, ...) {
  va_list ap;
  byte(o, (uint8_t)(typ | (n - 1) << 6));
  va_start(ap, n);
  for (int i = 0; i < n; i++)
    u(o, va_arg(ap, uint64_t));
  va_end(ap);
}

/* An event with length-prefixed args. */
static void lng(ob *o, uint8_t typ, int n, ...) {
  uint8_t tmp[128];
  size_t k = 0;
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++)
    k += gtp_uvarint_put(tmp + k, va_arg(ap, uint64_t));
  va_end(ap);
  byte(o, (uint8_t)(typ | 3 << 6));
  u(o, k);
  memcpy(o->b + o->n, tmp, k);
  o->n += k;
}

static void str(ob *o, uint64_t id, const char *s) {
  byte(o, 37);
  u(o, id);
  u(o, strlen(s));
  memcpy(o->b + o->n, s, strlen(s));
  o->n += strlen(s);
}

/* P0 runs G5: task 9 "job", region "work", log; P1 (a batch written
 * FIRST, later in time) runs G6 which ends task 9; P0's second batch
 * continues G5 (its goroutine carries over) and closes the region; a GC
 * with an STW of kind 0 on P0. Frequency 1e9 (ticks = ns). */
static void build(ob *o, unsigned v) {
  memset(o, 0, sizeof *o);
  char h[17];
  snprintf(h, sizeof h, "go 1.%u trace", v);
  memcpy(o->b, h, 16);
  o->n = 16;
  inl(o, 1, 2, 0, 1000);    /* batch P0 @1000 */
  inl(o, 2, 1, 1000000000); /* frequency */
  str(o, 1, "job");
  str(o, 2, "work");
  str(o, 3, "queue");
  inl(o, 14, 3, 0, 5, 1);        /* GoStart G5 @1000 */
  lng(o, 45, 5, 10, 9, 0, 1, 0); /* TaskCreate 9 "job" @1010 */
  lng(o, 47, 5, 10, 9, 0, 2, 0); /* Region begin "work" @1020 */
  lng(o, 48, 4, 10, 9, 3, 0);    /* Log queue=... @1030 */
  u(o, 8);
  memcpy(o->b + o->n, "enqueued", 8);
  o->n += 8;
  inl(o, 1, 2, 1, 5000);        /* batch P1 @5000 */
  inl(o, 14, 3, 0, 6, 1);       /* GoStart G6 @5000 */
  inl(o, 46, 3, 100, 9, 0);     /* TaskEnd 9 @5100 */
  inl(o, 1, 2, 0, 2000);        /* batch P0 again @2000 */
  lng(o, 47, 5, 0, 9, 1, 2, 0); /* Region end "work" @2000 */
  inl(o, 9, 2, 10, 0);          /* STW start kind 0 @2010 */
  inl(o, 7, 3, 0, 1, 0);        /* GC start @2010 (same time) */
  inl(o, 10, 1, 10);            /* STW done @2020 */
  inl(o, 20, 2, 10, 0);         /* GoBlock @2030: G5 off P0 */
  inl(o, 8, 1, 1000);           /* GC done @3030 */
}

static void test_goold__user_events_on_their_goroutines(void **state) {
  (void)state;
  ob o;
  build(&o, 19);
  gtp_goold t;
  size_t off;
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), 0);
  assert_int_equal(t.version, 19);
  assert_int_equal(t.freq, 1000000000);
  assert_int_equal(t.nevents, 9);
  assert_int_equal(t.span_ns, 4100); /* 1000 .. 5100 */
  struct {
    uint8_t kind;
    int64_t ns;
    uint64_t g;
    const char *name;
  } want[] = {
      {GTP_GO_TASK_BEGIN, 10, 5, "job"},
      {GTP_GO_REGION_BEGIN, 20, 5, "work"},
      {GTP_GO_LOG, 30, 5, "queue"},
      {GTP_GO_REGION_END, 1000, 5, "work"},
      {GTP_GO_STW_BEGIN, 1010, 5, "GC mark termination"},
      {GTP_GO_GC_BEGIN, 1010, 5, NULL},
      {GTP_GO_STW_END, 1020, 5, NULL},
      {GTP_GO_GC_END, 2030, 0, NULL},
      {GTP_GO_TASK_END, 4100, 6, NULL},
  };
  for (size_t i = 0; i < 9; i++) {
    gtp_goold_event *e = &t.events[i];
    assert_int_equal(e->kind, want[i].kind);
    assert_int_equal(e->ns, want[i].ns);
    assert_int_equal(e->g, want[i].g);
    if (want[i].name) {
      assert_int_equal(e->name.len, strlen(want[i].name));
      assert_memory_equal(e->name.ptr, want[i].name, e->name.len);
    }
  }
  assert_int_equal(t.events[0].task, 9);
  assert_int_equal(t.events[8].task, 9);
  assert_int_equal(t.events[2].value.len, 8);
  assert_memory_equal(t.events[2].value.ptr, "enqueued", 8);
  assert_int_equal(t.kinds[GTP_GO_REGION_BEGIN], 1);
  gtp_goold_fini(&t);

  /* 1.21 numbers STW kinds by reason: 0 is "unknown" there. */
  build(&o, 21);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), 0);
  assert_int_equal(t.events[4].kind, GTP_GO_STW_BEGIN);
  assert_int_equal(t.events[4].name.len, 0);
  gtp_goold_fini(&t);
}

static void test_goold__hostile_inputs_are_refused(void **state) {
  (void)state;
  ob o;
  build(&o, 19);
  gtp_goold t;
  size_t off;
  /* Every prefix: parses (a shorter trace) or fails cleanly; ASan watches
   * for reads past the end. */
  for (size_t n = 0; n < o.n; n++) {
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, o.b, n);
    int rc = gtp_goold_parse(c, n, &t, &off);
    if (rc == 0) {
      assert_true(t.nevents <= 9);
      gtp_goold_fini(&t);
    } else {
      assert_true(rc < 0 && off <= n);
    }
    free(c);
  }
  /* Versions outside 1.11-1.21, and not a Go trace. */
  build(&o, 10);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_VERSION);
  build(&o, 22);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_VERSION);
  assert_int_equal(gtp_goold_parse((const uint8_t *)"gentrace\1\0\0\0\0\0\0\0",
                                   16, &t, &off),
                   GTP_E_MAGIC);
  /* CPU samples (type 49) exist from 1.19 only. */
  build(&o, 18);
  inl(&o, 49, 1, 0);
  size_t at = o.n - 2;
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_UNKNOWN);
  assert_int_equal(off, at);
  /* A length-prefixed block over 2048 bytes. */
  build(&o, 19);
  byte(&o, 45 | 3 << 6);
  u(&o, 4096);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_TOOBIG);
  /* A region event with the wrong number of arguments. */
  build(&o, 19);
  lng(&o, 47, 3, 0, 9, 0);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_CORRUPT);
  /* Duplicate string ids; no frequency. */
  build(&o, 19);
  str(&o, 1, "again");
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_CORRUPT);
  ob f = {0};
  memcpy(f.b, "go 1.19 trace\0\0\0", 16);
  f.n = 16;
  inl(&f, 1, 2, 0, 1000);
  inl(&f, 14, 3, 0, 5, 1);
  assert_int_equal(gtp_goold_parse(f.b, f.n, &t, &off), GTP_E_CORRUPT);
  /* Timestamp overflow. */
  build(&o, 19);
  inl(&o, 20, 2, UINT64_MAX, 0);
  assert_int_equal(gtp_goold_parse(o.b, o.n, &t, &off), GTP_E_CORRUPT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_goold__user_events_on_their_goroutines),
      cmocka_unit_test(test_goold__hostile_inputs_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
