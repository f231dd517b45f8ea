/* bench_gochrome.c: Chrome export of a Go generation (GOTRACE records read
 * by proto/gotrace.c, converted by proto/goconv.c) against the Chrome export
 * of the same events as a native generation, same run: what reading Go's
 * own bytes costs the HTTP format=chrome path.
 *
 *   bench_gochrome [EVENTS_PER_M]     (default 60000; 8 Ms)
 *
 * The Go generation is synthetic (one per run, same every run): 8 Ms, each
 * running one goroutine that begins a task, a region, logs, ends the region
 * and ends a task another M began, over and over, in 64 KiB batches.
 * Prints BENCH lines: events/s of the Go path and of the native path (best
 * of 5 each, interleaved), and the parse+iterate rate of the Go reader alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chrome.h"
#include "goconv.h"
#include "gotrace.h"
#include "varint.h"

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

typedef struct gw {
  gtp_wbuf out;
  uint8_t d[GTP_GO_BATCH_MAX];
  size_t dn;
} gw;

static void u(uint8_t *b, size_t *n, uint64_t v) {
  *n += gtp_uvarint_put(b + *n, v);
}

static void flush(gw *w, uint64_t m, uint64_t base) {
  uint8_t h[64];
  size_t n = 0;
  h[n++] = 1;
  u(h, &n, 1);
  u(h, &n, m);
  u(h, &n, base);
  u(h, &n, w->dn);
  gtp_wbuf_put(&w->out, h, n);
  gtp_wbuf_put(&w->out, w->d, w->dn);
  w->dn = 0;
}

static void ev(gw *w, uint8_t t, uint64_t dt, int na, const uint64_t *a) {
  w->d[w->dn++] = t;
  u(w->d, &w->dn, dt);
  for (int i = 0; i < na; i++)
    u(w->d, &w->dn, a[i]);
}

/* Go bytes of one generation; returns the user events written. */
static uint64_t build(gw *w, int per_m) {
  uint64_t n = 0;
  /* frequency, strings */
  w->d[w->dn++] = 8;
  u(w->d, &w->dn, 15625000);
  flush(w, 0, 0);
  const char *s[] = {"job", "work", "queue", "enqueued"};
  w->d[w->dn++] = 4;
  for (int i = 0; i < 4; i++) {
    w->d[w->dn++] = 5;
    u(w->d, &w->dn, (uint64_t)i + 1);
    u(w->d, &w->dn, strlen(s[i]));
    memcpy(w->d + w->dn, s[i], strlen(s[i]));
    w->dn += strlen(s[i]);
  }
  flush(w, 0, 0);
  for (uint64_t m = 1; m <= 8; m++) {
    uint64_t base = 1000, ts = base;
    ev(w, 16, 0, 2, (const uint64_t[]){100 + m, 1});
    for (int i = 0; i < per_m; i += 5) {
      uint64_t task = m * 1000000 + (uint64_t)i;
      uint64_t other = (m % 8 + 1) * 1000000 + (uint64_t)i;
      ev(w, 40, 3, 4, (const uint64_t[]){task, 0, 1, 0});
      ev(w, 42, 3, 3, (const uint64_t[]){task, 2, 0});
      ev(w, 44, 3, 4, (const uint64_t[]){task, 3, 4, 0});
      ev(w, 43, 3, 3, (const uint64_t[]){task, 2, 0});
      ev(w, 41, 3, 2, (const uint64_t[]){other, 0});
      ts += 15;
      n += 5;
      if (w->dn > GTP_GO_BATCH_MAX - 256) {
        flush(w, m, base);
        base = ts;
        ev(w, 16, 0, 2, (const uint64_t[]){100 + m, 1});
      }
    }
    flush(w, m, base);
  }
  return n;
}

/* A gentrace generation around Go bytes (GOTRACE records of 240 KiB). */
static void wrap(gtp_wbuf *f, const gtp_wbuf *go) {
  gtp_gen_start st = {.gen = 1,
                      .service = {"bench", 5},
                      .host = {"h", 1},
                      .agent_version = {"b", 1}};
  st.tags[st.ntags++] = (gtp_tag){{"format", 6}, {"go", 2}};
  st.tags[st.ntags++] = (gtp_tag){{"go_version", 10}, {"1.23", 4}};
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  for (size_t at = 0; at < go->len;) {
    size_t k = go->len - at < (240u << 10) ? go->len - at : (240u << 10);
    uint8_t h[11];
    h[0] = GTP_GO_RECORD_TYPE;
    size_t hl = 1 + gtp_uvarint_put(h + 1, k);
    gtp_wbuf_put(&body, h, hl);
    gtp_wbuf_put(&body, go->data + at, k);
    at += k;
  }
  gtp_clock ck = {0,          0,          1800000000000000000ull,
                  1000000000, 1000000000, 1800000001000000000ull};
  gtp_put_clock(&body, &ck);
  gtp_gen_end e = {.gen = 1};
  gtp_manifest_compute(body.data, body.len, &e);
  gtp_put_gen_start(f, &st);
  gtp_wbuf_put(f, body.data, body.len);
  gtp_put_gen_end(f, &e);
  gtp_wbuf_fini(&body);
}

static double export(const gtp_gen *g) {
  size_t bytes = 0;
  double t0 = now();
  gtp_chrome *c = gtp_chrome_new(sink, &bytes, 0, 0);
  if (gtp_chrome_gen(c, g) || gtp_chrome_end(c)) {
    fprintf(stderr, "bench_gochrome: export failed\n");
    exit(1);
  }
  gtp_chrome_free(c);
  return now() - t0;
}

int main(int argc, char **argv) {
  int per_m = argc > 1 ? atoi(argv[1]) : 60000;
  gw *w = calloc(1, sizeof *w);
  gtp_wbuf_init(&w->out, 0);
  uint64_t n = build(w, per_m);
  gtp_wbuf f, nat;
  gtp_wbuf_init(&f, 0);
  gtp_wbuf_init(&nat, 0);
  wrap(&f, &w->out);
  gtp_gen g, ng;
  size_t used;
  if (gtp_gen_parse(f.data, f.len, &g, &used) ||
      gtp_goconv_gen(&g, &nat, NULL) ||
      gtp_gen_parse(nat.data, nat.len, &ng, &used)) {
    fprintf(stderr, "bench_gochrome: fixture does not parse\n");
    return 1;
  }
  double best_go = 1e9, best_nat = 1e9, best_rd = 1e9;
  for (int r = 0; r < 5; r++) {
    double a = export(&g), b = export(&ng);
    best_go = a < best_go ? a : best_go;
    best_nat = b < best_nat ? b : best_nat;
    double t0 = now();
    gtp_go_gen gg;
    gtp_go_iter it;
    gtp_go_event e;
    gtp_go_parse(w->out.data, w->out.len, 23, &gg, NULL);
    gtp_go_iter_init(&it, &gg);
    while (gtp_go_next(&it, &e) == 1)
      ;
    gtp_go_iter_fini(&it);
    gtp_go_fini(&gg);
    double c = now() - t0;
    best_rd = c < best_rd ? c : best_rd;
  }
  double go = n / best_go / 1e6, na = n / best_nat / 1e6;
  printf("BENCH id=GOCHROME value=%.2f unit=Mevents/s(go-generation->chrome) "
         "baseline=native-generation->chrome:%.2f ratio=%.3f bar=>=0.5 "
         "pass=%d\n",
         go, na, go / na, go / na >= 0.5);
  printf("BENCH id=GOREAD value=%.1f unit=MB/s(go-parse+iterate,%zuKiB) "
         "baseline=go-generation->chrome:%.1f ratio=%.2f bar=none pass=1\n",
         w->out.len / best_rd / 1e6, w->out.len >> 10,
         w->out.len / best_go / 1e6, best_go / best_rd);
  gtp_gen_fini(&g);
  gtp_gen_fini(&ng);
  return 0;
}
