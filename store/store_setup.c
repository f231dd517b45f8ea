/* store_setup.c: the write connection's setup steps of store_open
 * (store.c): pragmas, the schema (created, checked or migrated in one
 * transaction), the prepared statements, and the session index loaded from
 * the sessions table. Runs on the opening thread, before the store thread
 * starts (store.c invariant 1 holds from then on). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gtp_error.h"
#include "store_schema.h"
#include "store_writer.h"

/* 4 KiB pages for new databases (an existing file keeps its own). Each
 * commit writes every page it touched whole to the WAL, and a fleet's
 * small generations touch pages spread over the sessions table and the
 * two session-keyed generations indexes: with 64 KiB pages, 10,000 agents
 * on 2 s generations of 190 bytes made the daemon write 6.8 KB per
 * generation to disk and its ACK p99 passed a second while checkpoints
 * fell behind; 16 KiB halved the bytes, cut the store thread's CPU by a
 * quarter and brought ACK p99 to about 100 ms (bench_fleet, bench/
 * RESULTS.md). 4 KiB: 21.8 -> 8.3 KB written and 170,266 -> 154,238
 * instructions per generation (bench_commit, 1,000 sessions, 20 per
 * transaction: the WAL frames' checksums and the statement journal copy
 * whole pages), for 4.8% more store-thread instructions on 1 MiB
 * generations (bench_store, callgrind; their overflow chains have four
 * times the pages). */
#ifndef STORE_PAGE_SIZE /* -DSTORE_PAGE_SIZE=N: benchmark builds only */
#define STORE_PAGE_SIZE 4096
#endif
/* The write connection's page cache, set explicitly once the page size is
 * known: SQLite turns its default (-2000 KiB) into a page count with the
 * page size current at open (4 KiB), so with 64 KiB pages the default
 * became 500 pages = 32 MiB, and the daemon's RSS crept up by one
 * committed payload per generation until it got there (soak). */
#define STORE_CACHE_KIB 8192

static const char *const store_sql[ST_COUNT_] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    /* Identity comes from the first HELLO; later rows only move last_seen
     * and last_gen forward. tags must be valid JSON so readers can filter
     * with json_each without erroring on one bad row. */
    [ST_UPSERT_SESSION] =
        "INSERT INTO sessions(session, service, host, pid, process_start_ns,"
        " agent_version, tags, first_seen_ns, last_seen_ns, last_gen, key_hash)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6,"
        " CASE WHEN json_valid(?7) THEN ?7 ELSE '{}' END, ?8, ?8, ?9, ?10)"
        " ON CONFLICT(session) DO UPDATE SET"
        " last_seen_ns = max(last_seen_ns, excluded.last_seen_ns),"
        " last_gen = CASE WHEN last_gen IS NULL OR excluded.last_gen > last_gen"
        " THEN excluded.last_gen ELSE last_gen END,"
        " key_hash = coalesce(key_hash, excluded.key_hash)"
        " RETURNING id, events, lost, service", /* service: as above */
    /* A session whose row this store committed before (its id cached in
     * sidc), when its key is bound after its first commit or a resend
     * arrives (ST_SESSION_ADD* moves the row otherwise): only
     * last_seen, last_gen and the key move, by primary key: no INSERT
     * attempt, conflict and json_valid (fleet profile: the upsert was 60%
     * of the SQLite work of a small generation). The session text guards
     * against a row an operator deleted and whose id was reused. */
    [ST_TOUCH_SESSION] =
        "UPDATE sessions SET last_seen_ns = max(last_seen_ns, ?2),"
        " last_gen = CASE WHEN last_gen IS NULL OR ?3 > last_gen"
        " THEN ?3 ELSE last_gen END,"
        " key_hash = coalesce(key_hash, ?5)"
        " WHERE id = ?1 AND session = ?4 RETURNING events, lost",
    /* The check of a known session when ST_SESSION_ADD_CHECKED did not
     * move its row (the row is not written here: ST_SESSION_ADD moves it,
     * once): that the cached id still names this session's row, its
     * totals for invariant 11, whether its key is bound yet, and its
     * service (the rollup's key, store_rollup_add_summary). */
    [ST_SESSION_CHECK] = "SELECT events, lost, key_hash IS NULL, service"
                         " FROM sessions WHERE id = ?1 AND session = ?2",
    /* A new generation's row moves its session's totals, last_seen_ns and
     * last_gen (once per generation: schema 8 has no insert trigger). For
     * a session committed before (cached id), in one statement with every
     * check the commit needs before it inserts: the id still names this
     * session, with the service the generation came with (the rollup's
     * key), bound to a key if the generation has one, totals that do not
     * wrap (invariant 11; ?3 and ?5 are at most INT64_MAX), and no row of
     * this gen yet (invariants 3, 12): a gen above last_gen has none, since
     * every path that inserts a row moves last_gen to at least its gen in
     * the same transaction and none moves it back, so only a gen at or
     * below it (a resend) probes the unique index; the INSERT's own
     * constraint check still fails the batch if a row was added by hand
     * (1.9% fewer instructions per generation, bench/RESULTS.md "schema
     * 10"). No change: ST_SESSION_CHECK and
     * the rest tell which check failed, then ST_SESSION_ADD moves the row
     * of a generation that still goes in. */
    [ST_SESSION_ADD_CHECKED] =
        "UPDATE sessions SET gens = gens + 1, events = events + ?3,"
        " bytes = bytes + ?4, lost = lost + ?5,"
        " last_seen_ns = CASE WHEN ?6 > last_seen_ns THEN ?6"
        " ELSE last_seen_ns END,"
        " last_gen = CASE WHEN last_gen IS NULL OR ?7 > last_gen"
        " THEN ?7 ELSE last_gen END"
        " WHERE id = ?1 AND session = ?2 AND service = ?8"
        " AND (?9 = 0 OR key_hash IS NOT NULL)"
        " AND events >= 0 AND events <= 9223372036854775807 - ?3"
        " AND lost >= 0 AND lost <= 9223372036854775807 - ?5"
        " AND (?7 > last_gen OR NOT EXISTS (SELECT 1 FROM generations"
        " WHERE session_id = ?1 AND gen = ?7))",
    [ST_SESSION_ADD] =
        "UPDATE sessions SET gens = gens + 1, events = events + ?2,"
        " bytes = bytes + ?3, lost = lost + ?4,"
        " last_seen_ns = CASE WHEN ?5 > last_seen_ns THEN ?5"
        " ELSE last_seen_ns END,"
        " last_gen = CASE WHEN last_gen IS NULL OR ?6 > last_gen"
        " THEN ?6 ELSE last_gen END WHERE id = ?1",
    /* A session the sid cache does not hold (a set full, or the first
     * generation since the store opened): its id, if its row exists, so
     * that generation takes ST_SESSION_ADD_CHECKED too, one probe of the
     * session index instead of the upsert, the CRC probe and ST_SESSION_ADD
     * (store_commit.c, find_sid). */
    [ST_SESSION_ID] = "SELECT id FROM sessions WHERE session = ?1",
    [ST_GEN_CRC] =
        "SELECT crc FROM generations WHERE session_id = ?1 AND gen = ?2",
    [ST_SET_META] = "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)",
    [ST_REJECTED] =
        "UPDATE sessions SET rejected = rejected + ?2,"
        " rejected_events = rejected_events + ?3 WHERE session = ?1",
    /* end < cutoff implies start < cutoff, which lets the start_ns index
     * find the candidates without scanning every generation. Every DELETE
     * skips rows a retention pin holds at ?4 (store.c invariant 14). */
    [ST_AGE_DEL_PAYLOADS] =
        "DELETE FROM payloads WHERE seq IN (SELECT seq FROM generations g"
        " WHERE start_ns < ?1 AND end_ns < ?1 AND seq < ?2 "
        "AND" STORE_HOLD_FREE_SQL("g", "?4") " LIMIT ?3)",
    [ST_AGE_DEL_GENS] =
        "DELETE FROM generations WHERE seq IN (SELECT seq FROM generations g"
        " WHERE start_ns < ?1 AND end_ns < ?1 AND seq < ?2 "
        "AND" STORE_HOLD_FREE_SQL("g", "?4") " LIMIT ?3)",
    [ST_SIZE_SCAN] = "SELECT seq, stored_bytes FROM generations g"
                     " WHERE seq < ?1 AND" STORE_HOLD_FREE_SQL(
                         "g", "?3") " ORDER BY seq LIMIT ?2",
    [ST_SIZE_DEL_PAYLOADS] =
        "DELETE FROM payloads WHERE seq IN (SELECT seq FROM generations g"
        " WHERE seq <= ?1 AND" STORE_HOLD_FREE_SQL("g", "?2") ")",
    [ST_SIZE_DEL_GENS] =
        "DELETE FROM generations WHERE seq IN (SELECT seq"
        " FROM generations g WHERE seq <= ?1 AND" STORE_HOLD_FREE_SQL("g",
                                                                      "?2") ")",
};

int store_setup_load_index(store *s, char **cause) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db,
                              "SELECT session, last_gen, key_hash FROM sessions"
                              " WHERE last_gen NOT NULL OR key_hash NOT NULL",
                              -1, &st, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(st);
  int err = 0;
  for (; rc == SQLITE_ROW; rc = sqlite3_step(st)) {
    const char *hex = (const char *)sqlite3_column_text(st, 0);
    uint8_t key[16];
    if (!hex || gtp_session_parse(hex, key) != 0)
      continue; /* not ours to judge here; readers show it as is */
    /* A row left out of the index would lose its resume hint, and its key
     * binding (any HELLO could then claim the session): the open fails. */
    if (sqlite3_column_type(st, 1) != SQLITE_NULL)
      err = store_index_note_gen(s->idx, key,
                                 (uint64_t)sqlite3_column_int64(st, 1));
    if (err == 0 && sqlite3_column_bytes(st, 2) == STORE_KEY_HASH_SIZE)
      err = store_index_bind_key(s->idx, key, sqlite3_column_blob(st, 2));
    if (err != 0)
      break;
  }
  sqlite3_finalize(st);
  if (err != 0) {
    store_set_cause(cause, "%s: loading sessions: out of memory", s->path);
    return err;
  }
  if (rc != SQLITE_DONE) {
    store_set_cause(cause, "%s: loading sessions: %s", s->path,
                    sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  s->max_span_ns =
      pragma_int(s->db, "SELECT value FROM meta WHERE key = 'max_span_ns'");
  if (s->max_span_ns < 0)
    s->max_span_ns = 0;
  /* seq goes on above every seq ever issued (store_genrows.h invariant 1):
   * the reservation, or the table's newest if a row was added by hand. */
  int64_t max_seq = pragma_int(s->db, STORE_SEQ_RESERVED_SQL);
  if (max_seq < 0 || max_seq == INT64_MAX) {
    store_set_cause(cause, "%s: reading the newest seq: %s", s->path,
                    max_seq < 0 ? sqlite3_errmsg(s->db) : "no seq left");
    return GTP_E_CORRUPT;
  }
  store_genrows_set_next(s->gr, max_seq + 1);
  return 0;
}

/* Creates the schema on a fresh database, checks or migrates an existing
 * one. Runs in one IMMEDIATE transaction so two daemons racing on a new file
 * cannot both create it. */
int store_setup_schema(store *s, char **cause) {
  int rc = exec_sql(s->db, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: cannot lock database: %s", s->path,
                    sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  int64_t ntables = pragma_int(s->db, "SELECT count(*) FROM sqlite_master");
  int64_t has_meta = pragma_int(
      s->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
             " AND name = 'meta'");
  int err = 0;
  if (ntables < 0 || has_meta < 0) {
    rc = sqlite3_errcode(s->db);
    store_set_cause(cause, "%s: cannot read database: %s", s->path,
                    sqlite3_errmsg(s->db));
    err = store_err(rc) ? store_err(rc) : GTP_E_CORRUPT;
    goto fail;
  }
  if (ntables > 0 && !has_meta) {
    store_set_cause(
        cause, "%s: not a gentrace database (it has tables but no meta table)",
        s->path);
    err = GTP_E_VERSION;
    goto fail;
  }
  int64_t version = 0;
  if (has_meta) {
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(
        s->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st,
        NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      version = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (version <= 0) {
      store_set_cause(cause, "%s: not a gentrace database (no schema_version)",
                      s->path);
      err = GTP_E_VERSION;
      goto fail;
    }
  }
  if (version > STORE_SCHEMA_VERSION) {
    store_set_cause(
        cause,
        "%s: database schema version %" PRId64
        " is newer than this gentraced supports (%d); upgrade gentraced"
        " or use another --db",
        s->path, version, STORE_SCHEMA_VERSION);
    err = GTP_E_VERSION;
    goto fail;
  }
  if (version == 0) {
    rc = exec_sql(s->db, STORE_SCHEMA_SQL);
    if (rc == SQLITE_OK)
      rc = exec_sql(s->db, "INSERT INTO meta(key, value) VALUES"
                           " ('schema_version', '10')");
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: creating schema: %s", s->path,
                      sqlite3_errmsg(s->db));
      err = store_err(rc);
      goto fail;
    }
  }
  /* Migrations: version N-1 -> N steps, each inside this same transaction
   * (a failure leaves the file as it was). migrate[N] takes N-1 to N. */
  static const char *const migrate[] = {NULL,
                                        NULL,
                                        STORE_MIGRATE_2_SQL,
                                        STORE_MIGRATE_3_SQL,
                                        STORE_MIGRATE_4_SQL,
                                        STORE_MIGRATE_5_SQL,
                                        STORE_MIGRATE_6_SQL,
                                        STORE_MIGRATE_7_SQL,
                                        STORE_MIGRATE_8_SQL,
                                        STORE_MIGRATE_9_SQL,
                                        STORE_MIGRATE_10_SQL};
  _Static_assert(sizeof migrate / sizeof migrate[0] == STORE_SCHEMA_VERSION + 1,
                 "one migration per schema version");
  for (int64_t v = version; v >= 1 && v < STORE_SCHEMA_VERSION; v++) {
    const char *sql = migrate[v + 1];
    /* A file that has sum_gens' JSON columns already (its version number
     * set back, as tests of older migrations do) has the summary tables
     * of 4 and 9: those steps only move the number. */
    char only[96];
    if ((v + 1 == 4 || v + 1 == 9) &&
        pragma_int(s->db, "SELECT count(*) FROM pragma_table_info('sum_gens')"
                          " WHERE name = 'spans'") > 0) {
      snprintf(only, sizeof only,
               "UPDATE meta SET value = '%d' WHERE key = 'schema_version'",
               (int)(v + 1));
      sql = only;
    }
    rc = exec_sql(s->db, sql);
    if (rc != SQLITE_OK) {
      store_set_cause(cause,
                      "%s: migrating schema %" PRId64 " to %" PRId64 ": %s",
                      s->path, v, v + 1, sqlite3_errmsg(s->db));
      err = store_err(rc);
      goto fail;
    }
  }
  rc = exec_sql(s->db, "COMMIT");
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: committing schema: %s", s->path,
                    sqlite3_errmsg(s->db));
    err = store_err(rc);
    goto fail;
  }
  return 0;
fail:
  if (!sqlite3_get_autocommit(s->db))
    exec_sql(s->db, "ROLLBACK");
  return err ? err : GTP_E_INTERNAL;
}

_Static_assert(
    STORE_SCHEMA_VERSION == 10,
    "store_setup.c writes schema_version 10 on a fresh database; add a "
    "migration step and update that insert when bumping");

int store_setup_pragmas(store *s, char **cause) {
  char sql[256];
  /* page_size and auto_vacuum only take effect before the first table
   * exists, so they are set on an empty file only. */
  if (pragma_int(s->db, "SELECT count(*) FROM sqlite_master") == 0) {
    snprintf(sql, sizeof sql,
             "PRAGMA page_size = %d; PRAGMA auto_vacuum = INCREMENTAL;",
             STORE_PAGE_SIZE);
    int rc = exec_sql(s->db, sql);
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: %s", s->path, sqlite3_errmsg(s->db));
      return store_err(rc);
    }
  }
  sqlite3_stmt *st = NULL;
  int rc =
      sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
  const char *mode = NULL;
  if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    mode = (const char *)sqlite3_column_text(st, 0);
  int wal = mode && strcmp(mode, "wal") == 0;
  sqlite3_finalize(st);
  if (!wal) {
    store_set_cause(
        cause,
        "%s: cannot switch to WAL mode (%s); gentraced needs a local "
        "file system with shared memory",
        s->path, sqlite3_errmsg(s->db));
    return GTP_E_INTERNAL;
  }
  int64_t page = pragma_int(s->db, "PRAGMA page_size");
  if (page <= 0)
    page = 4096;
  s->wal_frames = (int64_t)(STORE_WAL_TARGET / (uint64_t)page);
  /* Tests: a small WAL target, so checkpoints come within seconds. */
  const char *wp = getenv("GENTRACE_TEST_WAL_PAGES");
  if (wp && *wp && atoll(wp) > 0)
    s->wal_frames = atoll(wp);
  snprintf(sql, sizeof sql,
           "PRAGMA cache_size = -%d; PRAGMA synchronous = %s;"
           " PRAGMA journal_size_limit = %llu;"
           " PRAGMA wal_autocheckpoint = %llu; PRAGMA foreign_keys = OFF;",
           STORE_CACHE_KIB, s->cfg.sync_full ? "FULL" : "NORMAL",
           (unsigned long long)STORE_WAL_TARGET,
           (unsigned long long)s->wal_frames);
  rc = exec_sql(s->db, sql);
  if (rc != SQLITE_OK) {
    store_set_cause(cause, "%s: %s", s->path, sqlite3_errmsg(s->db));
    return store_err(rc);
  }
  const char *maxp = getenv("GENTRACE_TEST_MAX_PAGES");
  if (maxp && *maxp) {
    char *end = NULL;
    unsigned long long n = strtoull(maxp, &end, 10);
    if (*end == '\0' && n > 0) {
      snprintf(sql, sizeof sql, "PRAGMA max_page_count = %llu", n);
      exec_sql(s->db, sql);
    }
  }
  return 0;
}

int store_setup_prepare(store *s, char **cause) {
  for (int i = 0; i < ST_COUNT_; i++) {
    int rc = sqlite3_prepare_v3(s->db, store_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
    if (rc != SQLITE_OK) {
      store_set_cause(cause, "%s: preparing \"%s\": %s", s->path, store_sql[i],
                      sqlite3_errmsg(s->db));
      return store_err(rc) ? store_err(rc) : GTP_E_INTERNAL;
    }
  }
  if (!(s->gr = store_genrows_new(s->db))) {
    store_set_cause(cause, "store: out of memory");
    return -ENOMEM;
  }
  return 0;
}
