/* gocount.c: reads a Go 1.22+ trace file with proto/gotrace.c and prints
 * what it holds, for tests/proto/test_gotrace_go.sh to compare with what the
 * Go program recorded and with golang.org/x/exp/trace:
 *
 *   gocount FILE  ->  regions=R tasks=T logs=L gens=G events=E gc=N stw=N
 *
 * Each generation is split off the file (gtp_go_split), parsed on its own,
 * and iterated; the iterator must yield exactly the events the parse
 * counted, in non-decreasing time order, with every user event on a known
 * goroutine. Exit 1 on any error (with the generation's offset).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gotrace.h"

static int fail(const char *what, size_t off, int rc) {
  fprintf(stderr, "gocount: %s at offset %zu: %s\n", what, off,
          gtp_strerror(rc));
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gocount FILE\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  size_t cap = 1 << 20, len = 0, n;
  uint8_t *buf = malloc(cap);
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap)
      buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf)
    return 1;
  int v = gtp_go_file_version(buf, len);
  if (v < 0)
    return fail("header", 0, v);
  uint64_t kinds[GTP_GO_KIND_COUNT_] = {0}, events = 0, gens = 0;
  uint64_t region_ends = 0, task_ends = 0, nog = 0;
  size_t off = GTP_GO_HEADER_SIZE;
  while (off < len) {
    size_t glen;
    uint64_t gen;
    int rc = gtp_go_split(buf + off, len - off, (unsigned)v, &glen, &gen);
    if (rc)
      return fail("split", off + glen, rc);
    gtp_go_gen g;
    size_t bad = 0;
    if ((rc = gtp_go_parse(buf + off, glen, (unsigned)v, &g, &bad)))
      return fail("parse", off + bad, rc);
    gtp_go_iter it;
    if (gtp_go_iter_init(&it, &g))
      return fail("iter", off, -ENOMEM);
    gtp_go_event ev;
    uint64_t seen = 0, last = 0;
    while (gtp_go_next(&it, &ev) == 1) {
      if (ev.ts < last)
        return fail("time goes back", off, GTP_E_CORRUPT);
      last = ev.ts;
      seen++;
      kinds[ev.kind]++;
      if (ev.kind >= GTP_GO_REGION_BEGIN && ev.kind <= GTP_GO_LOG && !ev.g)
        nog++;
    }
    region_ends += g.kinds[GTP_GO_REGION_END];
    task_ends += g.kinds[GTP_GO_TASK_END];
    if (seen != g.nevents)
      return fail("iteration count differs from parse", off, GTP_E_MANIFEST);
    events += seen;
    gens++;
    gtp_go_iter_fini(&it);
    gtp_go_fini(&g);
    off += glen;
  }
  free(buf);
  if (region_ends != kinds[GTP_GO_REGION_END] ||
      task_ends != kinds[GTP_GO_TASK_END] ||
      kinds[GTP_GO_REGION_BEGIN] != kinds[GTP_GO_REGION_END])
    return fail("begins and ends differ", off, GTP_E_CORRUPT);
  if (nog)
    fprintf(stderr, "gocount: %llu user events on no known goroutine\n",
            (unsigned long long)nog);
  printf("regions=%llu tasks=%llu logs=%llu gens=%llu events=%llu gc=%llu "
         "stw=%llu\n",
         (unsigned long long)kinds[GTP_GO_REGION_BEGIN],
         (unsigned long long)kinds[GTP_GO_TASK_BEGIN],
         (unsigned long long)kinds[GTP_GO_LOG], (unsigned long long)gens,
         (unsigned long long)events, (unsigned long long)kinds[GTP_GO_GC_BEGIN],
         (unsigned long long)kinds[GTP_GO_STW_BEGIN]);
  return nog ? 1 : 0;
}
