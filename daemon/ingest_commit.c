/* ingest_commit.c: the way back from the store (ingest.c invariants 1, 3
 * and 4): the store thread queues each transaction's finished generations
 * on the done list as one chain (donelist.c: one lock and at most one
 * wake-up per transaction) and the loop ACKs what was stored,
 * refuses what the store refused, closes on a store error, and parks
 * generations that met a full disk to resubmit them (one probe at a time) once
 * there is room again.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "gtp_error.h"
#include "ingest_int.h"
#include "log.h"

static void on_retry(uv_timer_t *t);

/* The completions of the transaction being handed back, held until its
 * last done() (store_gen.done_more 0), per thread (a backend may run done()
 * on several). Nothing else reaches them before the push, so the loop
 * cannot free them meanwhile. */
static __thread struct {
  ingest *ing;
  donelist_node *head, *last;
  int64_t seq;   /* the highest committed seq among them, for on_commit */
  uint64_t t_ns; /* when the first came back: its COMMIT had returned */
} held;

/* Hands the held chain to the loop: the feed learns of the commits first
 * (as it did per generation), then one push wakes the loop if it was idle
 * (donelist.c invariant 1). */
static void held_push(void) {
  ingest *ing = held.ing;
  if (held.seq > 0 && ing->cfg.on_commit != NULL)
    ing->cfg.on_commit(ing->cfg.on_commit_ctx, held.seq);
  donelist_node *first = held.head, *last = held.last;
  held.head = held.last = NULL;
  held.ing = NULL;
  donelist_push_chain(&ing->done, first, last);
}

void ingest_store_done(void *ctx, store_gen *g) {
  ingest *ing = ctx;
  pending *pd = g->cookie;
  if (held.head != NULL && held.ing != ing)
    held_push(); /* another ingest's (one per process today) */
  if (held.head == NULL) {
    held.ing = ing;
    held.seq = 0;
    held.t_ns = uv_hrtime();
    held.head = &pd->done;
  } else {
    held.last->next = &pd->done;
  }
  held.last = &pd->done;
  if (g->result == 0 && g->seq > held.seq)
    held.seq = g->seq;
  pd->t_done_ns = held.t_ns;
  int more = g->done_more;
  g->done_more = 0; /* a resubmitted g starts clean */
  if (!more)
    held_push();
}

pending *ingest_done_pending(donelist_node *n) {
  return (pending *)(void *)((char *)n - offsetof(pending, done));
}

static void retry_push(ingest *ing, pending *pd) {
  pd->next = NULL;
  *ing->retry_tail = pd;
  ing->retry_tail = &pd->next;
  ing->retry_n++;
}

pending *ingest_retry_pop(ingest *ing) {
  pending *pd = ing->retry_head;
  if (pd != NULL) {
    ing->retry_head = pd->next;
    if (ing->retry_head == NULL)
      ing->retry_tail = &ing->retry_head;
    ing->retry_n--;
  }
  return pd;
}

/* Resubmits a generation that met a full disk. */
static void resubmit(ingest *ing, pending *pd) {
  pd->g->result = 0;
  ing->inflight++;
  int rc = storage_submit(ing->store, pd->g);
  if (rc < 0) {
    /* The store is closing: the agent will resend after a restart. Out of
     * memory to queue it: its connection ends as at the first submit
     * (reasm.c), so that the agent resends it rather than wait for an ACK
     * that cannot come. */
    ing->inflight--;
    conn *c = pd->c;
    ingest_conn_dequeue(c, pd);
    ingest_pending_free(ing, pd);
    if (rc == -ENOMEM && c->state != CONN_CLOSING)
      ingest_conn_nomem(c, "store queue");
    ingest_conn_unref(c);
  }
}

static void disk_full_enter(ingest *ing) {
  if (ing->disk_full)
    return;
  ing->disk_full = 1;
  ing->last_probe_ms = uv_now(ing->loop);
  CTR_SET(ing, disk_full, 1);
  CTR_ADD(ing, disk_full_total, 1);
  uint64_t now = uv_now(ing->loop);
  ing->full_logged =
      ing->full_log_ms == 0 || now - ing->full_log_ms >= DISKFULL_LOG_MS;
  if (ing->full_logged) {
    log_error("storage full, ingest paused",
              "queued=%" PRIu64 " pauses_not_logged=%" PRIu64, ing->retry_n,
              ing->full_quiet);
    ing->full_log_ms = now;
    ing->full_quiet = 0;
  } else {
    ing->full_quiet++; /* gentrace_disk_full_total counts every pause */
  }
  ingest_update_pause(ing);
  uv_timer_start(&ing->retry_timer, on_retry, DISKFULL_PROBE_MS / 4,
                 DISKFULL_PROBE_MS / 4);
}

static void disk_full_leave(ingest *ing) {
  if (!ing->disk_full)
    return;
  ing->disk_full = 0;
  CTR_SET(ing, disk_full, 0);
  uv_timer_stop(&ing->retry_timer);
  if (ing->full_logged)
    log_info("storage has room again, ingest resumes", "queued=%" PRIu64,
             ing->retry_n);
  pending *pd;
  while ((pd = ingest_retry_pop(ing)) != NULL)
    resubmit(ing, pd);
  ingest_update_pause(ing);
}

/* Applies one completion. */
static void complete(ingest *ing, pending *pd) {
  store_gen *g = pd->g;
  conn *c = pd->c;
  ing->inflight--;
  if (pd == ing->probe) {
    ing->probe = NULL;
  }
  if (g->result == GTP_E_DISKFULL) {
    retry_push(ing, pd);
    disk_full_enter(ing);
    return;
  }
  if (ing->disk_full) {
    /* Something committed: space is back (retention or an operator). */
    disk_full_leave(ing);
  }
  ingest_conn_dequeue(c, pd);
  /* The store is done with the payload (invariant 8). */
  genpool_release(&ing->pool, budget_used(ing), !ing->global_paused, g->payload,
                  pd->cap);
  g->payload = NULL;
  if (g->bad_events) {
    /* The store found an invalid event (reasm.c leaves the events to its
     * check): refused as at GEN_END, final for the generation. */
    ingest_refuse_gen(c, g->gen, g->end.events, g->result,
                      "generation failed validation");
  } else if (g->result == GTP_E_CONFLICT || g->result == GTP_E_TOOBIG ||
             g->result == GTP_E_AUTH) {
    session_auth_store_refused(c, g); /* final for the generation */
  } else if (g->result == 0 || g->result == 1) {
    if (g->result == 0) {
      CTR_ADD(ing, committed, 1);
      CTR_ADD(ing, ledger_dropped, g->end.dropped);
      CTR_ADD(ing, ledger_evicted, g->end.evicted);
      CTR_ADD(ing, ledger_rejected, g->end.rejected);
    } else {
      CTR_ADD(ing, duplicate, 1);
    }
    if (c->state == CONN_ACTIVE || c->state == CONN_DRAINING) {
      /* Counted before the ACK leaves: an agent that reads its ACK and
       * then /metrics must find it counted (the write is microseconds). */
      acklat_add(&ing->commit_lat, pd->t_done_ns - pd->t_read_ns);
      acklat_add(&ing->ack_lat, uv_hrtime() - pd->t_read_ns);
      ingest_send_ack(c, g->gen); /* invariant 3 */
    }
  } else {
    /* Not stored and not the agent's fault: no ERROR (the agent would drop
     * the generation); close so it reconnects and resends. */
    CTR_ADD(ing, store_errors, 1);
    log_error("store failed a generation",
              "session=%s gen=%" PRIu64 " error=%s", c->session_hex, g->gen,
              gtp_errname(g->result));
    if (c->state == CONN_ACTIVE)
      ingest_conn_close(c, 0, 0, 0,
                        "daemon storage error; reconnect and resend");
  }
  ingest_pending_free(ing, pd);
  if (c->state != CONN_CLOSING)
    ingest_conn_update_reading(c);
  ingest_conn_unref(c);
}

void ingest_commit_poll(uv_poll_t *p, int status, int events) {
  (void)status; /* an eventfd has no error to report; take the list anyway */
  (void)events;
  ingest *ing = p->data;
  /* The whole list, every time (donelist.c invariant 1). */
  donelist_node *list = donelist_take(&ing->done);
  while (list != NULL) {
    donelist_node *next = list->next;
    complete(ing, ingest_done_pending(list));
    list = next;
  }
  ingest_update_pause(ing);
  ingest_drain_check(ing);
}

/* While the disk is full, probe with one generation now and then: the store
 * may have room again (retention, an operator freeing space). */
static void on_retry(uv_timer_t *t) {
  ingest *ing = t->data;
  if (!ing->disk_full || ing->probe != NULL || ing->retry_head == NULL)
    return;
  store_stats st;
  storage_stats_get(ing->store, &st);
  uint64_t now = uv_now(ing->loop);
  if (st.disk_full && now - ing->last_probe_ms < DISKFULL_PROBE_MS)
    return;
  ing->last_probe_ms = now;
  pending *pd = ingest_retry_pop(ing);
  ing->probe = pd;
  resubmit(ing, pd);
}
