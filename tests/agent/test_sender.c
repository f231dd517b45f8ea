/* test_sender.c: reconnect backoff, address parsing, and a generation
 * streamed to a real socket: the same bytes as the frame encoders would
 * write, handed to the kernel in bounded steps. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "sender.h"

static void test_backoff__doubles_with_jitter_up_to_max(void **state) {
  (void)state;
  uint64_t cur = 100, rng = 12345;
  uint64_t prev_cur = cur;
  int saw_jitter = 0;
  for (int i = 0; i < 20; i++) {
    uint64_t d = gt__backoff_next(&cur, 10000, &rng);
    assert_true(d >= prev_cur / 2 && d <= prev_cur);
    if (d != prev_cur)
      saw_jitter = 1;
    assert_true(cur == (prev_cur * 2 > 10000 ? 10000 : prev_cur * 2));
    prev_cur = cur;
  }
  assert_int_equal(cur, 10000);
  assert_true(saw_jitter);
}

static void nolog(int level, const char *fmt, ...) {
  (void)level;
  (void)fmt;
}

static void test_sender__parses_address_list(void **state) {
  (void)state;
  gt__ident id;
  memset(&id, 0, sizeof id);
  gt__spool sp;
  gt__spool_init(&sp, 1 << 20);
  gt__sender s;
  assert_int_equal(
      gt__sender_init(&s, "127.0.0.1:7170,[::1]:7171,db:1", &id, &sp, nolog),
      0);
  assert_int_equal(s.naddrs, 3);
  assert_string_equal(s.hosts[1], "::1");
  assert_string_equal(s.ports[1], "7171");
  assert_string_equal(s.hosts[2], "db");
  gt__sender_fini(&s);
  assert_int_equal(gt__sender_init(&s, "nohost", &id, &sp, nolog), -EINVAL);
  assert_int_equal(gt__sender_init(&s, "", &id, &sp, nolog), -EINVAL);
  assert_int_equal(gt__sender_init(&s, "h:", &id, &sp, nolog), -EINVAL);
  gt__spool_fini(&sp);
}

/* The daemon's side: reads every byte the sender writes, as fast as it
 * can, until GEN_END; BATCH records are gathered in order. */
typedef struct peer {
  int fd;
  uint64_t gen;
  gtp_wbuf records;
  int gen_end, bad;
} peer;

static void *peer_read(void *arg) {
  peer *p = arg;
  gtp_frame_decoder dec;
  gtp_frame_decoder_init(&dec, GTP_FRAME_MAX);
  static uint8_t buf[1 << 16];
  while (!p->gen_end && !p->bad) {
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n <= 0)
      break;
    const uint8_t *q = buf;
    size_t left = (size_t)n;
    while (left > 0 && !p->bad) {
      size_t used = 0;
      gtp_frame f;
      int rc = gtp_frame_decoder_feed(&dec, q, left, &used, &f);
      if (rc < 0)
        p->bad = 1;
      q += used;
      left -= used;
      if (rc != 1)
        continue;
      uint64_t gen;
      const uint8_t *rec;
      size_t rlen;
      if (f.type == GTP_FR_BATCH) {
        if (gtp_frame_batch_decode(f.payload, f.len, &gen, &rec, &rlen) != 0 ||
            gen != p->gen)
          p->bad = 1;
        else
          gtp_wbuf_put(&p->records, rec, rlen);
      } else if (f.type == GTP_FR_GEN_END) {
        p->gen_end = 1;
      } else if (f.type != GTP_FR_HEARTBEAT) {
        p->bad = 1;
      }
    }
  }
  gtp_frame_decoder_fini(&dec);
  return NULL;
}

/* A body of EVENTS records (their events arbitrary bytes: the sender only
 * frames records), as seal.c's build_gen lays them out. */
static gt__gen *big_gen(uint64_t gen, size_t records) {
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  static uint8_t ev[60000];
  for (size_t i = 0; i < sizeof ev; i++)
    ev[i] = (uint8_t)(i * 131 + 7);
  for (size_t r = 0; r < records; r++) {
    ev[0] = (uint8_t)r;
    assert_int_equal(gtp_put_batch(&w, gen, 1000 + r, r, 1, ev, sizeof ev), 0);
  }
  gt__gen *g = calloc(1, sizeof *g);
  assert_non_null(g);
  g->gen = gen;
  g->body = w.data;
  g->body_len = w.len;
  assert_int_equal(gtp_manifest_compute(w.data, w.len, &g->end), 0);
  g->end.gen = gen;
  g->events = records;
  return g;
}

static int wait_fd(int fd, short ev) {
  struct pollfd p = {.fd = fd, .events = ev};
  return poll(&p, 1, 5000);
}

static void test_sender__streams_a_generation_unchanged_in_steps_of_about_1_mib(
    void **state) {
  (void)state;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(ls, 1), 0);
  assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &alen), 0);
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));

  gt__ident id;
  memset(&id, 0, sizeof id);
  id.service = (char *)"svc";
  id.host = (char *)"host";
  id.pid = 1;
  gt__spool sp;
  assert_int_equal(gt__spool_init(&sp, 64u << 20), 0);
  gt__gen *g = big_gen(7, 140); /* ~8 MiB, 33 frames of ~256 KiB */
  size_t body_len = g->body_len;
  uint8_t *want = malloc(body_len);
  assert_non_null(want);
  memcpy(want, g->body, body_len);
  gt__spool_add(&sp, g);
  gt__sender s;
  assert_int_equal(gt__sender_init(&s, addr, &id, &sp, nolog), 0);

  /* Connect, HELLO, WELCOME: the sender's own steps. */
  gt__sender_step(&s, 0, 0);
  assert_int_equal(s.state, GT_SEND_CONNECTING);
  assert_true(wait_fd(ls, POLLIN) > 0);
  int c = accept(ls, NULL, NULL);
  assert_true(c >= 0);
  assert_true(wait_fd(s.fd, POLLOUT) > 0);
  gt__sender_step(&s, 1, POLLOUT);
  assert_int_equal(s.state, GT_SEND_HELLO_SENT);
  gtp_wbuf wb;
  gtp_wbuf_init(&wb, 0);
  gtp_welcome w = {.version = GTP_PROTO_VERSION, .idle_timeout_ms = 60000};
  assert_int_equal(gtp_frame_welcome_encode(&wb, &w), 0);
  assert_int_equal(write(c, wb.data, wb.len), (ssize_t)wb.len);
  gtp_wbuf_fini(&wb);
  /* The HELLO stays unread in c's buffer; the peer skips it below. */
  uint8_t hello[4096];
  ssize_t hn = read(c, hello, sizeof hello);
  assert_true(hn > 0);
  assert_true(wait_fd(s.fd, POLLIN) > 0);

  peer p = {.fd = c, .gen = 7};
  gtp_wbuf_init(&p.records, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, peer_read, &p), 0);
  /* Each step hands at most ~1 MiB (plus the frame in progress) to the
   * kernel, then says there is more (POLLOUT); the reader drains as fast
   * as it can, so without the budget one step would send most of 8 MiB. */
  uint64_t most = s.bytes_sent;
  gt__sender_step(&s, 2, POLLIN | POLLOUT); /* WELCOME, then the first step */
  assert_int_equal(s.state, GT_SEND_STREAMING);
  most = s.bytes_sent - most;
  for (int i = 0; i < 100000 && !gt__sender_drained(&s); i++) {
    uint64_t before = s.bytes_sent;
    gt__sender_step(&s, 2, POLLOUT);
    uint64_t d = s.bytes_sent - before;
    most = d > most ? d : most;
    struct pollfd pf;
    gt__sender_poll(&s, 2, &pf);
    if (!gt__sender_drained(&s))
      assert_true(pf.events & POLLOUT);
    if (pf.fd >= 0)
      (void)poll(&pf, 1, 100);
  }
  assert_true(gt__sender_drained(&s));
  assert_int_equal(s.state, GT_SEND_STREAMING);
  assert_true(pthread_join(th, NULL) == 0);
  assert_false(p.bad);
  assert_true(p.gen_end);
  assert_int_equal(p.records.len, body_len);
  assert_memory_equal(p.records.data, want, body_len);
  assert_true(most > 0);
  assert_true(most <= (1u << 20) + (300u << 10));

  gtp_wbuf_fini(&p.records);
  free(want);
  gt__sender_close(&s);
  gt__sender_fini(&s);
  gt__spool_fini(&sp);
  close(c);
  close(ls);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backoff__doubles_with_jitter_up_to_max),
      cmocka_unit_test(test_sender__parses_address_list),
      cmocka_unit_test(
          test_sender__streams_a_generation_unchanged_in_steps_of_about_1_mib),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
