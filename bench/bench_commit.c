/* bench_commit: the store's per-generation commit cost for a fleet, with no
 * sockets and no timing noise from the loop: the part of bench_fleet's
 * figure that callgrind can count repeatably on a loaded machine.
 *
 *   bench_commit [--sessions N] [--batch B] [--rounds R] [--services S]
 *                [--gap-us G] [--fleet-events E]
 *
 * Opens a real store (SQLite file in a temp directory, the daemon's
 * pragmas, 16 KiB pages, summaries on), then per round submits B small
 * generations (one thread's EVENTS record of 9 events, the string and
 * stack tables, CLOCK: about 400 bytes, stored raw as the daemon stores a
 * fleet's generations), each from the next of N sessions round robin, and
 * waits for their B completions: one transaction of B generations from B
 * sessions, as the daemon's group commit makes at 10,000 agents (B about
 * 64) or 1,000 agents (B about 20). Prints the process CPU (the store
 * thread does the work) and the bytes written to storage per generation;
 * under `valgrind --tool=callgrind`, two runs of different R give the
 * instructions per generation by their difference (bench/RESULTS.md).
 *
 * --services S (default 2, "checkout" and "frontend"): session i belongs to
 * service "svc-(i mod S)", as bench_fleet's agents do with S = 100; the
 * rollups' upserts are per service and name in a transaction, so their
 * cost per generation grows with the services a batch holds.
 *
 * --gap-us G (default 0): the main thread sleeps G microseconds before each
 * round, so every transaction starts after the store thread idled as long,
 * as the live daemon's does between its group commits (20 ms at 1,000
 * agents on 1 s). The same work then costs more CPU, because whatever ran
 * meanwhile evicted the store thread's code and data from the CPU's
 * caches: --gap-us 20000 against 0 measures that cost per transaction
 * (bench/RESULTS.md, eighth session, helper txfixed). The gap itself is
 * sleep, not CPU, so the figures stay comparable.
 *
 * --fleet-events E (default 0: the fixture's generation above): each
 * generation is bench_fleet's instead (bench/fleet_gen.c: E instants and
 * "request" region pairs, two names, no counter or log; 10 in the fleet
 * benchmark), so the store's instructions are counted on the generation a
 * fleet sends.
 *
 * Output: one BENCH line (no bar: a profile aid), details on stderr. Exit 1
 * when a generation is not stored.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../tests/store/store_fixture.h"
#include "fleet_gen.h"

static unsigned nservices = 2;
static unsigned fleet_events; /* --fleet-events; 0: the fixture's */

static const char *service_of(unsigned session) {
  static char names[1024][16];
  if (nservices == 2)
    return session % 2 ? "checkout" : "frontend";
  unsigned k = session % nservices;
  if (!names[k][0])
    snprintf(names[k], sizeof names[k], "svc-%u", k);
  return names[k];
}

static store_gen *small_gen(unsigned session, uint64_t gen) {
  gtf_spec s;
  gtf_spec_init(&s, session, gen);
  s.threads = 1;
  s.stacks = 0;
  s.service = service_of(session);
  /* gtf_session repeats every 256 sessions: a fleet needs more. */
  gtp_put_u32le(s.session, session + 1);
  gtp_put_u32le(s.session + 4, (session + 1) * 2654435761u);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_gen_end end;
  int rc = gtf_gen_start(&b, &s);
  if (rc == 0)
    rc = fleet_events ? fleet_gen_body(&b, gen, fleet_events, &end)
                      : gtf_body(&b, &s, &end);
  if (rc < 0 || gtp_put_gen_end(&b, &end) < 0 || b.err)
    abort();
  store_gen *g = calloc(1, sizeof *g);
  if (g == NULL)
    abort();
  memcpy(g->session, s.session, 16);
  g->service = sf_strdup(s.service);
  g->host = sf_strdup(s.host);
  g->agent_version = sf_strdup(s.agent_version);
  g->tags_json = sf_strdup("{\"fleet\":\"bench\"}");
  g->pid = s.pid;
  g->process_start_ns = s.process_start_ns;
  g->gen = s.gen;
  g->start_ns = (int64_t)s.start_real_ns;
  g->end_ns = (int64_t)(s.start_real_ns + s.period_ns);
  g->end = end;
  /* Protocol v2: a key hash bound at the first commit. */
  for (unsigned i = 0; i < STORE_KEY_HASH_SIZE; i++)
    g->key_hash[i] = (uint8_t)(s.session_key[i % 16] + i);
  g->has_key = 1;
  g->payload = b.data;
  g->len = b.len;
  return g;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double io_written(void) {
  FILE *f = fopen("/proc/self/io", "r");
  char line[256];
  double v = 0;
  if (f == NULL)
    return 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "write_bytes:", 12) == 0)
      v = strtod(line + 12, NULL);
  fclose(f);
  return v;
}

static sf_done done;
static uint64_t done_ok; /* under done.lock */

/* sf_done_cb, counting every generation stored (its record table keeps
 * only the first 4,096). */
static void done_cb(void *ctx, store_gen *g) {
  if (g->result != 0 && getenv("BENCH_COMMIT_DEBUG"))
    fprintf(stderr, "gen %llu result %d\n", (unsigned long long)g->gen,
            g->result);
  if (g->result == 0) {
    pthread_mutex_lock(&done.lock);
    done_ok++;
    pthread_mutex_unlock(&done.lock);
  }
  sf_done_cb(ctx, g);
}

int main(int argc, char **argv) {
  unsigned sessions = 1000, batch = 20, rounds = 500, gap_us = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    unsigned v = (unsigned)strtoul(argv[i + 1], NULL, 10);
    if (strcmp(argv[i], "--sessions") == 0)
      sessions = v;
    else if (strcmp(argv[i], "--batch") == 0)
      batch = v;
    else if (strcmp(argv[i], "--rounds") == 0)
      rounds = v;
    else if (strcmp(argv[i], "--services") == 0)
      nservices = v;
    else if (strcmp(argv[i], "--gap-us") == 0)
      gap_us = v;
    else if (strcmp(argv[i], "--fleet-events") == 0)
      fleet_events = v;
  }
  store_process_init(); /* as gentraced */
  if (sessions == 0 || batch == 0 || batch > 2048 || rounds == 0 ||
      nservices == 0 || nservices > 1024 || gap_us > 10000000 ||
      fleet_events > 1000) {
    fprintf(stderr, "usage: bench_commit [--sessions N] [--batch B 1..2048]"
                    " [--rounds R] [--services S 1..1024]"
                    " [--gap-us G 0..10000000]"
                    " [--fleet-events E 0..1000]\n");
    return 2;
  }
  sf_dir dir;
  sf_dir_make(&dir);
  sf_done_init(&done);
  store_config c = sf_config(&dir);
  c.zstd_level = 1;
  c.batch_max = batch;
  c.linger_ms = 10000;     /* a transaction is exactly one round's batch */
  c.rollup_hold_ms = 2000; /* as gentraced */
  char *cause = NULL;
  store *s = NULL;
  if (store_open(&c, done_cb, &done, &s, &cause) < 0) {
    fprintf(stderr, "bench_commit: %s\n", cause ? cause : "store_open");
    return 2;
  }
  uint64_t *next = calloc(sessions, sizeof *next);
  size_t len = 0, submitted = 0;
  unsigned cur = 0;
  double c0 = cpu_s(), w0 = io_written();
  for (unsigned r = 0; r < rounds; r++) {
    if (gap_us > 0) {
      struct timespec d = {(time_t)(gap_us / 1000000),
                           (long)(gap_us % 1000000) * 1000};
      while (nanosleep(&d, &d) != 0 && errno == EINTR)
        ; /* sleep the rest */
    }
    for (unsigned i = 0; i < batch; i++) {
      store_gen *g = small_gen(cur, ++next[cur]);
      len = g->len;
      if (store_submit(s, g) != 0)
        abort();
      submitted++;
      cur = (cur + 1) % sessions;
    }
    /* Up to a minute without a completion (valgrind on a loaded machine
     * is slow, not stuck). */
    size_t got = 0;
    for (int idle = 0; idle < 6 && got < submitted; idle++) {
      size_t was = got;
      got = sf_done_wait(&done, submitted);
      if (got > was)
        idle = 0;
    }
    if (got < submitted) {
      fprintf(stderr, "bench_commit: the store did not answer\n");
      return 1;
    }
  }
  double cpu = cpu_s() - c0, wr = io_written() - w0;
  store_stats st;
  store_stats_get(s, &st);
  store_close(s);
  if (getenv("BENCH_COMMIT_KEEP") != NULL)
    fprintf(stderr, "bench_commit: kept %s\n", dir.db);
  else
    sf_dir_remove(&dir);
  fprintf(stderr,
          "bench_commit: sessions=%u batch=%u rounds=%u gap=%uus gens=%zu"
          " payload=%zu bytes stored=%llu cpu=%.3fs (%.0f us/transaction)"
          " written=%.1f MB (%.0f bytes/gen)\n",
          sessions, batch, rounds, gap_us, submitted, len,
          (unsigned long long)done_ok, cpu, cpu * 1e6 / (double)rounds,
          wr / 1e6, wr / (double)submitted);
  /* The longest transaction: the one that crossed the WAL target also ran
   * SQLite's automatic checkpoint (copy and sync of the WAL). */
  fprintf(stderr,
          "bench_commit: %llu transactions, commit mean %.2f ms max %.2f ms\n",
          (unsigned long long)st.transactions,
          st.transactions
              ? (double)st.commit_ns_total / 1e6 / (double)st.transactions
              : 0.0,
          (double)st.commit_ns_max / 1e6);
  printf("BENCH id=COMMIT value=%.2f unit=us/gen(sessions=%u,batch=%u%s%s)"
         " baseline=none:0 ratio=0 bar=none pass=1\n",
         cpu * 1e6 / (double)submitted, sessions, batch,
         gap_us > 0 ? ",gap" : "", fleet_events ? ",fleet" : "");
  return done_ok == submitted ? 0 : 1;
}
