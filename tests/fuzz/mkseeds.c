/* mkseeds.c: writes the fuzz seed corpus with the real writer APIs, so seeds
 * follow the format as it is now and no binary seed is committed.
 *
 *   mkseeds FRAME_DIR TRACE_DIR
 *
 * gtp_fuzz_seeds() is also linked into fuzz_replay (make check), which takes
 * the seeds from memory; build with GTP_MKSEEDS_NO_MAIN for that. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "frame.h"
#include "fuzz.h"

#define TRY(expr)                                                              \
  do {                                                                         \
    int rc_ = (expr);                                                          \
    if (rc_ < 0) {                                                             \
      fprintf(stderr, "mkseeds: %s: %s\n", #expr, gtp_strerror(rc_));          \
      return rc_;                                                              \
    }                                                                          \
  } while (0)

static gtp_str S(const char *s) {
  gtp_str r = {s, strlen(s)};
  return r;
}

/* One thread's batch with every event kind, ids pointing at the tables
 * body_tables() writes. */
static int put_events(gtp_wbuf *b, uint64_t gen, uint64_t thread,
                      uint64_t base) {
  uint8_t ev_buf[1024];
  size_t n = 0;
  uint64_t prev = base, nev = 0;
  static const char msg[] = "request done status=200";
  const gtp_event evs[] = {
      {GTP_EV_THREAD_NAME, base + 1, {6, 0, 0}, NULL, 0},
      {GTP_EV_REGION_BEGIN, base + 10, {1, 0, 0}, NULL, 0},
      {GTP_EV_INSTANT, base + 12, {2, 0, 0}, NULL, 0},
      {GTP_EV_COUNTER, base + 15, {3, (uint64_t)(int64_t)-42, 0}, NULL, 0},
      {GTP_EV_LOG, base + 20, {4, 0, 0}, (const uint8_t *)msg, sizeof msg - 1},
      {GTP_EV_TASK_BEGIN, base + 30, {7, 0, 5}, NULL, 0},
      {GTP_EV_REGION_BEGIN_STACK, base + 31, {1, 1, 0}, NULL, 0},
      {GTP_EV_INSTANT_STACK, base + 35, {2, 2, 0}, NULL, 0},
      {GTP_EV_LOG_STACK, base + 36, {4, 1, 0}, (const uint8_t *)msg, 7},
      {GTP_EV_REGION_END, base + 40, {0, 0, 0}, NULL, 0},
      {GTP_EV_TASK_END, base + 1000, {7, 0, 0}, NULL, 0},
      {GTP_EV_REGION_END, base + 100000, {0, 0, 0}, NULL, 0},
      {GTP_EV_LOST, base + 100001, {3, 0, 0}, NULL, 0},
  };
  for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
    int w = gtp_event_encode(ev_buf + n, &evs[i], prev);
    TRY(w);
    n += (size_t)w;
    prev = evs[i].ticks;
    nev++;
  }
  return gtp_put_batch(b, gen, thread, base, nev, ev_buf, n);
}

/* The body records of one generation: two batches and every table. */
static int put_body(gtp_wbuf *b, uint64_t gen) {
  TRY(put_events(b, gen, 101, 5000));
  static const uint64_t sids[] = {1, 2, 3, 4, 5, 6};
  gtp_str strs[6] = {S("handle_request"), S("cache_miss"), S("queue_depth"),
                     S("http"),           S("checkout"),   S("worker-1")};
  TRY(gtp_put_strings(b, sids, strs, 6));
  static const uint64_t pc1[] = {0x401000, 0x401234, 0x7f0000001000};
  static const uint64_t pc2[] = {0x402000};
  const uint64_t *pcs[] = {pc1, pc2};
  static const uint64_t kids[] = {1, 2};
  static const size_t depths[] = {3, 1};
  TRY(gtp_put_stacks(b, kids, pcs, depths, 2));
  static const uint8_t build_id[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4};
  gtp_module mods[2] = {
      {S("/usr/bin/demo"), 0x400000, 0x10000, build_id, sizeof build_id},
      {S("/lib/x86_64-linux-gnu/libc.so.6"), 0x7f0000000000, 0x200000, NULL,
       0}};
  TRY(gtp_put_modules(b, mods, 2));
  gtp_clock c = {5000,   1000000, 1700000000000000000ull,
                 105000, 1100000, 1700000000000100000ull};
  TRY(gtp_put_clock(b, &c));
  TRY(put_events(b, gen, 102, 5500));
  return b->err;
}

static void fill_start(gtp_gen_start *s, uint64_t gen, uint8_t session_byte) {
  memset(s, 0, sizeof *s);
  memset(s->session, session_byte, 16);
  s->gen = gen;
  s->service = S("checkout");
  s->host = S("web-3");
  s->pid = 4242;
  s->process_start_ns = 1699999999000000000ull;
  s->agent_version = S("0.1.0");
  s->ntags = 2;
  s->tags[0].key = S("env");
  s->tags[0].value = S("prod");
  s->tags[1].key = S("zone");
  s->tags[1].value = S("eu-1");
}

/* GEN_START + body + GEN_END with a correct manifest. */
static int put_generation(gtp_wbuf *b, uint64_t gen, uint8_t session_byte,
                          int full) {
  gtp_gen_start s;
  fill_start(&s, gen, session_byte);
  TRY(gtp_put_gen_start(b, &s));
  size_t body_at = b->len;
  if (full) {
    TRY(put_body(b, gen));
  } else {
    gtp_clock c = {1, 2, 3, 4, 5, 6};
    TRY(gtp_put_clock(b, &c));
  }
  gtp_gen_end e = {gen, 0, 0, 0, 0, 0, 3, 1, 0};
  TRY(b->err);
  TRY(gtp_manifest_compute(b->data + body_at, b->len - body_at, &e));
  return gtp_put_gen_end(b, &e);
}

static int trace_seeds(gtp_seed_emit emit, void *ctx) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int rc;

  /* A file of two sessions. */
  if ((rc = gtp_put_file_header(&b)) < 0 ||
      (rc = put_generation(&b, 7, 0xAB, 1)) < 0 ||
      (rc = put_generation(&b, 1, 0xCD, 0)) < 0)
    goto out;
  emit(GTP_SEED_TRACE, "file-two-sessions", b.data, b.len, ctx);

  /* Two files joined with cat: a second header in the middle. */
  if ((rc = gtp_put_file_header(&b)) < 0 ||
      (rc = put_generation(&b, 8, 0xAB, 1)) < 0)
    goto out;
  emit(GTP_SEED_TRACE, "file-catted", b.data, b.len, ctx);

  /* A bare generation, as the daemon stores it. */
  gtp_wbuf_reset(&b);
  if ((rc = put_generation(&b, 3, 0x11, 1)) < 0)
    goto out;
  emit(GTP_SEED_TRACE, "generation", b.data, b.len, ctx);

  /* An empty file and a minimal one. */
  gtp_wbuf_reset(&b);
  if ((rc = gtp_put_file_header(&b)) < 0)
    goto out;
  emit(GTP_SEED_TRACE, "file-empty", b.data, b.len, ctx);
  if ((rc = put_generation(&b, 0, 0x00, 0)) < 0)
    goto out;
  emit(GTP_SEED_TRACE, "file-minimal", b.data, b.len, ctx);
  rc = 0;
out:
  gtp_wbuf_fini(&b);
  return rc;
}

/* Emits the frame just appended at [at, b->len) on its own. */
static void emit_last(gtp_seed_emit emit, void *ctx, const char *name,
                      const gtp_wbuf *b, size_t at) {
  emit(GTP_SEED_FRAME, name, b->data + at, b->len - at, ctx);
}

static int frame_seeds(gtp_seed_emit emit, void *ctx) {
  gtp_wbuf b, body;
  gtp_wbuf_init(&b, 0);
  gtp_wbuf_init(&body, 0);
  int rc = 0;
  size_t at;
  static gtp_hello h;
  memset(&h, 0, sizeof h);
  h.min_version = GTP_PROTO_VERSION_MIN;
  h.max_version = GTP_PROTO_VERSION;
  memset(h.session, 0xAB, 16);
  memset(h.session_key, 0x5C, 16);
  h.service = S("checkout");
  h.host = S("web-3");
  h.pid = 4242;
  h.process_start_ns = 1699999999000000000ull;
  h.agent_version = S("0.1.0");
  h.ntags = 2;
  h.tags[0].key = S("env");
  h.tags[0].value = S("prod");
  h.tags[1].key = S("zone");
  h.tags[1].value = S("eu-1");
  h.token = S("s3cret");

  /* A whole session as the daemon receives it (the daemon's WELCOME, ACK
   * and ERROR are in the same stream so one seed covers every type). */
  at = b.len;
  if ((rc = gtp_frame_hello_encode(&b, &h)) < 0)
    goto out;
  emit_last(emit, ctx, "hello", &b, at);
  gtp_welcome w = {GTP_PROTO_VERSION, 1, 6, 30000, 64u << 20};
  at = b.len;
  if ((rc = gtp_frame_welcome_encode(&b, &w)) < 0)
    goto out;
  emit_last(emit, ctx, "welcome", &b, at);
  if ((rc = put_body(&body, 7)) < 0)
    goto out;
  /* Two BATCH frames: the first batch record, then the rest. */
  gtp_record first;
  if ((rc = gtp_record_parse(body.data, body.len, &first)) < 0)
    goto out;
  at = b.len;
  if ((rc = gtp_frame_batch_encode(&b, 7, body.data, first.size)) < 0 ||
      (rc = gtp_frame_batch_encode(&b, 7, body.data + first.size,
                                   body.len - first.size)) < 0)
    goto out;
  emit_last(emit, ctx, "batches", &b, at);
  gtp_gen_end e = {7, 0, 0, 0, 0, 0, 3, 1, 0};
  if ((rc = gtp_manifest_compute(body.data, body.len, &e)) < 0)
    goto out;
  at = b.len;
  if ((rc = gtp_frame_gen_end_encode(&b, &e)) < 0)
    goto out;
  emit_last(emit, ctx, "gen-end", &b, at);
  at = b.len;
  if ((rc = gtp_frame_heartbeat_encode(&b)) < 0 ||
      (rc = gtp_frame_ack_encode(&b, 7)) < 0)
    goto out;
  emit_last(emit, ctx, "heartbeat-ack", &b, at);
  at = b.len;
  if ((rc = gtp_frame_error_encode(&b, GTP_E_MANIFEST, 1, 8,
                                   "generation 8: manifest mismatch")) < 0)
    goto out;
  emit_last(emit, ctx, "error", &b, at);
  at = b.len;
  if ((rc = gtp_frame_goodbye_encode(&b, 0, "agent stopping")) < 0)
    goto out;
  emit_last(emit, ctx, "goodbye", &b, at);
  emit(GTP_SEED_FRAME, "session", b.data, b.len, ctx);

  /* A HELLO at its limits. */
  static char big[GTP_IDENT_STR_MAX];
  memset(big, 'x', sizeof big);
  h.ntags = GTP_TAGS_MAX;
  for (int i = 0; i < GTP_TAGS_MAX; i++) {
    h.tags[i].key = (gtp_str){big, (size_t)i + 1};
    h.tags[i].value = (gtp_str){big, (size_t)i * 8};
  }
  h.host = (gtp_str){big, GTP_IDENT_STR_MAX};
  h.token = (gtp_str){big, GTP_TOKEN_MAX};
  gtp_wbuf_reset(&b);
  if ((rc = gtp_frame_hello_encode(&b, &h)) < 0)
    goto out;
  emit(GTP_SEED_FRAME, "hello-max", b.data, b.len, ctx);

  /* Version 1 layout (no key) and identities at the UTF-8 edge, so the
   * fuzzer starts next to both text refusals and both layouts. */
  h.min_version = h.max_version = 1;
  gtp_wbuf_reset(&b);
  if ((rc = gtp_frame_hello_encode(&b, &h)) < 0)
    goto out;
  emit(GTP_SEED_FRAME, "hello-v1", b.data, b.len, ctx);
  h.min_version = h.max_version = GTP_PROTO_VERSION;
  h.ntags = 1;
  h.tags[0].key = S("caf\xc3\xa9");
  h.tags[0].value = S("\xf0\x9d\x84\x9e\xf4\x8f\xbf\xbf");
  h.host = (gtp_str){"victim\0x", 8};
  h.token = S("");
  gtp_wbuf_reset(&b);
  if ((rc = gtp_frame_hello_encode(&b, &h)) < 0)
    goto out;
  emit(GTP_SEED_FRAME, "hello-nul-utf8", b.data, b.len, ctx);
  rc = 0;
out:
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&b);
  return rc;
}

int gtp_fuzz_seeds(gtp_seed_emit emit, void *ctx) {
  int rc = frame_seeds(emit, ctx);
  return rc < 0 ? rc : trace_seeds(emit, ctx);
}

#ifndef GTP_MKSEEDS_NO_MAIN
struct dirs {
  const char *dir[2];
  int failed;
};

static void write_seed(int kind, const char *name, const uint8_t *p, size_t n,
                       void *ctx) {
  struct dirs *d = ctx;
  char path[4096];
  snprintf(path, sizeof path, "%s/seed-%s", d->dir[kind], name);
  FILE *f = fopen(path, "wb");
  int ok = f != NULL;
  if (ok) {
    ok = fwrite(p, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
  }
  if (!ok) {
    fprintf(stderr, "mkseeds: %s: %s\n", path, strerror(errno));
    d->failed = 1;
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mkseeds FRAME_DIR TRACE_DIR\n");
    return 2;
  }
  struct dirs d = {{argv[1], argv[2]}, 0};
  if (gtp_fuzz_seeds(write_seed, &d) < 0 || d.failed)
    return 1;
  return 0;
}
#endif
