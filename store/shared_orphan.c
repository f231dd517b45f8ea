/* shared_orphan.c: the orphan sweep (see shared_orphan.h).
 *
 * Owns: one batch of candidates during a sweep.
 *
 * Invariants:
 *   1. Only names of the form PREFIX/segments/DAEMON/TIME-N.gts that
 *      segment.c writes MUST be considered, otherwise the sweep could
 *      delete objects someone else keeps in the bucket.
 *   2. An object MUST be deleted only after pg_live_orphan_mark cataloged
 *      it as swept (pg_live.c invariant 3).
 */
#include "config.h"

#include "shared_orphan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"
#include "pg_live.h"

#define ORPHAN_BATCH 256

typedef struct cand {
  char object[600];
  char daemon[128];
  int64_t put_ns;
  uint64_t size;
} cand;

typedef struct sweep {
  pg_cat *cat;
  s3 *s3;
  size_t plen; /* strlen of PREFIX/segments/ */
  int64_t before_ns;
  cand batch[ORPHAN_BATCH];
  size_t n;
  shared_orphan_result *out;
  int rc;
  char **cause;
} sweep;

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Parses DAEMON/TIME-N.gts (invariant 1). 1 when it is ours. */
static int parse_name(const char *rest, cand *c) {
  const char *slash = strchr(rest, '/');
  if (!slash || slash == rest || (size_t)(slash - rest) >= sizeof c->daemon)
    return 0;
  memcpy(c->daemon, rest, (size_t)(slash - rest));
  c->daemon[slash - rest] = '\0';
  const char *t = slash + 1;
  size_t digits = strspn(t, "0123456789");
  if (digits == 0 || digits > 19 || t[digits] != '-')
    return 0;
  const char *n = t + digits + 1;
  size_t nd = strspn(n, "0123456789");
  if (nd == 0 || strcmp(n + nd, ".gts") != 0)
    return 0;
  c->put_ns = strtoll(t, NULL, 10);
  return 1;
}

static int flush(sweep *w) {
  if (w->n == 0)
    return 0;
  pg_live_obj objs[ORPHAN_BATCH];
  for (size_t i = 0; i < w->n; i++)
    objs[i] = (pg_live_obj){.object = w->batch[i].object,
                            .daemon = w->batch[i].daemon,
                            .put_ns = w->batch[i].put_ns};
  int rc = pg_live_orphans(w->cat, objs, w->n, w->cause);
  for (size_t i = 0; rc == 0 && i < w->n; i++) {
    if (!objs[i].orphan)
      continue;
    int m =
        pg_live_orphan_mark(w->cat, objs[i].object, w->batch[i].size, w->cause);
    if (m < 0) {
      rc = m;
      break;
    }
    if (m == 0)
      continue; /* cataloged meanwhile: it lives */
    char *why = NULL;
    if (s3_delete(w->s3, objs[i].object, &why) == 0) /* invariant 2 */
      w->out->swept++;
    free(why);
    /* A failed delete leaves a swept row: the dead sweep deletes the
     * object with it later. */
  }
  w->n = 0;
  return rc;
}

static int on_key(void *ctx, const char *key, uint64_t size) {
  sweep *w = ctx;
  w->out->listed++;
  cand *c = &w->batch[w->n];
  if (strlen(key) >= sizeof c->object || !parse_name(key + w->plen, c))
    return 0;
  if (c->put_ns >= w->before_ns)
    return 0; /* within the grace period */
  memcpy(c->object, key, strlen(key) + 1);
  c->size = size;
  if (++w->n == ORPHAN_BATCH && (w->rc = flush(w)) < 0)
    return 1;
  return 0;
}

int shared_orphan_sweep(pg_cat *cat, s3 *s3c, const char *prefix,
                        int64_t grace_ms, shared_orphan_result *out,
                        char **cause) {
  memset(out, 0, sizeof *out);
  sweep *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  char pre[600];
  snprintf(pre, sizeof pre, "%ssegments/", prefix ? prefix : "");
  w->cat = cat;
  w->s3 = s3c;
  w->plen = strlen(pre);
  w->before_ns = real_ns() - grace_ms * 1000000LL;
  w->out = out;
  w->cause = cause;
  int rc = s3_list(s3c, pre, on_key, w, cause);
  if (rc == 0)
    rc = w->rc;
  if (rc == 0)
    rc = flush(w);
  free(w);
  return rc;
}
