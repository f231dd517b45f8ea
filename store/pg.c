/* pg.c: the PostgreSQL connection pool and schema migrations (see pg.h).
 *
 * Owns: up to size connections (idle ones on a stack), the conninfo, the
 * borrowed statement table.
 *
 * Invariants:
 *   1. A connection MUST have every statement of the table prepared before
 *      pg_get hands it out, otherwise pg_exec by name would fail on a
 *      freshly reopened connection after an outage.
 *   2. A connection returned broken or inside a transaction MUST be closed,
 *      never reused, otherwise the next borrower would inherit a half-done
 *      transaction or an error state.
 *   3. open + lent + opening MUST stay <= size (counted under lock), so the
 *      pool never exceeds the connections the operator granted.
 *   4. Migrations MUST run in one transaction under PG_LOCK_MIGRATE,
 *      otherwise two daemons starting together could apply one step twice.
 */
#include "config.h" /* _GNU_SOURCE: vasprintf */

#include "pg.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"
#include "pg_schema.h"

static const char *const pg_migrations[] = PG_MIGRATIONS;
#define PG_VERSION_NOW ((int)(sizeof pg_migrations / sizeof *pg_migrations))

struct pg {
  char *conninfo;
  const pg_stmt *stmts;
  size_t nstmts;
  int size;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Protected by lock: */
  PGconn **idle; /* stack of ready connections */
  int nidle;
  int count; /* open or opening connections, idle or lent (inv. 3) */
  uint64_t waits, wait_ns, connects, connect_errors; /* metrics */
};

/* Failed statements by kind, process-wide (pg_stats_errors). */
static uint64_t pg_err[3];

int pg_schema_version(void) {
  return PG_VERSION_NOW;
}

static int pg_fail(char **cause, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int pg_fail(char **cause, int rc, const char *fmt, ...) {
  if (cause) {
    free(*cause);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
      *cause = NULL;
    va_end(ap);
  }
  return rc;
}

/* libpq's messages end in a newline; logs want one line. */
static const char *pg_msg(PGconn *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", c ? PQerrorMessage(c) : "out of memory");
  for (char *p = buf; *p; p++)
    if (*p == '\n')
      *p = (p[1] ? ' ' : '\0');
  return buf;
}

static void pg_quiet(void *arg, const char *msg) {
  (void)arg;
  (void)msg;
}

/* Opens and prepares one connection (no lock held: it waits on the
 * network). Keepalives and a TCP user timeout make a vanished server an
 * error within seconds instead of a hang. */
static int pg_connect(pg *p, PGconn **out, char **cause) {
  /* Defaults first: the URI (dbname, expanded last) overrides them. */
  const char *keys[] = {"connect_timeout",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "tcp_user_timeout",
                        "application_name",
                        "dbname",
                        NULL};
  const char *vals[] = {"5",     "5",         "2",         "3",
                        "10000", "gentraced", p->conninfo, NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  char m[512];
  if (!c || PQstatus(c) != CONNECTION_OK) {
    int rc = pg_fail(cause, GTP_E_UNAVAIL,
                     "PostgreSQL catalog: cannot "
                     "connect: %s",
                     pg_msg(c, m, sizeof m));
    PQfinish(c);
    return rc;
  }
  /* Server NOTICEs ("already exists, skipping") are not worth a log line. */
  PQsetNoticeProcessor(c, pg_quiet, NULL);
  /* Readers and writers see committed rows only; the catalog needs no
   * more (its ordering comes from gt_counter's row lock). */
  PGresult *r = PQexec(c, "SET statement_timeout = '30s';"
                          "SET lock_timeout = '30s'");
  PQclear(r);
  for (size_t i = 0; i < p->nstmts; i++) {
    r = PQprepare(c, p->stmts[i].name, p->stmts[i].sql, 0, NULL);
    if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
      int rc = pg_fail(
          cause, PQstatus(c) == CONNECTION_OK ? GTP_E_INTERNAL : GTP_E_UNAVAIL,
          "PostgreSQL catalog: prepare %s: %s", p->stmts[i].name,
          pg_msg(c, m, sizeof m));
      PQclear(r);
      PQfinish(c);
      return rc;
    }
    PQclear(r);
  }
  *out = c;
  return 0;
}

int pg_cmd(PGconn *c, const char *sql, char **cause) {
  PGresult *r = PQexec(c, sql);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  int rc = 0;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    char m[512];
    rc = pg_fail(cause,
                 PQstatus(c) == CONNECTION_OK ? GTP_E_INTERNAL : GTP_E_UNAVAIL,
                 "PostgreSQL catalog: %.40s: %s", sql, pg_msg(c, m, sizeof m));
  }
  PQclear(r);
  return rc;
}

static PGresult *pg_result(PGconn *c, PGresult *r, const char *name, int *rc,
                           char **cause);

PGresult *pg_exec(PGconn *c, const char *name, int nparams,
                  const char *const *params, int *rc, char **cause) {
  return pg_result(c, PQexecPrepared(c, name, nparams, params, NULL, NULL, 0),
                   name, rc, cause);
}

PGresult *pg_exec_sql(PGconn *c, const char *sql, int nparams,
                      const char *const *params, int *rc, char **cause) {
  char name[48];
  snprintf(name, sizeof name, "%.40s", sql);
  return pg_result(c,
                   PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0),
                   name, rc, cause);
}

/* pg_exec's outcome: r when it succeeded, else NULL with *rc and *cause. */
static PGresult *pg_result(PGconn *c, PGresult *r, const char *name, int *rc,
                           char **cause) {
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    *rc = 0;
    return r;
  }
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  char m[512];
  int code = GTP_E_INTERNAL;
  if (PQstatus(c) != CONNECTION_OK || (state && strncmp(state, "08", 2) == 0) ||
      (state && strncmp(state, "57P", 3) == 0)) /* admin shutdown etc. */
    code = GTP_E_UNAVAIL;
  else if (state && (!strcmp(state, "40001") || !strcmp(state, "40P01") ||
                     !strcmp(state, "23505")))
    code = GTP_E_CONFLICT;
  __atomic_add_fetch(&pg_err[code == GTP_E_UNAVAIL    ? 0
                             : code == GTP_E_CONFLICT ? 1
                                                      : 2],
                     1, __ATOMIC_RELAXED);
  *rc = pg_fail(cause, code, "PostgreSQL catalog: %s: %s", name,
                pg_msg(c, m, sizeof m));
  PQclear(r);
  return NULL;
}

int pg_copy(PGconn *c, const char *sql, const void *data, size_t len,
            char **cause) {
  int rc = 0;
  PGresult *r = PQexec(c, sql);
  if (!r || PQresultStatus(r) != PGRES_COPY_IN) {
    if (r && PQresultStatus(r) == PGRES_COMMAND_OK) { /* not a COPY */
      PQclear(r);
      return pg_fail(cause, GTP_E_INTERNAL,
                     "PostgreSQL catalog: %.40s: "
                     "not a COPY FROM STDIN",
                     sql);
    }
    PQclear(pg_result(c, r, sql, &rc, cause));
    return rc;
  }
  PQclear(r);
  const char *p = data;
  int ok = 1;
  while (ok && len > 0) { /* PQputCopyData takes an int length */
    size_t n = len > (1u << 20) ? (1u << 20) : len;
    ok = PQputCopyData(c, p, (int)n) == 1;
    p += n;
    len -= n;
  }
  ok = PQputCopyEnd(c, ok ? NULL : "gentrace: sending the rows failed") == 1 &&
       ok;
  r = PQgetResult(c);
  PGresult *ret = pg_result(c, r, sql, &rc, cause);
  PQclear(ret);
  while ((r = PQgetResult(c)) != NULL) /* drain: the connection is reused */
    PQclear(r);
  if (rc == 0 && !ok)
    rc = pg_fail(cause, GTP_E_UNAVAIL, "PostgreSQL catalog: %.40s: %s", sql,
                 PQerrorMessage(c));
  return rc;
}

/* Brings the schema to PG_VERSION_NOW (invariant 4). */
static int pg_migrate(PGconn *c, char **cause) {
  int rc = pg_cmd(c, "BEGIN", cause);
  if (rc < 0)
    return rc;
  rc = pg_cmd(c,
              "SELECT pg_advisory_xact_lock(" PG_LOCK_MIGRATE ");"
              "CREATE TABLE IF NOT EXISTS gt_meta(key text PRIMARY KEY,"
              " value text NOT NULL)",
              cause);
  if (rc < 0)
    goto fail;
  PGresult *r =
      PQexec(c, "SELECT value FROM gt_meta WHERE key = 'schema_version'");
  if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
    PQclear(r);
    rc = pg_cmd(c, "SELECT 1", cause); /* names the error */
    if (rc == 0)
      rc = GTP_E_INTERNAL;
    goto fail;
  }
  int have = PQntuples(r) ? atoi(PQgetvalue(r, 0, 0)) : 0;
  PQclear(r);
  if (have > PG_VERSION_NOW) {
    rc = pg_fail(cause, GTP_E_VERSION,
                 "PostgreSQL catalog: schema version "
                 "%d is newer than this build supports (%d)",
                 have, PG_VERSION_NOW);
    goto fail;
  }
  for (int v = have; v < PG_VERSION_NOW; v++) {
    rc = pg_cmd(c, pg_migrations[v], cause);
    if (rc < 0)
      goto fail;
  }
  if (have < PG_VERSION_NOW) {
    char sql[160];
    snprintf(sql, sizeof sql,
             "INSERT INTO gt_meta VALUES('schema_version',"
             " '%d') ON CONFLICT(key) DO UPDATE SET value = excluded.value",
             PG_VERSION_NOW);
    rc = pg_cmd(c, sql, cause);
    if (rc < 0)
      goto fail;
  }
  return pg_cmd(c, "COMMIT", cause);
fail:
  PQclear(PQexec(c, "ROLLBACK"));
  return rc;
}

int pg_open(const char *conninfo, int size, const pg_stmt *stmts, size_t nstmts,
            pg **out, char **cause) {
  *out = NULL;
  if (cause)
    *cause = NULL;
  if (!conninfo || (strncmp(conninfo, "postgresql://", 13) &&
                    strncmp(conninfo, "postgres://", 11)))
    return pg_fail(cause, GTP_E_BADARG,
                   "catalog '%s' is not a "
                   "postgresql:// URI",
                   conninfo ? conninfo : "");
  pg *p = calloc(1, sizeof *p);
  if (!p)
    return -ENOMEM;
  p->size = size < 1 ? 1 : size;
  p->stmts = stmts;
  p->nstmts = nstmts;
  p->conninfo = strdup(conninfo);
  p->idle = calloc((size_t)p->size, sizeof *p->idle);
  if (!p->conninfo || !p->idle) {
    free(p->conninfo);
    free(p->idle);
    free(p);
    return -ENOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);

  /* First connection without statements (the tables may not exist yet),
   * migrate, then the real one. */
  PGconn *c = NULL;
  const pg_stmt *keep = p->stmts;
  p->nstmts = 0;
  int rc = pg_connect(p, &c, cause);
  p->nstmts = nstmts;
  p->stmts = keep;
  if (rc < 0)
    goto fail;
  rc = pg_migrate(c, cause);
  PQfinish(c);
  if (rc < 0)
    goto fail;
  rc = pg_connect(p, &c, cause);
  if (rc < 0)
    goto fail;
  p->idle[p->nidle++] = c;
  p->count = 1;
  *out = p;
  return 0;
fail:
  pg_close(p);
  return rc;
}

void pg_close(pg *p) {
  if (!p)
    return;
  for (int i = 0; i < p->nidle; i++)
    PQfinish(p->idle[i]);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p->idle);
  free(p->conninfo);
  free(p);
}

static int64_t pg_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int pg_get(pg *p, PGconn **out, char **cause) {
  *out = NULL;
  pthread_mutex_lock(&p->lock);
  if (p->nidle == 0 && p->count >= p->size) {
    int64_t t0 = pg_mono_ns();
    while (p->nidle == 0 && p->count >= p->size)
      pthread_cond_wait(&p->cond, &p->lock);
    p->waits++;
    p->wait_ns += (uint64_t)(pg_mono_ns() - t0);
  }
  if (p->nidle > 0) {
    *out = p->idle[--p->nidle];
    pthread_mutex_unlock(&p->lock);
    return 0;
  }
  p->count++; /* reserve the slot, then connect unlocked (inv. 3) */
  pthread_mutex_unlock(&p->lock);
  int rc = pg_connect(p, out, cause);
  pthread_mutex_lock(&p->lock);
  p->connects++;
  if (rc < 0)
    p->connect_errors++;
  pthread_mutex_unlock(&p->lock);
  if (rc < 0) {
    pthread_mutex_lock(&p->lock);
    p->count--;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
  }
  return rc;
}

void pg_put(pg *p, PGconn *c) {
  if (!c)
    return;
  int keep = PQstatus(c) == CONNECTION_OK &&
             PQtransactionStatus(c) == PQTRANS_IDLE; /* invariant 2 */
  if (!keep)
    PQfinish(c);
  pthread_mutex_lock(&p->lock);
  if (keep)
    p->idle[p->nidle++] = c;
  else
    p->count--;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

void pg_stats_get(pg *p, pg_stats *out) {
  pthread_mutex_lock(&p->lock);
  out->size = (uint64_t)p->size;
  out->open = (uint64_t)p->count;
  out->in_use = (uint64_t)(p->count - p->nidle);
  out->waits = p->waits;
  out->wait_ns = p->wait_ns;
  out->connects = p->connects;
  out->connect_errors = p->connect_errors;
  pthread_mutex_unlock(&p->lock);
}

void pg_stats_errors(uint64_t out[3]) {
  for (int i = 0; i < 3; i++)
    out[i] = __atomic_load_n(&pg_err[i], __ATOMIC_RELAXED);
}
