/* demo_gen.c: see demo_gen.h. */
#include "config.h"

#include "demo_gen.h"

#include <stdio.h>
#include <string.h>

#include "../tests/lib/prng.h"

#define SEC INT64_C(1000000000)
#define TPN 5 /* ticks per 2 ns: a 2.5 GHz TSC */
#define US(x) ((uint64_t)(x)*1000 * TPN / 2)
#define WORKERS 4
#define NTHREADS (WORKERS + 2) /* + acceptor, mailer */
#define ACCEPTOR WORKERS
#define MAILER (WORKERS + 1)

enum {
  S_REQUEST = 1,
  S_PARSE,
  S_AUTH,
  S_DB,
  S_QUERY,
  S_RENDER,
  S_RECEIPT,
  S_HTTP,
  S_LATENCY,
  S_QDEPTH,
  S_SMTP,
  S_ERROR,
  S_W0,
  S_ACCEPTOR = S_W0 + WORKERS,
  S_MAILER,
  S_COUNT
};

typedef struct th {
  uint8_t ev[GTP_BATCH_MAX];
  size_t len;
  uint64_t n, base, prev, now;
  int named;
} th;

typedef struct gen_state {
  gtp_wbuf *b;
  uint64_t gen;
  uint64_t x; /* PRNG */
  size_t out; /* event bytes flushed */
  th t[NTHREADS];
} gen_state;

static uint32_t rnd(gen_state *s, uint32_t n) {
  return (uint32_t)((lcg64(&s->x) >> 33) % n);
}

static void flush(gen_state *s, unsigned k) {
  th *t = &s->t[k];
  if (t->n == 0)
    return;
  gtp_put_batch(s->b, s->gen, 100 + k, t->base, t->n, t->ev, t->len);
  s->out += t->len;
  t->len = 0;
  t->n = 0;
  t->base = t->prev;
}

/* Appends one event to thread k at its clock (made monotonic). */
static void put(gen_state *s, unsigned k, uint8_t type, uint64_t a0,
                uint64_t a1, uint64_t a2, const char *msg) {
  th *t = &s->t[k];
  size_t mlen = msg != NULL ? strlen(msg) : 0;
  if (t->len + 2 * GTP_EVENT_MAX + mlen > sizeof t->ev)
    flush(s, k);
  if (!t->named) {
    t->named = 1;
    put(s, k, GTP_EV_THREAD_NAME, S_W0 + k, 0, 0, NULL);
  }
  if (t->now < t->prev)
    t->now = t->prev;
  gtp_event e = {0};
  e.type = type;
  e.ticks = t->now;
  e.args[0] = a0;
  e.args[1] = a1;
  e.args[2] = a2;
  e.msg = (const uint8_t *)msg;
  e.msg_len = mlen;
  int w = gtp_event_encode(t->ev + t->len, &e, t->prev);
  if (w > 0) {
    t->len += (size_t)w;
    t->n++;
    t->prev = t->now;
  }
}

/* The timestamps of a real demo trace on a VM move in steps of about
 * 24.6 ns (the guest's clock source), so their low bits carry little:
 * every delta here is a whole number of such quanta. */
#define Q 61 /* ticks */

/* The demo's spin_us(lo + rand() % span): whole microseconds plus a quantum
 * or two its clock loop overshoots. */
static void spin(gen_state *s, unsigned k, unsigned lo_us, unsigned span_us) {
  s->t[k].now += US(lo_us + rnd(s, span_us)) / Q * Q + Q * rnd(s, 3);
}

/* Between two trace calls with nothing in between: 1-6 quanta, mostly 1
 * or 2 (25-150 ns). */
static void step(gen_state *s, unsigned k) {
  s->t[k].now += Q * (1 + rnd(s, 2) + (rnd(s, 4) == 0 ? rnd(s, 4) : 0));
}

/* One request as examples/demo.c's handle() traces it, on worker w. */
static void request(gen_state *s, unsigned w, uint64_t req) {
  static const char *const routes[] = {"/index.html", "/api/users",
                                       "/api/orders", "/static/app.js"};
  th *t = &s->t[w];
  th *acc = &s->t[ACCEPTOR];
  /* The acceptor queued it a little earlier. */
  acc->now = t->now > US(20) ? t->now - US(20) - Q * rnd(s, 8) : t->now;
  put(s, ACCEPTOR, GTP_EV_COUNTER, S_QDEPTH, 1 + rnd(s, 3), 0, NULL);
  uint64_t t0 = t->now;
  put(s, w, GTP_EV_REGION_BEGIN, S_REQUEST, 0, 0, NULL);
  step(s, w);
  put(s, w, GTP_EV_REGION_BEGIN, S_PARSE, 0, 0, NULL);
  spin(s, w, 5, 20);
  put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  step(s, w);
  put(s, w, GTP_EV_REGION_BEGIN, S_AUTH, 0, 0, NULL);
  spin(s, w, 10, 30);
  if (rnd(s, 200) == 0) {
    put(s, w, GTP_EV_LOG, S_AUTH, 0, 0, "token expired; refusing request");
    put(s, w, GTP_EV_INSTANT, S_ERROR, 0, 0, NULL);
    put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
    put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
    return;
  }
  put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  step(s, w);
  put(s, w, GTP_EV_REGION_BEGIN, S_DB, 0, 0, NULL);
  unsigned q = 1 + rnd(s, 3);
  for (unsigned i = 0; i < q; i++) {
    step(s, w);
    put(s, w, GTP_EV_REGION_BEGIN, S_QUERY, 0, 0, NULL);
    spin(s, w, 20, 80);
    put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  }
  put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  step(s, w);
  put(s, w, GTP_EV_REGION_BEGIN, S_RENDER, 0, 0, NULL);
  spin(s, w, 10, 50);
  put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  uint64_t task = (s->gen << 32) | req;
  step(s, w);
  put(s, w, GTP_EV_TASK_BEGIN, task, 0, S_RECEIPT, NULL);
  char msg[64];
  snprintf(msg, sizeof msg, "GET %s 200 req=%llu", routes[rnd(s, 4)],
           (unsigned long long)req);
  step(s, w);
  put(s, w, GTP_EV_LOG, S_HTTP, 0, 0, msg);
  step(s, w);
  put(s, w, GTP_EV_COUNTER, S_LATENCY,
      (t->now - t0) * 2 / TPN / 1000 + rnd(s, 10), 0, NULL);
  put(s, w, GTP_EV_REGION_END, 0, 0, 0, NULL);
  /* The mailer finishes the task a millisecond or two later. */
  th *m = &s->t[MAILER];
  if (m->now < t->now + US(1000))
    m->now = t->now + US(1000) + Q * rnd(s, (uint32_t)US(3000) / Q);
  put(s, MAILER, GTP_EV_REGION_BEGIN, S_SMTP, 0, 0, NULL);
  spin(s, MAILER, 20, 20);
  put(s, MAILER, GTP_EV_TASK_END, task, 0, 0, NULL);
  put(s, MAILER, GTP_EV_REGION_END, 0, 0, 0, NULL);
}

int demo_gen_build(gtp_wbuf *b, const uint8_t session[16], uint64_t gen,
                   int64_t t0_ns, size_t bytes, gtp_gen_end *end) {
  static const char *const names[S_COUNT] = {
      NULL,          "request",   "parse",        "auth",     "db",
      "db.query",    "render",    "send_receipt", "http",     "latency_us",
      "queue_depth", "smtp.send", "error",        "worker-0", "worker-1",
      "worker-2",    "worker-3",  "acceptor",     "mailer"};
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, session, 16);
  gs.gen = gen;
  gs.service = (gtp_str){"bench", 5};
  gs.host = (gtp_str){"bench-host", 10};
  gs.agent_version = (gtp_str){"0.1.0", 5};
  gs.pid = 4242;
  gs.process_start_ns = (uint64_t)t0_ns;
  if (gtp_put_gen_start(b, &gs) < 0)
    return -1;
  size_t body = b->len;
  uint64_t ids[S_COUNT - 1];
  gtp_str strs[S_COUNT - 1];
  for (int i = 1; i < S_COUNT; i++) {
    ids[i - 1] = (uint64_t)i;
    strs[i - 1] = (gtp_str){names[i], strlen(names[i])};
  }
  gtp_put_strings(b, ids, strs, S_COUNT - 1);
  static gen_state s; /* 400 KiB: one generation at a time (the bench) */
  s.b = b;
  s.gen = gen;
  s.x = gen * 2654435761u + 7;
  s.out = 0;
  uint64_t base = US(1000000) * (gen + 1);
  for (unsigned k = 0; k < NTHREADS; k++) {
    th *t = &s.t[k];
    memset(t, 0, sizeof *t);
    t->base = t->prev = t->now = base;
  }
  uint64_t req = 0;
  size_t pending = 0;
  while (s.out + pending < bytes) {
    /* The next request goes to the worker free first, after a gap. */
    unsigned w = 0;
    for (unsigned k = 1; k < WORKERS; k++)
      if (s.t[k].now < s.t[w].now)
        w = k;
    spin(&s, w, 5, 300);
    request(&s, w, ++req);
    pending = 0;
    for (unsigned k = 0; k < NTHREADS; k++)
      pending += s.t[k].len;
  }
  uint64_t last = base;
  for (unsigned k = 0; k < NTHREADS; k++) {
    flush(&s, k);
    if (s.t[k].prev > last)
      last = s.t[k].prev;
  }
  /* The clock spans the events (well under a second of them). */
  uint64_t span = last - base + 1;
  uint64_t span_ns = span * 2 / TPN;
  gtp_clock c = {base,
                 (uint64_t)(gen + 1) * SEC,
                 (uint64_t)t0_ns + gen * (uint64_t)SEC,
                 base + span,
                 (uint64_t)(gen + 1) * SEC + span_ns,
                 (uint64_t)t0_ns + gen * (uint64_t)SEC + span_ns};
  gtp_put_clock(b, &c);
  memset(end, 0, sizeof *end);
  end->gen = gen;
  if (b->err || gtp_manifest_compute(b->data + body, b->len - body, end) < 0)
    return -1;
  return gtp_put_gen_end(b, end);
}
