/* format.c: the gentrace trace format, writer and reader. Spec: FORMAT.md.
 *
 * Owns nothing between calls except what a gtp_wbuf or a gtp_gen holds: the
 * wbuf's byte array, and a parsed generation's three table arrays. Everything
 * else works on caller bytes and hands out borrowed views into them.
 *
 * Invariants:
 *  1. Every decoder MUST check a length or count against both its limit in
 *     format.h and the bytes actually left before using it, otherwise a
 *     hostile length makes us read past the end or allocate gigabytes.
 *  2. A decoder MUST NOT read at or past the end pointer it was given (all
 *     reads go through get_uv/get_bytes below), otherwise a truncated record
 *     reads the neighbour's memory.
 *  3. gtp_gen_parse MUST allocate only arrays whose entry counts were checked
 *     against the input size (an entry takes at least 2 input bytes), so one
 *     parse allocates at most a small multiple of its input; on any error it
 *     MUST free what it allocated and zero *g, otherwise a caller that skips
 *     gtp_gen_fini on error leaks.
 *  4. Record writers MUST check every field limit before appending anything,
 *     so a GTP_E_TOOBIG leaves the buffer as it was and the caller can go on
 *     (e.g. drop one oversized string) without a half-written record.
 *  5. A gtp_wbuf MUST stay failed after its first error (every later put is a
 *     no-op), otherwise a put after a failed grow would append to a buffer
 *     that misses bytes and produce a silently corrupt record.
 */
#include "format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "text.h"
#include "varint.h"

/* ------------------------------------------------------------ primitives */

/* Bounded reader over [p, end): the only way decoders touch input bytes. */
typedef struct rd {
  const uint8_t *p, *end;
} rd;

static size_t rd_left(const rd *r) {
  return (size_t)(r->end - r->p);
}

static int get_uv(rd *r, uint64_t *v) {
  return gtp_uvarint_get(&r->p, r->end, v);
}

/* A uvarint that must fit max (a length or count): GTP_E_TOOBIG above it. */
static int get_uv_max(rd *r, uint64_t max, uint64_t *v) {
  int rc = get_uv(r, v);
  if (rc < 0)
    return rc;
  return *v > max ? GTP_E_TOOBIG : 0;
}

static int get_bytes(rd *r, size_t n, const uint8_t **out) {
  if (rd_left(r) < n)
    return GTP_E_TRUNC;
  *out = r->p;
  r->p += n;
  return 0;
}

/* str = uvarint len (<= max) | bytes. */
static int get_str(rd *r, size_t max, gtp_str *s) {
  uint64_t n;
  const uint8_t *b;
  int rc = get_uv_max(r, max, &n);
  if (rc < 0)
    return rc;
  if ((rc = get_bytes(r, (size_t)n, &b)) < 0)
    return rc;
  s->ptr = (const char *)b;
  s->len = (size_t)n;
  return 0;
}

static size_t str_size(size_t n) {
  return gtp_uvarint_len(n) + n;
}

/* ----------------------------------------------------------- event table */

/* Indexed by type; the order of fields follows gtp_event_info. Append only,
 * in step with enum gtp_event_type (FORMAT.md lists the same table). */
const gtp_event_info gtp_event_infos[GTP_EV_COUNT_] = {
    [GTP_EV_REGION_BEGIN] = {"region_begin", 1, 0, 0x1, 0, 0},
    [GTP_EV_REGION_END] = {"region_end", 0, 0, 0, 0, 0},
    [GTP_EV_INSTANT] = {"instant", 1, 0, 0x1, 0, 0},
    [GTP_EV_COUNTER] = {"counter", 2, 0, 0x1, 0x2, 0},
    [GTP_EV_LOG] = {"log", 1, 1, 0x1, 0, 0},
    [GTP_EV_TASK_BEGIN] = {"task_begin", 3, 0, 0x4, 0, 0},
    [GTP_EV_TASK_END] = {"task_end", 1, 0, 0, 0, 0},
    [GTP_EV_THREAD_NAME] = {"thread_name", 1, 0, 0x1, 0, 0},
    [GTP_EV_REGION_BEGIN_STACK] = {"region_begin_stack", 2, 0, 0x1, 0, 2},
    [GTP_EV_INSTANT_STACK] = {"instant_stack", 2, 0, 0x1, 0, 2},
    [GTP_EV_LOG_STACK] = {"log_stack", 2, 1, 0x1, 0, 2},
    [GTP_EV_LOST] = {"lost", 1, 0, 0, 0, 0},
};

const gtp_event_info *gtp_event_info_get(uint8_t type) {
  if (type == 0 || type >= GTP_EV_COUNT_)
    return NULL;
  return &gtp_event_infos[type];
}

/* ----------------------------------------------------------- file header */

void gtp_file_header_write(uint8_t out[GTP_FILE_HEADER_SIZE]) {
  memcpy(out, GTP_FORMAT_MAGIC, 8);
  gtp_put_u16le(out + 8, GTP_FORMAT_MAJOR);
  gtp_put_u16le(out + 10, GTP_FORMAT_MINOR);
  /* Reserved: written as 0, ignored by readers (room for flags that an old
   * reader may safely ignore). */
  gtp_put_u32le(out + 12, 0);
}

int gtp_file_header_check(const uint8_t *p, size_t len) {
  if (len < GTP_FILE_HEADER_SIZE)
    return GTP_E_TRUNC;
  if (memcmp(p, GTP_FORMAT_MAGIC, 8) != 0)
    return GTP_E_MAGIC;
  /* Any minor of our major is readable: newer minors only add record and
   * event types, which we skip or report per batch. */
  if (gtp_get_u16le(p + 8) != GTP_FORMAT_MAJOR)
    return GTP_E_VERSION;
  return 0;
}

/* ---------------------------------------------------------------- record */

int gtp_record_parse(const uint8_t *p, size_t len, gtp_record *rec) {
  rd r = {p, p + len};
  uint64_t n;
  int rc;
  if (len < 1)
    return GTP_E_TRUNC;
  uint8_t type = *r.p++;
  if (type == 0)
    return GTP_E_CORRUPT;
  if ((rc = get_uv_max(&r, GTP_RECORD_MAX, &n)) < 0)
    return rc;
  if (rd_left(&r) < n)
    return GTP_E_TRUNC;
  rec->type = type;
  rec->payload = r.p;
  rec->len = (size_t)n;
  rec->size = (size_t)(r.p - p) + (size_t)n;
  return 0;
}

/* ------------------------------------------------------ payload decoders */

int gtp_gen_start_decode(const uint8_t *p, size_t len, gtp_gen_start *out) {
  rd r = {p, p + len};
  const uint8_t *sess;
  uint64_t ntags;
  int rc;
  memset(out, 0, sizeof(*out));
  if ((rc = get_bytes(&r, 16, &sess)) < 0 || (rc = get_uv(&r, &out->gen)) < 0 ||
      (rc = get_str(&r, GTP_IDENT_STR_MAX, &out->service)) < 0 ||
      (rc = get_str(&r, GTP_IDENT_STR_MAX, &out->host)) < 0 ||
      (rc = get_uv(&r, &out->pid)) < 0 ||
      (rc = get_uv(&r, &out->process_start_ns)) < 0 ||
      (rc = get_str(&r, GTP_IDENT_STR_MAX, &out->agent_version)) < 0 ||
      (rc = get_uv_max(&r, GTP_TAGS_MAX, &ntags)) < 0)
    goto fail;
  memcpy(out->session, sess, 16);
  for (uint64_t i = 0; i < ntags; i++) {
    if ((rc = get_str(&r, GTP_IDENT_STR_MAX, &out->tags[i].key)) < 0 ||
        (rc = get_str(&r, GTP_IDENT_STR_MAX, &out->tags[i].value)) < 0)
      goto fail;
  }
  out->ntags = (uint32_t)ntags;
  if (rd_left(&r) != 0) {
    rc = GTP_E_CORRUPT;
    goto fail;
  }
  return 0;
fail:
  memset(out, 0, sizeof(*out));
  return rc;
}

int gtp_clock_decode(const uint8_t *p, size_t len, gtp_clock *out) {
  rd r = {p, p + len};
  int rc;
  if ((rc = get_uv(&r, &out->start_ticks)) < 0 ||
      (rc = get_uv(&r, &out->start_mono_ns)) < 0 ||
      (rc = get_uv(&r, &out->start_real_ns)) < 0 ||
      (rc = get_uv(&r, &out->end_ticks)) < 0 ||
      (rc = get_uv(&r, &out->end_mono_ns)) < 0 ||
      (rc = get_uv(&r, &out->end_real_ns)) < 0)
    return rc;
  if (rd_left(&r) != 0)
    return GTP_E_CORRUPT;
  /* Ticks and CLOCK_MONOTONIC never go back; the wall-clock mapping divides
   * by their spans. CLOCK_REALTIME may step back (NTP), so it is not
   * checked. */
  if (out->end_ticks < out->start_ticks ||
      out->end_mono_ns < out->start_mono_ns)
    return GTP_E_CORRUPT;
  return 0;
}

int gtp_gen_end_decode(const uint8_t *p, size_t len, gtp_gen_end *out) {
  rd r = {p, p + len};
  const uint8_t *crc;
  int rc;
  if ((rc = get_uv(&r, &out->gen)) < 0 ||
      (rc = get_uv(&r, &out->records)) < 0 ||
      (rc = get_uv(&r, &out->batches)) < 0 ||
      (rc = get_uv(&r, &out->bytes)) < 0 || (rc = get_bytes(&r, 4, &crc)) < 0 ||
      (rc = get_uv(&r, &out->events)) < 0 ||
      (rc = get_uv(&r, &out->dropped)) < 0 ||
      (rc = get_uv(&r, &out->evicted)) < 0 ||
      (rc = get_uv(&r, &out->rejected)) < 0)
    return rc;
  out->crc = gtp_get_u32le(crc);
  if (rd_left(&r) != 0)
    return GTP_E_CORRUPT;
  return 0;
}

int gtp_batch_decode(const uint8_t *p, size_t len, gtp_batch *out) {
  rd r = {p, p + len};
  int rc;
  if ((rc = get_uv(&r, &out->gen)) < 0 || (rc = get_uv(&r, &out->thread)) < 0 ||
      (rc = get_uv(&r, &out->base_ticks)) < 0 ||
      (rc = get_uv(&r, &out->nevents)) < 0)
    return rc;
  out->events = r.p;
  out->events_len = rd_left(&r);
  if (out->events_len > GTP_BATCH_MAX)
    return GTP_E_TOOBIG;
  /* The smallest event is 2 bytes (type, 1-byte delta): a count above half
   * the bytes cannot be right, and bounding it here keeps manifest sums from
   * overflowing. */
  if (out->nevents > out->events_len / 2)
    return GTP_E_MANIFEST;
  return 0;
}

/* ---------------------------------------------------------------- tables */

int gtp_table_iter_init(gtp_table_iter *it, const uint8_t *p, size_t len) {
  rd r = {p, p + len};
  int rc = get_uv(&r, &it->left);
  if (rc < 0)
    return rc;
  /* Every entry of every table takes at least 2 bytes. */
  if (it->left > rd_left(&r) / 2)
    return GTP_E_TRUNC;
  it->p = r.p;
  it->end = r.end;
  return 0;
}

/* Common end-of-table check: 0 when done, CORRUPT on trailing bytes. */
static int table_done(const gtp_table_iter *it) {
  return it->p == it->end ? 0 : GTP_E_CORRUPT;
}

int gtp_strings_next(gtp_table_iter *it, uint64_t *id, gtp_str *s) {
  if (it->left == 0)
    return table_done(it);
  rd r = {it->p, it->end};
  int rc;
  if ((rc = get_uv(&r, id)) < 0)
    return rc;
  if (*id == 0)
    return GTP_E_CORRUPT;
  if ((rc = get_str(&r, GTP_STRING_MAX, s)) < 0)
    return rc;
  it->p = r.p;
  it->left--;
  return 1;
}

/* Shared by gtp_stacks_next and gtp_gen_parse (which keeps the raw frames). */
static int stacks_next_raw(gtp_table_iter *it, uint64_t *id, uint64_t *pcs,
                           size_t *nframes, const uint8_t **frames,
                           size_t *frames_len) {
  if (it->left == 0)
    return table_done(it);
  rd r = {it->p, it->end};
  uint64_t n;
  int rc;
  if ((rc = get_uv(&r, id)) < 0)
    return rc;
  if (*id == 0)
    return GTP_E_CORRUPT;
  if ((rc = get_uv_max(&r, GTP_STACK_DEPTH_MAX, &n)) < 0)
    return rc;
  const uint8_t *start = r.p;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t pc;
    if ((rc = get_uv(&r, &pc)) < 0)
      return rc;
    if (pcs)
      pcs[i] = pc;
  }
  *nframes = (size_t)n;
  if (frames) {
    *frames = start;
    *frames_len = (size_t)(r.p - start);
  }
  it->p = r.p;
  it->left--;
  return 1;
}

int gtp_stacks_next(gtp_table_iter *it, uint64_t *id, uint64_t *pcs,
                    size_t *nframes) {
  return stacks_next_raw(it, id, pcs, nframes, NULL, NULL);
}

int gtp_modules_next(gtp_table_iter *it, gtp_module *m) {
  if (it->left == 0)
    return table_done(it);
  rd r = {it->p, it->end};
  uint64_t bl;
  int rc;
  /* Paths may exceed the identity limit (PATH_MAX is 4096), so they get the
   * interned-string limit. */
  if ((rc = get_str(&r, GTP_STRING_MAX, &m->path)) < 0 ||
      (rc = get_uv(&r, &m->base)) < 0 || (rc = get_uv(&r, &m->size)) < 0 ||
      (rc = get_uv_max(&r, GTP_BUILDID_MAX, &bl)) < 0 ||
      (rc = get_bytes(&r, (size_t)bl, &m->build_id)) < 0)
    return rc;
  m->build_id_len = (size_t)bl;
  it->p = r.p;
  it->left--;
  return 1;
}

/* ---------------------------------------------------------------- events */

void gtp_event_iter_init(gtp_event_iter *it, const gtp_batch *b) {
  it->p = b->events;
  it->end = b->events + b->events_len;
  it->ticks = b->base_ticks;
  it->left = b->nevents;
}

int gtp_event_next(gtp_event_iter *it, gtp_event *ev) {
  return gtp_event_next_inline(it, ev);
}

int gtp_event_encode(uint8_t *out, const gtp_event *ev, uint64_t prev_ticks) {
  const gtp_event_info *info = gtp_event_info_get(ev->type);
  if (!info)
    return GTP_E_UNKNOWN;
  if (ev->ticks < prev_ticks)
    return GTP_E_BADARG;
  if (info->has_message && ev->msg_len > GTP_LOG_MAX)
    return GTP_E_TOOBIG;
  size_t n = 0;
  out[n++] = ev->type;
  n += gtp_uvarint_put(out + n, ev->ticks - prev_ticks);
  for (unsigned i = 0; i < info->nargs; i++) {
    uint64_t v = ev->args[i];
    if (info->signed_mask >> i & 1)
      v = gtp_zigzag((int64_t)v);
    n += gtp_uvarint_put(out + n, v);
  }
  if (info->has_message) {
    n += gtp_uvarint_put(out + n, ev->msg_len);
    if (ev->msg_len)
      memcpy(out + n, ev->msg, ev->msg_len);
    n += ev->msg_len;
  }
  return (int)n;
}

/* ------------------------------------------------------------ records */

_Static_assert(GTP_WBUF_LIMIT_DEFAULT == GTP_GEN_MAX_BYTES,
               "a wbuf's default limit is one whole generation");

static void put_u8(gtp_wbuf *b, uint8_t v) {
  gtp_wbuf_put(b, &v, 1);
}

/* ------------------------------------------------------- record writers */

/* Every writer computes its payload size first (limits checked, nothing
 * written: invariant 4), then writes type | len | payload in one go. */
static int put_record_head(gtp_wbuf *b, uint8_t type, size_t len) {
  if (len > GTP_RECORD_MAX)
    return GTP_E_TOOBIG;
  put_u8(b, type);
  gtp_wbuf_put_uvarint(b, len);
  return 0;
}

int gtp_put_file_header(gtp_wbuf *b) {
  uint8_t h[GTP_FILE_HEADER_SIZE];
  gtp_file_header_write(h);
  gtp_wbuf_put(b, h, sizeof(h));
  return b->err;
}

/* The writers below that run for every generation on gentraced's loop
 * (GEN_START from the HELLO, GEN_END appended before validation) reserve
 * the whole record with one gtp_wbuf_grow and fill it in place: a put per
 * field (a grow and a copy each, 15-30 per generation) was most of their
 * cost. The bytes are the same as field by field; on a failed reservation
 * nothing is written and b->err is set, as with a failed put. */
static uint8_t *fill_uv(uint8_t *p, uint64_t v) {
  return p + gtp_uvarint_put(p, v);
}

static uint8_t *fill_str(uint8_t *p, const char *s, size_t n) {
  p = fill_uv(p, n);
  if (n)
    memcpy(p, s, n);
  return p + n;
}

/* Bytes of a GEN_START payload after its gen (service through the tags):
 * the session's identity, the same in each of its generations. 0 with *n
 * set, or GTP_E_TOOBIG. */
static int ident_size(const gtp_gen_start *s, size_t *n) {
  if (s->ntags > GTP_TAGS_MAX || s->service.len > GTP_IDENT_STR_MAX ||
      s->host.len > GTP_IDENT_STR_MAX ||
      s->agent_version.len > GTP_IDENT_STR_MAX)
    return GTP_E_TOOBIG;
  size_t len = str_size(s->service.len) + str_size(s->host.len) +
               gtp_uvarint_len(s->pid) + gtp_uvarint_len(s->process_start_ns) +
               str_size(s->agent_version.len) + gtp_uvarint_len(s->ntags);
  for (uint32_t i = 0; i < s->ntags; i++) {
    if (s->tags[i].key.len > GTP_IDENT_STR_MAX ||
        s->tags[i].value.len > GTP_IDENT_STR_MAX)
      return GTP_E_TOOBIG;
    len += str_size(s->tags[i].key.len) + str_size(s->tags[i].value.len);
  }
  *n = len;
  return 0;
}

static uint8_t *fill_ident(uint8_t *p, const gtp_gen_start *s) {
  p = fill_str(p, s->service.ptr, s->service.len);
  p = fill_str(p, s->host.ptr, s->host.len);
  p = fill_uv(p, s->pid);
  p = fill_uv(p, s->process_start_ns);
  p = fill_str(p, s->agent_version.ptr, s->agent_version.len);
  p = fill_uv(p, s->ntags);
  for (uint32_t i = 0; i < s->ntags; i++) {
    p = fill_str(p, s->tags[i].key.ptr, s->tags[i].key.len);
    p = fill_str(p, s->tags[i].value.ptr, s->tags[i].value.len);
  }
  return p;
}

/* The record's head, session and gen, with room for ident_len bytes after
 * them; returns where they go, or NULL (b->err set). */
static uint8_t *gen_start_head(gtp_wbuf *b, const uint8_t session[16],
                               uint64_t gen, size_t ident_len, int *rc) {
  size_t len = 16 + gtp_uvarint_len(gen) + ident_len;
  if (len > GTP_RECORD_MAX) {
    *rc = GTP_E_TOOBIG;
    return NULL;
  }
  size_t head = 1 + gtp_uvarint_len(len);
  uint8_t *p = gtp_wbuf_grow(b, head + len);
  if (p == NULL) {
    *rc = b->err;
    return NULL;
  }
  *p++ = GTP_REC_GEN_START;
  p = fill_uv(p, len);
  memcpy(p, session, 16);
  return fill_uv(p + 16, gen);
}

int gtp_put_gen_start(gtp_wbuf *b, const gtp_gen_start *s) {
  size_t ilen = 0;
  int rc = ident_size(s, &ilen);
  if (rc < 0)
    return rc;
  uint8_t *p = gen_start_head(b, s->session, s->gen, ilen, &rc);
  if (p == NULL)
    return rc;
  uint8_t *end = p + ilen;
  p = fill_ident(p, s);
  GTP_ASSERT(p == end); /* the sizes above and the fill agree */
  (void)end;
  return b->err;
}

int gtp_put_gen_start_ident(gtp_wbuf *b, const gtp_gen_start *s) {
  size_t ilen = 0;
  int rc = ident_size(s, &ilen);
  if (rc < 0)
    return rc;
  /* Within a record: a GEN_START around it must still fit. */
  if (ilen > GTP_RECORD_MAX - 16 - GTP_UVARINT_MAX)
    return GTP_E_TOOBIG;
  uint8_t *p = gtp_wbuf_grow(b, ilen);
  if (p == NULL)
    return b->err;
  uint8_t *end = fill_ident(p, s);
  GTP_ASSERT(end == p + ilen);
  (void)end;
  return b->err;
}

int gtp_put_gen_start_with(gtp_wbuf *b, const uint8_t session[16], uint64_t gen,
                           const uint8_t *ident, size_t ident_len) {
  int rc = 0;
  uint8_t *p = gen_start_head(b, session, gen, ident_len, &rc);
  if (p == NULL)
    return rc;
  if (ident_len)
    memcpy(p, ident, ident_len);
  return b->err;
}

int gtp_put_clock(gtp_wbuf *b, const gtp_clock *c) {
  const uint64_t v[6] = {c->start_ticks, c->start_mono_ns, c->start_real_ns,
                         c->end_ticks,   c->end_mono_ns,   c->end_real_ns};
  size_t len = 0;
  for (int i = 0; i < 6; i++)
    len += gtp_uvarint_len(v[i]);
  int rc = put_record_head(b, GTP_REC_CLOCK, len);
  if (rc < 0)
    return rc;
  for (int i = 0; i < 6; i++)
    gtp_wbuf_put_uvarint(b, v[i]);
  return b->err;
}

static size_t gen_end_size(const gtp_gen_end *e) {
  return gtp_uvarint_len(e->gen) + gtp_uvarint_len(e->records) +
         gtp_uvarint_len(e->batches) + gtp_uvarint_len(e->bytes) + 4 +
         gtp_uvarint_len(e->events) + gtp_uvarint_len(e->dropped) +
         gtp_uvarint_len(e->evicted) + gtp_uvarint_len(e->rejected);
}

/* GEN_END's payload at p (gen_end_size(e) bytes); returns its end. */
static uint8_t *fill_gen_end(uint8_t *p, const gtp_gen_end *e) {
  p = fill_uv(p, e->gen);
  p = fill_uv(p, e->records);
  p = fill_uv(p, e->batches);
  p = fill_uv(p, e->bytes);
  gtp_put_u32le(p, e->crc);
  p = fill_uv(p + 4, e->events);
  p = fill_uv(p, e->dropped);
  p = fill_uv(p, e->evicted);
  return fill_uv(p, e->rejected);
}

int gtp_gen_end_encode(gtp_wbuf *b, const gtp_gen_end *e) {
  size_t len = gen_end_size(e);
  uint8_t *p = gtp_wbuf_grow(b, len);
  if (p == NULL)
    return b->err;
  uint8_t *end = fill_gen_end(p, e);
  GTP_ASSERT(end == p + len);
  (void)end;
  return b->err;
}

int gtp_put_gen_end(gtp_wbuf *b, const gtp_gen_end *e) {
  size_t len = gen_end_size(e); /* at most 86 bytes: under GTP_RECORD_MAX */
  size_t head = 1 + gtp_uvarint_len(len);
  uint8_t *p = gtp_wbuf_grow(b, head + len);
  if (p == NULL)
    return b->err;
  *p = GTP_REC_GEN_END;
  uint8_t *end = fill_gen_end(fill_uv(p + 1, len), e);
  GTP_ASSERT(end == p + head + len);
  (void)end;
  return b->err;
}

int gtp_put_batch(gtp_wbuf *b, uint64_t gen, uint64_t thread,
                  uint64_t base_ticks, uint64_t nevents, const uint8_t *events,
                  size_t events_len) {
  if (events_len > GTP_BATCH_MAX)
    return GTP_E_TOOBIG;
  /* Same rule as gtp_batch_decode: never write what readers refuse. */
  if (nevents > events_len / 2)
    return GTP_E_BADARG;
  size_t len = gtp_uvarint_len(gen) + gtp_uvarint_len(thread) +
               gtp_uvarint_len(base_ticks) + gtp_uvarint_len(nevents) +
               events_len;
  int rc = put_record_head(b, GTP_REC_EVENTS, len);
  if (rc < 0)
    return rc;
  gtp_wbuf_put_uvarint(b, gen);
  gtp_wbuf_put_uvarint(b, thread);
  gtp_wbuf_put_uvarint(b, base_ticks);
  gtp_wbuf_put_uvarint(b, nevents);
  gtp_wbuf_put(b, events, events_len);
  return b->err;
}

int gtp_put_strings(gtp_wbuf *b, const uint64_t *ids, const gtp_str *strs,
                    size_t n) {
  size_t len = gtp_uvarint_len(n);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] == 0)
      return GTP_E_BADARG;
    if (strs[i].len > GTP_STRING_MAX)
      return GTP_E_TOOBIG;
    len += gtp_uvarint_len(ids[i]) + str_size(strs[i].len);
    if (len > GTP_RECORD_MAX)
      return GTP_E_TOOBIG; /* also keeps len from overflowing */
  }
  int rc = put_record_head(b, GTP_REC_STRINGS, len);
  if (rc < 0)
    return rc;
  gtp_wbuf_put_uvarint(b, n);
  for (size_t i = 0; i < n; i++) {
    gtp_wbuf_put_uvarint(b, ids[i]);
    gtp_wbuf_put_str(b, strs[i].ptr, strs[i].len);
  }
  return b->err;
}

int gtp_put_stacks(gtp_wbuf *b, const uint64_t *ids, const uint64_t *const *pcs,
                   const size_t *depths, size_t n) {
  size_t len = gtp_uvarint_len(n);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] == 0)
      return GTP_E_BADARG;
    if (depths[i] > GTP_STACK_DEPTH_MAX)
      return GTP_E_TOOBIG;
    len += gtp_uvarint_len(ids[i]) + gtp_uvarint_len(depths[i]);
    for (size_t j = 0; j < depths[i]; j++)
      len += gtp_uvarint_len(pcs[i][j]);
    if (len > GTP_RECORD_MAX)
      return GTP_E_TOOBIG;
  }
  int rc = put_record_head(b, GTP_REC_STACKS, len);
  if (rc < 0)
    return rc;
  gtp_wbuf_put_uvarint(b, n);
  for (size_t i = 0; i < n; i++) {
    gtp_wbuf_put_uvarint(b, ids[i]);
    gtp_wbuf_put_uvarint(b, depths[i]);
    for (size_t j = 0; j < depths[i]; j++)
      gtp_wbuf_put_uvarint(b, pcs[i][j]);
  }
  return b->err;
}

int gtp_put_modules(gtp_wbuf *b, const gtp_module *mods, size_t n) {
  size_t len = gtp_uvarint_len(n);
  for (size_t i = 0; i < n; i++) {
    if (mods[i].path.len > GTP_STRING_MAX ||
        mods[i].build_id_len > GTP_BUILDID_MAX)
      return GTP_E_TOOBIG;
    len += str_size(mods[i].path.len) + gtp_uvarint_len(mods[i].base) +
           gtp_uvarint_len(mods[i].size) + str_size(mods[i].build_id_len);
    if (len > GTP_RECORD_MAX)
      return GTP_E_TOOBIG;
  }
  int rc = put_record_head(b, GTP_REC_MODULES, len);
  if (rc < 0)
    return rc;
  gtp_wbuf_put_uvarint(b, n);
  for (size_t i = 0; i < n; i++) {
    gtp_wbuf_put_str(b, mods[i].path.ptr, mods[i].path.len);
    gtp_wbuf_put_uvarint(b, mods[i].base);
    gtp_wbuf_put_uvarint(b, mods[i].size);
    gtp_wbuf_put_str(b, (const char *)mods[i].build_id, mods[i].build_id_len);
  }
  return b->err;
}

/* -------------------------------------------------------------- manifest */

/* Counts of gtp_manifest_compute without the CRC (gtp_gen_parse checks the
 * CRC on its own, first). With ntab, also adds the entries each table
 * record announces (strings, stacks, modules: bounded by its bytes) for
 * gen_fill, so that gtp_gen_parse_known needs no pass of its own. */
static int manifest_walk(const uint8_t *p, size_t len, gtp_gen_end *e,
                         size_t ntab[3]) {
  uint64_t records = 0, batches = 0, events = 0;
  size_t off = 0;
  if (len > GTP_GEN_MAX_BYTES)
    return GTP_E_TOOBIG;
  while (off < len) {
    gtp_record rec;
    int rc = gtp_record_parse(p + off, len - off, &rec);
    if (rc < 0)
      return rc;
    /* Generation framing inside a body means two generations ran together. */
    if (rec.type == GTP_REC_GEN_START || rec.type == GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    if (rec.type == GTP_REC_EVENTS) {
      gtp_batch bt;
      if ((rc = gtp_batch_decode(rec.payload, rec.len, &bt)) < 0)
        return rc;
      batches++;
      events += bt.nevents; /* bounded by bytes: cannot overflow */
    } else if (ntab != NULL &&
               (rec.type == GTP_REC_STRINGS || rec.type == GTP_REC_STACKS ||
                rec.type == GTP_REC_MODULES)) {
      gtp_table_iter it;
      if ((rc = gtp_table_iter_init(&it, rec.payload, rec.len)) < 0)
        return rc;
      ntab[rec.type == GTP_REC_STRINGS  ? 0
           : rec.type == GTP_REC_STACKS ? 1
                                        : 2] += (size_t)it.left;
    }
    records++;
    off += rec.size;
  }
  e->records = records;
  e->batches = batches;
  e->bytes = len;
  e->events = events;
  return 0;
}

int gtp_manifest_compute(const uint8_t *p, size_t len, gtp_gen_end *e) {
  int rc = manifest_walk(p, len, e, NULL);
  if (rc < 0)
    return rc;
  e->crc = gtp_crc32c(0, p, len);
  return 0;
}

int gtp_manifest_check(const gtp_gen_end *want, const gtp_gen_end *got) {
  if (want->records != got->records || want->batches != got->batches ||
      want->bytes != got->bytes || want->events != got->events)
    return GTP_E_MANIFEST;
  if (want->crc != got->crc)
    return GTP_E_CRC;
  return 0;
}

/* ------------------------------------------------------ generation reader */

static int cmp_string_ent(const void *a, const void *b) {
  uint64_t x = ((const gtp_string_ent *)a)->id;
  uint64_t y = ((const gtp_string_ent *)b)->id;
  return x < y ? -1 : x > y;
}

static int cmp_stack_ent(const void *a, const void *b) {
  uint64_t x = ((const gtp_stack_ent *)a)->id;
  uint64_t y = ((const gtp_stack_ent *)b)->id;
  return x < y ? -1 : x > y;
}

/* Checks every event of a batch: gtp_event_next itself (inline: the
 * compiler drops the event it fills; runs of counters at once), so that a
 * parsed generation's batches decode without surprises and the summary's walk,
 * which decodes with the same function, reaches the same verdict (summary.c
 * invariant 4). An unknown event type ends the walk without error: a newer
 * minor may add event types, and this reader must still store and forward such
 * generations (gtp_event_next reports GTP_E_UNKNOWN to whoever decodes
 * that batch). */
static int batch_validate(const gtp_batch *b) {
  gtp_event_iter it;
  gtp_event ev;
  gtp_counter_run run;
  int rc;
  gtp_event_iter_init(&it, b);
  do
    rc = gtp_event_counter_run(&it, &run);
  while (rc == 1 || (rc == 0 && (rc = gtp_event_next_inline(&it, &ev)) == 1));
  return rc == GTP_E_UNKNOWN ? 0 : rc;
}

/* Room for a small generation's tables (a fleet agent's is a few strings
 * and stacks), for a caller that keeps nothing of them
 * (gtp_gen_verify_known): its checks then need no allocation. */
#define SCRATCH_STRINGS 32
#define SCRATCH_STACKS 32
#define SCRATCH_MODULES 4
typedef struct gen_scratch {
  gtp_string_ent strings[SCRATCH_STRINGS];
  gtp_stack_ent stacks[SCRATCH_STACKS];
  gtp_module modules[SCRATCH_MODULES];
} gen_scratch;

/* Small tables by insertion (no qsort call, no merge buffer); the result is
 * the same order, ids being compared whole. One definition per entry type. */
#define SORT_SMALL 16
#define SORT_BY_ID(name, type, cmp)                                            \
  static void name(type *a, size_t n) {                                        \
    if (n > SORT_SMALL) {                                                      \
      qsort(a, n, sizeof(*a), cmp);                                            \
      return;                                                                  \
    }                                                                          \
    for (size_t i = 1; i < n; i++) {                                           \
      type t = a[i];                                                           \
      size_t j = i;                                                            \
      for (; j > 0 && a[j - 1].id > t.id; j--)                                 \
        a[j] = a[j - 1];                                                       \
      a[j] = t;                                                                \
    }                                                                          \
  }
SORT_BY_ID(sort_strings, gtp_string_ent, cmp_string_ent)
SORT_BY_ID(sort_stacks, gtp_stack_ent, cmp_stack_ent)

/* gen_fill's state between records. */
typedef struct fill_st {
  size_t room[3]; /* entries the tables have room for: strings, stacks,
                     modules */
  int nclock;
  size_t ngotrace;
  int check_events;
} fill_st;

#define FILL_FULL 1 /* fill_record: a table has no room for its next entry */

/* One body record into g: gen_fill's checks and table entries for it. bt
 * is the record's batch when the caller decoded it already (EVENTS), else
 * NULL. 0, FILL_FULL, or the record's error. */
static int fill_record(gtp_gen *g, const gtp_record *rec, const gtp_batch *bt,
                       fill_st *fs) {
  gtp_table_iter it;
  int rc;
  switch (rec->type) {
  case GTP_REC_EVENTS: {
    gtp_batch own;
    if (bt == NULL) {
      if ((rc = gtp_batch_decode(rec->payload, rec->len, &own)) < 0)
        return rc;
      bt = &own;
    }
    if (bt->gen != g->start.gen)
      return GTP_E_GEN;
    if (fs->check_events && (rc = batch_validate(bt)) < 0)
      return rc;
    return 0;
  }
  case GTP_REC_CLOCK:
    if (++fs->nclock > 1)
      return GTP_E_CORRUPT;
    return gtp_clock_decode(rec->payload, rec->len, &g->clock);
  case GTP_REC_STRINGS:
    if ((rc = gtp_table_iter_init(&it, rec->payload, rec->len)) < 0)
      return rc;
    for (;;) {
      gtp_string_ent e;
      if ((rc = gtp_strings_next(&it, &e.id, &e.s)) <= 0)
        return rc;
      if (g->nstrings == fs->room[0])
        return FILL_FULL;
      g->strings[g->nstrings++] = e;
    }
  case GTP_REC_STACKS:
    if ((rc = gtp_table_iter_init(&it, rec->payload, rec->len)) < 0)
      return rc;
    for (;;) {
      gtp_stack_ent e;
      size_t nf = 0;
      rc = stacks_next_raw(&it, &e.id, NULL, &nf, &e.frames, &e.frames_len);
      if (rc <= 0)
        return rc;
      if (g->nstacks == fs->room[1])
        return FILL_FULL;
      e.nframes = (uint32_t)nf;
      g->stacks[g->nstacks++] = e;
    }
  case GTP_REC_MODULES:
    if ((rc = gtp_table_iter_init(&it, rec->payload, rec->len)) < 0)
      return rc;
    for (;;) {
      gtp_module m;
      if ((rc = gtp_modules_next(&it, &m)) <= 0)
        return rc;
      if (g->nmodules == fs->room[2])
        return FILL_FULL;
      g->modules[g->nmodules++] = m;
    }
  case GTP_REC_GOTRACE:
    /* Go trace bytes (FORMAT.md 4.8): opaque here, bounded by
     * GTP_RECORD_MAX like every record; read by the Go reader. */
    fs->ngotrace++;
    return 0;
  default:
    /* Unknown body record of a newer minor: covered by the manifest,
     * otherwise opaque. */
    return 0;
  }
}

/* gen_fill's checks once every record is in: one CLOCK, not mixed, the
 * tables sorted with unique ids. */
static int fill_finish(gtp_gen *g, const fill_st *fs) {
  if (fs->nclock != 1)
    return GTP_E_CORRUPT;
  /* A generation is either native (EVENTS) or a Go generation (GOTRACE):
   * mixed, neither reader could show it whole. */
  if (fs->ngotrace && g->end.batches)
    return GTP_E_CORRUPT;
  sort_strings(g->strings, g->nstrings);
  for (size_t i = 1; i < g->nstrings; i++)
    if (g->strings[i].id == g->strings[i - 1].id)
      return GTP_E_CORRUPT;
  sort_stacks(g->stacks, g->nstacks);
  for (size_t i = 1; i < g->nstacks; i++)
    if (g->stacks[i].id == g->stacks[i - 1].id)
      return GTP_E_CORRUPT;
  return 0;
}

/* Second pass over a body whose manifest matched: decodes every record and
 * fills the tables. Counts (nstr, nstk, nmod) were bounded by the bytes in
 * the first pass, so the arrays are sized exactly (malloc'd: every entry
 * used is written before it is read). */
static int gen_fill(gtp_gen *g, size_t nstr, size_t nstk, size_t nmod,
                    int check_events) {
  const uint8_t *p = g->body;
  size_t len = g->body_len, off = 0;
  int rc;
  /* Counts bounded by the input's bytes: n * size cannot overflow. */
  if (nstr && !(g->strings = malloc(nstr * sizeof(*g->strings))))
    return -ENOMEM;
  if (nstk && !(g->stacks = malloc(nstk * sizeof(*g->stacks))))
    return -ENOMEM;
  if (nmod && !(g->modules = malloc(nmod * sizeof(*g->modules))))
    return -ENOMEM;
  fill_st fs = {{nstr, nstk, nmod}, 0, 0, check_events};
  while (off < len) {
    gtp_record rec;
    if ((rc = gtp_record_parse(p + off, len - off, &rec)) < 0)
      return rc;
    off += rec.size;
    if ((rc = fill_record(g, &rec, NULL, &fs)) == FILL_FULL)
      return GTP_E_INTERNAL; /* the first pass counted otherwise */
    if (rc < 0)
      return rc;
  }
  return fill_finish(g, &fs);
}

/* What both parses check once the GEN_START, the body and the GEN_END are
 * known: the generation numbers agree, the CRC, the manifest, then the
 * tables and events (gen_fill). `counted` holds the table counts the
 * caller's own walk found, or NULL to count them in the manifest walk. */
static int gen_check_body(gtp_gen *g, const size_t counted[3],
                          int check_events) {
  size_t ntab[3] = {0, 0, 0};
  gtp_gen_end got;
  int rc;
  if (g->end.gen != g->start.gen)
    return GTP_E_GEN;
  /* CRC first: damaged bytes should say "CRC mismatch", not whatever a
   * decoder makes of them. */
  if (gtp_crc32c(0, g->body, g->body_len) != g->end.crc)
    return GTP_E_CRC;
  got = g->end; /* crc already equal */
  size_t *count_here = counted ? NULL : ntab;
  if ((rc = manifest_walk(g->body, g->body_len, &got, count_here)) < 0 ||
      (rc = gtp_manifest_check(&g->end, &got)) < 0)
    return rc;
  if (counted)
    memcpy(ntab, counted, sizeof ntab);
  return gen_fill(g, ntab[0], ntab[1], ntab[2], check_events);
}

static int gen_parse(const uint8_t *p, size_t len, gtp_gen *g, size_t *consumed,
                     int check_events) {
  gtp_record rec;
  size_t off, nstr = 0, nstk = 0, nmod = 0;
  int rc;

  memset(g, 0, sizeof(*g));
  if ((rc = gtp_record_parse(p, len, &rec)) < 0)
    goto fail;
  if (rec.type != GTP_REC_GEN_START) {
    rc = GTP_E_CORRUPT;
    goto fail;
  }
  if ((rc = gtp_gen_start_decode(rec.payload, rec.len, &g->start)) < 0)
    goto fail;
  g->base = p;
  off = rec.size;
  g->body = p + off;

  /* First pass: record framing only, up to GEN_END, counting table entries
   * (each bounded by its record's bytes) for the second pass. */
  for (;;) {
    if (off > GTP_GEN_MAX_BYTES) {
      rc = GTP_E_TOOBIG;
      goto fail;
    }
    if ((rc = gtp_record_parse(p + off, len - off, &rec)) < 0)
      goto fail;
    if (rec.type == GTP_REC_GEN_END)
      break;
    if (rec.type == GTP_REC_GEN_START) {
      rc = GTP_E_CORRUPT; /* a generation without its end */
      goto fail;
    }
    if (rec.type == GTP_REC_STRINGS || rec.type == GTP_REC_STACKS ||
        rec.type == GTP_REC_MODULES) {
      gtp_table_iter it;
      if ((rc = gtp_table_iter_init(&it, rec.payload, rec.len)) < 0)
        goto fail;
      size_t *cnt = rec.type == GTP_REC_STRINGS  ? &nstr
                    : rec.type == GTP_REC_STACKS ? &nstk
                                                 : &nmod;
      *cnt += (size_t)it.left;
    }
    off += rec.size;
  }
  g->body_len = (size_t)(p + off - g->body);
  if ((rc = gtp_gen_end_decode(rec.payload, rec.len, &g->end)) < 0)
    goto fail;
  off += rec.size;
  if (off > GTP_GEN_MAX_BYTES) {
    rc = GTP_E_TOOBIG;
    goto fail;
  }
  g->size = off;
  const size_t counted[3] = {nstr, nstk, nmod};
  if ((rc = gen_check_body(g, counted, check_events)) < 0)
    goto fail;
  if (consumed)
    *consumed = g->size;
  return 0;
fail:
  gtp_gen_fini(g);
  return rc;
}

int gtp_gen_parse(const uint8_t *p, size_t len, gtp_gen *g, size_t *consumed) {
  return gen_parse(p, len, g, consumed, 1);
}

int gtp_gen_parse_lazy(const uint8_t *p, size_t len, gtp_gen *g,
                       size_t *consumed) {
  return gen_parse(p, len, g, consumed, 0);
}

int gtp_gen_parse_known(const uint8_t *p, size_t len,
                        const gtp_gen_start *start, size_t body_off,
                        size_t body_len, const gtp_gen_end *end,
                        int check_events, gtp_gen *g) {
  int rc;
  memset(g, 0, sizeof(*g));
  if (len > GTP_GEN_MAX_BYTES) {
    rc = GTP_E_TOOBIG;
    goto fail;
  }
  if (body_off > len || body_len > len - body_off) {
    rc = GTP_E_INTERNAL; /* the caller's offsets, not the input */
    goto fail;
  }
  g->start = *start;
  g->end = *end;
  g->base = p;
  g->size = len;
  g->body = p + body_off;
  g->body_len = body_len;
  /* The same checks, in the same order, as gen_parse after its GEN_END. */
  if ((rc = gen_check_body(g, NULL, check_events)) < 0)
    goto fail;
  return 0;
fail:
  gtp_gen_fini(g);
  return rc;
}

/* gen_check_body for a caller that keeps nothing of g but its CLOCK
 * (gtp_gen_verify_known): the manifest walk and gen_fill in one pass over
 * the records, the tables in sc. The verdict is gen_check_body's: the
 * walk's errors (framing) at once, in record order, as its first pass
 * finds them; then the manifest's; then the first of gen_fill's, which is
 * kept while the walk goes on; then the closing checks. A table larger
 * than sc: gen_check_body itself, its arrays malloc'd (the caller frees
 * what is not sc's). */
static int check_body_once(gtp_gen *g, int check_events, gen_scratch *sc) {
  const uint8_t *p = g->body;
  size_t len = g->body_len, off = 0;
  uint64_t records = 0, batches = 0, events = 0;
  int rc, later = 0;
  if (g->end.gen != g->start.gen)
    return GTP_E_GEN;
  if (gtp_crc32c(0, p, len) != g->end.crc)
    return GTP_E_CRC;
  if (len > GTP_GEN_MAX_BYTES)
    return GTP_E_TOOBIG;
  g->strings = sc->strings;
  g->stacks = sc->stacks;
  g->modules = sc->modules;
  fill_st fs = {
      {SCRATCH_STRINGS, SCRATCH_STACKS, SCRATCH_MODULES}, 0, 0, check_events};
  while (off < len) {
    gtp_record rec;
    gtp_batch bt;
    const gtp_batch *pbt = NULL;
    if ((rc = gtp_record_parse(p + off, len - off, &rec)) < 0)
      return rc;
    if (rec.type == GTP_REC_GEN_START || rec.type == GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    if (rec.type == GTP_REC_EVENTS) {
      if ((rc = gtp_batch_decode(rec.payload, rec.len, &bt)) < 0)
        return rc;
      batches++;
      events += bt.nevents; /* bounded by bytes: cannot overflow */
      pbt = &bt;
    } else if (rec.type == GTP_REC_STRINGS || rec.type == GTP_REC_STACKS ||
               rec.type == GTP_REC_MODULES) {
      gtp_table_iter it;
      if ((rc = gtp_table_iter_init(&it, rec.payload, rec.len)) < 0)
        return rc;
    }
    records++;
    off += rec.size;
    if (later == 0 && (rc = fill_record(g, &rec, pbt, &fs)) != 0) {
      if (rc == FILL_FULL)
        goto two_passes;
      later = rc;
    }
  }
  gtp_gen_end got = g->end; /* crc already equal */
  got.records = records;
  got.batches = batches;
  got.bytes = len;
  got.events = events;
  if ((rc = gtp_manifest_check(&g->end, &got)) < 0)
    return rc;
  if (later < 0)
    return later;
  return fill_finish(g, &fs);
two_passes:
  g->strings = NULL;
  g->stacks = NULL;
  g->modules = NULL;
  g->nstrings = g->nstacks = g->nmodules = 0;
  g->clock = (gtp_clock){0};
  return gen_check_body(g, NULL, check_events);
}

int gtp_gen_verify_known(const uint8_t *body, size_t body_len, uint64_t gen,
                         const gtp_gen_end *end, int check_events,
                         gtp_clock *clock) {
  gen_scratch sc;
  gtp_gen g;
  /* Not memset, nor start copied whole: its identity (a kilobyte of tags)
   * is never read by the checks; every field they read is set here. */
  g.start.gen = gen;
  g.clock = (gtp_clock){0};
  g.end = *end;
  g.base = NULL;
  g.size = 0;
  g.body = body;
  g.body_len = body_len;
  g.strings = NULL;
  g.stacks = NULL;
  g.modules = NULL;
  g.nstrings = g.nstacks = g.nmodules = 0;
  int rc = body_len > GTP_GEN_MAX_BYTES
               ? GTP_E_TOOBIG
               : check_body_once(&g, check_events, &sc);
  if (rc == 0)
    *clock = g.clock;
  if (g.strings != sc.strings)
    free(g.strings);
  if (g.stacks != sc.stacks)
    free(g.stacks);
  if (g.modules != sc.modules)
    free(g.modules);
  return rc;
}

int gtp_gen_check_events(const gtp_gen *g) {
  size_t cursor = 0;
  gtp_batch b;
  int rc;
  while ((rc = gtp_gen_next_batch(g, &cursor, &b)) == 1)
    if ((rc = batch_validate(&b)) < 0)
      return rc;
  return rc;
}

void gtp_gen_fini(gtp_gen *g) {
  free(g->strings);
  free(g->stacks);
  free(g->modules);
  memset(g, 0, sizeof(*g));
}

gtp_str gtp_strings_find(const gtp_string_ent *s, size_t n, uint64_t id) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && s[lo].id == id)
    return s[lo].s;
  return (gtp_str){NULL, 0};
}

gtp_str gtp_gen_string(const gtp_gen *g, uint64_t id) {
  return gtp_strings_find(g->strings, g->nstrings, id);
}

const gtp_stack_ent *gtp_gen_stack(const gtp_gen *g, uint64_t id) {
  size_t lo = 0, hi = g->nstacks;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->stacks[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < g->nstacks && g->stacks[lo].id == id)
    return &g->stacks[lo];
  return NULL;
}

int64_t gtp_gen_wall_ns(const gtp_gen *g, uint64_t ticks) {
  const gtp_clock *c = &g->clock;
  /* 128-bit: a tick offset (up to 2^64) times a nanosecond span (up to 2^64)
   * needs it; the signed offset handles ticks before the start. */
  __int128 d = (__int128)ticks - (__int128)c->start_ticks;
  __int128 dt = (__int128)c->end_ticks - (__int128)c->start_ticks;
  __int128 dm = (__int128)c->end_mono_ns - (__int128)c->start_mono_ns;
  __int128 off;
  if (dt <= 0 || dm < 0) {
    off = d; /* no span to measure a rate over: assume 1 ns per tick */
  } else {
    /* Rounded to nearest, symmetrically for negative offsets. */
    __int128 num = d * dm;
    off = num >= 0 ? (num + dt / 2) / dt : -((-num + dt / 2) / dt);
  }
  __int128 w = (__int128)c->start_real_ns + off;
  if (w > INT64_MAX)
    return INT64_MAX;
  if (w < INT64_MIN)
    return INT64_MIN;
  return (int64_t)w;
}

int gtp_gen_next_batch(const gtp_gen *g, size_t *cursor, gtp_batch *b) {
  while (*cursor < g->body_len) {
    gtp_record rec;
    int rc = gtp_record_parse(g->body + *cursor, g->body_len - *cursor, &rec);
    if (rc < 0)
      return rc;
    *cursor += rec.size;
    if (rec.type != GTP_REC_EVENTS)
      continue;
    if ((rc = gtp_batch_decode(rec.payload, rec.len, b)) < 0)
      return rc;
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------ file reader */

int gtp_file_reader_init(gtp_file_reader *r, const uint8_t *data, size_t len) {
  r->data = data;
  r->len = len;
  r->offset = 0;
  int rc = gtp_file_header_check(data, len);
  if (rc < 0)
    return rc;
  r->offset = GTP_FILE_HEADER_SIZE;
  return 0;
}

int gtp_file_reader_next(gtp_file_reader *r, gtp_gen *g) {
  while (r->offset < r->len) {
    const uint8_t *p = r->data + r->offset;
    size_t left = r->len - r->offset;
    gtp_record rec;
    size_t used;
    int rc;
    /* Files joined with plain cat(1) carry a second header: skip it. The
     * first magic byte 'g' (0x67) is thus never used as a record type. */
    if (p[0] == (uint8_t)GTP_FORMAT_MAGIC[0]) {
      if ((rc = gtp_file_header_check(p, left)) < 0)
        return rc;
      r->offset += GTP_FILE_HEADER_SIZE;
      continue;
    }
    if ((rc = gtp_record_parse(p, left, &rec)) < 0)
      return rc;
    if (rec.type == GTP_REC_GEN_START) {
      if ((rc = gtp_gen_parse(p, left, g, &used)) < 0)
        return rc;
      r->offset += used;
      return 1;
    }
    /* Body or end records outside a generation are damage; types this
     * reader does not know come from a newer minor and are skipped. */
    if (rec.type <= GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    r->offset += rec.size;
  }
  return 0;
}

/* --------------------------------------------------------------- session */

void gtp_session_hex(const uint8_t session[16], char out[33]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[session[i] >> 4];
    out[2 * i + 1] = hex[session[i] & 15];
  }
  out[32] = '\0';
}

int gtp_session_parse(const char *hex, uint8_t session[16]) {
  uint8_t tmp[16];
  if (!hex)
    return GTP_E_BADARG;
  for (int i = 0; i < 16; i++) {
    int hi = gtp_hex_digit(hex[2 * i]);
    if (hi < 0)
      return GTP_E_BADARG;
    int lo = gtp_hex_digit(hex[2 * i + 1]);
    if (lo < 0)
      return GTP_E_BADARG;
    tmp[i] = (uint8_t)(hi << 4 | lo);
  }
  /* Exactly 32 digits: a longer string is not a session id. */
  if (hex[32] != '\0')
    return GTP_E_BADARG;
  memcpy(session, tmp, 16);
  return 0;
}
