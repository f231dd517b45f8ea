/* test_session_auth.c: daemon/session_auth.c (session ownership, protocol v2
 * keys, validation at the door) through the real gentraced process on
 * 127.0.0.1 port 0, real sockets and a real SQLite database. Every attack
 * runs with an honest agent streaming beside it, checked exact afterwards. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "client.h"
#include "daemon_fixture.h"
#include "sha256.h"
#include "store_read.h"

static int64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void db_exec(const char *db, const char *sql) {
  sqlite3 *h;
  assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
}

/* Generations stored for session number n. */
static int64_t session_gens(const char *db, unsigned n) {
  uint8_t s[16];
  char hex[33], sql[256];
  gtf_session(s, n);
  gtp_session_hex(s, hex);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations g JOIN sessions s"
           " ON s.id = g.session_id WHERE s.session = '%s'",
           hex);
  return db_count(db, sql);
}

/* A fixture generation with no loss in its ledger, dated from a minute
 * before the test's first one, a second per generation (the door checks
 * the wall clock against the daemon's; the bytes must be the same each
 * time a test rebuilds a generation to compare it). */
static uint64_t t_base;
static void auth_spec(gtf_spec *s, unsigned session, uint64_t gen) {
  if (t_base == 0)
    t_base = real_ns() - 60ull * 1000000000;
  gtf_spec_init(s, session, gen);
  s->threads = 2;
  s->dropped = s->evicted = 0;
  s->start_real_ns = t_base + (gen % 1000000) * s->period_ns;
}

/* Sends generation s->gen of s on c; returns 1 (ACK of it), or 2 with
 * *code (ERROR for that generation), failing on anything else. */
static int send_gen(gtc *c, const gtf_spec *s, int *code) {
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, s), 0);
  assert_int_equal(gtc_send_gen(c, &g), 0);
  gtc_gen_fini(&g);
  uint64_t gen = 0;
  int rc = gtc_read_reply(c, &gen, code, GTC_TIMEOUT_MS);
  if (rc != 1 && rc != 2)
    fail_msg("gen %llu: no reply (rc %d)", (unsigned long long)s->gen, rc);
  if (gen != s->gen)
    fail_msg("gen %llu: reply for gen %llu (code %d)",
             (unsigned long long)s->gen, (unsigned long long)gen, *code);
  return rc;
}

/* An honest agent: its spec, connection and every generation it had
 * ACKed, all of which must be stored exactly at the end. */
typedef struct honest {
  gtc c;
  unsigned session;
  uint64_t next;
} honest;

static void honest_open(honest *h, gtd *d, unsigned session) {
  gtf_spec s;
  gtp_welcome w;
  auth_spec(&s, session, 1);
  h->session = session;
  if (h->next == 0)
    h->next = 1;
  assert_int_equal(gtc_connect(&h->c, d->agent_port), 0);
  assert_int_equal(gtc_hello(&h->c, &s, NULL, &w), 0);
}

static void honest_send(honest *h) {
  gtf_spec s;
  int code = 0;
  auth_spec(&s, h->session, h->next);
  if (send_gen(&h->c, &s, &code) != 1)
    fail_msg("honest gen %llu refused: %d", (unsigned long long)h->next, code);
  h->next++;
}

/* Every generation the honest agent sent is stored, exactly, and its
 * session's ledger says nothing was lost. */
static void honest_check(honest *h, gtd *d) {
  assert_int_equal(session_gens(d->db, h->session), (int64_t)(h->next - 1));
  for (uint64_t gen = 1; gen < h->next; gen++) {
    gtf_spec s;
    auth_spec(&s, h->session, gen);
    assert_stored_exactly(d->db, &s);
  }
  uint8_t sid[16];
  char hex[33], sql[160];
  gtf_session(sid, h->session);
  gtp_session_hex(sid, hex);
  snprintf(sql, sizeof sql,
           "SELECT lost + rejected_events FROM sessions WHERE session='%s'",
           hex);
  assert_int_equal(db_count(d->db, sql), 0);
}

/* ---------------------------------------------------------- ownership */

/* Claims on session `victim` by a client that has its id: with a wrong
 * key, with no key, with protocol v1; then with the right key. */
static void test_session_auth__claims_with_another_key_change_nothing(
    void **st) {
  (void)st;
  gtd d;
  start(&d, NULL, NULL);
  honest h = {0};
  honest_open(&h, &d, 1);
  for (int i = 0; i < 3; i++)
    honest_send(&h);

  int refused = 0;
  for (int round = 0; round < 4; round++) {
    gtc a;
    gtf_spec as;
    gtp_welcome w;
    /* The id is public (/v1/agents); the key is not. Round 3 sends none
     * (all zeros). The attacker aims at generations the honest agent has
     * not sent yet, which used to be ACKed to it as duplicates later. */
    auth_spec(&as, 1, h.next + 1);
    as.threads = 1;
    if (round == 3)
      memset(as.session_key, 0, 16);
    else
      as.session_key[round] ^= 0x5a;
    assert_int_equal(gtc_connect(&a, d.agent_port), 0);
    assert_int_equal(gtc_hello(&a, &as, NULL, &w), GTP_E_AUTH);
    refused++;
    gtc_gen g;
    assert_int_equal(gtc_gen_build(&g, &as), 0);
    (void)gtc_send_gen(&a, &g); /* may fail: the daemon closed it */
    gtc_gen_fini(&g);
    gtc_close(&a);
    /* The honest connection was not touched: it goes on at once. */
    honest_send(&h);
    honest_send(&h);
  }
  /* A version-1 HELLO (no key at all) gets VERSION and says why. */
  {
    gtc a;
    gtf_spec as;
    auth_spec(&as, 1, 1);
    assert_int_equal(gtc_connect(&a, d.agent_port), 0);
    assert_int_equal(gtc_send_hello(&a, &as, NULL, 1, 1), 0);
    gtp_frame f;
    assert_int_equal(gtc_read_frame(&a, &f, GTC_TIMEOUT_MS), 1);
    assert_int_equal(f.type, GTP_FR_ERROR);
    gtp_error_frame e;
    assert_int_equal(gtp_frame_error_decode(f.payload, f.len, &e), 0);
    assert_int_equal(e.code, GTP_E_VERSION);
    char r[GTP_REASON_MAX + 1];
    snprintf(r, sizeof r, "%.*s", (int)e.reason.len, e.reason.ptr);
    assert_non_null(strstr(r, "too old"));
    gtc_close(&a);
  }
  honest_send(&h);
  assert_int_equal(gtd_metric(&d, "gentrace_agent_sessions_replaced_total"),
                   0);

  /* The honest agent goes away: the binding stays with what it stored. */
  gtc_close(&h.c);
  {
    gtc a;
    gtf_spec as;
    gtp_welcome w;
    auth_spec(&as, 1, 1);
    as.session_key[15] ^= 1;
    assert_int_equal(gtc_connect(&a, d.agent_port), 0);
    assert_int_equal(gtc_hello(&a, &as, NULL, &w), GTP_E_AUTH);
    refused++;
    gtc_close(&a);
  }
  /* And across a restart (sessions.key_hash). */
  assert_int_equal(gtd_stop(&d), 0);
  assert_int_equal(gtd_start(&d, NULL, NULL), 0);
  {
    gtc a;
    gtf_spec as;
    gtp_welcome w;
    auth_spec(&as, 1, 1);
    as.session_key[7] ^= 0x80;
    assert_int_equal(gtc_connect(&a, d.agent_port), 0);
    assert_int_equal(gtc_hello(&a, &as, NULL, &w), GTP_E_AUTH);
    gtc_close(&a);
  }
  /* The owner comes back with its key and resumes where it was. */
  {
    gtf_spec s;
    gtp_welcome w;
    auth_spec(&s, 1, 1);
    assert_int_equal(gtc_connect(&h.c, d.agent_port), 0);
    assert_int_equal(gtc_hello(&h.c, &s, NULL, &w), 0);
    assert_int_equal(w.has_last, 1);
    assert_int_equal(w.last_gen, h.next - 1);
  }
  honest_send(&h);
  /* A second connection with the right key is the owner reconnecting: it
   * replaces the old one (PROTOCOL.md 5.1), as in version 1. */
  {
    gtc r;
    gtf_spec s;
    gtp_welcome w;
    auth_spec(&s, 1, 1);
    assert_int_equal(gtc_connect(&r, d.agent_port), 0);
    assert_int_equal(gtc_hello(&r, &s, NULL, &w), 0);
    int code = 0;
    assert_int_equal(gtc_wait_closed(&h.c, &code, GTC_TIMEOUT_MS), 1);
    assert_int_equal(code, GTP_E_STATE);
    gtc_close(&h.c);
    h.c = r;
  }
  honest_send(&h);
  gtc_close(&h.c);

  assert_int_equal(gtd_metric(&d, "gentrace_refused_total{reason=\"auth\"}"),
                   1); /* the counters restarted with the daemon */
  assert_int_equal(gtd_metric(&d, "gentrace_agent_sessions_replaced_total"),
                   1);
  honest_check(&h, &d);
  /* Only a hash of the key is kept, and the key never reaches the log. */
  gtf_spec s;
  auth_spec(&s, 1, 1);
  uint8_t hash[GTP_SHA256_SIZE];
  gtp_sha256(s.session_key, 16, hash);
  char hexkey[33], hexhash[65], sql[256];
  for (int i = 0; i < 16; i++)
    snprintf(hexkey + 2 * i, 3, "%02x", s.session_key[i]);
  for (int i = 0; i < GTP_SHA256_SIZE; i++)
    snprintf(hexhash + 2 * i, 3, "%02X", hash[i]);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM sessions WHERE hex(key_hash) = '%s'",
           hexhash);
  assert_int_equal(db_count(d.db, sql), 1);
  assert_false(gtd_log_has(&d, hexkey));
  assert_true(gtd_log_has(&d, "session key refused"));
  (void)refused;
  finish(&d);
}

/* A generation number already stored, sent again with other bytes. */
static void test_session_auth__resent_generation_with_other_bytes_conflicts(
    void **st) {
  (void)st;
  gtd d;
  start(&d, NULL, NULL);
  honest h = {0};
  honest_open(&h, &d, 2);
  for (int i = 0; i < 5; i++)
    honest_send(&h);
  gtf_spec s;
  int code = 0;
  /* The same bytes again (a resend after a lost ACK): a duplicate ACK. */
  auth_spec(&s, 2, 3);
  assert_int_equal(send_gen(&h.c, &s, &code), 1);
  /* Other bytes under gen 3: CONFLICT, final for it, connection stays. */
  auth_spec(&s, 2, 3);
  s.threads = 3;
  assert_int_equal(send_gen(&h.c, &s, &code), 2);
  assert_int_equal(code, GTP_E_CONFLICT);
  honest_send(&h);
  gtc_close(&h.c);
  assert_int_equal(
      gtd_metric(&d, "gentrace_refused_total{reason=\"conflict\"}"), 1);
  assert_int_equal(gtd_metric(&d, "gentrace_generations_duplicate_total"), 1);
  /* Gen 3 is still the first bytes; nothing else changed. */
  assert_int_equal(session_gens(d.db, 2), 6);
  for (uint64_t gen = 1; gen <= 6; gen++) {
    auth_spec(&s, 2, gen);
    assert_stored_exactly(d.db, &s);
  }
  /* The refused generation is in the session's rejected count. */
  uint8_t sid[16];
  char hex[33], sql[160];
  gtf_session(sid, 2);
  gtp_session_hex(sid, hex);
  snprintf(sql, sizeof sql,
           "SELECT rejected FROM sessions WHERE session='%s'", hex);
  int64_t rej = -1;
  for (int i = 0; i < 50 && rej != 1; i++) { /* flushed once a second */
    rej = db_count(d.db, sql);
    if (rej != 1)
      usleep(100000);
  }
  assert_int_equal(rej, 1);
  finish(&d);
}

/* --------------------------------------------------- validation at the door */

static void expect_gen_error(gtc *c, const gtf_spec *s, int want) {
  int code = 0;
  if (send_gen(c, s, &code) != 2)
    fail_msg("gen %llu was ACKed, wanted error %d", (unsigned long long)s->gen,
             want);
  assert_int_equal(code, want);
}

static void test_session_auth__absurd_numbers_clocks_and_ledgers_are_refused(
    void **st) {
  (void)st;
  gtd d;
  const char *args[] = {"--max-clock-skew", "1h", "--max-gen-span", "10m",
                        NULL};
  start(&d, args, NULL);
  honest h = {0};
  honest_open(&h, &d, 3);
  honest_send(&h);
  gtc a;
  gtf_spec s;
  gtp_welcome w;
  auth_spec(&s, 4, 1);
  assert_int_equal(gtc_connect(&a, d.agent_port), 0);
  assert_int_equal(gtc_hello(&a, &s, NULL, &w), 0);
  uint64_t now = real_ns();

  /* Generation numbers outside [1, 2^63): 0 and the top half (stored as
   * negative numbers before). */
  uint64_t bad_gens[] = {0, 1ull << 63, UINT64_MAX};
  for (int i = 0; i < 3; i++) {
    auth_spec(&s, 4, bad_gens[i]);
    expect_gen_error(&a, &s, GTP_E_CORRUPT);
    honest_send(&h);
  }
  /* CLOCK spanning 11 minutes (over --max-gen-span 10m). */
  auth_spec(&s, 4, 10);
  s.period_ns = 660ull * 1000000000;
  s.start_real_ns = now - s.period_ns;
  expect_gen_error(&a, &s, GTP_E_CORRUPT);
  honest_send(&h);
  /* The [0, INT64_MAX] clock that made every later window query scan. */
  auth_spec(&s, 4, 11);
  s.start_real_ns = 0;
  s.period_ns = (uint64_t)INT64_MAX - 1;
  expect_gen_error(&a, &s, GTP_E_CORRUPT);
  honest_send(&h);
  /* Wall clock 3 h in the past and in the future (--max-clock-skew 1h). */
  auth_spec(&s, 4, 12);
  s.start_real_ns = now - 3 * 3600ull * 1000000000;
  expect_gen_error(&a, &s, GTP_E_CORRUPT);
  auth_spec(&s, 4, 13);
  s.start_real_ns = now + 3 * 3600ull * 1000000000;
  expect_gen_error(&a, &s, GTP_E_CORRUPT);
  honest_send(&h);
  /* Ledger counts that would wrap the session totals. */
  auth_spec(&s, 4, 14);
  s.dropped = (1ull << 48) + 1;
  expect_gen_error(&a, &s, GTP_E_TOOBIG);
  auth_spec(&s, 4, 15);
  s.evicted = UINT64_MAX;
  s.rejected = UINT64_MAX;
  expect_gen_error(&a, &s, GTP_E_TOOBIG);
  honest_send(&h);
  /* After all that, the same connection still stores a sane generation. */
  auth_spec(&s, 4, 16);
  int code = 0;
  assert_int_equal(send_gen(&a, &s, &code), 1);
  gtc_close(&a);

  /* Identity text with a NUL or invalid UTF-8: refused, never truncated. */
  static const struct {
    const char *field;
    const char *bytes;
    size_t n;
  } bad[] = {{"service", "victim\0x", 8},
             {"host", "h\xc3(", 3},
             {"tag value", "\xed\xa0\x80", 3},
             {"tag key", "k\0", 2}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gtp_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.min_version = hl.max_version = GTP_PROTO_VERSION;
    gtf_session(hl.session, 50 + (unsigned)i);
    hl.service = (gtp_str){"victim", 6};
    hl.host = (gtp_str){"h", 1};
    hl.agent_version = (gtp_str){"0.1.0", 5};
    hl.ntags = 1;
    hl.tags[0].key = (gtp_str){"k", 1};
    hl.tags[0].value = (gtp_str){"v", 1};
    gtp_str v = {bad[i].bytes, bad[i].n};
    if (strcmp(bad[i].field, "service") == 0)
      hl.service = v;
    else if (strcmp(bad[i].field, "host") == 0)
      hl.host = v;
    else if (strcmp(bad[i].field, "tag key") == 0)
      hl.tags[0].key = v;
    else
      hl.tags[0].value = v;
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(gtp_frame_hello_encode(&b, &hl), 0);
    assert_int_equal(gtc_connect(&a, d.agent_port), 0);
    assert_int_equal(gtc_send_raw(&a, b.data, b.len), 0);
    gtp_wbuf_fini(&b);
    gtp_frame f;
    assert_int_equal(gtc_read_frame(&a, &f, GTC_TIMEOUT_MS), 1);
    assert_int_equal(f.type, GTP_FR_ERROR);
    gtp_error_frame e;
    assert_int_equal(gtp_frame_error_decode(f.payload, f.len, &e), 0);
    assert_int_equal(e.code, GTP_E_CORRUPT);
    char r[GTP_REASON_MAX + 1];
    snprintf(r, sizeof r, "%.*s", (int)e.reason.len, e.reason.ptr);
    assert_non_null(strstr(r, bad[i].field));
    gtc_close(&a);
    honest_send(&h);
  }
  gtc_close(&h.c);

  assert_int_equal(
      gtd_metric(&d, "gentrace_refused_total{reason=\"gen-range\"}"), 3);
  assert_int_equal(gtd_metric(&d, "gentrace_refused_total{reason=\"clock\"}"),
                   4);
  assert_int_equal(gtd_metric(&d, "gentrace_refused_total{reason=\"ledger\"}"),
                   2);
  assert_int_equal(gtd_metric(&d, "gentrace_refused_total{reason=\"text\"}"),
                   4);
  /* The attacker stored its one sane generation and nothing else. */
  assert_int_equal(session_gens(d.db, 4), 1);
  assert_int_equal(
      db_count(d.db, "SELECT count(*) FROM sessions WHERE service != "
                   "'checkout' AND service != 'frontend'"),
      0);
  assert_true(db_count(d.db, "SELECT max(end_ns - start_ns) FROM generations") <=
              600ll * 1000000000);
  assert_true(db_count(d.db, "SELECT min(gen) FROM generations") >= 1);
  honest_check(&h, &d);
  finish(&d);
}

/* A session whose stored totals are near INT64_MAX: one more generation
 * would wrap them, so it is refused and the totals stay. */
static void test_session_auth__session_totals_never_wrap(void **st) {
  (void)st;
  gtd d;
  start(&d, NULL, NULL);
  honest h = {0};
  honest_open(&h, &d, 5);
  honest_send(&h);
  gtc_close(&h.c);
  assert_int_equal(gtd_stop(&d), 0);
  db_exec(d.db, "UPDATE sessions SET lost = 9223372036854775000");
  assert_int_equal(gtd_start(&d, NULL, NULL), 0);
  honest_open(&h, &d, 5);
  gtf_spec s;
  auth_spec(&s, 5, h.next);
  s.dropped = 1ull << 40;
  expect_gen_error(&h.c, &s, GTP_E_TOOBIG);
  /* A generation without loss still fits. */
  honest_send(&h);
  gtc_close(&h.c);
  assert_int_equal(
      db_count(d.db, "SELECT lost FROM sessions"), 9223372036854775000ll);
  assert_int_equal(session_gens(d.db, 5), 2);
  assert_int_equal(
      db_count(d.db, "SELECT typeof(lost) = 'integer' FROM sessions"), 1);
  finish(&d);
}

/* ---------------------------------------------------- throwaway sessions */

typedef struct flood {
  uint16_t port;
  unsigned first, n;
  unsigned done;
} flood;

/* n sessions that each HELLO, get one generation rejected (GEN_END with
 * no BATCH: MANIFEST) and vanish with a reset, so nothing lingers in
 * TIME_WAIT. */
static void *flood_main(void *arg) {
  flood *fl = arg;
  for (unsigned i = 0; i < fl->n; i++) {
    gtc c;
    if (gtc_connect(&c, fl->port) != 0)
      continue;
    gtp_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.min_version = hl.max_version = GTP_PROTO_VERSION;
    unsigned id = fl->first + i;
    memcpy(hl.session, &id, sizeof id);
    memset(hl.session + 4, 0xee, 12);
    hl.service = (gtp_str){"throwaway", 9};
    hl.host = (gtp_str){"h", 1};
    hl.agent_version = (gtp_str){"0", 1};
    gtp_gen_end e = {1, 1, 0, 8, 0, 5, 0, 0, 0};
    uint8_t mem[512];
    gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
    gtp_frame_hello_encode(&b, &hl);
    gtp_frame_gen_end_encode(&b, &e);
    if (gtc_send_raw(&c, b.data, b.len) == 0) {
      uint64_t gen;
      int code;
      if (gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS) == 2 &&
          code == GTP_E_MANIFEST)
        __atomic_fetch_add(&fl->done, 1, __ATOMIC_RELAXED);
    }
    struct linger lg = {1, 0};
    setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    gtc_close(&c);
  }
  return NULL;
}

/* Median GEN_END -> ACK time of n honest generations, in microseconds. */
static int64_t honest_latency(honest *h, int n) {
  int64_t t[64];
  for (int i = 0; i < n && i < 64; i++) {
    int64_t t0 = mono_us();
    honest_send(h);
    t[i] = mono_us() - t0;
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      int64_t x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  return t[n / 2];
}

static void test_session_auth__throwaway_sessions_stay_bounded_and_expire(
    void **st) {
  (void)st;
  gtd d;
  /* A bound of 10000 (instead of 65536) and a TTL of 3 s (instead of 10
   * min): the flood passes the bound whatever its speed, and expiry is
   * seen within the test. */
  const char *env[] = {"GENTRACE_TEST_NOROW_TTL_MS=3000",
                       "GENTRACE_TEST_NOROW_MAX=10000", NULL};
  start(&d, NULL, env);
  honest h = {0};
  honest_open(&h, &d, 6);
  int64_t before = honest_latency(&h, 31);
  int64_t rss0 = (int64_t)gtd_proc_kib(d.pid, "VmRSS");

  enum { THREADS = 2, PER = 51000 };
  pthread_t th[THREADS];
  flood fl[THREADS];
  int64_t t0 = mono_us();
  for (int i = 0; i < THREADS; i++) {
    fl[i] = (flood){d.agent_port, 1000000u + (unsigned)i * PER, PER, 0};
    assert_int_equal(pthread_create(&th[i], NULL, flood_main, &fl[i]), 0);
  }
  /* The honest agent streams beside the flood. */
  while (__atomic_load_n(&fl[0].done, __ATOMIC_RELAXED) +
                 __atomic_load_n(&fl[1].done, __ATOMIC_RELAXED) <
             THREADS * PER - 100 &&
         mono_us() - t0 < 240 * 1000000ll) {
    honest_send(&h);
    usleep(20000);
  }
  unsigned done = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    done += fl[i].done;
  }
  int64_t took = mono_us() - t0;
  assert_true(done >= 100000);

  /* Bounded: at most the bound tracked, the rest counted. */
  int64_t tracked = gtd_metric(&d, "gentrace_sessions_unstored");
  int64_t untracked =
      gtd_metric(&d, "gentrace_sessions_unstored_untracked_total");
  int64_t indexed = gtd_metric(&d, "gentrace_sessions_indexed");
  int64_t rss1 = (int64_t)gtd_proc_kib(d.pid, "VmRSS");
  print_message("flood: %u sessions in %.1f s; tracked %" PRId64
                " untracked %" PRId64 " indexed %" PRId64
                " rss %" PRId64 " -> %" PRId64 " KiB\n",
                done, (double)took / 1e6, tracked, untracked, indexed, rss0,
                rss1);
  assert_true(tracked >= 0 && tracked <= 10000);
  assert_true(untracked > 0);
  assert_true(indexed <= 10000 + 16);
#if !defined(__SANITIZE_ADDRESS__)
  /* (ASan keeps freed memory in quarantine: RSS says nothing there.) */
  assert_true(rss1 - rss0 < 64 * 1024);
#endif

  /* ACK latency is not degraded after the flood (generous: 5x + 20 ms).
   * Measured up to three times, the best kept: a burst of load from
   * elsewhere on a shared machine during one measurement is not the
   * daemon degrading, which would show in all three. */
  int64_t after = honest_latency(&h, 31);
  for (int k = 1; k < 3 && after > 5 * before + 20000; k++) {
    int64_t again = honest_latency(&h, 31);
    if (again < after)
      after = again;
  }
  print_message("honest ACK latency median: %" PRId64 " us before, %" PRId64
                " us after\n",
                before, after);
  assert_true(after <= 5 * before + 20000);

  /* And it expires: nothing tracked TTL after the last rejection. */
  int64_t left = -1;
  for (int i = 0; i < 100 && left != 0; i++) {
    usleep(100000);
    left = gtd_metric(&d, "gentrace_sessions_unstored");
  }
  assert_int_equal(left, 0);
  assert_true(gtd_metric(&d, "gentrace_sessions_indexed") <= 16);
  honest_send(&h);
  gtc_close(&h.c);
  honest_check(&h, &d);
  finish(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_session_auth__claims_with_another_key_change_nothing, teardown),
      cmocka_unit_test_teardown(
          test_session_auth__resent_generation_with_other_bytes_conflicts,
          teardown),
      cmocka_unit_test_teardown(
          test_session_auth__absurd_numbers_clocks_and_ledgers_are_refused,
          teardown),
      cmocka_unit_test_teardown(test_session_auth__session_totals_never_wrap,
                                teardown),
      cmocka_unit_test_teardown(
          test_session_auth__throwaway_sessions_stay_bounded_and_expire,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
