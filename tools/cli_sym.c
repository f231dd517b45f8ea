/* cli_sym.c: the symbolizer of `gentrace convert` and `gentrace stat`
 * (sym/: libdw), built from --symbols DIR and --symbols-from-host. The CLI
 * runs for its user on their own files, so host files are read by default
 * (under the same rule as the daemon's, docs/SYMBOLS.md). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "symcache.h"
#include "symreq.h"

struct cli_sym {
  symcache *cache;
  symreq *req;
};

struct cli_sym *cli_sym_open(const cli_opts *o, const char *cmd) {
  struct cli_sym *s = calloc(1, sizeof *s);
  if (!s) {
    fprintf(stderr, "gentrace: out of memory\n");
    return NULL;
  }
  symcache_config cfg = {o->symbols, o->symbols_from_host, 0, 0};
  char *cause = NULL;
  if (symcache_new(&cfg, &s->cache, &cause) < 0) {
    cli_usage_error(cmd, "%s", cause ? cause : "out of memory");
    free(cause);
    free(s);
    return NULL;
  }
  if (!(s->req = symreq_new(s->cache))) {
    fprintf(stderr, "gentrace: out of memory\n");
    symcache_free(s->cache);
    free(s);
    return NULL;
  }
  return s;
}

const struct gtp_symbolizer *cli_sym_get(struct cli_sym *s) {
  return symreq_symbolizer(s->req);
}

void cli_sym_close(struct cli_sym *s) {
  if (!s)
    return;
  symreq_free(s->req);
  symcache_free(s->cache);
  free(s);
}
