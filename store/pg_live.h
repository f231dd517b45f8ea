/* pg_live.h: the catalog's record of the daemons that run now and the
 * sessions connected to each (tables gt_daemons and gt_conns of
 * pg_schema.h), and the orphan sweep's questions to it.
 *
 * A daemon holds a lease (renewed every second by shared_live.c); its rows
 * count only while the lease runs, so a daemon killed with -9 stops
 * counting within one lease and nobody has to clean up after it first.
 *
 * Thread: any; each call borrows a pooled connection (may wait for the
 * network: never on the libuv loop).
 */
#ifndef PG_LIVE_H
#define PG_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "pg_cat.h"

/* Starts or renews daemon's lease until now + lease_ms; started_ns: when
 * this run of the daemon started (its objects from before are not its
 * current run's). */
int pg_live_lease(pg_cat *c, const char *daemon, int64_t started_ns,
                  int64_t lease_ms, char **cause);
/* Replaces daemon's connected sessions by sessions[0..n) (32 hex digits
 * each), in one transaction. */
int pg_live_conns(pg_cat *c, const char *daemon, char (*sessions)[33], size_t n,
                  char **cause);
/* Removes daemon's lease and connections (clean shutdown). */
int pg_live_leave(pg_cat *c, const char *daemon, char **cause);

/* The orphan sweep's view of one object it listed. */
typedef struct pg_live_obj {
  const char *object; /* bucket-relative key (borrowed) */
  const char *daemon; /* its daemon id, from the key (borrowed) */
  int64_t put_ns;     /* when its daemon put it, from the key */
  /* Filled by pg_live_orphans: */
  int orphan; /* 1: no catalog row, and its daemon's lease ran out or its
                 current run started after put_ns */
} pg_live_obj;
/* Marks the orphans among objs[0..n) (n at most 1000). 0 or a code. */
int pg_live_orphans(pg_cat *c, pg_live_obj *objs, size_t n, char **cause);
/* Catalogs object as swept (a dead row owned by PG_ORPHAN_OWNER that stays
 * for a day), so a late commit of it by its daemon fails instead of
 * cataloging an object that is gone. 1: marked now (delete the object), 0:
 * someone cataloged it meanwhile (keep it), or a negative code. */
int pg_live_orphan_mark(pg_cat *c, const char *object, uint64_t bytes,
                        char **cause);

#endif /* PG_LIVE_H */
