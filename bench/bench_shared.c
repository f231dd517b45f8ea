/* bench_shared.c: C1 on the shared store beside SQLite, in one run, and the
 * window latency from a daemon that did not ingest the data.
 *
 * Generations of 1 MiB (text-like, zstd shrinks them about 3-4x) go
 * through the storage interface (store/storage.h) with at most INFLIGHT MiB
 * between submit and done() (as --max-buffer bounds a daemon), timed from
 * the first submit to the last done():
 *   sqlite:   one SQLite storage (as gentraced: WAL, synchronous=NORMAL);
 *   shared-N: N storages on one catalog + bucket (N "daemons" in this
 *             process, each with its own threads and connections), each
 *             submitting TOTAL/N bytes at once; the figure is the aggregate.
 * Then a storage that ingested nothing (cold cache) reads a 10-generation
 * window (list + every payload), against SQLite reading the same window.
 *
 * Needs the environment of scripts/cluster-up (make bench-shared starts and
 * stops one). BENCH_SHARED_MB (default 512), BENCH_DIR (SQLite file; default
 * .). Prints BENCH lines (ratio to the same run's SQLite figure); never
 * fails the build.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_env.h"
#include "bench_gen.h"
#include "storage.h"
#include "../tests/lib/prng.h"

#define GEN_BYTES (1u << 20)
#define MAXD 3
/* Generations (MiB) in flight, over all storages of a run. */
#define INFLIGHT 128
/* Segments close at this many stored bytes (the daemon's default is 32 MiB;
 * smaller here so INFLIGHT fills several and the figure is the pipeline's
 * rate, not the 2 s age limit). */
#define SEG_BYTES (8u << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  return xorshift64star(&rng);
}

static uint8_t *tmpl;
static void make_template(void) {
  static const char *w[] = {
      "http.request ", "db.query ",          "cache.get ", "region=",
      "status=200 ",   "GET /api/v1/items ", "thread=",    "span "};
  tmpl = malloc(GEN_BYTES);
  size_t n = 0;
  while (n < GEN_BYTES) {
    char tok[48];
    int k = rnd() % 3 == 0
                ? snprintf(tok, sizeof tok, "%" PRIu64 " ", rnd() % 100000)
                : snprintf(tok, sizeof tok, "%s", w[rnd() % 8]);
    for (int i = 0; i < k && n < GEN_BYTES; i++)
      tmpl[n++] = (uint8_t)tok[i];
  }
}

typedef struct run {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t done, want;
  int errors;
} run;

static void on_done(void *ctx, store_gen *g) {
  run *r = ctx;
  pthread_mutex_lock(&r->lock);
  if (g->result < 0)
    r->errors++;
  r->done++;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  store_gen_free(g);
}

static store_gen *gen(uint8_t daemon, uint8_t sess, uint64_t no, int64_t t0) {
  uint8_t sid[16] = {daemon, sess};
  sid[15] = 0x77;
  uint32_t pid = (uint32_t)getpid(); /* new sessions in every bench run */
  memcpy(sid + 4, &pid, sizeof pid);
  store_gen *g = bench_gen_new(sid, &(bench_gen_id){0}, no,
                               t0 + (int64_t)no * 1000000000LL, 1000000000LL);
  g->end.events = 10000;
  g->len = GEN_BYTES;
  g->payload = malloc(GEN_BYTES);
  memcpy(g->payload, tmpl, GEN_BYTES);
  memcpy(g->payload, &no, sizeof no); /* each one differs a little */
  g->payload[100] = daemon;
  return g;
}

typedef struct seqs {
  int64_t s[64];
  int n;
} seqs;
static int note_seq(void *ctx, const store_gen_row *row) {
  seqs *q = ctx;
  if (q->n < 64)
    q->s[q->n++] = row->seq;
  return 0;
}

int main(void) {
  const char *cat, *obj;
  if (!bench_shared_env("bench_shared", &cat, &obj))
    return 0;
  uint64_t mb = bench_env_u64("BENCH_SHARED_MB", 512);
  const char *dir = bench_dir();
  make_template();
  int64_t t0 = 1700000000LL * 1000000000LL;
  double mbs[MAXD + 1] = {0};
  char objects[256], dbpath[512];
  for (int n = 0; n <= MAXD; n++) {
    run r = {.want = mb};
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    storage *st[MAXD] = {0};
    int k = n ? n : 1;
    for (int i = 0; i < k; i++) {
      storage_config cfg = {.sqlite = {.zstd_level = 1, .batch_max = 64}};
      char id[32];
      snprintf(id, sizeof id, "bench-%d-%d-%ld", n, i, (long)getpid());
      if (n == 0) {
        snprintf(dbpath, sizeof dbpath, "%s/bench-shared-%ld.db", dir,
                 (long)getpid());
        cfg.sqlite.path = dbpath;
      } else {
        snprintf(objects, sizeof objects, "%s/bench-%ld", obj, (long)getpid());
        cfg.catalog = cat;
        cfg.objects = objects;
        cfg.shared.daemon_id = id;
        cfg.shared.zstd_level = 1;
        cfg.shared.max_bytes = SEG_BYTES;
      }
      char *cause = NULL;
      if (storage_open(&cfg, on_done, &r, &st[i], &cause) < 0) {
        printf("# bench_shared: open: %s\n", cause ? cause : "?");
        return 0;
      }
    }
    double t = now_s();
    for (uint64_t g = 0; g < mb; g++) {
      int i = (int)(g % (uint64_t)k);
      /* At most INFLIGHT MiB between submit and done, as the daemon's
       * --max-buffer bounds it; the store then runs at its steady rate. */
      pthread_mutex_lock(&r.lock);
      while (g - r.done >= INFLIGHT)
        pthread_cond_wait(&r.cond, &r.lock);
      pthread_mutex_unlock(&r.lock);
      /* Sessions differ per run so every run stores new rows. */
      storage_submit(st[i], gen((uint8_t)(16 * n + i), (uint8_t)n,
                                g / (uint64_t)k + 1, t0));
    }
    pthread_mutex_lock(&r.lock);
    while (r.done < r.want)
      pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);
    double el = now_s() - t;
    mbs[n] = (double)mb / el;
    printf("# %s: %" PRIu64 " MiB in %.2f s = %.1f MiB/s%s\n",
           n ? "shared" : "sqlite", mb, el, mbs[n],
           r.errors ? " (ERRORS)" : "");
    if (n)
      printf("#   daemons: %d\n", n);
    for (int i = 0; i < k; i++)
      storage_close(st[i]);
  }
  printf("BENCH id=C1-shared-1 value=%.1f unit=MiB/s baseline=sqlite:%.1f"
         " ratio=%.2f bar=0.50 pass=%d\n",
         mbs[1], mbs[0], mbs[1] / mbs[0], mbs[1] / mbs[0] >= 0.5);
  for (int n = 2; n <= MAXD; n++)
    printf("BENCH id=C1-shared-%d value=%.1f unit=MiB/s baseline=shared-1:%.1f"
           " ratio=%.2f bar=1.00 pass=%d\n",
           n, mbs[n], mbs[1], mbs[n] / mbs[1], mbs[n] >= mbs[1]);

  /* Window latency: a storage that ingested nothing reads 10 generations. */
  double lat[2] = {0};
  for (int shared = 0; shared <= 1; shared++) {
    storage_config cfg = {.sqlite = {.path = dbpath, .zstd_level = 1}};
    if (shared) {
      cfg.catalog = cat;
      cfg.objects = objects;
      cfg.shared.daemon_id = "bench-reader";
    }
    run r = {.want = 0};
    storage *st = NULL;
    char *cause = NULL;
    if (storage_open(&cfg, on_done, &r, &st, &cause) < 0) {
      printf("# bench_shared: reader open: %s\n", cause ? cause : "?");
      return 0;
    }
    storage_reader *rd = NULL;
    storage_reader_open(st, &rd, &cause);
    char hex[33];
    uint8_t sid[16] = {0};
    sid[0] = shared ? 16 : 0;
    sid[1] = shared ? 1 : 0;
    sid[15] = 0x77;
    uint32_t pid = (uint32_t)getpid();
    memcpy(sid + 4, &pid, sizeof pid);
    gtp_session_hex(sid, hex);
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
      /* A different window each time: every read is cold on the shared
       * reader (its cache never saw these generations). */
      int64_t from = t0 + (int64_t)(10 + rep * 10) * 1000000000LL;
      store_window_query q = {
          .session = hex, .from_ns = from, .to_ns = from + 10 * 1000000000LL};
      seqs sq = {.n = 0};
      gtp_wbuf b;
      gtp_wbuf_init(&b, 0);
      double t = now_s();
      int rc = storage_read_window(rd, &q, note_seq, &sq);
      for (int i = 0; rc == 0 && i < sq.n; i++) {
        gtp_wbuf_reset(&b);
        rc = storage_read_payload(rd, sq.s[i], &b);
      }
      double el = now_s() - t;
      gtp_wbuf_fini(&b);
      if (rc < 0 || sq.n != 10)
        printf("# window read (%s): rc=%d gens=%d (want 10)\n",
               shared ? "shared" : "sqlite", rc, sq.n);
      if (el < best)
        best = el;
    }
    lat[shared] = best * 1000;
    storage_reader_close(rd);
    storage_close(st);
  }
  printf("BENCH id=window-cold-other-daemon value=%.2f unit=ms"
         " baseline=sqlite:%.2f ratio=%.2f bar=10.00 pass=%d\n",
         lat[1], lat[0], lat[1] / lat[0], lat[1] / lat[0] <= 10.0);
  unlink(dbpath);
  return 0;
}
