/* test_frame_hello.c: proto/frame.c's HELLO in protocol version 2 (the
 * session key, its layout chosen by max_version), the text checks of
 * identity strings, and PROTOCOL.md's worked example byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"
#include "varint.h"

#define S(lit) ((gtp_str){(lit), sizeof(lit) - 1})

/* The HELLO of PROTOCOL.md section 13. */
static void example_hello(gtp_hello *h) {
  memset(h, 0, sizeof *h);
  h->min_version = 2;
  h->max_version = 2;
  for (int i = 0; i < 16; i++) {
    h->session[i] = (uint8_t)(0x10 + i);
    h->session_key[i] = (uint8_t)(0xa0 + i);
  }
  h->service = S("api");
  h->host = S("h1");
  h->pid = 300;
  h->process_start_ns = 0;
  h->agent_version = S("0.1.0");
  h->ntags = 1;
  h->tags[0].key = S("env");
  h->tags[0].value = S("prod");
  h->token = S("tk");
}

static size_t unhex(const char *hex, uint8_t *out) {
  size_t n = 0;
  for (const char *p = hex; *p;) {
    if (*p == ' ' || *p == '\n') {
      p++;
      continue;
    }
    unsigned v;
    assert_int_equal(sscanf(p, "%2x", &v), 1);
    out[n++] = (uint8_t)v;
    p += 2;
  }
  return n;
}

static void test_frame_hello__worked_example_matches_protocol_md(void **st) {
  (void)st;
  /* Every frame of PROTOCOL.md section 13, as the encoders write them. If
   * this fails, the document or the encoder changed: fix the other. */
  static const char *want =
      "43 00 00 00 01  47 54 48 4c  02 02"
      " 10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f"
      " a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 aa ab ac ad ae af"
      " 03 61 70 69  02 68 31  ac 02  00  05 30 2e 31 2e 30"
      " 01 03 65 6e 76 04 70 72 6f 64  02 74 6b"
      " 0a 00 00 00 02  02 01 29 e0 d4 03 80 80 80 20"
      " 09 00 00 00 03  2a  06 06 01 02 03 04 05 06"
      " 0c 00 00 00 04  2a 01 00 08 44 33 22 11 00 00 00 00"
      " 01 00 00 00 05  2a"
      " 00 00 00 00 06"
      " 08 00 00 00 07  df 36 01 2b 03 62 61 64"
      " 08 00 00 00 07  ed 36 01 2c 03 64 69 66"
      " 05 00 00 00 08  00 03 62 79 65";
  uint8_t exp[512];
  size_t n = unhex(want, exp);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  static gtp_hello h;
  example_hello(&h);
  assert_int_equal(gtp_frame_hello_encode(&b, &h), 0);
  gtp_welcome w = {2, 1, 41, 60000, 64u << 20};
  assert_int_equal(gtp_frame_welcome_encode(&b, &w), 0);
  const uint8_t clock_rec[] = {6, 6, 1, 2, 3, 4, 5, 6};
  assert_int_equal(gtp_frame_batch_encode(&b, 42, clock_rec, sizeof clock_rec),
                   0);
  gtp_gen_end e = {42, 1, 0, 8, 0x11223344, 0, 0, 0, 0};
  assert_int_equal(gtp_frame_gen_end_encode(&b, &e), 0);
  assert_int_equal(gtp_frame_ack_encode(&b, 42), 0);
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  assert_int_equal(gtp_frame_error_encode(&b, GTP_E_MANIFEST, 1, 43, "bad"), 0);
  assert_int_equal(gtp_frame_error_encode(&b, GTP_E_CONFLICT, 1, 44, "dif"),
                   0);
  assert_int_equal(gtp_frame_goodbye_encode(&b, 0, "bye"), 0);
  assert_int_equal(b.len, n);
  assert_memory_equal(b.data, exp, n);

  /* And the HELLO decodes back to the same fields, key included. */
  static gtp_hello out;
  assert_int_equal(gtp_frame_hello_decode(exp + 5, 0x43, &out), 0);
  assert_memory_equal(out.session_key, h.session_key, 16);
  assert_memory_equal(out.session, h.session, 16);
  assert_int_equal(out.max_version, 2);
  assert_null(out.bad_field);
  gtp_wbuf_fini(&b);
}

/* Encodes then returns the payload of h's HELLO in b (header skipped). */
static const uint8_t *encode(gtp_wbuf *b, const gtp_hello *h, size_t *len) {
  gtp_wbuf_reset(b);
  assert_int_equal(gtp_frame_hello_encode(b, h), 0);
  *len = b->len - GTP_FRAME_HEADER_SIZE;
  return b->data + GTP_FRAME_HEADER_SIZE;
}

static void test_frame_hello__layout_follows_max_version(void **st) {
  (void)st;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  static gtp_hello h, out;
  size_t n1, n2;
  example_hello(&h);
  h.min_version = h.max_version = 1;
  encode(&b, &h, &n1);
  /* Version 1: no key on the wire; it decodes as zeros. */
  const uint8_t *p = encode(&b, &h, &n1);
  assert_int_equal(gtp_frame_hello_decode(p, n1, &out), 0);
  uint8_t zero[16] = {0};
  assert_memory_equal(out.session_key, zero, 16);
  /* A range reaching 2 carries the key, 16 bytes longer. */
  h.min_version = 1;
  h.max_version = 3;
  p = encode(&b, &h, &n2);
  assert_int_equal(n2, n1 + 16);
  assert_int_equal(gtp_frame_hello_decode(p, n2, &out), 0);
  assert_memory_equal(out.session_key, h.session_key, 16);
  /* Cut inside the key: TRUNC, never a read past the end. */
  uint8_t cut[64];
  memcpy(cut, p, 4 + 2 + 16 + 7);
  assert_int_equal(gtp_frame_hello_decode(cut, 4 + 2 + 16 + 7, &out),
                   GTP_E_TRUNC);
  gtp_wbuf_fini(&b);
}

/* Decodes h with one text field replaced by bytes[0..n). */
static int decode_with(const char *field, const char *bytes, size_t n,
                       const char **bad) {
  static gtp_hello h, out;
  example_hello(&h);
  gtp_str v = {bytes, n};
  if (strcmp(field, "service") == 0)
    h.service = v;
  else if (strcmp(field, "host") == 0)
    h.host = v;
  else if (strcmp(field, "agent_version") == 0)
    h.agent_version = v;
  else if (strcmp(field, "tag key") == 0)
    h.tags[0].key = v;
  else
    h.tags[0].value = v;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  size_t len;
  const uint8_t *p = encode(&b, &h, &len);
  int rc = gtp_frame_hello_decode(p, len, &out);
  *bad = out.bad_field;
  gtp_wbuf_fini(&b);
  return rc;
}

static void test_frame_hello_decode__nul_in_any_identity_is_corrupt(void **st) {
  (void)st;
  const char *fields[] = {"service", "host", "agent_version", "tag key",
                          "tag value"};
  for (size_t i = 0; i < 5; i++) {
    const char *bad = NULL;
    /* "victim\0x" must never become "victim". */
    assert_int_equal(decode_with(fields[i], "victim\0x", 8, &bad),
                     GTP_E_CORRUPT);
    assert_non_null(bad);
    assert_string_equal(bad, fields[i]);
  }
}

static void test_frame_hello_decode__invalid_utf8_is_corrupt(void **st) {
  (void)st;
  static const struct {
    const char *b;
    size_t n;
  } bad[] = {
      {"\x80", 1},             /* lone continuation byte */
      {"a\xc3", 2},            /* sequence cut at the end */
      {"\xc3(", 2},            /* lead without continuation */
      {"\xc0\xaf", 2},         /* overlong '/' */
      {"\xe0\x80\xaf", 3},     /* overlong, 3 bytes */
      {"\xed\xa0\x80", 3},     /* UTF-16 surrogate */
      {"\xf4\x90\x80\x80", 4}, /* above U+10FFFF */
      {"\xf8\x88\x80\x80\x80", 5},
      {"\xff", 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *f = NULL;
    assert_int_equal(decode_with("host", bad[i].b, bad[i].n, &f),
                     GTP_E_CORRUPT);
    assert_string_equal(f, "host");
    assert_int_equal(decode_with("tag value", bad[i].b, bad[i].n, &f),
                     GTP_E_CORRUPT);
  }
}

static void test_frame_hello_decode__valid_utf8_passes(void **st) {
  (void)st;
  const char *f = "x";
  /* 2, 3 and 4 byte forms, the highest code point, and empty. */
  const char *ok = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e \xf4\x8f\xbf\xbf";
  assert_int_equal(decode_with("service", ok, strlen(ok), &f), 0);
  assert_null(f);
  assert_int_equal(decode_with("tag value", "", 0, &f), 0);
  assert_int_equal(gtp_frame_text_ok(ok, strlen(ok)), 1);
  assert_int_equal(gtp_frame_text_ok("a\0b", 3), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_hello__worked_example_matches_protocol_md),
      cmocka_unit_test(test_frame_hello__layout_follows_max_version),
      cmocka_unit_test(test_frame_hello_decode__nul_in_any_identity_is_corrupt),
      cmocka_unit_test(test_frame_hello_decode__invalid_utf8_is_corrupt),
      cmocka_unit_test(test_frame_hello_decode__valid_utf8_passes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
