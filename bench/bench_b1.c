/* bench_b1: B1, the highest paced event rate that reaches committed rows
 * with zero loss: N agents (processes, each the real libgentrace) with T
 * threads each call gt_counter at a fixed total rate for a few seconds into
 * the real gentraced; a rate passes when nothing was dropped, evicted or
 * rejected and the events stored in SQLite equal the events written. Rates
 * double until one loses events, then a binary search narrows the edge.
 * There is no ceiling: the ladder stops only at the first loss, or when the
 * agents themselves cannot emit the rate (their threads fell behind the
 * pace: the agents' CPU is the limit, and the line says so). A trial that
 * fell behind does not pass (its events took longer than the trial, so the
 * rate was not reached): the edge is searched between the last trial that
 * passed and it, as for lttng-relayd's trials (bench/lttng.sh), where a
 * late emitter fails too.
 *
 *   bench_b1 [--agents N] [--threads T] [--seconds S] [--lttng RATE]
 *            [--profile] [--id NAME] [--start RATE] [--above RATE]
 *            [--bisect K] [--rate RATE]
 *   bench_b1 THREADS SECONDS [LTTNG_RATE]        (one agent, as before)
 *
 * Reported: the highest zero-loss rate and the first lossy one, the
 * daemon's CPU seconds per million events at the highest zero-loss rate
 * (utime + stime of /proc/PID/stat over the trial, the agents' flush
 * included), and with --profile the share of the daemon's samples (perf
 * record on it during one more trial at that rate) in frame and event
 * decoding, CRC-32C, reassembly (reasm and copies), compression (zstd),
 * SQLite and the kernel.
 *
 * GENTRACE_BUFFER_MB, GENTRACE_PERIOD_MS and GENTRACE_SPOOL_MB set the
 * agent's buffer pool, generation period and spool (defaults 16, 1000, 64).
 *
 * With BENCH_B1_SHARED=1 and the environment of scripts/cluster-up (make
 * bench-b1-shared), the same search runs again against a gentraced on the
 * shared store (PostgreSQL catalog + S3 segments, --segment-max-age from
 * BENCH_B1_SEGMENT_AGE, default the daemon's 2s), counted in the catalog,
 * and a line `BENCH id=<ID>-shared` gives its rate beside this run's
 * SQLite rate (BENCH_B1_SHARED=only: the shared run alone, for profiles).
 *
 * The baseline is lttng-relayd's highest zero-loss rate on the same
 * workload (two integers per event), passed with --lttng from a
 * measurement in the same run (bench/quick measures it), or the line says
 * baseline=lttng-relayd:n/a. This process starts gentraced on 127.0.0.1
 * port 0 and stops it by PID.
 *
 * BENCH_B1_SUMMARY=ab: instead, what summarizing at commit costs (goal
 * <= 5% of B1), in one run on SQLite with the same agents and threads: B1
 * is searched ROUNDS times (default 2, BENCH_B1_ROUNDS) with gentraced
 * summarizing and as often without (GENTRACE_BENCH_NO_SUMMARY in its
 * environment, benchmark-only), alternating, best of each kept; then one
 * trial of each at half the lower edge measures gentraced's CPU time per
 * stored event (gtd_proc_cpu_s over the trial, 10 ms ticks). Prints
 * B1_summary (edge with / without) and B1_summary_cpu (daemon CPU per event
 * with / without; -1 when that trial lost events). BENCH_B1_CPU_RATE=R
 * skips the edges and compares the CPU at R events/s in all (a loaded
 * machine moves the edges by more than the effect).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "b1_agent.h"
#include "bench_env.h"
#include "client.h"

static int64_t stored_events(const char *db, const char *service,
                             int64_t *lost) {
  sqlite3 *h;
  sqlite3_stmt *q;
  int64_t v = -1;
  *lost = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return -1;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(
          h,
          "SELECT coalesce(sum(g.events),0),"
          " coalesce(sum(g.dropped+g.evicted+g.rejected),0),"
          " coalesce(sum(g.evicted),0), coalesce(max(s.rejected_events),0)"
          " FROM generations g JOIN sessions s"
          " ON s.id = g.session_id WHERE s.service = ?",
          -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, service, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) {
      v = sqlite3_column_int64(q, 0);
      *lost = sqlite3_column_int64(q, 1);
      fprintf(stderr, "bench: ledger: evicted %lld, daemon-rejected %lld\n",
              (long long)sqlite3_column_int64(q, 2),
              (long long)sqlite3_column_int64(q, 3));
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(h);
  return v;
}

/* The same counts from the shared store's catalog. */
static int64_t stored_events_pg(const char *uri, const char *service,
                                int64_t *lost) {
  *lost = -1;
  PGconn *c = PQconnectdb(uri);
  const char *p[] = {service};
  PGresult *r = PQexecParams(
      c,
      "SELECT coalesce(sum(g.events),0), coalesce(sum(g.dropped+g.evicted+"
      "g.rejected),0) FROM gt_generations g JOIN gt_sessions s"
      " ON s.id = g.session_id WHERE s.service = $1",
      1, NULL, p, NULL, NULL, 0);
  int64_t v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    *lost = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
  }
  PQclear(r);
  PQfinish(c);
  return v;
}

/* The shared run's catalog (NULL: the SQLite run). */
static const char *b1_catalog;

typedef struct b1opts {
  unsigned agents, threads;
  double seconds, lttng;
  int profile;
  const char *id;
  const char *const *env; /* gentraced's extra environment, or NULL */
  double fixed;           /* > 0: one trial at this rate, no ladder */
  double start, above;    /* the search's first rate and next step up */
  unsigned bisect;        /* bisections after the bracket */
} b1opts;

enum { T_ERR = -1, T_LOSS = 0, T_OK = 1, T_AGENT = 2 };

static double b1_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One trial at `rate` events/s in total over o->agents processes: T_OK
 * (zero loss), T_LOSS, T_AGENT (no loss, but the agents could not emit the
 * rate: their CPU is the limit) or T_ERR. *cpu: the daemon's CPU seconds
 * over the trial, *reached: the events emitted over max(elapsed, seconds). */
static int run_trial(gtd *d, const char *addr, double rate, const b1opts *o,
                     int idx, double *cpu, double *reached) {
  *reached = 0;
  char service[64];
  snprintf(service, sizeof service, "b1-%ld-%d", (long)getpid(), idx);
  int p[2];
  if (pipe(p) < 0)
    return T_ERR;
  double cpu0 = gtd_proc_cpu_s(d->pid);
  double t_fork = b1_now_s();
  pid_t *kids = calloc(o->agents, sizeof *kids);
  if (kids == NULL)
    return T_ERR;
  /* More than one agent: the start barrier (b1_agent.h). Every child
   * writes a byte into rd once connected; the threads start when go's
   * write end, held here alone, closes. */
  int rd[2] = {-1, -1}, go[2] = {-1, -1};
  if (o->agents > 1 && (pipe(rd) < 0 || pipe(go) < 0)) {
    free(kids);
    return T_ERR;
  }
  for (unsigned a = 0; a < o->agents; a++) {
    pid_t pid = fork();
    if (pid < 0)
      break;
    kids[a] = pid;
    if (pid == 0) {
      close(p[0]);
      if (rd[0] >= 0) {
        close(rd[0]);
        close(go[1]);
      }
      _exit(b1_agent_run(addr, service, rate / o->agents, o->threads,
                         o->seconds, p[1], rd[1], go[0]));
    }
  }
  close(p[1]);
  if (rd[0] >= 0) {
    close(rd[1]);
    close(go[0]);
    /* End of file once every child wrote its byte or died: no hang. */
    char buf[4096];
    unsigned ready = 0;
    ssize_t got;
    while (ready < o->agents && (got = read(rd[0], buf, sizeof buf)) != 0)
      if (got > 0)
        ready += (unsigned)got;
    double t_go = b1_now_s();
    close(go[1]);
    close(rd[0]);
    fprintf(stderr, "bench_b1: %u of %u agents ready in %.1f s\n", ready,
            o->agents, t_go - t_fork);
  }
  /* Each child writes one short line (atomic in a pipe); EOF once all
   * have exited. */
  unsigned long long written = 0, dropped = 0, emitted = 0;
  unsigned lines = 0;
  FILE *in = fdopen(p[0], "r");
  unsigned long long w, dr, em;
  double el, elapsed = 0;
  while (in != NULL &&
         fscanf(in, "%llu %llu %lf %llu", &w, &dr, &el, &em) == 4) {
    written += w;
    dropped += dr;
    emitted += em;
    if (el > elapsed)
      elapsed = el;
    lines++;
  }
  if (in != NULL)
    fclose(in);
  /* By pid: a perf recording (profile_trial) is a child too. */
  for (unsigned a = 0; a < o->agents; a++)
    if (kids[a] > 0)
      waitpid(kids[a], NULL, 0);
  free(kids);
  if (lines != o->agents)
    return T_ERR;
  int64_t lost;
  int64_t stored = b1_catalog ? stored_events_pg(b1_catalog, service, &lost)
                              : stored_events(d->db, service, &lost);
  *cpu = gtd_proc_cpu_s(d->pid) - cpu0;
  /* Every event the emitters made, counted by themselves, is in the
   * committed rows (relayd's trial: babeltrace2's count of what relayd
   * wrote equals lttng_bench's own count), and the agent saw each one. */
  int ok = dropped == 0 && lost == 0 && written == emitted &&
           stored == (int64_t)emitted;
  /* Every thread emits its share; one that cannot keep the pace takes
   * longer (as bench/quick's trials, 20% late is behind). */
  int behind = elapsed > 1.2 * o->seconds;
  /* The rate reached: events over the time the emitters took, never more
   * than asked (bench/lttng.sh's lt_rate, the same for relayd). A trial
   * up to 20% late passes, but it counts at the rate it reached. */
  *reached = emitted / (elapsed > o->seconds ? elapsed : o->seconds);
  fprintf(stderr,
          "bench_b1: agents=%u threads=%u rate %.2f M/s: emitted %llu "
          "written %llu stored %lld dropped %llu ledger %lld elapsed %.2fs "
          "(reached %.2f M/s) daemon-cpu %.2fs -> %s\n",
          o->agents, o->threads, rate / 1e6, emitted, written,
          (long long)stored, dropped, (long long)lost, elapsed,
          *reached / 1e6, *cpu,
          !ok      ? "LOSS"
          : behind ? "zero loss, but the agents fell behind the pace"
                   : "zero loss");
  return !ok ? T_LOSS : behind ? T_AGENT : T_OK;
}

/* Share of the daemon's perf samples by part of the ingest path, from
 * `perf report` over one trial. */
static void profile_trial(gtd *d, const char *addr, double rate,
                          const b1opts *o, int idx) {
  char data[400], cmd[600];
  snprintf(data, sizeof data, "%s/b1.perf", d->dir);
  char pidarg[32];
  snprintf(pidarg, sizeof pidarg, "%d", (int)d->pid);
  pid_t perf = fork();
  if (perf == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp("perf", "perf", "record", "-F", "997", "-p", pidarg, "-o", data,
           (char *)NULL);
    _exit(127);
  }
  if (perf < 0)
    return;
  /* perf needs a moment to attach (and to install its SIGINT handler). */
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  double cpu = 0, reached = 0;
  int r = run_trial(d, addr, rate, o, idx, &cpu, &reached);
  kill(perf, SIGINT);
  int st = 0;
  waitpid(perf, &st, 0);
  struct stat sb;
  if (r == T_ERR || stat(data, &sb) != 0 || sb.st_size == 0 ||
      (WIFEXITED(st) && WEXITSTATUS(st) == 127)) {
    fprintf(stderr, "bench_b1: profile: perf record did not run\n");
    return;
  }
  snprintf(cmd, sizeof cmd,
           "perf report -i %s --no-children --sort dso,sym --stdio -g none "
           "2>/dev/null",
           data);
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return;
  static const char *const part[] = {"decode", "crc",    "reassembly", "zstd",
                                     "sqlite", "kernel", "libc",       "other"};
  double share[8] = {0}, total = 0;
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    double pct;
    if (line[0] == '#' || sscanf(line, " %lf%%", &pct) != 1)
      continue;
    int k = 7;
    if (strstr(line, "[k]"))
      k = 5;
    else if (strstr(line, "crc32c") || strstr(line, " crc_"))
      k = 1;
    else if (strstr(line, "ZSTD") || strstr(line, "zstd"))
      k = 3;
    else if (strstr(line, "sqlite3") || strstr(line, "libsqlite"))
      k = 4;
    else if (strstr(line, "reasm") || strstr(line, "genbuf") ||
             strstr(line, "memmove") || strstr(line, "memcpy"))
      k = 2;
    else if (strstr(line, "gtp_") || strstr(line, "decode") ||
             strstr(line, "varint"))
      k = 0;
    else if (strstr(line, "libc"))
      k = 6;
    share[k] += pct;
    total += pct;
  }
  pclose(f);
  if (total <= 0)
    return;
  printf("B1_profile agents=%u threads=%u rate=%.0f", o->agents, o->threads,
         rate);
  for (int k = 0; k < 8; k++)
    printf(" %s=%.1f%%", part[k], 100 * share[k] / total);
  printf("\n");
}

typedef struct b1result {
  double good, bad, good_cpu; /* rates (events/s), daemon CPU s at good */
  double reached; /* the most events/s a zero-loss trial on time reached */
  int limit;      /* T_LOSS or T_AGENT */
} b1result;

/* The ladder and the search on a fresh gentraced (catalog NULL: SQLite,
 * else the shared store on catalog and $GENTRACE_OBJECTS; o->env added to
 * its environment). With o->fixed > 0 one trial at that rate instead: good
 * (zero loss) or bad is o->fixed, good_cpu its daemon CPU. 0, or -1 when
 * the daemon did not start or a trial failed to run. */
static int b1_search(const b1opts *o, const char *catalog, b1result *out) {
  /* gentraced on port 0 through tests/daemon/client.c, stopped by PID; every
   * agent connects from 127.0.0.1, so the per-address limit goes up. */
  gtd d;
  char addr[64];
  char obj[256];
  const char *age = getenv("BENCH_B1_SEGMENT_AGE");
  snprintf(obj, sizeof obj, "%s/b1-%ld",
           catalog ? getenv("GENTRACE_OBJECTS") : "", (long)getpid());
  const char *sqlite_args[] = {"--max-conns-per-ip", "100000", NULL};
  const char *shared_args[] = {"--max-conns-per-ip",
                               "100000",
                               "--catalog",
                               catalog,
                               "--objects",
                               obj,
                               "--segment-max-age",
                               age ? age : "2s",
                               NULL};
  b1_catalog = catalog;
  if (gtd_init(&d) < 0 ||
      gtd_start(&d, catalog ? shared_args : sqlite_args, o->env) < 0) {
    fprintf(stderr, "bench_b1: gentraced did not start\n");
    return -1;
  }
  fprintf(stderr, "bench_b1: on %s\n", catalog ? "the shared store" : "SQLite");
  snprintf(addr, sizeof addr, "127.0.0.1:%u", d.agent_port);
  /* Start at 1 M/s in all for a few agents; a fleet of many at 100,000
   * events/s in all (100 each for 1,000 agents, where the host runs out of
   * CPU), or at --start (a previous repeat's edge: bench/limit). From
   * there up (doubling, or first to --above, the previous repeat's first
   * failing rate) while trials pass, or down (halving) while they fail,
   * then o->bisect bisections between the last pass and the first failure.
   * bench/limit's lt_search walks the same steps for lttng-relayd. */
  double good = 0, bad = 0;
  double rate = o->start > 0 ? o->start : o->agents <= 8 ? 1e6 : 1e5;
  double good_cpu = 0, cpu = 0, reached = 0, best = 0;
  int idx = 0, limit = T_OK, err = 0;
  if (o->fixed > 0) {
    int r = run_trial(&d, addr, o->fixed, o, idx++, &cpu, &reached);
    best = r == T_OK ? reached : 0;
    err = r == T_ERR;
    good = r == T_OK || r == T_AGENT ? o->fixed : 0;
    bad = r == T_LOSS ? o->fixed : 0;
    good_cpu = cpu;
    limit = r;
  }
  int down = -1; /* unknown until the first trial */
  while (o->fixed <= 0) {
    int r = run_trial(&d, addr, rate, o, idx++, &cpu, &reached);
    if (r == T_ERR) {
      err = 1;
      break;
    }
    if (r == T_OK) {
      good = rate;
      best = reached > best ? reached : best;
      good_cpu = cpu;
      if (down == 1)
        break; /* the first pass on the way down */
      down = 0;
      rate = o->above > rate && bad == 0 && idx == 1 ? o->above : rate * 2;
      continue;
    }
    bad = rate; /* lossy, or not reached (late) */
    limit = r;
    if (down == 0)
      break; /* the first failure on the way up */
    down = 1;
    rate /= 2;
    if (rate < 1000)
      break; /* nothing passes: good stays 0 */
  }
  for (unsigned i = 0; i < o->bisect && bad > 0 && good > 0 && !err; i++) {
    double mid = (good + bad) / 2;
    int r = run_trial(&d, addr, mid, o, idx++, &cpu, &reached);
    if (r == T_ERR) {
      err = 1;
      break;
    }
    if (r == T_LOSS || r == T_AGENT) {
      bad = mid;
      limit = r; /* what stopped the nearest trial above the edge */
    } else {
      good = mid;
      best = reached > best ? reached : best;
      good_cpu = cpu;
    }
  }
  if (o->profile && good > 0 && !err)
    profile_trial(&d, addr, good, o, idx++);
  gtd_stop(&d);
  gtd_cleanup(&d);
  if (err) {
    fprintf(stderr, "bench_b1: a trial failed to run\n");
    return -1;
  }
  out->good = good;
  out->reached = best;
  out->bad = bad;
  out->good_cpu = good_cpu;
  out->limit = limit;
  return 0;
}

/* BENCH_B1_SUMMARY=ab (see the header). */
static int summary_ab(const b1opts *base) {
  static const char *const off[] = {"GENTRACE_BENCH_NO_SUMMARY=1", NULL};
  b1opts on = *base, no = *base;
  on.profile = no.profile = 0;
  no.env = off;
  const char *r = getenv("BENCH_B1_ROUNDS");
  const char *cr = getenv("BENCH_B1_CPU_RATE");
  int rounds = cr ? 0 : r ? atoi(r) : 2;
  double with = 0, without = 0;
  for (int i = 0; i < rounds; i++) {
    b1result a = {0}, b = {0};
    if (b1_search(&on, NULL, &a) < 0 || b1_search(&no, NULL, &b) < 0)
      return 1;
    fprintf(stderr,
            "bench_b1: round %d: B1 %.2f M/s summarizing, %.2f M/s not\n",
            i + 1, a.good / 1e6, b.good / 1e6);
    with = a.good > with ? a.good : with;
    without = b.good > without ? b.good : without;
  }
  double ratio = without > 0 ? with / without : 0;
  if (rounds > 0)
    printf("BENCH id=%s_summary value=%.2f unit=Mevents/s(agents=%u,"
           "threads=%u) baseline=B1_no_summary:%.2f ratio=%.3f bar=0.95 "
           "pass=%d\n",
           base->id, with / 1e6, base->agents, base->threads, without / 1e6,
           ratio, ratio >= 0.95);
  double rate = cr ? atof(cr) : (with < without ? with : without) / 2;
  if (rate <= 0) {
    fprintf(stderr, "bench_b1: no rate to compare the CPU at\n");
    return 1;
  }
  /* The same rate on a fresh daemon each; CPU per event only from a trial
   * that stored every event it was sent. */
  double ns[2] = {-1, -1};
  on.fixed = no.fixed = rate;
  for (int k = 0; k < 2; k++) {
    b1result res = {0};
    if (b1_search(k == 0 ? &on : &no, NULL, &res) < 0)
      return 1;
    if (res.good > 0)
      ns[k] = res.good_cpu * 1e9 / (rate * base->seconds);
  }
  double cw = ns[0], co = ns[1];
  printf("BENCH id=%s_summary_cpu value=%.1f unit=daemon-ns/event(agents=%u,"
         "threads=%u,at=%.0f/s) baseline=no_summary:%.1f ratio=%.3f bar=1.05 "
         "pass=%d\n",
         base->id, cw, base->agents, base->threads, rate, co,
         co > 0 ? cw / co : 0, co > 0 && cw > 0 && cw <= 1.05 * co);
  fprintf(stderr,
          "bench_b1: daemon CPU at %.2f M/s: %.1f ns/event summarizing, "
          "%.1f ns/event not\n",
          rate / 1e6, cw, co);
  return 0;
}

int main(int argc, char **argv) {
  b1opts o = {1, 2, 3, 0, 0, "B1", NULL, 0, 0, 0, 3};
  if (argc > 1 && strncmp(argv[1], "--", 2) != 0) {
    /* bench_b1 THREADS SECONDS [LTTNG_RATE] */
    o.threads = (unsigned)atoi(argv[1]);
    o.seconds = argc > 2 ? atof(argv[2]) : 3;
    o.lttng = argc > 3 ? atof(argv[3]) : 0;
  } else {
    const bench_opt opts[] = {{"--profile", BENCH_FLAG, &o.profile},
                              {"--agents", BENCH_UNSIGNED, &o.agents},
                              {"--threads", BENCH_UNSIGNED, &o.threads},
                              {"--seconds", BENCH_DOUBLE, &o.seconds},
                              {"--lttng", BENCH_DOUBLE, &o.lttng},
                              {"--id", BENCH_STRING, &o.id},
                              {"--start", BENCH_DOUBLE, &o.start},
                              {"--above", BENCH_DOUBLE, &o.above},
                              {"--bisect", BENCH_UNSIGNED, &o.bisect},
                              {"--rate", BENCH_DOUBLE, &o.fixed}};
    int bad = bench_opts_parse(argc, argv, 1, opts, sizeof opts / sizeof *opts);
    if (bad) {
      fprintf(stderr, "bench_b1: unknown option %s\n", argv[bad]);
      return 2;
    }
  }
  if (o.threads < 1 || o.threads > 64 || o.agents < 1 || o.agents > 5000 ||
      o.seconds <= 0) {
    fprintf(stderr, "usage: bench_b1 [--agents N] [--threads T] [--seconds "
                    "S] [--lttng RATE] [--profile] [--id NAME] [--start "
                    "RATE] [--above RATE] [--bisect K] [--rate RATE]\n");
    return 2;
  }
  /* The agents' sleep when ahead of the pace (b1_agent.c): 10 us per
   * agent, at least 200, as bench/lttng.sh sets it for LTTng's processes;
   * a thousand agents then wake 100,000 times a second in all. */
  if (getenv("BENCH_TICK_US") == NULL) {
    char tick[32];
    snprintf(tick, sizeof tick, "%u",
             o.agents * 10 > 200 ? o.agents * 10 : 200);
    setenv("BENCH_TICK_US", tick, 1);
  }
  const char *ab = getenv("BENCH_B1_SUMMARY");
  if (ab != NULL && strcmp(ab, "ab") == 0)
    return summary_ab(&o);
  /* BENCH_B1_SHARED=only: the shared run alone (profiling it). */
  const char *sh = getenv("BENCH_B1_SHARED");
  int only = sh != NULL && strcmp(sh, "only") == 0;
  int shared = only || (sh != NULL && strcmp(sh, "1") == 0);
  const char *cat = getenv("GENTRACE_CATALOG");
  if (shared && (cat == NULL || getenv("GENTRACE_OBJECTS") == NULL)) {
    fprintf(stderr, "bench_b1: BENCH_B1_SHARED needs scripts/cluster-up's "
                    "environment (make bench-b1-shared)\n");
    return 1;
  }
  b1result res = {0}, res2 = {0};
  if (!only && b1_search(&o, NULL, &res) < 0)
    return 1;
  if (shared && b1_search(&o, cat, &res2) < 0)
    return 1;
  if (only)
    res = res2;
  /* The figure is the rate the best zero-loss trial reached (its events
   * over the time its emitters took, at most the rate asked); the CPU per
   * event is that of the highest rate that passed. */
  double good = res.reached, bad = res.bad, good_cpu = res.good_cpu;
  double asked = res.good;
  int limit = res.limit;
  char unit[128];
  snprintf(unit, sizeof unit, "events/s(zero-loss,agents=%u,threads=%u,%s)",
           o.agents, o.threads,
           limit == T_AGENT ? "limit=agent-cpu" : "limit=loss");
  if (o.lttng > 0)
    printf("BENCH id=%s value=%.0f unit=%s baseline=lttng-relayd:%.0f "
           "ratio=%.2f bar=>=4 pass=%d\n",
           o.id, good, unit, o.lttng, good / o.lttng, good >= 4 * o.lttng);
  else
    printf("BENCH id=%s value=%.0f unit=%s baseline=lttng-relayd:n/a "
           "ratio=n/a bar=>=4 pass=0\n",
           o.id, good, unit);
  printf("BENCH id=%s_lossy value=%.0f unit=events/s(first-lossy-or-late,agents=%u,"
         "threads=%u) baseline=zero-loss:%.0f ratio=%.2f bar=none pass=1\n",
         o.id, bad, o.agents, o.threads, good, good > 0 ? bad / good : 0);
  double ev = asked * o.seconds;
  printf("BENCH id=%s_cpu value=%.3f unit=daemon-cpu-s/Mevents(agents=%u,"
         "threads=%u,at=%.0f/s) baseline=none:0 ratio=1 bar=none pass=1\n",
         o.id, ev > 0 ? good_cpu / (ev / 1e6) : 0, o.agents, o.threads, asked);
  if (shared && !only)
    printf("BENCH id=%s-shared value=%.0f unit=events/s(zero-loss,agents=%u,"
           "threads=%u) baseline=sqlite:%.0f ratio=%.2f bar=0.50 pass=%d\n",
           o.id, res2.reached, o.agents, o.threads, res.reached,
           res.reached > 0 ? res2.reached / res.reached : 0,
           res.reached > 0 && res2.reached >= res.reached / 2);
  return 0;
}
