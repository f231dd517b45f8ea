/* store_schema.h: the SQLite schema of gentraced, one source of truth for the
 * writer (store.c) and the readers (store_read.c, web/).
 *
 * Version rule: bump STORE_SCHEMA_VERSION for any change and add a migration
 * step in store_setup.c (migrate from N-1 to N inside one transaction). A database
 * with a newer version than this build is refused with a clear message.
 *
 * Tables:
 *   meta         key/value; 'schema_version'.
 *   sessions     one row per agent session (id = 32 hex digits), identity from
 *                HELLO, tags as a JSON object, first/last seen (unix ns), the
 *                daemon's rejected count, last committed gen (for WELCOME),
 *                and the totals of its stored generations (gens, events,
 *                bytes, lost = dropped + evicted + rejected), kept by the
 *                commit on every insert into generations (v8; a trigger
 *                before) and by a trigger on every delete from it, so
 *                /v1/agents reads one row per session instead of aggregating
 *                every generation ever kept (invariant: the totals equal
 *                the aggregate over the session's rows, test_store checks).
 *                key_hash = SHA-256 of the session key that owns it (v3;
 *                NULL: not bound yet). The key itself is never stored.
 *   generations  one row per (session, gen): wall-clock span (unix ns), counts,
 *                ledger, status, codec, body CRC32C (v3; NULL for older
 *                rows). seq = commit order (the feed cursor), never
 *                issued twice (v10: assigned by the store below
 *                meta.seq_reserved; AUTOINCREMENT before).
 *   gen_spans    (v10) per 2^42 ns bucket of start_ns, a bound of the
 *                spans starting in it (STORE_SCHEMA_SPANS_SQL).
 *   payloads     seq -> the generation's bytes (GEN_START + body + GEN_END),
 *                compressed with `codec`; apart from generations so listing
 *                and window queries never page through blobs.
 *   retention_pins  (v5) operators' pins (store/hold.h): a service or a
 *                session, a window [from_ns, to_ns), a reason, created and
 *                expires (unix ns). Retention never deletes a generation a
 *                live pin holds (STORE_HOLD_FREE_SQL).
 *   sum_slots, sum_slots_dirty  (v6) ten-minute rollups of sum_names and
 *                the slots they are not exact for (store_rollup.h).
 */
#ifndef STORE_SCHEMA_H
#define STORE_SCHEMA_H

#define STORE_SCHEMA_VERSION 10

#define STORE_SCHEMA_SQL                                                       \
  "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);" \
  "CREATE TABLE IF NOT EXISTS sessions("                                       \
  " id INTEGER PRIMARY KEY,"                                                   \
  " session TEXT NOT NULL UNIQUE,"                                             \
  " service TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL,"          \
  " process_start_ns INTEGER NOT NULL, agent_version TEXT NOT NULL,"           \
  " tags TEXT NOT NULL DEFAULT '{}',"                                          \
  " first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL,"            \
  " last_gen INTEGER, rejected INTEGER NOT NULL DEFAULT 0,"                    \
  " rejected_events INTEGER NOT NULL DEFAULT 0,"                              \
  " gens INTEGER NOT NULL DEFAULT 0, events INTEGER NOT NULL DEFAULT 0,"       \
   " bytes INTEGER NOT NULL DEFAULT 0, lost INTEGER NOT NULL DEFAULT 0,"       \
  " key_hash BLOB);"                                                           \
  "CREATE INDEX IF NOT EXISTS sessions_by_service ON sessions(service, host);" \
  STORE_SCHEMA_GENERATIONS_SQL("generations")                                  \
  STORE_SCHEMA_GEN_INDEXES_SQL                                                 \
  "CREATE TABLE IF NOT EXISTS payloads("                                       \
  " seq INTEGER PRIMARY KEY, data BLOB NOT NULL);" STORE_SCHEMA_DEL_TRIGGER_SQL \
  STORE_SCHEMA_SUMMARY_SQL STORE_SCHEMA_HOLDS_SQL STORE_SCHEMA_ROLLUP_SQL      \
  STORE_SCHEMA_SPANS_SQL                                                       \
  "INSERT OR IGNORE INTO meta(key, value) VALUES('seq_reserved', '0');"

/* The generations table as schema 10 makes it (under NAME: migration 10
 * builds it beside the old one). seq is the rowid without AUTOINCREMENT:
 * the store assigns it (store_genrows.h invariant 1) above every seq ever
 * issued, which meta.seq_reserved bounds (the store reserves seqs ahead,
 * a million at a time, in the transaction that first passes the bound,
 * and starts above it at open), so no transaction rewrites a
 * sqlite_sequence page and no delete has anything to remember
 * (bench/RESULTS.md, "schema 10"). */
#define STORE_SCHEMA_GENERATIONS_SQL(NAME)                                     \
  "CREATE TABLE IF NOT EXISTS " NAME "("                                       \
  " seq INTEGER PRIMARY KEY,"                                                  \
  " session_id INTEGER NOT NULL REFERENCES sessions(id),"                      \
  " gen INTEGER NOT NULL,"                                                     \
  " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"                       \
  " events INTEGER NOT NULL, bytes INTEGER NOT NULL,"                          \
  " stored_bytes INTEGER NOT NULL,"                                            \
  " dropped INTEGER NOT NULL, evicted INTEGER NOT NULL,"                       \
  " rejected INTEGER NOT NULL,"                                                \
  " status TEXT NOT NULL DEFAULT 'ok', codec TEXT NOT NULL,"                   \
  " committed_ns INTEGER NOT NULL, crc INTEGER,"                               \
  " UNIQUE(session_id, gen));"

/* The indexes of generations from schema 10: (session, start) for window
 * queries, start for retention, search and the rollups, and the rows whose
 * end is before their start (never written by gentraced, which refuses
 * them at the door, but a row may hold one), which the summary's part D
 * reads (store_search.c): a partial index, so no other row writes it. */
#define STORE_SCHEMA_GEN_INDEXES_SQL                                           \
  "CREATE INDEX IF NOT EXISTS generations_by_time"                             \
  " ON generations(session_id, start_ns);"                                     \
  "CREATE INDEX IF NOT EXISTS generations_by_start ON generations(start_ns);"   \
  "CREATE INDEX IF NOT EXISTS generations_backward"                            \
  " ON generations(start_ns) WHERE end_ns < start_ns;"

/* (v10) gen_spans: per bucket of start_ns (start_ns >> 42: 2^42 ns, about
 * 73 minutes), an upper bound of the spans (end_ns - start_ns, at least 0)
 * of the generations starting in it. Replaces the generations_by_span
 * index of schemas 3-9, which every generation wrote at a random place:
 * the commit upserts one row per bucket per statement of rows
 * (store_genrows.c), which writes nothing unless a span grows the bound,
 * and the delete trigger drops a bucket's row with its last generation,
 * whichever path deletes it, so the bound follows retention (to a bucket)
 * as the index did. Readers (window queries, search, pins) take
 * STORE_SPAN_MAX_SQL, the largest bound kept.
 * Invariant: every generation row the store wrote has its bucket's row,
 * with max_span >= its span. A row inserted by hand must add its bucket's
 * row (or raise its bound) itself, or window queries may miss it. */
#define STORE_SPAN_SHIFT 42
#define STORE_SPAN_SHIFT_STR "42"
#define STORE_SPAN_BUCKET_LAST_STR "4398046511103" /* 2^42 - 1 */
#define STORE_SCHEMA_SPANS_SQL                                                 \
  "CREATE TABLE IF NOT EXISTS gen_spans(bucket INTEGER PRIMARY KEY,"           \
  " max_span INTEGER NOT NULL);"                                               \
  "CREATE TRIGGER IF NOT EXISTS generations_span_del AFTER DELETE"             \
  " ON generations WHEN NOT EXISTS (SELECT 1 FROM generations"                 \
  " WHERE start_ns >= (OLD.start_ns >> " STORE_SPAN_SHIFT_STR ") << "          \
  STORE_SPAN_SHIFT_STR " AND start_ns <= ((OLD.start_ns >> "                   \
  STORE_SPAN_SHIFT_STR ") << " STORE_SPAN_SHIFT_STR ") + "                     \
  STORE_SPAN_BUCKET_LAST_STR ") BEGIN DELETE FROM gen_spans"                   \
  " WHERE bucket = OLD.start_ns >> " STORE_SPAN_SHIFT_STR "; END;"
/* gen_spans as the rows kept make it (migration 10; rows written by hand,
 * as benchmarks do, then this). */
#define STORE_SPANS_FILL_SQL                                                   \
  "INSERT OR REPLACE INTO gen_spans(bucket, max_span)"                         \
  " SELECT start_ns >> " STORE_SPAN_SHIFT_STR ", max(max(end_ns - start_ns),"  \
  " 0) FROM generations GROUP BY 1;"
#define STORE_SPAN_MAX_SQL                                                     \
  "SELECT max(coalesce(max(max_span), 0), 0) FROM gen_spans"

/* The newest seq kept (0: none): the feed's cursor for "from now on".
 * Every seq issued later is above it (a deleted newest row's seq too). */
#define STORE_MAX_SEQ_SQL                                                      \
  "SELECT coalesce((SELECT max(seq) FROM generations), 0)"
/* The bound of every seq issued (0: none); the store starts above it. */
#define STORE_SEQ_RESERVED_SQL                                                 \
  "SELECT max(coalesce((SELECT max(seq) FROM generations), 0),"                \
  " coalesce((SELECT CAST(value AS INTEGER) FROM meta"                         \
  " WHERE key = 'seq_reserved'), 0))"

/* Schemas 3-9: the longest span of any kept row in O(log n) (max() walks
 * this index): window queries bound their scan from below by from - max
 * span, so the bound must follow retention, not remember the longest row
 * ever stored. Schema 10 keeps that bound in gen_spans instead. */
#define STORE_SCHEMA_SPAN_INDEX_SQL                                            \
  "CREATE INDEX IF NOT EXISTS generations_by_span"                             \
  " ON generations(end_ns - start_ns);"

/* The session totals follow every row of generations, whichever path
 * deletes it (retention, --max-db-size, an operator's DELETE): the delete
 * trigger below. Rows are added only by the commit, which moves the totals,
 * last_seen_ns and last_gen in the same transaction (store_commit.c,
 * ST_SESSION_ADD*): from schema 8 on there is no insert trigger, because a
 * multi-row INSERT into a table with a row trigger copies its rows into a
 * temporary table first (store_genrows.h). The insert trigger of schemas
 * 2-7, created by migration 2 and rewritten by migration 7 (both still
 * run on older files before migration 8 drops it), moved the totals and
 * (v7) last_seen_ns and last_gen. CASE, not max(), in the commit's SET as
 * in that trigger's: with max(last_seen_ns, ...) the store thread used 60%
 * more CPU and wrote a third more bytes per generation (bench_commit,
 * 1,000 sessions, 20 per transaction; the same in every run). */
#define STORE_SCHEMA_ADD_TRIGGER_SQL                                           \
  "CREATE TRIGGER IF NOT EXISTS generations_add AFTER INSERT ON generations"   \
  " BEGIN UPDATE sessions SET gens = gens + 1, events = events + NEW.events,"  \
  " bytes = bytes + NEW.bytes,"                                                \
  " lost = lost + NEW.dropped + NEW.evicted + NEW.rejected,"                   \
  " last_seen_ns = CASE WHEN NEW.committed_ns > last_seen_ns"                 \
  " THEN NEW.committed_ns ELSE last_seen_ns END,"                              \
  " last_gen = CASE WHEN last_gen IS NULL OR NEW.gen > last_gen"               \
  " THEN NEW.gen ELSE last_gen END"                                            \
  " WHERE id = NEW.session_id; END;"
#define STORE_SCHEMA_TRIGGERS_SQL                                              \
  STORE_SCHEMA_ADD_TRIGGER_SQL STORE_SCHEMA_DEL_TRIGGER_SQL
#define STORE_SCHEMA_DEL_TRIGGER_SQL                                           \
  "CREATE TRIGGER IF NOT EXISTS generations_del AFTER DELETE ON generations"   \
  " BEGIN UPDATE sessions SET gens = gens - 1, events = events - OLD.events,"  \
  " bytes = bytes - OLD.bytes,"                                                \
  " lost = lost - OLD.dropped - OLD.evicted - OLD.rejected"                    \
  " WHERE id = OLD.session_id; END;"

/* Migration 1 -> 2: the columns, their values from the rows kept so far,
 * then the triggers (store.c runs it inside the schema transaction). */
#define STORE_MIGRATE_2_SQL                                                    \
  "ALTER TABLE sessions ADD COLUMN gens INTEGER NOT NULL DEFAULT 0;"           \
  "ALTER TABLE sessions ADD COLUMN events INTEGER NOT NULL DEFAULT 0;"         \
  "ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;"          \
  "ALTER TABLE sessions ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;"           \
  "UPDATE sessions SET (gens, events, bytes, lost) = (SELECT count(*),"        \
  " coalesce(sum(events), 0), coalesce(sum(bytes), 0),"                        \
  " coalesce(sum(dropped + evicted + rejected), 0)"                            \
  " FROM generations g WHERE g.session_id = sessions.id);"                     \
  STORE_SCHEMA_TRIGGERS_SQL                                                    \
  "UPDATE meta SET value = '2' WHERE key = 'schema_version';"

/* Migration 2 -> 3: session keys (protocol v2) and per-generation CRCs
 * (a re-sent generation is a duplicate only if its CRC matches), and the
 * span index. Rows kept from before have NULL key_hash (the session's next
 * HELLO binds it) and NULL crc (re-sends of them are taken as duplicates). */
#define STORE_MIGRATE_3_SQL                                                    \
  "ALTER TABLE sessions ADD COLUMN key_hash BLOB;"                             \
  "ALTER TABLE generations ADD COLUMN crc INTEGER;"                            \
  STORE_SCHEMA_SPAN_INDEX_SQL                                                  \
  "UPDATE meta SET value = '3' WHERE key = 'schema_version';"

/* sum_names as every schema since 4 has it (both definitions below). */
#define STORE_SCHEMA_SUM_NAMES_SQL                                             \
  "CREATE TABLE IF NOT EXISTS sum_names(name TEXT NOT NULL,"                   \
  " seq INTEGER NOT NULL, kind INTEGER NOT NULL, count INTEGER NOT NULL,"      \
  " total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL,"                       \
  " max_ns INTEGER NOT NULL, hist BLOB NOT NULL,"                              \
  " PRIMARY KEY(name, seq, kind)) WITHOUT ROWID;"                              \
  "CREATE INDEX IF NOT EXISTS sum_names_by_seq ON sum_names(seq);"

/* Summaries (v4; store_summary.c writes them, store_search.c reads them),
 * one set of rows per generation (seq), written in the generation's own
 * transaction and deleted with it by a trigger, whatever path deletes it:
 *   sum_gens     seq -> span_floor_ns (every span >= it is in sum_spans),
 *                open_at_end, unmatched_ends, status (0 ok, else the
 *                GTP_E_* code that kept it from being summarized). A
 *                generation without a row here is not summarized yet.
 *   sum_names    (name, seq, kind): count, total, min, max (ns) and the
 *                histogram (proto/summary.h's compact encoding).
 *   sum_spans    the long spans: (seq, kind, name, thread, start_ns, dur_ns),
 *                and every span begun in an earlier generation of the
 *                session (carried = 1), whatever its length.
 *   sum_counters (seq, name): count, min, max, last.
 *   sum_logs     (seq, name = category): count.
 * From v9 the last three are views of the JSON columns sum_gens.spans,
 * .counters and .logs (sum_json.h): one row per generation instead of
 * six B-tree inserts for a small one (bench/RESULTS.md, "summary rows"). */
#define STORE_SCHEMA_SUMMARY_SQL                                               \
  "CREATE TABLE IF NOT EXISTS sum_gens(seq INTEGER PRIMARY KEY,"               \
  " floor_ns INTEGER NOT NULL, open_at_end INTEGER NOT NULL,"                  \
  " unmatched_ends INTEGER NOT NULL, status INTEGER NOT NULL,"                 \
  " spans TEXT, counters TEXT, logs TEXT);"                                    \
  STORE_SCHEMA_SUM_NAMES_SQL                                                   \
  STORE_SCHEMA_SUM_VIEWS_SQL                                                   \
  "CREATE TRIGGER IF NOT EXISTS generations_sum_del AFTER DELETE"              \
  " ON generations BEGIN"                                                      \
  " DELETE FROM sum_gens WHERE seq = OLD.seq;"                                 \
  " DELETE FROM sum_names WHERE seq = OLD.seq; END;"

/* (v9) The spans, counters and logs of sum_gens' JSON columns as the
 * tables of schemas 4-8 were (sum_json.h), for SQL readers: operators,
 * tests. Search reads sum_gens.spans itself (a name with a NUL byte ends
 * at it in json_each). */
#define STORE_SCHEMA_SUM_VIEWS_SQL                                             \
  "CREATE VIEW IF NOT EXISTS sum_spans(seq, kind, name, thread, start_ns,"     \
  " dur_ns, carried) AS SELECT g.seq, json_extract(j.value, '$[0]'),"          \
  " json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'),"             \
  " json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]'),"             \
  " json_extract(j.value, '$[5]') FROM sum_gens g, json_each(g.spans) j;"      \
  "CREATE VIEW IF NOT EXISTS sum_counters(seq, name, count, min, max, last)"   \
  " AS SELECT g.seq, json_extract(j.value, '$[0]'),"                           \
  " json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'),"             \
  " json_extract(j.value, '$[3]'), json_extract(j.value, '$[4]')"              \
  " FROM sum_gens g, json_each(g.counters) j;"                                 \
  "CREATE VIEW IF NOT EXISTS sum_logs(seq, name, count) AS SELECT g.seq,"      \
  " json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]')"              \
  " FROM sum_gens g, json_each(g.logs) j;"

/* The summary tables as schemas 4-8 made them (migration 4 creates these;
 * migration 9 folds three of them into sum_gens). */
#define STORE_SCHEMA_SUMMARY_V4_SQL                                            \
  "CREATE TABLE IF NOT EXISTS sum_gens(seq INTEGER PRIMARY KEY,"               \
  " floor_ns INTEGER NOT NULL, open_at_end INTEGER NOT NULL,"                  \
  " unmatched_ends INTEGER NOT NULL, status INTEGER NOT NULL);"                \
  STORE_SCHEMA_SUM_NAMES_SQL                                                   \
  "CREATE TABLE IF NOT EXISTS sum_spans(seq INTEGER NOT NULL,"                 \
  " kind INTEGER NOT NULL, name TEXT NOT NULL, thread INTEGER NOT NULL,"       \
  " start_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL,"                      \
  " carried INTEGER NOT NULL DEFAULT 0);"                                      \
  "CREATE INDEX IF NOT EXISTS sum_spans_by_seq ON sum_spans(seq, name);"       \
  "CREATE TABLE IF NOT EXISTS sum_counters(seq INTEGER NOT NULL,"              \
  " name TEXT NOT NULL, count INTEGER NOT NULL, min INTEGER NOT NULL,"         \
  " max INTEGER NOT NULL, last INTEGER NOT NULL, PRIMARY KEY(seq, name))"      \
  " WITHOUT ROWID;"                                                            \
  "CREATE TABLE IF NOT EXISTS sum_logs(seq INTEGER NOT NULL,"                  \
  " name TEXT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY(seq, name))"       \
  " WITHOUT ROWID;"                                                            \
  "CREATE TRIGGER IF NOT EXISTS generations_sum_del AFTER DELETE"              \
  " ON generations BEGIN"                                                      \
  " DELETE FROM sum_gens WHERE seq = OLD.seq;"                                 \
  " DELETE FROM sum_names WHERE seq = OLD.seq;"                                \
  " DELETE FROM sum_spans WHERE seq = OLD.seq;"                                \
  " DELETE FROM sum_counters WHERE seq = OLD.seq;"                             \
  " DELETE FROM sum_logs WHERE seq = OLD.seq; END;"

/* Migration 3 -> 4: the summary tables, empty; the store thread then
 * summarizes the kept generations in the background (store_summary.c,
 * "backfill"), newest first. */
#define STORE_MIGRATE_4_SQL                                                    \
  STORE_SCHEMA_SUMMARY_V4_SQL                                                     \
  "UPDATE meta SET value = '4' WHERE key = 'schema_version';"

/* Retention pins (v5; store/store_hold.c writes them). AUTOINCREMENT so an
 * id, once deleted, never names another pin. */
#define STORE_SCHEMA_HOLDS_SQL                                                 \
  "CREATE TABLE IF NOT EXISTS retention_pins("                                 \
  " id INTEGER PRIMARY KEY AUTOINCREMENT,"                                     \
  " service TEXT, session TEXT,"                                               \
  " from_ns INTEGER NOT NULL, to_ns INTEGER NOT NULL,"                         \
  " reason TEXT NOT NULL,"                                                     \
  " created_ns INTEGER NOT NULL, expires_ns INTEGER NOT NULL,"                 \
  " CHECK ((service IS NULL) <> (session IS NULL)));"

/* The condition retention adds to every DELETE: the generation row G (an
 * alias of generations) is held by no live pin at unix ns NOW (a bound
 * parameter, the same for the payload and the generation DELETE of one
 * transaction, so a pin expiring between them cannot split a generation
 * from its bytes). Pins are few (HOLD_MAX_PINS); the session row is found
 * by primary key. */
#define STORE_HOLD_FREE_SQL(G, NOW)                                            \
  " NOT EXISTS (SELECT 1 FROM retention_pins hp JOIN sessions hs"             \
  " ON hs.id = " G ".session_id WHERE hp.expires_ns > " NOW                   \
  " AND hp.from_ns < " G ".end_ns AND hp.to_ns > " G ".start_ns"              \
  " AND (hp.session = hs.session OR hp.service = hs.service))"

/* Migration 4 -> 5: the pins table, empty. */
#define STORE_MIGRATE_5_SQL                                                    \
  STORE_SCHEMA_HOLDS_SQL                                                       \
  "UPDATE meta SET value = '5' WHERE key = 'schema_version';"

/* Ten-minute rollups (v6; store/store_rollup.c writes and rebuilds them,
 * store_search.c reads them):
 *   sum_slots        (slot, service, kind, name): the sum of the sum_names
 *                    rows of the generations starting in that slot
 *                    (slot = start_ns / 1 h; 0 <= start_ns < the last
 *                    whole slot of int64 ns, STORE_ROLLUP_END, and end_ns
 *                    >= start_ns only): gens = rows, count, total, min, max,
 *                    merged histogram.
 *   sum_slots_dirty  slots whose rollup may be wrong (a generation of it was
 *                    deleted: a max cannot be subtracted), with the ticks
 *                    since the last delete (age); readers use raw rows for
 *                    them until the maintenance tick rebuilds them. */
#define STORE_SCHEMA_ROLLUP_SQL                                                \
  "CREATE TABLE IF NOT EXISTS sum_slots(slot INTEGER NOT NULL,"                \
  " service TEXT NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL,"         \
  " gens INTEGER NOT NULL, count INTEGER NOT NULL,"                            \
  " total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL,"                       \
  " max_ns INTEGER NOT NULL, hist BLOB NOT NULL,"                              \
  " PRIMARY KEY(slot, service, kind, name)) WITHOUT ROWID;"                    \
  "CREATE TABLE IF NOT EXISTS sum_slots_dirty(slot INTEGER PRIMARY KEY,"       \
  " age INTEGER NOT NULL);"                                                    \
  "CREATE TRIGGER IF NOT EXISTS generations_slot_del AFTER DELETE"             \
  " ON generations WHEN OLD.start_ns >= 0"                                     \
  " AND OLD.start_ns < 9223371600000000000 BEGIN"                              \
  " INSERT OR REPLACE INTO sum_slots_dirty(slot, age)"                         \
  " VALUES(OLD.start_ns / 600000000000, 0); END;"

/* Migration 5 -> 6: the rollup tables, empty, and every slot that holds a
 * generation marked dirty and settled (age far past STORE_ROLLUP_SETTLE):
 * the store thread builds them in the background (store_rollup_rebuild)
 * while readers use the raw rows of dirty slots. */
#define STORE_MIGRATE_6_SQL                                                    \
  STORE_SCHEMA_ROLLUP_SQL                                                      \
  "INSERT OR IGNORE INTO sum_slots_dirty(slot, age)"                           \
  " SELECT DISTINCT start_ns / 600000000000, 1000000 FROM generations"        \
  " WHERE start_ns >= 0 AND start_ns < 9223371600000000000;"                   \
  "UPDATE meta SET value = '6' WHERE key = 'schema_version';"

/* Migration 6 -> 7: the insert trigger's body that moves last_seen_ns and
 * last_gen as well (STORE_SCHEMA_ADD_TRIGGER_SQL). No row changes: the
 * builds that wrote with the older body moved both columns themselves, so
 * they are right as they are. (Some version 6 databases were made with
 * the new body already: dropping and creating it again is the same.) */
#define STORE_MIGRATE_7_SQL                                                    \
  "DROP TRIGGER IF EXISTS generations_add;" STORE_SCHEMA_ADD_TRIGGER_SQL       \
  "UPDATE meta SET value = '7' WHERE key = 'schema_version';"

/* Migration 7 -> 8: no insert trigger (STORE_SCHEMA_ADD_TRIGGER_SQL): the
 * commit moves the session row itself. No row changes. */
#define STORE_MIGRATE_8_SQL                                                    \
  "DROP TRIGGER IF EXISTS generations_add;"                                    \
  "UPDATE meta SET value = '8' WHERE key = 'schema_version';"

/* Migration 8 -> 9: sum_spans, sum_counters and sum_logs folded into
 * sum_gens as JSON text (sum_json.h; json_array quotes a name as
 * sum_json.c does), the tables replaced by views of the same name and
 * columns, and the delete trigger without them. Rows of a generation with
 * none keep NULL. */
#define STORE_MIGRATE_9_SQL                                                    \
  "ALTER TABLE sum_gens ADD COLUMN spans TEXT;"                                \
  "ALTER TABLE sum_gens ADD COLUMN counters TEXT;"                             \
  "ALTER TABLE sum_gens ADD COLUMN logs TEXT;"                                 \
  "UPDATE sum_gens SET spans = (SELECT json_group_array(json_array(kind,"      \
  " name, thread, start_ns, dur_ns, carried)) FROM sum_spans x"                \
  " WHERE x.seq = sum_gens.seq) WHERE seq IN (SELECT seq FROM sum_spans);"     \
  "UPDATE sum_gens SET counters = (SELECT json_group_array(json_array(name,"   \
  " count, min, max, last)) FROM sum_counters x WHERE x.seq = sum_gens.seq)"   \
  " WHERE seq IN (SELECT seq FROM sum_counters);"                              \
  "UPDATE sum_gens SET logs = (SELECT json_group_array(json_array(name,"       \
  " count)) FROM sum_logs x WHERE x.seq = sum_gens.seq)"                       \
  " WHERE seq IN (SELECT seq FROM sum_logs);"                                  \
  "DROP TRIGGER IF EXISTS generations_sum_del;"                                \
  "DROP TABLE sum_spans; DROP TABLE sum_counters; DROP TABLE sum_logs;"        \
  STORE_SCHEMA_SUMMARY_SQL                                                     \
  "UPDATE meta SET value = '9' WHERE key = 'schema_version';"

/* Migration 9 -> 10: generations rebuilt without AUTOINCREMENT (its
 * sqlite_sequence value kept as meta.seq_reserved, so no seq is issued
 * twice), without generations_by_span and with generations_backward; the
 * span buckets filled from the rows kept; the triggers the old table took
 * with it made again, with the new one. Inside the open's schema
 * transaction, like every migration: a copy of every generation row. */
#define STORE_MIGRATE_10_SQL                                                   \
  "INSERT OR REPLACE INTO meta(key, value) SELECT 'seq_reserved', max("        \
  " coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'generations'), 0),"\
  " coalesce((SELECT max(seq) FROM generations), 0),"                          \
  " coalesce((SELECT CAST(value AS INTEGER) FROM meta"                         \
  " WHERE key = 'seq_reserved'), 0));"                                         \
  "DROP TABLE IF EXISTS generations_v10;"                                      \
  STORE_SCHEMA_GENERATIONS_SQL("generations_v10")                              \
  "INSERT INTO generations_v10(seq, session_id, gen, start_ns, end_ns, events,"\
  " bytes, stored_bytes, dropped, evicted, rejected, status, codec,"           \
  " committed_ns, crc) SELECT seq, session_id, gen, start_ns, end_ns, events," \
  " bytes, stored_bytes, dropped, evicted, rejected, status, codec,"           \
  " committed_ns, crc FROM generations ORDER BY seq;"                          \
  "DROP TABLE generations;"                                                    \
  "ALTER TABLE generations_v10 RENAME TO generations;"                         \
  STORE_SCHEMA_GEN_INDEXES_SQL STORE_SCHEMA_DEL_TRIGGER_SQL                    \
  STORE_SCHEMA_SUMMARY_SQL STORE_SCHEMA_ROLLUP_SQL STORE_SCHEMA_SPANS_SQL      \
  STORE_SPANS_FILL_SQL                                                         \
  "UPDATE meta SET value = '10' WHERE key = 'schema_version';"

/* Version history: 1 first; 2 adds the session totals (columns + triggers),
 * migrated by store.c from 1 in place; 3 adds sessions.key_hash (SHA-256 of
 * the session key), generations.crc (the body CRC32C of the GEN_END) and the
 * generations_by_span index; 4 adds the summary tables (sum_*); 5 adds
 * retention_pins; 6 adds the ten-minute rollups (sum_slots*); 7 makes the
 * generations_add trigger move sessions.last_seen_ns and last_gen; 8 drops
 * that trigger (the commit moves the session row); 9 folds sum_spans,
 * sum_counters and sum_logs into sum_gens' JSON columns (views keep their
 * names); 10 drops generations' AUTOINCREMENT (meta.seq_reserved) and its
 * span index (gen_spans), and adds generations_backward. */

/* Codec names stored in generations.codec. */
#define STORE_CODEC_NONE "none"
#define STORE_CODEC_ZSTD "zstd"

#endif /* STORE_SCHEMA_H */
