/* fleet_report: bench_fleet's figures: the latency histogram, the
 * details of a run on stderr and the BENCH lines (bench/README.md) on
 * stdout, each beside the bare server's figure from the same run. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

/* Log-linear histogram: exact below 128 us, then 64 buckets per power of
 * two (1.6% resolution). */
static unsigned hbucket(uint64_t us) {
  if (us < 128)
    return (unsigned)us;
  unsigned e = 63u - (unsigned)__builtin_clzll(us);
  unsigned b = 128 + (e - 7) * 64 + (unsigned)((us >> (e - 6)) & 63);
  return b < HBUCKETS ? b : HBUCKETS - 1;
}

static uint64_t hvalue(unsigned b) {
  if (b < 128)
    return b;
  unsigned e = (b - 128) / 64 + 7, sub = (b - 128) % 64;
  return ((uint64_t)(64 + sub) << (e - 6)) + ((uint64_t)1 << (e - 6)) / 2;
}

void fleet_hist_add(hist *h, uint64_t us) {
  h->n++;
  h->b[hbucket(us)]++;
  if (us > h->max_us)
    h->max_us = us;
}

void fleet_hist_merge(hist *to, const hist *from) {
  to->n += from->n;
  if (from->max_us > to->max_us)
    to->max_us = from->max_us;
  for (unsigned i = 0; i < HBUCKETS; i++)
    to->b[i] += from->b[i];
}

double fleet_hist_pct_ms(const hist *h, double p) {
  if (h->n == 0)
    return 0;
  uint64_t want = (uint64_t)((double)h->n * p / 100.0);
  if (want >= h->n)
    want = h->n - 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < HBUCKETS; i++) {
    seen += h->b[i];
    if (seen > want) {
      uint64_t v = hvalue(i);
      return (double)(v < h->max_us ? v : h->max_us) / 1000.0;
    }
  }
  return (double)h->max_us / 1000.0;
}

void fleet_report_print(const opts *o, const result *r) {
  fprintf(stderr,
          "bench_fleet: %s agents=%u welcomed=%u period=%ums events=%u "
          "sent=%llu acked=%llu unacked=%llu dup=%llu refused=%llu "
          "lost_conns=%llu skipped=%llu connect_fail=%llu\n",
          r->name, r->agents, r->welcomed, o->period_ms, o->events,
          (unsigned long long)r->sent, (unsigned long long)r->acked,
          (unsigned long long)r->unacked, (unsigned long long)r->dup,
          (unsigned long long)r->refused, (unsigned long long)r->lost,
          (unsigned long long)r->skipped, (unsigned long long)r->connect_fail);
  fprintf(stderr,
          "bench_fleet: %s cpu=%.2fs over %.1fs (%.2f%% of a core) "
          "%.1f us/gen %.2f cpu-s/Mevents rss %.0f -> %.0f KiB (%.0f B/agent) "
          "welcome p50/p99/max %.2f/%.2f/%.2f ms ack p50/p99/max "
          "%.2f/%.2f/%.2f ms; wrote %.1f MB to storage (%.0f bytes/gen)\n",
          r->name, r->cpu_s, r->wall_s, r->core_pct, r->us_per_gen,
          r->cpu_per_mev, r->rss0_kib, r->rss_kib, r->bytes_per_agent,
          fleet_hist_pct_ms(&r->welcome, 50),
          fleet_hist_pct_ms(&r->welcome, 99), (double)r->welcome.max_us / 1000,
          fleet_hist_pct_ms(&r->ack, 50), fleet_hist_pct_ms(&r->ack, 99),
          (double)r->ack.max_us / 1000, r->io_bytes / 1e6,
          r->acked ? r->io_bytes / (double)r->acked : 0.0);
  fprintf(stderr,
          "bench_fleet: %s client processes (--client-prio %s) cpu=%.2fs "
          "(%.1f us/gen); load "
          "average %s; daemon-side (/metrics) ack p50/p99 <= %.1f/%.1f ms, of "
          "which GEN_END read -> COMMIT returned <= %.1f/%.1f ms\n",
          r->name, o->client_prio, r->client_cpu_s,
          r->acked ? r->client_cpu_s * 1e6 / (double)r->acked : 0.0, r->load,
          r->d_ack50, r->d_ack99, r->d_commit50, r->d_commit99);
  if (r->ack_in.n > 0)
    fprintf(stderr,
            "bench_fleet: %s ack split at the client's socket: GEN_END "
            "written -> ACK arrived p50/p99/max %.2f/%.2f/%.2f ms, arrived "
            "-> read by the client p50/p99/max %.2f/%.2f/%.2f ms (%llu ACKs "
            "without a timestamp)\n",
            r->name, fleet_hist_pct_ms(&r->ack_in, 50),
            fleet_hist_pct_ms(&r->ack_in, 99), (double)r->ack_in.max_us / 1000,
            fleet_hist_pct_ms(&r->ack_wait, 50),
            fleet_hist_pct_ms(&r->ack_wait, 99),
            (double)r->ack_wait.max_us / 1000, (unsigned long long)r->ack_nots);
  if (r->verified)
    fprintf(stderr,
            "bench_fleet: %s store check (/v1/agents): %llu sessions, %llu "
            "ACKed generations missing, %llu sessions with extra or wrong "
            "rows\n",
            r->name, (unsigned long long)r->checked,
            (unsigned long long)r->missing, (unsigned long long)r->extra);
}

void fleet_report_threads(const result *r) {
  fprintf(stderr, "bench_fleet: %s per generation by thread: ", r->name);
  for (unsigned i = 0; i < r->nthreads; i++) {
    const fleet_thread *t = &r->thr[i];
    if (t->shown)
      fprintf(stderr, " %s/%d %.2f wake-ups, %.1f us (%.0f%% sys)", t->name,
              t->tid, t->wake, t->us, t->sys);
  }
  if (r->txns > 0)
    fprintf(stderr,
            "; %.0f transactions, %.1f generations each, %.2f ms "
            "mean commit",
            r->txns, (double)r->acked / r->txns, r->commit_ms);
  fprintf(stderr, "\n");
}

/* ------------------------------------------------------------ medians */

/* A figure over the repeats: the median (the mean of the middle two for an
 * even count, as bench/summary.awk), min and max. */
typedef struct fig {
  double med, min, max;
} fig;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static fig fig_of(double *v, unsigned n) {
  fig f = {NAN, NAN, NAN};
  if (n == 0)
    return f;
  qsort(v, n, sizeof *v, cmp_d);
  f.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  f.min = v[0];
  f.max = v[n - 1];
  return f;
}

/* Which figure of a result (fig_get). */
enum {
  G_US_PER_GEN,
  G_CPU_PER_MEV,
  G_CORE_PCT,
  G_BYTES_PER_AGENT,
  G_ACK99,
  G_ACK_IN99,
  G_WELCOME99,
  G_DAEMON_ACK99,
  G_GENS_PER_TXN,
  G_COMMIT_MS
};

static double fig_get(const result *r, int which) {
  switch (which) {
  case G_US_PER_GEN:
    return r->us_per_gen;
  case G_CPU_PER_MEV:
    return r->cpu_per_mev;
  case G_CORE_PCT:
    return r->core_pct;
  case G_BYTES_PER_AGENT:
    return r->bytes_per_agent;
  case G_ACK99:
    return fleet_hist_pct_ms(&r->ack, 99);
  case G_ACK_IN99:
    return fleet_hist_pct_ms(&r->ack_in, 99);
  case G_WELCOME99:
    return fleet_hist_pct_ms(&r->welcome, 99);
  case G_DAEMON_ACK99:
    return r->d_ack99;
  case G_GENS_PER_TXN:
    return r->txns > 0 ? (double)r->acked / r->txns : NAN;
  default:
    return r->txns > 0 ? r->commit_ms : NAN;
  }
}

/* The figure over n repeats rs[0..n-1]; NaN values (not measured) left
 * out. */
static fig fig_over(const result *rs, unsigned n, int which) {
  double v[FLEET_MAX_REPS];
  unsigned k = 0;
  for (unsigned i = 0; i < n && i < FLEET_MAX_REPS; i++) {
    double x = fig_get(&rs[i], which);
    if (!isnan(x))
      v[k++] = x;
  }
  return fig_of(v, k);
}

/* The thread of r that is the occ-th (from 0) named name, or NULL. */
static const fleet_thread *thread_nth(const result *r, const char *name,
                                      unsigned occ) {
  for (unsigned i = 0; i < r->nthreads; i++)
    if (strcmp(r->thr[i].name, name) == 0 && occ-- == 0)
      return &r->thr[i];
  return NULL;
}

void fleet_report_threads_median(const result *rs, unsigned n) {
  if (n == 0)
    return;
  /* The server's name without the repeat: "gentraced rep 1/3". */
  const char *sp = strchr(rs[0].name, ' ');
  int nlen = sp ? (int)(sp - rs[0].name) : (int)strlen(rs[0].name);
  fprintf(stderr,
          "bench_fleet: %.*s per generation by thread, median [min-max] of "
          "%u repeats:",
          nlen, rs[0].name, n);
  /* Threads are matched across repeats by name and their order among
   * threads of the same name (tids differ from run to run); the first
   * repeat's threads name the rows, and a thread shown in any repeat is
   * shown. */
  for (unsigned i = 0; i < rs[0].nthreads; i++) {
    const char *name = rs[0].thr[i].name;
    unsigned occ = 0;
    for (unsigned j = 0; j < i; j++)
      occ += strcmp(rs[0].thr[j].name, name) == 0;
    double w[FLEET_MAX_REPS], u[FLEET_MAX_REPS], sy[FLEET_MAX_REPS];
    unsigned k = 0;
    int shown = 0;
    for (unsigned r = 0; r < n && r < FLEET_MAX_REPS; r++) {
      const fleet_thread *t = thread_nth(&rs[r], name, occ);
      if (t == NULL)
        continue;
      w[k] = t->wake;
      u[k] = t->us;
      sy[k] = t->sys;
      k++;
      shown |= t->shown;
    }
    if (!shown)
      continue;
    fig fw = fig_of(w, k), fu = fig_of(u, k), fs = fig_of(sy, k);
    char label[24]; /* the name, and its order when names repeat */
    if (occ > 0)
      snprintf(label, sizeof label, "%s#%u", name, occ + 1);
    else
      snprintf(label, sizeof label, "%s", name);
    fprintf(stderr,
            " %s %.2f [%.2f-%.2f] wake-ups, %.1f [%.1f-%.1f] us (%.0f%% "
            "sys)",
            label, fw.med, fw.min, fw.max, fu.med, fu.min, fu.max, fs.med);
    if (k < n)
      fprintf(stderr, " (in %u repeats)", k);
  }
  fig g = fig_over(rs, n, G_GENS_PER_TXN), c = fig_over(rs, n, G_COMMIT_MS);
  if (!isnan(g.med))
    fprintf(stderr,
            "; %.1f [%.1f-%.1f] generations per transaction, %.2f "
            "[%.2f-%.2f] ms mean commit",
            g.med, g.min, g.max, c.med, c.min, c.max);
  fprintf(stderr, "\n");
}

/* One BENCH line: value v.med with prec decimals, then min, max and reps
 * when there are repeats (the form bench/summary.awk prints; with one
 * repeat the line is as it was before repeats existed, which bench/limit
 * and bench/quick parse). */
static void bline(const opts *o, int prec, fig v, const char *unit,
                  const char *base, double ratio, const char *bar, int pass) {
  printf("BENCH id=%s value=%.*f", o->id, prec, v.med);
  if (o->reps > 1)
    printf(" min=%.*f max=%.*f reps=%u", prec, v.min, prec, v.max, o->reps);
  printf(" unit=%s baseline=%s ratio=%.2f bar=%s pass=%d\n", unit, base, ratio,
         bar, pass);
}

/* A line whose baseline is the bare server's median of the same figure. */
static void bline_bare(const opts *o, int prec, fig v, const char *unit, fig b,
                       const char *bar, int pass) {
  char base[64];
  snprintf(base, sizeof base, "bare-libuv:%.*f", prec, b.med);
  bline(o, prec, v, unit, base, b.med > 0 ? v.med / b.med : NAN, bar, pass);
}

void fleet_report_bench(const opts *o, const result *gt, const result *bare,
                        int want_bare, int want_gt) {
  char tag[96], unit[160], base[64];
  if (o->idle)
    snprintf(tag, sizeof tag, "agents=%u,idle,clients=%s", o->agents,
             o->client_prio);
  else
    snprintf(tag, sizeof tag, "agents=%u,period=%gs,events=%u,clients=%s",
             o->agents, o->period_ms / 1000.0, o->events, o->client_prio);
  const result *m = want_gt ? gt : bare;
  unsigned n = o->reps;
  fig none = {NAN, NAN, NAN};
  /* Without a same-run floor the lines still print, marked (nan), never
   * passing the ratio bar. */
#define M(which) fig_over(m, n, which)
#define B(which) (want_bare ? fig_over(bare, n, which) : none)
  if (o->idle) {
    fig c = M(G_CORE_PCT), bc = B(G_CORE_PCT);
    snprintf(unit, sizeof unit, "%%core(%s)", tag);
    bline_bare(o, 3, c, unit, bc, "<1", c.med < 1.0);
    fig ba = M(G_BYTES_PER_AGENT);
    snprintf(unit, sizeof unit, "bytes/agent(%s)", tag);
    bline_bare(o, 0, ba, unit, B(G_BYTES_PER_AGENT), "none", 1);
  } else {
    fig us = M(G_US_PER_GEN), bus = B(G_US_PER_GEN);
    double ratio = bus.med > 0 ? us.med / bus.med : NAN;
    snprintf(unit, sizeof unit, "us/gen(%s)", tag);
    bline_bare(o, 1, us, unit, bus, "<=3", ratio > 0 && ratio <= 3);
    bline(o, 1, us, unit, "goal:30", us.med / 30, "<=1", us.med <= 30);
    snprintf(unit, sizeof unit, "cpu-s/Mevents(%s)", tag);
    bline_bare(o, 2, M(G_CPU_PER_MEV), unit, B(G_CPU_PER_MEV), "none", 1);
    fig a = M(G_ACK99);
    snprintf(unit, sizeof unit, "ms(ack-p99,%s)", tag);
    bline_bare(o, 2, a, unit, B(G_ACK99), "<50ms", a.med < 50);
    /* The same ACKs timed when they arrived in the client's socket: the
     * client's own delay to read them left out (it is in ack-p99 above). */
    fig ai = M(G_ACK_IN99);
    snprintf(unit, sizeof unit, "ms(ack-p99-at-socket,%s)", tag);
    bline_bare(o, 2, ai, unit, B(G_ACK_IN99), "<50ms", ai.med < 50);
    if (want_gt) { /* the daemon's own share, beside the client's figure */
      fig d = M(G_DAEMON_ACK99);
      snprintf(unit, sizeof unit, "ms(daemon-ack-p99-bucket,%s)", tag);
      snprintf(base, sizeof base, "client-ack-p99:%.2f", a.med);
      bline(o, 2, d, unit, base, a.med > 0 ? d.med / a.med : NAN, "<50ms",
            d.med >= 0 && d.med <= 50);
    }
  }
  fig w = M(G_WELCOME99);
  snprintf(unit, sizeof unit, "ms(welcome-p99,%s)", tag);
  bline_bare(o, 2, w, unit, B(G_WELCOME99), "<50ms", w.med < 50);
#undef M
#undef B
  fflush(stdout);
}
