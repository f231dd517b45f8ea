/* gen_fixture.h: sample generations built with the real writer API, for any
 * test that needs valid trace bytes (format, frame, chrome, daemon, web,
 * tools). Header-only, static inline, no cmocka dependency.
 *
 *   gtf_spec s;
 *   gtf_spec_init(&s, 2, 41);        // session #2, generation 41
 *   gtp_wbuf b; gtp_wbuf_init(&b, 0);
 *   gtp_put_file_header(&b);
 *   gtf_generation(&b, &s);          // GEN_START + body + GEN_END
 *
 * Every generation holds, per thread, one EVENTS record with every event
 * type (THREAD_NAME, REGION_BEGIN/END, INSTANT, COUNTER with a negative
 * value, LOG, TASK_BEGIN/END, LOST; with s.stacks also the three *_STACK
 * kinds), plus STRINGS, STACKS and MODULES tables, one CLOCK and the ledger
 * from the spec. Everything is deterministic in (session number, gen), so a
 * test can rebuild the bytes it expects.
 *
 * For wire tests: gtf_body() writes only the body records (what BATCH frames
 * carry) and fills the GEN_END manifest (what the GEN_END frame carries).
 */
#ifndef GTF_GEN_FIXTURE_H
#define GTF_GEN_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "varint.h"

#define GTF_THREADS_MAX 16
/* Events per thread: 9 plain kinds, 4 more with stacks. */
#define GTF_EVENTS_PLAIN 9
#define GTF_EVENTS_STACKS 4

/* Fixed string ids of every fixture generation; thread names follow. */
enum {
  GTF_S_REQUEST = 1,
  GTF_S_TICK = 2,
  GTF_S_QUEUE = 3,
  GTF_S_HTTP = 4,
  GTF_S_HANDLE = 5,
  GTF_S_THREAD0 = 6, /* "worker-0" .. "worker-(threads-1)" */
};

typedef struct gtf_spec {
  uint8_t session[16];
  uint8_t session_key[16]; /* HELLO v2 key (tests/daemon/client.c) */
  uint64_t gen;
  const char *service, *host, *agent_version;
  uint64_t pid;
  uint64_t process_start_ns;
  uint64_t start_real_ns; /* wall clock at the generation start */
  uint64_t start_mono_ns;
  uint64_t period_ns;   /* generation length */
  uint64_t start_ticks; /* agent clock at the start; 1 tick = 4 ns */
  unsigned threads;     /* EVENTS records, 1..GTF_THREADS_MAX */
  int stacks;           /* add *_STACK events (the tables are always there) */
  uint64_t dropped, evicted, rejected;
} gtf_spec;

/* Deterministic session id for session number n, distinct for every
 * 32-bit n and never all zero. Byte 0 fixes n mod 256 (37 is odd, so
 * n -> n * 37 is a bijection mod 256) and bytes 12..14 carry n's upper 24
 * bits, so ids of n < 256 are the ones earlier tests were written with.
 * Bytes 0 and 1 differ (their terms differ by 11), so never all zero. */
static inline void gtf_session(uint8_t out[16], unsigned n) {
  for (unsigned i = 0; i < 16; i++)
    out[i] = (uint8_t)(0x5a ^ (n * 37u + i * 11u + 1u));
  out[12] ^= (uint8_t)(n >> 8);
  out[13] ^= (uint8_t)(n >> 16);
  out[14] ^= (uint8_t)(n >> 24);
}

/* Fills a spec for session number n and generation gen: one-second
 * generations back to back from 2026-01-01, three threads, stacks on. */
static inline void gtf_spec_init(gtf_spec *s, unsigned n, uint64_t gen) {
  memset(s, 0, sizeof(*s));
  gtf_session(s->session, n);
  /* Deterministic per session number, so every connection of one test
   * session proves the same ownership; tests of AUTH change it. */
  for (unsigned i = 0; i < 16; i++)
    s->session_key[i] = (uint8_t)(s->session[i] ^ 0xa5);
  s->gen = gen;
  s->service = n % 2 ? "checkout" : "frontend";
  s->host = "host-a";
  s->agent_version = "0.1.0";
  s->pid = 4000 + n;
  s->process_start_ns = 1767225600000000000ull;
  s->period_ns = 1000000000ull;
  s->start_real_ns = s->process_start_ns + (gen % 1000000) * s->period_ns;
  s->start_mono_ns = 5000000000ull + (gen % 1000000) * s->period_ns;
  s->start_ticks = s->start_mono_ns / 4;
  s->threads = 3;
  s->stacks = 1;
  s->dropped = gen % 3;
  s->evicted = gen % 2;
  s->rejected = 0;
}

static inline uint64_t gtf_thread_id(unsigned t) {
  return 1000 + t;
}

/* Events one fixture generation holds. */
static inline uint64_t gtf_events(const gtf_spec *s) {
  return (uint64_t)s->threads *
         (GTF_EVENTS_PLAIN + (s->stacks ? GTF_EVENTS_STACKS : 0));
}

/* Task id used by thread t's TASK_BEGIN/END. */
static inline uint64_t gtf_task_id(const gtf_spec *s, unsigned t) {
  return s->gen * 100 + t + 1;
}

/* Counter value of thread t: negative on purpose (zigzag). */
static inline int64_t gtf_counter_value(const gtf_spec *s, unsigned t) {
  return -(int64_t)(t + 1) * 1000 - (int64_t)(s->gen % 1000);
}

static inline int gtf_ev(uint8_t *buf, size_t *len, uint64_t *prev,
                         uint8_t type, uint64_t ticks, uint64_t a0, uint64_t a1,
                         uint64_t a2, const char *msg) {
  gtp_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.type = type;
  ev.ticks = ticks;
  ev.args[0] = a0;
  ev.args[1] = a1;
  ev.args[2] = a2;
  if (msg) {
    ev.msg = (const uint8_t *)msg;
    ev.msg_len = strlen(msg);
  }
  int n = gtp_event_encode(buf + *len, &ev, *prev);
  if (n < 0)
    return n;
  *len += (size_t)n;
  *prev = ticks;
  return 0;
}

/* One thread's EVENTS record. */
static inline int gtf_put_thread_batch(gtp_wbuf *b, const gtf_spec *s,
                                       unsigned t) {
  uint8_t buf[2048];
  size_t len = 0;
  uint64_t span = s->period_ns / 4; /* ticks in the generation */
  uint64_t base = s->start_ticks + t;
  uint64_t prev = base;
  uint64_t n = GTF_EVENTS_PLAIN + (s->stacks ? GTF_EVENTS_STACKS : 0);
  uint64_t step = span / (n + 1);
  uint64_t tk = base;
  char msg[96];
  int rc = 0;
  snprintf(msg, sizeof(msg), "GET /cart thread=%u gen=%llu", t,
           (unsigned long long)s->gen);
#define GTF_EV_(type, a0, a1, a2, m)                                           \
  do {                                                                         \
    tk += step;                                                                \
    if (rc == 0)                                                               \
      rc = gtf_ev(buf, &len, &prev, (type), tk, (a0), (a1), (a2), (m));        \
  } while (0)
  GTF_EV_(GTP_EV_THREAD_NAME, GTF_S_THREAD0 + t, 0, 0, NULL);
  GTF_EV_(GTP_EV_REGION_BEGIN, GTF_S_REQUEST, 0, 0, NULL);
  GTF_EV_(GTP_EV_INSTANT, GTF_S_TICK, 0, 0, NULL);
  GTF_EV_(GTP_EV_COUNTER, GTF_S_QUEUE, (uint64_t)gtf_counter_value(s, t), 0,
          NULL);
  GTF_EV_(GTP_EV_LOG, GTF_S_HTTP, 0, 0, msg);
  GTF_EV_(GTP_EV_TASK_BEGIN, gtf_task_id(s, t), 0, GTF_S_HANDLE, NULL);
  GTF_EV_(GTP_EV_TASK_END, gtf_task_id(s, t), 0, 0, NULL);
  GTF_EV_(GTP_EV_REGION_END, 0, 0, 0, NULL);
  GTF_EV_(GTP_EV_LOST, 3 + t, 0, 0, NULL);
  if (s->stacks) {
    GTF_EV_(GTP_EV_REGION_BEGIN_STACK, GTF_S_REQUEST, 1, 0, NULL);
    GTF_EV_(GTP_EV_INSTANT_STACK, GTF_S_TICK, 2, 0, NULL);
    GTF_EV_(GTP_EV_LOG_STACK, GTF_S_HTTP, 1, 0, "");
    GTF_EV_(GTP_EV_REGION_END, 0, 0, 0, NULL);
  }
#undef GTF_EV_
  if (rc < 0)
    return rc;
  return gtp_put_batch(b, s->gen, gtf_thread_id(t), base, n, buf, len);
}

/* Body records only; fills *end (gen, manifest and ledger). */
static inline int gtf_body(gtp_wbuf *b, const gtf_spec *s, gtp_gen_end *end) {
  static const char *const fixed[] = {"request", "tick", "queue_depth", "http",
                                      "handle"};
  char names[GTF_THREADS_MAX][16];
  uint64_t ids[5 + GTF_THREADS_MAX];
  gtp_str strs[5 + GTF_THREADS_MAX];
  size_t start = b->len, n = 0;
  unsigned threads =
      s->threads > GTF_THREADS_MAX ? GTF_THREADS_MAX : s->threads;
  int rc;
  /* First thread's batch before the tables: records come in any order. */
  if (threads > 0 && (rc = gtf_put_thread_batch(b, s, 0)) < 0)
    return rc;
  for (unsigned i = 0; i < 5; i++) {
    ids[n] = GTF_S_REQUEST + i;
    strs[n].ptr = fixed[i];
    strs[n++].len = strlen(fixed[i]);
  }
  for (unsigned t = 0; t < threads; t++) {
    snprintf(names[t], sizeof(names[t]), "worker-%u", t);
    ids[n] = GTF_S_THREAD0 + t;
    strs[n].ptr = names[t];
    strs[n++].len = strlen(names[t]);
  }
  /* Written in reverse id order so readers must sort. */
  for (size_t i = 0; i < n / 2; i++) {
    uint64_t ti = ids[i];
    gtp_str ts = strs[i];
    ids[i] = ids[n - 1 - i];
    strs[i] = strs[n - 1 - i];
    ids[n - 1 - i] = ti;
    strs[n - 1 - i] = ts;
  }
  if ((rc = gtp_put_strings(b, ids, strs, n)) < 0)
    return rc;
  for (unsigned t = 1; t < threads; t++)
    if ((rc = gtf_put_thread_batch(b, s, t)) < 0)
      return rc;
  {
    static const uint64_t st1[] = {0x401000, 0x401234, 0x7f0000001000ull};
    static const uint64_t st2[] = {0x402000};
    const uint64_t *pcs[] = {st2, st1};
    const size_t depths[] = {1, 3};
    const uint64_t sids[] = {2, 1};
    if ((rc = gtp_put_stacks(b, sids, pcs, depths, 2)) < 0)
      return rc;
  }
  {
    static const uint8_t bid[20] = {0xde, 0xad, 0xbe, 0xef, 1,  2, 3,
                                    4,    5,    6,    7,    8,  9, 10,
                                    11,   12,   13,   14,   15, 16};
    gtp_module m[2];
    memset(m, 0, sizeof(m));
    m[0].path.ptr = "/usr/bin/checkout";
    m[0].path.len = strlen(m[0].path.ptr);
    m[0].base = 0x400000;
    m[0].size = 0x10000;
    m[0].build_id = bid;
    m[0].build_id_len = sizeof(bid);
    m[1].path.ptr = "/lib/x86_64-linux-gnu/libc.so.6";
    m[1].path.len = strlen(m[1].path.ptr);
    m[1].base = 0x7f0000000000ull;
    m[1].size = 0x200000;
    if ((rc = gtp_put_modules(b, m, 2)) < 0)
      return rc;
  }
  {
    gtp_clock c;
    c.start_ticks = s->start_ticks;
    c.start_mono_ns = s->start_mono_ns;
    c.start_real_ns = s->start_real_ns;
    c.end_ticks = s->start_ticks + s->period_ns / 4;
    c.end_mono_ns = s->start_mono_ns + s->period_ns;
    c.end_real_ns = s->start_real_ns + s->period_ns;
    if ((rc = gtp_put_clock(b, &c)) < 0)
      return rc;
  }
  if (b->err)
    return b->err;
  memset(end, 0, sizeof(*end));
  end->gen = s->gen;
  end->dropped = s->dropped;
  end->evicted = s->evicted;
  end->rejected = s->rejected;
  return gtp_manifest_compute(b->data + start, b->len - start, end);
}

/* GEN_START from the spec's identity (what the daemon synthesizes from
 * HELLO). */
static inline int gtf_gen_start(gtp_wbuf *b, const gtf_spec *s) {
  gtp_gen_start gs;
  memset(&gs, 0, sizeof(gs));
  memcpy(gs.session, s->session, 16);
  gs.gen = s->gen;
  gs.service.ptr = s->service;
  gs.service.len = strlen(s->service);
  gs.host.ptr = s->host;
  gs.host.len = strlen(s->host);
  gs.agent_version.ptr = s->agent_version;
  gs.agent_version.len = strlen(s->agent_version);
  gs.pid = s->pid;
  gs.process_start_ns = s->process_start_ns;
  gs.ntags = 2;
  gs.tags[0].key = (gtp_str){"env", 3};
  gs.tags[0].value = (gtp_str){"prod", 4};
  gs.tags[1].key = (gtp_str){"zone", 4};
  gs.tags[1].value = (gtp_str){"eu-1", 4};
  return gtp_put_gen_start(b, &gs);
}

/* One whole stored generation: GEN_START + body + GEN_END. */
static inline int gtf_generation(gtp_wbuf *b, const gtf_spec *s) {
  gtp_gen_end end;
  int rc;
  if ((rc = gtf_gen_start(b, s)) < 0)
    return rc;
  if ((rc = gtf_body(b, s, &end)) < 0)
    return rc;
  return gtp_put_gen_end(b, &end);
}

/* A whole file: header, then for g in 0..ngens-1 one generation of every
 * session 0..nsessions-1 (interleaved, as a fleet window is), numbered
 * first_gen + g. */
static inline int gtf_file(gtp_wbuf *b, unsigned nsessions, unsigned ngens,
                           uint64_t first_gen) {
  int rc = gtp_put_file_header(b);
  for (unsigned g = 0; rc == 0 && g < ngens; g++) {
    for (unsigned n = 0; rc == 0 && n < nsessions; n++) {
      gtf_spec s;
      gtf_spec_init(&s, n, first_gen + g);
      s.threads = 1 + (n + g) % 3;
      s.stacks = (n + g) % 2 == 0;
      rc = gtf_generation(b, &s);
    }
  }
  return rc;
}

#endif /* GTF_GEN_FIXTURE_H */
