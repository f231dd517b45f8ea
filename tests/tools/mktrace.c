/* mktrace.c: writes deterministic sample traces for the CLI tests and
 * prints what it wrote, so the tests compare the CLI against known counts.
 *
 *   mktrace [--sessions N] [--gens N] [--first-session K] [--first-gen G]
 *           [--start UNIX_NS] [--open-region] [--bad-event] OUT
 *
 * Every generation of every session holds two threads and every event kind
 * (stack variants, a LOST marker, a task, a log message with tabs, newlines,
 * quotes and an invalid UTF-8 byte). Generation 1 of each session (relative
 * index 1) carries a ledger (dropped=3 evicted=2). Generations of the
 * sessions interleave in the file, one second apart per index. --bad-event
 * puts an undecodable event (unknown type) in the last generation, with a
 * correct manifest, so only event decoding can catch it. Stdout gets
 * key=value lines: sessions, generations, events, lost_ledger, lost_markers
 * and one per event kind.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracebuild.h"

#define THREAD_MAIN 1001
#define THREAD_WORKER 1002
#define MS 1000000ull

static const char log_msg[] = "GET /a\tb\nc \"q\" \\ \xff caf\xc3\xa9";

static void write_gen(tb *t, unsigned sess, uint64_t gen, unsigned idx,
                      int64_t start, bool open_region, bool bad_event) {
  uint8_t id[16];
  tb_session(id, sess);
  uint64_t t0 = 5000000000ull + idx * 1000 * MS + sess * 100000ull;
  tb_gen_begin(t, id, gen, sess % 2 ? "db" : "api", "host-1", 4000 + sess,
               start + (int64_t)(idx * 1000 * MS + sess * 100000ull), t0);
  uint64_t pcs1[] = {0x401000, 0x402abc, 0x7f0000001234};
  uint64_t pcs2[] = {0x401010};
  uint64_t st1 = tb_stack(t, pcs1, 3), st2 = tb_stack(t, pcs2, 1);
  uint64_t task = 1000 * gen + 1;

  tb_batch_begin(t, THREAD_MAIN, t0);
  uint64_t k = t0 + MS;
  if (idx == 0)
    tb_ev(t, GTP_EV_THREAD_NAME, k, tb_str(t, "main"), 0, 0);
  tb_ev(t, GTP_EV_REGION_BEGIN, k += MS, tb_str(t, "request"), 0, 0);
  tb_ev(t, GTP_EV_INSTANT, k += MS, tb_str(t, "tick"), 0, 0);
  tb_ev(t, GTP_EV_COUNTER, k += MS, tb_str(t, "queue"),
        (uint64_t)(int64_t)(-5 + (int64_t)gen), 0);
  tb_ev_msg(t, GTP_EV_LOG, k += MS, tb_str(t, "http"), 0, 0, log_msg,
            sizeof log_msg - 1);
  tb_ev(t, GTP_EV_TASK_BEGIN, k += MS, task, 0, tb_str(t, "job"));
  tb_ev(t, GTP_EV_REGION_BEGIN_STACK, k += MS, tb_str(t, "inner"), st1, 0);
  tb_ev(t, GTP_EV_INSTANT_STACK, k += MS, tb_str(t, "mark"), st1, 0);
  tb_ev_msg(t, GTP_EV_LOG_STACK, k += MS, tb_str(t, "warn"), st2, 0, "slow", 4);
  tb_ev(t, GTP_EV_REGION_END, k += MS, 0, 0, 0);
  if (!open_region)
    tb_ev(t, GTP_EV_REGION_END, k += MS, 0, 0, 0);
  tb_ev(t, GTP_EV_TASK_END, k += MS, task, 0, 0);
  tb_batch_end(t);

  tb_batch_begin(t, THREAD_WORKER, t0);
  k = t0 + MS + MS / 2;
  if (idx == 0)
    tb_ev(t, GTP_EV_THREAD_NAME, k, tb_str(t, "worker"), 0, 0);
  tb_ev(t, GTP_EV_COUNTER, k += MS, tb_str(t, "depth"), 7, 0);
  tb_ev(t, GTP_EV_LOST, k += MS, 4, 0, 0);
  tb_ev(t, GTP_EV_REGION_BEGIN, k += MS, tb_str(t, "work"), 0, 0);
  tb_ev(t, GTP_EV_REGION_END, k += MS, 0, 0, 0);
  if (bad_event) {
    /* An event type no reader knows, inside a batch whose header counts
     * it: the generation's manifest and CRC are right, so only decoding
     * the events finds it. */
    static const uint8_t bad[] = {0xc8, 0x00};
    gtp_wbuf_put(&t->ev, bad, sizeof bad);
    t->nev++;
  }
  tb_batch_end(t);

  tb_gen_end(t, t0 + 1000 * MS, idx == 1 ? 3 : 0, idx == 1 ? 2 : 0, 0);
}

static int usage(void) {
  fprintf(stderr, "usage: mktrace [--sessions N] [--gens N] "
                  "[--first-session K] [--first-gen G] [--start NS] "
                  "[--open-region] [--bad-event] OUT\n");
  return 2;
}

int main(int argc, char **argv) {
  unsigned nsess = 2, ngens = 3, first_sess = 0;
  uint64_t first_gen = 0;
  int64_t start = 1795316645000000000; /* 2026-11-22T03:04:05Z */
  bool open_region = false, bad_event = false;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--sessions") && has)
      nsess = (unsigned)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(a, "--gens") && has)
      ngens = (unsigned)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(a, "--first-session") && has)
      first_sess = (unsigned)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(a, "--first-gen") && has)
      first_gen = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(a, "--start") && has)
      start = strtoll(argv[++i], NULL, 0);
    else if (!strcmp(a, "--open-region"))
      open_region = true;
    else if (!strcmp(a, "--bad-event"))
      bad_event = true;
    else if (a[0] != '-' && !out)
      out = a;
    else
      return usage();
  }
  if (!out)
    return usage();

  tb *t = malloc(sizeof *t);
  if (!t)
    return 1;
  tb_init(t);
  uint64_t ledger = 0;
  for (unsigned g = 0; g < ngens; g++)
    for (unsigned s = 0; s < nsess; s++) {
      write_gen(t, first_sess + s, first_gen + g, g, start,
                open_region && g + 1 == ngens,
                bad_event && g + 1 == ngens && s + 1 == nsess);
      ledger += g == 1 ? 5 : 0;
    }
  if (t->out.err) {
    fprintf(stderr, "mktrace: %s\n", gtp_strerror(t->out.err));
    return 1;
  }
  FILE *f = fopen(out, "wb");
  if (!f || fwrite(t->out.data, 1, t->out.len, f) != t->out.len || fclose(f)) {
    perror(out);
    return 1;
  }
  printf("sessions=%u\ngenerations=%u\nevents=%llu\nbytes=%zu\n"
         "lost_ledger=%llu\nlost_markers=%llu\n",
         nsess, nsess * ngens, (unsigned long long)t->events, t->out.len,
         (unsigned long long)ledger,
         (unsigned long long)(4 * t->by_type[GTP_EV_LOST]));
  for (int k = 1; k < GTP_EV_COUNT_; k++)
    printf("%s=%llu\n", gtp_event_info_get((uint8_t)k)->name,
           (unsigned long long)t->by_type[k]);
  tb_fini(t);
  free(t);
  return 0;
}
