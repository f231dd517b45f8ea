/* check.h: run-time invariant checks and the out-of-memory exit.
 *
 * GTP_ASSERT(cond) checks a numbered invariant in debug builds
 * (`./configure --enable-debug` defines GT_DEBUG; CI's builds have it) and
 * compiles to nothing otherwise. A failed check calls gtp_check_failed,
 * which counts it and calls the hook the program installed:
 *
 *   - gentraced installs gtp_check_abort: it dies loudly with file:line, as
 *     the daemon may on an impossible state;
 *   - test binaries install an abort hook too (or read the count);
 *   - the agent (libgentrace, inside a host process) installs nothing, so a
 *     failed check there is only counted: the agent never aborts, prints or
 *     exits in its host, debug build or not.
 *
 * Each stateful module has an X_check_invariants() made of GTP_ASSERTs,
 * called where its state changes, as SQLite's pager does.
 *
 * There is no out-of-memory exit: nothing in the project dies when an
 * allocation fails. The agent handles every failure itself (it never
 * aborts in its host); gentraced's start-up returns -ENOMEM with a cause
 * and exits with an error; once running, an allocation that fails ends
 * only the agent connection (or request) that needed it, and the agent
 * resends (docs/ARCHITECTURE.md, "When memory runs out").
 */
#ifndef GTP_CHECK_H
#define GTP_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*gtp_check_hook_fn)(const char *file, int line, const char *expr);

/* Counts a failed check and calls the hook (if any). Thread-safe. */
void gtp_check_failed(const char *file, int line, const char *expr);
/* Installs the hook called on each failed check (NULL: count only).
 * Call once, before threads start. */
void gtp_check_set_hook(gtp_check_hook_fn hook);
/* Failed checks so far in this process. */
unsigned long gtp_check_failures(void);

#ifdef GT_DEBUG
#define GTP_DEBUG_ENABLED 1
#define GTP_ASSERT(cond)                                                       \
  ((cond) ? (void)0 : gtp_check_failed(__FILE__, __LINE__, #cond))
#else
#define GTP_DEBUG_ENABLED 0
/* Type-checks cond without evaluating it. */
#define GTP_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* The daemon's and the tests' hook: one line on stderr, then abort. Not for
 * the agent (see above). */
static inline void gtp_check_abort(const char *file, int line,
                                   const char *expr) {
  fprintf(stderr, "invariant failed at %s:%d: %s\n", file, line, expr);
  abort();
}

#ifdef __cplusplus
}
#endif
#endif /* GTP_CHECK_H */
