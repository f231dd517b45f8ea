/* gentrace.h: libgentrace, the gentrace in-process tracing agent.
 *
 * Link with `pkg-config --cflags --libs gentrace` (or `--static` with
 * libgentrace.a). The agent records events into per-thread buffers, cuts them
 * into self-contained generations (one per GENTRACE_PERIOD_MS) and streams
 * them to gentraced over TCP. See docs/AGENT.md.
 *
 * Thread rules for every function here: safe from any thread, at any time,
 * including before gt_start() and after gt_stop() (they are then no-ops that
 * return quickly). No function ever blocks on the network, aborts, exits, or
 * prints; the optional log callback is the only output.
 *
 * Strings passed in are borrowed for the duration of the call only: the
 * agent copies what it keeps, so a caller may reuse a char buffer with new
 * contents at once.
 */
#ifndef GENTRACE_H
#define GENTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libgentrace, which hides everything else. */
#if defined(__GNUC__)
#define GT_API __attribute__((visibility("default")))
#else
#define GT_API
#endif

/* Log levels passed to gt_config.log. */
enum gt_log_level {
  GT_LOG_DEBUG = 0,
  GT_LOG_INFO = 1,
  GT_LOG_WARN = 2,
  GT_LOG_ERROR = 3
};

/* Called from the agent's own thread (or from gt_start/gt_stop) with one
 * human-readable line (no newline; borrowed for the call). It MUST NOT call
 * back into gentrace. */
typedef void (*gt_log_fn)(void *ctx, int level, const char *line);

/* Configuration. Always fill with gt_config_init() first, then change
 * fields: new fields are appended at the end and `size` tells the library
 * which ones the caller knows about. Strings are borrowed for the duration of
 * gt_start() only (copied). NULL or 0 means "default". */
typedef struct gt_config {
  size_t size;         /* sizeof(gt_config) as compiled by the caller */
  const char *addr;    /* "host:port[,host:port...]", default 127.0.0.1:7170 */
  const char *service; /* default: program_invocation_short_name */
  const char *token;   /* agent token, default none */
  const char *tags;    /* "k=v,k=v", default none */
  uint32_t period_ms;  /* generation period, default 1000 (10 .. 300000) */
  uint32_t buffer_mb;  /* per-thread buffer pool total, default 16 */
  uint32_t spool_mb;   /* sealed generations held, default 64 */
  int stacks;          /* 1: stacks on region begins and instants */
  uint32_t flush_timeout_ms; /* gt_stop()/exit flush bound; 0 (default):
                              * 2000 once a daemon answered, 100 if none
                              * ever did (GENTRACE_FLUSH_MS) */
  gt_log_fn log;             /* optional diagnostics sink */
  void *log_ctx;
  int log_level; /* minimum level passed to log, default GT_LOG_INFO */
  const char *host; /* host name reported to the daemon, default gethostname() */
  /* TLS to the daemon (GENTRACE_TLS_CA, GENTRACE_TLS_CERT, GENTRACE_TLS_KEY):
   * tls_ca, the CA file the daemon's certificate must chain to (setting it
   * turns TLS on); tls_cert/tls_key, this agent's certificate for mTLS. */
  const char *tls_ca;
  const char *tls_cert;
  const char *tls_key;
} gt_config;

/* Fills *cfg with the defaults (and cfg->size). */
GT_API void gt_config_init(gt_config *cfg);

/* Starts a tracing session. cfg NULL = read the GENTRACE_* environment
 * (GENTRACE_ADDR, _SERVICE, _HOST, _TOKEN, _TAGS, _PERIOD_MS, _BUFFER_MB,
 * _SPOOL_MB, _STACKS, _FLUSH_MS). A daemon that is unreachable is normal: tracing goes
 * on into the spool and the agent reconnects with backoff.
 * Returns 0, -EALREADY if already started, -EINVAL for a bad config, or
 * -errno (thread creation, memory). */
GT_API int gt_start(const gt_config *cfg);

/* Stops the session: seals the open generation and tries to deliver what is
 * not yet ACKed for at most the flush timeout, then closes the connection
 * and frees everything. Safe to call twice or without gt_start(). Also run
 * from atexit(). After it, gt_start() may start a new session. */
GT_API void gt_stop(void);

/* Regions nest per thread: gt_region_end() closes the innermost open one.
 * name: any NUL-terminated string (interned per generation). */
GT_API void gt_region_begin(const char *name);
GT_API void gt_region_end(void);

/* A point event. */
GT_API void gt_instant(const char *name);

/* A counter sample. */
GT_API void gt_counter(const char *name, int64_t value);

/* A log line: category is interned, message is stored inline (truncated to
 * 8192 bytes). */
GT_API void gt_log(const char *category, const char *message);

/* Starts an asynchronous task (may end on another thread). parent 0 = none.
 * Returns a process-unique non-zero id, or 0 when tracing is off. */
GT_API uint64_t gt_task_begin(const char *name, uint64_t parent);
GT_API void gt_task_end(uint64_t task);

/* Names the calling thread in the trace (repeated in every generation the
 * thread writes to, so each generation stays self-describing). */
GT_API void gt_thread_name(const char *name);

/* Connection states reported by gt_stats. */
enum gt_conn_state {
  GT_CONN_OFF = 0,        /* agent not started */
  GT_CONN_CONNECTING = 1, /* connecting or waiting for WELCOME */
  GT_CONN_CONNECTED = 2,  /* streaming */
  GT_CONN_BACKOFF = 3,    /* waiting before the next attempt */
};

/* Counters since gt_start(). Identity after gt_stop(), whether or not the
 * daemon was reachable:
 *   events_written = events_delivered + events_dropped + events_evicted
 *                    + events_rejected + events_pending
 * where delivered counts the non-LOST events of ACKed generations. While
 * the session runs, events still in threads' open buffers are in
 * events_written only, so the right side may be smaller. */
typedef struct gt_stats_t {
  uint64_t events_written; /* event calls while tracing (recorded or dropped) */
  uint64_t events_dropped; /* lost because the buffer pool was full */
  uint64_t events_delivered; /* in generations the daemon ACKed */
  uint64_t events_evicted;   /* in generations pushed out of the spool */
  uint64_t events_rejected;  /* in generations the daemon refused */
  uint64_t gens_sealed;
  uint64_t gens_sent; /* first transmissions */
  uint64_t gens_acked;
  uint64_t gens_rejected;
  uint64_t gens_evicted;
  uint64_t bytes_sealed; /* body bytes of sealed generations */
  uint64_t bytes_sent;   /* bytes written to sockets */
  uint64_t mem_in_use;   /* buffers + spool + tables, bytes */
  uint64_t mem_limit;    /* the budget mem_in_use stays under */
  uint64_t spool_bytes;  /* sealed generations held */
  uint64_t connects;     /* successful handshakes */
  int conn_state;        /* enum gt_conn_state */
  uint64_t last_acked_gen;
  /* Appended with protocol v2 (library soname 1: gt_stats fills the whole
   * struct, so programs built against soname 0 must not load it): HELLOs
   * the daemon refused with AUTH because it holds another key for this
   * session id. */
  uint64_t auth_refused;
  /* Appended with TLS (soname 2): handshakes that failed (daemon not
   * trusted, our certificate refused); the agent keeps spooling and
   * retries with backoff. */
  uint64_t tls_failures;
  /* Appended with soname 3: sealed generations held in the spool and not
   * yet ACKed, rejected or evicted (queued, or sent and awaiting their
   * ACK), and the non-LOST events in them. After gt_stop() these are the
   * generations its bounded flush (flush_timeout_ms) could not deliver:
   * freed with the session, so lost, and counted here. */
  uint64_t gens_pending;
  uint64_t events_pending;
} gt_stats_t;

/* Fills *out. Returns 0, or -EINVAL for NULL. After gt_stop() it returns
 * the final counters of the session that ended (conn_state OFF), so the
 * identity above can be checked after the flush; zeroes before the first
 * gt_start(). */
GT_API int gt_stats(gt_stats_t *out);

/* Flight recorder: seals the open generation and writes the recent
 * generations held in memory (delivered or not) to fd as one valid trace
 * file (header + generations). Works with no daemon at all. Blocks the
 * caller for the write (never on the network). Returns 0, -ESRCH if not
 * started, -EBADF for a negative fd, or -errno from write(). */
GT_API int gt_snapshot(int fd);

#ifdef __cplusplus
}
#endif

/* GT_SCOPE(name): a region from here to the end of the enclosing block. */
#ifdef __cplusplus
namespace gentrace_detail {
struct scope {
  explicit scope(const char *name) {
    gt_region_begin(name);
  }
  ~scope() {
    gt_region_end();
  }
  scope(const scope &) = delete;
  scope &operator=(const scope &) = delete;
};
} // namespace gentrace_detail
#define GT_CAT2_(a, b) a##b
#define GT_CAT_(a, b) GT_CAT2_(a, b)
#define GT_SCOPE(name)                                                         \
  ::gentrace_detail::scope GT_CAT_(gt_scope_, __LINE__)(name)
#else
static inline void gt_scope_end_(int *unused) {
  (void)unused;
  gt_region_end();
}
#define GT_CAT2_(a, b) a##b
#define GT_CAT_(a, b) GT_CAT2_(a, b)
#define GT_SCOPE(name)                                                         \
  int GT_CAT_(gt_scope_, __LINE__) __attribute__((cleanup(gt_scope_end_))) =   \
      (gt_region_begin(name), 0)
#endif

#endif /* GENTRACE_H */
