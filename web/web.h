/* web.h: the HTTP server of gentraced (libmicrohttpd, its own threads).
 *
 * daemon/main.c is the only caller: it starts the server after the store is
 * open, passes callbacks for what only the daemon knows (metrics text, health,
 * live connection state), and notifies commits so /v1/feed waiters wake at
 * once. Reads go through store_read.h connections owned by web/.
 */
#ifndef WEB_H
#define WEB_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct web_server web_server;

typedef struct web_config {
  const char *host;            /* listen address, e.g. "127.0.0.1" */
  uint16_t port;               /* 0 = pick a free port */
  const char *db_path;         /* opened read-only when storage is NULL */
  struct storage *storage;     /* the daemon's storage (borrowed); NULL:
                                  read the SQLite file db_path */
  const char *read_token;      /* NULL = no auth for reads */
  uint64_t max_window_bytes;   /* default 1 GiB */
  unsigned max_connections;    /* default 256 */
  unsigned per_ip_connections; /* default 32 */
  unsigned timeout_s;          /* idle connection timeout, default 30 */
  unsigned threads; /* database readers (SQLite connections) shared by all
                      requests, default 4; each HTTP connection has its own
                      thread */
  /* Appends the daemon's Prometheus metrics to out. Any thread. */
  void (*metrics)(void *ctx, gtp_wbuf *out);
  /* 1 if ready and healthy; may fill reason (static string) if not. */
  int (*healthy)(void *ctx, const char **reason);
  /* 1 if the session (32 hex) has a live agent connection. Any thread. */
  int (*connected)(void *ctx, const char *session);
  void *ctx;
  /* Added after the first version (compatible: web_config_init sets NULL).
   * One log line: level 0 info, 1 warn, 2 error; msg is logfmt key=value
   * pairs starting with msg="...". NULL = web writes logfmt to stderr.
   * Any thread. */
  void (*log)(void *ctx, int level, const char *msg);
  /* Trust and bounds (all 0/NULL = defaults, see web_config_init). */
  /* Origins allowed to read answers from a browser page (CORS), separated
   * by commas, e.g. "https://ui.perfetto.dev"; "*" allows any. NULL or ""
   * = CORS off: no Access-Control-Allow-Origin at all. */
  const char *cors_origins;
  unsigned max_downloads;  /* trace downloads at once, default 16 */
  unsigned max_long_polls; /* parked /v1/feed?wait= requests, default
                              max_connections / 2; below max_connections */
  unsigned send_timeout_s; /* time a download's client has to take each
                              block (up to 1 MiB), default 120 */
  /* HTTPS (web_tls.c): PEM files; tls_cert NULL = plain HTTP. With
   * tls_client_ca, clients need a certificate signed by it (403). */
  const char *tls_cert, *tls_key, *tls_client_ca;
  /* Stack symbols in Chrome/Perfetto exports (sym/, docs/SYMBOLS.md):
   * symbols_dir, a build-id tree (--symbols DIR) or NULL;
   * symbols_from_host, whether (and under which directories) module paths
   * on this host may be read: "yes" (NULL too), "no", or directories
   * separated by ':'; caps of the module cache (0 = 64 modules, 512 MiB). */
  const char *symbols_dir, *symbols_from_host;
  unsigned symbols_max_modules;
  uint64_t symbols_max_bytes;
} web_config;

/* Fills defaults for everything but db_path. */
void web_config_init(web_config *cfg);

/* Starts listening; *port gets the bound port. On error sets *cause
 * (malloc'd) and returns a negative code. */
int web_start(const web_config *cfg, web_server **out, uint16_t *port,
              char **cause);
/* Stops accepting, ends running requests, frees everything. */
void web_stop(web_server *w);
/* HTTPS: reads the certificate and key files again (SIGHUP); new
 * connections use them. 0 (also without HTTPS), or < 0 with *cause. */
int web_tls_reload_files(web_server *w, char **cause);
/* A generation with this seq committed: wake /v1/feed waiters. Any thread. */
void web_notify_commit(web_server *w, int64_t seq);

#endif
