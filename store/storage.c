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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "gencache.h"
#include "gtp_error.h"
#include "hold.h"
#include "pg_cat.h"
#include "s3.h"
#include "shared_retain.h"
#include "store_schema.h"

struct storage {
  int shared;
  char *describe;
  char *path; /* SQLite: the database readers open */
  store *sq;
  segment_store *seg;
  shared_retain *retain; /* shared: cluster retention and pins */
  hold *holds;           /* retention pins (either backend; not read-only) */
  pg_cat *rcat;          /* shared: the readers' catalog pool */
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
  if (!st->objects || !st->describe || !st->cache) {
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
  shared_retain_config rcfg = {.cat = st->rcat,
                               .s3 = &st->s3cfg,
                               .daemon_id = segment_daemon_id(st->seg),
                               .pins = cfg->sqlite.pins,
                               .retain_ns = cfg->sqlite.retain_ns,
                               .max_bytes = cfg->sqlite.max_db_bytes,
                               .tick_ms = cfg->retain_tick_ms,
                               .grace_ms = cfg->retain_grace_ms,
                               .log = sc.log,
                               .log_ctx = sc.log_ctx};
  rc = shared_retain_start(&rcfg, &st->retain, cause);
  if (rc < 0)
    goto fail;
  *out = st;
  return 0;
fail:
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
  shared_retain_stop(st->retain);
  hold_close(st->holds);
  if (st->sq)
    store_close(st->sq);
  if (st->seg)
    segment_close(st->seg);
  pg_cat_close(st->rcat);
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

store_reader *storage_reader_sqlite(storage_reader *r) {
  return r->sq;
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
