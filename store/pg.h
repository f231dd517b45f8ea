/* pg.h: a small pool of PostgreSQL connections for the shared store's
 * catalog (libpq), with the statements every connection prepares and the
 * schema migrations run once at open.
 *
 * The pool opens one connection at pg_open (so an unreachable server or bad
 * credentials are a clear error at start), runs the migrations under an
 * advisory lock (two daemons starting together migrate once), and opens the
 * others on demand up to its size. A connection found broken is dropped
 * when returned and reopened by the next pg_get, so a PostgreSQL restart
 * costs the calls in flight an error (GTP_E_UNAVAIL) and nothing more.
 *
 * Thread: pg_get/pg_put from any thread (mutex + condition variable); a
 * connection between pg_get and pg_put belongs to that thread alone. Never
 * call pg_get on the libuv loop: it may wait for a connection or for the
 * network (the store's own threads call it).
 */
#ifndef PG_H
#define PG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pg pg;

/* One statement every connection prepares under name. */
typedef struct pg_stmt {
  const char *name, *sql;
} pg_stmt;

/* conninfo: a postgresql:// URI or key=value string. stmts: borrowed until
 * pg_close. size: connections at most (>= 1). On error returns a negative
 * code (GTP_E_UNAVAIL: cannot connect; GTP_E_VERSION: the catalog's schema
 * is newer than this build) and sets *cause (malloc'd). */
int pg_open(const char *conninfo, int size, const pg_stmt *stmts, size_t nstmts,
            pg **out, char **cause);
void pg_close(pg *p);

/* Borrows a ready connection (waits while all are lent). GTP_E_UNAVAIL with
 * *cause when none can be opened. */
int pg_get(pg *p, PGconn **out, char **cause);
/* Returns it; a broken connection, or one left inside a transaction, is
 * closed instead of kept. */
void pg_put(pg *p, PGconn *c);

/* Runs a prepared statement by name with text parameters (NULL = SQL
 * NULL). Returns the result (caller PQclear()s) when its status is
 * PGRES_COMMAND_OK or PGRES_TUPLES_OK; otherwise NULL, with *rc and *cause set:
 * GTP_E_UNAVAIL for a lost connection, GTP_E_CONFLICT for a serialization
 * or unique failure, GTP_E_INTERNAL for anything else. */
PGresult *pg_exec(PGconn *c, const char *name, int nparams,
                  const char *const *params, int *rc, char **cause);
/* The same for SQL text run once in a while (not worth a prepared
 * statement on every connection). */
PGresult *pg_exec_sql(PGconn *c, const char *sql, int nparams,
                      const char *const *params, int *rc, char **cause);
/* Streams data[0..len) (COPY text format) into `sql`, a COPY ... FROM
 * STDIN, on c (inside the caller's transaction, if any). 0 or a code as
 * pg_exec's. */
int pg_copy(PGconn *c, const char *sql, const void *data, size_t len,
            char **cause);
/* Runs plain SQL without parameters (BEGIN, COMMIT, ...); 0 or a code. */
int pg_cmd(PGconn *c, const char *sql, char **cause);

/* A pool's use, for /metrics. */
typedef struct pg_stats {
  uint64_t size, open, in_use; /* connections: allowed, open, lent now */
  uint64_t waits, wait_ns;     /* pg_get calls that waited, and how long */
  uint64_t connects, connect_errors; /* connections opened after the first */
} pg_stats;
void pg_stats_get(pg *p, pg_stats *out);
/* Failed statements of every pool so far: [0] server unreachable, [1]
 * conflicts (serialization, deadlock, unique), [2] other errors. */
void pg_stats_errors(uint64_t out[3]);

/* The schema version this build writes. */
int pg_schema_version(void);

#endif /* PG_H */
