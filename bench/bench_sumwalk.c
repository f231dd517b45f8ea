/* bench_sumwalk: what the daemon does per event to validate and summarize a
 * generation, summaries on against summaries off, in one run.
 *
 *   bench_sumwalk [REPS]
 *   valgrind --tool=callgrind bench_sumwalk --profile [SHAPE]
 *                     (no dump per section: one profile, by line)
 *   bench_sumwalk --daemon GENS   (the whole of gentraced, see daemon_run)
 *
 * Four generation shapes, built with the writer API: counters (gt_counter
 * on two threads, one name, growing values, random 20-200 tick deltas,
 * 64 KiB batches), regions (begin/end pairs, a few names), the demo
 * service's mix (bench/demo_gen.c: nested regions, tasks across threads,
 * logs, counters), and b1: what bench_b1's agent really sends, one
 * thread's 4 MiB generation of gt_counter("b1", n) with the tick deltas of
 * an emitter at 4-28 M events/s (60% 0, 39% 1, a few 2-3, a rare 200 us
 * pause; a generation captured from a B1 trial had those shares and
 * compresses the same). For each, the two halves of the daemon's work on a
 * generation are timed separately, each the median of 5 runs of REPS
 * generations:
 *
 *   loop   what gentraced's loop runs at GEN_END (reasm.c)
 *   on     what the store runs beside compression with summaries on
 *          (store_sum_build: checks the events and summarizes them)
 *   off    the same with summaries off (GENTRACE_BENCH_NO_SUMMARY:
 *          the events are only checked)
 *   zstd   the compressor's zstd call as the store makes it (level 1,
 *          the shortest match chosen by store_zpol.c, measured on this
 *          shape's first generation), and zstd7 with zstd's own shortest
 *          match for that level (7): the stored share of the size of each
 *          is printed beside it
 *
 * and the figure is (loop + on) against (loop + off) per event. Wall time
 * on a loaded machine is noisy: `make bench-sumwalk` runs it under
 * callgrind and prints the instructions per event of each half (the
 * functions sec_* below, inclusive), which do not depend on the load.
 * Never part of make check; figures never fail the build.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <valgrind/callgrind.h>
#include <zstd.h>

#include "client.h"
#include "demo_gen.h"
#include "format.h"
#include "store_summary.h"
#include "store_zpol.h"
#include "../tests/lib/prng.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_s = 0x2545f4914f6cdd1dull;
static uint64_t rng(void) {
  return xorshift64(&rng_s);
}

typedef struct shape {
  const char *name;
  gtp_wbuf b;
  uint64_t events;
} shape;

static void put_ev(uint8_t *buf, size_t *len, uint64_t *prev, uint8_t type,
                   uint64_t ticks, uint64_t a0, uint64_t a1) {
  gtp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.ticks = ticks;
  ev.args[0] = a0;
  ev.args[1] = a1;
  int n = gtp_event_encode(buf + *len, &ev, *prev);
  if (n > 0) {
    *len += (size_t)n;
    *prev = ticks;
  }
}

/* The body records of generation gen (STRINGS, `batches` batches per thread
 * on `threads` threads, CLOCK) into b, its manifest into *e, each record's
 * offset into off[] (at most 64). kind 0: B1's counters, 1: region
 * begin/end pairs over four names. Returns the events. */
static uint64_t build_body(gtp_wbuf *b, int kind, unsigned threads,
                           unsigned batches, uint64_t gen, gtp_gen_end *e,
                           size_t *off, size_t *nrec) {
  size_t body = b->len;
  *nrec = 0;
  off[(*nrec)++] = b->len - body;
  static const char *const names[] = {"b1", "checkout", "db.query", "render"};
  uint64_t ids[4] = {1, 2, 3, 4};
  gtp_str strs[4];
  for (int i = 0; i < 4; i++)
    strs[i] = (gtp_str){names[i], strlen(names[i])};
  gtp_put_strings(b, ids, strs, 4);
  off[(*nrec)++] = b->len - body; /* each record's start, then the end */
  uint8_t *buf = malloc(GTP_BATCH_MAX);
  uint64_t events = 0, base = 1000000, value = 3000000, end_ticks = base;
  for (unsigned th = 0; th < threads; th++) {
    uint64_t prev = base;
    for (unsigned k = 0; k < batches; k++) {
      size_t len = 0;
      uint64_t n = 0, bbase = prev;
      while (len + 2 * GTP_EVENT_MAX < GTP_BATCH_MAX) {
        if (kind == 0) {
          put_ev(buf, &len, &prev, GTP_EV_COUNTER, prev + 20 + rng() % 180, 1,
                 value++);
          n++;
        } else if (kind == 2) { /* b1: see the header */
          uint64_t r = rng() % 10000, d = r < 6000 ? 0 : r < 9900 ? 1 : 2;
          if (r >= 9990)
            d = r == 9999 ? 8000 : 3;
          put_ev(buf, &len, &prev, GTP_EV_COUNTER, prev + d, 1, value++);
          n++;
        } else {
          put_ev(buf, &len, &prev, GTP_EV_REGION_BEGIN, prev + 20 + rng() % 200,
                 2 + rng() % 3, 0);
          put_ev(buf, &len, &prev, GTP_EV_REGION_END, prev + 50 + rng() % 20000,
                 0, 0);
          n += 2;
        }
      }
      gtp_put_batch(b, gen, 10 + th, bbase, n, buf, len);
      off[(*nrec)++] = b->len - body;
      events += n;
    }
    if (prev > end_ticks)
      end_ticks = prev;
  }
  free(buf);
  gtp_clock c = {base,
                 1000,
                 1767225600000000000ull,
                 end_ticks,
                 1000 + (end_ticks - base) / 2,
                 1767225600000000000ull + (end_ticks - base) / 2};
  gtp_put_clock(b, &c);
  off[*nrec] = b->len - body;
  memset(e, 0, sizeof *e);
  e->gen = gen;
  gtp_manifest_compute(b->data + body, b->len - body, e);
  return events;
}

/* A whole generation (GEN_START, body, GEN_END) of build_body's. */
static uint64_t build(gtp_wbuf *b, int kind, unsigned threads,
                      unsigned batches) {
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  gs.session[0] = 1;
  gs.gen = 1;
  gs.service = (gtp_str){"b1", 2};
  gs.host = (gtp_str){"h", 1};
  gs.agent_version = (gtp_str){"bench", 5};
  gtp_put_gen_start(b, &gs);
  gtp_gen_end e;
  size_t off[64], nrec;
  uint64_t events = build_body(b, kind, threads, batches, 1, &e, off, &nrec);
  gtp_put_gen_end(b, &e);
  return events;
}

/* --daemon GENS: GENS B1-shaped generations (the counters shape) through a
 * real gentraced ($GENTRACED, e.g. a script that runs it under callgrind;
 * its environment passes on, so GENTRACE_BENCH_NO_SUMMARY=1 turns its
 * summaries off), each sent whole and ACKed before the next: closed loop,
 * so no load on the machine can lose an event. Prints the events sent. */
static int daemon_run(int gens) {
  gtd d;
  gtc c;
  gtf_spec s;
  gtp_welcome w;
  if (gtd_init(&d) < 0 || gtd_start(&d, NULL, NULL) < 0) {
    fprintf(stderr, "bench_sumwalk: cannot start gentraced\n");
    return 1;
  }
  gtf_spec_init(&s, 5, 1);
  int rc = gtc_connect(&c, d.agent_port) < 0 || gtc_hello(&c, &s, NULL, &w);
  uint64_t events = 0;
  for (int k = 1; rc == 0 && k <= gens; k++) {
    gtc_gen g;
    memset(&g, 0, sizeof g);
    gtp_wbuf_init(&g.body, 0);
    events += build_body(&g.body, 0, 2, 8, (uint64_t)k, &g.end, g.off, &g.nrec);
    uint64_t gen = 0;
    int code = 0;
    if (gtc_send_gen(&c, &g) < 0 ||
        gtc_read_reply(&c, &gen, &code, 600000) != 1 || gen != (uint64_t)k) {
      fprintf(stderr, "bench_sumwalk: generation %d not ACKed (%d)\n", k, code);
      rc = 1;
    }
    gtp_wbuf_fini(&g.body);
  }
  gtc_close(&c);
  gtd_stop(&d);
  gtd_cleanup(&d);
  printf("daemon: %llu events in %d generations, ACKed: %s\n",
         (unsigned long long)events, gens, rc == 0 ? "all" : "NO");
  return rc;
}

/* The loop's part at GEN_END (reasm.c on SQLite): framing, manifest, CRC
 * and tables, no event. */
__attribute__((noinline)) static int sec_loop(const shape *s) {
  gtp_gen g;
  size_t used;
  int rc = gtp_gen_parse_lazy(s->b.data, s->b.len, &g, &used);
  if (rc == 0)
    gtp_gen_fini(&g);
  return rc;
}

/* The store's part with summaries on: the events checked and summarized
 * in one walk (store_commit.c). */
__attribute__((noinline)) static int sec_on(const shape *s) {
  store_sum_item *it = store_sum_build_checked(s->b.data, s->b.len, 1);
  int rc = it ? it->bad | it->status : -1;
  store_sum_free(it);
  return rc;
}

static double share_store, share_zstd7; /* of the last zstd sections */
static int zpol_mml;                    /* what store_zpol chose */

/* zstd at level 1: with mml 0 as a compressor runs it (store_zpol), else
 * with that shortest match; the stored share of the size into *share. */
static int zstd_at(const shape *s, int mml, double *share) {
  static ZSTD_CCtx *c;
  static store_zpol *zp;
  static uint8_t *z;
  static size_t cap;
  uint8_t session[16] = {0}; /* one session per shape: its own choice */
  memcpy(session, s->name, strnlen(s->name, sizeof session));
  size_t bound = ZSTD_compressBound(s->b.len), n;
  if (!c)
    c = ZSTD_createCCtx();
  if (!zp)
    zp = store_zpol_new(1);
  if (bound > cap) {
    free(z);
    z = malloc(bound);
    cap = z ? bound : 0;
  }
  if (!c || !zp || !z)
    return -1;
  if (mml == 0) {
    n = store_zpol_compress(zp, session, s->b.data, s->b.len, z, bound);
  } else {
    ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_minMatch, mml);
    n = ZSTD_compress2(c, z, bound, s->b.data, s->b.len);
  }
  if (ZSTD_isError(n))
    return -1;
  *share = (double)n / (double)s->b.len;
  if (mml == 0)
    zpol_mml = store_zpol_last_mml(zp);
  return 0;
}

__attribute__((noinline)) static int sec_zstd(const shape *s) {
  return zstd_at(s, 0, &share_store);
}

__attribute__((noinline)) static int sec_zstd7(const shape *s) {
  return zstd_at(s, 7, &share_zstd7);
}

/* The store's part with summaries off: the events checked only. */
__attribute__((noinline)) static int sec_off(const shape *s) {
  store_sum_item *it = store_sum_build_checked(s->b.data, s->b.len, 0);
  int rc = it ? it->bad : -1;
  store_sum_free(it);
  return rc;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of 5 runs of reps calls, in ns per event. */
static double time_sec(int (*f)(const shape *), const shape *s, int reps) {
  double t[5];
  for (int r = 0; r < 5; r++) {
    double t0 = now_s();
    for (int i = 0; i < reps; i++)
      if (f(s) < 0) {
        fprintf(stderr, "bench_sumwalk: %s failed\n", s->name);
        exit(1);
      }
    t[r] = (now_s() - t0) * 1e9 / ((double)reps * (double)s->events);
  }
  qsort(t, 5, sizeof t[0], cmp_d);
  return t[2];
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--daemon") == 0)
    return daemon_run(atoi(argv[2]));
  int profile = argc > 1 && strcmp(argv[1], "--profile") == 0;
  int reps = argc > 1 && !profile ? atoi(argv[1]) : 20;
  if (reps < 1)
    reps = 1;
  enum { NSH = 4 };
  shape sh[NSH];
  memset(sh, 0, sizeof sh);
  sh[0].name = "counters";
  sh[1].name = "regions";
  sh[2].name = "demo";
  sh[3].name = "b1";
  for (int i = 0; i < NSH; i++)
    gtp_wbuf_init(&sh[i].b, 0);
  sh[0].events = build(&sh[0].b, 0, 2, 8);
  sh[1].events = build(&sh[1].b, 1, 2, 8);
  sh[3].events = build(&sh[3].b, 2, 1, 64);
  uint8_t session[16] = {7};
  gtp_gen_end e;
  if (demo_gen_build(&sh[2].b, session, 1, 1767225600000000000ll, 1u << 20,
                     &e) < 0)
    return 1;
  sh[2].events = e.events;
  double warm; /* the contexts and buffers made before any section */
  if (zstd_at(&sh[3], 7, &warm) < 0 || zstd_at(&sh[3], 0, &warm) < 0)
    return 1;
  for (int i = 0; i < NSH; i++) {
    const shape *s = &sh[i];
    if (RUNNING_ON_VALGRIND) {
      /* Instruction counts: each section once, alone in a callgrind dump
       * named shape/section/events (`make bench-sumwalk` reads them). */
      int (*const f[5])(const shape *) = {sec_loop, sec_on, sec_off, sec_zstd,
                                          sec_zstd7};
      static const char *const fn[5] = {"loop", "on", "off", "zstd", "zstd7"};
      for (int k = 0; k < 5; k++) {
        char tag[96];
        snprintf(tag, sizeof tag, "%s/%s/%llu", s->name, fn[k],
                 (unsigned long long)s->events);
        if (profile && argc > 2 && strcmp(argv[2], s->name) != 0)
          continue;
        if (profile) { /* one profile of everything, by source line */
          f[k](s);
          continue;
        }
        if (k == 3) /* the session's measurement made: its steady state */
          f[k](s);
        CALLGRIND_ZERO_STATS;
        f[k](s);
        CALLGRIND_DUMP_STATS_AT(tag);
      }
      continue;
    }
    double loop = time_sec(sec_loop, s, reps);
    double on = time_sec(sec_on, s, reps);
    double off = time_sec(sec_off, s, reps);
    double with = loop + on, without = loop + off;
    printf("# %s: %llu events/gen; loop %.2f, store on %.2f, store off %.2f "
           "ns/event\n",
           s->name, (unsigned long long)s->events, loop, on, off);
    printf("BENCH id=SW_%s value=%.2f unit=ns/event(validate+summary) "
           "baseline=no_summary:%.2f ratio=%.3f bar=1.05 pass=%d\n",
           s->name, with, without, with / without, with <= 1.05 * without);
    double z = time_sec(sec_zstd, s, reps), z7 = time_sec(sec_zstd7, s, reps);
    printf("BENCH id=SW_%s_zstd value=%.2f unit=ns/event(zstd-1,mml=%d,"
           "stored=%.3f) baseline=zstd-1-mml7:%.2f(stored=%.3f) ratio=%.3f "
           "bar=none pass=1\n",
           s->name, z, zpol_mml, share_store, z7, share_zstd7, z / z7);
  }
  for (int i = 0; i < NSH; i++)
    gtp_wbuf_fini(&sh[i].b);
  return 0;
}
