/* budget_shed.c: the shedding half of the memory budget (budget.c's design
 * note, "Policy", and invariant 3): when pausing cannot keep --max-buffer,
 * the largest identities and the oldest partial work are closed with
 * ERROR(LIMIT). Apart from budget.c because it closes connections
 * (ingest_conn.c), which in turn account through budget.c: one file each
 * way would call the other. Loop thread only.
 */
#include "config.h"

#include "budget.h"

#include <inttypes.h>
#include <stdio.h>

#include "gtp_error.h"
#include "log.h"

#define SHED_LOG_MS 10000 /* at most one "shed" line per this */

/* When c's partial work began (its oldest partial frame or open
 * generation), or UINT64_MAX if it holds none. */
static uint64_t partial_since(const conn *c) {
  uint64_t t = UINT64_MAX;
  if (c->dec_buffered > 0)
    t = c->dec_since_ms;
  for (const opengen *g = c->gens; g != NULL; g = g->next)
    if (g->held > 0 && g->since_ms < t)
      t = g->since_ms;
  return t;
}

static uint64_t partial_of(const conn *c) {
  return c->buffered - c->queued_bytes;
}

/* Closes v to keep the budget (invariant 3: ERROR without a gen, so the
 * agent requeues and resends). One log line per SHED_LOG_MS for a burst;
 * the close itself stays quiet. */
static void shed(ingest *ing, conn *v, const char *what) {
  uint64_t bytes = partial_of(v) + v->ident_bytes;
  uint64_t now = uv_now(ing->loop);
  CTR_ADD(ing, shed_conns, 1);
  CTR_ADD(ing, shed_bytes, bytes);
  CTR_ADD(ing, limit_hits[LIM_BUFFER_SHED], 1);
  if (ing->shed_log_ms == 0 || now - ing->shed_log_ms >= SHED_LOG_MS) {
    uint64_t since = partial_since(v);
    log_warn("memory budget full, partial work shed",
             "conn=%" PRIu64 " peer=%s what=%s bytes=%" PRIu64
             " age_ms=%" PRIu64 " partial=%" PRIu64 " identities=%" PRIu64
             " max_buffer=%" PRIu64 " shed_not_logged=%" PRIu64,
             v->id, v->peer, what, bytes, since <= now ? now - since : 0,
             ing->frame_bytes + ing->open_bytes, ing->ident_bytes,
             ing->cfg.max_buffer, ing->shed_quiet);
    ing->shed_log_ms = now;
    ing->shed_quiet = 0;
  } else {
    ing->shed_quiet++;
  }
  ingest_send_error(v, GTP_E_LIMIT, 0, 0,
                    "daemon memory budget (--max-buffer) full; reconnect "
                    "and resend");
  ingest_conn_close(v, 0, 0, 0, NULL);
}

static int sheddable(const conn *c) {
  return c->state == CONN_HANDSHAKE || c->state == CONN_ACTIVE;
}

void budget_enforce(ingest *ing) {
  uint64_t max = ing->cfg.max_buffer;
  if (ing->stopping)
    goto check;
  /* Nothing to shed while the totals are within bounds: the sheddable
   * identities summed below are part of ident_bytes. Without this early
   * exit every pass walked every connection (it runs after each batch of
   * store completions): 72% of the loop's CPU with 10,000 agents
   * (bench_fleet, perf). */
  if (ing->ident_bytes <= max / 4 &&
      ing->frame_bytes + ing->open_bytes + ing->ident_bytes <= max)
    goto check;
  /* Identities: a quarter of the budget, the largest goes first. Those of
   * closing connections are freed once their close completes (seconds):
   * shedding more cannot free them sooner, so they are not counted here. */
  uint64_t ident = 0;
  for (conn *c = ing->conns; c != NULL; c = c->next)
    if (sheddable(c))
      ident += c->ident_bytes;
  while (ident > max / 4) {
    conn *v = NULL;
    for (conn *c = ing->conns; c != NULL; c = c->next)
      if (sheddable(c) && c->ident_bytes > 0 &&
          (v == NULL || c->ident_bytes > v->ident_bytes))
        v = c;
    if (v == NULL)
      break;
    ident -= v->ident_bytes;
    shed(ing, v, "identity");
  }
  /* Partial work: the oldest goes first, down to 3/4 of the budget. */
  if (ing->frame_bytes + ing->open_bytes + ident > max) {
    uint64_t target = max / 4 * 3;
    while (ing->frame_bytes + ing->open_bytes + ident > target) {
      conn *v = NULL;
      uint64_t vt = UINT64_MAX;
      for (conn *c = ing->conns; c != NULL; c = c->next) {
        if (!sheddable(c))
          continue;
        uint64_t t = partial_since(c);
        if (t < vt || (t == vt && v != NULL && t != UINT64_MAX &&
                       partial_of(c) > partial_of(v))) {
          v = c;
          vt = t;
        }
      }
      if (v == NULL || vt == UINT64_MAX)
        break;
      ident -= v->ident_bytes;
      shed(ing, v, "partial");
    }
  }
check:
  if (ing->budget_checks)
    budget_verify(ing);
}
