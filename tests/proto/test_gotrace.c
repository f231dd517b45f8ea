/* test_gotrace.c: the Go 1.22+ generation reader (proto/gotrace.c) on
 * generations built byte by byte here, so every field is known: goroutine
 * attribution across Ms, task ends on another M, the clock (snapshot or the
 * gentrace CLOCK), version tables, splitting a file into generations, and
 * hostile inputs. Recorded traces of the real runtime are read by
 * test_gotrace_go.sh (gocount.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gotrace.h"

#include "go_fixture.h"

/* -------------------------------------------------------------- tests */

static void test_gotrace__events_land_on_their_goroutines(void **state) {
  (void)state;
  for (unsigned v = 22; v <= 26; v++) {
    gb b = {0};
    workload(&b, 4, v);
    size_t len;
    const uint8_t *p = tail_ptr(&b, &len);
    gtp_go_gen g;
    size_t off = 99;
    assert_int_equal(gtp_go_parse(p, len, v, &g, &off), 0);
    assert_int_equal(g.gen, 4);
    assert_int_equal(g.freq, FREQ);
    assert_int_equal(g.nevents, 12);
    assert_int_equal(g.nbatches, 2);
    assert_int_equal(g.nstrings, 5);
    assert_int_equal(g.min_ts, 1000);
    assert_int_equal(g.max_ts, 2500);
    assert_int_equal(g.has_snapshot, v >= 25);
    gtp_go_iter it;
    assert_int_equal(gtp_go_iter_init(&it, &g), 0);
    gtp_go_event e;
    uint8_t want_kind[] = {
        GTP_GO_OTHER,    GTP_GO_TASK_BEGIN, GTP_GO_REGION_BEGIN,
        GTP_GO_LOG,      GTP_GO_REGION_END, GTP_GO_STW_BEGIN,
        GTP_GO_GC_BEGIN, GTP_GO_STW_END,    GTP_GO_OTHER,
        GTP_GO_OTHER,    GTP_GO_TASK_END,   GTP_GO_GC_END};
    uint64_t want_g[] = {11, 11, 11, 11, 11, 11, 11, 11, 0, 12, 12, 12};
    size_t i = 0;
    while (gtp_go_next(&it, &e) == 1) {
      assert_true(i < 12);
      assert_int_equal(e.kind, want_kind[i]);
      if (want_kind[i] != GTP_GO_GC_END && want_kind[i] != GTP_GO_OTHER)
        assert_int_equal(e.g, want_g[i]);
      if (e.kind == GTP_GO_TASK_BEGIN) {
        assert_int_equal(e.task, 3);
        assert_int_equal(e.name.len, 3);
        assert_memory_equal(e.name.ptr, "job", 3);
      }
      if (e.kind == GTP_GO_TASK_END) {
        assert_int_equal(e.task, 3);
        assert_int_equal(e.m, 9);
        assert_int_equal(e.ts, 2500);
      }
      if (e.kind == GTP_GO_LOG) {
        assert_memory_equal(e.name.ptr, "queue", 5);
        assert_memory_equal(e.value.ptr, "enqueued", 8);
      }
      if (e.kind == GTP_GO_STW_BEGIN)
        assert_memory_equal(e.name.ptr, "GC mark termination", 19);
      i++;
    }
    assert_int_equal(i, 12);
    assert_int_equal(g.kinds[GTP_GO_REGION_BEGIN], 1);
    assert_int_equal(g.kinds[GTP_GO_TASK_END], 1);
    gtp_go_iter_fini(&it);
    gtp_go_fini(&g);
  }
}

static void test_gotrace__clock_from_snapshot_or_gentrace_clock(void **state) {
  (void)state;
  gtp_clock c = {.end_real_ns = 5000000000000ll};
  /* 1.25+: the snapshot (ts 1000 = 1700000000 s + 5 ns) wins. */
  gb b = {0};
  workload(&b, 1, 25);
  gtp_go_gen g;
  assert_int_equal(gtp_go_parse(b.buf, b.len, 25, &g, NULL), 0);
  gtp_go_set_clock(&g, &c);
  assert_int_equal(gtp_go_wall_ns(&g, 1000), 1700000000000000005ll);
  assert_int_equal(gtp_go_wall_ns(&g, 2500), 1700000000000000005ll + 1500 * 64);
  assert_int_equal(gtp_go_wall_ns(&g, 999), 1700000000000000005ll - 64);
  gtp_go_fini(&g);
  /* 1.22: no snapshot: the latest event maps to the CLOCK's end. */
  memset(&b, 0, sizeof b);
  workload(&b, 1, 22);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 22, &g, NULL), 0);
  gtp_go_set_clock(&g, &c);
  assert_int_equal(gtp_go_wall_ns(&g, 2500), 5000000000000ll);
  assert_int_equal(gtp_go_wall_ns(&g, 1000), 5000000000000ll - 1500 * 64);
  assert_int_equal(gtp_go_ns(&g, 10), 640);
  gtp_go_fini(&g);
}

static void test_gotrace__version_tables(void **state) {
  (void)state;
  gtp_go_gen g;
  size_t off;
  /* GoSwitch (45) exists from 1.23; 1.22 refuses it at its offset. */
  gb b = {0};
  sync_batch(&b, 1, 22);
  ev(&b, 16, 0, 2, 11, 1);
  ev(&b, 45, 5, 2, 12, 1);
  size_t at = b.len + 5 + 4; /* batch header bytes before the data */
  batch(&b, 1, 7, 100);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 22, &g, &off), GTP_E_UNKNOWN);
  assert_int_equal(off, at);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 23, &g, &off), 0);
  assert_int_equal(g.nevents, 2);
  gtp_go_fini(&g);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 24, &g, &off), 0);
  gtp_go_fini(&g);
  /* 1.25 wants the sync batch, not a lone frequency. */
  assert_int_equal(gtp_go_parse(b.buf, b.len, 25, &g, &off), GTP_E_CORRUPT);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 21, &g, &off), GTP_E_VERSION);
  assert_int_equal(gtp_go_parse(b.buf, b.len, 27, &g, &off), GTP_E_VERSION);
  assert_int_equal(gtp_go_version_parse("1.23", 4), 23);
  assert_int_equal(gtp_go_version_parse("go 1.26 trace", 13), 26);
  assert_int_equal(gtp_go_version_parse("1.x", 3), 0);
  assert_int_equal(gtp_go_version_parse("2.1", 3), 0);
}

static void test_gotrace__split_finds_generation_edges(void **state) {
  (void)state;
  /* 1.23: two generations back to back, cut where the number changes. */
  gb b = {0};
  workload(&b, 1, 23);
  size_t first = b.len;
  workload(&b, 2, 23);
  size_t n;
  uint64_t gen;
  assert_int_equal(gtp_go_split(b.buf, b.len, 23, &n, &gen), 0);
  assert_int_equal(n, first);
  assert_int_equal(gen, 1);
  assert_int_equal(gtp_go_split(b.buf + n, b.len - n, 23, &n, &gen), 0);
  assert_int_equal(n, b.len - first);
  assert_int_equal(gen, 2);
  /* 1.26: the in-band marker ends each one; without it, truncated. */
  memset(&b, 0, sizeof b);
  workload(&b, 1, 26);
  b.buf[b.len++] = 52;
  first = b.len;
  workload(&b, 2, 26);
  assert_int_equal(gtp_go_split(b.buf, b.len, 26, &n, &gen), 0);
  assert_int_equal(n, first);
  gtp_go_gen g;
  assert_int_equal(gtp_go_parse(b.buf, n, 26, &g, NULL), 0);
  assert_true(g.end_marker);
  gtp_go_fini(&g);
  assert_int_equal(gtp_go_split(b.buf + n, b.len - n, 26, &n, &gen),
                   GTP_E_TRUNC);
  /* A file header. */
  assert_int_equal(
      gtp_go_file_version((const uint8_t *)"go 1.19 trace\0\0\0", 16), 19);
  assert_int_equal(
      gtp_go_file_version((const uint8_t *)"go 1.19 trace\0\0x", 16),
      GTP_E_MAGIC);
  assert_int_equal(gtp_go_file_version((const uint8_t *)"gentrace", 8),
                   GTP_E_TRUNC);
}

static void test_gotrace__hostile_inputs_are_refused(void **state) {
  (void)state;
  gtp_go_gen g;
  size_t off;
  gb b = {0};
  workload(&b, 1, 23);
  /* Every truncation fails cleanly (or parses a shorter valid prefix,
   * which then has fewer events); ASan checks no read goes past it. */
  for (size_t n = 0; n < b.len; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.buf, n);
    int rc = gtp_go_parse(copy, n, 23, &g, &off);
    if (rc == 0) {
      assert_true(g.nevents < 12);
      gtp_go_fini(&g);
    } else {
      assert_true(rc < 0);
    }
    free(copy);
  }
  /* Batches of two generations in one input. */
  gb c = {0};
  workload(&c, 1, 23);
  sync_batch(&c, 2, 23);
  assert_int_equal(gtp_go_parse(c.buf, c.len, 23, &g, &off), GTP_E_GEN);
  /* A batch over Go's 64 KiB. */
  uint8_t big[] = {1, 1, 1, 1, 0x81, 0x80, 0x04};
  assert_int_equal(gtp_go_parse(big, sizeof big, 23, &g, &off), GTP_E_TOOBIG);
  /* No frequency. */
  gb d = {0};
  ev(&d, 16, 0, 2, 11, 1);
  batch(&d, 1, 7, 100);
  assert_int_equal(gtp_go_parse(d.buf, d.len, 23, &g, &off), GTP_E_CORRUPT);
  /* Duplicate string id. */
  gb e = {0};
  sync_batch(&e, 1, 23);
  strings_batch(&e, 1);
  strings_batch(&e, 1);
  assert_int_equal(gtp_go_parse(e.buf, e.len, 23, &g, &off), GTP_E_CORRUPT);
  /* A string over 1 KiB. */
  gb s = {0};
  sync_batch(&s, 1, 23);
  d_b(&s, 4);
  d_b(&s, 5);
  d_u(&s, 1);
  d_u(&s, 1025);
  memset(s.data + s.dlen, 'x', 1025);
  s.dlen += 1025;
  batch(&s, 1, 0, 0);
  assert_int_equal(gtp_go_parse(s.buf, s.len, 23, &g, &off), GTP_E_TOOBIG);
  /* Timestamp overflow. */
  gb t = {0};
  sync_batch(&t, 1, 23);
  ev(&t, 16, UINT64_MAX - 5, 2, 11, 1);
  ev(&t, 17, 10, 0);
  batch(&t, 1, 7, 100);
  assert_int_equal(gtp_go_parse(t.buf, t.len, 23, &g, &off), GTP_E_CORRUPT);
  /* A structural event inside an event batch. */
  gb u = {0};
  sync_batch(&u, 1, 23);
  ev(&u, 16, 0, 2, 11, 1);
  d_b(&u, 8);
  d_u(&u, FREQ);
  batch(&u, 1, 7, 100);
  assert_int_equal(gtp_go_parse(u.buf, u.len, 23, &g, &off), GTP_E_UNKNOWN);
  /* An empty input is an empty generation (a ledger-only one). */
  assert_int_equal(gtp_go_parse((const uint8_t *)"", 0, 26, &g, &off), 0);
  assert_int_equal(g.nevents, 0);
  gtp_go_iter it;
  gtp_go_event ev0;
  assert_int_equal(gtp_go_iter_init(&it, &g), 0);
  assert_int_equal(gtp_go_next(&it, &ev0), 0);
  gtp_go_iter_fini(&it);
  gtp_go_fini(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gotrace__events_land_on_their_goroutines),
      cmocka_unit_test(test_gotrace__clock_from_snapshot_or_gentrace_clock),
      cmocka_unit_test(test_gotrace__version_tables),
      cmocka_unit_test(test_gotrace__split_finds_generation_edges),
      cmocka_unit_test(test_gotrace__hostile_inputs_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
