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
#include "store_genrows.h"
#include "store_schema.h"
#include "store_writer.h"

/* The sid cache (invariant 13): STORE_SIDC_WAYS-way set-associative, store
 * thread only. Direct-mapped, two sessions of one slot evicted each other
 * at every commit: at 10,000 sessions in 65,536 slots 14% of them did, and
 * each of their generations paid the upsert (its INSERT attempt, conflict,
 * json_valid and RETURNING), the CRC probe and a second UPDATE instead of
 * ST_SESSION_ADD_CHECKED alone: about 5,000 instructions per generation of
 * every session (bench_commit, 10,000 sessions, 105 per transaction;
 * bench/RESULTS.md, ninth session). With four ways a set overflows only
 * when five of its sessions are active (10,000 random ids: 0.45% of the
 * sessions are in such a set); a session it does not hold is looked up
 * (find_sid). */
static sidc_ent *sidc_set(const store *s, const uint8_t key[16]) {
  uint64_t a, b;
  memcpy(&a, key, 8);
  memcpy(&b, key + 8, 8);
  uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  size_t sets = STORE_SIDC_SLOTS / STORE_SIDC_WAYS;
  return &s->sidc[(size_t)(h & (sets - 1)) * STORE_SIDC_WAYS];
}

/* The cached sessions.id of a session, 0 if none. */
static int64_t sidc_get(const store *s, const uint8_t key[16]) {
  if (s->sidc == NULL)
    return 0;
  const sidc_ent *e = sidc_set(s, key);
  for (unsigned w = 0; w < STORE_SIDC_WAYS; w++)
    if (e[w].sid > 0 && memcmp(e[w].key, key, 16) == 0)
      return e[w].sid;
  return 0;
}

/* Caches sid, only after the COMMIT that holds its row: in its way if the
 * session has one, else in an empty way, else over a way chosen by a
 * counter (not the least recent: a fleet's round robin over five sessions
 * of one set would then miss every time). */
static void sidc_put(store *s, const uint8_t key[16], int64_t sid) {
  if (s->sidc == NULL || sid <= 0)
    return;
  sidc_ent *e = sidc_set(s, key), *to = NULL;
  for (unsigned w = 0; w < STORE_SIDC_WAYS; w++) {
    if (e[w].sid > 0 && memcmp(e[w].key, key, 16) == 0) {
      e[w].sid = sid;
      return;
    }
    if (to == NULL && e[w].sid <= 0)
      to = &e[w];
  }
  if (to == NULL)
    to = &e[s->sidc_evict++ % STORE_SIDC_WAYS];
  memcpy(to->key, key, 16);
  to->sid = sid;
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
  int fast = it->fast && s->cfg.zstd_fast;
  enum store_zgen kind = STORE_ZG_RAW;
  if (g->len < STORE_ZSTD_MIN ||
      (fast ? s->cfg.zstd_fast_level == 0 : s->cfg.no_compress))
    goto raw;
  size_t bound = ZSTD_compressBound(g->len);
  uint8_t *z = malloc(bound);
  if (!z)
    goto raw; /* storing raw is always correct */
  __atomic_fetch_add(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
  size_t n =
      fast ? store_zpol_compress_at(zp, s->cfg.zstd_fast_level, g->payload,
                                    g->len, z, bound)
           : store_zpol_compress(zp, g->session, g->payload, g->len, z, bound);
  if (ZSTD_isError(n) || n >= g->len) {
    free(z);
    __atomic_fetch_sub(&s->scratch_bytes, bound, __ATOMIC_RELAXED);
    goto raw;
  }
  kind = fast ? STORE_ZG_FAST : STORE_ZG_LEVEL;
  /* Give back the slack of the worst-case bound: queued items stay small. */
  uint8_t *fit = realloc(z, n);
  it->z = fit ? fit : z;
  it->zlen = n;
  /* What stays alive until the commit frees it: the n-byte copy. */
  __atomic_fetch_sub(&s->scratch_bytes, bound - n, __ATOMIC_RELAXED);
  it->codec = STORE_CODEC_ZSTD;
raw:
  __atomic_fetch_add(&s->zgens[kind], 1, __ATOMIC_RELAXED);
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

/* Checks a known session's row before its generation goes in, when
 * ST_SESSION_ADD_CHECKED did not move it (ST_SESSION_CHECK): *found = 0
 * if the row is gone or its id now names another session; *unbound = 1
 * while the row has no key hash. The row itself moves forward in
 * session_add: one write of it per generation, not two. Returns an SQLite
 * code. */
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

/* A generation between its session check and its rows (store_one ->
 * pend_flush), with the session row's service for the rollup: svc_ptr
 * points at the generation's own (when ST_SESSION_ADD_CHECKED found them
 * equal) or at svc, a copy of the row's; svc_len is SIZE_MAX when unknown
 * or too long (the rollup then reads the rows back). */
typedef struct pend {
  zitem *it;
  const char *svc_ptr;
  size_t svc_len;
  char svc[GTP_IDENT_STR_MAX + 1];
} pend;

/* The generations gathered for one multi-row write (store_genrows.h). */
typedef struct pend_set {
  pend p[STORE_GENROWS_MAX];
  store_genrow rows[STORE_GENROWS_MAX];
  size_t n;
} pend_set;

/* Writes the gathered generations' rows (store_genrows_write: every one
 * goes in, store_one checked), then completes each: its summary, result 0
 * and seq. Empties ps. Returns an SQLite code. */
static int pend_flush(store *s, pend_set *ps, int64_t *span) {
  size_t n = ps->n;
  ps->n = 0;
  if (n == 0)
    return SQLITE_OK;
  int rc = store_genrows_write(s->gr, ps->rows, n);
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
    zitem *it = ps->p[i].it;
    store_gen *g = it->g;
    int64_t seq = ps->rows[i].seq;
    /* Without its summary (out of memory) the generation would be stored
     * but missing from every summary total: fail the transaction instead
     * (store error: the daemon closes the connection and the agent
     * resends, with memory back by then). */
    if (!s->no_summary && (it->sum == NULL || it->sum->status == -ENOMEM))
      rc = SQLITE_NOMEM;
    if (rc == SQLITE_OK && it->sum != NULL && !s->no_summary) { /* same txn */
      size_t svc_len = ps->p[i].svc_len;
      store_rollup_gen where = {g->start_ns, g->end_ns, ps->p[i].svc_ptr,
                                svc_len};
      rc = store_summary_put(s->sum, seq, g->session, g->gen, it->sum,
                             svc_len != SIZE_MAX ? &where : NULL);
    }
    if (rc != SQLITE_OK)
      return rc;
    g->result = 0;
    g->seq = seq;
    g->stored_bytes = it->zlen;
    if (g->end_ns > g->start_ns && g->end_ns - g->start_ns > *span)
      *span = g->end_ns - g->start_ns;
  }
  return rc;
}

/* g's lost count (dropped + evicted + rejected) into *lost: 0 if it wraps
 * or passes INT64_MAX. */
static int lost_of(const store_gen *g, uint64_t *lost) {
  return !__builtin_add_overflow(g->end.dropped, g->end.evicted, lost) &&
         !__builtin_add_overflow(*lost, g->end.rejected, lost) &&
         *lost <= INT64_MAX;
}

/* Moves a known session's row for a new generation of it, if every check
 * passes (ST_SESSION_ADD_CHECKED): *moved = 1, and the generation goes in.
 * Returns an SQLite code. */
static int session_add_checked(store *s, const store_gen *g, const char *hex,
                               int64_t sid, int64_t lost, int64_t now_real,
                               const char *service, int *moved) {
  sqlite3_stmt *st = s->st[ST_SESSION_ADD_CHECKED];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_text(st, 2, hex, 32, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, (int64_t)g->end.events);
  sqlite3_bind_int64(st, 4, (int64_t)g->len);
  sqlite3_bind_int64(st, 5, lost);
  sqlite3_bind_int64(st, 6, now_real);
  sqlite3_bind_int64(st, 7, (int64_t)g->gen);
  sqlite3_bind_text(st, 8, service, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 9, g->has_key);
  int rc = step_done(st);
  *moved = rc == SQLITE_OK && sqlite3_changes(s->db) == 1;
  return rc;
}

/* Moves a session's row for a new generation (ST_SESSION_ADD), after the
 * checks of store_one's slow path. Returns an SQLite code. */
static int session_add(store *s, const store_gen *g, int64_t sid, int64_t lost,
                       int64_t now_real) {
  sqlite3_stmt *st = s->st[ST_SESSION_ADD];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, (int64_t)g->end.events);
  sqlite3_bind_int64(st, 3, (int64_t)g->len);
  sqlite3_bind_int64(st, 4, lost);
  sqlite3_bind_int64(st, 5, now_real);
  sqlite3_bind_int64(st, 6, (int64_t)g->gen);
  return step_done(st);
}

/* Whether (sid, g->gen) is stored already (*found) and, if so, with g's
 * bytes (*same: its CRC; a NULL crc, a row from before schema 3, cannot
 * tell, so it is taken as the same). Returns an SQLite code. */
static int gen_stored(store *s, int64_t sid, const store_gen *g, int *found,
                      int *same) {
  sqlite3_stmt *st = s->st[ST_GEN_CRC];
  sqlite3_bind_int64(st, 1, sid);
  sqlite3_bind_int64(st, 2, (int64_t)g->gen);
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  *same = !*found || sqlite3_column_type(st, 0) == SQLITE_NULL ||
          (uint64_t)sqlite3_column_int64(st, 0) == g->end.crc;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The id of the session's row (ST_SESSION_ID) into *sid, 0 when it has
 * none, for a session the sid cache does not hold: a known session then
 * takes the fast path like a cached one (a miss cost about 40,800
 * instructions on the slow path, and costs about 3,400 with the lookup:
 * bench_commit with a 4-entry cache, bench/RESULTS.md). The row is the
 * open transaction's view, so a row this transaction made counts too; the
 * cache itself is still filled only after COMMIT (invariant 13). Returns
 * an SQLite code. */
static int find_sid(store *s, const char *hex, int64_t *sid) {
  sqlite3_stmt *st = s->st[ST_SESSION_ID];
  sqlite3_bind_text(st, 1, hex, 32, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  *sid = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Sets g's result to a refusal or duplicate: nothing of it is written. */
static void not_written(store_gen *g, int result) {
  g->result = result;
  g->seq = 0;
  g->stored_bytes = 0;
}

/* Checks one generation and its session inside the open transaction, moves
 * the session row, and adds the generation to ps for pend_flush, which
 * writes its rows; a generation refused here (bad events, totals that
 * would wrap) or stored already gets its result now. A second generation
 * of a session already in ps first flushes ps, so its checks see the first
 * one's row (store_genrows.h invariant 2). Returns an SQLite code; sets
 * it->sid. */
static int store_one(store *s, zitem *it, int64_t now_real, pend_set *ps,
                     int64_t *span) {
  store_gen *g = it->g;
  /* Small generations skip the compressors (store_submit's fast path):
   * their summary and check are made here, cheap at that size. */
  store_commit_summarize(s, it);
  g->bad_events = 0;
  if (g->check_events && (it->sum == NULL || it->sum->bad)) {
    /* Invalid events are refused before anything is written; out of memory
     * before the check is the store's failure, not the generation's. */
    g->bad_events = it->sum != NULL;
    not_written(g, it->sum != NULL ? it->sum->bad : -ENOMEM);
    return SQLITE_OK;
  }
  int rc = SQLITE_OK;
  for (size_t i = 0; i < ps->n; i++)
    if (memcmp(ps->p[i].it->g->session, g->session, 16) == 0) {
      rc = pend_flush(s, ps, span);
      break;
    }
  if (rc == SQLITE_OK && ps->n == STORE_GENROWS_MAX)
    rc = pend_flush(s, ps, span);
  if (rc != SQLITE_OK)
    return rc;
  pend *p = &ps->p[ps->n];
  char hex[33];
  gtp_session_hex(g->session, hex);
  int64_t sid = sidc_get(s, g->session), tot_events = 0, tot_lost = 0;
  if (sid == 0 && (rc = find_sid(s, hex, &sid)) != SQLITE_OK)
    return rc;
  uint64_t lost = 0;
  int lost_ok = lost_of(g, &lost);
  int found = 0, unbound = 0, moved = 0, same = 0;
  const char *service = str_or(g->service, "");
  /* The fast path: a session committed before, every check in the one
   * statement that moves its row. */
  if (sid > 0 && lost_ok && g->end.events <= INT64_MAX && g->gen <= INT64_MAX) {
    rc = session_add_checked(s, g, hex, sid, (int64_t)lost, now_real, service,
                             &moved);
    if (rc != SQLITE_OK)
      return rc;
  }
  if (moved) {
    size_t len = strlen(service);
    p->svc_ptr = service;
    p->svc_len = len <= GTP_IDENT_STR_MAX ? len : SIZE_MAX;
    goto queue;
  }
  /* The slow path: a new session, or one check failed; find which. */
  p->svc_ptr = p->svc;
  p->svc_len = SIZE_MAX;
  if (sid > 0) {
    rc = check_session(s, hex, sid, &tot_events, &tot_lost, &unbound, &found,
                       p->svc, &p->svc_len);
    /* The key of a session bound after its first commit (rare): the touch
     * writes it (and moves the row, which session_add does again). */
    if (rc == SQLITE_OK && found && unbound && g->has_key)
      rc = touch_session(s, g, hex, sid, now_real, &tot_events, &tot_lost,
                         &found);
    if (rc != SQLITE_OK)
      return rc;
    if (!found)
      sid = 0; /* the row is gone: the upsert makes it again */
  }
  if (sid == 0) {
    rc = upsert_session(s, g, hex, now_real, &sid, &tot_events, &tot_lost,
                        p->svc, &p->svc_len);
    if (rc != SQLITE_OK)
      return rc;
  }
  it->sid = sid;
  /* Invariant 11: the session totals must not wrap. */
  uint64_t ev = 0, tl = 0;
  if (!lost_ok || tot_events < 0 || tot_lost < 0 ||
      __builtin_add_overflow(g->end.events, (uint64_t)tot_events, &ev) ||
      __builtin_add_overflow(lost, (uint64_t)tot_lost, &tl) || ev > INT64_MAX ||
      tl > INT64_MAX || g->gen > INT64_MAX) {
    not_written(g, GTP_E_TOOBIG);
    return SQLITE_OK;
  }
  /* Invariants 3 and 12: stored already. The same bytes are a resend
   * after a lost ACK; other bytes under the same (session, gen) are
   * refused and the stored ones stay. Either way the agent is alive, so
   * its row still moves forward. */
  int touched = 0;
  rc = gen_stored(s, sid, g, &found, &same);
  if (rc == SQLITE_OK && found)
    rc = touch_session(s, g, hex, sid, now_real, &tot_events, &tot_lost,
                       &touched);
  if (rc != SQLITE_OK)
    return rc;
  if (found) {
    not_written(g, same ? 1 : GTP_E_CONFLICT);
    return SQLITE_OK;
  }
  rc = session_add(s, g, sid, (int64_t)lost, now_real);
  if (rc != SQLITE_OK)
    return rc;
queue:
  it->sid = sid;
  p->it = it;
  ps->rows[ps->n] = (store_genrow){.sid = sid,
                                   .gen = (int64_t)g->gen,
                                   .start_ns = g->start_ns,
                                   .end_ns = g->end_ns,
                                   .events = (int64_t)g->end.events,
                                   .bytes = (int64_t)g->len,
                                   .stored_bytes = (int64_t)it->zlen,
                                   .dropped = (int64_t)g->end.dropped,
                                   .evicted = (int64_t)g->end.evicted,
                                   .rejected = (int64_t)g->end.rejected,
                                   .committed_ns = now_real,
                                   .crc = (int64_t)g->end.crc,
                                   .codec = it->codec,
                                   .data = it->z ? it->z : g->payload,
                                   .len = it->zlen};
  ps->n++;
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
  pend_set pending;            /* about 37 KB of the store thread's stack */
  pend_set *ps = &pending;
  ps->n = 0;
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
    rc = store_one(s, &items[i], now_real, ps, &span);
  if (rc == SQLITE_OK)
    rc = pend_flush(s, ps, &span);
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
