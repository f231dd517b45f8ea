/* test_storage.c: the storage interface's conformance suite (store/storage.c)
 * run on both backends: the same generations submitted through the
 * interface must read back the same way -- sessions, windows, feed,
 * payloads -- from SQLite and from the shared store (real PostgreSQL and
 * Swift s3api, when tests/store/test_shared.sh provides them). Each backend
 * is also checked against what was submitted, and the two dumps of every
 * read must be byte-identical (seq values and commit times aside, which
 * are each backend's own). */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>
#include <zstd.h>

#include "gtp_error.h"
#include "storage.h"
#include "shared_fixture.h"
#include "store_fixture.h"

#define NGEN 12

typedef struct collected {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  store_gen *g[64];
  int n;
} collected;

static void on_done(void *ctx, store_gen *g) {
  collected *c = ctx;
  pthread_mutex_lock(&c->lock);
  if (c->n < 64)
    c->g[c->n++] = g;
  else
    store_gen_free(g);
  pthread_cond_broadcast(&c->cond);
  pthread_mutex_unlock(&c->lock);
}

static int wait_n(collected *c, int n, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000 + 1;
  pthread_mutex_lock(&c->lock);
  while (c->n < n && pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0) {
  }
  int got = c->n;
  pthread_mutex_unlock(&c->lock);
  return got;
}

/* The i-th generation of the scenario: three sessions (two services, two
 * hosts), 1 s generations, payload bytes that depend on (session, gen). */
static store_gen *scenario_gen(int i) {
  static const char *svc[3] = {"api", "api", "db"};
  static const char *host[3] = {"h1", "h2", "h1"};
  int s = i % 3;
  store_gen *g = calloc(1, sizeof *g);
  g->session[0] = 0x10 + (uint8_t)s; /* ids sort in first-arrival order */
  g->session[15] = 0xab;
  g->service = strdup(svc[s]);
  g->host = strdup(host[s]);
  g->agent_version = strdup("conf");
  g->tags_json =
      strdup(s == 1 ? "{\"az\":\"b\",\"tier\":\"gold\"}" : "{\"az\":\"a\"}");
  g->pid = 100 + (uint64_t)s;
  g->process_start_ns = 1;
  g->gen = (uint64_t)(i / 3) + 1;
  g->start_ns = (int64_t)(1000 + i / 3) * 1000000000LL + s * 1000;
  g->end_ns = g->start_ns + 1000000000LL;
  g->end.gen = g->gen;
  g->end.crc = 7u * (uint32_t)i + 1u;
  g->has_key = 1;
  memset(g->key_hash, 0xa0 + s, sizeof g->key_hash);
  g->end.events = 50 + (uint64_t)i;
  g->end.dropped = (uint64_t)(i % 2);
  g->len = 300 + (size_t)i * 97;
  g->payload = malloc(g->len);
  for (size_t k = 0; k < g->len; k++)
    g->payload[k] =
        (uint8_t)(k % 7 == 0 ? (size_t)i : k / 11); /* compressible */
  return g;
}

/* ---- dump: every read, as text, seqs replaced by their rank ---- */

typedef struct dump {
  char *buf;
  size_t len, cap;
  int64_t seqs[256];
  int nseq;
} dump;

static void dprintf_(dump *d, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (d->len + (size_t)n + 1 > d->cap) {
    d->cap = (d->cap + (size_t)n + 1) * 2;
    d->buf = realloc(d->buf, d->cap);
  }
  memcpy(d->buf + d->len, line, (size_t)n + 1);
  d->len += (size_t)n;
}

static int rank(dump *d, int64_t seq) {
  for (int i = 0; i < d->nseq; i++)
    if (d->seqs[i] == seq)
      return i;
  return -1;
}

static int dump_gen(void *ctx, const store_gen_row *r) {
  dump *d = ctx;
  dprintf_(d,
           "gen #%d %s %s/%s g%" PRIu64 " [%" PRId64 ",%" PRId64 ") ev=%" PRIu64
           " b=%" PRIu64 " drop=%" PRIu64 " ev=%" PRIu64 " rej=%" PRIu64
           " %s\n",
           rank(d, r->seq), r->session, r->service, r->host, r->gen,
           r->start_ns, r->end_ns, r->events, r->bytes, r->dropped, r->evicted,
           r->rejected, r->status);
  return 0;
}

static int dump_session(void *ctx, const store_session_row *r) {
  dump *d = ctx;
  dprintf_(d,
           "session %s %s/%s v=%s tags=%s pid=%" PRIu64 " gens=%" PRIu64
           " first=%" PRIu64 " last=%" PRIu64 " has=%d ev=%" PRIu64
           " b=%" PRIu64 " lost=%" PRIu64 " rejected=%" PRIu64 "\n",
           r->session, r->service, r->host, r->agent_version, r->tags_json,
           r->pid, r->generations, r->first_gen, r->last_gen, r->has_gens,
           r->events, r->bytes, r->lost, r->rejected_gens);
  return 0;
}

typedef struct rejected_seen {
  const char *session;
  uint64_t rejected;
} rejected_seen;

static int note_rejected(void *ctx, const store_session_row *r) {
  rejected_seen *rs = ctx;
  if (strcmp(r->session, rs->session) == 0)
    rs->rejected = r->rejected_gens;
  return 0;
}

static int note_seq(void *ctx, const store_gen_row *r) {
  dump *d = ctx;
  if (d->nseq < 256)
    d->seqs[d->nseq++] = r->seq;
  return 0;
}

/* Runs the scenario on cfg and returns its dump (malloc'd). */
static char *run_scenario(const storage_config *cfg) {
  collected c = {.n = 0};
  pthread_mutex_init(&c.lock, NULL);
  pthread_cond_init(&c.cond, NULL);
  storage *st = NULL;
  char *cause = NULL;
  int rc = storage_open(cfg, on_done, &c, &st, &cause);
  if (rc)
    fail_msg("storage_open: %d %s", rc, cause ? cause : "");
  store_gen *orig[NGEN];
  for (int i = 0; i < NGEN; i++) {
    orig[i] = scenario_gen(i);
    assert_int_equal(storage_submit(st, scenario_gen(i)), 0);
  }
  assert_int_equal(wait_n(&c, NGEN, 30000), NGEN);
  /* A resend of an ACKed generation: ACKed again, stored once. A resend
   * with other contents (another CRC) under the same gen: refused. */
  assert_int_equal(storage_submit(st, scenario_gen(4)), 0);
  assert_int_equal(wait_n(&c, NGEN + 1, 30000), NGEN + 1);
  store_gen *other = scenario_gen(5);
  other->end.crc ^= 0x5555;
  assert_int_equal(storage_submit(st, other), 0);
  assert_int_equal(wait_n(&c, NGEN + 2, 30000), NGEN + 2);
  assert_int_equal(c.g[NGEN + 1]->result, GTP_E_CONFLICT);
  /* Each session's key hash is bound and readable. */
  uint8_t kh[STORE_KEY_HASH_SIZE], want[STORE_KEY_HASH_SIZE];
  memset(want, 0xa1, sizeof want);
  assert_int_equal(storage_session_key(st, orig[1]->session, kh), 1);
  assert_memory_equal(kh, want, sizeof kh);
  uint8_t nobody[16] = {0xfe};
  assert_int_equal(storage_session_key(st, nobody, kh), 0);
  for (int i = 0; i < NGEN; i++) {
    assert_int_equal(c.g[i]->result, 0);
    assert_int_equal(c.g[i]->gen, orig[i]->gen);
  }
  assert_int_equal(c.g[NGEN]->result, 1);
  for (int i = 1; i < NGEN; i++)
    assert_true(c.g[i]->seq > c.g[i - 1]->seq);
  uint64_t last = 0;
  assert_int_equal(storage_last_gen(st, orig[0]->session, &last), 1);
  assert_int_equal(last, NGEN / 3);
  storage_note_rejected(st, orig[1]->session, 7);
  store_stats ss;
  storage_stats_get(st, &ss);
  assert_int_equal(ss.committed_gens, NGEN);
  assert_int_equal(ss.duplicate_gens, 1);
  char reason[256];
  assert_int_equal(storage_health(st, reason, sizeof reason), 0);
  storage_reader *r = NULL;
  rc = storage_reader_open(st, &r, &cause);
  if (rc)
    fail_msg("reader: %s", cause);
  /* The rejected count is written between commits or on the store's tick
   * (about a second): waited for, not slept on (a loaded machine delays
   * the tick). */
  char rej_hex[33];
  gtp_session_hex(orig[1]->session, rej_hex);
  rejected_seen rs = {.session = rej_hex};
  for (int i = 0; i < 400 && rs.rejected != 1; i++) { /* one generation */
    assert_int_equal(storage_read_sessions(r, NULL, note_rejected, &rs), 0);
    if (rs.rejected != 1)
      usleep(50000);
  }
  assert_int_equal(rs.rejected, 1);
  dump d = {.buf = NULL};
  assert_int_equal(storage_read_feed(r, 0, 0, note_seq, &d), 0);
  assert_int_equal(d.nseq, NGEN);
  dprintf_(&d, "-- sessions\n");
  assert_int_equal(storage_read_sessions(r, NULL, dump_session, &d), 0);
  dprintf_(&d, "-- sessions api/h2\n");
  store_session_filter f = {.service = "api", .host = "h2"};
  assert_int_equal(storage_read_sessions(r, &f, dump_session, &d), 0);
  dprintf_(&d, "-- sessions tier=gold\n");
  f = (store_session_filter){.tag_key = "tier", .tag_value = "gold"};
  assert_int_equal(storage_read_sessions(r, &f, dump_session, &d), 0);
  dprintf_(&d, "-- sessions az=*\n");
  f = (store_session_filter){.tag_key = "az"};
  assert_int_equal(storage_read_sessions(r, &f, dump_session, &d), 0);
  dprintf_(&d, "-- window api [1001.5, 1002.5)\n");
  store_window_query q = {
      .service = "api", .from_ns = 1001500000000LL, .to_ns = 1002500000000LL};
  assert_int_equal(storage_read_window(r, &q, dump_gen, &d), 0);
  dprintf_(&d, "-- window api/h1 all\n");
  q = (store_window_query){.service = "api", .host = "h1", .to_ns = INT64_MAX};
  assert_int_equal(storage_read_window(r, &q, dump_gen, &d), 0);
  char hex[33];
  gtp_session_hex(orig[2]->session, hex);
  dprintf_(&d, "-- window session db\n");
  q = (store_window_query){
      .session = hex, .from_ns = 1000000000000LL, .to_ns = 1003000000000LL};
  assert_int_equal(storage_read_window(r, &q, dump_gen, &d), 0);
  dprintf_(&d, "-- session gens db after 1, limit 2\n");
  assert_int_equal(
      storage_read_session_gens(r, hex, 0, INT64_MAX, 1, 2, dump_gen, &d), 0);
  assert_int_equal(
      storage_read_session_gens(r, "ffff", 0, INT64_MAX, -1, 0, dump_gen, &d),
      GTP_E_NOTFOUND);
  dprintf_(&d, "-- feed after #3, limit 4\n");
  assert_int_equal(storage_read_feed(r, d.seqs[3], 4, dump_gen, &d), 0);
  int64_t max = 0, after = -1;
  assert_int_equal(storage_read_max_seq(r, &max), 0);
  assert_true(max >= d.seqs[NGEN - 1]);
  assert_int_equal(storage_read_feed_since(r, 0, &after), 0);
  assert_int_equal(after, d.seqs[0] - 1);
  /* Every payload, by seq and by (session, gen), exactly as submitted. */
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  for (int i = 0; i < NGEN; i++) {
    gtp_wbuf_reset(&b);
    assert_int_equal(storage_read_payload(r, d.seqs[i], &b), 0);
    assert_int_equal(b.len, orig[i]->len);
    assert_memory_equal(b.data, orig[i]->payload, b.len);
    gtp_wbuf_reset(&b);
    gtp_session_hex(orig[i]->session, hex);
    assert_int_equal(storage_read_payload_by_gen(r, hex, orig[i]->gen, &b), 0);
    assert_int_equal(b.len, orig[i]->len);
    assert_memory_equal(b.data, orig[i]->payload, b.len);
    /* As one zstd frame (compressed downloads): decompresses to the same. */
    gtp_wbuf_reset(&b);
    assert_int_equal(storage_read_payload_zstd(r, d.seqs[i], &b), 0);
    uint8_t *raw = malloc(orig[i]->len);
    size_t got = ZSTD_decompress(raw, orig[i]->len, b.data, b.len);
    assert_int_equal(got, orig[i]->len);
    assert_memory_equal(raw, orig[i]->payload, got);
    free(raw);
  }
  gtp_wbuf_reset(&b);
  assert_int_equal(storage_read_payload(r, max + 1000, &b), GTP_E_NOTFOUND);
  gtp_wbuf_fini(&b);
  storage_reader_close(r);
  storage_close(st);
  for (int i = 0; i < c.n; i++)
    store_gen_free(c.g[i]);
  for (int i = 0; i < NGEN; i++)
    store_gen_free(orig[i]);
  pthread_mutex_destroy(&c.lock);
  pthread_cond_destroy(&c.cond);
  return d.buf;
}

static char *sqlite_dump;

static void test_storage__sqlite_backend_conforms(void **state) {
  sf_dir dir;
  sf_dir_make(&dir);
  storage_config cfg = {.sqlite = {.path = dir.db}};
  sqlite_dump = run_scenario(&cfg);
  sf_dir_remove(&dir);
  /* The expected shape, independent of any backend. */
  assert_non_null(strstr(sqlite_dump, "-- sessions api/h2\nsession 11"));
  assert_non_null(strstr(sqlite_dump, "rejected=1\n"));
}

static void
test_storage__shared_backend_reads_byte_identical_to_sqlite(void **state) {
  const char *cat = getenv("GENTRACE_CATALOG");
  if (!cat || !getenv("GENTRACE_OBJECTS")) {
    printf("(shared backend skipped: no cluster in the environment)\n");
    skip();
  }
  char db[256];
  assert_int_equal(fixture_db("conformance", db, sizeof db), 0);
  char objects[256];
  snprintf(objects, sizeof objects, "%s/conf-%ld", getenv("GENTRACE_OBJECTS"),
           (long)getpid());
  storage_config cfg = {
      .catalog = db, .objects = objects, .shared = {.max_age_ms = 200}};
  char *shared = run_scenario(&cfg);
  assert_non_null(sqlite_dump);
  if (getenv("GT_SHOW_DUMP") || strcmp(shared, sqlite_dump) != 0)
    fprintf(stderr, "--- sqlite\n%s--- shared\n%s", sqlite_dump, shared);
  assert_string_equal(shared, sqlite_dump);
  free(shared);
}

static void test_storage__one_of_catalog_or_objects_is_an_error(void **state) {
  storage_config cfg = {.catalog = "postgresql://x/y"};
  storage *st = NULL;
  char *cause = NULL;
  assert_int_equal(storage_open(&cfg, on_done, NULL, &st, &cause),
                   GTP_E_BADARG);
  assert_non_null(strstr(cause, "--objects"));
  free(cause);
  cfg = (storage_config){.objects = "s3://bucket"};
  assert_int_equal(storage_open(&cfg, on_done, NULL, &st, &cause),
                   GTP_E_BADARG);
  assert_non_null(strstr(cause, "--catalog"));
  free(cause);
  assert_null(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_storage__one_of_catalog_or_objects_is_an_error),
      cmocka_unit_test(test_storage__sqlite_backend_conforms),
      cmocka_unit_test(
          test_storage__shared_backend_reads_byte_identical_to_sqlite),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(sqlite_dump);
  return rc;
}
