/* storage.h: the one storage interface of gentraced: daemon/ writes
 * through it and web/ reads through it, and neither knows which backend
 * runs:
 *   - SQLite (embedded default, --db): store.h / store_read.h, unchanged;
 *   - shared (--catalog postgresql://... --objects s3://BUCKET[/PREFIX]):
 *     segment objects in S3-compatible storage and a PostgreSQL catalog
 *     (segment.h, pg_cat.h), so several daemons serve one store.
 *
 * Write side: the store.h contract (submit never blocks; done() on a store
 * thread after the generation is durable). Read side: the store_read.h
 * calls, on readers opened from the storage (each used by one thread at a
 * time). Both backends return the same rows in the same order for the same
 * committed generations; seq values are each backend's own commit order.
 *
 * Thread: open/close on the main thread; the rest from any thread, except
 * storage_last_gen, storage_session_key and storage_hello, which may wait
 * for the catalog on the shared backend (call them off the event loop).
 */
#ifndef STORAGE_H
#define STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "segment.h"
#include "store.h"
#include "store_read.h"
#include "store_search.h"

typedef struct storage storage;

typedef struct storage_config {
  store_config sqlite; /* the embedded backend (sqlite.path = --db) */
  /* The shared backend: both set, or neither (then SQLite runs). */
  const char *catalog;   /* postgresql://... */
  const char *objects;   /* s3://BUCKET[/PREFIX] */
  segment_config shared; /* tuning and S3 overrides (config-file keys) */
  uint64_t cache_bytes;  /* shared readers' cache; 0 = 64 MiB */
  /* Shared retention (sqlite.retain_ns and sqlite.max_db_bytes are the
   * limits, sqlite.pins this daemon's download pins): */
  uint32_t retain_tick_ms;  /* 0 = 5000 */
  uint32_t retain_grace_ms; /* dead segment objects kept; 0 = 60000 */
  uint32_t orphan_grace_ms; /* uncataloged objects kept; 0 = 600000 */
  uint32_t live_tick_ms;    /* connections published; 0 = 1000 */
} storage_config;

/* Opens the configured backend. Only one of catalog/objects, or a shared
 * store that cannot be reached, is an error with a clear *cause. */
int storage_open(const storage_config *cfg, store_done_fn done, void *ctx,
                 storage **out, char **cause);
/* A read-only storage over an SQLite database (no writer): for readers of a
 * database another process writes (web/ tests, tools). */
int storage_open_sqlite_readonly(const char *path, storage **out, char **cause);
void storage_close(storage *st);
/* The retention pins of this store (hold.h), NULL on a read-only storage.
 * Borrowed until storage_close. */
struct hold *storage_holds(storage *st);
/* 1 when the shared backend runs. */
int storage_is_shared(const storage *st);
/* A short description for logs: the db path, or "catalog=... objects=...". */
const char *storage_describe(const storage *st);

int storage_submit(storage *st, store_gen *g);
int storage_last_gen(storage *st, const uint8_t session[16], uint64_t *gen);
/* store_session_key's contract; the shared backend may also answer
 * GTP_E_UNAVAIL (catalog unreachable: refuse the HELLO for now). */
int storage_session_key(storage *st, const uint8_t session[16],
                        uint8_t hash[STORE_KEY_HASH_SIZE]);
/* Both of a HELLO's lookups (storage_session_key's and storage_last_gen's
 * answers) at once. On the shared backend one catalog round trip on a
 * pool of its own (so slow lookups never hold the writer's connections):
 * it may wait for the network, so the daemon calls it on libuv's thread
 * pool, never on its loop. */
typedef struct storage_hello_answer {
  int key_rc; /* 1 bound (key set), 0 none, GTP_E_UNAVAIL cannot check now */
  uint8_t key[STORE_KEY_HASH_SIZE];
  int has_last;
  uint64_t last_gen;
} storage_hello_answer;
void storage_hello(storage *st, const uint8_t session[16],
                   storage_hello_answer *out);
/* A session connected to this daemon (on 1) or left (on 0): on the shared
 * backend published to the catalog within a tick, so /v1/agents on every
 * daemon says `connected` alike. Only takes a lock. */
void storage_session_live(storage *st, const uint8_t session[16], int on);
void storage_note_rejected(storage *st, const uint8_t session[16],
                           uint64_t events);
void storage_stats_get(storage *st, store_stats *out);
/* store_scratch_bytes's contract, for either backend. Lock-free. */
uint64_t storage_scratch_bytes(storage *st);
/* 0 healthy; GTP_E_UNAVAIL with a one-line reason while the shared store
 * cannot be written (ingest is not ACKed then). */
int storage_health(storage *st, char *reason, size_t cap);

/* Appends the shared store's Prometheus lines (catalog pools and errors,
 * S3 requests, cache, segments, retention, orphans, lease) to b; nothing
 * on SQLite (its lines come from store_stats). */
void storage_metrics(storage *st, gtp_wbuf *b);

typedef struct storage_reader storage_reader;
int storage_reader_open(storage *st, storage_reader **out, char **cause);
void storage_reader_close(storage_reader *r);
/* Span search and per-name statistics (GET /v1/search, /v1/summary):
 * store_search.h's contracts on either backend, the same answers for the
 * same generations (summary rows in one total order: total_ns descending,
 * then kind, then name). On the shared backend the catalog's summary rows
 * (pg_search.h), a page of candidate generations at a time; a generation
 * that must be decoded is read like a payload (so GTP_E_UNAVAIL when S3
 * cannot be reached and it is not cached). May wait for the network:
 * call off the event loop. */
int storage_search_spans(storage_reader *r, const store_search_query *q,
                         store_span_cb cb, void *ctx, int64_t *next_seq,
                         uint64_t *next_skip);
int storage_search_summary(storage_reader *r, const store_summary_query *q,
                           store_stats_cb cb, void *ctx, uint64_t *pending);
/* 1 if any session of that service is stored, 0 if none, < 0 on error. */
int storage_search_service_known(storage_reader *r, const char *service);

int storage_read_sessions(storage_reader *r, const store_session_filter *f,
                          store_session_cb cb, void *ctx);
int storage_read_session_gens(storage_reader *r, const char *session,
                              int64_t from_ns, int64_t to_ns, int64_t after,
                              uint32_t limit, store_gen_cb cb, void *ctx);
int storage_read_window(storage_reader *r, const store_window_query *q,
                        store_gen_cb cb, void *ctx);
int storage_read_feed(storage_reader *r, int64_t after_seq, uint32_t limit,
                      store_gen_cb cb, void *ctx);
int storage_read_max_seq(storage_reader *r, int64_t *seq);
int storage_read_feed_since(storage_reader *r, int64_t since_ns,
                            int64_t *after_seq);
/* Before a download's headers: 0 when the payloads of seqs[0..n) can be
 * read now (always on SQLite; on the shared store when every one is cached
 * or S3 answers), else GTP_E_UNAVAIL, so the caller can answer 503 instead
 * of cutting a stream short. */
int storage_read_check(storage_reader *r, const int64_t *seqs, size_t n);
/* GTP_E_UNAVAIL on the shared backend when the catalog or S3 cannot be
 * reached and the generation is not in the readers' cache. */
int storage_read_payload(storage_reader *r, int64_t seq, gtp_wbuf *out);
int storage_read_payload_by_gen(storage_reader *r, const char *session,
                                uint64_t gen, gtp_wbuf *out);
/* store_read_payload_zstd's contract (one complete zstd frame of the
 * generation). The shared backend compresses the (cached) generation here
 * at level 1. */
int storage_read_payload_zstd(storage_reader *r, int64_t seq, gtp_wbuf *out);

#endif /* STORAGE_H */
