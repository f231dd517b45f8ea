/* bench_session_flood: an honest agent's delivered events per second and
 * ACK latency, with and without the session floods of issue 12, same run:
 *
 *   none       the honest agent alone (the baseline)
 *   throwaway  + 2 threads opening throwaway sessions, each with one
 *              rejected generation (bookkeeping the daemon must bound)
 *   claim      + 1 thread HELLOing with the honest session's id and random
 *              keys (each gets ERROR(AUTH); the honest connection stays)
 *   after      the honest agent alone again, after both floods
 *
 *   bench_session_flood [SECONDS per phase, default 5]
 *
 * Prints a table (phase, events/s, median and p99 ACK latency, peak RSS of
 * gentraced, flood attempts) and one BENCH line per flood phase with the
 * no-flood figure as its baseline. The honest agent is tests/daemon/
 * client.c sending fixture generations back to back, each waiting for its
 * ACK, so events/s follows ACK latency. Never part of `make check`; the
 * figures never fail the build.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0)
      kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

typedef struct flood {
  uint16_t port;
  int kind; /* 0 throwaway, 1 claim */
  unsigned first;
  const uint8_t *victim;
  int stop;
  uint64_t attempts;
} flood;

static void *flood_main(void *arg) {
  flood *fl = arg;
  for (unsigned i = 0; !__atomic_load_n(&fl->stop, __ATOMIC_RELAXED); i++) {
    gtc c;
    if (gtc_connect(&c, fl->port) != 0)
      continue;
    gtp_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.min_version = hl.max_version = GTP_PROTO_VERSION;
    if (fl->kind == 0) {
      unsigned id = fl->first + i;
      memcpy(hl.session, &id, sizeof id);
      memset(hl.session + 4, 0xee, 12);
    } else {
      memcpy(hl.session, fl->victim, 16);
    }
    for (int k = 0; k < 16; k++)
      hl.session_key[k] = (uint8_t)(rand() ^ (int)i);
    hl.service = (gtp_str){"flood", 5};
    hl.host = (gtp_str){"h", 1};
    hl.agent_version = (gtp_str){"0", 1};
    gtp_gen_end e = {1, 1, 0, 8, 0, 5, 0, 0, 0};
    uint8_t mem[512];
    gtp_wbuf b = {mem, 0, sizeof mem, sizeof mem, 0};
    gtp_frame_hello_encode(&b, &hl);
    if (fl->kind == 0)
      gtp_frame_gen_end_encode(&b, &e);
    if (gtc_send_raw(&c, b.data, b.len) == 0) {
      uint64_t gen;
      int code;
      (void)gtc_read_reply(&c, &gen, &code, GTC_TIMEOUT_MS);
    }
    struct linger lg = {1, 0};
    setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    gtc_close(&c);
    __atomic_fetch_add(&fl->attempts, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

typedef struct phase {
  const char *name;
  double events_s, p50_us, p99_us;
  long peak_kib;
  uint64_t attempts;
} phase;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Streams honest generations for secs seconds; fills ph. */
static int honest_run(gtd *d, gtc *c, uint64_t *gen, double secs, phase *ph) {
  static double lat[1 << 20];
  size_t n = 0;
  uint64_t events = 0;
  double t0 = now_s(), last_rss = 0;
  ph->peak_kib = 0;
  while (now_s() - t0 < secs && n < sizeof lat / sizeof lat[0]) {
    gtf_spec s;
    gtf_spec_init(&s, 1, *gen);
    gtc_gen g;
    if (gtc_gen_build(&g, &s) != 0)
      return -1;
    double a = now_s();
    if (gtc_send_gen(c, &g) != 0)
      return -1;
    uint64_t got = 0;
    int code = 0;
    if (gtc_read_reply(c, &got, &code, GTC_TIMEOUT_MS) != 1 || got != *gen) {
      fprintf(stderr, "bench_session_flood: gen %" PRIu64 " not ACKed (%d)\n",
              *gen, code);
      return -1;
    }
    lat[n++] = (now_s() - a) * 1e6;
    events += gtf_events(&s);
    gtc_gen_fini(&g);
    (*gen)++;
    if (now_s() - last_rss > 0.1) {
      long k = rss_kib(d->pid);
      if (k > ph->peak_kib)
        ph->peak_kib = k;
      last_rss = now_s();
    }
  }
  ph->events_s = (double)events / (now_s() - t0);
  qsort(lat, n, sizeof lat[0], cmp_d);
  ph->p50_us = n ? lat[n / 2] : 0;
  ph->p99_us = n ? lat[n * 99 / 100] : 0;
  return 0;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  gtd d;
  const char *args[] = {NULL};
  if (gtd_init(&d) < 0 || gtd_start(&d, args, NULL) < 0) {
    fprintf(stderr, "bench_session_flood: cannot start gentraced\n");
    return 1;
  }
  gtc c;
  gtf_spec s;
  gtp_welcome w;
  gtf_spec_init(&s, 1, 1);
  if (gtc_connect(&c, d.agent_port) != 0 || gtc_hello(&c, &s, NULL, &w) != 0) {
    fprintf(stderr, "bench_session_flood: honest HELLO failed\n");
    gtd_cleanup(&d);
    return 1;
  }
  uint64_t gen = 1;
  phase ph[4];
  memset(ph, 0, sizeof ph);
  ph[0].name = "none";
  ph[1].name = "throwaway";
  ph[2].name = "claim";
  ph[3].name = "after";
  int rc = honest_run(&d, &c, &gen, 1, &ph[0]); /* warm-up */
  rc = rc ? rc : honest_run(&d, &c, &gen, secs, &ph[0]);

  flood fl[3];
  memset(fl, 0, sizeof fl);
  for (int i = 0; i < 3; i++) {
    fl[i].port = d.agent_port;
    fl[i].kind = i == 2;
    fl[i].first = 1000000u + (unsigned)i * 50000000u;
    fl[i].victim = s.session;
  }
  pthread_t th[3];
  for (int p = 1; p <= 2 && rc == 0; p++) {
    int from = p == 1 ? 0 : 2, to = p == 1 ? 2 : 3;
    for (int i = from; i < to; i++)
      pthread_create(&th[i], NULL, flood_main, &fl[i]);
    rc = honest_run(&d, &c, &gen, secs, &ph[p]);
    for (int i = from; i < to; i++) {
      __atomic_store_n(&fl[i].stop, 1, __ATOMIC_RELAXED);
      pthread_join(th[i], NULL);
      ph[p].attempts += fl[i].attempts;
    }
  }
  if (rc == 0)
    rc = honest_run(&d, &c, &gen, secs, &ph[3]);
  gtc_close(&c);
  int64_t untracked =
      gtd_metric(&d, "gentrace_sessions_unstored_untracked_total");
  int64_t tracked = gtd_metric(&d, "gentrace_sessions_unstored");
  int64_t auth = gtd_metric(&d, "gentrace_refused_total{reason=\"auth\"}");
  gtd_stop(&d);
  gtd_cleanup(&d);
  if (rc != 0)
    return 1;

  printf("| phase | honest events/s | ACK p50 us | ACK p99 us | peak RSS "
         "KiB | flood attempts |\n|---|---:|---:|---:|---:|---:|\n");
  for (int p = 0; p < 4; p++)
    printf("| %s | %.0f | %.0f | %.0f | %ld | %" PRIu64 " |\n", ph[p].name,
           ph[p].events_s, ph[p].p50_us, ph[p].p99_us, ph[p].peak_kib,
           ph[p].attempts);
  printf("after the floods: %" PRId64 " unstored sessions tracked, %" PRId64
         " untracked, %" PRId64 " AUTH refusals\n",
         tracked, untracked, auth);
  const char *ids[4] = {NULL, "FLOOD_THROWAWAY", "FLOOD_CLAIM", "AFTER_FLOOD"};
  for (int p = 1; p < 4; p++) {
    double ratio = ph[p].events_s / ph[0].events_s;
    printf("BENCH id=%s value=%.0f unit=honest_events/s baseline=no_flood:%.0f "
           "ratio=%.3f bar=>=0.5 pass=%d\n",
           ids[p], ph[p].events_s, ph[0].events_s, ratio, ratio >= 0.5);
  }
  return 0;
}
