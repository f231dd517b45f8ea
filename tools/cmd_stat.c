/* cmd_stat.c: `gentrace stat [--json] [--symbols DIR] FILE|-`, a summary
 * per session and generation: time span, events by kind, bytes and loss
 * ledger, then totals, and the top stacks (stat_stacks.c).
 *
 * The summary is gathered first (one small record per generation, sessions
 * in order of first appearance) and printed after the whole input decoded,
 * so a damaged input prints nothing but the error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome.h"
#include "cli.h"

typedef struct counts {
  uint64_t events, bytes, batches;
  uint64_t kinds[GTP_EV_COUNT_];
  uint64_t dropped, evicted, rejected, lost_marked;
  int64_t start_ns, end_ns;
} counts;

typedef struct gen_stat {
  uint64_t gen;
  counts c;
} gen_stat;

typedef struct sess_stat {
  uint8_t id[16];
  gtp_str service, host, agent; /* borrowed from the input */
  uint64_t pid;
  gen_stat *gens;
  size_t ngens, cap;
  counts c;
} sess_stat;

static void counts_add(counts *to, const counts *c, bool first) {
  to->events += c->events;
  to->bytes += c->bytes;
  to->batches += c->batches;
  for (int k = 0; k < GTP_EV_COUNT_; k++)
    to->kinds[k] += c->kinds[k];
  to->dropped += c->dropped;
  to->evicted += c->evicted;
  to->rejected += c->rejected;
  to->lost_marked += c->lost_marked;
  if (first || c->start_ns < to->start_ns)
    to->start_ns = c->start_ns;
  if (first || c->end_ns > to->end_ns)
    to->end_ns = c->end_ns;
}

static void count_event(void *ctx, const gtp_event *ev) {
  counts *c = ctx;
  if (!ev) {
    c->batches++;
    return;
  }
  c->events++;
  if (ev->type < GTP_EV_COUNT_)
    c->kinds[ev->type]++;
  if (ev->type == GTP_EV_LOST)
    c->lost_marked += ev->args[0];
}

/* Counts one generation's events; a decode error sets *err_off. */
static int gen_count(const cli_input *in, const gtp_gen *g, counts *c,
                     size_t *err_off) {
  memset(c, 0, sizeof *c);
  c->bytes = g->size;
  c->start_ns = gtp_gen_wall_ns(g, g->clock.start_ticks);
  c->end_ns = gtp_gen_wall_ns(g, g->clock.end_ticks);
  c->dropped = g->end.dropped;
  c->evicted = g->end.evicted;
  c->rejected = g->end.rejected;
  int rc = cli_gen_events(g, in->data, err_off, count_event, c);
  return rc < 0 ? rc : 0;
}

static sess_stat *sess_get(sess_stat **ss, size_t *n, size_t *cap,
                           const gtp_gen *g) {
  for (size_t i = 0; i < *n; i++)
    if (!memcmp((*ss)[i].id, g->start.session, 16))
      return &(*ss)[i];
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 4;
    sess_stat *ns = realloc(*ss, nc * sizeof *ns);
    if (!ns)
      return NULL;
    *ss = ns;
    *cap = nc;
  }
  sess_stat *s = &(*ss)[(*n)++];
  memset(s, 0, sizeof *s);
  memcpy(s->id, g->start.session, 16);
  s->service = g->start.service;
  s->host = g->start.host;
  s->agent = g->start.agent_version;
  s->pid = g->start.pid;
  return s;
}

static void text_kinds(cli_output *o, const counts *c, const char *indent) {
  for (int k = 1; k < GTP_EV_COUNT_; k++) {
    const gtp_event_info *info = gtp_event_info_get((uint8_t)k);
    if (c->kinds[k] && info)
      cli_output_printf(o, "%s%-20s %12llu\n", indent, info->name,
                        (unsigned long long)c->kinds[k]);
  }
}

static void text_duration(char *out, size_t n, int64_t ns) {
  snprintf(out, n, "%lld.%06llds", (long long)(ns / 1000000000),
           (long long)((ns < 0 ? -ns : ns) % 1000000000 / 1000));
}

static void print_text(cli_output *o, sess_stat *ss, size_t n,
                       const counts *tot, size_t ngens) {
  for (size_t i = 0; i < n; i++) {
    sess_stat *s = &ss[i];
    char hex[33];
    gtp_session_hex(s->id, hex);
    cli_output_printf(o, "session %s  service=", hex);
    cli_output_escaped(o, s->service.ptr, s->service.len, false);
    cli_output_puts(o, " host=");
    cli_output_escaped(o, s->host.ptr, s->host.len, false);
    cli_output_printf(o, " pid=%llu agent=", (unsigned long long)s->pid);
    cli_output_escaped(o, s->agent.ptr, s->agent.len, false);
    cli_output_puts(o, "\n");
    cli_output_printf(o, "  %8s  %-30s  %12s  %10s  %10s  %8s  %8s  %8s\n",
                      "gen", "start (UTC)", "duration", "events", "bytes",
                      "dropped", "evicted", "rejected");
    for (size_t j = 0; j < s->ngens; j++) {
      gen_stat *g = &s->gens[j];
      char ts[40], dur[32];
      cli_rfc3339(g->c.start_ns, ts);
      text_duration(dur, sizeof dur, g->c.end_ns - g->c.start_ns);
      cli_output_printf(
          o, "  %8llu  %-30s  %12s  %10llu  %10llu  %8llu  %8llu  %8llu\n",
          (unsigned long long)g->gen, ts, dur, (unsigned long long)g->c.events,
          (unsigned long long)g->c.bytes, (unsigned long long)g->c.dropped,
          (unsigned long long)g->c.evicted, (unsigned long long)g->c.rejected);
    }
    char a[40], b[40];
    cli_rfc3339(s->c.start_ns, a);
    cli_rfc3339(s->c.end_ns, b);
    cli_output_printf(
        o,
        "  span %s .. %s  generations=%zu events=%llu "
        "bytes=%llu lost=%llu\n",
        a, b, s->ngens, (unsigned long long)s->c.events,
        (unsigned long long)s->c.bytes,
        (unsigned long long)(s->c.dropped + s->c.evicted + s->c.rejected));
    text_kinds(o, &s->c, "    ");
    cli_output_puts(o, "\n");
  }
  cli_output_printf(o,
                    "total  sessions=%zu generations=%zu events=%llu "
                    "bytes=%llu\n",
                    n, ngens, (unsigned long long)tot->events,
                    (unsigned long long)tot->bytes);
  cli_output_printf(
      o,
      "  lost=%llu (dropped=%llu evicted=%llu rejected=%llu) "
      "lost_markers=%llu\n",
      (unsigned long long)(tot->dropped + tot->evicted + tot->rejected),
      (unsigned long long)tot->dropped, (unsigned long long)tot->evicted,
      (unsigned long long)tot->rejected, (unsigned long long)tot->lost_marked);
  if (ngens) {
    char a[40], b[40], dur[32];
    cli_rfc3339(tot->start_ns, a);
    cli_rfc3339(tot->end_ns, b);
    text_duration(dur, sizeof dur, tot->end_ns - tot->start_ns);
    cli_output_printf(o, "  span %s .. %s (%s)\n", a, b, dur);
  }
  text_kinds(o, tot, "    ");
}

static void json_str(cli_output *o, const char *p, size_t n) {
  cli_output_write(o, "\"", 1);
  gtp_json_escape(cli_output_sink, o, p, n);
  cli_output_write(o, "\"", 1);
}

static void json_counts(cli_output *o, const counts *c) {
  char a[40], b[40];
  cli_rfc3339(c->start_ns, a);
  cli_rfc3339(c->end_ns, b);
  cli_output_printf(
      o,
      "\"start\":\"%s\",\"end\":\"%s\",\"start_ns\":\"%lld\","
      "\"end_ns\":\"%lld\",\"events\":%llu,\"bytes\":%llu,"
      "\"batches\":%llu,\"dropped\":%llu,\"evicted\":%llu,"
      "\"rejected\":%llu,\"lost\":%llu,\"lost_markers\":%llu,"
      "\"kinds\":{",
      a, b, (long long)c->start_ns, (long long)c->end_ns,
      (unsigned long long)c->events, (unsigned long long)c->bytes,
      (unsigned long long)c->batches, (unsigned long long)c->dropped,
      (unsigned long long)c->evicted, (unsigned long long)c->rejected,
      (unsigned long long)(c->dropped + c->evicted + c->rejected),
      (unsigned long long)c->lost_marked);
  bool first = true;
  for (int k = 1; k < GTP_EV_COUNT_; k++) {
    const gtp_event_info *info = gtp_event_info_get((uint8_t)k);
    if (!info)
      continue;
    cli_output_printf(o, "%s\"%s\":%llu", first ? "" : ",", info->name,
                      (unsigned long long)c->kinds[k]);
    first = false;
  }
  cli_output_puts(o, "}");
}

static void print_json(cli_output *o, sess_stat *ss, size_t n,
                       const counts *tot, size_t ngens,
                       const stat_stacks *stacks) {
  cli_output_puts(o, "{\"sessions\":[");
  for (size_t i = 0; i < n; i++) {
    sess_stat *s = &ss[i];
    char hex[33];
    gtp_session_hex(s->id, hex);
    cli_output_printf(o, "%s\n{\"session\":\"%s\",\"service\":", i ? "," : "",
                      hex);
    json_str(o, s->service.ptr, s->service.len);
    cli_output_puts(o, ",\"host\":");
    json_str(o, s->host.ptr, s->host.len);
    cli_output_printf(
        o, ",\"pid\":%llu,\"agent_version\":", (unsigned long long)s->pid);
    json_str(o, s->agent.ptr, s->agent.len);
    cli_output_printf(o, ",\"generation_count\":%zu,", s->ngens);
    json_counts(o, &s->c);
    cli_output_puts(o, ",\"generations\":[");
    for (size_t j = 0; j < s->ngens; j++) {
      cli_output_printf(o, "%s\n {\"gen\":%llu,", j ? "," : "",
                        (unsigned long long)s->gens[j].gen);
      json_counts(o, &s->gens[j].c);
      cli_output_puts(o, "}");
    }
    cli_output_puts(o, "]}");
  }
  cli_output_printf(o, "],\n\"totals\":{\"sessions\":%zu,\"generations\":%zu,",
                    n, ngens);
  json_counts(o, tot);
  cli_output_puts(o, "}");
  stat_stacks_json(stacks, o);
  cli_output_puts(o, "}\n");
}

/* Everything stat gathers before it prints. */
typedef struct stat_ctx {
  sess_stat *ss;
  size_t nss, capss, ngens;
  counts tot;
  stat_stacks *stacks;
} stat_ctx;

static int stat_gen(void *ctx, const cli_input *in, const gtp_gen *g,
                    size_t *err_off) {
  stat_ctx *st = ctx;
  gen_stat gs = {.gen = g->start.gen};
  /* A Go generation is counted in its native form (goconv.h), its bytes
   * and identity taken from the stored one. */
  gtp_wbuf nb;
  gtp_gen native = {0};
  int rc;
  gtp_wbuf_init(&nb, 0);
  const gtp_gen *eg = cli_gen_native(g, &nb, &native, &rc);
  if (eg)
    rc = gen_count(in, eg, &gs.c, err_off);
  if (eg && rc == 0)
    rc = stat_stacks_gen(st->stacks, eg, in->data);
  gs.c.bytes = g->size;
  if (eg == &native)
    gtp_gen_fini(&native);
  gtp_wbuf_fini(&nb);
  if (rc < 0)
    return rc;
  sess_stat *s = sess_get(&st->ss, &st->nss, &st->capss, g);
  if (!s)
    goto oom;
  if (s->ngens == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 16;
    gen_stat *ng = realloc(s->gens, nc * sizeof *ng);
    if (!ng)
      goto oom;
    s->gens = ng;
    s->cap = nc;
  }
  s->gens[s->ngens++] = gs;
  counts_add(&s->c, &gs.c, s->ngens == 1);
  counts_add(&st->tot, &gs.c, st->ngens == 0);
  st->ngens++;
  return 0;
oom:
  fprintf(stderr, "gentrace: %s: %s\n", in->name, gtp_strerror(-ENOMEM));
  return CLI_EACH_REPORTED;
}

int cmd_stat(int argc, char **argv) {
  cli_opts opt;
  int started = cli_start("stat", argc, argv, CLI_F_JSON | CLI_F_SYMBOLS,
                          cli_help_stat, 1, 1, &opt);
  if (started >= 0)
    return started;
  int status = CLI_BAD_INPUT;
  stat_ctx st = {0};
  cli_input in;
  cli_output *o;
  struct cli_sym *sym = cli_sym_open(&opt, "stat");
  if (!sym) {
    cli_opts_free(&opt);
    return CLI_USAGE;
  }
  if (!(st.stacks = stat_stacks_new(cli_sym_get(sym)))) {
    fprintf(stderr, "gentrace: out of memory\n");
    goto fail_io;
  }
  if (cli_io_open(&opt, &in, &o, false) < 0)
    goto fail_io;
  if (cli_each_gen(&in, stat_gen, &st))
    goto fail_read;

  if (cli_output_open(o, opt.out))
    goto fail_read;
  if (opt.json)
    print_json(o, st.ss, st.nss, &st.tot, st.ngens, st.stacks);
  else {
    print_text(o, st.ss, st.nss, &st.tot, st.ngens);
    stat_stacks_text(st.stacks, o);
  }
  status = cli_output_close(o, true) ? CLI_BAD_INPUT : CLI_OK;

fail_read:
  /* Session identities borrow from the input: free them before it. */
  for (size_t i = 0; i < st.nss; i++)
    free(st.ss[i].gens);
  free(st.ss);
  cli_io_close(&in, o);
fail_io:
  stat_stacks_free(st.stacks);
  cli_sym_close(sym);
  cli_opts_free(&opt);
  return status;
}
