/* test_store_hold.c: retention pins on SQLite (store/store_hold.c, hold.c)
 * against the real store thread's retention (store.c invariant 14): a
 * pinned window survives --retain and --max-db-size pressure while the rest
 * goes, the byte cap refuses a pin and changes nothing, expiry and delete
 * release what was held, and a schema-4 database is migrated. Real SQLite
 * files in a scratch directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "gtp_error.h"
#include "hold.h"
#include "store_fx.h"
#include "store_schema.h"

#define NS 1000000000LL

/* The store of the test (store_fx.h) and the pin store beside it. */
static hold *h_;

static int teardown_hold(void **state) {
  hold_close(h_);
  h_ = NULL;
  return teardown(state);
}

static void open_both(fx *f, store_config *c) {
  char *cause = NULL;
  open_store(f, c);
  int rc = hold_open_sqlite(f->dir.db, &h_, &cause);
  if (rc != 0)
    fail_msg("hold_open_sqlite: %d %s", rc, cause ? cause : "");
  free(cause);
}

static int add(fx *f, const char *service, const char *session, int64_t from,
               int64_t to, int64_t ttl_ns, uint64_t max, hold_added *a) {
  int64_t now = sf_now_ns();
  hold_req q = {.service = service,
                .session = session,
                .from_ns = from,
                .to_ns = to,
                .reason = "test",
                .created_ns = now,
                .expires_ns = now + ttl_ns};
  return hold_add(h_, &q, max, a);
}

static int64_t gens_of(fx *f, const char *service) {
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations g JOIN sessions s ON"
           " s.id = g.session_id WHERE s.service = '%s'",
           service);
  return sf_sql_int(f->dir.db, sql);
}

static void submit(fx *f, unsigned session, const char *service, uint64_t gen,
                   int64_t start, size_t noise) {
  sf_gen_opts o = {.session = session,
                   .gen = gen,
                   .start_ns = start,
                   .service = service,
                   .noise = noise};
  assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
}

static void
test_store_hold__age_retention_keeps_only_pinned_windows(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.retain_ns = 3600 * NS;
  open_both(f, &c);
  int64_t t0 = sf_now_ns() - 7200 * NS; /* every generation is 2 h old */
  char drop_hex[33];
  sf_session_hex(11, drop_hex);
  hold_added a;
  /* Pinned before anything is stored: a pin is a window, not a row set.
   * keep's generations 3, 4, 5 overlap [start of 3, start of 6); 2 ends
   * at from and 6 starts at to, so neither is held. */
  assert_int_equal(
      add(f, "keep", NULL, t0 + 3 * NS, t0 + 6 * NS, 3600 * NS, 0, &a), 0);
  assert_int_equal(a.id, 1);
  /* A session pin: only generation 8 of session 11 ("drop"). */
  assert_int_equal(add(f, NULL, drop_hex, t0 + 8 * NS + 1, t0 + 9 * NS - 1,
                       3600 * NS, 0, &a),
                   0);
  assert_int_equal(a.id, 2);
  for (uint64_t g = 0; g < 10; g++) {
    submit(f, 10, "keep", g, t0 + (int64_t)g * NS, 0);
    submit(f, 11, "drop", g, t0 + (int64_t)g * NS, 0);
  }
  assert_int_equal(sf_done_wait(&f->done, 20), 20);
  store_stats st;
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.retention_deleted_gens >= 16));
  sf_sleep_ms(1200); /* another tick: nothing pinned may go */
  store_stats_get(f->s, &st);
  assert_int_equal(st.retention_deleted_gens, 16);
  assert_int_equal(gens_of(f, "keep"), 3);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT min(gen) * 100 + max(gen) FROM"
                              " generations g JOIN sessions s ON"
                              " s.id = g.session_id WHERE s.service = 'keep'"),
                   305);
  assert_int_equal(gens_of(f, "drop"), 1);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM payloads"), 4);
  uint64_t n, bytes;
  assert_int_equal(hold_totals(h_, sf_now_ns(), &n, &bytes), 0);
  assert_int_equal(n, 2);
  assert_int_equal(
      (int64_t)bytes,
      sf_sql_int(f->dir.db, "SELECT sum(stored_bytes) FROM generations"));

  /* Deleting the pins gives the rows back to retention. */
  assert_int_equal(hold_delete(h_, 1, sf_now_ns()), 0);
  assert_int_equal(hold_delete(h_, 1, sf_now_ns()), GTP_E_NOTFOUND);
  assert_int_equal(hold_delete(h_, 2, sf_now_ns()), 0);
  assert_true(SF_WAIT_STATS(f->s, st, 5000, st.retention_deleted_gens >= 20));
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM generations"),
                   0);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM payloads"), 0);
  assert_true(sf_integrity_ok(f->dir.db));
}

static void test_store_hold__size_retention_skips_pinned_oldest(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  c.max_db_bytes = 5u << 19; /* 2.5 MiB: 1 MiB of schema, ~15 gens */
  open_both(f, &c);
  int64_t t0 = sf_now_ns();
  hold_added a;
  /* The five oldest generations (~500 KB) are pinned. */
  assert_int_equal(add(f, "old", NULL, t0, t0 + 5 * NS, 3600 * NS, 0, &a), 0);
  for (uint64_t g = 0; g < 5; g++)
    submit(f, 10, "old", g, t0 + (int64_t)g * NS, 100000);
  for (uint64_t g = 0; g < 50; g++)
    submit(f, 11, "bulk", g, t0 + (int64_t)(g + 5) * NS, 100000);
  assert_int_equal(sf_done_wait(&f->done, 55), 55);
  store_stats st;
  assert_true(SF_WAIT_STATS(f->s, st, 10000,
                            st.retention_deleted_gens >= 30 &&
                                st.db_bytes <= c.max_db_bytes));
  /* Every pinned generation is there, with its bytes; bulk lost its
   * oldest, and its survivors are contiguous up to the newest. */
  assert_int_equal(gens_of(f, "old"), 5);
  int64_t bulk = gens_of(f, "bulk");
  assert_true(bulk >= 1 && bulk < 20);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT max(gen) - min(gen) + 1 FROM generations"
                              " g JOIN sessions s ON s.id = g.session_id"
                              " WHERE s.service = 'bulk'"),
                   bulk);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT max(gen) FROM generations"),
                   49);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM payloads"),
                   5 + bulk);
  assert_int_equal(sf_sql_int(f->dir.db,
                              "SELECT count(*) FROM generations g WHERE NOT"
                              " EXISTS (SELECT 1 FROM payloads p WHERE"
                              " p.seq = g.seq)"),
                   0);
  assert_true(sf_integrity_ok(f->dir.db));
}

static void test_store_hold__cap_refuses_and_changes_nothing(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_both(f, &c);
  int64_t t0 = sf_now_ns();
  for (uint64_t g = 0; g < 10; g++)
    submit(f, 10, "big", g, t0 + (int64_t)g * NS, 10000);
  assert_int_equal(sf_done_wait(&f->done, 10), 10);
  int64_t all =
      sf_sql_int(f->dir.db, "SELECT sum(stored_bytes) FROM generations");
  assert_true(all > 50000);
  hold_added a;
  assert_int_equal(
      add(f, "big", NULL, t0, t0 + 10 * NS, 3600 * NS, (uint64_t)all / 2, &a),
      GTP_E_TOOBIG);
  assert_int_equal((int64_t)a.total_after, all);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM retention_pins"),
                   0);
  /* At the cap exactly it fits; a second pin over the same rows adds no
   * bytes (each generation counts once), so it fits too. */
  assert_int_equal(
      add(f, "big", NULL, t0, t0 + 10 * NS, 3600 * NS, (uint64_t)all, &a), 0);
  assert_int_equal((int64_t)a.bytes, all);
  char hex[33];
  sf_session_hex(10, hex);
  assert_int_equal(
      add(f, NULL, hex, t0 + 2 * NS, t0 + 4 * NS, 3600 * NS, (uint64_t)all, &a),
      0);
  assert_int_equal((int64_t)a.total_after, all);
  assert_true(a.bytes > 0 && (int64_t)a.bytes < all);
  uint64_t n, bytes;
  assert_int_equal(hold_totals(h_, sf_now_ns(), &n, &bytes), 0);
  assert_int_equal(n, 2);
  assert_int_equal((int64_t)bytes, all);
  /* A pin on other rows would go over: refused, nothing changes. */
  submit(f, 12, "other", 0, t0, 10000);
  assert_int_equal(sf_done_wait(&f->done, 11), 11);
  assert_int_equal(
      add(f, "other", NULL, t0, t0 + 10 * NS, 3600 * NS, (uint64_t)all, &a),
      GTP_E_TOOBIG);
  assert_int_equal(a.total_before, (uint64_t)all);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM retention_pins"),
                   2);
}

typedef struct listed {
  int64_t ids[8];
  uint64_t bytes[8];
  int n;
} listed;

static int collect(void *ctx, const hold_row *row) {
  listed *l = ctx;
  if (l->n < 8) {
    l->ids[l->n] = row->id;
    l->bytes[l->n++] = row->bytes;
  }
  return 0;
}

static void test_store_hold__list_newest_first_and_expiry(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_both(f, &c);
  int64_t t0 = sf_now_ns();
  hold_added a;
  assert_int_equal(add(f, "a", NULL, t0, t0 + NS, 3600 * NS, 0, &a), 0);
  assert_int_equal(add(f, "b", NULL, t0, t0 + NS, 300000000LL, 0, &a), 0);
  assert_int_equal(add(f, "c", NULL, t0, t0 + NS, 3600 * NS, 0, &a), 0);
  listed l = {0};
  assert_int_equal(hold_list(h_, sf_now_ns(), collect, &l), 0);
  assert_int_equal(l.n, 3);
  assert_int_equal(l.ids[0], 3);
  assert_int_equal(l.ids[2], 1);
  sf_sleep_ms(400); /* b expired */
  memset(&l, 0, sizeof l);
  assert_int_equal(hold_list(h_, sf_now_ns(), collect, &l), 0);
  assert_int_equal(l.n, 2);
  assert_int_equal(l.ids[0], 3);
  assert_int_equal(l.ids[1], 1);
  assert_int_equal(hold_delete(h_, 2, sf_now_ns()), GTP_E_NOTFOUND);
  /* The next pin removes the expired row; ids are never reused. */
  assert_int_equal(add(f, "d", NULL, t0, t0 + NS, 3600 * NS, 0, &a), 0);
  assert_int_equal(a.id, 4);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT count(*) FROM retention_pins"),
                   3);
}

static void test_store_hold__schema_4_database_is_migrated(void **state) {
  fx *f = *state;
  store_config c = sf_config(&f->dir);
  open_both(f, &c);
  hold_close(h_);
  h_ = NULL;
  store_close(f->s);
  f->s = NULL;
  assert_int_equal(sf_sql_exec(f->dir.db,
                               "DROP TABLE retention_pins; UPDATE meta SET"
                               " value = '4' WHERE key = 'schema_version'"),
                   0);
  open_both(f, &c);
  assert_int_equal(sf_sql_int(f->dir.db, "SELECT value FROM meta WHERE key ="
                                         " 'schema_version'"),
                   STORE_SCHEMA_VERSION);
  hold_added a;
  int64_t t0 = sf_now_ns();
  assert_int_equal(add(f, "x", NULL, t0, t0 + NS, NS, 0, &a), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_store_hold__age_retention_keeps_only_pinned_windows, setup,
          teardown_hold),
      cmocka_unit_test_setup_teardown(
          test_store_hold__size_retention_skips_pinned_oldest, setup,
          teardown_hold),
      cmocka_unit_test_setup_teardown(
          test_store_hold__cap_refuses_and_changes_nothing, setup,
          teardown_hold),
      cmocka_unit_test_setup_teardown(
          test_store_hold__list_newest_first_and_expiry, setup, teardown_hold),
      cmocka_unit_test_setup_teardown(
          test_store_hold__schema_4_database_is_migrated, setup, teardown_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
