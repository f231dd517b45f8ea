/* hold.c: retention pins, dispatched to the backend that runs (see hold.h):
 * store_hold.c on SQLite, pg_hold.c on the shared store's PostgreSQL
 * catalog. Exactly one of the two is open per hold. */
#include "config.h"

#include "hold.h"

#include <errno.h>
#include <stdlib.h>

#include "gtp_error.h"
#include "pg_hold.h"
#include "store_hold.h"

struct hold {
  store_hold *sq;
  pg_hold *pg;
};

int hold_open_sqlite(const char *path, hold **out, char **cause) {
  *out = NULL;
  hold *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  int rc = store_hold_open(path, &h->sq, cause);
  if (rc < 0) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

int hold_open_pg(const char *conninfo, hold **out, char **cause) {
  *out = NULL;
  hold *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  int rc = pg_hold_open(conninfo, &h->pg, cause);
  if (rc < 0) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

void hold_close(hold *h) {
  if (!h)
    return;
  store_hold_close(h->sq);
  pg_hold_close(h->pg);
  free(h);
}

int hold_add(hold *h, const hold_req *req, uint64_t max_bytes,
             hold_added *out) {
  return h->sq ? store_hold_add(h->sq, req, max_bytes, out)
               : pg_hold_add(h->pg, req, max_bytes, out);
}

int hold_list(hold *h, int64_t now_ns, hold_cb cb, void *ctx) {
  return h->sq ? store_hold_list(h->sq, now_ns, cb, ctx)
               : pg_hold_list(h->pg, now_ns, cb, ctx);
}

int hold_delete(hold *h, int64_t id, int64_t now_ns) {
  return h->sq ? store_hold_delete(h->sq, id, now_ns)
               : pg_hold_delete(h->pg, id, now_ns);
}

int hold_totals(hold *h, int64_t now_ns, uint64_t *count, uint64_t *bytes) {
  return h->sq ? store_hold_totals(h->sq, now_ns, count, bytes)
               : pg_hold_totals(h->pg, now_ns, count, bytes);
}
