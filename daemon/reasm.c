/* reasm.c: reassembly and validation of generations on one agent
 * connection (PROTOCOL.md section 6). Part of the ingest loop: every
 * function here runs on the loop thread and follows the invariants of
 * ingest.c (2: only whole, validated generations reach the store; 4: each
 * submitted generation holds a reference on its conn; 5: every byte held is
 * counted).
 *
 * Life of a generation on a connection: the first BATCH with a new gen
 * opens an opengen whose buffer starts with GEN_START (synthesized from
 * HELLO); BATCH records are appended in arrival order; GEN_END recomputes
 * the manifest, appends the GEN_END record, parses the whole generation and
 * hands it to the store, or rejects it (ERROR with the gen). A refused
 * generation stays as a tombstone (rejected = 1, no bytes) until its
 * GEN_END, so its late BATCH frames are swallowed. A GEN_END whose manifest
 * and ledger are all zero is an abort (PROTOCOL.md 3.4): the agent dropped
 * a generation it had started sending; it is discarded without a reply.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "gtp_error.h"
#include "ingest_int.h"
#include "log.h"
#include "varint.h"

/* -------------------------------------------------------------- reassembly */

/* calloc(1, n) that is served from malloc's per-thread cache: glibc's
 * calloc skips that cache (each call walks _int_malloc), and GCC folds a
 * malloc followed by a zeroing memset back into calloc; the empty asm hides
 * where p came from, so the two stay apart. The loop's three records per
 * generation come back to the cache at its completion, on this thread. */
static void *zalloc(size_t n) {
  void *p = malloc(n);
  __asm__("" : "+r"(p));
  if (p != NULL)
    memset(p, 0, n);
  return p;
}

static opengen *gen_find(conn *c, uint64_t gen) {
  for (opengen *g = c->gens; g != NULL; g = g->next)
    if (g->gen == gen)
      return g;
  return NULL;
}

static void gen_unlink(conn *c, opengen *g) {
  for (opengen **pp = &c->gens; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == g) {
      *pp = g->next;
      c->ngens--;
      return;
    }
  }
}

/* Marks g refused: frees its bytes and tells the agent now, so it does not
 * keep sending a generation that cannot be stored. */
static void gen_reject(conn *c, opengen *g, int code, const char *reason) {
  ingest *ing = c->ing;
  budget_gen_drop(c, g);
  genpool_release(&ing->pool, budget_used(ing), !ing->global_paused,
                  g->buf.data, g->buf.cap);
  g->buf.data = NULL;
  gtp_wbuf_init(&g->buf, 1);
  g->rejected = 1;
  CTR_ADD(ing, rejected, 1);
  log_warn("generation rejected",
           "conn=%" PRIu64 " session=%s gen=%" PRIu64 " error=%s", c->id,
           c->session_hex, g->gen, gtp_errname(code));
  ingest_send_error(c, code, 1, g->gen, reason);
}

/* Out of memory while assembling a generation: not the agent's fault and
 * not final for the generation (an ERROR with its gen would make the agent
 * drop it), so the connection ends with ERROR(ENOMEM) and no gen, its open
 * generations are dropped (ingest_conn_close) and the agent resends
 * everything unACKed. Returns -1 (the connection was closed). */
static int gen_nomem(conn *c, const char *what) {
  ingest_conn_nomem(c, what);
  return -1;
}

/* Open generations only drain through GEN_END, so pausing reads cannot
 * help: a connection holding more open than it may buffer is closed
 * (ERROR LIMIT, no gen: the agent resends everything unACKed). One
 * generation that alone outgrows the buffer would come back the same on
 * every resend, so it is refused instead (ERROR TOOBIG with its gen: the
 * agent drops and counts it) and the connection goes on. That happens
 * when --max-conn-buffer is below --max-gen-size, or a generation of
 * exactly --max-gen-size meets a buffer of the same size (its header is
 * counted too). 0, or -1 when it was closed. */
static int check_open_bytes(conn *c) {
  ingest *ing = c->ing;
  uint64_t open = 0;
  opengen *largest = NULL;
  for (opengen *o = c->gens; o != NULL; o = o->next) {
    open += o->buf.len;
    if (largest == NULL || o->buf.len > largest->buf.len)
      largest = o;
  }
  if (largest != NULL && largest->buf.len > ing->cfg.max_conn_buffer) {
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
    open -= largest->buf.len;
    gen_reject(c, largest, GTP_E_TOOBIG,
               "generation exceeds the per-connection buffer");
    open += largest->buf.len;
  }
  if (open > ing->cfg.max_conn_buffer) {
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
    ingest_conn_close(c, GTP_E_LIMIT, 0, 0,
                      "open generations exceed the per-connection buffer");
    return -1;
  }
  return 0;
}

int reasm_batch(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  uint64_t gen;
  const uint8_t *recs;
  size_t rlen;
  int rc = gtp_frame_batch_decode(f->payload, f->len, &gen, &recs, &rlen);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, rc, 0, 0, "bad BATCH frame");
    return -1;
  }
  opengen *g = gen_find(c, gen);
  const char *why = NULL;
  if (g == NULL) {
    if (c->ngens >= OPEN_GENS_MAX) {
      CTR_ADD(ing, limit_hits[LIM_OPEN_GENS], 1);
      ingest_conn_close(c, GTP_E_LIMIT, 1, gen,
                        "too many generations open at once");
      return -1;
    }
    g = zalloc(sizeof *g);
    if (g == NULL) {
      ingest_conn_nomem(c, "open generation");
      return -1;
    }
    g->gen = gen;
    gtp_wbuf_init(&g->buf, (size_t)ing->cfg.max_gen_size + 4096);
    /* Reserve what this agent's previous generation needed, so the buffer
     * rarely reallocates (each realloc copies and faults in fresh pages);
     * an idle agent's hint is small, so memory follows real use. The
     * buffer comes from the pool when one fits (no page faults at all),
     * else new with the previous generation's bytes faulted in at once. */
    if (c->last_gen_size > 0) {
      size_t cap = 0;
      uint8_t *d = genpool_alloc(&ing->pool, budget_used(ing), c->last_gen_size,
                                 c->last_gen_size - c->last_gen_size / 9, &cap);
      if (d != NULL) {
        g->buf.data = d;
        g->buf.cap = cap;
      }
    }
    g->next = c->gens;
    c->gens = g;
    c->ngens++;
    /* The session's identity as encoded at HELLO (ingest_hello.c). */
    rc = gtp_put_gen_start_with(&g->buf, c->session, gen, c->gs_ident,
                                c->gs_ident_len);
    if (rc == -ENOMEM)
      return gen_nomem(c, "generation buffer");
    if (rc < 0) {
      gen_reject(c, g, rc, "cannot build GEN_START");
      return 0;
    }
    g->body_off = g->buf.len;
    budget_gen_sync(c, g);
    /* Refused at its first BATCH, so none of it is buffered; its GEN_END
     * counts its events as rejected (session_auth.c invariant 3). */
    if (!session_auth_gen_ok(c, gen, &why)) {
      gen_reject(c, g, GTP_E_CORRUPT, why);
      return 0;
    }
  }
  if (g->rejected)
    return 0;
  /* gtp_frame_batch_decode has already checked that recs holds whole body
   * records (no GEN_START/GEN_END), so a malformed BATCH closed the
   * connection above and what is appended here is well framed. */
  if (g->buf.len - g->body_off + rlen > ing->cfg.max_gen_size) {
    CTR_ADD(ing, limit_hits[LIM_GEN_SIZE], 1);
    gen_reject(c, g, GTP_E_TOOBIG, "generation exceeds the daemon's maximum");
    return 0;
  }
  gtp_wbuf_put(&g->buf, recs, rlen);
  if (g->buf.err == -ENOMEM)
    return gen_nomem(c, "generation buffer");
  if (g->buf.err) {
    gen_reject(c, g, g->buf.err, NULL);
    return 0;
  }
  budget_gen_sync(c, g);
  return check_open_bytes(c);
}

/* ------------------------------------------------------------- staging */

/* The record check of gtp_frame_batch_decode, for records that reached the
 * generation buffer without passing through it: one or more whole body
 * records (a GEN_START or GEN_END smuggled in would split the stored
 * generation); unknown types pass. MUST stay the same check, otherwise a
 * frame would be accepted or refused depending on how it was read. */
static int batch_records_check(const uint8_t *q, size_t n) {
  const uint8_t *end = q + n;
  if (q == end)
    return GTP_E_TRUNC;
  while (q < end) {
    gtp_record rec;
    int rc = gtp_record_parse(q, (size_t)(end - q), &rec);
    if (rc < 0)
      return rc;
    if (rec.type == GTP_REC_GEN_START || rec.type == GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    q += rec.size;
  }
  return 0;
}

int reasm_stage_begin(conn *c, const uint8_t *p, size_t n) {
  ingest *ing = c->ing;
  if (c->state != CONN_ACTIVE || n < GTP_FRAME_HEADER_SIZE ||
      p[4] != GTP_FR_BATCH)
    return 0;
  uint32_t len = gtp_get_u32le(p);
  /* Frames too big, too small or whole in the input take the decoder's
   * path, which also reports every error. */
  if (len > ing->cfg.max_frame || len < STAGE_MIN ||
      len <= n - GTP_FRAME_HEADER_SIZE)
    return 0;
  const uint8_t *q = p + GTP_FRAME_HEADER_SIZE, *end = p + n;
  uint64_t gen;
  if (gtp_uvarint_get(&q, end, &gen) < 0)
    return 0; /* the varint is split (or bad): let the decoder see it */
  size_t vlen = (size_t)(q - (p + GTP_FRAME_HEADER_SIZE));
  size_t rlen = len - vlen;
  opengen *g = gen_find(c, gen);
  /* Only appends that reasm_batch would make without refusing anything:
   * an open, accepted generation that stays within max-gen-size and the
   * per-connection open bytes. */
  if (g == NULL || g->rejected || g->buf.err ||
      g->buf.len - g->body_off + rlen > ing->cfg.max_gen_size)
    return 0;
  uint64_t open = 0;
  for (opengen *o = c->gens; o != NULL; o = o->next)
    open += o->buf.len;
  if (open + rlen > ing->cfg.max_conn_buffer)
    return 0;
  /* Room for the whole frame, so the kernel can write the rest in place;
   * the buffer does not move again until the frame is appended. */
  if (gtp_wbuf_grow(&g->buf, rlen) == NULL) {
    g->buf.err = 0; /* nothing was appended: the decoder path decides */
    return 0;
  }
  g->buf.len -= rlen;
  size_t have = (size_t)(end - q);
  memcpy(g->buf.data + g->buf.len, q, have);
  c->stage = g;
  c->stage_len = rlen;
  c->stage_have = have;
  budget_gen_sync(c, g); /* the frame's room is in buf.cap */
  CTR_ADD(ing, staged_frames, 1);
  return 1;
}

int reasm_stage_read(conn *c, size_t nread) {
  ingest *ing = c->ing;
  opengen *g = c->stage;
  c->stage_have += nread;
  if (c->stage_have < c->stage_len)
    return 0;
  /* The frame is whole: the same steps as reasm_batch's append. */
  size_t rlen = c->stage_len;
  c->stage = NULL;
  c->stage_have = c->stage_len = 0;
  CTR_ADD(ing, frames, 1);
  int rc = batch_records_check(g->buf.data + g->buf.len, rlen);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, rc, 0, 0, "bad BATCH frame");
    return -1;
  }
  g->buf.len += rlen; /* counted in buffered with buf.cap */
  return check_open_bytes(c);
}

pending *ingest_pending_new(ingest *ing) {
  pending *pd = ing->pd_free;
  if (pd != NULL) {
    ing->pd_free = pd->next;
    ing->pd_nfree--;
  } else {
    pd = malloc(sizeof *pd);
    if (pd == NULL)
      return NULL;
  }
  memset(pd, 0, sizeof *pd);
  pd->g = &pd->sg;
  pd->sg.cookie = pd;
  return pd;
}

void ingest_pending_free(ingest *ing, pending *pd) {
  /* store_gen_free's part, for a store_gen in pd's block: the identity is
   * always lent (store_gen_fill), the payload freed unless it went back to
   * the pool (NULL then). */
  GTP_ASSERT(pd->g == &pd->sg && pd->sg.ident_borrowed);
  free(pd->sg.payload);
  pd->sg.payload = NULL;
  if (ing->pd_nfree < PENDING_FREE_MAX) {
    pd->next = ing->pd_free;
    ing->pd_free = pd;
    ing->pd_nfree++;
  } else {
    free(pd);
  }
}

void ingest_pending_fini(ingest *ing) {
  while (ing->pd_free != NULL) {
    pending *pd = ing->pd_free;
    ing->pd_free = pd->next;
    free(pd);
  }
  ing->pd_nfree = 0;
}

/* The store's record of a validated generation, in sg: c's identity lent
 * (store.h ident_borrowed: c's strings live until its last reference goes,
 * and the store_gen holds one from its submit until it is freed, invariant
 * 4), the clock span, the manifest e; no payload yet. */
static void store_gen_fill(conn *c, store_gen *sg, const gtp_clock *clock,
                           const gtp_gen_end *e) {
  sg->service = c->service;
  sg->host = c->host;
  sg->agent_version = c->agent_version;
  sg->tags_json = c->tags_json;
  sg->ident_borrowed = 1;
  memcpy(sg->session, c->session, 16);
  sg->pid = c->pid;
  sg->process_start_ns = c->process_start_ns;
  sg->gen = e->gen;
  memcpy(sg->key_hash, c->key_hash, sizeof sg->key_hash);
  sg->has_key = 1;
  sg->key_bound = c->key_bound;
  uint64_t s_ns = clock->start_real_ns;
  uint64_t e_ns = clock->end_real_ns;
  if (s_ns > INT64_MAX)
    s_ns = INT64_MAX;
  if (e_ns > INT64_MAX)
    e_ns = INT64_MAX;
  if (e_ns < s_ns)
    e_ns = s_ns;
  sg->start_ns = (int64_t)s_ns;
  sg->end_ns = (int64_t)e_ns;
  sg->end = *e;
}

/* An all-zero manifest and ledger: no generation has one (each has at least
 * its CLOCK record), so it can only mean an abort. */
static int gen_end_is_abort(const gtp_gen_end *e) {
  return e->records == 0 && e->batches == 0 && e->bytes == 0 && e->crc == 0 &&
         e->events == 0 && e->dropped == 0 && e->evicted == 0 &&
         e->rejected == 0;
}

int reasm_gen_end(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  gtp_gen_end e;
  int rc = gtp_frame_gen_end_decode(f->payload, f->len, &e);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    ingest_conn_close(c, rc, 0, 0, "bad GEN_END frame");
    return -1;
  }
  opengen *g = gen_find(c, e.gen);
  if (gen_end_is_abort(&e)) {
    /* Nothing is stored or counted: the agent counts the generation in its
     * own ledger (dropped), which reaches us with its next one. */
    if (g != NULL) {
      log_info("generation aborted by the agent",
               "conn=%" PRIu64 " session=%s gen=%" PRIu64, c->id,
               c->session_hex, e.gen);
      gen_unlink(c, g);
      ingest_conn_free_gen(c, g);
    }
    return 0;
  }
  if (g == NULL) {
    /* Every generation has a CLOCK record, so one without BATCH frames is
     * malformed; refuse it so the agent accounts for it. */
    CTR_ADD(ing, rejected, 1);
    storage_note_rejected(ing->store, c->session, e.events);
    CTR_ADD(ing, rejected_events, e.events);
    ingest_send_error(c, GTP_E_MANIFEST, 1, e.gen,
                      "GEN_END of a generation with "
                      "no BATCH");
    return 0;
  }
  gen_unlink(c, g);
  if (g->rejected) {
    storage_note_rejected(ing->store, c->session, e.events);
    CTR_ADD(ing, rejected_events, e.events);
    ingest_conn_free_gen(c, g);
    return 0;
  }
  /* One validation pass: gtp_gen_parse checks the manifest (counts, bytes,
   * CRC32C) against the GEN_END we append, and every record and event, so
   * the body is read once here (a separate gtp_manifest_compute would CRC
   * it twice; B2 measured that). On SQLite the loop parses lazily (all of
   * that but the events) and the store checks the events in the walk that
   * summarizes them, before it writes anything (store.h, check_events):
   * each event is decoded once, on a compressor thread, so a big
   * generation costs the loop no per-event work. The shared backend keeps
   * no summaries yet: there the loop checks the events. */
  int lazy = !storage_is_shared(ing->store);
  size_t body_len = g->buf.len - g->body_off;
  rc = gtp_put_gen_end(&g->buf, &e);
  gtp_clock clock;
  const char *why = "generation failed validation";
  if (rc == 0) {
    budget_gen_sync(c, g);
    /* The GEN_START (from the checked HELLO) and the GEN_END (from the
     * frame just decoded) are ours: the check takes them as given and
     * checks everything the agent sent between them (gtp_gen_parse_known's
     * checks, without a gtp_gen to fill: only the CLOCK is kept). */
    rc = gtp_gen_verify_known(g->buf.data + g->body_off, body_len, e.gen, &e,
                              !lazy, &clock);
    if (rc == 0)
      rc = session_auth_gen_check(c, &clock, &e, &why);
  }
  if (rc == -ENOMEM) {
    ingest_conn_free_gen(c, g);
    return gen_nomem(c, "generation validation");
  }
  if (rc < 0) {
    ingest_refuse_gen(c, e.gen, e.events, rc, why);
    ingest_conn_free_gen(c, g);
    return c->state == CONN_CLOSING ? -1 : 0;
  }

  pending *pd = ingest_pending_new(ing);
  if (pd == NULL) {
    ingest_conn_free_gen(c, g);
    return gen_nomem(c, "store queue entry");
  }
  store_gen *sg = pd->g;
  store_gen_fill(c, sg, &clock, &e);
  sg->check_events = lazy;
  /* The payload moves to the store; it stays counted in the buffers until
   * the completion (invariant 5). */
  sg->payload = g->buf.data;
  sg->len = g->buf.len;
  c->last_gen_size = g->buf.len + g->buf.len / 8;
  if (c->last_gen_size > ing->cfg.max_gen_size)
    c->last_gen_size = (size_t)ing->cfg.max_gen_size; /* under buf.limit */
  pd->c = c;
  pd->cap = g->buf.cap;
  /* Its buffer (buf.cap) is now queued; the identity it borrows stays
   * counted once, as c's (budget_ident_set). */
  pd->held = budget_gen_queue(c, g);
  g->buf.data = NULL;
  free(g);
  c->refs++;
  c->inflight++;
  ing->inflight++;
  pd->t_read_ns = uv_hrtime();
  rc = storage_submit(ing->store, sg);
  if (rc < 0) {
    /* Closing store, or no memory to queue it: nothing will commit; the
     * agent resends later. */
    c->refs--;
    c->inflight--;
    ing->inflight--;
    budget_dequeue(c, pd->held);
    ingest_pending_free(ing, pd);
    if (rc == -ENOMEM)
      return gen_nomem(c, "store queue");
    ingest_conn_close(c, GTP_E_SHUTDOWN, 0, 0, "daemon is shutting down");
    return -1;
  }
  c->key_bound = 1; /* store_submit bound it, or found it bound */
  if (c->buffered > ing->cfg.max_conn_buffer && !c->self_paused) {
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
  }
  return 0;
}
