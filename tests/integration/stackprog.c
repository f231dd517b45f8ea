/* stackprog: a traced program with known call sites, for the symbol tests
 * (tests/integration/test_symbols.sh). Built with -g, -O0, frame pointers
 * and a GNU build id; the lines marked CALL:NAME are where the test expects
 * each frame of the recorded stacks to point.
 *
 *   GENTRACE_STACKS=1 GENTRACE_ADDR=... stackprog N
 *
 * Makes N regions "sym.outer", each with one instant "sym.leaf" three calls
 * deep. Exit 1 if gt_start failed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gentrace.h"

/* The variant is compiled in so that two builds differ in their build id
 * (the mismatch test rebuilds nothing: it swaps in stackprog_other). */
#ifndef STACKPROG_VARIANT
#define STACKPROG_VARIANT "main"
#endif
static const char stackprog_variant[] = STACKPROG_VARIANT;
/* Touched after each marked call, so no call is a tail call (the build's
 * CFLAGS may say -O2 after ours): every caller keeps its frame. */
static volatile int after_call;

__attribute__((noinline)) static void sym_leaf(void) {
  gt_instant("sym.leaf"); /* CALL:sym_leaf */
  after_call++;
}

__attribute__((noinline)) static void sym_middle(void) {
  sym_leaf(); /* CALL:sym_middle */
  after_call++;
}

__attribute__((noinline)) static void sym_outer(int n) {
  for (int i = 0; i < n; i++) {
    gt_region_begin("sym.outer"); /* CALL:sym_outer_region */
    sym_middle();                 /* CALL:sym_outer */
    after_call++;
    gt_region_end();
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  if (gt_start(NULL) != 0) {
    fprintf(stderr, "stackprog: gt_start failed\n");
    return 1;
  }
  sym_outer(n); /* CALL:main */
  after_call++;
  gt_stop();
  printf("variant=%s n=%d\n", stackprog_variant, n);
  return 0;
}
