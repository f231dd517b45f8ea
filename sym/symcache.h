/* symcache.h: the daemon's (or the CLI's) cache of opened modules for
 * symbolization with elfutils' libdw, shared by every request.
 *
 * A module is found by its GNU build id: first in the --symbols tree
 * (binary, then .debug), then at its own path on this host (symfile.h says
 * which paths may be opened), and only when the file's build id equals the
 * module's. Debug info comes from the file itself or from
 * DIR/.build-id/XX/REST.debug. A module that cannot be found is remembered
 * as absent, per build id and path, for a while (SYMCACHE_RETRY_S) so a
 * missing file costs one look per minute, not one per frame; an opened one
 * serves every path with its build id.
 *
 * Bounded: at most max_modules opened modules and max_bytes of their files
 * (the file sizes stand for the memory libdw's maps and tables may reach),
 * least recently used first out; absent entries are capped too. Each
 * request carries a budget (symcache_budget): files it may cause to be
 * opened and lookups it may make; past them frames stay module+offset.
 */
#ifndef SYMCACHE_H
#define SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "text.h"

typedef struct symcache symcache;

typedef struct symcache_config {
  const char *dir;       /* --symbols DIR, NULL = none */
  const char *from_host; /* "yes" (NULL too), "no", or root directories */
  unsigned max_modules;  /* opened modules, default 64 */
  uint64_t max_bytes;    /* their file bytes, default 512 MiB */
} symcache_config;

/* What one request may still spend (symreq.c fills the defaults). */
typedef struct symcache_budget {
  unsigned loads;   /* modules it may still look for on disk */
  uint64_t lookups; /* DWARF lookups it may still make */
} symcache_budget;

typedef struct symcache_stats {
  uint64_t modules, bytes;    /* opened now */
  uint64_t absent;            /* remembered as not found now */
  uint64_t loaded_total;      /* modules opened since start */
  uint64_t refused_total;     /* host files refused by the rule */
  uint64_t mismatch_total;    /* files whose build id did not match */
  uint64_t evicted_total;     /* opened modules pushed out */
  uint64_t lookups_total;     /* DWARF lookups */
  uint64_t over_budget_total; /* frames left unnamed by a budget */
} symcache_stats;

/* 0, or < 0 with *cause (bad --symbols / --symbols-from-host). */
int symcache_new(const symcache_config *cfg, symcache **out, char **cause);
void symcache_free(symcache *c); /* NULL is fine */

/* Appends "FUNC (FILE:LINE)" (or "FUNC") for the return address at offset
 * off of module m (off = pc - m->base) and returns 1; 0 when it cannot name
 * it; SYMCACHE_OVER_BUDGET when b allowed no more work; -ENOMEM. Any
 * thread. */
#define SYMCACHE_OVER_BUDGET 2
int symcache_resolve(symcache *c, const gtp_module *m, uint64_t off,
                     symcache_budget *b, gtp_wbuf *out);
void symcache_get_stats(symcache *c, symcache_stats *st);
/* 0, or minus the first invariant of symcache.c broken (the cache's
 * counts, table and list agree; the caps hold). Checked after every
 * insertion in debug builds. */
int symcache_check_invariants(symcache *c);
/* Prometheus text for the stats (metric names gentrace_symbols_*). */
void symcache_metrics(symcache *c, gtp_wbuf *out);

#endif
