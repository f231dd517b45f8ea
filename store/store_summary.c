/* store_summary.c: generation summaries into SQLite (see store_summary.h and
 * the sum_* tables of store_schema.h).
 *
 * Backfill: a database migrated from schema 3 has generations without
 * summaries. At open, `below` is set to the highest seq then stored: every
 * generation committed later is summarized at commit, so only seq <= below
 * can lack one. Each call takes the next few of those, newest first (recent
 * data is what users search first), and moves `below` down past them.
 *
 * Invariants:
 *   1. A summary's rows MUST be written in the transaction that inserts the
 *      generation (or, for backfill, in one transaction per batch with a
 *      sum_gens row last), otherwise a crash could leave a generation with
 *      half a summary that search would trust as whole.
 *   2. A generation MUST get a sum_gens row even when it cannot be
 *      summarized (status != 0), otherwise backfill would retry it forever;
 *      search treats such a generation as "decode to answer".
 *   3. Every generation with seq > below has a summary row or is being
 *      committed with one, so backfill never has to look above below.
 */
#include "config.h"

#include "store_summary.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gtp_error.h"
#include "store_int.h"
#include "store_schema.h"
#include "sum_carry.h"
#include "sum_json.h"
#include "sum_rows.h"

/* A JSON scratch buffer that grew past this is given back after use. */
#define JSON_KEEP (64 * 1024)

/* ---------------------------------------------------------- the pure part */

store_sum_item *store_sum_build(const uint8_t *payload, size_t len) {
  store_sum_item *it = calloc(1, sizeof *it);
  if (!it)
    return NULL;
  size_t used = 0;
  /* Lazy: the summary decodes (and so checks) every event itself. */
  int rc = gtp_gen_parse_lazy(payload, len, &it->g, &used);
  if (rc == -ENOMEM) { /* not the generation's fault: no summary yet */
    free(it);
    return NULL;
  }
  if (rc < 0) {
    memset(&it->g, 0, sizeof it->g); /* nothing of it stays allocated */
    it->status = rc;
    return it;
  }
  rc = gtp_summary_compute(&it->g, &it->sum);
  if (rc == -ENOMEM) {
    gtp_gen_fini(&it->g);
    free(it);
    return NULL;
  }
  it->status = rc;
  return it;
}

store_sum_item *store_sum_build_checked(const uint8_t *payload, size_t len,
                                        int summarize) {
  store_sum_item *it = calloc(1, sizeof *it);
  if (!it)
    return NULL;
  size_t used = 0;
  int rc = gtp_gen_parse_lazy(payload, len, &it->g, &used);
  if (rc == -ENOMEM) {
    free(it);
    return NULL;
  }
  if (rc == 0 && used != len) {
    gtp_gen_fini(&it->g);
    rc = GTP_E_CORRUPT; /* bytes after the GEN_END */
  }
  if (rc < 0) {
    memset(&it->g, 0, sizeof it->g);
    it->status = it->bad = rc;
    return it;
  }
  if (!summarize) {
    it->bad = gtp_gen_check_events(&it->g);
    it->status = -ENOMEM; /* no summary: no rows */
    return it;
  }
  rc = gtp_summary_compute_check(&it->g, &it->sum, &it->bad);
  it->status = it->bad ? it->bad : rc;
  return it;
}

void store_sum_free(store_sum_item *it) {
  if (!it)
    return;
  gtp_gen_fini(&it->g);
  gtp_summary_fini(&it->sum);
  free(it->carry_names);
  free(it);
}

uint64_t store_sum_bytes(const store_sum_item *it) {
  if (!it)
    return 0;
  const gtp_summary *s = &it->sum;
  return sizeof *it + s->nnames * sizeof *s->names +
         s->ncounters * sizeof *s->counters + s->nlogs * sizeof *s->logs +
         s->nspans * sizeof *s->spans + it->g.nstrings * sizeof *it->g.strings +
         it->g.nstacks * sizeof *it->g.stacks +
         it->g.nmodules * sizeof *it->g.modules;
}

/* ------------------------------------------------------------ the writer */

enum { SS_TODO, SS_COUNT_ };

static const char *const ss_sql[SS_COUNT_] = {
    [SS_TODO] = "SELECT g.seq, g.codec, g.bytes, p.data FROM generations g"
                " JOIN payloads p ON p.seq = g.seq WHERE g.seq <= ?1 AND"
                " NOT EXISTS (SELECT 1 FROM sum_gens s WHERE s.seq = g.seq)"
                " ORDER BY g.seq DESC LIMIT ?2",
};

struct store_summary {
  store_rollup *ru; /* the rollups the names are added to */
  sum_carry *carry; /* spans across generation edges, per session */
  sqlite3 *db;
  sqlite3_stmt *st[SS_COUNT_];
  sum_rows *rows; /* this transaction's rows, written before COMMIT */
  gtp_wbuf json;  /* scratch: one summary's JSON columns */
  ZSTD_DCtx *dctx;
  int64_t below;    /* invariant 3 */
  uint64_t pending; /* generations without a summary (estimate) */
};

/* meta.summary_below: readers (store_search.c) look for generations without
 * a summary only at or below it; 0 = none. */
static int set_below(store_summary *ss, int64_t below) {
  char sql[128];
  snprintf(sql, sizeof sql,
           "INSERT OR REPLACE INTO meta(key, value)"
           " VALUES('summary_below', '%lld')",
           (long long)below);
  return sqlite3_exec(ss->db, sql, NULL, NULL, NULL);
}

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

int store_summary_open(sqlite3 *db, store_summary **out) {
  store_summary *ss = calloc(1, sizeof *ss);
  if (!ss)
    return -ENOMEM;
  ss->db = db;
  gtp_wbuf_init(&ss->json, 0);
  if (!(ss->carry = sum_carry_new()) || !(ss->rows = sum_rows_new(db))) {
    sum_carry_free(ss->carry);
    free(ss);
    return -ENOMEM;
  }
  int rc = SQLITE_OK;
  for (int i = 0; i < SS_COUNT_ && rc == SQLITE_OK; i++)
    rc = sqlite3_prepare_v3(db, ss_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                            &ss->st[i], NULL);
  ss->dctx = ZSTD_createDCtx();
  int ru_err = rc == SQLITE_OK ? store_rollup_open(db, &ss->ru) : 0;
  if (ru_err) {
    store_summary_close(ss);
    return ru_err;
  }
  sqlite3_stmt *q = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(
        db,
        "SELECT coalesce(max(seq), 0), (SELECT count(*) FROM generations g"
        " WHERE NOT EXISTS (SELECT 1 FROM sum_gens s WHERE s.seq = g.seq))"
        " FROM generations",
        -1, &q, NULL);
  if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
    ss->below = sqlite3_column_int64(q, 0);
    ss->pending = (uint64_t)sqlite3_column_int64(q, 1);
  }
  sqlite3_finalize(q);
  if (ss->pending == 0)
    ss->below = 0;
  if (rc == SQLITE_OK)
    rc = set_below(ss, ss->below);
  if (rc != SQLITE_OK || !ss->dctx) {
    int err = rc != SQLITE_OK ? store_sqlite_err(rc) : -ENOMEM;
    store_summary_close(ss);
    return err ? err : GTP_E_INTERNAL;
  }
  *out = ss;
  return 0;
}

void store_summary_close(store_summary *ss) {
  if (!ss)
    return;
  sum_carry_free(ss->carry);
  sum_rows_free(ss->rows);
  gtp_wbuf_fini(&ss->json);
  for (int i = 0; i < SS_COUNT_; i++)
    sqlite3_finalize(ss->st[i]);
  store_rollup_close(ss->ru);
  ZSTD_freeDCtx(ss->dctx);
  free(ss);
}

/* The JSON text j[a, b) as a column value (NULL when empty). */
static sum_rows_val json_col(const gtp_wbuf *j, size_t a, size_t b) {
  return sum_rows_text_copy(b > a ? j->data + a : NULL, b - a);
}

int store_summary_put(store_summary *ss, int64_t seq, const uint8_t session[16],
                      uint64_t gen, store_sum_item *it,
                      const store_rollup_gen *where) {
  /* Out of memory while carrying loses only the pairing across this edge
   * (those ends stay unmatched), never the generation. */
  if (session && it->status == 0)
    (void)sum_carry_apply(ss->carry, session, gen, it);
  const gtp_summary *s = &it->sum;
  int ok = it->status == 0;
  sum_rows *r = ss->rows;
  /* The rows wait in memory for store_summary_flush (sum_rows.h); those
   * of a table with a key are added last-first (sum_rows.h invariant 1). */
  /* Spans, counters and logs go into the sum_gens row as JSON text
   * (sum_json.h), each a slice of one scratch buffer that the add copies. */
  gtp_wbuf *j = &ss->json;
  gtp_wbuf_reset(j);
  size_t at[4] = {0, 0, 0, 0};
  if (ok) {
    (void)sum_json_spans(j, s);
    at[1] = j->len;
    (void)sum_json_counters(j, s);
    at[2] = j->len;
    (void)sum_json_logs(j, s);
    at[3] = j->len;
  }
  int err = j->err;
  sum_rows_val g[] = {sum_rows_int(seq),
                      sum_rows_int(ok ? clamp64(s->span_floor_ns) : 0),
                      sum_rows_int(clamp64(s->open_at_end)),
                      sum_rows_int(clamp64(s->unmatched_ends)),
                      sum_rows_int(it->status),
                      json_col(j, at[0], at[1]),
                      json_col(j, at[1], at[2]),
                      json_col(j, at[2], at[3])};
  if (err == 0)
    err = sum_rows_add(r, SUM_ROWS_GENS, g);
  if (j->cap > JSON_KEEP) { /* one huge summary keeps no memory */
    gtp_wbuf_fini(j);
    gtp_wbuf_init(j, 0);
  }
  uint8_t hist[GTP_SUM_HIST_MAX];
  for (size_t i = ok ? s->nnames : 0; err == 0 && i-- > 0;) {
    const gtp_sum_name *n = &s->names[i];
    size_t hl = gtp_sum_hist_encode(n->hist, hist);
    sum_rows_val v[] = {sum_rows_text(n->name),
                        sum_rows_int(seq),
                        sum_rows_int(n->kind),
                        sum_rows_int(clamp64(n->count)),
                        sum_rows_int(clamp64(n->total_ns)),
                        sum_rows_int(clamp64(n->min_ns)),
                        sum_rows_int(clamp64(n->max_ns)),
                        sum_rows_blob(hist, hl)};
    err = sum_rows_add(r, SUM_ROWS_NAMES, v);
  }
  if (err)
    return SQLITE_NOMEM; /* the transaction fails; nothing half-written */
  int rc = SQLITE_OK;
  /* Without where, the rollup reads the rows back: they must be in. */
  if (!where)
    rc = sum_rows_flush(r);
  /* The hour's rollup takes the names (store_rollup.c; the transaction's
   * owner flushes it before COMMIT). */
  if (rc == SQLITE_OK && ok && s->nnames > 0)
    rc = where ? store_rollup_add_summary(ss->ru, where, s)
               : store_rollup_add(ss->ru, seq);
  return rc;
}

int store_summary_flush(store_summary *ss) {
  return ss ? sum_rows_flush(ss->rows) : SQLITE_OK;
}

void store_summary_reset(store_summary *ss) {
  if (ss)
    sum_rows_reset(ss->rows);
}

store_rollup *store_summary_rollup(store_summary *ss) {
  return ss ? ss->ru : NULL;
}

/* The stored bytes of one row of SS_TODO, decompressed (malloc'd). */
static uint8_t *todo_bytes(store_summary *ss, sqlite3_stmt *st, size_t *len) {
  const char *codec = (const char *)sqlite3_column_text(st, 1);
  int64_t want = sqlite3_column_int64(st, 2);
  const void *data = sqlite3_column_blob(st, 3);
  size_t n = (size_t)sqlite3_column_bytes(st, 3);
  if (!codec || want <= 0 || (uint64_t)want > GTP_GEN_MAX_BYTES || !data)
    return NULL;
  uint8_t *out = malloc((size_t)want);
  if (!out)
    return NULL;
  if (strcmp(codec, STORE_CODEC_NONE) == 0 && n == (size_t)want) {
    memcpy(out, data, n);
  } else if (strcmp(codec, STORE_CODEC_ZSTD) != 0 ||
             ZSTD_decompressDCtx(ss->dctx, out, (size_t)want, data, n) !=
                 (size_t)want) {
    free(out);
    return NULL;
  }
  *len = (size_t)want;
  return out;
}

int store_summary_backfill(store_summary *ss, int max_gens, uint64_t *pending) {
  *pending = ss->pending;
  if (max_gens <= 0)
    return 0;
  if (ss->below <= 0 || ss->pending == 0) {
    ss->pending = 0;
    *pending = 0;
    return 0;
  }
  int rc = sqlite3_exec(ss->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return store_sqlite_err(rc);
  store_rollup_reset(ss->ru);
  sum_rows_reset(ss->rows); /* sum_rows.h invariant 2 */
  sqlite3_stmt *st = ss->st[SS_TODO];
  sqlite3_bind_int64(st, 1, ss->below);
  sqlite3_bind_int(st, 2, max_gens);
  int done = 0, oom = 0;
  int64_t low = ss->below;
  while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    int64_t seq = sqlite3_column_int64(st, 0);
    size_t len = 0;
    uint8_t *bytes = todo_bytes(ss, st, &len);
    store_sum_item bad = {.status = GTP_E_CORRUPT};
    store_sum_item *it = bytes ? store_sum_build(bytes, len) : &bad;
    if (!it) { /* out of memory: try again next time */
      free(bytes);
      oom = 1;
      break;
    }
    rc = store_summary_put(ss, seq, NULL, 0, it, NULL); /* invariant 2 */
    if (it != &bad)
      store_sum_free(it);
    free(bytes);
    low = seq - 1;
    done++;
  }
  if (rc == SQLITE_DONE || rc == SQLITE_ROW)
    rc = SQLITE_OK;
  int exhausted = rc == SQLITE_OK && !oom && done < max_gens;
  sqlite3_reset(st);
  if (rc == SQLITE_OK)
    rc = store_rollup_flush(ss->ru);
  if (rc == SQLITE_OK)
    rc = set_below(ss, exhausted ? 0 : low);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(ss->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_exec(ss->db, "ROLLBACK", NULL, NULL, NULL);
    return store_sqlite_err(rc) ? store_sqlite_err(rc) : GTP_E_INTERNAL;
  }
  ss->below = exhausted ? 0 : low;
  ss->pending = exhausted                      ? 0
                : ss->pending > (uint64_t)done ? ss->pending - (uint64_t)done
                                               : 0;
  *pending = ss->pending;
  return done;
}
