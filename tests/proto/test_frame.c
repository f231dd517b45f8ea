/* test_frame.c: wire frame codecs and the incremental frame decoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"
#include "frame.h"
#include "varint.h"
#include "../lib/prng.h"

/* ------------------------------------------------------------- helpers */

/* Deterministic PRNG (xorshift64*), so a failure reproduces. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  return xorshift64star(&rng_state);
}

static gtp_str S(const char *s) {
  gtp_str r = {s, strlen(s)};
  return r;
}

static void assert_str_eq(gtp_str a, gtp_str b) {
  assert_int_equal(a.len, b.len);
  if (a.len)
    assert_memory_equal(a.ptr, b.ptr, a.len);
}

/* Splits one encoded frame into type and payload, checking its header. */
static void frame_of(const gtp_wbuf *b, size_t at, gtp_frame *f) {
  assert_true(b->len >= at + GTP_FRAME_HEADER_SIZE);
  f->len = gtp_get_u32le(b->data + at);
  f->type = b->data[at + 4];
  f->payload = b->data + at + GTP_FRAME_HEADER_SIZE;
  assert_int_equal(b->len - at - GTP_FRAME_HEADER_SIZE, f->len);
}

/* A whole body record: type | uvarint len | payload. */
static void put_record(gtp_wbuf *b, uint8_t type, const uint8_t *p, size_t n) {
  gtp_wbuf_put(b, &type, 1);
  gtp_wbuf_put_uvarint(b, n);
  if (n)
    gtp_wbuf_put(b, p, n);
}

static const uint8_t clock_payload[6] = {1, 2, 3, 4, 5, 6};

/* A HELLO with the biggest fields the protocol allows. Strings point into
 * one static block; each field gets a distinct fill so a swap shows. */
static char big[2 * GTP_TAGS_MAX + 4][GTP_IDENT_STR_MAX];
static void max_hello(gtp_hello *h) {
  memset(h, 0, sizeof *h);
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    memset(big[i], 'a' + (int)(i % 26), sizeof big[i]);
  h->min_version = 1;
  h->max_version = UINT32_MAX;
  for (int i = 0; i < 16; i++) {
    h->session[i] = (uint8_t)(0xF0 + i);
    h->session_key[i] = (uint8_t)(0xA0 + i);
  }
  h->service = (gtp_str){big[0], GTP_IDENT_STR_MAX};
  h->host = (gtp_str){big[1], GTP_IDENT_STR_MAX};
  h->agent_version = (gtp_str){big[2], GTP_IDENT_STR_MAX};
  h->pid = UINT64_MAX;
  h->process_start_ns = UINT64_MAX - 1;
  h->ntags = GTP_TAGS_MAX;
  for (int i = 0; i < GTP_TAGS_MAX; i++) {
    h->tags[i].key = (gtp_str){big[3 + 2 * i], GTP_IDENT_STR_MAX};
    h->tags[i].value = (gtp_str){big[4 + 2 * i], GTP_IDENT_STR_MAX - 1};
  }
  h->token = (gtp_str){NULL, 0};
}

static void assert_hello_eq(const gtp_hello *a, const gtp_hello *b) {
  assert_int_equal(a->min_version, b->min_version);
  assert_int_equal(a->max_version, b->max_version);
  assert_memory_equal(a->session, b->session, 16);
  assert_memory_equal(a->session_key, b->session_key, 16);
  assert_str_eq(a->service, b->service);
  assert_str_eq(a->host, b->host);
  assert_str_eq(a->agent_version, b->agent_version);
  assert_true(a->pid == b->pid);
  assert_true(a->process_start_ns == b->process_start_ns);
  assert_int_equal(a->ntags, b->ntags);
  for (uint32_t i = 0; i < a->ntags; i++) {
    assert_str_eq(a->tags[i].key, b->tags[i].key);
    assert_str_eq(a->tags[i].value, b->tags[i].value);
  }
  assert_str_eq(a->token, b->token);
}

/* Decodes a payload by frame type with the matching decoder. */
static int decode_any(uint8_t type, const uint8_t *p, size_t n) {
  static gtp_hello h;
  gtp_welcome w;
  gtp_gen_end e;
  gtp_error_frame ef;
  gtp_goodbye g;
  uint64_t gen;
  const uint8_t *rec;
  size_t rlen;
  switch (type) {
  case GTP_FR_HELLO:
    return gtp_frame_hello_decode(p, n, &h);
  case GTP_FR_WELCOME:
    return gtp_frame_welcome_decode(p, n, &w);
  case GTP_FR_BATCH:
    return gtp_frame_batch_decode(p, n, &gen, &rec, &rlen);
  case GTP_FR_GEN_END:
    return gtp_frame_gen_end_decode(p, n, &e);
  case GTP_FR_ACK:
    return gtp_frame_ack_decode(p, n, &gen);
  case GTP_FR_HEARTBEAT:
    return n == 0 ? 0 : GTP_E_CORRUPT;
  case GTP_FR_ERROR:
    return gtp_frame_error_decode(p, n, &ef);
  case GTP_FR_GOODBYE:
    return gtp_frame_goodbye_decode(p, n, &g);
  default:
    return GTP_E_UNKNOWN;
  }
}

/* One of every frame type, back to back, as a session would send them. */
static gtp_hello stream_hello;
static void build_stream(gtp_wbuf *b) {
  gtp_hello *h = &stream_hello;
  memset(h, 0, sizeof *h);
  h->min_version = GTP_PROTO_VERSION;
  h->max_version = GTP_PROTO_VERSION;
  memset(h->session_key, 0x5c, sizeof h->session_key);
  h->service = S("checkout");
  h->host = S("web-3");
  h->agent_version = S("0.1.0");
  h->pid = 4242;
  h->process_start_ns = 1700000000000000000ull;
  h->ntags = 2;
  h->tags[0].key = S("env");
  h->tags[0].value = S("prod");
  h->tags[1].key = S("zone");
  h->tags[1].value = S("");
  h->token = S("s3cret");
  assert_int_equal(gtp_frame_hello_encode(b, h), 0);

  gtp_welcome w = {GTP_PROTO_VERSION, 1, 41, 30000, 64u << 20};
  assert_int_equal(gtp_frame_welcome_encode(b, &w), 0);

  gtp_wbuf rec;
  gtp_wbuf_init(&rec, 0);
  put_record(&rec, GTP_REC_CLOCK, clock_payload, sizeof clock_payload);
  uint8_t big_payload[3000];
  for (size_t i = 0; i < sizeof big_payload; i++)
    big_payload[i] = (uint8_t)i;
  put_record(&rec, GTP_REC_STRINGS, big_payload, sizeof big_payload);
  assert_int_equal(rec.err, 0);
  assert_int_equal(gtp_frame_batch_encode(b, 42, rec.data, rec.len), 0);
  gtp_wbuf_fini(&rec);

  gtp_gen_end e = {42, 2, 0, 3010, 0xDEADBEEF, 0, 1, 2, 3};
  assert_int_equal(gtp_frame_gen_end_encode(b, &e), 0);
  assert_int_equal(gtp_frame_heartbeat_encode(b), 0);
  assert_int_equal(gtp_frame_ack_encode(b, 42), 0);
  assert_int_equal(gtp_frame_error_encode(b, GTP_E_MANIFEST, 1, 43, "bad"), 0);
  assert_int_equal(gtp_frame_heartbeat_encode(b), 0);
  assert_int_equal(gtp_frame_goodbye_encode(b, 0, "bye"), 0);
}

/* The reference split of a stream: walk the headers directly. */
typedef struct ref_frame {
  uint8_t type;
  uint32_t len;
  size_t at; /* payload offset in the stream */
} ref_frame;

static size_t ref_frames(const gtp_wbuf *b, ref_frame *out, size_t max) {
  size_t n = 0, at = 0;
  while (at < b->len) {
    assert_true(n < max);
    out[n].len = gtp_get_u32le(b->data + at);
    out[n].type = b->data[at + 4];
    out[n].at = at + GTP_FRAME_HEADER_SIZE;
    at += GTP_FRAME_HEADER_SIZE + out[n].len;
    n++;
  }
  assert_int_equal(at, b->len);
  return n;
}

/* Feeds stream[0..len) to a fresh decoder in the chunks given by cuts
 * (ascending offsets, ncuts of them) and checks the frames equal ref. */
static void feed_chunks(const gtp_wbuf *s, const ref_frame *ref, size_t nref,
                        const size_t *cuts, size_t ncuts) {
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  size_t got = 0, start = 0;
  for (size_t c = 0; c <= ncuts; c++) {
    size_t stop = c < ncuts ? cuts[c] : s->len;
    const uint8_t *p = s->data + start;
    size_t n = stop - start;
    for (;;) {
      size_t used = 0;
      gtp_frame f;
      int rc = gtp_frame_decoder_feed(&d, p, n, &used, &f);
      assert_true(rc >= 0);
      assert_true(used <= n);
      p += used;
      n -= used;
      if (rc == 0) {
        assert_int_equal(n, 0);
        break;
      }
      assert_true(got < nref);
      assert_int_equal(f.type, ref[got].type);
      assert_int_equal(f.len, ref[got].len);
      assert_non_null(f.payload);
      if (f.len)
        assert_memory_equal(f.payload, s->data + ref[got].at, f.len);
      assert_int_equal(decode_any(f.type, f.payload, f.len), 0);
      got++;
      if (n == 0)
        break;
    }
    start = stop;
  }
  assert_int_equal(got, nref);
  assert_int_equal(gtp_frame_decoder_buffered(&d), 0);
  gtp_frame_decoder_fini(&d);
}

/* ---------------------------------------------------------- round trips */

static void test_frame_name__known_and_unknown(void **state) {
  (void)state;
  assert_string_equal(gtp_frame_name(GTP_FR_HELLO), "HELLO");
  assert_string_equal(gtp_frame_name(GTP_FR_GEN_END), "GEN_END");
  assert_string_equal(gtp_frame_name(GTP_FR_GOODBYE), "GOODBYE");
  assert_string_equal(gtp_frame_name(0), "?");
  assert_string_equal(gtp_frame_name(99), "?");
}

static void test_frame_header_put__little_endian_length_then_type(void **st) {
  (void)st;
  uint8_t h[GTP_FRAME_HEADER_SIZE];
  gtp_frame_header_put(h, GTP_FR_ACK, 0x01020304);
  const uint8_t want[] = {4, 3, 2, 1, GTP_FR_ACK};
  assert_memory_equal(h, want, sizeof want);
}

static void test_frame_hello__max_fields_and_empty_token_round_trip(void **s) {
  (void)s;
  static gtp_hello h, out;
  max_hello(&h);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_hello_encode(&b, &h), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_HELLO);
  assert_int_equal(gtp_get_u32le(f.payload), GTP_HELLO_MAGIC);
  assert_int_equal(gtp_frame_hello_decode(f.payload, f.len, &out), 0);
  assert_hello_eq(&h, &out);
  assert_int_equal(out.token.len, 0);
  /* Borrowed views point into the payload, not at the caller's strings. */
  assert_true((const uint8_t *)out.service.ptr > f.payload &&
              (const uint8_t *)out.service.ptr < f.payload + f.len);
  gtp_wbuf_fini(&b);
}

static void test_frame_hello__max_token_round_trip(void **s) {
  (void)s;
  static gtp_hello h, out;
  char tok[GTP_TOKEN_MAX];
  memset(tok, 'T', sizeof tok);
  memset(&h, 0, sizeof h);
  h.min_version = h.max_version = GTP_PROTO_VERSION;
  h.service = S("svc");
  h.token = (gtp_str){tok, GTP_TOKEN_MAX};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_hello_encode(&b, &h), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(gtp_frame_hello_decode(f.payload, f.len, &out), 0);
  assert_hello_eq(&h, &out);
  assert_int_equal(out.ntags, 0);
  assert_int_equal(out.host.len, 0);
  gtp_wbuf_fini(&b);
}

static void
test_frame_hello_encode__over_limits_is_toobig_appends_nothing(void **s) {
  (void)s;
  static gtp_hello h;
  static char huge[GTP_IDENT_STR_MAX + 1];
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  size_t before = b.len;

  max_hello(&h);
  h.ntags = GTP_TAGS_MAX + 1;
  assert_int_equal(gtp_frame_hello_encode(&b, &h), GTP_E_TOOBIG);
  max_hello(&h);
  h.host = (gtp_str){huge, sizeof huge};
  assert_int_equal(gtp_frame_hello_encode(&b, &h), GTP_E_TOOBIG);
  max_hello(&h);
  h.tags[31].value = (gtp_str){huge, sizeof huge};
  assert_int_equal(gtp_frame_hello_encode(&b, &h), GTP_E_TOOBIG);
  max_hello(&h);
  h.token = (gtp_str){huge, GTP_TOKEN_MAX + 1};
  assert_int_equal(gtp_frame_hello_encode(&b, &h), GTP_E_TOOBIG);

  assert_int_equal(b.len, before);
  assert_int_equal(b.err, 0);
  gtp_wbuf_fini(&b);
}

static void test_frame_encode__wbuf_limit_rolls_back_whole_frame(void **s) {
  (void)s;
  static gtp_hello h;
  max_hello(&h);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 4096); /* room for small frames, not a max HELLO */
  assert_int_equal(gtp_frame_ack_encode(&b, 7), 0);
  size_t before = b.len;
  int rc = gtp_frame_hello_encode(&b, &h);
  assert_true(rc < 0);
  assert_int_equal(rc, b.err);
  /* No half frame: what is in the buffer still parses as one ACK. */
  assert_int_equal(b.len, before);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_ACK);
  gtp_wbuf_fini(&b);
}

static void test_frame_welcome__round_trip_with_and_without_last(void **s) {
  (void)s;
  gtp_welcome w = {GTP_PROTO_VERSION, 1, UINT64_MAX, 30000, 256u << 20}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_welcome_encode(&b, &w), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_WELCOME);
  assert_int_equal(gtp_frame_welcome_decode(f.payload, f.len, &out), 0);
  assert_int_equal(out.version, w.version);
  assert_int_equal(out.has_last, 1);
  assert_true(out.last_gen == UINT64_MAX);
  assert_int_equal(out.idle_timeout_ms, 30000);
  assert_int_equal(out.max_gen_bytes, 256u << 20);

  gtp_wbuf_reset(&b);
  gtp_welcome w2 = {7, 0, 99, 1, 2};
  assert_int_equal(gtp_frame_welcome_encode(&b, &w2), 0);
  frame_of(&b, 0, &f);
  assert_int_equal(gtp_frame_welcome_decode(f.payload, f.len, &out), 0);
  assert_int_equal(out.version, 7);
  assert_int_equal(out.has_last, 0);
  assert_int_equal(out.last_gen, 0); /* not announced, not reported */

  /* A peer that sends a last_gen without has_last: ignored, not reported. */
  const uint8_t raw[] = {1, 0, 5, 0, 0};
  assert_int_equal(gtp_frame_welcome_decode(raw, sizeof raw, &out), 0);
  assert_int_equal(out.has_last, 0);
  assert_int_equal(out.last_gen, 0);
  gtp_wbuf_fini(&b);
}

static void test_frame_batch__round_trip_borrows_records(void **s) {
  (void)s;
  gtp_wbuf rec, b;
  gtp_wbuf_init(&rec, 0);
  gtp_wbuf_init(&b, 0);
  put_record(&rec, GTP_REC_CLOCK, clock_payload, sizeof clock_payload);
  put_record(&rec, GTP_REC_STRINGS, (const uint8_t *)"\x01\x01\x01x", 4);
  put_record(&rec, 0x7f, NULL, 0); /* unknown type from a newer agent */
  assert_int_equal(gtp_frame_batch_encode(&b, 1ull << 40, rec.data, rec.len),
                   0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_BATCH);
  uint64_t gen;
  const uint8_t *r;
  size_t rlen;
  assert_int_equal(gtp_frame_batch_decode(f.payload, f.len, &gen, &r, &rlen),
                   0);
  assert_true(gen == 1ull << 40);
  assert_int_equal(rlen, rec.len);
  assert_memory_equal(r, rec.data, rlen);
  assert_ptr_equal(r, f.payload + f.len - rlen);
  gtp_wbuf_fini(&rec);
  gtp_wbuf_fini(&b);
}

static void test_frame_batch__max_payload_fits_one_more_is_toobig(void **s) {
  (void)s;
  /* One record whose payload fills the frame exactly: 1 byte gen, 1 type
   * byte, 3 bytes of length varint. */
  size_t plen = GTP_FRAME_MAX - 1 - 1 - 3;
  uint8_t *rec = malloc(GTP_FRAME_MAX);
  assert_non_null(rec);
  rec[0] = GTP_REC_STRINGS;
  assert_int_equal(gtp_uvarint_put(rec + 1, plen), 3);
  memset(rec + 4, 0x55, plen);
  size_t rlen = 4 + plen;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_batch_encode(&b, 5, rec, rlen), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.len, GTP_FRAME_MAX);
  uint64_t gen;
  const uint8_t *r;
  size_t got;
  assert_int_equal(gtp_frame_batch_decode(f.payload, f.len, &gen, &r, &got), 0);
  assert_int_equal(got, rlen);

  size_t before = b.len;
  /* gen 128 needs two varint bytes: one over the maximum. */
  assert_int_equal(gtp_frame_batch_encode(&b, 128, rec, rlen), GTP_E_TOOBIG);
  assert_int_equal(b.len, before);
  assert_int_equal(b.err, 0);
  gtp_wbuf_fini(&b);
  free(rec);
}

static void test_frame_gen_end__round_trip(void **s) {
  (void)s;
  gtp_gen_end e = {UINT64_MAX, 10, 7, 123456, 0xE3069283u, 99999, 1, 2, 3}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_gen_end_encode(&b, &e), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_GEN_END);
  assert_int_equal(gtp_frame_gen_end_decode(f.payload, f.len, &out), 0);
  assert_memory_equal(&out.gen, &e.gen, sizeof e.gen);
  assert_true(out.records == 10 && out.batches == 7 && out.bytes == 123456);
  assert_true(out.crc == 0xE3069283u && out.events == 99999);
  assert_true(out.dropped == 1 && out.evicted == 2 && out.rejected == 3);
  gtp_wbuf_fini(&b);
}

static void test_frame_ack_and_heartbeat__round_trip(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_ack_encode(&b, UINT64_MAX), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_ACK);
  uint64_t gen = 0;
  assert_int_equal(gtp_frame_ack_decode(f.payload, f.len, &gen), 0);
  assert_true(gen == UINT64_MAX);

  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  assert_int_equal(b.len, GTP_FRAME_HEADER_SIZE);
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_HEARTBEAT);
  assert_int_equal(f.len, 0);
  gtp_wbuf_fini(&b);
}

static void test_frame_error__negative_code_positive_on_wire(void **s) {
  (void)s;
  char reason[GTP_REASON_MAX + 2];
  memset(reason, 'r', GTP_REASON_MAX);
  reason[GTP_REASON_MAX] = 0;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_error_encode(&b, GTP_E_CRC, 1, 77, reason), 0);
  gtp_frame f;
  frame_of(&b, 0, &f);
  assert_int_equal(f.type, GTP_FR_ERROR);
  /* 7006 as a uvarint: positive on the wire. */
  const uint8_t *p = f.payload;
  uint64_t wire;
  assert_int_equal(gtp_uvarint_get(&p, f.payload + f.len, &wire), 0);
  assert_int_equal(wire, 7006);
  gtp_error_frame e;
  assert_int_equal(gtp_frame_error_decode(f.payload, f.len, &e), 0);
  assert_int_equal(e.code, GTP_E_CRC);
  assert_int_equal(e.has_gen, 1);
  assert_int_equal(e.gen, 77);
  assert_int_equal(e.reason.len, GTP_REASON_MAX);

  /* Without a generation, and with -errno and a NULL reason. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_frame_error_encode(&b, -104, 0, 5, NULL), 0);
  frame_of(&b, 0, &f);
  assert_int_equal(gtp_frame_error_decode(f.payload, f.len, &e), 0);
  assert_int_equal(e.code, -104);
  assert_int_equal(e.has_gen, 0);
  assert_int_equal(e.gen, 0);
  assert_int_equal(e.reason.len, 0);

  /* Over-long reason and code 0 append nothing. */
  gtp_wbuf_reset(&b);
  reason[GTP_REASON_MAX] = 'r';
  reason[GTP_REASON_MAX + 1] = 0;
  assert_int_equal(gtp_frame_error_encode(&b, GTP_E_CRC, 0, 0, reason),
                   GTP_E_TOOBIG);
  assert_int_equal(gtp_frame_error_encode(&b, 0, 0, 0, "x"), GTP_E_BADARG);
  assert_int_equal(gtp_frame_error_encode(&b, INT32_MIN, 0, 0, "x"),
                   GTP_E_BADARG);
  assert_int_equal(gtp_frame_goodbye_encode(&b, INT32_MIN, "x"), GTP_E_BADARG);
  assert_int_equal(b.len, 0);
  gtp_wbuf_fini(&b);
}

static void test_frame_goodbye__zero_and_negative_codes_round_trip(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_goodbye_encode(&b, 0, "agent stopping"), 0);
  assert_int_equal(gtp_frame_goodbye_encode(&b, GTP_E_SHUTDOWN, ""), 0);
  gtp_frame f;
  gtp_goodbye g;
  uint32_t l1 = gtp_get_u32le(b.data);
  f.payload = b.data + GTP_FRAME_HEADER_SIZE;
  assert_int_equal(b.data[4], GTP_FR_GOODBYE);
  assert_int_equal(gtp_frame_goodbye_decode(f.payload, l1, &g), 0);
  assert_int_equal(g.code, 0);
  assert_str_eq(g.reason, S("agent stopping"));
  frame_of(&b, GTP_FRAME_HEADER_SIZE + l1, &f);
  assert_int_equal(gtp_frame_goodbye_decode(f.payload, f.len, &g), 0);
  assert_int_equal(g.code, GTP_E_SHUTDOWN);
  assert_int_equal(g.reason.len, 0);
  gtp_wbuf_fini(&b);
}

/* ------------------------------------------------------ hostile payloads */

static void test_frame_hello_decode__bad_magic_is_magic(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  uint32_t l = gtp_get_u32le(b.data);
  uint8_t *p = b.data + GTP_FRAME_HEADER_SIZE;
  static gtp_hello h;
  assert_int_equal(gtp_frame_hello_decode(p, l, &h), 0);
  p[3] ^= 0x20; /* "GTHL" -> "gTHL" */
  assert_int_equal(gtp_frame_hello_decode(p, l, &h), GTP_E_MAGIC);
  gtp_wbuf_fini(&b);
}

/* Encodes a HELLO payload by hand with given ntags and string lengths. */
static size_t raw_hello(uint8_t *out, uint64_t ntags, uint64_t service_len,
                        uint64_t token_len) {
  uint8_t *p = out;
  gtp_put_u32le(p, GTP_HELLO_MAGIC);
  p += 4;
  *p++ = 1;
  *p++ = 1;
  memset(p, 0, 16);
  p += 16;
  p += gtp_uvarint_put(p, service_len);
  memset(p, 's', service_len);
  p += service_len;
  *p++ = 0; /* host */
  *p++ = 1; /* pid */
  *p++ = 2; /* start */
  *p++ = 0; /* agent_version */
  p += gtp_uvarint_put(p, ntags);
  for (uint64_t i = 0; i < ntags && i < 40; i++) {
    *p++ = 1;
    *p++ = 'k';
    *p++ = 0;
  }
  p += gtp_uvarint_put(p, token_len);
  memset(p, 't', token_len);
  p += token_len;
  return (size_t)(p - out);
}

static void test_frame_hello_decode__over_limits_are_toobig(void **s) {
  (void)s;
  static uint8_t buf[8192];
  static gtp_hello h;
  size_t n = raw_hello(buf, GTP_TAGS_MAX, GTP_IDENT_STR_MAX, GTP_TOKEN_MAX);
  assert_int_equal(gtp_frame_hello_decode(buf, n, &h), 0);
  assert_int_equal(h.ntags, GTP_TAGS_MAX);
  n = raw_hello(buf, GTP_TAGS_MAX + 1, 3, 0);
  assert_int_equal(gtp_frame_hello_decode(buf, n, &h), GTP_E_TOOBIG);
  n = raw_hello(buf, 0, GTP_IDENT_STR_MAX + 1, 0);
  assert_int_equal(gtp_frame_hello_decode(buf, n, &h), GTP_E_TOOBIG);
  n = raw_hello(buf, 0, 3, GTP_TOKEN_MAX + 1);
  assert_int_equal(gtp_frame_hello_decode(buf, n, &h), GTP_E_TOOBIG);
  /* A count far beyond the input is refused by value, not by trying. */
  n = raw_hello(buf, UINT64_MAX, 3, 0);
  assert_int_equal(gtp_frame_hello_decode(buf, n, &h), GTP_E_TOOBIG);
  /* Versions wider than 32 bits are malformed. */
  n = raw_hello(buf, 0, 3, 0);
  uint8_t wide[8192];
  memcpy(wide, buf, 4);
  size_t k = 4 + gtp_uvarint_put(wide + 4, 1ull << 32);
  memcpy(wide + k, buf + 5, n - 5);
  assert_int_equal(gtp_frame_hello_decode(wide, k + n - 5, &h), GTP_E_CORRUPT);
}

static void test_frame_decode__trailing_garbage_is_corrupt(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  int checked = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t *p = malloc(ref[i].len + 1);
    assert_non_null(p);
    if (ref[i].len)
      memcpy(p, b.data + ref[i].at, ref[i].len);
    p[ref[i].len] = 0;
    int rc = decode_any(ref[i].type, p, ref[i].len + 1);
    if (ref[i].type == GTP_FR_BATCH) {
      /* BATCH runs to the end, so a trailing 0 byte is a record of type 0
       * cut short: malformed either way. */
      assert_true(rc == GTP_E_TRUNC || rc == GTP_E_CORRUPT);
      checked++;
    } else if (ref[i].type != GTP_FR_HEARTBEAT) {
      assert_int_equal(rc, GTP_E_CORRUPT);
      checked++;
    }
    free(p);
  }
  assert_int_equal(n, 9);
  assert_int_equal(checked, 7);
  gtp_wbuf_fini(&b);
}

static void test_frame_decode__every_truncation_is_an_error(void **s) {
  (void)s;
  static gtp_hello h;
  max_hello(&h);
  h.ntags = 3;
  h.token = S("tok");
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_hello_encode(&b, &h), 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  size_t cuts = 0;
  for (size_t i = 0; i < n; i++) {
    if (ref[i].type == GTP_FR_BATCH) {
      /* A BATCH cut at a record boundary is a shorter valid BATCH (the
       * GEN_END manifest catches it); check cuts inside its first record. */
      gtp_record rec;
      const uint8_t *p = b.data + ref[i].at;
      assert_int_equal(gtp_record_parse(p + 1, ref[i].len - 1, &rec), 0);
      for (size_t k = 0; k < 1 + rec.size; k++, cuts++) {
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, p, k);
        assert_true(decode_any(GTP_FR_BATCH, c, k) < 0);
        free(c);
      }
      continue;
    }
    for (size_t k = 0; k < ref[i].len; k++, cuts++) {
      /* A copy of exactly k bytes so ASan sees any read past the cut. */
      uint8_t *c = malloc(k ? k : 1);
      assert_non_null(c);
      memcpy(c, b.data + ref[i].at, k);
      int rc = decode_any(ref[i].type, c, k);
      if (rc >= 0)
        fail_msg("%s cut at %zu of %u decoded", gtp_frame_name(ref[i].type), k,
                 ref[i].len);
      free(c);
    }
  }
  assert_true(cuts > 3000); /* the max-size HELLO alone has ~3000 cuts */
  gtp_wbuf_fini(&b);
}

static void test_frame_decode__bad_flags_and_codes_are_corrupt(void **s) {
  (void)s;
  gtp_welcome w;
  gtp_error_frame e;
  gtp_goodbye g;
  const uint8_t welcome_flag2[] = {1, 2, 0, 0, 0};
  assert_int_equal(gtp_frame_welcome_decode(welcome_flag2, 5, &w),
                   GTP_E_CORRUPT);
  const uint8_t error_flag2[] = {5, 2, 0, 0};
  assert_int_equal(gtp_frame_error_decode(error_flag2, 4, &e), GTP_E_CORRUPT);
  const uint8_t error_code0[] = {0, 0, 0, 0};
  assert_int_equal(gtp_frame_error_decode(error_code0, 4, &e), GTP_E_CORRUPT);
  /* 2^31 cannot be a negated int32_t. */
  const uint8_t goodbye_wide[] = {0x80, 0x80, 0x80, 0x80, 0x08, 0};
  assert_int_equal(gtp_frame_goodbye_decode(goodbye_wide, 6, &g),
                   GTP_E_CORRUPT);
  const uint8_t goodbye_max[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0};
  assert_int_equal(gtp_frame_goodbye_decode(goodbye_max, 6, &g), 0);
  assert_int_equal(g.code, -INT32_MAX);
  /* An 11-byte varint. */
  const uint8_t ack_long[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                              0x80, 0x80, 0x80, 0x80, 0x00};
  uint64_t gen;
  assert_int_equal(gtp_frame_ack_decode(ack_long, sizeof ack_long, &gen),
                   GTP_E_VARINT);
  uint8_t reason[4 + GTP_REASON_MAX + 1] = {9, 0, 0};
  size_t k = 3 + gtp_uvarint_put(reason + 3, GTP_REASON_MAX + 1);
  assert_int_equal(gtp_frame_error_decode(reason, k + GTP_REASON_MAX + 1, &e),
                   GTP_E_TOOBIG);
}

static void
test_frame_batch_decode__empty_or_framing_records_rejected(void **s) {
  (void)s;
  uint64_t gen;
  const uint8_t *r;
  size_t rl;
  const uint8_t only_gen[] = {42};
  assert_int_equal(gtp_frame_batch_decode(only_gen, 1, &gen, &r, &rl),
                   GTP_E_TRUNC);
  assert_int_equal(gtp_frame_batch_decode(only_gen, 0, &gen, &r, &rl),
                   GTP_E_TRUNC);
  const uint8_t gen_start[] = {42, GTP_REC_GEN_START, 1, 0};
  assert_int_equal(gtp_frame_batch_decode(gen_start, 4, &gen, &r, &rl),
                   GTP_E_CORRUPT);
  const uint8_t gen_end[] = {42, GTP_REC_CLOCK, 0, GTP_REC_GEN_END, 0};
  assert_int_equal(gtp_frame_batch_decode(gen_end, 5, &gen, &r, &rl),
                   GTP_E_CORRUPT);
  const uint8_t overlong[] = {42, GTP_REC_CLOCK, 5, 1, 2};
  assert_int_equal(gtp_frame_batch_decode(overlong, 5, &gen, &r, &rl),
                   GTP_E_TRUNC);
  assert_null(r);
  assert_int_equal(rl, 0);
}

static void test_frame_decode__random_bytes_never_crash(void **s) {
  (void)s;
  uint8_t *buf = malloc(4096);
  assert_non_null(buf);
  int ok = 0;
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = (size_t)(rnd() % 300);
    /* Bias toward small varints and a valid magic so decoding goes deep. */
    for (size_t i = 0; i < n; i++) {
      uint64_t r = rnd();
      buf[i] = (r & 3) ? (uint8_t)(r >> 8) % 8 : (uint8_t)(r >> 16);
    }
    if (n >= 4 && (iter & 1))
      gtp_put_u32le(buf, GTP_HELLO_MAGIC);
    /* An exact-size copy makes any over-read visible to ASan. */
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, buf, n);
    for (uint8_t t = 0; t <= 9; t++)
      if (decode_any(t, c, n) == 0)
        ok++;
    free(c);
  }
  assert_true(ok > 0); /* some random payloads do decode (e.g. ACK) */
  free(buf);
}

/* ---------------------------------------------------- incremental decoder */

static void test_frame_decoder__whole_input_is_zero_copy(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  const uint8_t *p = b.data;
  size_t left = b.len;
  for (size_t i = 0; i < n; i++) {
    gtp_frame f;
    size_t used;
    assert_int_equal(gtp_frame_decoder_feed(&d, p, left, &used, &f), 1);
    assert_int_equal(f.type, ref[i].type);
    if (f.len)
      assert_ptr_equal(f.payload, b.data + ref[i].at);
    assert_null(d.buf);
    assert_int_equal(gtp_frame_decoder_buffered(&d), 0);
    p += used;
    left -= used;
  }
  assert_int_equal(left, 0);
  size_t used = 99;
  gtp_frame f;
  assert_int_equal(gtp_frame_decoder_feed(&d, p, 0, &used, &f), 0);
  assert_int_equal(used, 0);
  gtp_frame_decoder_fini(&d);
  gtp_wbuf_fini(&b);
}

static void test_frame_decoder__split_at_every_byte_boundary(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  for (size_t cut = 0; cut <= b.len; cut++)
    feed_chunks(&b, ref, n, &cut, 1);
  /* Two cuts around every header byte: frames split in the header. */
  for (size_t i = 0; i < n; i++) {
    size_t h = ref[i].at - GTP_FRAME_HEADER_SIZE;
    for (size_t a = h; a < ref[i].at; a++)
      for (size_t z = a; z <= ref[i].at + 1 && z <= b.len; z++) {
        size_t cuts[2] = {a, z};
        feed_chunks(&b, ref, n, cuts, 2);
      }
  }
  gtp_wbuf_fini(&b);
}

static void test_frame_decoder__one_byte_at_a_time(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  size_t *cuts = malloc(b.len * sizeof *cuts);
  for (size_t i = 0; i < b.len; i++)
    cuts[i] = i + 1;
  feed_chunks(&b, ref, n, cuts, b.len - 1);
  free(cuts);
  gtp_wbuf_fini(&b);
}

static void test_frame_decoder__random_chunkings(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  build_stream(&b);
  ref_frame ref[16];
  size_t n = ref_frames(&b, ref, 16);
  size_t cuts[64];
  for (int iter = 0; iter < 2000; iter++) {
    size_t nc = 0, at = 0;
    while (nc < 64) {
      at += 1 + (size_t)(rnd() % (iter & 1 ? 16 : 700));
      if (at >= b.len)
        break;
      cuts[nc++] = at;
    }
    feed_chunks(&b, ref, n, cuts, nc);
  }
  gtp_wbuf_fini(&b);
}

static void
test_frame_decoder__split_payload_buffers_exactly_and_frees(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_ack_encode(&b, 1ull << 60), 0); /* 9-byte */
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  gtp_frame f;
  size_t used;
  /* Header and 3 payload bytes. */
  assert_int_equal(gtp_frame_decoder_feed(&d, b.data, 8, &used, &f), 0);
  assert_int_equal(used, 8);
  assert_int_equal(gtp_frame_decoder_buffered(&d), 8);
  assert_non_null(d.buf);
  assert_int_equal(d.len, 9);
  /* The rest of the ACK and the whole HEARTBEAT. */
  const uint8_t *p = b.data + 8;
  size_t left = b.len - 8;
  assert_int_equal(gtp_frame_decoder_feed(&d, p, left, &used, &f), 1);
  assert_int_equal(used, 6);
  assert_int_equal(f.type, GTP_FR_ACK);
  assert_ptr_equal(f.payload, d.buf); /* buffered: valid until next call */
  uint64_t gen;
  assert_int_equal(gtp_frame_ack_decode(f.payload, f.len, &gen), 0);
  assert_true(gen == 1ull << 60);
  assert_int_equal(gtp_frame_decoder_buffered(&d), 0);
  p += used;
  left -= used;
  assert_int_equal(gtp_frame_decoder_feed(&d, p, left, &used, &f), 1);
  assert_int_equal(f.type, GTP_FR_HEARTBEAT);
  assert_int_equal(f.len, 0);
  assert_null(d.buf); /* the ACK's buffer went with the next call */
  gtp_frame_decoder_fini(&d);
  gtp_wbuf_fini(&b);
}

static void
test_frame_decoder__oversized_length_is_toobig_nothing_buffered(void **s) {
  (void)s;
  uint8_t hdr[GTP_FRAME_HEADER_SIZE + 8];
  memset(hdr, 0, sizeof hdr);
  gtp_frame_header_put(hdr, GTP_FR_BATCH, GTP_FRAME_MAX + 1);
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  gtp_frame f;
  size_t used;
  assert_int_equal(gtp_frame_decoder_feed(&d, hdr, sizeof hdr, &used, &f),
                   GTP_E_TOOBIG);
  assert_null(d.buf);
  assert_true(gtp_frame_decoder_buffered(&d) <= GTP_FRAME_HEADER_SIZE);
  gtp_frame_decoder_fini(&d);

  /* 4 GiB - 1 announced one byte at a time: refused at the fifth byte. */
  gtp_frame_header_put(hdr, GTP_FR_BATCH, UINT32_MAX);
  gtp_frame_decoder_init(&d, 0);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(gtp_frame_decoder_feed(&d, hdr + i, 1, &used, &f), 0);
    assert_int_equal(used, 1);
  }
  assert_int_equal(gtp_frame_decoder_feed(&d, hdr + 4, 5, &used, &f),
                   GTP_E_TOOBIG);
  assert_null(d.buf);
  gtp_frame_decoder_fini(&d);

  /* A configured maximum below the hard one is enforced exactly. */
  gtp_frame_decoder_init(&d, 100);
  gtp_frame_header_put(hdr, GTP_FR_BATCH, 100);
  assert_int_equal(gtp_frame_decoder_feed(&d, hdr, 6, &used, &f), 0);
  assert_int_equal(d.len, 100);
  gtp_frame_decoder_fini(&d);
  gtp_frame_decoder_init(&d, 100);
  gtp_frame_header_put(hdr, GTP_FR_BATCH, 101);
  assert_int_equal(gtp_frame_decoder_feed(&d, hdr, 6, &used, &f), GTP_E_TOOBIG);
  gtp_frame_decoder_fini(&d);

  /* And a maximum above the hard one is clamped to it. */
  gtp_frame_decoder_init(&d, UINT32_MAX);
  assert_int_equal(d.max, GTP_FRAME_MAX);
  gtp_frame_decoder_fini(&d);
}

static void test_frame_decoder__error_is_sticky(void **s) {
  (void)s;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_frame_ack_encode(&b, 3), 0);
  uint8_t bad[GTP_FRAME_HEADER_SIZE];
  gtp_frame_header_put(bad, GTP_FR_ACK, 1000);
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 64);
  gtp_frame f;
  size_t used;
  /* Half a frame buffered first, so the failure must also free it. */
  assert_int_equal(gtp_frame_decoder_feed(&d, b.data, b.len - 1, &used, &f), 0);
  assert_int_equal(gtp_frame_decoder_feed(&d, b.data + b.len - 1, 1, &used, &f),
                   1);
  assert_int_equal(gtp_frame_decoder_feed(&d, bad, sizeof bad, &used, &f),
                   GTP_E_TOOBIG);
  for (int i = 0; i < 3; i++) {
    used = 123;
    assert_int_equal(gtp_frame_decoder_feed(&d, b.data, b.len, &used, &f),
                     GTP_E_TOOBIG);
    assert_int_equal(used, 0);
  }
  assert_null(d.buf);
  gtp_frame_decoder_fini(&d);
  gtp_wbuf_fini(&b);
}

static void test_frame_decoder__fini_frees_partial_frame(void **s) {
  (void)s;
  uint8_t hdr[GTP_FRAME_HEADER_SIZE + 10] = {0};
  gtp_frame_header_put(hdr, GTP_FR_BATCH, 1000);
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 0);
  gtp_frame f;
  size_t used;
  assert_int_equal(gtp_frame_decoder_feed(&d, hdr, sizeof hdr, &used, &f), 0);
  assert_int_equal(gtp_frame_decoder_buffered(&d), sizeof hdr);
  gtp_frame_decoder_fini(&d); /* LeakSanitizer checks the rest */
  assert_null(d.buf);
  assert_int_equal(gtp_frame_decoder_buffered(&d), 0);
}

static void test_frame_decoder__random_streams_never_crash(void **s) {
  (void)s;
  uint8_t buf[2048];
  int frames = 0, errors = 0;
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = (size_t)(rnd() % sizeof buf);
    for (size_t i = 0; i < n; i++)
      buf[i] = (uint8_t)rnd();
    /* Small length bytes now and then, so some frames complete. */
    for (size_t i = 0; i + 4 < n; i += 1 + (size_t)(rnd() % 64)) {
      buf[i] = (uint8_t)(rnd() % 64);
      buf[i + 1] = buf[i + 2] = buf[i + 3] = 0;
    }
    gtp_frame_decoder d;
    gtp_frame_decoder_init(&d, 1000);
    size_t at = 0;
    while (at < n) {
      size_t chunk = 1 + (size_t)(rnd() % 200);
      if (chunk > n - at)
        chunk = n - at;
      const uint8_t *p = buf + at;
      size_t left = chunk;
      int rc;
      do {
        size_t used;
        gtp_frame f;
        rc = gtp_frame_decoder_feed(&d, p, left, &used, &f);
        assert_true(used <= left);
        if (rc == 1) {
          frames++;
          (void)decode_any(f.type, f.payload, f.len);
        }
        p += used;
        left -= used;
      } while (rc == 1 && left > 0);
      if (rc < 0) {
        errors++;
        break;
      }
      at += chunk;
    }
    gtp_frame_decoder_fini(&d);
  }
  assert_true(frames > 0);
  assert_true(errors > 0);
}

/* The incremental decoder's state stays within its invariants whatever the
 * split of the input, and a decoder holding a buffer over its limit is
 * reported (the check can fail). */
static void test_frame_decoder__invariants_hold_for_every_split(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  uint8_t rec[300];
  memset(rec, 7, sizeof rec);
  assert_int_equal(gtp_frame_ack_encode(&b, 5), 0);
  assert_int_equal(gtp_frame_batch_encode(&b, 9, rec, sizeof rec), 0);
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  for (size_t step = 1; step <= b.len; step += 7) {
    gtp_frame_decoder d;
    gtp_frame_decoder_init(&d, 0);
    size_t off = 0;
    int frames = 0;
    while (off < b.len) {
      size_t n = b.len - off < step ? b.len - off : step, used;
      gtp_frame f;
      int rc = gtp_frame_decoder_feed(&d, b.data + off, n, &used, &f);
      assert_true(rc >= 0);
      assert_int_equal(gtp_frame_decoder_check_invariants(&d), 0);
      frames += rc;
      off += used;
    }
    assert_int_equal(frames, 3);
    gtp_frame_decoder_fini(&d);
  }
  gtp_frame_decoder d;
  gtp_frame_decoder_init(&d, 1024);
  d.hdr_have = GTP_FRAME_HEADER_SIZE;
  d.len = 4096; /* over max: never allocated by the decoder itself */
  d.buf = malloc(1);
  assert_int_equal(gtp_frame_decoder_check_invariants(&d), -1);
  gtp_frame_decoder_fini(&d);
  gtp_wbuf_fini(&b);
}

int main(void) {
  gtp_check_set_hook(gtp_check_abort); /* debug builds: stop at a break */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_decoder__invariants_hold_for_every_split),
      cmocka_unit_test(test_frame_name__known_and_unknown),
      cmocka_unit_test(test_frame_header_put__little_endian_length_then_type),
      cmocka_unit_test(test_frame_hello__max_fields_and_empty_token_round_trip),
      cmocka_unit_test(test_frame_hello__max_token_round_trip),
      cmocka_unit_test(
          test_frame_hello_encode__over_limits_is_toobig_appends_nothing),
      cmocka_unit_test(test_frame_encode__wbuf_limit_rolls_back_whole_frame),
      cmocka_unit_test(test_frame_welcome__round_trip_with_and_without_last),
      cmocka_unit_test(test_frame_batch__round_trip_borrows_records),
      cmocka_unit_test(test_frame_batch__max_payload_fits_one_more_is_toobig),
      cmocka_unit_test(test_frame_gen_end__round_trip),
      cmocka_unit_test(test_frame_ack_and_heartbeat__round_trip),
      cmocka_unit_test(test_frame_error__negative_code_positive_on_wire),
      cmocka_unit_test(test_frame_goodbye__zero_and_negative_codes_round_trip),
      cmocka_unit_test(test_frame_hello_decode__bad_magic_is_magic),
      cmocka_unit_test(test_frame_hello_decode__over_limits_are_toobig),
      cmocka_unit_test(test_frame_decode__trailing_garbage_is_corrupt),
      cmocka_unit_test(test_frame_decode__every_truncation_is_an_error),
      cmocka_unit_test(test_frame_decode__bad_flags_and_codes_are_corrupt),
      cmocka_unit_test(
          test_frame_batch_decode__empty_or_framing_records_rejected),
      cmocka_unit_test(test_frame_decode__random_bytes_never_crash),
      cmocka_unit_test(test_frame_decoder__whole_input_is_zero_copy),
      cmocka_unit_test(test_frame_decoder__split_at_every_byte_boundary),
      cmocka_unit_test(test_frame_decoder__one_byte_at_a_time),
      cmocka_unit_test(test_frame_decoder__random_chunkings),
      cmocka_unit_test(
          test_frame_decoder__split_payload_buffers_exactly_and_frees),
      cmocka_unit_test(
          test_frame_decoder__oversized_length_is_toobig_nothing_buffered),
      cmocka_unit_test(test_frame_decoder__error_is_sticky),
      cmocka_unit_test(test_frame_decoder__fini_frees_partial_frame),
      cmocka_unit_test(test_frame_decoder__random_streams_never_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
