/* store.h: the write side of gentraced's storage (SQLite, zstd).
 *
 * The store owns one SQLite connection and one thread. The ingest loop hands
 * it complete, validated generations with store_submit(); the store thread
 * commits them in batched transactions (WAL; synchronous=NORMAL, or FULL with
 * --sync full) and reports each one through the done callback, *on the store
 * thread*, after its transaction committed; the loop side turns that into an
 * ACK after a wake-up of its loop (one per batch of completions). Kept
 * behind this small interface so a shared backend (object storage +
 * PostgreSQL catalog) can replace it.
 *
 * Thread: store_open/store_close from the main thread; store_submit,
 * store_last_gen, store_note_rejected and store_stats_get from any thread.
 */
#ifndef STORE_H
#define STORE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "store_pin.h"

typedef struct store store;

/* SHA-256 of a session key (proto/sha256.h). */
#define STORE_KEY_HASH_SIZE 32

typedef struct store_config {
  const char *path;          /* database file */
  int sync_full;             /* 1: synchronous=FULL (power-loss safe) */
  int64_t retain_ns;         /* 0 = keep forever */
  uint64_t max_db_bytes;     /* 0 = unlimited; main db + WAL */
  int zstd_level;            /* default 3 */
  /* 1: store every payload raw, no zstd (gentraced --zstd-level 0): the
   * compressor threads then only check and summarize. */
  int no_compress;
  /* 1: while more than zstd_fast_backlog bytes (0: STORE_ZFAST_BACKLOG)
   * wait for a compressor, compress at zstd_fast_level instead (0: store
   * raw; negative: zstd's fast levels), so a burst the compressors cannot
   * follow at zstd_level does not pile up (store.c invariant 15). */
  int zstd_fast;
  int zstd_fast_level;
  uint64_t zstd_fast_backlog;
  uint32_t batch_max;        /* generations per transaction, default 64 */
  /* Group commit: once a generation is ready, wait up to this long for
   * more from other sessions (until batch_max or STORE_LINGER_BYTES) so
   * one transaction carries many small generations; 0 = commit at once.
   * Adds at most this to an ACK's latency. */
  uint32_t linger_ms;
  /* The rollups of a slot the batches keep adding to are held in memory
   * and written once no batch added to it for this long (a fleet's
   * current ten minutes: one upsert per key per slot instead of per
   * transaction; store_rollup.h); 0 = written at every commit. Readers
   * take the raw rows of a held slot, so their answers do not change. */
  uint32_t rollup_hold_ms;
  uint32_t test_delay_ms;    /* sleep before each commit (tests: slow store) */
  store_pins *pins;          /* retention never deletes seq >= pinned min */
  /* Optional: receives one logfmt body ("msg=... k=v") per error line, from
   * the store thread; NULL = logfmt lines on stderr. */
  void (*log)(void *ctx, const char *kv);
  void *log_ctx;
  /* Optional: the same for progress lines (level info: the summary
   * backfill, the rollup rebuild); NULL = logfmt lines on stderr. */
  void (*log_info)(void *ctx, const char *kv);
} store_config;

/* A complete generation handed to the store. Ownership of the struct and
 * payload moves to the store at store_submit and comes back in done(). */
typedef struct store_gen {
  uint8_t session[16];
  /* identity from HELLO (NUL-terminated): owned, unless ident_borrowed */
  char *service, *host, *agent_version;
  char *tags_json; /* JSON object text, e.g. {"az":"b"} */
  /* 1: the four identity strings above are the submitter's, not g's: it
   * keeps them alive and unchanged until done() has handed g back and g
   * was freed, and store_gen_free leaves them alone. The store only reads
   * them, and only between store_submit and done(). gentraced lends each
   * generation its connection's strings (the connection holds one
   * reference per queued generation and frees its identity at the last),
   * instead of four copies per generation. 0: g owns them. */
  int ident_borrowed;
  uint64_t pid, process_start_ns;
  uint64_t gen;
  int64_t start_ns, end_ns;        /* wall clock from the CLOCK record */
  /* Hash of the session key that sent it (has_key 1); bound to the session
   * at store_submit if the session has none yet (store_session_key). */
  uint8_t key_hash[STORE_KEY_HASH_SIZE];
  int has_key;
  /* 1: an earlier generation of this session with this key was submitted
   * already, so its binding is in the index (a binding never changes nor
   * goes, store_index.c invariant 3): store_submit skips that lookup.
   * gentraced sets it from a connection's second generation on. */
  int key_bound;
  gtp_gen_end end;                 /* manifest + ledger */
  uint8_t *payload;                /* GEN_START + body + GEN_END, malloc'd */
  size_t len;
  /* 1: the submitter parsed the payload only lazily (gtp_gen_parse_lazy,
   * events unchecked). The store then checks every event in the walk that
   * summarizes them (one decode per event), before anything of the
   * generation is written, and refuses one that fails: bad_events = 1,
   * result = the decode error, nothing stored. gentraced's loop does this
   * so that no event is decoded on the loop nor twice. */
  int check_events;
  void *cookie;                    /* the caller's, untouched */
  /* filled by the store before done(): */
  int result;       /* 0 committed, 1 duplicate (already stored with the
                       same CRC: ACK it), GTP_E_CONFLICT (stored with
                       another CRC: refuse it), GTP_E_TOOBIG (the session's
                       totals would overflow: refuse it), GTP_E_DISKFULL,
                       or another negative code */
  int64_t seq;      /* commit sequence (feed cursor), 0 if not stored */
  uint64_t stored_bytes;
  int bad_events;   /* check_events found an invalid event (see there) */
  /* 1: the done() of another generation of the same transaction follows
   * this one on the same thread, before the thread does anything else; 0:
   * this is the last. A callee may hold the completions of a transaction
   * and hand them on together at its last one (gentraced: one lock and at
   * most one wake-up of its loop per transaction). The SQLite store sets
   * it; a backend that never does hands each generation back alone. */
  int done_more;
} store_gen;

/* Called on the store thread after the transaction holding g committed or
 * failed. The callee owns g (free with store_gen_free). */
typedef void (*store_done_fn)(void *ctx, store_gen *g);

/* Process-wide SQLite settings for a program whose SQLite is only gentrace's
 * (gentraced): call first, before any SQLite use (later it does nothing).
 * Turns off SQLite's memory statistics: with them on (the default) every
 * allocation SQLite makes takes a global mutex to count itself, and this
 * SQLite has no lookaside (Debian builds it without), so a small fleet
 * generation's commit made about 80 of them (callgrind, bench_commit).
 * sqlite3_memory_used() then reads 0. Also installs the store's page
 * cache (store_pcache.h): the write connection's pages in an arena of huge
 * pages, every other connection's in SQLite's default cache
 * (GENTRACE_STORE_PCACHE=0 keeps the default for all). */
void store_process_init(void);

/* Opens (creating or migrating) the database and starts the store thread.
 * On error returns a negative code and sets *cause to a malloc'd message. */
int store_open(const store_config *cfg, store_done_fn done, void *ctx,
               store **out, char **cause);
/* Commits everything queued, stops the thread, closes the database. */
void store_close(store *s);

/* Queues g; never blocks on disk. Returns 0, or GTP_E_SHUTDOWN after close
 * began (g still belongs to the caller then). */
int store_submit(store *s, store_gen *g);

/* Last committed gen of a session from an in-memory index (loaded at open,
 * updated at commit): 1 and *gen set, or 0 if the session has none. */
int store_last_gen(store *s, const uint8_t session[16], uint64_t *gen);

/* Counts a generation the daemon rejected (ledger "rejected" per session).
 * For a session that has stored nothing the count is kept in memory only,
 * for at most STORE_NOROW_MAX such sessions and 10 minutes after its last
 * rejection (store.c invariant 10). */
void store_note_rejected(store *s, const uint8_t session[16], uint64_t events);

/* The key hash bound to a session (by a submitted generation or a stored
 * row): 1 and *hash filled, or 0 if the session has none. */
int store_session_key(store *s, const uint8_t session[16],
                      uint8_t hash[STORE_KEY_HASH_SIZE]);

void store_gen_free(store_gen *g);

typedef struct store_stats {
  uint64_t queued_gens, queued_bytes;   /* waiting for the store thread */
  uint64_t committed_gens, committed_bytes, duplicate_gens;
  uint64_t transactions, commit_ns_total, commit_ns_max;
  uint64_t retention_deleted_gens;
  uint64_t db_bytes;                    /* main db + WAL, last measured */
  int disk_full;                        /* 1 while ingest must pause */
  uint64_t norow_sessions;  /* sessions tracked that stored nothing */
  uint64_t norow_untracked; /* rejections not tracked (norow full) */
  uint64_t index_sessions;  /* entries of the in-memory session index */
  /* Summaries (store_summary.h): generations stored before schema 4 still
   * without one, and how many the background backfill made so far. */
  uint64_t summary_pending, summary_backfilled;
  /* Ten-minute rollups (store_rollup.h): slots whose rollup is not exact yet
   * (after a delete, or all hours of a database from before schema 6), and
   * slots rebuilt so far. */
  uint64_t rollup_pending_slots, rollup_rebuilt_slots;
  /* WAL checkpoints (store_ckpt.h): passes of the checkpointer thread and
   * their time; the store thread's short finishes and the longest. */
  uint64_t ckpt_passes, ckpt_pass_ns_total, ckpt_pass_ns_max;
  uint64_t ckpt_finishes, ckpt_finish_ns_max;
  int ckpt_busy; /* a pass is under way or asked for */
  /* Generations the compressors stored at zstd_level, at zstd_fast_level
   * while behind, and raw (small, incompressible, or level 0). */
  uint64_t zgens_level, zgens_fast, zgens_raw;
} store_stats;

void store_stats_get(store *s, store_stats *out);

/* Bytes of compressed copies and compression buffers the store holds now
 * beside the queued payloads (ingest counts them in --max-buffer). Any
 * thread; lock-free. */
uint64_t store_scratch_bytes(store *s);

#endif /* STORE_H */
