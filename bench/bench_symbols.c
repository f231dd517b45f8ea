/* bench_symbols: the cost of naming stack frames (docs/SYMBOLS.md) in the
 * Chrome export of a stack-heavy window, against the same export with hex
 * pcs, measured in the same run.
 *
 *   bench_symbols [EVENTS]     (default 400000)
 *
 * The window is one generation of EVENTS instant_stack events on 4
 * threads over 64 distinct stacks of 8 frames, whose pcs are real code
 * addresses of this program (built with -g and a build id; its module
 * table entry is the one the agent would record), so every frame resolves
 * through libdw. Figures (best of 5):
 *   SYM_CHROME   a request on a daemon whose module cache is warm (a new
 *                symreq, the shared symcache already holding the module):
 *                what a dashboard reload costs;
 *   SYM_COLD     the first request after start (the module is opened and
 *                indexed, every frame looked up);
 * both against hex pcs (no symbolizer). Prints BENCH lines; never fails on
 * a figure.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chrome.h"
#include "self_module.h"
#include "symcache.h"
#include "symreq.h"
#include "tracebuild.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int sink(void *ctx, const void *p, size_t n) {
  (void)p;
  *(size_t *)ctx += n;
  return 0;
}

/* Code addresses of this program: the proto functions the export runs. */
static uintptr_t code[8];

static void build(tb *t, const gtp_module *m, unsigned events) {
  uintptr_t fns[8] = {
      (uintptr_t)gtp_chrome_gen,  (uintptr_t)gtp_gen_parse,
      (uintptr_t)gtp_event_next,  (uintptr_t)gtp_json_escape,
      (uintptr_t)gtp_wbuf_put,    (uintptr_t)gtp_stackname_frame,
      (uintptr_t)gtp_gen_wall_ns, (uintptr_t)gtp_chrome_end,
  };
  memcpy(code, fns, sizeof code);
  uint8_t sid[16];
  tb_session(sid, 1);
  tb_gen_begin(t, sid, 1, "bench", "host", 1, 1800000000000000000ll, 0);
  uint64_t name = tb_str(t, "work");
  uint64_t ids[64];
  for (unsigned s = 0; s < 64; s++) {
    uint64_t pcs[8];
    for (unsigned f = 0; f < 8; f++) /* inside each function's first bytes */
      pcs[f] = code[(s + f) % 8] + 1 + (s * 7 + f * 3) % 24;
    ids[s] = tb_stack(t, pcs, 8);
  }
  /* Batches of 4096 events (a batch's size is bounded, as the agent's
   * buffers are). */
  unsigned per = events / 4, k = 0;
  for (unsigned th = 0; th < 4; th++) {
    for (unsigned i = 0; i < per; i++, k++) {
      if (i % 4096 == 0) {
        if (i)
          tb_batch_end(t);
        tb_batch_begin(t, 100 + th, (uint64_t)i * 100);
      }
      tb_ev(t, GTP_EV_INSTANT_STACK, (uint64_t)i * 100, name,
            ids[(k * 2654435761u) % 64], 0);
    }
    tb_batch_end(t);
  }
  tb_check(gtp_put_modules(&t->body, m, 1), "modules");
  tb_gen_end(t, (uint64_t)per * 100, 0, 0, 0);
}

/* One export; sym NULL = hex pcs. Returns seconds. */
static double export(const gtp_gen *g, const gtp_symbolizer *sym,
                     size_t *bytes) {
  *bytes = 0;
  double t0 = now();
  gtp_chrome *c = gtp_chrome_new(sink, bytes, 0, 0);
  if (sym)
    gtp_chrome_set_symbolizer(c, sym);
  if (!c || gtp_chrome_gen(c, g) || gtp_chrome_end(c)) {
    fprintf(stderr, "bench_symbols: export failed\n");
    exit(1);
  }
  gtp_chrome_free(c);
  return now() - t0;
}

int main(int argc, char **argv) {
  unsigned events = argc > 1 ? (unsigned)atoi(argv[1]) : 400000;
  self_module self;
  if (self_module_get(&self, "") != 0) {
    fprintf(stderr, "bench_symbols: no build id in this program\n");
    return 1;
  }
  tb t;
  tb_init(&t);
  build(&t, &self.m, events);
  gtp_file_reader r;
  gtp_gen g;
  if (gtp_file_reader_init(&r, t.out.data, t.out.len) ||
      gtp_file_reader_next(&r, &g) != 1) {
    fprintf(stderr, "bench_symbols: fixture does not parse\n");
    return 1;
  }
  symcache_config cfg = {NULL, "yes", 0, 0};
  char *cause = NULL;
  symcache *warm;
  if (symcache_new(&cfg, &warm, &cause) < 0) {
    fprintf(stderr, "bench_symbols: %s\n", cause);
    return 1;
  }
  double hex = 1e9, hot = 1e9, cold = 1e9;
  size_t hex_bytes = 0, sym_bytes = 0;
  for (int rep = 0; rep < 5; rep++) {
    double a = export(&g, NULL, &hex_bytes);
    hex = a < hex ? a : hex;
    /* Cold: a fresh cache, as after a restart. */
    symcache *c;
    if (symcache_new(&cfg, &c, &cause) < 0)
      return 1;
    symreq *q = symreq_new(c);
    double b = export(&g, symreq_symbolizer(q), &sym_bytes);
    cold = b < cold ? b : cold;
    symreq_free(q);
    symcache_free(c);
    /* Warm: the shared cache holds the module; the request starts empty. */
    q = symreq_new(warm);
    double w = export(&g, symreq_symbolizer(q), &sym_bytes);
    if (rep > 0) /* the first one warmed the cache */
      hot = w < hot ? w : hot;
    symreq_free(q);
  }
  symcache_stats st;
  symcache_get_stats(warm, &st);
  double n = (double)(events / 4 * 4);
  printf("# %u instant_stack events, 64 stacks x 8 frames; chrome JSON %zu "
         "bytes with hex pcs, %zu with names; lookups per warm request %llu\n",
         events, hex_bytes, sym_bytes,
         (unsigned long long)(st.lookups_total / 5));
  printf("BENCH id=SYM_CHROME value=%.2f unit=Mevents/s(stack-events->chrome,"
         "named,warm-cache) baseline=hex-pcs:%.2f ratio=%.3f bar=>=0.5 "
         "pass=%d\n",
         n / hot / 1e6, n / hex / 1e6, hex / hot, hex / hot >= 0.5);
  printf("BENCH id=SYM_COLD value=%.1f unit=ms(first-request,module-load+"
         "lookups) baseline=hex-pcs:%.1f ratio=%.2f bar=none pass=1\n",
         cold * 1e3, hex * 1e3, cold / hex);
  symcache_free(warm);
  gtp_gen_fini(&g);
  tb_fini(&t);
  return 0;
}
