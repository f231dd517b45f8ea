/* store_commit.c: the commit of a batch (store.c's design note, invariants
 * 2-5 and 11-13): each generation's session row, generation row, payload
 * and summary inside one transaction, the retry one by one when a batch
 * fails for a reason other than space, and the completion of every
 * generation with done() after COMMIT returned. Also the compression a
 * compressor thread runs before that (store_commit_compress). */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "gtp_error.h"
#include "store_schema.h"
#include "store_writer.h"

/* The sid cache (invariant 13): direct-mapped, store thread only. */
static size_t sidc_slot(const uint8_t key[16]) {
  uint64_t a, b;
  memcpy(&a, key, 8);
  memcpy(&b, key + 8, 8);
  uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  return (size_t)(h & (STORE_SIDC_SLOTS - 1));
}

/* The cached sessions.id of a session, 0 if none. */
static int64_t sidc_get(const store *s, const uint8_t key[16]) {
  if (s->sidc == NULL)
    return 0;
  const sidc_ent *e = &s->sidc[sidc_slot(key)];
  return e->sid > 0 && memcmp(e->key, key, 16) == 0 ? e->sid : 0;
}

/* Caches sid, only after the COMMIT that holds its row. */
static void sidc_put(store *s, const uint8_t key[16], int64_t sid) {
  if (s->sidc == NULL || sid <= 0)
    return;
  sidc_ent *e = &s->sidc[sidc_slot(key)];
  memcpy(e->key, key, 16);
  e->sid = sid;
}

static const char *str_or(const char *p, const char *def) {
  return p ? p : def;
}

/* The summary of it->g and, when its submitter left the events unchecked
 * (check_events), their check, in one walk (store_sum_build_checked). */
void store_commit_summarize(store *s, zitem *it) {
  const store_gen *g = it->g;
  if (it->sum != NULL || (s->no_summary && !g->check_events))
    return;
  it->sum = g->check_events
                ? store_sum_build_checked(g->payload, g->len, !s->no_summary)
                : store_sum_build(g->payload, g->len);
  __atomic_fetch_add(&s->scratch_bytes, store_sum_bytes(it->sum),
                     __ATOMIC_RELAXED);
}

/* Compresses the payload of it->g into a new buffer. Compression that does
 * not shrink the payload is not kept: the reader then skips the
 * decompression. Thread: a compressor, with its own cctx. */
void store_commit_compress(store *s, store_zpol *zp, zitem *it) {
  const store_gen *g = it->g;
  it->z = NULL;
  it->zlen = g->len;
  it->codec = STORE_CODEC_NONE;
  /* The summary (and the event check) is made here, off the store
   * thread, like compression. */
  store_commit_summarize(s, it);
  if (g->len < STORE_ZSTD_MIN || s->cfg.no_compress)
    return;
  size_t bound = ZSTD_compressBound(g->len);
  uint8_t *z = malloc(bound);
  if (!z)
    return; /* storing raw is always correct */
  __atomic_fetch_add(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
  size_t n = store_zpol_compress(zp, g->session, g->payload, g->len, z, bound);
  if (ZSTD_isError(n) || n >= g->len) {
    free(z);
    __atomic_fetch_sub(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
    return;
  }
  /* Give back the slack of the worst-case bound: queued items stay small. */
  uint8_t *fit = realloc(z, n);
  it->z = fit ? fit : z;
  it->zlen = n;
  /* What stays alive until the commit frees it: the n-byte copy. */
  __atomic_fetch_sub(&s->scratch_bytes, bound - n, __ATOMIC_RELAXED);
  it->codec = STORE_CODEC_ZSTD;
}

/* Binds g's session key hash (or NULL, for an agent without one) as
 * parameter i. */
static void bind_key(sqlite3_stmt *st, int i, const store_gen *g) {
  if (g->has_key)
    sqlite3_bind_blob(st, i, g->key_hash, STORE_KEY_HASH_SIZE, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

/* A session row's service, for the rollup (store_rollup_add_summary):
 * copied from column col of st's row into svc (GTP_IDENT_STR_MAX + 1
 * bytes), its length into *len; SIZE_MAX when it does not fit (the rollup
 * then reads the rows back). */
static void copy_service(sqlite3_stmt *st, int col, char *svc, size_t *len) {
  const unsigned char *p = sqlite3_column_text(st, col);
  int n = sqlite3_column_bytes(st, col);
  *len = SIZE_MAX;
  if (p != NULL && n >= 0 && (size_t)n <= GTP_IDENT_STR_MAX) {
    memcpy(svc, p, (size_t)n);
    *len = (size_t)n;
  }
}

/* Runs a statement with RETURNING one row at most: copies that row's n
 * integer columns to out (*row = 1), and with svc its column n, the
 * service (copy_service), runs the statement to completion and resets it.
 * Returns an SQLite code. */
static int step_returning(sqlite3_stmt *st, int64_t *out, int n, int *row,
                          char *svc, size_t *svc_len) {
  int rc = sqlite3_step(st);
  *row = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW) {
    for (int i = 0; i < n; i++)
      out[i] = sqlite3_column_int64(st, i);
    if (svc != NULL)
      copy_service(st, n, svc, svc_len);
    rc = sqlite3_step(st); /* RETURNING: run the statement to completion */
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Moves a known session's row forward (ST_TOUCH_SESSION): *found = 0 if
 * the row is gone. Returns an SQLite code. */
static int touch_session(store *s, const store_gen *g, const char *hex,
                         int64_t sid, int64_t now_real, int64_t *tot_events,
                         int64_t *tot_lost, int *found) {
  sqlite3_stmt *st = s->st[ST_TOUCH_SESSION];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, now_real);
  sqlite3_bind_int64(st, 3, (int64_t)g->gen);
  sqlite3_bind_text(st, 4, hex, 32, SQLITE_STATIC);
  bind_key(st, 5, g);
  int64_t v[2] = {0, 0};
  int rc = step_returning(st, v, 2, found, NULL, NULL);
  if (*found) {
    *tot_events = v[0];
    *tot_lost = v[1];
  }
  return rc;
}

/* Checks a known session's row before its generation goes in
 * (ST_SESSION_CHECK): *found = 0 if the row is gone or its id now names
 * another session; *unbound = 1 while the row has no key hash. The row
 * itself moves forward in the generations_add trigger: one write of it
 * per generation, not two. Returns an SQLite code. */
static int check_session(store *s, const char *hex, int64_t sid,
                         int64_t *tot_events, int64_t *tot_lost, int *unbound,
                         int *found, char *svc, size_t *svc_len) {
  sqlite3_stmt *st = s->st[ST_SESSION_CHECK];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_text(st, 2, hex, 32, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  if (*found) {
    *tot_events = sqlite3_column_int64(st, 0);
    *tot_lost = sqlite3_column_int64(st, 1);
    *unbound = sqlite3_column_int(st, 2) != 0;
    copy_service(st, 3, svc, svc_len);
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Makes the session's row or moves it forward (identity from the first
 * HELLO); *sid = its id. Returns an SQLite code. */
static int upsert_session(store *s, const store_gen *g, const char *hex,
                          int64_t now_real, int64_t *sid, int64_t *tot_events,
                          int64_t *tot_lost, char *svc, size_t *svc_len) {
  sqlite3_stmt *st = s->st[ST_UPSERT_SESSION];
  sqlite3_bind_text(st, 1, hex, 32, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, str_or(g->service, ""), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, str_or(g->host, ""), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 4, (int64_t)g->pid);
  sqlite3_bind_int64(st, 5, (int64_t)g->process_start_ns);
  sqlite3_bind_text(st, 6, str_or(g->agent_version, ""), -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 7, str_or(g->tags_json, "{}"), -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 8, now_real);
  sqlite3_bind_int64(st, 9, (int64_t)g->gen);
  bind_key(st, 10, g);
  int64_t v[3];
  int row = 0;
  int rc = step_returning(st, v, 3, &row, svc, svc_len);
  if (row) {
    *sid = v[0];
    *tot_events = v[1];
    *tot_lost = v[2];
  }
  return rc;
}

/* Inserts one generation inside the open transaction. Returns an SQLite
 * code; sets g->result (0, 1 or a refusal), g->seq and g->stored_bytes on
 * success, and it->sid. */
static int store_one(store *s, zitem *it, int64_t now_real, int64_t *span) {
  store_gen *g = it->g;
  /* Small generations skip the compressors (store_submit's fast path):
   * their summary and check are made here, cheap at that size. */
  store_commit_summarize(s, it);
  g->bad_events = 0;
  if (g->check_events && (it->sum == NULL || it->sum->bad)) {
    /* Invalid events are refused before anything is written; out of memory
     * before the check is the store's failure, not the generation's. */
    g->bad_events = it->sum != NULL;
    g->result = it->sum != NULL ? it->sum->bad : -ENOMEM;
    g->seq = 0;
    g->stored_bytes = 0;
    return SQLITE_OK;
  }
  char hex[33];
  gtp_session_hex(g->session, hex);
  int64_t sid = sidc_get(s, g->session), tot_events = 0, tot_lost = 0;
  int rc = SQLITE_OK, found = 0, unbound = 0;
  char svc[GTP_IDENT_STR_MAX + 1]; /* the session row's service */
  size_t svc_len = SIZE_MAX;
  if (sid > 0) {
    rc = check_session(s, hex, sid, &tot_events, &tot_lost, &unbound, &found,
                       svc, &svc_len);
    /* The key of a session bound after its first commit (rare): the touch
     * writes it (and moves the row, which the trigger does again). */
    if (rc == SQLITE_OK && found && unbound && g->has_key)
      rc = touch_session(s, g, hex, sid, now_real, &tot_events, &tot_lost,
                         &found);
    if (rc != SQLITE_OK)
      return rc;
    if (!found)
      sid = 0; /* the row is gone: the upsert makes it again */
  }
  if (sid == 0) {
    rc = upsert_session(s, g, hex, now_real, &sid, &tot_events, &tot_lost, svc,
                        &svc_len);
    if (rc != SQLITE_OK)
      return rc;
  }
  it->sid = sid;
  sqlite3_stmt *st;
  /* Invariant 11: the session totals (triggers) must not wrap. */
  uint64_t lost = 0, ev = 0;
  int over = __builtin_add_overflow(g->end.dropped, g->end.evicted, &lost) ||
             __builtin_add_overflow(lost, g->end.rejected, &lost) ||
             tot_events < 0 || tot_lost < 0 ||
             __builtin_add_overflow(g->end.events, (uint64_t)tot_events, &ev) ||
             __builtin_add_overflow(lost, (uint64_t)tot_lost, &lost) ||
             ev > INT64_MAX || lost > INT64_MAX || g->gen > INT64_MAX;
  if (over) {
    g->result = GTP_E_TOOBIG;
    g->seq = 0;
    g->stored_bytes = 0;
    return SQLITE_OK;
  }

  const void *data = it->z ? it->z : g->payload;
  size_t n = it->zlen;
  const char *codec = it->codec;
  st = s->st[ST_INSERT_GEN];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, (int64_t)g->gen);
  sqlite3_bind_int64(st, 3, g->start_ns);
  sqlite3_bind_int64(st, 4, g->end_ns);
  sqlite3_bind_int64(st, 5, (int64_t)g->end.events);
  sqlite3_bind_int64(st, 6, (int64_t)g->len);
  sqlite3_bind_int64(st, 7, (int64_t)n);
  sqlite3_bind_int64(st, 8, (int64_t)g->end.dropped);
  sqlite3_bind_int64(st, 9, (int64_t)g->end.evicted);
  sqlite3_bind_int64(st, 10, (int64_t)g->end.rejected);
  sqlite3_bind_text(st, 11, codec, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 12, now_real);
  sqlite3_bind_int64(st, 13, (int64_t)g->end.crc);
  rc = step_done(st);
  if (rc != SQLITE_OK)
    return rc;
  if (sqlite3_changes(s->db) == 0) {
    /* Invariant 3: already stored. The same bytes (CRC) are a resend after
     * a lost ACK; other bytes under the same (session, gen) are refused
     * and the stored ones stay. A NULL crc (a row from before schema 3)
     * cannot tell, so it is taken as the same. */
    st = s->st[ST_GEN_CRC];
    sqlite3_bind_int64(st, 1, sid);
    sqlite3_bind_int64(st, 2, (int64_t)g->gen);
    rc = sqlite3_step(st);
    int same = rc != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL ||
               (uint64_t)sqlite3_column_int64(st, 0) == g->end.crc;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      return rc;
    /* A resend (the trigger did not fire): the agent is alive, so its row
     * still moves forward, as it did before the trigger moved it. */
    rc =
        touch_session(s, g, hex, sid, now_real, &tot_events, &tot_lost, &found);
    if (rc != SQLITE_OK)
      return rc;
    g->result = same ? 1 : GTP_E_CONFLICT;
    g->seq = 0;
    g->stored_bytes = 0;
    return SQLITE_OK;
  }
  int64_t seq = sqlite3_last_insert_rowid(s->db);
  st = s->st[ST_INSERT_PAYLOAD];
  sqlite3_bind_int64(st, 1, seq);
  sqlite3_bind_blob64(st, 2, data, n, SQLITE_STATIC);
  rc = step_done(st);
  sqlite3_clear_bindings(st);
  /* Without its summary (out of memory) the generation would be stored
   * but missing from every summary total: fail the transaction instead
   * (store error: the daemon closes the connection and the agent resends,
   * with memory back by then). */
  if (rc == SQLITE_OK && !s->no_summary &&
      (it->sum == NULL || it->sum->status == -ENOMEM))
    rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK && it->sum != NULL && !s->no_summary) { /* same txn */
    store_rollup_gen where = {g->start_ns, g->end_ns, svc, svc_len};
    rc = store_summary_put(s->sum, seq, g->session, g->gen, it->sum,
                           svc_len != SIZE_MAX ? &where : NULL);
  }
  if (rc != SQLITE_OK)
    return rc;
  g->result = 0;
  g->seq = seq;
  g->stored_bytes = n;
  if (g->end_ns > g->start_ns && g->end_ns - g->start_ns > *span)
    *span = g->end_ns - g->start_ns;
  return SQLITE_OK;
}

static int set_meta_int(store *s, const char *key, int64_t v) {
  sqlite3_stmt *st = s->st[ST_SET_META];
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, v);
  return step_done(st);
}

void store_commit_batch(store *s, zitem *items, size_t n) {
  if (s->cfg.test_delay_ms) {
    struct timespec d = {s->cfg.test_delay_ms / 1000,
                         (long)(s->cfg.test_delay_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR)
      ;
  }
  int64_t t0 = now_ns(CLOCK_MONOTONIC);
  int64_t now_real = now_ns(CLOCK_REALTIME);
  int64_t span = s->max_span_ns;
  int rc = step_done(s->st[ST_BEGIN]);
  store_rollup *ru = store_summary_rollup(s->sum);
  store_rollup_reset(ru);      /* store_rollup.c invariant 2 */
  store_summary_reset(s->sum); /* sum_rows.h invariant 2 */
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
    rc = store_one(s, &items[i], now_real, &span);
  if (rc == SQLITE_OK && span > s->max_span_ns)
    rc = set_meta_int(s, "max_span_ns", span);
  if (rc == SQLITE_OK) /* the summary rows of the batch, same txn */
    rc = store_summary_flush(s->sum);
  if (rc == SQLITE_OK && ru != NULL)
    rc = store_rollup_flush(ru); /* the rollups of the batch */
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  int64_t dt = now_ns(CLOCK_MONOTONIC) - t0;

  if (rc != SQLITE_OK && n > 1 && !rc_is_full(rc)) {
    /* Not a space problem, so possibly one bad generation: retry each in
     * its own transaction so the others are not refused with it (a refused
     * generation is not resent by the agent). */
    store_log_error(s, "batch commit (retrying one by one)", rc);
    rollback(s);
    for (size_t i = 0; i < n; i++)
      store_commit_batch(s, &items[i], 1);
    return;
  }
  if (rc != SQLITE_OK) {
    int res;
    if (rc_is_full(rc)) {
      res = GTP_E_DISKFULL;
      stats_set_disk_full(s, 1);
    } else {
      /* Constraint errors (e.g. a trigger) are the generation's fault, not
       * the store's: the agent must not resend it. */
      res = (rc & 0xff) == SQLITE_CONSTRAINT ? GTP_E_CORRUPT
            : store_err(rc)                  ? store_err(rc)
                                             : GTP_E_INTERNAL;
      store_log_error(s, "commit", rc);
    }
    rollback(s); /* invariant 5 */
    for (size_t i = 0; i < n; i++) {
      items[i].g->result = res;
      items[i].g->bad_events = 0; /* the batch's error is the result */
      items[i].g->seq = 0;
      items[i].g->stored_bytes = 0;
    }
  } else {
    s->max_span_ns = span;
    uint64_t ok = 0, okb = 0, dup = 0;
    for (size_t i = 0; i < n; i++) {
      /* invariant 4. The entry exists (store_submit bound the key), so
       * this does not allocate (store_index.c invariant 4); a generation
       * submitted without a key whose note fails only loses its resume
       * hint, and what the agent resends is found a duplicate. */
      (void)store_index_note_gen(s->idx, items[i].g->session, items[i].g->gen);
      sidc_put(s, items[i].g->session, items[i].sid); /* invariant 13 */
      if (items[i].g->result == 1) {
        dup++;
      } else if (items[i].g->result == 0) {
        ok++;
        okb += items[i].g->len;
      }
    }
    pthread_mutex_lock(&s->st_lock);
    s->stats.committed_gens += ok;
    s->stats.committed_bytes += okb;
    s->stats.duplicate_gens += dup;
    s->stats.transactions++;
    s->stats.commit_ns_total += (uint64_t)dt;
    if ((uint64_t)dt > s->stats.commit_ns_max)
      s->stats.commit_ns_max = (uint64_t)dt;
    s->stats.disk_full = 0; /* a commit is the best proof of free space */
    pthread_mutex_unlock(&s->st_lock);
  }
  for (size_t i = 0; i < n; i++) {
    if (items[i].z != NULL)
      __atomic_fetch_sub(&s->scratch_bytes, items[i].zlen, __ATOMIC_RELAXED);
    free(items[i].z);
    items[i].z = NULL;
    __atomic_fetch_sub(&s->scratch_bytes, store_sum_bytes(items[i].sum),
                       __ATOMIC_RELAXED);
    store_sum_free(items[i].sum);
    items[i].sum = NULL;
    s->done(s->done_ctx, items[i].g); /* invariant 2: after COMMIT returned */
  }
}
