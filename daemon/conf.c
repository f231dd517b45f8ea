/* conf.c: defaults, flags and config file of gentraced.
 *
 * One table (`opts`) describes every setting once: its flag/key name, how
 * its value parses, where it lands in struct conf, and its --help text, so
 * the flags, the file keys and the help cannot drift apart.
 *
 * Invariants:
 *  1. A value given on the command line MUST win over the file, whatever
 *     their order on the command line, otherwise `--config F --db X` and
 *     `--db X --config F` would differ. The file is applied first, then the
 *     command line; the file skips keys in cli_mask_ as well so a later
 *     conf_parse_text call cannot undo a flag either.
 *  2. Every error message MUST name where the problem is (flag, or
 *     file:line) and what it is, otherwise operators cannot fix their
 *     config from the log.
 */
#include "config.h"

#include "conf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frame.h"
#include "gtp_error.h"
#include "text.h"

enum opt_kind {
  OPT_ADDR,
  OPT_STR,
  OPT_SIZE,
  OPT_DURATION,
  OPT_UINT,
  OPT_INT, /* signed: min and max hold int64_t values */
  OPT_SYNC,
  OPT_CONFIG,
  OPT_BOOL, /* a flag without value on the command line; key = yes|no */
  OPT_LIST  /* comma-separated; a repeated flag or key adds to the list */
};

typedef struct opt {
  const char *name;
  enum opt_kind kind;
  size_t off;
  uint64_t min, max; /* bounds for SIZE/UINT/DURATION (ns); max 0 = none */
  const char *arg;   /* NULL = hidden from --help */
  const char *help;
} opt;

#define O(f) offsetof(conf, f)
static const opt opts[] = {
    {"agent-listen", OPT_ADDR, O(agent_listen), 0, 0, "HOST:PORT",
     "Where agents connect (default 127.0.0.1:7170; port 0 picks one)."},
    {"http-listen", OPT_ADDR, O(http_listen), 0, 0, "HOST:PORT",
     "HTTP API, metrics and dashboard (default 127.0.0.1:7171)."},
    {"db", OPT_STR, O(db), 0, 0, "PATH",
     "SQLite database file (default ./gentrace.db)."},
    {"token", OPT_STR, O(token), 0, 0, "TOKEN",
     "Token agents must send in HELLO (default: none). Visible in the "
     "process list: prefer --token-file or GENTRACED_TOKEN."},
    {"token-file", OPT_STR, O(token_file), 0, 0, "FILE",
     "Read the agent token from FILE (one line; the file must not be "
     "readable by other users). Environment: GENTRACED_TOKEN."},
    {"read-token", OPT_STR, O(read_token), 0, 0, "TOKEN",
     "Bearer token HTTP readers must send (default: none). Visible in the "
     "process list: prefer --read-token-file or GENTRACED_READ_TOKEN."},
    {"read-token-file", OPT_STR, O(read_token_file), 0, 0, "FILE",
     "Read the HTTP read token from FILE (as --token-file). "
     "Environment: GENTRACED_READ_TOKEN."},
    {"admin-token", OPT_STR, O(admin_token), 0, 0, "TOKEN",
     "Bearer token for retention pins (POST and DELETE /v1/pins); without "
     "one pins cannot be written. Visible in the process list: prefer "
     "--admin-token-file or GENTRACED_ADMIN_TOKEN."},
    {"admin-token-file", OPT_STR, O(admin_token_file), 0, 0, "FILE",
     "Read the admin token from FILE (as --token-file). "
     "Environment: GENTRACED_ADMIN_TOKEN."},
    {"max-pinned-bytes", OPT_SIZE, O(max_pinned_bytes), 0, 0, "SIZE",
     "Stored bytes retention pins may hold in all; a pin over it gets 507 "
     "(default: a quarter of --max-db-size; no cap without one)."},
    {"pin-max-ttl", OPT_DURATION, O(pin_max_ttl_ns), 1000000000, 0, "DURATION",
     "Longest life of a retention pin (default 90d; a pin's "
     "own ttl defaults to 7d)."},
    {"cors-origin", OPT_LIST, O(cors_origins), 0, 0, "ORIGIN",
     "Let web pages from ORIGIN read the HTTP API, e.g. "
     "https://ui.perfetto.dev (repeat or separate with commas; * = any "
     "page, unsafe). Default: none; the dashboard needs none."},
    {"retain", OPT_DURATION, O(retain_ns), 0, 0, "DURATION",
     "Delete generations older than this, e.g. 7d (default: keep)."},
    {"max-db-size", OPT_SIZE, O(max_db_size), 0, 0, "SIZE",
     "Delete oldest generations above this size, WAL included, e.g. 10G "
     "(default: unlimited)."},
    {"sync", OPT_SYNC, O(sync_full), 0, 0, "normal|full",
     "normal survives a crash of the process; full also survives power "
     "loss (default normal)."},
    {"commit-linger", OPT_DURATION, O(commit_linger_ns), 0, 1000000000,
     "DURATION",
     "Group commit: hold a ready generation up to this long for others to "
     "share its transaction; ACKs wait for the commit; 0 = commit at once "
     "(default 20ms, at most 1s)."},
    {"loop-coalesce", OPT_DURATION, O(loop_coalesce_ns), 0, 100000000,
     "DURATION",
     "When agents keep the ingest loop busy, pause this long before it "
     "polls again, so one wake-up serves many agents (less CPU per small "
     "generation; replies wait at most this much longer); 0 = off "
     "(default 2ms, at most 100ms)."},
    {"zstd-level", OPT_INT, O(zstd_level), (uint64_t)-100, 19, "N",
     "zstd level of stored generations, 1-19 (higher: smaller, more CPU); "
     "-1 to -100 are zstd's fast levels (faster, larger); 0 stores them "
     "uncompressed (default 1)."},
    {"zstd-fast-level", OPT_INT, O(zstd_fast_level), (uint64_t)-100, 19, "N",
     "Level for generations compressed while the compressors are behind "
     "(more than 1 MiB waiting for them), -100 to 19, 0 = uncompressed; "
     "the rest keep --zstd-level (default: --zstd-level whatever the "
     "load)."},
    {"store-priority", OPT_UINT, O(store_nice_boost), 0, 20, "N",
     "Run the storage threads N nice steps above the loop and HTTP threads, "
     "where the host allows it (root, or LimitNICE): ACKs wait for their "
     "commits (default 0: off)."},
    {"max-window-bytes", OPT_SIZE, O(max_window_bytes), 1, 0, "SIZE",
     "Largest trace window one HTTP request may download (default 1G)."},
    {"log", OPT_STR, O(log), 0, 0, "FILE",
     "Log file, reopened on SIGHUP (default stderr)."},
    {"config", OPT_CONFIG, O(config), 0, 0, "FILE",
     "Read settings from FILE: `key = value` lines, flag names as keys."},
    {"max-connections", OPT_UINT, O(max_connections), 1, 1000000, "N",
     "Agent connections at once (default 16384)."},
    {"max-conns-per-ip", OPT_UINT, O(max_conns_per_ip), 1, 1000000, "N",
     "Agent connections at once from one address, IPv6 by /64; more are "
     "refused with ERROR(LIMIT) (default 256)."},
    {"max-conn-buffer", OPT_SIZE, O(max_conn_buffer), 4096, 0, "SIZE",
     "Bytes buffered per agent connection before its reads pause "
     "(default 64M)."},
    {"max-buffer", OPT_SIZE, O(max_buffer), 4096, 0, "SIZE",
     "Memory budget for everything held for agents (partial frames, open "
     "and queued generations, buffer pool): over it reads pause, and "
     "partial work is shed oldest first (default 512M)."},
    /* The floor: WELCOME does not announce the frame limit and the reference
     * agent packs BATCH frames up to 256 KiB, so a lower limit would refuse
     * every agent. */
    {"max-frame", OPT_SIZE, O(max_frame), 512u << 10, GTP_FRAME_MAX, "SIZE",
     "Largest frame accepted; a larger one closes the connection "
     "(default 1M, at least 512K, at most 1M)."},
    {"max-gen-size", OPT_SIZE, O(max_gen_size), 1024, GTP_GEN_MAX_BYTES, "SIZE",
     "Largest generation accepted (default 64M, at most 256M)."},
    {"handshake-timeout", OPT_DURATION, O(handshake_timeout_ns), 1000000, 0,
     "DURATION", "Time an agent has to complete HELLO (default 10s)."},
    {"idle-timeout", OPT_DURATION, O(idle_timeout_ns), 1000000, 0, "DURATION",
     "Silence after which an agent is disconnected; announced to agents "
     "(default 60s)."},
    {"max-gen-span", OPT_DURATION, O(max_gen_span_ns), 1000000000,
     86400ll * 1000000000, "DURATION",
     "Longest generation (its CLOCK record) accepted, at most 1d; bounds "
     "the scan of every window query (default 10m)."},
    {"max-clock-skew", OPT_DURATION, O(max_clock_skew_ns), 0, 0, "DURATION",
     "Refuse generations whose wall clock is further than this from the "
     "daemon's; 0 = off (default 24h)."},
    {"http-max-connections", OPT_UINT, O(http_max_connections), 1, 100000, "N",
     "HTTP connections at once (default 256)."},
    {"http-per-ip-connections", OPT_UINT, O(http_per_ip_connections), 1, 100000,
     "N", "HTTP connections per client address (default 32)."},
    {"http-timeout", OPT_DURATION, O(http_timeout_ns), 1000000000, 0,
     "DURATION", "Idle HTTP connection timeout (default 30s)."},
    {"http-threads", OPT_UINT, O(http_threads), 1, 256, "N",
     "HTTP worker threads (default 4)."},
    {"http-max-downloads", OPT_UINT, O(http_max_downloads), 1, 100000, "N",
     "Trace downloads at once; more get 503 with Retry-After (default 16)."},
    {"http-max-long-polls", OPT_UINT, O(http_max_long_polls), 1, 100000, "N",
     "/v1/feed requests waiting at once; more get 503 with Retry-After "
     "(default: half of --http-max-connections; always below it)."},
    {"http-send-timeout", OPT_DURATION, O(http_send_timeout_ns), 1000000000, 0,
     "DURATION",
     "Time a download's client has to take each block of up to 1 MiB; "
     "slower clients are cut (default 120s)."},
    {"tls-cert", OPT_STR, O(tls_cert), 0, 0, "FILE",
     "Serve both ports over TLS 1.3 (1.2 allowed) with this PEM certificate "
     "chain; reloaded on SIGHUP. Needs --tls-key."},
    {"tls-key", OPT_STR, O(tls_key), 0, 0, "FILE",
     "PEM private key of --tls-cert; refused if other users can read it."},
    {"tls-client-ca", OPT_STR, O(tls_client_ca), 0, 0, "FILE",
     "mTLS on the agent port: agents need a certificate signed by this CA; "
     "SAN URIs gentrace:service/NAME limit the services it may claim."},
    {"tls-require-service-san", OPT_BOOL, O(tls_require_service_san), 0, 0, "",
     "With --tls-client-ca: refuse client certificates that name no "
     "service (default: such a certificate may claim any)."},
    {"http-tls-client-ca", OPT_STR, O(http_tls_client_ca), 0, 0, "FILE",
     "HTTPS: ask HTTP clients for a certificate signed by this CA."},
    {"catalog", OPT_STR, O(catalog), 0, 0, "URI",
     "Shared store: PostgreSQL catalog, postgresql://USER@HOST:PORT/DB "
     "(with --objects; several daemons can share one store)."},
    {"objects", OPT_STR, O(objects), 0, 0, "s3://BUCKET[/PREFIX]",
     "Shared store: S3-compatible bucket for segment objects (with "
     "--catalog). Endpoint and keys from AWS_ENDPOINT_URL, AWS_REGION, "
     "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the s3-* keys."},
    {"s3-endpoint", OPT_STR, O(s3_endpoint), 0, 0, "URL",
     "S3 endpoint, e.g. http://127.0.0.1:8080 (default $AWS_ENDPOINT_URL)."},
    {"s3-region", OPT_STR, O(s3_region), 0, 0, "REGION",
     "S3 signing region (default $AWS_REGION, else us-east-1)."},
    {"s3-access-key-id", OPT_STR, O(s3_access_key_id), 0, 0, "KEY",
     "S3 access key id (default $AWS_ACCESS_KEY_ID)."},
    {"s3-secret-access-key", OPT_STR, O(s3_secret_access_key), 0, 0, "SECRET",
     "S3 secret key (default $AWS_SECRET_ACCESS_KEY; prefer the config file "
     "or the environment to the command line)."},
    {"daemon-id", OPT_STR, O(daemon_id), 0, 0, "ID",
     "Names this daemon's segment objects (default HOST-PID-RANDOM)."},
    {"segment-max-age", OPT_DURATION, O(segment_max_age_ns), 10000000,
     600000000000ull, "DURATION",
     "Shared store: close a segment this long after its first generation; "
     "ACKs wait for it (default 2s)."},
    {"segment-max-size", OPT_SIZE, O(segment_max_bytes), 65536, 1ull << 30,
     "SIZE", "Shared store: close a segment at this size (default 32M)."},
    {"segment-uploads", OPT_UINT, O(segment_uploads), 1, 16, "N",
     "Shared store: segment uploads in flight at once, each on its own "
     "connection; catalog commits and ACKs stay in order (default 4)."},
    {"orphan-grace", OPT_DURATION, O(orphan_grace_ns), 1000000000,
     86400000000000ull, "DURATION",
     "Shared store: delete segment objects nobody cataloged (a daemon "
     "killed between upload and commit) this long after their upload, once "
     "their daemon is gone (default 10m)."},
    {"symbols", OPT_STR, O(symbols), 0, 0, "DIR",
     "Debug files for stack symbols, in build-id layout: "
     "DIR/.build-id/XX/REST (binary) and .debug (default: none)."},
    {"symbols-from-host", OPT_STR, O(symbols_from_host), 0, 0, "yes|no|DIRS",
     "Read binaries at the paths agents report, when their build id "
     "matches (regular files only, never /proc, /sys, /dev); DIRS "
     "(separated by ':') limits it to those trees (default yes)."},
    {"symbols-cache", OPT_SIZE, O(symbols_cache), 1u << 20, 0, "SIZE",
     "Bytes of module files the symbol cache keeps open, at most 64 "
     "modules (default 512M)."},
    {"test-store-delay-ms", OPT_UINT, O(test_store_delay_ms), 0, 600000, NULL,
     NULL},
};
#undef O
#define NOPTS (sizeof opts / sizeof opts[0])
/* cli_mask_ has one bit per option. */
_Static_assert(NOPTS <= CONF_OPTS_MAX, "too many options: raise CONF_OPTS_MAX");

static int cli_set(const conf *c, const opt *o) {
  size_t i = (size_t)(o - opts);
  return (c->cli_mask_[i / 64] >> (i % 64)) & 1;
}

/* Every error of this file is a bad argument with a message (invariant 2). */
#define fail(cause, ...) gtp_causef((cause), GTP_E_BADARG, __VA_ARGS__)

static int set_str(char **dst, const char *v) {
  char *d = strdup(v);
  if (d == NULL)
    return -ENOMEM;
  free(*dst);
  *dst = d;
  return 0;
}

void conf_init(conf *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->agent_listen.host, sizeof c->agent_listen.host, "127.0.0.1");
  c->agent_listen.port = 7170;
  snprintf(c->http_listen.host, sizeof c->http_listen.host, "127.0.0.1");
  c->http_listen.port = 7171;
  c->db = strdup("./gentrace.db");
  c->max_window_bytes = 1ull << 30;
  c->commit_linger_ns = 20ll * 1000000;
  c->loop_coalesce_ns = 2000000;
  c->zstd_level = 1;
  c->zstd_fast_level = CONF_ZSTD_FAST_SAME;
  c->max_connections = 16384;
  c->max_conns_per_ip = 256;
  c->max_conn_buffer = 64ull << 20;
  c->max_buffer = 512ull << 20;
  c->max_frame = GTP_FRAME_MAX;
  c->max_gen_size = 64ull << 20;
  c->handshake_timeout_ns = 10ll * 1000000000;
  c->idle_timeout_ns = 60ll * 1000000000;
  c->max_gen_span_ns = 600ll * 1000000000;
  c->max_clock_skew_ns = 86400ll * 1000000000;
  c->http_max_connections = 256;
  c->http_per_ip_connections = 32;
  c->http_timeout_ns = 30ll * 1000000000;
  c->http_threads = 4;
  c->http_max_downloads = 16;
  c->http_send_timeout_ns = 120ll * 1000000000;
  c->pin_max_ttl_ns = 90ll * 86400 * 1000000000;
}

void conf_fini(conf *c) {
  free(c->db);
  free(c->token);
  free(c->read_token);
  free(c->log);
  free(c->config);
  free(c->tls_cert);
  free(c->tls_key);
  free(c->tls_client_ca);
  free(c->http_tls_client_ca);
  free(c->token_file);
  free(c->read_token_file);
  free(c->admin_token);
  free(c->admin_token_file);
  free(c->cors_origins);
  free(c->symbols);
  free(c->symbols_from_host);
  free(c->catalog);
  free(c->objects);
  free(c->s3_endpoint);
  free(c->s3_region);
  free(c->s3_access_key_id);
  free(c->s3_secret_access_key);
  free(c->daemon_id);
  memset(c, 0, sizeof *c);
}

/* Parses "123" + suffix; returns the number and leaves *endp at the suffix. */
static int parse_digits(const char *s, uint64_t *v, const char **endp) {
  uint64_t n = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return GTP_E_BADARG;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (n > (UINT64_MAX - 9) / 10)
      return GTP_E_BADARG;
    n = n * 10 + (uint64_t)(*p - '0');
  }
  *v = n;
  *endp = p;
  return 0;
}

int conf_parse_size(const char *s, uint64_t *out) {
  uint64_t n, mul = 1;
  const char *p;
  if (s == NULL || parse_digits(s, &n, &p) < 0)
    return GTP_E_BADARG;
  switch (*p) {
  case 'k':
  case 'K':
    mul = 1ull << 10;
    p++;
    break;
  case 'm':
  case 'M':
    mul = 1ull << 20;
    p++;
    break;
  case 'g':
  case 'G':
    mul = 1ull << 30;
    p++;
    break;
  case 't':
  case 'T':
    mul = 1ull << 40;
    p++;
    break;
  default:
    break;
  }
  if (mul > 1 && *p == 'i')
    p++;
  if (*p == 'b' || *p == 'B')
    p++;
  if (*p != '\0')
    return GTP_E_BADARG;
  if (n > UINT64_MAX / mul)
    return GTP_E_BADARG;
  *out = n * mul;
  return 0;
}

int conf_parse_duration(const char *s, int64_t *out_ns) {
  return gtp_dur_parse(s, out_ns); /* the project's one duration grammar */
}

int conf_parse_addr(const char *s, conf_addr *out) {
  gtp_hostport hp;
  if (s == NULL || gtp_hostport_parse(s, strlen(s), &hp) < 0 ||
      hp.host_len >= CONF_HOST_MAX)
    return GTP_E_BADARG;
  if (hp.host_len == 0) {
    snprintf(out->host, sizeof out->host, "127.0.0.1");
  } else {
    memcpy(out->host, hp.host, hp.host_len);
    out->host[hp.host_len] = '\0';
  }
  out->port = hp.port;
  return 0;
}

void conf_addr_format(const conf_addr *a, char *buf, unsigned size) {
  if (strchr(a->host, ':') != NULL)
    snprintf(buf, size, "[%s]:%u", a->host, a->port);
  else
    snprintf(buf, size, "%s:%u", a->host, a->port);
}

static const opt *find_opt(const char *name, size_t len) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strlen(opts[i].name) == len && memcmp(opts[i].name, name, len) == 0)
      return &opts[i];
  return NULL;
}

/* Applies one value. `where` names the source for messages ("--db",
 * "f.conf:3: db"). */
static int apply(conf *c, const opt *o, const char *v, const char *where,
                 char **cause) {
  void *dst = (char *)c + o->off;
  uint64_t u = 0;
  int64_t d;
  switch (o->kind) {
  case OPT_ADDR:
    if (conf_parse_addr(v, dst) < 0)
      return fail(cause, "%s: bad address \"%s\" (want HOST:PORT)", where, v);
    return 0;
  case OPT_LIST: {
    char **list = dst;
    char *n = NULL;
    for (const char *p = v; *p; p++)
      if (*p == ' ' || *p == '\t')
        return fail(cause, "%s: \"%s\": no blanks (separate with commas)",
                    where, v);
    if (*v == '\0' || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
      return fail(cause, "%s: \"%s\": empty entry", where, v);
    if (asprintf(&n, "%s%s%s", *list ? *list : "", *list ? "," : "", v) < 0)
      return fail(cause, "%s: out of memory", where);
    free(*list);
    *list = n;
    return 0;
  }
  case OPT_STR:
  case OPT_CONFIG:
    if (*v == '\0' && o->kind == OPT_CONFIG)
      return fail(cause, "%s: empty file name", where);
    if (set_str(dst, v) < 0)
      return fail(cause, "%s: out of memory", where);
    return 0;
  case OPT_BOOL:
    if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 ||
        strcmp(v, "1") == 0 || strcmp(v, "on") == 0)
      *(int *)dst = 1;
    else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 ||
             strcmp(v, "0") == 0 || strcmp(v, "off") == 0)
      *(int *)dst = 0;
    else
      return fail(cause, "%s: \"%s\" is not yes or no", where, v);
    return 0;
  case OPT_SYNC:
    if (strcmp(v, "normal") == 0)
      *(int *)dst = 0;
    else if (strcmp(v, "full") == 0)
      *(int *)dst = 1;
    else
      return fail(cause, "%s: \"%s\" is not normal or full", where, v);
    return 0;
  case OPT_SIZE:
    if (conf_parse_size(v, &u) < 0)
      return fail(cause, "%s: bad size \"%s\" (e.g. 64K, 512M, 10G)", where, v);
    break;
  case OPT_UINT: {
    const char *end;
    if (parse_digits(v, &u, &end) < 0 || *end != '\0')
      return fail(cause, "%s: \"%s\" is not a whole number", where, v);
    break;
  }
  case OPT_INT: {
    const char *end;
    int neg = *v == '-';
    if (parse_digits(v + neg, &u, &end) < 0 || *end != '\0' ||
        u > (uint64_t)INT64_MAX)
      return fail(cause, "%s: \"%s\" is not a whole number", where, v);
    d = neg ? -(int64_t)u : (int64_t)u;
    if (d < (int64_t)o->min || d > (int64_t)o->max)
      return fail(cause, "%s: %s is out of range (%" PRId64 "..%" PRId64 ")",
                  where, v, (int64_t)o->min, (int64_t)o->max);
    *(int64_t *)dst = d;
    return 0;
  }
  case OPT_DURATION:
    if (conf_parse_duration(v, &d) < 0) {
      const char *p = v;
      while (*p >= '0' && *p <= '9')
        p++;
      if (p != v && *p == '\0') /* bare seconds were accepted before 0.2 */
        return fail(cause,
                    "%s: \"%s\" has no unit: write %ss (or %sm, %sh, %sd)",
                    where, v, v, v, v, v);
      return fail(cause,
                  "%s: bad duration \"%s\" (e.g. 500ms, 30s, 5m, 1h30m, 7d)",
                  where, v);
    }
    u = (uint64_t)d;
    break;
  }
  if (u < o->min || (o->max != 0 && u > o->max)) {
    if (o->max != 0)
      return fail(cause, "%s: %s is out of range (%" PRIu64 "..%" PRIu64 "%s)",
                  where, v, o->min, o->max,
                  o->kind == OPT_DURATION ? " ns" : "");
    return fail(cause, "%s: %s is below the minimum %" PRIu64 "%s", where, v,
                o->min, o->kind == OPT_DURATION ? " ns" : "");
  }
  if (o->kind == OPT_DURATION)
    *(int64_t *)dst = (int64_t)u;
  else
    *(uint64_t *)dst = u;
  return 0;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
    *--e = '\0';
  return s;
}

int conf_parse_text(conf *c, const char *name, const char *text, char **cause) {
  char *copy = strdup(text);
  if (copy == NULL)
    return fail(cause, "%s: out of memory", name);
  int rc = 0;
  unsigned lineno = 0;
  char *line = copy;
  while (line != NULL) {
    char *next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    lineno++;
    char *hash = strchr(line, '#');
    /* A # starts a comment only at the start of a line or after blanks, so
     * tokens may contain '#'. */
    if (hash != NULL && (hash == line || hash[-1] == ' ' || hash[-1] == '\t'))
      *hash = '\0';
    char *l = trim(line);
    if (*l != '\0') {
      char *eq = strchr(l, '=');
      if (eq == NULL) {
        rc = fail(cause, "%s:%u: expected `key = value`, got \"%s\"", name,
                  lineno, l);
        break;
      }
      *eq = '\0';
      char *key = trim(l), *val = trim(eq + 1);
      size_t vl = strlen(val);
      if (vl >= 2 && ((val[0] == '"' && val[vl - 1] == '"') ||
                      (val[0] == '\'' && val[vl - 1] == '\''))) {
        val[vl - 1] = '\0';
        val++;
      }
      const opt *o = find_opt(key, strlen(key));
      if (o == NULL) {
        rc = fail(cause, "%s:%u: unknown key \"%s\"", name, lineno, key);
        break;
      }
      if (o->kind == OPT_CONFIG) {
        rc = fail(cause, "%s:%u: config files cannot include others", name,
                  lineno);
        break;
      }
      if (!cli_set(c, o)) {
        char where[512];
        snprintf(where, sizeof where, "%s:%u: %s", name, lineno, o->name);
        rc = apply(c, o, val, where, cause);
        if (rc < 0)
          break;
      }
    }
    line = next;
  }
  free(copy);
  return rc;
}

int conf_load_file(conf *c, const char *path, char **cause) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    int e = errno;
    fail(cause, "%s: %s", path, strerror(e));
    return -e;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  int rc = 0;
  while (buf != NULL) {
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (len < cap - 1)
      break;
    if (cap >= (1u << 20)) {
      rc = fail(cause, "%s: file larger than 1 MiB", path);
      break;
    }
    char *nb = realloc(buf, cap * 2);
    if (nb == NULL) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int err = ferror(f);
  fclose(f);
  if (buf == NULL)
    return fail(cause, "%s: out of memory", path);
  if (rc == 0 && err)
    rc = fail(cause, "%s: read error", path);
  if (rc == 0) {
    buf[len] = '\0';
    if (memchr(buf, '\0', len) != NULL)
      rc = fail(cause, "%s: binary file (NUL byte)", path);
    else
      rc = conf_parse_text(c, path, buf, cause);
  }
  free(buf);
  return rc;
}

/* Splits "--name=value" / "--name value". Returns the option (NULL if
 * unknown) and sets *val (NULL when the value is the next argument). */
static const opt *split_flag(const char *arg, const char **val) {
  const char *name = arg + 2;
  const char *eq = strchr(name, '=');
  *val = eq != NULL ? eq + 1 : NULL;
  return find_opt(name, eq != NULL ? (size_t)(eq - name) : strlen(name));
}

int conf_parse_args(conf *c, int argc, char **argv, char **cause) {
  /* Pass 1: flags that end parsing, syntax, and which keys the command line
   * sets (invariant 1). */
  const char *cfg = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
      return CONF_HELP;
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0)
      return CONF_VERSION;
    if (strncmp(a, "--", 2) != 0)
      return fail(cause, "unexpected argument \"%s\" (see --help)", a);
    const opt *o = split_flag(a, &v);
    if (o == NULL)
      return fail(cause, "unknown flag \"%s\" (see --help)", a);
    if (v == NULL && o->kind == OPT_BOOL)
      v = "yes";
    if (v == NULL) {
      if (i + 1 >= argc)
        return fail(cause, "--%s needs a value", o->name);
      v = argv[++i];
    }
    c->cli_mask_[(size_t)(o - opts) / 64] |= 1ull << ((size_t)(o - opts) % 64);
    if (o->kind == OPT_CONFIG)
      cfg = v;
  }
  if (cfg != NULL) {
    int rc = conf_load_file(c, cfg, cause);
    if (rc < 0)
      return rc;
  }
  /* Pass 2: apply the command line. */
  for (int i = 1; i < argc; i++) {
    const char *v;
    const opt *o = split_flag(argv[i], &v);
    if (v == NULL && o->kind == OPT_BOOL)
      v = "yes";
    if (v == NULL)
      v = argv[++i];
    char where[128];
    snprintf(where, sizeof where, "--%s", o->name);
    int rc = apply(c, o, v, where, cause);
    if (rc < 0)
      return rc;
  }
  GTP_ASSERT(conf_check_invariants(c) == 0);
  return CONF_RUN;
}

/* The value of a bounded setting as the table compares it. */
static uint64_t bounded_value(const conf *c, const opt *o) {
  const void *src = (const char *)c + o->off;
  if (o->kind == OPT_DURATION)
    return (uint64_t) * (const int64_t *)src;
  return *(const uint64_t *)src;
}

int conf_check_invariants(const conf *c) {
  if (c->db == NULL)
    return -1;
  /* Every bounded setting is its default (some defaults, such as 0 for
   * "derive it from another setting", lie outside what a user may write)
   * or within its bounds, whoever set it: apply refuses the rest with a
   * message (invariant 2). */
  conf d;
  conf_init(&d);
  int rc = 0;
  for (size_t i = 0; i < NOPTS && rc == 0; i++) {
    const opt *o = &opts[i];
    if (o->kind == OPT_INT) {
      int64_t v = *(const int64_t *)((const char *)c + o->off);
      if (v != *(const int64_t *)((const char *)&d + o->off) &&
          (v < (int64_t)o->min || v > (int64_t)o->max))
        rc = -2;
      continue;
    }
    if (o->kind != OPT_SIZE && o->kind != OPT_UINT && o->kind != OPT_DURATION)
      continue;
    uint64_t u = bounded_value(c, o);
    if (u != bounded_value(&d, o) &&
        (u < o->min || (o->max != 0 && u > o->max)))
      rc = -2;
  }
  conf_fini(&d);
  return rc;
}

int conf_from_cli(const conf *c, const char *name) {
  const opt *o = find_opt(name, strlen(name));
  return o != NULL && cli_set(c, o);
}

const char *conf_usage(void) {
  static char text[16384];
  if (text[0] != '\0')
    return text;
  size_t n = (size_t)snprintf(
      text, sizeof text,
      "NAME\n"
      "    gentraced - gentrace collector: agents in, trace windows out\n"
      "\n"
      "SYNOPSIS\n"
      "    gentraced [--config FILE] [OPTION]...\n"
      "\n"
      "DESCRIPTION\n"
      "    Accepts generations from gentrace agents over TCP, validates and\n"
      "    stores them in SQLite, and serves them over HTTP (JSON metadata,\n"
      "    trace windows, a live feed, Prometheus /metrics, /healthz, and a\n"
      "    dashboard at /). Logs one logfmt line per event; once both ports\n"
      "    are bound it logs `listening agent=HOST:PORT http=HOST:PORT`.\n"
      "\n"
      "OPTIONS\n");
  for (size_t i = 0; i < NOPTS && n < sizeof text; i++) {
    if (opts[i].arg == NULL)
      continue;
    n +=
        (size_t)snprintf(text + n, sizeof text - n, "    --%s %s\n        %s\n",
                         opts[i].name, opts[i].arg, opts[i].help);
  }
  if (n < sizeof text)
    snprintf(
        text + n, sizeof text - n,
        "    --help\n        Show this text.\n"
        "    --version\n        Show the version.\n"
        "\n"
        "    SIZE is a number with an optional K, M, G or T suffix (powers of\n"
        "    1024). DURATION is one or more numbers with a unit: ns, us, ms,\n"
        "    s, m, h or d, e.g. 500ms, 30s, 1h30m, 7d (a bare number other\n"
        "    than 0 is refused: write its unit).\n"
        "\n"
        "ENVIRONMENT\n"
        "    GENTRACED_TOKEN, GENTRACED_READ_TOKEN, GENTRACED_ADMIN_TOKEN\n"
        "        The agent, read and admin tokens, when neither the flag\n"
        "        nor the file is given; unlike flags, not visible in the\n"
        "        process list.\n"
        "\n"
        "CONFIG FILE\n"
        "    One `key = value` per line, keys are the flag names without\n"
        "    dashes, # starts a comment. Flags on the command line win.\n"
        "\n"
        "SIGNALS\n"
        "    SIGTERM, SIGINT  stop accepting, commit and acknowledge complete\n"
        "                     generations, say GOODBYE to agents, exit 0.\n"
        "    SIGHUP           reopen the log file.\n"
        "\n"
        "EXIT STATUS\n"
        "    0 after a clean shutdown, 1 on a runtime error, 2 on bad "
        "usage.\n");
  return text;
}
