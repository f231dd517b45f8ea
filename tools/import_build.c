/* import_build.c: a Go trace file as gentrace generations (see import.h).
 *
 * Design notes. Everything is built before anything is sent: a file that
 * fails anywhere (header, any generation, any event) fails the import with
 * its offset, and nothing reaches the daemon. Memory is a small multiple of
 * the file: the body records of every generation are held at once.
 *
 * Invariants.
 *
 *  1. A Go 1.22+ generation's bytes go out unchanged and in order (GOTRACE
 *     payloads concatenate to exactly the bytes gtp_go_split cut), so
 *     format=go downloads give back what the runtime wrote.
 *  2. Native generations (old format) hold each thread's events in time
 *     order in its batches, and every string id an event names is in the
 *     generation's STRINGS (ids of the trace's dictionary, synthetic ones
 *     above its largest id).
 *  3. Every record fits one BATCH frame of the reference agent's size
 *     (IMPORT_RECORD_MAX), so the daemon never sees a frame larger than an
 *     agent's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goconv.h"
#include "goold.h"
#include "gotrace.h"
#include "import.h"
#include "varint.h"

#define IMPORT_RECORD_MAX (240u << 10)
#define SEC 1000000000ll

typedef struct body {
  gtp_wbuf b;
} body;

static int finish(import_set *s, gtp_wbuf *b, const gtp_clock *ck) {
  int rc = gtp_put_clock(b, ck);
  if (rc)
    return rc;
  if (b->err)
    return b->err;
  import_gen *g = &s->gens[s->ngens];
  memset(g, 0, sizeof *g);
  g->gen = s->ngens + 1;
  g->end.gen = g->gen;
  if ((rc = gtp_manifest_compute(b->data, b->len, &g->end)))
    return rc;
  g->body = b->data;
  g->body_len = b->len;
  b->data = NULL; /* ownership moves to the set */
  gtp_wbuf_fini(b);
  s->ngens++;
  return 0;
}

static int put_gotrace(gtp_wbuf *b, const uint8_t *p, size_t n) {
  while (n > 0 && !b->err) {
    size_t k = n < IMPORT_RECORD_MAX ? n : IMPORT_RECORD_MAX;
    uint8_t hdr[1 + GTP_UVARINT_MAX];
    hdr[0] = GTP_GO_RECORD_TYPE;
    size_t hl = 1 + gtp_uvarint_put(hdr + 1, k);
    gtp_wbuf_put(b, hdr, hl);
    gtp_wbuf_put(b, p, k);
    p += k;
    n -= k;
  }
  return b->err;
}

/* ------------------------------------------------------------- 1.22+ */

static int build_new(const uint8_t *data, size_t len, unsigned v,
                     int64_t mtime_ns, import_set *s, size_t *err_off) {
  size_t off = GTP_GO_HEADER_SIZE, n = 0, cap = 0;
  struct span {
    size_t off, len;
    uint64_t min_ts, max_ts, nevents, freq;
    int snap;
    int64_t wmin, wmax;
  } *sp = NULL;
  int rc = 0;
  uint64_t last_max = 0, last_freq = 0;
  /* Pass 1: cut and validate every generation. */
  while (off < len) {
    size_t glen = 0, bad = 0;
    uint64_t gno;
    if ((rc = gtp_go_split(data + off, len - off, v, &glen, &gno))) {
      *err_off = off + glen;
      goto out;
    }
    gtp_go_gen g;
    if ((rc = gtp_go_parse(data + off, glen, v, &g, &bad))) {
      *err_off = off + bad;
      goto out;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      void *q = realloc(sp, cap * sizeof *sp);
      if (!q) {
        gtp_go_fini(&g);
        rc = -ENOMEM;
        goto out;
      }
      sp = q;
    }
    struct span *x = &sp[n++];
    *x = (struct span){.off = off,
                       .len = glen,
                       .min_ts = g.min_ts,
                       .max_ts = g.max_ts,
                       .nevents = g.nevents,
                       .freq = g.freq,
                       .snap = g.has_snapshot};
    if (g.has_snapshot && g.nevents) {
      x->wmin = gtp_go_wall_ns(&g, g.min_ts);
      x->wmax = gtp_go_wall_ns(&g, g.max_ts);
    }
    if (g.nevents && g.max_ts >= last_max) {
      last_max = g.max_ts;
      last_freq = g.freq;
    }
    s->regions += g.kinds[GTP_GO_REGION_BEGIN];
    s->tasks += g.kinds[GTP_GO_TASK_BEGIN];
    s->logs += g.kinds[GTP_GO_LOG];
    gtp_go_fini(&g);
    off += glen;
  }
  if (n == 0) {
    *err_off = off;
    rc = GTP_E_TRUNC; /* a header and nothing else: no generation */
    goto out;
  }
  /* Without a clock snapshot, the file's mtime is the end of the trace. */
  int64_t last_ns =
      last_freq ? (int64_t)((__int128)last_max * SEC / (__int128)last_freq) : 0;
  int64_t shift = mtime_ns - last_ns;
  s->gens = calloc(n, sizeof *s->gens);
  if (!s->gens) {
    rc = -ENOMEM;
    goto out;
  }
  int64_t prev_end_t = 0, prev_end_w = mtime_ns;
  for (size_t i = 0; i < n; i++) {
    struct span *x = &sp[i];
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    if ((rc = put_gotrace(&b, data + x->off, x->len))) {
      gtp_wbuf_fini(&b);
      *err_off = x->off;
      goto out;
    }
    gtp_clock ck;
    if (x->nevents) {
      int64_t t0 = (int64_t)((__int128)x->min_ts * SEC / (__int128)x->freq);
      int64_t t1 = (int64_t)((__int128)x->max_ts * SEC / (__int128)x->freq);
      int64_t w0 = x->snap ? x->wmin : t0 + shift;
      int64_t w1 = x->snap ? x->wmax : t1 + shift;
      ck = (gtp_clock){(uint64_t)t0, (uint64_t)t0, (uint64_t)w0,
                       (uint64_t)t1, (uint64_t)t1, (uint64_t)w1};
      prev_end_t = t1;
      prev_end_w = w1;
    } else { /* no events: a point at the previous generation's end */
      ck = (gtp_clock){(uint64_t)prev_end_t, (uint64_t)prev_end_t,
                       (uint64_t)prev_end_w, (uint64_t)prev_end_t,
                       (uint64_t)prev_end_t, (uint64_t)prev_end_w};
    }
    if (i == 0 || (int64_t)ck.start_real_ns < s->start_ns)
      s->start_ns = (int64_t)ck.start_real_ns;
    if (i == 0 || (int64_t)ck.end_real_ns > s->end_ns)
      s->end_ns = (int64_t)ck.end_real_ns;
    if ((rc = finish(s, &b, &ck))) {
      gtp_wbuf_fini(&b);
      *err_off = x->off;
      goto out;
    }
  }
out:
  free(sp);
  return rc;
}

/* ------------------------------------------------------------ 1.11-1.21 */

typedef struct oldgen {
  const gtp_goold *t;
  uint64_t next_sid; /* synthetic string ids start here */
  /* synthetic strings of this generation */
  gtp_string_ent *syn; /* each .s.ptr malloc'd */
  size_t nsyn, cap_syn;
  uint64_t *used; /* dictionary ids used by this generation */
  size_t nused, cap_used;
} oldgen;

static uint64_t tid_of(const gtp_goold_event *e) {
  switch (e->kind) {
  case GTP_GO_GC_BEGIN:
  case GTP_GO_GC_END:
    return GTP_GOCONV_TID_GC;
  case GTP_GO_STW_BEGIN:
  case GTP_GO_STW_END:
    return GTP_GOCONV_TID_STW;
  default:
    return e->g ? e->g : GTP_GOCONV_TID_M | (e->p & 0xffffffffu);
  }
}

static uint64_t syn_id(oldgen *o, const char *p, size_t n) {
  for (size_t i = 0; i < o->nsyn; i++)
    if (o->syn[i].s.len == n && !memcmp(o->syn[i].s.ptr, p, n))
      return o->syn[i].id;
  if (o->nsyn == o->cap_syn) {
    size_t cap = o->cap_syn ? o->cap_syn * 2 : 32;
    void *q = realloc(o->syn, cap * sizeof *o->syn);
    if (!q)
      return 0;
    o->syn = q;
    o->cap_syn = cap;
  }
  char *dst = malloc(n ? n : 1);
  if (!dst)
    return 0;
  memcpy(dst, p, n);
  o->syn[o->nsyn] = (gtp_string_ent){o->next_sid++, {dst, n}};
  return o->syn[o->nsyn++].id;
}

static int use_id(oldgen *o, uint64_t id) {
  if (o->nused == o->cap_used) {
    size_t cap = o->cap_used ? o->cap_used * 2 : 64;
    void *q = realloc(o->used, cap * sizeof *o->used);
    if (!q)
      return -ENOMEM;
    o->used = q;
    o->cap_used = cap;
  }
  o->used[o->nused++] = id;
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct okey {
  uint64_t tid;
  size_t i;
} okey;

static int cmp_okey(const void *a, const void *b) {
  const okey *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

static gtp_str dict(const gtp_goold *t, uint64_t id) {
  return gtp_strings_find(t->strings, t->nstrings, id);
}

/* Strings into STRINGS records of at most IMPORT_RECORD_MAX (inv. 3);
 * longer strings are cut at GTP_STRING_MAX. */
static int put_strings(gtp_wbuf *b, const gtp_string_ent *s, size_t n) {
  uint64_t ids[256];
  gtp_str strs[256];
  size_t k = 0, bytes = 0;
  for (size_t i = 0; i <= n; i++) {
    size_t l =
        i < n ? (s[i].s.len > GTP_STRING_MAX ? GTP_STRING_MAX : s[i].s.len) : 0;
    if (k && (i == n || k == 256 || bytes + l + 24 > IMPORT_RECORD_MAX)) {
      int rc = gtp_put_strings(b, ids, strs, k);
      if (rc)
        return rc;
      k = bytes = 0;
    }
    if (i < n) {
      ids[k] = s[i].id;
      strs[k++] = (gtp_str){s[i].s.ptr, l};
      bytes += l + 24;
    }
  }
  return 0;
}

/* One native generation from events [from, to) of t (sorted by time). */
static int build_old_gen(import_set *s, const gtp_goold *t, size_t from,
                         size_t to, int64_t t0, int64_t t1, int64_t base_wall,
                         uint64_t maxid) {
  oldgen o = {.t = t, .next_sid = maxid + 1};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  okey *keys = malloc((to - from + 1) * sizeof *keys);
  uint8_t *ev = malloc(GTP_BATCH_MAX);
  int rc = 0;
  if (!keys || !ev) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = from; i < to; i++)
    keys[i - from] = (okey){tid_of(&t->events[i]), i};
  if (to - from > 1)
    qsort(keys, to - from, sizeof *keys, cmp_okey);
  uint64_t gc = 0;
  /* Names first, so the thread names and "GC" are known. */
  for (size_t k = 0; k < to - from; k++) {
    const gtp_goold_event *e = &t->events[keys[k].i];
    if (e->name_id && e->kind != GTP_GO_STW_BEGIN &&
        (rc = use_id(&o, e->name_id)))
      goto out;
  }
  if (o.nused > 1)
    qsort(o.used, o.nused, sizeof *o.used, cmp_u64);
  size_t w = 0;
  for (size_t i = 0; i < o.nused; i++)
    if (!w || o.used[w - 1] != o.used[i])
      o.used[w++] = o.used[i];
  o.nused = w;
  /* Events, one thread's run of batches at a time (invariant 2). */
  size_t k = 0;
  while (k < to - from) {
    uint64_t tid = keys[k].tid;
    size_t len = 0;
    uint64_t nev = 0, prev = (uint64_t)(t->events[keys[k].i].ns);
    uint64_t base = prev;
    char name[48];
    int nl;
    if (tid == GTP_GOCONV_TID_GC)
      nl = snprintf(name, sizeof name, "GC");
    else if (tid == GTP_GOCONV_TID_STW)
      nl = snprintf(name, sizeof name, "STW");
    else if (tid & GTP_GOCONV_TID_M)
      nl = snprintf(name, sizeof name, "P%llu",
                    (unsigned long long)(tid & 0xffffffffu));
    else
      nl = snprintf(name, sizeof name, "G%llu", (unsigned long long)tid);
    uint64_t nid = syn_id(&o, name, (size_t)nl);
    if (!nid) {
      rc = -ENOMEM;
      goto out;
    }
    gtp_event te = {.type = GTP_EV_THREAD_NAME, .ticks = base, .args = {nid}};
    len += (size_t)gtp_event_encode(ev + len, &te, prev);
    nev++;
    for (; k < to - from && keys[k].tid == tid; k++) {
      const gtp_goold_event *e = &t->events[keys[k].i];
      gtp_event x = {.ticks = (uint64_t)e->ns};
      switch (e->kind) {
      case GTP_GO_REGION_BEGIN:
        x.type = GTP_EV_REGION_BEGIN;
        x.args[0] = e->name_id;
        break;
      case GTP_GO_STW_BEGIN:
        x.type = GTP_EV_REGION_BEGIN;
        x.args[0] = syn_id(&o, e->name.len ? e->name.ptr : "STW",
                           e->name.len ? e->name.len : 3);
        break;
      case GTP_GO_GC_BEGIN:
        if (!gc)
          gc = syn_id(&o, "GC", 2);
        x.type = GTP_EV_REGION_BEGIN;
        x.args[0] = gc;
        break;
      case GTP_GO_REGION_END:
      case GTP_GO_STW_END:
      case GTP_GO_GC_END:
        x.type = GTP_EV_REGION_END;
        break;
      case GTP_GO_TASK_BEGIN:
        x.type = GTP_EV_TASK_BEGIN;
        x.args[0] = e->task;
        x.args[1] = e->parent;
        x.args[2] = e->name_id;
        break;
      case GTP_GO_TASK_END:
        x.type = GTP_EV_TASK_END;
        x.args[0] = e->task;
        break;
      case GTP_GO_LOG:
        x.type = GTP_EV_LOG;
        x.args[0] = e->name_id;
        x.msg = (const uint8_t *)e->value.ptr;
        x.msg_len = e->value.len > GTP_LOG_MAX ? GTP_LOG_MAX : e->value.len;
        break;
      default:
        continue;
      }
      if (x.type == GTP_EV_REGION_BEGIN && !x.args[0] &&
          e->kind != GTP_GO_REGION_BEGIN) {
        rc = -ENOMEM; /* a synthetic name could not be kept */
        goto out;
      }
      if (GTP_BATCH_MAX - len < GTP_EVENT_MAX + x.msg_len) {
        if ((rc = gtp_put_batch(&b, s->ngens + 1, tid, base, nev, ev, len)))
          goto out;
        len = 0;
        nev = 0;
        base = prev;
      }
      int m = gtp_event_encode(ev + len, &x, prev);
      if (m < 0) {
        rc = m;
        goto out;
      }
      len += (size_t)m;
      prev = x.ticks;
      nev++;
    }
    if ((rc = gtp_put_batch(&b, s->ngens + 1, tid, base, nev, ev, len)))
      goto out;
  }
  /* STRINGS: the dictionary entries used, then the synthetic ones. */
  gtp_string_ent *ents = malloc((o.nused + 1) * sizeof *ents);
  if (!ents) {
    rc = -ENOMEM;
    goto out;
  }
  size_t ne = 0;
  for (size_t i = 0; i < o.nused; i++) {
    gtp_str v = dict(t, o.used[i]);
    if (v.ptr)
      ents[ne++] = (gtp_string_ent){o.used[i], v};
  }
  rc = put_strings(&b, ents, ne);
  free(ents);
  if (rc || (rc = put_strings(&b, o.syn, o.nsyn)))
    goto out;
  gtp_clock ck = {(uint64_t)t0, (uint64_t)t0, (uint64_t)(base_wall + t0),
                  (uint64_t)t1, (uint64_t)t1, (uint64_t)(base_wall + t1)};
  rc = finish(s, &b, &ck);
out:
  gtp_wbuf_fini(&b);
  free(keys);
  free(ev);
  for (size_t i = 0; i < o.nsyn; i++)
    free((char *)o.syn[i].s.ptr);
  free(o.syn);
  free(o.used);
  return rc;
}

static int build_old(const uint8_t *data, size_t len, int64_t mtime_ns,
                     import_set *s, size_t *err_off) {
  gtp_goold t;
  int rc = gtp_goold_parse(data, len, &t, err_off);
  if (rc)
    return rc;
  s->regions = t.kinds[GTP_GO_REGION_BEGIN];
  s->tasks = t.kinds[GTP_GO_TASK_BEGIN];
  s->logs = t.kinds[GTP_GO_LOG];
  int64_t base_wall = mtime_ns - t.span_ns;
  size_t ngens = (size_t)(t.span_ns / SEC) + 1;
  s->start_ns = base_wall;
  s->end_ns = mtime_ns;
  uint64_t maxid = t.nstrings ? t.strings[t.nstrings - 1].id : 0;
  if (maxid > UINT64_MAX - (1u << 20)) {
    rc = GTP_E_TOOBIG;
    goto out;
  }
  s->gens = calloc(ngens, sizeof *s->gens);
  if (!s->gens) {
    rc = -ENOMEM;
    goto out;
  }
  size_t from = 0;
  for (size_t k = 0; k < ngens; k++) {
    int64_t t0 = (int64_t)k * SEC;
    int64_t t1 = k + 1 == ngens ? t.span_ns : t0 + SEC;
    size_t to = from;
    while (to < t.nevents && (k + 1 == ngens || t.events[to].ns < t0 + SEC))
      to++;
    if ((rc = build_old_gen(s, &t, from, to, t0, t1, base_wall, maxid)))
      goto out;
    from = to;
  }
out:
  *err_off = len;
  gtp_goold_fini(&t);
  return rc;
}

int import_build(const uint8_t *data, size_t len, int64_t mtime_ns,
                 import_set *s, size_t *err_off) {
  memset(s, 0, sizeof *s);
  *err_off = 0;
  int v = gtp_go_file_version(data, len);
  if (v < 0)
    return v;
  s->version = (unsigned)v;
  int rc;
  if (v >= GTP_GO_MIN_VERSION && v <= GTP_GO_MAX_VERSION) {
    s->go_format = 1;
    rc = build_new(data, len, (unsigned)v, mtime_ns, s, err_off);
  } else if (v >= GTP_GOOLD_MIN_VERSION && v <= GTP_GOOLD_MAX_VERSION) {
    rc = build_old(data, len, mtime_ns, s, err_off);
  } else {
    rc = GTP_E_VERSION;
  }
  if (rc) {
    unsigned keep = s->version;
    import_free(s);
    s->version = keep;
  }
  return rc;
}

void import_free(import_set *s) {
  for (size_t i = 0; i < s->ngens; i++)
    free(s->gens[i].body);
  free(s->gens);
  memset(s, 0, sizeof *s);
}
