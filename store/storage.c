/* storage.c: the storage interface's dispatch (see storage.h).
 *
 * Owns: the backend's writer (store or segment_store); for the shared
 * backend also the readers' catalog pool and generation cache, which every
 * storage_reader borrows, and each reader's own S3 client.
 *
 * Invariants:
 *   1. Exactly one backend MUST be open per storage, chosen at open from the
 *      configuration, otherwise a daemon could ACK into one store and serve
 *      from another.
 *   2. A shared payload read MUST check the generation's length after
 *      decompression against the catalog, otherwise a damaged object would
 *      reach a download as a short or garbled generation.
 */
#include "config.h" /* _GNU_SOURCE: asprintf */

#include "storage.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "gencache.h"
#include "gtp_error.h"
#include "hold.h"
#include "pg.h"
#include "pg_cat.h"
#include "pg_search.h"
#include "s3.h"
#include "shared_live.h"
#include "shared_retain.h"
#include "store_schema.h"
#include "sumsort.h"

struct storage {
  int shared;
  char *describe;
  char *path; /* SQLite: the database readers open */
  store *sq;
  segment_store *seg;
  shared_retain *retain; /* shared: cluster retention and pins */
  shared_live *live;     /* shared: lease and connected sessions */
  hold *holds;           /* retention pins (either backend; not read-only) */
  pg_cat *rcat;          /* shared: the readers' catalog pool */
  pg_cat *hcat;          /* shared: HELLO lookups' pool (storage_hello) */
  gencache *cache;       /* shared: decompressed generations by seq */
  s3_config s3cfg;       /* shared: what each reader's S3 client opens */
  char *objects, *endpoint, *region, *akey, *skey;
};

struct storage_reader {
  storage *st;
  store_reader *sq; /* SQLite */
  s3 *s3;           /* shared */
  ZSTD_DCtx *dctx;
};

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *dup_or_null(const char *v) {
  return v ? strdup(v) : NULL;
}

static int set_cause(char **cause, const char *msg) {
  if (cause)
    *cause = strdup(msg);
  return GTP_E_BADARG;
}

int storage_open(const storage_config *cfg, store_done_fn done, void *ctx,
                 storage **out, char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  int has_cat = cfg->catalog && *cfg->catalog;
  int has_obj = cfg->objects && *cfg->objects;
  if (has_cat != has_obj)
    return set_cause(cause, has_cat
                                ? "--catalog needs --objects s3://BUCKET"
                                  "[/PREFIX] too (the shared store keeps "
                                  "rows in PostgreSQL and bytes in S3)"
                                : "--objects needs --catalog postgresql://..."
                                  " too (the shared store keeps rows in "
                                  "PostgreSQL and bytes in S3)");
  storage *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  int rc;
  char *prefix = NULL;
  if (!has_cat) {
    st->path = dup_or_null(cfg->sqlite.path);
    st->describe = dup_or_null(cfg->sqlite.path);
    rc = store_open(&cfg->sqlite, done, ctx, &st->sq, cause);
    if (rc == 0) /* after store_open: it creates or migrates the table */
      rc = hold_open_sqlite(cfg->sqlite.path, &st->holds, cause);
    if (rc < 0)
      goto fail;
    *out = st;
    return 0;
  }
  st->shared = 1;
  /* Before any object of this run is named (the orphan sweep compares). */
  int64_t started_ns = real_ns();
  segment_config sc = cfg->shared;
  sc.catalog = cfg->catalog;
  sc.s3.url = cfg->objects;
  if (!sc.log) {
    sc.log = cfg->sqlite.log;
    sc.log_ctx = cfg->sqlite.log_ctx;
  }
  st->objects = dup_or_null(cfg->objects);
  st->endpoint = dup_or_null(sc.s3.endpoint);
  st->region = dup_or_null(sc.s3.region);
  st->akey = dup_or_null(sc.s3.access_key);
  st->skey = dup_or_null(sc.s3.secret_key);
  {
    /* Readers address the catalog's bucket-relative keys from the root. */
    s3 *probe = NULL;
    rc = s3_open(&sc.s3, &probe, cause);
    if (rc < 0)
      goto fail;
    free(st->objects);
    st->objects = s3_root_url(probe);
    prefix = strdup(s3_prefix(probe));
    s3_close(probe);
  }
  st->s3cfg = sc.s3;
  st->s3cfg.url = st->objects;
  st->s3cfg.endpoint = st->endpoint;
  st->s3cfg.region = st->region;
  st->s3cfg.access_key = st->akey;
  st->s3cfg.secret_key = st->skey;
  {
    /* Logs name the catalog without its password. */
    char cat[512];
    snprintf(cat, sizeof cat, "%s", cfg->catalog);
    char *s = strstr(cat, "://");
    char *at = s ? strchr(s + 3, '@') : NULL;
    char *colon = s ? strchr(s + 3, ':') : NULL;
    if (at && colon && colon < at)
      memmove(colon + 1, at, strlen(at) + 1);
    if (asprintf(&st->describe, "catalog=%s objects=%s", cat, cfg->objects) < 0)
      st->describe = NULL;
  }
  st->cache = gencache_new(cfg->cache_bytes ? cfg->cache_bytes : 64ull << 20);
  if (!st->objects || !st->describe || !st->cache || !prefix) {
    rc = -ENOMEM;
    goto fail;
  }
  rc = segment_open(&sc, done, ctx, &st->seg, cause);
  if (rc < 0)
    goto fail;
  rc = pg_cat_open(cfg->catalog, 4, &st->rcat, cause);
  if (rc == 0)
    rc = hold_open_pg(cfg->catalog, &st->holds, cause);
  if (rc < 0)
    goto fail;
  /* As many as libuv's default thread pool runs lookups at once. */
  rc = pg_cat_open(cfg->catalog, 4, &st->hcat, cause);
  if (rc < 0)
    goto fail;
  shared_retain_config rcfg = {.cat = st->rcat,
                               .s3 = &st->s3cfg,
                               .daemon_id = segment_daemon_id(st->seg),
                               .pins = cfg->sqlite.pins,
                               .retain_ns = cfg->sqlite.retain_ns,
                               .max_bytes = cfg->sqlite.max_db_bytes,
                               .tick_ms = cfg->retain_tick_ms,
                               .grace_ms = cfg->retain_grace_ms,
                               .prefix = prefix,
                               .orphan_grace_ms = cfg->orphan_grace_ms,
                               .log = sc.log,
                               .log_ctx = sc.log_ctx};
  rc = shared_retain_start(&rcfg, &st->retain, cause);
  if (rc < 0)
    goto fail;
  shared_live_config lcfg = {.cat = st->rcat,
                             .daemon_id = segment_daemon_id(st->seg),
                             .started_ns = started_ns,
                             .tick_ms = cfg->live_tick_ms,
                             .log = sc.log,
                             .log_ctx = sc.log_ctx};
  rc = shared_live_start(&lcfg, &st->live, cause);
  if (rc < 0)
    goto fail;
  free(prefix);
  *out = st;
  return 0;
fail:
  free(prefix);
  storage_close(st);
  return rc;
}

int storage_open_sqlite_readonly(const char *path, storage **out,
                                 char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  storage *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  st->path = dup_or_null(path);
  st->describe = dup_or_null(path);
  if (!st->path || !st->describe) {
    storage_close(st);
    return -ENOMEM;
  }
  *out = st;
  return 0;
}

void storage_close(storage *st) {
  if (!st)
    return;
  shared_live_stop(st->live);
  shared_retain_stop(st->retain);
  hold_close(st->holds);
  if (st->sq)
    store_close(st->sq);
  if (st->seg)
    segment_close(st->seg);
  pg_cat_close(st->rcat);
  pg_cat_close(st->hcat);
  gencache_free(st->cache);
  free(st->describe);
  free(st->path);
  free(st->objects);
  free(st->endpoint);
  free(st->region);
  free(st->akey);
  free(st->skey);
  free(st);
}

hold *storage_holds(storage *st) {
  return st->holds;
}

int storage_is_shared(const storage *st) {
  return st->shared;
}
const char *storage_describe(const storage *st) {
  return st->describe ? st->describe : "";
}

int storage_submit(storage *st, store_gen *g) {
  if (!st->shared && !st->sq)
    return GTP_E_STATE; /* read-only */
  return st->shared ? segment_submit(st->seg, g) : store_submit(st->sq, g);
}

int storage_last_gen(storage *st, const uint8_t session[16], uint64_t *gen) {
  return st->shared ? segment_last_gen(st->seg, session, gen)
                    : store_last_gen(st->sq, session, gen);
}

int storage_session_key(storage *st, const uint8_t session[16],
                        uint8_t hash[STORE_KEY_HASH_SIZE]) {
  if (st->shared)
    return segment_session_key(st->seg, session, hash);
  if (!st->sq)
    return 0;
  return store_session_key(st->sq, session, hash);
}

void storage_hello(storage *st, const uint8_t session[16],
                   storage_hello_answer *out) {
  memset(out, 0, sizeof *out);
  if (!st->shared) {
    out->key_rc = storage_session_key(st, session, out->key);
    out->has_last = storage_last_gen(st, session, &out->last_gen) == 1;
    return;
  }
  /* While the store is known to be down: refuse unchecked keys at once
   * (the agent retries) rather than wait for a connect timeout. */
  char why[8];
  if (segment_health(st->seg, why, sizeof why) < 0) {
    out->key_rc = GTP_E_UNAVAIL;
    return;
  }
  pg_cat_hello_row h;
  char *cause = NULL;
  int rc = pg_cat_hello(st->hcat, session, &h, &cause);
  free(cause);
  if (rc < 0) {
    out->key_rc = GTP_E_UNAVAIL;
    return;
  }
  out->key_rc = h.has_key;
  if (h.has_key)
    memcpy(out->key, h.key, sizeof out->key);
  out->has_last = h.has_last;
  out->last_gen = h.last_gen;
}

void storage_session_live(storage *st, const uint8_t session[16], int on) {
  if (st->shared)
    shared_live_set(st->live, session, on);
}

void storage_note_rejected(storage *st, const uint8_t session[16],
                           uint64_t events) {
  if (st->shared)
    segment_note_rejected(st->seg, session, events);
  else
    store_note_rejected(st->sq, session, events);
}

void storage_stats_get(storage *st, store_stats *out) {
  if (st->shared)
    segment_stats_get(st->seg, out);
  else
    store_stats_get(st->sq, out);
}

uint64_t storage_scratch_bytes(storage *st) {
  if (st->shared)
    return segment_scratch_bytes(st->seg);
  return st->sq ? store_scratch_bytes(st->sq) : 0;
}

int storage_health(storage *st, char *reason, size_t cap) {
  if (st->shared)
    return segment_health(st->seg, reason, cap);
  if (cap)
    reason[0] = '\0';
  return 0;
}

int storage_reader_open(storage *st, storage_reader **out, char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  storage_reader *r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  r->st = st;
  int rc;
  if (!st->shared) {
    rc = store_reader_open(st->path, &r->sq, cause);
  } else {
    rc = s3_open(&st->s3cfg, &r->s3, cause);
    if (rc == 0 && !(r->dctx = ZSTD_createDCtx()))
      rc = -ENOMEM;
  }
  if (rc < 0) {
    storage_reader_close(r);
    return rc;
  }
  *out = r;
  return 0;
}

void storage_reader_close(storage_reader *r) {
  if (!r)
    return;
  if (r->sq)
    store_reader_close(r->sq);
  s3_close(r->s3);
  ZSTD_freeDCtx(r->dctx);
  free(r);
}

/* pg_search's way to a generation's bytes: as a download reads them. */
static int search_fetch(void *ctx, int64_t seq, gtp_wbuf *out) {
  return storage_read_payload(ctx, seq, out);
}

int storage_search_spans(storage_reader *r, const store_search_query *q,
                         store_span_cb cb, void *ctx, int64_t *next_seq,
                         uint64_t *next_skip) {
  return r->sq ? store_search_spans(r->sq, q, cb, ctx, next_seq, next_skip)
               : pg_search_spans(r->st->rcat, q, search_fetch, r, cb, ctx,
                                 next_seq, next_skip);
}

int storage_search_summary(storage_reader *r, const store_summary_query *q,
                           store_stats_cb cb, void *ctx, uint64_t *pending) {
  sumsort s = {0};
  int rc = r->sq ? store_search_summary(r->sq, q, sumsort_add, &s, pending)
                 : pg_search_summary(r->st->rcat, q, sumsort_add, &s, pending);
  if (rc == 0)
    rc = sumsort_emit(&s, cb, ctx);
  sumsort_fini(&s);
  return rc;
}

int storage_search_service_known(storage_reader *r, const char *service) {
  return r->sq ? store_search_service_known(r->sq, service)
               : pg_search_service_known(r->st->rcat, service);
}

int storage_read_sessions(storage_reader *r, const store_session_filter *f,
                          store_session_cb cb, void *ctx) {
  return r->sq ? store_read_sessions(r->sq, f, cb, ctx)
               : pg_cat_read_sessions(r->st->rcat, f, cb, ctx);
}

int storage_read_session_gens(storage_reader *r, const char *session,
                              int64_t from_ns, int64_t to_ns, int64_t after,
                              uint32_t limit, store_gen_cb cb, void *ctx) {
  return r->sq ? store_read_session_gens(r->sq, session, from_ns, to_ns, after,
                                         limit, cb, ctx)
               : pg_cat_read_session_gens(r->st->rcat, session, from_ns, to_ns,
                                          after, limit, cb, ctx);
}

int storage_read_window(storage_reader *r, const store_window_query *q,
                        store_gen_cb cb, void *ctx) {
  return r->sq ? store_read_window(r->sq, q, cb, ctx)
               : pg_cat_read_window(r->st->rcat, q, cb, ctx);
}

int storage_read_feed(storage_reader *r, int64_t after_seq, uint32_t limit,
                      store_gen_cb cb, void *ctx) {
  return r->sq ? store_read_feed(r->sq, after_seq, limit, cb, ctx)
               : pg_cat_read_feed(r->st->rcat, after_seq, limit, cb, ctx);
}

int storage_read_max_seq(storage_reader *r, int64_t *seq) {
  return r->sq ? store_read_max_seq(r->sq, seq)
               : pg_cat_read_max_seq(r->st->rcat, seq);
}

int storage_read_feed_since(storage_reader *r, int64_t since_ns,
                            int64_t *after_seq) {
  return r->sq ? store_read_feed_since(r->sq, since_ns, after_seq)
               : pg_cat_read_feed_since(r->st->rcat, since_ns, after_seq);
}

int storage_read_check(storage_reader *r, const int64_t *seqs, size_t n) {
  if (r->sq)
    return 0;
  size_t i = 0;
  while (i < n && gencache_has(r->st->cache, seqs[i]))
    i++;
  if (i == n)
    return 0;
  char *cause = NULL;
  int rc = s3_check(r->s3, &cause);
  free(cause);
  return rc < 0 ? GTP_E_UNAVAIL : 0;
}

/* Fetches a located generation: cache, else ranged GET + decompress. An
 * unreachable S3 is retried for a few seconds, so a blip during a
 * download does not cut the stream (its headers are sent). */
static int shared_fetch(storage_reader *r, pg_cat_loc *loc, gtp_wbuf *out) {
  if (gencache_get(r->st->cache, loc->seq, out))
    return 0;
  uint8_t *z = NULL;
  size_t zn = 0;
  char *cause = NULL;
  /* The stored length bounds the GET; the generation's own bound the
   * decompressed size (a lying catalog row cannot make us allocate more). */
  if (loc->bytes > GTP_GEN_MAX_BYTES || loc->len > GTP_GEN_MAX_BYTES)
    return GTP_E_CORRUPT;
  int rc;
  for (int ms = 100, waited = 0;; waited += ms, ms *= 2) {
    rc = s3_get(r->s3, loc->object, loc->off, loc->len, (size_t)loc->len, &z,
                &zn, &cause);
    free(cause);
    cause = NULL;
    if (rc != GTP_E_UNAVAIL || waited >= 5000)
      break;
    usleep((useconds_t)ms * 1000);
  }
  if (rc < 0)
    return rc == GTP_E_NOTFOUND ? GTP_E_NOTFOUND : rc;
  size_t before = out->len;
  if (strcmp(loc->codec, STORE_CODEC_ZSTD) == 0) {
    uint8_t *dst = gtp_wbuf_grow(out, (size_t)loc->bytes);
    if (!dst) {
      free(z);
      return out->err ? out->err : -ENOMEM;
    }
    size_t got = ZSTD_decompressDCtx(r->dctx, dst, (size_t)loc->bytes, z, zn);
    if (ZSTD_isError(got) || got != loc->bytes) { /* invariant 2 */
      out->len = before;
      free(z);
      return GTP_E_CORRUPT;
    }
  } else if (strcmp(loc->codec, STORE_CODEC_NONE) == 0 && zn == loc->bytes) {
    gtp_wbuf_put(out, z, zn);
  } else {
    free(z);
    return GTP_E_CORRUPT;
  }
  free(z);
  if (out->err)
    return out->err;
  gencache_put(r->st->cache, loc->seq, out->data + before, out->len - before);
  return 0;
}

int storage_read_payload(storage_reader *r, int64_t seq, gtp_wbuf *out) {
  if (r->sq)
    return store_read_payload(r->sq, seq, out);
  /* A cached generation needs neither the catalog nor S3. */
  if (gencache_get(r->st->cache, seq, out))
    return 0;
  pg_cat_loc loc;
  int rc = pg_cat_locate(r->st->rcat, seq, &loc);
  if (rc < 0)
    return rc;
  rc = shared_fetch(r, &loc, out);
  free(loc.object);
  return rc;
}

int storage_read_payload_zstd(storage_reader *r, int64_t seq, gtp_wbuf *out) {
  if (r->sq)
    return store_read_payload_zstd(r->sq, seq, out);
  gtp_wbuf raw;
  gtp_wbuf_init(&raw, 0);
  int rc = storage_read_payload(r, seq, &raw);
  if (rc == 0 && raw.err)
    rc = raw.err;
  if (rc == 0) {
    size_t bound = ZSTD_compressBound(raw.len);
    size_t before = out->len;
    uint8_t *dst = gtp_wbuf_grow(out, bound);
    if (!dst) {
      rc = out->err ? out->err : -ENOMEM;
    } else {
      size_t n = ZSTD_compress(dst, bound, raw.data, raw.len, 1);
      if (ZSTD_isError(n)) {
        out->len = before;
        rc = GTP_E_INTERNAL;
      } else {
        out->len = before + n;
      }
    }
  }
  gtp_wbuf_fini(&raw);
  return rc;
}

int storage_read_payload_by_gen(storage_reader *r, const char *session,
                                uint64_t gen, gtp_wbuf *out) {
  if (r->sq)
    return store_read_payload_by_gen(r->sq, session, gen, out);
  pg_cat_loc loc;
  int rc = pg_cat_locate_by_gen(r->st->rcat, session, gen, &loc);
  if (rc < 0)
    return rc;
  rc = shared_fetch(r, &loc, out);
  free(loc.object);
  return rc;
}

/* ---- /metrics of the shared store ---- */

static void m_head(gtp_wbuf *b, const char *name, const char *type,
                   const char *help) {
  gtp_wbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One metric without labels: its HELP and TYPE, then its value. */
static void m_one(gtp_wbuf *b, const char *name, const char *type,
                  const char *help, uint64_t v) {
  m_head(b, name, type, help);
  gtp_wbuf_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void m_pool(gtp_wbuf *b, const char *name, pg_cat *c) {
  if (!c)
    return;
  pg_stats p;
  pg_stats_get(pg_cat_pool(c), &p);
  gtp_wbuf_printf(b,
                  "gentrace_shared_pg_pool_size{pool=\"%s\"} %" PRIu64 "\n"
                  "gentrace_shared_pg_pool_in_use{pool=\"%s\"} %" PRIu64 "\n"
                  "gentrace_shared_pg_pool_waits_total{pool=\"%s\"} %" PRIu64
                  "\n"
                  "gentrace_shared_pg_pool_wait_seconds_total{pool=\"%s\"} "
                  "%.6f\n",
                  name, p.size, name, p.in_use, name, p.waits, name,
                  (double)p.wait_ns / 1e9);
}

void storage_metrics(storage *st, gtp_wbuf *b) {
  if (!st->shared)
    return;
  m_head(b, "gentrace_shared_pg_pool_size", "gauge",
         "PostgreSQL connections each catalog pool may open (writer: "
         "segment commits; readers: HTTP reads, connections; hello: HELLO "
         "lookups).");
  m_head(b, "gentrace_shared_pg_pool_in_use", "gauge",
         "Catalog connections lent out now.");
  m_head(b, "gentrace_shared_pg_pool_waits_total", "counter",
         "Times a catalog call waited for a free connection.");
  m_head(b, "gentrace_shared_pg_pool_wait_seconds_total", "counter",
         "Time catalog calls waited for a free connection.");
  m_pool(b, "writer", segment_catalog(st->seg));
  m_pool(b, "readers", st->rcat);
  m_pool(b, "hello", st->hcat);
  uint64_t e[3];
  pg_stats_errors(e);
  m_head(b, "gentrace_shared_pg_errors_total", "counter",
         "Catalog statements that failed, by kind (unavailable: server "
         "unreachable; conflict: serialization, deadlock or unique; other).");
  gtp_wbuf_printf(
      b,
      "gentrace_shared_pg_errors_total{kind=\"unavailable\"} "
      "%" PRIu64 "\n"
      "gentrace_shared_pg_errors_total{kind=\"conflict\"} %" PRIu64 "\n"
      "gentrace_shared_pg_errors_total{kind=\"other\"} %" PRIu64 "\n",
      e[0], e[1], e[2]);
  static const char *const ops[S3_OPS] = {"put", "get", "head", "delete",
                                          "list"};
  s3_stats s[S3_OPS];
  s3_stats_get(s);
  m_head(b, "gentrace_shared_s3_requests_total", "counter",
         "S3 requests by operation.");
  m_head(b, "gentrace_shared_s3_errors_total", "counter",
         "S3 requests that failed (unreachable, or not 2xx) by operation.");
  m_head(b, "gentrace_shared_s3_bytes_total", "counter",
         "S3 body bytes sent (put) or received, by operation.");
  m_head(b, "gentrace_shared_s3_seconds_total", "counter",
         "Time in S3 requests by operation (latency = this / requests).");
  for (int k = 0; k < S3_OPS; k++)
    gtp_wbuf_printf(b,
                    "gentrace_shared_s3_requests_total{op=\"%s\"} %" PRIu64 "\n"
                    "gentrace_shared_s3_errors_total{op=\"%s\"} %" PRIu64 "\n"
                    "gentrace_shared_s3_bytes_total{op=\"%s\"} %" PRIu64 "\n"
                    "gentrace_shared_s3_seconds_total{op=\"%s\"} %.6f\n",
                    ops[k], s[k].requests, ops[k], s[k].errors, ops[k],
                    s[k].bytes, ops[k], (double)s[k].ns / 1e9);
  uint64_t hits, misses;
  gencache_counts(st->cache, &hits, &misses);
  m_one(b, "gentrace_shared_cache_hits_total", "counter",
        "Generations read from the readers' cache.", hits);
  m_one(b, "gentrace_shared_cache_misses_total", "counter",
        "Generations fetched from S3 (not in the readers' cache).", misses);
  m_one(b, "gentrace_shared_cache_bytes", "gauge",
        "Decompressed generations held in the readers' cache.",
        gencache_bytes(st->cache));
  m_one(b, "gentrace_shared_segments_open", "gauge",
        "Segments being filled, waiting for upload or uploading now.",
        segment_alive());
  shared_retain_stats r;
  shared_retain_stats_get(st->retain, &r);
  m_one(b, "gentrace_shared_retention_passes_total", "counter",
        "Cluster retention passes run by this daemon.", r.passes);
  m_one(b, "gentrace_shared_dead_objects_deleted_total", "counter",
        "Segment objects deleted after their last generation was.",
        r.deleted_objects);
  m_one(b, "gentrace_shared_orphan_sweeps_total", "counter",
        "Orphan sweeps run by this daemon.", r.orphan_sweeps);
  m_one(b, "gentrace_shared_orphan_sweep_errors_total", "counter",
        "Orphan sweeps that failed (retried at the next one).",
        r.orphan_errors);
  m_one(b, "gentrace_shared_orphans_swept_total", "counter",
        "Segment objects nobody cataloged (their daemon died between upload "
        "and commit) deleted by this daemon.",
        r.orphans_swept);
  shared_live_stats l;
  shared_live_stats_get(st->live, &l);
  m_one(b, "gentrace_shared_connections_published", "gauge",
        "Sessions connected here, as published to the catalog.", l.sessions);
  m_one(b, "gentrace_shared_lease_errors_total", "counter",
        "Failed renewals of this daemon's lease or connection list.", l.errors);
}
