/* test_summary: proto/summary.c, the per-generation summary: statistics per
 * name, the span rule that search relies on, edges, and hostile input. */
#include "format_test.h"

#include "summary.h"

/* A hand-made generation: strings 1..4, batches of (thread, events). 1 tick
 * = 4 ns, as in gen_fixture.h. */
enum { S_CHECKOUT = 1, S_CART = 2, S_QUEUE = 3, S_HTTP = 4, S_JOB = 5 };

typedef struct tb {
  gtp_wbuf b;
  gtf_spec s;
  size_t body_start;
} tb;

static void tb_init_gen(tb *t, uint64_t gen) {
  gtf_spec_init(&t->s, 3, gen);
  gtp_wbuf_init(&t->b, 0);
  assert_int_equal(gtf_gen_start(&t->b, &t->s), 0);
  t->body_start = t->b.len;
  static const char *const names[] = {"checkout.pay", "cart", "queue", "http",
                                      "job"};
  uint64_t ids[5];
  gtp_str strs[5];
  for (int i = 0; i < 5; i++) {
    ids[i] = (uint64_t)i + 1;
    strs[i].ptr = names[i];
    strs[i].len = strlen(names[i]);
  }
  assert_int_equal(gtp_put_strings(&t->b, ids, strs, 5), 0);
}

static void tb_init(tb *t) {
  tb_init_gen(t, 7);
}

/* One batch of events given as (type, ticks-offset, a0, a1, a2) rows. */
typedef struct tev {
  uint8_t type;
  uint64_t at; /* ticks from the generation start */
  uint64_t a0, a1, a2;
} tev;

static void tb_batch(tb *t, uint64_t thread, const tev *e, size_t n) {
  uint8_t *buf = malloc(GTP_BATCH_MAX);
  size_t len = 0;
  uint64_t base = t->s.start_ticks, prev = base;
  for (size_t i = 0; i < n; i++)
    assert_int_equal(gtf_ev(buf, &len, &prev, e[i].type, base + e[i].at,
                            e[i].a0, e[i].a1, e[i].a2,
                            e[i].type == GTP_EV_LOG ? "m" : NULL),
                     0);
  assert_int_equal(gtp_put_batch(&t->b, t->s.gen, thread, base, n, buf, len),
                   0);
  free(buf);
}

/* Seals a tb's body (CLOCK, manifest over the bytes as they are, GEN_END)
 * without parsing it. */
static void tb_seal(tb *t) {
  gtp_clock c = {t->s.start_ticks,
                 t->s.start_mono_ns,
                 t->s.start_real_ns,
                 t->s.start_ticks + t->s.period_ns / 4,
                 t->s.start_mono_ns + t->s.period_ns,
                 t->s.start_real_ns + t->s.period_ns};
  assert_int_equal(gtp_put_clock(&t->b, &c), 0);
  gtp_gen_end end;
  memset(&end, 0, sizeof end);
  end.gen = t->s.gen;
  assert_int_equal(gtp_manifest_compute(t->b.data + t->body_start,
                                        t->b.len - t->body_start, &end),
                   0);
  assert_int_equal(gtp_put_gen_end(&t->b, &end), 0);
}

static void tb_parse(tb *t, gtp_gen *g) {
  tb_seal(t);
  size_t used;
  assert_int_equal(gtp_gen_parse(t->b.data, t->b.len, g, &used), 0);
}

static const gtp_sum_name *find(const gtp_summary *s, uint8_t kind,
                                const char *name) {
  for (size_t i = 0; i < s->nnames; i++)
    if (s->names[i].kind == kind && str_eq(s->names[i].name, name))
      return &s->names[i];
  return NULL;
}

#define MS_TICKS (1000000 / 4)

static void test_summary__slow_spans_among_fast_are_all_kept(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  /* 1000 fast "cart" regions (100 us), 3 slow "checkout.pay" (250 ms)
   * nested inside one of them across two batches of the same thread. */
  tev *e = calloc(3000, sizeof *e);
  size_t n = 0;
  uint64_t at = 10;
  for (int i = 0; i < 1000; i++) {
    e[n++] = (tev){GTP_EV_REGION_BEGIN, at, S_CART, 0, 0};
    at += 25000; /* 100 us */
    e[n++] = (tev){GTP_EV_REGION_END, at, 0, 0, 0};
    at += 10;
  }
  e[n++] = (tev){GTP_EV_REGION_BEGIN, at, S_CHECKOUT, 0, 0};
  tb_batch(&t, 7, e, n);
  n = 0;
  at += 250 * MS_TICKS;
  e[n++] = (tev){GTP_EV_REGION_END, at, 0, 0, 0};
  for (int i = 0; i < 2; i++) {
    e[n++] = (tev){GTP_EV_REGION_BEGIN, at, S_CHECKOUT, 0, 0};
    at += 250 * MS_TICKS;
    e[n++] = (tev){GTP_EV_REGION_END, at, 0, 0, 0};
  }
  e[n++] = (tev){GTP_EV_COUNTER, at + 1, S_QUEUE, (uint64_t)(int64_t)(-5), 0};
  e[n++] = (tev){GTP_EV_COUNTER, at + 2, S_QUEUE, (uint64_t)(int64_t)(9), 0};
  e[n++] = (tev){GTP_EV_COUNTER, at + 3, S_QUEUE, (uint64_t)(int64_t)(2), 0};
  e[n++] = (tev){GTP_EV_LOG, at + 4, S_HTTP, 0, 0};
  e[n++] = (tev){GTP_EV_LOG, at + 5, S_HTTP, 0, 0};
  tb_batch(&t, 7, e, n);
  free(e);
  gtp_gen g;
  tb_parse(&t, &g);
  gtp_summary s;
  assert_int_equal(gtp_summary_compute(&g, &s), 0);
  const gtp_sum_name *cart = find(&s, GTP_SUM_REGION, "cart");
  const gtp_sum_name *pay = find(&s, GTP_SUM_REGION, "checkout.pay");
  assert_non_null(cart);
  assert_non_null(pay);
  assert_int_equal(cart->count, 1000);
  assert_int_equal(cart->max_ns, 100000);
  assert_int_equal(cart->min_ns, 100000);
  assert_int_equal(cart->total_ns, 100000000);
  assert_int_equal(cart->hist[gtp_sum_bucket(100000)], 1000);
  assert_int_equal(pay->count, 3);
  assert_int_equal(pay->max_ns, 250000000);
  assert_int_equal(s.nspans, 3);
  for (size_t i = 0; i < s.nspans; i++) {
    assert_int_equal(s.spans[i].dur_ns, 250000000);
    assert_int_equal(s.spans[i].thread, 7);
    assert_ptr_equal(&s.names[s.spans[i].name], pay);
  }
  assert_int_equal(s.span_floor_ns, GTP_SUM_SPAN_FLOOR_NS);
  assert_int_equal(s.ncounters, 1);
  assert_int_equal(s.counters[0].min, -5);
  assert_int_equal(s.counters[0].max, 9);
  assert_int_equal(s.counters[0].last, 2);
  assert_int_equal(s.counters[0].count, 3);
  assert_int_equal(s.nlogs, 1);
  assert_int_equal(s.logs[0].count, 2);
  assert_int_equal(s.open_at_end, 0);
  assert_int_equal(s.unmatched_ends, 0);
  gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&t.b);
}

static void test_summary__tasks_pair_across_threads(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  tev a[] = {{GTP_EV_TASK_BEGIN, 100, 42, 0, S_JOB},
             {GTP_EV_TASK_BEGIN, 200, 43, 0, S_JOB},
             {GTP_EV_REGION_END, 300, 0, 0, 0}, /* begun before this gen */
             {GTP_EV_REGION_BEGIN, 400, S_CART, 0, 0}};
  tev b[] = {{GTP_EV_TASK_END, 100 + 2 * MS_TICKS, 42, 0, 0}};
  tb_batch(&t, 1, a, 4);
  tb_batch(&t, 2, b, 1);
  gtp_gen g;
  tb_parse(&t, &g);
  gtp_summary s;
  assert_int_equal(gtp_summary_compute(&g, &s), 0);
  const gtp_sum_name *job = find(&s, GTP_SUM_TASK, "job");
  assert_non_null(job);
  assert_int_equal(job->count, 1);
  assert_int_equal(job->max_ns, 2000000);
  assert_int_equal(s.nspans, 1);
  assert_int_equal(s.spans[0].thread, 1); /* where it began */
  assert_int_equal(s.open_at_end, 2);     /* task 43, region cart */
  assert_int_equal(s.unmatched_ends, 1);
  assert_null(find(&s, GTP_SUM_REGION, "cart"));
  gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&t.b);
}

static void
test_summary__over_the_cap_raises_floor_and_keeps_all_above(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  /* GTP_SUM_SPANS_MAX + 500 spans of 1..N ms, over several batches. */
  size_t total = GTP_SUM_SPANS_MAX + 500, done = 0;
  uint64_t at = 1;
  tev *e = calloc(4000, sizeof *e);
  while (done < total) {
    size_t n = 0;
    for (; n < 3000 && done < total; done++) {
      e[n++] = (tev){GTP_EV_REGION_BEGIN, at, S_CART, 0, 0};
      at += (done % 600 + 1) * MS_TICKS;
      e[n++] = (tev){GTP_EV_REGION_END, at, 0, 0, 0};
      at += 2;
    }
    tb_batch(&t, 9, e, n);
  }
  free(e);
  gtp_gen g;
  tb_parse(&t, &g);
  gtp_summary s;
  assert_int_equal(gtp_summary_compute(&g, &s), 0);
  assert_true(s.nspans <= GTP_SUM_SPANS_MAX);
  assert_true(s.span_floor_ns > GTP_SUM_SPAN_FLOOR_NS);
  /* Exactly the spans at or over the floor are kept (invariant 2). */
  uint64_t over = 0;
  const gtp_sum_name *cart = find(&s, GTP_SUM_REGION, "cart");
  assert_non_null(cart);
  assert_int_equal(cart->count, total);
  for (size_t i = 0; i < s.nspans; i++) {
    assert_true(s.spans[i].dur_ns >= s.span_floor_ns);
    if (i)
      assert_true(s.spans[i - 1].dur_ns >= s.spans[i].dur_ns);
  }
  for (size_t i = 0; i < total; i++)
    over += (i % 600 + 1) * 1000000 >= s.span_floor_ns;
  assert_int_equal(over, s.nspans);
  assert_int_equal(s.spans[0].dur_ns, 600000000);
  gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&t.b);
}

static void test_summary__buckets_cover_every_duration(void **state) {
  (void)state;
  assert_int_equal(gtp_sum_bucket(0), 0);
  assert_int_equal(gtp_sum_bucket(999), 0);
  assert_int_equal(gtp_sum_bucket(UINT64_MAX), GTP_SUM_BUCKETS - 1);
  uint64_t d[] = {1000,
                  1999,
                  2000,
                  2999,
                  3000,
                  4000,
                  123456789,
                  250000000,
                  3600ull * 1000000000ull,
                  9000ull * 1000000000ull};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
    unsigned b = gtp_sum_bucket(d[i]);
    assert_true(gtp_sum_bucket_lo(b) <= d[i]);
    assert_true(d[i] < gtp_sum_bucket_hi(b));
  }
  for (unsigned b = 2; b < GTP_SUM_BUCKETS; b++)
    if (b != 2) /* bucket 2 (the half of 1 us) is empty by construction */
      assert_true(gtp_sum_bucket_lo(b) == gtp_sum_bucket_hi(b - 1) || b == 3);
  uint64_t h[GTP_SUM_BUCKETS] = {0}, h2[GTP_SUM_BUCKETS] = {0};
  h[1] = 5;
  h[40] = 300;
  h[67] = 1;
  uint8_t buf[GTP_SUM_HIST_MAX];
  size_t n = gtp_sum_hist_encode(h, buf);
  assert_int_equal(gtp_sum_hist_decode(buf, n, h2), 0);
  assert_memory_equal(h, h2, sizeof h);
  assert_int_equal(gtp_sum_hist_decode(buf, n, h2), 0); /* merges */
  assert_int_equal(h2[40], 600);
  uint8_t bad[] = {200, 1};
  assert_int_equal(gtp_sum_hist_decode(bad, 2, h2), GTP_E_CORRUPT);
  uint8_t unordered[] = {5, 1, 4, 1};
  assert_int_equal(gtp_sum_hist_decode(unordered, 4, h2), GTP_E_CORRUPT);
  uint8_t trunc[] = {5, 0x80};
  assert_int_equal(gtp_sum_hist_decode(trunc, 2, h2), GTP_E_CORRUPT);
  assert_int_equal(gtp_sum_quantile(h, 0.5, 0), gtp_sum_bucket_hi(40));
  assert_int_equal(gtp_sum_quantile(h, 0.0001, 0), gtp_sum_bucket_hi(1));
}

static void test_summary__fixture_generation_matches_its_spec(void **state) {
  (void)state;
  gtf_spec sp;
  gtf_spec_init(&sp, 1, 41);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &sp), 0);
  gtp_gen g;
  size_t used;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, &used), 0);
  gtp_summary s;
  assert_int_equal(gtp_summary_compute(&g, &s), 0);
  const gtp_sum_name *req = find(&s, GTP_SUM_REGION, "request");
  assert_non_null(req);
  assert_int_equal(req->count, 2 * sp.threads);
  const gtp_sum_name *h = find(&s, GTP_SUM_TASK, "handle");
  assert_non_null(h);
  assert_int_equal(h->count, sp.threads);
  assert_int_equal(s.nlogs, 1);
  assert_int_equal(s.logs[0].count, 2 * sp.threads);
  gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

/* A region and a task begun in one generation and ended in the next are
 * paired by gtp_summary_carry and counted where they end. */
static void test_summary__carry_pairs_spans_across_generations(void **state) {
  (void)state;
  tb a, b;
  tb_init(&a);
  tev ea[] = {{GTP_EV_REGION_BEGIN, 10, S_CHECKOUT, 0, 0},
              {GTP_EV_REGION_BEGIN, 20, S_CART, 0, 0},
              {GTP_EV_TASK_BEGIN, 30, 42, 0, S_JOB}};
  tb_batch(&a, 7, ea, 3);
  gtp_gen ga;
  tb_parse(&a, &ga);
  gtp_summary sa;
  assert_int_equal(gtp_summary_compute(&ga, &sa), 0);
  assert_int_equal(sa.nopens, 3);
  gtp_sum_open *left = NULL;
  size_t nleft = 0;
  assert_int_equal(gtp_summary_carry(&sa, NULL, 0, &left, &nleft), 0);
  assert_int_equal(nleft, 3);

  tb_init_gen(&b, 8); /* gen_fixture: starts where gen 7 ended */
  tev eb[] = {{GTP_EV_REGION_END, 5 * MS_TICKS, 0, 0, 0}, /* closes cart */
              {GTP_EV_TASK_END, 6 * MS_TICKS, 42, 0, 0}};
  tb_batch(&b, 7, eb, 2);
  gtp_gen gb;
  tb_parse(&b, &gb);
  gtp_summary sb;
  assert_int_equal(gtp_summary_compute(&gb, &sb), 0);
  assert_int_equal(sb.unmatched_ends, 2);
  gtp_sum_open *left2 = NULL;
  size_t nleft2 = 0;
  assert_int_equal(gtp_summary_carry(&sb, left, nleft, &left2, &nleft2), 0);
  assert_int_equal(sb.unmatched_ends, 0);
  const gtp_sum_name *cart = find(&sb, GTP_SUM_REGION, "cart");
  const gtp_sum_name *job = find(&sb, GTP_SUM_TASK, "job");
  assert_non_null(cart);
  assert_non_null(job);
  assert_int_equal(cart->count, 1);
  /* 1 s - 20 ticks + 5 ms */
  assert_int_equal(cart->max_ns, 1000000000 - 80 + 5000000);
  assert_int_equal(job->max_ns, 1000000000 - 120 + 6000000);
  assert_int_equal(sb.nspans, 2);
  assert_int_equal(sb.spans[0].carried, 1);
  /* checkout.pay stays open. */
  assert_int_equal(nleft2, 1);
  assert_true(str_eq(left2[0].name, "checkout.pay"));
  free(left);
  free(left2);
  gtp_summary_fini(&sa);
  gtp_summary_fini(&sb);
  gtp_gen_fini(&ga);
  gtp_gen_fini(&gb);
  gtp_wbuf_fini(&a.b);
  gtp_wbuf_fini(&b.b);
}

/* Nesting past GTP_SUM_DEPTH_MAX stays bounded and the tracked levels still
 * pair; unknown and zero string ids become the empty name. */
static void test_summary__deep_nesting_and_unknown_names(void **state) {
  (void)state;
  tb t;
  tb_init(&t);
  size_t deep = GTP_SUM_DEPTH_MAX + 900, n = 0;
  tev *e = calloc(2 * deep + 4, sizeof *e);
  for (size_t i = 0; i < deep; i++)
    e[n++] = (tev){GTP_EV_REGION_BEGIN, 1 + i, S_CART, 0, 0};
  for (size_t i = 0; i < deep; i++)
    e[n++] = (tev){GTP_EV_REGION_END, 1 + deep + i, 0, 0, 0};
  e[n++] = (tev){GTP_EV_REGION_BEGIN, 3 * deep, 999, 0, 0}; /* unknown id */
  e[n++] = (tev){GTP_EV_REGION_END, 3 * deep + 1, 0, 0, 0};
  e[n++] = (tev){GTP_EV_TASK_END, 3 * deep + 2, 77, 0, 0}; /* never begun */
  e[n++] = (tev){GTP_EV_LOG, 3 * deep + 3, 0, 0, 0};
  tb_batch(&t, 3, e, n);
  free(e);
  gtp_gen g;
  tb_parse(&t, &g);
  gtp_summary s;
  assert_int_equal(gtp_summary_compute(&g, &s), 0);
  const gtp_sum_name *cart = find(&s, GTP_SUM_REGION, "cart");
  assert_non_null(cart);
  assert_int_equal(cart->count, GTP_SUM_DEPTH_MAX);
  assert_non_null(find(&s, GTP_SUM_REGION, ""));
  assert_int_equal(s.open_at_end, 0);
  assert_int_equal(s.unmatched_ends, 1);
  assert_int_equal(s.nends, 1);
  assert_int_equal(s.nlogs, 1);
  assert_int_equal(s.logs[0].name.len, 0);
  gtp_summary_fini(&s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&t.b);
}

/* Random event streams (valid encodings, arbitrary arguments, several
 * threads and batches): compute never fails on them and its counts add up;
 * carrying chains of them stays bounded. Run under ASan in CI. */
static void test_summary__random_streams_are_safe(void **state) {
  (void)state;
  rng_state = 0x9e3779b97f4a7c15ull;
  gtp_sum_open *prev = NULL;
  size_t nprev = 0;
  for (int round = 0; round < 200; round++) {
    tb t;
    tb_init(&t);
    tev e[300];
    for (int bt = 0; bt < 3; bt++) {
      uint64_t at = 1;
      size_t n = 0;
      for (; n < 300; n++) {
        at += rng() % 1000;
        uint8_t type = (uint8_t)(1 + rng() % (GTP_EV_COUNT_ - 1));
        e[n] = (tev){type, at, rng() % 8, rng() % 4, rng() % 7};
      }
      tb_batch(&t, rng() % 3, e, n);
    }
    gtp_gen g;
    tb_parse(&t, &g);
    gtp_summary s;
    assert_int_equal(gtp_summary_compute(&g, &s), 0);
    uint64_t total = 0;
    for (size_t i = 0; i < s.nnames; i++) {
      uint64_t h = 0;
      for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++)
        h += s.names[i].hist[b];
      assert_int_equal(h, s.names[i].count);
      total += s.names[i].count;
    }
    assert_true(s.nspans <= total);
    assert_true(s.nopens <= GTP_SUM_OPEN_MAX && s.nends <= GTP_SUM_OPEN_MAX);
    gtp_sum_open *left = NULL;
    size_t nleft = 0;
    assert_int_equal(gtp_summary_carry(&s, prev, nprev, &left, &nleft), 0);
    assert_true(nleft <= GTP_SUM_OPEN_MAX);
    /* left borrows names from this generation: copy what the next round
     * needs the way the store does (here: drop the names). */
    for (size_t i = 0; i < nleft; i++)
      left[i].name = (gtp_str){"", 0};
    free(prev);
    prev = left;
    nprev = nleft;
    gtp_summary_fini(&s);
    gtp_gen_fini(&g);
    gtp_wbuf_fini(&t.b);
  }
  free(prev);
}

/* ------------------------------------------- one walk against two passes */

static void assert_str_equal(gtp_str a, gtp_str b) {
  assert_int_equal(a.len, b.len);
  if (a.len)
    assert_memory_equal(a.ptr, b.ptr, a.len);
}

/* Every field of two summaries (names borrowed from the same bytes). */
static void assert_summary_equal(const gtp_summary *a, const gtp_summary *b) {
  assert_int_equal(a->nnames, b->nnames);
  for (size_t i = 0; i < a->nnames; i++) {
    const gtp_sum_name *x = &a->names[i], *y = &b->names[i];
    assert_int_equal(x->kind, y->kind);
    assert_str_equal(x->name, y->name);
    assert_int_equal(x->count, y->count);
    assert_int_equal(x->total_ns, y->total_ns);
    assert_int_equal(x->min_ns, y->min_ns);
    assert_int_equal(x->max_ns, y->max_ns);
    assert_memory_equal(x->hist, y->hist, sizeof x->hist);
  }
  assert_int_equal(a->ncounters, b->ncounters);
  for (size_t i = 0; i < a->ncounters; i++) {
    const gtp_sum_counter *x = &a->counters[i], *y = &b->counters[i];
    assert_str_equal(x->name, y->name);
    assert_int_equal(x->count, y->count);
    assert_int_equal(x->min, y->min);
    assert_int_equal(x->max, y->max);
    assert_int_equal(x->last, y->last);
    assert_int_equal(x->last_ticks, y->last_ticks);
  }
  assert_int_equal(a->nlogs, b->nlogs);
  for (size_t i = 0; i < a->nlogs; i++) {
    assert_str_equal(a->logs[i].name, b->logs[i].name);
    assert_int_equal(a->logs[i].count, b->logs[i].count);
  }
  assert_int_equal(a->nspans, b->nspans);
  for (size_t i = 0; i < a->nspans; i++) { /* fields: padding differs */
    assert_int_equal(a->spans[i].name, b->spans[i].name);
    assert_int_equal(a->spans[i].thread, b->spans[i].thread);
    assert_int_equal(a->spans[i].start_ns, b->spans[i].start_ns);
    assert_int_equal(a->spans[i].dur_ns, b->spans[i].dur_ns);
    assert_int_equal(a->spans[i].carried, b->spans[i].carried);
  }
  assert_int_equal(a->span_floor_ns, b->span_floor_ns);
  assert_int_equal(a->open_at_end, b->open_at_end);
  assert_int_equal(a->unmatched_ends, b->unmatched_ends);
  assert_int_equal(a->nopens, b->nopens);
  for (size_t i = 0; i < a->nopens; i++) {
    assert_int_equal(a->opens[i].kind, b->opens[i].kind);
    assert_str_equal(a->opens[i].name, b->opens[i].name);
    assert_int_equal(a->opens[i].key, b->opens[i].key);
    assert_int_equal(a->opens[i].thread, b->opens[i].thread);
    assert_int_equal(a->opens[i].start_ns, b->opens[i].start_ns);
  }
  assert_int_equal(a->nends, b->nends);
  for (size_t i = 0; i < a->nends; i++) {
    assert_int_equal(a->ends[i].kind, b->ends[i].kind);
    assert_int_equal(a->ends[i].key, b->ends[i].key);
    assert_int_equal(a->ends[i].end_ns, b->ends[i].end_ns);
  }
}

/* Counters as the plain decoder sees them (gtp_event_next, every batch):
 * the summary's count, min and max per counter must be these. */
static void assert_counters_as_decoded(const gtp_gen *g, const gtp_summary *s) {
  for (size_t c = 0; c < s->ncounters; c++) {
    uint64_t n = 0;
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    size_t cur = 0;
    gtp_batch b;
    while (gtp_gen_next_batch(g, &cur, &b) == 1) {
      gtp_event_iter it;
      gtp_event ev;
      gtp_event_iter_init(&it, &b);
      while (gtp_event_next(&it, &ev) == 1) {
        gtp_str nm = gtp_gen_string(g, ev.args[0]);
        if (ev.type != GTP_EV_COUNTER || nm.len != s->counters[c].name.len ||
            (nm.len && memcmp(nm.ptr, s->counters[c].name.ptr, nm.len)))
          continue;
        n++;
        mn = (int64_t)ev.args[1] < mn ? (int64_t)ev.args[1] : mn;
        mx = (int64_t)ev.args[1] > mx ? (int64_t)ev.args[1] : mx;
      }
    }
    assert_int_equal(s->counters[c].count, n);
    assert_int_equal(s->counters[c].min, mn);
    assert_int_equal(s->counters[c].max, mx);
  }
}

/* gentraced's one pass (gtp_gen_parse_lazy, then the summary's walk checks
 * and summarizes the events) against the two passes it replaced
 * (gtp_gen_parse checks them, then gtp_summary_compute summarizes): the
 * same verdict on the events, and for valid ones the same summary. 1 when
 * the bytes are a valid generation. */
static int one_pass_is_two(const uint8_t *p, size_t n) {
  gtp_gen full, lazy;
  size_t u1 = 0, u2 = 0;
  int rf = gtp_gen_parse(p, n, &full, &u1);
  if (gtp_gen_parse_lazy(p, n, &lazy, &u2) < 0) {
    assert_true(rf < 0); /* the lazy parse checks a subset */
    return 0;
  }
  int check = 1;
  gtp_summary one, two;
  int r1 = gtp_summary_compute_check(&lazy, &one, &check);
  assert_int_equal(check == 0, rf == 0);
  assert_int_equal(gtp_gen_check_events(&lazy) == 0, rf == 0);
  if (rf < 0) {
    assert_int_equal(r1, check);
    assert_int_equal(one.nnames + one.ncounters + one.nlogs + one.nspans, 0);
    gtp_gen_fini(&lazy);
    return 0;
  }
  int r2 = gtp_summary_compute(&full, &two);
  assert_int_equal(r1, r2);
  if (r1 == 0) {
    assert_summary_equal(&one, &two);
    assert_counters_as_decoded(&full, &one);
    gtp_summary_fini(&one);
    gtp_summary_fini(&two);
  }
  gtp_gen_fini(&full);
  gtp_gen_fini(&lazy);
  return 1;
}

/* A random generation: batches of any event kind on a few threads, runs of
 * counters of one name with values of every size and sign (B1's events),
 * regions nesting and unbalanced; with mutate, random bytes of the events
 * overwritten before the manifest is sealed over them, so only the events
 * can be wrong (bad varints, types, truncated messages, wrapping time). */
static void random_gen(tb *t, int mutate) {
  tb_init_gen(t, 7);
  size_t at_ev[6], len_ev[6], nb = 1 + rng() % 6;
  tev *e = calloc(2000, sizeof *e);
  for (size_t k = 0; k < nb; k++) {
    uint64_t at = 1 + rng() % 100;
    size_t n = 1 + rng() % 2000;
    for (size_t i = 0; i < n; i++) {
      at += rng() % (rng() % 4 ? 300 : 3000000);
      unsigned pick = (unsigned)(rng() % 10);
      if (pick < 5) { /* a counter, mostly of one name */
        int64_t v = (int64_t)(rng() >> (rng() % 64));
        if (rng() % 3 == 0)
          v = -v;
        e[i] = (tev){GTP_EV_COUNTER, at, rng() % 8 ? S_QUEUE : 1 + rng() % 6,
                     (uint64_t)v, 0};
      } else if (pick < 8) {
        e[i] = (tev){
            (uint8_t)(pick == 5 ? GTP_EV_REGION_END : GTP_EV_REGION_BEGIN), at,
            1 + rng() % 6, 0, 0};
      } else {
        e[i] = (tev){(uint8_t)(1 + rng() % (GTP_EV_COUNT_ - 1)), at, rng() % 7,
                     rng() % 4, rng() % 7};
      }
    }
    tb_batch(t, rng() % 3, e, n);
    /* The events are the record's last bytes; gtf_ev wrote them. */
    size_t ev_bytes = 0;
    gtp_record rec;
    gtp_batch b;
    size_t off = t->b.len;
    for (size_t q = t->body_start; q < off; q += rec.size) {
      assert_int_equal(gtp_record_parse(t->b.data + q, off - q, &rec), 0);
      if (q + rec.size == off) {
        assert_int_equal(gtp_batch_decode(rec.payload, rec.len, &b), 0);
        ev_bytes = b.events_len;
      }
    }
    at_ev[k] = off - ev_bytes;
    len_ev[k] = ev_bytes;
  }
  free(e);
  if (mutate) {
    /* Random bytes mostly decode into an unknown type soon (which ends a
     * batch without error): also plant, at an event's start, an event
     * that must fail (an 11-byte varint, a log message over GTP_LOG_MAX,
     * a delta that wraps time). */
    static const uint8_t bad[3][12] = {
        {GTP_EV_COUNTER, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0x01},
        {GTP_EV_LOG, 0x00, 0x01, 0x80, 0x80, 0x01},
        {GTP_EV_REGION_END, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0x01}};
    size_t k = rng() % nb;
    unsigned how = (unsigned)(rng() % 4);
    if (how < 3 && len_ev[k] > 12) {
      size_t pos = at_ev[k], left = len_ev[k], skip = rng() % 50;
      const uint8_t *q = t->b.data + pos, *qe = q + left;
      for (size_t i = 0; i < skip && qe - q > 12; i++) { /* event starts */
        gtp_event_iter it = {q, qe, 0, 1};
        gtp_event ev;
        if (gtp_event_next(&it, &ev) != 1)
          break;
        q = it.p;
      }
      if (qe - q > 12)
        memcpy((uint8_t *)q, bad[how], sizeof bad[how]);
    } else {
      unsigned flips = 1 + (unsigned)(rng() % 16);
      for (unsigned f = 0; f < flips; f++) {
        k = rng() % nb;
        if (len_ev[k])
          t->b.data[at_ev[k] + rng() % len_ev[k]] =
              (uint8_t)(rng() % 2 ? 0xff : rng());
      }
    }
  }
}

static void test_summary__one_walk_equals_parse_then_summary(void **state) {
  (void)state;
  rng_state = 0x2545f4914f6cdd1dull;
  unsigned valid = 0, invalid = 0;
  /* Random generations, whole and with damaged events. */
  for (int round = 0; round < 400; round++) {
    tb t;
    random_gen(&t, round % 2);
    tb_seal(&t);
    if (one_pass_is_two(t.b.data, t.b.len))
      valid++;
    else
      invalid++;
    gtp_wbuf_fini(&t.b);
  }
  /* Real ones: the fixture's generations (every event kind, with and
   * without stacks, several threads). */
  for (unsigned th = 1; th <= 4; th++) {
    gtf_spec s;
    gtf_spec_init(&s, th, 10 + th);
    s.threads = th;
    s.stacks = th % 2;
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(gtf_generation(&b, &s), 0);
    assert_true(one_pass_is_two(b.data, b.len));
    gtp_wbuf_fini(&b);
  }
  /* Both sides were met often: the comparison is not vacuous. */
  print_message("%u valid, %u invalid\n", valid, invalid);
  assert_true(valid > 100);
  assert_true(invalid > 50);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary__slow_spans_among_fast_are_all_kept),
      cmocka_unit_test(test_summary__tasks_pair_across_threads),
      cmocka_unit_test(
          test_summary__over_the_cap_raises_floor_and_keeps_all_above),
      cmocka_unit_test(test_summary__buckets_cover_every_duration),
      cmocka_unit_test(test_summary__fixture_generation_matches_its_spec),
      cmocka_unit_test(test_summary__carry_pairs_spans_across_generations),
      cmocka_unit_test(test_summary__deep_nesting_and_unknown_names),
      cmocka_unit_test(test_summary__random_streams_are_safe),
      cmocka_unit_test(test_summary__one_walk_equals_parse_then_summary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
