/* Tests for daemon/donelist.c: only a push onto an empty list asks for a
 * wake-up, and with threads pushing while a real libuv loop takes the list
 * from its uv_async callback (the way gentraced hands completions back),
 * every node arrives exactly once, in each thread's order, with fewer
 * wake-ups than pushes. A lost wake-up would leave nodes in the list: the
 * loop's watchdog then fails the test instead of hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <pthread.h>
#include <uv.h>

#include "donelist.h"

/* Single-threaded: the rule itself (invariant 1). */
static void test_donelist__only_a_push_onto_an_empty_list_wakes(void **state) {
  (void)state;
  donelist dl;
  donelist_node a, b, c;
  donelist_init(&dl);
  assert_null(donelist_take(&dl));
  assert_int_equal(donelist_push(&dl, &a), 1);
  assert_int_equal(donelist_push(&dl, &b), 0);
  assert_int_equal(donelist_push(&dl, &c), 0);
  donelist_node *l = donelist_take(&dl);
  assert_ptr_equal(l, &a);
  assert_ptr_equal(l->next, &b);
  assert_ptr_equal(l->next->next, &c);
  assert_null(l->next->next->next);
  assert_null(donelist_take(&dl));
  /* Taken: the next push owes a wake-up again. */
  assert_int_equal(donelist_push(&dl, &b), 1);
  assert_ptr_equal(donelist_take(&dl), &b);
  assert_int_equal(dl.wakes, 2);
  donelist_fini(&dl);
}

#define THREADS 4
#define PER_THREAD 200000

typedef struct item {
  donelist_node node; /* first: a node is its item */
  int thread;
  int seq;
} item;

typedef struct {
  donelist dl;
  uv_async_t async;
  uv_timer_t watchdog;
  item *items; /* THREADS * PER_THREAD */
  unsigned char *seen;
  int next_seq[THREADS]; /* the order each thread pushed in */
  long taken, callbacks, sends, out_of_order, twice;
  int timed_out;
} rig;

typedef struct {
  rig *r;
  int thread;
  long sends;
} producer;

static void *produce(void *arg) {
  producer *p = arg;
  for (int i = 0; i < PER_THREAD; i++) {
    item *it = &p->r->items[p->thread * PER_THREAD + i];
    it->thread = p->thread;
    it->seq = i;
    if (donelist_push(&p->r->dl, &it->node)) {
      uv_async_send(&p->r->async);
      p->sends++;
    }
  }
  return NULL;
}

static void on_async(uv_async_t *a) {
  rig *r = a->data;
  r->callbacks++;
  for (donelist_node *n = donelist_take(&r->dl); n != NULL; n = n->next) {
    item *it = (item *)n;
    size_t k = (size_t)it->thread * PER_THREAD + (size_t)it->seq;
    if (r->seen[k]++)
      r->twice++;
    if (it->seq != r->next_seq[it->thread])
      r->out_of_order++;
    r->next_seq[it->thread] = it->seq + 1;
    r->taken++;
  }
  if (r->taken == (long)THREADS * PER_THREAD) {
    uv_close((uv_handle_t *)&r->async, NULL);
    uv_close((uv_handle_t *)&r->watchdog, NULL);
  }
}

static void on_watchdog(uv_timer_t *t) {
  rig *r = t->data;
  r->timed_out = 1;
  uv_close((uv_handle_t *)&r->async, NULL);
  uv_close((uv_handle_t *)&r->watchdog, NULL);
}

static void
test_donelist__threads_pushing_while_the_loop_takes_lose_nothing(void **state) {
  (void)state;
  rig *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->items = calloc((size_t)THREADS * PER_THREAD, sizeof *r->items);
  r->seen = calloc((size_t)THREADS * PER_THREAD, 1);
  assert_non_null(r->items);
  assert_non_null(r->seen);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  donelist_init(&r->dl);
  assert_int_equal(uv_async_init(&loop, &r->async, on_async), 0);
  r->async.data = r;
  /* Generous: the pushes take well under a second on an idle machine. */
  uv_timer_init(&loop, &r->watchdog);
  r->watchdog.data = r;
  uv_timer_start(&r->watchdog, on_watchdog, 120000, 0);
  producer p[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    p[i] = (producer){.r = r, .thread = i};
    assert_int_equal(pthread_create(&th[i], NULL, produce, &p[i]), 0);
  }
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    r->sends += p[i].sends;
  }
  assert_int_equal(r->timed_out, 0);
  assert_int_equal(r->taken, (long)THREADS * PER_THREAD);
  assert_int_equal(r->twice, 0);
  assert_int_equal(r->out_of_order, 0);
  assert_null(donelist_take(&r->dl));
  assert_int_equal((long)r->dl.wakes, r->sends);
  /* Each callback took a non-empty list or coalesced; every send made one
   * callback at most. Fewer sends than pushes: batches shared wake-ups. */
  assert_true(r->callbacks <= r->sends);
  assert_true(r->sends < (long)THREADS * PER_THREAD);
  assert_int_equal(uv_loop_close(&loop), 0);
  donelist_fini(&r->dl);
  free(r->seen);
  free(r->items);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_donelist__only_a_push_onto_an_empty_list_wakes),
      cmocka_unit_test(
          test_donelist__threads_pushing_while_the_loop_takes_lose_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
