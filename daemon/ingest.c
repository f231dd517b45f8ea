/* ingest.c: the agent side of gentraced (libuv).
 *
 * Owns: the listening socket, every agent connection (struct conn), the
 * generations being reassembled on them (struct opengen), the list of
 * completions coming back from the store thread, the list of generations to
 * resubmit after a disk-full stop, and the counters behind /metrics.
 *
 * Connection states (conn.state) and who moves them:
 *
 *   HANDSHAKE --HELLO ok (on_hello)--> ACTIVE
 *   HANDSHAKE/ACTIVE --error, timeout, GOODBYE, EOF, replaced, shutdown
 *       (conn_close)--> CLOSING --uv_close done (on_closed)--> freed when
 *       refs drops to 0
 *   ACTIVE --ingest_stop (drain)--> DRAINING --all committed-->
 *       GOODBYE + conn_close
 *
 * Invariants:
 *  1. Only the loop thread MUST touch conns, opengens and the retry list;
 *     the store thread only appends to `done_list` under `done_lock` and
 *     calls uv_async_send, otherwise connection state races with commits.
 *  2. A generation MUST reach the store only whole and validated (manifest
 *     and gtp_gen_parse); an opengen dies with its connection, otherwise a
 *     dropped connection could leave half a generation stored.
 *  3. ACK(gen) MUST be sent only from the completion of that generation's
 *     commit (result 0 or 1), otherwise an agent could drop a generation
 *     that a crash then loses.
 *  4. A conn MUST stay allocated while a store_gen points at it (cookie):
 *     every submitted generation holds a reference (refs) and the conn is
 *     freed only when refs reaches 0 after its handle closed, otherwise a
 *     completion would write to freed memory.
 *  5. Every byte the daemon holds for agents (partial frames, open
 *     generations, generations queued at the store or waiting for disk
 *     space) MUST be counted in conn.buffered and ing.buffered; reading
 *     stops while a count is over its limit and resumes below 3/4 of it
 *     (hysteresis), otherwise memory grows with the peers' send rate.
 *  6. Once a read callback returns with a conn closed, nothing more of its
 *     input is processed: conn_handle_frame returns < 0 after conn_close.
 *  7. Reads use one shared 256 KiB buffer (the decoder copies only partial
 *     frames), so an idle connection holds no read buffer (S1: 10,000 idle
 *     agents in 256 MiB).
 */
#include "config.h"

#include "ingest.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "gtp_error.h"
#include "log.h"
#include "varint.h"

#define READ_BUF_SIZE (256u << 10)
#define READ_MIN (16u << 10)
#define OPEN_GENS_MAX 64           /* generations open at once per conn */
#define WRITE_QUEUE_MAX (1u << 20) /* unread replies before we give up */
#define CLOSE_GRACE_MS 2000        /* time for a last frame to flush */
#define SESS_BUCKETS 16384         /* power of two */
#define DISKFULL_PROBE_MS 1000

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
  LIM_COUNT_
};
static const char *const limit_names[LIM_COUNT_] = {
    "max-connections",   "max-conn-buffer",
    "max-buffer",        "max-frame",
    "max-gen-size",      "open-generations",
    "handshake-timeout", "idle-timeout",
    "write-queue",       "token"};

/* One generation being reassembled: GEN_START (synthesized from HELLO when
 * the first BATCH arrives) then body records in arrival order. */
typedef struct opengen {
  struct opengen *next;
  uint64_t gen;
  int rejected; /* 1: refused already; swallow its frames until GEN_END */
  gtp_wbuf buf;
  size_t body_off;
} opengen;

/* One generation at the store: the store_gen's cookie. Linked into the
 * completion list by the store thread without allocating. */
typedef struct pending {
  struct pending *next;
  struct conn *c;
  store_gen *g;
} pending;

typedef struct conn {
  /* Loop thread only. */
  uv_tcp_t tcp;
  struct ingest *ing;
  struct conn *prev, *next; /* ing->conns */
  struct conn *sess_next;   /* session hash chain; guarded by sess_lock */
  enum conn_state state;
  int refs;        /* 1 while the handle is open + 1 per store_gen (inv. 4) */
  int reading;     /* uv_read_start active */
  int self_paused; /* over max-conn-buffer */
  int in_session_map;
  uint64_t id;
  uint64_t created_ms, last_rx_ms, last_tx_ms, closing_ms;
  char peer[64];
  gtp_frame_decoder dec;
  size_t dec_buffered;  /* last seen gtp_frame_decoder_buffered */
  size_t last_gen_size; /* size hint for the next opengen buffer */
  uint64_t buffered;    /* invariant 5 */
  uint64_t inflight;    /* generations at the store */
  opengen *gens;
  unsigned ngens;
  /* Identity from HELLO; owned strings, NUL-terminated. */
  uint8_t session[16];
  char session_hex[33];
  uint32_t version;
  char *service, *host, *agent_version, *tags_json;
  uint64_t pid, process_start_ns;
  uint32_t ntags;
  char **tag_keys, **tag_values;
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
} counters;

struct ingest {
  /* Written once before start. */
  uv_loop_t *loop;
  ingest_config cfg;
  char *token;
  size_t token_len;
  store *store;

  /* Loop thread only. */
  uv_tcp_t listener;
  int listening;
  uv_timer_t sweep;
  uv_timer_t retry_timer;
  uv_async_t async;
  conn *conns;
  uint64_t nconns;
  uint64_t next_id;
  uint64_t buffered; /* invariant 5; mirrored into ctr.buffered */
  uint64_t inflight; /* generations submitted and not completed */
  int global_paused;
  int disk_full;
  pending *probe; /* the generation testing whether the disk has room */
  uint64_t last_probe_ms;
  char host[256];
  pending *retry_head, **retry_tail;
  uint64_t retry_n;
  int stopping;
  uint64_t drain_deadline_ms;
  int drain_gave_up;
  void (*stop_cb)(void *);
  void *stop_arg;
  int stop_called;
  int handles_open;
  uint8_t *rbuf;
  int rbuf_busy;

  /* Protected by done_lock: completions from the store thread. */
  pthread_mutex_t done_lock;
  pending *done_head, **done_tail;

  /* Protected by sess_lock: live sessions, read by HTTP threads. */
  pthread_mutex_t sess_lock;
  conn **sess;

  counters ctr;
};

#define CTR_ADD(ing, f, n)                                                     \
  __atomic_fetch_add(&(ing)->ctr.f, (n), __ATOMIC_RELAXED)
#define CTR_SET(ing, f, v)                                                     \
  __atomic_store_n(&(ing)->ctr.f, (v), __ATOMIC_RELAXED)
#define CTR_GET(ing, f) __atomic_load_n(&(ing)->ctr.f, __ATOMIC_RELAXED)

static void conn_close(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason);
static void conn_update_reading(conn *c);
static void ingest_update_pause(ingest *ing);
static void drain_check(ingest *ing);
static void on_retry(uv_timer_t *t);

/* ------------------------------------------------------------- utilities */

void ingest_config_init(ingest_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = "127.0.0.1";
  cfg->port = 7170;
  cfg->max_connections = 16384;
  cfg->max_conn_buffer = 64ull << 20;
  cfg->max_buffer = 512ull << 20;
  cfg->max_frame = GTP_FRAME_MAX;
  cfg->max_gen_size = 64ull << 20;
  cfg->handshake_timeout_ms = 10000;
  cfg->idle_timeout_ms = 60000;
}

static int set_cause(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int set_cause(char **cause, const char *fmt, ...) {
  if (cause != NULL) {
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
      *cause = NULL;
    va_end(ap);
  }
  return 0;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) {
    /* STYLE.md: the daemon may die loudly on out-of-memory. */
    fprintf(stderr, "gentraced: out of memory at %s:%d\n", __FILE__, __LINE__);
    abort();
  }
  return p;
}

static char *xstrndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) {
    fprintf(stderr, "gentraced: out of memory at %s:%d\n", __FILE__, __LINE__);
    abort();
  }
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* Constant-time comparison: the time taken depends only on the lengths, so
 * a peer cannot find the token byte by byte by timing refusals. */
static int token_equal(const char *want, size_t wlen, const uint8_t *got,
                       size_t glen) {
  unsigned diff = (unsigned)(wlen != glen);
  for (size_t i = 0; i < wlen; i++)
    diff |= (unsigned)(uint8_t)want[i] ^ (unsigned)(i < glen ? got[i] : 0);
  return diff == 0;
}

/* Appends s as a JSON string (quotes included) to b. Bytes >= 0x80 pass
 * through; control characters are escaped. */
static void json_str(gtp_wbuf *b, const char *s) {
  gtp_wbuf_put(b, "\"", 1);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    char esc[8];
    if (ch == '"' || ch == '\\') {
      esc[0] = '\\';
      esc[1] = (char)ch;
      gtp_wbuf_put(b, esc, 2);
    } else if (ch < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", ch);
      gtp_wbuf_put(b, esc, 6);
    } else {
      gtp_wbuf_put(b, s, 1);
    }
  }
  gtp_wbuf_put(b, "\"", 1);
}

/* ------------------------------------------------------- buffer accounting */

static void conn_account(conn *c, int64_t delta) {
  ingest *ing = c->ing;
  c->buffered = (uint64_t)((int64_t)c->buffered + delta);
  ing->buffered = (uint64_t)((int64_t)ing->buffered + delta);
  CTR_SET(ing, buffered, ing->buffered);
}

/* Re-reads the decoder's partial-frame size into the accounts. */
static void conn_account_decoder(conn *c) {
  size_t now = gtp_frame_decoder_buffered(&c->dec);
  if (now != c->dec_buffered) {
    conn_account(c, (int64_t)now - (int64_t)c->dec_buffered);
    c->dec_buffered = now;
  }
}

/* ---------------------------------------------------------------- sessions */

static unsigned sess_hash(const uint8_t s[16]) {
  /* Session ids are random (DESIGN.md), so their first bytes hash well;
   * a hostile agent choosing colliding ids only slows its own bucket. */
  uint32_t h = gtp_get_u32le(s) ^ gtp_get_u32le(s + 12);
  return h & (SESS_BUCKETS - 1);
}

/* Returns the live conn of a session. Loop thread (or sess_lock held). */
static conn *sess_find(ingest *ing, const uint8_t s[16]) {
  for (conn *c = ing->sess[sess_hash(s)]; c != NULL; c = c->sess_next)
    if (memcmp(c->session, s, 16) == 0)
      return c;
  return NULL;
}

static void sess_insert(conn *c) {
  ingest *ing = c->ing;
  pthread_mutex_lock(&ing->sess_lock);
  conn **head = &ing->sess[sess_hash(c->session)];
  c->sess_next = *head;
  *head = c;
  c->in_session_map = 1;
  pthread_mutex_unlock(&ing->sess_lock);
}

static void sess_remove(conn *c) {
  ingest *ing = c->ing;
  if (!c->in_session_map)
    return;
  pthread_mutex_lock(&ing->sess_lock);
  for (conn **pp = &ing->sess[sess_hash(c->session)]; *pp != NULL;
       pp = &(*pp)->sess_next) {
    if (*pp == c) {
      *pp = c->sess_next;
      break;
    }
  }
  c->in_session_map = 0;
  pthread_mutex_unlock(&ing->sess_lock);
}

/* ------------------------------------------------------------------ writes */

typedef struct wreq {
  uv_write_t req;
  conn *c;
  size_t len;
  uint8_t data[];
} wreq;

static void on_write(uv_write_t *req, int status) {
  wreq *w = (wreq *)req;
  conn *c = w->c;
  free(w);
  if (status < 0 && status != UV_ECANCELED && c->state != CONN_CLOSING)
    conn_close(c, 0, 0, 0, NULL);
}

/* Queues the frames in b (whole frames) on c. The bytes are copied. */
static void conn_send(conn *c, const gtp_wbuf *b) {
  if (b->err || b->len == 0 || c->state == CONN_CLOSING)
    return;
  if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) >
      WRITE_QUEUE_MAX) {
    /* A peer that does not read our replies: it cannot see ACKs either. */
    CTR_ADD(c->ing, limit_hits[LIM_WRITE_QUEUE], 1);
    log_warn("agent not reading replies", "conn=%" PRIu64 " peer=%s", c->id,
             c->peer);
    conn_close(c, 0, 0, 0, NULL);
    return;
  }
  wreq *w = malloc(sizeof *w + b->len);
  if (w == NULL) {
    fprintf(stderr, "gentraced: out of memory at %s:%d\n", __FILE__, __LINE__);
    abort();
  }
  w->c = c;
  w->len = b->len;
  memcpy(w->data, b->data, b->len);
  uv_buf_t ub = uv_buf_init((char *)w->data, (unsigned)b->len);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
  if (rc < 0) {
    free(w);
    conn_close(c, 0, 0, 0, NULL);
    return;
  }
  c->last_tx_ms = uv_now(c->ing->loop);
}

static void send_ack(conn *c, uint64_t gen) {
  uint8_t mem[32];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_ack_encode(&b, gen);
  conn_send(c, &b);
}

static void send_error(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  char r[GTP_REASON_MAX];
  snprintf(r, sizeof r, "%s", reason != NULL ? reason : gtp_strerror(code));
  gtp_frame_error_encode(&b, code, has_gen, gen, r);
  conn_send(c, &b);
}

static void send_goodbye(conn *c, int code, const char *reason) {
  uint8_t mem[GTP_REASON_MAX + 64];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_goodbye_encode(&b, code, reason);
  conn_send(c, &b);
}

/* --------------------------------------------------------------- lifecycle */

static void opengen_free(conn *c, opengen *g) {
  conn_account(c, -(int64_t)g->buf.len);
  gtp_wbuf_fini(&g->buf);
  free(g);
}

static void conn_free_identity(conn *c) {
  free(c->service);
  free(c->host);
  free(c->agent_version);
  free(c->tags_json);
  for (uint32_t i = 0; i < c->ntags; i++) {
    free(c->tag_keys[i]);
    free(c->tag_values[i]);
  }
  free(c->tag_keys);
  free(c->tag_values);
}

static void conn_unref(conn *c) {
  if (--c->refs > 0)
    return;
  conn_free_identity(c);
  free(c);
}

static void on_closed(uv_handle_t *h) {
  conn *c = h->data;
  ingest *ing = c->ing;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    ing->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  ing->nconns--;
  CTR_SET(ing, connections, ing->nconns);
  ing->handles_open--;
  conn_unref(c);
  drain_check(ing);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  conn *c = req->data;
  free(req);
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* Ends a connection: drops what it was assembling (invariant 2), sends
 * ERROR (code < 0) or GOODBYE (code 0 with a reason) first, then closes
 * once the write queue flushed or CLOSE_GRACE_MS passed (sweep). */
static void conn_close(conn *c, int code, int has_gen, uint64_t gen,
                       const char *reason) {
  if (c->state == CONN_CLOSING)
    return;
  ingest *ing = c->ing;
  if (code < 0 && code != GTP_E_SHUTDOWN) {
    char q[GTP_REASON_MAX + 8];
    log_info("agent connection closed",
             "conn=%" PRIu64 " peer=%s session=%s error=%s reason=%s", c->id,
             c->peer, c->session_hex[0] ? c->session_hex : "none",
             gtp_errname(code),
             log_quote(q, sizeof q, reason ? reason : gtp_strerror(code)));
  }
  if (code < 0 && code != GTP_E_SHUTDOWN)
    send_error(c, code, has_gen, gen, reason);
  else if (reason != NULL)
    send_goodbye(c, code, reason);
  c->state = CONN_CLOSING;
  c->closing_ms = uv_now(ing->loop);
  sess_remove(c);
  while (c->gens != NULL) {
    opengen *g = c->gens;
    c->gens = g->next;
    opengen_free(c, g);
  }
  c->ngens = 0;
  gtp_frame_decoder_fini(&c->dec);
  conn_account_decoder(c);
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
  if (c->self_paused) {
    c->self_paused = 0;
    CTR_ADD(ing, paused_now, (uint64_t)-1);
  }
  uv_shutdown_t *req = malloc(sizeof *req);
  if (req != NULL) {
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) == 0)
      return;
    free(req);
  }
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* ---------------------------------------------------------------- handshake */

static int on_hello(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  gtp_hello h;
  int rc = gtp_frame_hello_decode(f->payload, f->len, &h);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    conn_close(c, rc, 0, 0, "bad HELLO");
    return -1;
  }
  uint32_t lo = h.min_version > GTP_PROTO_VERSION_MIN ? h.min_version
                                                      : GTP_PROTO_VERSION_MIN;
  uint32_t hi =
      h.max_version < GTP_PROTO_VERSION ? h.max_version : GTP_PROTO_VERSION;
  if (lo > hi) {
    char r[128];
    snprintf(r, sizeof r, "daemon speaks versions %u..%u, agent %u..%u",
             GTP_PROTO_VERSION_MIN, GTP_PROTO_VERSION, h.min_version,
             h.max_version);
    CTR_ADD(ing, protocol_errors, 1);
    log_warn("agent refused", "conn=%" PRIu64 " peer=%s error=VERSION", c->id,
             c->peer);
    conn_close(c, GTP_E_VERSION, 0, 0, r);
    return -1;
  }
  if (ing->token != NULL &&
      !token_equal(ing->token, ing->token_len, (const uint8_t *)h.token.ptr,
                   h.token.len)) {
    CTR_ADD(ing, limit_hits[LIM_TOKEN], 1);
    log_warn("agent refused", "conn=%" PRIu64 " peer=%s error=TOKEN", c->id,
             c->peer);
    conn_close(c, GTP_E_TOKEN, 0, 0, "wrong or missing token");
    return -1;
  }

  memcpy(c->session, h.session, 16);
  gtp_session_hex(c->session, c->session_hex);
  c->version = hi;
  c->service = xstrndup(h.service.ptr, h.service.len);
  c->host = xstrndup(h.host.ptr, h.host.len);
  c->agent_version = xstrndup(h.agent_version.ptr, h.agent_version.len);
  c->pid = h.pid;
  c->process_start_ns = h.process_start_ns;
  c->ntags = h.ntags;
  if (h.ntags > 0) {
    c->tag_keys = xcalloc(h.ntags, sizeof(char *));
    c->tag_values = xcalloc(h.ntags, sizeof(char *));
  }
  gtp_wbuf tj;
  gtp_wbuf_init(&tj, 1u << 20);
  gtp_wbuf_put(&tj, "{", 1);
  for (uint32_t i = 0; i < h.ntags; i++) {
    c->tag_keys[i] = xstrndup(h.tags[i].key.ptr, h.tags[i].key.len);
    c->tag_values[i] = xstrndup(h.tags[i].value.ptr, h.tags[i].value.len);
    if (i > 0)
      gtp_wbuf_put(&tj, ",", 1);
    json_str(&tj, c->tag_keys[i]);
    gtp_wbuf_put(&tj, ":", 1);
    json_str(&tj, c->tag_values[i]);
  }
  gtp_wbuf_put(&tj, "}", 1);
  if (tj.err) {
    fprintf(stderr, "gentraced: out of memory at %s:%d\n", __FILE__, __LINE__);
    abort();
  }
  c->tags_json = xstrndup((const char *)tj.data, tj.len);
  gtp_wbuf_fini(&tj);

  /* A session reconnecting while its old connection still looks alive
   * (half-open TCP after a network change) replaces it. */
  conn *old = sess_find(ing, c->session);
  if (old != NULL) {
    CTR_ADD(ing, replaced_total, 1);
    log_info("session replaced",
             "session=%s old_conn=%" PRIu64 " new_conn=%" PRIu64,
             c->session_hex, old->id, c->id);
    conn_close(old, GTP_E_STATE, 0, 0,
               "replaced by a newer connection of this session");
  }
  sess_insert(c);
  c->state = CONN_ACTIVE;
  CTR_ADD(ing, handshakes_total, 1);

  gtp_welcome w = {0};
  w.version = hi;
  w.has_last = store_last_gen(ing->store, c->session, &w.last_gen) == 1;
  w.idle_timeout_ms = ing->cfg.idle_timeout_ms;
  w.max_gen_bytes = ing->cfg.max_gen_size;
  uint8_t mem[128];
  gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
  gtp_frame_welcome_encode(&b, &w);
  conn_send(c, &b);
  char qs[128], qh[128];
  log_info("agent connected",
           "conn=%" PRIu64 " peer=%s session=%s service=%s host=%s pid=%" PRIu64
           " version=%u last_gen=%s%" PRIu64,
           c->id, c->peer, c->session_hex, log_quote(qs, sizeof qs, c->service),
           log_quote(qh, sizeof qh, c->host), c->pid, hi,
           w.has_last ? "" : "none/", w.last_gen);
  return c->state == CONN_CLOSING ? -1 : 0;
}

/* -------------------------------------------------------------- reassembly */

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
  conn_account(c, -(int64_t)g->buf.len);
  gtp_wbuf_fini(&g->buf);
  gtp_wbuf_init(&g->buf, 1);
  g->rejected = 1;
  CTR_ADD(ing, rejected, 1);
  log_warn("generation rejected",
           "conn=%" PRIu64 " session=%s gen=%" PRIu64 " error=%s", c->id,
           c->session_hex, g->gen, gtp_errname(code));
  send_error(c, code, 1, g->gen, reason);
}

static void gen_start_of(const conn *c, uint64_t gen, gtp_gen_start *s) {
  memset(s, 0, sizeof *s);
  memcpy(s->session, c->session, 16);
  s->gen = gen;
  s->service = (gtp_str){c->service, strlen(c->service)};
  s->host = (gtp_str){c->host, strlen(c->host)};
  s->agent_version = (gtp_str){c->agent_version, strlen(c->agent_version)};
  s->pid = c->pid;
  s->process_start_ns = c->process_start_ns;
  s->ntags = c->ntags;
  for (uint32_t i = 0; i < c->ntags; i++) {
    s->tags[i].key = (gtp_str){c->tag_keys[i], strlen(c->tag_keys[i])};
    s->tags[i].value = (gtp_str){c->tag_values[i], strlen(c->tag_values[i])};
  }
}

/* Checks that a BATCH carries whole body records only. */
static int body_records_check(const uint8_t *p, size_t len) {
  size_t off = 0;
  if (len == 0)
    return GTP_E_CORRUPT;
  while (off < len) {
    gtp_record rec;
    int rc = gtp_record_parse(p + off, len - off, &rec);
    if (rc < 0)
      return rc;
    if (rec.type == GTP_REC_GEN_START || rec.type == GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    off += rec.size;
  }
  return 0;
}

static int on_batch(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  uint64_t gen;
  const uint8_t *recs;
  size_t rlen;
  int rc = gtp_frame_batch_decode(f->payload, f->len, &gen, &recs, &rlen);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    conn_close(c, rc, 0, 0, "bad BATCH frame");
    return -1;
  }
  opengen *g = gen_find(c, gen);
  if (g == NULL) {
    if (c->ngens >= OPEN_GENS_MAX) {
      CTR_ADD(ing, limit_hits[LIM_OPEN_GENS], 1);
      conn_close(c, GTP_E_LIMIT, 1, gen, "too many generations open at once");
      return -1;
    }
    g = xcalloc(1, sizeof *g);
    g->gen = gen;
    gtp_wbuf_init(&g->buf, (size_t)ing->cfg.max_gen_size + 4096);
    /* Reserve what this agent's previous generation needed, so the buffer
     * rarely reallocates (each realloc copies and faults in fresh pages);
     * an idle agent's hint is small, so memory follows real use. */
    if (c->last_gen_size > 0 && gtp_wbuf_grow(&g->buf, c->last_gen_size))
      g->buf.len = 0;
    g->next = c->gens;
    c->gens = g;
    c->ngens++;
    gtp_gen_start s;
    gen_start_of(c, gen, &s);
    rc = gtp_put_gen_start(&g->buf, &s);
    if (rc < 0) {
      gen_reject(c, g, rc, "cannot build GEN_START");
      return 0;
    }
    g->body_off = g->buf.len;
    conn_account(c, (int64_t)g->buf.len);
  }
  if (g->rejected)
    return 0;
  rc = body_records_check(recs, rlen);
  if (rc < 0) {
    gen_reject(c, g, rc, "BATCH holds a malformed record");
    return 0;
  }
  if (g->buf.len - g->body_off + rlen > ing->cfg.max_gen_size) {
    CTR_ADD(ing, limit_hits[LIM_GEN_SIZE], 1);
    gen_reject(c, g, GTP_E_TOOBIG, "generation exceeds the daemon's maximum");
    return 0;
  }
  gtp_wbuf_put(&g->buf, recs, rlen);
  if (g->buf.err) {
    gen_reject(c, g, g->buf.err, NULL);
    return 0;
  }
  conn_account(c, (int64_t)rlen);
  /* Open generations only drain through GEN_END, so pausing reads cannot
   * help: an agent holding more open than it may buffer is cut off. */
  uint64_t open = 0;
  for (opengen *o = c->gens; o != NULL; o = o->next)
    open += o->buf.len;
  if (open > ing->cfg.max_conn_buffer) {
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
    conn_close(c, GTP_E_LIMIT, 0, 0,
               "open generations exceed the per-connection buffer");
    return -1;
  }
  return 0;
}

static int on_gen_end(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  gtp_gen_end e;
  int rc = gtp_frame_gen_end_decode(f->payload, f->len, &e);
  if (rc < 0) {
    CTR_ADD(ing, protocol_errors, 1);
    conn_close(c, rc, 0, 0, "bad GEN_END frame");
    return -1;
  }
  opengen *g = gen_find(c, e.gen);
  if (g == NULL) {
    /* Every generation has a CLOCK record, so one without BATCH frames is
     * malformed; refuse it so the agent accounts for it. */
    CTR_ADD(ing, rejected, 1);
    store_note_rejected(ing->store, c->session, e.events);
    CTR_ADD(ing, rejected_events, e.events);
    send_error(c, GTP_E_MANIFEST, 1, e.gen,
               "GEN_END of a generation with "
               "no BATCH");
    return 0;
  }
  gen_unlink(c, g);
  if (g->rejected) {
    store_note_rejected(ing->store, c->session, e.events);
    CTR_ADD(ing, rejected_events, e.events);
    opengen_free(c, g);
    return 0;
  }
  gtp_gen_end got = e;
  const uint8_t *body = g->buf.data + g->body_off;
  size_t body_len = g->buf.len - g->body_off;
  rc = gtp_manifest_compute(body, body_len, &got);
  if (rc == 0)
    rc = gtp_manifest_check(&e, &got);
  size_t before = g->buf.len;
  if (rc == 0)
    rc = gtp_put_gen_end(&g->buf, &e);
  gtp_gen parsed;
  size_t consumed = 0;
  int parsed_ok = 0;
  if (rc == 0) {
    conn_account(c, (int64_t)(g->buf.len - before));
    rc = gtp_gen_parse(g->buf.data, g->buf.len, &parsed, &consumed);
    if (rc == 0) {
      parsed_ok = 1;
      if (consumed != g->buf.len)
        rc = GTP_E_CORRUPT;
    }
  }
  if (rc < 0) {
    if (parsed_ok)
      gtp_gen_fini(&parsed);
    CTR_ADD(ing, rejected, 1);
    CTR_ADD(ing, rejected_events, e.events);
    store_note_rejected(ing->store, c->session, e.events);
    log_warn("generation rejected",
             "conn=%" PRIu64 " session=%s gen=%" PRIu64 " error=%s", c->id,
             c->session_hex, e.gen, gtp_errname(rc));
    send_error(c, rc, 1, e.gen, "generation failed validation");
    opengen_free(c, g);
    return c->state == CONN_CLOSING ? -1 : 0;
  }

  store_gen *sg = xcalloc(1, sizeof *sg);
  memcpy(sg->session, c->session, 16);
  sg->service = xstrndup(c->service, strlen(c->service));
  sg->host = xstrndup(c->host, strlen(c->host));
  sg->agent_version = xstrndup(c->agent_version, strlen(c->agent_version));
  sg->tags_json = xstrndup(c->tags_json, strlen(c->tags_json));
  sg->pid = c->pid;
  sg->process_start_ns = c->process_start_ns;
  sg->gen = e.gen;
  uint64_t s_ns = parsed.clock.start_real_ns, e_ns = parsed.clock.end_real_ns;
  if (s_ns > INT64_MAX)
    s_ns = INT64_MAX;
  if (e_ns > INT64_MAX)
    e_ns = INT64_MAX;
  if (e_ns < s_ns)
    e_ns = s_ns;
  sg->start_ns = (int64_t)s_ns;
  sg->end_ns = (int64_t)e_ns;
  sg->end = e;
  gtp_gen_fini(&parsed);
  /* The payload moves to the store; it stays counted in the buffers until
   * the completion (invariant 5). */
  sg->payload = g->buf.data;
  sg->len = g->buf.len;
  c->last_gen_size = g->buf.len + g->buf.len / 8;
  if (c->last_gen_size > ing->cfg.max_gen_size)
    c->last_gen_size = (size_t)ing->cfg.max_gen_size; /* under buf.limit */
  pending *pd = xcalloc(1, sizeof *pd);
  pd->c = c;
  pd->g = sg;
  sg->cookie = pd;
  g->buf.data = NULL;
  free(g);
  c->refs++;
  c->inflight++;
  ing->inflight++;
  rc = store_submit(ing->store, sg);
  if (rc < 0) {
    /* Closing store: nothing will commit; the agent resends later. */
    c->refs--;
    c->inflight--;
    ing->inflight--;
    conn_account(c, -(int64_t)sg->len);
    store_gen_free(sg);
    free(pd);
    conn_close(c, GTP_E_SHUTDOWN, 0, 0, "daemon is shutting down");
    return -1;
  }
  if (c->buffered > ing->cfg.max_conn_buffer && !c->self_paused) {
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
  }
  return 0;
}

/* ------------------------------------------------------------------ frames */

static int conn_handle_frame(conn *c, const gtp_frame *f) {
  ingest *ing = c->ing;
  CTR_ADD(ing, frames, 1);
  if (c->state == CONN_HANDSHAKE) {
    if (f->type != GTP_FR_HELLO) {
      CTR_ADD(ing, protocol_errors, 1);
      conn_close(c, GTP_E_STATE, 0, 0, "first frame must be HELLO");
      return -1;
    }
    return on_hello(c, f);
  }
  switch (f->type) {
  case GTP_FR_BATCH:
    return on_batch(c, f);
  case GTP_FR_GEN_END:
    return on_gen_end(c, f);
  case GTP_FR_HEARTBEAT:
    return 0;
  case GTP_FR_GOODBYE:
    conn_close(c, 0, 0, 0, NULL);
    return -1;
  case GTP_FR_ERROR: {
    gtp_error_frame ef;
    char q[GTP_REASON_MAX + 8];
    if (gtp_frame_error_decode(f->payload, f->len, &ef) == 0) {
      char r[GTP_REASON_MAX + 1];
      snprintf(r, sizeof r, "%.*s", (int)ef.reason.len, ef.reason.ptr);
      log_warn("agent sent ERROR", "conn=%" PRIu64 " code=%s reason=%s", c->id,
               gtp_errname(ef.code), log_quote(q, sizeof q, r));
    }
    conn_close(c, 0, 0, 0, NULL);
    return -1;
  }
  case GTP_FR_HELLO:
  case GTP_FR_WELCOME:
  case GTP_FR_ACK:
    CTR_ADD(ing, protocol_errors, 1);
    conn_close(c, GTP_E_STATE, 0, 0, "frame not allowed after HELLO");
    return -1;
  default:
    CTR_ADD(ing, protocol_errors, 1);
    conn_close(c, GTP_E_UNKNOWN, 0, 0, "unknown frame type");
    return -1;
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  conn *c = h->data;
  ingest *ing = c->ing;
  /* One read is processed at a time on this loop, so one buffer serves
   * every connection (invariant 7). */
  if (ing->rbuf_busy) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  ing->rbuf_busy = 1;
  /* Near a limit, read only what still fits (at least READ_MIN), so the
   * overshoot past a limit stays small (invariant 5). */
  uint64_t size = READ_BUF_SIZE;
  uint64_t room_g = ing->cfg.max_buffer > ing->buffered
                        ? ing->cfg.max_buffer - ing->buffered
                        : 0;
  uint64_t room_c = ing->cfg.max_conn_buffer > c->buffered
                        ? ing->cfg.max_conn_buffer - c->buffered
                        : 0;
  if (room_g < size)
    size = room_g;
  if (room_c < size)
    size = room_c;
  if (size < READ_MIN)
    size = READ_MIN;
  *buf = uv_buf_init((char *)ing->rbuf, (unsigned)size);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  conn *c = s->data;
  ingest *ing = c->ing;
  if (buf->base == (char *)ing->rbuf)
    ing->rbuf_busy = 0;
  if (nread == 0 || nread == UV_ENOBUFS)
    return; /* EAGAIN, or no buffer this time: libuv reads again later */
  if (nread < 0) {
    if (nread != UV_EOF)
      log_info("agent connection error", "conn=%" PRIu64 " error=%s", c->id,
               uv_err_name((int)nread));
    if (c->gens != NULL)
      log_info("agent left mid-generation", "conn=%" PRIu64 " open=%u", c->id,
               c->ngens);
    conn_close(c, 0, 0, 0, NULL);
    return;
  }
  c->last_rx_ms = uv_now(ing->loop);
  CTR_ADD(ing, bytes, (uint64_t)nread);
  const uint8_t *p = (const uint8_t *)buf->base;
  size_t n = (size_t)nread;
  c->refs++; /* keep c across conn_close inside the loop */
  while (n > 0 && c->state != CONN_CLOSING) {
    gtp_frame f;
    size_t used = 0;
    int rc = gtp_frame_decoder_feed(&c->dec, p, n, &used, &f);
    conn_account_decoder(c);
    if (rc < 0) {
      CTR_ADD(ing, protocol_errors, 1);
      if (rc == GTP_E_TOOBIG)
        CTR_ADD(ing, limit_hits[LIM_FRAME], 1);
      log_warn("agent frame error", "conn=%" PRIu64 " peer=%s error=%s", c->id,
               c->peer, gtp_errname(rc));
      conn_close(c, rc, 0, 0,
                 rc == GTP_E_TOOBIG ? "frame larger than the daemon's maximum"
                                    : "bad frame");
      break;
    }
    p += used;
    n -= used;
    if (rc == 0)
      break;
    if (conn_handle_frame(c, &f) < 0)
      break; /* invariant 6 */
  }
  if (c->state != CONN_CLOSING) {
    conn_account_decoder(c);
    conn_update_reading(c);
    ingest_update_pause(ing);
  }
  conn_unref(c);
}

/* Starts or stops reading on c according to the limits (invariant 5). */
static void conn_update_reading(conn *c) {
  ingest *ing = c->ing;
  if (c->state == CONN_CLOSING)
    return;
  uint64_t lim = ing->cfg.max_conn_buffer;
  if (!c->self_paused && c->buffered > lim) {
    c->self_paused = 1;
    CTR_ADD(ing, reads_paused, 1);
    CTR_ADD(ing, paused_now, 1);
    CTR_ADD(ing, limit_hits[LIM_CONN_BUFFER], 1);
  } else if (c->self_paused && c->buffered <= lim / 4 * 3) {
    c->self_paused = 0;
    CTR_ADD(ing, paused_now, (uint64_t)-1);
  }
  int want = (c->state == CONN_HANDSHAKE || c->state == CONN_ACTIVE) &&
             !c->self_paused && !ing->global_paused;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
      c->reading = 1;
    /* Time spent paused by us is not the agent's idleness. */
    c->last_rx_ms = uv_now(ing->loop);
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
  }
}

/* Global pause: total buffered bytes over max-buffer, or the disk full. */
static void ingest_update_pause(ingest *ing) {
  int want;
  if (ing->disk_full)
    want = 1;
  else if (ing->global_paused)
    want = ing->buffered > ing->cfg.max_buffer / 4 * 3;
  else
    want = ing->buffered > ing->cfg.max_buffer;
  if (want == ing->global_paused)
    return;
  ing->global_paused = want;
  if (want) {
    CTR_ADD(ing, reads_paused, 1);
    if (!ing->disk_full)
      CTR_ADD(ing, limit_hits[LIM_BUFFER], 1);
    log_warn("ingest paused", "reason=%s buffered=%" PRIu64,
             ing->disk_full ? "disk-full" : "max-buffer", ing->buffered);
  } else {
    log_info("ingest resumed", "buffered=%" PRIu64, ing->buffered);
  }
  for (conn *c = ing->conns; c != NULL; c = c->next)
    conn_update_reading(c);
}

/* ------------------------------------------------------------- completions */

void ingest_store_done(void *ctx, store_gen *g) {
  ingest *ing = ctx;
  pending *pd = g->cookie;
  if (g->result == 0 && ing->cfg.on_commit != NULL)
    ing->cfg.on_commit(ing->cfg.on_commit_ctx, g->seq);
  pd->next = NULL;
  pthread_mutex_lock(&ing->done_lock);
  *ing->done_tail = pd;
  ing->done_tail = &pd->next;
  pthread_mutex_unlock(&ing->done_lock);
  uv_async_send(&ing->async);
}

static void retry_push(ingest *ing, pending *pd) {
  pd->next = NULL;
  *ing->retry_tail = pd;
  ing->retry_tail = &pd->next;
  ing->retry_n++;
}

static pending *retry_pop(ingest *ing) {
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
  if (store_submit(ing->store, pd->g) < 0) {
    /* The store is closing: the agent will resend after a restart. */
    ing->inflight--;
    conn *c = pd->c;
    c->inflight--;
    conn_account(c, -(int64_t)pd->g->len);
    store_gen_free(pd->g);
    free(pd);
    conn_unref(c);
  }
}

static void disk_full_enter(ingest *ing) {
  if (ing->disk_full)
    return;
  ing->disk_full = 1;
  ing->last_probe_ms = uv_now(ing->loop);
  CTR_SET(ing, disk_full, 1);
  CTR_ADD(ing, disk_full_total, 1);
  log_error("storage full, ingest paused", "queued=%" PRIu64, ing->retry_n);
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
  log_info("storage has room again, ingest resumes", "queued=%" PRIu64,
           ing->retry_n);
  pending *pd;
  while ((pd = retry_pop(ing)) != NULL)
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
  c->inflight--;
  conn_account(c, -(int64_t)g->len);
  if (g->result == 0 || g->result == 1) {
    if (g->result == 0) {
      CTR_ADD(ing, committed, 1);
      CTR_ADD(ing, ledger_dropped, g->end.dropped);
      CTR_ADD(ing, ledger_evicted, g->end.evicted);
      CTR_ADD(ing, ledger_rejected, g->end.rejected);
    } else {
      CTR_ADD(ing, duplicate, 1);
    }
    if (c->state == CONN_ACTIVE || c->state == CONN_DRAINING)
      send_ack(c, g->gen); /* invariant 3 */
  } else {
    /* Not stored and not the agent's fault: no ERROR (the agent would drop
     * the generation); close so it reconnects and resends. */
    CTR_ADD(ing, store_errors, 1);
    log_error("store failed a generation",
              "session=%s gen=%" PRIu64 " error=%s", c->session_hex, g->gen,
              gtp_errname(g->result));
    if (c->state == CONN_ACTIVE)
      conn_close(c, 0, 0, 0, "daemon storage error; reconnect and resend");
  }
  store_gen_free(g);
  free(pd);
  if (c->state != CONN_CLOSING)
    conn_update_reading(c);
  conn_unref(c);
}

static void on_async(uv_async_t *a) {
  ingest *ing = a->data;
  pthread_mutex_lock(&ing->done_lock);
  pending *list = ing->done_head;
  ing->done_head = NULL;
  ing->done_tail = &ing->done_head;
  pthread_mutex_unlock(&ing->done_lock);
  while (list != NULL) {
    pending *next = list->next;
    complete(ing, list);
    list = next;
  }
  ingest_update_pause(ing);
  drain_check(ing);
}

/* While the disk is full, probe with one generation now and then: the store
 * may have room again (retention, an operator freeing space). */
static void on_retry(uv_timer_t *t) {
  ingest *ing = t->data;
  if (!ing->disk_full || ing->probe != NULL || ing->retry_head == NULL)
    return;
  store_stats st;
  store_stats_get(ing->store, &st);
  uint64_t now = uv_now(ing->loop);
  if (st.disk_full && now - ing->last_probe_ms < DISKFULL_PROBE_MS)
    return;
  ing->last_probe_ms = now;
  pending *pd = retry_pop(ing);
  ing->probe = pd;
  resubmit(ing, pd);
}

/* ------------------------------------------------------------------- sweep */

static void on_sweep(uv_timer_t *t) {
  ingest *ing = t->data;
  uint64_t now = uv_now(ing->loop);
  uint64_t hb = ing->cfg.idle_timeout_ms / 3;
  conn *next;
  for (conn *c = ing->conns; c != NULL; c = next) {
    next = c->next;
    switch (c->state) {
    case CONN_HANDSHAKE:
      if (now - c->created_ms >= ing->cfg.handshake_timeout_ms) {
        CTR_ADD(ing, limit_hits[LIM_HANDSHAKE_TIMEOUT], 1);
        log_info("handshake timeout", "conn=%" PRIu64 " peer=%s", c->id,
                 c->peer);
        conn_close(c, GTP_E_TIMEOUT, 0, 0, "no HELLO in time");
      }
      break;
    case CONN_ACTIVE:
      if (!c->reading)
        c->last_rx_ms = now; /* paused by us: not the agent's idleness */
      if (now - c->last_rx_ms >= ing->cfg.idle_timeout_ms) {
        CTR_ADD(ing, limit_hits[LIM_IDLE_TIMEOUT], 1);
        log_info("idle timeout", "conn=%" PRIu64 " session=%s", c->id,
                 c->session_hex);
        conn_close(c, GTP_E_TIMEOUT, 0, 0, "idle timeout");
      } else if (hb > 0 && now - c->last_tx_ms >= hb) {
        uint8_t mem[8];
        gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
        gtp_frame_heartbeat_encode(&b);
        conn_send(c, &b);
        CTR_ADD(ing, heartbeats_sent, 1);
      }
      break;
    case CONN_DRAINING:
      break;
    case CONN_CLOSING:
      if (now - c->closing_ms >= CLOSE_GRACE_MS &&
          !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
      break;
    }
  }
  if (ing->stopping && !ing->stop_called && !ing->drain_gave_up &&
      now >= ing->drain_deadline_ms) {
    log_warn("drain deadline passed",
             "inflight=%" PRIu64 " waiting_for_disk=%" PRIu64, ing->inflight,
             ing->retry_n);
    /* Generations that cannot commit (disk full) stay unACKed; agents
     * resend them to the next daemon. */
    pending *pd;
    while ((pd = retry_pop(ing)) != NULL) {
      conn *c = pd->c;
      c->inflight--;
      conn_account(c, -(int64_t)pd->g->len);
      store_gen_free(pd->g);
      free(pd);
      conn_unref(c);
    }
    ing->drain_gave_up = 1;
    drain_check(ing);
  }
}

/* ------------------------------------------------------------------ accept */

static void free_refused(uv_handle_t *h) {
  free(h->data);
}

static void on_connection(uv_stream_t *server, int status) {
  ingest *ing = server->data;
  if (status < 0) {
    log_warn("accept failed", "error=%s", uv_err_name(status));
    return;
  }
  conn *c = xcalloc(1, sizeof *c);
  c->ing = ing;
  uv_tcp_init(ing->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    uv_close((uv_handle_t *)&c->tcp, free_refused);
    return;
  }
  if (ing->stopping || ing->nconns >= ing->cfg.max_connections) {
    /* Tell the agent why, best effort, without queueing anything. */
    uint8_t mem[128];
    gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
    if (ing->stopping) {
      gtp_frame_goodbye_encode(&b, GTP_E_SHUTDOWN, "daemon shutting down");
    } else {
      gtp_frame_error_encode(&b, GTP_E_LIMIT, 0, 0,
                             "too many agent connections");
      CTR_ADD(ing, refused_total, 1);
      CTR_ADD(ing, limit_hits[LIM_CONNECTIONS], 1);
    }
    uv_buf_t ub = uv_buf_init((char *)b.data, (unsigned)b.len);
    uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
    uv_close((uv_handle_t *)&c->tcp, free_refused);
    return;
  }
  c->id = ++ing->next_id;
  c->refs = 1;
  c->state = CONN_HANDSHAKE;
  c->created_ms = c->last_rx_ms = c->last_tx_ms = uv_now(ing->loop);
  gtp_frame_decoder_init(&c->dec, ing->cfg.max_frame);
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage ss;
  int sl = sizeof ss;
  snprintf(c->peer, sizeof c->peer, "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
    char ip[48];
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip,
               ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "%s:%u", ip,
               ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
  }
  c->next = ing->conns;
  if (ing->conns != NULL)
    ing->conns->prev = c;
  ing->conns = c;
  ing->nconns++;
  ing->handles_open++;
  CTR_SET(ing, connections, ing->nconns);
  CTR_ADD(ing, connections_total, 1);
  conn_update_reading(c);
}

/* -------------------------------------------------------------- public API */

int ingest_new(uv_loop_t *loop, const ingest_config *cfg, ingest **out,
               char **cause) {
  ingest *ing = calloc(1, sizeof *ing);
  if (ing == NULL) {
    set_cause(cause, "out of memory");
    return -ENOMEM;
  }
  ing->loop = loop;
  ing->cfg = *cfg;
  if (ing->cfg.max_frame == 0 || ing->cfg.max_frame > GTP_FRAME_MAX)
    ing->cfg.max_frame = GTP_FRAME_MAX;
  if (cfg->token != NULL && cfg->token[0] != '\0') {
    ing->token = strdup(cfg->token);
    ing->token_len = strlen(cfg->token);
  }
  ing->rbuf = malloc(READ_BUF_SIZE);
  ing->sess = calloc(SESS_BUCKETS, sizeof(conn *));
  if (ing->rbuf == NULL || ing->sess == NULL ||
      (cfg->token != NULL && cfg->token[0] != '\0' && ing->token == NULL)) {
    free(ing->rbuf);
    free(ing->sess);
    free(ing->token);
    free(ing);
    set_cause(cause, "out of memory");
    return -ENOMEM;
  }
  ing->cfg.host = NULL;
  ing->cfg.token = NULL;
  ing->retry_tail = &ing->retry_head;
  ing->done_tail = &ing->done_head;
  pthread_mutex_init(&ing->done_lock, NULL);
  pthread_mutex_init(&ing->sess_lock, NULL);
  snprintf(ing->host, sizeof ing->host, "%s",
           cfg->host != NULL ? cfg->host : "127.0.0.1");

  uv_async_init(loop, &ing->async, on_async);
  ing->async.data = ing;
  uv_timer_init(loop, &ing->sweep);
  ing->sweep.data = ing;
  uv_timer_init(loop, &ing->retry_timer);
  ing->retry_timer.data = ing;
  ing->handles_open += 3;
  *out = ing;
  return 0;
}

void ingest_set_store(ingest *ing, store *s) {
  ing->store = s;
}

int ingest_start(ingest *ing, uint16_t *port, char **cause) {
  struct sockaddr_storage ss;
  int rc;
  if (strchr(ing->host, ':') != NULL)
    rc = uv_ip6_addr(ing->host, ing->cfg.port, (struct sockaddr_in6 *)&ss);
  else
    rc = uv_ip4_addr(ing->host, ing->cfg.port, (struct sockaddr_in *)&ss);
  if (rc < 0) {
    set_cause(cause, "agent-listen: bad address %s (want a numeric IP)",
              ing->host);
    return GTP_E_BADARG;
  }
  uv_tcp_init(ing->loop, &ing->listener);
  ing->listener.data = ing;
  ing->listening = 1;
  ing->handles_open++;
  rc = uv_tcp_bind(&ing->listener, (struct sockaddr *)&ss, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&ing->listener, 1024, on_connection);
  if (rc < 0) {
    set_cause(cause, "agent-listen %s:%u: %s", ing->host, ing->cfg.port,
              uv_strerror(rc));
    return rc;
  }
  int sl = sizeof ss;
  uv_tcp_getsockname(&ing->listener, (struct sockaddr *)&ss, &sl);
  *port =
      ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
  /* The sweep resolves the timeouts to a quarter of the shortest one. */
  uint64_t tick = ing->cfg.handshake_timeout_ms < ing->cfg.idle_timeout_ms
                      ? ing->cfg.handshake_timeout_ms
                      : ing->cfg.idle_timeout_ms;
  tick /= 4;
  if (tick < 20)
    tick = 20;
  if (tick > 1000)
    tick = 1000;
  uv_timer_start(&ing->sweep, on_sweep, tick, tick);
  return 0;
}

static void drain_check(ingest *ing) {
  if (!ing->stopping || ing->stop_called)
    return;
  if ((ing->inflight > 0 || ing->retry_n > 0) && !ing->drain_gave_up)
    return;
  /* Everything submitted is committed and ACKed: say GOODBYE. */
  conn *next;
  for (conn *c = ing->conns; c != NULL; c = next) {
    next = c->next;
    if (c->state != CONN_CLOSING)
      conn_close(c, GTP_E_SHUTDOWN, 0, 0, "daemon shutting down");
  }
  if (ing->nconns > 0)
    return; /* on_closed calls back here */
  ing->stop_called = 1;
  if (ing->stop_cb != NULL)
    ing->stop_cb(ing->stop_arg);
}

void ingest_stop(ingest *ing, uint64_t drain_ms, void (*done)(void *arg),
                 void *arg) {
  if (ing->stopping)
    return;
  ing->stopping = 1;
  ing->stop_cb = done;
  ing->stop_arg = arg;
  ing->drain_deadline_ms = uv_now(ing->loop) + drain_ms;
  if (ing->listening && !uv_is_closing((uv_handle_t *)&ing->listener)) {
    uv_close((uv_handle_t *)&ing->listener, NULL);
    ing->handles_open--;
  }
  /* Stop reading and drop what is half received; what is complete is at
   * the store and gets ACKed before GOODBYE. */
  for (conn *c = ing->conns; c != NULL; c = c->next) {
    if (c->state == CONN_HANDSHAKE) {
      c->state = CONN_DRAINING;
    } else if (c->state == CONN_ACTIVE) {
      c->state = CONN_DRAINING;
      while (c->gens != NULL) {
        opengen *g = c->gens;
        c->gens = g->next;
        opengen_free(c, g);
      }
      c->ngens = 0;
    }
    if (c->reading) {
      uv_read_stop((uv_stream_t *)&c->tcp);
      c->reading = 0;
    }
  }
  log_info("draining", "connections=%" PRIu64 " inflight=%" PRIu64, ing->nconns,
           ing->inflight);
  drain_check(ing);
}

static void on_handle_closed(uv_handle_t *h) {
  (void)h;
}

void ingest_free(ingest *ing) {
  if (ing == NULL)
    return;
  for (conn *c = ing->conns; c != NULL; c = c->next)
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
      uv_close((uv_handle_t *)&c->tcp, on_closed);
  if (ing->listening && !uv_is_closing((uv_handle_t *)&ing->listener))
    uv_close((uv_handle_t *)&ing->listener, on_handle_closed);
  uv_close((uv_handle_t *)&ing->sweep, on_handle_closed);
  uv_close((uv_handle_t *)&ing->retry_timer, on_handle_closed);
  uv_close((uv_handle_t *)&ing->async, on_handle_closed);
  uv_run(ing->loop, UV_RUN_DEFAULT);
  /* Completions that came after a drain gave up waiting for them. Every
   * handle is closed now, so the conns only wait for these references. */
  pending *pd;
  while ((pd = ing->done_head) != NULL) {
    ing->done_head = pd->next;
    store_gen_free(pd->g);
    conn_unref(pd->c);
    free(pd);
  }
  while ((pd = retry_pop(ing)) != NULL) {
    store_gen_free(pd->g);
    conn_unref(pd->c);
    free(pd);
  }
  pthread_mutex_destroy(&ing->done_lock);
  pthread_mutex_destroy(&ing->sess_lock);
  free(ing->sess);
  free(ing->rbuf);
  free(ing->token);
  free(ing);
}

/* ----------------------------------------------------------------- metrics */

static void metric(gtp_wbuf *b, const char *name, const char *type,
                   const char *help, const char *labels, uint64_t v) {
  char line[512];
  int n;
  if (help != NULL) {
    n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help,
                 name, type);
    gtp_wbuf_put(b, line, (size_t)n);
  }
  n = snprintf(line, sizeof line, "%s%s %" PRIu64 "\n", name,
               labels != NULL ? labels : "", v);
  gtp_wbuf_put(b, line, (size_t)n);
}

static void metric_f(gtp_wbuf *b, const char *name, const char *type,
                     const char *help, double v) {
  char line[512];
  int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.9f\n",
                   name, help, name, type, name, v);
  gtp_wbuf_put(b, line, (size_t)n);
}

#define C(f) CTR_GET(ing, f)
void ingest_metrics(ingest *ing, gtp_wbuf *b) {
  metric(b, "gentrace_agent_connections", "gauge",
         "Agent connections open now.", NULL, C(connections));
  metric(b, "gentrace_agent_connections_total", "counter",
         "Agent connections accepted.", NULL, C(connections_total));
  metric(b, "gentrace_agent_connections_refused_total", "counter",
         "Agent connections refused by --max-connections.", NULL,
         C(refused_total));
  metric(b, "gentrace_agent_handshakes_total", "counter",
         "Agents that completed HELLO.", NULL, C(handshakes_total));
  metric(b, "gentrace_agent_sessions_replaced_total", "counter",
         "Connections replaced by a newer one of the same session.", NULL,
         C(replaced_total));
  metric(b, "gentrace_frames_received_total", "counter",
         "Frames received from agents.", NULL, C(frames));
  metric(b, "gentrace_bytes_received_total", "counter",
         "Bytes received from agents.", NULL, C(bytes));
  metric(b, "gentrace_protocol_errors_total", "counter",
         "Connections closed for a protocol error.", NULL, C(protocol_errors));
  metric(b, "gentrace_generations_committed_total", "counter",
         "Generations stored.", NULL, C(committed));
  metric(b, "gentrace_generations_rejected_total", "counter",
         "Generations refused (validation or limits).", NULL, C(rejected));
  metric(b, "gentrace_generations_duplicate_total", "counter",
         "Generations received again after they were stored (ACKed).", NULL,
         C(duplicate));
  metric(b, "gentrace_store_errors_total", "counter",
         "Generations the store failed for other reasons than a full disk.",
         NULL, C(store_errors));
  metric(b, "gentrace_ledger_events_total", "counter",
         "Events lost before they were stored, by cause.",
         "{cause=\"dropped\"}", C(ledger_dropped));
  metric(b, "gentrace_ledger_events_total", "counter", NULL,
         "{cause=\"evicted\"}", C(ledger_evicted));
  metric(b, "gentrace_ledger_events_total", "counter", NULL,
         "{cause=\"rejected\"}", C(ledger_rejected) + C(rejected_events));
  metric(b, "gentrace_buffered_bytes", "gauge",
         "Bytes held for agents (partial frames, open and queued "
         "generations).",
         NULL, C(buffered));
  metric(b, "gentrace_reads_paused_total", "counter",
         "Times reading from agents paused for backpressure.", NULL,
         C(reads_paused));
  metric(b, "gentrace_connections_paused", "gauge",
         "Connections paused by --max-conn-buffer now.", NULL, C(paused_now));
  metric(b, "gentrace_heartbeats_sent_total", "counter",
         "HEARTBEAT frames sent to agents.", NULL, C(heartbeats_sent));
  for (int i = 0; i < LIM_COUNT_; i++) {
    char lab[64];
    snprintf(lab, sizeof lab, "{limit=\"%s\"}", limit_names[i]);
    metric(b, "gentrace_limit_hits_total", "counter",
           i == 0 ? "Times each limit was hit." : NULL, lab, C(limit_hits[i]));
  }
  metric(b, "gentrace_disk_full", "gauge",
         "1 while ingest is paused because storage is full.", NULL,
         C(disk_full));
  metric(b, "gentrace_disk_full_total", "counter", "Times storage became full.",
         NULL, C(disk_full_total));
  if (ing->store != NULL) {
    store_stats st;
    store_stats_get(ing->store, &st);
    metric(b, "gentrace_store_queue_generations", "gauge",
           "Generations waiting for the store thread.", NULL, st.queued_gens);
    metric(b, "gentrace_store_queue_bytes", "gauge",
           "Bytes waiting for the store thread.", NULL, st.queued_bytes);
    metric(b, "gentrace_store_committed_bytes_total", "counter",
           "Payload bytes committed.", NULL, st.committed_bytes);
    metric(b, "gentrace_store_transactions_total", "counter",
           "Store transactions.", NULL, st.transactions);
    metric_f(b, "gentrace_store_commit_seconds_total", "counter",
             "Time spent committing.", (double)st.commit_ns_total / 1e9);
    metric_f(b, "gentrace_store_commit_seconds_max", "gauge", "Longest commit.",
             (double)st.commit_ns_max / 1e9);
    metric(b, "gentrace_store_retention_deleted_total", "counter",
           "Generations deleted by retention.", NULL,
           st.retention_deleted_gens);
    metric(b, "gentrace_store_db_bytes", "gauge",
           "Database size, WAL included, last measured.", NULL, st.db_bytes);
    metric(b, "gentrace_store_disk_full", "gauge",
           "1 while the store reports no room.", NULL, (uint64_t)st.disk_full);
  }
}
#undef C

int ingest_healthy(ingest *ing, const char **reason) {
  if (__atomic_load_n(&ing->ctr.disk_full, __ATOMIC_RELAXED)) {
    if (reason != NULL)
      *reason = "storage full; ingest paused";
    return 0;
  }
  return 1;
}

int ingest_connected(ingest *ing, const char *session_hex) {
  uint8_t s[16];
  if (session_hex == NULL || gtp_session_parse(session_hex, s) < 0)
    return 0;
  pthread_mutex_lock(&ing->sess_lock);
  int found = sess_find(ing, s) != NULL;
  pthread_mutex_unlock(&ing->sess_lock);
  return found;
}

void ingest_stats_get(ingest *ing, ingest_stats *o) {
  memset(o, 0, sizeof *o);
  o->connections = CTR_GET(ing, connections);
  o->connections_total = CTR_GET(ing, connections_total);
  o->refused_total = CTR_GET(ing, refused_total);
  o->frames = CTR_GET(ing, frames);
  o->bytes = CTR_GET(ing, bytes);
  o->committed = CTR_GET(ing, committed);
  o->rejected = CTR_GET(ing, rejected);
  o->duplicate = CTR_GET(ing, duplicate);
  o->buffered = CTR_GET(ing, buffered);
  o->reads_paused = CTR_GET(ing, reads_paused);
  o->disk_full = (int)CTR_GET(ing, disk_full);
}
