/* bench_cluster: issue 14's benchmark. B1 and C1 through 1, 2 and 3 real
 * gentraced on one shared store (one PostgreSQL catalog, one Swift s3api
 * bucket, from scripts/cluster-up), beside one gentraced on SQLite in the
 * same run, and the latency of a /v1/trace window fetched from a daemon
 * that did not ingest it (cold and warm cache).
 *
 *   bench_cluster [--agents A] [--threads T] [--seconds S] [--reps R]
 *                 [--c1-mib M] [--daemons MAX] [--uploads-baseline]
 *                 [--c1-only] [--smoke]
 *
 * Design (numbered invariants of the measurement):
 *  1. Every configuration (sqlite, shared-1 .. shared-MAX) starts fresh
 *     daemons, stopped by PID afterwards; one round runs every
 *     configuration once, interleaved, and R rounds give the medians, so
 *     a change in the machine's load touches all configurations alike.
 *  2. B1: A agent processes (the real libgentrace, b1_agent.c) with T
 *     threads each emit paced gt_counter events. Agent i's GENTRACE_ADDR
 *     is the daemons' failover list rotated by i, so with A a multiple of
 *     the daemon count each daemon gets an equal share (checked from each
 *     daemon's gentrace_generations_committed_total). A trial passes only
 *     when nothing was dropped by the agents, the stored ledgers show no
 *     loss and the events stored equal the events written, all read from
 *     the HTTP API (/v1/agents?service=, on a daemon other than the first)
 *     with one session per agent. Rates double from --start until a trial
 *     loses, then bisect; the figure is the highest delivered rate of a
 *     zero-loss trial (events written over the time the agents took to
 *     emit them: on a loaded machine agents run late at any rate, and a
 *     late trial counts at the rate it really delivered).
 *  3. CPU per million events at that rate: the daemons' (utime + stime of
 *     /proc/PID/stat, summed), PostgreSQL's (the postmaster with its
 *     children and reaped children), Swift's (its four servers and
 *     memcached) and the agents' (RUSAGE_CHILDREN over the trial: the
 *     daemons are reaped only when their configuration ends). Their sum
 *     over the trial's wall time, in % of one core, says how close the run
 *     came to the machine's cores.
 *  4. C1: one protocol connection per daemon sends M/N MiB of prebuilt
 *     generations (1 MiB of LOG events with random messages each, so the
 *     stored bytes equal the sent ones: the store's own rate, not zstd's
 *     gain) with at most 64 unACKed at once (an agent's default 64 MiB
 *     spool; also the daemon's default --max-conn-buffer); the figure is
 *     MiB ACKed per second (an ACK on the shared store means the segment
 *     is stored and its rows committed), from the first byte to the last
 *     ACK. Also MiB per daemon CPU-second (the figure a loaded machine
 *     moves least), and the daemons' S3 PUT and catalog errors so far (a
 *     slow run with errors was the servers refusing, then backoff).
 *  4b. --uploads-baseline adds one more configuration to every round,
 *     shared-1-k1: one shared daemon with --segment-uploads 1 (one segment
 *     PUT at a time, the writer before pipelining), the same-run "before"
 *     figure of the pipelined default.
 *  5. Window latency: after the ladder, one more trial at a fixed rate
 *     (--window-rate, default 600,000 events/s in all: the same windows for
 *     every configuration) with 250 ms generations; then a fresh daemon on
 *     the same store (nothing cached, nothing ingested) fetches six 250 ms
 *     windows of each of its sessions (/v1/trace?session=ID&from=&to=: the
 *     whole generations overlapping each) all once (cold), then all again
 *     (warm); p50 and p99 over the
 *     windows, each answer checked for status 200 and at least one
 *     generation (X-Gentrace-Generations). SQLite's baseline: the same
 *     fetches from its only daemon.
 *
 * Environment: GENTRACE_CATALOG, GENTRACE_OBJECTS, GENTRACE_CLUSTER_DIR
 * and AWS_* from scripts/cluster-up (make bench-cluster starts and stops
 * one); BENCH_CLUSTER_SEGMENT_AGE (--segment-max-age, default the
 * daemon's 2s), BENCH_CLUSTER_SEGMENT_SIZE (--segment-max-size) and
 * BENCH_CLUSTER_SEGMENT_UPLOADS (--segment-uploads), each the daemon's
 * default when unset. --c1-only: C1 alone (no B1 ladder, no windows), for
 * quick looks at the segment path. --smoke: one round, one short trial per
 * configuration at a fixed low rate, a few MiB of C1 and the window fetches;
 * exit 1 on any exactness failure (for make check), never on a figure.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "b1_agent.h"
#include "bench_env.h"
#include "client.h"

#define MAXD 3
#define MAXSESS 512
#define C1_WINDOW 64
/* Window latency: generations of WIN_MS (the agent's period), WIN_PER
 * windows of WIN_MS per session inside the window trial. */
#define WIN_MS 250
#define WIN_PERIOD "250"
#define WIN_PER 6

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct opts {
  unsigned agents, threads, reps, maxd;
  double seconds, start_rate, window_rate;
  size_t c1_mib;
  int smoke, c1_only, k1;
} opts;

/* ------------------------------------------------------------ the fleet */

typedef struct fleet {
  int n;           /* daemons */
  int shared;      /* 0: one daemon on SQLite */
  int k1;          /* shared with --segment-uploads 1 (--uploads-baseline) */
  gtd d[MAXD + 1]; /* [n]: the window reader, when started */
  char obj[256];
  char tag[64];
} fleet;

static int fleet_start_one(fleet *f, int i) {
  char id[96];
  snprintf(id, sizeof id, "%s-%d", f->tag, i);
  const char *age = getenv("BENCH_CLUSTER_SEGMENT_AGE");
  const char *size = getenv("BENCH_CLUSTER_SEGMENT_SIZE");
  const char *ups = f->k1 ? "1" : getenv("BENCH_CLUSTER_SEGMENT_UPLOADS");
  const char *sqlite_args[] = {"--max-conns-per-ip", "100000", NULL};
  const char *shared_args[16] = {"--max-conns-per-ip",
                                 "100000",
                                 "--catalog",
                                 getenv("GENTRACE_CATALOG"),
                                 "--objects",
                                 f->obj,
                                 "--daemon-id",
                                 id,
                                 "--segment-max-age",
                                 age ? age : "2s",
                                 NULL};
  int na = 10;
  if (size) {
    shared_args[na++] = "--segment-max-size";
    shared_args[na++] = size;
  }
  if (ups) {
    shared_args[na++] = "--segment-uploads";
    shared_args[na++] = ups;
  }
  if (gtd_init(&f->d[i]) < 0 ||
      gtd_start(&f->d[i], f->shared ? shared_args : sqlite_args, NULL) < 0) {
    fprintf(stderr, "bench_cluster: %s daemon %d did not start\n", f->tag, i);
    return -1;
  }
  return 0;
}

static int fleet_start(fleet *f, int n, int shared, int k1, unsigned round) {
  memset(f, 0, sizeof *f);
  f->n = n;
  f->shared = shared;
  f->k1 = k1;
  snprintf(f->tag, sizeof f->tag, "cl%ld-r%u-%s%d%s", (long)getpid(), round,
           shared ? "s" : "q", n, k1 ? "k1" : "");
  /* A prefix per configuration: each one's segments and sessions apart. */
  snprintf(f->obj, sizeof f->obj, "%s/%s", getenv("GENTRACE_OBJECTS"), f->tag);
  for (int i = 0; i < n; i++)
    if (fleet_start_one(f, i) < 0)
      return -1;
  return 0;
}

static void fleet_stop(fleet *f) {
  for (int i = 0; i <= MAXD; i++)
    if (f->d[i].pid > 0) {
      gtd_stop(&f->d[i]);
      gtd_cleanup(&f->d[i]);
      f->d[i].pid = 0;
    }
}

static double fleet_cpu(const fleet *f) {
  double s = 0;
  for (int i = 0; i < f->n; i++)
    s += gtd_proc_cpu_s(f->d[i].pid);
  return s;
}

/* ------------------------------------------- PostgreSQL and Swift's CPU */

/* utime + stime (+ cutime + cstime with kids) of pid, and its ppid. */
static double stat_cpu(pid_t pid, int kids, pid_t *ppid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  char *ok = fgets(line, sizeof line, f);
  fclose(f);
  char *p = ok ? strrchr(line, ')') : NULL;
  int pp = 0;
  unsigned long ut, st;
  long cut, cst;
  if (p == NULL || sscanf(p + 2,
                          "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu "
                          "%ld %ld",
                          &pp, &ut, &st, &cut, &cst) != 5)
    return 0;
  if (ppid)
    *ppid = pp;
  double t = (double)(ut + st) + (kids ? (double)(cut + cst) : 0);
  return t / (double)sysconf(_SC_CLK_TCK);
}

static pid_t pid_file(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/pid.%s", dir, name);
  FILE *f = fopen(path, "r");
  int pid = 0;
  if (f != NULL) {
    if (fscanf(f, "%d", &pid) != 1)
      pid = 0;
    fclose(f);
  }
  return pid;
}

/* CPU seconds so far of PostgreSQL (the postmaster, its live children and
 * those it reaped) and of Swift's servers and memcached. */
static void cluster_cpu(double *pg, double *s3) {
  const char *dir = getenv("GENTRACE_CLUSTER_DIR");
  *pg = *s3 = 0;
  if (dir == NULL)
    return;
  static const char *const swift[] = {"swift-proxy", "swift-object",
                                      "swift-container", "swift-account",
                                      "memcached"};
  for (size_t i = 0; i < sizeof swift / sizeof *swift; i++) {
    pid_t p = pid_file(dir, swift[i]);
    if (p > 0)
      *s3 += stat_cpu(p, 1, NULL);
  }
  pid_t pm = pid_file(dir, "pg");
  if (pm <= 0)
    return;
  *pg = stat_cpu(pm, 1, NULL);
  /* The backends: children of the postmaster (scan /proc for them). */
  char cmd[64];
  snprintf(cmd, sizeof cmd, "ps -o pid= --ppid %d", (int)pm);
  FILE *ps = popen(cmd, "r");
  int kid;
  while (ps != NULL && fscanf(ps, "%d", &kid) == 1)
    *pg += stat_cpu(kid, 0, NULL);
  if (ps != NULL)
    pclose(ps);
}

static double children_cpu(void) {
  struct rusage u;
  getrusage(RUSAGE_CHILDREN, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* ------------------------------------------------------------------ B1 */

/* B1 sessions, each with the wall time its first generation began (ns). */
typedef struct sessions {
  char id[MAXSESS][33];
  int64_t t0[MAXSESS];
  int n;
} sessions;

typedef struct trial {
  double daemons, pg, s3, agents, wall; /* CPU s over the trial; wall s */
  double elapsed; /* the slowest agent thread's time to emit its share */
  uint64_t written;
} trial;

/* The start (wall ns) of session id's first stored generation, or dflt. */
static int64_t first_gen_ns(gtd *d, const char *id, int64_t dflt) {
  char path[160];
  snprintf(path, sizeof path, "/v1/agents/%s/generations?limit=1", id);
  int status = 0;
  char *body = gtd_http_get(d, path, &status);
  const char *s =
      body != NULL && status == 200 ? strstr(body, "\"start_ns\":\"") : NULL;
  int64_t v = s != NULL ? strtoll(s + 12, NULL, 10) : dflt;
  free(body);
  return v;
}

/* Sums "events" and "lost" over /v1/agents?service=svc on d, notes the
 * session ids; the number of sessions, or -1. */
static int api_count(gtd *d, const char *svc, int64_t *events, int64_t *lost,
                     sessions *ss, int64_t t0) {
  char path[160];
  snprintf(path, sizeof path, "/v1/agents?service=%s", svc);
  int status = 0;
  char *body = gtd_http_get(d, path, &status);
  *events = *lost = 0;
  if (body == NULL || status != 200) {
    free(body);
    return -1;
  }
  int n = 0;
  for (char *p = strstr(body, "\"session\":\""); p != NULL;
       p = strstr(p + 1, "\"session\":\"")) {
    char *e = strstr(p, "\"events\":"), *l = strstr(p, "\"lost\":");
    if (e == NULL || l == NULL)
      break;
    *events += strtoll(e + 9, NULL, 10);
    *lost += strtoll(l + 7, NULL, 10);
    if (ss != NULL && ss->n < MAXSESS) {
      int k = ss->n++;
      memcpy(ss->id[k], p + 11, 32);
      ss->id[k][32] = '\0';
      ss->t0[k] = first_gen_ns(d, ss->id[k], t0);
    }
    n++;
  }
  free(body);
  return n;
}

/* One trial at `rate` in all: 1 zero loss, 2 zero loss but the agents fell
 * behind their pace (their CPU is the limit), 0 loss, -1 failed to run. */
static int b1_trial(fleet *f, const opts *o, double rate, int idx, trial *t,
                    sessions *ss, const char *period_ms) {
  char svc[96];
  snprintf(svc, sizeof svc, "%s-t%d", f->tag, idx);
  int p[2];
  if (pipe(p) < 0)
    return -1;
  pid_t kids[256];
  unsigned na = o->agents < 256 ? o->agents : 256;
  double d0 = fleet_cpu(f), a0 = children_cpu(), pg0, s30, t0 = now_s();
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t wall0 = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
  cluster_cpu(&pg0, &s30);
  int64_t c0[MAXD];
  for (int i = 0; i < f->n; i++)
    c0[i] = gtd_metric(&f->d[i], "gentrace_generations_committed_total");
  for (unsigned a = 0; a < na; a++) {
    /* The failover list rotated by a: agent a starts on daemon a % n. */
    char addr[256];
    size_t len = 0;
    for (int k = 0; k < f->n; k++)
      len += (size_t)snprintf(
          addr + len, sizeof addr - len, "%s127.0.0.1:%u", k ? "," : "",
          f->d[(a + (unsigned)k) % (unsigned)f->n].agent_port);
    kids[a] = fork();
    if (kids[a] == 0) {
      close(p[0]);
      if (period_ms != NULL)
        setenv("GENTRACE_PERIOD_MS", period_ms, 1);
      _exit(b1_agent_run(addr, svc, rate / na, o->threads, o->seconds, p[1], -1,
                         -1));
    }
  }
  close(p[1]);
  unsigned long long written = 0, dropped = 0, w, dr;
  double el, elapsed = 0;
  unsigned lines = 0;
  FILE *in = fdopen(p[0], "r");
  while (in != NULL && fscanf(in, "%llu %llu %lf %*s", &w, &dr, &el) == 3) {
    written += w;
    dropped += dr;
    elapsed = el > elapsed ? el : elapsed;
    lines++;
  }
  if (in != NULL)
    fclose(in);
  for (unsigned a = 0; a < na; a++)
    if (kids[a] > 0)
      waitpid(kids[a], NULL, 0);
  t->wall = now_s() - t0;
  t->daemons = fleet_cpu(f) - d0;
  t->agents = children_cpu() - a0;
  cluster_cpu(&t->pg, &t->s3);
  t->pg -= pg0;
  t->s3 -= s30;
  t->written = written;
  t->elapsed = elapsed;
  if (lines != na)
    return -1;
  int64_t stored, lost;
  /* Read through a daemon other than the first: any daemon serves all. */
  int nsess = api_count(&f->d[f->n - 1], svc, &stored, &lost, ss, wall0);
  char share[96] = "";
  for (int i = 0, len = 0; i < f->n && f->n > 1; i++)
    len += snprintf(
        share + len, sizeof share - (size_t)len, "%s%" PRId64,
        i ? "/" : " gens per daemon ",
        gtd_metric(&f->d[i], "gentrace_generations_committed_total") - c0[i]);
  int ok = nsess == (int)na && dropped == 0 && lost == 0 &&
           stored == (int64_t)written;
  int behind = elapsed > 1.2 * o->seconds;
  fprintf(stderr,
          "bench_cluster: %s %.2f M/s: written %llu stored %" PRId64
          " sessions %d dropped %llu lost %" PRId64 " elapsed %.2fs%s -> %s\n",
          f->tag, rate / 1e6, written, stored, nsess, dropped, lost, elapsed,
          share,
          !ok      ? "LOSS"
          : behind ? "zero loss, agents behind"
                   : "zero loss");
  return ok && behind ? 2 : ok;
}

typedef struct b1res {
  double good;     /* delivered events/s of the best zero-loss trial */
  int agent_limit; /* that trial's agents fell behind their pace */
  trial at;        /* the trial at `good` */
} b1res;

static int b1_ladder(fleet *f, const opts *o, b1res *r) {
  double rate = o->start_rate, good = 0, bad = 0;
  int idx = 0;
  memset(r, 0, sizeof *r);
  for (int steps = 0; steps < 12; steps++) {
    trial t;
    int rc = b1_trial(f, o, rate, idx++, &t, NULL, NULL);
    if (rc < 0)
      return -1;
    if (rc >= 1) {
      /* Delivered: the events over the time the agents took to emit
       * them. Under load the scheduler makes agents late at any rate, so a
       * late trial does not end the ladder; it counts at its real rate. */
      double got =
          (double)t.written / (t.elapsed > o->seconds ? t.elapsed : o->seconds);
      good = rate;
      if (got > r->good) {
        r->good = got;
        r->at = t;
        r->agent_limit = rc == 2;
      }
    } else {
      bad = rate;
    }
    if (o->smoke)
      break;
    if (bad == 0)
      rate *= 2;
    else if (good == 0)
      rate /= 4; /* the first rate lost already: step down */
    else if (idx >= 12 || bad - good <= good / 8)
      break;
    else
      rate = (good + bad) / 2;
    if (bad > 0 && good == 0 && rate < 1000)
      break;
  }
  return 0;
}

/* ------------------------------------------------------------------ C1 */

typedef struct c1conn {
  gtc c;
  gtc_gen *gens;
  size_t ngens;
  size_t acked;
  int rc;
  pthread_t th;
} c1conn;

static void *c1_send(void *arg) {
  c1conn *k = arg;
  size_t sent = 0;
  k->rc = 0;
  while (k->acked < k->ngens) {
    if (sent < k->ngens && sent - k->acked < C1_WINDOW) {
      if ((k->rc = gtc_send_gen(&k->c, &k->gens[sent])) < 0)
        return NULL;
      sent++;
      continue;
    }
    uint64_t gen;
    int code = 0;
    int r = gtc_read_reply(&k->c, &gen, &code, 60000);
    if (r != 1) {
      k->rc = r == 2 ? code : -1;
      return NULL;
    }
    k->acked++;
  }
  return NULL;
}

/* MiB/s ACKed over f's daemons, mib in all; -1 on a failure. *cpu: the
 * CPU seconds over the run (daemons, pg, s3; agents = this process). */
static double c1_run(fleet *f, size_t mib, unsigned round, trial *cpu) {
  c1conn k[MAXD];
  memset(k, 0, sizeof k);
  size_t per = mib / (size_t)f->n ? mib / (size_t)f->n : 1, bytes = 0;
  double rate = -1;
  for (int i = 0; i < f->n; i++) {
    gtf_spec s;
    gtf_spec_init(&s, 900 + (unsigned)i, 1);
    /* New sessions in every configuration and run: the catalog is shared. */
    uint32_t salt = (uint32_t)getpid() ^ (round << 20) ^
                    ((uint32_t)f->n << 16) ^ ((uint32_t)f->shared << 24);
    memcpy(s.session + 8, &salt, sizeof salt);
    k[i].gens = calloc(per, sizeof *k[i].gens);
    if (k[i].gens == NULL)
      goto out;
    for (size_t g = 0; g < per; g++) {
      s.gen = g + 1;
      if (gtc_gen_build_random(&k[i].gens[g], &s, 15,
                               (unsigned)(g * 7919u + (unsigned)i)) < 0)
        goto out;
      k[i].ngens++;
      bytes += k[i].gens[g].body.len;
    }
    gtp_welcome w;
    s.gen = 1;
    if (gtc_connect(&k[i].c, f->d[i].agent_port) < 0 ||
        gtc_hello(&k[i].c, &s, NULL, &w) != 0) {
      fprintf(stderr, "bench_cluster: C1 handshake with daemon %d failed\n", i);
      goto out;
    }
  }
  double t0 = now_s(), d0 = fleet_cpu(f), me0, pg0, s30;
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  me0 = (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
        (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  cluster_cpu(&pg0, &s30);
  for (int i = 0; i < f->n; i++)
    pthread_create(&k[i].th, NULL, c1_send, &k[i]);
  int failed = 0;
  for (int i = 0; i < f->n; i++) {
    pthread_join(k[i].th, NULL);
    failed |= k[i].rc < 0 || k[i].acked != k[i].ngens;
  }
  double el = now_s() - t0;
  cpu->wall = el;
  cpu->daemons = fleet_cpu(f) - d0;
  cluster_cpu(&cpu->pg, &cpu->s3);
  cpu->pg -= pg0;
  cpu->s3 -= s30;
  getrusage(RUSAGE_SELF, &u);
  cpu->agents = (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6 - me0;
  cpu->written = bytes;
  if (failed)
    fprintf(stderr, "bench_cluster: C1 on %s: not every generation ACKed\n",
            f->tag);
  else
    rate = (double)bytes / (1 << 20) / el;
  /* Retried requests (a slow run is often the servers refusing under
   * load, then backoff): the daemons' S3 PUT and catalog errors so far. */
  int64_t put_err = 0, pg_err = 0;
  for (int i = 0; f->shared && i < f->n; i++) {
    put_err +=
        gtd_metric(&f->d[i], "gentrace_shared_s3_errors_total{op=\"put\"}");
    pg_err += gtd_metric(
        &f->d[i], "gentrace_shared_pg_errors_total{kind=\"unavailable\"}");
  }
  fprintf(stderr,
          "bench_cluster: C1 %s: %.1f MiB in %.2f s (daemons so far: S3 PUT "
          "errors %" PRId64 ", catalog unavailable %" PRId64 ")\n",
          f->tag, (double)bytes / (1 << 20), el, put_err, pg_err);
out:
  for (int i = 0; i < f->n; i++) {
    if (k[i].c.fd > 0)
      gtc_close(&k[i].c);
    for (size_t g = 0; g < k[i].ngens; g++)
      gtc_gen_fini(&k[i].gens[g]);
    free(k[i].gens);
  }
  return rate;
}

/* -------------------------------------------------------------- windows */

/* GET path from port, reading the whole answer: its wall ms, or -1 unless
 * the status is 200 with at least one generation. */
static double fetch_ms(uint16_t port, const char *path, size_t *bytes) {
  gtc c;
  double t0 = now_s();
  if (gtc_connect(&c, port) < 0)
    return -1;
  char req[256];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Connection: close\r\n\r\n",
                   path);
  struct timeval tv = {GTC_TIMEOUT_MS / 1000, 0};
  setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char head[4096];
  size_t hl = 0, total = 0;
  ssize_t r = 0;
  if (gtc_send_raw(&c, req, (size_t)n) < 0) {
    gtc_close(&c);
    return -1;
  }
  static char sink[1 << 16];
  while ((r = recv(c.fd, hl < sizeof head - 1 ? head + hl : sink,
                   hl < sizeof head - 1 ? sizeof head - 1 - hl : sizeof sink,
                   0)) > 0) {
    if (hl < sizeof head - 1)
      hl += (size_t)r;
    total += (size_t)r;
  }
  gtc_close(&c);
  double ms = (now_s() - t0) * 1000;
  head[hl] = '\0';
  const char *g = strstr(head, "X-Gentrace-Generations: ");
  *bytes = total;
  if (r < 0 || strncmp(head, "HTTP/1.1 200", 12) != 0 || g == NULL ||
      atoi(g + 24) < 1)
    return -1;
  return ms;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  if (n == 0)
    return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

typedef struct winres {
  double cold50, cold99, warm50, warm99, mb; /* ms; MB per window */
  int n, bad;
} winres;

/* WIN_PER windows of WIN_MS of each session from `port`, all cold, then
 * all again warm. */
static void windows(uint16_t port, const sessions *ss, winres *w) {
  static double cold[MAXSESS * WIN_PER], warm[MAXSESS * WIN_PER];
  size_t bytes = 0, b;
  int nw = 0;
  memset(w, 0, sizeof *w);
  for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < ss->n * WIN_PER; j++) {
      int i = j % ss->n, k = j / ss->n;
      char path[128];
      /* WIN_MS from WIN_MS/2 + k * WIN_MS after the session's first
       * generation began: the two generations overlapping it. */
      int64_t from = ss->t0[i] + (int64_t)(2 * k + 1) * WIN_MS * 500000;
      snprintf(path, sizeof path,
               "/v1/trace?session=%s&from=%" PRId64 "ns&to=%" PRId64 "ns",
               ss->id[i], from, from + (int64_t)WIN_MS * 1000000);
      double ms = fetch_ms(port, path, &b);
      if (ms < 0) {
        w->bad++;
        continue;
      }
      if (pass == 0) {
        cold[w->n++] = ms;
        bytes += b;
      } else {
        warm[nw++] = ms;
      }
    }
  w->mb = w->n ? (double)bytes / w->n / 1e6 : 0;
  w->cold50 = pct(cold, w->n, 0.5);
  w->cold99 = pct(cold, w->n, 0.99);
  w->warm50 = pct(warm, nw, 0.5);
  w->warm99 = pct(warm, nw, 0.99);
}

/* --------------------------------------------------------------- a run */

typedef struct cfgres {
  double b1, c1;
  int agent_limit;
  trial at, c1cpu;
  winres win;
  int ok;
} cfgres;

/* One configuration: n daemons (shared) or SQLite (n = 1, shared = 0). */
static int run_config(const opts *o, int n, int shared, int k1, unsigned round,
                      cfgres *out) {
  fleet f;
  static sessions ss;
  memset(out, 0, sizeof *out);
  ss.n = 0;
  int rc = -1;
  if (fleet_start(&f, n, shared, k1, round) < 0)
    goto done;
  if (o->c1_only) {
    out->c1 = c1_run(&f, o->c1_mib, round, &out->c1cpu);
    out->ok = out->c1 > 0;
    rc = 0;
    goto done;
  }
  b1res r;
  if (b1_ladder(&f, o, &r) < 0)
    goto done;
  /* The sessions to read: one more trial at a fixed rate, the same for
   * every configuration, with WIN_MS generations. */
  trial wt;
  opts wo = *o;
  wo.seconds = WIN_MS * (WIN_PER + 3) / 1000.0; /* covers every window */
  if (b1_trial(&f, &wo, o->window_rate, 99, &wt, &ss, WIN_PERIOD) < 1)
    fprintf(stderr, "bench_cluster: %s: the window trial lost events\n", f.tag);
  out->b1 = r.good;
  out->agent_limit = r.agent_limit;
  out->at = r.at;
  out->c1 = c1_run(&f, o->c1_mib, round, &out->c1cpu);
  uint16_t port = f.d[0].http_port;
  if (shared) {
    /* A fresh daemon that ingested nothing and cached nothing. */
    f.n++;
    if (fleet_start_one(&f, n) < 0)
      goto done;
    f.n--;
    port = f.d[n].http_port;
  }
  windows(port, &ss, &out->win);
  out->ok = out->b1 > 0 && out->c1 > 0 && out->win.bad == 0 && out->win.n > 0;
  if (out->win.bad)
    fprintf(stderr, "bench_cluster: %s: %d window fetches failed\n", f.tag,
            out->win.bad);
  rc = 0;
done:
  fleet_stop(&f);
  return rc;
}

static double median(double *v, unsigned n) {
  double c[64];
  memcpy(c, v, n * sizeof *v);
  return pct(c, (int)n, 0.5);
}

static void usage(void) {
  fprintf(stderr, "usage: bench_cluster [--agents A] [--threads T] "
                  "[--seconds S] [--reps R] [--c1-mib M] [--daemons MAX] "
                  "[--start RATE] [--window-rate RATE] [--uploads-baseline] "
                  "[--c1-only] [--smoke]\n");
}

int main(int argc, char **argv) {
  opts o = {6, 1, 3, MAXD, 2, 1e6, 6e5, 192, 0, 0, 0};
  const bench_opt table[] = {{"--smoke", BENCH_FLAG, &o.smoke},
                             {"--c1-only", BENCH_FLAG, &o.c1_only},
                             {"--uploads-baseline", BENCH_FLAG, &o.k1},
                             {"--agents", BENCH_UNSIGNED, &o.agents},
                             {"--threads", BENCH_UNSIGNED, &o.threads},
                             {"--seconds", BENCH_DOUBLE, &o.seconds},
                             {"--reps", BENCH_UNSIGNED, &o.reps},
                             {"--c1-mib", BENCH_SIZE, &o.c1_mib},
                             {"--daemons", BENCH_UNSIGNED, &o.maxd},
                             {"--start", BENCH_DOUBLE, &o.start_rate},
                             {"--window-rate", BENCH_DOUBLE, &o.window_rate}};
  if (bench_opts_parse(argc, argv, 1, table, sizeof table / sizeof *table)) {
    usage();
    return 2;
  }
  if (o.smoke) {
    o.reps = 1;
    o.seconds = 0.5;
    o.start_rate = 20000;
    o.window_rate = 20000;
    o.c1_mib = o.c1_mib < 6 ? o.c1_mib : 6;
  }
  if (o.agents < 1 || o.agents > 256 || o.threads < 1 || o.threads > 64 ||
      o.reps < 1 || o.reps > 64 || o.maxd < 1 || o.maxd > MAXD ||
      o.seconds <= 0 || o.c1_mib < 1) {
    usage();
    return 2;
  }
  if (getenv("GENTRACE_CATALOG") == NULL ||
      getenv("GENTRACE_OBJECTS") == NULL) {
    fprintf(stderr, "bench_cluster: needs scripts/cluster-up's environment "
                    "(make bench-cluster starts one)\n");
    return 2;
  }
  double la[3] = {0};
  getloadavg(la, 3);
  printf("# bench_cluster: agents=%u threads=%u seconds=%.1f reps=%u "
         "c1=%zuMiB load average %.1f %.1f %.1f\n",
         o.agents, o.threads, o.seconds, o.reps, o.c1_mib, la[0], la[1], la[2]);
  /* [0] SQLite, [n] n shared daemons, [maxd + 1] shared-1-k1 (with
   * --uploads-baseline); per round. */
  static cfgres res[64][MAXD + 2];
  unsigned ncfg = o.maxd + (o.k1 ? 1 : 0);
  int failures = 0;
  for (unsigned r = 0; r < o.reps; r++)
    for (unsigned n = 0; n <= ncfg; n++) {
      cfgres *c = &res[r][n];
      int k1 = n > o.maxd;
      if (run_config(&o, n && !k1 ? (int)n : 1, n > 0, k1, r, c) < 0 || !c->ok)
        failures++;
      trial *t = &c->at;
      char name[16];
      snprintf(name, sizeof name,
               k1  ? "shared-1-k1"
               : n ? "shared-%u"
                   : "sqlite",
               n);
      double ev = c->b1 * o.seconds / 1e6;
      printf(
          "# round %u %-8s B1 %9.0f ev/s  C1 %6.1f MiB/s  CPU s/Mev "
          "daemons %.3f pg %.3f s3 %.3f agents %.3f  busy %3.0f%%  "
          "window cold p50/p99 %.1f/%.1f warm %.1f/%.1f ms (%d, %.2f MB)%s\n",
          r + 1, name, c->b1, c->c1, ev > 0 ? t->daemons / ev : 0,
          ev > 0 ? t->pg / ev : 0, ev > 0 ? t->s3 / ev : 0,
          ev > 0 ? t->agents / ev : 0,
          t->wall > 0 ? 100 * (t->daemons + t->pg + t->s3 + t->agents) / t->wall
                      : 0,
          c->win.cold50, c->win.cold99, c->win.warm50, c->win.warm99, c->win.n,
          c->win.mb, c->agent_limit ? " limit=agent-cpu" : "");
      trial *u = &c->c1cpu;
      double gib = (double)u->written / (1u << 30);
      printf("# round %u %-8s C1 CPU s/GiB daemons %.2f pg %.2f s3 %.2f "
             "sender %.2f  busy %3.0f%%\n",
             r + 1, name, gib > 0 ? u->daemons / gib : 0,
             gib > 0 ? u->pg / gib : 0, gib > 0 ? u->s3 / gib : 0,
             gib > 0 ? u->agents / gib : 0,
             u->wall > 0
                 ? 100 * (u->daemons + u->pg + u->s3 + u->agents) / u->wall
                 : 0);
      fflush(stdout);
    }
  /* Medians over the rounds, per configuration. */
  double m[MAXD + 2][14];
  for (unsigned n = 0; n <= ncfg; n++) {
    double v[14][64];
    for (unsigned r = 0; r < o.reps; r++) {
      cfgres *c = &res[r][n];
      double ev = c->b1 * o.seconds / 1e6;
      double mib = (double)c->c1cpu.written / (1 << 20);
      double x[14] = {
          c->b1,
          c->c1,
          ev > 0 ? c->at.daemons / ev : 0,
          ev > 0 ? c->at.pg / ev : 0,
          ev > 0 ? c->at.s3 / ev : 0,
          ev > 0 ? c->at.agents / ev : 0,
          c->at.wall > 0
              ? 100 * (c->at.daemons + c->at.pg + c->at.s3 + c->at.agents) /
                    c->at.wall
              : 0,
          c->win.cold50,
          c->win.cold99,
          c->win.warm50,
          c->win.warm99,
          c->c1cpu.wall > 0 ? 100 *
                                  (c->c1cpu.daemons + c->c1cpu.pg +
                                   c->c1cpu.s3 + c->c1cpu.agents) /
                                  c->c1cpu.wall
                            : 0,
          c->c1cpu.daemons > 0 ? mib / c->c1cpu.daemons : 0,
          c->c1cpu.daemons + c->c1cpu.pg + c->c1cpu.s3 > 0
              ? mib / (c->c1cpu.daemons + c->c1cpu.pg + c->c1cpu.s3)
              : 0};
      for (int k = 0; k < 14; k++)
        v[k][r] = x[k];
    }
    for (int k = 0; k < 14; k++)
      m[n][k] = median(v[k], o.reps);
  }
  const char *med = o.reps > 1 ? "median" : "one-run";
  for (unsigned n = 1; n <= ncfg; n++) {
    char nm[16];
    unsigned nd = n > o.maxd ? 1 : n;
    snprintf(nm, sizeof nm, n > o.maxd ? "1-k1" : "%u", n);
    double q = m[0][0], s = m[n][0];
    /* Rounds whose best trial's agents fell behind their pace (the
     * figure is then the rate they delivered, late). */
    unsigned lim = 0, limq = 0;
    for (unsigned r = 0; r < o.reps; r++)
      lim += res[r][n].agent_limit, limq += res[r][0].agent_limit;
    if (o.c1_only)
      goto c1;
    printf("BENCH id=B1-shared-%s value=%.0f unit=events/s(zero-loss,%s,"
           "agents=%u,threads=%u,daemons=%u,agent-limited=%u/%u,"
           "sqlite-agent-limited=%u/%u) baseline=sqlite:%.0f ratio=%.2f "
           "bar=0.50 pass=%d\n",
           nm, s, med, o.agents, o.threads, nd, lim, o.reps, limq, o.reps, q,
           q > 0 ? s / q : 0, q > 0 && s >= q / 2);
    printf("BENCH id=B1-shared-%s_cpu value=%.3f unit=cpu-s/Mevents(daemons,"
           "pg=%.3f,s3=%.3f,agents=%.3f,busy=%.0f%%) baseline=sqlite:%.3f "
           "ratio=%.2f bar=none pass=1\n",
           nm, m[n][2], m[n][3], m[n][4], m[n][5], m[n][6], m[0][2],
           m[0][2] > 0 ? m[n][2] / m[0][2] : 0);
    static const char *const wn[] = {"cold_p50", "cold_p99", "warm_p50",
                                     "warm_p99"};
    for (int k = 0; k < 4; k++)
      printf("BENCH id=window-other-daemon-%s_%s value=%.1f unit=ms(%s,"
             "session-window) baseline=sqlite:%.1f ratio=%.2f bar=none "
             "pass=1\n",
             nm, wn[k], m[n][7 + k], med, m[0][7 + k],
             m[0][7 + k] > 0 ? m[n][7 + k] / m[0][7 + k] : 0);
  c1:
    q = m[0][1], s = m[n][1];
    printf("BENCH id=C1-shared-%s value=%.1f unit=MiB/s(acked,%s,daemons=%u,"
           "busy=%.0f%%,sqlite-busy=%.0f%%) baseline=sqlite:%.1f ratio=%.2f "
           "bar=0.50 pass=%d\n",
           nm, s, med, nd, m[n][11], m[0][11], q, q > 0 ? s / q : 0,
           q > 0 && s >= q / 2);
    /* Per daemon CPU-second: the figure that a loaded machine moves
     * least (its own CPU, not the wall clock). */
    printf("BENCH id=C1-shared-%s_per_cpu value=%.1f unit=MiB/daemon-cpu-s"
           "(%s,all-servers=%.1f) baseline=sqlite:%.1f ratio=%.2f bar=none "
           "pass=1\n",
           nm, m[n][12], med, m[n][13], m[0][12],
           m[0][12] > 0 ? m[n][12] / m[0][12] : 0);
  }
  if (failures)
    fprintf(stderr, "bench_cluster: %d configuration run(s) failed\n",
            failures);
  return failures ? 1 : 0;
}
