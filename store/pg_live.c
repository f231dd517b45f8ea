/* pg_live.c: daemons' leases, their connected sessions and the orphan
 * sweep's catalog side (see pg_live.h and pg_schema.h).
 *
 * Owns: nothing; borrows pg_cat's pool.
 *
 * Invariants:
 *   1. A daemon's connection rows MUST be replaced in one transaction,
 *      otherwise a reader between the DELETE and the INSERT would see the
 *      daemon's agents as disconnected.
 *   2. An object MUST be taken for an orphan only when no catalog row names
 *      it AND its daemon cannot still commit it (no running lease, or a
 *      lease of a later run), otherwise the sweep would delete a segment a
 *      live daemon is about to catalog and ACK.
 *   3. The sweep MUST catalog an orphan (PG_ORPHAN_OWNER) before its object
 *      is deleted, otherwise a late commit of that object by its daemon
 *      would succeed and ACK generations whose bytes are gone; with the row
 *      there that commit fails and the daemon uploads again.
 */
#include "config.h"

#include "pg_live.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "pg.h"
#include "pg_schema.h"

#define NOW_NS "(extract(epoch from clock_timestamp()) * 1e9)::bigint"

static const char *num(char *buf, int64_t v) {
  snprintf(buf, 24, "%" PRId64, v);
  return buf;
}

/* Runs one statement on a pooled connection; PQclear()s the result. */
static int run1(pg_cat *c, const char *sql, int np, const char *const *p,
                char **cause) {
  PGconn *k;
  int rc = pg_get(pg_cat_pool(c), &k, cause);
  if (rc < 0)
    return rc;
  PQclear(pg_exec_sql(k, sql, np, p, &rc, cause));
  pg_put(pg_cat_pool(c), k);
  return rc;
}

int pg_live_lease(pg_cat *c, const char *daemon, int64_t started_ns,
                  int64_t lease_ms, char **cause) {
  char a[24], b[24];
  const char *p[] = {daemon, num(a, started_ns), num(b, lease_ms)};
  return run1(c,
              "INSERT INTO gt_daemons VALUES($1, $2, " NOW_NS
              " + $3::bigint * 1000000) ON CONFLICT(daemon) DO UPDATE SET"
              " started_ns = excluded.started_ns,"
              " lease_ns = excluded.lease_ns",
              3, p, cause);
}

/* Appends element e (m bytes that need no quoting) to the PostgreSQL
 * text[] literal being built in arr; the first call opens it. arr's size
 * is the caller's: the elements' bytes + one per element + 3. */
static void arr_add(char *arr, size_t *len, const char *e, size_t m) {
  arr[*len] = *len == 0 ? '{' : ',';
  memcpy(arr + *len + 1, e, m);
  *len += m + 1;
}

/* Closes the literal ("{}" when nothing was added) and takes the catalog
 * connection for the statement that reads it; on failure arr is freed. */
static int arr_end_conn(pg_cat *c, char *arr, size_t len, PGconn **k,
                        char **cause) {
  if (len == 0)
    arr[len++] = '{';
  arr[len++] = '}';
  arr[len] = '\0';
  int rc = pg_get(pg_cat_pool(c), k, cause);
  if (rc < 0)
    free(arr);
  return rc;
}

int pg_live_conns(pg_cat *c, const char *daemon, char (*sessions)[33], size_t n,
                  char **cause) {
  /* One text[] literal: the ids are hex digits, nothing to quote. */
  char *arr = malloc(n * 33 + 3);
  if (!arr)
    return -ENOMEM;
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    arr_add(arr, &len, sessions[i], 32);
  PGconn *k;
  int rc = arr_end_conn(c, arr, len, &k, cause);
  if (rc < 0)
    return rc;
  const char *p[] = {daemon, arr};
  rc = pg_cmd(k, "BEGIN", cause); /* invariant 1 */
  if (rc == 0)
    PQclear(pg_exec_sql(k, "DELETE FROM gt_conns WHERE daemon = $1", 1, p, &rc,
                        cause));
  if (rc == 0)
    PQclear(pg_exec_sql(k,
                        "INSERT INTO gt_conns SELECT $1, s FROM"
                        " unnest($2::text[]) s ON CONFLICT DO NOTHING",
                        2, p, &rc, cause));
  if (rc == 0)
    rc = pg_cmd(k, "COMMIT", cause);
  if (rc < 0)
    PQclear(PQexec(k, "ROLLBACK"));
  pg_put(pg_cat_pool(c), k);
  free(arr);
  return rc;
}

int pg_live_leave(pg_cat *c, const char *daemon, char **cause) {
  const char *p[] = {daemon};
  int rc = run1(c, "DELETE FROM gt_conns WHERE daemon = $1", 1, p, cause);
  if (rc == 0)
    rc = run1(c, "DELETE FROM gt_daemons WHERE daemon = $1", 1, p, cause);
  return rc;
}

int pg_live_orphans(pg_cat *c, pg_live_obj *objs, size_t n, char **cause) {
  if (n == 0)
    return 0;
  if (n > 1000)
    return GTP_E_BADARG;
  /* The objects as one text[] literal: keys hold [A-Za-z0-9._/-] only. */
  size_t cap = 3;
  for (size_t i = 0; i < n; i++)
    cap += strlen(objs[i].object) + 1;
  char *arr = malloc(cap);
  if (!arr)
    return -ENOMEM;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    arr_add(arr, &len, objs[i].object, strlen(objs[i].object));
    objs[i].orphan = 0;
  }
  PGconn *k;
  int rc = arr_end_conn(c, arr, len, &k, cause);
  if (rc < 0)
    return rc;
  /* Per object: cataloged? and its daemon's running lease's start. */
  const char *p[] = {arr};
  PGresult *r = pg_exec_sql(
      k,
      "SELECT o, EXISTS (SELECT 1 FROM gt_segments s WHERE s.object = o)"
      " FROM unnest($1::text[]) o",
      1, p, &rc, cause);
  PGresult *d = r ? pg_exec_sql(k,
                                "SELECT daemon, started_ns FROM gt_daemons"
                                " WHERE lease_ns > " NOW_NS,
                                0, NULL, &rc, cause)
                  : NULL;
  pg_put(pg_cat_pool(c), k);
  free(arr);
  if (r && d) {
    for (int i = 0; i < PQntuples(r) && (size_t)i < n; i++) {
      if (PQgetvalue(r, i, 1)[0] == 't')
        continue; /* cataloged: not an orphan */
      pg_live_obj *o = &objs[i];
      int live = 0;
      for (int j = 0; j < PQntuples(d) && !live; j++)
        live = strcmp(PQgetvalue(d, j, 0), o->daemon) == 0 &&
               strtoll(PQgetvalue(d, j, 1), NULL, 10) <= o->put_ns;
      o->orphan = !live; /* invariant 2 */
    }
  }
  PQclear(r);
  PQclear(d);
  return rc;
}

int pg_live_orphan_mark(pg_cat *c, const char *object, uint64_t bytes,
                        char **cause) {
  PGconn *k;
  int rc = pg_get(pg_cat_pool(c), &k, cause);
  if (rc < 0)
    return rc;
  char b[24];
  const char *p[] = {object,
                     num(b, bytes > INT64_MAX ? INT64_MAX : (int64_t)bytes)};
  /* Dead at once, its row kept a day (dead_ns in the future), then the
   * dead sweep deletes the (gone) object again and the row. */
  PGresult *r = pg_exec_sql(
      k,
      "INSERT INTO gt_segments(object, bytes, daemon, created_ns, live_gens,"
      " dead_ns) VALUES($1, $2, '" PG_ORPHAN_OWNER "', " NOW_NS ", 0, " NOW_NS
      " + 86400000000000) ON CONFLICT(object) DO NOTHING RETURNING id",
      2, p, &rc, cause);
  if (r)
    rc = PQntuples(r) == 1; /* invariant 3: the caller deletes after this */
  PQclear(r);
  pg_put(pg_cat_pool(c), k);
  return rc;
}
