/* loopcoal.h: wake-up coalescing for gentraced's libuv loop (see
 * loopcoal.c's design note). */
#ifndef GT_LOOPCOAL_H
#define GT_LOOPCOAL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct loopcoal {
  uv_prepare_t prep;
  uv_check_t check;
  uint64_t delay_ns;  /* the pause before a poll on a busy loop; 0 = off */
  uint64_t t_poll_ns; /* when the last poll began (uv_hrtime) */
  int busy;           /* the last poll returned within delay_ns */
  size_t round_max;   /* the largest read of this round (loopcoal_note_read) */
  unsigned round_reads; /* reads of this round (loopcoal_note_read) */
  int paused;           /* this round began with a pause */
  unsigned skip;        /* rounds left without pauses (invariant 5) */
  /* Written by the loop, read by /metrics (relaxed atomics): */
  uint64_t pauses; /* pauses taken (gentrace_ingest_loop_pauses_total) */
  uint64_t polls;  /* polls seen (gentrace_ingest_loop_polls_total) */
} loopcoal;

/* Starts coalescing on loop with the given pause (0: the handles are set
 * up but never pause). The handles are unreferenced: they keep nothing
 * alive. */
void loopcoal_init(loopcoal *lc, uv_loop_t *loop, uint64_t delay_ns);

/* A read of at least this many bytes in one round marks a bulk sender:
 * that round does not count as busy (loopcoal.c invariant 4). */
#define LOOPCOAL_BULK (64u << 10)
/* A paused round that read fewer times than this did not pay for its
 * pause: the next LOOPCOAL_BACKOFF rounds do not pause (invariant 5). */
#define LOOPCOAL_PAYOFF 3
#define LOOPCOAL_BACKOFF 64

/* Notes a read of n bytes in this round. Loop thread. */
static inline void loopcoal_note_read(loopcoal *lc, size_t n) {
  lc->round_reads++;
  if (n > lc->round_max)
    lc->round_max = n;
}

/* Closes both handles (close_cb once each, may be NULL); the caller runs
 * the loop for the closes to complete before freeing lc. */
void loopcoal_close(loopcoal *lc, uv_close_cb close_cb);

#endif
