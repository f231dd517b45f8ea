/* sum_rows.c: multi-row INSERTs of the summary rows (see sum_rows.h). */
#include "config.h"

#include "sum_rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* Chunk sizes, largest first; a flush of n rows takes the largest that fits
 * each time (40 rows: 32 + 8; 20: 16 + 4, two statements where 8, 2, 1
 * made four: -0.6% instructions per generation at 20 per transaction,
 * bench_commit). Each (table, size) is one statement, prepared once, on
 * first use. */
static const unsigned chunk_rows[] = {SUM_ROWS_CHUNK_MAX, 32, 16, 8, 4, 2, 1};
#define NCHUNK (sizeof chunk_rows / sizeof chunk_rows[0])

static const struct {
  const char *head; /* up to VALUES */
  unsigned ncols;
} tab[SUM_ROWS_TABLES_] = {
    [SUM_ROWS_GENS] = {"INSERT OR IGNORE INTO sum_gens(seq, floor_ns,"
                       " open_at_end, unmatched_ends, status, spans,"
                       " counters, logs) VALUES",
                       8},
    [SUM_ROWS_NAMES] = {"INSERT OR IGNORE INTO sum_names(name, seq, kind,"
                        " count, total_ns, min_ns, max_ns, hist) VALUES",
                        8},
};

/* A buffer that grew past this many values is given back after a flush
 * (one huge generation does not keep its rows' memory). */
#define KEEP_VALS 4096
#define KEEP_BLOB (64 * 1024)

typedef struct {
  sum_rows_val *v; /* ncols per row; a BLOB's i is its offset in blob */
  size_t n, cap;   /* values */
} rows_buf;

struct sum_rows {
  sqlite3 *db;
  rows_buf b[SUM_ROWS_TABLES_];
  uint8_t *blob; /* the histograms' and the copied texts' bytes */
  size_t blob_n, blob_cap;
  sqlite3_stmt *st[SUM_ROWS_TABLES_][NCHUNK];
};

sum_rows *sum_rows_new(sqlite3 *db) {
  sum_rows *r = calloc(1, sizeof *r);
  if (r)
    r->db = db;
  return r;
}

void sum_rows_free(sum_rows *r) {
  if (!r)
    return;
  for (int t = 0; t < SUM_ROWS_TABLES_; t++) {
    free(r->b[t].v);
    for (size_t c = 0; c < NCHUNK; c++)
      sqlite3_finalize(r->st[t][c]);
  }
  free(r->blob);
  free(r);
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
  return gtp_array_grow(p, cap, need, size, 64);
}

int sum_rows_add(sum_rows *r, int t, const sum_rows_val *vals) {
  rows_buf *b = &r->b[t];
  unsigned nc = tab[t].ncols;
  size_t blob_need = r->blob_n;
  for (unsigned i = 0; i < nc; i++)
    if (vals[i].type == SQLITE_BLOB || vals[i].copy)
      blob_need += vals[i].len;
  if (grow((void **)&b->v, &b->cap, b->n + nc, sizeof *b->v) < 0 ||
      grow((void **)&r->blob, &r->blob_cap, blob_need, 1) < 0)
    return -ENOMEM;
  for (unsigned i = 0; i < nc; i++) {
    sum_rows_val v = vals[i];
    if (v.type == SQLITE_BLOB || v.copy) {
      if (v.len)
        memcpy(r->blob + r->blob_n, v.p, v.len);
      v.i = (int64_t)r->blob_n;
      v.p = NULL;
      r->blob_n += v.len;
    }
    b->v[b->n++] = v;
  }
  return 0;
}

size_t sum_rows_pending(const sum_rows *r) {
  size_t n = 0;
  for (int t = 0; t < SUM_ROWS_TABLES_; t++)
    n += r->b[t].n / tab[t].ncols;
  return n;
}

void sum_rows_reset(sum_rows *r) {
  for (int t = 0; t < SUM_ROWS_TABLES_; t++) {
    rows_buf *b = &r->b[t];
    b->n = 0;
    if (b->cap > KEEP_VALS) {
      free(b->v);
      b->v = NULL;
      b->cap = 0;
    }
  }
  r->blob_n = 0;
  if (r->blob_cap > KEEP_BLOB) {
    free(r->blob);
    r->blob = NULL;
    r->blob_cap = 0;
  }
}

char *sum_rows_values_sql(const char *head, unsigned ncols, unsigned nrows,
                          const char *tail, size_t *len) {
  size_t hl = strlen(head), tl = tail ? strlen(tail) : 0;
  char *sql = malloc(hl + (size_t)nrows * (2 * ncols + 2) + tl + 1);
  if (!sql)
    return NULL;
  char *p = sql;
  memcpy(p, head, hl);
  p += hl;
  for (unsigned i = 0; i < nrows; i++) {
    if (i)
      *p++ = ',';
    *p++ = '(';
    for (unsigned j = 0; j < ncols; j++) {
      if (j)
        *p++ = ',';
      *p++ = '?';
    }
    *p++ = ')';
  }
  if (tl)
    memcpy(p, tail, tl);
  p += tl;
  *p = '\0';
  *len = (size_t)(p - sql);
  return sql;
}

/* The statement for chunk c of table t: head + "(?,..,?)" x rows. */
static sqlite3_stmt *chunk_stmt(sum_rows *r, int t, size_t c, int *rc) {
  if (r->st[t][c])
    return r->st[t][c];
  size_t len = 0;
  char *sql =
      sum_rows_values_sql(tab[t].head, tab[t].ncols, chunk_rows[c], NULL, &len);
  if (!sql) {
    *rc = SQLITE_NOMEM;
    return NULL;
  }
  *rc = sqlite3_prepare_v3(r->db, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           &r->st[t][c], NULL);
  free(sql);
  return *rc == SQLITE_OK ? r->st[t][c] : NULL;
}

static int write_table(sum_rows *r, int t) {
  rows_buf *b = &r->b[t];
  unsigned nc = tab[t].ncols;
  size_t left = b->n / nc, at = 0;
  int rc = SQLITE_OK;
  while (rc == SQLITE_OK && left > 0) {
    size_t c = 0;
    while (chunk_rows[c] > left)
      c++;
    sqlite3_stmt *st = chunk_stmt(r, t, c, &rc);
    if (!st)
      break;
    size_t nv = (size_t)chunk_rows[c] * nc;
    for (size_t k = 0; k < nv; k++) {
      const sum_rows_val *v = &b->v[at + k];
      int col = (int)k + 1;
      if (v->type == SQLITE_INTEGER)
        sqlite3_bind_int64(st, col, v->i);
      else if (v->type == SQLITE_NULL)
        sqlite3_bind_null(st, col);
      else if (v->type == SQLITE_TEXT && v->copy)
        sqlite3_bind_text(st, col, (const char *)r->blob + v->i, (int)v->len,
                          SQLITE_STATIC);
      else if (v->type == SQLITE_TEXT)
        sqlite3_bind_text(st, col, v->p, (int)v->len, SQLITE_STATIC);
      else if (v->len == 0) /* empty, not NULL (NOT NULL: IGNORE drops) */
        sqlite3_bind_zeroblob(st, col, 0);
      else
        sqlite3_bind_blob(st, col, r->blob + v->i, (int)v->len, SQLITE_STATIC);
    }
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    at += nv;
    left -= chunk_rows[c];
  }
  return rc;
}

int sum_rows_flush(sum_rows *r) {
  int rc = SQLITE_OK;
  for (int t = 0; t < SUM_ROWS_TABLES_ && rc == SQLITE_OK; t++)
    rc = write_table(r, t);
  sum_rows_reset(r); /* invariant 2 */
  return rc;
}
