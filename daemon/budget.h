/* budget.h: gentraced's one memory budget for ingest (--max-buffer).
 *
 * Every byte the loop holds for agents is counted here, by kind, and the
 * sum is what --max-buffer bounds: partial frames in the frame decoders
 * (before and after HELLO, counted at the size they reserve), open
 * generations in reassembly (counted at their buffer's capacity), and
 * generations queued at the store or waiting for disk space (the same
 * buffers, handed over). Idle pooled buffers are counted beside them
 * (ing.pool.bytes, genpool.c). See budget.c for the policy and invariants.
 *
 * Thread: loop thread only.
 */
#ifndef BUDGET_H
#define BUDGET_H

#include <stdint.h>

#include "ingest_int.h"

/* Largest frame accepted before HELLO: a HELLO (identity, tags, token) is
 * small, so an unauthenticated peer cannot make the daemon reserve a 1 MiB
 * frame per connection. PROTOCOL.md documents it. */
#define BUDGET_HELLO_FRAME_MAX (64u << 10)

/* Bytes a frame decoder holds on the heap for a partial frame: the whole
 * announced payload once its header is in (that is what it allocates). */
uint64_t budget_decoder_bytes(const gtp_frame_decoder *d);

/* What counts against --max-buffer besides the idle pool: the bytes held
 * for agents (ing.buffered), their identities (ing.ident_bytes), replies
 * queued to them and not yet written (ing.reply_bytes; at most 1 MiB per
 * connection, which is then closed) and the store's compression scratch
 * for the queued generations (store_scratch_bytes). */
uint64_t budget_used(const ingest *ing);

/* Re-reads c's decoder into the accounts (after every feed and fini). */
void budget_decoder_sync(conn *c);
/* Re-reads g's buffer capacity into the accounts (after every change of
 * g->buf). */
void budget_gen_sync(conn *c, opengen *g);
/* g's buffer goes (freed, pooled or rejected): its bytes stop counting. */
void budget_gen_drop(conn *c, opengen *g);
/* A generation's held bytes move from open to queued at the store (its
 * store_gen borrows c's identity, counted once as c's); returns what is
 * now counted as queued for it (pending.held). */
uint64_t budget_gen_queue(conn *c, opengen *g);
/* A queued generation of `bytes` left the store queue. */
void budget_dequeue(conn *c, uint64_t bytes);

/* Counts c's identity (service, host, agent version, tags, tags JSON)
 * once ingest_hello has built it; budget_ident_drop when it is freed. */
void budget_ident_set(conn *c);
void budget_ident_drop(conn *c);

/* budget_shed.c: sheds identities over a quarter of --max-buffer (the largest
 * first) and partial work, the oldest first, while what only reading can
 * complete (with the identities) is over --max-buffer (pausing cannot release
 * it). Then, if
 * GENTRACED_BUDGET_CHECK=1, verifies every account (aborts on a mismatch:
 * tests run with it). Called by ingest_update_pause. */
void budget_enforce(ingest *ing);
/* Recomputes every account from the connections (invariant 1) and aborts
 * on a mismatch; budget_enforce calls it when GENTRACED_BUDGET_CHECK=1. */
void budget_verify(ingest *ing);

/* --max-conns-per-ip, at accept: counts c against its peer address
 * (c->ip_held; ingest_conn_closed releases it) and returns 1, or says
 * ERROR(LIMIT) (best effort, nothing queued), counts and logs (rate-limited)
 * the refusal and returns 0: the caller closes c. */
int budget_admit_ip(ingest *ing, conn *c);

#endif
