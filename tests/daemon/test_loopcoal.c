/* Tests for daemon/loopcoal.c: the loop pauses before polling only while it
 * is busy, at most once per round, and keeps no loop alive. Real libuv
 * loops, real timers and a real socket pair; time is asserted only from
 * below (a pause lasts at least its length) or with generous bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "loopcoal.h"

#define MS 1000000ull

static void run_closed(uv_loop_t *loop, loopcoal *lc) {
  loopcoal_close(lc, NULL);
  assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(loop), 0);
}

typedef struct {
  int left;
  uv_idle_t idle;
  loopcoal *lc;
  size_t read;    /* a read of this size noted every round */
  unsigned reads; /* that many times (default 3: a pause pays) */
} spin;

static void on_idle(uv_idle_t *h) {
  spin *s = h->data;
  for (unsigned i = 0; s->lc != NULL && i < (s->reads ? s->reads : 3); i++)
    loopcoal_note_read(s->lc, s->read);
  if (--s->left == 0)
    uv_idle_stop(h);
}

/* An active idle handle makes every poll return at once: the loop is busy
 * by the module's definition, so it pauses before each next poll. */
static void test_loopcoal__a_busy_loop_pauses_before_each_poll(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 5 * MS);
  spin s = {.left = 10, .lc = &lc, .read = 100};
  uv_idle_init(&loop, &s.idle);
  s.idle.data = &s;
  uv_idle_start(&s.idle, on_idle);
  uint64_t t0 = uv_hrtime();
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  uint64_t took = uv_hrtime() - t0;
  /* The first round polls before anything marked the loop busy. */
  assert_true(lc.pauses >= 8);
  assert_true(lc.pauses <= lc.polls); /* invariant 1: once per round */
  assert_true(took >= lc.pauses * 5 * MS);
  uv_close((uv_handle_t *)&s.idle, NULL);
  run_closed(&loop, &lc);
}

typedef struct {
  int left;
  uv_timer_t t;
} ticks;

static void on_tick(uv_timer_t *t) {
  ticks *k = t->data;
  if (--k->left == 0)
    uv_timer_stop(t);
}

/* A timer every 30 ms: each poll waits far longer than the 2 ms pause, so
 * the loop is never busy and a rare event costs no extra wake-up. */
static void test_loopcoal__a_loop_that_waited_does_not_pause(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 2 * MS);
  ticks k = {.left = 5};
  uv_timer_init(&loop, &k.t);
  k.t.data = &k;
  uv_timer_start(&k.t, on_tick, 30, 30);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(k.left, 0);
  assert_true(lc.polls >= 5);
  assert_int_equal(lc.pauses, 0);
  uv_close((uv_handle_t *)&k.t, NULL);
  run_closed(&loop, &lc);
}

/* Invariant 4: a round that read a bulk sender's 64 KiB is not paused, a
 * round of small reads (a fleet's generations) is. */
static void test_loopcoal__a_bulk_read_is_never_paused(void **state) {
  (void)state;
  size_t sizes[2] = {LOOPCOAL_BULK, 6000};
  for (int i = 0; i < 2; i++) {
    uv_loop_t loop;
    loopcoal lc;
    assert_int_equal(uv_loop_init(&loop), 0);
    loopcoal_init(&lc, &loop, 2 * MS);
    spin s = {.left = 10, .lc = &lc, .read = sizes[i]};
    uv_idle_init(&loop, &s.idle);
    s.idle.data = &s;
    uv_idle_start(&s.idle, on_idle);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    if (i == 0)
      assert_int_equal(lc.pauses, 0);
    else
      assert_true(lc.pauses >= 8);
    uv_close((uv_handle_t *)&s.idle, NULL);
    run_closed(&loop, &lc);
  }
}

/* Off (0): a busy loop never pauses. */
static void test_loopcoal__zero_never_pauses(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 0);
  spin s = {.left = 50};
  uv_idle_init(&loop, &s.idle);
  s.idle.data = &s;
  uv_idle_start(&s.idle, on_idle);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_true(lc.polls >= 49);
  assert_int_equal(lc.pauses, 0);
  uv_close((uv_handle_t *)&s.idle, NULL);
  run_closed(&loop, &lc);
}

/* Invariant 2: with nothing else on the loop, uv_run returns at once. */
static void test_loopcoal__keeps_no_loop_alive(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 2 * MS);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_alive(&loop), 0);
  run_closed(&loop, &lc);
}

/* Invariant 5: a peer that waits for each reply (one read per round) gets
 * a pause now and then, not at every step. */
static void test_loopcoal__one_peer_at_a_time_stops_the_pauses(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 1 * MS);
  spin s = {.left = 200, .lc = &lc, .read = 11, .reads = 1};
  uv_idle_init(&loop, &s.idle);
  s.idle.data = &s;
  uv_idle_start(&s.idle, on_idle);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  /* One try per LOOPCOAL_BACKOFF + 1 rounds. */
  assert_true(lc.pauses >= 1);
  assert_true(lc.pauses <= 200 / (LOOPCOAL_BACKOFF + 1) + 1);
  uv_close((uv_handle_t *)&s.idle, NULL);
  run_closed(&loop, &lc);
}

enum { NSOCK = 8, ROUNDS = 50 };

typedef struct {
  int fd[NSOCK][2];
  uv_poll_t p[NSOCK];
  loopcoal *lc;
  int reads;
  size_t bytes;
  int stopped;
} socks;

static void on_readable(uv_poll_t *p, int status, int events) {
  socks *r = p->data;
  (void)events;
  assert_int_equal(status, 0);
  int i = (int)(p - r->p);
  char b[4096];
  ssize_t n = read(r->fd[i][0], b, sizeof b);
  assert_true(n > 0);
  loopcoal_note_read(r->lc, (size_t)n); /* as ingest_read_cb does */
  r->reads++;
  r->bytes += (size_t)n;
  if (r->bytes >= NSOCK * ROUNDS)
    for (int k = 0; k < NSOCK; k++)
      uv_poll_stop(&r->p[k]);
}

/* Not cmocka's thread: a failed write shows as missing bytes below. */
static void writer(void *arg) {
  socks *r = arg;
  for (int i = 0; i < ROUNDS; i++)
    for (int k = 0; k < NSOCK; k++) {
      char c = (char)i;
      if (write(r->fd[k][1], &c, 1) != 1)
        return;
      usleep(200);
    }
}

/* The point of the module: eight peers, one writing every 0.2 ms in turn,
 * are read in far fewer rounds than writes: each round takes what all of
 * them sent during the 10 ms pause, and every byte still arrives. Without
 * the pause each write is usually a round and a read of its own; about
 * 40-80 reads are expected, half the writes is the bound asserted. */
static void test_loopcoal__busy_peers_are_read_in_fewer_rounds(void **state) {
  (void)state;
  uv_loop_t loop;
  loopcoal lc;
  socks r = {.lc = &lc};
  assert_int_equal(uv_loop_init(&loop), 0);
  loopcoal_init(&lc, &loop, 10 * MS);
  for (int k = 0; k < NSOCK; k++) {
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, r.fd[k]), 0);
    assert_int_equal(uv_poll_init(&loop, &r.p[k], r.fd[k][0]), 0);
    r.p[k].data = &r;
    uv_poll_start(&r.p[k], UV_READABLE, on_readable);
  }
  uv_thread_t th;
  assert_int_equal(uv_thread_create(&th, writer, &r), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  uv_thread_join(&th);
  assert_int_equal(r.bytes, NSOCK * ROUNDS);
  assert_true(lc.pauses >= 1);
  assert_true(r.reads * 2 <= NSOCK * ROUNDS);
  for (int k = 0; k < NSOCK; k++) {
    uv_close((uv_handle_t *)&r.p[k], NULL);
  }
  run_closed(&loop, &lc);
  for (int k = 0; k < NSOCK; k++) {
    close(r.fd[k][0]);
    close(r.fd[k][1]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loopcoal__a_busy_loop_pauses_before_each_poll),
      cmocka_unit_test(test_loopcoal__a_loop_that_waited_does_not_pause),
      cmocka_unit_test(test_loopcoal__a_bulk_read_is_never_paused),
      cmocka_unit_test(test_loopcoal__zero_never_pauses),
      cmocka_unit_test(test_loopcoal__keeps_no_loop_alive),
      cmocka_unit_test(test_loopcoal__one_peer_at_a_time_stops_the_pauses),
      cmocka_unit_test(test_loopcoal__busy_peers_are_read_in_fewer_rounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
