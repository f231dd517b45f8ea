/* conf.h: gentraced's settings: defaults, command-line flags and the config
 * file (`key = value` lines, flag names as keys, # comments). Flags given on
 * the command line win over the file, the file wins over the defaults.
 *
 * Named conf (not config) because config.h is autoconf's.
 *
 * Thread: main thread only, before anything starts; the filled struct is
 * then read-only and may be read from any thread.
 */
#ifndef CONF_H
#define CONF_H

#include <stdint.h>

#define CONF_HOST_MAX 256

/* Room for this many options: conf.c asserts its table fits. */
#define CONF_OPTS_MAX 128

typedef struct conf_addr {
  char host[CONF_HOST_MAX]; /* numeric IPv4/IPv6 or a name */
  uint16_t port;            /* 0 = pick a free port */
} conf_addr;

typedef struct conf {
  conf_addr agent_listen; /* default 127.0.0.1:7170 */
  conf_addr http_listen;  /* default 127.0.0.1:7171 */
  char *db;               /* default ./gentrace.db; owned */
  char *token;            /* NULL = agents need no token; owned */
  char *read_token;       /* NULL = reads need no token; owned */
  char *log;              /* NULL = stderr; owned */
  char *config;           /* the file read, if any; owned */
  int64_t retain_ns;      /* 0 = keep forever */
  uint64_t max_db_size;   /* bytes, 0 = unlimited */
  int sync_full;          /* --sync full */
  /* --commit-linger: the group commit's wait, 0 = none. */
  int64_t commit_linger_ns;
  int64_t loop_coalesce_ns; /* --loop-coalesce (loopcoal.c), 0 = off */
  /* --store-priority: nice steps the storage threads run below the rest. */
  uint64_t store_nice_boost;
  uint64_t max_window_bytes;
  uint64_t max_connections;
  uint64_t max_conns_per_ip;
  uint64_t max_conn_buffer;
  uint64_t max_buffer;
  uint64_t max_frame;
  uint64_t max_gen_size;
  int64_t handshake_timeout_ns;
  int64_t idle_timeout_ns;
  int64_t max_gen_span_ns;   /* --max-gen-span */
  int64_t max_clock_skew_ns; /* --max-clock-skew, 0 = off */
  uint64_t http_max_connections;
  uint64_t http_per_ip_connections;
  int64_t http_timeout_ns;
  uint64_t http_threads;
  char *token_file;      /* --token-file; owned */
  char *read_token_file; /* --read-token-file; owned */
  char *cors_origins;    /* comma-separated; NULL = CORS off; owned */
  uint64_t http_max_downloads;
  uint64_t http_max_long_polls; /* 0 = half of http_max_connections */
  int64_t http_send_timeout_ns;
  char *tls_cert;               /* --tls-cert PEM (both ports); owned */
  char *tls_key;                /* --tls-key PEM; owned */
  char *tls_client_ca;          /* --tls-client-ca: mTLS on the agent port */
  char *http_tls_client_ca;     /* --http-tls-client-ca: ask HTTP clients */
  int tls_require_service_san;  /* client certs must name their services */
  uint64_t test_store_delay_ms; /* hidden: slow store for tests */
  /* The shared store (both or neither; then --db is not used). Owned. */
  char *catalog; /* postgresql://... */
  char *objects; /* s3://BUCKET[/PREFIX] */
  char *s3_endpoint, *s3_region, *s3_access_key_id, *s3_secret_access_key;
  char *daemon_id; /* names this daemon's segment objects */
  int64_t segment_max_age_ns;
  uint64_t segment_max_bytes;
  uint64_t segment_uploads; /* PUTs in flight at once (default 4) */
  int64_t orphan_grace_ns;  /* 0: the store's default (10 minutes) */
  /* Retention pins (POST /v1/pins). */
  char *admin_token;         /* NULL = pins cannot be written; owned */
  char *admin_token_file;    /* --admin-token-file; owned */
  uint64_t max_pinned_bytes; /* 0 = 25% of max_db_size (or no cap) */
  int64_t pin_max_ttl_ns;    /* default 90d */
  char *symbols;             /* --symbols DIR (build-id tree); owned */
  char *symbols_from_host;   /* --symbols-from-host yes|no|DIRS; owned */
  uint64_t symbols_cache;    /* --symbols-cache bytes, 0 = default */
  /* --zstd-level, 0 = store raw, negative: zstd's fast levels (default 1) */
  int64_t zstd_level;
  /* --zstd-fast-level: the level while the compressors are behind;
   * CONF_ZSTD_FAST_SAME (the default): the same as zstd_level, no switch */
  int64_t zstd_fast_level;
  /* internal: options set on the command line, one bit per option */
  uint64_t cli_mask_[CONF_OPTS_MAX / 64];
} conf;

/* zstd_fast_level when not set: compress at zstd_level whatever the load. */
#define CONF_ZSTD_FAST_SAME INT64_MIN

/* What conf_parse_args asks the caller to do. */
enum conf_action { CONF_RUN = 0, CONF_HELP = 1, CONF_VERSION = 2 };

/* Fills every default. */
void conf_init(conf *c);
/* Frees the owned strings. */
void conf_fini(conf *c);

/* Parses argv (argv[0] is the program): reads --config FILE first, then
 * applies the command line over it. Returns a conf_action (>= 0), or a
 * negative code with *cause set to a malloc'd message naming the flag, or the
 * file and line, and the problem. */
int conf_parse_args(conf *c, int argc, char **argv, char **cause);

/* Applies a config file's text; `name` is used in messages only. Keys the
 * command line already set (mask from conf_parse_args) are skipped. Same
 * returns as conf_parse_args. Exposed for tests. */
int conf_parse_text(conf *c, const char *name, const char *text, char **cause);
/* Reads and applies a file. */
int conf_load_file(conf *c, const char *path, char **cause);

/* Value parsers: 0 or GTP_E_BADARG. Sizes: digits with an optional K, M, G
 * or T suffix (powers of 1024, an optional trailing B or iB). Durations: the
 * project's one grammar, gtp_dur_parse (proto/text.h): 500ms, 30s, 1h30m,
 * 7d; a bare number other than 0 is refused (its unit is not obvious). */
int conf_parse_size(const char *s, uint64_t *out);
int conf_parse_duration(const char *s, int64_t *out_ns);
/* HOST:PORT, [V6]:PORT, or :PORT (host 127.0.0.1). */
int conf_parse_addr(const char *s, conf_addr *out);

/* Formats addr as HOST:PORT ([V6]:PORT) into buf. */
void conf_addr_format(const conf_addr *a, char *buf, unsigned size);

/* 0 when every bounded setting of c is within its bounds and the owned
 * strings are set, else negative. Debug builds check it after parsing. */
int conf_check_invariants(const conf *c);
/* 1 if the option `name` (flag name without dashes) was given on the
 * command line. */
int conf_from_cli(const conf *c, const char *name);

/* The man-style --help text (static). */
const char *conf_usage(void);

#endif
