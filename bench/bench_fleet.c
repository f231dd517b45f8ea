/* bench_fleet: a fleet of small agents against gentraced, beside a bare
 * libuv server (bench/bare_server.c) under the identical load in the same
 * run.
 *
 *   bench_fleet [--agents N] [--period-ms MS] [--events E] [--seconds S]
 *               [--procs P] [--server both|gentraced|bare] [--idle]
 *               [--soak] [--connect-rate R] [--id NAME]
 *               [--client-prio nice|idle|normal] [--reps N]
 *
 * N agents (default 1000) speak the real wire protocol (HELLO, then per
 * generation one BATCH frame holding an EVENTS record of E events, a
 * STRINGS and a CLOCK record, then GEN_END) from P forked processes (open
 * files are capped per process), each agent bound to its own source address
 * 127.0.(1+i/250).(1+i%250), as a fleet's hosts are. Every agent commits one
 * generation each period, the agents' phases spread evenly over the period
 * (staggered, as a fleet started at different times is), for S seconds; then
 * the benchmark waits for the outstanding ACKs. Measured:
 *
 *   - WELCOME latency (HELLO written -> WELCOME read) and ACK latency
 *     (GEN_END written -> ACK read): p50, p99, max; the ACK's also split
 *     at the client's socket by the kernel's receive timestamp
 *     (SO_TIMESTAMPNS): GEN_END written -> ACK arrived (the server and
 *     loopback: BENCH unit ack-p99-at-socket) and arrived -> read (the
 *     client's own delay, e.g. at nice 19 on a busy machine), so a client
 *     that could not read its socket is not counted as the server's;
 *   - gentraced's longest COMMIT and its WAL checkpoints (/metrics);
 *   - the server's CPU (utime + stime of /proc/PID/stat, every thread) from
 *     the first generation to the last ACK, per generation and per million
 *     events; its RSS before the agents connected and with them connected;
 *   - per server thread and per generation: its CPU, the kernel's share of
 *     it (stime), the times it was put on a CPU (wake-ups, schedstat), and
 *     how long it waited for one; gentraced's transactions, generations
 *     per transaction and mean commit time (/metrics);
 *   - the client processes' own CPU, the load average, and gentraced's
 *     own ACK latency (its /metrics histograms, daemon/acklat.h), so the
 *     client's wait for a CPU and the daemon's queueing are told apart;
 *   - for gentraced, that every ACKed generation is stored, read back from
 *     the HTTP API (/v1/agents: each session's stored generations, events
 *     and last gen, through curl), not from the daemon's own counters.
 *
 * --client-prio: the worker processes (the agents) run at nice 19 by
 * default (idle: also SCHED_IDLE; normal: as started, the set-up of the
 * figures before the fourth session). In a real fleet the agents run on
 * other hosts; here they share the CPUs with the server, and at the same
 * priority they take the CPU the server's ACKs wait for, in both arms. The
 * client-side latencies then include the clients' own wait for a CPU to
 * read the ACK: gentraced's own figure (/metrics) is printed beside them.
 * The code is split: bench/fleet_client.c (the agents, in the workers),
 * bench/fleet_report.c (histogram, details, BENCH lines), this file (the
 * servers, the load, the store check).
 *
 * --reps N (default 1): N repeats of the load per server, the servers
 * alternated (gentraced, bare, gentraced, bare, ...), each repeat a fresh
 * server (gentraced in a fresh temp dir). Each repeat's details print as
 * one run's do, labelled "rep i/N", and its exactness is checked and
 * reported; then the "per generation by thread" medians, and BENCH lines
 * whose value is the median of the repeats with min, max and reps beside
 * it (bench/summary.awk's form), the baseline the bare server's median and
 * the ratio median / median. A single 20 s run moves by 10-20% on a shared
 * 2-core machine; the median of alternated repeats is the figure to trust.
 *
 * --idle: agents connect and then only send HEARTBEATs (every third of the
 * idle timeout the WELCOME announced, as the real agent does); reported is
 * the server's CPU in % of one core over S seconds and its memory per
 * connected agent.
 *
 * Output: BENCH lines (bench/README.md) on stdout, details on stderr. The exit
 * status is 1 when, in any repeat, an ACKed generation is missing from the
 * store, an ACK came twice or for a generation never sent, a generation was
 * refused (ERROR), a connection was lost, or (--soak) a generation stayed
 * unACKed; figures never change it. Time bounds are generous: a slow machine
 * makes the figures worse, not the run fail.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "fleet.h"
#include "format.h"

/* ------------------------------------------------------ /proc of a pid */

/* CPU seconds of each thread of pid (tids ascending, so the main thread,
 * which runs gentraced's loop, comes first), into tid[]/cpu[], and the
 * seconds it was runnable but waited for a CPU (schedstat) into wait[];
 * returns the count. */
#define MAX_THREADS FLEET_THREADS
static int thread_cpu(pid_t pid, int tid[MAX_THREADS], double cpu[MAX_THREADS],
                      double wait[MAX_THREADS], char name[MAX_THREADS][16],
                      double sys[MAX_THREADS], double runs[MAX_THREADS]) {
  int n = 0;
  char cmd[96];
  snprintf(cmd, sizeof cmd, "ls /proc/%d/task | sort -n", (int)pid);
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return 0;
  while (n < MAX_THREADS && fscanf(f, "%d", &tid[n]) == 1) {
    char path[96], line[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, tid[n]);
    FILE *s = fopen(path, "r");
    if (s == NULL)
      continue;
    char *ok = fgets(line, sizeof line, s);
    fclose(s);
    char *p = ok != NULL ? strrchr(line, ')') : NULL;
    char *q = ok != NULL ? strchr(line, '(') : NULL;
    unsigned long ut, st;
    if (p == NULL || q == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &ut, &st) != 2)
      continue;
    snprintf(name[n], 16, "%.*s", (int)(p - q - 1), q + 1);
    cpu[n] = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    sys[n] = (double)st / (double)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, tid[n]);
    /* Time on a CPU, time runnable but waiting, and the number of times
     * the thread was put on a CPU: its wake-ups (and preemptions). */
    unsigned long long on = 0, delay = 0, nrun = 0;
    if ((s = fopen(path, "r")) != NULL) {
      if (fscanf(s, "%llu %llu %llu", &on, &delay, &nrun) != 3)
        delay = nrun = 0;
      fclose(s);
    }
    wait[n] = (double)delay / 1e9;
    runs[n] = (double)nrun;
    n++;
  }
  pclose(f);
  return n;
}

/* Bytes the process caused to be written to storage so far (write_bytes
 * of /proc/PID/io: WAL, database, log), or -1. */
static double io_written(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
  FILE *f = fopen(path, "r");
  double v = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "write_bytes:", 12) == 0)
      v = strtod(line + 12, NULL);
  fclose(f);
  return v;
}

/* ------------------------------------------------------------ servers */

typedef struct server {
  const char *name; /* gentraced | bare-libuv */
  pid_t pid;
  uint16_t port, http_port;
  gtd d; /* gentraced only */
  int is_gentraced;
} server;

static int server_start(server *sv, int gentraced, unsigned agents) {
  memset(sv, 0, sizeof *sv);
  sv->is_gentraced = gentraced;
  if (gentraced) {
    sv->name = "gentraced";
    /* Room for every agent past the default 16,384 (S1 up to the fd cap). */
    char maxc[32];
    snprintf(maxc, sizeof maxc, "%u", agents + 256);
    const char *args[] = {"--max-connections", maxc, NULL};
    if (gtd_init(&sv->d) < 0 || gtd_start(&sv->d, args, NULL) < 0)
      return -1;
    sv->pid = sv->d.pid;
    sv->port = sv->d.agent_port;
    sv->http_port = sv->d.http_port;
    return 0;
  }
  sv->name = "bare-libuv";
  const char *top = getenv("top_builddir");
  char bin[512];
  snprintf(bin, sizeof bin, "%s/bench/bare_server", top ? top : ".");
  int pfd[2];
  if (pipe(pfd) < 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    dup2(pfd[1], 1);
    close(pfd[0]);
    close(pfd[1]);
    execl(bin, bin, "0", (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  FILE *f = fdopen(pfd[0], "r");
  unsigned port = 0;
  if (f == NULL || fscanf(f, "listening port=%u", &port) != 1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (f != NULL)
      fclose(f);
    return -1;
  }
  fclose(f);
  sv->pid = pid;
  sv->port = (uint16_t)port;
  return 0;
}

static void server_stop(server *sv) {
  if (sv->is_gentraced) {
    gtd_stop(&sv->d);
    gtd_cleanup(&sv->d);
    return;
  }
  kill(sv->pid, SIGTERM);
  waitpid(sv->pid, NULL, 0);
}

/* ----------------------------------------------------------- the load */

/* Appends the 1-minute load average to out ("a->b" on the second call). */
static void loadavg(char *out, size_t cap) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL && fscanf(f, "%lf", &l) != 1)
    l = -1;
  if (f != NULL)
    fclose(f);
  size_t n = strlen(out);
  snprintf(out + n, cap - n, "%s%.2f", n ? "->" : "", l);
}

/* Verifies, from /v1/agents (curl), that every agent's ACKed generations
 * are stored: for agent i, stored generations >= acked[i] with events =
 * generations * E and last_gen >= acked[i]; a session with more than it was
 * sent is a duplicate (extra). */
static void verify_store(const opts *o, server *sv, const shared *sh,
                         const uint64_t *sentv, result *r) {
  char cmd[256];
  snprintf(cmd, sizeof cmd,
           "curl -sf --max-time 120 http://127.0.0.1:%u/v1/agents",
           sv->http_port);
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return;
  size_t cap = 1 << 20, len = 0;
  char *body = malloc(cap);
  for (;;) {
    if (len + 65536 > cap)
      body = realloc(body, cap *= 2);
    size_t k = fread(body + len, 1, cap - len - 1, f);
    if (k == 0)
      break;
    len += k;
  }
  pclose(f);
  body[len] = '\0';
  uint8_t *seen = calloc(o->agents, 1);
  uint64_t checked = 0, missing = 0, extra = 0;
  for (char *p = strstr(body, "\"session\":\""); p != NULL;
       p = strstr(p + 1, "\"session\":\"")) {
    uint8_t s[16];
    char hex[33];
    memcpy(hex, p + 11, 32);
    hex[32] = '\0';
    if (gtp_session_parse(hex, s) < 0)
      continue;
    unsigned idx = gtp_get_u32le(s) - 1;
    if (idx >= o->agents || seen[idx])
      continue;
    seen[idx] = 1;
    char *next = strstr(p + 1, "\"session\":\"");
    char *g = strstr(p, "\"generations\":"), *e = strstr(p, "\"events\":");
    char *lg = strstr(p, "\"last_gen\":");
    if (g == NULL || e == NULL || lg == NULL ||
        (next != NULL && (g > next || e > next || lg > next)))
      continue;
    uint64_t gens = strtoull(g + 14, NULL, 10);
    uint64_t evs = strtoull(e + 9, NULL, 10);
    uint64_t last = strtoull(lg + 11, NULL, 10); /* "null" -> 0 */
    uint64_t want = sh->acked[idx];
    checked++;
    if (gens < want || last < want || evs < want * o->events) {
      /* At least one ACKed generation is not there (or not whole). */
      uint64_t lack = want - (gens < want ? gens : want);
      missing += lack > 0 ? lack : 1;
    }
    if (gens > sentv[idx] || evs != gens * o->events) {
      if (extra++ == 0 && getenv("BENCH_FLEET_DEBUG") != NULL)
        fprintf(stderr, "bench_fleet: agent %u acked %llu: %.400s\n", idx,
                (unsigned long long)want, p);
    }
  }
  for (unsigned i = 0; i < o->agents; i++)
    if (!seen[i] && sh->acked[i] > 0)
      missing += sh->acked[i];
  free(seen);
  free(body);
  r->checked = checked;
  r->missing = missing;
  r->extra = extra;
  r->verified = 1;
}

/* One run of the load against a fresh server (gentraced in a fresh temp
 * dir, or the bare server): repeat rep (from 0) of o->reps. */
static int run_load(const opts *o, int gentraced, unsigned rep, result *r) {
  memset(r, 0, sizeof *r);
  server sv;
  if (server_start(&sv, gentraced, o->agents) < 0) {
    fprintf(stderr, "bench_fleet: %s did not start\n",
            gentraced ? "gentraced" : "bare_server");
    return -1;
  }
  if (o->reps > 1)
    snprintf(r->name, sizeof r->name, "%s rep %u/%u", sv.name, rep + 1,
             o->reps);
  else
    snprintf(r->name, sizeof r->name, "%s", sv.name);
  r->agents = o->agents;
  fprintf(stderr, "bench_fleet: %s pid %d agent port %u http port %u\n",
          r->name, (int)sv.pid, sv.port, sv.http_port);
  size_t shsize = sizeof(shared) + o->procs * sizeof(wres);
  shared *sh = mmap(NULL, shsize, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint32_t *acked =
      mmap(NULL, o->agents * sizeof(uint32_t), PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED || acked == MAP_FAILED) {
    server_stop(&sv);
    return -1;
  }
  memset(sh, 0, shsize);
  sh->acked = acked;
  fleet_sleep_ms(
      300); /* let the server settle (store open, first checkpoint) */
  r->rss0_kib = (double)gtd_proc_kib(sv.pid, "VmRSS");
  uint8_t salt[8];
  uint64_t sv_ = (uint64_t)fleet_now_ns() ^ ((uint64_t)getpid() << 32);
  memcpy(salt, &sv_, 8);
  pid_t *kids = calloc(o->procs, sizeof *kids);
  unsigned per = (o->agents + o->procs - 1) / o->procs;
  for (unsigned k = 0; k < o->procs; k++) {
    unsigned first = k * per;
    unsigned n = first >= o->agents        ? 0
                 : first + per > o->agents ? o->agents - first
                                           : per;
    kids[k] = fork();
    if (kids[k] == 0)
      fleet_client_run(o, k, first, n, sv.port, salt, sh, acked);
  }
  /* Wait until every worker connected its agents. */
  for (unsigned k = 0; k < o->procs; k++)
    while (!sh->w[k].welcomed_all)
      fleet_sleep_ms(20);
  fleet_sleep_ms(500); /* the WELCOME burst settles before the CPU is read */
  r->rss_kib = (double)gtd_proc_kib(sv.pid, "VmRSS");
  double cpu0 = gtd_proc_cpu_s(sv.pid);
  double io0 = io_written(sv.pid);
  int tid0[MAX_THREADS], tid1[MAX_THREADS];
  double tc0[MAX_THREADS], tc1[MAX_THREADS], tw0[MAX_THREADS], tw1[MAX_THREADS];
  double ts0[MAX_THREADS], ts1[MAX_THREADS], tr0[MAX_THREADS], tr1[MAX_THREADS];
  char tn0[MAX_THREADS][16], tn1[MAX_THREADS][16];
  int nt0 = thread_cpu(sv.pid, tid0, tc0, tw0, tn0, ts0, tr0);
  double kcpu0 = 0;
  for (unsigned k = 0; k < o->procs; k++)
    kcpu0 += gtd_proc_cpu_s(kids[k]);
  char *m0 = NULL, *m1 = NULL;
  int hs = 0;
  if (gentraced)
    m0 = gtd_http_get(&sv.d, "/metrics", &hs);
  loadavg(r->load, sizeof r->load);
  int64_t go = fleet_now_ns() + 50000000;
  sh->go_ns = go;
  for (unsigned k = 0; k < o->procs; k++)
    while (!sh->w[k].done)
      fleet_sleep_ms(20);
  double cpu1 = gtd_proc_cpu_s(sv.pid);
  r->io_bytes = io_written(sv.pid) - io0;
  for (unsigned k = 0; k < o->procs; k++)
    r->client_cpu_s += gtd_proc_cpu_s(kids[k]);
  r->client_cpu_s -= kcpu0;
  loadavg(r->load, sizeof r->load);
  if (gentraced)
    m1 = gtd_http_get(&sv.d, "/metrics", &hs);
  double *dv[] = {&r->d_ack50, &r->d_ack99, &r->d_commit50, &r->d_commit99};
  for (int i = 0; i < 4; i++) { /* ms; -1 when there were none */
    *dv[i] = m0 == NULL || m1 == NULL
                 ? -1
                 : gtd_metric_hist_pct(m0, m1,
                                       i < 2 ? "gentrace_ack_seconds"
                                             : "gentrace_ack_commit_seconds",
                                       i % 2 ? 0.99 : 0.5);
    *dv[i] = *dv[i] < 0 ? -1 : *dv[i] * 1e3;
  }
  /* Transactions and their time (gentraced's /metrics) over the run. */
  double txns = -1, commit_s = -1;
  r->txns = r->commit_ms = -1;
  if (m0 != NULL && m1 != NULL) {
    txns = (double)(gtd_metric_in(m1, "gentrace_store_transactions_total") -
                    gtd_metric_in(m0, "gentrace_store_transactions_total"));
    commit_s = gtd_metric_f_in(m1, "gentrace_store_commit_seconds_total") -
               gtd_metric_f_in(m0, "gentrace_store_commit_seconds_total");
    /* Where slow ACKs can come from: the longest COMMIT, and the WAL
     * checkpoints (store/store_ckpt.c; maxima since the daemon started). */
    fprintf(
        stderr,
        "bench_fleet: %s commits and checkpoints: commit max %.1f ms;"
        " %.0f checkpointer passes, %.1f ms mean, %.1f ms max;"
        " %.0f store-thread finishes, %.1f ms max\n",
        r->name, gtd_metric_f_in(m1, "gentrace_store_commit_seconds_max") * 1e3,
        (double)(gtd_metric_in(m1, "gentrace_store_checkpoints_total") -
                 gtd_metric_in(m0, "gentrace_store_checkpoints_total")),
        (gtd_metric_f_in(m1, "gentrace_store_checkpoint_seconds_total") -
         gtd_metric_f_in(m0, "gentrace_store_checkpoint_seconds_total")) *
            1e3 /
            fmax(1.0, (double)(gtd_metric_in(
                                   m1, "gentrace_store_checkpoints_total") -
                               gtd_metric_in(
                                   m0, "gentrace_store_checkpoints_total"))),
        gtd_metric_f_in(m1, "gentrace_store_checkpoint_seconds_max") * 1e3,
        (double)(gtd_metric_in(m1, "gentrace_store_checkpoint_finishes_total") -
                 gtd_metric_in(m0, "gentrace_store_checkpoint_finishes_total")),
        gtd_metric_f_in(m1, "gentrace_store_checkpoint_finish_seconds_max") *
            1e3);
  }
  free(m0);
  free(m1);
  int64_t t1 = fleet_now_ns();
  int nt1 = thread_cpu(sv.pid, tid1, tc1, tw1, tn1, ts1, tr1);
  /* Where the server's CPU went, thread by thread (main = the loop), and
   * how long each waited for a CPU while runnable; then the kernel's share
   * (system time) and the times each thread was put on a CPU. */
  double dsys[MAX_THREADS], druns[MAX_THREADS];
  fprintf(stderr, "bench_fleet: %s pid %d CPU (waited) by thread:", r->name,
          (int)sv.pid);
  for (int i = 0; i < nt1; i++) {
    double before = 0, wbefore = 0, sbefore = 0, rbefore = 0;
    for (int j = 0; j < nt0; j++)
      if (tid0[j] == tid1[i]) {
        before = tc0[j];
        wbefore = tw0[j];
        sbefore = ts0[j];
        rbefore = tr0[j];
      }
    tc1[i] -= before;
    dsys[i] = ts1[i] - sbefore;
    druns[i] = tr1[i] - rbefore;
    fprintf(stderr, " %s/%d=%.2fs(%.2fs)", tn1[i], tid1[i], tc1[i],
            tw1[i] - wbefore);
  }
  fprintf(stderr, "\n");

  if (o->idle && r->rss_kib < gtd_proc_kib(sv.pid, "VmRSS"))
    r->rss_kib = (double)gtd_proc_kib(sv.pid, "VmRSS");
  uint64_t first_send = UINT64_MAX, last_ack = 0;
  for (unsigned k = 0; k < o->procs; k++) {
    wres *w = &sh->w[k];
    r->welcomed += (unsigned)w->welcomed;
    r->connect_fail += w->connect_fail;
    r->sent += w->sent;
    r->acked += w->acked;
    r->dup += w->dup;
    r->refused += w->refused;
    r->lost += w->lost_conns;
    r->unacked += w->unacked;
    r->skipped += w->skipped;
    fleet_hist_merge(&r->welcome, &w->welcome);
    fleet_hist_merge(&r->ack, &w->ack);
    fleet_hist_merge(&r->ack_in, &w->ack_in);
    fleet_hist_merge(&r->ack_wait, &w->ack_wait);
    r->ack_nots += w->ack_nots;
    if (w->first_send_ns && w->first_send_ns < first_send)
      first_send = w->first_send_ns;
    if (w->last_ack_ns > last_ack)
      last_ack = w->last_ack_ns;
  }
  /* Per generation ACKed: each thread's wake-ups (times put on a CPU) and
   * the kernel's share of its CPU; gentraced's generations per
   * transaction. What the per-generation figure is made of at each load. */
  for (int i = 0; i < nt1 && r->acked > 0; i++) {
    fleet_thread *t = &r->thr[r->nthreads++];
    memcpy(t->name, tn1[i], sizeof t->name); /* both 16, NUL-ended */
    t->name[sizeof t->name - 1] = '\0';
    t->tid = tid1[i];
    t->cpu_s = tc1[i];
    t->wake = druns[i] / (double)r->acked;
    t->us = tc1[i] * 1e6 / (double)r->acked;
    t->sys = tc1[i] > 0 ? 100 * dsys[i] / tc1[i] : 0.0;
    t->shown = tc1[i] >= 0.005 || druns[i] >= (double)r->acked / 100;
  }
  if (txns > 0) {
    r->txns = txns;
    r->commit_ms = commit_s * 1e3 / txns;
  }
  fleet_report_threads(r);
  r->cpu_s = cpu1 - cpu0;
  r->wall_s = (double)(t1 - go) / 1e9;
  if (r->acked > 0) {
    r->us_per_gen = r->cpu_s * 1e6 / (double)r->acked;
    r->cpu_per_mev = r->cpu_s * 1e6 / ((double)r->acked * o->events);
  }
  r->core_pct = r->wall_s > 0 ? r->cpu_s * 100 / r->wall_s : 0;
  if (r->welcomed > 0)
    r->bytes_per_agent = (r->rss_kib - r->rss0_kib) * 1024 / r->welcomed;
  r->ok = r->welcomed == o->agents;
  if (gentraced && !o->idle) {
    /* Sent per agent, for the duplicate check: the generations it wrote. */
    uint64_t *sentv = calloc(o->agents, sizeof *sentv);
    /* Workers sent gens 1..next_gen-1; the parent only knows the ACKed
     * prefix and the totals, so allow up to acked + RING per agent. */
    for (unsigned i = 0; i < o->agents; i++)
      sentv[i] = (uint64_t)acked[i] + (r->unacked ? RING : 0);
    verify_store(o, &sv, sh, sentv, r);
    free(sentv);
  }
  sh->release = 1;
  for (unsigned k = 0; k < o->procs; k++)
    waitpid(kids[k], NULL, 0);
  free(kids);
  server_stop(&sv);
  munmap(acked, o->agents * sizeof(uint32_t));
  munmap(sh, shsize);
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_fleet [--agents N] [--period-ms MS] [--events E] "
          "[--seconds S] [--procs P] [--server both|gentraced|bare] [--idle] "
          "[--soak] [--connect-rate R] [--client-prio idle|nice|normal] "
          "[--reps N] [--id NAME]\n");
  exit(2);
}

int main(int argc, char **argv) {
  opts o = {.agents = 1000,
            .events = 10,
            .seconds = 10,
            .period_ms = 1000,
            .reps = 1,
            .connect_rate = 2000,
            .server = "both",
            .client_prio = "nice",
            .id = "F1"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--idle") == 0) {
      o.idle = 1;
      continue;
    }
    if (strcmp(a, "--soak") == 0) {
      o.soak = 1;
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--agents") == 0)
      o.agents = (unsigned)atoi(v);
    else if (strcmp(a, "--period-ms") == 0)
      o.period_ms = (unsigned)atoi(v);
    else if (strcmp(a, "--events") == 0)
      o.events = (unsigned)atoi(v);
    else if (strcmp(a, "--seconds") == 0)
      o.seconds = (unsigned)atoi(v);
    else if (strcmp(a, "--reps") == 0)
      o.reps = (unsigned)atoi(v);
    else if (strcmp(a, "--procs") == 0)
      o.procs = (unsigned)atoi(v);
    else if (strcmp(a, "--connect-rate") == 0)
      o.connect_rate = (unsigned)atoi(v);
    else if (strcmp(a, "--server") == 0)
      o.server = v;
    else if (strcmp(a, "--client-prio") == 0)
      o.client_prio = v;
    else if (strcmp(a, "--id") == 0)
      o.id = v;
    else
      usage();
  }
  if (o.agents == 0 || o.period_ms == 0 || o.events == 0 || o.events > 1000 ||
      o.connect_rate == 0 || o.reps == 0 || o.reps > FLEET_MAX_REPS ||
      fleet_client_prio_check(o.client_prio) < 0)
    usage();
  if (o.procs == 0)
    o.procs = o.agents <= 500 ? 1 : 2 + (o.agents - 1) / 5000;
  if (o.procs > 64)
    o.procs = 64;
  /* Room for the agents of one worker and for the server (which inherits
   * the limit): the hard limit is the ceiling. */
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < o.agents + 64)
    fprintf(stderr,
            "bench_fleet: the open-file limit (%lu) is below %u agents + the "
            "server's own files: the server will refuse some\n",
            (unsigned long)rl.rlim_cur, o.agents);
  signal(SIGPIPE, SIG_IGN);

  int want_bare = strcmp(o.server, "gentraced") != 0;
  int want_gt = strcmp(o.server, "bare") != 0;
  result *bare = calloc(o.reps, sizeof *bare);
  result *gt = calloc(o.reps, sizeof *gt);
  if (bare == NULL || gt == NULL)
    return 1;
  /* The servers alternate (gentraced, bare, gentraced, ...), each repeat a
   * fresh server, so a slow stretch of the shared machine falls on both
   * arms rather than on all of one; exactness is judged repeat by repeat. */
  int fail = 0;
  unsigned exact = 0;
  for (unsigned i = 0; i < o.reps; i++) {
    if (want_gt) {
      result *r = &gt[i];
      if (run_load(&o, 1, i, r) < 0)
        return 1;
      fleet_report_print(&o, r);
      int bad = !r->ok || r->dup || r->refused || r->lost || r->missing ||
                r->extra || (!o.idle && !r->verified);
      if (o.soak)
        bad |= r->unacked > 0 || r->skipped > 0;
      r->exact = !bad;
      exact += r->exact;
      fail |= bad;
      fprintf(stderr, "bench_fleet: %s: %s\n", r->name,
              bad ? "NOT EXACT (see the lines above)"
                  : "exact (every ACKed generation stored once)");
    }
    if (want_bare) {
      result *r = &bare[i];
      if (run_load(&o, 0, i, r) < 0)
        return 1;
      fleet_report_print(&o, r);
      r->exact = r->ok && !r->dup && !r->lost;
      fail |= !r->exact;
    }
  }
  if (o.reps > 1) {
    if (want_gt) {
      fleet_report_threads_median(gt, o.reps);
      fprintf(stderr, "bench_fleet: gentraced exact in %u of %u repeats\n",
              exact, o.reps);
    }
    if (want_bare)
      fleet_report_threads_median(bare, o.reps);
  }
  fflush(stderr);
  fleet_report_bench(&o, gt, bare, want_bare, want_gt);
  if (fail)
    fprintf(stderr, "bench_fleet: FAIL (exactness, see the lines above)\n");
  free(gt);
  free(bare);
  return fail;
}
