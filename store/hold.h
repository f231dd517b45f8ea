/* hold.h: retention pins ("holds" in code, so they are not confused with
 * the download low-water pins of store_pin.h): an operator's request to
 * keep every generation of one service or session overlapping [from, to)
 * out of retention until the pin is deleted or expires.
 *
 * Pins live in the catalog (the SQLite table retention_pins, or the
 * PostgreSQL table gt_retention_pins), so every daemon of a shared store
 * honours a pin made through any of them: retention (store.c,
 * pg_cat_retain) skips every generation a live pin holds, in the same SQL
 * statement that deletes.
 *
 * A pin holds a generation when the pin is live (expires_ns > now), the
 * generation belongs to the pin's session, or to a session of the pin's
 * service, and the generation overlaps the window (start < to and
 * end > from, as window downloads select them).
 *
 * This module opens its own catalog connection (SQLite: one read-write
 * connection beside the store thread's, serialized by SQLite's write lock;
 * PostgreSQL: a small pool of its own), so pin calls never wait for the
 * store thread's queue, and the store thread never for them beyond one
 * short transaction.
 *
 * Thread: any (calls are serialized inside); they wait for disk or network,
 * so never call them on the libuv loop.
 */
#ifndef HOLD_H
#define HOLD_H

#include <stddef.h>
#include <stdint.h>

typedef struct hold hold;

/* Live pins at most (a new one past it is refused like one over the byte
 * cap): retention evaluates every live pin for every candidate row. */
#define HOLD_MAX_PINS 1000
/* Longest reason, in bytes. */
#define HOLD_REASON_MAX 512

typedef struct hold_req {
  const char *service;    /* exactly one of service and session */
  const char *session;    /* 32 lowercase hex digits */
  int64_t from_ns, to_ns; /* from < to */
  const char *reason;     /* valid UTF-8, <= HOLD_REASON_MAX bytes */
  int64_t created_ns, expires_ns;
} hold_req;

typedef struct hold_row {
  int64_t id;
  const char *service, *session; /* one is NULL; borrowed for the call */
  int64_t from_ns, to_ns;
  const char *reason;
  int64_t created_ns, expires_ns;
  uint64_t bytes; /* stored bytes of the generations it holds now */
} hold_row;

typedef int (*hold_cb)(void *ctx, const hold_row *row);

/* What hold_add reports beside its result. */
typedef struct hold_added {
  int64_t id;
  uint64_t bytes;        /* the new pin's bytes */
  uint64_t total_before; /* every live pin's bytes, counted once */
  uint64_t total_after;
  uint64_t count; /* live pins before this one */
} hold_added;

/* Opens the pin store of an SQLite database (the store must have created or
 * migrated it first) or of a PostgreSQL catalog (conninfo). */
int hold_open_sqlite(const char *path, hold **out, char **cause);
int hold_open_pg(const char *conninfo, hold **out, char **cause);
void hold_close(hold *h);

/* Adds a pin. max_bytes (0 = no cap): the pin is refused (GTP_E_TOOBIG,
 * nothing changes) when it would raise the bytes held by all live pins,
 * counted once each, above max_bytes, or when HOLD_MAX_PINS are live.
 * Expired pins are removed first. 0 with *out filled, or a negative code
 * (GTP_E_UNAVAIL: the catalog cannot be reached). */
int hold_add(hold *h, const hold_req *req, uint64_t max_bytes, hold_added *out);
/* Live pins, newest first. */
int hold_list(hold *h, int64_t now_ns, hold_cb cb, void *ctx);
/* Deletes a pin: 0, or GTP_E_NOTFOUND when no live pin has that id. */
int hold_delete(hold *h, int64_t id, int64_t now_ns);
/* Live pins and the bytes they hold, each generation counted once. */
int hold_totals(hold *h, int64_t now_ns, uint64_t *count, uint64_t *bytes);

#endif /* HOLD_H */
