/* record.c: recording events: the thread registry and the hot path behind
 * every gt_ event call (gt_region_begin ... gt_thread_name). Keeps
 * invariants 1, 4, 5 and 6 of agent.c: a thread announces itself (odd seq)
 * before it reads the stamp, writes without locks, syscalls or allocation
 * while its buffer has room, and counts every call once.
 */
#include "config.h"

#include "agent_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "varint.h"

/* ----------------------------------------------------- thread registry */

void thread_free_locked(gt__thread *t) {
  uint64_t w = gt__thread_written(t);
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

/* Frees every thread that exited and holds no buffer (invariant 6). */
void thread_reap_locked(void) {
  for (gt__thread *t = reg_head, *n; t != NULL; t = n) {
    n = t->next;
    if (atomic_load_explicit(&t->dead, memory_order_acquire) &&
        atomic_load_explicit(&t->bufs[0], memory_order_relaxed) == NULL &&
        atomic_load_explicit(&t->bufs[1], memory_order_relaxed) == NULL)
      thread_free_locked(t);
  }
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

/* Adds d (1 or -1) to t->seq, which only t writes, in one instruction
 * where the machine has one: a signal handler that traces can interrupt
 * its owner between any two instructions, and a load-add-store would then
 * write back a stale seq over the handler's whole event (its +2), losing
 * it from `written` (invariant 5). x86-64's add to memory cannot be split
 * by a signal, needs no lock prefix (no other thread writes seq) and, like
 * every x86 store, is a release. Elsewhere, and under TSan (which must see
 * the access), an atomic add: relaxed, as the previous store was, except
 * under TSan (seq_cst, invariant 1) and in leave (release). */
#if defined(__x86_64__) && !GT_TSAN
#define SEQ_ADD(t, d, order)                                                   \
  __asm__ volatile("addq %1, %0"                                               \
                   : "+m"(*(uint64_t *)&(t)->seq)                              \
                   : "er"((int64_t)(d))                                        \
                   : "memory", "cc")
#else
#define SEQ_ADD(t, d, order)                                                   \
  ((void)atomic_fetch_add_explicit(&(t)->seq, (uint64_t)(int64_t)(d), order))
#endif

/* Enters the write section of registered thread t; returns the stamp, or 0
 * (off, nested from a signal handler) with the section left. No call: the
 * named-event fast path relies on it. */
static inline uint64_t enter_t(gt__thread *t) {
  /* A signal handler interrupting a section would make seq even while the
   * interrupted write is still going on: drop such nested events. */
  if (UNLIKELY(atomic_load_explicit(&t->seq, memory_order_relaxed) & 1))
    return 0;
#if GT_TSAN
  SEQ_ADD(t, 1, memory_order_seq_cst);
  uint64_t g = atomic_load_explicit(&stamp_now, memory_order_seq_cst);
#else
  SEQ_ADD(t, 1, memory_order_relaxed);
  /* Invariant 1: the sealer's membarrier orders this store before our load;
   * without it we pay for a full fence. */
  if (UNLIKELY(use_fence))
    atomic_thread_fence(memory_order_seq_cst);
  else
    atomic_signal_fence(memory_order_seq_cst);
  uint64_t g = atomic_load_explicit(&stamp_now, memory_order_acquire);
#endif
  if (UNLIKELY(g == 0)) {
    /* Off: undo the section (seq back to its even value), so seq / 2 counts
     * only the events made while tracing was on (invariant 5: `written` is
     * derived from seq, no store of its own on the hot path). The sealer
     * waits for "even or changed": the undone value is both. */
    SEQ_ADD(t, -1, memory_order_release);
    return 0;
  }
#ifdef GT_DEBUG
  /* Invariant 5: seq / 2 is the events counted on entry, this one not yet
   * (seq is odd). Checked inside the section: a traced signal handler
   * cannot complete an event here, so both reads see the same events. */
  GTP_ASSERT(gt__thread_written(t) == t->dbg_written);
  t->dbg_written++;
#endif
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
  SEQ_ADD(t, 1, memory_order_release);
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
    /* A literal of the main program skips the compare (intern.h,
     * invariant 2): ~25 of an event's ~120 instructions. */
    e->len =
        (uint32_t)len | (gt__rodata_has(s, len + 1) ? GT_STRCACHE_FIXED : 0);
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
  /* The rest in the loop's simplest form: p and v are its only registers
   * (gtp_uvarint_put's indexed loop, inlined, needed a callee-saved one,
   * which every fast path then saved and restored). */
  do {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  } while (v >= 0x80);
  *p++ = (uint8_t)v;
  return p;
}

static inline uint8_t *put_head_at(gt__buf *b, uint8_t type, uint64_t now) {
  /* Ticks may step back a little when a thread migrates between cores:
   * the delta is then 0 and last_ticks stays. Written as a max, which the
   * compiler makes a conditional move, not as a test and a branch: events
   * closer together than one tick (2^gt__clock_shift TSC cycles, ~25 ns
   * here) see now == last about as often as now > last, and that branch
   * then mispredicted on every other event, about 2.5 ns of the 12 an
   * event took (bench/RESULTS.md, "A1: a branch on the tick"). */
  uint64_t last = b->last_ticks;
  uint64_t next = now > last ? now : last;
  uint64_t d = next - last;
  b->last_ticks = next;
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
      !atomic_exchange_explicit(&A.cut_signalled[par], 1, memory_order_relaxed))
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

/* The fast path's buffer: the current one when it is of this stamp and has
 * room for a whole event, else NULL (then the continuation refills). */
static inline gt__buf *buf_fast(gt__thread *t, uint64_t stamp) {
  gt__buf *b = atomic_load_explicit(&t->bufs[stamp & 1], memory_order_relaxed);
  if (LIKELY(b != NULL && b->gen == stamp &&
             (size_t)(b->end - b->pos) >= GTP_EVENT_MAX))
    return b;
  return NULL;
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
int hot_slow;

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
  if (LIKELY(!hot_slow && name != NULL)) {
    /* A cached name the fast path leaves to us (not a main-program
     * literal: the bytes are compared) with room in the buffer. */
    uint32_t id =
        gt__strcache_get(&t->scache[gt__strcache_slot(name)], name, stamp);
    gt__buf *b = buf_fast(t, stamp);
    if (LIKELY(id != 0 && b != NULL)) {
      put_done(b, put_uv(put_head_at(b, type, gt__ticks_tsc()), id));
      leave(t);
      return;
    }
  }
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

/* A named event's write once the name's id and a buffer with room are
 * known (hot_slow clear: the TSC is on); the fast path and named_cmp. */
static inline __attribute__((always_inline)) void
named_write(gt__thread *t, gt__buf *b, uint8_t type, uint64_t now,
            uint32_t id) {
  put_done(b, put_uv(put_head_at(b, type, now), id));
  leave(t);
}

/* A name the fast path found in its cache slot for this stamp but not
 * marked a main-program literal (a reused buffer, a shared library's
 * string): compares the bytes and writes, with the slot and buffer the
 * fast path already has, so the fast path carries no compare loop and
 * saves no register (agent.c invariant 4's "hot path" stays a leaf). Only
 * reached with hot_slow clear: no stack is wanted, hence pc and fp 0. */
static __attribute__((noinline)) void named_cmp(gt__thread *t, uint64_t stamp,
                                                unsigned types,
                                                const gt__strcache_ent *e,
                                                gt__buf *b, uint64_t now) {
  const char *name = e->key; /* the caller's: it checked */
  uint32_t id = gt__strcache_get(e, name, stamp);
  if (UNLIKELY(id == 0)) {
    named_cont(t, stamp, types, name, 0, 0);
    return;
  }
  named_write(t, b, (uint8_t)types, now, id);
}

/* The fast paths' clock: read as soon as the section is entered, so the
 * checks that follow (name cache, buffer) run while the RDTSC's microcode
 * does (the event's time is then a few ns earlier). Without a TSC (not
 * x86) hot_slow is set and the value is never used. */
static inline uint64_t tsc_early(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc() >> gt__clock_shift;
#else
  return 0;
#endif
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
  uint64_t now = tsc_early();
  uint32_t id = 0;
  gt__buf *b = NULL;
  if (LIKELY(!hot_slow && name != NULL)) {
    b = buf_fast(t, stamp);
    const gt__strcache_ent *e = &t->scache[gt__strcache_slot(name)];
    id = gt__strcache_get_fixed(e, name, stamp);
    if (UNLIKELY(id == 0 && b != NULL && e->key == name)) {
      named_cmp(t, stamp, type | (unsigned)stack_type << 8, e, b, now);
      return;
    }
  }
  if (UNLIKELY(id == 0 || b == NULL)) {
    named_cont(t, stamp, type | (unsigned)stack_type << 8, name, CALLER_PC(),
               CALLER_FP());
    return;
  }
  named_write(t, b, type, now, id);
}

/* One event with one argument, inside t's section (not the named-event
 * fast path, which has its own). */
static inline void emit_arg1(gt__thread *t, uint64_t stamp, uint8_t type,
                             uint64_t arg) {
  gt__buf *b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, type);
    p += gtp_uvarint_put(p, arg);
    put_done(b, p);
  }
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
  uint64_t now = tsc_early();
  gt__buf *b = buf_fast(t, stamp);
  if (UNLIKELY(b == NULL || hot_slow)) {
    region_end_slow(t, stamp);
    return;
  }
  put_done(b, put_head_at(b, GTP_EV_REGION_END, now));
  leave(t);
}

/* Counter's cold part: registration, a name not in the thread's cache, a
 * refill, no TSC (the code every counter ran before the fast path). */
static __attribute__((noinline)) void
counter_slow(gt__thread *t, uint64_t stamp, const char *name, int64_t value) {
  if (t == NULL && (t = enter(&stamp)) == NULL)
    return;
  uint32_t id = intern(t, stamp, name);
  gt__buf *b = NULL;
  if (LIKELY(id != 0 && !hot_slow)) /* a cached name with its bytes compared */
    b = buf_fast(t, stamp);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_uv(put_head_at(b, GTP_EV_COUNTER, gt__ticks_tsc()), id);
    put_done(b, put_uv(p, gtp_zigzag(value)));
    leave(t);
    return;
  }
  b = buf_get(t, stamp, GTP_EVENT_MAX);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head(b, GTP_EV_COUNTER);
    p += gtp_uvarint_put(p, id);
    p += gtp_uvarint_put(p, gtp_zigzag(value));
    put_done(b, p);
  }
  leave(t);
}

/* A counter's write (hot_slow clear); the fast path and counter_cmp. */
static inline __attribute__((always_inline)) void
counter_write(gt__thread *t, gt__buf *b, uint64_t now, uint32_t id,
              int64_t value) {
  uint8_t *p = put_uv(put_head_at(b, GTP_EV_COUNTER, now), id);
  put_done(b, put_uv(p, gtp_zigzag(value)));
  leave(t);
}

/* named_cmp for counters: the name's bytes compared, then the write. */
static __attribute__((noinline)) void counter_cmp(gt__thread *t, uint64_t stamp,
                                                  const gt__strcache_ent *e,
                                                  int64_t value, gt__buf *b,
                                                  uint64_t now) {
  const char *name = e->key; /* the caller's: it checked */
  uint32_t id = gt__strcache_get(e, name, stamp);
  if (UNLIKELY(id == 0)) {
    counter_slow(t, stamp, name, value);
    return;
  }
  counter_write(t, b, now, id, value);
}

/* The same fast path as emit_named: cached name, room in the buffer, the
 * TSC read without the clock_gettime fallback (whose call made every
 * counter save registers), one-byte varint for the id. */
void gt_counter(const char *name, int64_t value) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    counter_slow(NULL, 0, name, value);
    return;
  }
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return;
  uint64_t now = tsc_early();
  uint32_t id = 0;
  gt__buf *b = NULL;
  if (LIKELY(!hot_slow && name != NULL)) {
    b = buf_fast(t, stamp);
    const gt__strcache_ent *e = &t->scache[gt__strcache_slot(name)];
    id = gt__strcache_get_fixed(e, name, stamp);
    if (UNLIKELY(id == 0 && b != NULL && e->key == name)) {
      counter_cmp(t, stamp, e, value, b, now);
      return;
    }
  }
  if (UNLIKELY(id == 0 || b == NULL)) {
    counter_slow(t, stamp, name, value);
    return;
  }
  counter_write(t, b, now, id, value);
}

/* Log's cold part: registration, a category not in the thread's cache, a
 * refill, stacks, no TSC, a message of 128 bytes or more or one near the
 * end of its 4 KiB block (the code every log ran before the fast path). */
static __attribute__((noinline)) void log_slow(gt__thread *t, uint64_t stamp,
                                               const char *category,
                                               const char *message,
                                               uintptr_t pc, uintptr_t fp) {
  if (t == NULL && (t = enter(&stamp)) == NULL)
    return;
  uint32_t id = intern(t, stamp, category);
  uint32_t sid = 0;
  if (UNLIKELY(stacks_on))
    sid = stack_id(t, stamp, pc, fp);
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

/* Messages the log fast path copies: shorter than this, so the length is
 * one varint byte. */
#define LOG_FAST_MAX 128

/* Copies the message s and its length into dst word by word, finding the
 * NUL as it goes (strnlen and memcpy were two calls per log, and the calls
 * made every log save registers): returns the length, or -1 if s is
 * LOG_FAST_MAX bytes or longer, or runs past the end of the 4096-byte
 * block of s[0] before its NUL (then nothing is decided: the caller takes
 * the slow path). dst needs LOG_FAST_MAX + 1 bytes of room: whole words
 * are stored, bytes past the NUL included, but the buffer's end moves by
 * the length only. The loads stay inside s[0]'s 4096-byte block, hence
 * inside its page, so they cannot fault even past s's NUL (the reasoning of
 * gt__strcache_get in intern.h; ASan/TSan would report the bytes past it,
 * hence no_sanitize). The first zero byte of a word is the lowest byte
 * whose 0x80 bit the expression sets: the borrow that can set higher ones
 * only starts at a zero byte. */
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
__attribute__((no_sanitize("address", "thread"))) static inline int
log_copy_fast(uint8_t *dst, const char *s) {
  size_t room = 4096 - ((uintptr_t)s & 4095);
  size_t lim = room < LOG_FAST_MAX ? room : LOG_FAST_MAX;
  for (size_t i = 0; i + 8 <= lim; i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, s + i, 8);
    __builtin_memcpy(dst + 1 + i, &w, 8);
    uint64_t z = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
    if (z != 0) {
      size_t len = i + ((size_t)__builtin_ctzll(z) >> 3);
      dst[0] = (uint8_t)len; /* < LOG_FAST_MAX: one varint byte */
      return (int)len;
    }
  }
  return -1;
}
#else
static inline int log_copy_fast(uint8_t *dst, const char *s) {
  (void)dst, (void)s;
  return -1;
}
#endif

/* Log's write once the category's id and a buffer with room for the
 * longest fast message are known (hot_slow clear: the TSC is on). */
static inline __attribute__((always_inline)) void
log_write(gt__thread *t, uint64_t stamp, gt__buf *b, uint32_t id,
          const char *category, const char *message) {
  /* The head is written first but committed only with the message: a
   * message the fast copy cannot take leaves the buffer as it was. */
  uint64_t last = b->last_ticks;
  uint8_t *p = put_uv(put_head_at(b, GTP_EV_LOG, gt__ticks_tsc()), id);
  int len = log_copy_fast(p, message);
  if (UNLIKELY(len < 0)) {
    b->last_ticks = last;
    log_slow(t, stamp, category, message, 0, 0);
    return;
  }
  put_done(b, p + 1 + len);
  leave(t);
}

/* named_cmp for logs: the category's bytes compared, then the write. */
static __attribute__((noinline)) void
log_cmp(gt__thread *t, uint64_t stamp, const char *category,
        const char *message, const gt__strcache_ent *e, gt__buf *b) {
  uint32_t id = gt__strcache_get(e, category, stamp);
  if (UNLIKELY(id == 0)) {
    log_slow(t, stamp, category, message, 0, 0);
    return;
  }
  log_write(t, stamp, b, id, category, message);
}

/* The fast path of the named events for logs: cached category, room in
 * the buffer for the longest fast message, the TSC, the message copied
 * word by word. */
void gt_log(const char *category, const char *message) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    log_slow(NULL, 0, category, message, CALLER_PC(), CALLER_FP());
    return;
  }
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return;
  uint32_t id = 0;
  gt__buf *b = NULL;
  if (LIKELY(!hot_slow && category != NULL && message != NULL)) {
    const gt__strcache_ent *e = &t->scache[gt__strcache_slot(category)];
    id = gt__strcache_get_fixed(e, category, stamp);
    b = atomic_load_explicit(&t->bufs[stamp & 1], memory_order_relaxed);
    if (b == NULL || b->gen != stamp ||
        (size_t)(b->end - b->pos) < GTP_EVENT_MAX + LOG_FAST_MAX + 8)
      b = NULL;
    if (UNLIKELY(id == 0 && b != NULL && e->key == category)) {
      log_cmp(t, stamp, category, message, e, b);
      return;
    }
  }
  if (UNLIKELY(id == 0 || b == NULL)) {
    log_slow(t, stamp, category, message, CALLER_PC(), CALLER_FP());
    return;
  }
  log_write(t, stamp, b, id, category, message);
}

/* The next task id of t: process-unique without a shared counter, the
 * thread's registry index in the high half, its own sequence in the low
 * half (never 0). */
static inline uint64_t task_next(gt__thread *t) {
  if (UNLIKELY((uint32_t)++t->task_seq == 0))
    ++t->task_seq;
  return t->index << 32 | (uint32_t)t->task_seq;
}

/* Varint of a task id: index << 32 | seq is five bytes while the thread's
 * registry index is below 8 (nearly always), written unrolled (the general
 * loop was about 40 instructions per id); same bytes as gtp_uvarint_put. */
static inline uint8_t *put_task_id(uint8_t *p, uint64_t v) {
  if (LIKELY(v >> 28 != 0 && v >> 35 == 0)) {
    /* The first four bytes as one little-endian word, each 7 bits moved
     * into place by a shift: byte by byte, GCC packed them through vector
     * registers and needed two callee-saved registers for it. */
    uint32_t w = (uint32_t)((v & 0x7f) | (v << 1 & 0x7f00) |
                            (v << 2 & 0x7f0000) | (v << 3 & 0x7f000000)) |
                 0x80808080u;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __builtin_memcpy(p, &w, 4);
#else
    p[0] = (uint8_t)w, p[1] = (uint8_t)(w >> 8), p[2] = (uint8_t)(w >> 16),
    p[3] = (uint8_t)(w >> 24);
#endif
    p[4] = (uint8_t)(v >> 28);
    return p + 5;
  }
  return p + gtp_uvarint_put(p, v);
}

/* Task begin's cold part: registration, a name not in the cache, a refill,
 * no TSC. */
static __attribute__((noinline)) uint64_t task_begin_slow(gt__thread *t,
                                                          uint64_t stamp,
                                                          const char *name,
                                                          uint64_t parent) {
  if (t == NULL && (t = enter(&stamp)) == NULL)
    return 0;
  uint64_t task = task_next(t);
  uint32_t id = intern(t, stamp, name);
  gt__buf *b = NULL;
  if (LIKELY(id != 0 && !hot_slow)) /* a cached name with its bytes compared */
    b = buf_fast(t, stamp);
  if (LIKELY(b != NULL)) {
    uint8_t *p = put_head_at(b, GTP_EV_TASK_BEGIN, gt__ticks_tsc());
    p = put_uv(put_task_id(p, task), parent);
    put_done(b, put_uv(p, id));
    leave(t);
    return task;
  }
  b = buf_get(t, stamp, GTP_EVENT_MAX);
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

/* A task begin's write (hot_slow clear); the fast path and
 * task_begin_cmp. Returns the new task's id. */
static inline __attribute__((always_inline)) uint64_t
task_begin_write(gt__thread *t, gt__buf *b, uint64_t now, uint32_t id,
                 uint64_t parent) {
  uint64_t task = task_next(t);
  uint8_t *p = put_head_at(b, GTP_EV_TASK_BEGIN, now);
  p = put_uv(put_task_id(p, task), parent);
  put_done(b, put_uv(p, id));
  leave(t);
  return task;
}

/* named_cmp for task begin: the name's bytes compared, then the write. */
static __attribute__((noinline)) uint64_t
task_begin_cmp(gt__thread *t, uint64_t stamp, const gt__strcache_ent *e,
               uint64_t parent, gt__buf *b, uint64_t now) {
  const char *name = e->key; /* the caller's: it checked */
  uint32_t id = gt__strcache_get(e, name, stamp);
  if (UNLIKELY(id == 0))
    return task_begin_slow(t, stamp, name, parent);
  return task_begin_write(t, b, now, id, parent);
}

/* The named events' fast path for task begin (cached name, room, TSC). */
uint64_t gt_task_begin(const char *name, uint64_t parent) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1))
    return task_begin_slow(NULL, 0, name, parent);
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return 0;
  uint64_t now = tsc_early();
  uint32_t id = 0;
  gt__buf *b = NULL;
  if (LIKELY(!hot_slow && name != NULL)) {
    b = buf_fast(t, stamp);
    const gt__strcache_ent *e = &t->scache[gt__strcache_slot(name)];
    id = gt__strcache_get_fixed(e, name, stamp);
    if (UNLIKELY(id == 0 && b != NULL && e->key == name))
      return task_begin_cmp(t, stamp, e, parent, b, now);
  }
  if (UNLIKELY(id == 0 || b == NULL))
    return task_begin_slow(t, stamp, name, parent);
  return task_begin_write(t, b, now, id, parent);
}

/* Task end's cold part: registration, a refill, no TSC. */
static __attribute__((noinline)) void
task_end_slow(gt__thread *t, uint64_t stamp, uint64_t task) {
  if (t == NULL && (t = enter(&stamp)) == NULL)
    return;
  emit_arg1(t, stamp, GTP_EV_TASK_END, task);
  leave(t);
}

void gt_task_end(uint64_t task) {
  gt__thread *t = tls_self;
  if (UNLIKELY((uintptr_t)t <= 1)) {
    task_end_slow(NULL, 0, task);
    return;
  }
  uint64_t stamp = enter_t(t);
  if (stamp == 0)
    return;
  uint64_t now = tsc_early();
  gt__buf *b = buf_fast(t, stamp);
  if (UNLIKELY(b == NULL || hot_slow)) {
    task_end_slow(t, stamp, task);
    return;
  }
  put_done(b, put_task_id(put_head_at(b, GTP_EV_TASK_END, now), task));
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
  emit_arg1(t, stamp, GTP_EV_THREAD_NAME, id);
  leave(t);
}
