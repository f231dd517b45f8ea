/* ingest_int.h: the private state of daemon/ingest.c, shared with the
 * other files of the ingest (ingest_conn.c, ingest_read.c, ingest_hello.c,
 * ingest_commit.c), reasm.c (reassembly, validation) and ingest_metrics.c
 * (/metrics).
 * Not for any other file: the invariants live in ingest.c's header comment.
 */
#ifndef INGEST_INT_H
#define INGEST_INT_H

#include <pthread.h>
#include <stdint.h>

#include <uv.h>

#include "acklat.h"
#include "check.h"
#include "donelist.h"
#include "format.h"
#include "frame.h"
#include "genpool.h"
#include "ingest.h"
#include "loopcoal.h"
#include "session_auth.h"
#include "storage.h"

#define READ_BUF_SIZE (256u << 10)
#define READ_MIN (16u << 10)
#define OPEN_GENS_MAX 64           /* generations open at once per conn */
#define WRITE_QUEUE_MAX (1u << 20) /* unread replies before we give up */
#define CLOSE_GRACE_MS 2000        /* time for a last frame to flush */
#define SESS_BUCKETS 16384         /* power of two */
#define DISKFULL_PROBE_MS 1000
#define DISKFULL_LOG_MS 60000
#define TOKEN_LOG_MS 10000
#define STAGE_MIN (16u << 10) /* BATCH payloads read in place (inv. 9) */
#define PENDING_FREE_MAX 256  /* pending records kept for reuse (reasm.c) */

enum conn_state {
  CONN_HANDSHAKE,
  CONN_ACTIVE,
  CONN_DRAINING,
  CONN_CLOSING,
};

/* Limit counters, one per limit, in /metrics as gentrace_limit_hits_total. */
enum limit_id {
  LIM_CONNECTIONS,
  LIM_CONN_BUFFER,
  LIM_BUFFER,
  LIM_FRAME,
  LIM_GEN_SIZE,
  LIM_OPEN_GENS,
  LIM_HANDSHAKE_TIMEOUT,
  LIM_IDLE_TIMEOUT,
  LIM_WRITE_QUEUE,
  LIM_TOKEN,
  LIM_CONNS_PER_IP, /* budget.c, iplimit.c: one address's connections */
  LIM_HELLO_SIZE,   /* a frame before HELLO over BUDGET_HELLO_FRAME_MAX */
  LIM_BUFFER_SHED,  /* partial work shed to keep --max-buffer */
  LIM_COUNT_
};

/* One generation being reassembled: GEN_START (synthesized from HELLO when
 * the first BATCH arrives) then body records in arrival order. */
typedef struct opengen {
  struct opengen *next;
  uint64_t gen;
  int rejected; /* 1: refused already; swallow its frames until GEN_END */
  gtp_wbuf buf;
  size_t body_off;
  size_t held;       /* buf.cap as counted in buffered (budget.c) */
  uint64_t since_ms; /* when held became > 0: its age as partial work */
} opengen;

/* One generation at the store: the store_gen's cookie, and the store_gen
 * itself in the same block (one allocation, recycled: reasm.c,
 * ingest_pending_new). Linked into the completion list by the store thread
 * without allocating. */
typedef struct pending {
  struct pending *next; /* the retry list, or ing->pd_free (loop thread) */
  donelist_node done;   /* ing->done, from the store thread */
  struct conn *c;
  store_gen *g; /* &sg */
  size_t cap; /* capacity of g->payload, for the buffer pool */
  uint64_t held; /* bytes counted as queued: cap (the identity is lent) */
  /* uv_hrtime: handed to the store (GEN_END read), and its COMMIT
   * returned (set by the store thread before the hand-back), acklat.h. */
  uint64_t t_read_ns, t_done_ns;
  store_gen sg;
} pending;

typedef struct tls_conn tls_conn;

typedef struct conn {
  /* Loop thread only. */
  uv_tcp_t tcp;
  tls_conn *tls; /* TLS session (tls_conn.c); NULL on a plain port */
  struct ingest *ing;
  struct conn *prev, *next; /* ing->conns */
  struct conn *sess_next;   /* session hash chain; guarded by sess_lock */
  enum conn_state state;
  int refs;        /* 1 while the handle is open + 1 per store_gen (inv. 4) */
  int reading;     /* uv_read_start active */
  int self_paused; /* over max-conn-buffer */
  int in_session_map;
  int write_overflow; /* replies over WRITE_QUEUE_MAX: closing */
  int write_failed;   /* a reply could not be queued (out of memory): the
                         stream may end inside a frame, so nothing more is
                         written (ingest_conn_write_raw) */
  int hello_wait;     /* HELLO's store lookup in flight (ingest_hello.c):
                         not reading, holds a reference */
  uint64_t id;
  uint64_t created_ms, last_rx_ms, last_tx_ms, closing_ms;
  char peer[64];
  gtp_frame_decoder dec;
  size_t dec_buffered;   /* decoder bytes counted (budget_decoder_sync) */
  uint64_t dec_since_ms; /* when dec_buffered became > 0 */
  uint8_t ipkey[16];     /* its address in ing->iplim (iplimit.c) */
  int ip_held;           /* 1: counted in ing->iplim */
  uint64_t ident_bytes;  /* identity from HELLO, counted (budget.c) */
  size_t last_gen_size;  /* size hint for the next opengen buffer */
  uint64_t buffered;     /* invariant 5 */
  uint64_t inflight;     /* generations at the store */
  uint64_t queued_bytes; /* their bytes (also in buffered) */
  opengen *gens;
  unsigned ngens;
  /* A BATCH frame being read straight into its generation's buffer
   * (invariant 9 of ingest.c): its records go to stage->buf.data +
   * stage->buf.len; stage_have of stage_len bytes are there (and counted
   * in buffered). stage == NULL: not staging. */
  opengen *stage;
  size_t stage_have, stage_len;
  /* Identity from HELLO; owned strings, NUL-terminated. */
  uint8_t session[16];
  char session_hex[33];
  uint8_t key_hash[STORE_KEY_HASH_SIZE]; /* SHA-256 of the HELLO's key */
  int key_bound; /* a generation was submitted with it (store_gen.key_bound) */
  uint32_t version;
  char *service, *host, *agent_version, *tags_json;
  uint64_t pid, process_start_ns;
  /* The identity part of every GEN_START of this session, encoded once at
   * HELLO (gtp_put_gen_start_ident): each generation's GEN_START copies it
   * instead of measuring and encoding the strings again. Owned. */
  uint8_t *gs_ident;
  size_t gs_ident_len;
} conn;

typedef struct counters {
  /* Written by the loop thread (relaxed atomics), read by HTTP threads. */
  uint64_t connections, connections_total, refused_total;
  uint64_t handshakes_total, replaced_total;
  uint64_t frames, bytes;
  uint64_t committed, rejected, duplicate, store_errors;
  uint64_t ledger_dropped, ledger_evicted, ledger_rejected;
  uint64_t rejected_events;
  uint64_t buffered, reads_paused, paused_now;
  uint64_t protocol_errors;
  uint64_t limit_hits[LIM_COUNT_];
  uint64_t disk_full, disk_full_total;
  uint64_t heartbeats_sent;
  uint64_t staged_frames;
  /* budget.c: what buffered is made of, and the limits biting. */
  uint64_t budget_frames, budget_open, budget_queued, budget_ident;
  uint64_t budget_replies;
  uint64_t budget_tls; /* tls_conn.c invariant 3 */
  uint64_t global_paused;
  uint64_t shed_conns, shed_bytes;
  uint64_t refused_per_ip, hello_toobig;
  uint64_t trust[TR_COUNT_]; /* session_auth.c refusals */
  uint64_t oom; /* allocations that failed on the ingest path (nomem) */
} counters;

struct ingest {
  /* Written once before start. */
  uv_loop_t *loop;
  ingest_config cfg;
  char *token;
  size_t token_len;
  storage *store;

  /* Loop thread only. */
  uv_tcp_t listener;
  int listening;
  uv_timer_t sweep;
  uv_timer_t retry_timer;
  uv_poll_t done_poll; /* donelist_fd(&done) readable: completions */
  loopcoal coal; /* wake-up coalescing (loopcoal.c) */
  conn *conns;
  uint64_t nconns;
  uint64_t next_id;
  uint64_t buffered;     /* invariant 5; mirrored into ctr.buffered */
  uint64_t inflight;     /* generations submitted and not completed */
  uint64_t queued_bytes; /* bytes at the store or waiting for disk space */
  uint64_t frame_bytes;  /* partial frames held by decoders (budget.c) */
  uint64_t open_bytes;   /* open generations' buffers (budget.c) */
  uint64_t ident_bytes;  /* connections' identities from HELLO (budget.c) */
  uint64_t reply_bytes;  /* frames queued to agents, not yet written */
  int budget_checks;     /* GENTRACED_BUDGET_CHECK=1: verify every pass */
  int queue_replies; /* GENTRACED_TEST_QUEUE_REPLIES=1: every reply takes the
                        queued path, as behind a full socket (tests/alloc) */
  uint64_t shed_log_ms, shed_quiet; /* shed log damping (budget.c) */
  struct iplimit *iplim;            /* connections per address */
  struct tls_server *tls; /* agent port over TLS (tls_conn.c); or NULL */
  uint64_t tls_bytes;     /* TLS sessions' buffers (budget_used) */
  uint64_t iplim_log_ms, iplim_quiet;
  int global_paused;
  int disk_full;
  pending *probe; /* the generation testing whether the disk has room */
  uint64_t lookups; /* HELLO lookups on the thread pool (hello_lookup.h) */
  uint64_t last_probe_ms;
  /* Disk-full log damping: while small generations still fit in the last
   * free pages, ingest pauses and resumes every second; one error line per
   * DISKFULL_LOG_MS (with the pauses since) instead of two lines a second. */
  uint64_t full_log_ms; /* when the last "storage full" line was written */
  uint64_t full_quiet;  /* pauses since then that were not logged */
  /* Refused agent tokens: one line per TOKEN_LOG_MS at most (a client
   * guessing tokens must not flood the log), with the refusals since. */
  uint64_t token_log_ms;
  uint64_t token_quiet;
  int full_logged;      /* the current pause was logged (so is its end) */
  char host[256];
  pending *retry_head, **retry_tail;
  uint64_t retry_n;
  /* Completed pending records kept for the next generations, newest first
   * (reasm.c: the one reused is the one still in cache), at most
   * PENDING_FREE_MAX. */
  pending *pd_free;
  unsigned pd_nfree;
  int stopping;
  uint64_t drain_deadline_ms;
  int drain_gave_up;
  void (*stop_cb)(void *);
  void *stop_arg;
  int stop_called;
  int handles_open;
  /* A connection accepted only to be refused, when even its struct conn
   * could not be allocated (ingest.c, refuse_nomem): busy until closed. */
  uv_tcp_t nomem_tcp;
  int nomem_busy;    /* nomem_tcp is in use (closing) */
  int nomem_waiting; /* a connection waits in libuv for nomem_tcp */
  /* The frame loop's read callbacks (ingest_read.c), set by ingest_new, so
   * that ingest_conn_close can keep a closing connection read without
   * ingest_conn.c calling up into the frame loop. */
  uv_alloc_cb read_alloc;
  uv_read_cb read_cb;
  /* The same for a HELLO whose lookup came back (ingest_hello.c): reading
   * starts again by the limits, without ingest_hello.c calling up into
   * the frame loop that calls it. */
  void (*update_reading)(struct conn *c);
  void (*update_pause)(struct ingest *ing);
  uint8_t *rbuf;
  int rbuf_busy;
  /* Generation buffers (genpool.c): budget_used() + pool.bytes <=
   * max_buffer (invariant 8). Loop thread, but for its own filler. */
  genpool pool;

  /* Completions from the store thread (donelist.c: one wake-up per
   * batch). */
  donelist done;

  /* Protected by sess_lock: live sessions, read by HTTP threads. */
  pthread_mutex_t sess_lock;
  conn **sess;

  counters ctr;
  /* Loop thread writes, HTTP threads read (acklat.h). */
  acklat ack_lat;    /* GEN_END read -> ACK written */
  acklat commit_lat; /* GEN_END read -> the store's COMMIT returned */
};

#define CTR_ADD(ing, f, n)                                                     \
  __atomic_fetch_add(&(ing)->ctr.f, (n), __ATOMIC_RELAXED)
#define CTR_SET(ing, f, v)                                                     \
  __atomic_store_n(&(ing)->ctr.f, (v), __ATOMIC_RELAXED)
#define CTR_GET(ing, f) __atomic_load_n(&(ing)->ctr.f, __ATOMIC_RELAXED)

/* Shared between ingest.c, reasm.c and ingest_metrics.c. Thread: loop only.
 * Nothing on the ingest path dies of out-of-memory (docs/ARCHITECTURE.md,
 * "When memory runs out"): an allocation that fails ends the connection
 * that needed it through ingest_conn_nomem, and its agent resends. */
void ingest_conn_close(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason);
void ingest_send_error(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason);
/* tls_conn.c's ends of a TLS connection, handed to it as tls_conn_ops. */
void ingest_conn_input(conn *c, const uint8_t *p, size_t n);
void ingest_conn_write_raw(conn *c, const void *p, size_t n);

/* ingest_conn.c: a connection's primitives (below every other file of the
 * ingest; calls none of them). ingest_conn_dequeue stops counting a
 * generation that left the store queue; ingest_conn_account_decoder
 * re-reads the decoder's partial frame into the accounts; ingest_conn_send
 * queues whole frames (copied); ingest_conn_unref drops a reference
 * (invariant 4) and frees c at the last; ingest_conn_closed is the
 * uv_close callback of a connection's handle; ingest_drain_check ends a
 * stop once everything submitted was ACKed. */
void ingest_conn_dequeue(conn *c, const pending *pd);
void ingest_conn_account_decoder(conn *c);
conn *ingest_sess_find(ingest *ing, const uint8_t s[16]);
void ingest_sess_insert(conn *c);
void ingest_conn_send(conn *c, const gtp_wbuf *b);
void ingest_send_ack(conn *c, uint64_t gen);
/* An allocation for c failed (what: the thing it was for, for the log and
 * the agent): counted (gentrace_out_of_memory_total) and c closed with
 * ERROR(ENOMEM) without a generation, so the agent reconnects and resends
 * everything not ACKed (PROTOCOL.md 11). Nothing of another connection, and
 * nothing already submitted to the store, is touched. */
void ingest_conn_nomem(conn *c, const char *what);
/* Frees c's identity from HELLO (any part of it may be NULL) and resets
 * it to none. */
void ingest_conn_free_identity(conn *c);
/* Refuses generation gen of c whole: counts it and its events as rejected
 * (the session's ledger too), logs it and sends ERROR (code, gen, why) if
 * c is still open. At GEN_END (reasm.c) or when the store found an invalid
 * event (ingest_commit.c). */
void ingest_refuse_gen(conn *c, uint64_t gen, uint64_t events, int code,
                       const char *why);
void ingest_conn_unref(conn *c);
void ingest_conn_closed(uv_handle_t *h);
void ingest_drain_check(ingest *ing);
/* ingest_conn.c: the open generations of c. ingest_conn_free_gen frees g
 * (unlinked by the caller): its bytes stop counting and its buffer goes
 * back to the pool. ingest_conn_drop_gens forgets a staged frame and frees
 * every open generation (invariants 2 and 9). */
void ingest_conn_free_gen(conn *c, opengen *g);
void ingest_conn_drop_gens(conn *c);

/* ingest_hello.c: the first frame of a connection; 0, or < 0 once the
 * connection was closed. */
int ingest_hello(conn *c, const gtp_frame *f);

/* ingest_read.c: the frame loop. ingest_read_alloc and ingest_read_cb are
 * the libuv read callbacks (ing->read_alloc, ing->read_cb);
 * ingest_conn_update_reading starts or stops reading on c and
 * ingest_update_pause the whole daemon, by the limits (invariant 5). */
void ingest_read_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
void ingest_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
void ingest_conn_update_reading(conn *c);
void ingest_update_pause(ingest *ing);

/* ingest_commit.c: completions from the store. ingest_commit_poll is the
 * callback (done_poll) that applies them; ingest_retry_pop takes the oldest
 * generation parked for a full disk (NULL: none); ingest_done_pending is
 * the pending a node of ing->done belongs to. */
void ingest_commit_poll(uv_poll_t *p, int status, int events);
pending *ingest_retry_pop(ingest *ing);
pending *ingest_done_pending(donelist_node *n);

/* reasm.c: a generation's pending record with its store_gen: new (zeroed,
 * g pointing at its sg, sg's cookie at it; NULL when out of memory), and
 * freed with its payload (which the store must be done with) once nothing
 * refers to it any more; ingest_pending_fini frees the kept ones at the
 * ingest's end. */
pending *ingest_pending_new(ingest *ing);
void ingest_pending_free(ingest *ing, pending *pd);
void ingest_pending_fini(ingest *ing);

/* reasm.c: generation reassembly and validation (PROTOCOL.md section 6).
 * reasm_batch/reasm_gen_end return 0, or < 0 once the connection was
 * closed (invariant 6 of ingest.c). */
int reasm_batch(conn *c, const gtp_frame *f);
int reasm_gen_end(conn *c, const gtp_frame *f);

/* reasm.c: reading a large BATCH frame straight into its generation's
 * buffer (invariant 9 of ingest.c). reasm_stage_begin looks at the unread
 * input [p, p+n) at a frame boundary: if it starts a BATCH frame of an open
 * generation that does not lie whole in it, it copies what is there into
 * place, sets c->stage and returns 1 (all n bytes used); else 0 and
 * nothing changed. reasm_stage_read takes nread bytes the kernel wrote in
 * place and, once the frame is whole, checks and appends it; 0, or < 0
 * once the connection was closed. ingest_conn_drop_gens forgets a staged
 * frame (before it frees the generations). */
int reasm_stage_begin(conn *c, const uint8_t *p, size_t n);
int reasm_stage_read(conn *c, size_t nread);

#endif
