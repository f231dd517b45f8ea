/* test_store_pcache.c: the write connection's page cache in an arena
 * (store/store_pcache.c) against real SQLite files: the store's writer gets
 * it and nobody else does, pages come from the arena, eviction past
 * cache_size, the heap past the arena, xRekey and xTruncate through
 * incremental vacuum, VACUUM and a rollback that grew the file, a page size
 * change inside the claim, and a writer killed mid-transaction. Every case
 * ends with integrity_check and the rows read back. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"
#include "check.h"
#include "store_pcache.h"

/* ------------------------------------------------------------ helpers */

static void exec_ok(sqlite3 *db, const char *sql) {
  char *err = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    fail_msg("%s: %s", sql, err ? err : sqlite3_errstr(rc));
}

/* Opens path under a claim, with the statements that settle the page size
 * (`pre`, may be NULL) inside it, as store_open does; the claim must have
 * caught exactly the main database's cache. */
static sqlite3 *open_claimed(const char *path, const char *pre) {
  sqlite3 *db = NULL;
  store_pcache_claim_begin();
  int rc = sqlite3_open_v2(
      path, &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    exec_ok(db, "SELECT count(*) FROM sqlite_master"); /* reads page 1 */
    if (pre)
      exec_ok(db, pre);
  }
  int claimed = store_pcache_claim_end();
  assert_int_equal(rc, SQLITE_OK);
  assert_int_equal(claimed, 1);
  return db;
}

static sqlite3 *open_plain(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL),
                   SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  return db;
}

/* Rows first..first+n-1 of t(id, v), each v about `len` characters: '0's
 * then the id. In transactions of `per_tx` (0: inside the caller's). */
static void fill(sqlite3 *db, int first, int n, int len, int per_tx) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "INSERT INTO t(id, v) VALUES(?1,"
                                      " hex(zeroblob(?2 / 2)) || ?1)",
                                      -1, &st, NULL),
                   SQLITE_OK);
  for (int i = 0; i < n; i++) {
    if (per_tx > 0 && i % per_tx == 0)
      exec_ok(db, "BEGIN");
    sqlite3_bind_int(st, 1, first + i);
    sqlite3_bind_int(st, 2, len);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_reset(st);
    if (per_tx > 0 && (i % per_tx == per_tx - 1 || i == n - 1))
      exec_ok(db, "COMMIT");
  }
  sqlite3_finalize(st);
}

/* Rows whose v is still '0's then its id: the bytes survived eviction
 * and rereads (a page served with another page's bytes would not). */
static int64_t rows_intact(sqlite3 *db) {
  return sf_db_int(db,
                   "SELECT count(*) FROM t WHERE"
                   " substr(v, -length(CAST(id AS TEXT))) = CAST(id AS TEXT)"
                   " AND substr(v, 1, length(v) - length(CAST(id AS TEXT)))"
                   " NOT GLOB '*[^0]*'");
}

/* ------------------------------------------------------------ the store */

typedef struct reader_arg {
  const char *db;
  atomic_int stop;
  int64_t reads, last;
  int went_back;
} reader_arg;

/* A reader on its own connection (not claimed): counts only grow. */
static void *reader_main(void *p) {
  reader_arg *a = p;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(a->db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return NULL;
  sqlite3_busy_timeout(db, 5000);
  while (!atomic_load(&a->stop)) {
    int64_t n = sf_db_int(db, "SELECT count(*) FROM generations g"
                              " JOIN payloads p USING(seq)");
    if (n >= 0) {
      if (n < a->last)
        a->went_back = 1;
      a->last = n;
      a->reads++;
    }
  }
  sqlite3_close(db);
  return NULL;
}

static void test_store_pcache__writer_under_load_with_readers(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1, s2;
  store_pcache_stats_get(&s0);
  open_default(f);
  store_pcache_stats_get(&s1);
  /* The writer's cache only: not the checkpointer's, not the readers'. */
  assert_int_equal(s1.caches, s0.caches + 1);

  reader_arg ra[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    memset(&ra[i], 0, sizeof ra[i]);
    ra[i].db = f->dir.db;
    assert_int_equal(pthread_create(&th[i], NULL, reader_main, &ra[i]), 0);
  }
  const unsigned n = 600;
  for (unsigned i = 0; i < n; i++) {
    sf_gen_opts o = {.session = 1 + i % 40, .gen = 1 + i / 40};
    assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
  }
  assert_int_equal(sf_done_wait(&f->done, n), n);
  store_pcache_stats_get(&s2);
  for (int i = 0; i < 2; i++) {
    atomic_store(&ra[i].stop, 1);
    pthread_join(th[i], NULL);
    assert_true(ra[i].reads > 0);
    assert_false(ra[i].went_back);
  }
  assert_int_equal(s2.caches, s0.caches + 1);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(f->done.recs[i].result, 0);
  /* Pages served from the arena, and held there now. */
  assert_true(s2.fetch_arena > s1.fetch_arena + n);
  assert_true(s2.pages_arena > 0);
  assert_true(s2.arena_bytes >= s2.pages_arena * 4096);
  /* The store's cache_size (8 MiB of 4 KiB pages and headers). */
  assert_true(s2.max_pages > 1000 && s2.max_pages < 2048);

  store_close(f->s);
  f->s = NULL;
  store_pcache_stats_get(&s2);
  assert_int_equal(s2.caches, s0.caches);
  assert_true(sf_integrity_ok(f->dir.db));
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   n);
}

static void test_store_pcache__two_stores_each_claim_their_own(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1;
  store_pcache_stats_get(&s0);
  open_default(f);
  sf_dir d2;
  sf_dir_make(&d2);
  sf_done done2;
  sf_done_init(&done2);
  store_config c = sf_config(&d2);
  store *s2 = NULL;
  char *cause = NULL;
  assert_int_equal(store_open(&c, sf_done_cb, &done2, &s2, &cause), 0);
  store_pcache_stats_get(&s1);
  assert_int_equal(s1.caches, s0.caches + 2);
  sf_gen_opts o = {.session = 3, .gen = 1};
  assert_int_equal(sf_commit_one(s2, &done2, sf_gen_new(&o)), 0);
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  store_close(s2);
  store_pcache_stats_get(&s1);
  assert_int_equal(s1.caches, s0.caches + 1);
  sf_done_fini(&done2);
  assert_true(sf_integrity_ok(d2.db));
  sf_dir_remove(&d2);
}

/* ------------------------------------------------------------ the contract */

static void test_store_pcache__eviction_past_cache_size(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1;
  store_pcache_stats_get(&s0);
  sqlite3 *db = open_claimed(f->dir.db, "PRAGMA journal_mode = WAL");
  exec_ok(db, "PRAGMA cache_size = 64;"
              " CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  /* ~3 MB of rows through a 64-page (256 KiB) cache. */
  fill(db, 1, 3000, 1000, 500);
  assert_int_equal(rows_intact(db), 3000);
  store_pcache_stats_get(&s1);
  assert_int_equal(s1.max_pages, 64);
  assert_true(s1.recycled > s0.recycled + 500);
  /* The arena holds at most cache_size pages. Its first segment was sized
   * by SQLite's default cache_size (the first read came before the
   * pragma), so no second one was needed. */
  assert_true(s1.pages_arena <= 64);
  assert_true(s1.arena_segs >= 1 && s1.arena_segs <= 2);
  assert_true(s1.arena_bytes <= (4u << 20));
  assert_true(sqlite3_db_release_memory(db) == SQLITE_OK);
  store_pcache_stats_get(&s1);
  assert_true(s1.shrinks > s0.shrinks);
  assert_true(sf_db_integrity_ok(db));
  assert_int_equal(rows_intact(db), 3000);
  sqlite3_close(db);
  store_pcache_stats_get(&s1);
  assert_int_equal(s1.caches, s0.caches);
  assert_true(sf_integrity_ok(f->dir.db));
}

static void test_store_pcache__heap_past_the_arena(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1;
  store_pcache_stats_get(&s0);
  sqlite3 *db = open_claimed(f->dir.db, "PRAGMA journal_mode = WAL");
  /* cache_size 0: no page belongs in the arena, every one is the heap's
   * and leaves when unpinned. */
  exec_ok(db, "PRAGMA cache_size = 0;"
              " CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  fill(db, 1, 400, 1000, 100);
  assert_int_equal(rows_intact(db), 400);
  store_pcache_stats_get(&s1);
  assert_true(s1.fetch_heap > s0.fetch_heap + 100);
  assert_int_equal(s1.pages_arena, 0);
  /* Grown again: pages go to the arena. */
  exec_ok(db, "PRAGMA cache_size = 200");
  uint64_t before = s1.fetch_arena;
  assert_int_equal(rows_intact(db), 400);
  store_pcache_stats_get(&s1);
  assert_true(s1.fetch_arena > before + 50);
  assert_true(s1.pages_arena > 50 && s1.pages_arena <= 200);
  assert_true(sf_db_integrity_ok(db));
  sqlite3_close(db);
}

static void test_store_pcache__rekey_and_truncate_by_vacuum(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1, s2;
  store_pcache_stats_get(&s0);
  sqlite3 *db = open_claimed(
      f->dir.db, "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL");
  exec_ok(db, "PRAGMA cache_size = 500;"
              " CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
              " CREATE TABLE u(id INTEGER PRIMARY KEY, v BLOB)");
  /* Interleaved tables, then one emptied: its free pages sit among u's, so
   * incremental vacuum moves u's last pages down (xRekey) and cuts the
   * file (xTruncate). */
  for (int k = 0; k < 8; k++) {
    fill(db, 1 + k * 100, 100, 1500, 100);
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO u SELECT id, v FROM t WHERE id > %d",
             k * 100);
    exec_ok(db, sql);
  }
  int64_t pages = sf_db_int(db, "PRAGMA page_count");
  exec_ok(db, "DELETE FROM t");
  exec_ok(db, "PRAGMA incremental_vacuum");
  store_pcache_stats_get(&s1);
  /* t held half the pages. */
  assert_true(sf_db_int(db, "PRAGMA page_count") < pages * 3 / 4);
  assert_int_equal(sf_db_int(db, "PRAGMA freelist_count"), 0);
  assert_true(s1.rekeyed > s0.rekeyed);
  assert_true(s1.truncated > s0.truncated);
  assert_true(sf_db_integrity_ok(db));
  assert_int_equal(sf_db_int(db, "SELECT count(*) FROM u"), 800);

  /* A rollback of a transaction that grew the file drops its new pages
   * (in WAL mode SQLite discards them one by one, xUnpin with discard). */
  int64_t before = sf_db_int(db, "PRAGMA page_count");
  exec_ok(db, "BEGIN");
  fill(db, 5001, 300, 2000, 0);
  assert_true(sf_db_int(db, "PRAGMA page_count") > before + 100);
  exec_ok(db, "ROLLBACK");
  store_pcache_stats_get(&s2);
  assert_true(s2.discarded > s1.discarded + 100);
  assert_int_equal(sf_db_int(db, "PRAGMA page_count"), before);
  assert_int_equal(sf_db_int(db, "SELECT count(*) FROM t"), 0);

  /* VACUUM rewrites the whole file through this cache. */
  exec_ok(db, "VACUUM");
  assert_true(sf_db_integrity_ok(db));
  assert_int_equal(sf_db_int(db, "SELECT count(*) FROM u"), 800);
  sqlite3 *other = open_plain(f->dir.db);
  assert_int_equal(sf_db_int(other, "SELECT count(*) FROM u"), 800);
  assert_true(sf_db_integrity_ok(other));
  sqlite3_close(other);
  sqlite3_close(db);
}

static void test_store_pcache__page_size_change_stays_claimed(void **state) {
  fx *f = *state;
  /* A new file whose page size the claim's statements change: SQLite
   * replaces the cache inside the claim, and the new one is claimed. */
  sqlite3 *db = open_claimed(
      f->dir.db, "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL");
  exec_ok(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  fill(db, 1, 200, 3000, 50);
  assert_int_equal(sf_db_int(db, "PRAGMA page_size"), 16384);
  sqlite3_close(db);
  /* An existing 16 KiB file: its first read (inside the claim) changes the
   * page size from the default. */
  store_pcache_stats s0, s1;
  store_pcache_stats_get(&s0);
  db = open_claimed(f->dir.db, NULL);
  assert_int_equal(rows_intact(db), 200);
  store_pcache_stats_get(&s1);
  assert_true(s1.fetch_arena > s0.fetch_arena + 20);
  assert_true(sf_db_integrity_ok(db));
  sqlite3_close(db);
}

static void test_store_pcache__unclaimed_caches_use_the_default(void **state) {
  fx *f = *state;
  store_pcache_stats s0, s1;
  sqlite3 *w = open_claimed(f->dir.db, "PRAGMA journal_mode = WAL");
  exec_ok(w, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
  fill(w, 1, 100, 500, 100);
  store_pcache_stats_get(&s0);
  sqlite3 *r = open_plain(f->dir.db);
  assert_int_equal(rows_intact(r), 100);
  /* A temporary table on the claimed connection, after the claim: its
   * cache is a default one too. */
  exec_ok(w, "CREATE TEMP TABLE tt AS SELECT * FROM t");
  assert_int_equal(sf_db_int(w, "SELECT count(*) FROM tt"), 100);
  store_pcache_stats_get(&s1);
  assert_int_equal(s1.caches, s0.caches);
  sqlite3_close(r);
  sqlite3_close(w);
}

/* A writer killed (SIGKILL) in the middle of a transaction: the file
 * reopens intact with exactly the committed rows. */
static void test_store_pcache__killed_writer_reopens_intact(void **state) {
  fx *f = *state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    alarm(60); /* never outlives a parent that failed before its kill */
    close(fds[0]);
    sqlite3 *db = NULL;
    store_pcache_claim_begin();
    if (sqlite3_open_v2(f->dir.db, &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        NULL) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA cache_size = 100",
                     NULL, NULL, NULL) != SQLITE_OK)
      _exit(2);
    store_pcache_claim_end();
    sqlite3_exec(db,
                 "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
                 " WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1"
                 " FROM c WHERE i < 1000) INSERT INTO t SELECT i,"
                 " hex(zeroblob(450)) || i FROM c;"
                 " BEGIN;"
                 " WITH RECURSIVE c(i) AS (SELECT 1001 UNION ALL SELECT i + 1"
                 " FROM c WHERE i < 3000) INSERT INTO t SELECT i,"
                 " hex(zeroblob(450)) || i FROM c;",
                 NULL, NULL, NULL);
    /* Mid-transaction, with dirty pages spilled to the WAL (the cache is
     * far smaller): tell the parent, then wait to be killed. */
    if (write(fds[1], "x", 1) != 1)
      _exit(3);
    for (;;)
      pause();
  }
  close(fds[1]);
  char c;
  assert_int_equal(read(fds[0], &c, 1), 1);
  close(fds[0]);
  assert_int_equal(kill(pid, SIGKILL), 0);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

  sqlite3 *db = open_claimed(f->dir.db, NULL);
  assert_true(sf_db_integrity_ok(db));
  assert_int_equal(sf_db_int(db, "SELECT count(*) FROM t"), 1000);
  assert_int_equal(rows_intact(db), 1000);
  fill(db, 1001, 200, 900, 100);
  assert_int_equal(rows_intact(db), 1200);
  sqlite3_close(db);
  assert_true(sf_integrity_ok(f->dir.db));
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: invariants */
  /* As gentraced: before SQLite starts. */
  store_process_init();
  if (!store_pcache_installed()) {
    fprintf(stderr, "store page cache turned off (GENTRACE_STORE_PCACHE)\n");
    return 77; /* skipped */
  }
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_pcache__writer_under_load_with_readers),
      T(test_store_pcache__two_stores_each_claim_their_own),
      T(test_store_pcache__eviction_past_cache_size),
      T(test_store_pcache__heap_past_the_arena),
      T(test_store_pcache__rekey_and_truncate_by_vacuum),
      T(test_store_pcache__page_size_change_stays_claimed),
      T(test_store_pcache__unclaimed_caches_use_the_default),
      T(test_store_pcache__killed_writer_reopens_intact),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
