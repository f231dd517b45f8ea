/* test_http_bounds.c: the HTTP side of "trust and bounds" against a real
 * gentraced on real sockets: Chrome downloads of a generation that expands
 * a thousandfold stay in bounded memory (VmHWM of the daemon), downloads
 * past --http-max-downloads get 503 + Retry-After, parked feeds past
 * --http-max-long-polls never lock out other requests, a reader slower
 * than --http-send-timeout is cut, and a slow reader never holds size
 * retention back (the database stays within 1.5x --max-db-size while an
 * agent streams; the download ends early and says so).
 *
 * The agent is tests/daemon/client.c's wire client (exact bytes); HTTP is
 * a small raw-socket client with a streaming chunked decoder, so the test
 * itself never holds a download in memory.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "gtp_error.h"

#define SEC INT64_C(1000000000)

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

/* A spec whose generations are "now" (the daemon may refuse wall clocks
 * far from its own). */
static void spec_now(gtf_spec *s, unsigned n, uint64_t gen, int64_t t0) {
  gtf_spec_init(s, n, gen);
  s->service = "bounds";
  s->period_ns = 100000000; /* 100 ms */
  s->start_real_ns = (uint64_t)t0 + (gen - 1) * s->period_ns;
  s->start_mono_ns = 5000000000ull + (gen - 1) * s->period_ns;
  s->start_ticks = s->start_mono_ns / 4;
}

static void start(gtd *d, const char *const *args) {
  assert_int_equal(gtd_init(d), 0);
  int rc = gtd_start(d, args, NULL);
  if (rc < 0)
    fail_msg("gentraced did not start: %s", gtp_strerror(rc));
}

static void stop(gtd *d) {
  assert_int_equal(gtd_stop(d), 0);
  gtd_cleanup(d);
}

/* Sends one generation and waits for its ACK. */
static void send_gen(gtc *c, const gtc_gen *g) {
  assert_int_equal(gtc_send_gen(c, g), 0);
  uint64_t gen = 0;
  int code = 0;
  int rc = gtc_read_reply(c, &gen, &code, GTC_TIMEOUT_MS);
  if (rc != 1)
    fail_msg("no ACK for generation %" PRIu64 ": rc=%d code=%d", g->end.gen,
             rc, code);
}

/* --------------------------------------------------- streaming client */

typedef struct hc {
  int fd;
  int status;
  char head[4096];
  uint8_t buf[65536];
  size_t off, len;
  /* chunked decoding */
  uint64_t chunk_left;
  int state; /* 0 size line, 1 data, 2 CRLF after data, 3 done */
  int complete;
  uint64_t body; /* body bytes */
  char tail[64]; /* the last body bytes */
  size_t tail_len;
} hc;

/* Opens a GET (rcvbuf > 0: SO_RCVBUF first) and reads the status line and
 * headers within timeout_ms. 0, or -1 (after a timeout h->fd stays open:
 * the request may be parked). */
static int hc_open_t(hc *h, uint16_t port, const char *path, int rcvbuf,
                     int timeout_ms) {
  memset(h, 0, sizeof *h);
  gtc c;
  if (rcvbuf > 0) {
    /* gtc_connect connects at once; set the buffer on our own socket. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
      close(fd);
      return -1;
    }
    c.fd = fd;
  } else if (gtc_connect(&c, port) < 0) {
    return -1;
  }
  h->fd = c.fd;
  char req[1024];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Connection: close\r\n\r\n",
                   path);
  if (send(h->fd, req, (size_t)n, MSG_NOSIGNAL) != n)
    return -1;
  size_t hl = 0;
  int64_t deadline = mono_ms() + timeout_ms;
  while (mono_ms() < deadline) {
    struct pollfd pf = {h->fd, POLLIN, 0};
    if (poll(&pf, 1, 100) <= 0)
      continue;
    ssize_t r = recv(h->fd, h->buf + h->len, sizeof h->buf - h->len, 0);
    if (r <= 0)
      return -1;
    h->len += (size_t)r;
    uint8_t *e = memmem(h->buf, h->len, "\r\n\r\n", 4);
    if (!e)
      continue;
    hl = (size_t)(e - h->buf) + 4;
    if (hl >= sizeof h->head)
      return -1;
    memcpy(h->head, h->buf, hl);
    h->head[hl] = 0;
    h->off = hl;
    h->status = atoi(h->head + 9);
    return 0;
  }
  return -1;
}

static int hc_open(hc *h, uint16_t port, const char *path, int rcvbuf) {
  return hc_open_t(h, port, path, rcvbuf, 20000);
}

static int hc_header(const hc *h, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *l = strstr(h->head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
    const char *p = l + 2;
    if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      p += nl + 1;
      while (*p == ' ')
        p++;
      const char *e = strstr(p, "\r\n");
      size_t n = e ? (size_t)(e - p) : strlen(p);
      if (n >= cap)
        n = cap - 1;
      memcpy(out, p, n);
      out[n] = 0;
      return 1;
    }
  }
  return 0;
}

static void hc_body(hc *h, const uint8_t *p, size_t n) {
  h->body += n;
  if (n >= sizeof h->tail) {
    memcpy(h->tail, p + n - sizeof h->tail, sizeof h->tail);
    h->tail_len = sizeof h->tail;
  } else {
    size_t keep = h->tail_len + n > sizeof h->tail ? sizeof h->tail - n
                                                    : h->tail_len;
    memmove(h->tail, h->tail + h->tail_len - keep, keep);
    memcpy(h->tail + keep, p, n);
    h->tail_len = keep + n;
  }
}

/* Decodes what is buffered. */
static void hc_decode(hc *h) {
  while (h->off < h->len && h->state != 3) {
    if (h->state == 0 || h->state == 2) {
      uint8_t *nl = memchr(h->buf + h->off, '\n', h->len - h->off);
      if (!nl)
        break;
      if (h->state == 0) {
        h->chunk_left = strtoull((char *)h->buf + h->off, NULL, 16);
        h->state = h->chunk_left ? 1 : 3;
        if (h->state == 3)
          h->complete = 1;
      } else {
        h->state = 0;
      }
      h->off = (size_t)(nl - h->buf) + 1;
      continue;
    }
    size_t n = h->len - h->off;
    if (n > h->chunk_left)
      n = (size_t)h->chunk_left;
    hc_body(h, h->buf + h->off, n);
    h->off += n;
    h->chunk_left -= n;
    if (!h->chunk_left)
      h->state = 2;
  }
  memmove(h->buf, h->buf + h->off, h->len - h->off);
  h->len -= h->off;
  h->off = 0;
}

/* Reads up to `max` bytes (0 = to the end); 1 = more may come, 0 = EOF,
 * -1 = timeout. */
static int hc_pump(hc *h, size_t max, int timeout_ms) {
  hc_decode(h);
  size_t got = 0;
  int64_t deadline = mono_ms() + timeout_ms;
  while (max == 0 || got < max) {
    int64_t left = deadline - mono_ms();
    if (left <= 0)
      return -1;
    struct pollfd pf = {h->fd, POLLIN, 0};
    if (poll(&pf, 1, (int)left) <= 0)
      return -1;
    size_t room = sizeof h->buf - h->len;
    if (max && room > max - got)
      room = max - got;
    ssize_t r = recv(h->fd, h->buf + h->len, room, 0);
    if (r <= 0)
      return 0;
    h->len += (size_t)r;
    got += (size_t)r;
    hc_decode(h);
  }
  return 1;
}

static void hc_close(hc *h) {
  if (h->fd > 0)
    close(h->fd);
  h->fd = -1;
}

/* --------------------------------------------------------------- tests */

enum { NAME_LEN = 65535, EXP_EVENTS = 1000, NDL = 4 };

/* The expanding generation: ~64 MB of Chrome JSON from a few KB stored. */
static void put_expanding_gen(gtd *d) {
  gtc c;
  gtf_spec s;
  spec_now(&s, 1, 1, real_ns() - 5 * SEC);
  assert_int_equal(gtc_connect(&c, d->agent_port), 0);
  gtp_welcome w;
  assert_int_equal(gtc_hello(&c, &s, NULL, &w), 0);
  gtc_gen g;
  assert_int_equal(gtc_gen_build_long_names(&g, &s, NAME_LEN, EXP_EVENTS), 0);
  assert_true(g.body.len < 200000); /* tiny when stored */
  send_gen(&c, &g);
  gtc_gen_fini(&g);
  gtc_close(&c);
}

static const char *const chrome_path =
    "/v1/trace?service=bounds&last=1h&format=chrome";

typedef struct dl_job {
  uint16_t port;
  hc h;
  int rc;
} dl_job;

static void *dl_thread(void *arg) {
  dl_job *j = arg;
  j->rc = hc_open(&j->h, j->port, chrome_path, 0);
  if (j->rc == 0)
    j->rc = hc_pump(&j->h, 0, 120000);
  hc_close(&j->h);
  return NULL;
}

static void test_chrome__concurrent_expanding_downloads_stay_bounded(
    void **state) {
  (void)state;
  gtd d;
  const char *const args[] = {"--http-max-downloads", "8", NULL};
  start(&d, args);
  put_expanding_gen(&d);
  long before = gtd_proc_kib(d.pid, "VmHWM");
  assert_true(before > 0);

  dl_job jobs[NDL];
  pthread_t th[NDL];
  for (int i = 0; i < NDL; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].port = d.http_port;
    assert_int_equal(pthread_create(&th[i], NULL, dl_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < NDL; i++)
    pthread_join(th[i], NULL);
  long after = gtd_proc_kib(d.pid, "VmHWM");
  for (int i = 0; i < NDL; i++) {
    hc *h = &jobs[i].h;
    assert_int_equal(h->status, 200);
    assert_true(h->complete);
    /* Every event's name went out: at least events x name bytes. */
    assert_true(h->body > (uint64_t)EXP_EVENTS * NAME_LEN);
    static const char end[] = "\"displayTimeUnit\":\"ns\"}\n";
    assert_true(h->tail_len >= sizeof end - 1);
    assert_memory_equal(h->tail + h->tail_len - (sizeof end - 1), end,
                        sizeof end - 1);
  }
  /* Whole documents in memory would be NDL x 64 MB (measured on the code
   * before streaming: +192 MiB); streamed, each holds a 256 KiB pipe and a
   * 1 MiB block (+4 MiB measured, +9 under ASan, +43 under TSan's shadow
   * memory). 64 MiB is generous for all four. */
  fprintf(stderr, "VmHWM before %ld KiB, after %ld KiB (%d x %" PRIu64
                  " bytes of JSON)\n",
          before, after, NDL, jobs[0].h.body);
  assert_true(after - before < 64 * 1024);
  stop(&d);
}

static void test_downloads__past_the_cap_get_503_with_retry_after(
    void **state) {
  (void)state;
  gtd d;
  const char *const args[] = {"--http-max-downloads", "2", NULL};
  start(&d, args);
  put_expanding_gen(&d);
  /* Two downloads whose clients do not read: they hold their places. */
  static hc a, b, c;
  assert_int_equal(hc_open(&a, d.http_port, chrome_path, 4096), 0);
  assert_int_equal(hc_open(&b, d.http_port, chrome_path, 4096), 0);
  assert_int_equal(a.status, 200);
  assert_int_equal(b.status, 200);
  assert_int_equal(hc_open(&c, d.http_port, chrome_path, 0), 0);
  assert_int_equal(c.status, 503);
  char v[128];
  assert_true(hc_header(&c, "Retry-After", v, sizeof v));
  assert_true(atoi(v) >= 1);
  assert_true(hc_header(&c, "Content-Type", v, sizeof v));
  assert_string_equal(v, "application/json");
  hc_pump(&c, 0, 10000);
  hc_close(&c);
  /* Metadata still answers. */
  int st;
  char *body = gtd_http_get(&d, "/v1/agents", &st);
  assert_int_equal(st, 200);
  free(body);
  assert_int_equal(
      gtd_metric(&d, "gentrace_http_downloads_refused_total"), 1);
  assert_int_equal(gtd_metric(&d, "gentrace_http_max_downloads"), 2);
  /* Closing them gives the places back. */
  hc_close(&a);
  hc_close(&b);
  int64_t deadline = mono_ms() + 20000;
  while (gtd_metric(&d, "gentrace_http_active_downloads") != 0 &&
         mono_ms() < deadline)
    usleep(20000);
  assert_int_equal(gtd_metric(&d, "gentrace_http_active_downloads"), 0);
  assert_int_equal(hc_open(&c, d.http_port, chrome_path, 0), 0);
  assert_int_equal(c.status, 200);
  hc_close(&c);
  stop(&d);
}

static void test_feed__parked_polls_never_lock_out_other_requests(
    void **state) {
  (void)state;
  enum { CONNS = 8, POLLS = 4 };
  gtd d;
  const char *const args[] = {"--http-max-connections", "8",
                              "--http-max-long-polls", "4", NULL};
  start(&d, args);
  /* As many feeds as there are connections: only POLLS may wait. */
  static hc f[CONNS];
  int parked = 0, refused = 0;
  for (int i = 0; i < CONNS; i++) {
    memset(&f[i], 0, sizeof f[i]);
    f[i].fd = -1;
  }
  for (int i = 0; i < CONNS; i++) {
    int rc = hc_open_t(&f[i], d.http_port, "/v1/feed?after=latest&wait=30",
                       0, 4000);
    if (rc == 0 && f[i].status == 503) {
      char v[32];
      assert_true(hc_header(&f[i], "Retry-After", v, sizeof v));
      refused++;
      hc_close(&f[i]);
    } else if (rc < 0) {
      /* Not answered within 4 s (a refusal is answered at once): it was
       * parked. Four of these take 16 s of the polls' 30 s wait. */
      parked++;
    }
  }
  assert_int_equal(parked, POLLS);
  assert_int_equal(refused, CONNS - POLLS);
  /* A normal request gets through while the polls stay parked (they wait
   * 30 s). On a loaded machine the refused feeds' closes may not have
   * reached the daemon yet, and their places still count against
   * --http-max-connections: retry for up to 8 s, so the whole test stays
   * inside the first poll's 30 s wait and a lock-out still fails. */
  int64_t t0 = mono_ms();
  int st = 0;
  do {
    char *body = gtd_http_get(&d, "/v1/agents", &st);
    free(body);
    if (st != 200)
      usleep(50000);
  } while (st != 200 && mono_ms() - t0 < 8000);
  assert_int_equal(st, 200);
  assert_int_equal(gtd_metric(&d, "gentrace_http_long_polls_refused_total"),
                   CONNS - POLLS);
  for (int i = 0; i < CONNS; i++)
    hc_close(&f[i]);
  stop(&d);
}

/* A client that stops reading is cut after --http-send-timeout, counted
 * and logged; it got less than the whole answer and can tell (no final
 * chunk). */
static void test_downloads__reader_slower_than_send_timeout_is_cut(
    void **state) {
  (void)state;
  gtd d;
  const char *const args[] = {"--http-send-timeout", "1s", NULL};
  start(&d, args);
  put_expanding_gen(&d);
  static hc h;
  assert_int_equal(hc_open(&h, d.http_port, chrome_path, 4096), 0);
  assert_int_equal(h.status, 200);
  int64_t deadline = mono_ms() + 20000;
  while (gtd_metric(&d, "gentrace_http_send_timeouts_total") < 1 &&
         mono_ms() < deadline)
    usleep(50000);
  assert_int_equal(gtd_metric(&d, "gentrace_http_send_timeouts_total"), 1);
  assert_true(gtd_log_has(&d, "client slower than --http-send-timeout"));
  assert_int_equal(hc_pump(&h, 0, 20000), 0);
  assert_false(h.complete);
  assert_true(h.body < (uint64_t)EXP_EVENTS * NAME_LEN);
  hc_close(&h);
  stop(&d);
}

static uint64_t file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

typedef struct agent_job {
  uint16_t port;
  unsigned session; /* gtf_session number */
  unsigned ngens;
  int64_t t0;
  atomic_uint acked; /* generations the daemon acknowledged */
  atomic_int done;
} agent_job;

/* An honest agent streaming incompressible generations of ~512 KiB. */
static void *agent_thread(void *arg) {
  agent_job *j = arg;
  gtc c;
  gtf_spec s;
  spec_now(&s, j->session, 1, j->t0);
  if (gtc_connect(&c, j->port) < 0)
    return NULL;
  gtp_welcome w;
  if (gtc_hello(&c, &s, NULL, &w) != 0)
    goto out;
  for (unsigned g = 1; g <= j->ngens; g++) {
    spec_now(&s, j->session, g, j->t0);
    gtc_gen gg;
    if (gtc_gen_build_random(&gg, &s, 8, g) < 0)
      break;
    int rc = gtc_send_gen(&c, &gg);
    gtc_gen_fini(&gg);
    uint64_t ack = 0;
    int code = 0;
    if (rc < 0 || gtc_read_reply(&c, &ack, &code, GTC_TIMEOUT_MS) != 1)
      break;
    atomic_fetch_add(&j->acked, 1);
  }
out:
  gtc_close(&c);
  j->done = 1;
  return NULL;
}

static void stream(gtd *d, agent_job *j, unsigned ngens) {
  j->port = d->agent_port;
  j->ngens = ngens;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, agent_thread, j), 0);
  pthread_join(th, NULL);
}

/* The attack of the issue: one client reads a window at a few KB/s while
 * an agent streams three times --max-db-size. Retention must not wait:
 * the database files stay within 1.5x the limit all along, and the
 * download ends early (incomplete transfer), logged and counted. */
static void test_retention__slow_reader_never_holds_the_size_limit(
    void **state) {
  (void)state;
  /* The window (about MAX_MB) must be larger than what the daemon side
   * can buffer ahead of the client (three generations, a 1 MiB block, a
   * socket send buffer of at most 4 MiB), so deletions meet it. */
  enum { MAX_MB = 16 };
  gtd d;
  const char *const args[] = {"--max-db-size", "16M", NULL};
  start(&d, args);
  char wal[400];
  snprintf(wal, sizeof wal, "%s-wal", d.db);
  agent_job j = {.session = 2, .t0 = real_ns() - 30 * SEC};
  /* Fill to the limit first: generations of 512 KiB. */
  stream(&d, &j, 2 * MAX_MB);
  assert_true(j.done);
  assert_int_equal(j.acked, 2 * MAX_MB);

  static hc h;
  assert_int_equal(
      hc_open(&h, d.http_port, "/v1/trace?service=bounds&last=1h", 4096), 0);
  assert_int_equal(h.status, 200);
  char v[32];
  assert_true(hc_header(&h, "X-Gentrace-Generations", v, sizeof v));
  int listed = atoi(v);
  assert_true(listed >= MAX_MB);

  /* The agent streams 3x the limit while the client reads 4 KiB every
   * half second; the database is sampled all along. */
  agent_job more = {.port = d.agent_port, .session = 3,
                    .ngens = 3 * MAX_MB * 2, .t0 = j.t0 + 10 * SEC};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, agent_thread, &more), 0);
  uint64_t peak = 0;
  while (!more.done) {
    hc_pump(&h, 4096, 500);
    uint64_t sz = file_size(d.db) + file_size(wal);
    if (sz > peak)
      peak = sz;
    usleep(100000);
  }
  pthread_join(th, NULL);
  assert_int_equal(more.acked, more.ngens); /* the honest agent got through */
  uint64_t sz = file_size(d.db) + file_size(wal);
  if (sz > peak)
    peak = sz;
  fprintf(stderr, "peak db+wal %" PRIu64 " bytes, limit %d MiB\n", peak,
          MAX_MB);
  assert_true(peak <= (uint64_t)MAX_MB * 3 / 2 * 1024 * 1024);
  /* Retention did its work meanwhile. */
  assert_true(gtd_metric(&d, "gentrace_store_retention_deleted_total") >=
              2 * MAX_MB);

  /* Now drain: the download meets deleted generations and ends early. */
  assert_int_equal(hc_pump(&h, 0, 60000), 0);
  assert_false(h.complete);
  hc_close(&h);
  int64_t deadline = mono_ms() + 20000;
  while (gtd_metric(&d, "gentrace_http_downloads_ended_early_total") < 1 &&
         mono_ms() < deadline)
    usleep(50000);
  assert_int_equal(gtd_metric(&d, "gentrace_http_downloads_ended_early_total"),
                   1);
  assert_true(gtd_log_has(&d, "download ended early"));
  stop(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chrome__concurrent_expanding_downloads_stay_bounded),
      cmocka_unit_test(test_downloads__past_the_cap_get_503_with_retry_after),
      cmocka_unit_test(test_feed__parked_polls_never_lock_out_other_requests),
      cmocka_unit_test(test_downloads__reader_slower_than_send_timeout_is_cut),
      cmocka_unit_test(test_retention__slow_reader_never_holds_the_size_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
