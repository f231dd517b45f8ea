/* summary.c: the summary of one generation (see summary.h).
 *
 * One walk over the events. Regions nest per thread, and one thread may
 * have several EVENTS records in a generation (its buffer filled up), so the
 * batches are first listed (record headers only) and sorted by thread
 * (stable: a thread's batches keep their order), then walked thread by
 * thread with one region stack. Tasks begin and end on any thread: their
 * begins and ends are collected and sorted by (task id, ticks), and each
 * begin pairs with the next end of the same id. The same walk checks every
 * event (invariant 4), so the daemon decodes each event once.
 *
 * Invariants:
 *   1. Every allocation is bounded by the generation: names by its strings
 *      (three slots per string: region, task, and counter/log maps), spans
 *      and task marks by its events. Otherwise a hostile generation could
 *      make the daemon allocate without limit.
 *   2. Every span with duration >= span_floor_ns is in spans[] when compute
 *      returns 0, otherwise search (which trusts that) would miss spans.
 *   3. Region nesting deeper than GTP_SUM_DEPTH_MAX is not tracked: the
 *      extra begins and their ends are counted as neither, so the stack
 *      stays bounded and the tracked levels still pair correctly.
 *   4. The walk decodes every event with gtp_event_next's checks and walks
 *      every batch to its end (or to an unknown event type, which ends a
 *      batch as in gtp_gen_parse), so gtp_summary_compute_check's verdict
 *      on a lazily parsed generation is gtp_gen_parse's: gentraced checks
 *      the events only here (one decode per event, not two), and a
 *      generation the verdict refuses is never stored.
 */
#include "summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "varint.h"

/* ------------------------------------------------------------ histogram */

unsigned gtp_sum_bucket(uint64_t dur_ns) {
  uint64_t us = dur_ns / 1000;
  if (us == 0)
    return 0;
  unsigned k = 63 - (unsigned)__builtin_clzll(us);
  unsigned half = k > 0 ? (unsigned)((us >> (k - 1)) & 1) : 0;
  unsigned b = 1 + 2 * k + half;
  return b < GTP_SUM_BUCKETS - 1 ? b : GTP_SUM_BUCKETS - 1;
}

uint64_t gtp_sum_bucket_lo(unsigned b) {
  if (b == 0)
    return 0;
  if (b >= GTP_SUM_BUCKETS - 1)
    return (UINT64_C(1) << 33) * 1000;
  unsigned k = (b - 1) / 2;
  uint64_t lo = UINT64_C(1) << k;
  if ((b - 1) % 2)
    lo += k > 0 ? lo >> 1 : 0;
  return lo * 1000;
}

uint64_t gtp_sum_bucket_hi(unsigned b) {
  if (b >= GTP_SUM_BUCKETS - 1)
    return UINT64_MAX;
  if (b == 0)
    return 1000;
  /* k = 0 has one real bucket (1 us): its "half" bucket is empty. */
  if (b == 1)
    return 2000;
  return gtp_sum_bucket_lo(b + 1 == 2 ? 3 : b + 1);
}

size_t gtp_sum_hist_encode(const uint64_t hist[GTP_SUM_BUCKETS], uint8_t *out) {
  size_t n = 0;
  for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++) {
    if (!hist[b])
      continue;
    out[n++] = (uint8_t)b;
    n += gtp_uvarint_put(out + n, hist[b]);
  }
  return n;
}

int gtp_sum_hist_decode(const uint8_t *p, size_t len,
                        uint64_t hist[GTP_SUM_BUCKETS]) {
  const uint8_t *end = p + len;
  int last = -1;
  while (p < end) {
    unsigned b = *p++;
    uint64_t v;
    if (b >= GTP_SUM_BUCKETS || (int)b <= last ||
        gtp_uvarint_get(&p, end, &v) < 0)
      return GTP_E_CORRUPT;
    last = (int)b;
    hist[b] = hist[b] + v < hist[b] ? UINT64_MAX : hist[b] + v;
  }
  return 0;
}

uint64_t gtp_sum_quantile(const uint64_t hist[GTP_SUM_BUCKETS], double q,
                          uint64_t max_ns) {
  uint64_t total = 0;
  for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++)
    total += hist[b];
  if (!total)
    return 0;
  double want = q * (double)total;
  uint64_t seen = 0;
  for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++) {
    seen += hist[b];
    if (hist[b] && (double)seen >= want) {
      uint64_t hi = gtp_sum_bucket_hi(b);
      return max_ns && hi > max_ns ? max_ns : hi;
    }
  }
  return max_ns;
}

/* Counts one span of d ns in n's totals (saturating) and histogram. */
static void name_add(gtp_sum_name *n, uint64_t d) {
  n->count++;
  n->total_ns = n->total_ns + d < n->total_ns ? UINT64_MAX : n->total_ns + d;
  if (d > n->max_ns)
    n->max_ns = d;
  if (d < n->min_ns)
    n->min_ns = d;
  n->hist[gtp_sum_bucket(d)]++;
}

/* ------------------------------------------------------------ carrying */

/* Adds one span of (kind, name) to s: its name's statistics, and spans[]. */
static int carry_add(gtp_summary *s, uint8_t kind, gtp_str name,
                     uint64_t thread, int64_t start, int64_t end) {
  uint64_t d = end > start ? (uint64_t)(end - start) : 0;
  size_t ni = 0;
  while (ni < s->nnames &&
         !(s->names[ni].kind == kind && s->names[ni].name.len == name.len &&
           (name.len == 0 ||
            memcmp(s->names[ni].name.ptr, name.ptr, name.len) == 0)))
    ni++;
  if (ni == s->nnames) {
    gtp_sum_name *nn = realloc(s->names, (s->nnames + 1) * sizeof *nn);
    if (!nn)
      return -ENOMEM;
    s->names = nn;
    memset(&nn[ni], 0, sizeof nn[ni]);
    nn[ni].kind = kind;
    nn[ni].name = name;
    nn[ni].min_ns = UINT64_MAX;
    s->nnames++;
  }
  gtp_sum_span *ns = realloc(s->spans, (s->nspans + 1) * sizeof *ns);
  if (!ns)
    return -ENOMEM;
  s->spans = ns;
  gtp_sum_name *n = &s->names[ni];
  name_add(n, d);
  gtp_sum_span *sp = &s->spans[s->nspans++];
  sp->name = (uint32_t)ni;
  sp->thread = thread;
  sp->start_ns = start;
  sp->dur_ns = d;
  sp->carried = 1;
  return 0;
}

int gtp_summary_carry(gtp_summary *cur, const gtp_sum_open *prev, size_t nprev,
                      gtp_sum_open **left, size_t *nleft) {
  *left = NULL;
  *nleft = 0;
  uint8_t *closed = calloc(nprev ? nprev : 1, 1);
  gtp_sum_open *out = malloc((nprev + cur->nopens + 1) * sizeof *out);
  if (!closed || !out) {
    free(closed);
    free(out);
    return -ENOMEM;
  }
  for (size_t e = 0; e < cur->nends; e++) {
    const gtp_sum_end *end = &cur->ends[e];
    /* Innermost open region of the thread: the last not-yet-closed entry;
     * a task: the entry with its id. */
    size_t k = nprev;
    while (k-- > 0)
      if (!closed[k] && prev[k].kind == end->kind && prev[k].key == end->key)
        break;
    if (k >= nprev)
      continue; /* its begin is not known (lost or too old) */
    closed[k] = 1;
    if (carry_add(cur, prev[k].kind, prev[k].name, prev[k].thread,
                  prev[k].start_ns, end->end_ns) < 0) {
      free(closed);
      free(out);
      return -ENOMEM;
    }
    if (cur->unmatched_ends)
      cur->unmatched_ends--;
  }
  size_t n = 0;
  for (size_t k = 0; k < nprev && n < GTP_SUM_OPEN_MAX; k++)
    if (!closed[k])
      out[n++] = prev[k];
  for (size_t k = 0; k < cur->nopens && n < GTP_SUM_OPEN_MAX; k++)
    out[n++] = cur->opens[k];
  free(closed);
  *left = out;
  *nleft = n;
  return 0;
}

/* ------------------------------------------------------------- building */

typedef struct sum_build {
  const gtp_gen *g;
  gtp_summary *out;
  /* string index (0..nstrings-1; nstrings = no/unknown name) -> entry + 1 */
  uint32_t *map_region, *map_task, *map_counter, *map_log;
  size_t cap_names, cap_counters, cap_logs, cap_spans, cap_opens, cap_ends;
  uint64_t floor_ns;  /* spans at or over it go to spans[] */
  double ns_per_tick; /* the CLOCK record's rate (gtp_gen_wall_ns's) */
  uint64_t last_id;   /* the string id looked up last, and its index: */
  size_t last_index;  /* events of a batch mostly repeat one name */
  int unknown;        /* a batch held an event type of a newer minor */
} sum_build;

typedef struct batch_ref {
  uint64_t thread;
  size_t cursor; /* gtp_gen_next_batch cursor that yields it */
  size_t order;
} batch_ref;

typedef struct task_mark {
  uint64_t task, ticks, thread;
  uint32_t name; /* string index */
  uint8_t begin;
  size_t order;
} task_mark;

typedef struct open_region {
  uint32_t name; /* string index */
  uint64_t ticks;
} open_region;

static size_t str_index(const gtp_gen *g, uint64_t id) {
  size_t lo = 0, hi = g->nstrings;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->strings[mid].id == id)
      return mid;
    if (g->strings[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return g->nstrings;
}

/* str_index with a one-entry cache (a thread's events mostly repeat the
 * name before: the binary search was a fifth of the walk). Agents number a
 * generation's strings 1, 2, ..., so an id is mostly its own index + 1:
 * that is tried first (nested regions change names at every event). */
static inline size_t name_index(sum_build *sb, uint64_t id) {
  const gtp_gen *g = sb->g;
  if (id - 1 < g->nstrings && g->strings[id - 1].id == id)
    return (size_t)(id - 1);
  if (id != sb->last_id) {
    sb->last_id = id;
    sb->last_index = str_index(sb->g, id);
  }
  return sb->last_index;
}

static gtp_str str_at(const gtp_gen *g, size_t i) {
  gtp_str none = {"", 0};
  return i < g->nstrings ? g->strings[i].s : none;
}

static int grow(void **p, size_t *cap, size_t need, size_t size) {
  return gtp_array_grow(p, cap, need, size, 16);
}

/* A duration in ns from ticks at the generation's rate: one multiply, so
 * the hot loop does no 128-bit division (gtp_gen_wall_ns is called only for
 * the starts of the spans kept). */
static uint64_t dur_of(const sum_build *sb, uint64_t t0, uint64_t t1) {
  if (t1 <= t0)
    return 0;
  double d = (double)(t1 - t0) * sb->ns_per_tick + 0.5;
  return d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
}

/* Adds one span of string index si (kind) to its name entry and, when long
 * enough, to spans[]. */
static int add_span(sum_build *sb, uint8_t kind, size_t si, uint64_t thread,
                    uint64_t t0, uint64_t t1) {
  gtp_summary *o = sb->out;
  uint32_t *map = kind == GTP_SUM_REGION ? sb->map_region : sb->map_task;
  if (!map[si]) {
    if (grow((void **)&o->names, &sb->cap_names, o->nnames + 1,
             sizeof *o->names) < 0)
      return -ENOMEM;
    gtp_sum_name *n = &o->names[o->nnames];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->name = str_at(sb->g, si);
    n->min_ns = UINT64_MAX;
    map[si] = (uint32_t)++o->nnames;
  }
  uint32_t ni = map[si] - 1;
  gtp_sum_name *n = &o->names[ni];
  uint64_t d = dur_of(sb, t0, t1);
  name_add(n, d);
  if (d < sb->floor_ns)
    return 0;
  if (grow((void **)&o->spans, &sb->cap_spans, o->nspans + 1,
           sizeof *o->spans) < 0)
    return -ENOMEM;
  gtp_sum_span *sp = &o->spans[o->nspans++];
  sp->name = ni;
  sp->thread = thread;
  sp->start_ns = gtp_gen_wall_ns(sb->g, t0);
  sp->dur_ns = d;
  sp->carried = 0;
  return 0;
}

static int add_open(sum_build *sb, uint8_t kind, size_t si, uint64_t key,
                    uint64_t thread, uint64_t ticks) {
  gtp_summary *o = sb->out;
  o->open_at_end++;
  if (o->nopens == GTP_SUM_OPEN_MAX)
    return 0;
  if (grow((void **)&o->opens, &sb->cap_opens, o->nopens + 1,
           sizeof *o->opens) < 0)
    return -ENOMEM;
  gtp_sum_open *op = &o->opens[o->nopens++];
  op->kind = kind;
  op->name = str_at(sb->g, si);
  op->key = key;
  op->thread = thread;
  op->start_ns = gtp_gen_wall_ns(sb->g, ticks);
  return 0;
}

static int add_end(sum_build *sb, uint8_t kind, uint64_t key, uint64_t ticks) {
  gtp_summary *o = sb->out;
  o->unmatched_ends++;
  if (o->nends == GTP_SUM_OPEN_MAX)
    return 0;
  if (grow((void **)&o->ends, &sb->cap_ends, o->nends + 1, sizeof *o->ends) < 0)
    return -ENOMEM;
  gtp_sum_end *e = &o->ends[o->nends++];
  e->kind = kind;
  e->key = key;
  e->end_ns = gtp_gen_wall_ns(sb->g, ticks);
  return 0;
}

/* The regions of one thread still open when its batches end. */
static int flush_opens(sum_build *sb, const open_region *stack, size_t depth,
                       uint64_t thread) {
  int rc = 0;
  for (size_t i = 0; i < depth && rc == 0; i++)
    rc = add_open(sb, GTP_SUM_REGION, stack[i].name, thread, thread,
                  stack[i].ticks);
  return rc;
}

/* The counter entry of string index si, made (with v as its first sample's
 * min, max and last) when new; NULL when out of memory. */
static gtp_sum_counter *counter_of(sum_build *sb, size_t si, int64_t v,
                                   uint64_t ticks) {
  gtp_summary *o = sb->out;
  if (!sb->map_counter[si]) {
    if (grow((void **)&o->counters, &sb->cap_counters, o->ncounters + 1,
             sizeof *o->counters) < 0)
      return NULL;
    gtp_sum_counter *c = &o->counters[o->ncounters];
    memset(c, 0, sizeof *c);
    c->name = str_at(sb->g, si);
    c->min = c->max = c->last = v;
    c->last_ticks = ticks;
    sb->map_counter[si] = (uint32_t)++o->ncounters;
  }
  return &o->counters[sb->map_counter[si] - 1];
}

static int add_log(sum_build *sb, size_t si) {
  gtp_summary *o = sb->out;
  if (!sb->map_log[si]) {
    if (grow((void **)&o->logs, &sb->cap_logs, o->nlogs + 1, sizeof *o->logs) <
        0)
      return -ENOMEM;
    o->logs[o->nlogs].name = str_at(sb->g, si);
    o->logs[o->nlogs].count = 0;
    sb->map_log[si] = (uint32_t)++o->nlogs;
  }
  o->logs[sb->map_log[si] - 1].count++;
  return 0;
}

/* -1, 0 or 1 as a < b, a == b, a > b, for the qsort comparators below
 * (any integer type: no subtraction that could overflow). */
#define SUM_CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

static int cmp_batch(const void *a, const void *b) {
  const batch_ref *x = a, *y = b;
  int c = SUM_CMP(x->thread, y->thread);
  return c ? c : SUM_CMP(x->order, y->order);
}

static int cmp_task(const void *a, const void *b) {
  const task_mark *x = a, *y = b;
  int c = SUM_CMP(x->task, y->task);
  if (c == 0)
    c = SUM_CMP(x->ticks, y->ticks);
  return c ? c : SUM_CMP(x->order, y->order);
}

/* Longest first, then earliest. */
static int cmp_span_desc(const void *a, const void *b) {
  const gtp_sum_span *x = a, *y = b;
  int c = SUM_CMP(y->dur_ns, x->dur_ns);
  return c ? c : SUM_CMP(x->start_ns, y->start_ns);
}

/* A thread's walk state across its batches: the region stack. */
typedef struct thread_walk {
  open_region *stack;
  size_t depth;
  uint64_t untracked; /* begins past GTP_SUM_DEPTH_MAX (invariant 3) */
  task_mark **tasks;
  size_t *ntasks, *cap_tasks;
} thread_walk;

static void region_begin(sum_build *sb, thread_walk *w, uint64_t name,
                         uint64_t ticks) {
  if (w->depth == GTP_SUM_DEPTH_MAX) {
    w->untracked++;
    return;
  }
  w->stack[w->depth].name = (uint32_t)name_index(sb, name);
  w->stack[w->depth].ticks = ticks;
  w->depth++;
}

static int region_end(sum_build *sb, thread_walk *w, uint64_t thread,
                      uint64_t ticks) {
  if (w->untracked) {
    w->untracked--;
    return 0;
  }
  if (w->depth == 0)
    return add_end(sb, GTP_SUM_REGION, thread, ticks);
  w->depth--;
  return add_span(sb, GTP_SUM_REGION, w->stack[w->depth].name, thread,
                  w->stack[w->depth].ticks, ticks);
}

/* Every event kind but counters and region begin/end. */
static int other_event(sum_build *sb, thread_walk *w, uint64_t thread,
                       const gtp_event *ev) {
  switch (ev->type) {
  case GTP_EV_REGION_BEGIN_STACK:
    region_begin(sb, w, ev->args[0], ev->ticks);
    return 0;
  case GTP_EV_LOG:
  case GTP_EV_LOG_STACK:
    return add_log(sb, name_index(sb, ev->args[0]));
  case GTP_EV_TASK_BEGIN:
  case GTP_EV_TASK_END: {
    if (grow((void **)w->tasks, w->cap_tasks, *w->ntasks + 1,
             sizeof **w->tasks) < 0)
      return -ENOMEM;
    task_mark *m = &(*w->tasks)[*w->ntasks];
    m->task = ev->args[0];
    m->ticks = ev->ticks;
    m->thread = thread;
    m->begin = ev->type == GTP_EV_TASK_BEGIN;
    m->name = m->begin ? (uint32_t)name_index(sb, ev->args[2]) : 0;
    m->order = *w->ntasks;
    (*w->ntasks)++;
    return 0;
  }
  default:
    return 0;
  }
}

/* A run of one counter: what counter_add of each of its events would do. */
static int counter_run_add(sum_build *sb, const gtp_counter_run *run) {
  gtp_sum_counter *c =
      counter_of(sb, name_index(sb, run->name), run->first, run->first_ticks);
  if (!c)
    return -ENOMEM;
  c->count += run->n;
  if (run->min < c->min)
    c->min = run->min;
  if (run->max > c->max)
    c->max = run->max;
  /* A run's ticks never go back: its last event is the one that counts. */
  if (run->last_ticks >= c->last_ticks) {
    c->last = run->last;
    c->last_ticks = run->last_ticks;
  }
  return 0;
}

/* Checks and summarizes every event of one batch: 0, an event error
 * (GTP_E_UNKNOWN: an unknown type ended the batch), or -ENOMEM. Events are
 * decoded by gtp_event_counter_run and gtp_event_next_inline, the
 * functions gtp_gen_parse checks them with (invariant 4). */
static int walk_batch(sum_build *sb, thread_walk *w, const gtp_batch *b) {
  gtp_event_iter it;
  gtp_event ev;
  gtp_counter_run run;
  int r;
  gtp_event_iter_init(&it, b);
  for (;;) {
    if ((r = gtp_event_counter_run(&it, &run)) == 1) {
      if (counter_run_add(sb, &run) < 0)
        return -ENOMEM;
      continue;
    }
    if (r < 0 || (r = gtp_event_next_inline(&it, &ev)) != 1)
      return r;
    switch (ev.type) {
    case GTP_EV_REGION_BEGIN:
      region_begin(sb, w, ev.args[0], ev.ticks);
      break;
    case GTP_EV_REGION_END:
      if ((r = region_end(sb, w, b->thread, ev.ticks)) < 0)
        return r;
      break;
    default:
      if ((r = other_event(sb, w, b->thread, &ev)) < 0)
        return r;
      break;
    }
  }
}

/* Walks the batches of one generation in thread order. */
static int walk(sum_build *sb, batch_ref *refs, size_t nrefs, task_mark **tasks,
                size_t *ntasks, size_t *cap_tasks) {
  const gtp_gen *g = sb->g;
  thread_walk w = {.tasks = tasks, .ntasks = ntasks, .cap_tasks = cap_tasks};
  w.stack = malloc(GTP_SUM_DEPTH_MAX * sizeof *w.stack);
  if (!w.stack)
    return -ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < nrefs && rc == 0; i++) {
    if (i > 0 && refs[i].thread != refs[i - 1].thread) {
      if ((rc = flush_opens(sb, w.stack, w.depth, refs[i - 1].thread)) < 0)
        break;
      w.depth = 0;
      w.untracked = 0;
    }
    size_t cur = refs[i].cursor;
    gtp_batch b;
    if ((rc = gtp_gen_next_batch(g, &cur, &b)) != 1) {
      rc = rc < 0 ? rc : GTP_E_INTERNAL;
      break;
    }
    rc = walk_batch(sb, &w, &b);
    /* An unknown event type (a newer minor) ends its batch, as in
     * gtp_gen_parse: the other batches are still checked, and the summary
     * is then not kept (its counts would miss events). */
    if (rc == GTP_E_UNKNOWN) {
      sb->unknown = 1;
      rc = 0;
    }
  }
  if (rc == 0 && nrefs > 0)
    rc = flush_opens(sb, w.stack, w.depth, refs[nrefs - 1].thread);
  free(w.stack);
  return rc;
}

/* Pairs task begins and ends (sorted by task, ticks). */
static int pair_tasks(sum_build *sb, task_mark *t, size_t n) {
  if (n > 1) /* qsort(NULL, 0) is undefined */
    qsort(t, n, sizeof *t, cmp_task);
  for (size_t i = 0; i < n; i++) {
    if (!t[i].begin) {
      if (add_end(sb, GTP_SUM_TASK, t[i].task, t[i].ticks) < 0)
        return -ENOMEM;
      continue;
    }
    if (i + 1 < n && t[i + 1].task == t[i].task && !t[i + 1].begin) {
      int rc = add_span(sb, GTP_SUM_TASK, t[i].name, t[i].thread, t[i].ticks,
                        t[i + 1].ticks);
      if (rc < 0)
        return rc;
      i++;
    } else if (add_open(sb, GTP_SUM_TASK, t[i].name, t[i].task, t[i].thread,
                        t[i].ticks) < 0) {
      return -ENOMEM;
    }
  }
  return 0;
}

/* The summary, and with check (not NULL) the verdict of gtp_gen_parse's
 * event check from the same walk (invariant 4). */
static int summarize(const gtp_gen *g, uint64_t floor_ns, size_t spans_max,
                     gtp_summary *out, int *check) {
  memset(out, 0, sizeof *out);
  out->span_floor_ns = floor_ns;
  sum_build sb = {.g = g, .out = out, .floor_ns = floor_ns};
  sb.last_id = 0;
  sb.last_index = str_index(g, 0);
  const gtp_clock *c = &g->clock;
  sb.ns_per_tick =
      c->end_ticks > c->start_ticks && c->end_mono_ns >= c->start_mono_ns
          ? (double)(c->end_mono_ns - c->start_mono_ns) /
                (double)(c->end_ticks - c->start_ticks)
          : 1.0;
  batch_ref *refs = NULL;
  task_mark *tasks = NULL;
  size_t nrefs = 0, cap_refs = 0, ntasks = 0, cap_tasks = 0;
  int rc = -ENOMEM;
  size_t slots = g->nstrings + 1;
  uint32_t *maps = calloc(4 * slots, sizeof *maps);
  if (!maps)
    goto fail;
  sb.map_region = maps;
  sb.map_task = maps + slots;
  sb.map_counter = maps + 2 * slots;
  sb.map_log = maps + 3 * slots;

  size_t cur = 0, at = 0;
  gtp_batch b;
  while ((rc = gtp_gen_next_batch(g, &cur, &b)) == 1) {
    if ((rc = grow((void **)&refs, &cap_refs, nrefs + 1, sizeof *refs)) < 0)
      goto fail;
    refs[nrefs].thread = b.thread;
    refs[nrefs].cursor = at;
    refs[nrefs].order = nrefs;
    nrefs++;
    at = cur;
  }
  if (rc < 0)
    goto fail;
  if (nrefs > 1) /* qsort(NULL, 0) is undefined */
    qsort(refs, nrefs, sizeof *refs, cmp_batch);
  if ((rc = walk(&sb, refs, nrefs, &tasks, &ntasks, &cap_tasks)) < 0)
    goto fail;
  if (check)
    *check = 0; /* every batch was walked to its end or an unknown type */
  if (sb.unknown) {
    rc = GTP_E_UNKNOWN;
    goto fail;
  }
  if ((rc = pair_tasks(&sb, tasks, ntasks)) < 0)
    goto fail;

  /* Invariant 2: cut to the longest GTP_SUM_SPANS_MAX and raise the floor
   * above everything cut. */
  if (out->nspans > 1) /* qsort(NULL, 0) is undefined */
    qsort(out->spans, out->nspans, sizeof *out->spans, cmp_span_desc);
  if (out->nspans > spans_max) {
    out->span_floor_ns = out->spans[spans_max].dur_ns + 1;
    out->nspans = spans_max;
    while (out->nspans > 0 &&
           out->spans[out->nspans - 1].dur_ns < out->span_floor_ns)
      out->nspans--;
  }
  for (size_t i = 0; i < out->nnames; i++)
    if (out->names[i].count == 0)
      out->names[i].min_ns = 0;
  free(maps);
  free(refs);
  free(tasks);
  return 0;
fail:
  free(maps);
  free(refs);
  free(tasks);
  gtp_summary_fini(out);
  if (rc >= 0)
    rc = -ENOMEM;
  /* Out of memory before the walk ended: the check alone, which does not
   * allocate. Any other error is the events' own (the verdict). */
  if (check && rc == -ENOMEM)
    *check = gtp_gen_check_events(g);
  else if (check && rc != GTP_E_UNKNOWN)
    *check = rc;
  return rc;
}

int gtp_summary_compute(const gtp_gen *g, gtp_summary *out) {
  return summarize(g, GTP_SUM_SPAN_FLOOR_NS, GTP_SUM_SPANS_MAX, out, NULL);
}

int gtp_summary_compute_spans(const gtp_gen *g, uint64_t floor_ns,
                              size_t spans_max, gtp_summary *out) {
  return summarize(g, floor_ns, spans_max, out, NULL);
}

int gtp_summary_compute_check(const gtp_gen *g, gtp_summary *out, int *check) {
  *check = 0;
  return summarize(g, GTP_SUM_SPAN_FLOOR_NS, GTP_SUM_SPANS_MAX, out, check);
}

void gtp_summary_fini(gtp_summary *s) {
  free(s->names);
  free(s->counters);
  free(s->logs);
  free(s->spans);
  free(s->opens);
  free(s->ends);
  memset(s, 0, sizeof *s);
}
