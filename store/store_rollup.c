/* store_rollup.c: ten-minute rollups of sum_names (store_rollup.h for the
 * contract, store_schema.h for the tables).
 *
 * Design: at commit, a generation's rollup input is taken from the summary
 * in memory whose sum_names rows store_summary_put has just inserted, with
 * the slot from the generation's start and end and the service from its
 * session row (store_rollup_add_summary: the same values the rows hold,
 * without reading them back; the SELECT was 23,000 instructions of a
 * fleet's small generation, 11% of its commit). Backfill, which has no
 * session row at hand, reads the rows back (store_rollup_add: one SELECT
 * by seq, which gives the slot and the service the readers join on). They
 * are summed in memory per (slot, service, kind, name) and written by one
 * upsert per key when the transaction is about to commit
 * (store_rollup_flush): a batch of a fleet's generations shares a few
 * keys, and an upsert per generation and name cost 75,000 instructions per
 * generation (callgrind, bench_search's generations), a quarter of the
 * summary's whole commit cost. The rebuild is the same aggregate over an
 * slot in SQL. Deletes only mark the slot (a trigger, so every path that
 * deletes a generation does), and readers treat a marked slot as raw.
 *
 * Held slots (store_rollup_flush_hold, the commit of a batch with
 * store_config.rollup_hold_ms): a fleet's every transaction adds to the
 * same slot, the current ten minutes, one key per service and name: at
 * 10,000 agents on 2 s that was ~100 upserts per transaction of 105
 * generations, 11,700 instructions per generation (bench_commit
 * --fleet-events 10), 15% of the store thread. So the sums of such a slot
 * stay in memory across transactions (ru->held) and are written once, when
 * no transaction added to the slot for the hold time (the maintenance
 * tick's store_rollup_release), when too many keys are held, or at close.
 * Meanwhile the slot carries a mark of its own in sum_slots_dirty (age
 * -1), so readers take its raw rows, as for a dirty slot: their answers do
 * not change, and a query rarely covers the current slot whole anyway. The
 * maintenance neither ages nor rebuilds such a mark; a delete's trigger
 * replaces it with a dirty one (age 0), which the next flush sees: the
 * held sums are then dropped, since the rebuild takes every remaining raw
 * row. The marks held are checked once per transaction (one SELECT each).
 *
 * Invariants:
 *   1. For every slot H without a sum_slots_dirty row, the sum_slots rows of
 *      H equal the aggregate of the sum_names rows of the generations with
 *      start_ns in H (0 <= start_ns < STORE_ROLLUP_END, end_ns >=
 *      start_ns), grouped by (service, kind, name): gens = count(*), count,
 *      total, min, max and the merged histogram
 *      (store_rollup_check_invariants).
 *   2. A generation's rows are added in the transaction that writes its
 *      sum_names rows, exactly once (store_summary_put runs once per seq:
 *      at commit, or by the backfill for a generation without sum_gens):
 *      the sums in memory are written by store_rollup_flush before that
 *      transaction's COMMIT and dropped by store_rollup_reset when it
 *      begins (a rolled-back batch leaves nothing behind).
 *   3. Every DELETE of a generation row with start_ns in [0,
 *      STORE_ROLLUP_END) leaves its slot dirty with age 0 in the same
 *      transaction (the trigger).
 *   4. A rebuild replaces the slot's rows and clears its mark in one
 *      transaction: a reader sees the slot either dirty or rebuilt.
 *   5. A slot with a mark of age < 0 is held: its sum_slots rows plus the
 *      sums in ru->held equal the aggregate of invariant 1. Only this
 *      writer makes such a mark, for a slot it holds, and the held sums
 *      become rows in the transaction that deletes the mark; the sums of a
 *      transaction join ru->held only once its COMMIT returned
 *      (store_rollup_committed), and a flush that did not commit is undone
 *      by the next reset. Held sums live in memory only: open turns every
 *      age < 0 mark into a dirty one (a writer that died holding it), and
 *      a held slot whose mark turned dirty (a delete) or vanished is left
 *      to the rebuild, its sums dropped, never written.
 */
#include "config.h"

#include "store_rollup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gtp_error.h"
#include "store_int.h"
#include "store_search.h"
#include "sum_rows.h"
#include "summary.h"

_Static_assert(STORE_ROLLUP_END == INT64_C(9223371600000000000),
               "the SQL spells STORE_ROLLUP_END out");

/* ---------------------------------------------------------- gt_hist_add */

/* gt_hist_add(a, b): the encoded histogram of a + b (NULL or an empty blob
 * counts as empty). A blob that does not decode adds what decodes before
 * the fault, as gt_hist_merge (the raw rows' merge) does: the rollup must
 * give the raw answer even for a row written by hand. */
static void hist_add(sqlite3_context *cx, int n, sqlite3_value **v) {
  uint64_t h[GTP_SUM_BUCKETS];
  memset(h, 0, sizeof h);
  for (int i = 0; i < n; i++) {
    const void *p = sqlite3_value_blob(v[i]);
    int len = sqlite3_value_bytes(v[i]);
    if (len > 0)
      (void)gtp_sum_hist_decode(p, (size_t)len, h);
  }
  uint8_t out[GTP_SUM_HIST_MAX];
  size_t len = gtp_sum_hist_encode(h, out);
  sqlite3_result_blob(cx, out, (int)len, SQLITE_TRANSIENT);
}

int store_rollup_register(sqlite3 *db) {
  int rc = sqlite3_create_function_v2(db, "gt_hist_add", 2,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                      hist_add, NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return store_sqlite_err(rc) ? store_sqlite_err(rc) : GTP_E_INTERNAL;
  return store_search_register(db);
}

/* ------------------------------------------------------------ statements */

/* The rows of the generations of one slot ([?1, ?2) of start_ns) as they
 * go into its rollup (invariant 1); ADD_SQL takes one generation. */
#define HOUR_ROWS_SQL(WHERE)                                                   \
  " FROM generations g JOIN sessions s ON s.id = g.session_id"                 \
  " JOIN sum_names n ON n.seq = g.seq WHERE " WHERE                            \
  " AND g.start_ns >= 0 AND g.start_ns < 9223371600000000000"                  \
  " AND g.end_ns >= g.start_ns"

/* One upsert per key (slot, service, kind, name), and the multi-row form
 * of the flush: VALUES of up to 32 keys in one statement, which saves the
 * statement's fixed cost per key (a fleet of 100 services puts about 19
 * keys per name in each transaction of 20 generations; bench_commit
 * --services 100: 32,700 -> 25,400 instructions per generation). */
#define RU_UPSERT_HEAD                                                         \
  "INSERT INTO sum_slots(slot, service, kind, name, gens, count, total_ns,"    \
  " min_ns, max_ns, hist) VALUES"
#define RU_UPSERT_TAIL                                                         \
  " ON CONFLICT(slot, service, kind, name) DO UPDATE SET"                      \
  " gens = gens + excluded.gens, count = count + excluded.count,"              \
  " total_ns = total_ns + excluded.total_ns,"                                  \
  " min_ns = min(min_ns, excluded.min_ns),"                                    \
  " max_ns = max(max_ns, excluded.max_ns),"                                    \
  " hist = gt_hist_add(hist, excluded.hist)"

enum {
  RU_ROWS,
  RU_UPSERT,
  RU_MARK,
  RU_HOLD,
  RU_UNHOLD,
  RU_DIRTY,
  RU_AGE,
  RU_PICK,
  RU_DEL,
  RU_BUILD,
  RU_CLEAR,
  RU_COUNT,
  RU_N_
};

static const char *const ru_sql[RU_N_] = {
    [RU_ROWS] = "SELECT g.start_ns / 600000000000, s.service, n.kind,"
                " n.name, n.count, n.total_ns, n.min_ns, n.max_ns,"
                " n.hist" HOUR_ROWS_SQL("g.seq = ?1"),
    [RU_UPSERT] = RU_UPSERT_HEAD
    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)" RU_UPSERT_TAIL,
    [RU_MARK] = "SELECT age FROM sum_slots_dirty WHERE slot = ?1",
    [RU_HOLD] = "INSERT INTO sum_slots_dirty(slot, age) VALUES(?1, -1)",
    [RU_UNHOLD] = "DELETE FROM sum_slots_dirty WHERE slot = ?1 AND age < 0",
    [RU_DIRTY] = "INSERT OR REPLACE INTO sum_slots_dirty(slot, age)"
                 " VALUES(?1, 0)",
    /* Held slots (age < 0, invariant 5) neither age nor count as dirty. */
    [RU_AGE] = "UPDATE sum_slots_dirty SET age = age + 1 WHERE age >= 0",
    [RU_PICK] = "SELECT slot FROM sum_slots_dirty WHERE age >= ?1"
                " ORDER BY slot DESC LIMIT ?2",
    [RU_DEL] = "DELETE FROM sum_slots WHERE slot = ?1",
    [RU_BUILD] = "INSERT INTO sum_slots(slot, service, kind, name, gens,"
                 " count, total_ns, min_ns, max_ns, hist)"
                 " SELECT ?3, s.service, n.kind, n.name, count(*),"
                 " sum(n.count), sum(n.total_ns), min(n.min_ns),"
                 " max(n.max_ns), gt_hist_merge(n.hist)" HOUR_ROWS_SQL(
                     "g.start_ns >= ?1 AND g.start_ns < ?2") " GROUP BY"
                                                             " s.service,"
                                                             " n.kind, n.name",
    [RU_CLEAR] = "DELETE FROM sum_slots_dirty WHERE slot = ?1",
    [RU_COUNT] = "SELECT count(*) FROM sum_slots_dirty WHERE age >= 0",
};

/* One key's sums (of the open transaction, or held). The sums are of the
 * int64 values the rows hold, in uint64 as SQLite's sum() adds them. */
typedef struct ru_acc {
  int64_t slot;
  int kind;
  char *service, *name;         /* owned; NULL = empty slot */
  size_t service_len, name_len; /* bytes (a name may hold a NUL) */
  uint64_t hash;
  int64_t gens, count, total_ns, min_ns, max_ns;
  uint64_t hist[GTP_SUM_BUCKETS];
} ru_acc;

/* Keys held before a flush in the middle of the transaction (bounds the
 * memory: 600 bytes a key). */
#define RU_ACC_MAX 4096
#define RU_ACC_SLOTS (2 * RU_ACC_MAX) /* power of two, half full at most */
/* Keys held across transactions (invariant 5): past this, every held slot
 * is written out at the next flush. */
#define RU_HELD_MAX 1024
#define RU_HELD_SLOTS (2 * RU_HELD_MAX)
/* Slots held at once (a fleet's current slot, and the last one for a
 * moment after a slot edge). */
#define RU_HOLD_MAX 4

/* Keys per multi-row upsert, largest first (1 is RU_UPSERT); each (size)
 * is one statement, prepared on first use. */
static const unsigned ru_chunk[] = {32, 8};
#define RU_NCHUNK (sizeof ru_chunk / sizeof ru_chunk[0])

/* A table of sums by key: open addressing, calloc'd on first use. */
typedef struct ru_tab {
  ru_acc *acc; /* mask + 1 entries */
  /* The entries in use, in the order they filled: flush and reset visit
   * these n instead of scanning every entry (8,192, 4.9 MB, twice per
   * transaction: 8,000 instructions per generation at 20 per transaction,
   * and the cache misses of the scan). */
  uint32_t *used;
  size_t n, max, mask;
} ru_tab;

/* A held slot's state (invariant 5). */
enum {
  HS_HELD, /* marked (age < 0) in the database, sums in ru->held */
  HS_NEW,  /* marked by the open transaction: held once it commits */
  HS_OUT,  /* written out and unmarked by the open transaction */
  HS_DROP, /* found dirty (a delete): its sums go at commit, the rebuild
              recomputes them */
  HS_NO    /* dirty already: not held, this transaction writes its keys */
};

typedef struct ru_hold {
  int64_t slot;
  int64_t last_ns; /* monotonic: the last transaction that added to it */
  int state;
} ru_hold;

struct store_rollup {
  sqlite3 *db;
  sqlite3_stmt *st[RU_N_];
  sqlite3_stmt *multi[RU_NCHUNK]; /* prepared on first use */
  uint8_t *hists; /* ru_chunk[0] encoded histograms, on first use */
  ru_tab txn;     /* the open transaction's sums */
  ru_tab held;    /* the held slots' sums (invariant 5) */
  ru_hold hs[RU_HOLD_MAX];
  size_t nhs;
  int64_t hold_ns; /* the last store_rollup_flush_hold's; 0: none */
  ru_acc **wr;     /* the keys one flush writes (wr_alloc) */
};

static int sql_err(int rc) {
  int e = store_sqlite_err(rc);
  return e ? e : GTP_E_INTERNAL;
}

static int run(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int store_rollup_open(sqlite3 *db, store_rollup **out) {
  *out = NULL;
  int err = store_rollup_register(db);
  if (err)
    return err;
  store_rollup *ru = calloc(1, sizeof *ru);
  if (!ru)
    return -ENOMEM;
  ru->db = db;
  ru->txn.max = RU_ACC_MAX;
  ru->txn.mask = RU_ACC_SLOTS - 1;
  ru->held.max = RU_HELD_MAX;
  ru->held.mask = RU_HELD_SLOTS - 1;
  for (int i = 0; i < RU_N_; i++) {
    int rc = sqlite3_prepare_v3(db, ru_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                &ru->st[i], NULL);
    if (rc != SQLITE_OK) {
      store_rollup_close(ru);
      return sql_err(rc);
    }
  }
  /* Invariant 5: sums held by a writer that stopped without writing them
   * (kill -9, power loss) are gone; their slots are rebuilt from the raw
   * rows like any dirty slot. */
  int rc = sqlite3_exec(db, "UPDATE sum_slots_dirty SET age = 0 WHERE age < 0",
                        NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    store_rollup_close(ru);
    return sql_err(rc);
  }
  *out = ru;
  return 0;
}

static void tab_reset(ru_tab *t) {
  for (size_t i = 0; t->acc && i < t->n; i++) {
    ru_acc *e = &t->acc[t->used[i]];
    free(e->service);
    free(e->name);
    memset(e, 0, sizeof *e);
  }
  t->n = 0;
}

static void tab_free(ru_tab *t) {
  tab_reset(t);
  free(t->acc);
  free(t->used);
  t->acc = NULL;
  t->used = NULL;
}

static int tab_alloc(ru_tab *t) {
  if (!t->acc) {
    t->acc = calloc(t->mask + 1, sizeof *t->acc);
    t->used = calloc(t->max, sizeof *t->used);
    if (!t->acc || !t->used) {
      free(t->acc);
      free(t->used);
      t->acc = NULL;
      t->used = NULL;
    }
  }
  return t->acc ? SQLITE_OK : SQLITE_NOMEM;
}

static uint64_t key_hash(int64_t slot, int kind, const char *svc,
                         size_t svc_len, const char *name, size_t name_len) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)slot ^ ((uint64_t)kind << 56);
  for (size_t i = 0; i < svc_len; i++)
    h = (h ^ (uint8_t)svc[i]) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (size_t i = 0; i < name_len; i++)
    h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
  return h;
}

static char *dup_n(const char *p, size_t n) {
  char *c = malloc(n + 1);
  if (c) {
    memcpy(c, p, n);
    c[n] = 0;
  }
  return c;
}

/* The entry of a key: its own, or the empty one where it goes. */
static ru_acc *acc_slot(ru_tab *t, uint64_t h, int64_t slot, int kind,
                        const char *svc, size_t svc_len, const char *name,
                        size_t name_len) {
  for (size_t k = 0;; k++) {
    ru_acc *e = &t->acc[(h + k) & t->mask];
    if (!e->name)
      return e;
    if (e->hash == h && e->slot == slot && e->kind == kind &&
        e->service_len == svc_len && e->name_len == name_len &&
        memcmp(e->service, svc, svc_len) == 0 &&
        memcmp(e->name, name, name_len) == 0)
      return e;
  }
}

void store_rollup_close(store_rollup *ru) {
  if (!ru)
    return;
  /* Written out, so the next open need not rebuild them (invariant 5);
   * if that fails, it will. */
  if (ru->nhs > 0)
    (void)store_rollup_release(ru, 1);
  tab_free(&ru->txn);
  tab_free(&ru->held);
  free(ru->wr);
  for (int i = 0; i < RU_N_; i++)
    sqlite3_finalize(ru->st[i]);
  for (size_t i = 0; i < RU_NCHUNK; i++)
    sqlite3_finalize(ru->multi[i]);
  free(ru->hists);
  free(ru);
}

static sqlite3_stmt *multi_stmt(store_rollup *ru, size_t c, int *rc) {
  if (ru->multi[c])
    return ru->multi[c];
  size_t len = 0;
  char *sql = sum_rows_values_sql(RU_UPSERT_HEAD, 10, ru_chunk[c],
                                  RU_UPSERT_TAIL, &len);
  if (!sql) {
    *rc = SQLITE_NOMEM;
    return NULL;
  }
  *rc = sqlite3_prepare_v3(ru->db, sql, (int)len, SQLITE_PREPARE_PERSISTENT,
                           &ru->multi[c], NULL);
  free(sql);
  return *rc == SQLITE_OK ? ru->multi[c] : NULL;
}

static void bind_acc(sqlite3_stmt *st, int at, const ru_acc *e, uint8_t *hist) {
  sqlite3_bind_int64(st, at + 1, e->slot);
  sqlite3_bind_text(st, at + 2, e->service, (int)e->service_len, SQLITE_STATIC);
  sqlite3_bind_int(st, at + 3, e->kind);
  sqlite3_bind_text(st, at + 4, e->name, (int)e->name_len, SQLITE_STATIC);
  sqlite3_bind_int64(st, at + 5, e->gens);
  sqlite3_bind_int64(st, at + 6, e->count);
  sqlite3_bind_int64(st, at + 7, e->total_ns);
  sqlite3_bind_int64(st, at + 8, e->min_ns);
  sqlite3_bind_int64(st, at + 9, e->max_ns);
  size_t hl = gtp_sum_hist_encode(e->hist, hist);
  sqlite3_bind_blob(st, at + 10, hist, (int)hl, SQLITE_STATIC);
}

/* Upserts the n keys of v into sum_slots. Returns an SQLite code. */
static int write_keys(store_rollup *ru, ru_acc *const *v, size_t n) {
  int rc = SQLITE_OK;
  if (n > 0 && !ru->hists &&
      !(ru->hists = malloc(ru_chunk[0] * GTP_SUM_HIST_MAX)))
    rc = SQLITE_NOMEM;
  size_t i = 0;
  while (rc == SQLITE_OK && i < n) {
    size_t left = n - i, c = 0;
    while (c < RU_NCHUNK && ru_chunk[c] > left)
      c++;
    sqlite3_stmt *st =
        c < RU_NCHUNK ? multi_stmt(ru, c, &rc) : ru->st[RU_UPSERT];
    if (!st)
      break;
    unsigned k = c < RU_NCHUNK ? ru_chunk[c] : 1;
    for (unsigned j = 0; j < k; j++)
      bind_acc(st, (int)j * 10, v[i + j],
               ru->hists + (size_t)j * GTP_SUM_HIST_MAX);
    rc = run(st);
    i += k;
  }
  /* No statement keeps pointers to the keys a reset frees. */
  sqlite3_clear_bindings(ru->st[RU_UPSERT]);
  for (size_t c = 0; c < RU_NCHUNK; c++)
    if (ru->multi[c])
      sqlite3_clear_bindings(ru->multi[c]);
  return rc;
}

/* ru->wr, on first use: room for every key of both tables. */
static int wr_alloc(store_rollup *ru) {
  if (!ru->wr)
    ru->wr = malloc((RU_ACC_MAX + RU_HELD_MAX) * sizeof *ru->wr);
  return ru->wr ? SQLITE_OK : SQLITE_NOMEM;
}

int store_rollup_flush(store_rollup *ru) {
  if (!ru || ru->txn.n == 0)
    return SQLITE_OK;
  int rc = wr_alloc(ru);
  for (size_t i = 0; rc == SQLITE_OK && i < ru->txn.n; i++)
    ru->wr[i] = &ru->txn.acc[ru->txn.used[i]];
  if (rc == SQLITE_OK)
    rc = write_keys(ru, ru->wr, ru->txn.n);
  tab_reset(&ru->txn); /* written, or the transaction rolls back */
  return rc;
}

/* The sums of key (slot, service, kind, name) in t with one more row
 * (count, total, min, max; its histogram is the caller's to add), or NULL
 * when out of memory. */
static ru_acc *acc_add(ru_tab *t, int64_t slot, const char *svc, size_t svc_len,
                       int kind, const char *name, size_t name_len,
                       int64_t count, int64_t total, int64_t mn, int64_t mx) {
  uint64_t h = key_hash(slot, kind, svc, svc_len, name, name_len);
  ru_acc *e = acc_slot(t, h, slot, kind, svc, svc_len, name, name_len);
  if (!e->name) {
    e->service = dup_n(svc, svc_len);
    e->name = dup_n(name, name_len);
    if (!e->service || !e->name) {
      free(e->service);
      free(e->name);
      memset(e, 0, sizeof *e);
      return NULL;
    }
    e->service_len = svc_len;
    e->name_len = name_len;
    e->hash = h;
    e->slot = slot;
    e->kind = kind;
    e->min_ns = mn;
    e->max_ns = mx;
    t->used[t->n++] = (uint32_t)(e - t->acc);
  }
  /* Wrapping like the histogram's buckets: a sum past int64 is an error
   * for the raw query's sum() too. */
  e->gens = (int64_t)((uint64_t)e->gens + 1);
  e->count = (int64_t)((uint64_t)e->count + (uint64_t)count);
  e->total_ns = (int64_t)((uint64_t)e->total_ns + (uint64_t)total);
  if (mn < e->min_ns)
    e->min_ns = mn;
  if (mx > e->max_ns)
    e->max_ns = mx;
  return e;
}

/* Adds one row of RU_ROWS into its key's sums. Returns an SQLite code. */
static int acc_row(store_rollup *ru, sqlite3_stmt *st) {
  const char *svc = (const char *)sqlite3_column_text(st, 1);
  size_t svc_len = (size_t)sqlite3_column_bytes(st, 1);
  const char *name = (const char *)sqlite3_column_text(st, 3);
  size_t name_len = (size_t)sqlite3_column_bytes(st, 3);
  if (!svc || !name)
    return SQLITE_NOMEM;
  ru_acc *e = acc_add(&ru->txn, sqlite3_column_int64(st, 0), svc, svc_len,
                      sqlite3_column_int(st, 2), name, name_len,
                      sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                      sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 7));
  if (!e)
    return SQLITE_NOMEM;
  const void *hb = sqlite3_column_blob(st, 8);
  int hl = sqlite3_column_bytes(st, 8);
  if (hl > 0) /* a bad blob: what decodes, as gt_hist_merge (hist_add) */
    (void)gtp_sum_hist_decode(hb, (size_t)hl, e->hist);
  return SQLITE_OK;
}

static int64_t clamp64(uint64_t v) {
  return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

int store_rollup_add_summary(store_rollup *ru, const store_rollup_gen *g,
                             const gtp_summary *s) {
  /* HOUR_ROWS_SQL's conditions: outside them the rows join no slot. */
  if (s->nnames == 0 || g->start_ns < 0 || g->start_ns >= STORE_ROLLUP_END ||
      g->end_ns < g->start_ns)
    return SQLITE_OK;
  int rc = tab_alloc(&ru->txn);
  int64_t slot = g->start_ns / STORE_ROLLUP_NS;
  for (size_t i = 0; rc == SQLITE_OK && i < s->nnames; i++) {
    const gtp_sum_name *n = &s->names[i];
    if (ru->txn.n >= RU_ACC_MAX) /* same transaction: memory stays bounded */
      rc = store_rollup_flush(ru);
    /* The values store_summary_put binds into the row (clamped, the empty
     * name as ""), so the sums are those of the rows. */
    ru_acc *e =
        rc != SQLITE_OK
            ? NULL
            : acc_add(&ru->txn, slot, g->service, g->service_len, n->kind,
                      n->name.len ? n->name.ptr : "", n->name.len,
                      clamp64(n->count), clamp64(n->total_ns),
                      clamp64(n->min_ns), clamp64(n->max_ns));
    if (rc == SQLITE_OK && !e)
      rc = SQLITE_NOMEM;
    for (unsigned b = 0; e && b < GTP_SUM_BUCKETS; b++)
      e->hist[b] += n->hist[b]; /* what the encoded row decodes to */
  }
  return rc; /* invariant 2 */
}

int store_rollup_add(store_rollup *ru, int64_t seq) {
  int rc = tab_alloc(&ru->txn);
  if (rc != SQLITE_OK)
    return rc;
  sqlite3_stmt *st = ru->st[RU_ROWS];
  sqlite3_bind_int64(st, 1, seq);
  while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    rc = SQLITE_OK;
    if (ru->txn.n >= RU_ACC_MAX) /* same transaction: memory stays bounded */
      rc = store_rollup_flush(ru);
    if (rc == SQLITE_OK)
      rc = acc_row(ru, st);
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc; /* invariant 2 */
}

/* ------------------------------------------------------------ held slots */

static ru_hold *hold_find(store_rollup *ru, int64_t slot) {
  for (size_t i = 0; i < ru->nhs; i++)
    if (ru->hs[i].slot == slot)
      return &ru->hs[i];
  return NULL;
}

static void hold_remove(store_rollup *ru, ru_hold *h) {
  *h = ru->hs[--ru->nhs];
}

/* Drops the held sums of one slot (the table is rebuilt without them: it
 * is small, and this happens once a slot is done). */
static void held_drop_slot(store_rollup *ru, int64_t slot) {
  ru_tab *t = &ru->held;
  size_t keep = 0;
  for (size_t i = 0; i < t->n; i++) {
    ru_acc *e = &t->acc[t->used[i]];
    if (e->slot == slot) {
      free(e->service);
      free(e->name);
      memset(e, 0, sizeof *e);
    } else {
      t->used[keep++] = t->used[i];
    }
  }
  t->n = keep;
  /* Open addressing: the survivors move to where a lookup finds them. */
  for (size_t i = 0; i < t->n; i++) {
    ru_acc e = t->acc[t->used[i]];
    memset(&t->acc[t->used[i]], 0, sizeof e);
    ru_acc *to = acc_slot(t, e.hash, e.slot, e.kind, e.service, e.service_len,
                          e.name, e.name_len);
    *to = e;
    t->used[i] = (uint32_t)(to - t->acc);
  }
}

/* Moves the open transaction's sums of held slots into ru->held (their
 * strings move too); hold_flush left room for them. */
static void held_merge(store_rollup *ru) {
  ru_tab *t = &ru->txn, *h = &ru->held;
  for (size_t i = 0; i < t->n; i++) {
    ru_acc *e = &t->acc[t->used[i]];
    ru_hold *hs = hold_find(ru, e->slot);
    if (!hs || hs->state != HS_HELD)
      continue;
    ru_acc *to = acc_slot(h, e->hash, e->slot, e->kind, e->service,
                          e->service_len, e->name, e->name_len);
    if (!to->name) {
      *to = *e;
      h->used[h->n++] = (uint32_t)(to - h->acc);
      e->service = e->name = NULL; /* moved */
      continue;
    }
    to->gens = (int64_t)((uint64_t)to->gens + (uint64_t)e->gens);
    to->count = (int64_t)((uint64_t)to->count + (uint64_t)e->count);
    to->total_ns = (int64_t)((uint64_t)to->total_ns + (uint64_t)e->total_ns);
    if (e->min_ns < to->min_ns)
      to->min_ns = e->min_ns;
    if (e->max_ns > to->max_ns)
      to->max_ns = e->max_ns;
    for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++)
      to->hist[b] += e->hist[b];
  }
}

/* The mark of slot (invariant 5): *age, or *found 0. */
static int mark_of(store_rollup *ru, int64_t slot, int *found, int64_t *age) {
  sqlite3_stmt *st = ru->st[RU_MARK];
  sqlite3_bind_int64(st, 1, slot);
  int rc = sqlite3_step(st);
  *found = rc == SQLITE_ROW;
  *age = *found ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int slot_stmt(store_rollup *ru, int which, int64_t slot) {
  sqlite3_bind_int64(ru->st[which], 1, slot);
  return run(ru->st[which]);
}

void store_rollup_reset(store_rollup *ru) {
  if (!ru)
    return;
  tab_reset(&ru->txn);
  /* What a flush decided for a transaction that did not commit. */
  for (size_t i = ru->nhs; i-- > 0;) {
    ru_hold *h = &ru->hs[i];
    if (h->state == HS_NEW || h->state == HS_NO)
      hold_remove(ru, h);
    else
      h->state = HS_HELD;
  }
}

/* The flush of the open transaction with held slots (invariant 5): keys of
 * slots held stay in memory; a slot with no mark becomes held (marked);
 * held slots found dirty are dropped; held slots idle for hold_ns, or all
 * when out is set or the held table is full, are written out and
 * unmarked; every other key is written. Returns an SQLite code. */
static int hold_flush(store_rollup *ru, int out) {
  int64_t now = mono_ns();
  int rc = SQLITE_OK;
  /* Held slots whose mark a delete (the trigger) made dirty: the rebuild
   * takes their rows from the raw ones, so their sums go (at commit). */
  for (size_t i = 0; rc == SQLITE_OK && i < ru->nhs; i++) {
    ru_hold *h = &ru->hs[i];
    int found = 0;
    int64_t age = 0;
    if (h->state != HS_HELD || (rc = mark_of(ru, h->slot, &found, &age)))
      continue;
    if (found && age < 0)
      continue;
    h->state = HS_DROP;
    if (!found) /* unmarked by hand: make sure it is rebuilt */
      rc = slot_stmt(ru, RU_DIRTY, h->slot);
  }
  if (ru->held.n + ru->txn.n > RU_HELD_MAX)
    out = 1;
  int hold = !out && ru->hold_ns > 0 && tab_alloc(&ru->held) == SQLITE_OK;
  size_t nw = 0;
  for (size_t i = 0; rc == SQLITE_OK && i < ru->txn.n; i++) {
    ru_acc *e = &ru->txn.acc[ru->txn.used[i]];
    ru_hold *h = hold_find(ru, e->slot);
    if (!h && hold && ru->nhs < RU_HOLD_MAX) {
      int found = 0;
      int64_t age = 0;
      rc = mark_of(ru, e->slot, &found, &age);
      if (rc == SQLITE_OK && !found)
        rc = slot_stmt(ru, RU_HOLD, e->slot);
      h = &ru->hs[ru->nhs++];
      *h = (ru_hold){e->slot, now, found ? HS_NO : HS_NEW};
    }
    if (h && (h->state == HS_HELD || h->state == HS_NEW)) {
      h->last_ns = now;
      if (!out)
        continue; /* held: merged at commit */
    }
    ru->wr[nw++] = e;
  }
  /* Held slots written out: idle ones, or all. */
  for (size_t i = 0; rc == SQLITE_OK && i < ru->nhs; i++) {
    ru_hold *h = &ru->hs[i];
    if (h->state != HS_HELD || (!out && now - h->last_ns < ru->hold_ns))
      continue;
    h->state = HS_OUT;
    for (size_t k = 0; k < ru->held.n; k++) {
      ru_acc *e = &ru->held.acc[ru->held.used[k]];
      if (e->slot == h->slot)
        ru->wr[nw++] = e;
    }
    /* (Its keys of this transaction, if any, were taken above: out, or
     * not idle.) */
    rc = slot_stmt(ru, RU_UNHOLD, h->slot);
  }
  if (rc == SQLITE_OK)
    rc = write_keys(ru, ru->wr, nw);
  return rc;
}

int store_rollup_flush_hold(store_rollup *ru, int64_t hold_ns) {
  if (!ru)
    return SQLITE_OK;
  ru->hold_ns = hold_ns > 0 ? hold_ns : 0;
  if (ru->hold_ns == 0 && ru->nhs == 0)
    return store_rollup_flush(ru);
  int rc = wr_alloc(ru);
  return rc == SQLITE_OK ? hold_flush(ru, ru->hold_ns == 0) : rc;
}

void store_rollup_committed(store_rollup *ru) {
  if (!ru)
    return;
  for (size_t i = ru->nhs; i-- > 0;) {
    ru_hold *h = &ru->hs[i];
    if (h->state == HS_OUT || h->state == HS_DROP) {
      held_drop_slot(ru, h->slot);
      hold_remove(ru, h);
    } else if (h->state == HS_NO) {
      hold_remove(ru, h);
    } else {
      h->state = HS_HELD;
    }
  }
  held_merge(ru);
  tab_reset(&ru->txn);
}

int store_rollup_release(store_rollup *ru, int all) {
  if (!ru || ru->nhs == 0)
    return 0;
  int64_t now = mono_ns();
  int due = all;
  for (size_t i = 0; i < ru->nhs && !due; i++)
    due = now - ru->hs[i].last_ns >= ru->hold_ns;
  if (!due)
    return 0;
  int rc = sqlite3_exec(ru->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return sql_err(rc);
  store_rollup_reset(ru);
  rc = wr_alloc(ru);
  if (rc == SQLITE_OK)
    rc = hold_flush(ru, all);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(ru->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_exec(ru->db, "ROLLBACK", NULL, NULL, NULL);
    store_rollup_reset(ru);
    return sql_err(rc);
  }
  store_rollup_committed(ru);
  return 0;
}

int store_rollup_pending(store_rollup *ru, uint64_t *pending) {
  sqlite3_stmt *st = ru->st[RU_COUNT];
  int rc = sqlite3_step(st);
  *pending = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? 0 : sql_err(rc);
}

/* Rebuilds one slot in its own transaction (invariant 4). */
static int rebuild_slot(store_rollup *ru, int64_t slot) {
  int rc = sqlite3_exec(ru->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return sql_err(rc);
  sqlite3_stmt *st = ru->st[RU_DEL];
  sqlite3_bind_int64(st, 1, slot);
  rc = run(st);
  if (rc == SQLITE_OK) {
    st = ru->st[RU_BUILD];
    sqlite3_bind_int64(st, 1, slot * STORE_ROLLUP_NS);
    sqlite3_bind_int64(st, 2, (slot + 1) * STORE_ROLLUP_NS);
    sqlite3_bind_int64(st, 3, slot);
    rc = run(st);
  }
  if (rc == SQLITE_OK) {
    st = ru->st[RU_CLEAR];
    sqlite3_bind_int64(st, 1, slot);
    rc = run(st);
  }
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(ru->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_exec(ru->db, "ROLLBACK", NULL, NULL, NULL);
    return sql_err(rc);
  }
  GTP_ASSERT(store_rollup_check_invariants(ru->db, slot) == 0);
  return 0;
}

/* The most slots one tick picks (the newest first: they are the ones a
 * "last N slots" query reads). */
#define RU_PICK_MAX 64

int store_rollup_rebuild(store_rollup *ru, int max_slots, int64_t budget_ns,
                         uint64_t *pending) {
  int64_t t0 = mono_ns();
  *pending = 0;
  /* Held slots no transaction added to lately (invariant 5). */
  int err = store_rollup_release(ru, 0);
  if (err == 0)
    err = store_rollup_pending(ru, pending);
  if (err || *pending == 0 || max_slots <= 0)
    return err;
  if (max_slots > RU_PICK_MAX)
    max_slots = RU_PICK_MAX;
  int rc = run(ru->st[RU_AGE]); /* autocommit: one small UPDATE */
  if (rc != SQLITE_OK)
    return sql_err(rc);
  int64_t slots[RU_PICK_MAX];
  int n = 0;
  sqlite3_stmt *st = ru->st[RU_PICK];
  sqlite3_bind_int(st, 1, STORE_ROLLUP_SETTLE);
  sqlite3_bind_int(st, 2, max_slots);
  while (n < max_slots && (rc = sqlite3_step(st)) == SQLITE_ROW)
    slots[n++] = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return sql_err(rc);
  int done = 0;
  for (int i = 0; i < n && (i == 0 || mono_ns() - t0 < budget_ns); i++) {
    /* The trigger marks only slots inside [0, STORE_ROLLUP_END); a row
     * outside (written by hand) is dropped, not rebuilt. */
    if (slots[i] < 0 || slots[i] >= STORE_ROLLUP_END / STORE_ROLLUP_NS) {
      sqlite3_bind_int64(ru->st[RU_CLEAR], 1, slots[i]);
      run(ru->st[RU_CLEAR]);
      continue;
    }
    if ((err = rebuild_slot(ru, slots[i])) < 0)
      return err;
    done++;
  }
  err = store_rollup_pending(ru, pending);
  return err ? err : done;
}

/* ------------------------------------------------------------ invariants */

/* Rows of sum_slots that differ from the aggregate, both ways (EXCEPT over
 * the two sets), for one slot or every clean slot. */
#define CHECK_SQL                                                              \
  "WITH raw AS (SELECT g.start_ns / 600000000000 AS slot, s.service,"          \
  " n.kind, n.name, count(*) AS gens, sum(n.count) AS count,"                  \
  " sum(n.total_ns) AS total_ns, min(n.min_ns) AS min_ns,"                     \
  " max(n.max_ns) AS max_ns, gt_hist_merge(n.hist) AS hist"                    \
  " FROM generations g JOIN sessions s ON s.id = g.session_id"                 \
  " JOIN sum_names n ON n.seq = g.seq WHERE g.start_ns >= 0"                   \
  " AND g.start_ns < 9223371600000000000"                                      \
  " AND g.end_ns >= g.start_ns AND (?1 < 0 OR (g.start_ns >= ?1 * "            \
  "600000000000 AND g.start_ns < (?1 + 1) * 600000000000))"                    \
  " GROUP BY 1, 2, 3, 4),"                                                     \
  " ru AS (SELECT slot, service, kind, name, gens, count, total_ns, min_ns,"   \
  " max_ns, gt_hist_add(hist, NULL) AS hist FROM sum_slots"                    \
  " WHERE ?1 < 0 OR slot = ?1)"                                                \
  " SELECT count(*) FROM (SELECT * FROM (SELECT * FROM raw EXCEPT"             \
  " SELECT * FROM ru) UNION ALL SELECT * FROM (SELECT * FROM ru EXCEPT"        \
  " SELECT * FROM raw)) d WHERE NOT EXISTS (SELECT 1 FROM sum_slots_dirty x"   \
  " WHERE x.slot = d.slot)"

int store_rollup_check_invariants(sqlite3 *db, int64_t slot) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, CHECK_SQL, -1, &st, NULL);
  if (rc != SQLITE_OK) {
    /* A reader connection may not have the functions yet. */
    int err = store_rollup_register(db);
    if (err)
      return err;
    rc = sqlite3_prepare_v2(db, CHECK_SQL, -1, &st, NULL);
  }
  if (rc != SQLITE_OK)
    return sql_err(rc);
  sqlite3_bind_int64(st, 1, slot);
  rc = sqlite3_step(st);
  int64_t bad = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW)
    return sql_err(rc);
  return bad == 0 ? 0 : 1;
}
