/* goold.c: reader of the old Go trace format, 1.11-1.21 (see goold.h).
 *
 * Invariants.
 *
 *  1. No read at or past the end of the input: every varint through
 *     gtp_uvarint_get with the input's end (or a length-prefixed argument
 *     block's end), every length checked against the bytes left first.
 *  2. The goroutine of a user event is the one its P was running: per-P
 *     state survives across that P's batches (they come in order), as in
 *     Go's parser of this format.
 *  3. Events are kept in file order with a sequence number and sorted by
 *     (time, sequence), so equal timestamps keep the order they were
 *     written in (a region's end never precedes its begin).
 */
#include "goold.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "varint.h"

enum {
  EV_BATCH = 1,
  EV_FREQUENCY = 2,
  EV_STACK = 3,
  EV_GC_START = 7,
  EV_GC_DONE = 8,
  EV_STW_START = 9,
  EV_STW_DONE = 10,
  EV_GO_START = 14,
  EV_GO_END = 15,
  EV_GO_STOP = 16,
  EV_GO_SCHED = 17,
  EV_GO_PREEMPT = 18,
  EV_GO_SLEEP = 19,
  EV_GO_BLOCK = 20,
  EV_GO_BLOCK_SEND = 22,
  EV_GO_BLOCK_RECV = 23,
  EV_GO_BLOCK_SELECT = 24,
  EV_GO_BLOCK_SYNC = 25,
  EV_GO_BLOCK_COND = 26,
  EV_GO_BLOCK_NET = 27,
  EV_GO_SYS_BLOCK = 30,
  EV_TIMER_GOROUTINE = 35,
  EV_STRING = 37,
  EV_GO_START_LOCAL = 38,
  EV_GO_START_LABEL = 41,
  EV_GO_BLOCK_GC = 42,
  EV_USER_TASK_CREATE = 45,
  EV_USER_TASK_END = 46,
  EV_USER_REGION = 47,
  EV_USER_LOG = 48,
  EV_CPU_SAMPLE = 49,
  EV_COUNT = 50,
};

#define ARGS_MAX 2048 /* bytes of a length-prefixed argument block */
#define STRING_MAX 1000000
#define NARGS_MAX (ARGS_MAX + 8)

static const char *const stw_kinds[] = {
    "",
    "GC mark termination",
    "GC sweep termination",
    "write heap dump",
    "goroutine profile",
    "goroutine profile cleanup",
    "all goroutine stack trace",
    "read mem stats",
    "AllThreadsSyscall",
    "GOMAXPROCS",
    "start trace",
    "stop trace",
    "CountPagesInUse (test)",
    "ReadMetricsSlow (test)",
    "ReadMemStatsSlow (test)",
    "PageCachePagesLeaked (test)",
    "ResetDebugLog (test)",
};

static const char *stw_kind(unsigned version, uint64_t id) {
  if (version < 21)
    return id <= 1 ? stw_kinds[id + 1] : stw_kinds[0];
  return id < sizeof stw_kinds / sizeof *stw_kinds ? stw_kinds[id]
                                                   : stw_kinds[0];
}

typedef struct pstate {
  uint64_t p, g, ts;
  int used;
} pstate;

typedef struct ost {
  gtp_goold *t;
  pstate *ps; /* open addressing by P */
  size_t ps_cap, ps_n;
  size_t cap_ev, cap_str;
  uint64_t *seq; /* file order of events[i], for the stable sort */
  uint64_t min_ticks, max_ticks;
  int any;
} ost;

static pstate *p_get(ost *o, uint64_t p) {
  if ((o->ps_n + 1) * 2 > o->ps_cap) {
    size_t cap = o->ps_cap ? o->ps_cap * 2 : 64;
    pstate *n = calloc(cap, sizeof *n);
    if (!n)
      return NULL;
    for (size_t i = 0; i < o->ps_cap; i++)
      if (o->ps[i].used) {
        size_t j = (o->ps[i].p * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
        while (n[j].used)
          j = (j + 1) & (cap - 1);
        n[j] = o->ps[i];
      }
    free(o->ps);
    o->ps = n;
    o->ps_cap = cap;
  }
  size_t mask = o->ps_cap - 1;
  for (size_t i = (p * 0x9e3779b97f4a7c15ull >> 20) & mask;;
       i = (i + 1) & mask) {
    if (!o->ps[i].used) {
      o->ps[i] = (pstate){.p = p, .used = 1};
      o->ps_n++;
      return &o->ps[i];
    }
    if (o->ps[i].p == p)
      return &o->ps[i];
  }
}

static int grow(void **a, size_t *cap, size_t need, size_t elem) {
  return gtp_array_grow(a, cap, need, elem, 256);
}

/* Arguments an event carries, timestamp included (Go's argNum), for the
 * events whose arguments are used; 0 = not checked. */
static unsigned want_args(uint8_t typ) {
  switch (typ) {
  case EV_USER_TASK_CREATE:
    return 5; /* ts task parent name stack */
  case EV_USER_TASK_END:
    return 3; /* ts task stack */
  case EV_USER_REGION:
    return 5; /* ts task mode name stack */
  case EV_USER_LOG:
    return 4; /* ts task key stack, then the value string */
  case EV_GC_START:
    return 3; /* ts seq stack */
  case EV_STW_START:
    return 2; /* ts kind */
  default:
    return 0;
  }
}

static uint8_t min_version(uint8_t typ) {
  return typ == EV_CPU_SAMPLE ? 19 : 0;
}

static int keep(ost *o, const gtp_goold_event *e, uint64_t seq) {
  gtp_goold *t = o->t;
  size_t cap = o->cap_ev;
  if (grow((void **)&t->events, &o->cap_ev, t->nevents + 1, sizeof *t->events))
    return -ENOMEM;
  if (o->cap_ev != cap) {
    uint64_t *s = realloc(o->seq, o->cap_ev * sizeof *s);
    if (!s)
      return -ENOMEM;
    o->seq = s;
  }
  o->seq[t->nevents] = seq;
  t->events[t->nevents++] = *e;
  return 0;
}

static int parse_events(ost *o, const uint8_t *in, size_t len,
                        size_t *err_off) {
  gtp_goold *t = o->t;
  const uint8_t *p = in + GTP_GO_HEADER_SIZE, *end = in + len;
  uint64_t args[NARGS_MAX];
  pstate *cur = p_get(o, UINT64_MAX - 1); /* events before any batch */
  if (!cur)
    return -ENOMEM;
  uint64_t seq = 0;
  while (p < end) {
    const uint8_t *at = p;
    *err_off = (size_t)(at - in);
    uint8_t b = *p++;
    uint8_t typ = b & 0x3f;
    unsigned narg = (unsigned)(b >> 6) + 1;
    int rc;
    if (typ == 0 || typ >= EV_COUNT || min_version(typ) > t->version)
      return GTP_E_UNKNOWN;
    if (typ == EV_STRING) {
      uint64_t id, n;
      if ((rc = gtp_uvarint_get(&p, end, &id)) ||
          (rc = gtp_uvarint_get(&p, end, &n)))
        return rc;
      if (id == 0 || n == 0)
        return GTP_E_CORRUPT;
      if (n > STRING_MAX)
        return GTP_E_TOOBIG;
      if (n > (uint64_t)(end - p))
        return GTP_E_TRUNC;
      if (grow((void **)&t->strings, &o->cap_str, t->nstrings + 1,
               sizeof *t->strings))
        return -ENOMEM;
      t->strings[t->nstrings++] =
          (gtp_string_ent){id, {(const char *)p, (size_t)n}};
      p += n;
      continue;
    }
    if (typ == EV_BATCH) {
      uint64_t pid, ts;
      if (narg != 2)
        return GTP_E_CORRUPT;
      if ((rc = gtp_uvarint_get(&p, end, &pid)) ||
          (rc = gtp_uvarint_get(&p, end, &ts)))
        return rc;
      if (!(cur = p_get(o, pid)))
        return -ENOMEM;
      cur->ts = ts; /* the batch's base; lastG carries over (inv. 2) */
      continue;
    }
    unsigned n = 0;
    const uint8_t *vstr = NULL;
    uint64_t vlen = 0;
    if (narg <= 3) {
      for (; n < narg; n++)
        if ((rc = gtp_uvarint_get(&p, end, &args[n])))
          return rc;
    } else {
      uint64_t blen;
      if ((rc = gtp_uvarint_get(&p, end, &blen)))
        return rc;
      if (blen > ARGS_MAX)
        return GTP_E_TOOBIG;
      if (blen > (uint64_t)(end - p))
        return GTP_E_TRUNC;
      const uint8_t *q = p, *qend = p + blen;
      while (q < qend) /* at most blen args: each takes a byte or more */
        if ((rc = gtp_uvarint_get(&q, qend, &args[n++])))
          return rc;
      p = qend;
      if (typ == EV_USER_LOG) {
        if ((rc = gtp_uvarint_get(&p, end, &vlen)))
          return rc;
        if (vlen > STRING_MAX)
          return GTP_E_TOOBIG;
        if (vlen > (uint64_t)(end - p))
          return GTP_E_TRUNC;
        vstr = p;
        p += vlen;
      }
    }
    switch (typ) {
    case EV_FREQUENCY:
      if (n < 1 || args[0] == 0 || args[0] > INT64_MAX)
        return GTP_E_CORRUPT;
      t->freq = args[0];
      continue;
    case EV_STACK:
    case EV_TIMER_GOROUTINE:
    case EV_CPU_SAMPLE:
      continue; /* untimed here, or not shown */
    default:
      break;
    }
    if (n < 1)
      return GTP_E_CORRUPT;
    unsigned want = want_args(typ);
    if (want && n != want)
      return GTP_E_CORRUPT;
    if (args[0] > UINT64_MAX - cur->ts)
      return GTP_E_CORRUPT;
    uint64_t ts = cur->ts += args[0];
    if (!o->any || ts < o->min_ticks)
      o->min_ticks = ts;
    if (!o->any || ts > o->max_ticks)
      o->max_ticks = ts;
    o->any = 1;
    gtp_goold_event e = {.ns = (int64_t)ts, .g = cur->g, .p = cur->p};
    switch (typ) {
    case EV_GO_START:
    case EV_GO_START_LOCAL:
    case EV_GO_START_LABEL:
      if (n < 2)
        return GTP_E_CORRUPT;
      cur->g = args[1];
      continue;
    case EV_GO_END:
    case EV_GO_STOP:
    case EV_GO_SCHED:
    case EV_GO_PREEMPT:
    case EV_GO_SLEEP:
    case EV_GO_BLOCK:
    case EV_GO_BLOCK_SEND:
    case EV_GO_BLOCK_RECV:
    case EV_GO_BLOCK_SELECT:
    case EV_GO_BLOCK_SYNC:
    case EV_GO_BLOCK_COND:
    case EV_GO_BLOCK_NET:
    case EV_GO_SYS_BLOCK:
    case EV_GO_BLOCK_GC:
      cur->g = 0;
      continue;
    case EV_USER_TASK_CREATE:
      e.kind = GTP_GO_TASK_BEGIN;
      e.task = args[1];
      e.parent = args[2];
      e.name_id = args[3];
      break;
    case EV_USER_TASK_END:
      e.kind = GTP_GO_TASK_END;
      e.task = args[1];
      break;
    case EV_USER_REGION:
      e.kind = args[2] == 0 ? GTP_GO_REGION_BEGIN : GTP_GO_REGION_END;
      e.task = args[1];
      e.name_id = args[3];
      break;
    case EV_USER_LOG:
      e.kind = GTP_GO_LOG;
      e.task = args[1];
      e.name_id = args[2];
      e.value = (gtp_str){(const char *)vstr, (size_t)vlen};
      break;
    case EV_GC_START:
      e.kind = GTP_GO_GC_BEGIN;
      break;
    case EV_GC_DONE:
      e.kind = GTP_GO_GC_END;
      break;
    case EV_STW_START: {
      e.kind = GTP_GO_STW_BEGIN;
      const char *k = stw_kind(t->version, args[1]);
      e.name = (gtp_str){k, strlen(k)};
      break;
    }
    case EV_STW_DONE:
      e.kind = GTP_GO_STW_END;
      break;
    default:
      continue;
    }
    if (keep(o, &e, seq++))
      return -ENOMEM;
    t->kinds[e.kind]++;
  }
  return 0;
}

static int cmp_string(const void *a, const void *b) {
  uint64_t x = ((const gtp_string_ent *)a)->id;
  uint64_t y = ((const gtp_string_ent *)b)->id;
  return x < y ? -1 : x > y;
}

static gtp_str lookup(const gtp_goold *t, uint64_t id) {
  return gtp_strings_find(t->strings, t->nstrings, id);
}

/* Sort keys: (ticks, file order), so the sort is stable (invariant 3)
 * without global state. */
typedef struct okey {
  uint64_t ticks, seq;
  size_t i;
} okey;

static int cmp_key(const void *a, const void *b) {
  const okey *x = a, *y = b;
  if (x->ticks != y->ticks)
    return x->ticks < y->ticks ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int gtp_goold_parse(const uint8_t *in, size_t len, gtp_goold *t,
                    size_t *err_off) {
  size_t off0 = 0;
  if (!err_off)
    err_off = &off0;
  *err_off = 0;
  memset(t, 0, sizeof *t);
  int v = gtp_go_file_version(in, len);
  if (v < 0)
    return v;
  if (v < GTP_GOOLD_MIN_VERSION || v > GTP_GOOLD_MAX_VERSION)
    return GTP_E_VERSION;
  t->version = (unsigned)v;
  ost o = {.t = t};
  int rc = parse_events(&o, in, len, err_off);
  okey *idx = NULL;
  gtp_goold_event *sorted = NULL;
  if (rc)
    goto fail;
  *err_off = len;
  if (!t->freq) {
    rc = GTP_E_CORRUPT; /* Go refuses a trace without EvFrequency too */
    goto fail;
  }
  if (t->nstrings > 1) /* qsort of a NULL array is undefined, even empty */
    qsort(t->strings, t->nstrings, sizeof *t->strings, cmp_string);
  for (size_t i = 1; i < t->nstrings; i++)
    if (t->strings[i].id == t->strings[i - 1].id) {
      rc = GTP_E_CORRUPT;
      goto fail;
    }
  idx = malloc((t->nevents ? t->nevents : 1) * sizeof *idx);
  sorted = malloc((t->nevents ? t->nevents : 1) * sizeof *sorted);
  if (!idx || !sorted) {
    rc = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < t->nevents; i++)
    idx[i] = (okey){(uint64_t)t->events[i].ns, o.seq[i], i};
  if (t->nevents > 1)
    qsort(idx, t->nevents, sizeof *idx, cmp_key);
  for (size_t i = 0; i < t->nevents; i++) {
    gtp_goold_event *e = &sorted[i];
    *e = t->events[idx[i].i];
    __int128 d = (__int128)((uint64_t)e->ns - o.min_ticks) * 1000000000 /
                 (__int128)t->freq;
    e->ns = d > INT64_MAX ? INT64_MAX : (int64_t)d;
    if (e->kind != GTP_GO_STW_BEGIN && e->name_id)
      e->name = lookup(t, e->name_id);
  }
  free(t->events);
  t->events = sorted;
  sorted = NULL;
  __int128 span =
      (__int128)(o.max_ticks - o.min_ticks) * 1000000000 / (__int128)t->freq;
  t->span_ns = span > INT64_MAX ? INT64_MAX : (int64_t)span;
  free(idx);
  free(o.seq);
  free(o.ps);
  return 0;
fail:
  free(idx);
  free(sorted);
  free(o.seq);
  free(o.ps);
  gtp_goold_fini(t);
  return rc;
}

void gtp_goold_fini(gtp_goold *t) {
  free(t->events);
  free(t->strings);
  t->events = NULL;
  t->strings = NULL;
  t->nevents = t->nstrings = 0;
}
