/* loopcoal.c: wake-up coalescing for gentraced's libuv loop.
 *
 * Why: with a fleet of agents each sending a small generation now and then,
 * the loop thread wakes about once per generation (epoll_wait returns one
 * socket), and on this kind of machine the wake-up itself (the context
 * switch into the thread and out again, the cold caches after it) costs
 * more than the generation's read, validation and ACK together (fleet
 * profile at 1,000 and 10,000 agents: finish_task_switch alone is a fifth
 * to a quarter of the loop thread's CPU). A NIC coalesces interrupts for
 * the same reason. So when the loop is busy, it pauses briefly before it
 * polls again, and the next poll returns everything that arrived
 * meanwhile: one wake-up for several generations.
 *
 * "Busy" means the last poll returned within the pause (something arrived
 * soon after the loop went to wait, or it did not wait at all). A loop
 * that waited longer than the pause is not busy and polls at once, so a
 * rare event (a lone agent, an idle fleet's heartbeats) pays no extra
 * wake-up, and a loop with more work than the pause (a big generation's
 * reads) never pauses either: its poll finds work at once, but the work
 * after it takes longer than the pause, so the next round does not pause.
 *
 * A bulk sender is left alone: a round in which one read took at least
 * LOOPCOAL_BULK bytes (the ingest notes every read's size) is not busy,
 * since pausing it would let that one socket's buffer fill and stall its
 * sender. The agents of a fleet send a few KiB per generation each.
 *
 * A pause pays only when several peers send during it. One peer talking
 * with the daemon step by step (HELLO, WELCOME, a generation, its ACK),
 * or two, would instead wait the pause at every step: a paused round that
 * read fewer than LOOPCOAL_PAYOFF times stops the pauses for the next
 * LOOPCOAL_BACKOFF rounds (a fleet of 10,000 agents on 2 s periods sends
 * about 10 generations per 2 ms pause).
 *
 * What it costs: a reply (WELCOME, ACK, ERROR) or a read waits at most the
 * pause longer; ACKs already wait for the store's group commit
 * (--commit-linger, 20 ms by default), so the pause (2 ms by default) is
 * small beside it.
 *
 * Invariants:
 *  1. The loop MUST pause only in the prepare callback (right before the
 *     poll) and at most delay_ns per loop iteration, otherwise the pause
 *     would stack up and delay replies by more than the documented bound.
 *  2. The two handles MUST stay unreferenced, otherwise a loop that has
 *     nothing else to do (ingest_free closing every handle) would never
 *     return from uv_run.
 *  3. busy MUST be decided from the time since the poll began, measured
 *     after the pause, otherwise the loop's own pause would count as
 *     waiting and the loop would stop pausing every other round.
 *  4. A round with a read of LOOPCOAL_BULK bytes or more MUST NOT be busy,
 *     otherwise a pause could fill a bulk sender's socket buffer (at
 *     1 GB/s, 2 ms is 2 MB) and cut its throughput.
 *  5. After a paused round with fewer than LOOPCOAL_PAYOFF reads, the next
 *     LOOPCOAL_BACKOFF rounds MUST NOT pause, otherwise a peer that waits
 *     for each reply before it sends again would wait the pause at every
 *     step (a session flood of two such clients ran at a fraction of its
 *     speed).
 */
#include "config.h"

#include "loopcoal.h"

#include <errno.h>
#include <time.h>

static void on_prepare(uv_prepare_t *h) {
  loopcoal *lc = h->data;
  lc->paused = 0;
  if (lc->skip > 0) {
    lc->skip--; /* invariant 5 */
  } else if (lc->busy && lc->delay_ns > 0) {
    lc->paused = 1;
    struct timespec ts = {(time_t)(lc->delay_ns / 1000000000),
                          (long)(lc->delay_ns % 1000000000)};
    /* A signal may cut the pause short: then the loop polls sooner, which
     * only gives back the pause's saving for that round. */
    (void)nanosleep(&ts, NULL);
    __atomic_fetch_add(&lc->pauses, 1, __ATOMIC_RELAXED); /* /metrics */
    /* The timers are computed from the loop's cached time (invariant 1's
     * bound holds for them too). */
    uv_update_time(h->loop);
  }
  lc->t_poll_ns = uv_hrtime(); /* invariant 3 */
}

static void on_check(uv_check_t *h) {
  loopcoal *lc = h->data;
  __atomic_fetch_add(&lc->polls, 1, __ATOMIC_RELAXED);
  lc->busy = uv_hrtime() - lc->t_poll_ns < lc->delay_ns &&
             lc->round_max < LOOPCOAL_BULK; /* invariant 4 */
  if (lc->paused && lc->round_reads < LOOPCOAL_PAYOFF)
    lc->skip = LOOPCOAL_BACKOFF; /* invariant 5 */
  lc->round_max = 0;
  lc->round_reads = 0;
}

void loopcoal_init(loopcoal *lc, uv_loop_t *loop, uint64_t delay_ns) {
  *lc = (loopcoal){.delay_ns = delay_ns, .t_poll_ns = uv_hrtime()};
  /* Both inits only fill in the handle (libuv returns 0). */
  (void)uv_prepare_init(loop, &lc->prep);
  (void)uv_check_init(loop, &lc->check);
  lc->prep.data = lc;
  lc->check.data = lc;
  uv_prepare_start(&lc->prep, on_prepare);
  uv_check_start(&lc->check, on_check);
  uv_unref((uv_handle_t *)&lc->prep); /* invariant 2 */
  uv_unref((uv_handle_t *)&lc->check);
}

void loopcoal_close(loopcoal *lc, uv_close_cb close_cb) {
  uv_close((uv_handle_t *)&lc->prep, close_cb);
  uv_close((uv_handle_t *)&lc->check, close_cb);
}
