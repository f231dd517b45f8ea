/* store_hold.c: retention pins on the SQLite backend (see hold.h and
 * store_hold.h).
 *
 * Owns: one read-write connection to the database (not the store thread's:
 * store.c invariant 1 is about that one) and the mutex that serializes its
 * use.
 *
 * Invariants:
 *   1. A pin MUST be added inside one BEGIN IMMEDIATE transaction that also
 *      counts the bytes before and after it, otherwise two pins made at
 *      once could both pass the byte cap, or retention could commit between
 *      the count and the insert.
 *   2. Every statement MUST run under h->lock, otherwise two HTTP threads
 *      would interleave statements of one transaction on the connection
 *      (opened NOMUTEX).
 *   3. A refused pin (cap) MUST be rolled back whole: nothing changes.
 */
#include "config.h"

#include "store_hold.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "store_int.h"
#include "store_schema.h"

#define HOLD_BUSY_MS 5000

enum {
  HQ_BEGIN,
  HQ_COMMIT,
  HQ_ROLLBACK,
  HQ_PURGE,
  HQ_COUNT,
  HQ_INSERT,
  HQ_SPAN,
  HQ_TOTAL,
  HQ_ONE,
  HQ_LIST,
  HQ_DELETE,
  HQ_N_
};

static const char *const hold_sql[HQ_N_] = {
    [HQ_BEGIN] = "BEGIN IMMEDIATE",
    [HQ_COMMIT] = "COMMIT",
    [HQ_ROLLBACK] = "ROLLBACK",
    [HQ_PURGE] = "DELETE FROM retention_pins WHERE expires_ns <= ?1",
    [HQ_COUNT] = "SELECT count(*) FROM retention_pins WHERE expires_ns > ?1",
    [HQ_INSERT] = "INSERT INTO retention_pins(service, session, from_ns, to_ns,"
                  " reason, created_ns, expires_ns)"
                  " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [HQ_SPAN] = STORE_SPAN_MAX_SQL,
    /* Every live pin's generations, each counted once: per pin, the
     * session rows of its session or service (sessions' indexes), then
     * their rows starting in [from - max span (?1), to) and ending after
     * from (generations_by_time). */
    [HQ_TOTAL] = "SELECT coalesce(sum(stored_bytes), 0) FROM generations"
                 " WHERE seq IN (SELECT g.seq FROM retention_pins hp"
                 " JOIN sessions s ON (s.session = hp.session"
                 " OR s.service = hp.service)"
                 " JOIN generations g ON g.session_id = s.id"
                 " WHERE hp.expires_ns > ?2 AND g.start_ns < hp.to_ns"
                 " AND g.start_ns >= hp.from_ns - ?1"
                 " AND g.end_ns > hp.from_ns)",
    [HQ_ONE] = "SELECT coalesce(sum(g.stored_bytes), 0) FROM sessions s"
               " JOIN generations g ON g.session_id = s.id"
               " WHERE (s.session = ?2 OR s.service = ?3)"
               " AND g.start_ns < ?5 AND g.start_ns >= ?4 - ?1"
               " AND g.end_ns > ?4",
    [HQ_LIST] = "SELECT id, service, session, from_ns, to_ns, reason,"
                " created_ns, expires_ns FROM retention_pins"
                " WHERE expires_ns > ?1 ORDER BY id DESC",
    [HQ_DELETE] = "DELETE FROM retention_pins WHERE id = ?1"
                  " AND expires_ns > ?2",
};

struct store_hold {
  pthread_mutex_t lock;
  sqlite3 *db;             /* protected by lock (invariant 2) */
  sqlite3_stmt *st[HQ_N_]; /* protected by lock */
};

int store_hold_open(const char *path, store_hold **out, char **cause) {
  *out = NULL;
  store_hold *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  int rc = sqlite3_open_v2(path, &h->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: cannot open for pins: %s", path,
                    h->db ? sqlite3_errmsg(h->db) : sqlite3_errstr(rc));
    goto fail;
  }
  sqlite3_extended_result_codes(h->db, 1);
  sqlite3_busy_timeout(h->db, HOLD_BUSY_MS);
  for (int i = 0; i < HQ_N_; i++) {
    rc = sqlite3_prepare_v2(h->db, hold_sql[i], -1, &h->st[i], NULL);
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: pins: %s", path, sqlite3_errmsg(h->db));
      goto fail;
    }
  }
  pthread_mutex_init(&h->lock, NULL);
  *out = h;
  return 0;
fail:
  for (int i = 0; i < HQ_N_; i++)
    sqlite3_finalize(h->st[i]);
  sqlite3_close(h->db);
  free(h);
  return store_sqlite_err(rc);
}

void store_hold_close(store_hold *h) {
  if (!h)
    return;
  for (int i = 0; i < HQ_N_; i++)
    sqlite3_finalize(h->st[i]);
  sqlite3_close(h->db);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* Steps a statement expected to return one integer row (or none: 0). */
static int one_int(sqlite3_stmt *st, int64_t *v) {
  int rc = sqlite3_step(st);
  *v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int step_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Lock held. Bytes held by every live pin at now. */
static int total_locked(store_hold *h, int64_t span, int64_t now,
                        uint64_t *bytes) {
  sqlite3_stmt *st = h->st[HQ_TOTAL];
  sqlite3_bind_int64(st, 1, span);
  sqlite3_bind_int64(st, 2, now);
  int64_t v = 0;
  int rc = one_int(st, &v);
  *bytes = v > 0 ? (uint64_t)v : 0;
  return rc;
}

/* Lock held. Bytes of one pin's window. */
static int one_locked(store_hold *h, int64_t span, const char *session,
                      const char *service, int64_t from, int64_t to,
                      uint64_t *bytes) {
  sqlite3_stmt *st = h->st[HQ_ONE];
  sqlite3_bind_int64(st, 1, span);
  if (session)
    sqlite3_bind_text(st, 2, session, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 2);
  if (service)
    sqlite3_bind_text(st, 3, service, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 3);
  sqlite3_bind_int64(st, 4, from);
  sqlite3_bind_int64(st, 5, to);
  int64_t v = 0;
  int rc = one_int(st, &v);
  sqlite3_clear_bindings(st);
  *bytes = v > 0 ? (uint64_t)v : 0;
  return rc;
}

int store_hold_add(store_hold *h, const hold_req *q, uint64_t max_bytes,
                   hold_added *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&h->lock);
  int64_t span = 0, count = 0;
  int refused = 0;
  int rc = step_done(h->st[HQ_BEGIN]); /* invariant 1 */
  if (rc != SQLITE_OK)
    goto out;
  sqlite3_bind_int64(h->st[HQ_PURGE], 1, q->created_ns);
  sqlite3_bind_int64(h->st[HQ_COUNT], 1, q->created_ns);
  if ((rc = step_done(h->st[HQ_PURGE])) != SQLITE_OK ||
      (rc = one_int(h->st[HQ_COUNT], &count)) != SQLITE_OK ||
      (rc = one_int(h->st[HQ_SPAN], &span)) != SQLITE_OK)
    goto rollback;
  out->count = (uint64_t)count;
  if (count >= HOLD_MAX_PINS) {
    refused = 1;
    goto rollback;
  }
  if ((rc = total_locked(h, span, q->created_ns, &out->total_before)) !=
      SQLITE_OK)
    goto rollback;
  sqlite3_stmt *ins = h->st[HQ_INSERT];
  if (q->service)
    sqlite3_bind_text(ins, 1, q->service, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(ins, 1);
  if (q->session)
    sqlite3_bind_text(ins, 2, q->session, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(ins, 2);
  sqlite3_bind_int64(ins, 3, q->from_ns);
  sqlite3_bind_int64(ins, 4, q->to_ns);
  sqlite3_bind_text(ins, 5, q->reason, -1, SQLITE_STATIC);
  sqlite3_bind_int64(ins, 6, q->created_ns);
  sqlite3_bind_int64(ins, 7, q->expires_ns);
  rc = step_done(ins);
  sqlite3_clear_bindings(ins);
  if (rc != SQLITE_OK)
    goto rollback;
  out->id = sqlite3_last_insert_rowid(h->db);
  if ((rc = total_locked(h, span, q->created_ns, &out->total_after)) !=
          SQLITE_OK ||
      (rc = one_locked(h, span, q->session, q->service, q->from_ns, q->to_ns,
                       &out->bytes)) != SQLITE_OK)
    goto rollback;
  if (max_bytes && out->total_after > max_bytes &&
      out->total_after > out->total_before) {
    refused = 1; /* invariant 3 */
    goto rollback;
  }
  rc = step_done(h->st[HQ_COMMIT]);
  if (rc == SQLITE_OK)
    goto out;
rollback:
  step_done(h->st[HQ_ROLLBACK]);
out:
  pthread_mutex_unlock(&h->lock);
  if (refused)
    return GTP_E_TOOBIG;
  return rc == SQLITE_OK ? 0 : store_sqlite_err(rc);
}

int store_hold_list(store_hold *h, int64_t now_ns, hold_cb cb, void *ctx) {
  pthread_mutex_lock(&h->lock);
  int64_t span = 0;
  /* One read transaction, so every pin's bytes come from one snapshot. */
  int rc = sqlite3_exec(h->db, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = one_int(h->st[HQ_SPAN], &span);
  sqlite3_stmt *st = h->st[HQ_LIST];
  sqlite3_bind_int64(st, 1, now_ns);
  int stop = 0;
  while (rc == SQLITE_OK && !stop) {
    int s = sqlite3_step(st);
    if (s == SQLITE_DONE)
      break;
    if (s != SQLITE_ROW) {
      rc = s;
      break;
    }
    hold_row row = {
        .id = sqlite3_column_int64(st, 0),
        .service = (const char *)sqlite3_column_text(st, 1),
        .session = (const char *)sqlite3_column_text(st, 2),
        .from_ns = sqlite3_column_int64(st, 3),
        .to_ns = sqlite3_column_int64(st, 4),
        .reason = (const char *)sqlite3_column_text(st, 5),
        .created_ns = sqlite3_column_int64(st, 6),
        .expires_ns = sqlite3_column_int64(st, 7),
    };
    rc = one_locked(h, span, row.session, row.service, row.from_ns, row.to_ns,
                    &row.bytes);
    if (rc == SQLITE_OK)
      stop = cb(ctx, &row);
  }
  sqlite3_reset(st);
  sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
  pthread_mutex_unlock(&h->lock);
  if (rc != SQLITE_OK)
    return store_sqlite_err(rc);
  return stop;
}

int store_hold_delete(store_hold *h, int64_t id, int64_t now_ns) {
  pthread_mutex_lock(&h->lock);
  sqlite3_stmt *st = h->st[HQ_DELETE];
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, now_ns);
  int rc = step_done(st);
  int n = rc == SQLITE_OK ? sqlite3_changes(h->db) : 0;
  pthread_mutex_unlock(&h->lock);
  if (rc != SQLITE_OK)
    return store_sqlite_err(rc);
  return n > 0 ? 0 : GTP_E_NOTFOUND;
}

int store_hold_totals(store_hold *h, int64_t now_ns, uint64_t *count,
                      uint64_t *bytes) {
  pthread_mutex_lock(&h->lock);
  int64_t span = 0, n = 0;
  int rc = sqlite3_exec(h->db, "BEGIN", NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = one_int(h->st[HQ_SPAN], &span);
  sqlite3_bind_int64(h->st[HQ_COUNT], 1, now_ns);
  if (rc == SQLITE_OK)
    rc = one_int(h->st[HQ_COUNT], &n);
  if (rc == SQLITE_OK)
    rc = total_locked(h, span, now_ns, bytes);
  sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL);
  pthread_mutex_unlock(&h->lock);
  *count = n > 0 ? (uint64_t)n : 0;
  return rc == SQLITE_OK ? 0 : store_sqlite_err(rc);
}
