/* goconv.c: a Go generation as a native one (see goconv.h).
 *
 * Design notes. The Go iterator yields events in time order across all Ms;
 * the converter appends each to a pending batch of its thread (one growable
 * buffer per thread), written as an EVENTS record when full and at the end.
 * One thread's batches thus come in time order (what native readers
 * assume), and batches stay full even when goroutines interleave event by
 * event. Thread names are written as a thread_name event before a thread's
 * first event, with string ids past the Go table's largest id.
 *
 * Invariants.
 *
 *  1. Every native batch holds at most GTP_BATCH_MAX event bytes and its
 *     events' ticks never decrease (deltas are unsigned).
 *  2. The output generation passes gtp_gen_parse: manifest computed from the
 *     body as written, exactly one CLOCK, unique string ids (Go ids are
 *     unique after gtp_go_parse; synthetic ones are above them).
 *  3. Memory: the output buffer plus the pending batches, together bounded
 *     by the output's limit (the conversion stops with GTP_E_TOOBIG past
 *     it), plus one table entry per distinct thread.
 */
#include "goconv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gotrace.h"
#include "text.h"
#include "varint.h"

#define STRINGS_PER_RECORD 512 /* 512 x (1 KiB + ids) < GTP_RECORD_MAX */

/* One thread's pending events: appended in time order, written as an
 * EVENTS record when it would pass GTP_BATCH_MAX and at the end. */
typedef struct tbuf {
  uint64_t tid, base, prev, n;
  uint8_t *ev;
  size_t len, cap;
} tbuf;

typedef struct conv {
  gtp_wbuf *out;
  uint64_t gen;
  int64_t base_wall;
  /* threads, in order of first event; index: open addressing on tid,
   * slots hold position + 1, load <= 1/2 */
  tbuf *th;
  size_t nth, cap_th;
  uint32_t *idx;
  size_t cap_idx;
  size_t held; /* event bytes in all tbufs (bounded by out's limit) */
  uint64_t next_sid;
  gtp_string_ent *extra;
  size_t nextra, cap_extra;
  char *pool; /* name bytes; extra[].s point here after the walk */
  size_t pool_len, pool_cap;
  int rc;
} conv;

static int grow(void **a, size_t *cap, size_t need, size_t elem) {
  return gtp_array_grow(a, cap, need, elem, 64);
}

static void flush(conv *c, tbuf *t) {
  if (t->n && !c->rc) {
    int rc =
        gtp_put_batch(c->out, c->gen, t->tid, t->base, t->n, t->ev, t->len);
    if (rc)
      c->rc = rc;
  }
  c->held -= t->len;
  t->len = 0;
  t->n = 0;
}

static uint64_t tid_hash(uint64_t t) {
  t *= 0x9e3779b97f4a7c15ull;
  return t ^ t >> 29;
}

/* The buffer of thread tid; *created when it is new. */
static tbuf *thread_of(conv *c, uint64_t tid, bool *created) {
  *created = false;
  if ((c->nth + 1) * 2 > c->cap_idx) {
    size_t cap = c->cap_idx ? c->cap_idx * 2 : 64;
    uint32_t *ix = calloc(cap, sizeof *ix);
    if (!ix || c->nth >= UINT32_MAX - 1) {
      free(ix);
      c->rc = -ENOMEM;
      return NULL;
    }
    for (size_t i = 0; i < c->nth; i++) {
      size_t j = tid_hash(c->th[i].tid) & (cap - 1);
      while (ix[j])
        j = (j + 1) & (cap - 1);
      ix[j] = (uint32_t)(i + 1);
    }
    free(c->idx);
    c->idx = ix;
    c->cap_idx = cap;
  }
  size_t mask = c->cap_idx - 1;
  for (size_t i = tid_hash(tid) & mask;; i = (i + 1) & mask) {
    if (c->idx[i] && c->th[c->idx[i] - 1].tid == tid)
      return &c->th[c->idx[i] - 1];
    if (!c->idx[i]) {
      if (grow((void **)&c->th, &c->cap_th, c->nth + 1, sizeof *c->th)) {
        c->rc = -ENOMEM;
        return NULL;
      }
      c->th[c->nth] = (tbuf){.tid = tid};
      c->idx[i] = (uint32_t)(++c->nth);
      *created = true;
      return &c->th[c->nth - 1];
    }
  }
}

/* Appends one event to thread tid's buffer (invariant 1). */
static void put_ev(conv *c, tbuf *t, gtp_event *ev) {
  if (c->rc || !t)
    return;
  size_t need = GTP_EVENT_MAX + ev->msg_len;
  if (t->len + need > GTP_BATCH_MAX)
    flush(c, t);
  if (t->len + need > t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    while (cap < t->len + need)
      cap *= 2;
    if (cap > GTP_BATCH_MAX)
      cap = GTP_BATCH_MAX;
    uint8_t *p = realloc(t->ev, cap);
    if (!p) {
      c->rc = -ENOMEM;
      return;
    }
    t->ev = p;
    t->cap = cap;
  }
  if (t->n == 0)
    t->base = t->prev = ev->ticks;
  if (ev->ticks < t->prev)
    ev->ticks = t->prev; /* the merge is in time order; defensive */
  int n = gtp_event_encode(t->ev + t->len, ev, t->prev);
  if (n < 0) {
    c->rc = n;
    return;
  }
  t->len += (size_t)n;
  c->held += (size_t)n;
  t->prev = ev->ticks;
  t->n++;
  /* Everything held ends up in out: past its limit the conversion cannot
   * succeed, so stop growing now (invariant 3). */
  size_t limit = c->out->limit ? c->out->limit : GTP_GEN_MAX_BYTES;
  if (c->held > limit)
    c->rc = GTP_E_TOOBIG;
}

/* Thread tid, named by a thread_name event before its first event. */
static tbuf *name_thread(conv *c, uint64_t tid, uint64_t ticks,
                         const char *prefix, uint64_t num) {
  bool created;
  tbuf *t = thread_of(c, tid, &created);
  if (!t || !created)
    return t;
  char b[48];
  int k = num ? snprintf(b, sizeof b, "%s%llu", prefix, (unsigned long long)num)
              : snprintf(b, sizeof b, "%s", prefix);
  if (grow((void **)&c->extra, &c->cap_extra, c->nextra + 1,
           sizeof *c->extra) ||
      grow((void **)&c->pool, &c->pool_cap, c->pool_len + (size_t)k, 1)) {
    c->rc = -ENOMEM;
    return NULL;
  }
  uint64_t sid = c->next_sid++;
  /* ptr holds the pool offset until the walk ends (the pool moves). */
  c->extra[c->nextra++] =
      (gtp_string_ent){sid, {(const char *)(uintptr_t)c->pool_len, (size_t)k}};
  memcpy(c->pool + c->pool_len, b, (size_t)k);
  c->pool_len += (size_t)k;
  gtp_event ev = {.type = GTP_EV_THREAD_NAME, .ticks = ticks, .args = {sid}};
  put_ev(c, t, &ev);
  return t;
}

static void flush_all(conv *c) {
  for (size_t i = 0; i < c->nth; i++)
    flush(c, &c->th[i]);
}

static uint64_t sid_for(conv *c, const char *s) {
  /* "GC": interned once like a thread name, without a thread. */
  for (size_t i = 0; i < c->nextra; i++)
    if (c->extra[i].s.len == strlen(s) &&
        !memcmp(c->pool + (uintptr_t)c->extra[i].s.ptr, s, strlen(s)))
      return c->extra[i].id;
  size_t k = strlen(s);
  if (grow((void **)&c->extra, &c->cap_extra, c->nextra + 1,
           sizeof *c->extra) ||
      grow((void **)&c->pool, &c->pool_cap, c->pool_len + k, 1)) {
    c->rc = -ENOMEM;
    return 0;
  }
  uint64_t sid = c->next_sid++;
  c->extra[c->nextra++] =
      (gtp_string_ent){sid, {(const char *)(uintptr_t)c->pool_len, k}};
  memcpy(c->pool + c->pool_len, s, k);
  c->pool_len += k;
  return sid;
}

static void put_strings(conv *c, const gtp_string_ent *s, size_t n) {
  uint64_t ids[STRINGS_PER_RECORD];
  gtp_str strs[STRINGS_PER_RECORD];
  for (size_t i = 0; i < n && !c->rc;) {
    size_t k = 0;
    for (; k < STRINGS_PER_RECORD && i < n; k++, i++) {
      ids[k] = s[i].id;
      strs[k] = s[i].s;
    }
    int rc = gtp_put_strings(c->out, ids, strs, k);
    if (rc)
      c->rc = rc;
  }
}

static uint64_t ticks_of(const conv *c, int64_t wall) {
  return wall > c->base_wall ? (uint64_t)wall - (uint64_t)c->base_wall : 0;
}

static void walk(conv *c, gtp_go_gen *gg) {
  gtp_go_iter it;
  if (gtp_go_iter_init(&it, gg)) {
    c->rc = -ENOMEM;
    return;
  }
  gtp_go_event e;
  while (!c->rc && gtp_go_next(&it, &e) == 1) {
    gtp_event ev = {.ticks = ticks_of(c, e.wall_ns)};
    tbuf *t;
    switch (e.kind) {
    case GTP_GO_OTHER:
      continue;
    case GTP_GO_GC_BEGIN:
    case GTP_GO_GC_END:
      t = name_thread(c, GTP_GOCONV_TID_GC, ev.ticks, "GC", 0);
      break;
    case GTP_GO_STW_BEGIN:
    case GTP_GO_STW_END:
      t = name_thread(c, GTP_GOCONV_TID_STW, ev.ticks, "STW", 0);
      break;
    default:
      if (e.g)
        t = name_thread(c, e.g, ev.ticks, "G", e.g);
      else
        t = name_thread(c, GTP_GOCONV_TID_M | e.m, ev.ticks, "M", e.m);
      break;
    }
    switch (e.kind) {
    case GTP_GO_REGION_BEGIN:
      ev.type = GTP_EV_REGION_BEGIN;
      ev.args[0] = e.name.ptr ? e.args[1] : 0;
      break;
    case GTP_GO_STW_BEGIN:
      ev.type = GTP_EV_REGION_BEGIN;
      ev.args[0] = e.name.ptr ? e.args[0] : 0;
      break;
    case GTP_GO_GC_BEGIN:
      ev.type = GTP_EV_REGION_BEGIN;
      ev.args[0] = sid_for(c, "GC");
      break;
    case GTP_GO_REGION_END:
    case GTP_GO_STW_END:
    case GTP_GO_GC_END:
      ev.type = GTP_EV_REGION_END;
      break;
    case GTP_GO_TASK_BEGIN:
      ev.type = GTP_EV_TASK_BEGIN;
      ev.args[0] = e.task;
      ev.args[1] = e.parent;
      ev.args[2] = e.name.ptr ? e.args[2] : 0;
      break;
    case GTP_GO_TASK_END:
      ev.type = GTP_EV_TASK_END;
      ev.args[0] = e.task;
      break;
    case GTP_GO_LOG:
      ev.type = GTP_EV_LOG;
      ev.args[0] = e.name.ptr ? e.args[1] : 0;
      ev.msg = (const uint8_t *)e.value.ptr;
      ev.msg_len = e.value.len;
      break;
    default:
      continue;
    }
    put_ev(c, t, &ev);
  }
  flush_all(c);
  gtp_go_iter_fini(&it);
}

static unsigned load(const gtp_gen *g, const uint8_t *p, size_t len,
                     gtp_go_gen *gg, int *rc, size_t *off) {
  unsigned v = gtp_gen_go_version(g);
  if (v) {
    *rc = gtp_go_parse(p, len, v, gg, off);
    return v;
  }
  /* No go_version tag: the newest table, then the one before sync batches. */
  if ((*rc = gtp_go_parse(p, len, GTP_GO_MAX_VERSION, gg, off)) == 0)
    return GTP_GO_MAX_VERSION;
  *rc = gtp_go_parse(p, len, 23, gg, off);
  return 23;
}

int gtp_goconv_gen(const gtp_gen *g, gtp_wbuf *out, int *go_rc) {
  const uint8_t *p;
  size_t len, off = 0;
  uint8_t *owned = NULL;
  int rc = gtp_gen_go_bytes(g, &p, &len, &owned);
  if (rc)
    return rc;
  gtp_go_gen gg;
  int grc;
  unsigned v = load(g, p, len, &gg, &grc, &off);
  if (go_rc)
    *go_rc = grc;

  conv c = {.out = out, .gen = g->start.gen};
  int64_t start = gtp_gen_wall_ns(g, g->clock.start_ticks);
  int64_t end = gtp_gen_wall_ns(g, g->clock.end_ticks);
  if (!grc) {
    gtp_go_set_clock(&gg, &g->clock);
    if (gg.nevents) {
      int64_t first = gtp_go_wall_ns(&gg, gg.min_ts);
      int64_t last = gtp_go_wall_ns(&gg, gg.max_ts);
      start = first < start ? first : start;
      end = last > end ? last : end;
    }
  }
  if (end < start)
    end = start;
  c.base_wall = start;

  size_t at = out->len;
  if ((rc = gtp_put_gen_start(out, &g->start)))
    goto done;
  size_t body = out->len;
  uint64_t maxid = 0;
  if (!grc) {
    put_strings(&c, gg.strings, gg.nstrings);
    if (gg.nstrings)
      maxid = gg.strings[gg.nstrings - 1].id;
  }
  if (maxid == UINT64_MAX) {
    c.rc = GTP_E_TOOBIG; /* no room for synthetic ids above the Go ones */
  }
  c.next_sid = maxid + 1;
  if (!grc && !c.rc) {
    walk(&c, &gg);
  } else if (!c.rc) {
    char msg[160];
    int k = snprintf(msg, sizeof msg,
                     "go 1.%u: %s (%s) at byte %zu of the generation's Go "
                     "trace bytes",
                     v, gtp_errname(grc), gtp_strerror(grc), off);
    gtp_event ev = {.type = GTP_EV_LOG,
                    .args = {sid_for(&c, "gentrace.go_undecodable")},
                    .msg = (const uint8_t *)msg,
                    .msg_len = (size_t)k};
    put_ev(&c, name_thread(&c, 0, 0, "gentrace", 0), &ev);
    flush_all(&c);
  }
  for (size_t i = 0; i < c.nextra; i++)
    c.extra[i].s.ptr = c.pool + (uintptr_t)c.extra[i].s.ptr;
  put_strings(&c, c.extra, c.nextra);
  if ((rc = c.rc))
    goto done;
  uint64_t span = (uint64_t)end - (uint64_t)start;
  gtp_clock ck = {0, 0, (uint64_t)start, span, span, (uint64_t)start + span};
  if (start < 0) { /* before 1970: not representable in CLOCK; clamp */
    ck.start_real_ns = 0;
    ck.end_real_ns = span;
  }
  if ((rc = gtp_put_clock(out, &ck)))
    goto done;
  if (out->err) {
    rc = out->err;
    goto done;
  }
  gtp_gen_end e = g->end;
  if ((rc = gtp_manifest_compute(out->data + body, out->len - body, &e)))
    goto done;
  rc = gtp_put_gen_end(out, &e);
done:
  if (rc)
    out->len = at; /* nothing half-written stays */
  if (!grc)
    gtp_go_fini(&gg);
  free(owned);
  for (size_t i = 0; i < c.nth; i++)
    free(c.th[i].ev);
  free(c.th);
  free(c.idx);
  free(c.extra);
  free(c.pool);
  return rc;
}
