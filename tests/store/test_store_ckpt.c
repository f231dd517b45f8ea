/* test_store_ckpt.c: WAL checkpoints off the store thread (store/
 * store_ckpt.c), against real SQLite files: the WAL stays bounded while
 * commits go on during the checkpointer's passes, every generation is
 * stored, and the switch back to SQLite's own checkpoint works. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"

/* WAL target of the tests: 1,024 pages of 4 KiB, so a pass comes every
 * few rounds; the checkpointer leaves the finish to the store thread at
 * 1/16 of it (64 frames), more than one round writes. */
#define WAL_PAGES "1024"
#define WAL_BYTES (1024u * 4096u)
enum { SESSIONS = 4, NOISE = 32 * 1024, ROUNDS = 150 };

/* Opens the store with the small WAL target (and the inline switch),
 * then unsets both so the other tests of this binary see neither. */
static void open_ckpt_store(fx *f, int inline_ckpt) {
  store_config c = sf_config(&f->dir);
  setenv("GENTRACE_TEST_WAL_PAGES", WAL_PAGES, 1);
  if (inline_ckpt)
    setenv("GENTRACE_BENCH_INLINE_CKPT", "1", 1);
  open_store(f, &c);
  unsetenv("GENTRACE_TEST_WAL_PAGES");
  unsetenv("GENTRACE_BENCH_INLINE_CKPT");
}

/* Rounds of SESSIONS generations of NOISE incompressible bytes each, every
 * round waiting for its completions as agents wait for ACKs. Every other
 * round also waits until no pass is under way, so passes both overlap
 * commits and end between them. Returns the WAL's largest size seen. */
static uint64_t write_rounds(fx *f, int wait_idle) {
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", f->dir.db);
  uint64_t wal_max = 0;
  size_t want = 0;
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned i = 0; i < SESSIONS; i++) {
      sf_gen_opts o = {.session = 1 + i, .gen = 1 + r, .noise = NOISE};
      assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
    }
    want += SESSIONS;
    assert_int_equal(sf_done_wait(&f->done, want), want);
    uint64_t w = sf_file_size(wal);
    if (w > wal_max)
      wal_max = w;
    store_stats st;
    if (wait_idle && r % 2 == 1)
      assert_true(SF_WAIT_STATS(f->s, st, 10000, !st.ckpt_busy));
  }
  return wal_max;
}

static void assert_all_stored(fx *f) {
  for (size_t i = 0; i < f->done.n && i < 4096; i++)
    assert_int_equal(f->done.recs[i].result, 0);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   ROUNDS * SESSIONS);
}

/* About 20 MB go through a 4 MiB WAL target: the checkpointer copies it in
 * passes while the store thread commits, the store thread finishes each
 * remainder, and the WAL restarts from its start instead of growing with
 * everything written (what a PASSIVE-only checkpointer did). */
static void
test_store_ckpt__wal_stays_bounded_while_commits_continue(void **state) {
  fx *f = *state;
  open_ckpt_store(f, 0);
  uint64_t wal_max = write_rounds(f, 1);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_true(st.ckpt_passes >= 2);
  assert_true(st.ckpt_finishes >= 2);
  assert_true(st.ckpt_pass_ns_total > 0);
  /* Generous: 4x the target, against about 20 MB without restarts. */
  if (wal_max > 4 * (uint64_t)WAL_BYTES)
    fail_msg("WAL grew to %llu bytes: %llu passes, %llu finishes",
             (unsigned long long)wal_max, (unsigned long long)st.ckpt_passes,
             (unsigned long long)st.ckpt_finishes);
  assert_all_stored(f);
  store_close(f->s);
  f->s = NULL;
  assert_true(sf_integrity_ok(f->dir.db));
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   ROUNDS * SESSIONS);
}

/* GENTRACE_BENCH_INLINE_CKPT: no checkpointer, SQLite's own checkpoint in
 * COMMIT keeps the WAL bounded as before (bench_fleet's same-run before). */
static void
test_store_ckpt__inline_switch_keeps_sqlite_checkpoints(void **state) {
  fx *f = *state;
  open_ckpt_store(f, 1);
  uint64_t wal_max = write_rounds(f, 0);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.ckpt_passes, 0);
  assert_int_equal(st.ckpt_finishes, 0);
  assert_true(wal_max <= 4 * (uint64_t)WAL_BYTES);
  assert_all_stored(f);
}

/* Closing while passes may be under way joins the checkpointer first and
 * leaves a whole database. */
static void test_store_ckpt__close_during_passes_keeps_every_row(void **state) {
  fx *f = *state;
  open_ckpt_store(f, 0);
  size_t want = 0;
  store_stats st;
  for (unsigned r = 0; r < ROUNDS; r++) {
    for (unsigned i = 0; i < SESSIONS; i++) {
      sf_gen_opts o = {.session = 1 + i, .gen = 1 + r, .noise = NOISE};
      assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
    }
    want += SESSIONS;
    assert_int_equal(sf_done_wait(&f->done, want), want);
    store_stats_get(f->s, &st);
    if (st.ckpt_busy && r > 10)
      break;
  }
  store_close(f->s); /* a pass may be copying now */
  f->s = NULL;
  assert_true(sf_integrity_ok(f->dir.db));
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   (int64_t)want);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__wal_stays_bounded_while_commits_continue, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__inline_switch_keeps_sqlite_checkpoints, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_ckpt__close_during_passes_keeps_every_row, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
