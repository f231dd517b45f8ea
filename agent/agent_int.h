/* agent_int.h: what the files of libgentrace's core share: the per-thread
 * record, the session state `A`, the thread registry and the generation
 * stamp. The design and its numbered invariants are in agent.c's header;
 * each file says which of them it keeps.
 *
 *   agent.c   the session: gt_start/gt_stop, the agent thread, stats and
 *             snapshots, fork and exit
 *   record.c  recording: thread registry and the hot path (every gt_ event
 *             call), invariants 1, 4, 5 and 6
 *   seal.c    sealing generations: the barrier and the hand-over of buffers
 *             and tables to the spool, invariants 2, 3 and 5
 *   ident.c   configuration (gt_config, GENTRACE_*) and the session's
 *             identity, the session id included
 *   diag.c    diagnostics to the user's log callback
 *
 * Nothing here is exported (hidden visibility; gt__ names).
 */
#ifndef GT_AGENT_INT_H
#define GT_AGENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"
#include "format.h"
#include "gentrace.h"
#include "intern.h"
#include "pool.h"
#include "sender.h"
#include "spool.h"
#include "stack.h"

/* Declarations too: without it the compiler must assume a shared global
 * may live in another object and reach it through the GOT (two more
 * instructions per event on the hot path). */
#pragma GCC visibility push(hidden)

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
/* gt_stop flush bounds when flush_timeout_ms is 0 (automatic). */
enum { FLUSH_DEFAULT_MS = 2000, UNREACHED_FLUSH_MS = 100 };

typedef struct gt__thread {
  /* Written by the owner thread; read by the sealer. */
  _Atomic uint64_t seq;
  _Atomic(gt__buf *) bufs[2];
  _Atomic uint64_t dropped; /* cumulative, owner stores only */
  _Atomic int dead;
  /* Owner thread only. */
  uint64_t dropped_local;
#ifdef GT_DEBUG
  uint64_t dbg_written; /* invariant 5's check: events counted the old way */
#endif
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

/* Events t wrote while tracing was on, cumulative (agent.c invariant 5:
 * every section moves seq by 2, an off one puts it back). Any thread may
 * read it; an event in progress (seq odd) is not counted yet. */
static inline uint64_t gt__thread_written(gt__thread *t) {
  return atomic_load_explicit(&t->seq, memory_order_acquire) >> 1;
}

#define DEAD_THREAD ((gt__thread *)1)
extern __thread gt__thread *gt__tls_self
    __attribute__((tls_model("initial-exec")));

/* The registry outlives sessions (threads keep their structs). */
extern pthread_mutex_t gt__reg_lock;
extern gt__thread *gt__reg_head;    /* protected by reg_lock */
extern uint64_t gt__reg_next_index; /* protected by reg_lock */
extern uint64_t gt__folded_written, gt__folded_dropped; /* reg_lock */
extern pthread_key_t gt__reg_key;
extern pthread_once_t gt__reg_once;

/* The stamp of the open generation; 0 = tracing off. */
extern _Atomic uint64_t gt__stamp_now;
extern uint64_t gt__stamp_last; /* last stamp ever used; life_lock */
extern int gt__use_fence; /* no membarrier: seq_cst fence on the hot path */
extern int gt__stacks_on; /* written before stamp_now becomes non-zero */

/* gt_start/gt_stop serialization. */
extern pthread_mutex_t gt__life_lock;

/* 1 while a session runs; protected by reg_lock (thread destructors read
 * it) and changed only under life_lock. Kept out of A, which is wiped. */
extern int gt__agent_running;
extern int gt__reg_key_made; /* reg_once ran */

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

extern agent gt__A;

/* The counters of the session that gt_stop() ended, so a caller can read its
 * final accounting after the flush. Protected by life_lock. */
extern gt_stats_t gt__last_stats;
extern int gt__have_last_stats;

/* The agent's shared state lives in agent.c; the files of the agent (one
 * responsibility each) reach it under these short names, which stand for
 * hidden gt__ symbols so nothing collides with a host that links
 * libgentrace statically. */
#define tls_self gt__tls_self
#define reg_lock gt__reg_lock
#define reg_head gt__reg_head
#define reg_next_index gt__reg_next_index
#define folded_written gt__folded_written
#define folded_dropped gt__folded_dropped
#define reg_key gt__reg_key
#define reg_once gt__reg_once
#define stamp_now gt__stamp_now
#define stamp_last gt__stamp_last
#define use_fence gt__use_fence
#define stacks_on gt__stacks_on
#define life_lock gt__life_lock
#define agent_running gt__agent_running
#define reg_key_made gt__reg_key_made
#define A gt__A
#define last_stats gt__last_stats
#define have_last_stats gt__have_last_stats
#define hot_slow gt__hot_slow
#define membarrier_ok gt__membarrier_ok
#define logf_ gt__diag_logf
#define thread_free_locked gt__thread_free_locked
#define thread_reap_locked gt__thread_reap_locked
#define seal gt__seal
#define seal_ledger_only gt__seal_ledger_only
#define clock_now gt__clock_now
#define wake gt__wake

/* record.c: the hot path's "slow" switch (stacks on or no TSC) and the
 * registry's free. */
extern int gt__hot_slow;
void gt__thread_free_locked(gt__thread *t); /* reg_lock held */
void gt__thread_reap_locked(void);          /* reg_lock held */
/* seal.c (seal_lock held): seals the open generation (final: and stops
 * tracing), or sends a ledger-only generation; the clock sample of a
 * generation boundary; whether membarrier is in use. */
extern int gt__membarrier_ok;
void gt__seal(int final);
void gt__seal_ledger_only(void);
void gt__clock_now(uint64_t *ticks, uint64_t *mono, uint64_t *real);
/* diag.c: diagnostics to the user's log callback. agent.c: waking the
 * agent thread. */
void gt__diag_logf(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gt__wake(void);

#pragma GCC visibility pop

#endif
