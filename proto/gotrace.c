/* gotrace.c: reader of Go 1.22+ execution-trace generations (see gotrace.h).
 *
 * Design notes.
 *
 * The bytes come from the network (an agent's GOTRACE records) or from a
 * file a user imports, so they are hostile until checked. gtp_go_parse does
 * all the checking in one pass: batch headers, Go's size limits, every
 * event of every event batch (type in the version's table, timed, varints
 * well formed, timestamps not overflowing), the string table (ids unique)
 * and the sync batch (exactly one frequency). The iterator then walks the
 * same bytes again with the same decoder and cannot meet an error.
 *
 * Invariants.
 *
 *  1. Every read is bounded by the end of its batch (batch data) or of the
 *     input (headers); no count read from the input sizes an allocation
 *     before it is checked against the bytes that would hold it.
 *  2. A generation that parsed MUST iterate without error, otherwise the
 *     Chrome writer would emit half a generation; parse and iteration share
 *     ev_decode so they cannot disagree.
 *  3. Event batches keep input order in batches[]; the merge breaks timestamp
 *     ties by that order, so one M's batches (flushed in order) are replayed
 *     in order and output is deterministic.
 *  4. The M -> goroutine table is updated only by events of that M's own
 *     batches (or a status event naming that M), in merge order.
 */
#include "gotrace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "varint.h"

/* tracev2 event numbers (stable across 1.22-1.26). */
enum {
  EV_EVENT_BATCH = 1,
  EV_STACKS = 2,
  EV_STACK = 3,
  EV_STRINGS = 4,
  EV_STRING = 5,
  EV_CPU_SAMPLES = 6,
  EV_CPU_SAMPLE = 7,
  EV_FREQUENCY = 8,
  EV_GO_CREATE_SYSCALL = 15,
  EV_GO_START = 16,
  EV_GO_DESTROY = 17,
  EV_GO_DESTROY_SYSCALL = 18,
  EV_GO_STOP = 19,
  EV_GO_BLOCK = 20,
  EV_GO_SYSCALL_END_BLOCKED = 24,
  EV_GO_STATUS = 25,
  EV_STW_BEGIN = 26,
  EV_STW_END = 27,
  EV_GC_BEGIN = 29,
  EV_GC_END = 30,
  EV_USER_TASK_BEGIN = 40,
  EV_USER_TASK_END = 41,
  EV_USER_REGION_BEGIN = 42,
  EV_USER_REGION_END = 43,
  EV_USER_LOG = 44,
  EV_GO_SWITCH = 45,
  EV_GO_SWITCH_DESTROY = 46,
  EV_GO_STATUS_STACK = 48,
  EV_EXPERIMENTAL_BATCH = 49,
  EV_SYNC = 50,
  EV_CLOCK_SNAPSHOT = 51,
  EV_END_OF_GENERATION = 52,
  EV_COUNT = 53,
};

/* Goroutine status values of EvGoStatus. */
enum { GST_RUNNING = 2, GST_SYSCALL = 3 };

/* Per event type: arguments including the timestamp delta (0 = not a timed
 * event), and the first Go version whose table has it. */
static const struct {
  uint8_t nargs, since;
} ev_spec[EV_COUNT] = {
    [9] = {3, 22},  /* ProcsChange dt procs stack */
    [10] = {3, 22}, /* ProcStart dt p p_seq */
    [11] = {1, 22}, /* ProcStop dt */
    [12] = {4, 22}, /* ProcSteal dt p p_seq m */
    [13] = {3, 22}, /* ProcStatus dt p pstatus */
    [14] = {4, 22}, /* GoCreate dt new_g new_stack stack */
    [15] = {2, 22}, /* GoCreateSyscall dt new_g */
    [16] = {3, 22}, /* GoStart dt g g_seq */
    [17] = {1, 22}, /* GoDestroy dt */
    [18] = {1, 22}, /* GoDestroySyscall dt */
    [19] = {3, 22}, /* GoStop dt reason stack */
    [20] = {3, 22}, /* GoBlock dt reason stack */
    [21] = {4, 22}, /* GoUnblock dt g g_seq stack */
    [22] = {3, 22}, /* GoSyscallBegin dt p_seq stack */
    [23] = {1, 22}, /* GoSyscallEnd dt */
    [24] = {1, 22}, /* GoSyscallEndBlocked dt */
    [25] = {4, 22}, /* GoStatus dt g m gstatus */
    [26] = {3, 22}, /* STWBegin dt kind stack */
    [27] = {1, 22}, /* STWEnd dt */
    [28] = {2, 22}, /* GCActive dt seq */
    [29] = {3, 22}, /* GCBegin dt seq stack */
    [30] = {2, 22}, /* GCEnd dt seq */
    [31] = {2, 22}, /* GCSweepActive dt p */
    [32] = {2, 22}, /* GCSweepBegin dt stack */
    [33] = {3, 22}, /* GCSweepEnd dt swept reclaimed */
    [34] = {2, 22}, /* GCMarkAssistActive dt g */
    [35] = {2, 22}, /* GCMarkAssistBegin dt stack */
    [36] = {1, 22}, /* GCMarkAssistEnd dt */
    [37] = {2, 22}, /* HeapAlloc dt value */
    [38] = {2, 22}, /* HeapGoal dt value */
    [39] = {2, 22}, /* GoLabel dt label */
    [40] = {5, 22}, /* UserTaskBegin dt task parent name stack */
    [41] = {3, 22}, /* UserTaskEnd dt task stack */
    [42] = {4, 22}, /* UserRegionBegin dt task name stack */
    [43] = {4, 22}, /* UserRegionEnd dt task name stack */
    [44] = {5, 22}, /* UserLog dt task key value stack */
    [45] = {3, 23}, /* GoSwitch dt g g_seq */
    [46] = {3, 23}, /* GoSwitchDestroy dt g g_seq */
    [47] = {4, 23}, /* GoCreateBlocked dt new_g new_stack stack */
    [48] = {5, 23}, /* GoStatusStack dt g m gstatus stack */
    [51] = {4, 25}, /* ClockSnapshot dt mono sec nsec (sync batches only) */
};

static int ev_known(unsigned version, uint8_t type) {
  return type < EV_COUNT && ev_spec[type].nargs &&
         ev_spec[type].since <= version;
}

/* Decodes one timed event at *pp (invariant 2). ts advances by its delta. */
static int ev_decode(unsigned version, const uint8_t **pp, const uint8_t *end,
                     uint8_t *type, uint64_t *ts,
                     uint64_t args[GTP_GO_ARGS_MAX]) {
  const uint8_t *p = *pp;
  if (p >= end)
    return GTP_E_TRUNC;
  uint8_t t = *p++;
  if (!ev_known(version, t) || t == EV_CLOCK_SNAPSHOT)
    return GTP_E_UNKNOWN;
  uint64_t dt;
  int rc = gtp_uvarint_get(&p, end, &dt);
  if (rc)
    return rc;
  if (dt > UINT64_MAX - *ts)
    return GTP_E_CORRUPT;
  unsigned n = ev_spec[t].nargs - 1u;
  for (unsigned i = 0; i < GTP_GO_ARGS_MAX; i++) {
    args[i] = 0;
    if (i < n && (rc = gtp_uvarint_get(&p, end, &args[i])))
      return rc;
  }
  *ts += dt;
  *type = t;
  *pp = p;
  return 0;
}

static uint8_t ev_kind(uint8_t type) {
  switch (type) {
  case EV_USER_REGION_BEGIN:
    return GTP_GO_REGION_BEGIN;
  case EV_USER_REGION_END:
    return GTP_GO_REGION_END;
  case EV_USER_TASK_BEGIN:
    return GTP_GO_TASK_BEGIN;
  case EV_USER_TASK_END:
    return GTP_GO_TASK_END;
  case EV_USER_LOG:
    return GTP_GO_LOG;
  case EV_GC_BEGIN:
    return GTP_GO_GC_BEGIN;
  case EV_GC_END:
    return GTP_GO_GC_END;
  case EV_STW_BEGIN:
    return GTP_GO_STW_BEGIN;
  case EV_STW_END:
    return GTP_GO_STW_END;
  default:
    return GTP_GO_OTHER;
  }
}

/* ---------------------------------------------------------------- parse */

typedef struct parse_st {
  gtp_go_gen *g;
  size_t cap_strings, cap_batches;
  bool have_freq, have_gen;
} parse_st;

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
  return gtp_array_grow(arr, cap, need, elem, 16);
}

static int parse_strings(parse_st *st, const uint8_t *p, const uint8_t *end) {
  gtp_go_gen *g = st->g;
  p++; /* EvStrings */
  while (p < end) {
    if (*p++ != EV_STRING)
      return GTP_E_CORRUPT;
    uint64_t id, n;
    int rc;
    if ((rc = gtp_uvarint_get(&p, end, &id)) ||
        (rc = gtp_uvarint_get(&p, end, &n)))
      return rc;
    if (n > GTP_GO_STRING_MAX)
      return GTP_E_TOOBIG;
    if (n > (uint64_t)(end - p))
      return GTP_E_TRUNC;
    if (id == 0)
      return GTP_E_CORRUPT;
    if ((rc = grow((void **)&g->strings, &st->cap_strings, g->nstrings + 1,
                   sizeof *g->strings)))
      return rc;
    g->strings[g->nstrings++] =
        (gtp_string_ent){.id = id, .s = {(const char *)p, (size_t)n}};
    p += n;
  }
  return 0;
}

static int parse_stacks(const uint8_t *p, const uint8_t *end) {
  p++; /* EvStacks */
  while (p < end) {
    if (*p++ != EV_STACK)
      return GTP_E_CORRUPT;
    uint64_t id, n, v;
    int rc;
    if ((rc = gtp_uvarint_get(&p, end, &id)) ||
        (rc = gtp_uvarint_get(&p, end, &n)))
      return rc;
    if (n > GTP_GO_FRAMES_MAX)
      return GTP_E_TOOBIG;
    for (uint64_t i = 0; i < 4 * n; i++)
      if ((rc = gtp_uvarint_get(&p, end, &v)))
        return rc;
  }
  return 0;
}

static int parse_samples(const uint8_t *p, const uint8_t *end) {
  p++; /* EvCPUSamples */
  while (p < end) {
    if (*p++ != EV_CPU_SAMPLE)
      return GTP_E_CORRUPT;
    uint64_t v;
    for (int i = 0; i < 5; i++) { /* time m p g stack */
      int rc = gtp_uvarint_get(&p, end, &v);
      if (rc)
        return rc;
    }
  }
  return 0;
}

static int parse_sync(parse_st *st, const uint8_t *p, const uint8_t *end,
                      uint64_t base) {
  gtp_go_gen *g = st->g;
  if (*p == EV_SYNC)
    p++;
  uint64_t ts = base;
  while (p < end) {
    uint8_t t = *p++;
    int rc;
    if (t == EV_FREQUENCY) {
      if (st->have_freq)
        return GTP_E_CORRUPT; /* Go refuses two frequencies too */
      if ((rc = gtp_uvarint_get(&p, end, &g->freq)))
        return rc;
      if (g->freq == 0)
        return GTP_E_CORRUPT;
      st->have_freq = true;
    } else if (t == EV_CLOCK_SNAPSHOT && g->version >= 25) {
      uint64_t dt, sec, nsec;
      if (g->has_snapshot)
        return GTP_E_CORRUPT;
      if ((rc = gtp_uvarint_get(&p, end, &dt)) ||
          (rc = gtp_uvarint_get(&p, end, &g->snap_mono)) ||
          (rc = gtp_uvarint_get(&p, end, &sec)) ||
          (rc = gtp_uvarint_get(&p, end, &nsec)))
        return rc;
      if (dt > UINT64_MAX - ts || nsec >= 1000000000u ||
          sec > (uint64_t)(INT64_MAX / 1000000000 - 1))
        return GTP_E_CORRUPT;
      ts += dt;
      g->snap_ts = ts;
      g->snap_wall_ns = (int64_t)sec * 1000000000 + (int64_t)nsec;
      g->has_snapshot = true;
    } else {
      return GTP_E_CORRUPT;
    }
  }
  return 0;
}

/* Walks an event batch once: validates it and takes the statistics. */
static int parse_events(parse_st *st, const gtp_go_batch *b, size_t *bad) {
  gtp_go_gen *g = st->g;
  const uint8_t *p = b->data, *end = b->data + b->len;
  uint64_t ts = b->base, args[GTP_GO_ARGS_MAX];
  uint8_t type;
  while (p < end) {
    const uint8_t *at = p;
    int rc = ev_decode(g->version, &p, end, &type, &ts, args);
    if (rc) {
      *bad = (size_t)(at - b->data);
      return rc;
    }
    if (g->nevents == 0 || ts < g->min_ts)
      g->min_ts = ts;
    if (ts > g->max_ts)
      g->max_ts = ts;
    g->nevents++;
    g->kinds[ev_kind(type)]++;
  }
  return 0;
}

static int cmp_string(const void *a, const void *b) {
  uint64_t x = ((const gtp_string_ent *)a)->id;
  uint64_t y = ((const gtp_string_ent *)b)->id;
  return x < y ? -1 : x > y;
}

int gtp_go_parse(const uint8_t *in, size_t len, unsigned version, gtp_go_gen *g,
                 size_t *err_off) {
  memset(g, 0, sizeof *g);
  if (version == 24)
    version = 23; /* Go 1.24 writes the 1.23 format */
  if (version < GTP_GO_MIN_VERSION || version > GTP_GO_MAX_VERSION)
    return GTP_E_VERSION;
  g->version = version;
  parse_st st = {.g = g};
  const uint8_t *p = in, *end = in + len;
  size_t off = 0;
  int rc = 0;
  while (p < end) {
    off = (size_t)(p - in);
    uint8_t t = *p++;
    if (t == EV_END_OF_GENERATION && version >= 26) {
      /* Go 1.26 ends a generation in-band: nothing of it may follow. */
      if (p != end) {
        rc = GTP_E_CORRUPT;
        goto fail;
      }
      g->end_marker = true;
      break;
    }
    bool exp = t == EV_EXPERIMENTAL_BATCH && version >= 23;
    if (t != EV_EVENT_BATCH && !exp) {
      rc = GTP_E_CORRUPT;
      goto fail;
    }
    if (exp && p++ >= end) {
      rc = GTP_E_TRUNC;
      goto fail;
    }
    uint64_t gen, m, base, size;
    if ((rc = gtp_uvarint_get(&p, end, &gen)) ||
        (rc = gtp_uvarint_get(&p, end, &m)) ||
        (rc = gtp_uvarint_get(&p, end, &base)) ||
        (rc = gtp_uvarint_get(&p, end, &size)))
      goto fail;
    if (gen == 0 || (st.have_gen && gen != g->gen)) {
      rc = GTP_E_GEN;
      goto fail;
    }
    g->gen = gen;
    st.have_gen = true;
    if (size > GTP_GO_BATCH_MAX) {
      rc = GTP_E_TOOBIG;
      goto fail;
    }
    if (size > (uint64_t)(end - p)) {
      rc = GTP_E_TRUNC;
      goto fail;
    }
    const uint8_t *d = p, *dend = p + size;
    p = dend;
    if (exp || size == 0)
      continue; /* experimental data: opaque; an empty batch: nothing */
    size_t bad = 0;
    switch (d[0]) {
    case EV_STRINGS:
      rc = parse_strings(&st, d, dend);
      break;
    case EV_STACKS:
      rc = parse_stacks(d, dend);
      break;
    case EV_CPU_SAMPLES:
      rc = parse_samples(d, dend);
      break;
    case EV_FREQUENCY:
    case EV_SYNC:
      if ((d[0] == EV_SYNC) != (version >= 25)) {
        rc = GTP_E_CORRUPT;
        break;
      }
      rc = parse_sync(&st, d, dend, base);
      break;
    default: {
      if ((rc = grow((void **)&g->batches, &st.cap_batches, g->nbatches + 1,
                     sizeof *g->batches)))
        goto fail;
      gtp_go_batch *b = &g->batches[g->nbatches++];
      *b = (gtp_go_batch){
          .data = d, .len = size, .m = m, .base = base, .offset = off};
      rc = parse_events(&st, b, &bad);
      if (rc)
        off = (size_t)(d - in) + bad;
      break;
    }
    }
    if (rc)
      goto fail;
  }
  if (!st.have_freq) {
    /* Go needs the frequency to read any timestamp; so do we. An empty
     * input (a generation of a Go session that carries only a ledger) has
     * nothing to read and is fine. */
    if (len == 0)
      return 0;
    off = len;
    rc = GTP_E_CORRUPT;
    goto fail;
  }
  if (g->nstrings > 1) {
    qsort(g->strings, g->nstrings, sizeof *g->strings, cmp_string);
    for (size_t i = 1; i < g->nstrings; i++)
      if (g->strings[i].id == g->strings[i - 1].id) {
        off = len;
        rc = GTP_E_CORRUPT;
        goto fail;
      }
  }
  if (g->has_snapshot) {
    g->anchor_ts = g->snap_ts;
    g->anchor_wall = g->snap_wall_ns;
  }
  return 0;
fail:
  if (err_off)
    *err_off = off;
  gtp_go_fini(g);
  return rc;
}

void gtp_go_fini(gtp_go_gen *g) {
  free(g->strings);
  free(g->batches);
  g->strings = NULL;
  g->batches = NULL;
  g->nstrings = g->nbatches = 0;
}

/* ----------------------------------------------------------------- clock */

int64_t gtp_go_ns(const gtp_go_gen *g, int64_t dts) {
  if (!g->freq)
    return dts;
  __int128 v = (__int128)dts * 1000000000 / (__int128)g->freq;
  return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

int64_t gtp_go_wall_ns(const gtp_go_gen *g, uint64_t ts) {
  __int128 d = (__int128)ts - (__int128)g->anchor_ts;
  if (g->freq)
    d = d * 1000000000 / (__int128)g->freq;
  __int128 w = (__int128)g->anchor_wall + d;
  return w > INT64_MAX ? INT64_MAX : w < INT64_MIN ? INT64_MIN : (int64_t)w;
}

void gtp_go_set_clock(gtp_go_gen *g, const gtp_clock *c) {
  if (g->has_snapshot)
    return;
  g->anchor_ts = g->max_ts;
  g->anchor_wall = c->end_real_ns > (uint64_t)INT64_MAX
                       ? INT64_MAX
                       : (int64_t)c->end_real_ns;
}

gtp_str gtp_go_string(const gtp_go_gen *g, uint64_t id) {
  return gtp_strings_find(g->strings, g->nstrings, id);
}

unsigned gtp_go_version_parse(const char *s, size_t n) {
  const char *e = s + n;
  if (n >= 3 && !memcmp(s, "go ", 3))
    s += 3;
  if (e - s < 3 || s[0] != '1' || s[1] != '.')
    return 0;
  unsigned v = 0;
  const char *d = s + 2;
  while (d < e && *d >= '0' && *d <= '9' && v < 1000)
    v = v * 10 + (unsigned)(*d++ - '0');
  if (d == s + 2 || (d < e && *d != ' ' && *d != '.'))
    return 0;
  return v;
}

/* ----------------------------------------------------------- iteration */

struct gtp_go_cursor {
  const uint8_t *p, *end;
  uint64_t m;
  size_t idx; /* batch order, breaks ties (invariant 3) */
  uint8_t type;
  uint64_t ts;
  uint64_t args[GTP_GO_ARGS_MAX];
};

struct gtp_go_mstate {
  uint64_t m, g;
  bool used;
};

static bool cur_less(const gtp_go_cursor *a, const gtp_go_cursor *b) {
  return a->ts != b->ts ? a->ts < b->ts : a->idx < b->idx;
}

static void heap_down(gtp_go_cursor **h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && cur_less(h[l], h[m]))
      m = l;
    if (l + 1 < n && cur_less(h[l + 1], h[m]))
      m = l + 1;
    if (m == i)
      return;
    gtp_go_cursor *t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Loads the cursor's next event; false at the end of its batch. */
static bool cur_step(const gtp_go_gen *g, gtp_go_cursor *c) {
  if (c->p >= c->end)
    return false;
  /* Parsed already (invariant 2): cannot fail; treated as the end if it
   * ever did, never as garbage. */
  return ev_decode(g->version, &c->p, c->end, &c->type, &c->ts, c->args) == 0;
}

static uint64_t m_hash(uint64_t m) {
  m *= 0x9e3779b97f4a7c15ull;
  return m ^ m >> 31;
}

/* The state of M m; insert: add it when missing (only the Ms of batches
 * are added, at init, so the table never holds more than nbatches). */
static gtp_go_mstate *m_get(gtp_go_iter *it, uint64_t m, bool insert) {
  size_t mask = it->ms_cap - 1;
  for (size_t i = m_hash(m) & mask;; i = (i + 1) & mask) {
    gtp_go_mstate *s = &it->ms[i];
    if (!s->used) {
      if (!insert)
        return NULL;
      *s = (gtp_go_mstate){.m = m, .used = true};
    }
    if (s->m == m)
      return s;
  }
}

int gtp_go_iter_init(gtp_go_iter *it, const gtp_go_gen *g) {
  memset(it, 0, sizeof *it);
  it->g = g;
  if (g->nbatches == 0)
    return 0;
  it->cur = calloc(g->nbatches, sizeof *it->cur);
  it->heap = calloc(g->nbatches, sizeof *it->heap);
  /* Distinct Ms <= batches: at least twice that many slots, so a probe
   * always meets an empty one. */
  it->ms_cap = 16;
  while (it->ms_cap < 2 * g->nbatches)
    it->ms_cap *= 2;
  it->ms = calloc(it->ms_cap, sizeof *it->ms);
  if (!it->cur || !it->heap || !it->ms) {
    gtp_go_iter_fini(it);
    return -ENOMEM;
  }
  for (size_t i = 0; i < g->nbatches; i++) {
    gtp_go_cursor *c = &it->cur[i];
    const gtp_go_batch *b = &g->batches[i];
    *c = (gtp_go_cursor){.p = b->data,
                         .end = b->data + b->len,
                         .m = b->m,
                         .idx = i,
                         .ts = b->base};
    m_get(it, b->m, true);
    if (cur_step(g, c))
      it->heap[it->nheap++] = c;
  }
  for (size_t i = it->nheap / 2; i-- > 0;)
    heap_down(it->heap, it->nheap, i);
  return 0;
}

/* Which goroutine runs on the M after this event (invariant 4). */
static void m_track(gtp_go_iter *it, gtp_go_mstate *s, const gtp_go_cursor *c) {
  switch (c->type) {
  case EV_GO_START:
  case EV_GO_SWITCH:
  case EV_GO_SWITCH_DESTROY:
  case EV_GO_CREATE_SYSCALL:
    s->g = c->args[0];
    break;
  case EV_GO_STOP:
  case EV_GO_BLOCK:
  case EV_GO_DESTROY:
  case EV_GO_DESTROY_SYSCALL:
  case EV_GO_SYSCALL_END_BLOCKED:
    s->g = 0;
    break;
  case EV_GO_STATUS:
  case EV_GO_STATUS_STACK:
    if (c->args[2] == GST_RUNNING || c->args[2] == GST_SYSCALL) {
      if (c->args[1] == c->m)
        s->g = c->args[0];
      else if ((s = m_get(it, c->args[1], false)) != NULL)
        s->g = c->args[0];
    }
    break;
  default:
    break;
  }
}

int gtp_go_next(gtp_go_iter *it, gtp_go_event *ev) {
  if (it->nheap == 0)
    return 0;
  const gtp_go_gen *g = it->g;
  gtp_go_cursor *c = it->heap[0];
  gtp_go_mstate *s = m_get(it, c->m, false);
  memset(ev, 0, sizeof *ev);
  ev->type = c->type;
  ev->kind = ev_kind(c->type);
  ev->ts = c->ts;
  ev->wall_ns = gtp_go_wall_ns(g, c->ts);
  ev->m = c->m;
  memcpy(ev->args, c->args, sizeof ev->args);
  /* The goroutine the event belongs to: the one running before it, except
   * for the events that start one. */
  m_track(it, s, c);
  s = m_get(it, c->m, false);
  ev->g = s->g;
  switch (c->type) {
  case EV_GO_STOP:
  case EV_GO_BLOCK:
  case EV_GO_DESTROY:
  case EV_GO_DESTROY_SYSCALL:
  case EV_GO_SYSCALL_END_BLOCKED:
    ev->g = 0;
    break;
  default:
    break;
  }
  switch (ev->kind) {
  case GTP_GO_TASK_BEGIN:
    ev->task = c->args[0];
    ev->parent = c->args[1];
    ev->name = gtp_go_string(g, c->args[2]);
    break;
  case GTP_GO_TASK_END:
    ev->task = c->args[0];
    break;
  case GTP_GO_REGION_BEGIN:
  case GTP_GO_REGION_END:
    ev->task = c->args[0];
    ev->name = gtp_go_string(g, c->args[1]);
    break;
  case GTP_GO_LOG:
    ev->task = c->args[0];
    ev->name = gtp_go_string(g, c->args[1]);
    ev->value = gtp_go_string(g, c->args[2]);
    break;
  case GTP_GO_STW_BEGIN:
    ev->name = gtp_go_string(g, c->args[0]);
    break;
  default:
    break;
  }
  if (cur_step(g, c)) {
    heap_down(it->heap, it->nheap, 0);
  } else {
    it->heap[0] = it->heap[--it->nheap];
    heap_down(it->heap, it->nheap, 0);
  }
  return 1;
}

void gtp_go_iter_fini(gtp_go_iter *it) {
  free(it->cur);
  free(it->heap);
  free(it->ms);
  memset(it, 0, sizeof *it);
}

/* ------------------------------------------------- gentrace generations */

bool gtp_gen_is_go(const gtp_gen *g) {
  const uint8_t *p = g->body, *end = g->body + g->body_len;
  gtp_record r;
  while (p < end && gtp_record_parse(p, (size_t)(end - p), &r) == 0) {
    if (r.type == GTP_GO_RECORD_TYPE)
      return true;
    p += r.size;
  }
  /* A Go session's generation without Go bytes (one that carries only a
   * ledger) has nothing for this reader: it reads as native. */
  return false;
}

unsigned gtp_gen_go_version(const gtp_gen *g) {
  for (uint32_t i = 0; i < g->start.ntags; i++) {
    const gtp_tag *t = &g->start.tags[i];
    if (t->key.len == 10 && !memcmp(t->key.ptr, "go_version", 10))
      return gtp_go_version_parse(t->value.ptr, t->value.len);
  }
  return 0;
}

int gtp_gen_go_bytes(const gtp_gen *g, const uint8_t **out, size_t *len,
                     uint8_t **owned) {
  const uint8_t *p = g->body, *end = g->body + g->body_len;
  gtp_record r;
  size_t total = 0, n = 0;
  const uint8_t *one = NULL;
  *owned = NULL;
  while (p < end && gtp_record_parse(p, (size_t)(end - p), &r) == 0) {
    if (r.type == GTP_GO_RECORD_TYPE) {
      total += r.len;
      one = r.payload;
      n++;
    }
    p += r.size;
  }
  if (n <= 1) {
    *out = n ? one : (const uint8_t *)"";
    *len = total;
    return 0;
  }
  uint8_t *buf = malloc(total);
  if (!buf)
    return -ENOMEM;
  size_t at = 0;
  for (p = g->body; p < end && gtp_record_parse(p, (size_t)(end - p), &r) == 0;
       p += r.size)
    if (r.type == GTP_GO_RECORD_TYPE) {
      memcpy(buf + at, r.payload, r.len);
      at += r.len;
    }
  *out = buf;
  *len = total;
  *owned = buf;
  return 0;
}

/* ------------------------------------------------------- trace files */

int gtp_go_file_version(const uint8_t *p, size_t len) {
  static const char pre[] = "go 1.";
  if (len < GTP_GO_HEADER_SIZE)
    return GTP_E_TRUNC;
  if (memcmp(p, pre, 5))
    return GTP_E_MAGIC;
  unsigned v = 0;
  size_t i = 5;
  while (i < 8 && p[i] >= '0' && p[i] <= '9')
    v = v * 10 + (unsigned)(p[i++] - '0');
  if (i == 5 || memcmp(p + i, " trace", 6))
    return GTP_E_MAGIC;
  for (i += 6; i < GTP_GO_HEADER_SIZE; i++)
    if (p[i] != 0)
      return GTP_E_MAGIC;
  return (int)v;
}

int gtp_go_split(const uint8_t *in, size_t len, unsigned version,
                 size_t *gen_len, uint64_t *gen) {
  const uint8_t *p = in, *end = in + len;
  bool have = false;
  *gen_len = 0;
  *gen = 0;
  if (version == 24)
    version = 23;
  while (p < end) {
    const uint8_t *at = p;
    uint8_t t = *p++;
    if (t == EV_END_OF_GENERATION && version >= 26) {
      *gen_len = (size_t)(p - in);
      return have ? 0 : GTP_E_CORRUPT;
    }
    bool exp = t == EV_EXPERIMENTAL_BATCH && version >= 23;
    if (t != EV_EVENT_BATCH && !exp)
      return GTP_E_CORRUPT;
    if (exp && p++ >= end)
      return GTP_E_TRUNC;
    uint64_t g, v, size;
    int rc;
    if ((rc = gtp_uvarint_get(&p, end, &g)) ||
        (rc = gtp_uvarint_get(&p, end, &v)) ||
        (rc = gtp_uvarint_get(&p, end, &v)) ||
        (rc = gtp_uvarint_get(&p, end, &size)))
      return rc;
    if (size > GTP_GO_BATCH_MAX)
      return GTP_E_TOOBIG;
    if (size > (uint64_t)(end - p))
      return GTP_E_TRUNC;
    if (have && g != *gen) {
      /* Before 1.26 the next generation starts with a batch of another
       * number; in 1.26 only the marker may end one. */
      if (version >= 26)
        return GTP_E_GEN;
      *gen_len = (size_t)(at - in);
      return 0;
    }
    *gen = g;
    have = true;
    p += size;
  }
  *gen_len = len;
  /* Input ends: a 1.26 generation without its marker was cut short. */
  return version >= 26 && have ? GTP_E_TRUNC : 0;
}
