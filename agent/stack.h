/* stack.h: frame-pointer stack walk and the module table.
 *
 * The walk trusts nothing it reads: host code built without frame pointers
 * leaves arbitrary values in the frame-pointer register, so every frame
 * pointer is checked before it is dereferenced.
 *
 * Invariants:
 *  1. A frame pointer MUST be pointer-aligned, inside
 *     [lo, hi - 16) of the calling thread's own stack, and strictly above the
 *     previous one before it is read, otherwise a garbage value could fault
 *     or loop forever.
 *  2. The depth MUST stay <= max (<= GTP_STACK_DEPTH_MAX).
 *  3. Once the table of executable segments exists, a return address
 *     outside every one of them MUST end the walk: it is data read through
 *     a frame pointer the host code did not keep (stack.c, "executable
 *     ranges").
 */
#ifndef GT_STACK_H
#define GT_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Bounds of the calling thread's stack; 0 or -errno. Slow (may read
 * /proc/self/maps for the main thread): call once per thread and cache. */
int gt__stack_bounds(uintptr_t *lo, uintptr_t *hi);

/* Walks from the caller's frame, skipping `skip` frames; returns the number
 * of return addresses stored in pcs (<= max). */
size_t gt__stack_walk(uintptr_t lo, uintptr_t hi, uint64_t *pcs, size_t max,
                      size_t skip);

/* Walks from the frame record at fp (a frame pointer value read from a
 * frame, e.g. the saved one of the agent's entry point, so the first address
 * is its caller's caller); fp is checked like every other (invariant 1).
 * Returns the number of return addresses stored in pcs (<= max). */
size_t gt__stack_walk_from(uintptr_t fp, uintptr_t lo, uintptr_t hi,
                           uint64_t *pcs, size_t max);

/* Appends a MODULES record for every loaded object (path, base, size, GNU
 * build-id). 0 or a wbuf error. */
int gt__modules_encode(gtp_wbuf *b);

#endif
