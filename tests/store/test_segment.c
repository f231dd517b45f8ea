/* test_segment.c: the shared store's writer (store/segment.c) on a real
 * PostgreSQL and a real Swift s3api (tests/store/test_shared.sh): segments
 * packed and stored, catalog rows that point at the right bytes, no ACK
 * before both stores hold a generation, recovery after outages. */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <zstd.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "pg_cat.h"
#include "s3.h"
#include "segment.h"
#include "shared_fixture.h"
#include "../lib/prng.h"

static char db[256];

/* What done() reported, in order. */
typedef struct acks {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  store_gen *g[512];
  int n;
} acks;

static void on_done(void *ctx, store_gen *g) {
  acks *a = ctx;
  pthread_mutex_lock(&a->lock);
  if (a->n < 512)
    a->g[a->n++] = g;
  pthread_cond_broadcast(&a->cond);
  pthread_mutex_unlock(&a->lock);
}

static void acks_init(acks *a) {
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->lock, NULL);
  pthread_cond_init(&a->cond, NULL);
}
static void acks_fini(acks *a) {
  for (int i = 0; i < a->n; i++)
    store_gen_free(a->g[i]);
  pthread_mutex_destroy(&a->lock);
  pthread_cond_destroy(&a->cond);
}

/* Waits until n acks arrived or timeout_ms passed; returns the count. */
static int acks_wait(acks *a, int n, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L)
    ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&a->lock);
  while (a->n < n && pthread_cond_timedwait(&a->cond, &a->lock, &ts) == 0) {
  }
  int got = a->n;
  pthread_mutex_unlock(&a->lock);
  return got;
}

static segment_store *open_seg(acks *a, uint64_t max_bytes, uint32_t age_ms,
                               const char *id) {
  segment_config cfg = {.catalog = db,
                        .s3 = {.url = getenv("GENTRACE_OBJECTS")},
                        .daemon_id = id,
                        .max_bytes = max_bytes,
                        .max_age_ms = age_ms,
                        .close_wait_ms = 2000,
                        .no_idle_close = 1}; /* size and age only */
  segment_store *s = NULL;
  char *cause = NULL;
  int rc = segment_open(&cfg, on_done, a, &s, &cause);
  if (rc)
    fail_msg("segment_open: %d %s", rc, cause ? cause : "");
  return s;
}

/* Reads one generation back the way a reader will: locate in the catalog,
 * ranged GET, decompress. Returns a malloc'd buffer of *n bytes. */
static uint8_t *read_back(pg_cat *c, int64_t seq, size_t *n) {
  pg_cat_loc loc;
  assert_int_equal(pg_cat_locate(c, seq, &loc), 0);
  s3_config cfg = {.url = getenv("GENTRACE_OBJECTS")};
  s3 *k = NULL;
  char *cause = NULL;
  assert_int_equal(s3_open(&cfg, &k, &cause), 0);
  uint8_t *z = NULL;
  size_t zn = 0;
  int rc = s3_get(k, loc.object, loc.off, loc.len, 1 << 26, &z, &zn, &cause);
  if (rc)
    fail_msg("get %s: %s", loc.object, cause);
  uint8_t *raw = malloc(loc.bytes ? loc.bytes : 1);
  if (strcmp(loc.codec, "zstd") == 0) {
    size_t r = ZSTD_decompress(raw, loc.bytes, z, zn);
    assert_false(ZSTD_isError(r));
    assert_int_equal(r, loc.bytes);
  } else {
    assert_int_equal(zn, loc.bytes);
    memcpy(raw, z, zn);
  }
  *n = loc.bytes;
  free(z);
  free(loc.object);
  s3_close(k);
  return raw;
}

/* Incompressible bytes (so segment sizes are predictable). */
static store_gen *random_gen(uint8_t sid, uint64_t gen, size_t len) {
  store_gen *g = fixture_gen(sid, "seg", gen, 1000 + (int64_t)gen, len);
  uint64_t x = 0x9e3779b97f4a7c15ull * (gen + 1) + sid;
  for (size_t i = 0; i < len; i++)
    g->payload[i] = (uint8_t)xorshift64(&x);
  return g;
}

static void
test_segment__acks_after_store_and_bytes_read_back_exactly(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = open_seg(&a, 0, 300, "t-basic");
  store_gen *copy[6];
  for (int i = 0; i < 6; i++) {
    /* Alternate sessions; half compressible, half not. */
    store_gen *g =
        i % 2 ? random_gen(31, (uint64_t)i / 2 + 1, 5000)
              : fixture_gen(30, "seg", (uint64_t)i / 2 + 1, 2000 + i, 9000);
    copy[i] = calloc(1, sizeof *copy[i]);
    copy[i]->len = g->len;
    copy[i]->payload = malloc(g->len);
    memcpy(copy[i]->payload, g->payload, g->len);
    assert_int_equal(segment_submit(s, g), 0);
  }
  assert_int_equal(acks_wait(&a, 6, 20000), 6);
  pg_cat *c = segment_catalog(s);
  int64_t prev = 0;
  for (int i = 0; i < 6; i++) {
    store_gen *g = a.g[i];
    assert_int_equal(g->result, 0);
    assert_true(g->seq > prev); /* arrival order */
    prev = g->seq;
    size_t n;
    uint8_t *raw = read_back(c, g->seq, &n);
    assert_int_equal(n, copy[i]->len);
    assert_memory_equal(raw, copy[i]->payload, n);
    free(raw);
    store_gen_free(copy[i]);
  }
  /* A resend of an ACKed generation is a duplicate, stored once. */
  assert_int_equal(segment_submit(s, fixture_gen(30, "seg", 1, 2000, 9000)), 0);
  assert_int_equal(acks_wait(&a, 7, 20000), 7);
  assert_int_equal(a.g[6]->result, 1);
  store_stats st;
  segment_stats_get(s, &st);
  assert_int_equal(st.committed_gens, 6);
  assert_int_equal(st.duplicate_gens, 1);
  assert_int_equal(st.queued_gens, 0);
  segment_close(s);
  acks_fini(&a);
}

static void
test_segment__size_closes_segments_and_footers_index_them(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = open_seg(&a, 64 << 10, 60000, "t-size");
  for (int i = 0; i < 20; i++)
    assert_int_equal(segment_submit(s, random_gen(40, (uint64_t)i + 1, 16384)),
                     0);
  /* 20 x 16 KiB in 64 KiB segments: five full ones ACK without waiting
   * for the (one minute) age limit. */
  assert_true(acks_wait(&a, 16, 20000) >= 16);
  long long segs = fixture_sql_int(
      db, "SELECT count(*) FROM gt_segments WHERE daemon = 't-size'");
  assert_true(segs >= 4);
  /* Each object's footer matches the catalog. */
  PGconn *k = PQconnectdb(db);
  PGresult *r = PQexec(k, "SELECT object FROM gt_segments WHERE daemon ="
                          " 't-size' ORDER BY id LIMIT 1");
  assert_int_equal(PQntuples(r), 1);
  s3_config cfg = {.url = getenv("GENTRACE_OBJECTS")};
  s3 *c = NULL;
  char *cause = NULL;
  assert_int_equal(s3_open(&cfg, &c, &cause), 0);
  uint8_t *obj;
  size_t n;
  assert_int_equal(
      s3_get(c, PQgetvalue(r, 0, 0), 0, 0, 1 << 24, &obj, &n, &cause), 0);
  segment_entry *ix;
  size_t cnt;
  assert_int_equal(segment_index_parse(obj, n, &ix, &cnt), 0);
  assert_int_equal(cnt, 4);
  for (size_t i = 0; i < cnt; i++) {
    assert_int_equal(ix[i].gen, i + 1);
    assert_int_equal(ix[i].len, 16384);
    assert_int_equal(ix[i].codec, 0);
  }
  free(ix);
  /* Damage: a flipped footer byte, a cut object, a lying length. */
  obj[n - 20] ^= 1;
  assert_int_equal(segment_index_parse(obj, n, &ix, &cnt), GTP_E_CRC);
  obj[n - 20] ^= 1;
  assert_int_equal(segment_index_parse(obj, n - 1, &ix, &cnt), GTP_E_MAGIC);
  assert_int_equal(segment_index_parse(obj, 5, &ix, &cnt), GTP_E_TRUNC);
  obj[n - 9] = 0x7f; /* footer length: past the object's start */
  assert_int_equal(segment_index_parse(obj, n, &ix, &cnt), GTP_E_CORRUPT);
  free(obj);
  s3_close(c);
  PQclear(r);
  PQfinish(k);
  segment_close(s); /* closes the last, partial segment */
  assert_int_equal(a.n, 20);
  for (int i = 0; i < 20; i++)
    assert_int_equal(a.g[i]->result, 0);
  acks_fini(&a);
}

static void test_segment__age_closes_a_lone_generation(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = open_seg(&a, 0, 200, "t-age");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(segment_submit(s, random_gen(50, 1, 100)), 0);
  assert_int_equal(acks_wait(&a, 1, 10000), 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(took >= 0.15); /* held for the age limit, not sent alone */
  assert_true(took < 5.0);
  assert_int_equal(a.g[0]->result, 0);
  segment_close(s);
  acks_fini(&a);
}

static void cluster(const char *what, const char *side) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s %s >/dev/null",
           getenv("GENTRACE_CLUSTER_SCRIPT"), what, side);
  assert_int_equal(system(cmd), 0);
}

/* No ACK while a store is down; the daemon-facing side keeps accepting;
 * health names the cause; everything lands once the store is back. */
static void outage(const char *side, uint8_t sid) {
  acks a;
  acks_init(&a);
  segment_store *s = open_seg(&a, 0, 100, side[0] == 's' ? "t-s3" : "t-pg");
  cluster("--stop", side);
  for (int i = 0; i < 5; i++)
    assert_int_equal(segment_submit(s, random_gen(sid, (uint64_t)i + 1, 1000)),
                     0);
  assert_int_equal(acks_wait(&a, 1, 2500), 0);
  char reason[400];
  assert_int_equal(segment_health(s, reason, sizeof reason), GTP_E_UNAVAIL);
  assert_true(strlen(reason) > 0);
  fprintf(stderr, "health during %s outage: %s\n", side, reason);
  store_stats st;
  segment_stats_get(s, &st);
  assert_int_equal(st.queued_gens, 5);
  cluster("--start", side);
  assert_int_equal(acks_wait(&a, 5, 30000), 5);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(a.g[i]->result, 0);
    assert_int_equal(a.g[i]->gen, (uint64_t)i + 1);
  }
  assert_int_equal(segment_health(s, reason, sizeof reason), 0);
  segment_close(s);
  acks_fini(&a);
}

static void test_segment__s3_outage_holds_acks_then_resumes(void **state) {
  outage("s3", 60);
}

static void test_segment__pg_outage_holds_acks_then_resumes(void **state) {
  outage("pg", 61);
}

/* Counts the objects under one daemon's segments/ folder. */
static int count_objects_cb(void *ctx, const char *key, uint64_t size) {
  (void)key, (void)size;
  ++*(int *)ctx;
  return 0;
}
static int count_objects(const char *daemon) {
  s3_config cfg = {.url = getenv("GENTRACE_OBJECTS")};
  s3 *c = NULL;
  char *cause = NULL, prefix[128];
  assert_int_equal(s3_open(&cfg, &c, &cause), 0);
  snprintf(prefix, sizeof prefix, "segments/%s/", daemon);
  int n = 0;
  int rc = s3_list(c, prefix, count_objects_cb, &n, &cause);
  free(cause);
  s3_close(c);
  return rc < 0 ? -1 : n;
}

/* 40,000 incompressible bytes per generation in 64 KiB segments: every
 * second generation closes one, so segment k holds gens 2k-1 and 2k. */
static segment_store *open_pipelined(acks *a, const char *id, uint32_t delay_ms,
                                     int no_idle) {
  segment_config cfg = {.catalog = db,
                        .s3 = {.url = getenv("GENTRACE_OBJECTS")},
                        .daemon_id = id,
                        .max_bytes = 64 << 10,
                        .max_age_ms = 100,
                        .close_wait_ms = 2000,
                        .uploads = 4,
                        .no_idle_close = no_idle,
                        .test_put_delay_ms = delay_ms,
                        .test_put_delay_seg = delay_ms ? 1 : 0};
  segment_store *s = NULL;
  char *cause = NULL;
  int rc = segment_open(&cfg, on_done, a, &s, &cause);
  if (rc)
    fail_msg("segment_open: %d %s", rc, cause ? cause : "");
  return s;
}

/* Every generation ACKed new, in arrival order, with rising seqs; then a
 * resend of all of them is all duplicates: each stored exactly once. */
static void check_stored_once(acks *a, segment_store *s, uint8_t sid, int n) {
  int64_t prev = 0;
  for (int i = 0; i < n; i++) {
    assert_int_equal(a->g[i]->gen, (uint64_t)i + 1);
    assert_int_equal(a->g[i]->result, 0);
    assert_true(a->g[i]->seq > prev);
    prev = a->g[i]->seq;
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(segment_submit(s, random_gen(sid, (uint64_t)i + 1, 40000)),
                     0);
  assert_int_equal(acks_wait(a, 2 * n, 30000), 2 * n);
  for (int i = n; i < 2 * n; i++)
    assert_int_equal(a->g[i]->result, 1);
  uint8_t session[16] = {sid, [15] = 0x5a};
  uint64_t last = 0;
  assert_int_equal(pg_cat_last_gen(segment_catalog(s), session, &last, NULL),
                   1);
  assert_int_equal(last, (uint64_t)n);
}

/* Segment 1's PUT is held back while segments 2 and 3 are stored: nothing
 * may be cataloged or ACKed before segment 1 (invariant 2). */
static void test_segment__late_put_holds_later_commits_and_acks(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = open_pipelined(&a, "t-order", 3000, 1);
  for (int i = 0; i < 6; i++)
    assert_int_equal(segment_submit(s, random_gen(70, (uint64_t)i + 1, 40000)),
                     0);
  /* Segments 2 and 3 reach S3 while segment 1 waits. */
  int objs = 0;
  for (int t = 0; t < 100 && objs < 2; t++) {
    struct timespec ts = {0, 20000000L};
    nanosleep(&ts, NULL);
    objs = count_objects("t-order");
  }
  assert_int_equal(objs, 2);
  pthread_mutex_lock(&a.lock);
  int acked = a.n;
  pthread_mutex_unlock(&a.lock);
  assert_int_equal(acked, 0);
  assert_int_equal(
      fixture_sql_int(
          db, "SELECT count(*) FROM gt_segments WHERE daemon = 't-order'"),
      0);
  uint8_t session[16] = {70, [15] = 0x5a};
  uint64_t last = 0;
  assert_int_equal(pg_cat_last_gen(segment_catalog(s), session, &last, NULL),
                   0);
  /* Once segment 1 is stored, all three commit in close order. */
  assert_int_equal(acks_wait(&a, 6, 30000), 6);
  assert_int_equal(count_objects("t-order"), 3);
  assert_int_equal(
      fixture_sql_int(db, "SELECT count(*) FROM (SELECT s.id, min(g.gen) AS"
                          " lo, min(g.seq) AS q FROM gt_segments s JOIN"
                          " gt_generations g ON g.segment_id = s.id WHERE"
                          " s.daemon = 't-order' GROUP BY s.id) x WHERE"
                          " x.lo = 2 * (SELECT count(*) FROM gt_segments y"
                          " WHERE y.daemon = 't-order' AND y.id < x.id) + 1"),
      3);
  check_stored_once(&a, s, 70, 6);
  segment_close(s);
  acks_fini(&a);
}

/* S3 or PostgreSQL down while several segments are uploading or waiting to
 * commit: no ACK meanwhile, then every generation stored exactly once. */
static void pipelined_outage(const char *side, uint8_t sid, const char *id) {
  acks a;
  acks_init(&a);
  segment_store *s = open_pipelined(&a, id, 0, 0);
  cluster("--stop", side);
  for (int i = 0; i < 10; i++)
    assert_int_equal(segment_submit(s, random_gen(sid, (uint64_t)i + 1, 40000)),
                     0);
  assert_int_equal(acks_wait(&a, 1, 2500), 0);
  assert_int_equal(segment_health(s, NULL, 0), GTP_E_UNAVAIL);
  /* Memory stays bounded: at most uploads + 1 closed segments and the open
   * one exist; the rest waits in the queue. */
  assert_true(segment_alive() <= 6);
  cluster("--start", side);
  assert_int_equal(acks_wait(&a, 10, 60000), 10);
  check_stored_once(&a, s, sid, 10);
  assert_int_equal(segment_health(s, NULL, 0), 0);
  segment_close(s);
  acks_fini(&a);
}

static void
test_segment__s3_outage_with_uploads_in_flight_stores_each_once(void **state) {
  pipelined_outage("s3", 71, "t-pipe-s3");
}

static void
test_segment__pg_outage_with_puts_waiting_stores_each_once(void **state) {
  pipelined_outage("pg", 72, "t-pipe-pg");
}

/* A segment closes before its (one minute) age once nothing waits behind
 * it: at once with a quarter of max_bytes, after 100 ms idle with a 64th;
 * below that it waits for its age (test_segment__age_closes_...). */
static void test_segment__idle_segment_closes_before_its_age(void **state) {
  acks a;
  acks_init(&a);
  segment_config cfg = {.catalog = db,
                        .s3 = {.url = getenv("GENTRACE_OBJECTS")},
                        .daemon_id = "t-idle",
                        .max_bytes = 1 << 20,
                        .max_age_ms = 60000,
                        .close_wait_ms = 2000};
  segment_store *s = NULL;
  char *cause = NULL;
  assert_int_equal(segment_open(&cfg, on_done, &a, &s, &cause), 0);
  assert_int_equal(segment_submit(s, random_gen(73, 1, 300 << 10)), 0);
  assert_int_equal(acks_wait(&a, 1, 10000), 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(segment_submit(s, random_gen(73, 2, 40 << 10)), 0);
  assert_int_equal(acks_wait(&a, 2, 10000), 2);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  assert_true(took >= 0.09); /* held for the idle time */
  assert_int_equal(a.g[0]->result, 0);
  assert_int_equal(a.g[1]->result, 0);
  assert_true(a.g[1]->seq > a.g[0]->seq);
  segment_close(s);
  acks_fini(&a);
}

static void
test_segment__close_with_store_down_fails_what_is_left(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = open_seg(&a, 0, 100, "t-closedown");
  cluster("--stop", "s3");
  assert_int_equal(segment_submit(s, random_gen(62, 1, 100)), 0);
  segment_close(s); /* close_wait_ms = 2 s, then gives up */
  cluster("--start", "s3");
  assert_int_equal(a.n, 1);
  assert_int_equal(a.g[0]->result, GTP_E_UNAVAIL);
  acks_fini(&a);
}

static void
test_segment__missing_or_unreachable_store_fails_open(void **state) {
  acks a;
  acks_init(&a);
  segment_store *s = NULL;
  char *cause = NULL;
  segment_config cfg = {.catalog = db};
  assert_int_equal(segment_open(&cfg, on_done, &a, &s, &cause), GTP_E_BADARG);
  assert_non_null(strstr(cause, "--objects"));
  free(cause);
  cfg = (segment_config){.catalog = db,
                         .s3 = {.url = getenv("GENTRACE_OBJECTS"),
                                .endpoint = "http://127.0.0.1:1",
                                .connect_timeout_ms = 500}};
  assert_int_equal(segment_open(&cfg, on_done, &a, &s, &cause), GTP_E_UNAVAIL);
  free(cause);
  cfg = (segment_config){.catalog = "postgresql://postgres@127.0.0.1:1/x",
                         .s3 = {.url = getenv("GENTRACE_OBJECTS")}};
  assert_int_equal(segment_open(&cfg, on_done, &a, &s, &cause), GTP_E_UNAVAIL);
  assert_non_null(strstr(cause, "PostgreSQL"));
  free(cause);
  cfg = (segment_config){.catalog = db, .s3 = {.url = "s3://no-such-bucket"}};
  assert_int_equal(segment_open(&cfg, on_done, &a, &s, &cause), GTP_E_NOTFOUND);
  free(cause);
  assert_null(s);
  acks_fini(&a);
}

int main(void) {
  if (!getenv("GENTRACE_CATALOG") || !getenv("GENTRACE_OBJECTS")) {
    printf("SKIP: no shared store (run through tests/store/test_shared.sh)\n");
    return 77;
  }
  if (fixture_db("segment", db, sizeof db) != 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_segment__acks_after_store_and_bytes_read_back_exactly),
      cmocka_unit_test(
          test_segment__size_closes_segments_and_footers_index_them),
      cmocka_unit_test(test_segment__age_closes_a_lone_generation),
      cmocka_unit_test(test_segment__missing_or_unreachable_store_fails_open),
      cmocka_unit_test(test_segment__s3_outage_holds_acks_then_resumes),
      cmocka_unit_test(test_segment__pg_outage_holds_acks_then_resumes),
      cmocka_unit_test(test_segment__close_with_store_down_fails_what_is_left),
      cmocka_unit_test(test_segment__late_put_holds_later_commits_and_acks),
      cmocka_unit_test(test_segment__idle_segment_closes_before_its_age),
      cmocka_unit_test(
          test_segment__s3_outage_with_uploads_in_flight_stores_each_once),
      cmocka_unit_test(
          test_segment__pg_outage_with_puts_waiting_stores_each_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
