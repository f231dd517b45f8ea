/* bench_search.c: S1/S2/S3, search and summary over a day of a fleet, and
 * the cost of summarizing at commit.
 *
 *   bench_search [AGENTS] [HOURS] [PERIOD_S] [B1_RATE]
 *
 * Generates AGENTS sessions (default 100) x HOURS (default 24) of
 * generations, one per PERIOD_S seconds (default 10) per agent, into a fresh
 * database through the real store (store_open/store_submit: summaries are
 * computed and written at commit, as in gentraced). Each generation holds
 * 200 fast "checkout.cart" regions (20-200 us), 20 "db.query" regions
 * (0.5-5 ms), one "checkout.pay" (50 ms, or 250-450 ms in one generation of
 * 50), counters and logs, over two threads. Then, on a reader:
 *
 *   S1 search: name=checkout.pay min=200ms over the last hour, fleet-wide,
 *      limit 100, and over the whole day (limit 1000): time of the answer.
 *      Baseline: listing the same window's generations (store_read_window
 *      for one service), the cheapest query a trace download makes.
 *   S2 summary: every name of one service over the last hour and the day,
 *      and of the whole fleet over the day,
 *      through the rollups, beside the same query on raw rows only
 *      (the summary before rollups; BENCH_S2_REPS rounds, medians).
 *   S3 summary at commit: CPU time of gtp_gen_parse_lazy + gtp_summary_compute
 *      per event on these generations; baseline zstd (level 1) of the same
 *      bytes, the other per-generation work of the compressor threads. With
 *      B1_RATE (events/s, from `make bench-daemon` in the same run) the line
 *      also gives the share of B1's per-event budget.
 *
 * BENCH_DIR (default .) is where the database goes (deleted at the end
 * unless BENCH_KEEP=1). Never fails the build.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "bench_gen.h"
#include "format.h"
#include "store.h"
#include "store_read.h"
#include "store_search.h"
#include "summary.h"
#include "varint.h"
#include "../tests/lib/prng.h"

#define NS INT64_C(1000000000)
#define BAR_S 1.0

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process (user + system): on a loaded machine the wall
 * time of a query is mostly waiting, and the lines print both. */
static double cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  return xorshift64(&rng_state);
}

enum { S_CART = 1, S_DB, S_PAY, S_QUEUE, S_HTTP };

static void put_ev(uint8_t *buf, size_t *len, uint64_t *prev, uint8_t type,
                   uint64_t ticks, uint64_t a0, uint64_t a1, const char *msg) {
  gtp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.type = type;
  ev.ticks = ticks;
  ev.args[0] = a0;
  ev.args[1] = a1;
  if (msg) {
    ev.msg = (const uint8_t *)msg;
    ev.msg_len = strlen(msg);
  }
  int n = gtp_event_encode(buf + *len, &ev, *prev);
  if (n > 0) {
    *len += (size_t)n;
    *prev = ticks;
  }
}

/* One generation of agent a, number gen, starting at start_ns; 1 tick = 1 ns.
 * Returns its event count. */
static uint64_t build_gen(gtp_wbuf *b, const uint8_t session[16], unsigned a,
                          uint64_t gen, int64_t start_ns, int64_t period_ns,
                          gtp_gen_end *endo) {
  char svc[32], host[32];
  snprintf(svc, sizeof svc, "svc-%u", a % 10);
  snprintf(host, sizeof host, "host-%u", a);
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, session, 16);
  gs.gen = gen;
  gs.service = (gtp_str){svc, strlen(svc)};
  gs.host = (gtp_str){host, strlen(host)};
  gs.agent_version = (gtp_str){"bench", 5};
  gs.pid = 1000 + a;
  gs.process_start_ns = 1;
  gtp_put_gen_start(b, &gs);
  size_t body = b->len;
  static const char *const names[] = {"checkout.cart", "db.query",
                                      "checkout.pay", "queue", "http"};
  uint64_t ids[5];
  gtp_str strs[5];
  for (int i = 0; i < 5; i++) {
    ids[i] = (uint64_t)i + 1;
    strs[i] = (gtp_str){names[i], strlen(names[i])};
  }
  gtp_put_strings(b, ids, strs, 5);
  uint8_t *buf = malloc(GTP_BATCH_MAX);
  uint64_t events = 0;
  uint64_t base = (uint64_t)start_ns;
  for (unsigned th = 0; th < 2; th++) {
    size_t len = 0;
    uint64_t prev = base, t = base + 1000, n0 = 0;
    uint64_t step = (uint64_t)period_ns / 140;
    for (int i = 0; i < 100; i++) {
      put_ev(buf, &len, &prev, GTP_EV_REGION_BEGIN, t, S_CART, 0, NULL);
      put_ev(buf, &len, &prev, GTP_EV_REGION_END, t + 20000 + rnd() % 180000, 0,
             0, NULL);
      n0 += 2;
      if (i % 10 == 0) {
        put_ev(buf, &len, &prev, GTP_EV_REGION_BEGIN, prev + 10, S_DB, 0, NULL);
        put_ev(buf, &len, &prev, GTP_EV_REGION_END,
               prev + 500000 + rnd() % 4500000, 0, 0, NULL);
        put_ev(buf, &len, &prev, GTP_EV_COUNTER, prev + 10, S_QUEUE,
               rnd() % 100, NULL);
        put_ev(buf, &len, &prev, GTP_EV_LOG, prev + 10, S_HTTP, 0, "GET /");
        n0 += 4;
      }
      t = prev + step;
    }
    if (th == 0) {
      uint64_t d = gen % 50 == (uint64_t)(a % 50)
                       ? 250000000 + rnd() % 200000000
                       : 50000000;
      put_ev(buf, &len, &prev, GTP_EV_REGION_BEGIN, prev + 10, S_PAY, 0, NULL);
      put_ev(buf, &len, &prev, GTP_EV_REGION_END, prev + d, 0, 0, NULL);
      n0 += 2;
    }
    gtp_put_batch(b, gen, 100 + th, base, n0, buf, len);
    events += n0;
  }
  free(buf);
  gtp_clock c = {base,
                 base,
                 (uint64_t)start_ns,
                 base + (uint64_t)period_ns,
                 base + (uint64_t)period_ns,
                 (uint64_t)(start_ns + period_ns)};
  gtp_put_clock(b, &c);
  memset(endo, 0, sizeof *endo);
  endo->gen = gen;
  gtp_manifest_compute(b->data + body, b->len - body, endo);
  gtp_put_gen_end(b, endo);
  return events;
}

typedef struct done_ctx {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t n, failed;
} done_ctx;

static void on_done(void *ctx, store_gen *g) {
  done_ctx *d = ctx;
  pthread_mutex_lock(&d->lock);
  d->n++;
  if (g->result < 0)
    d->failed++;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
  store_gen_free(g);
}

static int count_span(void *ctx, const store_span_row *r) {
  (void)r;
  (*(uint64_t *)ctx)++;
  return 0;
}
static int count_stats(void *ctx, const store_name_stats *r) {
  (void)r;
  (*(uint64_t *)ctx)++;
  return 0;
}
/* Median of n values (sorts v). */
static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int keep_end(void *ctx, const store_gen_row *r) {
  *(int64_t *)ctx = r->end_ns;
  return 0;
}
static int count_gen(void *ctx, const store_gen_row *r) {
  (void)r;
  (*(uint64_t *)ctx)++;
  return 0;
}

static void on_done_free(void *ctx, store_gen *g) {
  (void)ctx;
  store_gen_free(g);
}

/* Opens path with the store and waits for its rollups to be built. */
static int migrate(const char *path) {
  store_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.path = path;
  store_pins *pins = store_pins_new();
  cfg.pins = pins;
  store *s = NULL;
  char *cause = NULL;
  double t0 = mono(), c0 = cpu();
  if (store_open(&cfg, on_done_free, NULL, &s, &cause) != 0) {
    fprintf(stderr, "store_open: %s\n", cause ? cause : "?");
    return 1;
  }
  double open_s = mono() - t0;
  store_stats st;
  store_stats_get(s, &st);
  uint64_t total = st.rollup_pending_slots;
  do {
    struct timespec d = {0, 100000000};
    nanosleep(&d, NULL);
    store_stats_get(s, &st);
  } while (st.rollup_pending_slots > 0);
  double all = mono() - t0, all_c = cpu() - c0;
  store_close(s);
  store_pins_free(pins);
  printf("# migration: open (schema 5 -> 6, slots marked) %.2f s; %" PRIu64
         " slots rolled up in the background in %.1f s (cpu %.1f s):"
         " %.1f ms of store thread per slot\n",
         open_s, total, all, all_c, total ? 1000 * all_c / (double)total : 0);
  printf("BENCH id=S2_rollup_migration value=%.1f unit=s baseline=n/a"
         " ratio=n/a bar=n/a pass=1\n",
         all);
  return 0;
}

int main(int argc, char **argv) {
  unsigned agents = argc > 1 ? (unsigned)atoi(argv[1]) : 100;
  double hours = argc > 2 ? atof(argv[2]) : 24;
  int64_t period = (argc > 3 ? atoll(argv[3]) : 10) * NS;
  double b1 = argc > 4 ? atof(argv[4]) : 0;
  if (!agents || hours <= 0 || period <= 0)
    return 2;
  const char *dir = getenv("BENCH_DIR") ? getenv("BENCH_DIR") : ".";
  char path[512];
  snprintf(path, sizeof path, "%s/bench-search-%d.db", dir, (int)getpid());
  uint64_t per_agent = (uint64_t)(hours * 3600 * NS / (double)period);
  int64_t end_ns = (int64_t)time(NULL) * NS;
  int64_t start_ns = end_ns - (int64_t)per_agent * period;

  /* BENCH_DB=FILE: time the queries on a database made before (with the
   * same AGENTS, HOURS and PERIOD_S, generated at that time: end_ns is
   * taken from its newest generation). */
  const char *reuse = getenv("BENCH_DB");
  store_pins *pins = NULL;
  if (reuse) {
    snprintf(path, sizeof path, "%s", reuse);
    /* BENCH_MIGRATE=1: open it with the store first and time the
     * background build of the summary rollups (a database migrated from
     * schema 5, e.g. made so with sqlite3: drop sum_slots, sum_slots_dirty
     * and the trigger generations_slot_del, set schema_version to 5). */
    if (getenv("BENCH_MIGRATE") && migrate(path) != 0)
      return 1;
    goto query;
  }
  store_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.path = path;
  cfg.zstd_level = 1;
  cfg.batch_max = 256;
  pins = store_pins_new();
  cfg.pins = pins;
  done_ctx d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  store *s = NULL;
  char *cause = NULL;
  if (store_open(&cfg, on_done, &d, &s, &cause) != 0) {
    fprintf(stderr, "store_open: %s\n", cause ? cause : "?");
    return 1;
  }
  printf("# generating %u agents x %.1f h, one generation per %" PRId64
         " s: %" PRIu64 " generations into %s\n",
         agents, hours, period / NS, per_agent * agents, path);
  fflush(stdout);
  double t0 = mono();
  uint64_t submitted = 0, events = 0;
  for (uint64_t g = 1; g <= per_agent; g++) {
    for (unsigned a = 0; a < agents; a++) {
      uint8_t session[16];
      for (int i = 0; i < 16; i++)
        session[i] = (uint8_t)(a * 31 + i * 7 + 1);
      gtp_wbuf b;
      gtp_wbuf_init(&b, 0);
      gtp_gen_end e;
      events += build_gen(&b, session, a, g,
                          start_ns + (int64_t)(g - 1) * period, period, &e);
      char svc[32], host[32];
      snprintf(svc, sizeof svc, "svc-%u", a % 10);
      snprintf(host, sizeof host, "host-%u", a);
      store_gen *sg = bench_gen_new(
          session,
          &(bench_gen_id){.service = svc, .host = host, .pid = 1000 + a}, g,
          start_ns + (int64_t)(g - 1) * period, period);
      sg->end = e;
      sg->payload = b.data;
      sg->len = b.len;
      store_submit(s, sg);
      submitted++;
      /* Keep the queue short: memory stays flat however long the day. */
      pthread_mutex_lock(&d.lock);
      while (submitted - d.n > 4096)
        pthread_cond_wait(&d.cond, &d.lock);
      pthread_mutex_unlock(&d.lock);
    }
  }
  store_close(s);
  double gen_s = mono() - t0;
  printf("# committed %" PRIu64 " generations (%" PRIu64 " events, %" PRIu64
         " failed) in %.1f s: %.0f generations/s\n",
         d.n, events, d.failed, gen_s, (double)d.n / gen_s);

query:;
  store_reader *r = NULL;
  if (store_reader_open(path, &r, &cause) != 0) {
    fprintf(stderr, "reader: %s\n", cause ? cause : "?");
    return 1;
  }
  if (reuse) {
    int64_t maxseq = 0;
    store_read_max_seq(r, &maxseq);
    end_ns = 0;
    store_read_feed(r, maxseq - 1, 1, keep_end, &end_ns);
    start_ns = end_ns - (int64_t)per_agent * period;
  }
  /* S1 */
  struct {
    const char *what;
    int64_t from;
    uint32_t limit;
  } sq[] = {{"last_1h", end_ns - 3600 * NS, 100}, {"day", start_ns, 1000}};
  for (int i = 0; i < 2; i++) {
    store_search_query q;
    memset(&q, 0, sizeof q);
    q.name = "checkout.pay";
    q.min_ns = 200000000;
    q.max_ns = UINT64_MAX;
    q.from_ns = sq[i].from;
    q.to_ns = end_ns + NS;
    q.limit = sq[i].limit;
    uint64_t n = 0, base_n = 0, skip;
    int64_t next;
    double a0 = mono(), c0 = cpu();
    int rc = store_search_spans(r, &q, count_span, &n, &next, &skip);
    double a = mono() - a0, ac = cpu() - c0;
    store_window_query wq = {NULL, "svc-0", NULL, sq[i].from, end_ns + NS};
    double b0 = mono();
    store_read_window(r, &wq, count_gen, &base_n);
    double bl = mono() - b0;
    printf("# S1 %s: %" PRIu64 " spans (rc %d) in %.3f s (cpu %.3f s); window"
           " listing of svc-0: %" PRIu64 " generations in %.3f s\n",
           sq[i].what, n, rc, a, ac, base_n, bl);
    printf("BENCH id=S1_search_%s value=%.3f unit=s baseline=window_list:%.3f"
           " ratio=%.2f bar=%.1f pass=%d\n",
           sq[i].what, a, bl, bl > 0 ? a / bl : 0, BAR_S, a < BAR_S);
  }
  /* S2: the summary (rollups for the whole slots inside the range),
   * beside the same query on raw rows only (q.raw: the summary before
   * rollups), alternating, BENCH_S2_REPS (default 3) times; medians. */
  int reps2 = getenv("BENCH_S2_REPS") ? atoi(getenv("BENCH_S2_REPS")) : 3;
  if (reps2 < 1 || reps2 > 15)
    reps2 = 3;
  /* Cases: svc-0's last hour and day, and the whole fleet's day. */
  for (int c2 = 0; c2 < 3; c2++) {
    int i = c2 == 0 ? 0 : 1;
    const char *svc = c2 < 2 ? "svc-0" : NULL;
    const char *what = c2 < 2 ? sq[i].what : "fleet_day";
    double wall[2][15], cput[2][15];
    uint64_t n[2] = {0, 0};
    int rc[2] = {0, 0};
    for (int k = 0; k < reps2; k++) {
      for (int raw = 0; raw < 2; raw++) {
        store_summary_query q;
        memset(&q, 0, sizeof q);
        q.service = svc;
        q.from_ns = sq[i].from;
        q.to_ns = end_ns + NS;
        q.raw = raw;
        uint64_t pending = 0;
        n[raw] = 0;
        double a0 = mono(), c0 = cpu();
        rc[raw] = store_search_summary(r, &q, count_stats, &n[raw], &pending);
        wall[raw][k] = mono() - a0;
        cput[raw][k] = cpu() - c0;
      }
    }
    double a = median(wall[0], reps2), ac = median(cput[0], reps2);
    double b = median(wall[1], reps2), bc = median(cput[1], reps2);
    store_window_query wq = {NULL, "svc-0", NULL, sq[i].from, end_ns + NS};
    uint64_t base_n = 0;
    double b0 = mono();
    store_read_window(r, &wq, count_gen, &base_n);
    double bl = mono() - b0;
    printf("# S2 %s: %" PRIu64 " names (rc %d) in %.3f s (cpu %.3f s);"
           " raw rows only: %" PRIu64 " names (rc %d) in %.3f s (cpu %.3f s);"
           " medians of %d; window listing of svc-0: %.3f s\n",
           what, n[0], rc[0], a, ac, n[1], rc[1], b, bc, reps2, bl);
    printf("BENCH id=S2_summary_%s value=%.3f unit=s baseline=raw_rows:%.3f"
           " ratio=%.2f bar=%.1f pass=%d\n",
           what, a, b, b > 0 ? a / b : 0, BAR_S, a < BAR_S);
  }
  store_reader_close(r);

  /* S3: per-event cost of the summary against zstd on the same bytes. */
  uint8_t session[16] = {9};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_gen_end e;
  uint64_t ev = build_gen(&b, session, 1, 1, start_ns, period, &e);
  int reps = 2000;
  double a0 = mono();
  for (int i = 0; i < reps; i++) {
    gtp_gen g;
    size_t used;
    gtp_summary sm;
    if (gtp_gen_parse_lazy(b.data, b.len, &g, &used) == 0) { /* as the store */
      gtp_summary_compute(&g, &sm);
      gtp_summary_fini(&sm);
      gtp_gen_fini(&g);
    }
  }
  double sum_ns = (mono() - a0) * 1e9 / ((double)reps * (double)ev);
  size_t bound = ZSTD_compressBound(b.len);
  uint8_t *z = malloc(bound);
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  double z0 = mono();
  for (int i = 0; i < reps; i++)
    ZSTD_compressCCtx(cc, z, bound, b.data, b.len, 1);
  double z_ns = (mono() - z0) * 1e9 / ((double)reps * (double)ev);
  ZSTD_freeCCtx(cc);
  free(z);
  gtp_wbuf_fini(&b);
  printf("# S3: %" PRIu64 " events per generation; summary %.1f ns/event,"
         " zstd-1 %.1f ns/event\n",
         ev, sum_ns, z_ns);
  printf("BENCH id=S3_summary_cost value=%.1f unit=ns/event baseline=zstd1:%.1f"
         " ratio=%.2f bar=n/a pass=1\n",
         sum_ns, z_ns, sum_ns / z_ns);
  if (b1 > 0) {
    double budget = 1e9 / b1;
    printf("BENCH id=S3_summary_vs_B1 value=%.2f unit=%% baseline=B1:%.0f"
           " ratio=%.3f bar=5 pass=%d\n",
           100 * sum_ns / budget, b1, sum_ns / budget,
           100 * sum_ns / budget <= 5);
  } else {
    printf("# S3 vs B1: pass B1's events/s as the 4th argument\n");
  }
  if (!getenv("BENCH_KEEP") && !reuse) {
    char p2[600];
    unlink(path);
    snprintf(p2, sizeof p2, "%s-wal", path);
    unlink(p2);
    snprintf(p2, sizeof p2, "%s-shm", path);
    unlink(p2);
  }
  store_pins_free(pins);
  return 0;
}
