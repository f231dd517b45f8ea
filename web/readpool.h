/* readpool.h: a bounded pool of storage_reader connections for the HTTP
 * threads. A request borrows a reader for one short read (one listing, one
 * generation) and gives it back at once, so a slow client never holds a
 * connection, and the number of SQLite connections stays bounded no matter
 * how many HTTP connections are open.
 *
 * Thread: any; the pool has its own lock.
 */
#ifndef WEB_READPOOL_H
#define WEB_READPOOL_H

#include "storage.h"

typedef struct readpool readpool;

/* Opens the first reader at once so a bad path fails here (with *cause set,
 * malloc'd); the others open on demand, up to size. */
int readpool_new(storage *st, unsigned size, readpool **out, char **cause);
/* Every reader MUST have been put back. */
void readpool_free(readpool *p);

/* Borrows a reader, waiting up to wait_ms for one to come back. Returns 0
 * and *out, GTP_E_LIMIT if none came back in time (overloaded), or the open
 * error of a new reader. */
int readpool_get(readpool *p, unsigned wait_ms, storage_reader **out);
void readpool_put(readpool *p, storage_reader *r);
/* 0, or minus the first of readpool.c's invariants that does not hold.
 * Debug builds also check at every get and put. */
int readpool_check_invariants(readpool *p);

#endif
