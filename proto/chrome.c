/* chrome.c: streaming Chrome Trace Event JSON writer (see chrome.h).
 *
 * Design notes.
 *
 * The writer turns parsed generations into one JSON document that is pushed
 * through the caller's sink while it is produced: the HTTP server streams a
 * window of any size to a client, so nothing proportional to the number of
 * events may be held. What is held:
 *
 *   - a 16 KiB output buffer, flushed to the sink whenever it fills (so the
 *     sink sees reasonably sized chunks, not one call per token);
 *   - one entry per session seen (synthetic pid, identity copies for the
 *     metadata block, counters) and, below it, one entry per thread (open
 *     region depth, last thread name);
 *   - a bounded table of open tasks so an 'e' can repeat its 'b' name;
 *   - a bounded list of task ends met, within one generation, before their
 *     task's begin (see "Pairing" below).
 *
 * Pairing. Batches of one generation come in body order, which is the order
 * the threads' buffers were flushed, not time order: a task handed from
 * thread A to thread B may show B's end before A's begin. An end whose task
 * is not open is therefore deferred to the end of its generation, and only
 * then paired (its begin came later in the body) or taken as a task begun
 * before the window. Nothing is dropped: an end or region end whose begin
 * precedes the window gets a synthetic begin at the window start, and a
 * task or region still open at the end is closed at the window end; both
 * carry an args flag (gentrace.begun_before_window /
 * gentrace.closed_at_window_end) so a reader can tell them from recorded
 * events.
 *
 * Invariants.
 *
 *  1. Once err is set (a sink failure or ENOMEM) every call MUST be a no-op
 *     that returns err, otherwise a half-written document would continue
 *     after a hole and look valid to the client.
 *  2. A region END MUST only be emitted when the thread's depth is > 0, and
 *     every depth left > 0 MUST be closed by gtp_chrome_end, otherwise
 *     viewers mis-nest every later slice of that thread.
 *  3. The first event MUST be written without a leading comma and every
 *     later one with one (field `nevents`), otherwise the array is not JSON.
 *  4. The window start MUST be fixed before the first event is formatted
 *     (it is the origin of every ts); when the caller passes 0 it is taken
 *     from the first generation handed to gtp_chrome_gen.
 *  5. Every string that comes from a trace MUST go through json_escape,
 *     otherwise hostile names could break out of the JSON string.
 *  6. A task end MUST be written exactly once: paired with its begin (named)
 *     when the begin was written, before the window otherwise; deferred ends
 *     MUST be resolved before gtp_chrome_gen returns, because task ids of
 *     the next generation may repeat and the deferral is per generation.
 *  7. Out of memory MUST set err, never make the writer carry on with less
 *     (an end without its name, an end not deferred): the same window must
 *     convert to the same document or to an error, otherwise a transient
 *     shortage would hand the client a different trace that looks whole.
 *     Only the fixed bounds (GTP__CHROME_TASKS_MAX) degrade, the same way
 *     every time.
 *
 * States: NEW -> (begin) OPEN -> (end) ENDED. gtp_chrome_gen begins
 * implicitly; nothing is written after ENDED.
 */
#include "chrome.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "goconv.h"
#include "gotrace.h"
#include "stackname.h"
#include "varint.h"

#define GTP__CHROME_BUF (16u << 10)
/* Open tasks remembered for their names. Past this many the 'e' of a task
 * is still written, without a name (viewers match b/e by cat and id). */
#define GTP__CHROME_TASKS_MAX (1u << 16)

typedef struct chrome_thread {
  uint64_t tid;
  uint64_t depth; /* open regions (invariant 2) */
  char *name;     /* last THREAD_NAME written, owned, NUL-terminated */
  size_t name_len;
} chrome_thread;

typedef struct chrome_session {
  uint8_t id[16];
  uint64_t pid;         /* synthetic, 1-based */
  char *service, *host; /* owned copies for the metadata block */
  size_t service_len, host_len;
  uint64_t os_pid;
  uint64_t generations, events, lost;
  chrome_thread *threads;
  size_t nthreads, cap_threads;
} chrome_session;

typedef struct chrome_task {
  uint64_t pid, id; /* pid 0 = empty slot */
  char *name;
  size_t name_len;
  uint64_t open; /* begins written minus ends written (id reuse) */
  bool tomb;     /* deleted slot, keeps probe chains intact */
} chrome_task;

/* A task end met before its task's begin in the generation being written
 * (invariant 6). */
typedef struct chrome_pend {
  uint64_t tid, id;
  int64_t wall;
} chrome_pend;

struct gtp_chrome {
  gtp_sink_fn sink;
  void *ctx;
  int err; /* invariant 1 */
  enum { CH_NEW, CH_OPEN, CH_ENDED } state;

  int64_t win_start, win_end; /* 0 = not given by the caller */
  bool have_start;
  int64_t max_ns;   /* latest event or generation end seen */
  uint64_t nevents; /* JSON array elements written (invariant 3) */

  chrome_session *sessions;
  size_t nsessions, cap_sessions;

  chrome_task *tasks;           /* open addressing, power-of-two size */
  size_t tasks_cap, tasks_used; /* used counts tombstones too */
  size_t tasks_live;
  bool tasks_overflowed; /* some b was not remembered */

  chrome_pend *pend; /* deferred task ends of the current generation */
  size_t npend, cap_pend;

  gtp_stackname names; /* stack frame names (stackname.h) */
  gtp_wbuf frame;      /* one frame's name */

  size_t len;
  char buf[GTP__CHROME_BUF];
};

/* ------------------------------------------------------------ output */

static int ch_flush(gtp_chrome *c) {
  if (c->err)
    return c->err;
  if (c->len) {
    int rc = c->sink(c->ctx, c->buf, c->len);
    c->len = 0;
    if (rc < 0)
      c->err = rc;
  }
  return c->err;
}

static void ch_put(gtp_chrome *c, const void *p, size_t n) {
  if (c->err)
    return;
  if (n > sizeof c->buf - c->len) {
    if (ch_flush(c))
      return;
    if (n >= sizeof c->buf) {
      int rc = c->sink(c->ctx, p, n);
      if (rc < 0)
        c->err = rc;
      return;
    }
  }
  memcpy(c->buf + c->len, p, n);
  c->len += n;
}

static void ch_puts(gtp_chrome *c, const char *s) {
  ch_put(c, s, strlen(s));
}

static int ch_sink(void *ctx, const void *p, size_t n) {
  gtp_chrome *c = ctx;
  ch_put(c, p, n);
  return c->err;
}

static size_t fmt_u64(char *out, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  return n;
}

static void ch_u64(gtp_chrome *c, uint64_t v) {
  char b[20];
  ch_put(c, b, fmt_u64(b, v));
}

static void ch_i64(gtp_chrome *c, int64_t v) {
  if (v < 0) {
    ch_put(c, "-", 1);
    ch_u64(c, (uint64_t)0 - (uint64_t)v);
  } else {
    ch_u64(c, (uint64_t)v);
  }
}

/* ts in microseconds with exactly 3 decimals: the ns offset printed as
 * integer us, '.', ns remainder. Exact, unlike a double. */
static void ch_ts(gtp_chrome *c, int64_t wall_ns) {
  int64_t rel = wall_ns - c->win_start;
  uint64_t mag = rel < 0 ? (uint64_t)0 - (uint64_t)rel : (uint64_t)rel;
  char b[32];
  size_t n = 0;
  if (rel < 0)
    b[n++] = '-';
  n += fmt_u64(b + n, mag / 1000);
  unsigned frac = (unsigned)(mag % 1000);
  b[n++] = '.';
  b[n++] = (char)('0' + frac / 100);
  b[n++] = (char)('0' + frac / 10 % 10);
  b[n++] = (char)('0' + frac % 10);
  ch_put(c, b, n);
}

static void ch_str(gtp_chrome *c, const char *s, size_t n) {
  ch_put(c, "\"", 1);
  if (!c->err)
    gtp_json_escape(ch_sink, c, s, n);
  ch_put(c, "\"", 1);
}

static void ch_hex(gtp_chrome *c, uint64_t v) {
  char b[24];
  int n = snprintf(b, sizeof b, "\"0x%llx\"", (unsigned long long)v);
  ch_put(c, b, (size_t)n);
}

/* Starts one traceEvents element (invariant 3). */
static void ch_elem(gtp_chrome *c) {
  if (c->nevents++)
    ch_put(c, ",\n", 2);
}

/* ------------------------------------------------------ state tables */

static char *dup_bytes(const char *p, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    if (n)
      memcpy(d, p, n);
    d[n] = 0;
  }
  return d;
}

/* Replaces *name with a copy of v; out of memory sets err (invariant 7)
 * and leaves *name as it was. 0 or -ENOMEM. */
static int set_name(gtp_chrome *c, char **name, size_t *len, gtp_str v) {
  char *n = dup_bytes(v.ptr, v.len);
  if (!n)
    return c->err = -ENOMEM;
  free(*name);
  *name = n;
  *len = v.len;
  return 0;
}

static chrome_session *session_get(gtp_chrome *c, const gtp_gen *g,
                                   bool *is_new) {
  *is_new = false;
  for (size_t i = 0; i < c->nsessions; i++)
    if (!memcmp(c->sessions[i].id, g->start.session, 16))
      return &c->sessions[i];
  *is_new = true;
  if (c->nsessions == c->cap_sessions) {
    size_t cap = c->cap_sessions ? c->cap_sessions * 2 : 4;
    chrome_session *s = realloc(c->sessions, cap * sizeof *s);
    if (!s) {
      c->err = -ENOMEM;
      return NULL;
    }
    c->sessions = s;
    c->cap_sessions = cap;
  }
  chrome_session *s = &c->sessions[c->nsessions];
  memset(s, 0, sizeof *s);
  memcpy(s->id, g->start.session, 16);
  s->service = dup_bytes(g->start.service.ptr, g->start.service.len);
  s->host = dup_bytes(g->start.host.ptr, g->start.host.len);
  if (!s->service || !s->host) {
    free(s->service);
    free(s->host);
    c->err = -ENOMEM;
    return NULL;
  }
  s->service_len = g->start.service.len;
  s->host_len = g->start.host.len;
  s->os_pid = g->start.pid;
  s->pid = ++c->nsessions;
  return s;
}

static chrome_thread *thread_get(gtp_chrome *c, chrome_session *s,
                                 uint64_t tid) {
  /* Linear scan from the end: batches of one thread tend to come together
   * and thread counts per session are modest. */
  for (size_t i = s->nthreads; i-- > 0;)
    if (s->threads[i].tid == tid)
      return &s->threads[i];
  if (s->nthreads == s->cap_threads) {
    size_t cap = s->cap_threads ? s->cap_threads * 2 : 8;
    chrome_thread *t = realloc(s->threads, cap * sizeof *t);
    if (!t) {
      c->err = -ENOMEM;
      return NULL;
    }
    s->threads = t;
    s->cap_threads = cap;
  }
  chrome_thread *t = &s->threads[s->nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  return t;
}

static uint64_t task_hash(uint64_t pid, uint64_t id) {
  uint64_t h = id * 0x9e3779b97f4a7c15ull ^ pid * 0xc2b2ae3d27d4eb4full;
  return h ^ h >> 29;
}

static chrome_task *task_find(gtp_chrome *c, uint64_t pid, uint64_t id) {
  if (!c->tasks_cap)
    return NULL;
  size_t mask = c->tasks_cap - 1;
  for (size_t i = task_hash(pid, id) & mask;; i = (i + 1) & mask) {
    chrome_task *t = &c->tasks[i];
    if (t->pid == 0 && !t->tomb)
      return NULL;
    if (t->pid == pid && t->id == id)
      return t;
  }
}

static int task_rehash(gtp_chrome *c, size_t cap) {
  chrome_task *nt = calloc(cap, sizeof *nt);
  if (!nt)
    return -ENOMEM;
  for (size_t i = 0; i < c->tasks_cap; i++) {
    chrome_task *t = &c->tasks[i];
    if (!t->pid)
      continue;
    size_t j = task_hash(t->pid, t->id) & (cap - 1);
    while (nt[j].pid)
      j = (j + 1) & (cap - 1);
    nt[j] = *t;
  }
  free(c->tasks);
  c->tasks = nt;
  c->tasks_cap = cap;
  c->tasks_used = c->tasks_live;
  return 0;
}

/* Remembers an open task's name. Past the table's bound that is not an
 * error of the conversion: the e is then written without a name. Out of
 * memory is (invariant 7). */
static void task_open(gtp_chrome *c, uint64_t pid, uint64_t id, gtp_str name) {
  chrome_task *t = task_find(c, pid, id);
  if (t) { /* task id reused while open: keep the newest name */
    if (set_name(c, &t->name, &t->name_len, name) == 0)
      t->open++;
    return;
  }
  if (c->tasks_live >= GTP__CHROME_TASKS_MAX) {
    c->tasks_overflowed = true;
    return;
  }
  /* Keep the load (tombstones included) under 1/2 so probes stay short and
   * a probe always meets an empty slot; a rehash drops the tombstones and
   * leaves the load at most 1/4, so rehashes stay rare. */
  if ((c->tasks_used + 1) * 2 > c->tasks_cap) {
    size_t cap = c->tasks_cap ? c->tasks_cap : 64;
    while ((c->tasks_live + 1) * 4 > cap)
      cap *= 2;
    if (task_rehash(c, cap)) {
      c->err = -ENOMEM;
      return;
    }
  }
  char *n = dup_bytes(name.ptr, name.len);
  if (!n) {
    c->err = -ENOMEM;
    return;
  }
  size_t mask = c->tasks_cap - 1;
  size_t i = task_hash(pid, id) & mask;
  while (c->tasks[i].pid)
    i = (i + 1) & mask;
  if (!c->tasks[i].tomb)
    c->tasks_used++;
  c->tasks[i] = (chrome_task){
      .pid = pid, .id = id, .name = n, .name_len = name.len, .open = 1};
  c->tasks_live++;
}

/* ------------------------------------------------------------ events */

static void ev_head(gtp_chrome *c, bool comma, const char *ph, uint64_t pid,
                    uint64_t tid, int64_t wall);

/* One 'e'. tk: the open task it ends (named, and closed when its count
 * drops to 0), or NULL for an end written without a name. flag: an args
 * flag for synthetic ends, or NULL. */
static void task_end_write(gtp_chrome *c, chrome_task *tk, uint64_t pid,
                           uint64_t tid, uint64_t id, int64_t wall,
                           const char *flag) {
  ch_elem(c);
  ch_puts(c, "{");
  if (tk) {
    ch_puts(c, "\"name\":");
    ch_str(c, tk->name, tk->name_len);
    ch_puts(c, ",");
    if (--tk->open == 0) {
      free(tk->name);
      *tk = (chrome_task){.tomb = true};
      c->tasks_live--;
    }
  }
  ch_puts(c, "\"cat\":\"task\",\"id\":");
  ch_hex(c, id);
  ev_head(c, true, "e", pid, tid, wall);
  if (flag) {
    ch_puts(c, ",\"args\":{\"");
    ch_puts(c, flag);
    ch_puts(c, "\":true}");
  }
  ch_puts(c, "}");
}

/* A task end whose begin precedes the window: a synthetic, unnamed 'b' at
 * the window start, then the end, so viewers draw a bounded slice. */
static void task_end_unmatched(gtp_chrome *c, uint64_t pid, uint64_t tid,
                               uint64_t id, int64_t wall) {
  if (c->tasks_overflowed) {
    /* Its begin may be one the table could not remember, already written:
     * a second b would be wrong, so the e goes alone. */
    task_end_write(c, NULL, pid, tid, id, wall, NULL);
    return;
  }
  ch_elem(c);
  ch_puts(c, "{\"name\":\"\",\"cat\":\"task\",\"id\":");
  ch_hex(c, id);
  ev_head(c, true, "b", pid, tid, wall < c->win_start ? wall : c->win_start);
  ch_puts(c, ",\"args\":{\"task\":");
  ch_u64(c, id);
  ch_puts(c, ",\"gentrace.begun_before_window\":true}}");
  ch_elem(c);
  ch_puts(c, "{\"name\":\"\",\"cat\":\"task\",\"id\":");
  ch_hex(c, id);
  ev_head(c, true, "e", pid, tid, wall);
  ch_puts(c, "}");
}

/* Defers a task end whose task is not open yet (invariant 6). Past the
 * bound it is resolved at once, as the old writer did. */
static void task_end_defer(gtp_chrome *c, uint64_t pid, uint64_t tid,
                           uint64_t id, int64_t wall) {
  if (c->npend == c->cap_pend) {
    size_t cap = c->cap_pend ? c->cap_pend * 2 : 64;
    if (cap > GTP__CHROME_TASKS_MAX) { /* past the bound: at once */
      task_end_write(c, NULL, pid, tid, id, wall, NULL);
      return;
    }
    chrome_pend *p = realloc(c->pend, cap * sizeof *p);
    if (!p) {
      c->err = -ENOMEM; /* invariant 7 */
      return;
    }
    c->pend = p;
    c->cap_pend = cap;
  }
  c->pend[c->npend++] = (chrome_pend){.tid = tid, .id = id, .wall = wall};
}

/* Resolves the deferred ends of the generation just written: the begin was
 * later in the body (the task is open now) or before the window. */
static void task_ends_resolve(gtp_chrome *c, uint64_t pid) {
  for (size_t i = 0; i < c->npend && !c->err; i++) {
    chrome_pend *p = &c->pend[i];
    chrome_task *tk = task_find(c, pid, p->id);
    if (tk)
      task_end_write(c, tk, pid, p->tid, p->id, p->wall, NULL);
    else
      task_end_unmatched(c, pid, p->tid, p->id, p->wall);
  }
  c->npend = 0;
}

/* The common fields; comma = whether a field precedes them in the object. */
static void ev_head(gtp_chrome *c, bool comma, const char *ph, uint64_t pid,
                    uint64_t tid, int64_t wall) {
  ch_puts(c, comma ? ",\"ph\":\"" : "\"ph\":\"");
  ch_puts(c, ph);
  ch_puts(c, "\",\"ts\":");
  ch_ts(c, wall);
  ch_puts(c, ",\"pid\":");
  ch_u64(c, pid);
  ch_puts(c, ",\"tid\":");
  ch_u64(c, tid);
}

/* args.stack: the pcs of stack-table entry id as hex strings. An unknown id
 * (the writer lost it, or hostile input) gives an empty list. */
static void ev_stack(gtp_chrome *c, const gtp_gen *g, uint64_t id) {
  ch_puts(c, "\"stack\":[");
  const gtp_stack_ent *st = gtp_gen_stack(g, id);
  if (st) {
    const uint8_t *p = st->frames, *end = st->frames + st->frames_len;
    for (uint32_t i = 0; i < st->nframes && !c->err; i++) {
      uint64_t pc;
      if (gtp_uvarint_get(&p, end, &pc))
        break;
      if (i)
        ch_put(c, ",", 1);
      if (!c->names.sym) {
        ch_hex(c, pc);
        continue;
      }
      /* Names come from files and hostile tables: escaped (invariant 5). */
      gtp_wbuf_reset(&c->frame);
      int rc = gtp_stackname_frame(&c->names, pc, &c->frame);
      if (rc < 0) {
        c->err = rc;
        break;
      }
      ch_str(c, (const char *)c->frame.data, c->frame.len);
    }
  }
  ch_puts(c, "]");
}

static void meta_thread_name(gtp_chrome *c, uint64_t pid, chrome_thread *t,
                             gtp_str name) {
  if (t->name && t->name_len == name.len &&
      !memcmp(t->name, name.ptr, name.len))
    return; /* unchanged: one metadata event is enough */
  if (set_name(c, &t->name, &t->name_len, name) != 0)
    return;
  ch_elem(c);
  ch_puts(c, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":");
  ch_u64(c, pid);
  ch_puts(c, ",\"tid\":");
  ch_u64(c, t->tid);
  ch_puts(c, ",\"args\":{\"name\":");
  ch_str(c, name.ptr, name.len);
  ch_puts(c, "}}");
}

static void write_event(gtp_chrome *c, const gtp_gen *g, chrome_session *s,
                        chrome_thread *t, const gtp_event *ev) {
  int64_t wall = gtp_gen_wall_ns(g, ev->ticks);
  if (wall > c->max_ns)
    c->max_ns = wall;
  gtp_str name = {0};
  switch (ev->type) {
  case GTP_EV_REGION_BEGIN:
  case GTP_EV_REGION_BEGIN_STACK:
  case GTP_EV_INSTANT:
  case GTP_EV_INSTANT_STACK:
  case GTP_EV_COUNTER:
  case GTP_EV_LOG:
  case GTP_EV_LOG_STACK:
  case GTP_EV_THREAD_NAME:
    name = gtp_gen_string(g, ev->args[0]);
    break;
  case GTP_EV_TASK_BEGIN:
    name = gtp_gen_string(g, ev->args[2]);
    break;
  default:
    break;
  }
  if (!name.ptr)
    name.len = 0;

  switch (ev->type) {
  case GTP_EV_REGION_BEGIN:
  case GTP_EV_REGION_BEGIN_STACK:
    t->depth++;
    ch_elem(c);
    ch_puts(c, "{\"name\":");
    ch_str(c, name.ptr, name.len);
    ev_head(c, true, "B", s->pid, t->tid, wall);
    if (ev->type == GTP_EV_REGION_BEGIN_STACK) {
      ch_puts(c, ",\"args\":{");
      ev_stack(c, g, ev->args[1]);
      ch_puts(c, "}");
    }
    ch_puts(c, "}");
    break;
  case GTP_EV_REGION_END:
    if (t->depth == 0) {
      /* Invariant 2: its BEGIN is before the window; a synthetic one at the
       * window start keeps the END (nothing the trace holds is dropped). */
      ch_elem(c);
      ch_puts(c, "{\"name\":\"\"");
      /* Never after its end (an event may precede the window's start). */
      ev_head(c, true, "B", s->pid, t->tid,
              wall < c->win_start ? wall : c->win_start);
      ch_puts(c, ",\"args\":{\"gentrace.begun_before_window\":true}}");
      t->depth++;
    }
    t->depth--;
    ch_elem(c);
    ch_puts(c, "{");
    ev_head(c, false, "E", s->pid, t->tid, wall);
    ch_puts(c, "}");
    break;
  case GTP_EV_INSTANT:
  case GTP_EV_INSTANT_STACK:
    ch_elem(c);
    ch_puts(c, "{\"name\":");
    ch_str(c, name.ptr, name.len);
    ev_head(c, true, "i", s->pid, t->tid, wall);
    ch_puts(c, ",\"s\":\"t\"");
    if (ev->type == GTP_EV_INSTANT_STACK) {
      ch_puts(c, ",\"args\":{");
      ev_stack(c, g, ev->args[1]);
      ch_puts(c, "}");
    }
    ch_puts(c, "}");
    break;
  case GTP_EV_COUNTER:
    ch_elem(c);
    ch_puts(c, "{\"name\":");
    ch_str(c, name.ptr, name.len);
    ev_head(c, true, "C", s->pid, t->tid, wall);
    ch_puts(c, ",\"args\":{\"value\":");
    ch_i64(c, (int64_t)ev->args[1]);
    ch_puts(c, "}}");
    break;
  case GTP_EV_LOG:
  case GTP_EV_LOG_STACK:
    ch_elem(c);
    ch_puts(c, "{\"name\":");
    ch_str(c, name.ptr, name.len);
    ch_puts(c, ",\"cat\":\"log\"");
    ev_head(c, true, "i", s->pid, t->tid, wall);
    ch_puts(c, ",\"s\":\"t\",\"args\":{\"message\":");
    ch_str(c, (const char *)ev->msg, ev->msg ? ev->msg_len : 0);
    if (ev->type == GTP_EV_LOG_STACK) {
      ch_puts(c, ",");
      ev_stack(c, g, ev->args[1]);
    }
    ch_puts(c, "}}");
    break;
  case GTP_EV_TASK_BEGIN:
    task_open(c, s->pid, ev->args[0], name);
    ch_elem(c);
    ch_puts(c, "{\"name\":");
    ch_str(c, name.ptr, name.len);
    ch_puts(c, ",\"cat\":\"task\",\"id\":");
    ch_hex(c, ev->args[0]);
    ev_head(c, true, "b", s->pid, t->tid, wall);
    ch_puts(c, ",\"args\":{\"task\":");
    ch_u64(c, ev->args[0]);
    ch_puts(c, ",\"parent\":");
    ch_u64(c, ev->args[1]);
    ch_puts(c, "}}");
    break;
  case GTP_EV_TASK_END: {
    chrome_task *tk = task_find(c, s->pid, ev->args[0]);
    if (tk)
      task_end_write(c, tk, s->pid, t->tid, ev->args[0], wall, NULL);
    else /* its begin may be later in this generation's body */
      task_end_defer(c, s->pid, t->tid, ev->args[0], wall);
    break;
  }
  case GTP_EV_THREAD_NAME:
    meta_thread_name(c, s->pid, t, name);
    break;
  case GTP_EV_LOST:
    s->lost += ev->args[0];
    ch_elem(c);
    ch_puts(c, "{\"name\":\"gentrace.lost\"");
    ev_head(c, true, "i", s->pid, t->tid, wall);
    ch_puts(c, ",\"s\":\"t\",\"args\":{\"count\":");
    ch_u64(c, ev->args[0]);
    ch_puts(c, "}}");
    break;
  default:
    /* A type the reader knows but this writer does not (newer minor):
     * skipped rather than guessed at. */
    break;
  }
}

/* A generation of a Go session (GOTRACE records): written as its native
 * form (proto/goconv.h), so both kinds share one mapping. */
static int chrome_go_gen(gtp_chrome *c, const gtp_gen *g) {
  gtp_wbuf b;
  gtp_gen ng;
  size_t used;
  gtp_wbuf_init(&b, 0);
  int rc = gtp_goconv_gen(g, &b, NULL);
  if (!rc && !(rc = gtp_gen_parse(b.data, b.len, &ng, &used))) {
    rc = gtp_chrome_gen(c, &ng);
    gtp_gen_fini(&ng);
  }
  gtp_wbuf_fini(&b);
  return rc;
}

/* ------------------------------------------------------------ public */

gtp_chrome *gtp_chrome_new(gtp_sink_fn sink, void *ctx, int64_t window_start_ns,
                           int64_t window_end_ns) {
  if (!sink)
    return NULL;
  gtp_chrome *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->sink = sink;
  c->ctx = ctx;
  c->win_start = window_start_ns;
  c->have_start = window_start_ns != 0;
  c->win_end = window_end_ns;
  c->max_ns = INT64_MIN;
  gtp_stackname_init(&c->names, NULL);
  gtp_wbuf_init(&c->frame, 1u << 20);
  return c;
}

void gtp_chrome_set_symbolizer(gtp_chrome *c, const gtp_symbolizer *sym) {
  c->names.sym = sym;
}

int gtp_chrome_begin(gtp_chrome *c) {
  if (c->err || c->state != CH_NEW)
    return c->err ? c->err : (c->state == CH_ENDED ? GTP_E_STATE : 0);
  c->state = CH_OPEN;
  ch_puts(c, "{\"traceEvents\":[\n");
  return c->err;
}

int gtp_chrome_gen(gtp_chrome *c, const gtp_gen *g) {
  int rc = gtp_chrome_begin(c);
  if (rc)
    return rc;
  if (c->state != CH_OPEN)
    return GTP_E_STATE;
  if (gtp_gen_is_go(g))
    return chrome_go_gen(c, g);
  if (!c->have_start) { /* invariant 4 */
    c->win_start = gtp_gen_wall_ns(g, g->clock.start_ticks);
    c->have_start = true;
  }
  if ((rc = gtp_stackname_gen(&c->names, g)) < 0)
    return c->err = rc;
  bool is_new;
  chrome_session *s = session_get(c, g, &is_new);
  if (!s)
    return c->err;
  if (is_new) {
    char label[64];
    ch_elem(c);
    ch_puts(c, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
    ch_u64(c, s->pid);
    ch_puts(c, ",\"tid\":0,\"args\":{\"name\":\"");
    gtp_json_escape(ch_sink, c, s->service, s->service_len);
    ch_puts(c, " (");
    gtp_json_escape(ch_sink, c, s->host, s->host_len);
    snprintf(label, sizeof label, " %llu)\"}}", (unsigned long long)s->os_pid);
    ch_puts(c, label);
  }
  s->generations++;

  size_t cursor = 0;
  gtp_batch b;
  while (!c->err && (rc = gtp_gen_next_batch(g, &cursor, &b)) == 1) {
    chrome_thread *t = thread_get(c, s, b.thread);
    if (!t)
      return c->err;
    gtp_event_iter it;
    gtp_event ev;
    gtp_event_iter_init(&it, &b);
    while (!c->err && (rc = gtp_event_next(&it, &ev)) == 1) {
      s->events++;
      write_event(c, g, s, t, &ev);
    }
    if (rc < 0 && !c->err)
      break; /* parsed generations are valid, so this is hostile input */
  }
  task_ends_resolve(c, s->pid); /* invariant 6, also on the error path */
  if (c->err)
    return c->err;
  if (rc < 0)
    return rc;

  int64_t gen_end = gtp_gen_wall_ns(g, g->clock.end_ticks);
  if (gen_end > c->max_ns)
    c->max_ns = gen_end;
  uint64_t lost = g->end.dropped + g->end.evicted + g->end.rejected;
  if (lost > 0) {
    /* The ledger counts what was lost before this generation was sealed;
     * shown at the generation's start, process-wide (no thread lost it). */
    s->lost += lost;
    ch_elem(c);
    ch_puts(c, "{\"name\":\"gentrace.lost\"");
    ev_head(c, true, "i", s->pid, 0, gtp_gen_wall_ns(g, g->clock.start_ticks));
    ch_puts(c, ",\"s\":\"p\",\"args\":{\"count\":");
    ch_u64(c, lost);
    ch_puts(c, ",\"dropped\":");
    ch_u64(c, g->end.dropped);
    ch_puts(c, ",\"evicted\":");
    ch_u64(c, g->end.evicted);
    ch_puts(c, ",\"rejected\":");
    ch_u64(c, g->end.rejected);
    ch_puts(c, ",\"gen\":");
    ch_u64(c, g->start.gen);
    ch_puts(c, "}}");
  }
  return ch_flush(c) ? c->err : 0;
}

static void ch_rfc3339(gtp_chrome *c, int64_t ns) {
  char b[40];
  size_t n = gtp_rfc3339(ns, b);
  ch_put(c, "\"", 1);
  ch_put(c, b, n);
  ch_put(c, "\"", 1);
}

int gtp_chrome_end(gtp_chrome *c) {
  int rc = gtp_chrome_begin(c);
  if (rc)
    return rc;
  if (c->state != CH_OPEN)
    return GTP_E_STATE;
  int64_t end = c->win_end
                    ? c->win_end
                    : (c->max_ns == INT64_MIN ? c->win_start : c->max_ns);
  /* Invariant 2: close what is still open, innermost first per thread. */
  for (size_t i = 0; i < c->nsessions; i++) {
    chrome_session *s = &c->sessions[i];
    for (size_t j = 0; j < s->nthreads; j++) {
      chrome_thread *t = &s->threads[j];
      for (; t->depth > 0 && !c->err; t->depth--) {
        ch_elem(c);
        ch_puts(c, "{");
        ev_head(c, false, "E", s->pid, t->tid, end);
        ch_puts(c, ",\"args\":{\"gentrace.closed_at_window_end\":true}}");
      }
    }
  }
  /* Tasks still open: closed at the window end like regions. */
  for (size_t i = 0; i < c->tasks_cap && !c->err; i++) {
    chrome_task *tk = &c->tasks[i];
    while (tk->pid && tk->open > 0 && !c->err)
      task_end_write(c, tk, tk->pid, 0, tk->id, end,
                     "gentrace.closed_at_window_end");
  }
  ch_puts(c, "\n],\"metadata\":{\"gentrace_start_ns\":\"");
  ch_i64(c, c->win_start);
  ch_puts(c, "\",\"gentrace_start\":");
  ch_rfc3339(c, c->win_start);
  ch_puts(c, ",\"gentrace_end_ns\":\"");
  ch_i64(c, end);
  ch_puts(c, "\",\"gentrace_end\":");
  ch_rfc3339(c, end);
  ch_puts(c, ",\"sessions\":[");
  for (size_t i = 0; i < c->nsessions; i++) {
    chrome_session *s = &c->sessions[i];
    char hex[33];
    gtp_session_hex(s->id, hex);
    ch_puts(c, i ? ",{\"session\":\"" : "{\"session\":\"");
    ch_puts(c, hex);
    ch_puts(c, "\",\"pid\":");
    ch_u64(c, s->pid);
    ch_puts(c, ",\"service\":");
    ch_str(c, s->service, s->service_len);
    ch_puts(c, ",\"host\":");
    ch_str(c, s->host, s->host_len);
    ch_puts(c, ",\"os_pid\":");
    ch_u64(c, s->os_pid);
    ch_puts(c, ",\"generations\":");
    ch_u64(c, s->generations);
    ch_puts(c, ",\"events\":");
    ch_u64(c, s->events);
    ch_puts(c, ",\"lost\":");
    ch_u64(c, s->lost);
    ch_puts(c, "}");
  }
  ch_puts(c, "]");
  if (c->names.sym) {
    /* How the stack frames were named (docs/SYMBOLS.md). */
    ch_puts(c, ",\"gentrace_frames\":{\"symbolized\":");
    ch_u64(c, c->names.named);
    ch_puts(c, ",\"module_offset\":");
    ch_u64(c, c->names.module_only);
    ch_puts(c, ",\"hex\":");
    ch_u64(c, c->names.hex);
    ch_puts(c, "}");
  }
  ch_puts(c, "},\"displayTimeUnit\":\"ns\"}\n");
  c->state = CH_ENDED;
  return ch_flush(c);
}

void gtp_chrome_free(gtp_chrome *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->nsessions; i++) {
    chrome_session *s = &c->sessions[i];
    for (size_t j = 0; j < s->nthreads; j++)
      free(s->threads[j].name);
    free(s->threads);
    free(s->service);
    free(s->host);
  }
  free(c->sessions);
  for (size_t i = 0; i < c->tasks_cap; i++)
    free(c->tasks[i].name);
  free(c->tasks);
  free(c->pend);
  gtp_stackname_fini(&c->names);
  gtp_wbuf_fini(&c->frame);
  free(c);
}
