/* web_internal.h: what the files of web/ share (not for the daemon). */
#ifndef WEB_INTERNAL_H
#define WEB_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "json.h"
#include "readpool.h"
#include "slowguard.h"
#include "web.h"

/* Status codes counted one by one in /metrics; the rest go to "other". */
#define WEB_CODES(XX)                                                          \
  XX(200) XX(201) XX(204) XX(400) XX(401) XX(403) XX(404) XX(405) XX(413)    \
  XX(500) XX(501) XX(503) XX(507)
enum {
#define WEB_CODE_IDX_(c) WEB_CODE_##c,
  WEB_CODES(WEB_CODE_IDX_)
#undef WEB_CODE_IDX_
      WEB_CODE_OTHER,
  WEB_NCODES
};

/* How long a request waits for a free store reader before it gets 503. */
#define WEB_POOL_WAIT_MS 5000
/* Bounds a listing can never exceed, whatever the parameters say. */
#define WEB_LIST_LIMIT_MAX 100000
#define WEB_FEED_LIMIT_MAX 10000
#define WEB_FEED_LIMIT_DEFAULT 1000
#define WEB_FEED_WAIT_MAX_S 60
/* A window lists at most this many generations (8 bytes each in memory)
 * even when their bytes are under max_window_bytes. */
#define WEB_WINDOW_GENS_MAX 1000000

struct web_server {
  /* Written once in web_start, read-only afterwards. */
  web_config cfg; /* strings below are our copies */
  char *host, *db_path, *read_token;
  size_t read_token_len;
  char *cors; /* our copy of cfg.cors_origins, NULL = CORS off */
  char *admin_token; /* our copy, NULL = pins cannot be written */
  size_t admin_token_len;
  uint64_t max_pinned_bytes;
  int64_t pin_max_ttl_ns;
  unsigned max_downloads, max_long_polls;
  int64_t send_timeout_ns;
  struct MHD_Daemon *mhd;
  readpool *pool;
  storage *own_st; /* a read-only SQLite storage web opened (no storage
                      given in the config), else NULL */
  slowguard *guard; /* headers deadline (slowloris) */
  struct web_tls *tls; /* HTTPS credentials (web_tls.c), or NULL */
  /* Stack symbols (sym/), shared by downloads. */
  struct symcache *syms;

  /* Protected by feed_lock: the feed's wake-up state. */
  pthread_mutex_t feed_lock;
  pthread_cond_t feed_cond; /* CLOCK_MONOTONIC */
  int64_t last_seq;         /* highest seq announced or seen */

  /* Atomics: counters and flags read by any thread. Relaxed order is
   * enough: they are statistics, or (stopping) a hint re-checked under
   * feed_lock where it matters. */
  atomic_int stopping;
  atomic_uint_fast64_t requests[WEB_NCODES];
  atomic_uint_fast64_t bytes_sent;
  atomic_uint_fast64_t skipped_gens;
  atomic_int active_downloads;
  atomic_int feed_waiters;
  atomic_int long_polls; /* requests parked (or about to be) in /v1/feed */
  atomic_uint_fast64_t downloads_refused;  /* 503: max_downloads reached */
  atomic_uint_fast64_t long_polls_refused; /* 503: max_long_polls reached */
  atomic_uint_fast64_t ended_early;        /* retention deleted the rest */
  atomic_uint_fast64_t send_timeouts;      /* download clients too slow */
  atomic_uint_fast64_t auth_failures[2];   /* read token [0] missing, [1] wrong */
  atomic_uint_fast64_t bad_params;         /* NUL or invalid UTF-8 */
  atomic_uint_fast64_t held_bytes;   /* built answers not yet freed by MHD */
  atomic_uint_fast64_t held_refused; /* 503: WEB_HELD_MAX reached */

  /* Protected by auth_log_lock: failed-token log lines, at most one per
   * WEB_AUTH_LOG_EVERY_NS with the count of those not logged. */
  pthread_mutex_t auth_log_lock;
  int64_t auth_log_next_ns;
  uint64_t auth_log_suppressed;
};

#define WEB_AUTH_LOG_EVERY_NS (10 * INT64_C(1000000000))
/* Built answers (listings, /metrics) held for their clients at most, in
 * total; past it new ones get 503 (web_reply). */
#define WEB_HELD_MAX (UINT64_C(256) << 20)

/* One request being answered. Lives on the handler's stack. */
typedef struct web_req {
  web_server *w;
  struct MHD_Connection *conn;
  const char *url;
  int64_t now_ns;
  enum MHD_Result ret; /* result of the response queued by an error path */
} web_req;

/* ------------------------------------------- web_req.c: every handler's */

/* Log one line (logfmt body after the level): through cfg.log if set, else
 * stderr. */
void web_log(web_server *w, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds CORS and common headers, counts the status, queues. Thread: the
 * connection's. */
enum MHD_Result web_queue(web_req *r, unsigned status,
                          struct MHD_Response *resp);
/* Queues body (malloc'd; taken) with that content type. */
enum MHD_Result web_reply(web_req *r, unsigned status, const char *ctype,
                          char *body, size_t len);
enum MHD_Result web_reply_json(web_req *r, unsigned status, json *j);
/* Writes "key":"RFC 3339" and "key_ns":"digits" (nanoseconds as a string:
 * JSON numbers lose precision past 2^53) into the open object. */
void web_put_time(json *j, const char *key, int64_t ns);
/* The HTTP status and error code for a failed storage read: 503
 * "unavailable" while a shared store cannot be reached (retry later), 503
 * "overloaded" when every reader is busy, else 500 "internal". */
unsigned web_rc_status(int rc);
const char *web_rc_code(int rc);
/* {"error":code,"message":...}; also stores the result in r->ret. */
enum MHD_Result web_error(web_req *r, unsigned status, const char *code,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Query parameters. web_args_check answers 400 (and returns -1) if the
 * query holds a name outside `allowed` (NULL-terminated; "token" is always
 * allowed). The typed getters return 1 if present and valid, 0 if absent,
 * -1 after answering 400 for a bad value. */
const char *web_arg(web_req *r, const char *name);
int web_args_check(web_req *r, const char *const *allowed);
/* Answers 400 (and returns -1) if any query parameter is not clean text
 * (web.c invariant 5); on_request runs it before any handler. */
int web_args_text_check(web_req *r);
int web_arg_time(web_req *r, const char *name, int64_t *out);
int web_arg_dur(web_req *r, const char *name, int64_t *out);
int web_arg_u64(web_req *r, const char *name, uint64_t min, uint64_t max,
                uint64_t *out);
/* 32 lowercase/uppercase hex digits -> lowercase copy in out. */
int web_arg_session(web_req *r, const char *name, char out[33]);
int web_session_valid(const char *s, char out[33]);

/* The slow-client guard's tracker of a connection (NULL if none). */
slowguard_conn *web_conn_guard(struct MHD_Connection *conn);

/* Borrow a reader or answer 503 / 500 (returns NULL then). */
storage_reader *web_reader_get(web_req *r);
void web_reader_put(web_req *r, storage_reader *sr);

/* Downloads in flight: every download handler takes a place
 * among --http-max-downloads before its listing (web_dl_slot_take answers
 * 503 + Retry-After and returns -1 past the cap) and gives it back exactly
 * once: when its response is freed, or at once if it made none. */
int web_dl_slot_take(web_req *r);
void web_dl_slot_put(web_server *w);

/* Endpoints (web_list.c, web_trace.c, web_feed.c). */
enum MHD_Result web_agents(web_req *r);
enum MHD_Result web_session_gens(web_req *r, const char *session);
enum MHD_Result web_session_gen(web_req *r, const char *session,
                                const char *gen);
enum MHD_Result web_trace(web_req *r);
enum MHD_Result web_gotrace(web_req *r); /* web_gotrace.c */
enum MHD_Result web_feed(web_req *r);
/* web_pins.c: GET lists (read token, through route); POST and DELETE
 * (admin token) come straight from on_request with the body pieces. */
enum MHD_Result web_pins_list(web_req *r);
int web_pins_is_write(const char *method, const char *url);
enum MHD_Result web_pins_write(web_req *r, const char *method,
                               const char *upload, size_t *upload_size,
                               void **con_cls);
void web_pins_body_free(void *con_cls);
void web_pins_metrics(web_server *w, gtp_wbuf *b);
/* The token of an `Authorization: Bearer TOKEN` header (spaces after
 * "Bearer " skipped), or NULL when the request has none (web_req.c). */
const char *web_bearer(web_req *r);
/* Counts a refused token (which: "read" or "admin") and logs it, rate
 * limited, never the token itself (web_req.c). */
void web_auth_refused(web_req *r, int sent, const char *which);
/* web_search.c */
enum MHD_Result web_search(web_req *r);
enum MHD_Result web_summary(web_req *r);

#endif
