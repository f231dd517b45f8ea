/* frame.c: encoders and decoders of the agent <-> daemon wire frames, and the
 * incremental frame decoder. Spec: PROTOCOL.md; layouts: frame.h.
 *
 * Owns: nothing but the incremental decoder's partial-frame buffer.
 *
 * Invariants of the payload codecs:
 *  1. Every decoder MUST bound each string (GTP_IDENT_STR_MAX, GTP_TOKEN_MAX,
 *     GTP_REASON_MAX) and count (GTP_TAGS_MAX) before trusting it, otherwise
 *     a hostile peer could make the daemon store or log unbounded data.
 *  2. Every decoder MUST consume the payload exactly: trailing bytes are
 *     GTP_E_CORRUPT, otherwise two different byte strings would decode to
 *     the same frame and a truncated-then-padded frame could pass.
 *  3. An encoder MUST append a whole frame or nothing (b->len is restored on
 *     any failure), otherwise a caller that checks the error late would send
 *     a half frame and desynchronise the stream.
 *  4. The HELLO decoder MUST refuse identity strings (service, host, agent
 *     version, tags) holding a NUL or invalid UTF-8, otherwise
 *     "victim\0x" would be stored, listed and logged as "victim" (C strings)
 *     and invalid bytes would reach JSON answers and log lines.
 *
 * The incremental decoder (gtp_frame_decoder) is a state machine over
 * (hdr_have, have, buf):
 *
 *   HEADER   hdr_have < 5, buf == NULL: collecting header bytes split across
 *            feeds (none at all when idle).
 *   PAYLOAD  hdr_have == 5, have < len, buf != NULL: collecting a split
 *            payload into buf (allocated to exactly len bytes).
 *   RETURNED hdr_have == 5, have == len, buf != NULL: the frame in buf was
 *            returned; buf stays valid until the next feed, which frees it
 *            and goes back to HEADER.
 *   FAILED   err != 0: every call returns err.
 *
 * gtp_frame_decoder_feed moves between all of them; a frame whose header and
 * payload lie whole inside one input never leaves HEADER (zero copy). A frame
 * of length 0 is complete as soon as its header is, so it is never buffered
 * and RETURNED always has len > 0.
 */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "text.h"
#include "varint.h"

const char *gtp_frame_name(uint8_t type) {
  switch (type) {
  case GTP_FR_HELLO:
    return "HELLO";
  case GTP_FR_WELCOME:
    return "WELCOME";
  case GTP_FR_BATCH:
    return "BATCH";
  case GTP_FR_GEN_END:
    return "GEN_END";
  case GTP_FR_ACK:
    return "ACK";
  case GTP_FR_HEARTBEAT:
    return "HEARTBEAT";
  case GTP_FR_ERROR:
    return "ERROR";
  case GTP_FR_GOODBYE:
    return "GOODBYE";
  default:
    return "?";
  }
}

void gtp_frame_header_put(uint8_t out[GTP_FRAME_HEADER_SIZE], uint8_t type,
                          uint32_t len) {
  gtp_put_u32le(out, len);
  out[4] = type;
}

/* ---------------------------------------------------------------- encoders */

/* Opens a frame: reserves its header and returns the offset of the header
 * (not a pointer: the buffer may move while the payload is appended). */
static size_t frame_open(gtp_wbuf *b) {
  size_t start = b->len;
  (void)gtp_wbuf_grow(b, GTP_FRAME_HEADER_SIZE);
  return start;
}

/* Closes the frame opened at start: fills in the header, or rolls the buffer
 * back to start if anything failed or the payload is over GTP_FRAME_MAX
 * (invariant 3). */
static int frame_close(gtp_wbuf *b, size_t start, uint8_t type) {
  if (b->err) {
    if (b->len > start)
      b->len = start;
    return b->err;
  }
  size_t plen = b->len - start - GTP_FRAME_HEADER_SIZE;
  if (plen > GTP_FRAME_MAX) {
    b->len = start;
    return GTP_E_TOOBIG;
  }
  gtp_frame_header_put(b->data + start, type, (uint32_t)plen);
  return 0;
}

/* uvarint len | bytes. A zero-length string never touches p, so callers may
 * pass {NULL, 0} for "none" without memcpy seeing a NULL pointer. */
static void put_str(gtp_wbuf *b, const char *p, size_t n) {
  if (n == 0)
    gtp_wbuf_put_uvarint(b, 0);
  else
    gtp_wbuf_put_str(b, p, n);
}

int gtp_frame_hello_encode(gtp_wbuf *b, const gtp_hello *h) {
  if (h->service.len > GTP_IDENT_STR_MAX || h->host.len > GTP_IDENT_STR_MAX ||
      h->agent_version.len > GTP_IDENT_STR_MAX || h->ntags > GTP_TAGS_MAX ||
      h->token.len > GTP_TOKEN_MAX)
    return GTP_E_TOOBIG;
  for (uint32_t i = 0; i < h->ntags; i++)
    if (h->tags[i].key.len > GTP_IDENT_STR_MAX ||
        h->tags[i].value.len > GTP_IDENT_STR_MAX)
      return GTP_E_TOOBIG;

  size_t start = frame_open(b);
  uint8_t *m = gtp_wbuf_grow(b, 4);
  if (m)
    gtp_put_u32le(m, GTP_HELLO_MAGIC);
  gtp_wbuf_put_uvarint(b, h->min_version);
  gtp_wbuf_put_uvarint(b, h->max_version);
  gtp_wbuf_put(b, h->session, sizeof h->session);
  /* The layout follows the HELLO's own max_version (PROTOCOL.md 3.1). */
  if (h->max_version >= GTP_PROTO_VERSION_KEY)
    gtp_wbuf_put(b, h->session_key, sizeof h->session_key);
  put_str(b, h->service.ptr, h->service.len);
  put_str(b, h->host.ptr, h->host.len);
  gtp_wbuf_put_uvarint(b, h->pid);
  gtp_wbuf_put_uvarint(b, h->process_start_ns);
  put_str(b, h->agent_version.ptr, h->agent_version.len);
  gtp_wbuf_put_uvarint(b, h->ntags);
  for (uint32_t i = 0; i < h->ntags; i++) {
    put_str(b, h->tags[i].key.ptr, h->tags[i].key.len);
    put_str(b, h->tags[i].value.ptr, h->tags[i].value.len);
  }
  put_str(b, h->token.ptr, h->token.len);
  return frame_close(b, start, GTP_FR_HELLO);
}

int gtp_frame_welcome_encode(gtp_wbuf *b, const gtp_welcome *w) {
  size_t start = frame_open(b);
  gtp_wbuf_put_uvarint(b, w->version);
  gtp_wbuf_put_uvarint(b, w->has_last ? 1 : 0);
  /* Without a committed generation last_gen means nothing; a fixed 0 keeps
   * the encoding canonical. */
  gtp_wbuf_put_uvarint(b, w->has_last ? w->last_gen : 0);
  gtp_wbuf_put_uvarint(b, w->idle_timeout_ms);
  gtp_wbuf_put_uvarint(b, w->max_gen_bytes);
  return frame_close(b, start, GTP_FR_WELCOME);
}

int gtp_frame_batch_head_encode(gtp_wbuf *b, uint64_t gen, size_t len) {
  /* Checked before appending so a too-large batch costs no copy. */
  if (len > GTP_FRAME_MAX || gtp_uvarint_len(gen) + len > GTP_FRAME_MAX)
    return GTP_E_TOOBIG;
  size_t start = frame_open(b);
  gtp_wbuf_put_uvarint(b, gen);
  if (b->err) { /* nothing half-written stays (invariant 3) */
    if (b->len > start)
      b->len = start;
    return b->err;
  }
  gtp_frame_header_put(
      b->data + start, GTP_FR_BATCH,
      (uint32_t)(b->len - start - GTP_FRAME_HEADER_SIZE + len));
  return 0;
}

int gtp_frame_batch_encode(gtp_wbuf *b, uint64_t gen, const uint8_t *records,
                           size_t len) {
  size_t start = b->len;
  int rc = gtp_frame_batch_head_encode(b, gen, len);
  if (rc < 0)
    return rc;
  if (len > 0)
    gtp_wbuf_put(b, records, len);
  if (b->err) {
    b->len = start;
    return b->err;
  }
  return 0;
}

int gtp_frame_gen_end_encode(gtp_wbuf *b, const gtp_gen_end *e) {
  size_t start = frame_open(b);
  int rc = b->err ? b->err : gtp_gen_end_encode(b, e);
  if (rc < 0) {
    if (b->len > start)
      b->len = start;
    return rc;
  }
  return frame_close(b, start, GTP_FR_GEN_END);
}

int gtp_frame_ack_encode(gtp_wbuf *b, uint64_t gen) {
  size_t start = frame_open(b);
  gtp_wbuf_put_uvarint(b, gen);
  return frame_close(b, start, GTP_FR_ACK);
}

int gtp_frame_heartbeat_encode(gtp_wbuf *b) {
  size_t start = frame_open(b);
  return frame_close(b, start, GTP_FR_HEARTBEAT);
}

/* Codes travel as their positive value. Callers pass the negative code of
 * gtp_error.h (or -errno); a positive value is taken as already negated. */
static uint64_t wire_code(int code) {
  return code < 0 ? (uint64_t) - (int64_t)code : (uint64_t)code;
}

int gtp_frame_error_encode(gtp_wbuf *b, int code, int has_gen, uint64_t gen,
                           const char *reason) {
  size_t rlen = reason ? strlen(reason) : 0;
  /* ERROR always reports a failure; code 0 would read as success on the other
   * side, and the decoder refuses it, as it refuses INT_MIN (no positive
   * int32 value). */
  if (code == 0 || wire_code(code) > INT32_MAX)
    return GTP_E_BADARG;
  if (rlen > GTP_REASON_MAX)
    return GTP_E_TOOBIG;
  size_t start = frame_open(b);
  gtp_wbuf_put_uvarint(b, wire_code(code));
  gtp_wbuf_put_uvarint(b, has_gen ? 1 : 0);
  gtp_wbuf_put_uvarint(b, has_gen ? gen : 0);
  put_str(b, reason, rlen);
  return frame_close(b, start, GTP_FR_ERROR);
}

int gtp_frame_goodbye_encode(gtp_wbuf *b, int code, const char *reason) {
  size_t rlen = reason ? strlen(reason) : 0;
  if (wire_code(code) > INT32_MAX)
    return GTP_E_BADARG;
  if (rlen > GTP_REASON_MAX)
    return GTP_E_TOOBIG;
  size_t start = frame_open(b);
  gtp_wbuf_put_uvarint(b, wire_code(code));
  put_str(b, reason, rlen);
  return frame_close(b, start, GTP_FR_GOODBYE);
}

/* ---------------------------------------------------------------- decoders */

/* Reads a length-prefixed string of at most max bytes. The length is checked
 * against max before it is compared with the input, so an absurd length is
 * reported as TOOBIG rather than TRUNC. */
static int get_str(const uint8_t **pp, const uint8_t *end, size_t max,
                   gtp_str *out) {
  const uint8_t *p = *pp;
  uint64_t n;
  int rc = gtp_uvarint_get(&p, end, &n);
  if (rc < 0)
    return rc;
  if (n > max)
    return GTP_E_TOOBIG;
  if (n > (uint64_t)(end - p))
    return GTP_E_TRUNC;
  out->ptr = (const char *)p;
  out->len = (size_t)n;
  *pp = p + n;
  return 0;
}

static int get_u32(const uint8_t **pp, const uint8_t *end, uint32_t *out) {
  uint64_t v;
  int rc = gtp_uvarint_get(pp, end, &v);
  if (rc < 0)
    return rc;
  if (v > UINT32_MAX)
    return GTP_E_CORRUPT;
  *out = (uint32_t)v;
  return 0;
}

static int get_flag(const uint8_t **pp, const uint8_t *end, int *out) {
  uint64_t v;
  int rc = gtp_uvarint_get(pp, end, &v);
  if (rc < 0)
    return rc;
  if (v > 1)
    return GTP_E_CORRUPT;
  *out = (int)v;
  return 0;
}

/* A wire code back to the negative in-memory form. Codes are small (errno
 * values and -7000..-7999); anything past INT32_MAX cannot be negated into
 * an int32_t and is malformed. */
static int get_code(const uint8_t **pp, const uint8_t *end, int32_t *out) {
  uint64_t v;
  int rc = gtp_uvarint_get(pp, end, &v);
  if (rc < 0)
    return rc;
  if (v > INT32_MAX)
    return GTP_E_CORRUPT;
  *out = -(int32_t)v;
  return 0;
}

/* 1 if [p, p+n) is well-formed UTF-8 (RFC 3629: shortest forms only, no
 * surrogates, nothing above U+10FFFF) without a NUL byte. */
static int text_ok(const uint8_t *p, size_t n) {
  /* The project's one UTF-8 rule (text.h): well-formed, and no NUL. */
  return gtp_utf8_valid((const char *)p, n, GTP_UTF8_NO_NUL);
}

int gtp_frame_text_ok(const char *p, size_t n) {
  return text_ok((const uint8_t *)p, n);
}

/* An identity string of HELLO: bounded like get_str, then text_ok. */
static int get_text(const uint8_t **pp, const uint8_t *end, gtp_str *out,
                    const char *field, gtp_hello *h) {
  int rc = get_str(pp, end, GTP_IDENT_STR_MAX, out);
  if (rc < 0)
    return rc;
  if (!text_ok((const uint8_t *)out->ptr, out->len)) {
    h->bad_field = field;
    return GTP_E_CORRUPT;
  }
  return 0;
}

/* Invariant 2: the payload must be used up exactly. */
static int at_end(const uint8_t *p, const uint8_t *end) {
  return p == end ? 0 : GTP_E_CORRUPT;
}

#define TRY(expr)                                                              \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ < 0)                                                               \
      return rc_;                                                              \
  } while (0)

int gtp_frame_hello_decode(const uint8_t *p, size_t len, gtp_hello *h) {
  const uint8_t *end = p + len;
  memset(h, 0, sizeof *h);
  if (len < 4)
    return GTP_E_TRUNC;
  if (gtp_get_u32le(p) != GTP_HELLO_MAGIC)
    return GTP_E_MAGIC;
  p += 4;
  TRY(get_u32(&p, end, &h->min_version));
  TRY(get_u32(&p, end, &h->max_version));
  if ((size_t)(end - p) < sizeof h->session)
    return GTP_E_TRUNC;
  memcpy(h->session, p, sizeof h->session);
  p += sizeof h->session;
  /* max_version was decoded above, so the layout is known here. */
  if (h->max_version >= GTP_PROTO_VERSION_KEY) {
    if ((size_t)(end - p) < sizeof h->session_key)
      return GTP_E_TRUNC;
    memcpy(h->session_key, p, sizeof h->session_key);
    p += sizeof h->session_key;
  }
  TRY(get_text(&p, end, &h->service, "service", h));
  TRY(get_text(&p, end, &h->host, "host", h));
  TRY(gtp_uvarint_get(&p, end, &h->pid));
  TRY(gtp_uvarint_get(&p, end, &h->process_start_ns));
  TRY(get_text(&p, end, &h->agent_version, "agent_version", h));
  uint64_t ntags;
  TRY(gtp_uvarint_get(&p, end, &ntags));
  if (ntags > GTP_TAGS_MAX)
    return GTP_E_TOOBIG;
  h->ntags = (uint32_t)ntags;
  for (uint32_t i = 0; i < h->ntags; i++) {
    TRY(get_text(&p, end, &h->tags[i].key, "tag key", h));
    TRY(get_text(&p, end, &h->tags[i].value, "tag value", h));
  }
  TRY(get_str(&p, end, GTP_TOKEN_MAX, &h->token));
  return at_end(p, end);
}

int gtp_frame_welcome_decode(const uint8_t *p, size_t len, gtp_welcome *w) {
  const uint8_t *end = p + len;
  memset(w, 0, sizeof *w);
  TRY(get_u32(&p, end, &w->version));
  TRY(get_flag(&p, end, &w->has_last));
  TRY(gtp_uvarint_get(&p, end, &w->last_gen));
  TRY(gtp_uvarint_get(&p, end, &w->idle_timeout_ms));
  TRY(gtp_uvarint_get(&p, end, &w->max_gen_bytes));
  /* Tolerated on the wire (a future version may give it a meaning), but
   * callers must never see a last_gen that was not announced. */
  if (!w->has_last)
    w->last_gen = 0;
  return at_end(p, end);
}

int gtp_frame_batch_decode(const uint8_t *p, size_t len, uint64_t *gen,
                           const uint8_t **records, size_t *records_len) {
  const uint8_t *end = p + len;
  *records = NULL;
  *records_len = 0;
  TRY(gtp_uvarint_get(&p, end, gen));
  if (p == end)
    return GTP_E_TRUNC; /* "one or more" records */
  /* Check the records are whole and are body records: the daemon stores the
   * bytes between its own GEN_START and GEN_END verbatim, so a GEN_START or
   * GEN_END smuggled in here would split the stored generation. Unknown
   * types pass (a newer agent's record; readers skip them). */
  const uint8_t *q = p;
  while (q < end) {
    gtp_record rec;
    TRY(gtp_record_parse(q, (size_t)(end - q), &rec));
    if (rec.type == GTP_REC_GEN_START || rec.type == GTP_REC_GEN_END)
      return GTP_E_CORRUPT;
    q += rec.size;
  }
  *records = p;
  *records_len = (size_t)(end - p);
  return 0;
}

int gtp_frame_gen_end_decode(const uint8_t *p, size_t len, gtp_gen_end *e) {
  return gtp_gen_end_decode(p, len, e);
}

int gtp_frame_ack_decode(const uint8_t *p, size_t len, uint64_t *gen) {
  const uint8_t *end = p + len;
  TRY(gtp_uvarint_get(&p, end, gen));
  return at_end(p, end);
}

int gtp_frame_error_decode(const uint8_t *p, size_t len, gtp_error_frame *e) {
  const uint8_t *end = p + len;
  memset(e, 0, sizeof *e);
  TRY(get_code(&p, end, &e->code));
  if (e->code == 0)
    return GTP_E_CORRUPT;
  TRY(get_flag(&p, end, &e->has_gen));
  TRY(gtp_uvarint_get(&p, end, &e->gen));
  if (!e->has_gen)
    e->gen = 0;
  TRY(get_str(&p, end, GTP_REASON_MAX, &e->reason));
  return at_end(p, end);
}

int gtp_frame_goodbye_decode(const uint8_t *p, size_t len, gtp_goodbye *g) {
  const uint8_t *end = p + len;
  memset(g, 0, sizeof *g);
  TRY(get_code(&p, end, &g->code));
  TRY(get_str(&p, end, GTP_REASON_MAX, &g->reason));
  return at_end(p, end);
}

/* ---------------------------------------------------- incremental decoder */

/* Payload pointer for empty frames: never NULL, so callers can treat
 * payload == NULL as "no frame" if they like. */
static const uint8_t empty_payload[1];

void gtp_frame_decoder_init(gtp_frame_decoder *d, uint32_t max) {
  memset(d, 0, sizeof *d);
  /* 0 asks for the default; the hard maximum can never be raised. */
  d->max = (max == 0 || max > GTP_FRAME_MAX) ? GTP_FRAME_MAX : max;
}

void gtp_frame_decoder_fini(gtp_frame_decoder *d) {
  free(d->buf);
  d->buf = NULL;
  d->hdr_have = 0;
  d->have = 0;
  d->len = 0;
}

size_t gtp_frame_decoder_buffered(const gtp_frame_decoder *d) {
  if (d->hdr_have < GTP_FRAME_HEADER_SIZE)
    return d->hdr_have;
  if (d->have == d->len) /* RETURNED: no partial frame */
    return 0;
  return GTP_FRAME_HEADER_SIZE + (size_t)d->have;
}

static int dec_fail(gtp_frame_decoder *d, int err) {
  free(d->buf);
  d->buf = NULL;
  d->err = err;
  return err;
}

int gtp_frame_decoder_feed(gtp_frame_decoder *d, const uint8_t *p, size_t n,
                           size_t *used, gtp_frame *f) {
  size_t off = 0;
  *used = 0;
  GTP_ASSERT(gtp_frame_decoder_check_invariants(d) == 0);
  if (d->err)
    return d->err;

  /* RETURNED -> HEADER: the caller is done with the previous frame. */
  if (d->hdr_have == GTP_FRAME_HEADER_SIZE && d->have == d->len) {
    free(d->buf);
    d->buf = NULL;
    d->hdr_have = 0;
    d->have = d->len = 0;
  }

  if (d->hdr_have < GTP_FRAME_HEADER_SIZE) {
    const uint8_t *hdr;
    if (d->hdr_have == 0 && n >= GTP_FRAME_HEADER_SIZE) {
      hdr = p; /* the usual case: parse the header in place */
    } else {
      size_t take = GTP_FRAME_HEADER_SIZE - d->hdr_have;
      if (take > n)
        take = n;
      if (take > 0) /* p may be NULL when n == 0 */
        memcpy(d->hdr + d->hdr_have, p, take);
      d->hdr_have = (uint8_t)(d->hdr_have + take);
      off = take;
      if (d->hdr_have < GTP_FRAME_HEADER_SIZE) {
        *used = n;
        return 0;
      }
      hdr = d->hdr;
    }
    uint32_t len = gtp_get_u32le(hdr);
    uint8_t type = hdr[4];
    if (hdr == p)
      off = GTP_FRAME_HEADER_SIZE;
    /* Invariant 1: refuse on the header alone, before any allocation. */
    if (len > d->max) {
      *used = off;
      return dec_fail(d, GTP_E_TOOBIG);
    }
    if (len <= n - off) {
      /* Invariant 2: whole in the input, hand it out in place. */
      f->type = type;
      f->len = len;
      f->payload = len ? p + off : empty_payload;
      d->hdr_have = 0;
      *used = off + len;
      return 1;
    }
    /* Split payload (len > 0 here): buffer exactly len bytes. */
    d->buf = malloc(len);
    if (!d->buf) {
      *used = off;
      return dec_fail(d, -ENOMEM);
    }
    d->hdr_have = GTP_FRAME_HEADER_SIZE;
    d->type = type;
    d->len = len;
    d->have = 0;
  }

  /* PAYLOAD: append what this input holds of the frame. */
  size_t take = d->len - d->have;
  if (take > n - off)
    take = n - off;
  if (take > 0)
    memcpy(d->buf + d->have, p + off, take);
  d->have += (uint32_t)take;
  off += take;
  *used = off;
  if (d->have < d->len)
    return 0;
  f->type = d->type;
  f->len = d->len;
  f->payload = d->buf; /* freed by the next feed or fini (RETURNED) */
  return 1;
}

int gtp_frame_decoder_check_invariants(const gtp_frame_decoder *d) {
  /* The hard maximum can never be raised (invariant 1). */
  if (d->max == 0 || d->max > GTP_FRAME_MAX)
    return -1;
  if (d->err)
    return d->buf == NULL ? 0 : -1; /* a failed decoder holds nothing */
  if (d->hdr_have > GTP_FRAME_HEADER_SIZE)
    return -1;
  if (d->hdr_have < GTP_FRAME_HEADER_SIZE) /* HEADER: nothing buffered */
    return d->buf == NULL && d->have == 0 ? 0 : -1;
  /* PAYLOAD or RETURNED: exactly len bytes allocated, have of them filled,
   * never more than the limit checked on the header (invariant 1). */
  if (d->len > d->max || d->have > d->len || (d->len > 0 && d->buf == NULL))
    return -1;
  return 0;
}
