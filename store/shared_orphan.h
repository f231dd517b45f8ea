/* shared_orphan.h: the orphan sweep of the shared store: segment objects
 * that no catalog row names, because their daemon was killed between the
 * PUT and the catalog commit (or lost the catalog for good), are deleted
 * after a grace period.
 *
 * An object is an orphan when it is older than the grace period (by the
 * time in its name), not cataloged, and its daemon cannot commit it any
 * more: no running lease (gt_daemons), or a lease of a run that started
 * after the object was put. The sweep catalogs it as swept before deleting
 * it (pg_live.h), so a daemon that was only cut off and commits it late is
 * told to upload again instead of cataloging bytes that are gone.
 *
 * Thread: any (shared_retain's thread runs it); the s3 client is the
 * caller's, for this thread only.
 */
#ifndef SHARED_ORPHAN_H
#define SHARED_ORPHAN_H

#include <stdint.h>

#include "pg_cat.h"
#include "s3.h"

typedef struct shared_orphan_result {
  uint64_t listed; /* segment objects seen */
  uint64_t swept;  /* orphans deleted */
} shared_orphan_result;

/* One sweep over PREFIX/segments/ (prefix: "" or ending in '/', the
 * daemons' --objects prefix; s3 addresses the bucket from its root).
 * 0 or a negative code (what was swept before the error is counted). */
int shared_orphan_sweep(pg_cat *cat, s3 *s3, const char *prefix,
                        int64_t grace_ms, shared_orphan_result *out,
                        char **cause);

#endif /* SHARED_ORPHAN_H */
