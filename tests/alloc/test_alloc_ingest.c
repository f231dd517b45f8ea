/* test_alloc_ingest.c: every allocation failure of the ingest path, walked.
 *
 * The daemon under test is the real ingest (daemon/) on a libuv loop in its
 * own thread, listening on 127.0.0.1 port 0, with a real SQLite store in a
 * scratch directory; the client is the protocol client of
 * tests/daemon/client.c on this thread, over a real socket. One run: start
 * that daemon, then with the Nth allocation of the daemon's threads (the
 * loop, the buffer filler, the store's threads) failing, session A says
 * HELLO and sends its generations, then session B does the same, then the
 * daemon stops. fa_walk (tests/lib/failalloc.c) repeats it for N = 1, 2,
 * ... until a run no longer reaches its Nth allocation.
 *
 * Every run must show, whatever N:
 *   - no crash, no leak (the live set of failalloc here; LeakSanitizer in
 *     the ASan build), and the budget invariants hold (the ingest checks
 *     them on every pass: GENTRACED_BUDGET_CHECK=1, aborting on a break);
 *   - no generation refused: an ERROR naming a generation is final for the
 *     agent (it would drop it), so a failure of the daemon's own memory
 *     must never produce one;
 *   - a clear error where the peer can be told: an ERROR without a
 *     generation carries ENOMEM; the client then reconnects and resends
 *     every generation not ACKed, as the agent does;
 *   - afterwards both sessions stored exactly: every generation once, with
 *     the bytes it was sent with (GEN_START from HELLO, body, GEN_END),
 *     and each one's key bound in the store's session index (a binding
 *     that cannot be made ends the connection, never a session left open
 *     to any key).
 * Set-up and tear-down of the daemon run outside the walk (fa_pause); the
 * client's own allocations never fail (fa_exempt). The second walk fails
 * SQLite's allocations as well (the store thread's statements: the
 * transaction fails, the connection is closed, the agent resends); it runs
 * on a sample of N in `make check` and whole with GT_ALLOC_WALK_FULL=1.
 * The third sends every reply down the queued path (the reply queue's
 * allocation), the fourth runs the whole exchange over TLS.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "check.h"
#include "client.h"
#include "failalloc.h"
#include "gtp_error.h"
#include "ingest_int.h"
#include "log.h"
#include "sha256.h"
#include "store_read.h"
#include "tls_client.h"
#include "tls_conn.h"

#define NGENS 3       /* per session: one large (staged), two fixtures */
#define WALK_MAX 4000 /* a run makes a few hundred allocations */

static char dir[64]; /* the walk's scratch directory */
/* TLS walks: the agent port serves TLS with a PKI made in dir (pki_made),
 * and the client wraps every connection. */
static int use_tls, pki_made;

/* ------------------------------------------------------------ the daemon */

typedef struct dh {
  char db[128];
  uv_loop_t loop;
  uv_async_t stop;
  ingest *ing;
  storage *st;
  tls_server *tls;
  uint16_t port;
  pthread_t th;
} dh;

static void on_drained(void *arg) {
  dh *h = arg;
  uv_stop(&h->loop);
}

static void on_stop(uv_async_t *a) {
  dh *h = a->data;
  uv_close((uv_handle_t *)&h->stop, NULL);
  ingest_stop(h->ing, 2000, on_drained, h);
}

static void *loop_main(void *arg) {
  dh *h = arg;
  uv_run(&h->loop, UV_RUN_DEFAULT);
  return NULL;
}

static void store_log(void *ctx, const char *kv) {
  (void)ctx;
  log_kv(LOG_ERROR, kv);
}

/* A daemon on a fresh database, its loop running in its own thread. */
static int dh_open(dh *h, unsigned run) {
  memset(h, 0, sizeof *h);
  snprintf(h->db, sizeof h->db, "%s/r%u.db", dir, run);
  if (uv_loop_init(&h->loop) != 0)
    return -1;
  ingest_config cfg;
  ingest_config_init(&cfg);
  cfg.port = 0;
  cfg.max_clock_skew_ns = 0; /* fixtures are dated 2026-01-01 */
  char *cause = NULL;
  if (ingest_new(&h->loop, &cfg, &h->ing, &cause) != 0)
    return -1;
  storage_config sc;
  memset(&sc, 0, sizeof sc);
  sc.sqlite.path = h->db;
  sc.sqlite.log = store_log;
  if (storage_open(&sc, ingest_store_done, h->ing, &h->st, &cause) != 0) {
    fprintf(stderr, "storage_open: %s\n", cause ? cause : "?");
    free(cause);
    return -1;
  }
  ingest_set_store(h->ing, h->st);
  if (use_tls) {
    char cert[160], key[160];
    snprintf(cert, sizeof cert, "%s/srv.pem", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    tls_server_config tc = {.cert_file = cert, .key_file = key};
    if (tls_server_new(&tc, &h->tls, &cause) != 0) {
      fprintf(stderr, "tls_server_new: %s\n", cause ? cause : "?");
      free(cause);
      return -1;
    }
    tls_attach(h->ing, h->tls);
  }
  if (ingest_start(h->ing, &h->port, &cause) != 0)
    return -1;
  uv_async_init(&h->loop, &h->stop, on_stop);
  h->stop.data = h;
  return pthread_create(&h->th, NULL, loop_main, h) == 0 ? 0 : -1;
}

/* Drains and stops the daemon (everything submitted is committed), then
 * frees it. */
static void dh_close(dh *h) {
  uv_async_send(&h->stop);
  pthread_join(h->th, NULL);
  storage_close(h->st);
  ingest_free(h->ing);
  tls_server_free(h->tls); /* after ingest_free (tls_conn.h) */
  uv_loop_close(&h->loop);
}

/* ------------------------------------------------------------ the agent */

typedef struct sess {
  gtf_spec spec[NGENS]; /* one per generation (gen i + 1) */
  gtc_gen g[NGENS];
  gtp_wbuf frames[NGENS]; /* each generation's frames, BATCHes + GEN_END */
} sess;

static void sess_init(sess *s, unsigned id) {
  for (unsigned i = 0; i < NGENS; i++) {
    gtf_spec_init(&s->spec[i], id, i + 1);
    /* The first one is one ~64 KiB EVENTS record: a BATCH frame large
     * enough to be read in place (staged) when it arrives in pieces, and
     * after it the connection asks for buffers that large, which the
     * pool's filler thread prepares. */
    int rc = i == 0
                 ? gtc_gen_build_random(&s->g[i], &s->spec[i], 1, id * 31 + i)
                 : gtc_gen_build(&s->g[i], &s->spec[i]);
    assert_int_equal(rc, 0);
    gtp_wbuf_init(&s->frames[i], 0);
    for (size_t r = 0; r < s->g[i].nrec; r++)
      assert_int_equal(
          gtp_frame_batch_encode(&s->frames[i], i + 1,
                                 s->g[i].body.data + s->g[i].off[r],
                                 s->g[i].off[r + 1] - s->g[i].off[r]),
          0);
    assert_int_equal(gtp_frame_gen_end_encode(&s->frames[i], &s->g[i].end), 0);
  }
}

static void sess_fini(sess *s) {
  for (unsigned i = 0; i < NGENS; i++) {
    gtc_gen_fini(&s->g[i]);
    gtp_wbuf_fini(&s->frames[i]);
  }
}

/* What one run saw, over both sessions. */
typedef struct tally {
  unsigned connects; /* connections made */
  unsigned nomem;    /* ERROR(ENOMEM) without a generation */
  unsigned closed;   /* ended without an ERROR (GOODBYE, EOF, reset) */
  const char *bad;   /* the first broken promise, or NULL */
  char bad_buf[160];
} tally;

static void bad(tally *t, const char *fmt, ...) {
  if (t->bad != NULL)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->bad_buf, sizeof t->bad_buf, fmt, ap);
  va_end(ap);
  t->bad = t->bad_buf;
}

/* Sends generation i: its frames in three writes, with a pause after
 * each, so that the daemon reads frames in pieces (the decoder's partial
 * frames, a staged BATCH). 0 or -errno. */
static int send_gen(gtc *c, const sess *s, unsigned i) {
  const gtp_wbuf *f = &s->frames[i];
  size_t cut[4] = {0, f->len / 2, f->len - 7, f->len};
  for (int k = 0; k < 3; k++) {
    int rc = gtc_send_raw(c, f->data + cut[k], cut[k + 1] - cut[k]);
    if (rc < 0)
      return rc;
    if (k < 2)
      nanosleep(&(struct timespec){0, 300000}, NULL);
  }
  return 0;
}

/* Session s, as an agent does it: HELLO, every generation not ACKed yet,
 * the replies; after an error without a generation, or a close, a new
 * connection and the rest again. */
static void sess_run(dh *h, const sess *s, tally *t) {
  int acked[NGENS] = {0};
  unsigned left = NGENS;
  for (int attempt = 0; attempt < 6 && left > 0 && t->bad == NULL; attempt++) {
    gtc c;
    if (gtc_connect(&c, h->port) < 0) {
      bad(t, "connect failed");
      return;
    }
    t->connects++;
    if (use_tls) {
      char ca[160];
      snprintf(ca, sizeof ca, "%s/ca.pem", dir);
      if (gtc_tls_wrap(&c, ca, 0, (unsigned)attempt) != 0) {
        t->closed++; /* the daemon ended the handshake */
        gtc_close(&c);
        continue;
      }
    }
    gtp_welcome w;
    int rc = gtc_hello(&c, &s->spec[0], NULL, &w);
    if (rc != 0) {
      /* Refused at the door: ERROR(ENOMEM), or closed when even that
       * could not be queued. */
      if (rc == -ENOMEM)
        t->nomem++;
      else if (rc == -ECONNRESET || rc == -EPIPE)
        t->closed++;
      else
        bad(t, "HELLO answered with %s", gtp_errname(rc));
      gtc_tls_end(&c);
      gtc_close(&c);
      continue;
    }
    int sent_ok = 1;
    for (unsigned i = 0; i < NGENS && sent_ok; i++)
      if (!acked[i] && send_gen(&c, s, i) < 0)
        sent_ok = 0; /* the daemon closed: read why below */
    for (;;) {
      uint64_t gen = 0;
      int code = 0;
      rc = gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS);
      if (rc == 1) {
        if (gen < 1 || gen > NGENS) {
          bad(t, "ACK of generation %llu", (unsigned long long)gen);
          break;
        }
        if (!acked[gen - 1]) {
          acked[gen - 1] = 1;
          left--;
        }
        if (left == 0)
          break;
        continue;
      }
      if (rc == 2 && gen != UINT64_MAX) {
        /* Final for that generation: the agent would drop it. */
        bad(t, "generation %llu refused with %s", (unsigned long long)gen,
            gtp_errname(code));
      } else if (rc == 2) {
        if (code == -ENOMEM)
          t->nomem++;
        else
          bad(t, "connection ended with %s", gtp_errname(code));
      } else if (rc == 0 || rc == -ECONNRESET || rc == -EPIPE) {
        t->closed++;
      } else {
        bad(t, "reading replies: %s", gtp_errname(rc));
      }
      break;
    }
    (void)sent_ok;
    gtc_tls_end(&c);
    gtc_close(&c);
  }
  if (left > 0 && t->bad == NULL)
    bad(t, "%u generations never ACKed", left);
}

/* Every generation of s stored once, byte for byte what was sent. */
static void sess_check_stored(const char *db, const sess *s, tally *t) {
  store_reader *r;
  char *cause = NULL, hex[33];
  if (store_reader_open(db, &r, &cause) != 0) {
    bad(t, "store_reader_open: %s", cause ? cause : "?");
    free(cause);
    return;
  }
  gtp_session_hex(s->spec[0].session, hex);
  gtp_wbuf got, want;
  gtp_wbuf_init(&got, 0);
  gtp_wbuf_init(&want, 0);
  for (unsigned i = 0; i < NGENS && t->bad == NULL; i++) {
    gtp_wbuf_reset(&got);
    gtp_wbuf_reset(&want);
    gtf_gen_start(&want, &s->spec[i]);
    gtp_wbuf_put(&want, s->g[i].body.data, s->g[i].body.len);
    gtp_put_gen_end(&want, &s->g[i].end);
    int rc = store_read_payload_by_gen(r, hex, i + 1, &got);
    if (rc != 0)
      bad(t, "session %s gen %u not stored (%s)", hex, i + 1, gtp_errname(rc));
    else if (got.len != want.len || memcmp(got.data, want.data, want.len))
      bad(t, "session %s gen %u stored with other bytes", hex, i + 1);
  }
  gtp_wbuf_reset(&got);
  if (t->bad == NULL && store_read_payload_by_gen(r, hex, NGENS + 1, &got) == 0)
    bad(t, "session %s: a generation that was never sent", hex);
  gtp_wbuf_fini(&got);
  gtp_wbuf_fini(&want);
  store_reader_close(r);
}

/* The session's key is bound in the running daemon's store, to the hash of
 * the key it sent: a generation stored for a session whose binding failed
 * would let any later HELLO claim it (store/store_index.c invariant 5). */
static void sess_check_bound(dh *h, const sess *s, tally *t) {
  uint8_t got[STORE_KEY_HASH_SIZE], want[GTP_SHA256_SIZE];
  gtp_sha256(s->spec[0].session_key, sizeof s->spec[0].session_key, want);
  if (storage_session_key(h->st, s->spec[0].session, got) != 1)
    bad(t, "a stored session without its key bound");
  else if (memcmp(got, want, sizeof want) != 0)
    bad(t, "a stored session bound to another key");
}

/* ------------------------------------------------------------ the walk */

typedef struct walk_ctx {
  sess a, b;
  unsigned run;
  uint64_t oom;           /* gentrace_out_of_memory_total over all runs */
  unsigned nomem, closed; /* what the clients saw, over all runs */
  unsigned broken;        /* runs that broke a promise */
} walk_ctx;

static int op_ingest(void *ctx, const char **why) {
  walk_ctx *w = ctx;
  long n = fa_pause(); /* the daemon's start is walked elsewhere */
  dh h;
  if (dh_open(&h, w->run++) != 0) {
    *why = "daemon did not start";
    w->broken++;
    return -1;
  }
  tally t;
  memset(&t, 0, sizeof t);
  fa_exempt(1);
  fa_resume(n);
  sess_run(&h, &w->a, &t); /* the one the failure most likely hits */
  sess_run(&h, &w->b, &t); /* and one after it, in the same daemon */
  fa_pause();
  fa_exempt(0);
  if (t.bad == NULL)
    sess_check_bound(&h, &w->a, &t);
  if (t.bad == NULL)
    sess_check_bound(&h, &w->b, &t);
  genpool_stats gp;
  genpool_stats_get(&h.ing->pool, &gp);
  w->oom += CTR_GET(h.ing, oom) + gp.fill_failed;
  dh_close(&h);
  if (t.bad == NULL)
    sess_check_stored(h.db, &w->a, &t);
  if (t.bad == NULL)
    sess_check_stored(h.db, &w->b, &t);
  fa_unlink_db(h.db);
  w->nomem += t.nomem;
  w->closed += t.closed;
  if (t.bad != NULL) {
    fprintf(stderr, "ingest walk: run %u: %s\n", w->run - 1, t.bad);
    w->broken++;
  }
  return 0;
}

/* Walks the exchange over every Nth allocation (step 1) or a sample, with
 * SQLite's allocations in the walk when sqlite is set. */
static void walk_ingest(const char *name, long step, int sqlite) {
  walk_ctx *w = calloc(1, sizeof *w);
  assert_non_null(w);
  sess_init(&w->a, 1);
  sess_init(&w->b, 2);
  fa_report rep;
  fa_sqlite_walk(sqlite);
  int rc = fa_walk_step(name, op_ingest, w, WALK_MAX, step, &rep);
  fa_sqlite_walk(0);
  fprintf(stderr,
          "%s: %ld runs (every %ld), %u ERROR(ENOMEM) seen, %u closes, "
          "gentrace_out_of_memory_total %llu in all\n",
          name, rep.runs, step, w->nomem, w->closed,
          (unsigned long long)w->oom);
  assert_int_equal(rc, 0);
  assert_int_equal(w->broken, 0);
  assert_true(rep.failures > 0);
  assert_true(rep.runs < WALK_MAX);
  /* The walk reached the paths that tell the agent, and counted them. */
  assert_true(w->nomem > 0);
  assert_true(w->oom > 0);
  if (sqlite) /* store errors: connections closed, then resent */
    assert_true(w->closed > 0);
  sess_fini(&w->a);
  sess_fini(&w->b);
  free(w);
}

static void
test_alloc_ingest__every_failure_is_survived_and_resent(void **state) {
  (void)state;
  walk_ingest("ingest walk", 1, 0);
}

/* With SQLite's allocations failing too, a run makes about four times as
 * many: `make check` samples every 7th (a few seconds);
 * GT_ALLOC_WALK_FULL=1 walks them all (about 20 s). */
static void
test_alloc_ingest__store_statement_failures_are_resent(void **state) {
  (void)state;
  const char *full = getenv("GT_ALLOC_WALK_FULL");
  walk_ingest("ingest walk with SQLite", full && strcmp(full, "1") == 0 ? 1 : 7,
              1);
}

/* The number of lines of the walk's log that contain s. */
static unsigned log_count(const char *s) {
  char path[128], line[1024];
  snprintf(path, sizeof path, "%s/gentraced.log", dir);
  FILE *f = fopen(path, "r");
  unsigned n = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    n += strstr(line, s) != NULL;
  if (f != NULL)
    fclose(f);
  return n;
}

/* Behind a full socket every reply waits in the connection's write queue,
 * allocated: with GENTRACED_TEST_QUEUE_REPLIES=1 every reply takes that
 * path, so the walk fails its allocation too. The peer cannot be told any
 * more (a part of a reply may be on the wire): the connection just ends,
 * and the agent resends. */
static void test_alloc_ingest__queued_replies_are_survived(void **state) {
  (void)state;
  unsigned before =
      log_count("what=\"reply queue\"") + log_count("what=reply queue");
  setenv("GENTRACED_TEST_QUEUE_REPLIES", "1", 1);
  walk_ingest("ingest walk, replies queued", 1, 0);
  unsetenv("GENTRACED_TEST_QUEUE_REPLIES");
  unsigned after =
      log_count("what=\"reply queue\"") + log_count("what=reply queue");
  fprintf(stderr, "reply queue out of memory: %u times\n", after - before);
  assert_true(after > before);
}

/* The same exchange over TLS on the agent port (daemon/tls_conn.c): the
 * handshake, decryption into the frame loop and the encrypted replies
 * walked as well. GnuTLS allocates out of the wrap's reach; tls_conn.c's
 * own allocations are in the walk. */
static void test_alloc_ingest__tls_connections_are_survived(void **state) {
  (void)state;
  if (!pki_made) {
    if (gtc_tls_pki(dir) != 0)
      fail_msg("certtool could not make the test certificates");
    pki_made = 1;
  }
  use_tls = 1;
  walk_ingest("ingest walk over TLS", 1, 0);
  use_tls = 0;
}

static int setup(void **state) {
  (void)state;
  if (fa_scratch_dir(dir, sizeof dir, "gt-allocingest") != 0)
    return -1;
  char path[128];
  snprintf(path, sizeof path, "%s/gentraced.log", dir);
  return log_open(path) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  log_close();
  char path[128];
  snprintf(path, sizeof path, "%s/gentraced.log", dir);
  unlink(path);
  static const char *const pki[] = {"ca.key",  "ca.pem",   "ca.tmpl", "srv.key",
                                    "srv.pem", "srv.tmpl", "srv.csr"};
  for (size_t i = 0; i < sizeof pki / sizeof pki[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, pki[i]);
    unlink(path);
  }
  rmdir(dir);
  return 0;
}

int main(void) {
  fa_sqlite_hook(0); /* the second walk turns it on */
  signal(SIGPIPE, SIG_IGN);
  gtp_check_set_hook(gtp_check_abort);
  setenv("GENTRACED_BUDGET_CHECK", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alloc_ingest__every_failure_is_survived_and_resent),
      cmocka_unit_test(test_alloc_ingest__store_statement_failures_are_resent),
      cmocka_unit_test(test_alloc_ingest__queued_replies_are_survived),
      cmocka_unit_test(test_alloc_ingest__tls_connections_are_survived),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
