/* Tests for daemon/donelist.c: only a push onto an empty list makes the
 * eventfd readable, a take clears it, and with threads pushing while a
 * real libuv loop polls the eventfd and takes the list (the way gentraced
 * hands completions back), every node arrives exactly once, in each
 * thread's order, with fewer wake-ups than pushes. A lost wake-up would
 * leave nodes in the list: the loop's watchdog then fails the test instead
 * of hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <poll.h>
#include <pthread.h>
#include <uv.h>

#include "donelist.h"

static int readable(const donelist *dl) {
  struct pollfd p = {.fd = donelist_fd(dl), .events = POLLIN};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Single-threaded: the rule itself (invariant 1). */
static void test_donelist__only_a_push_onto_an_empty_list_wakes(void **state) {
  (void)state;
  donelist dl;
  donelist_node a, b, c;
  assert_int_equal(donelist_init(&dl), 0);
  assert_false(readable(&dl));
  assert_null(donelist_take(&dl));
  assert_int_equal(donelist_push(&dl, &a), 1);
  assert_true(readable(&dl));
  assert_int_equal(donelist_push(&dl, &b), 0);
  assert_int_equal(donelist_push(&dl, &c), 0);
  donelist_node *l = donelist_take(&dl);
  assert_false(readable(&dl)); /* cleared by the take */
  assert_ptr_equal(l, &a);
  assert_ptr_equal(l->next, &b);
  assert_ptr_equal(l->next->next, &c);
  assert_null(l->next->next->next);
  assert_null(donelist_take(&dl));
  /* Taken: the next push owes a wake-up again. */
  assert_int_equal(donelist_push(&dl, &b), 1);
  assert_true(readable(&dl));
  assert_ptr_equal(donelist_take(&dl), &b);
  assert_false(readable(&dl));
  assert_int_equal(dl.wakes, 2);
  donelist_fini(&dl);
}

/* A chain (a transaction's completions) is one push: one wake-up onto an
 * empty list, none behind nodes already there, its nodes in order. */
static void test_donelist__a_chain_is_one_push(void **state) {
  (void)state;
  donelist dl;
  donelist_node a, b, c, d;
  assert_int_equal(donelist_init(&dl), 0);
  a.next = &b;
  b.next = &c;
  c.next = (donelist_node *)&dl; /* garbage: the push ends the chain */
  assert_int_equal(donelist_push_chain(&dl, &a, &c), 1);
  assert_true(readable(&dl));
  assert_int_equal(donelist_push_chain(&dl, &d, &d), 0);
  assert_int_equal(dl.wakes, 1);
  donelist_node *l = donelist_take(&dl);
  assert_false(readable(&dl));
  assert_ptr_equal(l, &a);
  assert_ptr_equal(l->next, &b);
  assert_ptr_equal(l->next->next, &c);
  assert_ptr_equal(l->next->next->next, &d);
  assert_null(d.next);
  assert_null(donelist_take(&dl));
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
  uv_poll_t poll;
  uv_timer_t watchdog;
  item *items; /* THREADS * PER_THREAD */
  unsigned char *seen;
  int next_seq[THREADS]; /* the order each thread pushed in */
  long taken, callbacks, out_of_order, twice;
  int timed_out;
} rig;

typedef struct {
  rig *r;
  int thread;
} producer;

static void *produce(void *arg) {
  producer *p = arg;
  /* Odd threads push chains of 1 to 7 nodes, as the store thread hands
   * back a transaction's completions; even threads push one at a time. */
  for (int i = 0; i < PER_THREAD;) {
    int len = p->thread % 2 ? 1 + i % 7 : 1;
    if (len > PER_THREAD - i)
      len = PER_THREAD - i;
    item *first = &p->r->items[p->thread * PER_THREAD + i];
    for (int k = 0; k < len; k++) {
      item *it = first + k;
      it->thread = p->thread;
      it->seq = i + k;
      it->node.next = k + 1 < len ? &it[1].node : NULL;
    }
    if (len == 1)
      donelist_push(&p->r->dl, &first->node);
    else
      donelist_push_chain(&p->r->dl, &first->node, &first[len - 1].node);
    i += len;
  }
  return NULL;
}

static void on_readable(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  rig *r = h->data;
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
    uv_close((uv_handle_t *)&r->poll, NULL);
    uv_close((uv_handle_t *)&r->watchdog, NULL);
  }
}

static void on_watchdog(uv_timer_t *t) {
  rig *r = t->data;
  r->timed_out = 1;
  uv_close((uv_handle_t *)&r->poll, NULL);
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
  assert_int_equal(donelist_init(&r->dl), 0);
  assert_int_equal(uv_poll_init(&loop, &r->poll, donelist_fd(&r->dl)), 0);
  r->poll.data = r;
  assert_int_equal(uv_poll_start(&r->poll, UV_READABLE, on_readable), 0);
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
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_int_equal(r->timed_out, 0);
  assert_int_equal(r->taken, (long)THREADS * PER_THREAD);
  assert_int_equal(r->twice, 0);
  assert_int_equal(r->out_of_order, 0);
  assert_null(donelist_take(&r->dl));
  /* Every callback read a readable eventfd, made so by a push onto an
   * empty list: no more callbacks than such pushes, and fewer of those than
   * pushes (batches shared wake-ups). */
  assert_true(r->callbacks <= (long)r->dl.wakes);
  assert_true((long)r->dl.wakes < (long)THREADS * PER_THREAD);
  assert_int_equal(uv_loop_close(&loop), 0);
  donelist_fini(&r->dl);
  free(r->seen);
  free(r->items);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_donelist__only_a_push_onto_an_empty_list_wakes),
      cmocka_unit_test(test_donelist__a_chain_is_one_push),
      cmocka_unit_test(
          test_donelist__threads_pushing_while_the_loop_takes_lose_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
