/* test_store_walbuf.c: the WAL write shim (store/store_walbuf.c) under the
 * store's write connection, against real SQLite files: what it holds back
 * reaches the file whole and in place, and a commit costs a few writes
 * instead of two per page. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"

/* This process's write system calls so far (/proc/self/io, syscw). */
static uint64_t write_calls(void) {
  FILE *fp = fopen("/proc/self/io", "r");
  char line[128];
  uint64_t v = 0;
  assert_non_null(fp);
  while (fgets(line, sizeof line, fp) != NULL)
    if (strncmp(line, "syscw:", 6) == 0)
      v = strtoull(line + 6, NULL, 10);
  fclose(fp);
  return v;
}

/* Every payload stored equals the bytes of the generation kept by the
 * done collector, read by a connection of the default VFS. */
static void payloads_match(fx *f, size_t n) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_open_v2(f->dir.db, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db,
                                      "SELECT codec, data FROM generations"
                                      " JOIN payloads USING(seq) WHERE seq = ?",
                                      -1, &st, NULL),
                   SQLITE_OK);
  assert_true(f->done.nkept >= n);
  for (size_t i = 0; i < n; i++) {
    const store_gen *g = f->done.kept[i];
    assert_int_equal(g->result, 0);
    sqlite3_bind_int64(st, 1, g->seq);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "none");
    assert_int_equal(sqlite3_column_bytes(st, 1), (int)g->len);
    assert_memory_equal(sqlite3_column_blob(st, 1), g->payload, g->len);
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  assert_true(sf_db_integrity_ok(db));
  sqlite3_close(db);
}

/* Transactions bigger than the shim holds (4 MiB) and than one write of
 * the default VFS (128 KiB): 12 incompressible generations of 600 KB in
 * one long linger. Read back by another connection while the store is
 * open, and again after it closed and opened again (WAL recovery), every
 * byte is where it belongs. */
static void test_store_walbuf__big_transaction_reads_back_whole(void **state) {
  fx *f = *state;
  enum { N = 12 };
  store_config c = sf_config(&f->dir);
  c.linger_ms = 3000;
  f->done.keep = N;
  open_store(f, &c);
  store_gen *gs[N];
  for (unsigned i = 0; i < N; i++)
    gs[i] = sf_gen_new(&(sf_gen_opts){
        .session = 40 + i % 3, .gen = 1 + i / 3, .noise = 600000});
  for (unsigned i = 0; i < N; i++)
    assert_int_equal(store_submit(f->s, gs[i]), 0);
  assert_int_equal(sf_done_wait(&f->done, N), N);
  payloads_match(f, N);
  store_close(f->s);
  f->s = NULL;
  open_store(f, &c);
  payloads_match(f, N);
}

/* Fifty transactions of 20 small generations: with the shim the store
 * makes well under a third of the write calls it makes with the default
 * VFS (GENTRACE_BENCH_NO_WALBUF), which writes each frame's header and
 * page apart (about 60 calls per transaction here). */
static void test_store_walbuf__commit_writes_frames_together(void **state) {
  fx *f = *state;
  uint64_t calls[2];
  for (int arm = 0; arm < 2; arm++) {
    if (arm == 1)
      setenv("GENTRACE_BENCH_NO_WALBUF", "1", 1);
    sf_dir_remove(&f->dir);
    sf_dir_make(&f->dir);
    store_config c = sf_config(&f->dir);
    c.linger_ms = 3000;
    c.batch_max = 20;
    f->done.n = 0;
    open_store(f, &c);
    unsetenv("GENTRACE_BENCH_NO_WALBUF");
    uint64_t w0 = write_calls();
    uint64_t gen = 0;
    for (int t = 0; t < 50; t++) {
      store_gen *gs[20];
      gen++;
      for (unsigned i = 0; i < 20; i++)
        gs[i] = sf_gen_new(&(sf_gen_opts){.session = 200 + i, .gen = gen});
      for (unsigned i = 0; i < 20; i++)
        assert_int_equal(store_submit(f->s, gs[i]), 0);
      assert_int_equal(sf_done_wait(&f->done, (size_t)(t + 1) * 20),
                       (size_t)(t + 1) * 20);
    }
    calls[arm] = write_calls() - w0;
    store_close(f->s);
    f->s = NULL;
  }
  print_message("write calls: %llu with the shim, %llu without\n",
                (unsigned long long)calls[0], (unsigned long long)calls[1]);
  assert_true(calls[1] > 0);
  assert_true(calls[0] * 3 < calls[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_walbuf__big_transaction_reads_back_whole),
      T(test_store_walbuf__commit_writes_frames_together),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
