/* test_protocol_md.c: proto/PROTOCOL.md's worked example (section 13) is
 * what proto/frame.c encodes, byte for byte. The bytes are read from the
 * document itself at test time, so neither the document nor the encoder
 * can change without the other (as test_format.c does for FORMAT.md). */
#include "config.h"

#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frame.h"

#define MAX_FRAMES 16

typedef struct doc_frame {
  char name[16];
  uint8_t bytes[256];
  size_t len;
} doc_frame;

static doc_frame frames[MAX_FRAMES];
static size_t nframes;

static int hexbyte(const char *t, uint8_t *out) {
  if (strlen(t) != 2 || !isxdigit((unsigned char)t[0]) ||
      !isxdigit((unsigned char)t[1]))
    return 0;
  *out = (uint8_t)strtoul(t, NULL, 16);
  return 1;
}

/* Appends the hex bytes at the start of one example line's byte column
 * ("10 11 12 ... 1f" spells a run); the description after them is
 * skipped. */
static void take_bytes(doc_frame *f, char *col) {
  int prev = -1, run = 0;
  for (char *tok = strtok(col, " "); tok != NULL; tok = strtok(NULL, " ")) {
    uint8_t v;
    if (strcmp(tok, "...") == 0 && prev >= 0) {
      run = 1;
      continue;
    }
    if (!hexbyte(tok, &v))
      break;
    if (run) {
      for (int x = prev + 1; x < v; x++)
        f->bytes[f->len++] = (uint8_t)x;
      run = 0;
    }
    assert_true(f->len < sizeof f->bytes);
    f->bytes[f->len++] = v;
    prev = v;
  }
}

static int read_example(void **state) {
  (void)state;
  const char *src = getenv("top_srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/proto/PROTOCOL.md", src ? src : ".");
  FILE *fp = fopen(path, "r");
  if (fp == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  char line[512];
  int in_section = 0, in_block = 0;
  doc_frame *cur = NULL;
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, "## ", 3) == 0)
      in_section = strstr(line, "Worked example") != NULL;
    if (!in_section)
      continue;
    if (strncmp(line, "```", 3) == 0) {
      if (in_block)
        break;
      in_block = 1;
      continue;
    }
    if (!in_block)
      continue;
    line[strcspn(line, "\n")] = '\0';
    /* "NAME      bytes   description" or "          bytes   description":
     * the byte column starts at column 10; two spaces end it. */
    if (line[0] != ' ' && line[0] != '\0') {
      if (nframes == MAX_FRAMES)
        break;
      cur = &frames[nframes++];
      sscanf(line, "%15s", cur->name);
    }
    if (cur == NULL || strlen(line) <= 10)
      continue;
    char col[512];
    snprintf(col, sizeof col, "%s", line + 10);
    char *desc = strstr(col, "   "); /* bytes, then 3+ spaces, then words */
    if (desc != NULL)
      *desc = '\0';
    take_bytes(cur, col);
  }
  fclose(fp);
  return nframes > 0 ? 0 : -1;
}

static const doc_frame *doc(const char *name) {
  for (size_t i = 0; i < nframes; i++)
    if (strcmp(frames[i].name, name) == 0)
      return &frames[i];
  fail_msg("PROTOCOL.md's example has no %s frame", name);
  return NULL;
}

static void expect(const char *name, gtp_wbuf *b) {
  const doc_frame *f = doc(name);
  assert_int_equal(b->err, 0);
  if (b->len != f->len || memcmp(b->data, f->bytes, f->len) != 0) {
    fprintf(stderr, "%s: encoder %zu bytes, document %zu bytes\n", name, b->len,
            f->len);
    for (size_t i = 0; i < b->len; i++)
      fprintf(stderr, "%02x%s", b->data[i], i + 1 < b->len ? " " : "\n");
    fail_msg("%s differs from PROTOCOL.md section 13", name);
  }
  gtp_wbuf_reset(b);
}

static void
test_protocol_md__worked_example_is_what_frame_c_encodes(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);

  gtp_hello h;
  memset(&h, 0, sizeof h);
  h.min_version = h.max_version = 1;
  for (int i = 0; i < 16; i++)
    h.session[i] = (uint8_t)(0x10 + i);
  h.service = (gtp_str){"api", 3};
  h.host = (gtp_str){"h1", 2};
  h.pid = 300;
  h.agent_version = (gtp_str){"0.1.0", 5};
  h.ntags = 1;
  h.tags[0].key = (gtp_str){"env", 3};
  h.tags[0].value = (gtp_str){"prod", 4};
  h.token = (gtp_str){"tk", 2};
  assert_int_equal(gtp_frame_hello_encode(&b, &h), 0);
  expect("HELLO", &b);

  gtp_welcome w = {1, 1, 41, 60000, 64u << 20};
  assert_int_equal(gtp_frame_welcome_encode(&b, &w), 0);
  expect("WELCOME", &b);

  static const uint8_t clock_rec[] = {6, 6, 1, 2, 3, 4, 5, 6};
  assert_int_equal(gtp_frame_batch_encode(&b, 42, clock_rec, sizeof clock_rec),
                   0);
  expect("BATCH", &b);

  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  e.gen = 42;
  e.records = 1;
  e.bytes = 8;
  e.crc = 0x11223344u;
  assert_int_equal(gtp_frame_gen_end_encode(&b, &e), 0);
  expect("GEN_END", &b);

  assert_int_equal(gtp_frame_ack_encode(&b, 42), 0);
  expect("ACK", &b);
  assert_int_equal(gtp_frame_heartbeat_encode(&b), 0);
  expect("HEARTBEAT", &b);
  assert_int_equal(gtp_frame_error_encode(&b, GTP_E_MANIFEST, 1, 43, "bad"), 0);
  expect("ERROR", &b);
  assert_int_equal(gtp_frame_goodbye_encode(&b, 0, "bye"), 0);
  expect("GOODBYE", &b);
  gtp_wbuf_fini(&b);
}

/* The example decodes back, too: HELLO's fields are what it says. */
static void test_protocol_md__example_hello_decodes(void **state) {
  (void)state;
  const doc_frame *f = doc("HELLO");
  gtp_hello h;
  assert_true(f->len > GTP_FRAME_HEADER_SIZE);
  assert_int_equal(gtp_frame_hello_decode(f->bytes + GTP_FRAME_HEADER_SIZE,
                                          f->len - GTP_FRAME_HEADER_SIZE, &h),
                   0);
  assert_int_equal(h.pid, 300);
  assert_int_equal(h.ntags, 1);
  assert_int_equal(h.session[15], 0x1f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_protocol_md__worked_example_is_what_frame_c_encodes),
      cmocka_unit_test(test_protocol_md__example_hello_decodes),
  };
  return cmocka_run_group_tests(tests, read_example, NULL);
}
