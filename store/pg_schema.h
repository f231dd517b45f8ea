/* pg_schema.h: the PostgreSQL catalog of the shared store, one source of
 * truth for store/pg.c (migrations) and store/pg_cat.c (statements).
 *
 * Version rule: never edit a shipped migration; append a new one to
 * PG_MIGRATIONS (it runs inside the schema transaction, under the migration
 * advisory lock) and the version becomes its index + 1. A catalog with a
 * newer version than this build is refused.
 *
 * Tables (prefixed gt_ so the catalog can share a database):
 *   gt_meta        key/value: schema_version, max_span_ns (longest
 *                  generation, bounds window scans as in SQLite).
 *   gt_counter     one row: next_seq, the feed cursor's source. A commit
 *                  takes this row's lock (UPDATE) just before it inserts its
 *                  generations and holds it to COMMIT, so seqs are handed
 *                  out in commit order across every daemon: a reader that
 *                  sees seq N also sees every seq < N that will ever exist
 *                  (no late commit can fill a hole behind a feed cursor).
 *   gt_sessions    as SQLite's sessions, plus key_hash: the SHA-256 of the
 *                  session key, bound by the first commit that carries one.
 * Totals follow gt_generations through triggers. tags: json (kept as sent, so
 * every daemon prints the same text); a HELLO whose tags are not a JSON object
 *                  stores {} (gt_json_object), so filters never fail.
 *   gt_segments    one row per segment object: its key, size, the number of
 *                  its generations still cataloged (live_gens), and when it
 *                  died (dead_ns: live_gens reached 0; the object is deleted
 *                  after a grace period, then the row).
 *   gt_generations as SQLite's generations (crc: the GEN_END CRC, so a
 *                  resend with other contents is told from a duplicate),
 *                  plus where the bytes are:
 *                  (segment_id, off, len) in the segment object, compressed
 *                  with codec.
 *   gt_pins        low-water marks of running downloads on every daemon,
 *                  with an expiry the daemon renews (a daemon that dies
 *                  stops pinning).
 *   gt_retention_pins  operators' retention pins (v3, pg_hold_schema.h).
 *   gt_sum_*       generation summaries (v4, below).
 */
#ifndef PG_SCHEMA_H
#define PG_SCHEMA_H

#include "pg_hold_schema.h"

/* pg_advisory_xact_lock keys: "gtmigr" and "gtretn" as numbers. */
#define PG_LOCK_MIGRATE "6774629465"
#define PG_LOCK_RETAIN "6774726574"
/* gt_segments.daemon of a row the orphan sweep wrote for an object nobody
 * cataloged (daemon ids cannot hold parentheses). */
#define PG_ORPHAN_OWNER "(orphan)"

#define PG_MIGRATION_1                                                         \
  "CREATE TABLE gt_counter(id int PRIMARY KEY CHECK (id = 1),"                 \
  " next_seq bigint NOT NULL);"                                                \
  "INSERT INTO gt_counter VALUES(1, 1);"                                       \
  "INSERT INTO gt_meta VALUES('max_span_ns', '0');"                            \
  "CREATE TABLE gt_sessions("                                                  \
  " id bigserial PRIMARY KEY,"                                                 \
  " session text NOT NULL UNIQUE,"                                             \
  " service text NOT NULL, host text NOT NULL, pid bigint NOT NULL,"           \
  " process_start_ns bigint NOT NULL, agent_version text NOT NULL,"            \
  " tags json NOT NULL DEFAULT '{}',"                                          \
  " first_seen_ns bigint NOT NULL, last_seen_ns bigint NOT NULL,"              \
  " last_gen bigint, rejected bigint NOT NULL DEFAULT 0,"                      \
  " rejected_events bigint NOT NULL DEFAULT 0,"                                \
  " gens bigint NOT NULL DEFAULT 0, events bigint NOT NULL DEFAULT 0,"         \
  " bytes bigint NOT NULL DEFAULT 0, lost bigint NOT NULL DEFAULT 0,"          \
  " key_hash bytea);"                                                          \
  "CREATE INDEX gt_sessions_by_service ON gt_sessions(service, host);"         \
  "CREATE TABLE gt_segments("                                                  \
  " id bigserial PRIMARY KEY,"                                                 \
  " object text NOT NULL UNIQUE,"                                              \
  " bytes bigint NOT NULL, daemon text NOT NULL,"                              \
  " created_ns bigint NOT NULL, live_gens bigint NOT NULL,"                    \
  " dead_ns bigint);"                                                          \
  "CREATE INDEX gt_segments_dead ON gt_segments(dead_ns)"                      \
  " WHERE dead_ns IS NOT NULL;"                                                \
  "CREATE TABLE gt_generations("                                               \
  " seq bigint PRIMARY KEY,"                                                   \
  " session_id bigint NOT NULL REFERENCES gt_sessions(id),"                    \
  " gen bigint NOT NULL,"                                                      \
  " start_ns bigint NOT NULL, end_ns bigint NOT NULL,"                         \
  " events bigint NOT NULL, bytes bigint NOT NULL,"                            \
  " stored_bytes bigint NOT NULL,"                                             \
  " dropped bigint NOT NULL, evicted bigint NOT NULL,"                         \
  " rejected bigint NOT NULL,"                                                 \
  " status text NOT NULL DEFAULT 'ok', codec text NOT NULL,"                   \
  " committed_ns bigint NOT NULL, crc bigint NOT NULL,"                        \
  " segment_id bigint NOT NULL REFERENCES gt_segments(id),"                    \
  " off bigint NOT NULL, len bigint NOT NULL,"                                 \
  " UNIQUE(session_id, gen));"                                                 \
  "CREATE INDEX gt_generations_by_time ON gt_generations(session_id,"          \
  " start_ns);"                                                                \
  "CREATE INDEX gt_generations_by_start ON gt_generations(start_ns);"          \
  "CREATE INDEX gt_generations_by_committed ON gt_generations(committed_ns);"  \
  "CREATE INDEX gt_generations_by_segment ON gt_generations(segment_id);"      \
  "CREATE TABLE gt_pins("                                                      \
  " daemon text NOT NULL, handle int NOT NULL, min_seq bigint NOT NULL,"       \
  " expires_ns bigint NOT NULL, PRIMARY KEY(daemon, handle));"                 \
  "CREATE FUNCTION gt_json_object(t text) RETURNS json LANGUAGE plpgsql"       \
  " IMMUTABLE AS $$ BEGIN IF json_typeof(t::json) = 'object' THEN"             \
  " RETURN t::json; END IF; RETURN '{}'::json;"                                \
  " EXCEPTION WHEN others THEN RETURN '{}'::json; END $$;"                     \
  "CREATE FUNCTION gt_generations_add() RETURNS trigger LANGUAGE plpgsql AS "  \
  "$$"                                                                         \
  " BEGIN UPDATE gt_sessions SET gens = gens + 1, events = events +"           \
  " NEW.events, bytes = bytes + NEW.bytes, lost = lost + NEW.dropped +"        \
  " NEW.evicted + NEW.rejected WHERE id = NEW.session_id; RETURN NULL;"        \
  " END $$;"                                                                   \
  "CREATE FUNCTION gt_generations_del() RETURNS trigger LANGUAGE plpgsql AS "  \
  "$$"                                                                         \
  " BEGIN UPDATE gt_sessions SET gens = gens - 1, events = events -"           \
  " OLD.events, bytes = bytes - OLD.bytes, lost = lost - OLD.dropped -"        \
  " OLD.evicted - OLD.rejected WHERE id = OLD.session_id;"                     \
  " UPDATE gt_segments SET live_gens = live_gens - 1, dead_ns = CASE WHEN"     \
  " live_gens = 1 THEN (extract(epoch from clock_timestamp()) * 1e9)::bigint"  \
  " ELSE dead_ns END WHERE id = OLD.segment_id; RETURN NULL; END $$;"          \
  "CREATE TRIGGER gt_generations_add AFTER INSERT ON gt_generations"           \
  " FOR EACH ROW EXECUTE FUNCTION gt_generations_add();"                       \
  "CREATE TRIGGER gt_generations_del AFTER DELETE ON gt_generations"           \
  " FOR EACH ROW EXECUTE FUNCTION gt_generations_del();"

/* Daemons and their connections (version 2):
 *   gt_daemons     one row per running daemon: when it started and until
 *                  when its lease runs (renewed every second; a daemon
 *                  killed stops renewing). /v1/agents trusts a daemon's
 *                  connections only while its lease runs; the orphan sweep
 *                  spares the objects of a live daemon's current run.
 *   gt_conns       the sessions connected to each daemon now.
 *   gt_hello(s)    a HELLO's one catalog round trip: the session's bound
 *                  key hash (hex) and last committed gen. A function, so
 *                  the statement is one call (and tests can make it slow
 *                  with CREATE OR REPLACE, as a slow catalog would be). */
#define PG_MIGRATION_DAEMONS                                                   \
  "CREATE TABLE gt_daemons(daemon text PRIMARY KEY,"                           \
  " started_ns bigint NOT NULL, lease_ns bigint NOT NULL);"                    \
  "CREATE TABLE gt_conns(daemon text NOT NULL, session text NOT NULL,"         \
  " PRIMARY KEY(daemon, session));"                                            \
  "CREATE INDEX gt_conns_by_session ON gt_conns(session);"                     \
  "CREATE FUNCTION gt_hello(s text) RETURNS TABLE(key_hash text,"              \
  " last_gen bigint) LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN QUERY"         \
  " SELECT encode(x.key_hash, 'hex'), x.last_gen FROM gt_sessions x"           \
  " WHERE x.session = s; END $$;"

/* Generation summaries (version 4; store/pg_sum.c writes them in the
 * transaction that catalogs the generation, store/pg_search.c reads them),
 * the rows SQLite keeps in its sum_* tables (store_schema.h), deleted with
 * their generation by a trigger (cluster retention), as on SQLite. No
 * foreign keys: their check per inserted row (a lookup and a row lock in
 * gt_generations) cost more than the rows themselves at commit.
 * Names are bytea: any bytes a trace holds, compared bytewise.
 *   gt_sum_gens     seq -> floor_ns (every span >= it is in gt_sum_spans),
 *                   open_at_end, unmatched_ends, status (0 ok, else the
 *                   GTP_E_* code that kept it from being summarized).
 *   gt_sum_names    (name, seq, kind): count, total, min, max and the
 *                   histogram (proto/summary.h's compact encoding).
 *   gt_sum_spans    the long spans, and the ones carried across an edge,
 *                   one row per (seq, kind, name): the longest (max_ns),
 *                   whether any was carried, and the spans packed (pg_sum.h)
 *                   -- a generation holds thousands of spans and a dozen
 *                   names, and a row per span made the commit 4x slower.
 *   gt_sum_counters (seq, name): count, min, max, last.
 *   gt_sum_logs     (seq, name = category): count.
 * gt_meta.summary_below: generations cataloged before this version (seq at
 * or below it) have no summary; search decodes them instead. */
#define PG_MIGRATION_SUMMARY                                                   \
  "CREATE TABLE gt_sum_gens(seq bigint PRIMARY KEY,"                           \
  " floor_ns bigint NOT NULL, open_at_end bigint NOT NULL,"                    \
  " unmatched_ends bigint NOT NULL, status int NOT NULL);"                     \
  "CREATE TABLE gt_sum_names(name bytea NOT NULL, seq bigint NOT NULL,"        \
  " kind int NOT NULL, count bigint NOT NULL, total_ns bigint NOT NULL,"       \
  " min_ns bigint NOT NULL, max_ns bigint NOT NULL, hist bytea NOT NULL,"      \
  " PRIMARY KEY(name, seq, kind));"                                            \
  "CREATE INDEX gt_sum_names_by_seq ON gt_sum_names(seq);"                     \
  "CREATE TABLE gt_sum_spans(seq bigint NOT NULL, kind int NOT NULL,"          \
  " name bytea NOT NULL, max_ns bigint NOT NULL, carried int NOT NULL,"        \
  " spans bytea NOT NULL);"                                                    \
  "CREATE INDEX gt_sum_spans_by_seq ON gt_sum_spans(seq);"                     \
  "CREATE TABLE gt_sum_counters(seq bigint NOT NULL, name bytea NOT NULL,"     \
  " count bigint NOT NULL, min bigint NOT NULL, max bigint NOT NULL,"          \
  " last bigint NOT NULL, PRIMARY KEY(seq, name));"                            \
  "CREATE TABLE gt_sum_logs(seq bigint NOT NULL, name bytea NOT NULL,"         \
  " count bigint NOT NULL, PRIMARY KEY(seq, name));"                           \
  "CREATE FUNCTION gt_sum_del() RETURNS trigger LANGUAGE plpgsql AS $$"        \
  " BEGIN DELETE FROM gt_sum_gens WHERE seq = OLD.seq;"                        \
  " DELETE FROM gt_sum_names WHERE seq = OLD.seq;"                             \
  " DELETE FROM gt_sum_spans WHERE seq = OLD.seq;"                             \
  " DELETE FROM gt_sum_counters WHERE seq = OLD.seq;"                          \
  " DELETE FROM gt_sum_logs WHERE seq = OLD.seq; RETURN NULL; END $$;"         \
  "CREATE TRIGGER gt_sum_del AFTER DELETE ON gt_generations"                   \
  " FOR EACH ROW EXECUTE FUNCTION gt_sum_del();"                               \
  "INSERT INTO gt_meta SELECT 'summary_below', coalesce(max(seq), 0)::text"    \
  " FROM gt_generations;"

/* Index i holds the migration from version i to i + 1. */
#define PG_MIGRATIONS                                                          \
  {                                                                            \
    PG_MIGRATION_1, PG_MIGRATION_DAEMONS, PG_MIGRATION_HOLDS,                  \
        PG_MIGRATION_SUMMARY                                                   \
  }

#endif /* PG_SCHEMA_H */
