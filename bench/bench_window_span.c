/* bench_window_span.c: a window query over a database that holds (or held)
 * one absurd generation, a CLOCK spanning [0, INT64_MAX].
 *
 * Window queries scan the (service, start) index from `from - max span`;
 * before schema 3 max span was meta.max_span_ns, the longest span ever
 * committed, so after one absurd row every later query scanned every row
 * of the service, even once retention had deleted that row. Now the bound
 * is the longest span kept (schemas 3-9: an index on end - start; 10: the
 * bound of each 73-minute bucket, gen_spans, dropped with the bucket's last
 * row) and gentraced refuses spans over --max-gen-span. Same run, same
 * rows:
 *   baseline old_meta_bound: the window SQL with the old bound (INT64_MAX)
 *   value: store_read_window after retention deleted the absurd row
 * Also printed: store_read_window while the absurd row is still there (it
 * must scan: the row overlaps every window).
 *
 *   bench/bench_window_span [ROWS]   (default 200000)
 */
#include "config.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "store_read.h"
#include "store_schema.h"

#define NS 1000000000ll
#define T0 (1767225600ll * NS)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void must(int rc, sqlite3 *db, const char *what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    fprintf(stderr, "bench_window_span: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
  }
}

static void done_cb(void *ctx, store_gen *g) {
  (void)ctx;
  store_gen_free(g);
}

static int count_cb(void *ctx, const store_gen_row *row) {
  (void)row;
  (*(int64_t *)ctx)++;
  return 0;
}

/* Milliseconds per store_read_window over the last 10 s of the rows. */
static double window_ms(const char *path, int64_t rows, int reps,
                        int64_t *found) {
  store_reader *r;
  char *cause = NULL;
  if (store_reader_open(path, &r, &cause) != 0) {
    fprintf(stderr, "bench_window_span: %s\n", cause ? cause : "open");
    exit(1);
  }
  store_window_query q = {NULL, "svc", NULL, T0 + (rows - 10) * NS,
                          T0 + rows * NS};
  double t0 = now_s();
  for (int i = 0; i < reps; i++) {
    *found = 0;
    if (store_read_window(r, &q, count_cb, found) != 0)
      exit(1);
  }
  double ms = (now_s() - t0) * 1e3 / reps;
  store_reader_close(r);
  return ms;
}

/* The same window with the bound the old reader used after the absurd row:
 * start_ns >= from - INT64_MAX, i.e. from the first row of the service. */
static double old_bound_ms(sqlite3 *db, int64_t rows, int reps) {
  sqlite3_stmt *st;
  must(sqlite3_prepare_v2(
           db,
           "SELECT count(*) FROM sessions s JOIN generations g"
           " ON g.session_id = s.id WHERE s.service = 'svc'"
           " AND g.start_ns < ?2 AND g.start_ns >= ?3 AND g.end_ns > ?1",
           -1, &st, NULL),
       db, "prepare");
  int64_t from = T0 + (rows - 10) * NS;
  double t0 = now_s();
  for (int i = 0; i < reps; i++) {
    sqlite3_bind_int64(st, 1, from);
    sqlite3_bind_int64(st, 2, T0 + rows * NS);
    sqlite3_bind_int64(st, 3, INT64_MIN);
    must(sqlite3_step(st), db, "step");
    sqlite3_reset(st);
  }
  double ms = (now_s() - t0) * 1e3 / reps;
  sqlite3_finalize(st);
  return ms;
}

int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 200000;
  char dir[] = "/tmp/gt-bench-span-XXXXXX";
  if (mkdtemp(dir) == NULL)
    return 1;
  char path[128];
  snprintf(path, sizeof path, "%s/span.db", dir);

  /* The schema as gentraced creates it. */
  store_config cfg = {0};
  cfg.path = path;
  store *s;
  char *cause = NULL;
  if (store_open(&cfg, done_cb, NULL, &s, &cause) != 0) {
    fprintf(stderr, "bench_window_span: %s\n", cause ? cause : "open");
    return 1;
  }
  store_close(s);

  /* rows one-second generations of one service, then the absurd one. */
  sqlite3 *db;
  must(sqlite3_open(path, &db), db, "open");
  must(sqlite3_exec(db,
                    "BEGIN; INSERT INTO sessions(session, service, host, pid,"
                    " process_start_ns, agent_version, first_seen_ns,"
                    " last_seen_ns) VALUES('00', 'svc', 'h', 1, 0, '0', 0, 0)",
                    NULL, NULL, NULL),
       db, "session");
  sqlite3_stmt *ins;
  must(sqlite3_prepare_v2(
           db,
           "INSERT INTO generations(session_id, gen, start_ns, end_ns, events,"
           " bytes, stored_bytes, dropped, evicted, rejected, codec,"
           " committed_ns) VALUES(1, ?1, ?2, ?3, 1, 1, 1, 0, 0, 0, 'none', 0)",
           -1, &ins, NULL),
       db, "prepare");
  for (int64_t i = 0; i <= rows; i++) {
    int64_t st = i < rows ? T0 + i * NS : 0;
    int64_t en = i < rows ? st + NS : INT64_MAX;
    sqlite3_bind_int64(ins, 1, i + 1);
    sqlite3_bind_int64(ins, 2, st);
    sqlite3_bind_int64(ins, 3, en);
    must(sqlite3_step(ins), db, "insert");
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  /* Rows written by hand bring their span buckets (schema 10). */
  must(sqlite3_exec(db, STORE_SPANS_FILL_SQL "COMMIT", NULL, NULL, NULL), db,
       "commit");

  int reps = 20;
  int64_t found_with = 0, found_after = 0;
  double with_row = window_ms(path, rows, reps, &found_with);
  /* Retention deletes the absurd row (it is the oldest by start). */
  must(sqlite3_exec(db, "DELETE FROM generations WHERE start_ns = 0", NULL,
                    NULL, NULL),
       db, "delete");
  double old = old_bound_ms(db, rows, reps);
  double after = window_ms(path, rows, reps * 10, &found_after);
  sqlite3_close(db);

  printf("window over %" PRId64 " rows: %.3f ms with the absurd row (%" PRId64
         " found), %.3f ms after it was deleted (%" PRId64
         " found); old bound %.3f ms\n",
         rows, with_row, found_with, after, found_after, old);
  double ratio = after / old;
  printf("BENCH id=WINDOW_SPAN value=%.3f unit=ms/query baseline="
         "old_meta_bound:%.3f ratio=%.4f bar=<=0.1 pass=%d\n",
         after, old, ratio, ratio <= 0.1);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    return 1;
  return 0;
}
