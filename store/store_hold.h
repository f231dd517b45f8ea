/* store_hold.h: retention pins on the SQLite backend (the contract is
 * hold.h's; hold.c dispatches here). The database must be at schema 5 or
 * later (store_open migrates it).
 *
 * Thread: any; calls are serialized on the module's own connection.
 */
#ifndef STORE_HOLD_H
#define STORE_HOLD_H

#include "hold.h"

typedef struct store_hold store_hold;

int store_hold_open(const char *path, store_hold **out, char **cause);
void store_hold_close(store_hold *h);
int store_hold_add(store_hold *h, const hold_req *req, uint64_t max_bytes,
                   hold_added *out);
int store_hold_list(store_hold *h, int64_t now_ns, hold_cb cb, void *ctx);
int store_hold_delete(store_hold *h, int64_t id, int64_t now_ns);
int store_hold_totals(store_hold *h, int64_t now_ns, uint64_t *count,
                      uint64_t *bytes);

#endif /* STORE_HOLD_H */
