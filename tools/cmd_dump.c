/* cmd_dump.c: `gentrace dump FILE|-`, one event per line.
 *
 * Line: TIME \t SESSION \t THREAD \t KIND \t NAME \t ARGS, where TIME is
 * RFC 3339 UTC with ns, NAME is "-" for kinds without one, ARGS is
 * space-separated key=value (empty when none). Names and messages are
 * escaped (\t, \n, \\, \xHH) so that one event is always one line.
 *
 * Within a generation, events of all threads are merged by time: each batch
 * is already in time order (deltas are unsigned), so a k-way merge over the
 * batches gives a global order with memory proportional to the number of
 * batches, not of events. Generations are printed in file order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "varint.h"

typedef struct src {
  gtp_event_iter it;
  gtp_event ev;
  uint64_t thread;
  size_t idx; /* batch order, breaks ties so output is deterministic */
} src;

static bool src_less(const src *a, const src *b) {
  if (a->ev.ticks != b->ev.ticks)
    return a->ev.ticks < b->ev.ticks;
  return a->idx < b->idx;
}

static void heap_down(src **h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && src_less(h[l], h[m]))
      m = l;
    if (l + 1 < n && src_less(h[l + 1], h[m]))
      m = l + 1;
    if (m == i)
      return;
    src *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void put_name(cli_output *o, const gtp_gen *g, uint64_t id) {
  if (id == 0) {
    cli_output_write(o, "-", 1);
    return;
  }
  gtp_str s = gtp_gen_string(g, id);
  if (!s.ptr) {
    /* Dangling id (hostile or damaged input the parser let through):
     * shown, not fatal, so the rest of the trace stays readable. */
    cli_output_printf(o, "?%llu", (unsigned long long)id);
    return;
  }
  if (s.len == 0) {
    cli_output_write(o, "\"\"", 2);
    return;
  }
  cli_output_escaped(o, s.ptr, s.len, false);
}

static void put_stack(cli_output *o, const gtp_gen *g, uint64_t id) {
  cli_output_puts(o, "stack=");
  const gtp_stack_ent *st = gtp_gen_stack(g, id);
  if (!st) {
    cli_output_printf(o, "?%llu", (unsigned long long)id);
    return;
  }
  const uint8_t *p = st->frames, *end = p + st->frames_len;
  for (uint32_t i = 0; i < st->nframes; i++) {
    uint64_t pc;
    if (gtp_uvarint_get(&p, end, &pc))
      break;
    cli_output_printf(o, "%s0x%llx", i ? "," : "", (unsigned long long)pc);
  }
}

static void put_event(cli_output *o, const gtp_gen *g, const char *session,
                      uint64_t thread, const gtp_event *ev) {
  char ts[40];
  cli_rfc3339(gtp_gen_wall_ns(g, ev->ticks), ts);
  const gtp_event_info *info = gtp_event_info_get(ev->type);
  cli_output_printf(o, "%s\t%s\t%llu\t%s\t", ts, session,
                    (unsigned long long)thread, info ? info->name : "unknown");
  switch (ev->type) {
  case GTP_EV_REGION_BEGIN:
  case GTP_EV_INSTANT:
  case GTP_EV_THREAD_NAME:
    put_name(o, g, ev->args[0]);
    cli_output_write(o, "\t", 1);
    break;
  case GTP_EV_REGION_BEGIN_STACK:
  case GTP_EV_INSTANT_STACK:
    put_name(o, g, ev->args[0]);
    cli_output_write(o, "\t", 1);
    put_stack(o, g, ev->args[1]);
    break;
  case GTP_EV_COUNTER:
    put_name(o, g, ev->args[0]);
    cli_output_printf(o, "\tvalue=%lld", (long long)(int64_t)ev->args[1]);
    break;
  case GTP_EV_LOG:
  case GTP_EV_LOG_STACK:
    put_name(o, g, ev->args[0]);
    cli_output_puts(o, "\tmessage=\"");
    cli_output_escaped(o, (const char *)ev->msg, ev->msg ? ev->msg_len : 0,
                       true);
    cli_output_write(o, "\"", 1);
    if (ev->type == GTP_EV_LOG_STACK) {
      cli_output_write(o, " ", 1);
      put_stack(o, g, ev->args[1]);
    }
    break;
  case GTP_EV_TASK_BEGIN:
    put_name(o, g, ev->args[2]);
    cli_output_printf(o, "\ttask=%llu parent=%llu",
                      (unsigned long long)ev->args[0],
                      (unsigned long long)ev->args[1]);
    break;
  case GTP_EV_TASK_END:
    cli_output_printf(o, "-\ttask=%llu", (unsigned long long)ev->args[0]);
    break;
  case GTP_EV_LOST:
    cli_output_printf(o, "-\tcount=%llu", (unsigned long long)ev->args[0]);
    break;
  default: /* REGION_END, and kinds newer than this tool */
    cli_output_write(o, "-\t", 2);
    break;
  }
  cli_output_write(o, "\n", 1);
}

/* Prints one generation in time order. Returns 0, or a decode error with
 * *err_off set to the input offset of the event that failed. */
static int dump_gen(cli_output *o, const cli_input *in, const gtp_gen *g,
                    size_t *err_off) {
  char session[33];
  gtp_session_hex(g->start.session, session);
  size_t n = 0, cap = 16, cursor = 0;
  int rc = 0;
  src *srcs = malloc(cap * sizeof *srcs);
  src **heap = NULL;
  if (!srcs)
    return -ENOMEM;
  gtp_batch b;
  while ((rc = gtp_gen_next_batch(g, &cursor, &b)) == 1) {
    if (n == cap) {
      src *ns = realloc(srcs, cap * 2 * sizeof *srcs);
      if (!ns) {
        rc = -ENOMEM;
        goto out;
      }
      srcs = ns;
      cap *= 2;
    }
    src *s = &srcs[n];
    gtp_event_iter_init(&s->it, &b);
    s->thread = b.thread;
    s->idx = n;
    const uint8_t *at = s->it.p;
    rc = gtp_event_next(&s->it, &s->ev);
    if (rc < 0) {
      *err_off = (size_t)(at - in->data);
      goto out;
    }
    if (rc == 1)
      n++;
  }
  if (rc < 0) {
    *err_off = (size_t)(g->base - in->data);
    goto out;
  }
  heap = malloc((n ? n : 1) * sizeof *heap);
  if (!heap) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    heap[i] = &srcs[i];
  for (size_t i = n / 2; i-- > 0;)
    heap_down(heap, n, i);
  size_t live = n;
  while (live > 0 && !o->err) {
    src *s = heap[0];
    put_event(o, g, session, s->thread, &s->ev);
    const uint8_t *at = s->it.p;
    rc = gtp_event_next(&s->it, &s->ev);
    if (rc < 0) {
      *err_off = (size_t)(at - in->data);
      goto out;
    }
    if (rc == 0)
      heap[0] = heap[--live];
    heap_down(heap, live, 0);
  }
  rc = 0;
out:
  free(heap);
  free(srcs);
  return rc;
}

static int dump_each(void *ctx, const cli_input *in, const gtp_gen *g,
                     size_t *err_off) {
  cli_output *o = ctx;
  /* A Go generation is dumped in its native form (goconv.h). */
  gtp_wbuf nb;
  gtp_gen ng = {0};
  int rc;
  gtp_wbuf_init(&nb, 0);
  const gtp_gen *eg = cli_gen_native(g, &nb, &ng, &rc);
  if (eg)
    rc = dump_gen(o, in, eg, err_off);
  if (eg == &ng)
    gtp_gen_fini(&ng);
  gtp_wbuf_fini(&nb);
  if (rc < 0)
    return rc;
  return o->err ? CLI_EACH_STOP : 0; /* an output error is reported by close */
}

int cmd_dump(int argc, char **argv) {
  cli_opts opt;
  int started = cli_start("dump", argc, argv, 0, cli_help_dump, 1, 1, &opt);
  if (started >= 0)
    return started;
  cli_input in;
  cli_output *o;
  int status = CLI_BAD_INPUT;
  if (cli_io_open(&opt, &in, &o, true) == 0) {
    if (cli_each_gen(&in, dump_each, o) == 0)
      status = CLI_OK;
    if (cli_output_close(o, status == CLI_OK))
      status = CLI_BAD_INPUT;
    cli_io_close(&in, o);
  }
  cli_opts_free(&opt);
  return status;
}
