/* fuzz_gotrace.c: the Go 1.22+ generation reader (proto/gotrace.c) on
 * hostile bytes, and its seeds.
 *
 * Input: one byte choosing the Go version (below 0x80: 22 + b % 5, so
 * 22..26, then the generation's bytes; from 0x80: the old format of
 * 11 + b % 11, so 1.11..1.21, then the trace after its 16-byte header, read
 * by proto/goold.c, whose events must come out in time order with every
 * string inside the input). The bytes are split (gtp_go_split) and parsed whole
 * (gtp_go_parse); a generation that parses is iterated to the end, and the
 * oracles hold: iteration yields exactly the events the parse counted, per
 * kind too, in non-decreasing time; every string handed out lies inside
 * the input; the clock mapping never traps. The bytes are also wrapped in a
 * gentrace generation of a Go session and converted (proto/goconv.c): the
 * native generation must parse (manifest, CRC, events) and export to
 * Chrome JSON, whether the Go reader took the bytes or refused them.
 *
 * Built three ways: into fuzz_replay (make check, -DGTP_FUZZ_REPLAY), as a
 * libFuzzer binary (fuzz-smoke), and with -DGTP_GOSEEDS_MAIN as the program
 * that writes its seed corpus.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "chrome.h"
#include "goconv.h"
#include "goold.h"
#include "gotrace.h"
#include "varint.h"

static int in(const void *q, size_t qn, const uint8_t *p, size_t n) {
  const uint8_t *x = q;
  return qn == 0 || (x >= p && x <= p + n && qn <= (size_t)(p + n - x));
}

static void old_one(const uint8_t *data, size_t size) {
  uint8_t *buf = malloc(size - 1 + GTP_GO_HEADER_SIZE);
  if (!buf)
    return;
  char h[17];
  snprintf(h, sizeof h, "go 1.%u trace", 11 + data[0] % 11);
  memcpy(buf, h, GTP_GO_HEADER_SIZE); /* the NULs of h pad it */
  memcpy(buf + GTP_GO_HEADER_SIZE, data + 1, size - 1);
  size_t n = size - 1 + GTP_GO_HEADER_SIZE, off = 0;
  gtp_goold t;
  int rc = gtp_goold_parse(buf, n, &t, &off);
  if (rc) {
    fuzz_check(rc < 0 && off <= n);
  } else {
    uint64_t kinds[GTP_GO_KIND_COUNT_] = {0};
    for (size_t i = 0; i < t.nevents; i++) {
      const gtp_goold_event *e = &t.events[i];
      fuzz_check(i == 0 || e->ns >= t.events[i - 1].ns);
      fuzz_check(e->ns >= 0 && e->ns <= t.span_ns);
      fuzz_check(e->kind < GTP_GO_KIND_COUNT_);
      kinds[e->kind]++;
      fuzz_check(e->kind == GTP_GO_STW_BEGIN ||
                 in(e->name.ptr, e->name.len, buf, n));
      fuzz_check(in(e->value.ptr, e->value.len, buf, n));
    }
    fuzz_check(!memcmp(kinds, t.kinds, sizeof kinds));
    gtp_goold_fini(&t);
  }
  free(buf);
}

static int null_sink(void *ctx, const void *p, size_t n) {
  (void)ctx;
  (void)p;
  (void)n;
  return 0;
}

/* The Go bytes as a gentrace generation, converted and exported. */
static void conv_one(const uint8_t *p, size_t n, unsigned v) {
  char ver[8];
  snprintf(ver, sizeof ver, "1.%u", v);
  gtp_gen_start st = {.gen = 1,
                      .service = {"f", 1},
                      .host = {"h", 1},
                      .agent_version = {"a", 1}};
  st.tags[st.ntags++] = (gtp_tag){{"format", 6}, {"go", 2}};
  st.tags[st.ntags++] = (gtp_tag){{"go_version", 10}, {ver, strlen(ver)}};
  gtp_wbuf f, body, nb;
  gtp_wbuf_init(&f, 0);
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_init(&nb, 0);
  /* Two GOTRACE records cut in the middle, when there is a middle. */
  size_t cut = n / 2, part[2][2] = {{0, cut}, {cut, n - cut}};
  for (int i = 0; i < 2; i++) {
    if (!part[i][1])
      continue;
    uint8_t h[1 + GTP_UVARINT_MAX];
    h[0] = GTP_GO_RECORD_TYPE;
    size_t hl = 1 + gtp_uvarint_put(h + 1, part[i][1]);
    gtp_wbuf_put(&body, h, hl);
    gtp_wbuf_put(&body, p + part[i][0], part[i][1]);
  }
  gtp_clock ck = {0,    0,    1700000000000000000ull,
                  1000, 1000, 1700000000000001000ull};
  gtp_gen_end e = {.gen = 1};
  gtp_gen g, ng;
  size_t used;
  if (n > GTP_RECORD_MAX || gtp_put_clock(&body, &ck) ||
      gtp_manifest_compute(body.data, body.len, &e) ||
      gtp_put_gen_start(&f, &st))
    goto out;
  gtp_wbuf_put(&f, body.data, body.len);
  if (gtp_put_gen_end(&f, &e) || gtp_gen_parse(f.data, f.len, &g, &used))
    goto out;
  fuzz_check(gtp_gen_is_go(&g) == (n > 0));
  int go_rc = 0;
  int rc = gtp_goconv_gen(&g, &nb, &go_rc);
  fuzz_check(rc == 0 || rc == -ENOMEM || rc == GTP_E_TOOBIG);
  if (rc == 0) {
    fuzz_check(gtp_gen_parse(nb.data, nb.len, &ng, &used) == 0);
    fuzz_check(used == nb.len && !gtp_gen_is_go(&ng));
    gtp_chrome *c = gtp_chrome_new(null_sink, NULL, 0, 0);
    if (c) {
      fuzz_check(gtp_chrome_gen(c, &ng) == 0);
      fuzz_check(gtp_chrome_end(c) == 0);
      gtp_chrome_free(c);
    }
    gtp_gen_fini(&ng);
  }
  gtp_gen_fini(&g);
out:
  gtp_wbuf_fini(&f);
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&nb);
}

int gtp_fuzz_gotrace_one(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  if (data[0] >= 0x80) {
    old_one(data, size);
    return 0;
  }
  unsigned v = 22 + data[0] % 5;
  const uint8_t *p = data + 1;
  size_t n = size - 1;

  size_t glen;
  uint64_t gen;
  int rc = gtp_go_split(p, n, v, &glen, &gen);
  fuzz_check(glen <= n);

  gtp_go_gen g;
  size_t off = 0;
  conv_one(p, n, v);
  rc = gtp_go_parse(p, n, v, &g, &off);
  if (rc) {
    fuzz_check(rc < 0 && off <= n);
    return 0;
  }
  for (size_t i = 0; i < g.nstrings; i++) {
    fuzz_check(in(g.strings[i].s.ptr, g.strings[i].s.len, p, n));
    fuzz_check(g.strings[i].s.len <= GTP_GO_STRING_MAX);
    if (i)
      fuzz_check(g.strings[i - 1].id < g.strings[i].id);
  }
  gtp_clock c = {.end_real_ns = 1800000000000000000ull};
  gtp_go_set_clock(&g, &c);
  gtp_go_iter it;
  if (gtp_go_iter_init(&it, &g) == 0) {
    gtp_go_event ev;
    uint64_t seen = 0, last = 0, kinds[GTP_GO_KIND_COUNT_] = {0};
    while (gtp_go_next(&it, &ev) == 1) {
      fuzz_check(seen == 0 || ev.ts >= last);
      last = ev.ts;
      seen++;
      fuzz_check(ev.kind < GTP_GO_KIND_COUNT_);
      kinds[ev.kind]++;
      fuzz_check(in(ev.name.ptr, ev.name.len, p, n));
      fuzz_check(in(ev.value.ptr, ev.value.len, p, n));
      (void)gtp_go_wall_ns(&g, ev.ts);
    }
    fuzz_check(seen == g.nevents);
    fuzz_check(!memcmp(kinds, g.kinds, sizeof kinds));
    gtp_go_iter_fini(&it);
  }
  gtp_go_fini(&g);
  return 0;
}

#ifndef GTP_FUZZ_REPLAY
#ifndef GTP_GOSEEDS_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return gtp_fuzz_gotrace_one(data, size);
}
#endif
#endif

/* ---------------------------------------------------------------- seeds */

typedef struct sb {
  uint8_t out[4096], d[2048];
  size_t n, dn;
} sb;

static void u(uint8_t *b, size_t *n, uint64_t v) {
  *n += gtp_uvarint_put(b + *n, v);
}

static void batch(sb *s, uint64_t gen, uint64_t m, uint64_t base) {
  s->out[s->n++] = 1;
  u(s->out, &s->n, gen);
  u(s->out, &s->n, m);
  u(s->out, &s->n, base);
  u(s->out, &s->n, s->dn);
  memcpy(s->out + s->n, s->d, s->dn);
  s->n += s->dn;
  s->dn = 0;
}

static void ev(sb *s, uint8_t type, uint64_t dt, const uint64_t *a, int na) {
  s->d[s->dn++] = type;
  u(s->d, &s->dn, dt);
  for (int i = 0; i < na; i++)
    u(s->d, &s->dn, a[i]);
}

/* A generation of version v: sync batch, strings, stacks, two Ms with a
 * task handed between goroutines, a region, a log, GC and STW. */
static size_t build(sb *s, unsigned v, uint64_t gen) {
  memset(s, 0, sizeof *s);
  s->out[s->n++] = (uint8_t)(v - 22);
  if (v >= 25) {
    const uint8_t sync[] = {50,   8, 0xc8, 0xd8, 0xb9, 0x07, 51, 10,
                            0x80, 1, 0x80, 0xde, 0xa0, 0xaa, 6,  5};
    memcpy(s->d, sync, sizeof sync);
    s->dn = sizeof sync;
  } else {
    const uint8_t freq[] = {8, 0xc8, 0xd8, 0xb9, 0x07};
    memcpy(s->d, freq, sizeof freq);
    s->dn = sizeof freq;
  }
  batch(s, gen, 0, 990);
  const char *str[] = {"job", "work", "queue", "enqueued", "GC"};
  s->d[s->dn++] = 4;
  for (unsigned i = 0; i < 5; i++) {
    s->d[s->dn++] = 5;
    u(s->d, &s->dn, i + 1);
    u(s->d, &s->dn, strlen(str[i]));
    memcpy(s->d + s->dn, str[i], strlen(str[i]));
    s->dn += strlen(str[i]);
  }
  batch(s, gen, 0, 0);
  const uint8_t stacks[] = {2, 3, 1, 1, 0x90, 0x20, 1, 2, 42};
  memcpy(s->d, stacks, sizeof stacks);
  s->dn = sizeof stacks;
  batch(s, gen, 0, 0);
  ev(s, 25, 0, (const uint64_t[]){12, 9, 2}, 3);
  ev(s, 41, 500, (const uint64_t[]){3, 1}, 2);
  batch(s, gen, 9, 2000);
  ev(s, 16, 0, (const uint64_t[]){11, 1}, 2);
  ev(s, 40, 100, (const uint64_t[]){3, 0, 1, 1}, 4);
  ev(s, 42, 100, (const uint64_t[]){3, 2, 0}, 3);
  ev(s, 44, 100, (const uint64_t[]){3, 3, 4, 0}, 4);
  ev(s, 43, 100, (const uint64_t[]){3, 2, 0}, 3);
  ev(s, 26, 50, (const uint64_t[]){5, 0}, 2);
  ev(s, 29, 10, (const uint64_t[]){1, 0}, 2);
  ev(s, 27, 10, NULL, 0);
  if (v >= 23)
    ev(s, 45, 5, (const uint64_t[]){13, 1}, 2);
  ev(s, 20, 30, (const uint64_t[]){0, 0}, 2);
  ev(s, 30, 1000, (const uint64_t[]){1}, 1);
  batch(s, gen, 7, 1000);
  if (v >= 26)
    s->out[s->n++] = 52;
  return s->n;
}

/* An old-format trace (1.19): P0 runs G5 with a task, a region and a log;
 * P1 ends the task on G6; a GC with its STW. */
static size_t build_old(sb *s) {
  static const uint8_t body[] = {
      0x41, 0,    0xe8, 7,             /* batch P0 @1000 */
      0x02, 0x80, 0x94, 0xeb, 0xdc, 3, /* frequency 1e9 */
      37,   1,    3,    'j',  'o',  'b', 37, 2,   4,
      'w',  'o',  'r',  'k',                           /* strings */
      37,   3,    1,    'q',  0x8e, 0,   5,  1,        /* GoStart G5 */
      0xed, 5,    10,   9,    0,    1,   0,            /* TaskCreate 9 "job" */
      0xef, 5,    10,   9,    0,    2,   0,            /* Region begin "work" */
      0xf0, 4,    10,   9,    3,    0,   2,  'o', 'k', /* Log q=ok */
      0x41, 1,    0x88, 0x27,                          /* batch P1 @5000 */
      0x8e, 0,    6,    1,                             /* GoStart G6 */
      0xae, 100,  9,    0,                             /* TaskEnd 9 */
      0x41, 0,    0xd0, 0x0f,                          /* batch P0 @2000 */
      0xef, 5,    0,    9,    1,    2,   0,            /* Region end */
      0x49, 10,   0,                                   /* STW start */
      0x87, 0,    1,    0,                             /* GC start */
      0x0a, 10,                                        /* STW done */
      0x54, 10,   0,                                   /* GoBlock */
      0x08, 0xe8, 7,                                   /* GC done */
  };
  memset(s, 0, sizeof *s);
  s->out[0] = 0x80 + 8; /* 11 + 8 = 1.19 */
  memcpy(s->out + 1, body, sizeof body);
  s->n = 1 + sizeof body;
  return s->n;
}

int gtp_fuzz_go_seeds(gtp_seed_emit emit, void *ctx) {
  static const char *names[] = {"go122", "go123", "go124", "go125", "go126"};
  sb s;
  for (unsigned v = 22; v <= 26; v++) {
    size_t n = build(&s, v, v);
    /* The seed must parse, or mutations explore nothing. */
    gtp_go_gen g;
    int rc = gtp_go_parse(s.out + 1, n - 1, v, &g, NULL);
    if (rc)
      return rc;
    gtp_go_fini(&g);
    emit(GTP_SEED_GOTRACE, names[v - 22], s.out, n, ctx);
  }
  size_t n = build_old(&s);
  uint8_t buf[sizeof s.out + GTP_GO_HEADER_SIZE];
  memcpy(buf, "go 1.19 trace\0\0\0", GTP_GO_HEADER_SIZE);
  memcpy(buf + GTP_GO_HEADER_SIZE, s.out + 1, n - 1);
  gtp_goold t;
  int rc = gtp_goold_parse(buf, n - 1 + GTP_GO_HEADER_SIZE, &t, NULL);
  if (rc)
    return rc;
  if (t.nevents != 9)
    return GTP_E_INTERNAL;
  gtp_goold_fini(&t);
  emit(GTP_SEED_GOTRACE, "go119", s.out, n, ctx);
  return 0;
}

#ifdef GTP_GOSEEDS_MAIN
static void write_seed(int kind, const char *name, const uint8_t *p, size_t n,
                       void *ctx) {
  (void)kind;
  char path[4096];
  snprintf(path, sizeof path, "%s/seed-%s", (const char *)ctx, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
    fprintf(stderr, "goseeds: %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: goseeds DIR\n");
    return 2;
  }
  return gtp_fuzz_go_seeds(write_seed, argv[1]) < 0;
}
#endif
