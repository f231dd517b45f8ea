/* agent.c: libgentrace core: the session (gt_start/gt_stop), the agent
 * thread, stats and snapshots. Recording is in record.c, sealing in seal.c,
 * configuration and identity in ident.c (agent_int.h lists them); the
 * design below is the whole core's.
 *
 * Owns: the global agent state `A` (one session at a time), the registry of
 * threads that ever wrote an event, the agent thread.
 *
 * Generation switch (after the Go tracer's traceAcquire/traceRelease). Each
 * thread has a sequence counter `seq` that only it writes. To write an event
 * it makes seq odd, reads the global generation stamp A.stamp, writes into
 * its buffer for that stamp's parity, and makes seq even. The sealer stores
 * the next stamp, runs an asymmetric barrier (membarrier), then waits until
 * every thread's seq is even or has changed, and only then takes the old
 * generation's buffers. Stamps are internal and never restart while the
 * process lives (wire gen = stamp - A.stamp_base), so caches and buffers
 * from an older session can never match a newer one.
 *
 * Invariants:
 *  1. A thread MUST read the stamp only after its odd seq is visible to the
 *     sealer (membarrier on the sealer's side; a seq_cst fence on the hot
 *     path when membarrier is missing; seq_cst atomics under TSan), otherwise
 *     the sealer could take a buffer the thread is still writing.
 *  2. The sealer MUST NOT touch bufs[old & 1], full[old & 1] or the old
 *     tables before every thread has left generation `old` (seq even or
 *     moved), otherwise it would read half-written events; and a thread is
 *     never inside two generations because it reads the stamp once per event.
 *  3. Only one sealer runs at a time (seal_lock), and it seals generations in
 *     order, so table[parity] is reset before the stamp of that parity comes
 *     back.
 *  4. The hot path (an event on a thread whose buffer has room and whose
 *     strings are cached) MUST NOT lock, allocate, make a syscall or do an
 *     atomic read-modify-write, otherwise tracing would perturb the host.
 *     Buffer refills (once per 64 KiB) take no lock either (lock-free pool
 *     and full lists, pool.h invariant 2); the first use of a string in a
 *     generation and thread registration take short O(1) locks.
 *  5. Every event call made while tracing is on counts once in `written`
 *     and, if it found no buffer, once in `dropped`; the sealer attributes
 *     drops to generations by differences of these cumulative counters, so
 *     each drop lands in exactly one ledger. `written` is not stored: it is
 *     seq / 2 (gt__thread_written), since an event's section moves seq by
 *     exactly 2 and a section that finds tracing off (stamp 0) puts seq
 *     back to its even value instead; a nested call from a signal handler
 *     leaves seq alone. So written counts the finished sections only (an
 *     event in progress is counted when it leaves), and it is exact once
 *     every thread has left (gt_stop's final stats). seq moves by one
 *     add to memory (SEQ_ADD in record.c), never a load and a store, so a
 *     traced signal handler that runs a whole event between them cannot be
 *     written over. Debug builds check seq / 2 on every entry against a
 *     counter kept the old way (GT_DEBUG, record.c).
 *  6. A thread struct lives until its thread exits; it is freed by the
 *     sealer (or by its destructor when no session runs) only once both of
 *     its generation slots are empty, otherwise buffers would leak.
 *
 * Fork: the child stays off (its copy of the agent is abandoned without
 * touching locks other threads may have held) and may call gt_start() for a
 * new session; it never shares the parent's socket or buffers.
 */
#include "config.h"

#include "agent_int.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ident.h"
#include "tls.h"
#include "varint.h"

/* ---------------------------------------------------------- shared state */

__thread gt__thread *tls_self __attribute__((tls_model("initial-exec")));
pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
gt__thread *reg_head;
uint64_t reg_next_index = 1;
uint64_t folded_written, folded_dropped;
pthread_key_t reg_key;
pthread_once_t reg_once = PTHREAD_ONCE_INIT;
_Atomic uint64_t stamp_now;
uint64_t stamp_last;
int use_fence;
int stacks_on;
pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;
int agent_running;
int reg_key_made;
agent A;
gt_stats_t last_stats;
int have_last_stats;

static void stats_locked(gt_stats_t *out);

static uint64_t now_ms(void) {
  return gt__ns(CLOCK_MONOTONIC) / 1000000;
}

/* ---------------------------------------------------------- agent thread */

void wake(void) {
  uint64_t one = 1;
  (void)!write(A.wake_fd, &one, sizeof one);
}

static void *agent_main(void *arg) {
  (void)arg;
  uint64_t period = A.cfg.period_ms;
  uint64_t next_cut = now_ms() + period;
  for (;;) {
    uint64_t now = now_ms();
    if (atomic_load(&A.stop_req))
      break;
    if (now >= next_cut || atomic_exchange(&A.cut_req, 0)) {
      pthread_mutex_lock(&A.seal_lock);
      seal(0);
      pthread_mutex_unlock(&A.seal_lock);
      now = now_ms();
      next_cut = now + period;
    }
    gt__sender_step(&A.sender, now, 0);
    atomic_store(&A.conn_state, A.sender.state);
    struct pollfd pfd[2];
    pfd[0] = (struct pollfd){.fd = A.wake_fd, .events = POLLIN};
    int to = gt__sender_poll(&A.sender, now, &pfd[1]);
    uint64_t cut_in = next_cut > now ? next_cut - now : 0;
    if (to < 0 || (uint64_t)to > cut_in)
      to = (int)cut_in;
    int rc = poll(pfd, 2, to);
    now = now_ms();
    if (rc > 0 && (pfd[0].revents & POLLIN)) {
      uint64_t v;
      (void)!read(A.wake_fd, &v, sizeof v);
    }
    if (rc > 0 && pfd[1].fd >= 0 && pfd[1].revents)
      gt__sender_step(&A.sender, now, pfd[1].revents);
  }

  /* Stop: seal the last generation, then deliver for a bounded time. */
  pthread_mutex_lock(&A.seal_lock);
  seal(1);
  pthread_mutex_unlock(&A.seal_lock);
  /* flush_timeout_ms 0 is "automatic": 2 s to deliver to a daemon this
   * session reached, but only UNREACHED_FLUSH_MS when none ever answered
   * (connects == 0): a program run without a daemon must not linger at exit.
   * A handshake on a reachable daemon takes well under that bound. */
  uint64_t stop_at = now_ms();
  int automatic = A.cfg.flush_timeout_ms == 0;
  uint64_t deadline =
      stop_at + (automatic ? FLUSH_DEFAULT_MS : A.cfg.flush_timeout_ms);
  int ledger_gens = 0;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= deadline)
      break;
    if (automatic && now >= stop_at + UNREACHED_FLUSH_MS &&
        __atomic_load_n(&A.sender.connects, __ATOMIC_RELAXED) == 0)
      break;
    if (gt__spool_idle(&A.spool) && gt__sender_drained(&A.sender)) {
      if (gt__spool_settled(&A.spool) || ledger_gens >= 4)
        break;
      pthread_mutex_lock(&A.seal_lock);
      seal_ledger_only();
      pthread_mutex_unlock(&A.seal_lock);
      ledger_gens++;
    }
    gt__sender_step(&A.sender, now, 0);
    atomic_store(&A.conn_state, A.sender.state);
    struct pollfd pfd[2];
    pfd[0] = (struct pollfd){.fd = A.wake_fd, .events = POLLIN};
    int to = gt__sender_poll(&A.sender, now, &pfd[1]);
    if (to < 0 || (uint64_t)to > deadline - now)
      to = (int)(deadline - now);
    if (to > 50)
      to = 50;
    int rc = poll(pfd, 2, to);
    if (rc > 0 && (pfd[0].revents & POLLIN)) {
      uint64_t v;
      (void)!read(A.wake_fd, &v, sizeof v);
    }
    if (rc > 0 && pfd[1].fd >= 0 && pfd[1].revents)
      gt__sender_step(&A.sender, now_ms(), pfd[1].revents);
  }
  gt__sender_close(&A.sender);
  return NULL;
}

static void at_exit(void) {
  gt_stop();
}

static void atfork_child(void) {
  /* The child has one thread; the parent's agent thread, socket and
   * buffers belong to the parent. Forget them without touching any lock
   * another parent thread may have held at fork time. */
  if (A.wake_fd > 0)
    close(A.wake_fd);
  if (A.sender.fd >= 0 && agent_running)
    close(A.sender.fd);
  memset(&A, 0, sizeof A);
  agent_running = 0;
  have_last_stats = 0; /* the parent's counters are not the child's */
  atomic_store(&stamp_now, 0);
  pthread_mutex_init(&life_lock, NULL);
  pthread_mutex_init(&reg_lock, NULL);
  reg_head = NULL; /* the parent's thread structs leak in the child */
  if (tls_self != DEAD_THREAD)
    tls_self = NULL;
  if (reg_key_made)
    pthread_setspecific(reg_key, NULL); /* not ours to free in the child */
}

static void once_global(void) {
  gt__clock_init();
  if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
              0) == 0)
    membarrier_ok = 1;
  use_fence = !membarrier_ok;
  pthread_atfork(NULL, NULL, atfork_child);
  atexit(at_exit);
}
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void agent_free(void) {
  gt__sender_fini(&A.sender);
  gt__spool_fini(&A.spool);
  for (int i = 0; i < 2; i++) {
    gt__strtab_fini(&A.str[i]);
    gt__stacktab_fini(&A.stk[i]);
  }
  if (!A.abandoned)
    gt__pool_fini(&A.pool);
  if (A.wake_fd > 0)
    close(A.wake_fd);
  A.wake_fd = 0;
  pthread_mutex_destroy(&A.seal_lock);
  gt__ident_fini(&A.id);
  free(A.addr);
  free((char *)A.cfg.service);
  A.cfg.service = NULL;
}

int gt_start(const gt_config *user) {
  pthread_once(&global_once, once_global);
  gt_config c;
  if (user == NULL) {
    gt__config_from_env(&c);
  } else {
    gt_config_init(&c);
    size_t n = user->size < sizeof c ? user->size : sizeof c;
    if (n < offsetof(gt_config, log))
      return -EINVAL;
    memcpy(&c, user, n);
    c.size = sizeof c;
  }
  if (c.addr == NULL || *c.addr == '\0')
    c.addr = "127.0.0.1:7170";
  if (c.period_ms == 0)
    c.period_ms = 1000;
  if (c.period_ms < 10)
    c.period_ms = 10;
  /* gentraced refuses generations spanning more than its --max-gen-span
   * (default 10 min); half of it leaves room for a late cut. */
  if (c.period_ms > 300000)
    c.period_ms = 300000;
  /* 16 MiB: the generation is cut at half the pool (8 MiB, GEN_CUT_BYTES),
   * and the other half must last while the agent thread wakes and seals.
   * With 8 MiB one agent at 20-25 M events/s dropped 3-14 M events a 2 s
   * trial (the sealer off a CPU for 10-90 ms at load 4-9), with 16 MiB
   * 0-0.9 M (bench/RESULTS.md, 2026-11-26). Carved on first use: a quiet
   * program touches a few buffers of it. */
  if (c.buffer_mb == 0)
    c.buffer_mb = 16;
  if (c.spool_mb == 0)
    c.spool_mb = 64;
  if (c.buffer_mb > 65536 || c.spool_mb > 65536)
    return -EINVAL;

  pthread_mutex_lock(&life_lock);
  if (agent_running) {
    pthread_mutex_unlock(&life_lock);
    return -EALREADY;
  }
  memset(&A, 0, sizeof A);
  A.cfg = c;
  A.cfg.service = NULL;
  A.sender.fd = -1;
  int rc = gt__ident_init(&A.id, &c);
  if (rc != 0)
    goto fail_ident;
  A.addr = strdup(c.addr);
  if (A.addr == NULL) {
    rc = -ENOMEM;
    goto fail_addr;
  }
  rc = gt__pool_init(&A.pool, (size_t)c.buffer_mb << 20);
  if (rc != 0)
    goto fail_pool;
  A.cut_bytes = ((size_t)c.buffer_mb << 20) / 2;
  if (A.cut_bytes > GEN_CUT_BYTES)
    A.cut_bytes = GEN_CUT_BYTES;
  if (A.cut_bytes < 2 * GT_BUF_SIZE)
    A.cut_bytes = 2 * GT_BUF_SIZE;
  for (int i = 0; i < 2; i++) {
    rc = gt__strtab_init(&A.str[i], STR_ENTS, STR_BYTES);
    if (rc == 0 && c.stacks)
      rc = gt__stacktab_init(&A.stk[i], STACK_ENTS, STACK_PCS);
    if (rc != 0)
      goto fail_tables;
  }
  rc = gt__spool_init(&A.spool, (size_t)c.spool_mb << 20);
  if (rc != 0)
    goto fail_tables;
  rc = gt__sender_init(&A.sender, A.addr, &A.id, &A.spool, logf_);
  if (rc != 0)
    goto fail_sender;
  if (c.tls_ca != NULL || c.tls_cert != NULL) {
    /* Files are read once, here: a bad one is gt_start's -EINVAL. */
    rc = gt__tls_new(c.tls_ca, c.tls_cert, c.tls_key, &A.sender.tls);
    if (rc != 0) {
      gt__sender_fini(&A.sender);
      goto fail_sender;
    }
  }
  A.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (A.wake_fd < 0) {
    rc = -errno;
    goto fail_wake;
  }
  pthread_mutex_init(&A.seal_lock, NULL);

  /* Baselines so stats and ledgers count this session only. */
  pthread_mutex_lock(&reg_lock);
  uint64_t w = folded_written, d = folded_dropped;
  for (gt__thread *t = reg_head; t != NULL; t = t->next) {
    w += gt__thread_written(t);
    d += atomic_load_explicit(&t->dropped, memory_order_relaxed);
  }
  agent_running = 1;
  have_last_stats = 0;
  pthread_mutex_unlock(&reg_lock);
  A.base_written = w;
  A.base_dropped = d;
  A.dropped_accounted = d;

  stacks_on = c.stacks;
  hot_slow = stacks_on || !gt__clock_tsc;
  /* Before the stamp: writers read the segments after loading it. */
  gt__rodata_init();
  A.stamp_base = stamp_last; /* wire gens start at 1 */
  A.open_stamp = ++stamp_last;
  clock_now(&A.open_clock.start_ticks, &A.open_clock.start_mono_ns,
            &A.open_clock.start_real_ns);
  atomic_store(&A.conn_state, GT_CONN_CONNECTING);
  atomic_store_explicit(&stamp_now, A.open_stamp, memory_order_seq_cst);

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the agent thread takes none */
  rc = -pthread_create(&A.thread, NULL, agent_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    atomic_store(&stamp_now, 0);
    pthread_mutex_lock(&A.seal_lock);
    seal(1);
    pthread_mutex_unlock(&A.seal_lock);
    pthread_mutex_lock(&reg_lock);
    agent_running = 0;
    pthread_mutex_unlock(&reg_lock);
    agent_free();
    pthread_mutex_unlock(&life_lock);
    return rc;
  }
  char hex[33];
  gtp_session_hex(A.id.session, hex);
  logf_(GT_LOG_INFO, "gentrace: session %s started (service %s, addr %s)", hex,
        A.id.service, A.addr);
  pthread_mutex_unlock(&life_lock);
  return 0;

fail_wake:
  gt__sender_fini(&A.sender);
fail_sender:
  gt__spool_fini(&A.spool);
fail_tables:
  for (int i = 0; i < 2; i++) {
    gt__strtab_fini(&A.str[i]);
    gt__stacktab_fini(&A.stk[i]);
  }
  gt__pool_fini(&A.pool);
fail_pool:
  free(A.addr);
fail_addr:
  gt__ident_fini(&A.id);
fail_ident:
  memset(&A, 0, sizeof A);
  pthread_mutex_unlock(&life_lock);
  return rc;
}

void gt_stop(void) {
  pthread_mutex_lock(&life_lock);
  if (!agent_running) {
    pthread_mutex_unlock(&life_lock);
    return;
  }
  atomic_store(&A.stop_req, 1);
  wake();
  pthread_join(A.thread, NULL);
  /* stamp_now is 0 now (final seal): no thread writes any more. */
  pthread_mutex_lock(&reg_lock);
  agent_running = 0;
  thread_reap_locked();
  pthread_mutex_unlock(&reg_lock);
  /* After the final seal and flush: what the session ends with. */
  stats_locked(&last_stats);
  last_stats.conn_state = GT_CONN_OFF;
  have_last_stats = 1;
  logf_(GT_LOG_INFO, "gentrace: stopped");
  agent_free();
  memset(&A, 0, sizeof A);
  pthread_mutex_unlock(&life_lock);
}

/* ------------------------------------------------------- stats, snapshot */

/* Fills *out from the running session. Lock: life_lock held. */
static void stats_locked(gt_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&reg_lock);
  uint64_t w = folded_written, d = folded_dropped;
  size_t nthreads = 0;
  for (gt__thread *t = reg_head; t != NULL; t = t->next) {
    w += gt__thread_written(t);
    d += atomic_load_explicit(&t->dropped, memory_order_relaxed);
    nthreads++;
  }
  pthread_mutex_unlock(&reg_lock);
  out->events_written = w - A.base_written;
  out->events_dropped = d - A.base_dropped;
  pthread_mutex_lock(&A.seal_lock);
  out->gens_sealed = A.gens_sealed;
  out->bytes_sealed = A.bytes_sealed;
  out->events_dropped += A.sealing_lost;
  pthread_mutex_unlock(&A.seal_lock);
  gt__spool *sp = &A.spool;
  pthread_mutex_lock(&sp->lock);
  out->events_delivered = sp->delivered_events;
  out->events_evicted = sp->evicted_events;
  out->events_rejected = sp->rejected_events;
  out->gens_sent = sp->sent_gens;
  out->gens_acked = sp->acked_gens;
  out->gens_rejected = sp->rejected_gens;
  out->gens_evicted = sp->evicted_gens;
  out->spool_bytes = sp->bytes;
  out->last_acked_gen = sp->last_acked;
  gt__spool_pending_locked(sp, &out->gens_pending, &out->events_pending);
  pthread_mutex_unlock(&sp->lock);
  size_t tables = 0;
  for (int i = 0; i < 2; i++)
    tables += gt__strtab_mem(&A.str[i]) +
              (A.cfg.stacks ? gt__stacktab_mem(&A.stk[i]) : 0);
  out->mem_in_use = gt__pool_bytes(&A.pool) + out->spool_bytes + tables +
                    nthreads * sizeof(gt__thread) + (2u << 20) /* out buf */;
  out->mem_limit = ((uint64_t)A.cfg.buffer_mb << 20) +
                   ((uint64_t)A.cfg.spool_mb << 20) + tables +
                   nthreads * sizeof(gt__thread) + (2u << 20);
  out->bytes_sent = __atomic_load_n(&A.sender.bytes_sent, __ATOMIC_RELAXED);
  out->connects = __atomic_load_n(&A.sender.connects, __ATOMIC_RELAXED);
  out->auth_refused = __atomic_load_n(&A.sender.auth_refused, __ATOMIC_RELAXED);
  out->tls_failures = __atomic_load_n(&A.sender.tls_failures, __ATOMIC_RELAXED);
  int st = atomic_load(&A.conn_state);
  out->conn_state = st == GT_SEND_STREAMING ? GT_CONN_CONNECTED
                    : st == GT_SEND_BACKOFF ? GT_CONN_BACKOFF
                                            : GT_CONN_CONNECTING;
}

int gt_stats(gt_stats_t *out) {
  if (out == NULL)
    return -EINVAL;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&life_lock);
  if (agent_running)
    stats_locked(out);
  else if (have_last_stats)
    *out = last_stats; /* conn_state is GT_CONN_OFF there */
  pthread_mutex_unlock(&life_lock);
  return 0;
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

int gt_snapshot(int fd) {
  if (fd < 0)
    return -EBADF;
  pthread_mutex_lock(&life_lock);
  if (!agent_running) {
    pthread_mutex_unlock(&life_lock);
    return -ESRCH;
  }
  pthread_mutex_lock(&A.seal_lock);
  seal(0);
  pthread_mutex_unlock(&A.seal_lock);
  size_t cap = gt__spool_count(&A.spool) + 1;
  gt__gen **gens = calloc(cap, sizeof *gens);
  if (gens == NULL) {
    pthread_mutex_unlock(&life_lock);
    return -ENOMEM;
  }
  size_t n = gt__spool_pin_all(&A.spool, gens, cap);
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, A.id.session, 16);
  gs.service = (gtp_str){A.id.service, strlen(A.id.service)};
  gs.host = (gtp_str){A.id.host, strlen(A.id.host)};
  gs.agent_version = (gtp_str){PACKAGE_VERSION, strlen(PACKAGE_VERSION)};
  gs.pid = A.id.pid;
  gs.process_start_ns = A.id.start_ns;
  gs.ntags = A.id.ntags;
  memcpy(gs.tags, A.id.tags, sizeof(gtp_tag) * A.id.ntags);
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  int rc = gtp_put_file_header(&w);
  if (rc == 0)
    rc = write_all(fd, w.data, w.len);
  for (size_t i = 0; i < n && rc == 0; i++) {
    gt__gen *g = gens[i];
    gtp_gen_end e;
    pthread_mutex_lock(&A.spool.lock);
    e = g->end;
    if (!g->ledger_set) {
      e.dropped = g->own_dropped;
      e.evicted = e.rejected = 0;
    }
    pthread_mutex_unlock(&A.spool.lock);
    gtp_wbuf_reset(&w);
    gs.gen = g->gen;
    gtp_put_gen_start(&w, &gs);
    rc = w.err;
    if (rc == 0)
      rc = write_all(fd, w.data, w.len);
    if (rc == 0)
      rc = write_all(fd, g->body, g->body_len);
    gtp_wbuf_reset(&w);
    if (rc == 0)
      rc = gtp_put_gen_end(&w, &e);
    if (rc == 0)
      rc = write_all(fd, w.data, w.len);
  }
  for (size_t i = 0; i < n; i++)
    gt__spool_unref(&A.spool, gens[i]);
  free(gens);
  gtp_wbuf_fini(&w);
  pthread_mutex_unlock(&life_lock);
  return rc;
}
