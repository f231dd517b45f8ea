/* budget.c: what peers can make ingest hold: one memory budget for every
 * byte (--max-buffer) and the connection slots of one address
 * (--max-conns-per-ip, counted by iplimit.c).
 *
 * Owns: the split of ing.buffered by kind (frame_bytes, open_bytes,
 * queued_bytes, ident_bytes), the age of each connection's partial work,
 * and the shedding of partial work and identities when pausing cannot keep
 * the budget (budget_shed.c: it closes connections, so it sits above
 * ingest_conn.c, while the accounting here sits below it).
 *
 * Policy. The bytes held for agents are of three sorts:
 *  - queued generations drain by themselves (the store writes them), so
 *    when the total is over the budget reads pause (ingest_update_pause,
 *    hysteresis to 3/4) and resume as the store hands buffers back;
 *  - partial work (partial frames, open generations) drains only by
 *    reading on: a frame completes, a GEN_END arrives. A peer that stops
 *    half way (a stalled HELLO, a generation that never ends) would hold
 *    its bytes for ever, and pausing everyone for it would stop honest
 *    agents too. So while partial work alone is over the budget, the
 *    connection holding the oldest partial work is closed with
 *    ERROR(LIMIT), again and again until partial work is down to 3/4 of
 *    the budget. Honest agents finish a generation in about a second, so
 *    the oldest partial work is the stalled peers'; an honest agent that
 *    is shed anyway reconnects and resends (nothing ACKed is touched, and
 *    an unACKed generation stays in its spool).
 *  - identities (the strings of each HELLO, kept while the connection
 *    lives, lent to its queued generations, never copied) are held as
 *    long as the agent stays: a HELLO may be up to 64 KiB and its tags
 *    JSON up to six times its tags (escapes), so 16,384 connections could
 *    hold gigabytes. They get a quarter of the budget; over it the connection
 *    with the largest identity is closed (ERROR LIMIT). Honest identities
 *    are a few hundred bytes, never the largest. Identities count before
 *    partial work: partial work is shed while both together pass the
 *    budget.
 *
 * Invariants:
 *  1. buffered MUST equal frame_bytes + open_bytes + queued_bytes, for the
 *     daemon (ing) and for each connection (c.dec_buffered + sum of its
 *     gens' held + c.queued_bytes), and ident_bytes the sum of the
 *     connections' identities (kept apart from buffered, which is what
 *     --max-conn-buffer and gentrace_buffered_bytes have always meant:
 *     generation data); every change goes through the functions
 *     here, otherwise a byte held is a byte
 *     unbounded. GENTRACED_BUDGET_CHECK=1 recomputes all of it on every
 *     pass and aborts on a mismatch; the tests run with it.
 *  2. Bytes MUST be counted at what is allocated, not what was received:
 *     a decoder holds the whole announced payload from its header on, a
 *     generation buffer its capacity (pooled buffers come pre-faulted),
 *     otherwise a peer announcing big frames and sending one byte holds
 *     memory the count does not see.
 *  3. Only partial work is ever shed, never a queued generation (it is
 *     accepted and will be ACKed), and a shed connection gets ERROR
 *     without a gen, so the agent resends rather than dropping anything.
 *  4. The store's compression scratch (zstd output buffers and the
 *     compressed copies of queued generations, store_scratch_bytes) MUST
 *     count against the budget beside them (budget_used), otherwise a slow
 *     disk would let queued generations take up to twice the budget.
 *  5. Partial work is bounded before it is allocated where possible: before
 *     HELLO a frame may announce at most BUDGET_HELLO_FRAME_MAX (decoder
 *     limit set by ingest.c), and a read takes at most what fits the
 *     budget (ingest_read_alloc), so the overshoot past the budget between two
 *     passes is one read plus one frame's reservation.
 */
#include "config.h"

#include "budget.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "iplimit.h"
#include "log.h"

/* ------------------------------------------------------------- accounting */

/* The one place buffered changes (invariant 1): c's and the daemon's. */
static void conn_account(conn *c, int64_t delta) {
  ingest *ing = c->ing;
  if (ing->budget_checks && delta < 0 &&
      ((uint64_t)-delta > c->buffered || (uint64_t)-delta > ing->buffered)) {
    fprintf(stderr, "gentraced: buffered bytes would go negative\n");
    abort(); /* invariant 1, checked in tests */
  }
  c->buffered = (uint64_t)((int64_t)c->buffered + delta);
  ing->buffered = (uint64_t)((int64_t)ing->buffered + delta);
  CTR_SET(ing, buffered, ing->buffered);
}

uint64_t budget_used(const ingest *ing) {
  return ing->buffered + ing->ident_bytes + ing->reply_bytes + ing->tls_bytes +
         (ing->store != NULL ? storage_scratch_bytes(ing->store) : 0);
}

uint64_t budget_decoder_bytes(const gtp_frame_decoder *d) {
  if (d->err != 0)
    return 0; /* a failed decoder freed its buffer */
  if (d->hdr_have < GTP_FRAME_HEADER_SIZE)
    return d->hdr_have;
  if (d->have == d->len)
    return 0; /* RETURNED: freed by the next feed */
  return GTP_FRAME_HEADER_SIZE + (uint64_t)d->len; /* invariant 2 */
}

void budget_decoder_sync(conn *c) {
  ingest *ing = c->ing;
  uint64_t now = budget_decoder_bytes(&c->dec);
  if (now == c->dec_buffered)
    return;
  if (c->dec_buffered == 0)
    c->dec_since_ms = uv_now(ing->loop);
  int64_t d = (int64_t)now - (int64_t)c->dec_buffered;
  c->dec_buffered = (size_t)now;
  ing->frame_bytes = (uint64_t)((int64_t)ing->frame_bytes + d);
  CTR_SET(ing, budget_frames, ing->frame_bytes);
  conn_account(c, d);
}

static void open_account(conn *c, int64_t d) {
  ingest *ing = c->ing;
  ing->open_bytes = (uint64_t)((int64_t)ing->open_bytes + d);
  CTR_SET(ing, budget_open, ing->open_bytes);
  conn_account(c, d);
}

void budget_gen_sync(conn *c, opengen *g) {
  size_t cap = g->buf.data != NULL ? g->buf.cap : 0;
  if (cap == g->held)
    return;
  if (g->held == 0)
    g->since_ms = uv_now(c->ing->loop);
  open_account(c, (int64_t)cap - (int64_t)g->held);
  g->held = cap;
}

void budget_gen_drop(conn *c, opengen *g) {
  if (g->held == 0)
    return;
  open_account(c, -(int64_t)g->held);
  g->held = 0;
}

uint64_t budget_gen_queue(conn *c, opengen *g) {
  ingest *ing = c->ing;
  /* The buffer's bytes change kind (buffered does not change). The
   * store_gen borrows c's identity (store.h ident_borrowed), which stays
   * counted once in ident_bytes: no bytes are new. */
  uint64_t q = g->held;
  ing->open_bytes -= g->held;
  CTR_SET(ing, budget_open, ing->open_bytes);
  ing->queued_bytes += q;
  CTR_SET(ing, budget_queued, ing->queued_bytes);
  c->queued_bytes += q;
  g->held = 0;
  return q;
}

/* What c's identity costs on the heap (strings with their NUL, the tag
 * arrays, the tags JSON), recomputed from the strings themselves. */
static uint64_t ident_size(const conn *c) {
  uint64_t n = 0;
  if (c->service != NULL)
    n += strlen(c->service) + 1;
  if (c->host != NULL)
    n += strlen(c->host) + 1;
  if (c->agent_version != NULL)
    n += strlen(c->agent_version) + 1;
  if (c->tags_json != NULL)
    n += strlen(c->tags_json) + 1;
  return n + c->gs_ident_len; /* the tags are in gs_ident */
}

static void ident_account(conn *c, int64_t d) {
  ingest *ing = c->ing;
  ing->ident_bytes = (uint64_t)((int64_t)ing->ident_bytes + d);
  CTR_SET(ing, budget_ident, ing->ident_bytes);
  c->ident_bytes = (uint64_t)((int64_t)c->ident_bytes + d);
}

void budget_ident_set(conn *c) {
  ident_account(c, (int64_t)ident_size(c) - (int64_t)c->ident_bytes);
}

void budget_ident_drop(conn *c) {
  ident_account(c, -(int64_t)c->ident_bytes);
}

void budget_dequeue(conn *c, uint64_t bytes) {
  ingest *ing = c->ing;
  c->queued_bytes -= bytes;
  ing->queued_bytes -= bytes;
  CTR_SET(ing, budget_queued, ing->queued_bytes);
  conn_account(c, -(int64_t)bytes);
}

/* ---------------------------------------------------------------- checks */

static void check_fail(const char *what, uint64_t got, uint64_t want) {
  fprintf(stderr,
          "gentraced: budget invariant broken: %s is %" PRIu64
          ", recomputed %" PRIu64 "\n",
          what, got, want);
  abort();
}

/* Invariant 1, recomputed from the connections. Conns no longer listed
 * (closed, waiting for their store completions) hold only queued bytes and
 * their identity. */
void budget_verify(ingest *ing) {
  uint64_t frames = 0, open = 0, listed = 0, listed_q = 0, listed_i = 0;
  for (conn *c = ing->conns; c != NULL; c = c->next) {
    uint64_t dec = budget_decoder_bytes(&c->dec), gens = 0;
    if (dec != c->dec_buffered)
      check_fail("a connection's decoder bytes", c->dec_buffered, dec);
    for (opengen *g = c->gens; g != NULL; g = g->next) {
      size_t cap = g->buf.data != NULL ? g->buf.cap : 0;
      if (cap != g->held)
        check_fail("an open generation's bytes", g->held, cap);
      gens += g->held;
    }
    if (c->ident_bytes != ident_size(c))
      check_fail("a connection's identity bytes", c->ident_bytes,
                 ident_size(c));
    uint64_t want = dec + gens + c->queued_bytes;
    if (c->buffered != want)
      check_fail("a connection's buffered bytes", c->buffered, want);
    frames += dec;
    open += gens;
    listed += c->buffered;
    listed_q += c->queued_bytes;
    listed_i += c->ident_bytes;
  }
  if (frames != ing->frame_bytes)
    check_fail("partial frame bytes", ing->frame_bytes, frames);
  if (open != ing->open_bytes)
    check_fail("open generation bytes", ing->open_bytes, open);
  uint64_t sum = ing->frame_bytes + ing->open_bytes + ing->queued_bytes;
  if (ing->buffered != sum)
    check_fail("buffered bytes", ing->buffered, sum);
  if (listed > ing->buffered || listed_q > ing->queued_bytes ||
      ing->buffered - listed != ing->queued_bytes - listed_q)
    check_fail("bytes of closed connections", ing->buffered - listed,
               ing->queued_bytes - listed_q);
  if (listed_i > ing->ident_bytes)
    check_fail("identity bytes of closed connections", listed_i,
               ing->ident_bytes);
}

/* ------------------------------------------------------------ addresses */

#define IPLIMIT_LOG_MS 10000 /* at most one per-address refusal line */

int budget_admit_ip(ingest *ing, conn *c) {
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0 ||
      iplimit_key((struct sockaddr *)&ss, c->ipkey) != 0)
    return 1; /* no address to count it by (the listener is IP only) */
  int got = iplimit_acquire(ing->iplim, c->ipkey, ing->cfg.max_conns_per_ip);
  if (got > 0) {
    c->ip_held = 1;
    return 1;
  }
  uint8_t mem[128];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  if (got < 0) { /* out of memory: refused, the agent retries */
    CTR_ADD(ing, oom, 1);
    log_warn("out of memory", "what=address-count");
    gtp_frame_error_encode(&b, got, 0, 0,
                           "daemon out of memory (address count); retry");
    uv_buf_t ub = uv_buf_init((char *)b.data, (unsigned)b.len);
    uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
    return 0;
  }
  CTR_ADD(ing, refused_per_ip, 1);
  CTR_ADD(ing, limit_hits[LIM_CONNS_PER_IP], 1);
  uint64_t now = uv_now(ing->loop);
  if (ing->iplim_log_ms == 0 || now - ing->iplim_log_ms >= IPLIMIT_LOG_MS) {
    char ip[48] = "?";
    if (ss.ss_family == AF_INET6)
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
    else
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
    log_warn("agent connection refused: too many from one address",
             "ip=%s max_conns_per_ip=%" PRIu64 " refused_not_logged=%" PRIu64,
             ip, ing->cfg.max_conns_per_ip, ing->iplim_quiet);
    ing->iplim_log_ms = now;
    ing->iplim_quiet = 0;
  } else {
    ing->iplim_quiet++;
  }
  gtp_frame_error_encode(&b, GTP_E_LIMIT, 0, 0,
                         "too many agent connections from this address");
  uv_buf_t ub = uv_buf_init((char *)b.data, (unsigned)b.len);
  uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
  return 0;
}
