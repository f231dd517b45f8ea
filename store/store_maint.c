/* store_maint.c: what the store thread does between batches and on its
 * one-second tick (store.c's design note): pending rejected counts,
 * retention by age and by size below the lowest pin (store.c invariant 6),
 * returning freed pages and emptying the WAL, the disk-full probe, the
 * summary backfill and the rebuild of slot rollups. Thread: store only
 * (store.c invariant 1). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "store_pin.h"
#include "store_writer.h"

/* Maintenance tick: retention, rejected counts and the disk-full probe run at
 * most this often when idle (and retention after commits at this pace). */
#define STORE_TICK_NS (NS_PER_SEC)
/* Checkpoints wait less: a TRUNCATE checkpoint needs every reader gone, and
 * the store thread must not stall ingest for it; the next one catches up. */
#define STORE_CKPT_BUSY_MS 100
/* Generations summarized per maintenance tick by the backfill: bounded so
 * the ingest's commits never wait long behind it. */
#define STORE_BACKFILL_PER_TICK 256
/* Retention deletes in chunks so no single transaction grows large. */
#define STORE_DELETE_CHUNK 1024
/* Freed pages beyond this are returned to the file system. */
#define STORE_VACUUM_BYTES (8ull << 20)
#define STORE_PROBE_BYTES (1 << 20)
/* Size retention deletes down to max - max/STORE_SIZE_SLACK. */
#define STORE_SIZE_SLACK 16
/* Below this much free file-system space the disk still counts as full. */
#define STORE_MIN_FREE_BYTES (8ull << 20)

/* Writes the rejected counts noted by store_note_rejected. Counts for a
 * session without a row yet stay pending until its first commit (or expire:
 * invariant 10). The snapshot is taken under the index's lock and written
 * without it (store_note_rejected may run meanwhile); what was written is
 * subtracted once COMMIT returned. */
static void flush_rejected(store *s) {
  size_t m = 0;
  store_index_rej *list = store_index_rejected(s->idx, &m);
  if (list == NULL)
    return;
  int rc = step_done(s->st[ST_BEGIN]);
  for (size_t i = 0; rc == SQLITE_OK && i < m; i++) {
    char hex[33];
    gtp_session_hex(list[i].session, hex);
    sqlite3_stmt *st = s->st[ST_REJECTED];
    sqlite3_bind_text(st, 1, hex, 32, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, (int64_t)list[i].gens);
    sqlite3_bind_int64(st, 3, (int64_t)list[i].events);
    rc = step_done(st);
    list[i].applied = rc == SQLITE_OK && sqlite3_changes(s->db) > 0;
  }
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  if (rc != SQLITE_OK) {
    rollback(s);
    if (rc_is_full(rc))
      stats_set_disk_full(s, 1);
    free(list);
    return;
  }
  store_index_rejected_done(s->idx, list, m);
  free(list);
}

static void note_deleted(store *s, uint64_t n) {
  pthread_mutex_lock(&s->st_lock);
  s->stats.retention_deleted_gens += n;
  pthread_mutex_unlock(&s->st_lock);
}

/* Runs the two DELETEs of one chunk (payloads first: they are found through
 * the generations rows) in one transaction. Returns the number of
 * generations deleted, or < 0. */
static int64_t delete_chunk(store *s, sqlite3_stmt *pay, sqlite3_stmt *gen) {
  int rc = step_done(s->st[ST_BEGIN]);
  if (rc == SQLITE_OK)
    rc = step_done(pay);
  int64_t n = 0;
  if (rc == SQLITE_OK) {
    rc = step_done(gen);
    n = sqlite3_changes(s->db);
  }
  if (rc == SQLITE_OK)
    rc = step_done(s->st[ST_COMMIT]);
  if (rc != SQLITE_OK) {
    rollback(s);
    if (!rc_is_full(rc))
      store_log_error(s, "retention", rc);
    return -1;
  }
  return n;
}

/* Deletes generations that ended before now - retain, below the lowest pin
 * (invariant 6). Returns how many were deleted. */
static uint64_t retain_by_age(store *s) {
  if (s->cfg.retain_ns <= 0)
    return 0;
  int64_t now = now_ns(CLOCK_REALTIME);
  int64_t cutoff = now - s->cfg.retain_ns;
  uint64_t total = 0;
  for (;;) {
    int64_t pin = store_pins_min(s->cfg.pins);
    sqlite3_stmt *p = s->st[ST_AGE_DEL_PAYLOADS];
    sqlite3_stmt *g = s->st[ST_AGE_DEL_GENS];
    sqlite3_stmt *both[2] = {p, g};
    for (int i = 0; i < 2; i++) {
      sqlite3_bind_int64(both[i], 1, cutoff);
      sqlite3_bind_int64(both[i], 2, pin);
      sqlite3_bind_int64(both[i], 3, STORE_DELETE_CHUNK);
      sqlite3_bind_int64(both[i], 4,
                         now); /* one instant (store.c invariant 14) */
    }
    int64_t n = delete_chunk(s, p, g);
    if (n <= 0)
      break;
    total += (uint64_t)n;
    note_deleted(s, (uint64_t)n);
    /* After a long downtime there may be millions to delete: leave the
     * rest to the next tick so queued commits are not held up behind it. */
    if (n < STORE_DELETE_CHUNK || total >= 16 * STORE_DELETE_CHUNK)
      break;
  }
  return total;
}

/* Returns freed pages to the file system and empties the WAL so the files
 * shrink. force: do both even below the thresholds. */
static void reclaim(store *s, int force) {
  int64_t page = pragma_int(s->db, "PRAGMA page_size");
  int64_t freel = pragma_int(s->db, "PRAGMA freelist_count");
  if (page > 0 && freel > 0 &&
      (force || (uint64_t)(freel * page) >= STORE_VACUUM_BYTES))
    exec_sql(s->db, "PRAGMA incremental_vacuum");
  if (force || file_size(s->wal_path) > STORE_WAL_TARGET) {
    sqlite3_busy_timeout(s->db, STORE_CKPT_BUSY_MS);
    sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL,
                              NULL);
    sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
  }
}

/* Deletes the oldest whole generations (lowest seq, below the lowest pin)
 * until main db + WAL fit max_db_bytes, or nothing more may be deleted.
 * It deletes down to a little below the limit (STORE_SIZE_SLACK) so that a
 * database at its limit pays the delete + checkpoint once per few MB of
 * ingest, not after every transaction. Sets s->size_stuck when pins (or an
 * empty table) keep it over the limit, so commits do not retry until the
 * next tick. */
static uint64_t retain_by_size(store *s) {
  uint64_t max = s->cfg.max_db_bytes;
  s->size_stuck = 0;
  if (max == 0)
    return 0;
  uint64_t size = db_bytes(s);
  if (size <= max)
    return 0;
  reclaim(s, 1); /* freed pages or a full WAL may be all that is over */
  size = db_bytes(s);
  if (size <= max)
    return 0;
  uint64_t target = max - max / STORE_SIZE_SLACK;
  uint64_t total = 0;
  for (int round = 0; round < 64 && size > target; round++) {
    uint64_t excess = size - target, acc = 0;
    int64_t pin = store_pins_min(s->cfg.pins), cut = 0;
    int64_t now =
        now_ns(CLOCK_REALTIME); /* one instant (store.c invariant 14) */
    sqlite3_stmt *st = s->st[ST_SIZE_SCAN];
    sqlite3_bind_int64(st, 1, pin);
    sqlite3_bind_int64(st, 2, STORE_DELETE_CHUNK);
    sqlite3_bind_int64(st, 3, now);
    while (acc < excess && sqlite3_step(st) == SQLITE_ROW) {
      cut = sqlite3_column_int64(st, 0);
      /* A row costs a little beyond its blob: count it, or tiny
       * generations would take many rounds. */
      acc += (uint64_t)sqlite3_column_int64(st, 1) + 128;
    }
    sqlite3_reset(st);
    if (cut == 0)
      break; /* nothing deletable: all pinned, or the database is empty */
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_PAYLOADS], 1, cut);
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_GENS], 1, cut);
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_PAYLOADS], 2, now);
    sqlite3_bind_int64(s->st[ST_SIZE_DEL_GENS], 2, now);
    int64_t n =
        delete_chunk(s, s->st[ST_SIZE_DEL_PAYLOADS], s->st[ST_SIZE_DEL_GENS]);
    if (n < 0)
      break;
    total += (uint64_t)n;
    note_deleted(s, (uint64_t)n);
    reclaim(s, 1);
    size = db_bytes(s);
  }
  s->size_stuck = size > max;
  return total;
}

/* Disk-full probe: a real committed write of STORE_PROBE_BYTES, then its
 * removal. The flag clears only when both commit and the file system has
 * room beyond the probe. */
static void probe_disk(store *s) {
  char sql[160];
  snprintf(sql, sizeof sql,
           "INSERT OR REPLACE INTO meta(key, value)"
           " VALUES('disk_probe', zeroblob(%d))",
           STORE_PROBE_BYTES);
  int rc = exec_sql(s->db, sql);
  int rc2 = exec_sql(s->db, "DELETE FROM meta WHERE key = 'disk_probe'");
  if (rc != SQLITE_OK || rc2 != SQLITE_OK)
    return;
  struct statvfs vfs;
  char *dir = strdup(s->path);
  if (!dir)
    return;
  char *slash = strrchr(dir, '/');
  const char *d = ".";
  if (slash) {
    slash[slash == dir ? 1 : 0] = '\0';
    d = dir;
  }
  int room = statvfs(d, &vfs) != 0 ||
             (uint64_t)vfs.f_bavail * vfs.f_frsize >= STORE_MIN_FREE_BYTES;
  free(dir);
  if (room)
    stats_set_disk_full(s, 0);
}

/* A progress line (not an error: cfg.log takes error lines only). */
static void log_info(store *s, const char *kv) {
  if (s->cfg.log_info)
    s->cfg.log_info(s->cfg.log_ctx, kv);
  else
    fprintf(stderr, "level=info %s\n", kv);
}

/* Thread: store only. committed: a batch just committed (retention then
 * runs at once if the tick is due, keeping the size bound tight). */
/* Summaries of generations stored before schema 4, a few hundred per tick
 * (store_summary.c). Progress goes to the log and to store_stats. */
static void backfill_tick(store *s) {
  uint64_t pending = 0;
  if (s->sum == NULL || s->stats.summary_pending == 0)
    return;
  int n = store_summary_backfill(s->sum, STORE_BACKFILL_PER_TICK, &pending);
  if (n < 0) {
    store_log_error(s, "summary backfill", sqlite3_errcode(s->db));
    return;
  }
  pthread_mutex_lock(&s->st_lock);
  s->stats.summary_backfilled += (uint64_t)n;
  s->stats.summary_pending = pending;
  pthread_mutex_unlock(&s->st_lock);
  char kv[160];
  snprintf(kv, sizeof kv, "msg=\"summary backfill\" summarized=%d pending=%llu",
           n, (unsigned long long)pending);
  log_info(s, kv);
}

/* Slot rollups (re)built per tick (store_rollup.c): each is one
 * transaction that holds the store thread (ten minutes of 100 agents: a
 * few tens of ms, bench/RESULTS.md), so a tick stops after the budget. */
#define STORE_ROLLUP_PER_TICK 16
#define STORE_ROLLUP_BUDGET_NS (100 * 1000000LL)

/* Rebuilds the settled dirty slots' rollups (after retention, or all slots
 * after the migration to schema 6). Progress goes to the log (only when an
 * hour was rebuilt) and to store_stats. */
static void rollup_tick(store *s) {
  store_rollup *ru = store_summary_rollup(s->sum);
  if (ru == NULL)
    return;
  uint64_t pending = 0;
  int n = store_rollup_rebuild(ru, STORE_ROLLUP_PER_TICK,
                               STORE_ROLLUP_BUDGET_NS, &pending);
  if (n < 0) {
    store_log_error(s, "rollup rebuild", sqlite3_errcode(s->db));
    return;
  }
  pthread_mutex_lock(&s->st_lock);
  s->stats.rollup_rebuilt_slots += (uint64_t)n;
  s->stats.rollup_pending_slots = pending;
  pthread_mutex_unlock(&s->st_lock);
  if (n == 0)
    return;
  char kv[160];
  snprintf(kv, sizeof kv, "msg=\"rollup rebuild\" slots=%d pending=%llu", n,
           (unsigned long long)pending);
  log_info(s, kv);
}

void store_maint_run(store *s, int committed) {
  /* First, so the WAL restarts with the next transaction (store_ckpt.c). */
  store_ckpt_finish(s->ckpt, s->db);
  int64_t now = now_ns(CLOCK_MONOTONIC);
  int tick = now >= s->next_tick_ns;
  uint64_t deleted = 0;
  if (tick) {
    s->next_tick_ns = now + STORE_TICK_NS;
    flush_rejected(s);
    store_index_expire(s->idx);
    deleted += retain_by_age(s);
  }
  if (tick || (committed && !s->size_stuck))
    deleted += retain_by_size(s);
  /* Also on a tick when long readers kept the automatic (PASSIVE)
   * checkpoints from resetting the WAL, so it kept growing. */
  if (deleted || (tick && file_size(s->wal_path) > 2 * STORE_WAL_TARGET))
    reclaim(s, 0);
  if (tick && stats_disk_full(s))
    probe_disk(s);
  if (tick && !stats_disk_full(s)) {
    backfill_tick(s);
    rollup_tick(s);
  }
  /* The size gauge on the tick only (and after retention deleted): two
   * stat() calls by path after every commit were 2 of the store thread's
   * ~14 system calls per transaction at 1,000 agents (bench/RESULTS.md,
   * seventh session). retain_by_size measures for itself. */
  if (tick || deleted) {
    uint64_t b = db_bytes(s);
    pthread_mutex_lock(&s->st_lock);
    s->stats.db_bytes = b;
    pthread_mutex_unlock(&s->st_lock);
  }
}
