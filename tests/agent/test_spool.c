/* test_spool.c: spool states, eviction order and ledger carrying. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"
#include "spool.h"

static gt__gen *mk(uint64_t gen, size_t bytes, uint64_t events,
                   uint64_t dropped) {
  gt__gen *g = calloc(1, sizeof *g);
  g->gen = gen;
  g->body = malloc(bytes);
  g->body_len = bytes;
  g->events = events;
  g->own_dropped = dropped;
  return g;
}

static void
test_spool__full_evicts_oldest_queued_and_carries_ledger(void **state) {
  (void)state;
  gt__spool sp;
  assert_int_equal(gt__spool_init(&sp, 300), 0);
  gt__spool_add(&sp, mk(1, 100, 10, 1));
  gt__spool_add(&sp, mk(2, 100, 20, 0));
  gt__spool_add(&sp, mk(3, 100, 30, 0));
  gt__spool_add(&sp, mk(4, 100, 40, 2)); /* evicts gen 1 */
  assert_int_equal(sp.evicted_gens, 1);
  assert_int_equal(sp.evicted_events, 10);
  assert_true(sp.bytes <= 300);
  gt__gen *g = gt__spool_next(&sp);
  assert_int_equal(g->gen, 2);
  /* The first generation sent carries gen 1's events and its drops. */
  assert_int_equal(g->end.evicted, 10);
  assert_int_equal(g->end.dropped, 1);
  gt__spool_unref(&sp, g);
  gt__spool_fini(&sp);
}

static void test_spool__sent_is_not_evicted_acked_goes_first(void **state) {
  (void)state;
  gt__spool sp;
  gt__spool_init(&sp, 200);
  gt__spool_add(&sp, mk(1, 100, 5, 0));
  gt__spool_add(&sp, mk(2, 100, 6, 0));
  gt__gen *g1 = gt__spool_next(&sp);
  gt__gen *g2 = gt__spool_next(&sp);
  assert_int_equal(gt__spool_ack(&sp, 2), 1);
  assert_int_equal(gt__spool_ack(&sp, 2), 0); /* already resolved */
  gt__spool_add(&sp, mk(3, 100, 7, 0));       /* evicts ACKED gen 2 */
  assert_int_equal(sp.evicted_gens, 0);
  assert_int_equal(sp.delivered_events, 6);
  gt__spool_add(&sp, mk(4, 100, 8, 0)); /* 1 is SENT: gen 3 goes */
  assert_int_equal(sp.evicted_events, 7);
  gt__spool_unref(&sp, g1);
  gt__spool_unref(&sp, g2);
  gt__spool_fini(&sp);
}

static void test_spool__reject_carries_events_and_frozen_ledger(void **state) {
  (void)state;
  gt__spool sp;
  gt__spool_init(&sp, 1000);
  gt__spool_add(&sp, mk(1, 10, 5, 3));
  gt__spool_add(&sp, mk(2, 10, 6, 0));
  gt__gen *g1 = gt__spool_next(&sp);
  assert_int_equal(g1->end.dropped, 3);
  assert_int_equal(gt__spool_reject(&sp, 1), 1);
  gt__gen *g2 = gt__spool_next(&sp);
  assert_int_equal(g2->end.rejected, 5);
  assert_int_equal(g2->end.dropped, 3); /* gen 1's ledger moved on */
  /* A resend after reconnect keeps the ledger (invariant 1). */
  gt__spool_requeue(&sp);
  gt__gen *again = gt__spool_next(&sp);
  assert_ptr_equal(again, g2);
  assert_int_equal(again->end.rejected, 5);
  assert_int_equal(gt__spool_settled(&sp), 0);
  gt__spool_ack(&sp, 2);
  assert_int_equal(gt__spool_settled(&sp), 1);
  gt__spool_unref(&sp, g1);
  gt__spool_unref(&sp, g2);
  gt__spool_unref(&sp, again);
  gt__spool_fini(&sp);
}

static void test_spool__welcome_last_gen_marks_only_sent(void **state) {
  (void)state;
  gt__spool sp;
  gt__spool_init(&sp, 1000);
  gt__spool_add(&sp, mk(1, 10, 5, 0));
  gt__spool_add(&sp, mk(2, 10, 6, 0));
  gt__gen *g1 = gt__spool_next(&sp);
  gt__spool_requeue(&sp);
  gt__spool_committed_upto(&sp, 2); /* gen 2 was never sent */
  assert_int_equal(sp.delivered_events, 5);
  gt__gen *n = gt__spool_next(&sp);
  assert_int_equal(n->gen, 2);
  gt__spool_unref(&sp, g1);
  gt__spool_unref(&sp, n);
  gt__spool_fini(&sp);
}

static void test_spool__oversized_newcomer_evicts_itself(void **state) {
  (void)state;
  gt__spool sp;
  gt__spool_init(&sp, 50);
  gt__spool_add(&sp, mk(1, 100, 9, 0));
  assert_int_equal(sp.bytes, 0);
  assert_int_equal(sp.evicted_events, 9);
  assert_null(gt__spool_next(&sp));
  gt__spool_fini(&sp);
}

/* The spool's bookkeeping holds through add, send, ack and eviction, and a
 * byte count that drifted from the bodies held is caught. */
static void test_spool__check_invariants_catches_drifted_bytes(void **state) {
  (void)state;
  gt__spool sp;
  assert_int_equal(gt__spool_init(&sp, 250), 0);
  gt__spool_add(&sp, mk(1, 100, 5, 0));
  gt__spool_add(&sp, mk(2, 100, 6, 0));
  gt__gen *g = gt__spool_next(&sp);
  gt__spool_ack(&sp, g->gen);
  gt__spool_add(&sp, mk(3, 100, 7, 0));
  assert_int_equal(gt__spool_check_invariants_locked(&sp), 0);
  sp.bytes += 1;
  assert_int_equal(gt__spool_check_invariants_locked(&sp), -4);
  sp.bytes -= 1;
  gt__spool_unref(&sp, g);
  gt__spool_fini(&sp);
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: stop at a break */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_spool__full_evicts_oldest_queued_and_carries_ledger),
      cmocka_unit_test(test_spool__sent_is_not_evicted_acked_goes_first),
      cmocka_unit_test(test_spool__reject_carries_events_and_frozen_ledger),
      cmocka_unit_test(test_spool__welcome_last_gen_marks_only_sent),
      cmocka_unit_test(test_spool__oversized_newcomer_evicts_itself),
      cmocka_unit_test(test_spool__check_invariants_catches_drifted_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
