/* test_alloc_walk.c: every allocation failure of the setup paths, walked.
 *
 * For each N, the Nth allocation of the operation fails (tests/lib/
 * failalloc.c); the operation must then fail with a clear error (a negative
 * code and, where the API has one, a message), or carry on if the failure
 * is one it absorbs (the agent dropping an event), and leave nothing
 * allocated. Covered: agent start and stop, the frame decoder, the
 * generation decoder, the event check in the summary's walk, reassembly's
 * buffer path, the Chrome writer, store
 * open (a fresh file, and one with sessions to load), the store's session
 * index and store_submit's key binding, web start, and the retention pin
 * store (open, add, list).
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "chrome.h"
#include "failalloc.h"
#include "format.h"
#include "frame.h"
#include "gen_fixture.h"
#include "gentrace.h"
#include "hold.h"
#include "store.h"
#include "store_fixture.h"
#include "store_index.h"
#include "store_pin.h"
#include "summary.h"
#include "web.h"

/* Walks stop here at the latest; every walk below needs fewer (store open,
 * the longest: about 5,300 with the summary tables of schema 4, 7,528 with
 * schema 7, 8,131 once the checkpointer opened its own connection). Twice
 * the longest, so a walk that never ends still fails here. */
#define WALK_MAX 16000

static void walk(const char *name, fa_op op, void *ctx) {
  fa_report rep;
  int rc = fa_walk(name, op, ctx, WALK_MAX, &rep);
  if (rc != 0)
    fail_msg("%s: %ld of %ld runs leaked, bad code %d", name, rep.leaks,
             rep.runs, rep.bad_rc);
  /* The walk must have reached failure points at all, and ended. */
  assert_true(rep.failures > 0);
  assert_true(rep.runs < WALK_MAX);
}

/* ------------------------------------------------------------ proto */

static gtp_wbuf gen_bytes; /* one whole generation (fixture) */

static int op_gen_decode(void *ctx, const char **why) {
  (void)ctx;
  gtp_gen g;
  size_t used;
  int rc = gtp_gen_parse(gen_bytes.data, gen_bytes.len, &g, &used);
  if (rc < 0) {
    *why = gtp_strerror(rc);
    /* format.c invariant 3: a failed parse leaves nothing to free. */
    static const gtp_gen zero;
    return memcmp(&g, &zero, sizeof g) == 0 ? rc : 1;
  }
  gtp_gen_fini(&g);
  return 0;
}

static void test_alloc_walk__generation_decoder(void **state) {
  (void)state;
  walk("gen decoder", op_gen_decode, NULL);
}

/* gentraced's check of the events (the lazy parse, then the summary's walk
 * that checks them): with any allocation failing, the verdict stays right
 * (0 for the fixture, its error for a copy with a bad event), since a
 * summary that runs out of memory falls back to the check alone. */
static gtp_wbuf bad_bytes; /* gen_bytes with an overlong varint planted */

static int one_walk(const gtp_wbuf *b, int want_bad) {
  gtp_gen g;
  size_t used;
  int rc = gtp_gen_parse_lazy(b->data, b->len, &g, &used);
  if (rc < 0)
    return rc == -ENOMEM ? rc : 1;
  gtp_summary s;
  int check = 1;
  rc = gtp_summary_compute_check(&g, &s, &check);
  if (rc == 0)
    gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  if (want_bad ? check != GTP_E_VARINT : check != 0)
    return 1; /* a wrong verdict: fa_walk reports it as a bad code */
  return rc == -ENOMEM ? rc : 0;
}

static int op_one_walk(void *ctx, const char **why) {
  (void)ctx;
  int rc = one_walk(&gen_bytes, 0);
  if (rc == 0)
    rc = one_walk(&bad_bytes, 1);
  if (rc < 0)
    *why = gtp_strerror(rc);
  return rc;
}

static void test_alloc_walk__event_check_in_the_summary(void **state) {
  (void)state;
  /* The fixture with its first EVENTS record's first event made an
   * overlong varint, the manifest sealed over it. */
  gtp_wbuf_init(&bad_bytes, 0);
  gtp_wbuf_put(&bad_bytes, gen_bytes.data, gen_bytes.len);
  gtp_gen g;
  size_t used;
  assert_int_equal(gtp_gen_parse(bad_bytes.data, bad_bytes.len, &g, &used), 0);
  size_t cur = 0;
  gtp_batch b;
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &b), 1);
  assert_true(b.events_len >= 11);
  uint8_t *ev = (uint8_t *)b.events;
  ev[0] = GTP_EV_COUNTER;
  memset(ev + 1, 0xff, 9);
  ev[10] = 0x7f;
  gtp_gen_end e = g.end;
  assert_int_equal(gtp_manifest_compute(g.body, g.body_len, &e), 0);
  /* The GEN_END record is the last: rewrite it with the new manifest. */
  size_t body_end = (size_t)(g.body + g.body_len - bad_bytes.data);
  gtp_gen_fini(&g);
  bad_bytes.len = body_end;
  assert_int_equal(gtp_put_gen_end(&bad_bytes, &e), 0);
  walk("event check in the summary", op_one_walk, NULL);
  gtp_wbuf_fini(&bad_bytes);
}

static int op_frame_decode(void *ctx, const char **why) {
  gtp_wbuf *frames = ctx;
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  /* Fed in 100-byte pieces, so payloads are buffered (allocated). */
  size_t off = 0;
  int rc = 0;
  while (off < frames->len && rc >= 0) {
    size_t n = frames->len - off < 100 ? frames->len - off : 100, used;
    gtp_frame f;
    rc = gtp_frame_decoder_feed(&d, frames->data + off, n, &used, &f);
    off += used;
  }
  gtp_frame_decoder_fini(&d);
  if (rc < 0)
    *why = gtp_strerror(rc);
  return rc < 0 ? rc : 0;
}

static void test_alloc_walk__frame_decoder(void **state) {
  (void)state;
  gtp_wbuf frames;
  gtp_wbuf_init(&frames, 0);
  assert_int_equal(gtp_frame_batch_encode(&frames, 1, gen_bytes.data + 8, 600),
                   0);
  assert_int_equal(gtp_frame_ack_encode(&frames, 1), 0);
  assert_int_equal(gtp_frame_batch_encode(&frames, 2, gen_bytes.data + 8, 900),
                   0);
  walk("frame decoder", op_frame_decode, &frames);
  gtp_wbuf_fini(&frames);
}

/* Reassembly as daemon/reasm.c does it on a generation's buffer: its
 * GEN_START, then each BATCH frame decoded and its records appended, then
 * GEN_END, then the one validation parse: here, a clean error with nothing
 * left allocated. The daemon's own reassembly, with its opengen, store_gen
 * and connection around this, is walked by test_alloc_ingest.c. */
typedef struct reasm_input {
  gtp_wbuf start;  /* the GEN_START record */
  gtp_wbuf frames; /* BATCH frames, one body record each */
  gtp_gen_end end;
} reasm_input;

static int op_reassembly(void *ctx, const char **why) {
  const reasm_input *in = ctx;
  gtp_wbuf buf;
  gtp_wbuf_init(&buf, 1u << 20);
  gtp_wbuf_put(&buf, in->start.data, in->start.len);
  int rc = buf.err;
  for (size_t off = 0; rc == 0 && off < in->frames.len;) {
    uint32_t len = gtp_get_u32le(in->frames.data + off);
    gtp_frame f = {in->frames.data[off + 4],
                   in->frames.data + off + GTP_FRAME_HEADER_SIZE, len};
    uint64_t gen;
    const uint8_t *recs;
    size_t rlen;
    rc = gtp_frame_batch_decode(f.payload, f.len, &gen, &recs, &rlen);
    if (rc == 0) {
      gtp_wbuf_put(&buf, recs, rlen);
      rc = buf.err;
    }
    off += GTP_FRAME_HEADER_SIZE + len;
  }
  if (rc == 0)
    rc = gtp_put_gen_end(&buf, &in->end);
  if (rc == 0) {
    gtp_gen g;
    size_t used;
    rc = gtp_gen_parse(buf.data, buf.len, &g, &used);
    if (rc == 0) {
      rc =
          used == buf.len && g.end.events == in->end.events ? 0 : GTP_E_CORRUPT;
      gtp_gen_fini(&g);
    }
  }
  gtp_wbuf_fini(&buf);
  if (rc < 0)
    *why = gtp_strerror(rc);
  return rc;
}

static void test_alloc_walk__reassembly(void **state) {
  (void)state;
  reasm_input in;
  gtf_spec s;
  gtf_spec_init(&s, 2, 9);
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_init(&in.start, 0);
  gtp_wbuf_init(&in.frames, 0);
  assert_int_equal(gtf_gen_start(&in.start, &s), 0);
  assert_int_equal(gtf_body(&body, &s, &in.end), 0);
  size_t n = 0;
  for (size_t off = 0; off < body.len; n++) {
    gtp_record rec;
    assert_int_equal(gtp_record_parse(body.data + off, body.len - off, &rec),
                     0);
    assert_int_equal(
        gtp_frame_batch_encode(&in.frames, s.gen, body.data + off, rec.size),
        0);
    off += rec.size;
  }
  assert_true(n >= 3);
  /* The whole path runs clean before the walk fails it step by step. */
  const char *why = NULL;
  assert_int_equal(op_reassembly(&in, &why), 0);
  walk("reassembly", op_reassembly, &in);
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&in.start);
  gtp_wbuf_fini(&in.frames);
}

static int op_chrome(void *ctx, const char **why) {
  const gtp_gen *g = ctx;
  gtp_wbuf out;
  gtp_wbuf_init(&out, 0);
  int rc = -ENOMEM;
  gtp_chrome *c = gtp_chrome_new(gtp_wbuf_sink, &out, 0, 0);
  if (c) {
    rc = gtp_chrome_gen(c, g);
    if (rc == 0)
      rc = gtp_chrome_end(c);
    gtp_chrome_free(c);
  }
  gtp_wbuf_fini(&out);
  if (rc < 0)
    *why = gtp_strerror(rc);
  return rc;
}

static void test_alloc_walk__chrome_writer(void **state) {
  (void)state;
  gtp_gen g;
  size_t used;
  assert_int_equal(gtp_gen_parse(gen_bytes.data, gen_bytes.len, &g, &used), 0);
  walk("chrome writer", op_chrome, &g);
  gtp_gen_fini(&g);
}

/* ------------------------------------------------------------ store, web */

static char dir[64];

static void on_done(void *ctx, store_gen *g) {
  (void)ctx;
  store_gen_free(g);
}

/* An empty gentraced database dir/name (path: its file name), made by
 * opening a store on it. */
static void empty_db(const char *name, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", dir, name);
  store_config cfg = {0};
  cfg.path = path;
  store *s;
  char *cause = NULL;
  assert_int_equal(store_open(&cfg, on_done, NULL, &s, &cause), 0);
  store_close(s);
}

/* store_open of path inside a walk. A clear error sets *why: a message,
 * unless even the message could not be allocated (then the code alone
 * says ENOMEM). */
static int open_walked(const char *path, store **s, const char **why) {
  store_config cfg = {0};
  cfg.path = path;
  char *cause = NULL;
  int rc = store_open(&cfg, on_done, NULL, s, &cause);
  if (rc < 0) {
    *why = cause || rc == -ENOMEM ? "store_open failed" : NULL;
    free(cause);
  }
  return rc;
}

static int op_store_open(void *ctx, const char **why) {
  (void)ctx;
  static unsigned n;
  char path[128];
  /* A fresh file each run, so schema creation is walked too. */
  snprintf(path, sizeof path, "%s/s%u.db", dir, n++);
  store *s = NULL;
  int rc = open_walked(path, &s, why);
  if (rc == 0)
    store_close(s);
  fa_unlink_db(path);
  return rc < 0 ? rc : 0;
}

static void test_alloc_walk__store_open(void **state) {
  (void)state;
  walk("store open", op_store_open, NULL);
}

static int op_web_start(void *ctx, const char **why) {
  web_config cfg;
  web_config_init(&cfg);
  cfg.host = "127.0.0.1";
  cfg.port = 0;
  cfg.db_path = ctx;
  cfg.threads = 2;
  web_server *w = NULL;
  uint16_t port = 0;
  char *cause = NULL;
  int rc = web_start(&cfg, &w, &port, &cause);
  if (rc < 0) {
    *why = cause || rc == -ENOMEM ? "web_start failed" : NULL;
    free(cause);
    return rc;
  }
  web_stop(w);
  return 0;
}

static void test_alloc_walk__web_start(void **state) {
  (void)state;
  char path[128];
  empty_db("web.db", path, sizeof path);
  walk("web start", op_web_start, path);
}

/* The store's session index (store/store_index.c): a binding or a resume
 * hint whose entry cannot be made is reported (-ENOMEM), never dropped;
 * one made is found; and an entry that exists is found again without
 * allocating. 179 sessions fill the first table (256 slots) to its load
 * limit, so that any new entry after them grows it. */
#define IDX_N 179

static int op_index(void *ctx, const char **why) {
  (void)ctx;
  store_index *x = store_index_new();
  if (x == NULL) {
    *why = "store_index_new failed";
    return -ENOMEM;
  }
  uint8_t sid[16], h[STORE_KEY_HASH_SIZE], got[STORE_KEY_HASH_SIZE];
  int rc = 0;
  unsigned made = 0;
  for (; made < IDX_N && rc == 0; made++) {
    gtf_session(sid, made);
    memset(h, (int)made, sizeof h);
    rc = store_index_bind_key(x, sid, h);
    if (rc == 0 &&
        (store_index_key(x, sid, got) != 1 || memcmp(got, h, sizeof h) != 0))
      rc = 1; /* reported bound, not found */
    if (rc == -ENOMEM && store_index_key(x, sid, got) != 0)
      rc = 1; /* reported failed, bound anyway */
  }
  /* Every entry made is found, and noted, without an allocation. */
  for (unsigned i = 0; rc == 0 && i < made; i++) {
    gtf_session(sid, i);
    memset(h, 0xee, sizeof h);
    uint64_t gen = 0;
    if (store_index_note_gen(x, sid, 5) != 0 ||
        store_index_bind_key(x, sid, h) != 0 ||
        store_index_last_gen(x, sid, &gen) != 1 || gen != 5 ||
        store_index_key(x, sid, got) != 1 || got[0] != (uint8_t)i)
      rc = 1;
  }
  /* A resume hint for a new session: reported like a binding. */
  if (rc == 0) {
    uint64_t gen = 0;
    gtf_session(sid, IDX_N + 1);
    rc = store_index_note_gen(x, sid, 9);
    if (rc == 0 && (store_index_last_gen(x, sid, &gen) != 1 || gen != 9))
      rc = 1;
    if (rc == -ENOMEM && store_index_last_gen(x, sid, &gen) != 0)
      rc = 1;
  }
  store_index_free(x);
  if (rc < 0)
    *why = "store index entry not made";
  return rc;
}

static void
test_alloc_walk__store_index_reports_what_it_cannot_bind(void **state) {
  (void)state;
  walk("store index", op_index, NULL);
}

/* store_submit of a generation with a key: the key is bound when it
 * returns 0 (the daemon's HELLO check for the session rests on that once
 * its connection is gone), and a binding that cannot be made refuses the
 * generation (-ENOMEM, the caller keeps it; the daemon ends the
 * connection and the agent resends). The store's open and close stay out
 * of the walk; its commit is in it (a failed commit is fine: the key is
 * bound before the generation is queued). */
typedef struct submit_walk {
  unsigned run;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
} submit_walk;

static void on_done_signal(void *ctx, store_gen *g) {
  submit_walk *w = ctx;
  store_gen_free(g);
  pthread_mutex_lock(&w->lock);
  w->done = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static int op_submit(void *ctx, const char **why) {
  submit_walk *w = ctx;
  long n = fa_pause();
  char path[128];
  snprintf(path, sizeof path, "%s/sub%u.db", dir, w->run++);
  store_config cfg = {0};
  cfg.path = path;
  store *s = NULL;
  char *cause = NULL;
  if (store_open(&cfg, on_done_signal, w, &s, &cause) != 0) {
    free(cause);
    *why = "store_open failed outside the walk";
    return 2;
  }
  sf_gen_opts o = {.session = 3, .gen = 1};
  store_gen *g = sf_gen_new(&o);
  uint8_t sid[16], got[STORE_KEY_HASH_SIZE];
  memcpy(sid, g->session, sizeof sid);
  g->has_key = 1;
  memset(g->key_hash, 0x5a, sizeof g->key_hash);
  w->done = 0;
  fa_resume(n);
  int rc = store_submit(s, g);
  if (rc == 0) {
    pthread_mutex_lock(&w->lock);
    while (!w->done)
      pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
  }
  fa_pause();
  int bound = store_session_key(s, sid, got);
  store_close(s);
  fa_unlink_db(path);
  if (rc < 0) {
    store_gen_free(g); /* refused: still the caller's */
    *why = "store_submit refused the generation";
    return rc == -ENOMEM ? rc : 3;
  }
  return bound == 1 && got[0] == 0x5a ? 0 : 1;
}

static void
test_alloc_walk__store_submit_never_leaves_a_key_unbound(void **state) {
  (void)state;
  submit_walk w = {.run = 0};
  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);
  walk("store submit", op_submit, &w);
  pthread_mutex_destroy(&w.lock);
  pthread_cond_destroy(&w.cond);
}

/* store_open of a database that has sessions: each one's resume hint and
 * key binding is in the index once the open returns 0; an index entry that
 * cannot be made fails the open, cleanly (the walk checks the rest). */
#define OPEN_SESSIONS 3

static int op_open_sessions(void *ctx, const char **why) {
  store *s = NULL;
  int rc = open_walked(ctx, &s, why);
  if (rc < 0)
    return rc;
  for (unsigned i = 0; i < OPEN_SESSIONS && rc == 0; i++) {
    uint8_t sid[16], got[STORE_KEY_HASH_SIZE];
    uint64_t gen = 0;
    gtf_session(sid, 40 + i);
    if (store_session_key(s, sid, got) != 1 || got[0] != (uint8_t)(0x40 + i) ||
        store_last_gen(s, sid, &gen) != 1 || gen != 7 + i)
      rc = 1; /* opened without it */
  }
  store_close(s);
  return rc;
}

static void test_alloc_walk__store_open_loads_every_session(void **state) {
  (void)state;
  char path[128];
  empty_db("sessions.db", path, sizeof path);
  /* The rows as an earlier daemon left them: a last gen and a key. */
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  for (unsigned i = 0; i < OPEN_SESSIONS; i++) {
    uint8_t sid[16], h[STORE_KEY_HASH_SIZE];
    char hex[33];
    gtf_session(sid, 40 + i);
    gtp_session_hex(sid, hex);
    memset(h, 0x40 + (int)i, sizeof h);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db,
                           "INSERT INTO sessions(session, service, host, pid,"
                           " process_start_ns, agent_version, first_seen_ns,"
                           " last_seen_ns, last_gen, key_hash)"
                           " VALUES(?1, 'svc', 'h', 1, 1, 'v', 1, 1, ?2, ?3)",
                           -1, &st, NULL),
        SQLITE_OK);
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, 7 + i);
    sqlite3_bind_blob(st, 3, h, sizeof h, SQLITE_TRANSIENT);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  /* SQLite's allocations of an open are walked above (store open); here
   * only the store's own, so the walk stays short. */
  fa_sqlite_walk(0);
  walk("store open with sessions", op_open_sessions, path);
  fa_sqlite_walk(1);
  fa_unlink_db(path);
}

static int list_cb(void *ctx, const hold_row *row) {
  (void)ctx;
  (void)row;
  return 0;
}

static int op_hold(void *ctx, const char **why) {
  hold *h = NULL;
  char *cause = NULL;
  int rc = hold_open_sqlite(ctx, &h, &cause);
  if (rc < 0) {
    *why = cause || rc == -ENOMEM ? "hold_open_sqlite failed" : NULL;
    free(cause);
    return rc;
  }
  hold_req q = {.service = "svc",
                .from_ns = 1,
                .to_ns = 2,
                .reason = "walk",
                .created_ns = 10,
                .expires_ns = 20};
  hold_added a;
  rc = hold_add(h, &q, 0, &a);
  if (rc == 0)
    rc = hold_list(h, 10, list_cb, NULL);
  if (rc == 0)
    rc = hold_delete(h, a.id, 10);
  hold_close(h);
  *why = "pin store call failed";
  return rc;
}

static void test_alloc_walk__hold(void **state) {
  (void)state;
  char path[128];
  empty_db("hold.db", path, sizeof path);
  walk("pin store", op_hold, path);
}

/* ------------------------------------------------------------ agent */

static char agent_addr[32];

static int op_agent(void *ctx, const char **why) {
  (void)ctx;
  gt_config c;
  gt_config_init(&c);
  c.addr = agent_addr; /* nobody listens: the agent spools and backs off */
  c.service = "alloc-walk";
  c.period_ms = 10;
  c.buffer_mb = 1;
  c.spool_mb = 1;
  c.flush_timeout_ms = 1;
  int rc = gt_start(&c);
  if (rc < 0) {
    *why = "gt_start failed";
    return rc;
  }
  gt_region_begin("walk");
  gt_instant("step");
  gt_region_end();
  gt_stop();
  return 0;
}

static void test_alloc_walk__agent_start_stop(void **state) {
  (void)state;
  /* A port nobody listens on: bind port 0, read it, close. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
  close(fd);
  snprintf(agent_addr, sizeof agent_addr, "127.0.0.1:%u",
           (unsigned)ntohs(a.sin_port));
  walk("agent start/stop", op_agent, NULL);
  /* After every failed start, a clean one still works. */
  gt_config c;
  gt_config_init(&c);
  c.addr = agent_addr;
  c.flush_timeout_ms = 1;
  assert_int_equal(gt_start(&c), 0);
  gt_stop();
}

static int setup(void **state) {
  (void)state;
  if (fa_scratch_dir(dir, sizeof dir, "gt-allocwalk") != 0)
    return -1;
  gtf_spec s;
  gtf_spec_init(&s, 1, 7);
  gtp_wbuf_init(&gen_bytes, 0);
  return gtf_generation(&gen_bytes, &s) < 0 ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  gtp_wbuf_fini(&gen_bytes);
  char path[128];
  snprintf(path, sizeof path, "%s/web.db", dir);
  fa_unlink_db(path);
  rmdir(dir);
  return 0;
}

int main(void) {
  /* Store open and web start walk every allocation inside SQLite too. */
  fa_sqlite_hook(1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_walk__generation_decoder),
      cmocka_unit_test(test_alloc_walk__event_check_in_the_summary),
      cmocka_unit_test(test_alloc_walk__frame_decoder),
      cmocka_unit_test(test_alloc_walk__reassembly),
      cmocka_unit_test(test_alloc_walk__chrome_writer),
      cmocka_unit_test(test_alloc_walk__store_open),
      cmocka_unit_test(
          test_alloc_walk__store_index_reports_what_it_cannot_bind),
      cmocka_unit_test(
          test_alloc_walk__store_submit_never_leaves_a_key_unbound),
      cmocka_unit_test(test_alloc_walk__store_open_loads_every_session),
      cmocka_unit_test(test_alloc_walk__web_start),
      cmocka_unit_test(test_alloc_walk__hold),
      cmocka_unit_test(test_alloc_walk__agent_start_stop),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
