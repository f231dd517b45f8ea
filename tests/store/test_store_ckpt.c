/* test_store_ckpt.c: the checkpoint thread (store/store_ckpt.c) on a real
 * SQLite file in WAL mode: the writer's commits past the threshold get a
 * checkpoint from the thread, after which the writer restarts the WAL
 * (its header's salt changes); stopped, the writer's automatic checkpoint
 * is back; a store with the thread commits and reopens whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <time.h>

#include "store_ckpt.h"
#include "store_fixture.h"

#define TARGET 64 /* frames */

typedef struct cfx {
  sf_dir dir;
  sqlite3 *db;
} cfx;

static int setup(void **state) {
  cfx *f = calloc(1, sizeof *f);
  sf_dir_make(&f->dir);
  assert_int_equal(sqlite3_open_v2(f->dir.db, &f->db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                       SQLITE_OPEN_NOMUTEX,
                                   NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_exec(f->db,
                                "PRAGMA page_size = 4096;"
                                " PRAGMA journal_mode = WAL;"
                                " PRAGMA synchronous = NORMAL;"
                                " CREATE TABLE t(x BLOB)",
                                NULL, NULL, NULL),
                   SQLITE_OK);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  cfx *f = *state;
  sqlite3_close_v2(f->db);
  sf_dir_remove(&f->dir);
  free(f);
  return 0;
}

/* Salt-1 of the WAL header: it changes each time the WAL restarts. */
static uint32_t wal_salt(const cfx *f) {
  char path[160];
  snprintf(path, sizeof path, "%s-wal", f->dir.db);
  FILE *w = fopen(path, "rb");
  assert_non_null(w);
  uint8_t h[32];
  assert_int_equal(fread(h, 1, sizeof h, w), sizeof h);
  fclose(w);
  return (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 |
         h[19];
}

/* One transaction of two pages' worth of rows. */
static void write_txn(cfx *f) {
  assert_int_equal(sqlite3_exec(f->db,
                                "INSERT INTO t VALUES(randomblob(3000));"
                                " INSERT INTO t VALUES(randomblob(3000))",
                                NULL, NULL, NULL),
                   SQLITE_OK);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void
test_store_ckpt__the_thread_checkpoints_and_the_wal_restarts(void **state) {
  cfx *f = *state;
  store_ckpt *c = NULL;
  assert_int_equal(store_ckpt_start(f->db, f->dir.db, 0, TARGET, &c), 0);
  write_txn(f);
  uint32_t salt = wal_salt(f);
  /* Below the threshold (about 4 frames a transaction): nothing asked. */
  for (int i = 0; i < 2; i++)
    write_txn(f);
  sleep_ms(50);
  assert_int_equal(store_ckpt_runs(c), 0);
  /* Past it: the thread checkpoints (generous bound), and the next commit
   * restarts the WAL because all of it was copied. */
  for (int i = 0; i < 30; i++)
    write_txn(f);
  for (int i = 0; i < 1000 && store_ckpt_runs(c) == 0; i++)
    sleep_ms(10);
  assert_true(store_ckpt_runs(c) >= 1);
  int restarted = 0;
  for (int i = 0; i < 200 && !restarted; i++) {
    write_txn(f);
    restarted = wal_salt(f) != salt;
    if (!restarted)
      sleep_ms(10);
  }
  assert_true(restarted);
  store_ckpt_stop(c, f->db);
}

/* Without the thread (stopped), the writer's own automatic checkpoint is
 * back: past the threshold the WAL restarts with no one else copying it. */
static void
test_store_ckpt__stop_gives_the_automatic_checkpoint_back(void **state) {
  cfx *f = *state;
  store_ckpt *c = NULL;
  assert_int_equal(store_ckpt_start(f->db, f->dir.db, 0, TARGET, &c), 0);
  store_ckpt_stop(c, f->db);
  write_txn(f);
  uint32_t salt = wal_salt(f);
  int restarted = 0;
  for (int i = 0; i < 4 * TARGET && !restarted; i++) {
    write_txn(f);
    restarted = wal_salt(f) != salt;
  }
  assert_true(restarted);
}

/* A store opened with the thread commits, closes and reopens whole. */
static void test_store_ckpt__a_store_commits_and_reopens(void **state) {
  cfx *f = *state;
  sf_dir d;
  sf_dir_make(&d);
  sf_done done;
  sf_done_init(&done);
  store_config c = sf_config(&d);
  store *s = NULL;
  char *cause = NULL;
  assert_int_equal(store_open(&c, sf_done_cb, &done, &s, &cause), 0);
  for (uint64_t g = 1; g <= 20; g++) {
    sf_gen_opts o = {.session = 3, .gen = g};
    assert_int_equal(sf_commit_one(s, &done, sf_gen_new(&o)), 0);
  }
  store_close(s);
  assert_int_equal(sf_sql_int(d.db, "SELECT count(*) FROM generations"), 20);
  done.n = 0;
  assert_int_equal(store_open(&c, sf_done_cb, &done, &s, &cause), 0);
  sf_gen_opts o = {.session = 3, .gen = 21};
  assert_int_equal(sf_commit_one(s, &done, sf_gen_new(&o)), 0);
  store_close(s);
  assert_int_equal(sf_sql_int(d.db, "SELECT count(*) FROM generations"), 21);
  sf_dir_remove(&d);
  (void)f;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__the_thread_checkpoints_and_the_wal_restarts, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__stop_gives_the_automatic_checkpoint_back, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__a_store_commits_and_reopens, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
