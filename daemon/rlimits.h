/* rlimits.h: process limits gentraced sets for itself (rlimits.c). */
#ifndef GT_RLIMITS_H
#define GT_RLIMITS_H

#include <stdint.h>

/* Raises RLIMIT_NOFILE's soft limit to `want` (up to the hard limit; past
 * it only with CAP_SYS_RESOURCE) and reports the limits now in force.
 * Returns 0 or -errno (getrlimit failed). */
int rlimits_raise_nofile(uint64_t want, uint64_t *soft, uint64_t *hard);

/* Lowers the calling thread's nice value by `boost` (0 = no change and no
 * system call), so the threads it creates before rlimits_nice_end inherit
 * the boost; *saved receives the value to restore. Returns 0 or -errno
 * (EACCES/EPERM: the host does not allow it; nothing changed). */
int rlimits_nice_begin(int boost, int *saved);
/* Restores the caller's nice value; the same boost as rlimits_nice_begin. */
void rlimits_nice_end(int boost, int saved);

/* The nice value of thread `tid` (0 = the caller), -100 if unknown. */
int rlimits_nice_of(long tid);

#endif /* GT_RLIMITS_H */
