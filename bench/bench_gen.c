/* bench_gen.c: see bench_gen.h. */
#include "config.h"

#include "bench_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s) {
  char *d = strdup(s);
  if (d == NULL) {
    fprintf(stderr, "bench: out of memory\n");
    abort();
  }
  return d;
}

store_gen *bench_gen_new(const uint8_t session[16], const bench_gen_id *id,
                         uint64_t gen, int64_t start_ns, int64_t period_ns) {
  store_gen *g = calloc(1, sizeof *g);
  if (g == NULL) {
    fprintf(stderr, "bench: out of memory\n");
    abort();
  }
  memcpy(g->session, session, sizeof g->session);
  g->service = xstrdup(id->service != NULL ? id->service : "bench");
  g->host = xstrdup(id->host != NULL ? id->host : "h");
  g->agent_version =
      xstrdup(id->agent_version != NULL ? id->agent_version : "bench");
  g->tags_json = xstrdup("{}");
  g->pid = id->pid;
  g->process_start_ns = id->process_start_ns;
  g->gen = gen;
  g->start_ns = start_ns;
  g->end_ns = start_ns + period_ns;
  return g;
}
