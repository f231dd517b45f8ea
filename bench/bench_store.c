/* bench_store.c: C1, the store's write rate against the raw disk.
 *
 * Builds realistic generations with the proto writer (16 threads' batches of
 * regions, counters, instants and request logs, string table, clock; about
 * 1 MiB each, zstd shrinks them about 3-5x), then in one run, interleaved
 * ROUNDS times:
 *   A: a fresh store (WAL, synchronous=NORMAL, its default page size)
 *      commits TOTAL bytes of generations; the clock runs from the first
 *      store_submit to store_close returning, so compression, every
 *      transaction, the automatic checkpoints and the final one are all
 *      inside.
 *   B: dd if=/dev/zero of=F bs=1M count=<same MiB> conv=fdatasync.
 * The figure is generation bytes committed per second, the baseline dd's
 * bytes per second for the same byte count; the median ratio of the rounds
 * is reported (the virtual disk swings about 2x between runs).
 *
 * Environment: BENCH_STORE_MB (generation bytes per round, default 512),
 * BENCH_DIR (where the files go, default .; must be a real disk, not tmpfs),
 * BENCH_ROUNDS (default 3), BENCH_ZSTD_LEVEL (default 1, as gentraced). Prints
 * one BENCH line (bench/README.md) plus comment lines with the details; never fails
 * the build.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "format.h"
#include "store.h"
#include "../tests/lib/prng.h"

#define TEMPLATES 32
#define THREADS 16
#define BAR 0.40

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  return xorshift64star(&rng_state);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const names[] = {
    "http.request", "db.query",  "cache.get",  "cache.set",  "auth.check",
    "render",       "serialize", "queue.push", "queue.pop",  "rpc.call",
    "gc.pause",     "lock.wait", "file.read",  "file.write", "compress",
    "parse.json",   "validate",  "schedule",   "retry",      "flush",
    "queue_depth",  "inflight",  "heap_bytes", "conn_open",  "cache_hits"};
#define NNAMES (sizeof names / sizeof names[0])

/* One thread's EVENTS record: a request loop as a real service writes it. */
static void put_batch(gtp_wbuf *b, uint64_t gen, unsigned t, uint64_t base) {
  static uint8_t ev_buf[GTP_BATCH_MAX];
  size_t len = 0;
  uint64_t n = 0, ticks = base, prev = base;
  int64_t counter = (int64_t)(rnd() % 1000);
  while (len + 2 * GTP_EVENT_MAX + 128 < GTP_BATCH_MAX - 64) {
    gtp_event ev;
    memset(&ev, 0, sizeof ev);
    char msg[128];
    unsigned kind = (unsigned)(rnd() % 16);
    ticks += 20 + rnd() % 2000;
    if (kind < 5) {
      ev.type = GTP_EV_REGION_BEGIN;
      ev.args[0] = 1 + rnd() % 20;
    } else if (kind < 10) {
      ev.type = GTP_EV_REGION_END;
    } else if (kind < 12) {
      ev.type = GTP_EV_COUNTER;
      counter += (int64_t)(rnd() % 21) - 10;
      ev.args[0] = 21 + rnd() % 5;
      ev.args[1] = (uint64_t)counter;
    } else if (kind < 15) {
      ev.type = GTP_EV_INSTANT;
      ev.args[0] = 1 + rnd() % 20;
    } else {
      ev.type = GTP_EV_LOG;
      ev.args[0] = 1 + rnd() % 20;
      int m = snprintf(msg, sizeof msg,
                       "GET /api/v1/items/%u status=%d dur_us=%u user=%08x",
                       (unsigned)(rnd() % 100000), rnd() % 50 ? 200 : 503,
                       (unsigned)(rnd() % 90000), (unsigned)rnd());
      ev.msg = (const uint8_t *)msg;
      ev.msg_len = (size_t)m;
    }
    ev.ticks = ticks;
    int k = gtp_event_encode(ev_buf + len, &ev, prev);
    if (k < 0)
      abort();
    len += (size_t)k;
    prev = ticks;
    n++;
  }
  gtp_put_batch(b, gen, 100 + t, base, n, ev_buf, len);
}

static void build(gtp_wbuf *b, uint64_t gen, const uint8_t session[16]) {
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, session, 16);
  gs.gen = gen;
  gs.service = (gtp_str){"checkout", 8};
  gs.host = (gtp_str){"bench-host", 10};
  gs.agent_version = (gtp_str){"0.1.0", 5};
  gs.pid = 4242;
  gs.process_start_ns = 1767225600000000000ull;
  gtp_put_gen_start(b, &gs);
  size_t body = b->len;
  uint64_t ids[NNAMES];
  gtp_str strs[NNAMES];
  for (size_t i = 0; i < NNAMES; i++) {
    ids[i] = i + 1;
    strs[i] = (gtp_str){names[i], strlen(names[i])};
  }
  gtp_put_strings(b, ids, strs, NNAMES);
  uint64_t base = 1000000000ull + gen * 250000000ull;
  for (unsigned t = 0; t < THREADS; t++)
    put_batch(b, gen, t, base + t);
  gtp_clock c = {base,
                 gen * 1000000000ull,
                 1767225600000000000ull + gen * 1000000000ull,
                 base + 250000000ull,
                 (gen + 1) * 1000000000ull,
                 1767225600000000000ull + (gen + 1) * 1000000000ull};
  gtp_put_clock(b, &c);
  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  e.gen = gen;
  if (gtp_manifest_compute(b->data + body, b->len - body, &e) != 0)
    abort();
  gtp_put_gen_end(b, &e);
  if (b->err)
    abort();
}

typedef struct tmpl {
  uint8_t *data;
  size_t len;
} tmpl;

typedef struct run {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t done, failed, stored;
} run;

static void on_done(void *ctx, store_gen *g) {
  run *r = ctx;
  pthread_mutex_lock(&r->lock);
  r->done++;
  if (g->result != 0)
    r->failed++;
  r->stored += g->stored_bytes;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
  g->payload = NULL; /* a shared template, not ours to free */
  store_gen_free(g);
}

static char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (!p)
    abort();
  return p;
}

static void rm_db(const char *db) {
  char p[1200];
  unlink(db);
  snprintf(p, sizeof p, "%s-wal", db);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", db);
  unlink(p);
}

/* A: returns seconds; *stored gets the compressed bytes written. */
static int level = 1; /* the daemon's default */

static double run_store(const char *db, const tmpl *t, uint64_t ngens,
                        uint64_t *stored) {
  rm_db(db);
  run r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  store_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.path = db;
  cfg.zstd_level = level;
  cfg.batch_max = 64;
  store *s = NULL;
  char *cause = NULL;
  if (store_open(&cfg, on_done, &r, &s, &cause) != 0) {
    fprintf(stderr, "bench_store: %s\n", cause);
    exit(1);
  }
  uint8_t session[16];
  for (int i = 0; i < 16; i++)
    session[i] = (uint8_t)(0xa0 + i);
  double t0 = now_s();
  for (uint64_t i = 0; i < ngens; i++) {
    store_gen *g = calloc(1, sizeof *g);
    if (!g)
      abort();
    memcpy(g->session, session, 16);
    g->service = xstrdup("checkout");
    g->host = xstrdup("bench-host");
    g->agent_version = xstrdup("0.1.0");
    g->tags_json = xstrdup("{\"env\":\"bench\"}");
    g->pid = 4242;
    g->gen = i;
    g->start_ns = 1767225600000000000LL + (int64_t)i * 1000000000LL;
    g->end_ns = g->start_ns + 1000000000LL;
    g->payload = t[i % TEMPLATES].data;
    g->len = t[i % TEMPLATES].len;
    g->end.events = 1000;
    /* Keep the queue about two transactions deep, as a busy ingest loop
     * would, instead of queueing everything at once. */
    pthread_mutex_lock(&r.lock);
    while (i - r.done > 2 * cfg.batch_max)
      pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);
    if (store_submit(s, g) != 0)
      abort();
  }
  store_close(s); /* commits the rest; closing checkpoints the WAL */
  double dt = now_s() - t0;
  if (r.failed) {
    fprintf(stderr, "bench_store: %" PRIu64 " generations failed\n", r.failed);
    exit(1);
  }
  *stored = r.stored;
  rm_db(db);
  return dt;
}

/* B: dd of mib MiB with fdatasync; returns seconds (-1 on failure). */
static double run_dd(const char *file, uint64_t mib) {
  char of[1100], count[32];
  snprintf(of, sizeof of, "of=%s", file);
  snprintf(count, sizeof count, "count=%" PRIu64, mib);
  double t0 = now_s();
  pid_t pid = fork();
  if (pid == 0) {
    execlp("dd", "dd", "if=/dev/zero", of, "bs=1M", count, "conv=fdatasync",
           "status=none", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
      WEXITSTATUS(st) != 0)
    return -1;
  double dt = now_s() - t0;
  unlink(file);
  return dt;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(void) {
  const char *dir = getenv("BENCH_DIR") ? getenv("BENCH_DIR") : ".";
  uint64_t mb = getenv("BENCH_STORE_MB")
                    ? strtoull(getenv("BENCH_STORE_MB"), NULL, 10)
                    : 512;
  int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 3;
  if (mb == 0)
    mb = 512;
  if (getenv("BENCH_ZSTD_LEVEL"))
    level = atoi(getenv("BENCH_ZSTD_LEVEL"));
  if (rounds < 1 || rounds > 15)
    rounds = 3;

  tmpl t[TEMPLATES];
  uint64_t raw = 0;
  uint8_t session[16] = {0};
  for (int i = 0; i < TEMPLATES; i++) {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    build(&b, (uint64_t)i, session);
    t[i].data = b.data;
    t[i].len = b.len;
    raw += b.len;
  }
  uint64_t avg = raw / TEMPLATES;
  uint64_t ngens = (mb << 20) / avg + 1;
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < ngens; i++)
    bytes += t[i % TEMPLATES].len;
  uint64_t mib = (bytes + (1u << 20) - 1) >> 20;

  /* For the reader of the figure: what compression alone costs here. */
  {
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(avg * 2);
    uint8_t *zb = malloc(cap);
    double t0 = now_s();
    uint64_t zin = 0, zout = 0;
    for (int i = 0; i < TEMPLATES; i++) {
      size_t n = ZSTD_compressCCtx(cc, zb, cap, t[i].data, t[i].len, level);
      zin += t[i].len;
      zout += ZSTD_isError(n) ? t[i].len : n;
    }
    double dt = now_s() - t0;
    if (getenv("BENCH_STORE_DUMP")) {
      FILE *df = fopen(getenv("BENCH_STORE_DUMP"), "wb");
      if (df) {
        fwrite(t[0].data, 1, t[0].len, df);
        fclose(df);
      }
    }
    printf("# zstd level %d alone (one thread): %.1f MB/s in, %.2fx\n", level,
           (double)zin / dt / 1e6, (double)zin / (double)zout);
    free(zb);
    ZSTD_freeCCtx(cc);
  }

  char db[1024], ddf[1024];
  snprintf(db, sizeof db, "%s/bench_store.%d.db", dir, (int)getpid());
  snprintf(ddf, sizeof ddf, "%s/bench_store.%d.dd", dir, (int)getpid());

  double ratios[16], store_mbs[16], dd_mbs[16];
  uint64_t stored = 0;
  for (int k = 0; k < rounds; k++) {
    double ts = run_store(db, t, ngens, &stored);
    double td = run_dd(ddf, mib);
    if (td <= 0) {
      fprintf(stderr, "bench_store: dd failed\n");
      return 1;
    }
    store_mbs[k] = (double)bytes / ts / 1e6;
    dd_mbs[k] = (double)(mib << 20) / td / 1e6;
    ratios[k] = store_mbs[k] / dd_mbs[k];
    printf("# round %d: store %.1f MB/s (%.1f MB/s written after zstd, %.2fx)"
           " dd %.1f MB/s ratio %.2f\n",
           k + 1, store_mbs[k], (double)stored / ts / 1e6,
           (double)bytes / (double)stored, dd_mbs[k], ratios[k]);
  }
  double sr[16];
  memcpy(sr, ratios, sizeof(double) * (size_t)rounds);
  qsort(sr, (size_t)rounds, sizeof(double), cmp_double);
  double med = sr[rounds / 2];
  int mi = 0;
  for (int k = 0; k < rounds; k++)
    if (ratios[k] == med)
      mi = k;
  printf("# %" PRIu64 " generations of %" PRIu64
         " KiB (16 threads' batches), %" PRIu64 " MiB per round, zstd %d,"
         " WAL synchronous=NORMAL, checkpoints included; value = generation"
         " bytes committed per second\n",
         ngens, avg >> 10, mib, level);
  printf("BENCH id=C1 value=%.1f unit=MB/s baseline=dd_fdatasync:%.1f"
         " ratio=%.2f bar=%.2f pass=%d\n",
         store_mbs[mi], dd_mbs[mi], med, BAR, med >= BAR);
  for (int i = 0; i < TEMPLATES; i++)
    free(t[i].data);
  return 0;
}
