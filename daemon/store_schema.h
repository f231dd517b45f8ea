/* store_schema.h: the SQLite schema of gentraced, one source of truth for the
 * writer (store.c) and the readers (store_read.c, web/).
 *
 * Version rule: bump STORE_SCHEMA_VERSION for any change and add a migration
 * step in store.c (migrate from N-1 to N inside one transaction). A database
 * with a newer version than this build is refused with a clear message.
 *
 * Tables:
 *   meta         key/value; 'schema_version'.
 *   sessions     one row per agent session (id = 32 hex digits), identity from
 *                HELLO, tags as a JSON object, first/last seen (unix ns), the
 *                daemon's rejected count, last committed gen (for WELCOME).
 *   generations  one row per (session, gen): wall-clock span (unix ns), counts,
 *                ledger, status, codec. seq = commit order (the feed cursor).
 *   payloads     seq -> the generation's bytes (GEN_START + body + GEN_END),
 *                compressed with `codec`; apart from generations so listing
 *                and window queries never page through blobs.
 */
#ifndef STORE_SCHEMA_H
#define STORE_SCHEMA_H

#define STORE_SCHEMA_VERSION 1

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
  " rejected_events INTEGER NOT NULL DEFAULT 0);"                              \
  "CREATE INDEX IF NOT EXISTS sessions_by_service ON sessions(service, host);" \
  "CREATE TABLE IF NOT EXISTS generations("                                    \
  " seq INTEGER PRIMARY KEY AUTOINCREMENT,"                                    \
  " session_id INTEGER NOT NULL REFERENCES sessions(id),"                      \
  " gen INTEGER NOT NULL,"                                                     \
  " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"                       \
  " events INTEGER NOT NULL, bytes INTEGER NOT NULL,"                          \
  " stored_bytes INTEGER NOT NULL,"                                            \
  " dropped INTEGER NOT NULL, evicted INTEGER NOT NULL,"                       \
  " rejected INTEGER NOT NULL,"                                                \
  " status TEXT NOT NULL DEFAULT 'ok', codec TEXT NOT NULL,"                   \
  " committed_ns INTEGER NOT NULL,"                                            \
  " UNIQUE(session_id, gen));"                                                 \
  "CREATE INDEX IF NOT EXISTS generations_by_time"                             \
  " ON generations(session_id, start_ns);"                                     \
  "CREATE INDEX IF NOT EXISTS generations_by_start ON generations(start_ns);"   \
  "CREATE TABLE IF NOT EXISTS payloads("                                       \
  " seq INTEGER PRIMARY KEY, data BLOB NOT NULL);"

/* Codec names stored in generations.codec. */
#define STORE_CODEC_NONE "none"
#define STORE_CODEC_ZSTD "zstd"

#endif /* STORE_SCHEMA_H */
