/* test_attack.c: gentraced's memory budget and connection limits under
 * attack, with an honest agent beside the attackers checked exactly.
 *
 * Real gentraced on 127.0.0.1 port 0, real sockets, real database; the
 * honest agent is the real libgentrace in a child process; attackers speak
 * raw frames through tests/daemon/client.c, each from its own loopback
 * source address (all of 127.0.0.0/8 is loopback), so the per-address limit
 * (default 256) does not hide the memory budget.
 *
 *  - Hundreds of peers that send most of a 64 KiB frame before HELLO and
 *    stall, and a dozen agents that open generations (15 MiB each) and never
 *    send GEN_END, against --max-buffer 8M: the daemon's peak RSS (VmHWM)
 *    stays under the budget plus the documented fixed overhead (96 MiB), and
 *    the honest agent stores every event it wrote, ledger 0.
 *  - A frame header over 64 KiB before HELLO is refused at once with
 *    ERROR(TOOBIG), before any payload.
 *  - Agents with 31 KiB identities (tags) by the hundred: identities stay
 *    within a quarter of the budget, the largest shed first, while an
 *    honest agent with a small identity keeps storing.
 *  - One address opening connections past --max-conns-per-ip (default 256)
 *    gets ERROR(LIMIT) for the extra ones, logged once, counted in
 *    /metrics, while an agent from another address still connects and
 *    stores; closing frees the address's slots again.
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "agent_child.h"
#include "client.h"
#include "daemon_fixture.h"
#include "format.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

#define MIB (1024 * 1024)
#define BUDGET_MIB 8
#define OVERHEAD_MIB 96 /* docs/DAEMON.md, "Memory budget" */
#define STALLED 300
#define OPENERS 12

/* Every daemon here checks its memory accounts on every pass. */
static const char *const budget_env[] = {"GENTRACED_BUDGET_CHECK=1", NULL};

/* ------------------------------------------------------------- attackers */

/* A peer that sends all but the last byte of a 64 KiB HELLO frame and
 * stalls. Sends without waiting: a paused daemon must not stall the test. */
static int stalled_open(gtc *c, unsigned i, uint16_t port) {
  char src[32];
  snprintf(src, sizeof src, "127.0.1.%u", 1 + i % 200);
  return gtc_stall_hello(c, src, port);
}

typedef struct opener {
  pthread_t t;
  uint16_t port;
  unsigned id;
  const gtc_gen *g; /* records sent as the never-ending generations */
  int stop;         /* set by the main thread: __atomic */
  gtc c;
} opener;

/* An agent that says HELLO, opens four generations of g's records (about
 * 15 MiB) and never ends them; it holds its connection until told to stop
 * (or the daemon closes it). */
static void *opener_main(void *arg) {
  opener *o = arg;
  char src[32];
  snprintf(src, sizeof src, "127.0.2.%u", 1 + o->id);
  if (gtc_connect_from(&o->c, src, o->port) < 0)
    return NULL;
  gtf_spec s;
  gtf_spec_init(&s, 500 + o->id, 1);
  if (gtc_send_hello(&o->c, &s, NULL, GTP_PROTO_VERSION, GTP_PROTO_VERSION) < 0)
    return NULL;
  int ok = 1;
  for (uint64_t gen = 1; gen <= 4 && ok; gen++) {
    for (size_t i = 0; i < o->g->nrec && ok; i++) {
      gtp_wbuf b;
      gtp_wbuf_init(&b, 0);
      gtp_frame_batch_encode(&b, gen, o->g->body.data + o->g->off[i],
                             o->g->off[i + 1] - o->g->off[i]);
      ok = b.err == 0 && gtc_send_raw(&o->c, b.data, b.len) == 0;
      gtp_wbuf_fini(&b);
    }
  }
  while (!__atomic_load_n(&o->stop, __ATOMIC_RELAXED)) {
    gtp_frame f;
    int rc = gtc_read_frame(&o->c, &f, 100);
    if (rc == 0 || (rc < 0 && rc != -ETIMEDOUT))
      break; /* shed by the daemon */
  }
  return NULL;
}

/* ------------------------------------------------------------------ tests */

static void
test_attack__stalled_peers_and_open_generations_stay_in_budget(void **st) {
  (void)st;
  gtd d;
  char budget[32];
  snprintf(budget, sizeof budget, "%dM", BUDGET_MIB);
  const char *args[] = {"--max-buffer", budget, "--handshake-timeout", "60s",
                        NULL};
  start(&d, args, budget_env);

  gtf_spec s;
  gtf_spec_init(&s, 499, 1);
  gtc_gen g;
  assert_int_equal(gtc_gen_build_random(&g, &s, 60, 7), 0);
  assert_true(g.body.len > 3 * MIB);

  /* The honest agent (tests/lib/agent_child.c), paced. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", d.agent_port);
  ac_config hc = {.addr = addr,
                  .service = "attack-honest",
                  .rate = 100000,
                  .seconds = 4.0,
                  .threads = 2,
                  .buffer_mb = 16,
                  .flush_timeout_ms = 30000,
                  .pace_ms = 1};
  ac_child h;
  assert_int_equal(ac_start(&h, &hc), 0);

  /* The attack, while the honest agent writes. */
  static gtc stalled[STALLED];
  unsigned nst = 0;
  for (unsigned i = 0; i < STALLED; i++)
    if (stalled_open(&stalled[nst], i, d.agent_port) == 0)
      nst++;
  assert_true(nst > STALLED * 9 / 10);
  opener op[OPENERS];
  memset(op, 0, sizeof op);
  for (unsigned i = 0; i < OPENERS; i++) {
    op[i].port = d.agent_port;
    op[i].id = i;
    op[i].g = &g;
    assert_int_equal(pthread_create(&op[i].t, NULL, opener_main, &op[i]), 0);
  }

  int64_t written = ac_wait(&h);
  assert_true(written >= 0);
  long hwm = gtd_proc_kib(d.pid, "VmHWM");
  int64_t shed = gtd_metric(&d, "gentrace_ingest_shed_connections_total");
  int64_t held = gtd_metric(&d, "gentrace_buffered_bytes");
  for (unsigned i = 0; i < OPENERS; i++) {
    __atomic_store_n(&op[i].stop, 1, __ATOMIC_RELAXED);
    pthread_join(op[i].t, NULL);
    gtc_close(&op[i].c);
  }
  for (unsigned i = 0; i < nst; i++)
    gtc_close(&stalled[i]);
  gtc_gen_fini(&g);
  print_message("budget %d MiB: VmHWM %.1f MiB, %lld connections shed, "
                "%lld bytes held at the end\n",
                BUDGET_MIB, (double)hwm / 1024, (long long)shed,
                (long long)held);

  /* The honest agent lost nothing. */
  int64_t stored, lost, gaps;
  assert_int_equal(ac_db_sums(d.db, "attack-honest", &stored, &lost, &gaps), 0);
  assert_true(written > 100000);
  assert_int_equal(lost, 0);
  assert_int_equal(gaps, 0);
  assert_int_equal(stored, (int64_t)written);

  /* The budget held: the peak stayed bounded, partial work was shed. */
  assert_true(hwm > 0);
#ifndef UNDER_SANITIZER
  /* Sanitizers' shadow memory and quarantine are not the daemon's. */
  assert_true(hwm < (long)(BUDGET_MIB + OVERHEAD_MIB) * 1024);
#endif
  assert_true(held >= 0 && held <= (int64_t)BUDGET_MIB * MIB);
  assert_true(shed >= 1);
  assert_true(gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-buffer-"
                             "shed\"}") >= shed);
  assert_true(gtd_log_has(&d, "memory budget full, partial work shed"));
  finish(&d);
}

/* A HELLO of session n with 30 tags of 1 KiB values: about 31 KiB on the
 * wire, kept (with its tags JSON) for as long as the connection lives. */
static void big_hello(gtp_wbuf *b, unsigned n) {
  gtf_spec s;
  gtf_spec_init(&s, n, 1);
  gtp_hello hl;
  memset(&hl, 0, sizeof hl);
  hl.min_version = hl.max_version = GTP_PROTO_VERSION;
  memcpy(hl.session, s.session, 16);
  memcpy(hl.session_key, s.session_key, 16);
  hl.service = (gtp_str){"svc", 3};
  hl.host = (gtp_str){"host", 4};
  hl.agent_version = (gtp_str){"1", 1};
  static char val[GTP_IDENT_STR_MAX];
  memset(val, 'v', sizeof val);
  char keys[GTP_TAGS_MAX][16];
  hl.ntags = 30;
  for (unsigned i = 0; i < hl.ntags; i++) {
    snprintf(keys[i], sizeof keys[i], "k%u", i);
    hl.tags[i].key = (gtp_str){keys[i], strlen(keys[i])};
    hl.tags[i].value = (gtp_str){val, sizeof val};
  }
  gtp_wbuf_init(b, 0);
  assert_int_equal(gtp_frame_hello_encode(b, &hl), 0);
}

static void test_attack__big_frame_before_hello_refused_at_once(void **st) {
  (void)st;
  gtd d;
  start(&d, NULL, budget_env);
  /* 64 KiB + 1 announced, no payload: refused on the header alone. */
  gtc c;
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  uint8_t hdr[GTP_FRAME_HEADER_SIZE];
  gtp_frame_header_put(hdr, GTP_FR_HELLO, (64u << 10) + 1);
  assert_int_equal(gtc_send_raw(&c, hdr, sizeof hdr), 0);
  int code = 0;
  assert_int_equal(gtc_wait_closed(&c, &code, 3000), 1);
  assert_int_equal(code, GTP_E_TOOBIG);
  gtc_close(&c);
  assert_int_equal(gtd_metric(&d, "gentrace_agent_hello_too_big_total"), 1);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"hello-size\"}"), 1);

  /* A HELLO just under 64 KiB (long tags) is still welcome. */
  assert_int_equal(gtc_connect(&c, d.agent_port), 0);
  gtp_wbuf b;
  big_hello(&b, 77);
  assert_true(b.len > 30000 && b.len <= GTP_FRAME_HEADER_SIZE + (64u << 10));
  assert_int_equal(gtc_send_raw(&c, b.data, b.len), 0);
  gtp_wbuf_fini(&b);
  gtp_frame f;
  assert_int_equal(gtc_read_frame(&c, &f, GTC_TIMEOUT_MS), 1);
  assert_int_equal(f.type, GTP_FR_WELCOME);
  gtc_close(&c);
  finish(&d);
}

static void test_attack__big_identities_stay_in_a_quarter_budget(void **st) {
  (void)st;
  enum { N = 120 };
  gtd d;
  const char *args[] = {"--max-buffer", "8M", NULL};
  start(&d, args, budget_env);
  /* An honest agent, connected first, with a small identity. */
  gtc h;
  assert_int_equal(gtc_connect(&h, d.agent_port), 0);
  gtf_spec hs;
  gtf_spec_init(&hs, 9, 1);
  hs.session[15] ^= 0xff; /* no attacker's session (gtf ids repeat mod 256) */
  gtp_welcome w;
  assert_int_equal(gtc_hello(&h, &hs, NULL, &w), 0);
  /* 120 agents whose identities (about 62 KiB each with the tags JSON)
   * would hold 7 MiB for as long as they stay connected. */
  static gtc a[N];
  for (unsigned i = 0; i < N; i++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.3.%u", 1 + i);
    assert_int_equal(gtc_connect_from(&a[i], src, d.agent_port), 0);
    gtp_wbuf b;
    big_hello(&b, 3000 + i);
    assert_int_equal(gtc_send_raw(&a[i], b.data, b.len), 0);
    gtp_wbuf_fini(&b);
  }
  /* Every HELLO is processed (WELCOME, or WELCOME then ERROR(LIMIT)). */
  unsigned closed = 0;
  for (unsigned i = 0; i < N; i++) {
    gtp_frame f;
    assert_int_equal(gtc_read_frame(&a[i], &f, GTC_TIMEOUT_MS), 1);
    assert_int_equal(f.type, GTP_FR_WELCOME);
  }
  for (unsigned i = 0; i < N; i++) {
    int code = 0;
    if (gtc_wait_closed(&a[i], &code, 100) == 1) {
      assert_int_equal(code, GTP_E_LIMIT);
      closed++;
    }
  }
  /* Shed connections' identities are freed once their close completes. */
  int64_t ident = -1;
  for (int tries = 0; tries < 100; tries++) {
    ident = gtd_metric(&d, "gentrace_ingest_held_bytes{kind=\"identities\"}");
    if (ident <= 2 * MIB)
      break;
    usleep(50000);
  }
  print_message("identities: %lld bytes held, %u of %d connections shed\n",
                (long long)ident, closed, N);
  assert_true(ident > 0 && ident <= 2 * MIB); /* a quarter of 8 MiB */
  assert_true(closed >= N / 2);
  assert_true(gtd_metric(&d, "gentrace_ingest_shed_connections_total") >=
              (int64_t)closed);
  /* The honest agent, never the largest identity, still stores. */
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &hs), 0);
  assert_int_equal(gtc_send_gen(&h, &g), 0);
  uint64_t gen = 0;
  int code = 0;
  assert_int_equal(gtc_read_reply(&h, &gen, &code, GTC_TIMEOUT_MS), 1);
  assert_int_equal(gen, 1);
  gtc_gen_fini(&g);
  gtc_close(&h);
  for (unsigned i = 0; i < N; i++)
    gtc_close(&a[i]);
  finish(&d);
}

static int count_lines(const char *path, const char *s) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int n = 0;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strstr(line, s) != NULL)
      n++;
  fclose(f);
  return n;
}

static void test_attack__one_address_cannot_take_every_slot(void **st) {
  (void)st;
  enum { PER_IP = 256, EXTRA = 20 };
  gtd d;
  /* Slots for the attacker's 256 and a few more; without a per-address
   * limit its extra connections would take them all. */
  const char *args[] = {"--max-connections", "270", NULL};
  start(&d, args, budget_env);
  static gtc a[PER_IP + EXTRA];
  unsigned refused = 0, accepted = 0;
  for (unsigned i = 0; i < PER_IP + EXTRA; i++) {
    assert_int_equal(gtc_connect_from(&a[i], "127.0.0.7", d.agent_port), 0);
    gtf_spec s;
    gtf_spec_init(&s, 1000 + i, 1);
    gtp_welcome w;
    int rc = gtc_hello(&a[i], &s, NULL, &w);
    if (rc == 0) {
      accepted++;
    } else {
      if (rc != GTP_E_LIMIT)
        fail_msg("connection %u: wanted WELCOME or ERROR(LIMIT), got %d", i,
                 rc);
      refused++;
      gtc_close(&a[i]);
    }
  }
  assert_int_equal(accepted, PER_IP);
  assert_int_equal(refused, EXTRA);

  /* An agent from another address still connects and stores. */
  gtc h;
  assert_int_equal(gtc_connect_from(&h, "127.0.0.2", d.agent_port), 0);
  gtf_spec s;
  gtf_spec_init(&s, 7, 1);
  s.session[15] ^= 0xff; /* no attacker's session (gtf ids repeat mod 256) */
  gtp_welcome w;
  assert_int_equal(gtc_hello(&h, &s, NULL, &w), 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build(&g, &s), 0);
  assert_int_equal(gtc_send_gen(&h, &g), 0);
  uint64_t gen = 0;
  int code = 0;
  assert_int_equal(gtc_read_reply(&h, &gen, &code, GTC_TIMEOUT_MS), 1);
  assert_int_equal(gen, 1);
  gtc_gen_fini(&g);
  gtc_close(&h);

  assert_int_equal(
      gtd_metric(&d, "gentrace_agent_connections_refused_per_ip_total"), EXTRA);
  assert_int_equal(
      gtd_metric(&d, "gentrace_limit_hits_total{limit=\"max-conns-per-ip\"}"),
      EXTRA);
  /* Logged, but not once per refusal. */
  assert_int_equal(count_lines(d.log, "too many from one address"), 1);

  /* Closing gives the address its slots back. */
  for (unsigned i = 0; i < PER_IP + EXTRA; i++)
    gtc_close(&a[i]);
  int64_t t0 = now_ms();
  while (gtd_metric(&d, "gentrace_agent_connections") > 0 &&
         now_ms() - t0 < 10000)
    usleep(20000);
  assert_int_equal(gtc_connect_from(&h, "127.0.0.7", d.agent_port), 0);
  gtf_spec_init(&s, 2000, 1);
  assert_int_equal(gtc_hello(&h, &s, NULL, &w), 0);
  gtc_close(&h);
  finish(&d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(
          test_attack__stalled_peers_and_open_generations_stay_in_budget,
          teardown),
      cmocka_unit_test_teardown(
          test_attack__big_frame_before_hello_refused_at_once, teardown),
      cmocka_unit_test_teardown(test_attack__one_address_cannot_take_every_slot,
                                teardown),
      cmocka_unit_test_teardown(
          test_attack__big_identities_stay_in_a_quarter_budget, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
