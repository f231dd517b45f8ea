/* bench_pgsum.c: what summaries cost the shared store at commit, and how
 * fast /v1/search and /v1/summary answer from the PostgreSQL catalog, each
 * beside its same-run baseline.
 *
 *   P0 build: CPU time of pg_sum_build (summary + rows as COPY text) per
 *      generation against zstd level 3 of the same bytes (the packer's
 *      other work on the same thread).
 *   P1 commit: demo-shaped generations (bench/demo_gen.c: nested regions,
 *      tasks, logs, counters; 256 KiB of events each) through the storage
 *      interface into the shared store, with summaries and without
 *      (GENTRACE_BENCH_NO_SUMMARY), alternating, 3 runs each: median MiB/s
 *      of each, the ratio is what summarizing leaves of the rate.
 *   P2 search/P3 summary: a storage that ingested nothing (another daemon,
 *      cold) answers a search from the kept rows (every span of 1 ms or
 *      more of one session, all pages of 1000), the first page (100) of one
 *      that must decode generations (min 100 us, under the 1 ms floor), and
 *      its summary over the whole range; the same generations in SQLite are the
 *      baseline. Medians of 3.
 *
 * Needs the environment of scripts/cluster-up (make bench-shared runs it in
 * the cluster it starts). BENCH_PGSUM_GENS (default 100), BENCH_DIR (SQLite
 * file; default .). Prints BENCH lines; never fails the build.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "bench_env.h"
#include "bench_gen.h"
#include "demo_gen.h"
#include "pg_sum.h"
#include "storage.h"

#define EVENT_BYTES (256u << 10)
#define SESSIONS 4
#define RUNS 3

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct waiter {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t done;
  int errors;
} waiter;

static void on_done(void *ctx, store_gen *g) {
  waiter *w = ctx;
  pthread_mutex_lock(&w->lock);
  w->errors += g->result < 0;
  w->done++;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  store_gen_free(g);
}

/* Generation i of the run: session i % SESSIONS (ids differ per run). */
static store_gen *make_gen(int run, uint64_t i, int64_t t0) {
  uint8_t sid[16] = {0x5e, (uint8_t)run, (uint8_t)(i % SESSIONS)};
  uint32_t pid = (uint32_t)getpid();
  memcpy(sid + 4, &pid, sizeof pid);
  uint64_t no = i / SESSIONS + 1;
  store_gen *g =
      bench_gen_new(sid, &(bench_gen_id){.service = i % 2 ? "cart" : "pay"}, no,
                    t0 + (int64_t)no * 1000000000LL, 1000000000LL);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  if (demo_gen_build(&b, sid, no, t0, EVENT_BYTES, &g->end) < 0)
    abort();
  g->payload = b.data;
  g->len = b.len;
  return g;
}

/* Stores n generations (built beforehand) through cfg; MiB/s of payload. */
static double ingest(const storage_config *cfg, store_gen **gens, uint64_t n) {
  waiter w = {.done = 0};
  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);
  storage *st = NULL;
  char *cause = NULL;
  if (storage_open(cfg, on_done, &w, &st, &cause) < 0) {
    printf("# bench_pgsum: open: %s\n", cause ? cause : "?");
    exit(0);
  }
  uint64_t bytes = 0;
  double t = now_s();
  for (uint64_t i = 0; i < n; i++) {
    bytes += gens[i]->len;
    storage_submit(st, gens[i]);
  }
  pthread_mutex_lock(&w.lock);
  while (w.done < n)
    pthread_cond_wait(&w.cond, &w.lock);
  pthread_mutex_unlock(&w.lock);
  double el = now_s() - t;
  storage_close(st);
  if (w.errors)
    printf("# bench_pgsum: %d generations failed\n", w.errors);
  return (double)bytes / (1 << 20) / el;
}

static int count_span(void *ctx, const store_span_row *r) {
  (void)r;
  ++*(uint64_t *)ctx;
  return 0;
}
static int count_name(void *ctx, const store_name_stats *r) {
  (void)r;
  ++*(uint64_t *)ctx;
  return 0;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median seconds of RUNS searches (which = 0: from the rows, all pages; 2:
 * decoding, first page) or summaries (1) on a fresh reader of a storage
 * opened from cfg; *rows = what one answer held. */
static double query(const storage_config *cfg, int which, const char *session,
                    uint64_t *rows) {
  waiter w = {.done = 0};
  storage *st = NULL;
  char *cause = NULL;
  storage_reader *r = NULL;
  if (storage_open(cfg, on_done, &w, &st, &cause) < 0 ||
      storage_reader_open(st, &r, &cause) < 0) {
    printf("# bench_pgsum: open: %s\n", cause ? cause : "?");
    exit(0);
  }
  double s[RUNS];
  for (int k = 0; k < RUNS; k++) {
    *rows = 0;
    double t = now_s();
    if (which != 1) {
      store_search_query q = {.min_ns = which == 0 ? 1000000 : 100000,
                              .max_ns = UINT64_MAX,
                              .to_ns = INT64_MAX,
                              .limit = which == 0 ? 1000 : 100,
                              .session = session};
      do {
        int64_t next = 0;
        uint64_t skip = 0;
        storage_search_spans(r, &q, count_span, rows, &next, &skip);
        q.cursor_seq = which == 0 ? next : 0;
        q.cursor_skip = skip;
      } while (q.cursor_seq);
    } else {
      store_summary_query q = {.to_ns = INT64_MAX, .session = session};
      uint64_t pending;
      storage_search_summary(r, &q, count_name, rows, &pending);
    }
    s[k] = now_s() - t;
  }
  storage_reader_close(r);
  storage_close(st);
  qsort(s, RUNS, sizeof *s, cmp_d);
  return s[RUNS / 2];
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* P0: CPU us per generation of pg_sum_build and of zstd level 3. */
static void build_cost(store_gen **gens, uint64_t n) {
  double sum[RUNS], z[RUNS];
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  size_t cap = ZSTD_compressBound(gens[0]->len * 2);
  void *dst = malloc(cap);
  uint64_t rows = 0;
  for (int k = 0; k < RUNS; k++) {
    double t = cpu_s();
    sum_carry *carry = sum_carry_new();
    for (uint64_t i = 0; i < n; i++) {
      pg_sum *p = pg_sum_build(gens[i]->session, gens[i]->gen, gens[i]->payload,
                               gens[i]->len, carry);
      rows = p ? p->spans.len : 0;
      pg_sum_free(p);
    }
    sum_carry_free(carry);
    sum[k] = (cpu_s() - t) / (double)n * 1e6;
    t = cpu_s();
    for (uint64_t i = 0; i < n; i++)
      if (gens[i]->len <= cap)
        ZSTD_compressCCtx(cc, dst, cap, gens[i]->payload, gens[i]->len, 3);
    z[k] = (cpu_s() - t) / (double)n * 1e6;
  }
  ZSTD_freeCCtx(cc);
  free(dst);
  qsort(sum, RUNS, sizeof *sum, cmp_d);
  qsort(z, RUNS, sizeof *z, cmp_d);
  printf("# P0: %" PRIu64 " bytes of span rows (COPY text) in the last "
         "generation\n",
         rows);
  printf("BENCH id=P0-pg-sum-build value=%.0f unit=us/gen baseline=zstd3:%.0f"
         " ratio=%.2f bar=1.00 pass=%d\n",
         sum[RUNS / 2], z[RUNS / 2], sum[RUNS / 2] / z[RUNS / 2],
         sum[RUNS / 2] <= z[RUNS / 2]);
}

int main(void) {
  const char *cat, *obj;
  if (!bench_shared_env("bench_pgsum", &cat, &obj))
    return 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  uint64_t n = bench_env_u64("BENCH_PGSUM_GENS", 100);
  const char *dir = bench_dir();
  int64_t t0 = 1700000000LL * 1000000000LL;
  char objects[256], dbpath[512];
  snprintf(objects, sizeof objects, "%s/pgsum-%ld", obj, (long)getpid());
  snprintf(dbpath, sizeof dbpath, "%s/bench-pgsum-%ld.db", dir, (long)getpid());
  storage_config shared = {.catalog = cat, .objects = objects};
  storage_config sqlite = {.sqlite = {.path = dbpath}};
  store_gen **gens = calloc(n, sizeof *gens);
  double with[RUNS], without[RUNS];
  for (uint64_t i = 0; i < n; i++)
    gens[i] = make_gen(99, i, t0);
  build_cost(gens, n);
  for (uint64_t i = 0; i < n; i++)
    store_gen_free(gens[i]);
  for (int k = 0; k < 2 * RUNS; k++) {
    int sum = k % 2 == 0; /* alternate: load drifts hit both alike */
    for (uint64_t i = 0; i < n; i++)
      gens[i] = make_gen(k, i, t0);
    if (sum)
      unsetenv("GENTRACE_BENCH_NO_SUMMARY");
    else
      setenv("GENTRACE_BENCH_NO_SUMMARY", "1", 1);
    double v = ingest(&shared, gens, n);
    (sum ? with : without)[k / 2] = v;
    printf("# P1 run %d %s: %.1f MiB/s (load %.2f)\n", k / 2,
           sum ? "summaries" : "no summaries", v, bench_load1());
  }
  unsetenv("GENTRACE_BENCH_NO_SUMMARY");
  /* The same generations of run 0 (summarized) into SQLite. */
  for (uint64_t i = 0; i < n; i++)
    gens[i] = make_gen(0, i, t0);
  ingest(&sqlite, gens, n);
  qsort(with, RUNS, sizeof *with, cmp_d);
  qsort(without, RUNS, sizeof *without, cmp_d);
  double w = with[RUNS / 2], wo = without[RUNS / 2];
  printf("BENCH id=P1-shared-commit-summaries value=%.1f unit=MiB/s"
         " baseline=no-summaries:%.1f ratio=%.2f bar=0.95 pass=%d\n",
         w, wo, w / wo, w / wo >= 0.95);
  /* One session of run 0, stored by both (the shared catalog also holds
   * the other runs' sessions). */
  uint8_t sid[16] = {0x5e, 0, 0};
  uint32_t pid = (uint32_t)getpid();
  memcpy(sid + 4, &pid, sizeof pid);
  char session[33];
  gtp_session_hex(sid, session);
  uint64_t rows_pg = 0, rows_sq = 0;
  double pg = query(&shared, 0, session, &rows_pg),
         sq = query(&sqlite, 0, session, &rows_sq);
  printf("# P2 search of one session: %" PRIu64 " spans (shared), %" PRIu64
         " (sqlite)\n",
         rows_pg, rows_sq);
  printf("BENCH id=P2-shared-search value=%.3f unit=s baseline=sqlite:%.3f"
         " ratio=%.2f bar=1.00 pass=%d\n",
         pg, sq, pg / sq, pg < 1.0);
  pg = query(&shared, 2, session, &rows_pg);
  sq = query(&sqlite, 2, session, &rows_sq);
  printf("BENCH id=P2-shared-search-decoded value=%.3f unit=s"
         " baseline=sqlite:%.3f ratio=%.2f bar=1.00 pass=%d\n",
         pg, sq, pg / sq, pg < 1.0);
  pg = query(&shared, 1, session, &rows_pg);
  sq = query(&sqlite, 1, session, &rows_sq);
  printf("BENCH id=P3-shared-summary value=%.3f unit=s baseline=sqlite:%.3f"
         " ratio=%.2f bar=1.00 pass=%d\n",
         pg, sq, pg / sq, pg < 1.0);
  printf("# load average %.2f; %" PRIu64 " generations of %u KiB of events\n",
         bench_load1(), n, EVENT_BYTES >> 10);
  free(gens);
  unlink(dbpath);
  return 0;
}
