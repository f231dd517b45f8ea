/* segment.c: the shared store's writer (see segment.h).
 *
 * Owns: the catalog (pg_cat), one S3 client per uploader thread, the
 * packer and uploader threads, the submit queue, the open segment, the
 * queue of closed segments, pending rejected counts, stats and health.
 *
 * Flow: segment_submit appends to q. The packer pops generations in
 * arrival order, compresses each (zstd, kept raw when that does not
 * shrink it), appends the bytes to the open segment with an index entry,
 * frees the raw payload, and closes the segment on size or age, or early
 * when it is idle with an uploader free (seg_idle_close); a closed
 * segment gets the next close number and goes to upq (at most uploads + 1
 * segments, in close order). K = cfg.uploads uploader threads share upq:
 * each takes the oldest segment nobody is uploading, appends its index
 * footer and PUTs the object (retrying), so up to K PUTs are in flight
 * and they may finish in any order. Committing is one role at a time:
 * whichever uploader finds upq's head PUT (and nobody committing) commits
 * its catalog rows in one transaction (retrying), calls done() for each
 * generation in arrival order, and drops it from upq; a segment whose PUT
 * finished first waits in upq for the ones before it. A latency-bound
 * store (one PUT is mostly waiting on the object server) thus keeps K
 * uploads and one commit going at once instead of one step at a time.
 *
 * States of a generation: q -> open segment -> upq (WAITING -> PUTTING
 * -> PUT) -> catalog commit at upq's head -> done(). Of the store:
 * running -> closing (set by segment_close: the packer drains q and closes
 * the open segment, the uploaders drain upq, giving up after close_wait_ms
 * on an unreachable store) -> stopped.
 *
 * Invariants:
 *   1. done() MUST run only after the object PUT returned 2xx and the
 *      catalog COMMIT returned, otherwise an ACKed generation could vanish
 *      with this machine.
 *   2. Uploads may finish in any order, but catalog commits and done()
 *      MUST happen one segment at a time, in close order (only upq's head
 *      commits, and only once its PUT is over), and generations in arrival
 *      order within a segment, otherwise a session's generations could
 *      take seqs out of order, or a later generation be ACKed while an
 *      earlier one could still be lost. Checked: each commit's close
 *      number is the last committed one plus 1.
 *   3. A retried commit MUST reuse the same object name, otherwise a COMMIT
 *      whose reply was lost would catalog the generations twice; with the
 *      same name pg_cat reports them as resends. The one exception: the
 *      orphan sweep deleted the object (pg_cat answers GTP_E_NOTFOUND),
 *      then the segment is put again under a new name.
 *   4. segment_submit and segment_note_rejected MUST only take the lock
 *      (never wait for the network), otherwise the daemon's loop would
 *      stall while a store is down.
 *   5. upq MUST stay bounded (uploads + 1 segments, counted in
 *      segment_scratch_bytes and so in --max-buffer), otherwise an
 *      unreachable S3 would let compressed copies pile up beside the
 *      queued raw payloads.
 *   6. An entry of a parsed footer MUST lie inside the data part, otherwise
 *      a damaged object would send readers past the end.
 *   7. A generation's summary rows MUST be committed in its catalog
 *      transaction (pg_sum.h), otherwise an ACKed generation could be
 *      missing from /v1/search and /v1/summary on every daemon.
 *   8. Each segment in upq MUST be PUT by one uploader only (WAITING ->
 *      PUTTING under the lock) and its S3 client MUST be that uploader's
 *      own, otherwise two threads would share one curl handle. Checked:
 *      at most K segments are PUTTING.
 */
#include "config.h" /* _GNU_SOURCE: asprintf */

#include "segment.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "crc32c.h"
#include "gtp_error.h"
#include "pg_cat.h"
#include "pg_sum.h"
#include "store_schema.h"

#define SEG_UPLOADS_DEFAULT 4
#define SEG_UPLOADS_MAX 16
#define SEG_UPQ_MAX (SEG_UPLOADS_MAX + 1)
#define SEG_IDLE_NS (100 * 1000000LL) /* seg_idle_close */
#define SEG_BACKOFF_MIN_MS 100
#define SEG_BACKOFF_MAX_MS 5000
#define SEG_REJ_MAX 1024
/* Footer: magic, count, entries, crc; trailer: footer length, end magic. */
#define SEG_MAGIC "GTSEGIX1"
#define SEG_END "GTSEGEND"
#define SEG_ENTRY_BYTES (16 + 8 * 6 + 1)
#define SEG_TRAILER_BYTES (4 + 8)

typedef struct seg {
  uint8_t *buf;
  size_t len, cap;
  segment_entry *ix;
  store_gen **gens;
  const char **codec;
  pg_sum **sums; /* each generation's summary rows (NULL: none) */
  uint64_t sum_bytes;
  size_t n, ncap;
  int64_t deadline_ns; /* monotonic: close by then */
  int64_t last_ns;     /* monotonic: when its last generation went in */
  /* Upload state, protected by the store's lock once in upq: */
  int state;      /* SEG_WAITING, SEG_PUTTING, SEG_PUT */
  int put_rc;     /* SEG_PUT: 0, or the code its PUT gave up with */
  uint64_t no;    /* close number: 1, 2, ... (invariant 2) */
  int64_t put_ns; /* monotonic, when its PUT began (commit_ns stats) */
  char key[256];  /* object name of the last PUT */
} seg;

enum { SEG_WAITING, SEG_PUTTING, SEG_PUT };
enum { SEG_S3, SEG_PG }; /* the two sides of health */

typedef struct uploader {
  struct segment_store *s;
  s3 *up; /* this thread's own client (invariant 8) */
  int idx;
  pthread_t t;
  int started;
} uploader;

typedef struct rej {
  uint8_t session[16];
  uint64_t gens, events;
} rej;

struct segment_store {
  /* Written once before the threads start: */
  segment_config cfg;
  char *catalog, *daemon_id, *objects, *endpoint, *region, *akey, *skey;
  char *prefix; /* "" or "dir/": the start of every object key */
  pg_cat *cat;
  uploader *ups;    /* K = cfg.uploads of them */
  sum_carry *carry; /* packer thread only: spans across edges */
  int no_summary;   /* GENTRACE_BENCH_NO_SUMMARY, as store.c */
  store_done_fn done;
  void *ctx;
  pthread_t packer;

  pthread_mutex_t lock;
  pthread_cond_t q_cond;  /* q grew, or closing */
  pthread_cond_t up_cond; /* upq grew, or the packer ended */
  pthread_cond_t room;    /* upq shrank */
  pthread_cond_t wake;    /* closing: cut a backoff sleep short */
  /* Protected by lock: */
  store_gen **q;
  size_t qhead, qn, qcap;
  seg *upq[SEG_UPQ_MAX]; /* close order; cfg.uploads + 1 at most */
  int upn;
  int putting;           /* segments PUTTING (invariant 8) */
  int committing;        /* an uploader holds the commit role */
  uint64_t closed_no;    /* close number of the last closed segment */
  uint64_t committed_no; /* ... of the last committed one (invariant 2) */
  int64_t flush_after;   /* monotonic: next rejected-count flush */
  int closing, packer_done;
  int64_t close_ns; /* monotonic, when closing began */
  rej rej[SEG_REJ_MAX];
  int nrej;
  store_stats st;
  int unhealthy; /* down[0] || down[1] */
  int down[2];   /* SEG_S3, SEG_PG: the last call to that side failed */
  char reason[2][384];
  uint64_t seg_counter;
};

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void seg_log(segment_store *s, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seg_log(segment_store *s, const char *level, const char *fmt, ...) {
  char kv[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kv, sizeof kv, fmt, ap);
  va_end(ap);
  if (s->cfg.log) {
    s->cfg.log(s->cfg.log_ctx, kv);
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  fprintf(stderr, "ts=%s.%03ldZ level=%s %s\n", when, ts.tv_nsec / 1000000,
          level, kv);
}

/* Records the outcome of a call to one side (SEG_S3, SEG_PG) for
 * segment_health, and logs the transitions of the whole only (an outage is
 * one line, not one per retry). Per side, because uploads and commits run
 * at once: a PUT that succeeds while the catalog is down must not report
 * the store healthy. */
static void seg_health(segment_store *s, int side, int rc, const char *cause) {
  pthread_mutex_lock(&s->lock);
  int was = s->unhealthy;
  s->down[side] = rc < 0;
  snprintf(s->reason[side], sizeof s->reason[side], "%s",
           rc < 0 ? (cause ? cause : "unavailable") : "");
  s->unhealthy = s->down[SEG_S3] || s->down[SEG_PG];
  int now = s->unhealthy;
  pthread_mutex_unlock(&s->lock);
  if (now && !was)
    seg_log(s, "error",
            "msg=\"shared store unavailable; not ACKing, "
            "retrying\" err=\"%s\"",
            cause ? cause : "");
  else if (!now && was)
    seg_log(s, "info", "msg=\"shared store available again\"");
}

/* ---- the footer ---- */

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Bytes of segment buffers alive (open + closed, not yet freed), for
 * segment_scratch_bytes; process-wide, like the buffers' allocator. */
static uint64_t seg_scratch;
/* Segments built and not yet freed (open, closed or uploading). */
static uint64_t seg_alive;

/* Makes room for more bytes. Doubling stops at soft (0: no limit), the
 * size a full segment needs: a 32 MiB segment would otherwise hold 64 MiB
 * of buffer while it waits in upq. */
static int seg_reserve(seg *g, size_t more, size_t soft) {
  size_t need = g->len + more;
  if (need <= g->cap)
    return 0;
  size_t cap = g->cap ? g->cap : 1 << 16;
  while (cap < need)
    cap *= 2;
  if (soft && cap > soft)
    cap = need > soft ? need + (need >> 4) : soft;
  uint8_t *b = realloc(g->buf, cap);
  if (!b)
    return -ENOMEM;
  __atomic_add_fetch(&seg_scratch, cap - g->cap, __ATOMIC_RELAXED);
  g->buf = b;
  g->cap = cap;
  return 0;
}

/* Appends the index footer and trailer to the data part. */
static int seg_footer(seg *g) {
  size_t flen = 8 + 4 + g->n * SEG_ENTRY_BYTES + 4;
  if (seg_reserve(g, flen + SEG_TRAILER_BYTES, 0) < 0)
    return -ENOMEM;
  uint8_t *f = g->buf + g->len;
  memcpy(f, SEG_MAGIC, 8);
  put_u32(f + 8, (uint32_t)g->n);
  uint8_t *e = f + 12;
  for (size_t i = 0; i < g->n; i++, e += SEG_ENTRY_BYTES) {
    const segment_entry *x = &g->ix[i];
    memcpy(e, x->session, 16);
    put_u64(e + 16, x->gen);
    put_u64(e + 24, x->off);
    put_u64(e + 32, x->len);
    put_u64(e + 40, x->raw_len);
    put_u64(e + 48, (uint64_t)x->start_ns);
    put_u64(e + 56, (uint64_t)x->end_ns);
    e[64] = x->codec;
  }
  put_u32(e, gtp_crc32c(0, f, (size_t)(e - f)));
  put_u32(e + 4, (uint32_t)flen);
  memcpy(e + 8, SEG_END, 8);
  g->len += flen + SEG_TRAILER_BYTES;
  return 0;
}

int segment_index_parse(const uint8_t *obj, size_t len, segment_entry **out,
                        size_t *n) {
  *out = NULL;
  *n = 0;
  if (len < SEG_TRAILER_BYTES)
    return GTP_E_TRUNC;
  const uint8_t *t = obj + len - SEG_TRAILER_BYTES;
  if (memcmp(t + 4, SEG_END, 8) != 0)
    return GTP_E_MAGIC;
  uint32_t flen = get_u32(t);
  if (flen < 16 || flen > len - SEG_TRAILER_BYTES)
    return GTP_E_CORRUPT;
  const uint8_t *f = t - flen;
  size_t data_len = (size_t)(f - obj);
  if (memcmp(f, SEG_MAGIC, 8) != 0)
    return GTP_E_MAGIC;
  uint32_t cnt = get_u32(f + 8);
  if ((uint64_t)cnt * SEG_ENTRY_BYTES + 16 != flen)
    return GTP_E_CORRUPT;
  if (get_u32(f + flen - 4) != gtp_crc32c(0, f, flen - 4))
    return GTP_E_CRC;
  segment_entry *ix = calloc(cnt ? cnt : 1, sizeof *ix);
  if (!ix)
    return -ENOMEM;
  const uint8_t *e = f + 12;
  for (uint32_t i = 0; i < cnt; i++, e += SEG_ENTRY_BYTES) {
    segment_entry *x = &ix[i];
    memcpy(x->session, e, 16);
    x->gen = get_u64(e + 16);
    x->off = get_u64(e + 24);
    x->len = get_u64(e + 32);
    x->raw_len = get_u64(e + 40);
    x->start_ns = (int64_t)get_u64(e + 48);
    x->end_ns = (int64_t)get_u64(e + 56);
    x->codec = e[64];
    if (x->off > data_len || x->len > data_len - x->off || x->codec > 1) {
      free(ix); /* invariant 6 */
      return GTP_E_CORRUPT;
    }
  }
  *out = ix;
  *n = cnt;
  return 0;
}

/* ---- packing ---- */

static void seg_free(seg *g) {
  if (!g)
    return;
  __atomic_sub_fetch(&seg_alive, 1, __ATOMIC_RELAXED);
  __atomic_sub_fetch(&seg_scratch, g->cap + g->sum_bytes, __ATOMIC_RELAXED);
  for (size_t i = 0; i < g->n; i++)
    pg_sum_free(g->sums[i]);
  free(g->sums);
  free(g->buf);
  free(g->ix);
  free(g->gens);
  free(g->codec);
  free(g);
}

/* Appends g's bytes (compressed when that helps) to the segment. */
static int seg_add(segment_store *s, seg *sg, ZSTD_CCtx *cctx, store_gen *g) {
  if (sg->n == sg->ncap) {
    size_t nc = sg->ncap ? sg->ncap * 2 : 64;
    segment_entry *ix = realloc(sg->ix, nc * sizeof *ix);
    if (ix)
      sg->ix = ix;
    store_gen **gs = realloc(sg->gens, nc * sizeof *gs);
    if (gs)
      sg->gens = gs;
    const char **cs = realloc(sg->codec, nc * sizeof *cs);
    if (cs)
      sg->codec = cs;
    pg_sum **ss = realloc(sg->sums, nc * sizeof *ss);
    if (ss)
      sg->sums = ss;
    if (!ix || !gs || !cs || !ss)
      return -ENOMEM;
    sg->ncap = nc;
  }
  size_t bound = ZSTD_compressBound(g->len);
  /* Room for a full segment plus its last generation and the footer. */
  size_t soft = (size_t)s->cfg.max_bytes + ((size_t)s->cfg.max_bytes >> 4);
  if (seg_reserve(sg, bound > g->len ? bound : g->len, soft) < 0)
    return -ENOMEM;
  uint8_t *dst = sg->buf + sg->len;
  size_t n = 0;
  uint8_t codec = 0;
  if (g->len >= 64) {
    n = ZSTD_compressCCtx(cctx, dst, bound, g->payload, g->len,
                          s->cfg.zstd_level);
    if (!ZSTD_isError(n) && n < g->len)
      codec = 1;
  }
  if (!codec) {
    memcpy(dst, g->payload, g->len);
    n = g->len;
  }
  segment_entry *x = &sg->ix[sg->n];
  memcpy(x->session, g->session, 16);
  x->gen = g->gen;
  x->off = sg->len;
  x->len = n;
  x->raw_len = g->len;
  x->codec = codec;
  x->start_ns = g->start_ns;
  x->end_ns = g->end_ns;
  sg->codec[sg->n] = codec ? STORE_CODEC_ZSTD : STORE_CODEC_NONE;
  /* Summarized here, while the bytes are at hand, in arrival order (the
   * carry pairs a session's generations in the order they commit); the
   * rows go into the catalog with the generation (invariant 7). Out of
   * memory: committed without a summary, as on SQLite. */
  pg_sum *sum = s->no_summary ? NULL
                              : pg_sum_build(g->session, g->gen, g->payload,
                                             g->len, s->carry);
  sg->sums[sg->n] = sum;
  sg->sum_bytes += pg_sum_bytes(sum);
  __atomic_add_fetch(&seg_scratch, pg_sum_bytes(sum), __ATOMIC_RELAXED);
  sg->gens[sg->n++] = g;
  sg->len += n;
  g->stored_bytes = n;
  /* The segment holds the bytes now; the raw copy would double what an
   * outage keeps in memory. g->len stays: the daemon's accounting uses it. */
  free(g->payload);
  g->payload = NULL;
  return 0;
}

/* Hands a closed segment to the uploaders, waiting for room (invariant
 * 5); its close number fixes its commit turn (invariant 2). */
static void seg_push(segment_store *s, seg *sg) {
  pthread_mutex_lock(&s->lock);
  while (s->upn >= (int)s->cfg.uploads + 1)
    pthread_cond_wait(&s->room, &s->lock);
  sg->state = SEG_WAITING;
  sg->no = ++s->closed_no;
  s->upq[s->upn++] = sg;
  pthread_cond_signal(&s->up_cond);
  pthread_mutex_unlock(&s->lock);
}

static void abs_deadline(struct timespec *ts, int64_t mono_deadline) {
  /* Condition variables here use CLOCK_MONOTONIC (set at init). */
  ts->tv_sec = (time_t)(mono_deadline / 1000000000LL);
  ts->tv_nsec = (long)(mono_deadline % 1000000000LL);
}

/* Under s->lock: 1 when the open segment should close before its size or
 * age, because nothing else is waiting to go in (q is empty), an uploader
 * is free to PUT it now, and it is worth an object of its own: a quarter
 * of max_bytes, or a 64th once no generation came for SEG_IDLE_NS. An
 * agent that has as much unACKed as its connection allows (the daemon's
 * --max-conn-buffer, the agent's spool) sends nothing more until an ACK:
 * without this its bytes would sit in the open segment while the
 * uploaders idle, and the end of a burst would wait out the age limit. A
 * fleet trickling small generations stays on the age limit (S3 bills per
 * request: at most one PUT per max_bytes / 64 comes from this). */
static int seg_idle_close(const segment_store *s, const seg *cur) {
  if (s->cfg.no_idle_close || s->qn > 0 || cur->len < s->cfg.max_bytes / 64 ||
      s->upn >= (int)s->cfg.uploads + 1)
    return 0;
  int waiting = 0;
  for (int i = 0; i < s->upn; i++)
    waiting += s->upq[i]->state == SEG_WAITING;
  if (s->putting + waiting >= (int)s->cfg.uploads)
    return 0;
  return cur->len >= s->cfg.max_bytes / 4 ||
         mono_ns() - cur->last_ns >= SEG_IDLE_NS;
}

static void *packer_main(void *arg) {
  segment_store *s = arg;
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  seg *cur = NULL;
  int64_t age_ns = (int64_t)s->cfg.max_age_ms * 1000000LL;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (
        s->qn == 0 && !s->closing &&
        !(cur && (mono_ns() >= cur->deadline_ns || seg_idle_close(s, cur)))) {
      if (cur) {
        struct timespec ts;
        int64_t until = cur->deadline_ns;
        if (!s->cfg.no_idle_close && cur->len >= s->cfg.max_bytes / 64 &&
            cur->last_ns + SEG_IDLE_NS < until)
          until = cur->last_ns + SEG_IDLE_NS; /* seg_idle_close */
        abs_deadline(&ts, until);
        pthread_cond_timedwait(&s->q_cond, &s->lock, &ts);
      } else {
        pthread_cond_wait(&s->q_cond, &s->lock);
      }
    }
    if (s->qn > 0) {
      store_gen *g = s->q[s->qhead];
      s->qhead = (s->qhead + 1) % s->qcap;
      s->qn--;
      pthread_mutex_unlock(&s->lock);
      if (!cur && (cur = calloc(1, sizeof *cur))) {
        cur->deadline_ns = mono_ns() + age_ns;
        __atomic_add_fetch(&seg_alive, 1, __ATOMIC_RELAXED);
      }
      if (!cur || !cctx || seg_add(s, cur, cctx, g) < 0) {
        /* Out of memory: this generation fails (the agent resends). */
        g->result = -ENOMEM;
        pthread_mutex_lock(&s->lock);
        s->st.queued_gens--;
        s->st.queued_bytes -= g->len;
        pthread_mutex_unlock(&s->lock);
        s->done(s->ctx, g);
      } else {
        cur->last_ns = mono_ns(); /* seg_idle_close */
        if (cur->len >= s->cfg.max_bytes) {
          seg_push(s, cur);
          cur = NULL;
        }
      }
      pthread_mutex_lock(&s->lock);
      continue;
    }
    if (cur) { /* aged, idle (seg_idle_close), or closing with q drained */
      pthread_mutex_unlock(&s->lock);
      seg_push(s, cur);
      cur = NULL;
      pthread_mutex_lock(&s->lock);
      continue;
    }
    if (s->closing)
      break;
  }
  s->packer_done = 1;
  pthread_cond_broadcast(&s->up_cond);
  pthread_mutex_unlock(&s->lock);
  ZSTD_freeCCtx(cctx);
  return NULL;
}

/* ---- uploading ---- */

/* Sleeps ms unless closing is set meanwhile. 1 when the caller should give
 * up (closing for longer than close_wait_ms). */
static int seg_backoff(segment_store *s, int *ms) {
  pthread_mutex_lock(&s->lock);
  if (s->closing &&
      mono_ns() - s->close_ns > (int64_t)s->cfg.close_wait_ms * 1000000LL) {
    pthread_mutex_unlock(&s->lock);
    return 1;
  }
  struct timespec ts;
  abs_deadline(&ts, mono_ns() + (int64_t)*ms * 1000000LL);
  pthread_cond_timedwait(&s->wake, &s->lock, &ts);
  pthread_mutex_unlock(&s->lock);
  *ms = *ms * 2 > SEG_BACKOFF_MAX_MS ? SEG_BACKOFF_MAX_MS : *ms * 2;
  return 0;
}

/* Writes the rejected counts noted since the last call (best effort: a
 * failure puts them back). */
static void seg_flush_rejected(segment_store *s) {
  rej batch[64];
  int n;
  pthread_mutex_lock(&s->lock);
  n = s->nrej < 64 ? s->nrej : 64;
  memcpy(batch, s->rej + s->nrej - n, (size_t)n * sizeof *batch);
  s->nrej -= n;
  pthread_mutex_unlock(&s->lock);
  for (int i = 0; i < n; i++) {
    char *cause = NULL;
    int rc = pg_cat_note_rejected(s->cat, batch[i].session, batch[i].gens,
                                  batch[i].events, &cause);
    free(cause);
    if (rc < 0) {
      pthread_mutex_lock(&s->lock);
      for (int j = i; j < n && s->nrej < SEG_REJ_MAX; j++)
        s->rej[s->nrej++] = batch[j];
      pthread_mutex_unlock(&s->lock);
      return;
    }
  }
}

/* After one attempt of an upload step (rc, *cause): reports the health,
 * and says whether to stop trying: 1 when it succeeded or the store is
 * closing (seg_backoff), 0 after waiting out the backoff (*cause freed). */
static int seg_attempt_over(segment_store *s, int side, int rc, char **cause,
                            int *ms) {
  seg_health(s, side, rc, *cause);
  if (rc == 0)
    return 1;
  free(*cause);
  *cause = NULL;
  return seg_backoff(s, ms);
}

/* Names the object (unique across daemons by the daemon id, across
 * restarts by the wall clock) and PUTs it through up, retrying until it is
 * stored or the store gave up at close. */
static int seg_put_named(segment_store *s, s3 *up, seg *sg) {
  pthread_mutex_lock(&s->lock);
  uint64_t name_no = ++s->seg_counter;
  pthread_mutex_unlock(&s->lock);
  snprintf(sg->key, sizeof sg->key,
           "%ssegments/%s/%019" PRId64 "-%06" PRIu64 ".gts", s->prefix,
           s->daemon_id, real_ns(), name_no);
  int ms = SEG_BACKOFF_MIN_MS;
  char *cause = NULL;
  for (;;) {
    int rc = s3_put(up, sg->key, sg->buf, sg->len, &cause);
    if (seg_attempt_over(s, SEG_S3, rc, &cause, &ms)) {
      free(cause);
      return rc;
    }
  }
}

/* The PUT step of an uploader: footer, then the object. */
static int seg_put(segment_store *s, s3 *up, seg *sg) {
  sg->put_ns = mono_ns();
  if (s->cfg.test_put_delay_ms && sg->no == s->cfg.test_put_delay_seg) {
    /* Tests: hold this segment's PUT back so later ones finish first. */
    struct timespec ts = {.tv_sec = s->cfg.test_put_delay_ms / 1000,
                          .tv_nsec = (long)(s->cfg.test_put_delay_ms % 1000) *
                                     1000000L};
    nanosleep(&ts, NULL);
  }
  int rc = seg_footer(sg);
  return rc < 0 ? rc : seg_put_named(s, up, sg);
}

/* The commit step, for upq's head only (invariant 2): catalogs the
 * segment's generations (retrying), then done() for each. */
static void seg_commit(segment_store *s, s3 *up, seg *sg) {
  int rc = sg->put_rc;
  int ms = SEG_BACKOFF_MIN_MS;
  char *cause = NULL;
  pg_cat_gen *cg = NULL;
  if (rc == 0 && !(cg = calloc(sg->n, sizeof *cg)))
    rc = -ENOMEM;
  if (rc == 0) {
    for (size_t i = 0; i < sg->n; i++)
      cg[i] = (pg_cat_gen){.g = sg->gens[i],
                           .off = sg->ix[i].off,
                           .len = sg->ix[i].len,
                           .codec = sg->codec[i],
                           .sum = sg->sums[i]};
    for (;;) {
      /* Same key on every attempt (invariant 3). */
      rc = pg_cat_commit_segment(s->cat, sg->key, sg->len, s->daemon_id, cg,
                                 sg->n, &cause);
      if (rc == GTP_E_NOTFOUND) {
        /* The orphan sweep deleted the object while this daemon could not
         * reach the catalog: put it again under a new name. */
        seg_log(s, "warn",
                "msg=\"segment swept as an orphan before its commit; "
                "uploading again\" object=\"%s\"",
                sg->key);
        free(cause);
        cause = NULL;
        ms = SEG_BACKOFF_MIN_MS;
        rc = seg_put_named(s, up, sg);
        if (rc < 0)
          break;
        continue;
      }
      if (seg_attempt_over(s, SEG_PG, rc, &cause, &ms))
        break;
    }
  }
  free(cause);
  int64_t took = mono_ns() - sg->put_ns;
  uint64_t bytes = 0, ndup = 0, nnew = 0;
  for (size_t i = 0; i < sg->n; i++) {
    store_gen *g = sg->gens[i];
    g->result = rc < 0 ? rc : cg[i].result;
    g->seq = rc < 0 ? 0 : cg[i].seq;
    if (g->result == 0)
      nnew++, bytes += g->stored_bytes;
    if (g->result == 1)
      ndup++;
  }
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < sg->n; i++) {
    s->st.queued_gens--;
    s->st.queued_bytes -= sg->gens[i]->len;
  }
  if (rc == 0) {
    s->st.committed_gens += nnew;
    s->st.committed_bytes += bytes;
    s->st.duplicate_gens += ndup;
    s->st.transactions++;
    s->st.commit_ns_total += (uint64_t)took;
    if ((uint64_t)took > s->st.commit_ns_max)
      s->st.commit_ns_max = (uint64_t)took;
  }
  pthread_mutex_unlock(&s->lock);
  if (rc < 0)
    seg_log(s, "error",
            "msg=\"shared store: segment given up at close\" "
            "object=\"%s\" gens=%zu err=\"%s\"",
            sg->key, sg->n, gtp_strerror(rc));
  for (size_t i = 0; i < sg->n; i++) /* invariant 1: after COMMIT */
    s->done(s->ctx, sg->gens[i]);
  free(cg);
}

/* Under s->lock: the state checks of invariants 2, 5 and 8. */
static void seg_check_invariants(const segment_store *s) {
  int putting = 0;
  for (int i = 0; i < s->upn; i++) {
    GTP_ASSERT(s->upq[i]->no == s->committed_no + 1 + (uint64_t)i);
    putting += s->upq[i]->state == SEG_PUTTING;
  }
  GTP_ASSERT(putting == s->putting);
  GTP_ASSERT(s->putting <= (int)s->cfg.uploads);
  GTP_ASSERT(s->upn <= (int)s->cfg.uploads + 1);
}

static void *uploader_main(void *arg) {
  uploader *u = arg;
  segment_store *s = u->s;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    if (u->idx == 0 && s->nrej > 0 && mono_ns() >= s->flush_after) {
      pthread_mutex_unlock(&s->lock);
      seg_flush_rejected(s);
      pthread_mutex_lock(&s->lock);
      /* A failed flush put its counts back: try again in a second. */
      s->flush_after = s->nrej > 0 ? mono_ns() + 1000000000LL : 0;
      continue;
    }
    seg *head = s->upn > 0 ? s->upq[0] : NULL;
    if (head && head->state == SEG_PUT && !s->committing) {
      s->committing = 1;
      seg_check_invariants(s);
      pthread_mutex_unlock(&s->lock);
      seg_commit(s, u->up, head);
      pthread_mutex_lock(&s->lock);
      GTP_ASSERT(s->upq[0] == head && head->no == s->committed_no + 1);
      s->committed_no = head->no;
      memmove(s->upq, s->upq + 1, (size_t)(s->upn - 1) * sizeof *s->upq);
      s->upn--;
      s->committing = 0;
      seg_check_invariants(s);
      pthread_cond_broadcast(&s->room);
      pthread_cond_broadcast(&s->up_cond); /* the next head may be PUT */
      pthread_cond_signal(&s->q_cond);     /* room: seg_idle_close */
      pthread_mutex_unlock(&s->lock);
      seg_free(head);
      pthread_mutex_lock(&s->lock);
      continue;
    }
    seg *next = NULL;
    for (int i = 0; i < s->upn && !next; i++)
      if (s->upq[i]->state == SEG_WAITING)
        next = s->upq[i];
    if (next) {
      next->state = SEG_PUTTING; /* invariant 8: this thread's alone */
      s->putting++;
      seg_check_invariants(s);
      pthread_mutex_unlock(&s->lock);
      int rc = seg_put(s, u->up, next);
      pthread_mutex_lock(&s->lock);
      next->put_rc = rc;
      next->state = SEG_PUT;
      s->putting--;
      seg_check_invariants(s);
      pthread_cond_signal(&s->q_cond); /* an uploader is free: seg_idle_close */
      if (next != s->upq[0])
        pthread_cond_broadcast(&s->up_cond);
      continue;
    }
    if (s->upn == 0 && s->packer_done)
      break;
    struct timespec ts;
    abs_deadline(&ts, mono_ns() + 1000000000LL);
    pthread_cond_timedwait(&s->up_cond, &s->lock, &ts);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- public ---- */

static char *dup_or_null(const char *v) {
  return v ? strdup(v) : NULL;
}

static void seg_default_id(char *out, size_t cap) {
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  for (char *p = host; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '-'))
      *p = '-';
  unsigned r = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&r, sizeof r, 1, f) != 1)
      r = 0;
    fclose(f);
  }
  if (!r)
    r = (unsigned)real_ns();
  snprintf(out, cap, "%s-%ld-%08x", host, (long)getpid(), r);
}

static int seg_id_ok(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 100)
    return 0;
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
      return 0;
  return strstr(id, "..") == NULL;
}

void segment_close(segment_store *s);

/* Frees what segment_open made, once the threads are gone (or never
 * ran): the uploaders' S3 handles, the strings, the queue, the locks. */
static void segment_free(segment_store *s) {
  for (uint32_t i = 0; s->ups && i < s->cfg.uploads; i++)
    s3_close(s->ups[i].up);
  free(s->ups);
  sum_carry_free(s->carry);
  free(s->prefix);
  free(s->q);
  free(s->daemon_id);
  free(s->catalog);
  free(s->objects);
  free(s->endpoint);
  free(s->region);
  free(s->akey);
  free(s->skey);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->q_cond);
  pthread_cond_destroy(&s->up_cond);
  pthread_cond_destroy(&s->room);
  pthread_cond_destroy(&s->wake);
  free(s);
}

int segment_open(const segment_config *cfg, store_done_fn done, void *ctx,
                 segment_store **out, char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  segment_store *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  s->cfg = *cfg;
  if (!s->cfg.max_bytes)
    s->cfg.max_bytes = 32ull << 20;
  if (!s->cfg.max_age_ms)
    s->cfg.max_age_ms = 2000;
  if (!s->cfg.zstd_level)
    s->cfg.zstd_level = 3;
  if (!s->cfg.close_wait_ms)
    s->cfg.close_wait_ms = 10000;
  if (!s->cfg.uploads)
    s->cfg.uploads = SEG_UPLOADS_DEFAULT;
  if (s->cfg.uploads > SEG_UPLOADS_MAX)
    s->cfg.uploads = SEG_UPLOADS_MAX;
  s->done = done;
  s->ctx = ctx;
  s->no_summary = getenv("GENTRACE_BENCH_NO_SUMMARY") != NULL;
  char id[128];
  if (cfg->daemon_id)
    snprintf(id, sizeof id, "%s", cfg->daemon_id);
  else
    seg_default_id(id, sizeof id);
  int rc;
  if (!seg_id_ok(id)) {
    if (cause && asprintf(cause,
                          "daemon id '%s' may hold only A-Z a-z 0-9 -"
                          " _ . (at most 100)",
                          id) < 0)
      *cause = NULL;
    free(s);
    return GTP_E_BADARG;
  }
  s->daemon_id = strdup(id);
  s->catalog = dup_or_null(cfg->catalog);
  s->objects = dup_or_null(cfg->s3.url);
  s->endpoint = dup_or_null(cfg->s3.endpoint);
  s->region = dup_or_null(cfg->s3.region);
  s->akey = dup_or_null(cfg->s3.access_key);
  s->skey = dup_or_null(cfg->s3.secret_key);
  s->cfg.catalog = s->catalog;
  s->cfg.daemon_id = s->daemon_id;
  s->cfg.s3.url = s->objects;
  s->cfg.s3.endpoint = s->endpoint;
  s->cfg.s3.region = s->region;
  s->cfg.s3.access_key = s->akey;
  s->cfg.s3.secret_key = s->skey;
  pthread_mutex_init(&s->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->q_cond, &ca);
  pthread_cond_init(&s->up_cond, &ca);
  pthread_cond_init(&s->room, &ca);
  pthread_cond_init(&s->wake, &ca);
  pthread_condattr_destroy(&ca);
  s->carry = sum_carry_new();
  s->ups = calloc(s->cfg.uploads, sizeof *s->ups);
  if (!s->daemon_id || !s->carry || !s->ups) {
    rc = -ENOMEM;
    goto fail_alloc;
  }

  if (!s->catalog || !s->objects) {
    rc = GTP_E_BADARG;
    if (cause &&
        asprintf(cause, "the shared store needs both --catalog "
                        "postgresql://... and --objects s3://BUCKET") < 0)
      *cause = NULL;
    goto fail_alloc;
  }
  rc = s3_open(&s->cfg.s3, &s->ups[0].up, cause);
  if (rc < 0)
    goto fail_alloc;
  {
    /* Keys in the catalog are bucket-relative (prefix included): reopen on
     * the bucket's root, one client per uploader (invariant 8). */
    s3_config root = s->cfg.s3;
    char *url = s3_root_url(s->ups[0].up);
    s->prefix = strdup(s3_prefix(s->ups[0].up));
    s3_close(s->ups[0].up);
    s->ups[0].up = NULL;
    root.url = url;
    rc = url && s->prefix ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < s->cfg.uploads; i++)
      rc = s3_open(&root, &s->ups[i].up, cause);
    free(url);
    if (rc < 0)
      goto fail_alloc;
  }
  /* Both stores must answer now: a typo or a dead server is an error at
   * start, not a daemon that accepts and never ACKs. */
  rc = s3_check(s->ups[0].up, cause);
  if (rc < 0)
    goto fail_s3;
  rc = pg_cat_open(s->catalog, 4, &s->cat, cause);
  if (rc < 0)
    goto fail_s3;
  pg_cat_set_test_delay(s->cat, s->cfg.test_commit_delay_ms);
  for (uint32_t i = 0; i < s->cfg.uploads; i++) {
    uploader *u = &s->ups[i];
    u->s = s;
    u->idx = (int)i;
    if (pthread_create(&u->t, NULL, uploader_main, u) != 0) {
      rc = -EAGAIN;
      goto fail_threads;
    }
    u->started = 1;
  }
  if (pthread_create(&s->packer, NULL, packer_main, s) != 0) {
    rc = -EAGAIN;
    goto fail_threads;
  }
  *out = s;
  return 0;
fail_threads:
  pthread_mutex_lock(&s->lock);
  s->packer_done = 1;
  pthread_cond_broadcast(&s->up_cond);
  pthread_mutex_unlock(&s->lock);
  for (uint32_t i = 0; i < s->cfg.uploads; i++)
    if (s->ups[i].started)
      pthread_join(s->ups[i].t, NULL);
  pg_cat_close(s->cat);
fail_s3:
fail_alloc:
  segment_free(s);
  return rc;
}

void segment_close(segment_store *s) {
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->closing = 1;
  s->close_ns = mono_ns();
  pthread_cond_broadcast(&s->q_cond);
  pthread_cond_broadcast(&s->wake);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->packer, NULL);
  for (uint32_t i = 0; i < s->cfg.uploads; i++)
    pthread_join(s->ups[i].t, NULL);
  seg_flush_rejected(s);
  pg_cat_close(s->cat);
  segment_free(s);
}

int segment_submit(segment_store *s, store_gen *g) {
  pthread_mutex_lock(&s->lock);
  if (s->closing) {
    pthread_mutex_unlock(&s->lock);
    return GTP_E_SHUTDOWN;
  }
  if (s->qn == s->qcap) {
    size_t nc = s->qcap ? s->qcap * 2 : 256;
    store_gen **q = malloc(nc * sizeof *q);
    if (!q) {
      pthread_mutex_unlock(&s->lock);
      return -ENOMEM;
    }
    for (size_t i = 0; i < s->qn; i++)
      q[i] = s->q[(s->qhead + i) % s->qcap];
    free(s->q);
    s->q = q;
    s->qhead = 0;
    s->qcap = nc;
  }
  s->q[(s->qhead + s->qn) % s->qcap] = g;
  s->qn++;
  s->st.queued_gens++;
  s->st.queued_bytes += g->len;
  pthread_cond_signal(&s->q_cond);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

int segment_last_gen(segment_store *s, const uint8_t session[16],
                     uint64_t *gen) {
  /* The daemon asks on its event loop (HELLO): while the catalog is known
   * to be down, answer "nothing stored" at once rather than wait for a
   * connect timeout. The agent then resends what it still spools, and the
   * catalog stores each generation once (resends are duplicates). */
  pthread_mutex_lock(&s->lock);
  int down = s->unhealthy;
  pthread_mutex_unlock(&s->lock);
  if (down)
    return 0;
  char *cause = NULL;
  int rc = pg_cat_last_gen(s->cat, session, gen, &cause);
  free(cause);
  return rc;
}

int segment_session_key(segment_store *s, const uint8_t session[16],
                        uint8_t hash[STORE_KEY_HASH_SIZE]) {
  pthread_mutex_lock(&s->lock);
  int down = s->unhealthy;
  pthread_mutex_unlock(&s->lock);
  if (down)
    return GTP_E_UNAVAIL;
  char *cause = NULL;
  int rc = pg_cat_session_key(s->cat, session, hash, &cause);
  free(cause);
  return rc < 0 ? GTP_E_UNAVAIL : rc;
}

void segment_note_rejected(segment_store *s, const uint8_t session[16],
                           uint64_t events) {
  pthread_mutex_lock(&s->lock);
  int i;
  for (i = 0; i < s->nrej; i++)
    if (memcmp(s->rej[i].session, session, 16) == 0)
      break;
  if (i == s->nrej && s->nrej < SEG_REJ_MAX) {
    memcpy(s->rej[i].session, session, 16);
    s->rej[i].gens = s->rej[i].events = 0;
    s->nrej++;
  }
  if (i < s->nrej) {
    s->rej[i].gens++;
    s->rej[i].events += events;
  }
  pthread_cond_signal(&s->up_cond);
  pthread_mutex_unlock(&s->lock);
}

void segment_stats_get(segment_store *s, store_stats *out) {
  pthread_mutex_lock(&s->lock);
  *out = s->st;
  pthread_mutex_unlock(&s->lock);
}

int segment_health(segment_store *s, char *reason, size_t cap) {
  pthread_mutex_lock(&s->lock);
  int bad = s->unhealthy;
  if (cap)
    snprintf(reason, cap, "%s",
             s->down[SEG_S3] ? s->reason[SEG_S3] : s->reason[SEG_PG]);
  pthread_mutex_unlock(&s->lock);
  return bad ? GTP_E_UNAVAIL : 0;
}

struct pg_cat *segment_catalog(segment_store *s) {
  return s->cat;
}
const char *segment_daemon_id(const segment_store *s) {
  return s->daemon_id;
}

uint64_t segment_scratch_bytes(segment_store *s) {
  (void)s;
  return __atomic_load_n(&seg_scratch, __ATOMIC_RELAXED);
}

uint64_t segment_alive(void) {
  return __atomic_load_n(&seg_alive, __ATOMIC_RELAXED);
}
