/* pg_hold.h: retention pins in the shared store's PostgreSQL catalog (the
 * contract is hold.h's; hold.c dispatches here). Opens its own small pool
 * (pg.h), so pin calls never wait behind the catalog's commits and reads.
 *
 * Thread: any (never the libuv loop: calls wait for the network).
 */
#ifndef PG_HOLD_H
#define PG_HOLD_H

#include "hold.h"

typedef struct pg_hold pg_hold;

int pg_hold_open(const char *conninfo, pg_hold **out, char **cause);
void pg_hold_close(pg_hold *h);
int pg_hold_add(pg_hold *h, const hold_req *req, uint64_t max_bytes,
                hold_added *out);
int pg_hold_list(pg_hold *h, int64_t now_ns, hold_cb cb, void *ctx);
int pg_hold_delete(pg_hold *h, int64_t id, int64_t now_ns);
int pg_hold_totals(pg_hold *h, int64_t now_ns, uint64_t *count,
                   uint64_t *bytes);

#endif /* PG_HOLD_H */
