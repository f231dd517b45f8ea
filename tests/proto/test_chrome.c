/* test_chrome.c: the Chrome Trace Event JSON writer (proto/chrome.c).
 *
 * Every output is checked by a small strict JSON validator (RFC 8259:
 * no trailing commas, no raw control characters, valid UTF-8, valid
 * escapes), then by counting elements per phase. Counting `"ph":"X"` on the
 * raw text is exact here because the writer emits compact JSON and every
 * trace string is escaped, so a name can never contain an unescaped quote.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../tools/tracebuild.h"
#include "chrome.h"

/* ------------------------------------------------- strict JSON checker */

typedef struct jp {
  const char *p, *end;
  int depth;
} jp;

static bool j_value(jp *j);

static void j_ws(jp *j) {
  while (j->p < j->end &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static bool j_lit(jp *j, const char *s) {
  size_t n = strlen(s);
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, s, n))
    return false;
  j->p += n;
  return true;
}

static bool j_string(jp *j) {
  if (j->p >= j->end || *j->p != '"')
    return false;
  j->p++;
  while (j->p < j->end) {
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') {
      j->p++;
      return true;
    }
    if (c < 0x20)
      return false;
    if (c == '\\') {
      j->p++;
      if (j->p >= j->end)
        return false;
      char e = *j->p++;
      if (e == 'u') {
        for (int i = 0; i < 4; i++, j->p++)
          if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) ||
              !*j->p)
            return false;
      } else if (!strchr("\"\\/bfnrt", e) || !e) {
        return false;
      }
      continue;
    }
    if (c < 0x80) {
      j->p++;
      continue;
    }
    /* Multi-byte UTF-8: validate strictly. */
    int need = c >= 0xf0 && c <= 0xf4   ? 3
               : c >= 0xe0 && c <= 0xef ? 2
               : c >= 0xc2 && c <= 0xdf ? 1
                                        : -1;
    if (need < 0 || j->end - j->p <= need)
      return false;
    uint32_t v = c & (need == 1 ? 0x1f : need == 2 ? 0x0f : 0x07);
    for (int i = 1; i <= need; i++) {
      unsigned char b = (unsigned char)j->p[i];
      if ((b & 0xc0) != 0x80)
        return false;
      v = v << 6 | (b & 0x3f);
    }
    if ((need == 2 && v < 0x800) || (need == 3 && v < 0x10000) ||
        v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
      return false;
    j->p += need + 1;
  }
  return false;
}

static bool j_number(jp *j) {
  const char *s = j->p;
  if (j->p < j->end && *j->p == '-')
    j->p++;
  if (j->p >= j->end)
    return false;
  if (*j->p == '0')
    j->p++;
  else if (*j->p >= '1' && *j->p <= '9')
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
  else
    return false;
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    const char *d = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
    if (j->p == d)
      return false;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    const char *d = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
      j->p++;
    if (j->p == d)
      return false;
  }
  return j->p > s;
}

static bool j_container(jp *j, char open, char close, bool obj) {
  if (++j->depth > 64)
    return false;
  j->p++; /* open */
  (void)open;
  j_ws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    j->depth--;
    return true;
  }
  for (;;) {
    j_ws(j);
    if (obj) {
      if (!j_string(j))
        return false;
      j_ws(j);
      if (j->p >= j->end || *j->p++ != ':')
        return false;
    }
    if (!j_value(j))
      return false;
    j_ws(j);
    if (j->p >= j->end)
      return false;
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p == close) {
      j->p++;
      j->depth--;
      return true;
    }
    return false;
  }
}

static bool j_value(jp *j) {
  j_ws(j);
  if (j->p >= j->end)
    return false;
  switch (*j->p) {
  case '{':
    return j_container(j, '{', '}', true);
  case '[':
    return j_container(j, '[', ']', false);
  case '"':
    return j_string(j);
  case 't':
    return j_lit(j, "true");
  case 'f':
    return j_lit(j, "false");
  case 'n':
    return j_lit(j, "null");
  default:
    return j_number(j);
  }
}

static bool json_valid(const char *s, size_t n) {
  jp j = {s, s + n, 0};
  if (!j_value(&j))
    return false;
  j_ws(&j);
  return j.p == j.end;
}

static bool jv(const char *s) {
  return json_valid(s, strlen(s));
}

static void test_validator__rejects_what_it_must(void **state) {
  (void)state;
  assert_true(jv("{\"a\":[1,-2.5e3,\"x\\u00e9\",true,null]}"));
  assert_false(jv("{\"a\":[1,]}"));
  assert_false(jv("{,\"a\":1}"));
  assert_false(jv("[\"\x01\"]"));
  assert_false(jv("[\"\xff\"]"));
  assert_false(jv("[\"\xed\xa0\x80\"]")); /* surrogate */
  assert_false(jv("[01]"));
  assert_false(jv("{} x"));
}

/* ------------------------------------------------------------- helpers */

typedef struct sinkbuf {
  char *data;
  size_t len, cap;
  size_t calls, max_chunk;
  size_t fail_after; /* calls that succeed before -EIO; 0 = never fail */
} sinkbuf;

static int sink(void *ctx, const void *p, size_t n) {
  sinkbuf *s = ctx;
  if (s->fail_after && s->calls >= s->fail_after)
    return -EIO;
  s->calls++;
  if (n > s->max_chunk)
    s->max_chunk = n;
  if (s->len + n + 1 > s->cap) {
    s->cap = (s->len + n + 1) * 2;
    s->data = realloc(s->data, s->cap);
    assert_non_null(s->data);
  }
  memcpy(s->data + s->len, p, n);
  s->len += n;
  s->data[s->len] = 0;
  return 0;
}

/* Converts every generation of t->out; returns the writer's last code. */
static int convert(tb *t, sinkbuf *out, int64_t from, int64_t to) {
  gtp_chrome *c = gtp_chrome_new(sink, out, from, to);
  assert_non_null(c);
  gtp_file_reader r;
  assert_int_equal(gtp_file_reader_init(&r, t->out.data, t->out.len), 0);
  gtp_gen g;
  int rc = 0;
  while (rc == 0 && gtp_file_reader_next(&r, &g) == 1) {
    rc = gtp_chrome_gen(c, &g);
    gtp_gen_fini(&g);
  }
  if (rc == 0)
    rc = gtp_chrome_end(c);
  gtp_chrome_free(c);
  return rc;
}

/* Occurrences of needle in hay. A plain loop on purpose: the sanitizers'
 * strstr interceptor measures the whole haystack on every call, which made
 * counting in a multi-megabyte document quadratic under ASan. */
static size_t count(const char *hay, const char *needle) {
  size_t n = 0, m = strlen(needle);
  for (const char *p = hay; *p; p++) {
    size_t i = 0;
    while (i < m && p[i] == needle[i])
      i++;
    if (i == m) {
      n++;
      p += m - 1;
    }
  }
  return n;
}

#define T0 1000000000ull /* ticks (ns) at every generation start */
#define REAL0 1795316645000000000ll

static void gen_begin(tb *t, unsigned sess, uint64_t gen, const char *svc) {
  uint8_t id[16];
  tb_session(id, sess);
  tb_gen_begin(t, id, gen, svc, "host", 100 + sess,
               REAL0 + (int64_t)gen * 1000000000, T0 + gen * 1000000000ull);
}

/* One generation with every event kind once on thread 7. */
static void every_kind(tb *t, unsigned sess, uint64_t gen) {
  gen_begin(t, sess, gen, "svc");
  uint64_t base = T0 + gen * 1000000000ull, k = base;
  uint64_t pcs[] = {0x1000, 0xdeadbeef};
  uint64_t st = tb_stack(t, pcs, 2);
  tb_batch_begin(t, 7, base);
  tb_ev(t, GTP_EV_THREAD_NAME, k += 1000, tb_str(t, "worker-7"), 0, 0);
  tb_ev(t, GTP_EV_REGION_BEGIN, k += 1000, tb_str(t, "outer"), 0, 0);
  tb_ev(t, GTP_EV_REGION_BEGIN_STACK, k += 1000, tb_str(t, "inner"), st, 0);
  tb_ev(t, GTP_EV_INSTANT, k += 1000, tb_str(t, "tick"), 0, 0);
  tb_ev(t, GTP_EV_INSTANT_STACK, k += 1000, tb_str(t, "mark"), st, 0);
  tb_ev(t, GTP_EV_COUNTER, k += 1000, tb_str(t, "q"), (uint64_t)-42ll, 0);
  tb_ev_msg(t, GTP_EV_LOG, k += 1000, tb_str(t, "http"), 0, 0, "hello", 5);
  tb_ev_msg(t, GTP_EV_LOG_STACK, k += 1000, tb_str(t, "warn"), st, 0, "w", 1);
  tb_ev(t, GTP_EV_TASK_BEGIN, k += 1000, 99, 0, tb_str(t, "job"));
  tb_ev(t, GTP_EV_TASK_END, k += 1000, 99, 0, 0);
  tb_ev(t, GTP_EV_LOST, k += 1000, 6, 0, 0);
  tb_ev(t, GTP_EV_REGION_END, k += 1000, 0, 0, 0);
  tb_ev(t, GTP_EV_REGION_END, k += 1000, 0, 0, 0);
  tb_batch_end(t);
  tb_gen_end(t, base + 1000000000ull, 0, 0, 0);
}

/* --------------------------------------------------------------- tests */

static void test_chrome__every_kind_is_written_once_per_event(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  every_kind(&t, 1, 0);
  every_kind(&t, 1, 1);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(strncmp(out.data, "{\"traceEvents\":[", 16), 0);
  assert_int_equal(count(out.data, "\"ph\":\"B\""), 4);
  assert_int_equal(count(out.data, "\"ph\":\"E\""), 4);
  assert_int_equal(count(out.data, "\"ph\":\"C\""), 2);
  assert_int_equal(count(out.data, "\"ph\":\"b\""), 2);
  assert_int_equal(count(out.data, "\"ph\":\"e\""), 2);
  /* instant, instant_stack, log, log_stack, lost: 5 per generation */
  assert_int_equal(count(out.data, "\"ph\":\"i\""), 10);
  /* process_name once, thread_name once (unchanged name not repeated) */
  assert_int_equal(count(out.data, "\"ph\":\"M\""), 2);
  assert_non_null(strstr(out.data, "\"args\":{\"value\":-42}"));
  assert_non_null(strstr(out.data, "{\"name\":\"http\",\"cat\":\"log\""));
  assert_non_null(strstr(out.data, "\"args\":{\"message\":\"hello\"}"));
  assert_non_null(strstr(out.data, "\"stack\":[\"0x1000\",\"0xdeadbeef\"]"));
  assert_non_null(
      strstr(out.data, "{\"name\":\"job\",\"cat\":\"task\",\"id\":\"0x63\""));
  assert_non_null(strstr(out.data, "\"name\":\"gentrace.lost\""));
  assert_non_null(strstr(out.data, "\"args\":{\"count\":6}"));
  assert_non_null(strstr(out.data,
                         "\"thread_name\",\"ph\":\"M\",\"pid\":1,"
                         "\"tid\":7,\"args\":{\"name\":\"worker-7\"}"));
  assert_non_null(strstr(out.data, "\"args\":{\"name\":\"svc (host 101)\"}"));
  assert_non_null(
      strstr(out.data, "\"gentrace_start_ns\":\"1795316645000000000\""));
  assert_non_null(strstr(
      out.data, "\"gentrace_start\":\"2026-11-22T03:04:05.000000000Z\""));
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__ts_is_microseconds_with_three_decimals(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 0, "svc");
  tb_batch_begin(&t, 1, T0);
  tb_ev(&t, GTP_EV_INSTANT, T0 + 1234567, tb_str(&t, "a"), 0, 0);
  tb_ev(&t, GTP_EV_INSTANT, T0 + 2000000005, tb_str(&t, "b"), 0, 0);
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 3000000000ull, 0, 0, 0);

  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_non_null(strstr(out.data, "\"ts\":1234.567,"));
  assert_non_null(strstr(out.data, "\"ts\":2000000.005,"));
  free(out.data);

  /* An explicit window start after the event: negative offsets. */
  memset(&out, 0, sizeof out);
  assert_int_equal(convert(&t, &out, REAL0 + 1235067, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_non_null(strstr(out.data, "\"ts\":-0.500,"));
  assert_non_null(
      strstr(out.data, "\"gentrace_start_ns\":\"1795316645001235067\""));
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__open_region_closed_at_window_end(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 0, "svc");
  tb_batch_begin(&t, 3, T0);
  tb_ev(&t, GTP_EV_REGION_BEGIN, T0 + 1000, tb_str(&t, "a"), 0, 0);
  tb_ev(&t, GTP_EV_REGION_BEGIN, T0 + 2000, tb_str(&t, "b"), 0, 0);
  tb_ev(&t, GTP_EV_REGION_END, T0 + 3000, 0, 0, 0);
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 5000, 0, 0, 0);

  /* Window end given: closed exactly there (10 us after the start). */
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, REAL0 + 10000), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"ph\":\"B\""), 2);
  assert_int_equal(count(out.data, "\"ph\":\"E\""), 2);
  assert_non_null(strstr(out.data, "{\"ph\":\"E\",\"ts\":10.000,\"pid\":1,"
                                   "\"tid\":3,\"args\":{\"gentrace.closed_at_"
                                   "window_end\":true}}"));
  free(out.data);

  /* No window end: closed at the latest time seen (the generation end). */
  memset(&out, 0, sizeof out);
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_non_null(strstr(out.data, "{\"ph\":\"E\",\"ts\":5.000,"));
  free(out.data);
  tb_fini(&t);
}

/* Ends whose begin precedes the window are kept: each gets a synthetic,
 * flagged begin at the window start (nothing the trace holds is dropped). */
static void test_chrome__end_without_begin_opens_at_window_start(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 0, "svc");
  tb_batch_begin(&t, 3, T0);
  tb_ev(&t, GTP_EV_REGION_END, T0 + 1000, 0, 0, 0); /* began before */
  tb_ev(&t, GTP_EV_TASK_END, T0 + 1500, 5, 0, 0);   /* began before */
  tb_ev(&t, GTP_EV_REGION_BEGIN, T0 + 2000, tb_str(&t, "a"), 0, 0);
  tb_ev(&t, GTP_EV_REGION_END, T0 + 3000, 0, 0, 0);
  tb_ev(&t, GTP_EV_REGION_END, T0 + 4000, 0, 0, 0); /* began before too */
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 5000, 0, 0, 0);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"ph\":\"B\""), 3);
  assert_int_equal(count(out.data, "\"ph\":\"E\""), 3);
  assert_int_equal(count(out.data, "\"ph\":\"b\""), 1);
  assert_int_equal(count(out.data, "\"ph\":\"e\""), 1);
  assert_int_equal(count(out.data, "\"gentrace.begun_before_window\":true"), 3);
  assert_non_null(strstr(out.data, "{\"name\":\"\",\"ph\":\"B\",\"ts\":0.000,"
                                   "\"pid\":1,\"tid\":3,\"args\":{\"gentrace."
                                   "begun_before_window\":true}}"));
  assert_non_null(strstr(out.data, "{\"ph\":\"E\",\"ts\":3.000,"));
  assert_non_null(strstr(out.data, "{\"ph\":\"E\",\"ts\":4.000,"));
  assert_non_null(strstr(out.data, "{\"name\":\"\",\"cat\":\"task\",\"id\":"
                                   "\"0x5\",\"ph\":\"e\",\"ts\":1.500,"));
  free(out.data);
  tb_fini(&t);
}

/* Tasks handed between threads: the thread that ends them is written
 * first in every generation (its buffer flushed first), and some tasks end
 * a generation later on a third thread. Every begin gets its named end,
 * nothing synthetic is needed, and open tasks close at the window end. */
static void
test_chrome__task_ends_before_begin_in_body_are_paired(void **state) {
  (void)state;
  enum { N = 300 };
  tb t;
  tb_init(&t);
  for (uint64_t gen = 1; gen <= 3; gen++) {
    uint64_t base = T0 + gen * 1000000000ull;
    gen_begin(&t, 1, gen, "svc");
    uint64_t name = tb_str(&t, "handoff");
    /* Thread 2: ends of this generation's tasks (even ones), at +2us. */
    tb_batch_begin(&t, 2, base);
    for (uint64_t i = 0; i < N; i += 2)
      tb_ev(&t, GTP_EV_TASK_END, base + 1000 * i + 2000, gen * 1000 + i, 0, 0);
    tb_batch_end(&t);
    /* Thread 1: every task begins here. */
    tb_batch_begin(&t, 1, base);
    for (uint64_t i = 0; i < N; i++)
      tb_ev(&t, GTP_EV_TASK_BEGIN, base + 1000 * i + 1, gen * 1000 + i, 0,
            name);
    tb_batch_end(&t);
    /* Thread 3: ends of the previous generation's odd tasks. */
    if (gen > 1) {
      tb_batch_begin(&t, 3, base);
      for (uint64_t i = 1; i < N; i += 2)
        tb_ev(&t, GTP_EV_TASK_END, base + 1000 * i + 5, (gen - 1) * 1000 + i, 0,
              0);
      tb_batch_end(&t);
    }
    tb_gen_end(&t, base + 999999999ull, 0, 0, 0);
  }
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"ph\":\"b\""), 3 * N);
  assert_int_equal(count(out.data, "\"ph\":\"e\""), 3 * N);
  /* Every e is named after its b; only generation 3's odd tasks are open. */
  assert_int_equal(count(out.data, "{\"name\":\"handoff\",\"cat\":\"task\""),
                   6 * N);
  assert_int_equal(count(out.data, "gentrace.begun_before_window"), 0);
  assert_int_equal(count(out.data, "\"gentrace.closed_at_window_end\":true"),
                   N / 2);
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__task_end_repeats_the_begin_name(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  /* The task begins in one generation and ends in the next, on another
   * thread: the string ids differ, the name must still match. */
  gen_begin(&t, 1, 0, "svc");
  tb_batch_begin(&t, 1, T0);
  tb_str(&t, "padding"); /* so "fetch" gets a different id in gen 1 */
  tb_ev(&t, GTP_EV_TASK_BEGIN, T0 + 10, 77, 3, tb_str(&t, "fetch"));
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 1000000000ull, 0, 0, 0);
  gen_begin(&t, 1, 1, "svc");
  tb_batch_begin(&t, 2, T0 + 1000000000ull);
  tb_ev(&t, GTP_EV_TASK_END, T0 + 1000000010ull, 77, 0, 0);
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 2000000000ull, 0, 0, 0);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_non_null(strstr(out.data, "{\"name\":\"fetch\",\"cat\":\"task\","
                                   "\"id\":\"0x4d\",\"ph\":\"b\""));
  assert_non_null(strstr(out.data, "{\"name\":\"fetch\",\"cat\":\"task\","
                                   "\"id\":\"0x4d\",\"ph\":\"e\""));
  assert_non_null(strstr(out.data, "\"args\":{\"task\":77,\"parent\":3}"));
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__nasty_strings_are_escaped(void **state) {
  (void)state;
  static const char nasty[] =
      "q\"b\\s/\x01\x1f\x7f tab\tnl\n"       /* quote, backslash, controls */
      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" /* valid 2, 3, 4 byte */
      "\xc0\x80"                             /* overlong NUL */
      "\xed\xa0\x80"                         /* surrogate */
      "\xf5\xff"                             /* never valid */
      "\xe2\x80\xa8"                         /* U+2028 */
      "\xe2\x82";                            /* truncated at the end */
  tb t;
  tb_init(&t);
  uint8_t id[16];
  tb_session(id, 1);
  tb_gen_begin(&t, id, 0, nasty, "h\"ost", 1, REAL0, T0);
  tb_batch_begin(&t, 1, T0);
  tb_ev(&t, GTP_EV_THREAD_NAME, T0 + 1, tb_str(&t, nasty), 0, 0);
  tb_ev(&t, GTP_EV_INSTANT, T0 + 2, tb_str(&t, nasty), 0, 0);
  tb_ev_msg(&t, GTP_EV_LOG, T0 + 3, tb_str(&t, nasty), 0, 0, nasty,
            sizeof nasty - 1);
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 1000, 0, 0, 0);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  static const char want[] =
      "q\\\"b\\\\s/\\u0001\\u001f\x7f tab\\u0009nl\\u000a"
      "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
      "\\ufffd\\ufffd"
      "\\ufffd\\ufffd\\ufffd"
      "\\ufffd\\ufffd"
      "\\u2028"
      "\\ufffd\\ufffd";
  /* thread name, instant name, log category, log message, service (in
   * process_name and in metadata) */
  assert_int_equal(count(out.data, want), 6);
  assert_non_null(strstr(out.data, "\"host\":\"h\\\"ost\""));
  free(out.data);
  tb_fini(&t);
}

static void test_json_escape__exact_bytes(void **state) {
  (void)state;
  struct {
    const char *in;
    size_t n;
    const char *want;
  } cases[] = {
      {"", 0, ""},
      {"plain", 5, "plain"},
      {"a\0b", 3, "a\\u0000b"},
      {"\"\\", 2, "\\\"\\\\"},
      {"\x80", 1, "\\ufffd"},
      {"\xe2\x82\xac", 3, "\xe2\x82\xac"},
      {"\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd"}, /* > U+10FFFF */
      {"\xe2\x80\xa9x", 4, "\\u2029x"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sinkbuf out = {0};
    sink(&out, "", 0);
    assert_int_equal(gtp_json_escape(sink, &out, cases[i].in, cases[i].n), 0);
    assert_string_equal(out.data, cases[i].want);
    free(out.data);
  }
}

static void test_chrome__sessions_get_distinct_pids(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  /* Interleaved: s1 g0, s2 g0, s3 g0, s1 g1 */
  every_kind(&t, 1, 0);
  every_kind(&t, 2, 0);
  every_kind(&t, 3, 0);
  every_kind(&t, 1, 1);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"name\":\"process_name\""), 3);
  assert_non_null(strstr(out.data, "\"pid\":1,\"tid\":0,\"args\":{\"name\":"
                                   "\"svc (host 101)\"}"));
  assert_non_null(strstr(out.data, "\"pid\":2,\"tid\":0,\"args\":{\"name\":"
                                   "\"svc (host 102)\"}"));
  assert_non_null(strstr(out.data, "\"pid\":3,\"tid\":0,\"args\":{\"name\":"
                                   "\"svc (host 103)\"}"));
  assert_null(strstr(out.data, "\"pid\":4"));
  /* Thread 7 of every session has its own name and region nesting. */
  assert_int_equal(count(out.data, "\"thread_name\""), 3);
  assert_int_equal(count(out.data, "\"ph\":\"B\""), 8);
  assert_int_equal(count(out.data, "\"ph\":\"E\""), 8);
  /* Metadata lists the sessions with their pid. */
  assert_non_null(strstr(out.data, "{\"session\":\"a0a1a2a3a4a5a6a7a8a9aaabacad"
                                   "0001\",\"pid\":1,\"service\":\"svc\","
                                   "\"host\":\"host\",\"os_pid\":101,"
                                   "\"generations\":2"));
  assert_non_null(strstr(out.data, "\"session\":\"a0a1a2a3a4a5a6a7a8a9aaabacad"
                                   "0003\",\"pid\":3"));
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__ledger_becomes_a_lost_event(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 4, "svc");
  tb_gen_end(&t, T0 + 4000000000ull + 1000, 3, 2, 1);
  gen_begin(&t, 1, 5, "svc");
  tb_gen_end(&t, T0 + 5000000000ull + 1000, 0, 0, 0); /* no ledger */
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "gentrace.lost"), 1);
  assert_non_null(strstr(out.data, "\"s\":\"p\",\"args\":{\"count\":6,"
                                   "\"dropped\":3,\"evicted\":2,"
                                   "\"rejected\":1,\"gen\":4}"));
  assert_non_null(strstr(out.data, "\"lost\":6}"));
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__empty_document_is_valid(void **state) {
  (void)state;
  sinkbuf out = {0};
  gtp_chrome *c = gtp_chrome_new(sink, &out, REAL0, 0);
  assert_non_null(c);
  assert_int_equal(gtp_chrome_begin(c), 0);
  assert_int_equal(gtp_chrome_begin(c), 0); /* idempotent */
  assert_int_equal(gtp_chrome_end(c), 0);
  assert_int_equal(gtp_chrome_end(c), GTP_E_STATE); /* nothing after end */
  gtp_chrome_free(c);
  assert_true(json_valid(out.data, out.len));
  assert_non_null(strstr(out.data, "\"traceEvents\":[\n\n]"));
  assert_non_null(strstr(out.data, "\"sessions\":[]"));
  free(out.data);
  gtp_chrome_free(NULL);
}

static void big_trace(tb *t, int n) {
  gen_begin(t, 1, 0, "svc");
  tb_batch_begin(t, 1, T0);
  for (int i = 0; i < n; i++)
    tb_ev(t, GTP_EV_COUNTER, T0 + (uint64_t)i * 10, tb_str(t, "c"), (uint64_t)i,
          0);
  tb_batch_end(t);
  tb_gen_end(t, T0 + (uint64_t)n * 10, 0, 0, 0);
}

static void test_chrome__streams_in_bounded_chunks(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  big_trace(&t, 5000);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"ph\":\"C\""), 5000);
  assert_true(out.len > 200000);
  assert_true(out.calls >= out.len / (16 << 10));
  assert_true(out.max_chunk <= 16 << 10);
  free(out.data);
  tb_fini(&t);
}

static void test_chrome__sink_error_stops_the_writer(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  big_trace(&t, 5000);
  sinkbuf out = {.fail_after = 2};
  gtp_chrome *c = gtp_chrome_new(sink, &out, 0, 0);
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, t.out.data, t.out.len), 0);
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  assert_int_equal(gtp_chrome_gen(c, &g), -EIO);
  size_t len = out.len;
  assert_int_equal(gtp_chrome_gen(c, &g), -EIO); /* sticky */
  assert_int_equal(gtp_chrome_end(c), -EIO);
  assert_int_equal(out.len, len); /* nothing written after the error */
  gtp_gen_fini(&g);
  gtp_chrome_free(c);
  free(out.data);
  tb_fini(&t);
}

static void
test_chrome__dangling_string_and_stack_ids_stay_valid(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 0, "svc");
  tb_batch_begin(&t, 1, T0);
  tb_ev(&t, GTP_EV_INSTANT, T0 + 1, 999, 0, 0);      /* no such string */
  tb_ev(&t, GTP_EV_INSTANT_STACK, T0 + 2, 0, 42, 0); /* no such stack */
  tb_ev_msg(&t, GTP_EV_LOG, T0 + 3, 0, 0, 0, "", 0);
  tb_batch_end(&t);
  tb_gen_end(&t, T0 + 1000, 0, 0, 0);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "{\"name\":\"\",\"ph\":\"i\""), 2);
  assert_non_null(strstr(out.data, "\"args\":{\"stack\":[]}"));
  assert_non_null(strstr(out.data, "\"args\":{\"message\":\"\"}"));
  free(out.data);
  tb_fini(&t);
}

/* More open tasks than the writer remembers: every b still gets its e
 * (without a name past the limit), and memory stays bounded. */
static void test_chrome__many_open_tasks_all_end(void **state) {
  (void)state;
  enum { N = 70000, PER_BATCH = 5000 };
  tb t;
  tb_init(&t);
  gen_begin(&t, 1, 0, "svc");
  uint64_t name = tb_str(&t, "t"), k = T0;
  for (int i = 0; i < N; i += PER_BATCH) {
    tb_batch_begin(&t, 1, k);
    for (int j = i; j < i + PER_BATCH; j++)
      tb_ev(&t, GTP_EV_TASK_BEGIN, ++k, (uint64_t)j + 1, 0, name);
    tb_batch_end(&t);
  }
  for (int i = 0; i < N; i += PER_BATCH) {
    tb_batch_begin(&t, 2, k);
    for (int j = i; j < i + PER_BATCH; j++)
      tb_ev(&t, GTP_EV_TASK_END, ++k, (uint64_t)j + 1, 0, 0);
    tb_batch_end(&t);
  }
  tb_gen_end(&t, k + 1, 0, 0, 0);
  sinkbuf out = {0};
  assert_int_equal(convert(&t, &out, 0, 0), 0);
  assert_true(json_valid(out.data, out.len));
  assert_int_equal(count(out.data, "\"ph\":\"b\""), N);
  assert_int_equal(count(out.data, "\"ph\":\"e\""), N);
  assert_int_equal(count(out.data, "{\"name\":\"t\",\"cat\":\"task\""),
                   N + 65536);
  free(out.data);
  tb_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validator__rejects_what_it_must),
      cmocka_unit_test(test_chrome__every_kind_is_written_once_per_event),
      cmocka_unit_test(test_chrome__ts_is_microseconds_with_three_decimals),
      cmocka_unit_test(test_chrome__open_region_closed_at_window_end),
      cmocka_unit_test(test_chrome__end_without_begin_opens_at_window_start),
      cmocka_unit_test(test_chrome__task_ends_before_begin_in_body_are_paired),
      cmocka_unit_test(test_chrome__task_end_repeats_the_begin_name),
      cmocka_unit_test(test_chrome__nasty_strings_are_escaped),
      cmocka_unit_test(test_json_escape__exact_bytes),
      cmocka_unit_test(test_chrome__sessions_get_distinct_pids),
      cmocka_unit_test(test_chrome__ledger_becomes_a_lost_event),
      cmocka_unit_test(test_chrome__empty_document_is_valid),
      cmocka_unit_test(test_chrome__streams_in_bounded_chunks),
      cmocka_unit_test(test_chrome__sink_error_stops_the_writer),
      cmocka_unit_test(test_chrome__dangling_string_and_stack_ids_stay_valid),
      cmocka_unit_test(test_chrome__many_open_tasks_all_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
