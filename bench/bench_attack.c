/* bench_attack: the "under attack" table. An honest agent (the real
 * libgentrace, in a child process) writes at a fixed offered rate into
 * gentraced while one flood runs beside it; for each flood, in the same
 * run, a fresh daemon with the same --max-buffer:
 *
 *   none     no flood: the baseline
 *   stalled  peers that send most of a 64 KiB frame before HELLO and stall
 *            (kept at N: every one the daemon closes is reopened)
 *   opengen  agents that open generations (15 MiB each) and never end them
 *            (each reconnects and starts again when it is shed)
 *   conns    one address opening connections past --max-conns-per-ip and
 *            retrying the refused ones in a loop
 *   all      the three at once
 *
 * Two BENCH lines per flood: the daemon's peak RSS (VmHWM) against the
 * budget plus the documented fixed overhead (96 MiB), and the honest
 * agent's delivered (stored) events per second against the no-flood
 * figure. Attackers use their own loopback source addresses (127.0.1.x,
 * 127.0.2.x, 127.0.0.9), the honest agent 127.0.0.1.
 *
 *   bench_attack [seconds [budget-MiB [stalled-peers [flood]]]]
 *                                          default 5 64 1000, every flood
 *   bench_attack smoke                                     1 s, 8 MiB, 200
 *
 * Never fails the build; `make bench-attack` runs it.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "agent_child.h"
#include "client.h"

#define OVERHEAD_MIB 96
#define OPENERS 12
#define CONN_FLOOD 400

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* ----------------------------------------------------------------- floods */

typedef struct flood {
  uint16_t port;
  unsigned stalled_n;
  int stop; /* set by the main thread: __atomic */
  const gtc_gen *g;
  unsigned id;
  uint64_t opened; /* connections the flood made */
} flood;

static int stopped(flood *f) {
  return __atomic_load_n(&f->stop, __ATOMIC_RELAXED);
}

static void stop(flood *f) {
  __atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
}

static int stalled_open(gtc *c, unsigned i, uint16_t port) {
  char src[32];
  snprintf(src, sizeof src, "127.0.1.%u", 1 + i % 250);
  return gtc_stall_hello(c, src, port);
}

/* Keeps stalled_n stalled peers open: every one the daemon closes is
 * reopened. */
static void *stalled_main(void *arg) {
  flood *f = arg;
  gtc *c = calloc(f->stalled_n, sizeof *c);
  struct pollfd *pf = calloc(f->stalled_n, sizeof *pf);
  for (unsigned i = 0; i < f->stalled_n; i++) {
    c[i].fd = -1;
    if (stalled_open(&c[i], i, f->port) == 0)
      f->opened++;
  }
  while (!stopped(f)) {
    for (unsigned i = 0; i < f->stalled_n; i++)
      pf[i] = (struct pollfd){c[i].fd, POLLIN, 0};
    if (poll(pf, f->stalled_n, 50) <= 0)
      continue;
    for (unsigned i = 0; i < f->stalled_n && !stopped(f); i++) {
      if (c[i].fd >= 0 && (pf[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        gtc_close(&c[i]); /* answered (ERROR) or closed: start again */
        if (stalled_open(&c[i], i, f->port) == 0)
          f->opened++;
      }
    }
  }
  for (unsigned i = 0; i < f->stalled_n; i++)
    gtc_close(&c[i]);
  free(c);
  free(pf);
  return NULL;
}

/* An agent that opens four generations of g's records and never ends
 * them; shed, it reconnects and starts again. */
static void *opener_main(void *arg) {
  flood *f = arg;
  char src[32];
  snprintf(src, sizeof src, "127.0.2.%u", 1 + f->id);
  while (!stopped(f)) {
    gtc c;
    if (gtc_connect_from(&c, src, f->port) < 0) {
      sleep_ms(50);
      continue;
    }
    f->opened++;
    gtf_spec s;
    gtf_spec_init(&s, 500 + f->id, 1);
    int ok =
        gtc_send_hello(&c, &s, NULL, GTP_PROTO_VERSION, GTP_PROTO_VERSION) == 0;
    for (uint64_t gen = 1; gen <= 4 && ok && !stopped(f); gen++) {
      for (size_t i = 0; i < f->g->nrec && ok && !stopped(f); i++) {
        gtp_wbuf b;
        gtp_wbuf_init(&b, 0);
        gtp_frame_batch_encode(&b, gen, f->g->body.data + f->g->off[i],
                               f->g->off[i + 1] - f->g->off[i]);
        ok = b.err == 0 && gtc_send_raw(&c, b.data, b.len) == 0;
        gtp_wbuf_fini(&b);
      }
    }
    while (ok && !stopped(f)) {
      gtp_frame fr;
      int rc = gtc_read_frame(&c, &fr, 100);
      if (rc == 0 || (rc < 0 && rc != -ETIMEDOUT))
        break;
    }
    gtc_close(&c);
  }
  return NULL;
}

/* One address: opens up to CONN_FLOOD connections (past the per-address
 * limit), and keeps retrying those the daemon refuses. */
static void *conns_main(void *arg) {
  flood *f = arg;
  gtc *c = calloc(CONN_FLOOD, sizeof *c);
  for (unsigned i = 0; i < CONN_FLOOD; i++)
    c[i].fd = -1;
  while (!stopped(f)) {
    for (unsigned i = 0; i < CONN_FLOOD && !stopped(f); i++) {
      if (c[i].fd >= 0) {
        struct pollfd pf = {c[i].fd, POLLIN, 0};
        if (poll(&pf, 1, 0) <= 0)
          continue; /* still held */
        gtc_close(&c[i]);
      }
      if (gtc_connect_from(&c[i], "127.0.0.9", f->port) == 0)
        f->opened++;
    }
    sleep_ms(10);
  }
  for (unsigned i = 0; i < CONN_FLOOD; i++)
    gtc_close(&c[i]);
  free(c);
  return NULL;
}

/* ------------------------------------------------------------------- runs */

enum { F_STALLED = 1, F_OPENGEN = 2, F_CONNS = 4 };

typedef struct result {
  double rate; /* delivered events/s */
  int64_t lost;
  double hwm_mib;
  int64_t shed, refused;
  uint64_t opened;
} result;

static int run(unsigned floods, double seconds, unsigned budget_mib,
               unsigned stalled_n, const gtc_gen *g, double offered,
               result *r) {
  memset(r, 0, sizeof *r);
  gtd d;
  char budget[32];
  snprintf(budget, sizeof budget, "%uM", budget_mib);
  /* Stalled peers live until the handshake timeout unless shed; the
   * default (10 s) is what an operator runs. */
  const char *args[] = {"--max-buffer", budget, NULL};
  if (gtd_init(&d) < 0 || gtd_start(&d, args, NULL) < 0) {
    fprintf(stderr, "bench_attack: gentraced did not start (%s)\n", d.log);
    gtd_cleanup(&d);
    return -1;
  }
  flood fs = {.port = d.agent_port, .stalled_n = stalled_n};
  flood fo[OPENERS], fc = {.port = d.agent_port};
  pthread_t ts, to[OPENERS], tc;
  if (floods & F_STALLED)
    pthread_create(&ts, NULL, stalled_main, &fs);
  for (unsigned i = 0; i < OPENERS && (floods & F_OPENGEN); i++) {
    fo[i] = (flood){.port = d.agent_port, .g = g, .id = i};
    pthread_create(&to[i], NULL, opener_main, &fo[i]);
  }
  if (floods & F_CONNS)
    pthread_create(&tc, NULL, conns_main, &fc);
  if (floods != 0)
    sleep_ms(300); /* the flood is in place before the agent starts */

  /* The honest agent (tests/lib/agent_child.c), paced. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", d.agent_port);
  ac_config hc = {.addr = addr,
                  .service = "honest",
                  .rate = offered,
                  .seconds = seconds,
                  .threads = 2,
                  .buffer_mb = 32,
                  .flush_timeout_ms = 30000,
                  .pace_ms = 1};
  double t0 = now_s();
  ac_child h;
  int ok = ac_start(&h, &hc) == 0 && ac_wait(&h) >= 0;
  double took = now_s() - t0;

  r->hwm_mib = (double)gtd_proc_kib(d.pid, "VmHWM") / 1024;
  r->shed = gtd_metric(&d, "gentrace_ingest_shed_connections_total");
  r->refused =
      gtd_metric(&d, "gentrace_agent_connections_refused_per_ip_total");
  stop(&fs);
  stop(&fc);
  for (unsigned i = 0; i < OPENERS; i++)
    stop(&fo[i]);
  if (floods & F_STALLED)
    pthread_join(ts, NULL);
  for (unsigned i = 0; i < OPENERS && (floods & F_OPENGEN); i++) {
    pthread_join(to[i], NULL);
    r->opened += fo[i].opened;
  }
  if (floods & F_CONNS)
    pthread_join(tc, NULL);
  r->opened += fs.opened + fc.opened;
  int64_t ev, gaps;
  ac_db_sums(d.db, "honest", &ev, &r->lost, &gaps);
  /* Delivered over the agent's whole run, its final flush included. */
  r->rate = took > 0 ? (double)ev / took : 0;
  gtd_stop(&d);
  gtd_cleanup(&d);
  return ok ? 0 : -1;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  double seconds = 5;
  unsigned budget = 64, stalled_n = 1000;
  const char *only = NULL;
  double offered = 1e6;
  if (argc > 1 && strcmp(argv[1], "smoke") == 0) {
    seconds = 1;
    budget = 8;
    stalled_n = 200;
    offered = 2e5;
  } else {
    if (argc > 1)
      seconds = atof(argv[1]);
    if (argc > 2)
      budget = (unsigned)atoi(argv[2]);
    if (argc > 3)
      stalled_n = (unsigned)atoi(argv[3]);
    if (argc > 4)
      only = argv[4];
  }
  gtf_spec s;
  gtf_spec_init(&s, 499, 1);
  gtc_gen g;
  if (gtc_gen_build_random(&g, &s, 60, 7) < 0)
    return 1;

  static const struct {
    const char *name;
    unsigned floods;
  } cases[] = {{"none", 0},
               {"stalled", F_STALLED},
               {"opengen", F_OPENGEN},
               {"conns", F_CONNS},
               {"all", F_STALLED | F_OPENGEN | F_CONNS}};
  result base = {0};
  double bound = budget + OVERHEAD_MIB;
  printf("# under attack: --max-buffer %uM, honest agent offering %.0f "
         "events/s for %.0f s, %u stalled peers, %d openers, %d connections "
         "from one address\n",
         budget, offered, seconds, stalled_n, OPENERS, CONN_FLOOD);
  printf("# %-8s %12s %8s %10s %8s %8s %9s\n", "flood", "events/s", "lost",
         "VmHWM MiB", "shed", "refused", "attempts");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    result r;
    if (i > 0 && only != NULL && strcmp(only, cases[i].name) != 0)
      continue;
    if (run(cases[i].floods, seconds, budget, stalled_n, &g, offered, &r) < 0)
      fprintf(stderr, "bench_attack: run %s failed\n", cases[i].name);
    if (i == 0)
      base = r;
    printf("# %-8s %12.0f %8lld %10.1f %8lld %8lld %9llu\n", cases[i].name,
           r.rate, (long long)r.lost, r.hwm_mib, (long long)r.shed,
           (long long)r.refused, (unsigned long long)r.opened);
    double rr = base.rate > 0 ? r.rate / base.rate : 0;
    printf("BENCH id=attack_%s_rate value=%.0f unit=events/s "
           "baseline=no_flood:%.0f ratio=%.2f bar=0.50 pass=%d\n",
           cases[i].name, r.rate, base.rate, rr, rr >= 0.5 && r.lost == 0);
    double hr = r.hwm_mib / bound;
    printf("BENCH id=attack_%s_rss value=%.1f unit=MiB "
           "baseline=budget_plus_overhead:%.0f ratio=%.2f bar=1.00 pass=%d\n",
           cases[i].name, r.hwm_mib, bound, hr, hr <= 1.0);
    fflush(stdout);
  }
  gtc_gen_fini(&g);
  return 0;
}
