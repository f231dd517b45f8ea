/* agent.c: libgentrace core: the public API, per-thread recording, the
 * generation advancer and the agent thread.
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
 *     each drop lands in exactly one ledger.
 *  6. A thread struct lives until its thread exits; it is freed by the
 *     sealer (or by its destructor when no session runs) only once both of
 *     its generation slots are empty, otherwise buffers would leak.
 *
 * Fork: the child stays off (its copy of the agent is abandoned without
 * touching locks other threads may have held) and may call gt_start() for a
 * new session; it never shares the parent's socket or buffers.
 */
#include "config.h"

#include "gentrace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "format.h"
#include "intern.h"
#include "pool.h"
#include "sender.h"
#include "spool.h"
#include "stack.h"
#include "varint.h"

#if defined(__SANITIZE_THREAD__)
#define GT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GT_TSAN 1
#endif
#endif
#ifndef GT_TSAN
#define GT_TSAN 0
#endif

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define STR_ENTS 16384
#define STR_BYTES (1u << 20)
#define STACK_ENTS 8192
#define STACK_PCS (256u << 10)
#define STACK_DEPTH 64
/* Size cut: a generation is cut early once its buffers pass this, below the
 * daemon's default maximum generation size. The effective cut is also at
 * most half the buffer pool (A.cut_bytes): full buffers stay with their
 * generation until it is sealed, so a cut at the pool's size would only fire
 * once the pool was empty and every busy thread was already dropping; at
 * half, the next generation fills the other half while this one seals (B1
 * measured zero loss only up to ~1 M events/s with the cut at the pool size).
 */
#define GEN_CUT_BYTES (8u << 20)

typedef struct gt__thread {
  /* Written by the owner thread; read by the sealer. */
  _Atomic uint64_t seq;
  _Atomic(gt__buf *) bufs[2];
  _Atomic uint64_t written, dropped; /* cumulative, owner stores only */
  _Atomic int dead;
  /* Owner thread only. */
  uint64_t seq_local, written_local, dropped_local;
  uint64_t lost_pending; /* drops not yet reported by a LOST marker */
  uint64_t task_seq;
  uintptr_t stack_lo, stack_hi;
  int stack_ok, stack_tried;
  char name[64];
  uint32_t name_len;
  gt__strcache_ent scache[GT_STRCACHE_SIZE];
  gt__stackcache_ent kcache[GT_STACKCACHE_SIZE];
  /* Written once at registration. */
  uint64_t tid, index;
  /* Protected by reg_lock. */
  struct gt__thread *next;
} gt__thread;

#define DEAD_THREAD ((gt__thread *)1)
static __thread gt__thread *tls_self __attribute__((tls_model("initial-exec")));

/* The registry outlives sessions (threads keep their structs). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static gt__thread *reg_head;                    /* protected by reg_lock */
static uint64_t reg_next_index = 1;             /* protected by reg_lock */
static uint64_t folded_written, folded_dropped; /* freed threads; reg_lock */
static pthread_key_t reg_key;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

/* The stamp of the open generation; 0 = tracing off. */
static _Atomic uint64_t stamp_now;
static uint64_t stamp_last; /* last stamp ever used; life_lock */
static int use_fence;       /* no membarrier: seq_cst fence on the hot path */
static int stacks_on;       /* written before stamp_now becomes non-zero */

/* gt_start/gt_stop serialization. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1 while a session runs; protected by reg_lock (thread destructors read
 * it) and changed only under life_lock. Kept out of A, which is wiped. */
static int agent_running;
static int reg_key_made; /* reg_once ran */

typedef struct agent {
  gt_config cfg;
  char *addr;
  gt__ident id;
  uint64_t stamp_base;
  gt__pool pool;
  gt__strtab str[2];
  gt__stacktab stk[2];
  /* Lock-free (invariant 4): writers push full buffers (Treiber push), the
   * sealer takes a whole list with one exchange once every writer has left
   * its generation (invariant 2), so no pop ever races a push. */
  _Atomic(gt__buf *) full[2];
  _Atomic size_t gen_bytes[2];
  atomic_int cut_signalled[2];
  gt__spool spool;
  gt__sender sender;
  pthread_mutex_t seal_lock;
  /* seal_lock */
  uint64_t open_stamp;
  gtp_clock open_clock;
  uint64_t dropped_accounted;
  uint64_t base_written, base_dropped; /* counters at gt_start */
  uint64_t gens_sealed, bytes_sealed, sealing_lost;
  int abandoned; /* a thread never left a generation: keep the pool mapped */
  /* Agent thread. */
  pthread_t thread;
  int wake_fd;
  _Atomic int stop_req, cut_req;
  _Atomic int conn_state;
  size_t cut_bytes; /* written once before the agent thread starts */
  uint64_t flush_deadline_ms;
} agent;

static agent A;

/* The counters of the session that gt_stop() ended, so a caller can read its
 * final accounting after the flush. Protected by life_lock. */
static gt_stats_t last_stats;
static int have_last_stats;
static void stats_locked(gt_stats_t *out);

/* ------------------------------------------------------------- logging */

static void logf_(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_(int level, const char *fmt, ...) {
  if (A.cfg.log == NULL || level < A.cfg.log_level)
    return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  A.cfg.log(A.cfg.log_ctx, level, line);
}

static uint64_t now_ms(void) {
  return gt__ns(CLOCK_MONOTONIC) / 1000000;
}

/* ----------------------------------------------------- thread registry */

static void thread_free_locked(gt__thread *t) {
  uint64_t w = atomic_load_explicit(&t->written, memory_order_relaxed);
  uint64_t d = atomic_load_explicit(&t->dropped, memory_order_relaxed);
  folded_written += w;
  folded_dropped += d;
  for (gt__thread **pp = &reg_head; *pp != NULL; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  free(t);
}

static void thread_dtor(void *p) {
  gt__thread *t = p;
  tls_self = DEAD_THREAD;
  /* dead is set under reg_lock: the sealer frees dead threads under the
   * same lock, so t stays valid until we release it. The release store also
   * orders every event this thread wrote before the sealer's acquire. */
  pthread_mutex_lock(&reg_lock);
  atomic_store_explicit(&t->dead, 1, memory_order_release);
  if (atomic_load_explicit(&t->bufs[0], memory_order_relaxed) == NULL &&
      atomic_load_explicit(&t->bufs[1], memory_order_relaxed) == NULL &&
      !agent_running)
    thread_free_locked(t);
  pthread_mutex_unlock(&reg_lock);
}

static void reg_key_make(void) {
  reg_key_made = pthread_key_create(&reg_key, thread_dtor) == 0;
}

static __attribute__((noinline)) gt__thread *thread_register(void) {
  if (tls_self == DEAD_THREAD)
    return NULL;
  /* Off: do not allocate for threads of a process that is not tracing. */
  if (atomic_load_explicit(&stamp_now, memory_order_relaxed) == 0)
    return NULL;
  gt__thread *t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  t->tid = (uint64_t)syscall(SYS_gettid);
  pthread_once(&reg_once, reg_key_make);
  pthread_setspecific(reg_key, t);
  pthread_mutex_lock(&reg_lock);
  t->index = reg_next_index++;
  t->next = reg_head;
  reg_head = t;
  pthread_mutex_unlock(&reg_lock);
  tls_self = t;
  return t;
}

/* ------------------------------------------------------------ hot path */

/* Enters the write section of registered thread t; returns the stamp, or 0
 * (off, nested from a signal handler) with the section left. No call: the
 * named-event fast path relies on it. */
static inline uint64_t enter_t(gt__thread *t) {
  /* A signal handler interrupting a section would make seq even while the
   * interrupted write is still going on: drop such nested events. */
  if (UNLIKELY(t->seq_local & 1))
    return 0;
  uint64_t s = ++t->seq_local;
#if GT_TSAN
  atomic_store_explicit(&t->seq, s, memory_order_seq_cst);
  uint64_t g = atomic_load_explicit(&stamp_now, memory_order_seq_cst);
#else
  atomic_store_explicit(&t->seq, s, memory_order_relaxed);
  /* Invariant 1: the sealer's membarrier orders this store before our load;
   * without it we pay for a full fence. */
  if (UNLIKELY(use_fence))
    atomic_thread_fence(memory_order_seq_cst);
  else
    atomic_signal_fence(memory_order_seq_cst);
  uint64_t g = atomic_load_explicit(&stamp_now, memory_order_acquire);
#endif
  if (UNLIKELY(g == 0)) {
    atomic_store_explicit(&t->seq, ++t->seq_local, memory_order_release);
    return 0;
  }
  t->written_local++;
  atomic_store_explicit(&t->written, t->written_local, memory_order_relaxed);
  return g;
}

/* Enters the write section; returns the thread with *stamp set, or NULL
 * (off, dead, nested from a signal handler) with the section left. */
static inline gt__thread *enter(uint64_t *stamp) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    if (t == DEAD_THREAD)
      return NULL;
    t = thread_register();
    if (t == NULL)
      return NULL;
  }
  uint64_t g = enter_t(t);
  if (g == 0)
    return NULL;
  *stamp = g;
  return t;
}

static inline void leave(gt__thread *t) {
  /* Release: the events written happen-before the sealer's acquire of seq. */
  atomic_store_explicit(&t->seq, ++t->seq_local, memory_order_release);
}

static uint32_t intern_slow(gt__thread *t, uint64_t stamp, const char *s,
                            gt__strcache_ent *e) {
  size_t len = strlen(s);
  const char *copy = NULL;
  uint32_t id = gt__strtab_intern(&A.str[stamp & 1], s, len, &copy);
  if (id != 0 && len <= GTP_STRING_MAX) {
    e->key = s;
    e->copy = copy;
    e->stamp = stamp;
    e->len = (uint32_t)len;
    e->id = id;
  }
  (void)t;
  return id;
}

static inline uint32_t intern(gt__thread *t, uint64_t stamp, const char *s) {
  if (s == NULL)
    return 0;
  gt__strcache_ent *e = &t->scache[gt__strcache_slot(s)];
  uint32_t id = gt__strcache_get(e, s, stamp);
  if (LIKELY(id != 0))
    return id;
  return intern_slow(t, stamp, s, e);
}

/* Varint for the hot path: tick deltas and string ids nearly always fit one
 * byte (a tick is <= 32 ns, ids are per generation), sometimes two; the
 * general loop stays for the rest. Same bytes as gtp_uvarint_put. */
static inline uint8_t *put_uv(uint8_t *p, uint64_t v) {
  if (LIKELY(v < 0x80)) {
    p[0] = (uint8_t)v;
    return p + 1;
  }
  if (v < 0x4000) {
    p[0] = (uint8_t)(v | 0x80);
    p[1] = (uint8_t)(v >> 7);
    return p + 2;
  }
  return p + gtp_uvarint_put(p, v);
}

static inline uint8_t *put_head_at(gt__buf *b, uint8_t type, uint64_t now) {
  /* Ticks may step back a little when a thread migrates between cores. */
  uint64_t d = now > b->last_ticks ? now - b->last_ticks : 0;
  if (now > b->last_ticks)
    b->last_ticks = now;
  uint8_t *p = b->pos;
  *p++ = type;
  return put_uv(p, d);
}

static inline uint8_t *put_head(gt__buf *b, uint8_t type) {
  return put_head_at(b, type, gt__ticks());
}

static inline void put_done(gt__buf *b, uint8_t *p) {
  b->pos = p;
  b->nevents++;
}

/* Refill: the current buffer is missing, of another stamp, or full. */
static __attribute__((noinline)) gt__buf *refill(gt__thread *t, uint64_t stamp,
                                                 size_t need) {
  unsigned par = stamp & 1;
  gt__buf *b = atomic_load_explicit(&t->bufs[par], memory_order_relaxed);
  if (b != NULL) {
    if (b->gen == stamp) {
      if ((size_t)(b->end - b->pos) >= need)
        return b;
      gt__buf *h = atomic_load_explicit(&A.full[par], memory_order_relaxed);
      do
        b->next = h;
      while (!atomic_compare_exchange_weak_explicit(
          &A.full[par], &h, b, memory_order_release, memory_order_relaxed));
    } else {
      /* Left behind by a sealer that gave up waiting for us (see seal()):
       * its generation is gone, so its events count as dropped. */
      t->dropped_local += b->nevents - b->nlost;
      atomic_store_explicit(&t->dropped, t->dropped_local,
                            memory_order_relaxed);
      gt__pool_put(&A.pool, b);
    }
    atomic_store_explicit(&t->bufs[par], NULL, memory_order_relaxed);
  }
  b = gt__pool_get(&A.pool);
  if (b == NULL)
    return NULL;
  int signal = 0;
  size_t held = atomic_fetch_add_explicit(&A.gen_bytes[par], GT_BUF_SIZE,
                                          memory_order_relaxed) +
                GT_BUF_SIZE;
  /* One writer wins the exchange, so the cut is asked for once. */
  if (held >= A.cut_bytes &&
      !atomic_exchange_explicit(&A.cut_signalled[par], 1,
                                memory_order_relaxed))
    signal = 1;
  if (signal) {
    atomic_store_explicit(&A.cut_req, 1, memory_order_relaxed);
    uint64_t one = 1;
    (void)!write(A.wake_fd, &one, sizeof one);
  }
  b->gen = stamp;
  b->tid = t->tid;
  b->base_ticks = b->last_ticks = gt__ticks();
  if (t->lost_pending > 0) {
    uint8_t *p = put_head(b, GTP_EV_LOST);
    p += gtp_uvarint_put(p, t->lost_pending);
    put_done(b, p);
    b->nlost++;
    t->lost_pending = 0;
  }
  if (t->name_len > 0) {
    /* Repeat the thread's name so every generation names its threads. */
    uint32_t id = intern(t, stamp, t->name);
    uint8_t *p = put_head(b, GTP_EV_THREAD_NAME);
    p += gtp_uvarint_put(p, id);
    put_done(b, p);
    b->nlost++; /* synthetic: not an event the caller wrote */
  }
  atomic_store_explicit(&t->bufs[par], b, memory_order_relaxed);
  return b;
}

static inline gt__buf *buf_get(gt__thread *t, uint64_t stamp, size_t need) {
  gt__buf *b = atomic_load_explicit(&t->bufs[stamp & 1], memory_order_relaxed);
  if (LIKELY(b != NULL && b->gen == stamp && (size_t)(b->end - b->pos) >= need))
    return b;
  b = refill(t, stamp, need);
  if (b == NULL) {
    t->dropped_local++;
    t->lost_pending++;
    atomic_store_explicit(&t->dropped, t->dropped_local, memory_order_relaxed);
  }
  return b;
}

/* The caller of the public gt_* function: its return address and its
 * frame record (the saved frame pointer in our frame). Only valid used
 * textually inside a gt_* function or a helper always inlined into one
 * (then GCC evaluates them for the function it was inlined into). Passed
 * down, so the stack does not depend on how many agent frames (inlining,
 * tail calls) lie between the public function and the walk. */
#define CALLER_PC() ((uintptr_t)__builtin_return_address(0))
#define CALLER_FP() (*(const uintptr_t *)__builtin_frame_address(0))

static uint32_t stack_id(gt__thread *t, uint64_t stamp, uintptr_t pc,
                         uintptr_t fp) {
  if (UNLIKELY(!t->stack_tried)) {
    /* Once per thread, on the first stack of a session that wants them:
     * pthread_getattr_np may read /proc for the main thread. */
    t->stack_tried = 1;
    t->stack_ok = gt__stack_bounds(&t->stack_lo, &t->stack_hi) == 0;
  }
  if (!t->stack_ok)
    return 0;
  uint64_t pcs[STACK_DEPTH];
  pcs[0] = pc;
  size_t n = 1 + gt__stack_walk_from(fp, t->stack_lo, t->stack_hi, pcs + 1,
                                     STACK_DEPTH - 1);
  if (n == 0)
    return 0;
  uint32_t h = gt__stack_hash(pcs, n);
  gt__stackcache_ent *e = &t->kcache[h & (GT_STACKCACHE_SIZE - 1)];
  if (e->stamp == stamp && e->hash == h && e->depth == n &&
      memcmp(e->copy, pcs, n * sizeof *pcs) == 0)
    return e->id;
  const uint64_t *copy = NULL;
  uint32_t id = gt__stacktab_intern(&A.stk[stamp & 1], pcs, n, h, &copy);
  if (id != 0)
    *e = (gt__stackcache_ent){copy, stamp, h, (uint32_t)n, id};
  return id;
}

/* Whether events must leave the fast path: stack ids wanted, or no TSC.
 * Written with stacks_on, before stamp_now becomes non-zero; read after
 * the stamp (acquire), like stacks_on. One flag, so the fast path tests one
 * global instead of two. */
static int hot_slow;

/* Cold continuation of a one-string event (string not cached for this
 * stamp, buffer missing/full/of another stamp, stacks on, no TSC):
 * finishes the event and leaves. Kept out of line and entered as the last
 * act of the fast path, so the fast path makes no call, keeps everything in
 * caller-saved registers and saves none (the prologue/epilogue of the
 * callee-saved registers was ~30 of ~160 instructions per event). */
/* types = type | stack_type << 8: six arguments, all in registers, so the
 * fast path's call is a tail jump. */
static __attribute__((noinline)) void named_cont(gt__thread *t, uint64_t stamp,
                                                 unsigned types,
                                                 const char *name, uintptr_t pc,
                                                 uintptr_t fp) {
  uint8_t type = (uint8_t)types, stack_type = (uint8_t)(types >> 8);
  uint32_t sid = 0;
  if (UNLIKELY(stacks_on))
    sid = stack_id(t, stamp, pc, fp);
  uint32_t id = intern(t, stamp, name);
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, sid ? stack_type : type);
    p += gtp_uvarint_put(p, id);
    if (sid)
      p += gtp_uvarint_put(p, sid);
    put_done(b, p);
  }
  leave(t);
}

/* A thread's first event (registration) or a dead thread's. */
static __attribute__((noinline)) void named_first(uint8_t type,
                                                  uint8_t stack_type,
                                                  const char *name,
                                                  uintptr_t pc, uintptr_t fp) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t != NULL)
    named_cont(t, stamp, type | (unsigned)stack_type << 8, name, pc, fp);
}

/* The fast path's buffer: the current one when it is of this stamp and has
 * room for a whole event, else NULL (then the continuation refills). */
static inline gt__buf *buf_fast(gt__thread *t, uint64_t stamp) {
  gt__buf *b = atomic_load_explicit(&t->bufs[stamp & 1], memory_order_relaxed);
  if (LIKELY(b != NULL && b->gen == stamp &&
             (size_t)(b->end - b->pos) >= GTP_EVENT_MAX))
    return b;
  return NULL;
}

/* One-string events: region begin, instant (with an optional stack).
 * always_inline: CALLER_PC/CALLER_FP must see the public function. */
static inline __attribute__((always_inline)) void
emit_named(uint8_t type, uint8_t stack_type, const char *name) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    named_first(type, stack_type, name, CALLER_PC(), CALLER_FP());
    return;
  }
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return;
  uint32_t id = 0;
  gt__buf *b = NULL;
  if (LIKELY(!hot_slow && name != NULL)) {
    id = gt__strcache_get(&t->scache[gt__strcache_slot(name)], name, stamp);
    b = buf_fast(t, stamp);
  }
  if (UNLIKELY(id == 0 || b == NULL)) {
    named_cont(t, stamp, type | (unsigned)stack_type << 8, name, CALLER_PC(),
               CALLER_FP());
    return;
  }
  /* hot_slow is clear: the TSC is on. */
  uint8_t *p = put_head_at(b, type, gt__ticks_tsc());
  put_done(b, put_uv(p, id));
  leave(t);
}

void gt_region_begin(const char *name) {
  emit_named(GTP_EV_REGION_BEGIN, GTP_EV_REGION_BEGIN_STACK, name);
}

void gt_instant(const char *name) {
  emit_named(GTP_EV_INSTANT, GTP_EV_INSTANT_STACK, name);
}

/* Region end's cold part: registration, refill, no TSC. */
static __attribute__((noinline)) void region_end_slow(gt__thread *t,
                                                      uint64_t stamp) {
  if (t == NULL && (t = enter(&stamp)) == NULL)
    return;
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL))
    put_done(b, put_head_at(b, GTP_EV_REGION_END, gt__ticks_tsc()));
  leave(t);
}

void gt_region_end(void) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    region_end_slow(NULL, 0);
    return;
  }
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return;
  gt__buf *b = buf_fast(t, stamp);
  if (UNLIKELY(b == NULL || hot_slow)) {
    region_end_slow(t, stamp);
    return;
  }
  put_done(b, put_head_at(b, GTP_EV_REGION_END, gt__ticks_tsc()));
  leave(t);
}

void gt_counter(const char *name, int64_t value) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t == NULL)
    return;
  uint32_t id = intern(t, stamp, name);
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, GTP_EV_COUNTER);
    p += gtp_uvarint_put(p, id);
    p += gtp_uvarint_put(p, gtp_zigzag(value));
    put_done(b, p);
  }
  leave(t);
}

void gt_log(const char *category, const char *message) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t == NULL)
    return;
  uint32_t id = intern(t, stamp, category);
  uint32_t sid = 0;
  if (UNLIKELY(stacks_on))
    sid = stack_id(t, stamp, CALLER_PC(), CALLER_FP());
  size_t len = message ? strnlen(message, GTP_LOG_MAX) : 0;
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX + len);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, sid ? GTP_EV_LOG_STACK : GTP_EV_LOG);
    p += gtp_uvarint_put(p, id);
    if (sid)
      p += gtp_uvarint_put(p, sid);
    p += gtp_uvarint_put(p, len);
    memcpy(p, message ? message : "", len);
    put_done(b, p + len);
  }
  leave(t);
}

uint64_t gt_task_begin(const char *name, uint64_t parent) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t == NULL)
    return 0;
  /* Process-unique without a shared counter: the thread's registry index
   * in the high half, its own sequence in the low half (never 0). */
  if ((uint32_t)++t->task_seq == 0)
    ++t->task_seq;
  uint64_t task = t->index << 32 | (uint32_t)t->task_seq;
  uint32_t id = intern(t, stamp, name);
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, GTP_EV_TASK_BEGIN);
    p += gtp_uvarint_put(p, task);
    p += gtp_uvarint_put(p, parent);
    p += gtp_uvarint_put(p, id);
    put_done(b, p);
  }
  leave(t);
  return task;
}

void gt_task_end(uint64_t task) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t == NULL)
    return;
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, GTP_EV_TASK_END);
    p += gtp_uvarint_put(p, task);
    put_done(b, p);
  }
  leave(t);
}

void gt_thread_name(const char *name) {
  uint64_t stamp;
  gt__thread *t = enter(&stamp);
  if (t == NULL)
    return;
  size_t len = name ? strnlen(name, sizeof t->name - 1) : 0;
  memcpy(t->name, name ? name : "", len);
  t->name[len] = '\0';
  t->name_len = (uint32_t)len;
  uint32_t id = intern(t, stamp, t->name);
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, GTP_EV_THREAD_NAME);
    p += gtp_uvarint_put(p, id);
    put_done(b, p);
  }
  leave(t);
}

/* ---------------------------------------------------------------- seal */

static void clock_now(uint64_t *ticks, uint64_t *mono, uint64_t *real) {
  *mono = gt__ns(CLOCK_MONOTONIC);
  *ticks = gt__ticks();
  *real = gt__ns(CLOCK_REALTIME);
}

/* Waits until t has left generation `old` (invariant 2). Returns 0, or -1
 * if it did not within the bound (a stopped or stuck thread). */
static int wait_left(gt__thread *t) {
#if GT_TSAN
  uint64_t s = atomic_load_explicit(&t->seq, memory_order_seq_cst);
#else
  uint64_t s = atomic_load_explicit(&t->seq, memory_order_acquire);
#endif
  if ((s & 1) == 0)
    return 0;
  uint64_t start = 0;
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(&t->seq, memory_order_acquire) != s)
      return 0;
    if (i < 64)
      continue;
    if (start == 0)
      start = now_ms();
    else if (now_ms() - start > 1000)
      return -1;
    if (i < 1024)
      sched_yield();
    else
      usleep(100);
  }
}

static int membarrier_ok;

static void barrier_all(void) {
#if !GT_TSAN
  if (membarrier_ok)
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

static gt__gen *build_gen(uint64_t stamp, gt__buf *bufs, const gtp_clock *ck,
                          uint64_t dropped, uint64_t *lost) {
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  uint64_t wire = stamp - A.stamp_base;
  uint64_t events = 0;
  for (gt__buf *b = bufs; b != NULL; b = b->next) {
    if (b->nevents == 0)
      continue;
    gtp_put_batch(&w, wire, b->tid, b->base_ticks, b->nevents, b->data,
                  (size_t)(b->pos - b->data));
    events += b->nevents - b->nlost;
  }
  gt__strtab_encode(&A.str[stamp & 1], &w);
  if (stacks_on) {
    gt__stacktab_encode(&A.stk[stamp & 1], &w);
    gt__modules_encode(&w);
  }
  gtp_put_clock(&w, ck);
  gt__gen *g = calloc(1, sizeof *g);
  if (g == NULL || w.err != 0 ||
      gtp_manifest_compute(w.data, w.len, &g->end) != 0) {
    logf_(GT_LOG_ERROR, "gentrace: cannot seal generation %llu",
          (unsigned long long)wire);
    free(g);
    gtp_wbuf_fini(&w);
    *lost += events;
    return NULL;
  }
  g->gen = wire;
  g->end.gen = wire;
  g->body = w.data;
  g->body_len = w.len;
  g->events = events;
  g->own_dropped = dropped;
  return g;
}

/* Waits for t to leave generation `old`, takes its buffer of that
 * generation onto *list and adds its drop counter to *dropped. */
static void take_thread(gt__thread *t, uint64_t old, gt__buf **list,
                        uint64_t *dropped) {
  unsigned par = old & 1;
  if (wait_left(t) != 0) {
    /* Never hang the sealer: leave that thread's buffer with it; it is
     * counted as dropped when the thread next refills (see refill()). */
    A.abandoned = 1;
    logf_(GT_LOG_WARN, "gentrace: thread %llu stuck in a write",
          (unsigned long long)t->tid);
  } else {
    gt__buf *b = atomic_load_explicit(&t->bufs[par], memory_order_acquire);
    if (b != NULL && b->gen == old) {
      atomic_store_explicit(&t->bufs[par], NULL, memory_order_relaxed);
      b->next = *list;
      *list = b;
    }
  }
  *dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
}

/* Seals the open generation and opens the next (or none when final).
 * Caller holds seal_lock. */
static void seal(int final) {
  uint64_t old = A.open_stamp;
  if (old == 0)
    return;
  uint64_t next = final ? 0 : old + 1;
  gtp_clock ck = A.open_clock;
  clock_now(&ck.end_ticks, &ck.end_mono_ns, &ck.end_real_ns);
  if (!final) {
    unsigned np = next & 1;
    /* No writer is in generation `next` yet: the stamp store below
     * publishes these resets before anyone can add to them. */
    atomic_store_explicit(&A.gen_bytes[np], 0, memory_order_relaxed);
    atomic_store_explicit(&A.cut_signalled[np], 0, memory_order_relaxed);
    A.open_clock.start_ticks = ck.end_ticks;
    A.open_clock.start_mono_ns = ck.end_mono_ns;
    A.open_clock.start_real_ns = ck.end_real_ns;
    stamp_last = next;
  }
  A.open_stamp = next;
  atomic_store_explicit(&stamp_now, next, memory_order_seq_cst);
  barrier_all();

  unsigned par = old & 1;
  gt__buf *list = NULL;
  /* Waiting for threads happens without reg_lock, so a thread registering
   * meanwhile never waits behind a preempted writer. During a session only
   * the sealer frees thread structs, so the snapshot stays valid. */
  pthread_mutex_lock(&reg_lock);
  size_t nt = 0;
  for (gt__thread *t = reg_head; t != NULL; t = t->next)
    nt++;
  gt__thread **arr = malloc((nt ? nt : 1) * sizeof *arr);
  nt = 0;
  if (arr != NULL)
    for (gt__thread *t = reg_head; t != NULL; t = t->next)
      arr[nt++] = t;
  /* Threads freed below fold their counters into folded_dropped: take the
   * sum now, so each drop is counted once (invariant 5). */
  uint64_t total_dropped = folded_dropped;
  if (arr != NULL)
    pthread_mutex_unlock(&reg_lock);
  if (arr != NULL) {
    for (size_t i = 0; i < nt; i++)
      take_thread(arr[i], old, &list, &total_dropped);
  } else { /* out of memory: the same walk, holding the lock */
    for (gt__thread *t = reg_head; t != NULL; t = t->next)
      take_thread(t, old, &list, &total_dropped);
  }
  if (arr != NULL)
    pthread_mutex_lock(&reg_lock);
  for (gt__thread *t = reg_head, *n; t != NULL; t = n) {
    n = t->next;
    if (atomic_load_explicit(&t->dead, memory_order_acquire) &&
        atomic_load_explicit(&t->bufs[0], memory_order_relaxed) == NULL &&
        atomic_load_explicit(&t->bufs[1], memory_order_relaxed) == NULL)
      thread_free_locked(t);
  }
  pthread_mutex_unlock(&reg_lock);
  free(arr);

  gt__buf *full =
      atomic_exchange_explicit(&A.full[par], NULL, memory_order_acquire);
  /* Batches in write order per thread: full buffers (oldest last in the
   * list) come before the thread's current one. Reverse `full` so the
   * oldest is first, then append the current buffers. */
  gt__buf *ordered = NULL;
  while (full != NULL) {
    gt__buf *n = full->next;
    full->next = ordered;
    ordered = full;
    full = n;
  }
  gt__buf **tail = &ordered;
  while (*tail != NULL)
    tail = &(*tail)->next;
  *tail = list;

  uint64_t dropped = total_dropped - A.dropped_accounted;
  A.dropped_accounted = total_dropped;
  uint64_t lost = A.sealing_lost;
  A.sealing_lost = 0;
  gt__gen *g = build_gen(old, ordered, &ck, dropped + lost, &A.sealing_lost);
  for (gt__buf *b = ordered, *n; b != NULL; b = n) {
    n = b->next;
    gt__pool_put(&A.pool, b);
  }
  gt__strtab_reset(&A.str[par]);
  gt__stacktab_reset(&A.stk[par]);
  if (g != NULL) {
    A.gens_sealed++;
    A.bytes_sealed += g->body_len;
    gt__spool_add(&A.spool, g);
  }
}

/* A generation with no events that only carries a ledger left over from
 * generations that were evicted or rejected after the last seal. */
static void seal_ledger_only(void) {
  uint64_t stamp = ++stamp_last;
  uint64_t ticks, mono, real;
  clock_now(&ticks, &mono, &real);
  gtp_clock ck = {ticks, mono, real, ticks, mono, real};
  gt__gen *g = build_gen(stamp, NULL, &ck, 0, &A.sealing_lost);
  if (g != NULL) {
    A.gens_sealed++;
    A.bytes_sealed += g->body_len;
    gt__spool_add(&A.spool, g);
  }
}

/* ---------------------------------------------------------- agent thread */

static void wake(void) {
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
  uint64_t deadline = now_ms() + A.cfg.flush_timeout_ms;
  int ledger_gens = 0;
  for (;;) {
    uint64_t now = now_ms();
    if (now >= deadline)
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

/* --------------------------------------------------------- config, start */

static uint32_t env_u32(const char *name, uint32_t dflt) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0')
    return dflt;
  char *end;
  unsigned long x = strtoul(v, &end, 10);
  if (*end != '\0' || x > UINT32_MAX)
    return dflt;
  return (uint32_t)x;
}

void gt_config_init(gt_config *cfg) {
  if (cfg == NULL)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
  cfg->addr = "127.0.0.1:7170";
  cfg->period_ms = 1000;
  cfg->buffer_mb = 8;
  cfg->spool_mb = 64;
  cfg->flush_timeout_ms = 2000;
  cfg->log_level = GT_LOG_INFO;
}

static void config_from_env(gt_config *c) {
  gt_config_init(c);
  const char *v;
  if ((v = getenv("GENTRACE_ADDR")) && *v)
    c->addr = v;
  if ((v = getenv("GENTRACE_SERVICE")) && *v)
    c->service = v;
  if ((v = getenv("GENTRACE_TOKEN")) && *v)
    c->token = v;
  if ((v = getenv("GENTRACE_HOST")) && *v)
    c->host = v;
  if ((v = getenv("GENTRACE_TAGS")) && *v)
    c->tags = v;
  c->period_ms = env_u32("GENTRACE_PERIOD_MS", c->period_ms);
  c->buffer_mb = env_u32("GENTRACE_BUFFER_MB", c->buffer_mb);
  c->spool_mb = env_u32("GENTRACE_SPOOL_MB", c->spool_mb);
  c->stacks = (int)env_u32("GENTRACE_STACKS", 0) != 0;
  c->flush_timeout_ms = env_u32("GENTRACE_FLUSH_MS", c->flush_timeout_ms);
}

/* Parses "k=v,k=v" into id->tags (bytes owned by id->tags_buf). */
/* Replaces every non-ASCII byte of s by '?' unless s is valid UTF-8 (the
 * daemon refuses identity strings that are not, PROTOCOL.md 3.1, and a
 * program name or host name can hold any bytes). */
static void text_clean(char *s) {
  if (s == NULL || gtp_frame_text_ok(s, strlen(s)))
    return;
  for (; *s; s++)
    if ((unsigned char)*s >= 0x80)
      *s = '?';
}

static int parse_tags(gt__ident *id, const char *tags) {
  id->ntags = 0;
  if (tags == NULL || *tags == '\0')
    return 0;
  id->tags_buf = strdup(tags);
  if (id->tags_buf == NULL)
    return -ENOMEM;
  text_clean(id->tags_buf);
  char *save = NULL;
  for (char *kv = strtok_r(id->tags_buf, ",", &save); kv != NULL;
       kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv || id->ntags >= GTP_TAGS_MAX)
      return -EINVAL;
    *eq = '\0';
    size_t kl = strlen(kv), vl = strlen(eq + 1);
    if (kl > GTP_IDENT_STR_MAX || vl > GTP_IDENT_STR_MAX)
      return -EINVAL;
    id->tags[id->ntags].key = (gtp_str){kv, kl};
    id->tags[id->ntags].value = (gtp_str){eq + 1, vl};
    id->ntags++;
  }
  return 0;
}

static uint64_t process_start_ns(void) {
  /* Field 22 of /proc/self/stat: start time in clock ticks since boot. */
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return gt__ns(CLOCK_REALTIME);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return gt__ns(CLOCK_REALTIME);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return gt__ns(CLOCK_REALTIME);
  unsigned long long start = 0;
  int field = 2;
  for (char *s = p + 1; *s && field < 22; s++)
    if (*s == ' ') {
      field++;
      if (field == 22)
        start = strtoull(s + 1, NULL, 10);
    }
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0)
    hz = 100;
  uint64_t boot_real = gt__ns(CLOCK_REALTIME) - gt__ns(CLOCK_BOOTTIME);
  return boot_real + start * (1000000000ull / (uint64_t)hz);
}

static void ident_fini(gt__ident *id) {
  free(id->service);
  free(id->host);
  free(id->token);
  free(id->tags_buf);
  memset(id, 0, sizeof *id);
}

/* Fills out with n random bytes. Without entropy yet (early boot, where
 * GRND_NONBLOCK fails) it falls back to clock, pid and address bits: unique
 * enough for an id, guessable as a key, which only matters if someone on
 * the network also learns the id before the first HELLO. */
static void draw_random(uint8_t *out, size_t n, uint64_t salt) {
  if (getrandom(out, n, GRND_NONBLOCK) == (ssize_t)n)
    return;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = gt__ns(CLOCK_REALTIME) ^ (uint64_t)getpid() << 32 ^
                 gt__ns(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)(uintptr_t)out ^ salt ^ i * 0xBF58476D1CE4E5B9ull;
    memcpy(out + i, &x, n - i < 8 ? n - i : 8);
  }
}

static int ident_init(gt__ident *id, const gt_config *c) {
  memset(id, 0, sizeof *id);
  /* A new id and key at every gt_start, also in a forked child (which
   * starts afresh: atfork_child forgets the parent's session). */
  draw_random(id->session, sizeof id->session, 1);
  draw_random(id->session_key, sizeof id->session_key, 2);
  const char *svc = c->service;
  if (svc == NULL || *svc == '\0')
    svc = program_invocation_short_name;
  id->service = strndup(svc, GTP_IDENT_STR_MAX);
  char host[256] = "";
  if (c->host != NULL && *c->host != '\0')
    snprintf(host, sizeof host, "%s", c->host);
  else
    gethostname(host, sizeof host - 1);
  id->host = strdup(host);
  text_clean(id->service);
  text_clean(id->host);
  id->token = c->token && *c->token ? strndup(c->token, GTP_TOKEN_MAX) : NULL;
  id->pid = (uint64_t)getpid();
  id->start_ns = process_start_ns();
  if (id->service == NULL || id->host == NULL ||
      (c->token && *c->token && id->token == NULL)) {
    ident_fini(id);
    return -ENOMEM;
  }
  int rc = parse_tags(id, c->tags);
  if (rc != 0) {
    ident_fini(id);
    return rc;
  }
  return 0;
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
  ident_fini(&A.id);
  free(A.addr);
  free((char *)A.cfg.service);
  A.cfg.service = NULL;
}

int gt_start(const gt_config *user) {
  pthread_once(&global_once, once_global);
  gt_config c;
  if (user == NULL) {
    config_from_env(&c);
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
  if (c.buffer_mb == 0)
    c.buffer_mb = 8;
  if (c.spool_mb == 0)
    c.spool_mb = 64;
  if (c.flush_timeout_ms == 0)
    c.flush_timeout_ms = 2000;
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
  int rc = ident_init(&A.id, &c);
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
    w += atomic_load_explicit(&t->written, memory_order_relaxed);
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
  ident_fini(&A.id);
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
  for (gt__thread *t = reg_head, *n; t != NULL; t = n) {
    n = t->next;
    if (atomic_load_explicit(&t->dead, memory_order_acquire) &&
        atomic_load_explicit(&t->bufs[0], memory_order_relaxed) == NULL &&
        atomic_load_explicit(&t->bufs[1], memory_order_relaxed) == NULL)
      thread_free_locked(t);
  }
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
    w += atomic_load_explicit(&t->written, memory_order_relaxed);
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
  out->auth_refused =
      __atomic_load_n(&A.sender.auth_refused, __ATOMIC_RELAXED);
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
