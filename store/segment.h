/* segment.h: the write side of the shared store: packs the generations one
 * daemon receives into segment objects in S3-compatible storage and
 * catalogs each generation in PostgreSQL as (object, offset, length).
 *
 * Same contract as store.h's SQLite writer, so the daemon drives both
 * alike: segment_submit never blocks; done() runs on a segment thread
 * after the generation's segment object is stored AND its catalog rows are
 * committed (an ACK then survives the loss of this machine), with result
 * 0 (new), 1 (already stored: a resend) or a negative code.
 *
 * A segment closes after max_age_ms (counted from its first generation) or
 * once it holds max_bytes, whichever comes first, and on segment_close;
 * also early when no generation waits behind it and an uploader is free,
 * once it holds a quarter of max_bytes (or a 64th after 100 ms without a
 * new generation): an agent at its unACKed limit then gets its ACKs
 * without waiting out the age.
 * Object layout (docs/STORAGE.md): the generations' stored bytes back to
 * back, then an index footer (segment_index_parse reads it back), so an
 * object explains itself without the catalog.
 *
 * Up to `uploads` closed segments are PUT at once; their catalog commits
 * and done() still run one segment at a time in close order.
 *
 * While S3 or PostgreSQL is unreachable the segment waits and retries with
 * backoff (100 ms doubling to 5 s); generations behind it stay queued and
 * count in queued_bytes, which the daemon's --max-buffer bounds (it stops
 * reading, agents spool). segment_health says why.
 *
 * Thread: open/close from the main thread; the rest from any thread.
 */
#ifndef SEGMENT_H
#define SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "s3.h"
#include "store.h"

typedef struct segment_store segment_store;

typedef struct segment_config {
  const char *catalog;    /* postgresql://... */
  s3_config s3;           /* .url = s3://BUCKET[/PREFIX]; other fields or env */
  const char *daemon_id;  /* names this daemon's objects; NULL = host-pid-rnd */
  uint64_t max_bytes;     /* close a segment at this size; 0 = 32 MiB */
  uint32_t max_age_ms;    /* close a segment this long after its first
                             generation; 0 = 2000 */
  int zstd_level;         /* 0 = 3 */
  uint32_t close_wait_ms; /* segment_close retries an unreachable store this
                             long, then fails what is left; 0 = 10000 */
  uint32_t uploads;       /* segment PUTs in flight at once, each on its
                             own thread and connection; commits stay in
                             close order; 0 = 4, at most 16 */
  uint32_t test_commit_delay_ms; /* tests: stall each catalog commit after
                                    its seqs are taken (a late commit) */
  int no_idle_close;             /* tests: close on size and age only, never
                                    early when idle (see segment.c) */
  uint32_t test_put_delay_ms;    /* tests: hold back the PUT of the
                                    test_put_delay_seg-th closed segment */
  uint64_t test_put_delay_seg;   /* (1-based; 0 = none) by this long */
  void (*log)(void *ctx, const char *kv); /* logfmt body; NULL = stderr */
  void *log_ctx;
} segment_config;

/* Connects to both stores (either unreachable: GTP_E_UNAVAIL with *cause),
 * migrates the catalog, starts the threads. */
int segment_open(const segment_config *cfg, store_done_fn done, void *ctx,
                 segment_store **out, char **cause);
/* Stores and catalogs everything queued (see close_wait_ms), stops. */
void segment_close(segment_store *s);

/* Queues g (ownership moves; it comes back in done()). 0, or
 * GTP_E_SHUTDOWN after close began (g still the caller's). */
int segment_submit(segment_store *s, store_gen *g);

/* Last committed gen of a session, from the catalog (any daemon's
 * commits): 1 and *gen, 0 none, or a negative code (GTP_E_UNAVAIL). */
int segment_last_gen(segment_store *s, const uint8_t session[16],
                     uint64_t *gen);
/* The key hash bound to a session in the catalog: 1 and hash, 0 none, or
 * GTP_E_UNAVAIL (also at once, without waiting, while the store is known
 * to be down). */
int segment_session_key(segment_store *s, const uint8_t session[16],
                        uint8_t hash[STORE_KEY_HASH_SIZE]);
void segment_note_rejected(segment_store *s, const uint8_t session[16],
                           uint64_t events);

/* store_stats fields this backend fills: queued_*, committed_*,
 * duplicate_gens, transactions (= segments), commit_ns_*. */
void segment_stats_get(segment_store *s, store_stats *out);

/* 0 when the last store and catalog calls succeeded; else GTP_E_UNAVAIL and
 * a one-line reason ("S3 PUT ...: ...") in reason. */
int segment_health(segment_store *s, char *reason, size_t cap);

/* The catalog and an S3 client for readers (borrowed; the S3 client is
 * for one thread at a time: the store's own threads use their own). */
struct pg_cat *segment_catalog(segment_store *s);
/* Bytes of segment buffers held now beside the queued payloads (the
 * compressed copies; the daemon counts them in --max-buffer). Lock-free. */
uint64_t segment_scratch_bytes(segment_store *s);
/* Segments open, closed or uploading now (process-wide; metrics). */
uint64_t segment_alive(void);
/* This daemon's id (names its objects and its pin row). Borrowed. */
const char *segment_daemon_id(const segment_store *s);

/* One entry of a segment's index footer. */
typedef struct segment_entry {
  uint8_t session[16];
  uint64_t gen;
  uint64_t off, len; /* stored bytes in the object */
  uint64_t raw_len;  /* after decompression */
  uint8_t codec;     /* 0 none, 1 zstd */
  int64_t start_ns, end_ns;
} segment_entry;

/* Parses the footer of a whole segment object: *n entries in a malloc'd
 * array (caller frees). GTP_E_MAGIC/CRC/CORRUPT/TRUNC on a bad object;
 * every entry is checked to lie inside the object's data part. */
int segment_index_parse(const uint8_t *obj, size_t len, segment_entry **out,
                        size_t *n);

#endif /* SEGMENT_H */
