/* pg_hold.c: retention pins in the PostgreSQL catalog (see pg_hold.h,
 * hold.h and pg_hold_schema.h).
 *
 * Owns: a pool of PG_HOLD_POOL connections with the statements below.
 *
 * Invariants:
 *   1. A pin MUST be added in one transaction holding the retention
 *      advisory lock (PG_LOCK_RETAIN, waited for), otherwise two daemons
 *      could both admit a pin under the byte cap, or a retention pass that
 *      began before the pin could still delete rows the answer counted.
 *      Retention only tries that lock, so it skips a tick rather than wait.
 *   2. A refused pin MUST be rolled back whole: nothing changes.
 */
#include "config.h"

#include "pg_hold.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "pg.h"
#include "pg_schema.h"

#define PG_HOLD_POOL 2

/* Generations of one pin P: its session's rows or its service's sessions'
 * rows, starting in [from - max span, to) and ending after from. */
#define HELD_BY(P, SPAN)                                                       \
  " FROM gt_sessions s JOIN gt_generations g ON g.session_id = s.id"           \
  " WHERE (s.session = " P ".session OR s.service = " P ".service)"            \
  " AND g.start_ns < " P ".to_ns AND g.start_ns >= " P ".from_ns - " SPAN      \
  " AND g.end_ns > " P ".from_ns"

#define SPAN_SQL "(SELECT value::bigint FROM gt_meta WHERE key = 'max_span_ns')"

static const pg_stmt hold_stmts[] = {
    {"hold_lock", "SELECT pg_advisory_xact_lock(" PG_LOCK_RETAIN ")"},
    {"hold_purge", "DELETE FROM gt_retention_pins WHERE expires_ns <= $1"},
    {"hold_count",
     "SELECT count(*) FROM gt_retention_pins WHERE expires_ns > $1"},
    /* Every live pin's generations, each counted once. */
    {"hold_total",
     "SELECT coalesce(sum(stored_bytes), 0)::bigint FROM gt_generations"
     " WHERE seq IN (SELECT g.seq FROM gt_retention_pins hp,"
     " LATERAL (SELECT g.seq" HELD_BY("hp",
                                      SPAN_SQL) ") g"
                                                " WHERE hp.expires_ns > $1)"},
    {"hold_insert",
     "INSERT INTO gt_retention_pins(service, session, from_ns, to_ns, reason,"
     " created_ns, expires_ns) VALUES($1, $2, $3, $4, $5, $6, $7)"
     " RETURNING id"},
    {"hold_list",
     "SELECT p.id, p.service, p.session, p.from_ns, p.to_ns, p.reason,"
     " p.created_ns, p.expires_ns, (SELECT coalesce(sum(g.stored_bytes),"
     " 0)::bigint" HELD_BY(
         "p", SPAN_SQL) ") FROM gt_retention_pins p"
                        " WHERE p.expires_ns > $1 ORDER BY p.id DESC"},
    {"hold_delete",
     "DELETE FROM gt_retention_pins WHERE id = $1 AND expires_ns > $2"},
};

struct pg_hold {
  pg *pool;
};

int pg_hold_open(const char *conninfo, pg_hold **out, char **cause) {
  *out = NULL;
  pg_hold *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  int rc = pg_open(conninfo, PG_HOLD_POOL, hold_stmts,
                   sizeof hold_stmts / sizeof *hold_stmts, &h->pool, cause);
  if (rc < 0) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

void pg_hold_close(pg_hold *h) {
  if (!h)
    return;
  pg_close(h->pool);
  free(h);
}

static const char *num(char buf[24], int64_t v) {
  snprintf(buf, 24, "%" PRId64, v);
  return buf;
}

static int64_t first_int(PGresult *r) {
  if (!r || PQntuples(r) < 1 || PQgetisnull(r, 0, 0))
    return 0;
  return strtoll(PQgetvalue(r, 0, 0), NULL, 10);
}

/* Runs a statement returning one integer into *v; 0 or a code. */
static int exec_int(PGconn *k, const char *name, int n, const char *const *p,
                    int64_t *v) {
  int rc = 0;
  char *cause = NULL;
  PGresult *r = pg_exec(k, name, n, p, &rc, &cause);
  free(cause);
  if (v)
    *v = first_int(r);
  PQclear(r);
  return r ? 0 : rc;
}

/* A connection of the pin pool; its cause is dropped (the callers answer
 * with a code, and the pool's own health is logged by pg.c). */
static int hold_conn(pg_hold *h, PGconn **k) {
  char *cause = NULL;
  int rc = pg_get(h->pool, k, &cause);
  free(cause);
  return rc;
}

int pg_hold_add(pg_hold *h, const hold_req *q, uint64_t max_bytes,
                hold_added *out) {
  memset(out, 0, sizeof *out);
  PGconn *k;
  char *cause = NULL;
  int rc = hold_conn(h, &k);
  if (rc < 0)
    return rc;
  char now[24], from[24], to[24], exp[24], created[24];
  num(now, q->created_ns);
  const char *pn[] = {now};
  int64_t count = 0, before = 0, after = 0, id = 0, one = 0;
  int refused = 0;
  rc = pg_cmd(k, "BEGIN", &cause);
  free(cause);
  cause = NULL;
  if (rc < 0)
    goto out;
  if ((rc = exec_int(k, "hold_lock", 0, NULL, NULL)) < 0 || /* invariant 1 */
      (rc = exec_int(k, "hold_purge", 1, pn, NULL)) < 0 ||
      (rc = exec_int(k, "hold_count", 1, pn, &count)) < 0)
    goto rollback;
  out->count = (uint64_t)count;
  if (count >= HOLD_MAX_PINS) {
    refused = 1;
    goto rollback;
  }
  if ((rc = exec_int(k, "hold_total", 1, pn, &before)) < 0)
    goto rollback;
  const char *pi[] = {q->service,
                      q->session,
                      num(from, q->from_ns),
                      num(to, q->to_ns),
                      q->reason,
                      num(created, q->created_ns),
                      num(exp, q->expires_ns)};
  if ((rc = exec_int(k, "hold_insert", 7, pi, &id)) < 0 ||
      (rc = exec_int(k, "hold_total", 1, pn, &after)) < 0)
    goto rollback;
  {
    /* The new pin's own bytes: hold_list's subquery for this id. */
    PGresult *r = NULL;
    const char *pl[] = {now};
    r = pg_exec(k, "hold_list", 1, pl, &rc, &cause);
    free(cause);
    cause = NULL;
    if (!r)
      goto rollback;
    for (int i = 0; i < PQntuples(r); i++)
      if (strtoll(PQgetvalue(r, i, 0), NULL, 10) == id)
        one = strtoll(PQgetvalue(r, i, 8), NULL, 10);
    PQclear(r);
  }
  out->id = id;
  out->bytes = one > 0 ? (uint64_t)one : 0;
  out->total_before = before > 0 ? (uint64_t)before : 0;
  out->total_after = after > 0 ? (uint64_t)after : 0;
  if (max_bytes && out->total_after > max_bytes &&
      out->total_after > out->total_before) {
    refused = 1; /* invariant 2 */
    goto rollback;
  }
  rc = pg_cmd(k, "COMMIT", &cause);
  free(cause);
  cause = NULL;
  if (rc == 0)
    goto out;
rollback:
  PQclear(PQexec(k, "ROLLBACK"));
out:
  pg_put(h->pool, k);
  if (refused)
    return GTP_E_TOOBIG;
  return rc;
}

int pg_hold_list(pg_hold *h, int64_t now_ns, hold_cb cb, void *ctx) {
  PGconn *k;
  char *cause = NULL;
  int rc = hold_conn(h, &k);
  if (rc < 0)
    return rc;
  char now[24];
  const char *p[] = {num(now, now_ns)};
  PGresult *r = pg_exec(k, "hold_list", 1, p, &rc, &cause);
  free(cause);
  int stop = 0;
  for (int i = 0; r && i < PQntuples(r) && !stop; i++) {
    hold_row row = {
        .id = strtoll(PQgetvalue(r, i, 0), NULL, 10),
        .service = PQgetisnull(r, i, 1) ? NULL : PQgetvalue(r, i, 1),
        .session = PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2),
        .from_ns = strtoll(PQgetvalue(r, i, 3), NULL, 10),
        .to_ns = strtoll(PQgetvalue(r, i, 4), NULL, 10),
        .reason = PQgetvalue(r, i, 5),
        .created_ns = strtoll(PQgetvalue(r, i, 6), NULL, 10),
        .expires_ns = strtoll(PQgetvalue(r, i, 7), NULL, 10),
        .bytes = strtoull(PQgetvalue(r, i, 8), NULL, 10),
    };
    stop = cb(ctx, &row);
  }
  PQclear(r);
  pg_put(h->pool, k);
  return r ? stop : rc;
}

int pg_hold_delete(pg_hold *h, int64_t id, int64_t now_ns) {
  PGconn *k;
  char *cause = NULL;
  int rc = hold_conn(h, &k);
  if (rc < 0)
    return rc;
  char ids[24], now[24];
  const char *p[] = {num(ids, id), num(now, now_ns)};
  PGresult *r = pg_exec(k, "hold_delete", 2, p, &rc, &cause);
  free(cause);
  int n = r ? atoi(PQcmdTuples(r)) : 0;
  PQclear(r);
  pg_put(h->pool, k);
  if (!r)
    return rc;
  return n > 0 ? 0 : GTP_E_NOTFOUND;
}

int pg_hold_totals(pg_hold *h, int64_t now_ns, uint64_t *count,
                   uint64_t *bytes) {
  *count = *bytes = 0;
  PGconn *k;
  int rc = hold_conn(h, &k);
  if (rc < 0)
    return rc;
  char now[24];
  const char *p[] = {num(now, now_ns)};
  int64_t n = 0, b = 0;
  if ((rc = exec_int(k, "hold_count", 1, p, &n)) == 0)
    rc = exec_int(k, "hold_total", 1, p, &b);
  pg_put(h->pool, k);
  *count = n > 0 ? (uint64_t)n : 0;
  *bytes = b > 0 ? (uint64_t)b : 0;
  return rc;
}
