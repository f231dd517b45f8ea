/* test_goconv.c: a Go generation as a native one (proto/goconv.c), and the
 * Chrome writer on Go generations. The Go bytes come from go_fixture.h, so
 * every event is known: G11 begins task 3 and region "work" and logs on M7,
 * G12 ends task 3 on M9 (whose batch comes first in the body), a GC with a
 * stop-the-world pause. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chrome.h"
#include "go_fixture.h"
#include "goconv.h"
#include "gotrace.h"

#define REAL_END 1800000000000000000ll

/* A whole gentrace generation of a Go session around go[0..n), its bytes
 * cut into GOTRACE records at cut (0 = one record). */
static void go_gen(gtp_wbuf *out, const uint8_t *go, size_t n, size_t cut,
                   const char *version, uint64_t dropped) {
  gtp_gen_start st = {.gen = 7,
                      .service = {"gosvc", 5},
                      .host = {"h", 1},
                      .agent_version = {"t", 1},
                      .pid = 42};
  memset(st.session, 0xab, 16);
  st.tags[st.ntags++] = (gtp_tag){{"format", 6}, {"go", 2}};
  if (version)
    st.tags[st.ntags++] =
        (gtp_tag){{"go_version", 10}, {version, strlen(version)}};
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  size_t parts[2][2] = {{0, cut ? cut : n}, {cut, cut ? n - cut : 0}};
  for (int i = 0; i < 2; i++) {
    if (!parts[i][1])
      continue;
    uint8_t h[11];
    h[0] = GTP_GO_RECORD_TYPE;
    size_t hl = 1 + gtp_uvarint_put(h + 1, parts[i][1]);
    gtp_wbuf_put(&body, h, hl);
    gtp_wbuf_put(&body, go + parts[i][0], parts[i][1]);
  }
  gtp_clock ck = {5,       5,       (uint64_t)REAL_END - 1000000,
                  1000005, 1000005, (uint64_t)REAL_END};
  assert_int_equal(gtp_put_clock(&body, &ck), 0);
  gtp_gen_end e = {.gen = 7, .dropped = dropped};
  assert_int_equal(gtp_manifest_compute(body.data, body.len, &e), 0);
  assert_int_equal(gtp_put_file_header(out), 0);
  assert_int_equal(gtp_put_gen_start(out, &st), 0);
  gtp_wbuf_put(out, body.data, body.len);
  assert_int_equal(gtp_put_gen_end(out, &e), 0);
  gtp_wbuf_fini(&body);
}

typedef struct seen {
  uint64_t tid;
  uint8_t type;
  char name[160];
  uint64_t a0;
} seen;

/* Converts the generation in file f, returns the native events in order. */
static size_t convert(const gtp_wbuf *f, seen *out, size_t max, int *go_rc,
                      gtp_gen_end *ledger) {
  gtp_gen g, ng;
  size_t used;
  assert_int_equal(gtp_gen_parse(f->data + 16, f->len - 16, &g, &used), 0);
  assert_true(gtp_gen_is_go(&g));
  gtp_wbuf nb;
  gtp_wbuf_init(&nb, 0);
  assert_int_equal(gtp_goconv_gen(&g, &nb, go_rc), 0);
  assert_int_equal(gtp_gen_parse(nb.data, nb.len, &ng, &used), 0);
  assert_int_equal(used, nb.len);
  assert_false(gtp_gen_is_go(&ng));
  assert_int_equal(ng.start.gen, 7);
  assert_int_equal(ng.start.ntags, g.start.ntags);
  *ledger = ng.end;
  size_t n = 0, cursor = 0;
  gtp_batch b;
  while (gtp_gen_next_batch(&ng, &cursor, &b) == 1) {
    gtp_event_iter it;
    gtp_event ev;
    gtp_event_iter_init(&it, &b);
    while (gtp_event_next(&it, &ev) == 1 && n < max) {
      seen *s = &out[n++];
      memset(s, 0, sizeof *s);
      s->tid = b.thread;
      s->type = ev.type;
      s->a0 = ev.args[0];
      gtp_str nm = {0};
      if (ev.type == GTP_EV_TASK_BEGIN)
        nm = gtp_gen_string(&ng, ev.args[2]);
      else if (ev.type != GTP_EV_TASK_END && ev.type != GTP_EV_REGION_END)
        nm = gtp_gen_string(&ng, ev.args[0]);
      if (ev.type == GTP_EV_LOG && nm.len + ev.msg_len < 150) {
        memcpy(s->name, nm.ptr, nm.len);
        s->name[nm.len] = '=';
        memcpy(s->name + nm.len + 1, ev.msg, ev.msg_len);
      } else if (nm.ptr && nm.len < sizeof s->name) {
        memcpy(s->name, nm.ptr, nm.len);
      }
    }
  }
  gtp_gen_fini(&ng);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&nb);
  return n;
}

static size_t find(const seen *s, size_t n, uint64_t tid, uint8_t type,
                   const char *name) {
  for (size_t i = 0; i < n; i++)
    if (s[i].tid == tid && s[i].type == type &&
        (!name || !strcmp(s[i].name, name)))
      return i;
  return (size_t)-1;
}

static void test_goconv__goroutines_become_threads(void **state) {
  (void)state;
  for (unsigned v = 22; v <= 26; v++) {
    gb go = {0};
    workload(&go, 3, v);
    char ver[8];
    snprintf(ver, sizeof ver, "1.%u", v);
    /* Cut the Go bytes inside a batch: records need not align with it. */
    gtp_wbuf f;
    gtp_wbuf_init(&f, 0);
    go_gen(&f, go.buf, go.len, go.len / 2, ver, 3);
    seen s[64];
    int grc = -1;
    gtp_gen_end led;
    size_t n = convert(&f, s, 64, &grc, &led);
    assert_int_equal(grc, 0);
    assert_int_equal(led.dropped, 3); /* the ledger travels along */
    size_t tb = find(s, n, 11, GTP_EV_TASK_BEGIN, "job");
    size_t te = find(s, n, 12, GTP_EV_TASK_END, NULL);
    assert_true(tb != (size_t)-1 && te != (size_t)-1);
    assert_int_equal(s[te].a0, 3);
    assert_true(find(s, n, 11, GTP_EV_THREAD_NAME, "G11") < tb);
    assert_true(find(s, n, 12, GTP_EV_THREAD_NAME, "G12") < te);
    assert_true(find(s, n, 11, GTP_EV_REGION_BEGIN, "work") != (size_t)-1);
    assert_true(find(s, n, 11, GTP_EV_REGION_END, NULL) != (size_t)-1);
    assert_true(find(s, n, 11, GTP_EV_LOG, "queue=enqueued") != (size_t)-1);
    assert_true(find(s, n, GTP_GOCONV_TID_GC, GTP_EV_REGION_BEGIN, "GC") !=
                (size_t)-1);
    assert_true(find(s, n, GTP_GOCONV_TID_GC, GTP_EV_REGION_END, NULL) !=
                (size_t)-1);
    assert_true(find(s, n, GTP_GOCONV_TID_STW, GTP_EV_REGION_BEGIN,
                     "GC mark termination") != (size_t)-1);
    assert_true(find(s, n, GTP_GOCONV_TID_STW, GTP_EV_THREAD_NAME, "STW") !=
                (size_t)-1);
    /* 9 user/GC/STW events + 4 thread names (G11, G12, GC, STW). */
    assert_int_equal(n, 13);
    gtp_wbuf_fini(&f);
  }
}

static void test_goconv__undecodable_bytes_say_where(void **state) {
  (void)state;
  gb go = {0};
  workload(&go, 3, 23);
  go.buf[go.len - 3] = 0x7f; /* an event type no version has */
  gtp_wbuf f;
  gtp_wbuf_init(&f, 0);
  go_gen(&f, go.buf, go.len, 0, "1.23", 0);
  seen s[8];
  int grc = 0;
  gtp_gen_end led;
  size_t n = convert(&f, s, 8, &grc, &led);
  assert_int_equal(grc, GTP_E_UNKNOWN);
  assert_int_equal(n, 2); /* thread name, then the log */
  assert_int_equal(s[1].type, GTP_EV_LOG);
  assert_non_null(
      strstr(s[1].name, "gentrace.go_undecodable=go 1.23: UNKNOWN"));
  assert_non_null(strstr(s[1].name, "at byte"));
  gtp_wbuf_fini(&f);
}

static int sink(void *ctx, const void *p, size_t n) {
  gtp_wbuf_put(ctx, p, n);
  return 0;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
    n++;
  return n;
}

/* The Chrome writer takes a Go generation like a native one, also without
 * a go_version tag (the reader tries the newest table, then 1.23's). */
static void test_chrome__go_generation_exports(void **state) {
  (void)state;
  for (int tagged = 0; tagged < 2; tagged++) {
    gb go = {0};
    workload(&go, 3, 22);
    gtp_wbuf f, out;
    gtp_wbuf_init(&f, 0);
    gtp_wbuf_init(&out, 0);
    go_gen(&f, go.buf, go.len, 0, tagged ? "1.22" : NULL, 0);
    gtp_gen g;
    size_t used;
    assert_int_equal(gtp_gen_parse(f.data + 16, f.len - 16, &g, &used), 0);
    gtp_chrome *c = gtp_chrome_new(sink, &out, 0, 0);
    assert_int_equal(gtp_chrome_gen(c, &g), 0);
    assert_int_equal(gtp_chrome_end(c), 0);
    gtp_chrome_free(c);
    gtp_wbuf_put(&out, "", 1);
    const char *j = (const char *)out.data;
    assert_int_equal(count(j, "\"ph\":\"b\""), 1);
    assert_int_equal(count(j, "\"ph\":\"e\""), 1);
    assert_non_null(strstr(j,
                           "{\"name\":\"job\",\"cat\":\"task\",\"id\":\"0x3\""
                           ",\"ph\":\"e\""));
    assert_non_null(strstr(j, "\"name\":\"work\",\"ph\":\"B\""));
    assert_non_null(strstr(j, "\"args\":{\"name\":\"G12\"}"));
    assert_int_equal(count(j, "\"ph\":\"B\""), 3); /* work, GC, STW */
    assert_int_equal(count(j, "\"ph\":\"E\""), 3);
    assert_int_equal(count(j, "\"cat\":\"log\""), 1);
    assert_int_equal(count(j, "gentrace.go_undecodable"), 0);
    gtp_gen_fini(&g);
    gtp_wbuf_fini(&f);
    gtp_wbuf_fini(&out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_goconv__goroutines_become_threads),
      cmocka_unit_test(test_goconv__undecodable_bytes_say_where),
      cmocka_unit_test(test_chrome__go_generation_exports),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
