/* test_store_genrows.c: the multi-row commit of small generations
 * (store/store_genrows.c, store_commit.c's store_one and pend_flush)
 * against real SQLite files: a transaction that mixes known and new
 * sessions, a session twice, resends, a conflict and a changed service
 * stores each generation exactly as one transaction per generation would,
 * and totals that would wrap are still refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "store_fixture.h"
#include "store_fx.h"

/* Sessions whose kept totals disagree with the aggregate over their
 * generation rows, or whose last_gen is not their highest gen. */
static int64_t totals_mismatch(fx *f) {
  return sf_sql_int(
      f->dir.db,
      "SELECT count(*) FROM sessions s WHERE (s.gens, s.events, s.bytes,"
      " s.lost, s.last_gen) IS NOT (SELECT count(*), coalesce(sum(events), 0),"
      " coalesce(sum(bytes), 0), coalesce(sum(dropped + evicted + rejected),"
      " 0), max(gen) FROM generations g WHERE g.session_id = s.id)");
}

/* The seq of (session n, gen) as stored, 0 if none. */
static int64_t stored_seq(fx *f, unsigned n, uint64_t gen) {
  char hex[33], sql[256];
  sf_session_hex(n, hex);
  snprintf(sql, sizeof sql,
           "SELECT coalesce((SELECT g.seq FROM generations g JOIN sessions s"
           " ON s.id = g.session_id WHERE s.session = '%s' AND g.gen = %llu),"
           " 0)",
           hex, (unsigned long long)gen);
  return sf_sql_int(f->dir.db, sql);
}

enum { KNOWN = 40, NEW = 35 };

typedef struct want {
  unsigned session;
  uint64_t gen;
  size_t noise;
  const char *service;
  int result;
} want;

/* One transaction (a long linger, a batch big enough) of: a generation of
 * each of KNOWN sessions committed before (the fast path), the first of
 * NEW sessions (the upsert), more than STORE_GENROWS_MAX of both (two
 * multi-row writes and a remainder), session 1 twice more, a resend of a
 * generation stored before and of one earlier in the same transaction, a
 * conflicting resend and a generation whose service is not its row's.
 * Each completes as it would alone, every stored one with its payload and
 * the seq it has in the table, in submission order; the totals follow. */
static void mixed_transaction(fx *f, int reopen) {
  store_config c = sf_config(&f->dir);
  c.linger_ms = 5000;
  c.batch_max = 256;
  open_store(f, &c);
  store_gen *first[KNOWN];
  for (unsigned i = 0; i < KNOWN; i++)
    first[i] = sf_gen_new(&(sf_gen_opts){.session = 1 + i, .gen = 1});
  for (unsigned i = 0; i < KNOWN; i++)
    assert_int_equal(store_submit(f->s, first[i]), 0);
  assert_int_equal(sf_done_wait(&f->done, KNOWN), KNOWN);
  if (reopen) { /* the sid cache starts empty: known rows are looked up */
    store_close(f->s);
    f->s = NULL;
    open_store(f, &c);
  }

  want w[KNOWN + NEW + 6];
  size_t n = 0;
  for (unsigned i = 0; i < KNOWN; i++)
    w[n++] = (want){1 + i, 2, 0, NULL, 0};
  for (unsigned i = 0; i < NEW; i++)
    w[n++] = (want){100 + i, 1, 0, NULL, 0};
  w[n++] = (want){1, 3, 0, NULL, 0};
  w[n++] = (want){1, 4, 0, NULL, 0};
  w[n++] = (want){2, 1, 0, NULL, 1};               /* resend */
  w[n++] = (want){4, 2, 0, NULL, 1};               /* resend, same txn */
  w[n++] = (want){3, 1, 64, NULL, GTP_E_CONFLICT}; /* other bytes */
  w[n++] = (want){5, 3, 0, "renamed", 0};          /* not its row's */
  store_gen *gs[sizeof w / sizeof w[0]];
  for (size_t i = 0; i < n; i++)
    gs[i] = sf_gen_new(&(sf_gen_opts){.session = w[i].session,
                                      .gen = w[i].gen,
                                      .noise = w[i].noise,
                                      .service = w[i].service});
  for (size_t i = 0; i < n; i++)
    assert_int_equal(store_submit(f->s, gs[i]), 0);
  assert_int_equal(sf_done_wait(&f->done, KNOWN + n), KNOWN + n);

  int64_t prev = 0;
  size_t stored = KNOWN;
  for (size_t i = 0; i < n; i++) {
    const sf_done_rec *r = &f->done.recs[KNOWN + i];
    assert_int_equal(r->gen, w[i].gen);
    assert_int_equal(r->result, w[i].result);
    if (w[i].result != 0) {
      assert_int_equal(r->seq, 0);
      continue;
    }
    assert_true(r->seq > prev);
    prev = r->seq;
    assert_int_equal(stored_seq(f, w[i].session, w[i].gen), r->seq);
    stored++;
  }
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   (int64_t)stored);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations g JOIN"
                              " payloads p USING(seq)"
                              " WHERE length(p.data) = g.stored_bytes"),
                   (int64_t)stored);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sum_gens"),
                   (int64_t)stored);
  assert_int_equal(totals_mismatch(f), 0);
  /* The conflicting resend left the stored bytes as they were. */
  assert_int_equal(f->done.recs[2].result, 0); /* session 3, gen 1 */
  char hex[33], sql[256];
  sf_session_hex(3, hex);
  snprintf(sql, sizeof sql,
           "SELECT g.stored_bytes FROM generations g JOIN sessions s"
           " ON s.id = g.session_id WHERE s.session = '%s' AND g.gen = 1",
           hex);
  assert_int_equal(sf_sql_int(f->dir.db, sql),
                   (int64_t)f->done.recs[2].stored_bytes);
  /* The rollup files a generation under its session row's service. */
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sum_slots"
                                         " WHERE service = 'renamed'"),
                   0);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sessions"
                                         " WHERE service = 'renamed'"),
                   0);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_int_equal(st.committed_gens, stored - (reopen ? KNOWN : 0));
  assert_int_equal(st.duplicate_gens, 2);
}

static void
test_store_genrows__mixed_transaction_stores_each_exactly(void **state) {
  mixed_transaction(*state, 0);
}

/* The same after a reopen: the known sessions are not in the sid cache,
 * so their generations find their rows by the session index (find_sid)
 * and take the fast path; the resends, the conflict and the service
 * change are still told apart. */
static void test_store_genrows__known_sessions_after_reopen_store_each_exactly(
    void **state) {
  mixed_transaction(*state, 1);
}

/* Invariant 11 on the fast path: a generation whose events would carry its
 * session's total past INT64_MAX is refused (TOOBIG) and writes nothing;
 * the session's next generation that fits is stored. */
static void
test_store_genrows__totals_that_would_wrap_are_refused(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
  sf_gen_opts o = {.session = 6, .gen = 1};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  int64_t events = sf_sql_int(f->dir.db, "SELECT events FROM sessions");
  assert_true(events > 0);
  assert_int_equal(sf_sql_exec(f->dir.db, "UPDATE sessions SET events ="
                                          " 9223372036854775807 - 1"),
                   0);
  o.gen = 2;
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), GTP_E_TOOBIG);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   1);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM sessions"
                                         " WHERE gens = 1 AND events ="
                                         " 9223372036854775807 - 1"),
                   1);
  char sql[96];
  snprintf(sql, sizeof sql, "UPDATE sessions SET events = %lld",
           (long long)events);
  assert_int_equal(sf_sql_exec(f->dir.db, sql), 0);
  o.gen = 3;
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  assert_int_equal(totals_mismatch(f), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_store_genrows__mixed_transaction_stores_each_exactly),
      T(test_store_genrows__known_sessions_after_reopen_store_each_exactly),
      T(test_store_genrows__totals_that_would_wrap_are_refused),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
