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
 * GTP_OOM() is the daemon's one out-of-memory exit: it prints the caller's
 * file and line and aborts. GTP_XMALLOC/GTP_XCALLOC/GTP_XSTRNDUP wrap it.
 * Header-only (static inline) so nothing that aborts is ever linked into the
 * agent: the agent must handle every allocation failure itself.
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

static inline _Noreturn void gtp__oom(const char *file, int line) {
  fprintf(stderr, "gentraced: out of memory at %s:%d\n", file, line);
  abort();
}

static inline void *gtp__xmalloc(size_t n, const char *file, int line) {
  void *p = malloc(n ? n : 1);
  if (p == NULL)
    gtp__oom(file, line);
  return p;
}

static inline void *gtp__xcalloc(size_t n, size_t size, const char *file,
                                 int line) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (p == NULL)
    gtp__oom(file, line);
  return p;
}

static inline char *gtp__xstrndup(const char *s, size_t n, const char *file,
                                  int line) {
  char *d = gtp__xmalloc(n + 1, file, line);
  if (n)
    memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* Daemon only: die loudly, naming the caller, when memory runs out. */
#define GTP_OOM() gtp__oom(__FILE__, __LINE__)
#define GTP_XMALLOC(n) gtp__xmalloc((n), __FILE__, __LINE__)
#define GTP_XCALLOC(n, size) gtp__xcalloc((n), (size), __FILE__, __LINE__)
#define GTP_XSTRNDUP(s, n) gtp__xstrndup((s), (n), __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif /* GTP_CHECK_H */
