/* test_stack.c: agent/stack.c, the frame-pointer walk and the module table.
 * The walk runs inside hosts built without frame pointers, so most cases
 * here hand it hostile chains built in a local array and check it stops
 * where invariant 1 says, never reading outside [lo, hi). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stack.h"

static void test_stack_bounds__contain_a_local(void **state) {
  (void)state;
  uintptr_t lo = 0, hi = 0;
  int local = 0;
  assert_int_equal(gt__stack_bounds(&lo, &hi), 0);
  assert_true(lo < hi);
  assert_true((uintptr_t)&local >= lo && (uintptr_t)&local < hi);
}

/* Nested calls with frame pointers (this file is built with them): the walk
 * from the innermost sees at least their return addresses, in order. */
static size_t depth_seen;
__attribute__((noinline)) static void inner(uintptr_t lo, uintptr_t hi) {
  uint64_t pcs[32];
  depth_seen = gt__stack_walk(lo, hi, pcs, 32, 0);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}
__attribute__((noinline)) static void middle(uintptr_t lo, uintptr_t hi) {
  inner(lo, hi);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void outer(uintptr_t lo, uintptr_t hi) {
  middle(lo, hi);
  __asm__ volatile("" ::: "memory");
}

static void test_stack_walk__sees_the_callers(void **state) {
  (void)state;
  uintptr_t lo, hi;
  assert_int_equal(gt__stack_bounds(&lo, &hi), 0);
  outer(lo, hi);
  assert_true(depth_seen >= 3);
  uint64_t pcs[2];
  assert_int_equal(gt__stack_walk(lo, hi, pcs, 2, 0), 2); /* max holds */
}

/* A fake stack: frame records (saved fp, return address) in an array, so
 * every chain shape can be built and [lo, hi) is the array. */
static uintptr_t fake[64];
#define LO ((uintptr_t)&fake[0])
#define HI ((uintptr_t)&fake[64])
#define FP(i) ((uintptr_t)&fake[i])

/* Return addresses must lie in code (stack.h invariant 3): this test's. */
#define CODE(k) ((uintptr_t)&outer + (k))

static void link_(int at, uintptr_t next, uintptr_t ret) {
  fake[at] = next;
  fake[at + 1] = ret;
}

static void test_stack_walk_from__valid_chain_then_stop_at_null(void **state) {
  (void)state;
  memset(fake, 0, sizeof fake);
  link_(0, FP(4), CODE(0));
  link_(4, FP(10), CODE(1));
  link_(10, 0, CODE(2));
  uint64_t pcs[8];
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 3);
  assert_true(pcs[0] == CODE(0) && pcs[1] == CODE(1) && pcs[2] == CODE(2));
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 2), 2);
}

static void test_stack_walk_from__hostile_chains_stop_safely(void **state) {
  (void)state;
  uint64_t pcs[8];
  memset(fake, 0, sizeof fake);
  /* A loop (a frame pointing at itself or back down) stops: fp must grow. */
  link_(0, FP(4), CODE(0));
  link_(4, FP(0), CODE(1));
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 2);
  link_(0, FP(0), CODE(0));
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 1);
  /* Misaligned, outside the stack, or a record straddling its end. */
  assert_int_equal(gt__stack_walk_from(FP(0) + 1, LO, HI, pcs, 8), 0);
  assert_int_equal(gt__stack_walk_from(HI, LO, HI, pcs, 8), 0);
  assert_int_equal(gt__stack_walk_from(LO - 16, LO, HI, pcs, 8), 0);
  assert_int_equal(gt__stack_walk_from(FP(63), LO, HI, pcs, 8), 0);
  link_(0, (uintptr_t)-8, CODE(0)); /* next far above: outside */
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 1);
  /* A return address that cannot be code ends the walk. */
  link_(0, FP(4), CODE(0));
  link_(4, FP(10), 12);
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 1);
}

/* Host code without frame pointers leaves data where the walk expects a
 * return address: a saved string ("/users 2") or a pointer to data ends
 * the walk, the frames before it stay. */
static void test_stack_walk_from__data_as_return_address_ends_it(void **state) {
  (void)state;
  uintptr_t lo, hi;
  assert_int_equal(gt__stack_bounds(&lo, &hi), 0); /* builds the table */
  uint64_t pcs[8];
  memset(fake, 0, sizeof fake);
  link_(0, FP(4), CODE(0));
  link_(4, FP(10), (uintptr_t)0x322073726573752full);
  link_(10, 0, CODE(2));
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 1);
  link_(4, FP(10), (uintptr_t)&fake[20]);
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 1);
  link_(4, FP(10), (uintptr_t)&malloc); /* code of another object: kept */
  assert_int_equal(gt__stack_walk_from(FP(0), LO, HI, pcs, 8), 3);
}

static void test_modules_encode__one_record_with_this_program(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gt__modules_encode(&b), 0);
  assert_true(b.len > 0);
  assert_int_equal(b.data[0], GTP_REC_MODULES);
  gtp_wbuf_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_bounds__contain_a_local),
      cmocka_unit_test(test_stack_walk__sees_the_callers),
      cmocka_unit_test(test_stack_walk_from__valid_chain_then_stop_at_null),
      cmocka_unit_test(test_stack_walk_from__hostile_chains_stop_safely),
      cmocka_unit_test(test_stack_walk_from__data_as_return_address_ends_it),
      cmocka_unit_test(test_modules_encode__one_record_with_this_program),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
