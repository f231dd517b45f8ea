/* test_store_rollup.c: ten-minute rollups of the summaries
 * (store/store_rollup.c) against the raw per-generation rows: the summary
 * through rollups equals the raw one for random windows, after commits,
 * retention deletes under a pin, and the migration of a database made
 * without rollups; the invariant check catches a wrong rollup; a commit's
 * rollup (taken from memory) keys on the session row's service, not the
 * HELLO's, on each of the commit's paths; a transaction of many keys
 * writes them in multi-row upserts; a held slot (rollup_hold_ms) is read
 * raw, written out at close or once idle, left to the rebuild after a
 * delete or a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store_fx.h"
#include "store_rollup.h"
#include "store_schema.h"
#include "store_search.h"

#define HOUR INT64_C(3600000000000)
#define MIN INT64_C(60000000000)
/* 2026-01-01 00:00 UTC plus 13 minutes: generations straddle hour edges. */
#define T0 (INT64_C(1767225600) * INT64_C(1000000000) + 13 * MIN)
#define NSESS 4
#define SPAN_H 6 /* hours of generations */
/* The slots that hold a generation a rollup takes. */
#define SLOTS_SQL                                                              \
  "SELECT count(DISTINCT start_ns / 600000000000) FROM generations"            \
  " WHERE end_ns >= start_ns"

static const char *const svcs[] = {"checkout", "search"};

/* Every session emits a generation every 20 minutes (offset by session) of
 * 5-15 minutes (span durations scale with it, so maxima differ), for
 * SPAN_H hours; one generation ends before it starts (a row the daemon
 * never writes, which a rollup must not hold). */
static size_t fill(fx *f, uint64_t *rng) {
  size_t before = f->done.n, n = 0;
  for (unsigned k = 0; k < NSESS; k++) {
    uint64_t g = 1;
    for (int64_t t = T0 + k * 7 * MIN; t < T0 + SPAN_H * HOUR; t += 20 * MIN) {
      sf_gen_opts o = {.session = 10 + k,
                       .gen = g++,
                       .start_ns = t,
                       .period_ns =
                           5 * MIN + (int64_t)(xorshift64star(rng) % 600) *
                                         INT64_C(1000000000),
                       .service = svcs[k % 2]};
      store_gen *sg = sf_gen_new(&o);
      if (k == 1 && g == 6)
        sg->end_ns = sg->start_ns - 1000;
      assert_int_equal(store_submit(f->s, sg), 0);
      n++;
    }
  }
  assert_int_equal(sf_done_wait(&f->done, before + n), before + n);
  return n;
}

/* --------------------------------------------------- summary comparison */

typedef struct rows {
  store_name_stats r[32];
  char names[32][32];
  size_t n;
} rows;

static int keep_row(void *ctx, const store_name_stats *ns) {
  rows *rs = ctx;
  assert_true(rs->n < 32 && ns->name_len < 32);
  rs->r[rs->n] = *ns;
  memcpy(rs->names[rs->n], ns->name, ns->name_len);
  rs->names[rs->n][ns->name_len] = 0;
  rs->r[rs->n].name = rs->names[rs->n];
  rs->n++;
  return 0;
}

static void summary(store_reader *r, store_summary_query q, int raw,
                    rows *out) {
  memset(out, 0, sizeof *out);
  q.raw = raw;
  uint64_t pending = 0;
  assert_int_equal(store_search_summary(r, &q, keep_row, out, &pending), 0);
}

/* 0 if the two answers are equal row for row, else the first row that
 * differs + 1. */
static size_t diff(const rows *a, const rows *b) {
  if (a->n != b->n)
    return 1 + (a->n < b->n ? a->n : b->n);
  for (size_t i = 0; i < a->n; i++) {
    const store_name_stats *x = &a->r[i], *y = &b->r[i];
    if (x->kind != y->kind || strcmp(x->name, y->name) != 0 ||
        x->count != y->count || x->total_ns != y->total_ns ||
        x->min_ns != y->min_ns || x->max_ns != y->max_ns ||
        x->gens != y->gens || memcmp(x->hist, y->hist, sizeof x->hist) != 0)
      return i + 1;
  }
  return 0;
}

/* Compares rollup and raw answers over random windows (some on exact hour
 * edges), by service, fleet-wide and by name or prefix. Returns the number
 * of windows whose answer used at least one whole hour and had rows. */
static int compare_windows(fx *f, uint64_t *rng, int rounds) {
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  int whole = 0;
  for (int i = 0; i < rounds; i++) {
    store_summary_query q;
    memset(&q, 0, sizeof q);
    int64_t lo = T0 - HOUR, span = (SPAN_H + 2) * HOUR;
    q.from_ns = lo + (int64_t)(xorshift64star(rng) % (uint64_t)span);
    q.to_ns = q.from_ns + (int64_t)(xorshift64star(rng) % (uint64_t)span);
    if (i % 4 == 1) { /* exact hour edges (slot edges too) */
      q.from_ns -= q.from_ns % HOUR;
      q.to_ns -= q.to_ns % HOUR;
    }
    if (i % 3 == 1)
      q.service = svcs[i % 2];
    if (i % 5 == 2)
      q.name = "request";
    if (i % 5 == 3) {
      q.name = "h";
      q.prefix = 1;
    }
    rows a, b;
    summary(r, q, 0, &a);
    summary(r, q, 1, &b);
    size_t d = diff(&a, &b);
    if (d)
      fail_msg("window %d [%lld, %lld) service %s name %s: row %zu differs"
               " (%zu vs %zu rows)",
               i, (long long)q.from_ns, (long long)q.to_ns,
               q.service ? q.service : "-", q.name ? q.name : "-", d - 1, a.n,
               b.n);
    int64_t h0 = (q.from_ns + HOUR - 1) / HOUR, h1 = q.to_ns / HOUR;
    if (h1 > h0 && a.n > 0)
      whole++;
  }
  store_reader_close(r);
  return whole;
}

/* Invariant 1 over every clean hour, on a connection of the test's own. */
static int check_all(fx *f) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open_v2(f->dir.db, &db, SQLITE_OPEN_READONLY, NULL),
                   SQLITE_OK);
  int rc = store_rollup_check_invariants(db, -1);
  sqlite3_close(db);
  return rc;
}

static int64_t q(fx *f, const char *sql) {
  return sf_sql_int(f->dir.db, sql);
}

/* The store closed, so that the test may edit its file. */
static void close_store(fx *f) {
  store_close(f->s);
  f->s = NULL;
}

/* The store opened again on c, its done() count from zero. */
static void reopen(fx *f, store_config *c) {
  f->done.n = 0;
  open_store(f, c);
}

/* Each test's start: the store opened on the fixture's directory with the
 * fixture's config (kept in *c for a reopen). */
static void open_fresh(fx *f, store_config *c) {
  *c = sf_config(&f->dir);
  open_store(f, c);
}

/* ... and filled from *rng = seed (the windows draw on from there).
 * Returns fill's count. */
static size_t open_filled(fx *f, store_config *c, uint64_t *rng,
                          uint64_t seed) {
  open_fresh(f, c);
  *rng = seed;
  return fill(f, rng);
}

/* ------------------------------------------------------------------ tests */

static void test_store_rollup__commit_keeps_rollups_equal_to_raw(void **state) {
  fx *f = *state;
  store_config c;
  uint64_t rng;
  open_filled(f, &c, &rng, 42);
  assert_true(q(f, "SELECT count(*) FROM sum_slots") > 0);
  assert_int_equal(q(f, "SELECT count(DISTINCT slot) FROM sum_slots"),
                   q(f, SLOTS_SQL));
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots_dirty"), 0);
  /* Every generation with rows is in exactly one rollup (the one that
   * ends before it starts in none). */
  assert_int_equal(q(f, "SELECT sum(gens) FROM sum_slots WHERE"
                        " name = 'request'"),
                   q(f, "SELECT count(*) FROM sum_names WHERE"
                        " name = 'request'") -
                       1);
  assert_int_equal(check_all(f), 0);
  assert_true(compare_windows(f, &rng, 200) > 20);
}

/* The comparison and the invariant check can fail: a rollup row off by one
 * is seen by both. */
static void test_store_rollup__a_wrong_rollup_is_caught(void **state) {
  fx *f = *state;
  store_config c;
  uint64_t rng;
  open_filled(f, &c, &rng, 7);
  close_store(f);
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "UPDATE sum_slots SET count = count + 1, max_ns = max_ns + 1"
                  " WHERE slot ="
                  " (SELECT min(slot) + 2 FROM sum_slots)"
                  " AND name = 'request'"),
      SQLITE_OK);
  assert_int_equal(check_all(f), 1);
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  store_summary_query sq;
  memset(&sq, 0, sizeof sq);
  sq.from_ns = T0 - HOUR;
  sq.to_ns = T0 + (SPAN_H + 1) * HOUR;
  rows a, b;
  summary(r, sq, 0, &a);
  summary(r, sq, 1, &b);
  assert_int_not_equal(diff(&a, &b), 0);
  /* Marked dirty, the slot is read raw again. */
  assert_int_equal(sf_sql_exec(f->dir.db,
                               "INSERT INTO sum_slots_dirty(slot, age)"
                               " SELECT min(slot) + 2, 0 FROM sum_slots"),
                   SQLITE_OK);
  summary(r, sq, 0, &a);
  assert_int_equal(diff(&a, &b), 0);
  store_reader_close(r);
}

/* Retention deletes the oldest hours a chunk at a time, except what a pin
 * holds: the touched hours turn dirty, answers stay equal to raw, and the
 * tick rebuilds them from the rows left. */
static void
test_store_rollup__retention_under_a_pin_rebuilds_slots(void **state) {
  fx *f = *state;
  store_config c;
  uint64_t rng;
  size_t n = open_filled(f, &c, &rng, 99);
  close_store(f);
  /* A pin on one session's generations of the second hour. */
  char sql[512];
  snprintf(sql, sizeof sql,
           "INSERT INTO retention_pins(session, from_ns, to_ns, reason,"
           " created_ns, expires_ns) SELECT session, %lld, %lld, 'test', 1,"
           " 9223372036854775807 FROM sessions WHERE service = 'search'"
           " LIMIT 1",
           (long long)(T0 + HOUR), (long long)(T0 + 2 * HOUR));
  assert_int_equal(sf_sql_exec(f->dir.db, sql), SQLITE_OK);
  /* Retain what ended in the last 3.5 hours of the fixture's day. */
  c.retain_ns = sf_now_ns() - (T0 + SPAN_H * HOUR - 7 * HOUR / 2);
  reopen(f, &c);
  store_stats st;
  assert_true(SF_WAIT_STATS(f->s, st, 20000, st.retention_deleted_gens > 0));
  int64_t left = q(f, "SELECT count(*) FROM generations");
  assert_true(left > 0 && (size_t)left < n);
  /* The pin held its session's generations of the second hour; the
   * others of that hour are gone. */
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations g JOIN sessions s ON"
           " s.id = g.session_id WHERE g.end_ns < %lld AND s.session %s"
           " (SELECT session FROM retention_pins)",
           (long long)(T0 + 2 * HOUR), "=");
  assert_true(q(f, sql) > 0);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM generations g JOIN sessions s ON"
           " s.id = g.session_id WHERE g.end_ns < %lld AND s.session %s"
           " (SELECT session FROM retention_pins)",
           (long long)(T0 + 2 * HOUR), "<>");
  assert_int_equal(q(f, sql), 0);
  assert_true(compare_windows(f, &rng, 120) > 0);
  /* Settled, the dirty hours are rebuilt: none left, all exact. */
  assert_true(SF_WAIT_STATS(f->s, st, 30000,
                            st.rollup_pending_slots == 0 &&
                                st.rollup_rebuilt_slots > 0));
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots_dirty"), 0);
  /* Slots now empty have no rollup rows left. */
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots h WHERE NOT EXISTS"
                        " (SELECT 1 FROM generations g WHERE g.start_ns >="
                        " h.slot * 600000000000 AND g.start_ns <"
                        " (h.slot + 1) * 600000000000)"),
                   0);
  assert_int_equal(check_all(f), 0);
  assert_true(compare_windows(f, &rng, 120) > 0);
}

/* A schema 5 database (no rollups) gets every slot marked at open; answers
 * equal raw while the rollups are built in the background, and after. */
static void
test_store_rollup__schema_5_is_rolled_up_in_background(void **state) {
  fx *f = *state;
  store_config c;
  uint64_t rng;
  open_filled(f, &c, &rng, 5);
  close_store(f);
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "DROP TRIGGER generations_slot_del; DROP TABLE sum_slots;"
                  " DROP TABLE sum_slots_dirty;"
                  " UPDATE meta SET value = '5' WHERE key = 'schema_version'"),
      SQLITE_OK);
  reopen(f, &c);
  assert_int_equal(q(f, "SELECT value FROM meta WHERE key = 'schema_version'"),
                   STORE_SCHEMA_VERSION);
  store_stats st;
  store_stats_get(f->s, &st);
  /* Marked at open (some may be rebuilt by the first tick already). */
  int64_t nslots = q(f, "SELECT count(DISTINCT start_ns / 600000000000)"
                        " FROM generations");
  assert_true(nslots > 30);
  assert_true(st.rollup_pending_slots + st.rollup_rebuilt_slots ==
              (uint64_t)nslots);
  assert_true(compare_windows(f, &rng, 60) > 0);
  assert_true(SF_WAIT_STATS(f->s, st, 30000,
                            st.rollup_pending_slots == 0 &&
                                st.rollup_rebuilt_slots == (uint64_t)nslots));
  assert_int_equal(check_all(f), 0);
  assert_int_equal(q(f, "SELECT count(DISTINCT slot) FROM sum_slots"),
                   q(f, SLOTS_SQL));
  assert_true(compare_windows(f, &rng, 120) > 20);
  /* New commits add to the built rollups. */
  sf_gen_opts o = {.session = 30, .gen = 1, .start_ns = T0 + 2 * HOUR};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  assert_int_equal(check_all(f), 0);
}

/* The commit takes a generation's rollup from memory with the service of
 * its session row (store_rollup_add_summary), which the first HELLO set:
 * a later HELLO naming another service for the same session changes
 * neither the row nor the rollup, whether the store knows the session's
 * id (the check path) or not (after a reopen: the upsert path). A row whose
 * service is too long to copy takes the read-back path. Each time, the
 * rollups equal the raw rows. */
static void
test_store_rollup__a_session_rolls_up_under_its_row_service(void **state) {
  fx *f = *state;
  store_config c;
  open_fresh(f, &c);
  sf_gen_opts o = {
      .session = 40, .gen = 1, .start_ns = T0, .service = "checkout"};
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  o.service = "search";                  /* the same session, another service */
  for (o.gen = 2; o.gen <= 3; o.gen++) { /* the id is cached: check path */
    o.start_ns = T0 + (int64_t)o.gen * MIN;
    assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  }
  /* Session 41's first generation ends before it starts: no rollup. */
  sf_gen_opts o41 = {
      .session = 41, .gen = 1, .start_ns = T0, .service = "long"};
  store_gen *g41 = sf_gen_new(&o41);
  g41->end_ns = g41->start_ns - 1000;
  assert_int_equal(sf_commit_one(f->s, &f->done, g41), 0);
  close_store(f);
  /* Its row's service made longer than any HELLO's. */
  assert_int_equal(
      sf_sql_exec(f->dir.db, "UPDATE sessions SET service ="
                             " printf('%.2000c', 'x') WHERE service = 'long'"),
      SQLITE_OK);
  reopen(f, &c); /* no id is cached any more: upsert path */
  o.gen = 4;
  o.start_ns = T0 + 4 * MIN;
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o)), 0);
  o41.gen = 2; /* the read-back path */
  assert_int_equal(sf_commit_one(f->s, &f->done, sf_gen_new(&o41)), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots WHERE"
                        " service = 'search'"),
                   0);
  assert_int_equal(q(f, "SELECT sum(gens) FROM sum_slots WHERE"
                        " service = 'checkout' AND name = 'request'"),
                   4);
  assert_int_equal(q(f, "SELECT sum(gens) FROM sum_slots WHERE"
                        " length(service) = 2000 AND name = 'request'"),
                   1);
  assert_int_equal(check_all(f), 0);
}

/* One transaction of 41 sessions of 41 services (82 keys: two names each)
 * writes its rollups in multi-row upserts of 32, 8 and 1 keys, and a
 * second one adds to every row: the rollups equal the raw rows after
 * both (invariant 1) and hold every generation once. */
static void test_store_rollup__many_keys_in_one_transaction(void **state) {
  fx *f = *state;
  enum { N = 41 };
  store_config c = sf_config(&f->dir);
  c.batch_max = N;
  c.linger_ms = 10000; /* one transaction per round of N */
  open_store(f, &c);
  static char svc[N][16];
  for (uint64_t gen = 1; gen <= 2; gen++) {
    size_t before = f->done.n;
    for (unsigned k = 0; k < N; k++) {
      snprintf(svc[k], sizeof svc[k], "svc-%u", k);
      sf_gen_opts o = {.session = 100 + k,
                       .gen = gen,
                       .start_ns = T0 + (int64_t)gen * INT64_C(1000000000),
                       .service = svc[k]};
      assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
    }
    assert_int_equal(sf_done_wait(&f->done, before + N), before + N);
  }
  /* A transaction per round (a slow machine may split one): no batch
   * failed and was retried one generation at a time, which would write
   * its keys one by one and take 41 transactions. */
  store_stats st;
  store_stats_get(f->s, &st);
  assert_true(st.transactions >= 2 && st.transactions <= 6);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots"), 2 * N);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots WHERE gens <> 2"), 0);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots_dirty"), 0);
  assert_int_equal(check_all(f), 0);
}

/* ------------------------------------------------------------ held slots */

/* Rounds of N generations (one transaction each) from N sessions of four
 * services, all starting in the slot of T0 (a fleet's current ten
 * minutes); gen numbers from gen0. */
#define HOLD_N 8
static void hold_rounds(fx *f, uint64_t gen0, int rounds) {
  static const char *const hsvc[] = {"a", "b", "c", "d"};
  for (int r = 0; r < rounds; r++) {
    size_t before = f->done.n;
    uint64_t gen = gen0 + (uint64_t)r;
    for (unsigned k = 0; k < HOLD_N; k++) {
      sf_gen_opts o = {.session = 200 + k,
                       .gen = gen,
                       .start_ns = T0 + (int64_t)gen * INT64_C(1000000000),
                       .service = hsvc[k % 4]};
      assert_int_equal(store_submit(f->s, sf_gen_new(&o)), 0);
    }
    assert_int_equal(sf_done_wait(&f->done, before + HOLD_N), before + HOLD_N);
  }
}

static store_config hold_config(fx *f, uint32_t hold_ms) {
  store_config c = sf_config(&f->dir);
  c.batch_max = HOLD_N;
  /* A round per transaction (its N are ready at once); the maintenance
   * ticks run between transactions, after the linger. */
  c.linger_ms = 200;
  c.rollup_hold_ms = hold_ms;
  return c;
}

/* Rollup and raw answers over the held slot and the hours around it. */
static void hold_answers_equal(fx *f) {
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), 0);
  store_summary_query sq;
  memset(&sq, 0, sizeof sq);
  sq.from_ns = T0 - T0 % HOUR - HOUR;
  sq.to_ns = T0 - T0 % HOUR + 2 * HOUR;
  rows a, b;
  summary(r, sq, 0, &a);
  summary(r, sq, 1, &b);
  assert_true(b.n > 0);
  assert_int_equal(diff(&a, &b), 0);
  store_reader_close(r);
}

/* Waits (30 s at most: a rebuild waits for settled ticks) until sql reads
 * want. */
static int64_t wait_for(fx *f, const char *sql, int64_t want) {
  int64_t v = q(f, sql);
  for (int i = 0; i < 600 && v != want; i++) {
    struct timespec d = {0, 50 * 1000000L};
    nanosleep(&d, NULL);
    v = q(f, sql);
  }
  return v;
}

#define HELD_SQL "SELECT count(*) FROM sum_slots_dirty WHERE age < 0"
#define REQ_GENS_SQL "SELECT sum(gens) FROM sum_slots WHERE name = 'request'"

/* A slot every transaction adds to is held: its rollups stay in memory
 * (none written), it is marked so readers take its raw rows (answers
 * unchanged), it is not a dirty slot waiting for a rebuild, and closing
 * writes it out once, equal to the raw rows. */
static void
test_store_rollup__held_slot_is_read_raw_and_written_at_close(void **state) {
  fx *f = *state;
  store_config c = hold_config(f, 600000);
  open_store(f, &c);
  hold_rounds(f, 1, 3);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots"), 0);
  assert_int_equal(q(f, HELD_SQL), 1);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots_dirty"), 1);
  store_stats st;
  store_stats_get(f->s, &st);
  assert_true(st.transactions >= 3 && st.transactions <= 9);
  assert_int_equal(st.rollup_pending_slots, 0);
  assert_int_equal(check_all(f), 0);
  hold_answers_equal(f);
  close_store(f);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots_dirty"), 0);
  assert_int_equal(q(f, REQ_GENS_SQL), 3 * HOLD_N);
  assert_int_equal(check_all(f), 0);
  hold_answers_equal(f);
}

/* Once no transaction added to a held slot for the hold time, the
 * maintenance tick writes it out and unmarks it, the store still open. */
static void
test_store_rollup__idle_held_slot_is_written_by_the_tick(void **state) {
  fx *f = *state;
  store_config c = hold_config(f, 1);
  open_store(f, &c);
  hold_rounds(f, 1, 2);
  assert_int_equal(wait_for(f, "SELECT count(*) FROM sum_slots_dirty", 0), 0);
  assert_int_equal(q(f, REQ_GENS_SQL), 2 * HOLD_N);
  assert_int_equal(check_all(f), 0);
  hold_answers_equal(f);
}

/* A delete in a held slot (retention, or by hand) marks it dirty: the
 * held sums are dropped, not written, because the rebuild takes every
 * remaining row; so the slot is rebuilt once, exactly, and closing adds
 * nothing twice. */
static void test_store_rollup__a_delete_in_a_held_slot_leaves_it_to_the_rebuild(
    void **state) {
  fx *f = *state;
  store_config c = hold_config(f, 600000);
  open_store(f, &c);
  hold_rounds(f, 1, 2);
  assert_int_equal(q(f, HELD_SQL), 1);
  assert_int_equal(
      sf_sql_exec(f->dir.db,
                  "DELETE FROM payloads WHERE seq = (SELECT min(seq) FROM"
                  " generations); DELETE FROM generations WHERE seq ="
                  " (SELECT min(seq) FROM generations)"),
      SQLITE_OK);
  assert_int_equal(q(f, HELD_SQL), 0); /* the trigger made it dirty */
  hold_rounds(f, 3, 1);
  hold_answers_equal(f);
  assert_int_equal(wait_for(f, "SELECT count(*) FROM sum_slots_dirty", 0), 0);
  assert_int_equal(q(f, REQ_GENS_SQL), 3 * HOLD_N - 1);
  assert_int_equal(check_all(f), 0);
  close_store(f);
  assert_int_equal(q(f, REQ_GENS_SQL), 3 * HOLD_N - 1);
  assert_int_equal(check_all(f), 0);
  hold_answers_equal(f);
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  assert_non_null(a);
  assert_non_null(b);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0)
    assert_int_equal(fwrite(buf, 1, n, b), n);
  fclose(a);
  assert_int_equal(fclose(b), 0);
}

/* The held sums live in memory only: a writer killed while holding a slot
 * (its files as they were, copied while it idled) leaves the mark, which
 * the next open turns dirty, and the rebuild makes the slot exact. */
static void
test_store_rollup__held_sums_lost_in_a_crash_are_rebuilt(void **state) {
  fx *f = *state;
  store_config c = hold_config(f, 600000);
  open_store(f, &c);
  hold_rounds(f, 1, 2);
  assert_int_equal(q(f, HELD_SQL), 1);
  char wal[160], keep[160], keep_wal[160], shm[160];
  snprintf(wal, sizeof wal, "%s-wal", f->dir.db);
  snprintf(shm, sizeof shm, "%s-shm", f->dir.db);
  snprintf(keep, sizeof keep, "%s.crash", f->dir.db);
  snprintf(keep_wal, sizeof keep_wal, "%s.crash-wal", f->dir.db);
  copy_file(f->dir.db, keep);
  copy_file(wal, keep_wal);
  close_store(f); /* writes the slot out; the copy is from before */
  assert_int_equal(rename(keep, f->dir.db), 0);
  assert_int_equal(rename(keep_wal, wal), 0);
  unlink(shm);
  assert_int_equal(q(f, "SELECT count(*) FROM sum_slots"), 0);
  assert_int_equal(q(f, HELD_SQL), 1);
  reopen(f, &c);
  assert_int_equal(q(f, HELD_SQL), 0); /* dirty now: read raw */
  hold_answers_equal(f);
  assert_int_equal(wait_for(f, "SELECT count(*) FROM sum_slots_dirty", 0), 0);
  assert_int_equal(q(f, REQ_GENS_SQL), 2 * HOLD_N);
  assert_int_equal(check_all(f), 0);
  hold_answers_equal(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_store_rollup__commit_keeps_rollups_equal_to_raw, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__a_wrong_rollup_is_caught, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__retention_under_a_pin_rebuilds_slots, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__schema_5_is_rolled_up_in_background, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__a_session_rolls_up_under_its_row_service, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__many_keys_in_one_transaction, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__held_slot_is_read_raw_and_written_at_close, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__idle_held_slot_is_written_by_the_tick, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__a_delete_in_a_held_slot_leaves_it_to_the_rebuild,
          setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_store_rollup__held_sums_lost_in_a_crash_are_rebuilt, setup,
          teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
