/* store_read.h: the read side of storage, for the HTTP API (web/).
 *
 * Each reader is one read-only SQLite connection (WAL lets it read while the
 * store thread writes). Every call is one short read transaction: no
 * transaction stays open across calls, so a slow HTTP client can never
 * starve checkpoints. Listing calls stream rows through a callback and hold
 * no blob; store_read_payload fetches one generation at a time.
 *
 * Thread: a reader is used by one thread at a time (web keeps a pool).
 */
#ifndef STORE_READ_H
#define STORE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct store_reader store_reader;

int store_reader_open(const char *path, store_reader **out, char **cause);
void store_reader_close(store_reader *r);

typedef struct store_session_row {
  const char *session; /* 32 hex digits; all strings borrowed for the call */
  const char *service, *host, *agent_version, *tags_json;
  uint64_t pid;
  int64_t started_ns;     /* process start */
  int64_t first_seen_ns, last_seen_ns;
  uint64_t generations;   /* stored rows */
  int has_gens;
  uint64_t first_gen, last_gen;
  uint64_t events, bytes; /* sums over stored generations */
  uint64_t lost;          /* dropped + evicted + rejected, stored ledgers */
  uint64_t rejected_gens; /* daemon-side rejected count */
  int connected_any;      /* shared store: connected to some daemon whose
                             lease runs (SQLite: always 0; the daemon
                             knows its own connections) */
} store_session_row;

/* Filters: NULL = any. tag_key/tag_value: sessions whose tags hold k = v
 * (exact match; tag_value NULL: any value of k). */
typedef struct store_session_filter {
  const char *service, *host, *tag_key, *tag_value;
} store_session_filter;

/* Callback returns 0 to go on, non-zero to stop (that value is returned). */
typedef int (*store_session_cb)(void *ctx, const store_session_row *row);
int store_read_sessions(store_reader *r, const store_session_filter *f,
                        store_session_cb cb, void *ctx);

typedef struct store_gen_row {
  int64_t seq;
  const char *session, *service, *host; /* borrowed for the call */
  uint64_t gen;
  int64_t start_ns, end_ns;
  uint64_t events, bytes, stored_bytes;
  uint64_t dropped, evicted, rejected;
  const char *status, *codec;
  int64_t committed_ns;
} store_gen_row;
typedef int (*store_gen_cb)(void *ctx, const store_gen_row *row);

/* Generations of one session (hex id) overlapping [from_ns, to_ns) (0/INT64_MAX
 * for open ends), gen > after (after = -1 for none), ordered by gen, at most
 * limit rows (0 = no limit). GTP_E_NOTFOUND if the session is unknown. */
int store_read_session_gens(store_reader *r, const char *session,
                            int64_t from_ns, int64_t to_ns, int64_t after,
                            uint32_t limit, store_gen_cb cb, void *ctx);

/* Window: every generation overlapping [from_ns, to_ns) (start < to and
 * end > from) of one session (session != NULL) or of every session of a
 * service (and host, if not NULL), ordered by start_ns then seq. */
typedef struct store_window_query {
  const char *session, *service, *host;
  int64_t from_ns, to_ns;
} store_window_query;
int store_read_window(store_reader *r, const store_window_query *q,
                      store_gen_cb cb, void *ctx);

/* Feed: generations with seq > after_seq in seq order, at most limit. */
int store_read_feed(store_reader *r, int64_t after_seq, uint32_t limit,
                    store_gen_cb cb, void *ctx);
/* Highest committed seq (0 if none). */
int store_read_max_seq(store_reader *r, int64_t *seq);
/* The feed cursor just before the first generation committed at or after
 * since_ns (unix ns): store_read_feed(after_seq) then starts there. When
 * nothing was committed since, the newest seq (only new commits follow). */
int store_read_feed_since(store_reader *r, int64_t since_ns,
                          int64_t *after_seq);

/* One generation by (session hex, gen) or by seq: looks up the row, and
 * appends its decompressed bytes (GEN_START + body + GEN_END) to out.
 * GTP_E_NOTFOUND if it does not exist (e.g. deleted by retention). */
int store_read_payload(store_reader *r, int64_t seq, gtp_wbuf *out);
int store_read_payload_by_gen(store_reader *r, const char *session,
                              uint64_t gen, gtp_wbuf *out);
/* The same generation as one complete zstd frame that decompresses to what
 * store_read_payload appends, without decompressing it: the stored frame
 * when the row is zstd (checked to be exactly one frame of the recorded
 * size), otherwise compressed here. For compressed downloads (web/). */
int store_read_payload_zstd(store_reader *r, int64_t seq, gtp_wbuf *out);

/* Diagnostics (tests, debugging): appends the EXPLAIN QUERY PLAN of the
 * statement behind a call to out, one plan line per text line, so a test can
 * check that window and feed queries search an index instead of scanning
 * every generation. */
enum store_read_query {
  STORE_RQ_SESSIONS,
  STORE_RQ_SESSION_GENS,
  STORE_RQ_WINDOW_SESSION,
  STORE_RQ_WINDOW_SERVICE,
  STORE_RQ_WINDOW_SERVICE_HOST,
  STORE_RQ_FEED,
  STORE_RQ_PAYLOAD,
  STORE_RQ_COUNT_
};
int store_read_explain(store_reader *r, int query, gtp_wbuf *out);

#endif
