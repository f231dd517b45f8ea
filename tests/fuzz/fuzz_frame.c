/* fuzz_frame.c: the wire path of the daemon, on hostile bytes.
 *
 * The input is a TCP byte stream. It is fed to the incremental decoder twice:
 * whole (every complete frame must come back zero-copy) and in pseudo-random
 * chunks derived from the input (the frames, the final error and the bytes
 * left buffered must be the same). Each frame of the whole pass is decoded by
 * its type; what decodes is re-encoded and decoded again, and must give the
 * same values (round-trip oracle), and never a longer encoding. */
#include <string.h>

#include "frame.h"
#include "fuzz.h"
#include "varint.h"
#include "../lib/prng.h"

/* Below GTP_FRAME_MAX so that lengths of 3 bytes already reach TOOBIG and the
 * fuzzer finds that path early; the seeds stay well below it. */
#define FUZZ_FRAME_MAX (1u << 16)

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

static int in(const void *q, size_t qn, const uint8_t *p, size_t n) {
  const uint8_t *x = q;
  return qn == 0 || (x >= p && x <= p + n && qn <= (size_t)(p + n - x));
}

static int str_eq(gtp_str a, gtp_str b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Re-encoding must not be longer than the input (only non-canonical varints
 * or ignored fields make them differ), and when it has the same length and
 * nothing was ignored it must be byte-identical. */
static void check_reencoding(const gtp_wbuf *b, uint8_t type, const uint8_t *p,
                             size_t n, int exact) {
  fuzz_check(b->err == 0 && b->len >= GTP_FRAME_HEADER_SIZE);
  fuzz_check(gtp_get_u32le(b->data) == b->len - GTP_FRAME_HEADER_SIZE);
  fuzz_check(b->data[4] == type);
  size_t m = b->len - GTP_FRAME_HEADER_SIZE;
  fuzz_check(m <= n);
  if (exact && m == n)
    fuzz_check(n == 0 || memcmp(b->data + GTP_FRAME_HEADER_SIZE, p, n) == 0);
}

static void fuzz_hello(const uint8_t *p, size_t n) {
  static gtp_hello h, h2;
  if (gtp_frame_hello_decode(p, n, &h) < 0)
    return;
  fuzz_check(h.ntags <= GTP_TAGS_MAX && h.token.len <= GTP_TOKEN_MAX);
  fuzz_check(h.service.len <= GTP_IDENT_STR_MAX &&
             h.host.len <= GTP_IDENT_STR_MAX &&
             h.agent_version.len <= GTP_IDENT_STR_MAX);
  fuzz_check(in(h.service.ptr, h.service.len, p, n) &&
             in(h.host.ptr, h.host.len, p, n) &&
             in(h.agent_version.ptr, h.agent_version.len, p, n) &&
             in(h.token.ptr, h.token.len, p, n));
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_hello_encode(&b, &h) == 0);
  check_reencoding(&b, GTP_FR_HELLO, p, n, 1);
  fuzz_check(gtp_frame_hello_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                    b.len - GTP_FRAME_HEADER_SIZE, &h2) == 0);
  fuzz_check(h.min_version == h2.min_version &&
             h.max_version == h2.max_version);
  fuzz_check(memcmp(h.session, h2.session, 16) == 0);
  /* The key is on the wire only from version 2 on (layout by max_version);
   * a version-1 HELLO decodes with a zero key. */
  fuzz_check(memcmp(h.session_key, h2.session_key, 16) == 0);
  if (h.max_version < GTP_PROTO_VERSION_KEY) {
    static const uint8_t zero[16];
    fuzz_check(memcmp(h.session_key, zero, 16) == 0);
  }
  /* Decoded identity text is valid UTF-8 without NUL (frame.c inv. 4). */
  fuzz_check(gtp_frame_text_ok(h.service.ptr, h.service.len) &&
             gtp_frame_text_ok(h.host.ptr, h.host.len) &&
             gtp_frame_text_ok(h.agent_version.ptr, h.agent_version.len));
  for (uint32_t i = 0; i < h.ntags; i++)
    fuzz_check(gtp_frame_text_ok(h.tags[i].key.ptr, h.tags[i].key.len) &&
               gtp_frame_text_ok(h.tags[i].value.ptr, h.tags[i].value.len));
  fuzz_check(str_eq(h.service, h2.service) && str_eq(h.host, h2.host) &&
             str_eq(h.agent_version, h2.agent_version) &&
             str_eq(h.token, h2.token));
  fuzz_check(h.pid == h2.pid && h.process_start_ns == h2.process_start_ns);
  fuzz_check(h.ntags == h2.ntags);
  for (uint32_t i = 0; i < h.ntags; i++) {
    fuzz_check(in(h.tags[i].key.ptr, h.tags[i].key.len, p, n) &&
               in(h.tags[i].value.ptr, h.tags[i].value.len, p, n));
    fuzz_check(str_eq(h.tags[i].key, h2.tags[i].key) &&
               str_eq(h.tags[i].value, h2.tags[i].value));
  }
  gtp_wbuf_fini(&b);
}

static void fuzz_welcome(const uint8_t *p, size_t n) {
  gtp_welcome w, w2;
  if (gtp_frame_welcome_decode(p, n, &w) < 0)
    return;
  fuzz_check(w.has_last == 0 || w.has_last == 1);
  fuzz_check(w.has_last || w.last_gen == 0);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_welcome_encode(&b, &w) == 0);
  /* A last_gen sent without has_last is dropped on re-encoding. */
  check_reencoding(&b, GTP_FR_WELCOME, p, n, w.has_last);
  fuzz_check(gtp_frame_welcome_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                      b.len - GTP_FRAME_HEADER_SIZE, &w2) == 0);
  fuzz_check(w.version == w2.version && w.has_last == w2.has_last &&
             w.last_gen == w2.last_gen &&
             w.idle_timeout_ms == w2.idle_timeout_ms &&
             w.max_gen_bytes == w2.max_gen_bytes);
  gtp_wbuf_fini(&b);
}

/* What the daemon does with a BATCH's records before queueing them. */
static void walk_records(const uint8_t *p, size_t n) {
  size_t off = 0;
  while (off < n) {
    gtp_record rec;
    /* gtp_frame_batch_decode already walked these: they must parse. */
    fuzz_check(gtp_record_parse(p + off, n - off, &rec) == 0);
    fuzz_check(rec.size > 0 && rec.size <= n - off);
    fuzz_check(rec.type != GTP_REC_GEN_START && rec.type != GTP_REC_GEN_END);
    gtp_table_iter it;
    uint64_t id, pcs[GTP_STACK_DEPTH_MAX];
    size_t depth;
    gtp_str s;
    gtp_module m;
    int rc;
    switch (rec.type) {
    case GTP_REC_EVENTS: {
      gtp_batch bt;
      if (gtp_batch_decode(rec.payload, rec.len, &bt) < 0)
        break;
      gtp_event_iter ei;
      gtp_event ev;
      gtp_event_iter_init(&ei, &bt);
      uint64_t k = 0;
      while ((rc = gtp_event_next(&ei, &ev)) == 1) {
        fuzz_check(gtp_event_info_get(ev.type) != NULL);
        fuzz_check(in(ev.msg, ev.msg_len, rec.payload, rec.len));
        k++;
      }
      fuzz_check(k <= bt.nevents);
      break;
    }
    case GTP_REC_STRINGS:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while ((rc = gtp_strings_next(&it, &id, &s)) == 1)
          fuzz_check(s.len <= GTP_STRING_MAX &&
                     in(s.ptr, s.len, rec.payload, rec.len));
      break;
    case GTP_REC_STACKS:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while ((rc = gtp_stacks_next(&it, &id, pcs, &depth)) == 1)
          fuzz_check(depth <= GTP_STACK_DEPTH_MAX);
      break;
    case GTP_REC_MODULES:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while ((rc = gtp_modules_next(&it, &m)) == 1)
          fuzz_check(m.build_id_len <= GTP_BUILDID_MAX &&
                     in(m.build_id, m.build_id_len, rec.payload, rec.len));
      break;
    case GTP_REC_CLOCK: {
      gtp_clock c;
      (void)gtp_clock_decode(rec.payload, rec.len, &c);
      break;
    }
    default:
      break;
    }
    off += rec.size;
  }
  /* The manifest the daemon computes to check GEN_END against. */
  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  if (gtp_manifest_compute(p, n, &e) == 0)
    fuzz_check(e.bytes == n && e.batches <= e.records);
}

static void fuzz_batch(const uint8_t *p, size_t n) {
  uint64_t gen, gen2;
  const uint8_t *r, *r2;
  size_t rn, rn2;
  if (gtp_frame_batch_decode(p, n, &gen, &r, &rn) < 0)
    return;
  fuzz_check(rn > 0 && in(r, rn, p, n) && r + rn == p + n);
  walk_records(r, rn);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_batch_encode(&b, gen, r, rn) == 0);
  check_reencoding(&b, GTP_FR_BATCH, p, n, 1);
  fuzz_check(gtp_frame_batch_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                    b.len - GTP_FRAME_HEADER_SIZE, &gen2, &r2,
                                    &rn2) == 0);
  fuzz_check(gen == gen2 && rn == rn2 && memcmp(r, r2, rn) == 0);
  gtp_wbuf_fini(&b);
}

static void fuzz_gen_end(const uint8_t *p, size_t n) {
  gtp_gen_end e, e2;
  if (gtp_frame_gen_end_decode(p, n, &e) < 0)
    return;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_gen_end_encode(&b, &e) == 0);
  check_reencoding(&b, GTP_FR_GEN_END, p, n, 1);
  fuzz_check(gtp_frame_gen_end_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                      b.len - GTP_FRAME_HEADER_SIZE, &e2) == 0);
  fuzz_check(e.gen == e2.gen && e.records == e2.records &&
             e.batches == e2.batches && e.bytes == e2.bytes &&
             e.crc == e2.crc && e.events == e2.events &&
             e.dropped == e2.dropped && e.evicted == e2.evicted &&
             e.rejected == e2.rejected);
  gtp_wbuf_fini(&b);
}

static void fuzz_ack(const uint8_t *p, size_t n) {
  uint64_t gen, gen2;
  if (gtp_frame_ack_decode(p, n, &gen) < 0)
    return;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_ack_encode(&b, gen) == 0);
  check_reencoding(&b, GTP_FR_ACK, p, n, 1);
  fuzz_check(gtp_frame_ack_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                  b.len - GTP_FRAME_HEADER_SIZE, &gen2) == 0);
  fuzz_check(gen == gen2);
  gtp_wbuf_fini(&b);
}

/* The encoders take a NUL-terminated reason; a reason with a NUL inside
 * cannot round-trip, so compare only what the encoder could see. */
static size_t reason_copy(char *out, gtp_str r) {
  memcpy(out, r.ptr ? r.ptr : "", r.len);
  out[r.len] = 0;
  return strlen(out);
}

static void fuzz_error(const uint8_t *p, size_t n) {
  gtp_error_frame e, e2;
  char reason[GTP_REASON_MAX + 1];
  if (gtp_frame_error_decode(p, n, &e) < 0)
    return;
  fuzz_check(e.code < 0 && e.reason.len <= GTP_REASON_MAX);
  fuzz_check(e.has_gen || e.gen == 0);
  size_t rl = reason_copy(reason, e.reason);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_error_encode(&b, e.code, e.has_gen, e.gen, reason) == 0);
  check_reencoding(&b, GTP_FR_ERROR, p, n, e.has_gen && rl == e.reason.len);
  fuzz_check(gtp_frame_error_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                    b.len - GTP_FRAME_HEADER_SIZE, &e2) == 0);
  fuzz_check(e.code == e2.code && e.has_gen == e2.has_gen && e.gen == e2.gen);
  fuzz_check(e2.reason.len == rl && memcmp(e2.reason.ptr, reason, rl) == 0);
  gtp_wbuf_fini(&b);
}

static void fuzz_goodbye(const uint8_t *p, size_t n) {
  gtp_goodbye g, g2;
  char reason[GTP_REASON_MAX + 1];
  if (gtp_frame_goodbye_decode(p, n, &g) < 0)
    return;
  fuzz_check(g.code <= 0 && g.reason.len <= GTP_REASON_MAX);
  size_t rl = reason_copy(reason, g.reason);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  fuzz_check(gtp_frame_goodbye_encode(&b, g.code, reason) == 0);
  check_reencoding(&b, GTP_FR_GOODBYE, p, n, rl == g.reason.len);
  fuzz_check(gtp_frame_goodbye_decode(b.data + GTP_FRAME_HEADER_SIZE,
                                      b.len - GTP_FRAME_HEADER_SIZE, &g2) == 0);
  fuzz_check(g.code == g2.code && g2.reason.len == rl &&
             memcmp(g2.reason.ptr, reason, rl) == 0);
  gtp_wbuf_fini(&b);
}

static void fuzz_payload(const gtp_frame *f) {
  fuzz_check(gtp_frame_name(f->type) != NULL);
  switch (f->type) {
  case GTP_FR_HELLO:
    fuzz_hello(f->payload, f->len);
    break;
  case GTP_FR_WELCOME:
    fuzz_welcome(f->payload, f->len);
    break;
  case GTP_FR_BATCH:
    fuzz_batch(f->payload, f->len);
    break;
  case GTP_FR_GEN_END:
    fuzz_gen_end(f->payload, f->len);
    break;
  case GTP_FR_ACK:
    fuzz_ack(f->payload, f->len);
    break;
  case GTP_FR_ERROR:
    fuzz_error(f->payload, f->len);
    break;
  case GTP_FR_GOODBYE:
    fuzz_goodbye(f->payload, f->len);
    break;
  default: /* HEARTBEAT and unknown types carry nothing to decode */
    break;
  }
}

/* What one pass over the stream produced. */
typedef struct pass {
  uint64_t digest; /* of every frame's type, length and payload, in order */
  size_t frames;
  int rc; /* 0, or the decoder's error */
  size_t buffered;
} pass;

static void frame_digest(pass *ps, const gtp_frame *f) {
  ps->digest = fnv(ps->digest, &f->type, 1);
  ps->digest = fnv(ps->digest, &f->len, sizeof f->len);
  ps->digest = fnv(ps->digest, f->payload, f->len);
  ps->frames++;
}

static void check_failed(const gtp_frame_decoder *d, int rc) {
  /* Invariant 1: a refused header leaves nothing of its payload behind. */
  if (rc == GTP_E_TOOBIG)
    fuzz_check(d->buf == NULL &&
               gtp_frame_decoder_buffered(d) <= GTP_FRAME_HEADER_SIZE);
  fuzz_check(rc == GTP_E_TOOBIG || rc == -12 /* ENOMEM */);
}

static void whole_pass(const uint8_t *data, size_t size, pass *ps) {
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, FUZZ_FRAME_MAX);
  const uint8_t *p = data;
  size_t left = size, frames_end = 0;
  memset(ps, 0, sizeof *ps);
  for (;;) {
    gtp_frame f;
    size_t used;
    int rc = gtp_frame_decoder_feed(&d, p, left, &used, &f);
    fuzz_check(used <= left);
    p += used;
    left -= used;
    if (rc < 0) {
      check_failed(&d, rc);
      ps->rc = rc;
      /* Invariant 3: sticky. */
      fuzz_check(gtp_frame_decoder_feed(&d, data, size, &used, &f) == rc);
      break;
    }
    if (rc == 0) {
      fuzz_check(left == 0);
      break;
    }
    /* Invariant 2: a frame whole in the input is not copied. */
    fuzz_check(d.buf == NULL && f.len <= FUZZ_FRAME_MAX);
    fuzz_check(f.len == 0 || in(f.payload, f.len, data, size));
    frames_end = (size_t)(p - data);
    frame_digest(ps, &f);
    fuzz_payload(&f);
  }
  ps->buffered = gtp_frame_decoder_buffered(&d);
  /* Everything after the last whole frame is the partial one, held. */
  if (ps->rc == 0)
    fuzz_check(ps->buffered == size - frames_end);
  gtp_frame_decoder_fini(&d);
}

static void split_pass(const uint8_t *data, size_t size, uint64_t seed,
                       pass *ps) {
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, FUZZ_FRAME_MAX);
  memset(ps, 0, sizeof *ps);
  size_t at = 0;
  uint64_t x = seed | 1;
  /* Mostly tiny chunks (header splits), sometimes large ones. */
  size_t span = (seed >> 8) & 1 ? 8 : 1 + size / 3;
  while (at < size && ps->rc == 0) {
    size_t chunk = 1 + (size_t)(xorshift64(&x) % span);
    if (chunk > size - at)
      chunk = size - at;
    const uint8_t *p = data + at;
    size_t left = chunk;
    for (;;) {
      gtp_frame f;
      size_t used;
      int rc = gtp_frame_decoder_feed(&d, p, left, &used, &f);
      fuzz_check(used <= left);
      p += used;
      left -= used;
      if (rc < 0) {
        check_failed(&d, rc);
        ps->rc = rc;
        break;
      }
      if (rc == 0) {
        fuzz_check(left == 0);
        break;
      }
      frame_digest(ps, &f);
      if (left == 0)
        break;
    }
    at += chunk;
  }
  ps->buffered = ps->rc ? 0 : gtp_frame_decoder_buffered(&d);
  gtp_frame_decoder_fini(&d);
}

int gtp_fuzz_frame_one(const uint8_t *data, size_t size) {
  pass whole, split;
  whole_pass(data, size, &whole);
  if (whole.rc)
    whole.buffered = 0;
  uint64_t seed = fnv(0xCBF29CE484222325ull, data, size);
  split_pass(data, size, seed, &split);
  fuzz_check(whole.frames == split.frames);
  fuzz_check(whole.digest == split.digest);
  fuzz_check(whole.rc == split.rc);
  fuzz_check(whole.buffered == split.buffered);
  return 0;
}

#ifndef GTP_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return gtp_fuzz_frame_one(data, size);
}
#endif
