/* main.c: gentraced's entry point. Kept thin: it reads the settings, opens
 * the log, the store, the ingest loop and the HTTP server, wires them
 * together, and handles signals. The only file of daemon/ that sees web.h
 * (docs/ARCHITECTURE.md, the dependency rule).
 *
 * Startup order matters: the store opens first (so WELCOME can answer from
 * store_last_gen), then the agent listener, then HTTP; the `listening` line
 * is logged only once both ports are bound, so tests and scripts can wait
 * for it instead of sleeping.
 *
 * Shutdown (SIGTERM/SIGINT): ingest_stop drains (every complete generation
 * commits and is ACKed, agents get GOODBYE), then HTTP stops, then the store
 * closes; exit status 0.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "check.h"
#include "conf.h"
#include "frame.h"
#include "gtp_error.h"
#include "ingest.h"
#include "log.h"
#include "rlimits.h"
#include "secret.h"
#include "storage.h"
#include "tls_conn.h"
#include "web.h"

#define DRAIN_MS 10000

typedef struct daemon_state {
  uv_loop_t *loop;
  ingest *ing;
  storage *st;     /* set before web starts */
  web_server *web; /* set once before the first commit can be reported */
  uv_signal_t sigterm, sigint, sighup;
  int stopping;
  tls_server *tls; /* --tls-cert: the agent port's credentials */
} daemon_state;

static void on_commit(void *ctx, int64_t seq) {
  daemon_state *d = ctx;
  web_server *w = __atomic_load_n(&d->web, __ATOMIC_ACQUIRE);
  if (w != NULL)
    web_notify_commit(w, seq);
}

static void web_metrics(void *ctx, gtp_wbuf *out) {
  daemon_state *d = ctx;
  ingest_metrics(d->ing, out);
}

/* web/ and the store log through the daemon's logger (so --log and SIGHUP
 * apply to them too) without depending on it. */
static void web_log_line(void *ctx, int level, const char *kv) {
  (void)ctx;
  log_kv(level <= 0 ? LOG_INFO : level == 1 ? LOG_WARN : LOG_ERROR, kv);
}

static void store_log(void *ctx, const char *kv) {
  (void)ctx;
  log_kv(LOG_ERROR, kv);
}

static void store_log_info(void *ctx, const char *kv) {
  (void)ctx;
  log_kv(LOG_INFO, kv);
}

static int web_healthy(void *ctx, const char **reason) {
  daemon_state *d = ctx;
  if (__atomic_load_n(&d->stopping, __ATOMIC_RELAXED)) {
    if (reason != NULL)
      *reason = "shutting down";
    return 0;
  }
  /* The shared store's reason names the server and the error; it is
   * written per HTTP thread, so the pointer stays valid for the caller. */
  static __thread char why[400];
  if (d->st && storage_health(d->st, why, sizeof why) < 0) {
    if (reason != NULL)
      *reason = why;
    return 0;
  }
  return ingest_healthy(d->ing, reason);
}

static int web_connected(void *ctx, const char *session) {
  daemon_state *d = ctx;
  return ingest_connected(d->ing, session);
}

static void on_drained(void *arg) {
  daemon_state *d = arg;
  uv_stop(d->loop);
}

static void on_signal(uv_signal_t *h, int signum) {
  daemon_state *d = h->data;
  if (signum == SIGHUP) {
    int rc = log_reopen();
    if (rc < 0)
      log_error("log reopen failed", "error=%s", uv_err_name(rc));
    else
      log_info("log reopened", NULL);
    if (d->tls != NULL) {
      /* New connections use the new credentials; live ones keep theirs. */
      char *cause = NULL, q[600];
      if (tls_server_reload(d->tls, &cause) < 0)
        log_error("TLS reload failed, keeping the old credentials", "cause=%s",
                  log_quote(q, sizeof q, cause ? cause : "?"));
      else
        log_info("TLS credentials reloaded", "port=agent");
      free(cause);
      cause = NULL;
      web_server *w = __atomic_load_n(&d->web, __ATOMIC_ACQUIRE);
      if (w != NULL && web_tls_reload_files(w, &cause) < 0)
        log_error("HTTPS reload failed, keeping the old credentials",
                  "cause=%s", log_quote(q, sizeof q, cause ? cause : "?"));
      else if (w != NULL)
        log_info("TLS credentials reloaded", "port=http");
      free(cause);
    }
    return;
  }
  if (d->stopping) {
    log_warn("second signal, exiting without drain", "signal=%d", signum);
    uv_stop(d->loop);
    return;
  }
  __atomic_store_n(&d->stopping, 1, __ATOMIC_RELAXED);
  log_info("shutting down", "signal=%s", signum == SIGTERM ? "TERM" : "INT");
  ingest_stop(d->ing, DRAIN_MS, on_drained, d);
}

static int die(const char *what, int rc, char *cause) {
  char q[1024];
  log_error(what, "error=%s cause=%s", gtp_errname(rc),
            log_quote(q, sizeof q, cause != NULL ? cause : gtp_strerror(rc)));
  fprintf(stderr, "gentraced: %s\n", cause != NULL ? cause : gtp_strerror(rc));
  free(cause);
  return 1;
}

int main(int argc, char **argv) {
  conf c;
  char *cause = NULL;
  int rc, status = 0;

  /* Debug builds: a broken invariant stops the daemon loudly, with file
   * and line, instead of corrupting what it stores (proto/check.h). */
  gtp_check_set_hook(gtp_check_abort);
  store_process_init(); /* before any SQLite use */
  conf_init(&c);
  rc = conf_parse_args(&c, argc, argv, &cause);
  if (rc == CONF_HELP) {
    fputs(conf_usage(), stdout);
    conf_fini(&c);
    return 0;
  }
  if (rc == CONF_VERSION) {
    printf("gentraced %s (protocol %u..%u)\n", PACKAGE_VERSION,
           GTP_PROTO_VERSION_MIN, GTP_PROTO_VERSION);
    conf_fini(&c);
    return 0;
  }
  if (rc < 0) {
    fprintf(stderr, "gentraced: %s\n", cause != NULL ? cause : "bad usage");
    free(cause);
    conf_fini(&c);
    return 2;
  }
  if ((rc = log_open(c.log)) < 0) {
    fprintf(stderr, "gentraced: --log %s: %s\n", c.log, strerror(-rc));
    conf_fini(&c);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  {
    /* A token written in a config file others can read is no secret. */
    struct stat st;
    int from_file =
        (c.token != NULL && !conf_from_cli(&c, "token")) ||
        (c.read_token != NULL && !conf_from_cli(&c, "read-token")) ||
        (c.admin_token != NULL && !conf_from_cli(&c, "admin-token"));
    if (from_file && c.config != NULL && stat(c.config, &st) == 0 &&
        (st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
      char q[600];
      log_warn("token in a config file other users can read",
               "config=%s hint=\"chmod 600 it, or use token-file / "
               "read-token-file\"",
               log_quote(q, sizeof q, c.config));
    }
  }
  if ((rc = secret_resolve(&c, &cause)) < 0) {
    fprintf(stderr, "gentraced: %s\n", cause != NULL ? cause : "bad token");
    free(cause);
    log_close();
    conf_fini(&c);
    return 2;
  }
  if (conf_from_cli(&c, "token") || conf_from_cli(&c, "read-token") ||
      conf_from_cli(&c, "admin-token"))
    log_warn("token on the command line",
             "hint=\"visible in the process list to every local user; use "
             "--token-file/--read-token-file/--admin-token-file or "
             "GENTRACED_TOKEN/GENTRACED_READ_TOKEN/GENTRACED_ADMIN_TOKEN\"");
  if (c.http_max_long_polls != 0 &&
      c.http_max_long_polls >= c.http_max_connections) {
    fprintf(stderr,
            "gentraced: --http-max-long-polls %" PRIu64
            " must be below --http-max-connections %" PRIu64
            ", or parked feeds could take every connection\n",
            c.http_max_long_polls, c.http_max_connections);
    log_close();
    conf_fini(&c);
    return 2;
  }
  if ((rc = secret_private_files(c.db, &cause)) < 0) {
    status = die("cannot secure the database files", rc, cause);
    log_close();
    conf_fini(&c);
    return status;
  }
  if (rc > 0)
    log_warn("database files made private", "files=%d mode=0600", rc);

  daemon_state d;
  memset(&d, 0, sizeof d);
  d.loop = uv_default_loop();

  /* One descriptor per agent, plus the database, HTTP and a margin. */
  {
    uint64_t want = c.max_connections + c.http_max_connections + 64;
    uint64_t soft = 0, hard = 0;
    if (rlimits_raise_nofile(want, &soft, &hard) == 0 && soft < want)
      log_warn("open files limit below what the connection limits need",
               "nofile=%" PRIu64 " hard=%" PRIu64 " wanted=%" PRIu64, soft,
               hard, want);
  }

  ingest_config icfg;
  ingest_config_init(&icfg);
  icfg.host = c.agent_listen.host;
  icfg.port = c.agent_listen.port;
  icfg.token = c.token;
  icfg.max_connections = c.max_connections;
  icfg.max_conns_per_ip = c.max_conns_per_ip;
  icfg.max_conn_buffer = c.max_conn_buffer;
  icfg.max_buffer = c.max_buffer;
  icfg.max_frame = (uint32_t)c.max_frame;
  icfg.max_gen_size = c.max_gen_size;
  icfg.handshake_timeout_ms = (uint64_t)c.handshake_timeout_ns / 1000000;
  icfg.idle_timeout_ms = (uint64_t)c.idle_timeout_ns / 1000000;
  icfg.max_gen_span_ns = (uint64_t)c.max_gen_span_ns;
  icfg.max_clock_skew_ns = (uint64_t)c.max_clock_skew_ns;
  icfg.loop_coalesce_ns = (uint64_t)c.loop_coalesce_ns;
  icfg.on_commit = on_commit;
  icfg.on_commit_ctx = &d;

  storage *st = NULL;
  uint16_t agent_port = 0, http_port = 0;
  if ((rc = ingest_new(d.loop, &icfg, &d.ing, &cause)) < 0) {
    status = die("cannot start ingest", rc, cause);
    goto fail_ingest;
  }
  if (c.tls_cert != NULL || c.tls_key != NULL) {
    tls_server_config tcfg = {c.tls_cert, c.tls_key, c.tls_client_ca,
                              c.tls_require_service_san};
    if ((rc = tls_server_new(&tcfg, &d.tls, &cause)) < 0) {
      status = die("cannot load the TLS credentials", rc, cause);
      goto fail_store;
    }
    tls_attach(d.ing, d.tls);
  } else if (c.tls_client_ca != NULL || c.http_tls_client_ca != NULL ||
             c.tls_require_service_san) {
    status = die("bad TLS settings", GTP_E_BADARG,
                 strdup("--tls-client-ca, --http-tls-client-ca and "
                        "--tls-require-service-san need --tls-cert and "
                        "--tls-key"));
    goto fail_store;
  }

  store_config scfg;
  memset(&scfg, 0, sizeof scfg);
  scfg.path = c.db;
  scfg.sync_full = c.sync_full;
  scfg.retain_ns = c.retain_ns;
  scfg.max_db_bytes = c.max_db_size;
  /* Level 1 by default: C1 measured the store CPU-bound on zstd at level 3
   * (0.35 of raw disk) while level 1 compressed almost as well (1.86x vs
   * 1.88x) at half the CPU (0.64 of raw disk); see docs/STORAGE.md. */
  scfg.zstd_level = c.zstd_level != 0 ? (int)c.zstd_level : 1;
  scfg.no_compress = c.zstd_level == 0;
  /* --zstd-fast-level: another level while the compressors are behind
   * (store.c invariant 15); the default keeps one level whatever the load. */
  scfg.zstd_fast = c.zstd_fast_level != CONF_ZSTD_FAST_SAME &&
                   c.zstd_fast_level != c.zstd_level;
  scfg.zstd_fast_level = scfg.zstd_fast ? (int)c.zstd_fast_level : 0;
  scfg.log = store_log;
  scfg.log_info = store_log_info;
  /* Group commit: a fleet's small generations share transactions (up to
   * 2048 of them, or --commit-linger of waiting, default 20 ms; store.c
   * invariant 13; millisecond resolution). A store that
   * fell behind catches up in large transactions: their pages saturate
   * (every session's row and index pages), so each generation costs less
   * the more there are. */
  scfg.batch_max = 2048;
  scfg.linger_ms =
      (uint32_t)(c.commit_linger_ns / 1000000); /* --commit-linger */
  scfg.test_delay_ms = (uint32_t)c.test_store_delay_ms;
  /* A fleet adds to the current slot's rollups in every transaction: hold
   * them until the slot is done (2 s without a generation for it). */
  scfg.rollup_hold_ms = 2000;
  /* No pins: retention never waits for HTTP readers (a download whose
   * remaining generations were deleted ends early, docs/HTTP.md). */
  storage_config stcfg;
  memset(&stcfg, 0, sizeof stcfg);
  stcfg.sqlite = scfg;
  stcfg.catalog = c.catalog;
  stcfg.objects = c.objects;
  stcfg.shared.s3.endpoint = c.s3_endpoint;
  stcfg.shared.s3.region = c.s3_region;
  stcfg.shared.s3.access_key = c.s3_access_key_id;
  stcfg.shared.s3.secret_key = c.s3_secret_access_key;
  stcfg.shared.daemon_id = c.daemon_id;
  stcfg.shared.max_age_ms = (uint32_t)(c.segment_max_age_ns / 1000000);
  stcfg.shared.max_bytes = c.segment_max_bytes;
  stcfg.shared.uploads = (uint32_t)c.segment_uploads; /* 0: default 4 */
  stcfg.shared.zstd_level = scfg.zstd_level;
  stcfg.shared.test_commit_delay_ms = (uint32_t)c.test_store_delay_ms;
  /* The storage threads are created with the boost (they inherit this
   * thread's nice value); the loop and HTTP threads keep the default. */
  int nice_saved = 0;
  if (rlimits_nice_begin((int)c.store_nice_boost, &nice_saved) < 0)
    log_info("storage threads keep the default priority",
             "wanted_boost=%d reason=\"not allowed here\"",
             (int)c.store_nice_boost);
  stcfg.orphan_grace_ms = (uint32_t)(c.orphan_grace_ns / 1000000);
  rc = storage_open(&stcfg, ingest_store_done, d.ing, &st, &cause);
  rlimits_nice_end((int)c.store_nice_boost, nice_saved);
  if (rc < 0) {
    status = die(c.catalog || c.objects ? "cannot open the shared store"
                                        : "cannot open the database",
                 rc, cause);
    goto fail_store;
  }
  d.st = st;
  ingest_set_store(d.ing, st);
  if ((rc = ingest_start(d.ing, &agent_port, &cause)) < 0) {
    status = die("cannot listen for agents", rc, cause);
    goto fail_listen;
  }

  web_config wcfg;
  web_config_init(&wcfg);
  wcfg.host = c.http_listen.host;
  wcfg.port = c.http_listen.port;
  wcfg.db_path = c.db;
  wcfg.storage = st;
  wcfg.read_token = c.read_token;
  wcfg.max_window_bytes = c.max_window_bytes;
  wcfg.max_connections = (unsigned)c.http_max_connections;
  wcfg.per_ip_connections = (unsigned)c.http_per_ip_connections;
  wcfg.timeout_s = (unsigned)(c.http_timeout_ns / 1000000000);
  wcfg.threads = (unsigned)c.http_threads;
  wcfg.cors_origins = c.cors_origins;
  wcfg.max_downloads = (unsigned)c.http_max_downloads;
  wcfg.max_long_polls = (unsigned)c.http_max_long_polls;
  wcfg.send_timeout_s = (unsigned)(c.http_send_timeout_ns / 1000000000);
  wcfg.metrics = web_metrics;
  wcfg.healthy = web_healthy;
  wcfg.connected = web_connected;
  wcfg.log = web_log_line;
  wcfg.ctx = &d;
  wcfg.tls_cert = d.tls != NULL ? c.tls_cert : NULL;
  wcfg.tls_key = d.tls != NULL ? c.tls_key : NULL;
  wcfg.tls_client_ca = c.http_tls_client_ca;
  wcfg.admin_token = c.admin_token;
  /* Pins may hold a quarter of --max-db-size unless told otherwise, so
   * retention always has room to work with. */
  wcfg.max_pinned_bytes =
      conf_from_cli(&c, "max-pinned-bytes") || c.max_pinned_bytes != 0
          ? c.max_pinned_bytes
          : c.max_db_size / 4;
  wcfg.pin_max_ttl_ns = c.pin_max_ttl_ns;
  wcfg.symbols_dir = c.symbols;
  wcfg.symbols_from_host = c.symbols_from_host;
  wcfg.symbols_max_bytes = c.symbols_cache;
  web_server *web = NULL;
  if ((rc = web_start(&wcfg, &web, &http_port, &cause)) < 0) {
    status = die("cannot start HTTP", rc, cause);
    goto fail_web;
  }
  __atomic_store_n(&d.web, web, __ATOMIC_RELEASE);

  uv_signal_init(d.loop, &d.sigterm);
  uv_signal_init(d.loop, &d.sigint);
  uv_signal_init(d.loop, &d.sighup);
  d.sigterm.data = d.sigint.data = d.sighup.data = &d;
  uv_signal_start(&d.sigterm, on_signal, SIGTERM);
  uv_signal_start(&d.sigint, on_signal, SIGINT);
  uv_signal_start(&d.sighup, on_signal, SIGHUP);

  {
    conf_addr a = c.agent_listen, h = c.http_listen;
    char as[300], hs[300], q[600];
    a.port = agent_port;
    h.port = http_port;
    conf_addr_format(&a, as, sizeof as);
    conf_addr_format(&h, hs, sizeof hs);
    log_info("listening", "agent=%s http=%s %s=%s", as, hs,
             storage_is_shared(st) ? "store" : "db",
             log_quote(q, sizeof q, storage_describe(st)));
  }

  uv_run(d.loop, UV_RUN_DEFAULT);

  __atomic_store_n(&d.web, NULL, __ATOMIC_RELEASE);
  web_stop(web);
  uv_close((uv_handle_t *)&d.sigterm, NULL);
  uv_close((uv_handle_t *)&d.sigint, NULL);
  uv_close((uv_handle_t *)&d.sighup, NULL);
  /* Closing the handles restored the default actions; a repeated stop
   * request must not kill us while the store commits what is queued. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
fail_web:
fail_listen:
  d.st = NULL;
  storage_close(st);
fail_store : {
  ingest_stats is;
  ingest_stats_get(d.ing, &is);
  ingest_free(d.ing);
  tls_server_free(d.tls); /* after every session is gone */
  if (status == 0)
    log_info("stopped",
             "committed=%" PRIu64 " rejected=%" PRIu64 " duplicate=%" PRIu64,
             is.committed, is.rejected, is.duplicate);
}
fail_ingest:
  uv_loop_close(d.loop);
  log_close();
  conf_fini(&c);
  return status;
}
