/* stackname.c: see stackname.h for the naming rule and the invariants. */
#include "stackname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gtp_stackname_init(gtp_stackname *sn, const gtp_symbolizer *sym) {
  memset(sn, 0, sizeof *sn);
  sn->sym = sym;
}

void gtp_stackname_fini(gtp_stackname *sn) {
  free(sn->mods);
  sn->mods = NULL;
  sn->nmods = sn->cap = 0;
  sn->g = NULL;
}

static int by_base(const void *a, const void *b) {
  const gtp_module *x = *(const gtp_module *const *)a;
  const gtp_module *y = *(const gtp_module *const *)b;
  return x->base < y->base ? -1 : x->base > y->base;
}

int gtp_stackname_gen(gtp_stackname *sn, const gtp_gen *g) {
  sn->g = g;
  sn->nmods = 0;
  if (!sn->sym || g->nmodules == 0)
    return 0;
  if (g->nmodules > sn->cap) {
    const gtp_module **m = realloc(sn->mods, g->nmodules * sizeof *m);
    if (!m)
      return -ENOMEM;
    sn->mods = m;
    sn->cap = g->nmodules;
  }
  for (size_t i = 0; i < g->nmodules; i++)
    sn->mods[i] = &g->modules[i];
  sn->nmods = g->nmodules;
  qsort(sn->mods, sn->nmods, sizeof *sn->mods, by_base);
  return 0;
}

const gtp_module *gtp_stackname_module(const gtp_stackname *sn, uint64_t pc) {
  /* The last module whose base <= pc; hostile tables may overlap, then
   * the one with the highest base wins (any is as good). */
  size_t lo = 0, hi = sn->nmods;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sn->mods[mid]->base <= pc)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  const gtp_module *m = sn->mods[lo - 1];
  return pc - m->base < m->size ? m : NULL;
}

static void put_basename(gtp_wbuf *out, gtp_str path) {
  size_t start = 0;
  for (size_t i = 0; i < path.len; i++)
    if (path.ptr[i] == '/')
      start = i + 1;
  if (start == path.len) /* empty, or ends in '/': the whole path */
    start = 0;
  gtp_wbuf_put(out, path.ptr + start, path.len - start);
}

int gtp_stackname_frame(gtp_stackname *sn, uint64_t pc, gtp_wbuf *out) {
  const gtp_module *m = sn->sym ? gtp_stackname_module(sn, pc) : NULL;
  if (m) {
    size_t mark = out->len;
    int rc = sn->sym->resolve(sn->sym->ctx, m, pc - m->base, out);
    if (rc == -ENOMEM)
      return rc;
    if (rc == 1 && !out->err && out->len > mark) {
      sn->named++;
      return 0;
    }
    /* Invariant 2: whatever the resolver left is dropped. */
    out->len = mark;
    if (out->err == -ENOMEM)
      return -ENOMEM;
    out->err = 0;
    if (m->path.len) {
      put_basename(out, m->path);
      gtp_wbuf_printf(out, "+0x%llx", (unsigned long long)(pc - m->base));
      sn->module_only++;
      return out->err;
    }
  }
  sn->hex++;
  return gtp_wbuf_printf(out, "0x%llx", (unsigned long long)pc);
}
