/* test_agent.c: libgentrace end to end against the test receiver
 * (receiver.c): exact delivery and accounting, generation switches under
 * concurrency, a receiver that vanishes or refuses, no receiver at all,
 * drops, reused string buffers, fork. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "format.h"
#include "gentrace.h"
#include "receiver.h"
#include "varint.h"

/* Bound on the CPU time one call spends (its own, so preemption on a
 * loaded machine does not count): 50 ms where a call takes well under 1 ms
 * even on a shared 2-core machine, 10x that under sanitizers. A call that
 * spins waiting for the sealer or the sender burns its time here. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define WORST_CALL_NS (500ull * 1000000)
#else
#define WORST_CALL_NS (50ull * 1000000)
#endif

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cfg_for(gt_config *c, rx *r, char *addr, size_t n) {
  gt_config_init(c);
  if (r)
    snprintf(addr, n, "127.0.0.1:%d", rx_port(r));
  else
    snprintf(addr, n, "127.0.0.1:1"); /* nothing listens on port 1 */
  c->addr = addr;
  c->service = "test-agent";
  c->period_ms = 20;
  c->flush_timeout_ms = 4000;
}

/* The fixture of the tests that run the agent: a receiver (none for
 * no_rx: the agent then points at port 1) and the agent's config for it,
 * made by setup; each test may still change either before its gt_start.
 * The teardown stops the agent, so that a failed test does not leave its
 * session to the next, and frees the receiver. */
typedef struct afx {
  rx *r;
  gt_config c;
  char addr[64];
} afx;

static int afx_setup(void **state, int with_receiver) {
  afx *f = calloc(1, sizeof *f);
  if (f == NULL)
    return -1;
  if (with_receiver && (f->r = rx_start()) == NULL) {
    free(f);
    return -1;
  }
  cfg_for(&f->c, f->r, f->addr, sizeof f->addr);
  *state = f;
  return 0;
}
static int with_rx(void **state) {
  return afx_setup(state, 1);
}
static int no_rx(void **state) {
  return afx_setup(state, 0);
}

static int afx_teardown(void **state) {
  afx *f = *state;
  gt_stop();
  if (f->r != NULL)
    rx_free(f->r);
  free(f);
  return 0;
}

/* What the receiver got, decoded. */
typedef struct tally {
  uint64_t events; /* non-LOST, non-THREAD_NAME */
  uint64_t lost_markers, lost_count;
  uint64_t dropped, evicted, rejected;
  uint64_t gens;
  uint64_t order_errors; /* per-thread "seq" counters out of order */
  uint64_t gen_errors;   /* batch gen != generation */
  uint64_t bad;          /* undecodable */
  char names[8][16];     /* first instant names seen, in order */
  size_t nnames;
  char knames[16][24];   /* "type:name" of the first named events of */
  size_t nknames;        /* every kind (log: its category), in order */
} tally;

#define MAXT 64
typedef struct seqstate {
  uint64_t tid;
  int64_t last;
} seqstate;

static void tally_file(tally *t, const uint8_t *data, size_t len, seqstate *ss,
                       size_t *nss, int expect_gapless) {
  gtp_file_reader fr;
  if (gtp_file_reader_init(&fr, data, len) != 0) {
    t->bad++;
    return;
  }
  gtp_gen g;
  int rc;
  while ((rc = gtp_file_reader_next(&fr, &g)) == 1) {
    t->gens++;
    t->dropped += g.end.dropped;
    t->evicted += g.end.evicted;
    t->rejected += g.end.rejected;
    size_t cur = 0;
    gtp_batch b;
    while (gtp_gen_next_batch(&g, &cur, &b) == 1) {
      if (b.gen != g.start.gen)
        t->gen_errors++;
      seqstate *s = NULL;
      for (size_t i = 0; i < *nss; i++)
        if (ss[i].tid == b.thread)
          s = &ss[i];
      if (s == NULL && *nss < MAXT) {
        s = &ss[(*nss)++];
        s->tid = b.thread;
        s->last = -1;
      }
      gtp_event_iter it;
      gtp_event ev;
      gtp_event_iter_init(&it, &b);
      int erc;
      while ((erc = gtp_event_next(&it, &ev)) == 1) {
        if (ev.type == GTP_EV_LOST) {
          t->lost_markers++;
          t->lost_count += ev.args[0];
          if (s)
            s->last = -2; /* a gap is expected after a LOST marker */
          continue;
        }
        if (ev.type == GTP_EV_THREAD_NAME)
          continue;
        t->events++;
        gtp_str name = gtp_gen_string(&g, ev.args[0]);
        uint64_t sid = ev.type == GTP_EV_TASK_BEGIN ? ev.args[2] : ev.args[0];
        gtp_str kname = gtp_gen_string(&g, sid);
        if ((ev.type == GTP_EV_INSTANT || ev.type == GTP_EV_REGION_BEGIN ||
             ev.type == GTP_EV_COUNTER || ev.type == GTP_EV_LOG ||
             ev.type == GTP_EV_TASK_BEGIN) &&
            t->nknames < 16 && kname.len < 20)
          snprintf(t->knames[t->nknames++], 24, "%u:%.*s", (unsigned)ev.type,
                   (int)kname.len, kname.ptr);
        if (ev.type == GTP_EV_INSTANT && t->nnames < 8 && name.len < 16) {
          memcpy(t->names[t->nnames], name.ptr, name.len);
          t->names[t->nnames][name.len] = '\0';
          t->nnames++;
        }
        if (ev.type == GTP_EV_COUNTER && s && name.len == 3 &&
            memcmp(name.ptr, "seq", 3) == 0) {
          int64_t v = (int64_t)ev.args[1];
          if (s->last == -2 || !expect_gapless ? v <= s->last
                                               : v != s->last + 1)
            t->order_errors++;
          s->last = v;
        }
      }
      if (erc < 0)
        t->bad++;
    }
    gtp_gen_fini(&g);
  }
  if (rc < 0)
    t->bad++;
}

static void tally_rx(tally *t, rx *r, int gapless) {
  memset(t, 0, sizeof *t);
  seqstate ss[MAXT];
  size_t nss = 0;
  for (size_t i = 0; i < rx_count(r); i++) {
    const rx_gen *g = rx_get(r, i);
    tally_file(t, g->file, g->file_len, ss, &nss, gapless);
  }
}

/* The agent stopped (its last generations flushed), then the receiver,
 * and what the receiver got, decoded. */
static void stop_and_tally(tally *t, rx *r, int gapless) {
  gt_stop();
  rx_stop(r);
  tally_rx(t, r, gapless);
}

/* What the receiver got adds up to what the agent wrote: no bad file, no
 * broken generation, (gapless) no event out of order, and every one of
 * `written` events received or counted lost. The agent's own stats add up
 * too. Stops r; the caller checks the rest of t (the fixture frees r). */
static void expect_exact(tally *t, rx *r, const gt_stats_t *st, int gapless,
                         uint64_t written) {
  assert_int_equal(st->events_pending, 0);
  assert_int_equal(st->events_delivered + st->events_dropped +
                       st->events_evicted + st->events_rejected,
                   st->events_written);
  rx_stop(r);
  tally_rx(t, r, gapless);
  assert_int_equal(t->bad, 0);
  assert_int_equal(t->gen_errors, 0);
  if (gapless)
    assert_int_equal(t->order_errors, 0);
  assert_int_equal(t->events + t->dropped + t->evicted + t->rejected, written);
}

typedef struct worker {
  int n;
  int regions;
  uint64_t worst_ns; /* thread CPU time of the costliest loop step */
  atomic_int *stop;
  long sleeps; /* voluntary context switches of the thread while it wrote */
  int timed;   /* measure worst_ns: two syscalls a step, slower writers */
} worker;

/* Times this thread gave up the CPU on its own (slept, waited on a lock,
 * blocked in a syscall). Being preempted does not count, so unlike a
 * latency bound it does not depend on how loaded the machine is. */
static long thread_sleeps(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0)
    return -1;
  return ru.ru_nvcsw;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *work(void *arg) {
  worker *w = arg;
  long sleeps0 = 0;
  for (int i = 0; (w->n < 0 || i < w->n); i++) {
    if (w->stop && atomic_load(w->stop))
      break;
    /* The thread's first call registers it (a lock shared with the
     * sealer, and calloc): the count starts after it. */
    if (i == 1)
      sleeps0 = thread_sleeps();
    uint64_t t0 = w->timed ? thread_cpu_ns() : 0;
    gt_counter("seq", i);
    if (w->regions) {
      gt_region_begin("outer");
      gt_instant("tick");
      gt_region_end();
    }
    uint64_t d = w->timed ? thread_cpu_ns() - t0 : 0;
    if (d > w->worst_ns)
      w->worst_ns = d;
  }
  w->sleeps = thread_sleeps() - sleeps0;
  return NULL;
}

/* What the callers of run_workers saw: the most CPU time one loop step
 * (its event calls) took in any thread, and the times all threads slept
 * while writing. */
typedef struct call_stats {
  uint64_t worst_ns;
  long sleeps;
} call_stats;

static void run_workers(int nthreads, int n, int regions, call_stats *cs) {
  pthread_t th[16];
  worker w[16];
  for (int i = 0; i < nthreads; i++) {
    w[i] = (worker){n, regions, 0, NULL, 0, cs != NULL};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < nthreads; i++) {
    pthread_join(th[i], NULL);
    if (cs && w[i].worst_ns > cs->worst_ns)
      cs->worst_ns = w[i].worst_ns;
    if (cs)
      cs->sleeps += w[i].sleeps;
  }
}

static void test_api__safe_before_start_and_after_stop(void **state) {
  (void)state;
  gt_region_begin("x");
  gt_region_end();
  gt_instant("x");
  gt_counter("x", 1);
  gt_log("x", "y");
  assert_int_equal(gt_task_begin("x", 0), 0);
  gt_task_end(1);
  gt_thread_name("t");
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  assert_int_equal(st.events_written, 0);
  assert_int_equal(st.conn_state, GT_CONN_OFF);
  assert_int_equal(gt_stats(NULL), -EINVAL);
  assert_int_equal(gt_snapshot(1), -ESRCH);
  gt_stop();
  gt_stop();
}

/* Waits (bounded: 30 s) until the period cut seals a generation after the
 * `since` sealed so far, so what was written before is in a generation of
 * its own: a fixed sleep of a few periods is no promise on a loaded
 * machine, where the sealer thread may not run for longer. */
static void wait_cut(uint64_t since) {
  gt_stats_t st;
  uint64_t t0 = mono_ns();
  do {
    assert_int_equal(gt_stats(&st), 0);
    if (st.gens_sealed > since)
      return;
    usleep(5000);
  } while (mono_ns() - t0 < 30000ull * 1000000);
  fail_msg("no generation sealed in 30 s after %llu",
           (unsigned long long)since);
}

/* The generations sealed so far. */
static uint64_t sealed_now(void) {
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  return st.gens_sealed;
}

static void test_agent__every_event_arrives_once_in_order(void **state) {
  afx *f = *state;
  rx *r = f->r;
  assert_int_equal(gt_start(&f->c), 0);
  assert_int_equal(gt_start(&f->c), -EALREADY);
  gt_thread_name("main");
  run_workers(4, 10000, 1, NULL);
  wait_cut(sealed_now()); /* a period cut between the halves */
  run_workers(4, 10000, 1, NULL);
  gt_stop();
  /* The final counters stay readable after the flush. */
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  assert_int_equal(st.conn_state, GT_CONN_OFF);
  /* Every event call counts, gt_thread_name("main") included. */
  assert_int_equal(st.events_written, 4 * 20000 * 4 + 1);
  tally t;
  expect_exact(&t, r, &st, 1, 4 * 20000 * 4);
  assert_int_equal(t.dropped, 0);
  assert_true(t.gens >= 2);
  assert_int_equal(rx_bad_manifests(r), 0);
}

/* Without membarrier (old kernels, some sandboxes) every event fences
 * between its odd seq and its read of the stamp, and the sealer fences
 * instead of the barrier (agent.c invariant 1): every event still arrives
 * once, in order, across many generation cuts. The agent's own flags are
 * set as once_global would set them there. */
extern int gt__use_fence, gt__membarrier_ok;
static void test_agent__without_membarrier_every_event_arrives(void **state) {
  afx *f = *state;
  rx *r = f->r;
  assert_int_equal(gt_start(&f->c), 0); /* once_global has run */
  gt_stop();
  int mb = gt__membarrier_ok, fence = gt__use_fence;
  gt__membarrier_ok = 0;
  gt__use_fence = 1;
  assert_int_equal(gt_start(&f->c), 0);
  run_workers(4, 10000, 1, NULL);
  wait_cut(sealed_now());
  run_workers(4, 10000, 1, NULL);
  gt_stop();
  gt__membarrier_ok = mb;
  gt__use_fence = fence;
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  assert_int_equal(st.events_written, 4 * 20000 * 4);
  tally t;
  expect_exact(&t, r, &st, 1, 4 * 20000 * 4);
  assert_true(t.gens >= 2);
  assert_int_equal(gtp_check_failures(), 0);
}

/* Waits (bounded) until the agent has resolved everything written. */
static void stop_and_stats(gt_stats_t *st, uint64_t timeout_ms) {
  uint64_t t0 = mono_ns();
  /* Wait until everything sealed so far is resolved, then stop. */
  for (;;) {
    gt_stats(st);
    /* Writers are done: the next cut seals the rest, and once every
     * generation is resolved the agent's own identity holds. */
    if (st->events_written == st->events_delivered + st->events_dropped +
                                  st->events_evicted + st->events_rejected)
      break;
    if ((mono_ns() - t0) / 1000000 > timeout_ms)
      break;
    usleep(5000);
  }
}

static void test_agent__vanishing_receiver_keeps_exact_ledger(void **state) {
  afx *f = *state;
  rx *r = f->r;
  assert_int_equal(gt_start(&f->c), 0);
  run_workers(2, 20000, 0, NULL);
  gt_stats_t st;
  for (int i = 0; i < 500; i++) { /* vanish only once it is streaming */
    gt_stats(&st);
    if (st.conn_state == GT_CONN_CONNECTED && rx_hellos(r) >= 1)
      break;
    usleep(10000);
  }
  rx_vanish(r);
  run_workers(2, 20000, 0, NULL);
  usleep(200000);
  run_workers(2, 20000, 0, NULL);
  rx_return(r);
  run_workers(2, 20000, 0, NULL);
  for (int i = 0; i < 1000 && rx_hellos(r) < 2; i++)
    usleep(10000); /* reconnect backoff is at most ~10 s */
  stop_and_stats(&st, 15000);
  /* Quiet now: nothing more is written, so a last seal + ACK settles it. */
  tally t;
  stop_and_tally(&t, r, 1);
  assert_int_equal(t.bad, 0);
  assert_int_equal(t.order_errors, 0);
  assert_int_equal(t.events + t.dropped + t.evicted + t.rejected,
                   4 * 2 * 20000);
  assert_true(rx_hellos(r) >= 2); /* it reconnected */
}

/* A signal handler that traces, interrupting its thread's events at random
 * points: the events it writes between two of the thread's sections count
 * and arrive; the ones it writes inside a section are dropped uncounted
 * (the section would otherwise end under the interrupted write). Either
 * way, `written` (derived from the thread's sequence number, invariant 5
 * of agent.c) equals what arrives plus what is accounted lost. */
static atomic_int sig_calls, sig_stop;
static void on_sigusr1(int sig) {
  (void)sig;
  gt_instant("test.signal");
  atomic_fetch_add(&sig_calls, 1);
}
static void *sig_sender(void *arg) {
  pthread_t target = *(pthread_t *)arg;
  while (!atomic_load(&sig_stop)) {
    pthread_kill(target, SIGUSR1);
    usleep(20);
  }
  return NULL;
}

static void test_agent__signal_handler_events_counted_exactly(void **state) {
  afx *f = *state;
  rx *r = f->r;
  assert_int_equal(gt_start(&f->c), 0);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  atomic_store(&sig_calls, 0);
  atomic_store(&sig_stop, 0);
  pthread_t self = pthread_self(), sender;
  assert_int_equal(pthread_create(&sender, NULL, sig_sender, &self), 0);
  enum { N = 100000 };
  for (int i = 0; i < N || atomic_load(&sig_calls) < 100; i++) {
    gt_region_begin("test.region");
    gt_counter("test.counter", i);
    gt_region_end();
    if (i >= 50 * N)
      break; /* bounded even if no signal is ever delivered */
  }
  atomic_store(&sig_stop, 1);
  pthread_join(sender, NULL);
  assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
  gt_stats_t st;
  stop_and_stats(&st, 10000);
  gt_stop();
  assert_int_equal(gt_stats(&st), 0);
  uint64_t calls = (uint64_t)atomic_load(&sig_calls);
  assert_true(calls >= 100);
  assert_true(st.events_written >= 3 * (uint64_t)N);
  tally t;
  expect_exact(&t, r, &st, 0, st.events_written);
  /* Debug builds also checked written == seq / 2 after every event. */
  assert_int_equal(gtp_check_failures(), 0);
}

static void test_agent__rejected_generation_is_counted(void **state) {
  afx *f = *state;
  rx *r = f->r;
  rx_reject_gen(r, 2);
  rx_reject_gen(r, 3);
  assert_int_equal(gt_start(&f->c), 0);
  for (int k = 0; k < 10; k++) {
    run_workers(2, 2000, 0, NULL);
    usleep(10000);
  }
  gt_stats_t st;
  stop_and_stats(&st, 10000);
  assert_true(st.gens_rejected >= 1);
  assert_true(st.events_rejected > 0);
  assert_int_equal(st.events_written, st.events_delivered + st.events_dropped +
                                          st.events_evicted +
                                          st.events_rejected);
  tally t;
  stop_and_tally(&t, r, 0);
  assert_int_equal(t.bad, 0);
  assert_true(t.rejected > 0);
  assert_int_equal(t.events + t.dropped + t.evicted + t.rejected,
                   10 * 2 * 2000);
}

/* The daemon holds another key for the session (protocol v2): the agent
 * counts each AUTH, backs off like for TOKEN, keeps its id and key, and
 * loses nothing once it is let in. */
static void test_agent__auth_refusal_is_counted_backs_off_then_delivers(
    void **state) {
  afx *f = *state;
  rx *r = f->r;
  rx_refuse_auth(r, 2);
  assert_int_equal(gt_start(&f->c), 0);
  run_workers(2, 1000, 0, NULL);
  gt_stats_t st;
  stop_and_stats(&st, 15000);
  gt_stop();
  assert_int_equal(gt_stats(&st), 0);
  assert_int_equal(st.auth_refused, 2);
  assert_int_equal(st.events_delivered, st.events_written);
  rx_stop(r);
  assert_true(rx_hellos(r) >= 3);
  uint8_t s0[16], k0[16], s[16], k[16];
  static const uint8_t zero[16];
  assert_int_equal(rx_hello_id(r, 0, s0, k0), 0);
  assert_memory_not_equal(k0, zero, 16);
  for (size_t i = 1; i < rx_hellos(r); i++) {
    assert_int_equal(rx_hello_id(r, i, s, k), 0);
    assert_memory_equal(s, s0, 16);
    assert_memory_equal(k, k0, 16);
  }
  tally t;
  tally_rx(&t, r, 0);
  assert_int_equal(t.events, 2 * 1000);
}

/* A forked child that starts tracing is a new session: its own id and its
 * own key (with its parent's key it could take over the parent's session,
 * and the daemon would refuse one of them with AUTH). */
static void test_agent__fork_child_draws_its_own_session_and_key(
    void **state) {
  afx *f = *state;
#if defined(__SANITIZE_THREAD__)
  (void)f;
  skip(); /* TSan cannot run threads started in the child (see above) */
#else
  rx *r = f->r;
  assert_int_equal(gt_start(&f->c), 0);
  gt_instant("parent");
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char b;
    close(go[1]);
    /* The receiver serves one connection at a time: wait for the parent
     * to be done with it. */
    int ok = read(go[0], &b, 1) == 1 && gt_start(&f->c) == 0;
    gt_instant("child");
    gt_stop();
    _exit(ok ? 0 : 1);
  }
  close(go[0]);
  gt_stop();
  assert_int_equal(write(go[1], "x", 1), 1);
  close(go[1]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  rx_stop(r);
  size_t n = rx_hellos(r);
  assert_true(n >= 2);
  uint8_t ps[16], pk[16], cs[16], ck[16];
  assert_int_equal(rx_hello_id(r, 0, ps, pk), 0);
  assert_int_equal(rx_hello_id(r, n - 1, cs, ck), 0);
  assert_memory_not_equal(ps, cs, 16);
  assert_memory_not_equal(pk, ck, 16);
#endif
}

static void test_agent__full_pool_drops_exactly_and_marks_lost(void **state) {
  afx *f = *state;
  rx *r = f->r;
  f->c.buffer_mb = 1; /* 16 buffers */
  f->c.period_ms = 200;
  assert_int_equal(gt_start(&f->c), 0);
  /* Long enough that threads get buffers back after the pool ran dry. */
  atomic_int stop = 0;
  pthread_t th[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){-1, 0, 0, &stop, 0, 0};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  /* At least 700 ms, and until the pool has run dry, then a few periods
   * more so threads get buffers back and write their LOST markers (on a
   * loaded machine the workers may need far longer than 700 ms to fill
   * the pool). */
  gt_stats_t st;
  usleep(700000);
  for (int i = 0; i < 400; i++) {
    assert_int_equal(gt_stats(&st), 0);
    if (st.events_dropped > 0)
      break;
    usleep(50000);
  }
  usleep(600000);
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  stop_and_stats(&st, 10000);
  assert_true(st.events_dropped > 0);
  uint64_t written = st.events_written;
  tally t;
  stop_and_tally(&t, r, 0);
  assert_int_equal(t.bad, 0);
  assert_int_equal(t.order_errors, 0);
  assert_true(t.dropped > 0);
  assert_true(t.lost_markers > 0);
  assert_true(t.lost_count <= t.dropped);
  assert_int_equal(t.dropped, st.events_dropped);
  assert_int_equal(t.events + t.dropped + t.evicted + t.rejected, written);
}

static void test_agent__no_receiver_never_blocks_and_snapshots(void **state) {
  afx *f = *state;
  f->c.spool_mb = 4; /* above the pool, so one whole generation always fits */
  f->c.buffer_mb = 2;
  f->c.flush_timeout_ms = 2000;
  assert_int_equal(gt_start(&f->c), 0);
  call_stats cs = {0, 0};
  for (int k = 0; k < 10; k++)
    run_workers(4, 20000, 1, &cs);
  /* Never blocks: no call sleeps. A wall-clock bound here failed whenever
   * the machine was busy (a preempted call), so count what blocking is:
   * voluntary context switches. The one lock writers share is the string
   * table's, taken on a thread's first use of a name in a generation; two
   * threads meeting there may wait a moment (0-6 times in 40 thread runs
   * measured under load). One sleep per refill, i.e. waiting for the
   * sender, the spool or a buffer, makes 500-800. */
  assert_true(cs.sleeps >= 0);
  assert_true(cs.sleeps < 40);
  assert_true(cs.worst_ns < WORST_CALL_NS);
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  assert_true(st.mem_in_use <= st.mem_limit);
  assert_true(st.spool_bytes <= (4u << 20));
  assert_true(st.events_evicted > 0);
  assert_int_not_equal(st.conn_state, GT_CONN_CONNECTED);

  char path[] = "/tmp/gentrace-snap-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(gt_snapshot(fd), 0);
  struct stat sb;
  fstat(fd, &sb);
  uint8_t *data = malloc((size_t)sb.st_size);
  assert_int_equal(pread(fd, data, (size_t)sb.st_size, 0), sb.st_size);
  close(fd);
  unlink(path);
  tally t;
  memset(&t, 0, sizeof t);
  seqstate ss[MAXT];
  size_t nss = 0;
  tally_file(&t, data, (size_t)sb.st_size, ss, &nss, 0);
  free(data);
  assert_int_equal(t.bad, 0);
  assert_true(t.gens >= 1);
  assert_true(t.events > 0);

  uint64_t t0 = mono_ns();
  gt_stop();
  assert_true(mono_ns() - t0 < 5000ull * 1000000);
}

/* No daemon at all: gt_stop's bounded flush gives up, and what it could not
 * deliver is counted in events_pending, so the identity holds anyway. */
static void test_agent__unreachable_daemon_at_stop_counts_pending(
    void **state) {
  afx *f = *state;
  f->c.flush_timeout_ms = 200;
  assert_int_equal(gt_start(&f->c), 0);
  run_workers(2, 5000, 0, NULL);
  gt_stop();
  gt_stats_t st;
  assert_int_equal(gt_stats(&st), 0);
  assert_int_equal(st.conn_state, GT_CONN_OFF);
  assert_int_equal(st.events_delivered, 0);
  assert_true(st.gens_pending >= 1);
  assert_true(st.events_pending > 0);
  assert_int_equal(st.events_written,
                   st.events_delivered + st.events_dropped +
                       st.events_evicted + st.events_rejected +
                       st.events_pending);
}

/* Every named kind with its name in a writable buffer (not a literal of
 * the main program): a repeated name is a cache hit whose bytes must be
 * compared (the fast paths leave that to their out-of-line compare), and a
 * changed name in the same buffer must not be taken for the old one. */
static void test_agent__every_kind_with_a_reused_name_buffer(void **state) {
  afx *f = *state;
  rx *r = f->r;
  f->c.period_ms = 10000; /* one generation: the cache must not be fooled */
  assert_int_equal(gt_start(&f->c), 0);
  char buf[32];
  static const char *const names[] = {"kind.one", "kind.one", "kind.two"};
  for (int i = 0; i < 3; i++) {
    strcpy(buf, names[i]);
    gt_instant(buf);
    gt_region_begin(buf);
    gt_region_end();
    gt_counter(buf, i);
    gt_log(buf, "message");
    gt_task_end(gt_task_begin(buf, 0));
  }
  tally t;
  stop_and_tally(&t, r, 0);
  assert_int_equal(t.bad, 0);
  assert_int_equal(t.nknames, 15);
  for (int i = 0; i < 3; i++) {
    static const int types[] = {GTP_EV_INSTANT, GTP_EV_REGION_BEGIN,
                                GTP_EV_COUNTER, GTP_EV_LOG,
                                GTP_EV_TASK_BEGIN};
    for (int k = 0; k < 5; k++) {
      char want[24];
      snprintf(want, sizeof want, "%d:%s", types[k], names[i]);
      assert_string_equal(t.knames[i * 5 + k], want);
    }
  }
}

static void test_agent__reused_buffer_with_new_contents(void **state) {
  afx *f = *state;
  rx *r = f->r;
  f->c.period_ms = 10000; /* one generation: the cache must not be fooled */
  assert_int_equal(gt_start(&f->c), 0);
  char buf[32];
  strcpy(buf, "alpha");
  gt_instant(buf);
  strcpy(buf, "beta");
  gt_instant(buf);
  strcpy(buf, "alphb"); /* same length as alpha */
  gt_instant(buf);
  strcpy(buf, "alp");
  gt_instant(buf);
  tally t;
  stop_and_tally(&t, r, 0);
  assert_int_equal(t.nnames, 4);
  assert_string_equal(t.names[0], "alpha");
  assert_string_equal(t.names[1], "beta");
  assert_string_equal(t.names[2], "alphb");
  assert_string_equal(t.names[3], "alp");
}

static void test_agent__fork_child_stays_off(void **state) {
  afx *f = *state;
  assert_int_equal(gt_start(&f->c), 0);
  gt_instant("parent");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    gt_instant("child"); /* no-op, must not touch the parent's buffers */
    gt_stats_t st;
    gt_stats(&st);
    int ok = st.events_written == 0 && st.conn_state == GT_CONN_OFF;
#if !defined(__SANITIZE_THREAD__)
    /* The child may start a session of its own. (TSan cannot run threads
     * started in the child of a multi-threaded parent: skipped there.) */
    ok = ok && gt_start(&f->c) == 0;
    gt_instant("child2");
    gt_stats(&st);
    ok = ok && st.events_written == 1;
    gt_stop();
#endif
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  gt_stats_t st;
  gt_stats(&st);
  assert_int_equal(st.events_written, 1);
  gt_stop();
}

/* Frame pointers here, whatever the test's CFLAGS: the walk follows them. */
static __attribute__((noinline, optimize("no-omit-frame-pointer"))) void
leaf(int depth) {
  if (depth > 0) {
    leaf(depth - 1);
    __asm__ volatile("" ::: "memory"); /* keep the call a real frame */
    return;
  }
  gt_instant("with_stack");
  gt_region_begin("r");
  gt_region_end();
}

static void test_agent__stacks_and_modules_recorded(void **state) {
  afx *f = *state;
  rx *r = f->r;
  f->c.stacks = 1;
  f->c.period_ms = 10000;
  assert_int_equal(gt_start(&f->c), 0);
  for (int i = 0; i < 10; i++)
    leaf(5);
  gt_stop();
  rx_stop(r);
  assert_int_equal(rx_count(r), 1);
  const rx_gen *rg = rx_get(r, 0);
  gtp_file_reader fr;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&fr, rg->file, rg->file_len), 0);
  assert_int_equal(gtp_file_reader_next(&fr, &g), 1);
  assert_true(g.nmodules >= 1);
  assert_true(g.nstacks >= 1);
  assert_true(g.nstacks <= 4); /* deduplicated: the same few call sites */
  size_t cur = 0, with_stack = 0;
  gtp_batch b;
  while (gtp_gen_next_batch(&g, &cur, &b) == 1) {
    gtp_event_iter it;
    gtp_event ev;
    gtp_event_iter_init(&it, &b);
    while (gtp_event_next(&it, &ev) == 1)
      if (ev.type == GTP_EV_INSTANT_STACK) {
        const gtp_stack_ent *se = gtp_gen_stack(&g, ev.args[1]);
        assert_non_null(se);
        /* The innermost frame is the caller of gt_instant (leaf), not an
         * agent frame: the walk skips exactly the agent's own frames. */
        const uint8_t *fp = se->frames;
        uint64_t pc0 = 0;
        assert_int_equal(
            gtp_uvarint_get(&fp, se->frames + se->frames_len, &pc0), 0);
        assert_true(pc0 > (uint64_t)(uintptr_t)leaf &&
                    pc0 < (uint64_t)(uintptr_t)leaf + 256);
        /* Then the other five leaf frames (at least). */
        assert_true(se->nframes >= 6);
        with_stack++;
      }
  }
  assert_int_equal(with_stack, 10);
  gtp_gen_fini(&g);
}

static int stop_agent(void **state) {
  (void)state;
  gt_stop(); /* a failed test must not leave its session to the next */
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_api__safe_before_start_and_after_stop,
                                stop_agent),
      cmocka_unit_test_setup_teardown(
          test_agent__every_event_arrives_once_in_order, with_rx, afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__without_membarrier_every_event_arrives, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__vanishing_receiver_keeps_exact_ledger, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__rejected_generation_is_counted, with_rx, afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__signal_handler_events_counted_exactly, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__full_pool_drops_exactly_and_marks_lost, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__unreachable_daemon_at_stop_counts_pending, no_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__no_receiver_never_blocks_and_snapshots, no_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__reused_buffer_with_new_contents, with_rx, afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__every_kind_with_a_reused_name_buffer, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(test_agent__fork_child_stays_off, no_rx,
                                      afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__auth_refusal_is_counted_backs_off_then_delivers, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(
          test_agent__fork_child_draws_its_own_session_and_key, with_rx,
          afx_teardown),
      cmocka_unit_test_setup_teardown(test_agent__stacks_and_modules_recorded,
                                      with_rx, afx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
