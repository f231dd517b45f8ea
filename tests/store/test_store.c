/* test_store.c: the write side (store/store.c) against real SQLite files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"
#include "store_read.h"
#include "store_schema.h"

static store_gen *gen_of(unsigned session, uint64_t gen) {
  sf_gen_opts o = {.session = session, .gen = gen};
  return sf_gen_new(&o);
}

static int64_t count_rows(fx *f, const char *table) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  return sf_sql_int(f->dir.db, sql);
}

/* Sessions whose kept totals (schema 2) disagree with the aggregate over
 * their generation rows: 0 whenever the triggers did their job. */
static int64_t totals_mismatch(fx *f) {
  return sf_sql_int(
      f->dir.db,
      "SELECT count(*) FROM sessions s WHERE (s.gens, s.events, s.bytes,"
      " s.lost) IS NOT (SELECT count(*), coalesce(sum(events), 0),"
      " coalesce(sum(bytes), 0), coalesce(sum(dropped + evicted + rejected),"
      " 0) FROM generations g WHERE g.session_id = s.id)");
}

/* -------------------------------------------------------------- commit */

static void
test_store_commit__done_after_commit_with_increasing_seq(void **state) {
  fx *f = *state;
  open_default(f);
  /* Enough to keep both compressors busy: commit order must still be
   * submission order. */
  enum { N = 300 };
  for (uint64_t g = 0; g < N; g++)
    assert_int_equal(store_submit(f->s, gen_of(1, g)), 0);
  assert_int_equal(sf_done_wait(&f->done, N), N);
  int64_t prev = 0;
  for (size_t i = 0; i < N; i++) {
    assert_int_equal(f->done.recs[i].result, 0);
    assert_int_equal(f->done.recs[i].gen, i);
    assert_true(f->done.recs[i].seq > prev);
    assert_true(f->done.recs[i].stored_bytes > 0);
    prev = f->done.recs[i].seq;
  }
  assert_int_equal(count_rows(f, "generations"), N);
  assert_int_equal(count_rows(f, "payloads"), N);
  assert_int_equal(
      sf_sql_int(f->dir.db,
                 "SELECT count(*) FROM generations WHERE seq = gen + 1"),
      N);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.committed_gens, N);
  assert_true(st.transactions >= 1 && st.transactions <= N);
  assert_int_equal(st.queued_gens, 0);
  assert_int_equal(st.queued_bytes, 0);
  assert_int_equal(st.disk_full, 0);
  uint64_t last = 0;
  uint8_t id[16];
  gtf_session(id, 1);
  assert_int_equal(store_last_gen(f->s, id, &last), 1);
  assert_int_equal(last, N - 1);
}

/* done() of a generation must not run before its row is visible to a new
 * connection: the callback itself checks. */
static const char *g_check_db;
static int g_visible_fail;
static void done_checks_visibility(void *ctx, store_gen *g) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM generations WHERE seq = %lld",
           (long long)g->seq);
  if (g->result == 0 && sf_sql_int(g_check_db, sql) != 1)
    g_visible_fail++;
  sf_done_cb(ctx, g);
}

static void test_store_commit__row_visible_when_done_runs(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.pins = f->pins;
  g_check_db = f->dir.db;
  g_visible_fail = 0;
  char *cause = NULL;
  assert_int_equal(
      store_open(&c, done_checks_visibility, &f->done, &f->s, &cause), 0);
  for (uint64_t g = 0; g < 5; g++)
    assert_int_equal(store_submit(f->s, gen_of(2, g)), 0);
  assert_int_equal(sf_done_wait(&f->done, 5), 5);
  assert_int_equal(g_visible_fail, 0);
}

static void
test_store_commit__duplicate_is_result_1_and_stored_once(void **state) {
  fx *f = *state;
  open_default(f);
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(3, 7)), 0);
  /* A resend after a lost ACK, and two copies inside one batch. */
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(3, 7)), 1);
  assert_int_equal(store_submit(f->s, gen_of(3, 8)), 0);
  assert_int_equal(store_submit(f->s, gen_of(3, 8)), 0);
  assert_int_equal(sf_done_wait(&f->done, 4), 4);
  assert_int_equal(f->done.recs[2].result + f->done.recs[3].result, 1);
  assert_int_equal(f->done.recs[1].seq, 0);
  assert_int_equal(count_rows(f, "generations"), 2);
  assert_int_equal(count_rows(f, "payloads"), 2);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.duplicate_gens, 2);
  assert_int_equal(st.committed_gens, 2);
}

static void test_store_last_gen__survives_reopen(void **state) {
  fx *f = *state;
  open_default(f);
  uint8_t a[16], b[16], none[16];
  gtf_session(a, 4);
  gtf_session(b, 5);
  gtf_session(none, 6);
  uint64_t g = 0;
  assert_int_equal(store_last_gen(f->s, a, &g), 0);
  /* Out of order: the index keeps the highest. */
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(4, 12)), 0);
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(4, 10)), 0);
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(5, 0)), 0);
  store_close(f->s);
  f->s = NULL;
  open_default(f);
  assert_int_equal(store_last_gen(f->s, a, &g), 1);
  assert_int_equal(g, 12);
  assert_int_equal(store_last_gen(f->s, b, &g), 1);
  assert_int_equal(g, 0);
  assert_int_equal(store_last_gen(f->s, none, &g), 0);
}

static void test_store_commit__payload_compressed_or_kept_raw(void **state) {
  fx *f = *state;
  open_default(f);
  /* The fixture generation repeats itself: zstd must shrink it. */
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(7, 1)), 0);
  sf_gen_opts o = {.session = 7, .gen = 2, .noise = 200000};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations WHERE gen = 1 AND codec = 'zstd'"
           " AND stored_bytes < bytes");
  assert_int_equal(sf_sql_int(f->dir.db, sql), 1);
  /* Random text: compression would not help, so it is stored as is. */
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations WHERE gen = 2 AND codec = 'none'"
           " AND stored_bytes = bytes AND bytes > 200000");
  assert_int_equal(sf_sql_int(f->dir.db, sql), 1);
}

static void test_store_submit__never_waits_for_a_slow_disk(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.test_delay_ms = 1000; /* a submit that waited for a batch takes 1 s */
  c.batch_max = 4;
  open_store(f, &c);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint64_t g = 0; g < 12; g++)
    assert_int_equal(store_submit(f->s, gen_of(8, g)), 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int64_t ms =
      (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  /* Generous: building nothing here, submit is a pointer push; one wait
   * for the store thread would be 1000 ms. */
  assert_true(ms < 800);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_true(st.queued_gens >= 8); /* the store is still sleeping */
  assert_true(st.queued_bytes > 0);
  /* Close commits everything queued before returning. */
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(f->done.n, 12);
  for (size_t i = 0; i < 12; i++)
    assert_int_equal(f->done.recs[i].result, 0);
  assert_int_equal(count_rows(f, "generations"), 12);
}

static void test_store_note_rejected__counted_in_session_row(void **state) {
  fx *f = *state;
  open_default(f);
  uint8_t id[16];
  gtf_session(id, 9);
  /* Before the session has a row: kept pending until it exists. */
  store_note_rejected(f->s, id, 100);
  assert_int_equal(sf_commit_one(f->s, &f->done, gen_of(9, 1)), 0);
  store_note_rejected(f->s, id, 20);
  char hex[33], sql[200];
  gtp_session_hex(id, hex);
  snprintf(sql, sizeof sql,
           "SELECT rejected * 1000000 + rejected_events FROM sessions"
           " WHERE session = '%s'",
           hex);
  int64_t v = -1;
  for (int i = 0; i < 150 && v != 2000120; i++) {
    v = sf_sql_int(f->dir.db, sql);
    sf_sleep_ms(20);
  }
  assert_int_equal(v, 2000120);
}

static void test_store_commit__one_bad_gen_fails_alone(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.test_delay_ms = 300; /* let all five gather in one batch */
  open_store(f, &c);
  /* A row the database refuses for reasons of its own: only that
   * generation may fail, the rest of its batch must commit. */
  assert_int_equal(sf_sql_exec(f->dir.db,
                               "CREATE TRIGGER no666 BEFORE INSERT ON"
                               " generations WHEN NEW.gen = 666 BEGIN"
                               " SELECT RAISE(ABORT, 'refused'); END"),
                   SQLITE_OK);
  for (uint64_t g = 664; g < 669; g++)
    assert_int_equal(store_submit(f->s, gen_of(14, g)), 0);
  assert_int_equal(sf_done_wait(&f->done, 5), 5);
  for (size_t i = 0; i < 5; i++) {
    if (f->done.recs[i].gen == 666)
      assert_int_equal(f->done.recs[i].result, GTP_E_CORRUPT);
    else
      assert_int_equal(f->done.recs[i].result, 0);
  }
  assert_int_equal(count_rows(f, "generations"), 4);
  assert_int_equal(count_rows(f, "payloads"), 4);
}

/* --------------------------------------------------------------- schema */

static void test_store_open__newer_schema_is_refused(void **state) {
  fx *f = *state;
  open_default(f);
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(sf_sql_exec(f->dir.db, "UPDATE meta SET value = '99'"
                                          " WHERE key = 'schema_version'"),
                   SQLITE_OK);
  store_config c = sf_config(&f->dir);
  char *cause = NULL;
  store *s = NULL;
  assert_int_equal(store_open(&c, sf_done_cb, &f->done, &s, &cause),
                   GTP_E_VERSION);
  assert_null(s);
  assert_non_null(cause);
  assert_non_null(strstr(cause, "99"));
  assert_non_null(strstr(cause, "newer"));
  free(cause);
  /* The reader refuses it as well. */
  store_reader *r = NULL;
  cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), GTP_E_VERSION);
  assert_non_null(cause);
  free(cause);
}

/* A version 1 database (no session totals) is migrated in place on open:
 * the totals are computed from the rows already kept, and the triggers keep
 * them from then on. */
static void test_store_open__schema_1_is_migrated_with_totals(void **state) {
  fx *f = *state;
  open_default(f);
  for (uint64_t g = 1; g <= 6; g++)
    assert_int_equal(store_submit(f->s, gen_of(20 + (unsigned)(g % 2), g)), 0);
  assert_int_equal(sf_done_wait(&f->done, 6), 6);
  store_close(f->s);
  f->s = NULL;
  /* Make it what a schema 1 build left behind. */
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "DROP TRIGGER IF EXISTS generations_add;"
                  "DROP TRIGGER generations_del;"
                  "DROP INDEX IF EXISTS generations_by_span;"
                  "ALTER TABLE sessions DROP COLUMN key_hash;"
                  "ALTER TABLE generations DROP COLUMN crc;"
                  "ALTER TABLE sessions DROP COLUMN gens;"
                  "ALTER TABLE sessions DROP COLUMN events;"
                  "ALTER TABLE sessions DROP COLUMN bytes;"
                  "ALTER TABLE sessions DROP COLUMN lost;"
                  "UPDATE meta SET value = '1' WHERE key = 'schema_version'"),
      SQLITE_OK);
  reader_refuses_older_then_open(f);
  assert_int_equal(
      sf_sql_int(f->dir.db,
                 "SELECT value FROM meta WHERE key = 'schema_version'"),
      STORE_SCHEMA_VERSION);
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  store_reader_close(r);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT sum(gens) FROM sessions"), 6);
  assert_true(sf_sql_int(f->dir.db, "SELECT min(events) FROM sessions") > 0);
  assert_int_equal(totals_mismatch(f), 0);
  /* And the triggers run after the migration. */
  assert_int_equal(store_submit(f->s, gen_of(20, 7)), 0);
  assert_int_equal(sf_done_wait(&f->done, 1), 1);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT sum(gens) FROM sessions"), 7);
  assert_int_equal(totals_mismatch(f), 0);
}

static void test_store_open__foreign_database_is_refused(void **state) {
  fx *f = *state;
  /* Someone else's SQLite file (sf_sql_exec cannot create files). */
  sqlite3 *h = NULL;
  assert_int_equal(sqlite3_open(f->dir.db, &h), SQLITE_OK);
  assert_int_equal(sqlite3_exec(h, "CREATE TABLE t(x)", NULL, NULL, NULL),
                   SQLITE_OK);
  sqlite3_close(h);
  store_config c = sf_config(&f->dir);
  char *cause = NULL;
  store *s = NULL;
  assert_int_equal(store_open(&c, sf_done_cb, &f->done, &s, &cause),
                   GTP_E_VERSION);
  assert_non_null(strstr(cause, "not a gentrace database"));
  free(cause);
}

static void test_store_open__missing_directory_fails_with_cause(void **state) {
  fx *f = *state;
  char path[200];
  snprintf(path, sizeof path, "%s/no/such/dir.db", f->dir.dir);
  store_config c = sf_config(&f->dir);
  c.path = path;
  char *cause = NULL;
  store *s = NULL;
  int rc = store_open(&c, sf_done_cb, &f->done, &s, &cause);
  assert_true(rc < 0);
  assert_null(s);
  assert_non_null(cause);
  assert_non_null(strstr(cause, path));
  free(cause);
}

static void test_store_open__fresh_database_settings(void **state) {
  fx *f = *state;
  open_default(f);
  assert_int_equal(sf_sql_int(f->dir.db, "PRAGMA page_size"), 4096);
  assert_int_equal(sf_sql_int(f->dir.db, "PRAGMA auto_vacuum"), 2);
  assert_int_equal(
      sf_sql_int(f->dir.db,
                 "SELECT value FROM meta WHERE key = 'schema_version'"),
      STORE_SCHEMA_VERSION);
  /* journal_mode is persistent in the file: a new connection sees WAL. */
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(f->dir.db, &h, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* The write connection's page cache stays at its 8 MiB (STORE_CACHE_KIB):
 * SQLite sized its default with 4 KiB pages (500 pages, 32 MiB at 64 KiB
 * pages), so before the explicit PRAGMA every committed payload stayed
 * cached up to 32 MiB. 24 MB are written: an unbounded cache grows past the
 * bound below. */
static void test_store_commit__page_cache_is_bounded(void **state) {
  fx *f = *state;
  open_default(f);
  int64_t before = sqlite3_memory_used();
  enum { N = 240 }; /* 240 x ~100 KB incompressible: 24 MB written */
  for (uint64_t g = 0; g < N; g++) {
    sf_gen_opts o = {.session = 30, .gen = g, .noise = 100000};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  assert_int_equal(sf_done_wait(&f->done, N), N);
  int64_t grew = sqlite3_memory_used() - before;
  print_message("sqlite memory grew %lld KiB over %d commits\n",
                (long long)(grew >> 10), N);
  assert_true(grew < (12 << 20));
}

/* ------------------------------------------------------------ retention */

static void
test_store_retention__by_age_deletes_old_and_never_pinned(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.retain_ns = 3600LL * 1000000000LL; /* one hour */
  int h = store_pins_add(f->pins, 6);  /* seqs 6.. belong to a "download" */
  assert_true(h >= 0);
  open_store(f, &c);
  int64_t now = sf_now_ns();
  /* seq 1..10: two hours old; 11..12: fresh. */
  for (uint64_t g = 0; g < 10; g++) {
    sf_gen_opts o = {.session = 10,
                     .gen = g,
                     .start_ns = now - 7200LL * 1000000000LL +
                                 (int64_t)g * 1000000000LL};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  for (uint64_t g = 10; g < 12; g++) {
    sf_gen_opts o = {.session = 10, .gen = g, .start_ns = now};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  assert_int_equal(sf_done_wait(&f->done, 12), 12);
  assert_int_equal(f->done.recs[0].seq, 1);
  store_stats st;
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.retention_deleted_gens >= 5));
  sf_sleep_ms(1200); /* another tick: must not go past the pin */
  store_stats_get(f->s, &st);
  assert_int_equal(st.retention_deleted_gens, 5);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT min(seq) FROM generations"),
                   6);
  assert_int_equal(count_rows(f, "payloads"), 7);
  store_pins_remove(f->pins, h);
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.retention_deleted_gens >= 10));
  assert_int_equal(count_rows(f, "generations"), 2);
  assert_int_equal(count_rows(f, "payloads"), 2);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT min(gen) FROM generations"),
                   10);
  /* The session totals followed the deletions. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT gens FROM sessions"), 2);
  assert_int_equal(totals_mismatch(f), 0);
}

static void
test_store_retention__by_size_deletes_oldest_whole_gens(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.max_db_bytes = 5u << 19; /* 2.5 MiB: 1 MiB of schema, ~15 gens */
  int h = store_pins_add(f->pins, 30);
  open_store(f, &c);
  int64_t now = sf_now_ns();
  for (uint64_t g = 0; g < 60; g++) {
    sf_gen_opts o = {.session = 11,
                     .gen = g,
                     .start_ns = now + (int64_t)g * 1000000000LL,
                     .noise = 100000};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  assert_int_equal(sf_done_wait(&f->done, 60), 60);
  store_stats st;
  /* Pinned from seq 30: only 1..29 may go, so it stays over the limit. */
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.retention_deleted_gens >= 29));
  sf_sleep_ms(1200);
  store_stats_get(f->s, &st);
  assert_int_equal(st.retention_deleted_gens, 29);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT min(seq) FROM generations"),
                   30);
  assert_true(st.db_bytes > c.max_db_bytes);

  store_pins_remove(f->pins, h);
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.db_bytes <= c.max_db_bytes));
  int64_t left = count_rows(f, "generations");
  assert_true(left >= 1 && left < 31);
  /* The survivors are the newest, contiguous, each with its payload. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT max(seq) FROM generations"),
                   60);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT min(seq) FROM generations"),
                   61 - left);
  assert_int_equal(count_rows(f, "payloads"), left);
  assert_int_equal(st.retention_deleted_gens, (uint64_t)(60 - left));
  assert_int_equal(totals_mismatch(f), 0);
  assert_true(sf_file_size(f->dir.db) <= c.max_db_bytes);
  assert_true(sf_integrity_ok(f->dir.db));
}

/* ------------------------------------------------------------ disk full */

static void test_store_disk_full__pauses_keeps_reads_and_resumes(void **state) {
  fx *f = *state;
  /* Measure the empty schema so the limit leaves room for a few
   * generations only. */
  open_default(f);
  store_close(f->s);
  f->s = NULL;
  int64_t base = sf_sql_int(f->dir.db, "PRAGMA page_count");
  int64_t page = sf_sql_int(f->dir.db, "PRAGMA page_size");
  assert_true(base > 0 && page > 0);
  /* 1.5 MiB of room whatever the page size: a few generations, and the
   * 1 MiB disk-full probe once retention frees them. */
  char env[32];
  snprintf(env, sizeof env, "%lld", (long long)(base + (3 << 19) / page));
  setenv("GENTRACE_TEST_MAX_PAGES", env, 1);

  store_config c = sf_config(&f->dir);
  c.retain_ns = 3600LL * 1000000000LL;
  int h = store_pins_add(f->pins, 1); /* nothing may be deleted yet */
  open_store(f, &c);
  unsetenv("GENTRACE_TEST_MAX_PAGES");
  int64_t old = sf_now_ns() - 7200LL * 1000000000LL;
  int res = 0;
  uint64_t g;
  for (g = 0; g < 100; g++) {
    sf_gen_opts o = {.session = 12,
                     .gen = g,
                     .start_ns = old + (int64_t)g * 1000000000LL,
                     .noise = 150000};
    res = sf_commit_one(f->s, &f->done, sf_gen_new(&o));
    if (res != 0)
      break;
  }
  assert_int_equal(res, GTP_E_DISKFULL);
  assert_true(g >= 2);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.disk_full, 1);
  assert_int_equal(st.committed_gens, g);

  /* Reads keep working, and what was committed is intact. */
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  for (int64_t seq = 1; seq <= (int64_t)g; seq++) {
    gtp_wbuf_reset(&b);
    assert_int_equal(store_read_payload(r, seq, &b), 0);
    gtp_gen pg;
    size_t used = 0;
    assert_int_equal(gtp_gen_parse(b.data, b.len, &pg, &used), 0);
    assert_int_equal(used, b.len);
    gtp_gen_fini(&pg);
  }
  /* Still full a tick later: the probe must not clear it while no space
   * was freed. */
  sf_sleep_ms(1300);
  store_stats_get(f->s, &st);
  assert_int_equal(st.disk_full, 1);

  /* Space frees up: the download ends, retention removes the old rows,
   * the probe succeeds and ingest resumes. */
  store_pins_remove(f->pins, h);
  assert_true(SF_WAIT_STATS(f->s, st, 6000, st.disk_full == 0));
  sf_gen_opts o = {.session = 12, .gen = 1000, .start_ns = sf_now_ns()};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  store_close(f->s);
  f->s = NULL;
  assert_true(sf_integrity_ok(f->dir.db));

  /* Raising the limit (here: none at all) after a restart works too. */
  open_store(f, &c);
  for (uint64_t k = 0; k < 20; k++) {
    sf_gen_opts o2 = {
        .session = 13, .gen = k, .start_ns = sf_now_ns(), .noise = 150000};
    assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o2)), 0);
  }
  gtp_wbuf_fini(&b);
  store_reader_close(r);
  store_close(f->s);
  f->s = NULL;
  assert_true(sf_integrity_ok(f->dir.db));
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_commit__done_after_commit_with_increasing_seq),
      T(test_store_commit__row_visible_when_done_runs),
      T(test_store_commit__duplicate_is_result_1_and_stored_once),
      T(test_store_last_gen__survives_reopen),
      T(test_store_commit__one_bad_gen_fails_alone),
      T(test_store_commit__payload_compressed_or_kept_raw),
      T(test_store_submit__never_waits_for_a_slow_disk),
      T(test_store_note_rejected__counted_in_session_row),
      T(test_store_commit__page_cache_is_bounded),
      T(test_store_open__newer_schema_is_refused),
      T(test_store_open__schema_1_is_migrated_with_totals),
      T(test_store_open__foreign_database_is_refused),
      T(test_store_open__missing_directory_fails_with_cause),
      T(test_store_open__fresh_database_settings),
      T(test_store_retention__by_age_deletes_old_and_never_pinned),
      T(test_store_retention__by_size_deletes_oldest_whole_gens),
      T(test_store_disk_full__pauses_keeps_reads_and_resumes),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
