/* symreq.h: the symbolizer of one request (one download, one CLI run): a
 * gtp_symbolizer (proto/stackname.h) over the shared symcache, with the
 * request's own cache of frame names and its budget.
 *
 * A stack-heavy window names the same frames over and over (one stack per
 * event, the same few stacks per thread): the per-request cache makes a
 * repeat a hash lookup, without the shared cache's lock. It is bounded
 * (SYMREQ_NAMES_MAX names, SYMREQ_BYTES_MAX bytes); past that, names are
 * still produced, just not remembered.
 *
 * Invariants:
 *  1. A cached name is keyed by the module's whole build id and the offset,
 *     never by a hash alone, so no module can be named after another.
 *  2. Only the request's thread uses a symreq.
 */
#ifndef SYMREQ_H
#define SYMREQ_H

#include <stdint.h>

#include "stackname.h"
#include "symcache.h"

typedef struct symreq symreq;

/* The budget of one request (symcache.h): module files it may look for and
 * DWARF lookups it may make. */
#define SYMREQ_LOADS 32
#define SYMREQ_LOOKUPS 200000u

/* NULL on ENOMEM. cache is borrowed and outlives the request. */
symreq *symreq_new(symcache *cache);
void symreq_free(symreq *r); /* NULL is fine */
/* The symbolizer to hand to a writer (valid while r lives). */
const gtp_symbolizer *symreq_symbolizer(symreq *r);

#endif
