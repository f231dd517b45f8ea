/* perfetto.c: Perfetto protobuf trace writer (see perfetto.h).
 *
 * Invariants:
 *  1. Every packet is complete before any of its bytes reach the sink, so
 *     a stream cut between sink calls still holds only whole packets.
 *  2. A track is described (TrackDescriptor) before the first event that
 *     names its uuid, so readers never meet an unknown track.
 *  3. Track uuids are unique per writer: session index in the high 32 bits,
 *     thread / counter index (tagged) in the low bits, never 0.
 *  4. A SLICE_END is written only when that thread has a SLICE_BEGIN open
 *     in this output, so slices nest as in the agent.
 */
#include "config.h"

#include "perfetto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goconv.h"
#include "gotrace.h"
#include "gtp_error.h"
#include "stackname.h"
#include "varint.h"

/* Field numbers of perfetto/protos (trace_packet.proto, track_event.proto,
 * track_descriptor.proto, debug_annotation.proto). */
enum {
  F_TRACE_PACKET = 1,
  P_TIMESTAMP = 8,
  P_SEQ_ID = 10,
  P_TRACK_EVENT = 11,
  P_SEQ_FLAGS = 13,
  P_TRACK_DESCRIPTOR = 60,
  TD_UUID = 1,
  TD_NAME = 2,
  TD_PROCESS = 3,
  TD_THREAD = 4,
  TD_PARENT = 5,
  TD_COUNTER = 8,
  PD_PID = 1,
  PD_NAME = 6,
  THD_PID = 1,
  THD_TID = 2,
  THD_NAME = 5,
  TE_DEBUG = 4,
  TE_TYPE = 9,
  TE_TRACK_UUID = 11,
  TE_CATEGORIES = 22,
  TE_NAME = 23,
  TE_COUNTER_VALUE = 30,
  DA_INT = 4,
  DA_STRING = 6,
  DA_NAME = 10,
  DA_ARRAY = 12,
};
enum {
  TYPE_SLICE_BEGIN = 1,
  TYPE_SLICE_END = 2,
  TYPE_INSTANT = 3,
  TYPE_COUNTER = 4
};
#define SEQ_INCREMENTAL_STATE_CLEARED 1
#define SEQ_NEEDS_INCREMENTAL_STATE 2
#define SEQ_ID 1

typedef struct pf_thread {
  uint64_t tid;
  uint32_t depth; /* open slices (invariant 4) */
} pf_thread;

typedef struct pf_counter {
  char *name;
  size_t len;
} pf_counter;

typedef struct pf_session {
  uint8_t id[16];
  uint64_t pid; /* synthetic, 1.. */
  pf_thread *threads;
  size_t nthreads, cap_threads;
  pf_counter *counters;
  size_t ncounters, cap_counters;
} pf_session;

struct gtp_perfetto {
  gtp_sink_fn sink;
  void *ctx;
  int err;
  int first; /* no packet written yet */
  pf_session *sessions;
  size_t nsessions, cap_sessions;
  gtp_wbuf pkt, msg, sub; /* scratch: packet, its message, a nested one */
  /* The stack of the event being written (NULL: none): track_event adds it
   * as a debug annotation "stack", an array of frame names. */
  const gtp_stack_ent *stack;
  gtp_stackname names;       /* frame names (stackname.h) */
  gtp_wbuf ann, elem, frame; /* scratch of the stack annotation */
};

/* ------------------------------------------------------ protobuf bits */

static void put_varint(gtp_wbuf *b, uint64_t v) {
  gtp_wbuf_put_uvarint(b, v);
}
static void put_key(gtp_wbuf *b, unsigned field, unsigned wire) {
  put_varint(b, ((uint64_t)field << 3) | wire);
}
static void put_u64(gtp_wbuf *b, unsigned field, uint64_t v) {
  put_key(b, field, 0);
  put_varint(b, v);
}
static void put_i64(gtp_wbuf *b, unsigned field, int64_t v) {
  put_u64(b, field, (uint64_t)v); /* int64: two's complement varint */
}
static void put_bytes(gtp_wbuf *b, unsigned field, const void *p, size_t n) {
  put_key(b, field, 2);
  put_varint(b, n);
  gtp_wbuf_put(b, p, n);
}
static void put_msg(gtp_wbuf *b, unsigned field, const gtp_wbuf *m) {
  put_bytes(b, field, m->data, m->len);
}

/* Sends pkt (a TracePacket body) as one Trace.packet (invariant 1). */
static int emit(gtp_perfetto *p, gtp_wbuf *pkt) {
  if (p->err)
    return p->err;
  if (pkt->err)
    return p->err = pkt->err;
  uint8_t head[16];
  size_t h = 0;
  head[h++] = (F_TRACE_PACKET << 3) | 2;
  uint64_t n = pkt->len;
  do {
    uint8_t c = n & 0x7f;
    n >>= 7;
    head[h++] = c | (n ? 0x80 : 0);
  } while (n);
  int rc = p->sink(p->ctx, head, h);
  if (rc == 0 && pkt->len)
    rc = p->sink(p->ctx, pkt->data, pkt->len);
  if (rc < 0)
    p->err = rc;
  return p->err;
}

/* Starts a packet in p->pkt with the sequence fields. */
static void packet_begin(gtp_perfetto *p, int64_t ts) {
  gtp_wbuf_reset(&p->pkt);
  if (ts > 0)
    put_u64(&p->pkt, P_TIMESTAMP, (uint64_t)ts);
  put_u64(&p->pkt, P_SEQ_ID, SEQ_ID);
  put_u64(&p->pkt, P_SEQ_FLAGS,
          p->first ? SEQ_INCREMENTAL_STATE_CLEARED
                   : SEQ_NEEDS_INCREMENTAL_STATE);
  p->first = 0;
}

static uint64_t proc_uuid(const pf_session *s) {
  return s->pid << 32;
}
static uint64_t thread_uuid(const pf_session *s, size_t i) {
  return (s->pid << 32) | (uint64_t)(i + 1);
}
static uint64_t counter_uuid(const pf_session *s, size_t i) {
  return (s->pid << 32) | 0x80000000u | (uint64_t)(i + 1);
}

/* ------------------------------------------------------------ tracks */

static int describe_process(gtp_perfetto *p, const pf_session *s,
                            const gtp_gen *g) {
  char label[64];
  gtp_wbuf_reset(&p->sub);
  put_i64(&p->sub, PD_PID, (int64_t)s->pid);
  gtp_wbuf_reset(&p->msg);
  gtp_wbuf_put(&p->msg, g->start.service.ptr, g->start.service.len);
  gtp_wbuf_put(&p->msg, " (", 2);
  gtp_wbuf_put(&p->msg, g->start.host.ptr, g->start.host.len);
  int n =
      snprintf(label, sizeof label, " %llu)", (unsigned long long)g->start.pid);
  gtp_wbuf_put(&p->msg, label, (size_t)n);
  put_msg(&p->sub, PD_NAME, &p->msg);
  gtp_wbuf_reset(&p->msg);
  put_u64(&p->msg, TD_UUID, proc_uuid(s));
  put_msg(&p->msg, TD_PROCESS, &p->sub);
  packet_begin(p, 0);
  put_msg(&p->pkt, P_TRACK_DESCRIPTOR, &p->msg);
  return emit(p, &p->pkt);
}

static int describe_thread(gtp_perfetto *p, const pf_session *s, size_t i,
                           gtp_str name) {
  gtp_wbuf_reset(&p->sub);
  put_i64(&p->sub, THD_PID, (int64_t)s->pid);
  put_i64(&p->sub, THD_TID, (int64_t)(int32_t)s->threads[i].tid);
  if (name.ptr && name.len)
    put_bytes(&p->sub, THD_NAME, name.ptr, name.len);
  gtp_wbuf_reset(&p->msg);
  put_u64(&p->msg, TD_UUID, thread_uuid(s, i));
  put_u64(&p->msg, TD_PARENT, proc_uuid(s));
  put_msg(&p->msg, TD_THREAD, &p->sub);
  packet_begin(p, 0);
  put_msg(&p->pkt, P_TRACK_DESCRIPTOR, &p->msg);
  return emit(p, &p->pkt);
}

static pf_session *session_get(gtp_perfetto *p, const gtp_gen *g) {
  for (size_t i = 0; i < p->nsessions; i++)
    if (!memcmp(p->sessions[i].id, g->start.session, 16))
      return &p->sessions[i];
  if (p->nsessions == p->cap_sessions) {
    size_t cap = p->cap_sessions ? 2 * p->cap_sessions : 4;
    pf_session *n = realloc(p->sessions, cap * sizeof *n);
    if (!n) {
      p->err = -ENOMEM;
      return NULL;
    }
    p->sessions = n;
    p->cap_sessions = cap;
  }
  pf_session *s = &p->sessions[p->nsessions];
  memset(s, 0, sizeof *s);
  memcpy(s->id, g->start.session, 16);
  s->pid = ++p->nsessions;
  if (describe_process(p, s, g) < 0)
    return NULL;
  return s;
}

static size_t thread_get(gtp_perfetto *p, pf_session *s, uint64_t tid) {
  for (size_t i = s->nthreads; i-- > 0;)
    if (s->threads[i].tid == tid)
      return i;
  if (s->nthreads == s->cap_threads) {
    size_t cap = s->cap_threads ? 2 * s->cap_threads : 8;
    pf_thread *n = realloc(s->threads, cap * sizeof *n);
    if (!n) {
      p->err = -ENOMEM;
      return SIZE_MAX;
    }
    s->threads = n;
    s->cap_threads = cap;
  }
  size_t i = s->nthreads++;
  s->threads[i] = (pf_thread){.tid = tid};
  if (describe_thread(p, s, i, (gtp_str){0}) < 0) /* invariant 2 */
    return SIZE_MAX;
  return i;
}

static size_t counter_get(gtp_perfetto *p, pf_session *s, gtp_str name) {
  for (size_t i = 0; i < s->ncounters; i++)
    if (s->counters[i].len == name.len &&
        (name.len == 0 || !memcmp(s->counters[i].name, name.ptr, name.len)))
      return i;
  if (s->ncounters == s->cap_counters) {
    size_t cap = s->cap_counters ? 2 * s->cap_counters : 8;
    pf_counter *n = realloc(s->counters, cap * sizeof *n);
    if (!n) {
      p->err = -ENOMEM;
      return SIZE_MAX;
    }
    s->counters = n;
    s->cap_counters = cap;
  }
  char *copy = malloc(name.len + 1);
  if (!copy) {
    p->err = -ENOMEM;
    return SIZE_MAX;
  }
  if (name.len)
    memcpy(copy, name.ptr, name.len);
  copy[name.len] = 0;
  size_t i = s->ncounters++;
  s->counters[i] = (pf_counter){copy, name.len};
  gtp_wbuf_reset(&p->msg);
  put_u64(&p->msg, TD_UUID, counter_uuid(s, i));
  put_u64(&p->msg, TD_PARENT, proc_uuid(s));
  put_bytes(&p->msg, TD_NAME, name.ptr ? name.ptr : "", name.len);
  put_bytes(&p->msg, TD_COUNTER, "", 0);
  packet_begin(p, 0);
  put_msg(&p->pkt, P_TRACK_DESCRIPTOR, &p->msg);
  if (emit(p, &p->pkt) < 0)
    return SIZE_MAX;
  return i;
}

/* ------------------------------------------------------------ events */

/* Appends the debug annotation "stack" to p->msg: one string per frame,
 * innermost first, named as in Chrome JSON (stackname.h). */
static int put_stack(gtp_perfetto *p, const gtp_stack_ent *st) {
  gtp_wbuf_reset(&p->ann);
  put_bytes(&p->ann, DA_NAME, "stack", 5);
  const uint8_t *q = st->frames, *end = st->frames + st->frames_len;
  for (uint32_t i = 0; i < st->nframes; i++) {
    uint64_t pc;
    if (gtp_uvarint_get(&q, end, &pc))
      break;
    gtp_wbuf_reset(&p->frame);
    int rc = gtp_stackname_frame(&p->names, pc, &p->frame);
    if (rc < 0)
      return p->err = rc;
    gtp_wbuf_reset(&p->elem);
    put_bytes(&p->elem, DA_STRING, p->frame.data, p->frame.len);
    put_msg(&p->ann, DA_ARRAY, &p->elem);
  }
  put_msg(&p->msg, TE_DEBUG, &p->ann);
  int err = p->ann.err ? p->ann.err : p->elem.err;
  return err ? (p->err = err) : 0;
}

/* Writes one TrackEvent packet; name/ann may be empty. */
static int track_event(gtp_perfetto *p, int64_t ts, uint64_t track, int type,
                       gtp_str name, const char *cat, const char *ann_name,
                       gtp_str ann_str, int has_int, int64_t ann_int,
                       int has_value, int64_t value) {
  gtp_wbuf_reset(&p->msg);
  put_u64(&p->msg, TE_TYPE, (uint64_t)type);
  put_u64(&p->msg, TE_TRACK_UUID, track);
  if (name.ptr && type != TYPE_SLICE_END && type != TYPE_COUNTER)
    put_bytes(&p->msg, TE_NAME, name.ptr, name.len);
  if (cat)
    put_bytes(&p->msg, TE_CATEGORIES, cat, strlen(cat));
  if (has_value)
    put_i64(&p->msg, TE_COUNTER_VALUE, value);
  if (ann_name) {
    gtp_wbuf_reset(&p->sub);
    put_bytes(&p->sub, DA_NAME, ann_name, strlen(ann_name));
    if (has_int)
      put_i64(&p->sub, DA_INT, ann_int);
    else
      put_bytes(&p->sub, DA_STRING, ann_str.ptr ? ann_str.ptr : "",
                ann_str.ptr ? ann_str.len : 0);
    put_msg(&p->msg, TE_DEBUG, &p->sub);
  }
  if (p->stack && put_stack(p, p->stack) < 0)
    return p->err;
  packet_begin(p, ts);
  put_msg(&p->pkt, P_TRACK_EVENT, &p->msg);
  return emit(p, &p->pkt);
}

static const gtp_str NONE = {0};

static int write_kind(gtp_perfetto *p, pf_session *s, size_t ti,
                      const gtp_event *ev, int64_t ts, gtp_str name);

static int write_event(gtp_perfetto *p, const gtp_gen *g, pf_session *s,
                       size_t ti, const gtp_event *ev) {
  int64_t ts = gtp_gen_wall_ns(g, ev->ticks);
  gtp_str name = NONE;
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
    name = (gtp_str){"", 0};
  /* An unknown stack id (hostile input) writes no annotation. */
  p->stack = NULL;
  if (ev->type == GTP_EV_REGION_BEGIN_STACK ||
      ev->type == GTP_EV_INSTANT_STACK || ev->type == GTP_EV_LOG_STACK)
    p->stack = gtp_gen_stack(g, ev->args[1]);
  int rc = write_kind(p, s, ti, ev, ts, name);
  p->stack = NULL;
  return rc;
}

/* write_event's body, with p->stack set for the *_STACK kinds. */
static int write_kind(gtp_perfetto *p, pf_session *s, size_t ti,
                      const gtp_event *ev, int64_t ts, gtp_str name) {
  pf_thread *t = &s->threads[ti];
  uint64_t tu = thread_uuid(s, ti);
  switch (ev->type) {
  case GTP_EV_REGION_BEGIN:
  case GTP_EV_REGION_BEGIN_STACK:
    t->depth++;
    return track_event(p, ts, tu, TYPE_SLICE_BEGIN, name, NULL, NULL, NONE, 0,
                       0, 0, 0);
  case GTP_EV_REGION_END:
    if (t->depth == 0)
      return 0; /* invariant 4 */
    t->depth--;
    return track_event(p, ts, tu, TYPE_SLICE_END, NONE, NULL, NULL, NONE, 0, 0,
                       0, 0);
  case GTP_EV_INSTANT:
  case GTP_EV_INSTANT_STACK:
    return track_event(p, ts, tu, TYPE_INSTANT, name, NULL, NULL, NONE, 0, 0, 0,
                       0);
  case GTP_EV_LOG:
  case GTP_EV_LOG_STACK: {
    gtp_str msg = {(const char *)ev->msg, ev->msg ? ev->msg_len : 0};
    return track_event(p, ts, tu, TYPE_INSTANT, name, "log", "message", msg, 0,
                       0, 0, 0);
  }
  case GTP_EV_COUNTER: {
    size_t ci = counter_get(p, s, name);
    if (ci == SIZE_MAX)
      return p->err;
    return track_event(p, ts, counter_uuid(s, ci), TYPE_COUNTER, NONE, NULL,
                       NULL, NONE, 0, 0, 1, (int64_t)ev->args[1]);
  }
  case GTP_EV_TASK_BEGIN:
  case GTP_EV_TASK_END:
    return track_event(p, ts, tu, TYPE_INSTANT,
                       ev->type == GTP_EV_TASK_BEGIN ? name
                                                     : (gtp_str){"task end", 8},
                       "task", "task", NONE, 1, (int64_t)ev->args[0], 0, 0);
  case GTP_EV_THREAD_NAME:
    return describe_thread(p, s, ti, name);
  case GTP_EV_LOST:
    return track_event(p, ts, tu, TYPE_INSTANT, (gtp_str){"gentrace.lost", 13},
                       NULL, "count", NONE, 1, (int64_t)ev->args[0], 0, 0);
  default:
    return 0; /* a newer event type: skipped, not guessed at */
  }
}

/* ------------------------------------------------------------ public */

gtp_perfetto *gtp_perfetto_new(gtp_sink_fn sink, void *ctx) {
  if (!sink)
    return NULL;
  gtp_perfetto *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->sink = sink;
  p->ctx = ctx;
  p->first = 1;
  gtp_wbuf_init(&p->pkt, 0);
  gtp_wbuf_init(&p->msg, 0);
  gtp_wbuf_init(&p->sub, 0);
  gtp_wbuf_init(&p->ann, 0);
  gtp_wbuf_init(&p->elem, 0);
  gtp_wbuf_init(&p->frame, 1u << 20);
  gtp_stackname_init(&p->names, NULL);
  return p;
}

void gtp_perfetto_set_symbolizer(gtp_perfetto *p, const gtp_symbolizer *sym) {
  p->names.sym = sym;
}

/* A generation of a Go session (GOTRACE records): written as its native
 * form (proto/goconv.h), like the Chrome writer does. */
static int perfetto_go_gen(gtp_perfetto *p, const gtp_gen *g) {
  gtp_wbuf b;
  gtp_gen ng;
  size_t used;
  gtp_wbuf_init(&b, 0);
  int rc = gtp_goconv_gen(g, &b, NULL);
  if (!rc && !(rc = gtp_gen_parse(b.data, b.len, &ng, &used))) {
    rc = gtp_perfetto_gen(p, &ng);
    gtp_gen_fini(&ng);
  }
  gtp_wbuf_fini(&b);
  return rc;
}

int gtp_perfetto_gen(gtp_perfetto *p, const gtp_gen *g) {
  if (p->err)
    return p->err;
  if (gtp_gen_is_go(g))
    return perfetto_go_gen(p, g);
  pf_session *s = session_get(p, g);
  if (!s)
    return p->err ? p->err : -ENOMEM;
  int src = gtp_stackname_gen(&p->names, g);
  if (src < 0)
    return p->err = src;
  size_t cursor = 0;
  gtp_batch b;
  int rc = 0;
  while (!p->err && (rc = gtp_gen_next_batch(g, &cursor, &b)) == 1) {
    size_t ti = thread_get(p, s, b.thread);
    if (ti == SIZE_MAX)
      return p->err;
    gtp_event_iter it;
    gtp_event ev;
    gtp_event_iter_init(&it, &b);
    while (!p->err && (rc = gtp_event_next(&it, &ev)) == 1)
      write_event(p, g, s, ti, &ev);
    if (rc < 0 && !p->err)
      return rc;
  }
  if (p->err)
    return p->err;
  if (rc < 0)
    return rc;
  uint64_t lost = g->end.dropped + g->end.evicted + g->end.rejected;
  if (lost > 0)
    track_event(p, gtp_gen_wall_ns(g, g->clock.start_ticks), proc_uuid(s),
                TYPE_INSTANT, (gtp_str){"gentrace.lost", 13}, NULL, "count",
                NONE, 1, (int64_t)lost, 0, 0);
  return p->err;
}

int gtp_perfetto_end(gtp_perfetto *p) {
  return p->err;
}

void gtp_perfetto_free(gtp_perfetto *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->nsessions; i++) {
    for (size_t k = 0; k < p->sessions[i].ncounters; k++)
      free(p->sessions[i].counters[k].name);
    free(p->sessions[i].counters);
    free(p->sessions[i].threads);
  }
  free(p->sessions);
  gtp_wbuf_fini(&p->pkt);
  gtp_wbuf_fini(&p->msg);
  gtp_wbuf_fini(&p->sub);
  gtp_wbuf_fini(&p->ann);
  gtp_wbuf_fini(&p->elem);
  gtp_wbuf_fini(&p->frame);
  gtp_stackname_fini(&p->names);
  free(p);
}
