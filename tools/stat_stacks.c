/* stat_stacks.c: the "top stacks" of `gentrace stat`: events with a stack
 * (region_begin_stack, instant_stack, log_stack) counted per stack, where a
 * stack is its frame names (proto/stackname.h: symbolized, module+offset
 * or hex), so the same code path in several sessions or generations counts
 * as one.
 *
 * Memory: one count per stack-table entry of the generation being read,
 * and the distinct stacks seen, at most STAT_STACKS_MAX (later new ones are
 * counted under "other").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stackname.h"
#include "varint.h"

#define STAT_STACKS_MAX 100000
#define STAT_STACKS_TOP 10

typedef struct stack_row {
  char *key; /* frame names joined by '\n'; owned */
  size_t len;
  uint64_t events;
} stack_row;

struct stat_stacks {
  gtp_stackname names;
  gtp_wbuf key;
  uint64_t *per; /* counts per stack-table index of the current gen */
  size_t per_cap;
  const gtp_gen *g;
  stack_row *rows; /* open addressing by key */
  size_t cap, used;
  uint64_t events, other;
};

stat_stacks *stat_stacks_new(const gtp_symbolizer *sym) {
  stat_stacks *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  gtp_stackname_init(&s->names, sym);
  gtp_wbuf_init(&s->key, 16u << 20);
  return s;
}

void stat_stacks_free(stat_stacks *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->cap; i++)
    free(s->rows[i].key);
  free(s->rows);
  free(s->per);
  gtp_stackname_fini(&s->names);
  gtp_wbuf_fini(&s->key);
  free(s);
}

static void count_stack(void *ctx, const gtp_event *ev) {
  stat_stacks *s = ctx;
  if (!ev || (ev->type != GTP_EV_REGION_BEGIN_STACK &&
              ev->type != GTP_EV_INSTANT_STACK && ev->type != GTP_EV_LOG_STACK))
    return;
  const gtp_stack_ent *st = gtp_gen_stack(s->g, ev->args[1]);
  if (st)
    s->per[st - s->g->stacks]++;
}

static uint64_t key_hash(const uint8_t *p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int grow(stat_stacks *s) {
  size_t nc = s->cap ? s->cap * 2 : 256;
  stack_row *t = calloc(nc, sizeof *t);
  if (!t)
    return -ENOMEM;
  for (size_t i = 0; i < s->cap; i++) {
    if (!s->rows[i].key)
      continue;
    size_t j = key_hash((const uint8_t *)s->rows[i].key, s->rows[i].len);
    while (t[j & (nc - 1)].key)
      j++;
    t[j & (nc - 1)] = s->rows[i];
  }
  free(s->rows);
  s->rows = t;
  s->cap = nc;
  return 0;
}

/* Adds n events to the stack named by s->key. */
static int add_row(stat_stacks *s, uint64_t n) {
  if ((s->used + 1) * 2 > s->cap && grow(s) < 0)
    return -ENOMEM;
  const uint8_t *k = s->key.data;
  size_t len = s->key.len;
  size_t i = key_hash(k, len);
  for (;; i++) {
    stack_row *r = &s->rows[i & (s->cap - 1)];
    if (r->key && r->len == len && !memcmp(r->key, k, len)) {
      r->events += n;
      return 0;
    }
    if (r->key)
      continue;
    if (s->used >= STAT_STACKS_MAX) {
      s->other += n;
      return 0;
    }
    if (!(r->key = malloc(len ? len : 1)))
      return -ENOMEM;
    memcpy(r->key, k, len);
    r->len = len;
    r->events = n;
    s->used++;
    return 0;
  }
}

int stat_stacks_gen(stat_stacks *s, const gtp_gen *g, const uint8_t *data) {
  if (g->nstacks == 0)
    return 0;
  if (g->nstacks > s->per_cap) {
    uint64_t *p = realloc(s->per, g->nstacks * sizeof *p);
    if (!p)
      return -ENOMEM;
    s->per = p;
    s->per_cap = g->nstacks;
  }
  memset(s->per, 0, g->nstacks * sizeof *s->per);
  s->g = g;
  size_t off;
  int rc = cli_gen_events(g, data, &off, count_stack, s);
  if (rc < 0)
    return rc;
  if ((rc = gtp_stackname_gen(&s->names, g)) < 0)
    return rc;
  for (size_t i = 0; i < g->nstacks; i++) {
    if (!s->per[i])
      continue;
    const gtp_stack_ent *st = &g->stacks[i];
    const uint8_t *p = st->frames, *end = st->frames + st->frames_len;
    gtp_wbuf_reset(&s->key);
    for (uint32_t f = 0; f < st->nframes; f++) {
      uint64_t pc;
      if (gtp_uvarint_get(&p, end, &pc))
        break;
      if (f)
        gtp_wbuf_put(&s->key, "\n", 1);
      if ((rc = gtp_stackname_frame(&s->names, pc, &s->key)) < 0)
        return rc;
    }
    if (s->key.err)
      return s->key.err;
    s->events += s->per[i];
    if ((rc = add_row(s, s->per[i])) < 0)
      return rc;
  }
  return 0;
}

static int by_events(const void *a, const void *b) {
  const stack_row *x = *(const stack_row *const *)a;
  const stack_row *y = *(const stack_row *const *)b;
  if (x->events != y->events)
    return x->events > y->events ? -1 : 1;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->key, y->key, n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The top rows, most events first (ties by name, so output is stable).
 * *n = how many; NULL with *n 0 when there are none (or on ENOMEM). */
static const stack_row **top(const stat_stacks *s, size_t *n) {
  *n = 0;
  if (!s->used)
    return NULL;
  const stack_row **all = malloc(s->used * sizeof *all);
  if (!all)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < s->cap; i++)
    if (s->rows[i].key)
      all[k++] = &s->rows[i];
  qsort(all, k, sizeof *all, by_events);
  *n = k < STAT_STACKS_TOP ? k : STAT_STACKS_TOP;
  return all;
}

void stat_stacks_text(const stat_stacks *s, cli_output *o) {
  if (!s->events)
    return;
  size_t n;
  const stack_row **t = top(s, &n);
  cli_output_printf(o,
                    "\ntop stacks  events_with_stack=%llu distinct=%zu "
                    "other=%llu\n",
                    (unsigned long long)s->events, s->used,
                    (unsigned long long)s->other);
  for (size_t i = 0; i < n; i++) {
    const stack_row *r = t[i];
    cli_output_printf(o, "  %10llu  ", (unsigned long long)r->events);
    for (size_t a = 0, b = 0; b <= r->len; b++) {
      if (b < r->len && r->key[b] != '\n')
        continue;
      if (a)
        cli_output_puts(o, "              ");
      cli_output_escaped(o, r->key + a, b - a, false);
      cli_output_puts(o, "\n");
      a = b + 1;
    }
  }
  free(t);
}

void stat_stacks_json(const stat_stacks *s, cli_output *o) {
  size_t n;
  const stack_row **t = top(s, &n);
  cli_output_printf(o,
                    ",\"stacks\":{\"events\":%llu,\"distinct\":%zu,"
                    "\"other\":%llu,\"top\":[",
                    (unsigned long long)s->events, s->used,
                    (unsigned long long)s->other);
  for (size_t i = 0; i < n; i++) {
    const stack_row *r = t[i];
    cli_output_printf(o, "%s{\"events\":%llu,\"frames\":[", i ? "," : "",
                      (unsigned long long)r->events);
    for (size_t a = 0, b = 0; b <= r->len; b++) {
      if (b < r->len && r->key[b] != '\n')
        continue;
      cli_output_puts(o, a ? ",\"" : "\"");
      gtp_json_escape(cli_output_sink, o, r->key + a, b - a);
      cli_output_puts(o, "\"");
      a = b + 1;
    }
    cli_output_puts(o, "]}");
  }
  cli_output_puts(o, "]}");
  free(t);
}
