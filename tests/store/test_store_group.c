/* test_store_group.c: group commit, small payloads and the compression
 * of a queue in store/store.c (invariant 13, STORE_ZSTD_MIN, no_compress),
 * against real SQLite files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "store_fixture.h"
#include "store_fx.h"
#include "store_read.h"
#include "store_schema.h"

static int64_t ms_since(int64_t t0) {
  return (sf_now_ns() - t0) / 1000000;
}

/* A fleet: one generation from each of 20 sessions, submitted together,
 * commits in one transaction (the linger waits for the others), and every
 * completion still reports a committed row; each but the last says another
 * of its transaction follows (done_more: gentraced hands them to its loop
 * together at the last). */
static void
test_store_group__fleet_generations_share_a_transaction(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.linger_ms = 1000;
  open_store(f, &c);
  enum { N = 20 };
  store_gen *gs[N];
  for (unsigned i = 0; i < N; i++) {
    sf_gen_opts o = {.session = 100 + i, .gen = 1};
    gs[i] = sf_gen_new(&o); /* built first: submitting is then instant */
  }
  for (unsigned i = 0; i < N; i++)
    assert_int_equal(store_submit(f->s, gs[i]), 0);
  assert_int_equal(sf_done_wait(&f->done, N), N);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.committed_gens, N);
  assert_int_equal(st.transactions, 1);
  for (unsigned i = 0; i < N; i++) {
    assert_int_equal(f->done.recs[i].result, 0);
    assert_true(f->done.recs[i].seq > 0);
    assert_int_equal(f->done.recs[i].more, i + 1 < N);
  }
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   N);
}

/* One agent that waits for each ACK before sending the next gains nothing
 * from waiting: after its first commit, its generations commit at once. */
static void test_store_group__one_session_does_not_wait(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.linger_ms = 3000;
  open_store(f, &c);
  sf_gen_opts o = {.session = 7, .gen = 1};
  /* The first may wait out the linger (another session could follow). */
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  for (uint64_t g = 2; g <= 4; g++) {
    o.gen = g;
    store_gen *sg = sf_gen_new(&o);
    int64_t t0 = sf_now_ns();
    assert_int_equal(sf_commit_one(f->s, &f->done, sg), 0);
    /* Generous, yet well under the 3 s linger it would have waited. */
    assert_true(ms_since(t0) < 1500);
  }
}

/* After a commit the store thread polls (store.c, poll_wait): what
 * arrives during the next linger_ms is committed when that linger ends,
 * in one transaction, without waiting a linger of its own from its
 * arrival. Generations from three new sessions, submitted 6.5-6.9 s into
 * the 8 s poll, complete about 1.1-1.5 s later; lingering from their
 * arrival they would take 8 s. */
static void
test_store_group__arrivals_after_a_commit_share_its_poll(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.linger_ms = 8000;
  open_store(f, &c);
  sf_gen_opts o = {.session = 7, .gen = 1};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  enum { N = 3 };
  store_gen *gs[N];
  for (unsigned i = 0; i < N; i++) {
    sf_gen_opts oi = {.session = 20 + i, .gen = 1};
    gs[i] = sf_gen_new(&oi);
  }
  sf_sleep_ms(6500);
  int64_t t0 = sf_now_ns();
  for (unsigned i = 0; i < N; i++) {
    assert_int_equal(store_submit(f->s, gs[i]), 0);
    if (i + 1 < N)
      sf_sleep_ms(200);
  }
  assert_int_equal(sf_done_wait(&f->done, 1 + N), 1 + N);
  /* Generous (about 1.5 s expected: 4.7x), yet under the 8 s linger each
   * would have waited from its arrival. */
  assert_true(ms_since(t0) < 7000);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.transactions, 2);
  for (unsigned i = 0; i < 1 + N; i++)
    assert_int_equal(f->done.recs[i].result, 0);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   1 + N);
}

/* A payload below STORE_ZSTD_MIN (512 bytes) is stored raw even when zstd
 * would shrink it (here 300 equal bytes); a larger one is compressed. */
static void test_store_group__small_payload_is_stored_raw(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  for (uint64_t g = 1; g <= 2; g++) {
    sf_gen_opts o = {.session = 3, .gen = g};
    store_gen *sg = sf_gen_new(&o);
    size_t n = g == 1 ? 300 : 4000;
    uint8_t *p = realloc(sg->payload, n);
    assert_non_null(p);
    memset(p, 'a', n);
    sg->payload = p;
    sg->len = n;
    assert_int_equal(sf_commit_one(f->s, &f->done, sg), 0);
  }
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations WHERE gen = 1"
                              " AND codec = 'none' AND stored_bytes = 300"),
                   1);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations WHERE gen = 2"
                              " AND codec = 'zstd' AND stored_bytes < 4000"),
                   1);
}

/* N compressible generations submitted at once into a store whose commits
 * are slow (100 ms each, one generation per batch, so cq holds two): the
 * compressors wait for room while the rest queue up behind them. Returns
 * how many rows are raw. */
static int64_t queue_run_cfg(fx *f, store_config c) {
  enum { N = 8 };
  c.batch_max = 1;
  c.test_delay_ms = 100;
  open_store(f, &c);
  store_gen *gs[N];
  for (unsigned i = 0; i < N; i++) {
    sf_gen_opts o = {.session = 40, .gen = i + 1};
    gs[i] = sf_gen_new(&o); /* built first: submitting is then instant */
    assert_true(gs[i]->len >= 512); /* STORE_ZSTD_MIN */
  }
  gtp_wbuf sent[N]; /* the payloads as submitted, for the read back */
  for (unsigned i = 0; i < N; i++) {
    gtp_wbuf_init(&sent[i], 0);
    gtp_wbuf_put(&sent[i], gs[i]->payload, gs[i]->len);
    assert_int_equal(sent[i].len, gs[i]->len);
  }
  for (unsigned i = 0; i < N; i++)
    assert_int_equal(store_submit(f->s, gs[i]), 0);
  assert_int_equal(sf_done_wait(&f->done, N), N);
  for (unsigned i = 0; i < N; i++)
    assert_int_equal(f->done.recs[i].result, 0);
  /* Each row reads back (decompressed) to exactly the bytes sent, in
   * submission order (invariant 8). */
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  for (unsigned i = 0; i < N; i++) {
    gtp_wbuf got;
    gtp_wbuf_init(&got, 0);
    assert_int_equal(store_read_payload(r, (int64_t)i + 1, &got), 0);
    assert_int_equal(got.len, sent[i].len);
    assert_memory_equal(got.data, sent[i].data, got.len);
    gtp_wbuf_fini(&got);
    gtp_wbuf_fini(&sent[i]);
  }
  store_reader_close(r);
  /* Raw or not, every row holds the payload as sent (a raw row's bytes
   * are the generation's own) and has its summary. */
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations g JOIN"
                              " payloads p ON p.seq = g.seq WHERE"
                              " (g.codec = 'none' AND length(p.data) ="
                              " g.bytes AND g.stored_bytes = g.bytes) OR"
                              " (g.codec = 'zstd' AND length(p.data) ="
                              " g.stored_bytes AND g.stored_bytes < g.bytes)"),
                   N);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sum_gens"), N);
  return sf_sql_int(f->dir.db,
                    "SELECT count(*) FROM generations WHERE codec = 'none'");
}

static int64_t queue_run(fx *f, int no_compress) {
  store_config c = sf_config(&f->dir);
  c.no_compress = no_compress;
  return queue_run_cfg(f, c);
}

/* With a fast level (gentraced --zstd-fast-level, invariant 15) the
 * generations a compressor takes while others wait behind it (any byte
 * here: zstd_fast_backlog 1) are compressed at that level, the last one,
 * with nothing behind it, at the store's own; every row holds its payload
 * and reads back to the bytes sent (queue_run_cfg's checks). */
static void
test_store_group__backlog_compresses_at_the_fast_level(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.zstd_fast = 1;
  c.zstd_fast_level = -5;
  c.zstd_fast_backlog = 1;
  assert_int_equal(queue_run_cfg(f, c), 0);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.zgens_level + st.zgens_fast + st.zgens_raw, 8);
  assert_true(st.zgens_fast >= 1); /* 5 or more: all but the first and last */
  assert_true(st.zgens_level >= 1);
  assert_int_equal(st.zgens_raw, 0);
}

/* Fast level 0 while behind: those generations are stored raw. */
static void test_store_group__backlog_stores_raw_at_fast_level_0(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.zstd_fast = 1;
  c.zstd_fast_level = 0;
  c.zstd_fast_backlog = 1;
  int64_t raw = queue_run_cfg(f, c);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_true(raw >= 1);
  assert_int_equal((uint64_t)raw, st.zgens_raw);
  assert_int_equal(st.zgens_fast, 0);
  assert_true(st.zgens_level >= 1);
}

/* A store that keeps up (one generation at a time, each committed before
 * the next) compresses every one at its own level, fast level or not. */
static void test_store_group__quiet_store_keeps_its_level(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.zstd_fast = 1;
  c.zstd_fast_level = -5;
  c.zstd_fast_backlog = 1;
  open_store(f, &c);
  for (uint64_t g = 1; g <= 4; g++) {
    sf_gen_opts o = {.session = 41, .gen = g};
    assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  }
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.zgens_level, 4);
  assert_int_equal(st.zgens_fast, 0);
}

/* A queue behind slow commits is compressed all the same: storing raw
 * while behind costs the store thread more than zstd saves (STORAGE.md). */
static void test_store_group__queued_generations_are_compressed(void **state) {
  fx *f = *state;
  assert_int_equal(queue_run(f, 0), 0);
}

/* no_compress (gentraced --zstd-level 0) stores every payload raw, each
 * with its summary. */
static void test_store_group__no_compress_stores_all_raw(void **state) {
  fx *f = *state;
  assert_int_equal(queue_run(f, 1), 8);
}

/* After its first commit a session's row moves forward by its cached id
 * (no upsert): last_gen and the totals follow every commit, and a row an
 * operator deleted meanwhile is made again, not lost. */
static void test_store_group__known_session_row_moves_forward(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  char hex[33], sql[256];
  sf_session_hex(5, hex);
  for (uint64_t g = 1; g <= 3; g++) {
    sf_gen_opts o = {.session = 5, .gen = g};
    assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  }
  snprintf(sql, sizeof sql,
           "SELECT last_gen * 10 + gens FROM sessions WHERE session = '%s'",
           hex);
  assert_int_equal(sf_sql_int(f->dir.db, sql), 33);
  /* An operator removes the session (its generations stay). */
  char del[160];
  snprintf(del, sizeof del, "DELETE FROM sessions WHERE session = '%s'", hex);
  assert_int_equal(sf_sql_exec(f->dir.db, del), 0);
  sf_gen_opts o = {.session = 5, .gen = 4};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  snprintf(
      sql, sizeof sql,
      "SELECT count(*) FROM sessions WHERE session = '%s' AND last_gen = 4",
      hex);
  assert_int_equal(sf_sql_int(f->dir.db, sql), 1);
  uint64_t last = 0;
  assert_int_equal(
      store_last_gen(f->s, (const uint8_t *)f->done.recs[3].session, &last), 1);
  assert_int_equal(last, 4);
}

/* A version 6 database whose generations_add trigger predates
 * last_seen/last_gen in it (an older build's, made here) is migrated at
 * open through version 7 (this trigger's newer body) to version 8 (no
 * insert trigger: the commit moves the session row) and keeps its rows as
 * they were; a known session's row still moves forward with each
 * generation (totals, last_gen, last_seen_ns), exactly once, and a resend
 * (duplicate) moves last_seen_ns too. */
static void test_store_group__schema_6_trigger_is_migrated(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  sf_gen_opts o = {.session = 9, .gen = 1};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "DROP TRIGGER IF EXISTS generations_add;"
                  "CREATE TRIGGER generations_add AFTER INSERT ON generations"
                  " BEGIN UPDATE sessions SET gens = gens + 1,"
                  " events = events + NEW.events, bytes = bytes + NEW.bytes,"
                  " lost = lost + NEW.dropped + NEW.evicted + NEW.rejected"
                  " WHERE id = NEW.session_id; END;"
                  "UPDATE sessions SET last_seen_ns = 5;"
                  "UPDATE meta SET value = '6' WHERE key = 'schema_version'"),
      0);
  int64_t events = sf_sql_int(f->dir.db, "SELECT events FROM sessions");
  assert_true(events > 0);
  /* Readers wait for the writer to migrate it. */
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), GTP_E_VERSION);
  free(cause);
  open_store(f, &c);
  assert_int_equal(
      sf_sql_int(f->dir.db,
                 "SELECT value FROM meta WHERE key = 'schema_version'"),
      STORE_SCHEMA_VERSION);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM sqlite_master WHERE"
                              " name = 'generations_add'"),
                   0);
  /* The rows are as the older build left them. */
  char q[160];
  snprintf(q, sizeof q,
           "SELECT count(*) FROM sessions WHERE gens = 1 AND last_gen = 1"
           " AND last_seen_ns = 5 AND events = %lld",
           (long long)events);
  assert_int_equal(sf_sql_int(f->dir.db, q), 1);
  for (uint64_t g = 2; g <= 3; g++) {
    o.gen = g;
    assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  }
  char hex[33], sql[256];
  sf_session_hex(9, hex);
  snprintf(sql, sizeof sql,
           "SELECT last_gen * 10 + gens FROM sessions WHERE session = '%s'"
           " AND last_seen_ns > 5",
           hex);
  assert_int_equal(sf_sql_int(f->dir.db, sql), 33);
  /* The resend of gen 2: a duplicate, its row moves (last_seen_ns). */
  assert_int_equal(
      sf_sql_exec(f->dir.db, "UPDATE sessions SET last_seen_ns = 5"), 0);
  o.gen = 2;
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 1);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM sessions WHERE session = '%s'"
           " AND last_seen_ns > 5 AND last_gen = 3 AND gens = 3",
           hex);
  assert_int_equal(sf_sql_int(f->dir.db, sql), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_group__fleet_generations_share_a_transaction),
      T(test_store_group__one_session_does_not_wait),
      T(test_store_group__arrivals_after_a_commit_share_its_poll),
      T(test_store_group__small_payload_is_stored_raw),
      T(test_store_group__queued_generations_are_compressed),
      T(test_store_group__no_compress_stores_all_raw),
      T(test_store_group__backlog_compresses_at_the_fast_level),
      T(test_store_group__backlog_stores_raw_at_fast_level_0),
      T(test_store_group__quiet_store_keeps_its_level),
      T(test_store_group__known_session_row_moves_forward),
      T(test_store_group__schema_6_trigger_is_migrated),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
