/* test_format_gen: proto/format.c, whole generations: parsing, the manifest and
 * every inconsistency between them. */
#include "format_test.h"

/* ---------------------------------------------------------- generations */

static void check_fixture_gen(const gtp_gen *g, const gtf_spec *s) {
  assert_memory_equal(g->start.session, s->session, 16);
  assert_true(g->start.gen == s->gen && g->end.gen == s->gen);
  assert_true(str_eq(g->start.service, s->service));
  assert_true(str_eq(g->start.host, s->host));
  assert_true(g->start.pid == s->pid);
  assert_int_equal(g->start.ntags, 2);
  assert_true(str_eq(g->start.tags[1].value, "eu-1"));
  assert_true(g->clock.start_real_ns == s->start_real_ns);
  assert_true(g->end.events == gtf_events(s));
  assert_true(g->end.batches == s->threads);
  assert_true(g->end.records == s->threads + 4);
  assert_true(g->end.dropped == s->dropped && g->end.evicted == s->evicted);
  assert_int_equal(g->nstrings, 5 + s->threads);
  for (size_t i = 0; i < g->nstrings; i++)
    assert_true(g->strings[i].id == i + 1); /* sorted */
  assert_true(str_eq(gtp_gen_string(g, GTF_S_QUEUE), "queue_depth"));
  assert_true(str_eq(gtp_gen_string(g, GTF_S_THREAD0), "worker-0"));
  assert_null(gtp_gen_string(g, 0).ptr);
  assert_null(gtp_gen_string(g, 1000).ptr);
  assert_int_equal(g->nstacks, 2);
  const gtp_stack_ent *st = gtp_gen_stack(g, 1);
  assert_non_null(st);
  assert_int_equal(st->nframes, 3);
  const uint8_t *fp = st->frames;
  uint64_t pc;
  assert_int_equal(gtp_uvarint_get(&fp, st->frames + st->frames_len, &pc), 0);
  assert_true(pc == 0x401000);
  assert_null(gtp_gen_stack(g, 3));
  assert_int_equal(g->nmodules, 2);
  assert_int_equal(g->modules[0].build_id_len, 20);
  assert_true(g->base + g->size ==
              g->body + g->body_len +
                  (g->size - (size_t)(g->body - g->base) - g->body_len));
}

static void test_gen_parse__fixture_generation_is_complete(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 1, 41);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g;
  size_t used = 0;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, &used), 0);
  assert_int_equal(used, b.len);
  assert_int_equal(g.size, b.len);
  assert_ptr_equal(g.base, b.data);
  check_fixture_gen(&g, &s);
  /* The manifest's CRC is the CRC of the body bytes. */
  assert_int_equal(gtp_crc32c(0, g.body, g.body_len), g.end.crc);
  assert_true(g.end.bytes == g.body_len);
  gtp_gen_fini(&g);
  assert_null(g.strings);
  gtp_wbuf_fini(&b);
}

static void
test_gen_parse__every_event_decodes_in_order_with_its_args(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 7);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  static const uint8_t want[] = {
      GTP_EV_THREAD_NAME,   GTP_EV_REGION_BEGIN,
      GTP_EV_INSTANT,       GTP_EV_COUNTER,
      GTP_EV_LOG,           GTP_EV_TASK_BEGIN,
      GTP_EV_TASK_END,      GTP_EV_REGION_END,
      GTP_EV_LOST,          GTP_EV_REGION_BEGIN_STACK,
      GTP_EV_INSTANT_STACK, GTP_EV_LOG_STACK,
      GTP_EV_REGION_END};
  size_t cur = 0;
  gtp_batch bt;
  unsigned nb = 0;
  int seen[GTF_THREADS_MAX] = {0};
  while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
    unsigned t = (unsigned)(bt.thread - 1000);
    assert_true(t < s.threads);
    seen[t]++;
    nb++;
    gtp_event_iter it;
    gtp_event ev;
    uint64_t last = bt.base_ticks;
    size_t k = 0;
    int rc;
    gtp_event_iter_init(&it, &bt);
    while ((rc = gtp_event_next(&it, &ev)) == 1) {
      assert_true(k < sizeof(want));
      assert_int_equal(ev.type, want[k]);
      assert_true(ev.ticks > last);
      last = ev.ticks;
      int64_t wall = gtp_gen_wall_ns(&g, ev.ticks);
      assert_true(wall > (int64_t)s.start_real_ns &&
                  wall < (int64_t)(s.start_real_ns + s.period_ns));
      if (ev.type == GTP_EV_COUNTER)
        assert_true((int64_t)ev.args[1] == gtf_counter_value(&s, t));
      if (ev.type == GTP_EV_TASK_BEGIN) {
        assert_true(ev.args[0] == gtf_task_id(&s, t));
        assert_true(str_eq(gtp_gen_string(&g, ev.args[2]), "handle"));
      }
      if (ev.type == GTP_EV_THREAD_NAME)
        assert_int_equal(gtp_gen_string(&g, ev.args[0]).ptr[7], '0' + t);
      if (ev.type == GTP_EV_LOG) {
        assert_true(ev.msg_len > 10);
        assert_memory_equal(ev.msg, "GET /cart", 9);
      }
      if (ev.type == GTP_EV_LOST)
        assert_true(ev.args[0] == 3 + t);
      if (gtp_event_info_get(ev.type)->stack_arg)
        assert_non_null(gtp_gen_stack(
            &g, ev.args[gtp_event_info_get(ev.type)->stack_arg - 1]));
      k++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(k, sizeof(want));
  }
  assert_int_equal(nb, s.threads);
  for (unsigned t = 0; t < s.threads; t++)
    assert_int_equal(seen[t], 1);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__arbitrary_generation_numbers(void **state) {
  (void)state;
  const uint64_t gens[] = {0,         1, 127, 128, 1ull << 40, UINT64_MAX - 1,
                           UINT64_MAX};
  for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
    gtf_spec s;
    gtf_spec_init(&s, (unsigned)i, gens[i]);
    s.threads = 1 + (unsigned)i % 4;
    s.stacks = (int)(i % 2);
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    assert_int_equal(gtf_generation(&b, &s), 0);
    gtp_gen g;
    assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
    check_fixture_gen(&g, &s);
    gtp_gen_fini(&g);
    gtp_wbuf_fini(&b);
  }
}

/* Rewrites the GEN_END of a one-generation buffer with e. */
static void replace_gen_end(gtp_wbuf *b, const gtp_gen *g,
                            const gtp_gen_end *e) {
  b->len = (size_t)(g->body - b->data) + g->body_len;
  assert_int_equal(gtp_put_gen_end(b, e), 0);
}

static void test_gen_parse__manifest_mismatch_is_manifest(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 3);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g, g2;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  gtp_gen_end good = g.end;
  gtp_gen_end bad;
  uint64_t *fields[] = {&bad.records, &bad.batches, &bad.bytes, &bad.events};
  for (size_t i = 0; i < 4; i++) {
    bad = good;
    *fields[i] += 1;
    replace_gen_end(&b, &g, &bad);
    assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), GTP_E_MANIFEST);
    assert_null(g2.strings);
  }
  bad = good;
  bad.crc ^= 1;
  replace_gen_end(&b, &g, &bad);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), GTP_E_CRC);
  /* Ledger fields are not part of the manifest. */
  bad = good;
  bad.dropped = 12345;
  replace_gen_end(&b, &g, &bad);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g2, NULL), 0);
  assert_true(g2.end.dropped == 12345);
  gtp_gen_fini(&g2);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__any_body_byte_changed_is_crc(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 3);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen g, g2;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), 0);
  size_t first = (size_t)(g.body - b.data);
  for (size_t i = first; i < first + g.body_len; i++) {
    b.data[i] ^= 0x10;
    int rc = gtp_gen_parse(b.data, b.len, &g2, NULL);
    /* A changed record length shifts the framing before the CRC is
     * reached; every other change is caught by the CRC. */
    assert_true(rc < 0);
    if (rc != GTP_E_CRC)
      assert_true(rc == GTP_E_TRUNC || rc == GTP_E_TOOBIG ||
                  rc == GTP_E_CORRUPT || rc == GTP_E_VARINT);
    b.data[i] ^= 0x10;
  }
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&b);
}

static void test_gen_parse__generation_mismatches_are_gen(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  uint8_t ev[4];
  size_t n = 0;
  ev[n++] = GTP_EV_INSTANT;
  ev[n++] = 1;
  ev[n++] = 1;
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_batch(&body, 11, 1, 0, 1, ev, n), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_GEN);
  gtp_wbuf_fini(&out);
  gtp_wbuf_reset(&body);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 1, ev, n), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  wrap_body(&out, &s, body.data, body.len, 9);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_GEN);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void test_gen_parse__clock_missing_or_twice_is_corrupt(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  wrap_body(&out, &s, body.data, 0, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  put_clock_simple(&body);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_true(g.clock.end_mono_ns == 1400);
  assert_int_equal(g.nstrings + g.nstacks + g.nmodules, 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  put_clock_simple(&body);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void
test_gen_parse__duplicate_ids_across_records_are_corrupt(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  const uint64_t a[] = {1, 2}, c[] = {3, 2};
  const gtp_str sa[] = {{"a", 1}, {"b", 1}};
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_strings(&body, a, sa, 2), 0);
  assert_int_equal(gtp_put_strings(&body, c, sa, 1), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  /* Two STRINGS records with distinct ids merge into one table. */
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_int_equal(g.nstrings, 3);
  assert_true(str_eq(gtp_gen_string(&g, 3), "a"));
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  assert_int_equal(gtp_put_strings(&body, c, sa, 2), 0); /* 3 and 2 again */
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);

  gtp_wbuf_reset(&body);
  put_clock_simple(&body);
  const uint64_t pc = 1, *pcs[] = {&pc, &pc};
  const size_t d[] = {1, 1};
  const uint64_t sid[] = {4, 4};
  assert_int_equal(gtp_put_stacks(&body, sid, pcs, d, 2), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void
test_gen_parse__unknown_record_and_event_types_are_tolerated(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  /* A record type from a newer minor. */
  const uint8_t future[] = {42, 3, 'x', 'y', 'z'};
  gtp_wbuf_put(&body, future, sizeof(future));
  /* A batch whose second event has a type from a newer minor. */
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, 100, 1, 7, 7, 7};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
  assert_true(g.end.records == 3);
  size_t cur = 0;
  gtp_batch bt;
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &bt), 1);
  gtp_event_iter it;
  gtp_event e;
  gtp_event_iter_init(&it, &bt);
  assert_int_equal(gtp_event_next(&it, &e), 1);
  assert_int_equal(gtp_event_next(&it, &e), GTP_E_UNKNOWN);
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &bt), 0);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

static void test_gen_parse__bad_event_stream_in_a_batch_fails(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  /* Count 2 but the bytes hold one event and a half. */
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, GTP_EV_COUNTER, 1};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), GTP_E_TRUNC);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

/* gtp_gen_parse_lazy leaves the events to their decoder: the same bad
 * stream parses, and gtp_event_next still refuses it (the summary's walk
 * turns that into the generation's status). */
static void test_gen_parse__lazy_leaves_bad_events_to_event_next(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf body, out;
  gtp_gen g;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, GTP_EV_COUNTER, 1};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(gtp_gen_parse_lazy(out.data, out.len, &g, NULL), 0);
  size_t cur = 0;
  gtp_batch bt;
  assert_int_equal(gtp_gen_next_batch(&g, &cur, &bt), 1);
  gtp_event_iter it;
  gtp_event e;
  gtp_event_iter_init(&it, &bt);
  assert_int_equal(gtp_event_next(&it, &e), 1);
  assert_int_equal(gtp_event_next(&it, &e), GTP_E_TRUNC);
  gtp_gen_fini(&g);
  /* Everything but decoding the events is still checked: a changed event
   * byte fails the body's CRC. */
  uint8_t *at = NULL;
  for (size_t i = 0; !at && i + sizeof ev <= out.len; i++)
    if (memcmp(out.data + i, ev, sizeof ev) == 0)
      at = out.data + i;
  assert_non_null(at);
  at[2] ^= 0x01;
  assert_int_equal(gtp_gen_parse_lazy(out.data, out.len, &g, NULL), GTP_E_CRC);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

/* gtp_gen_parse validates batches with its own fast walk; it must accept
 * exactly the batches gtp_event_next decodes (an unknown type aside). Random
 * short event streams, mostly well-formed, decide it. */
static void test_gen_parse__batch_check_agrees_with_event_next(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  rng_state = 0x853c49e6748fea9bull;
  int accepted = 0, refused = 0;
  for (int round = 0; round < 3000; round++) {
    uint8_t ev[64];
    size_t n = 0;
    uint64_t count = 0;
    size_t want = 2 + rng() % 40;
    while (n < want) {
      uint64_t r = rng();
      if (r % 16 == 0) {
        ev[n++] = (uint8_t)(rng() % 256); /* any byte at all */
      } else {
        gtp_event e;
        memset(&e, 0, sizeof(e));
        e.type = (uint8_t)(1 + r % (GTP_EV_COUNT_ - 1));
        e.ticks = rng() % 4 ? rng() % 300 : rng();
        e.args[0] = rng() % 200;
        e.args[1] = rng() % 3 ? rng() % 100 : rng();
        e.args[2] = rng() % 5;
        e.msg = (const uint8_t *)"abcdef";
        e.msg_len = rng() % 7;
        uint8_t tmp[GTP_EVENT_MAX + 8];
        int k = gtp_event_encode(tmp, &e, 0);
        assert_true(k > 0);
        if (n + (size_t)k > sizeof(ev))
          break;
        memcpy(ev + n, tmp, (size_t)k);
        n += (size_t)k;
        count++;
      }
    }
    if (rng() % 4 == 0 && n > 1)
      n -= 1 + rng() % (n - 1); /* cut */
    if (rng() % 4 == 0)
      count += rng() % 3;
    if (count > n / 2)
      count = n / 2;
    int k, rc_iter = events_walk(ev, n, count, &k);
    gtp_wbuf body, out;
    gtp_gen g;
    gtp_wbuf_init(&body, 0);
    put_clock_simple(&body);
    assert_int_equal(gtp_put_batch(&body, 10, 1, 0, count, ev, n), 0);
    wrap_body(&out, &s, body.data, body.len, 10);
    int rc = gtp_gen_parse(out.data, out.len, &g, NULL);
    if (rc_iter == 0 || rc_iter == GTP_E_UNKNOWN) {
      assert_int_equal(rc, 0);
      gtp_gen_fini(&g);
      accepted++;
    } else {
      assert_int_equal(rc, rc_iter);
      refused++;
    }
    gtp_wbuf_fini(&out);
    gtp_wbuf_fini(&body);
  }
  assert_true(accepted > 300 && refused > 300);
}

static void test_gen_parse__structure_errors(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf b;
  gtp_gen g;
  gtp_wbuf_init(&b, 0);
  /* Does not start with GEN_START. */
  put_clock_simple(&b);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_CORRUPT);
  /* GEN_START, then another GEN_START before any GEN_END. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  put_clock_simple(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_CORRUPT);
  /* No GEN_END at all. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  put_clock_simple(&b);
  assert_int_equal(gtp_gen_parse(b.data, b.len, &g, NULL), GTP_E_TRUNC);
  assert_int_equal(gtp_gen_parse(b.data, 0, &g, NULL), GTP_E_TRUNC);
  gtp_wbuf_fini(&b);
}

static void test_manifest__check_tells_crc_from_counts(void **state) {
  (void)state;
  gtp_gen_end a = {1, 2, 3, 4, 5, 6, 7, 8, 9}, b = a;
  assert_int_equal(gtp_manifest_check(&a, &b), 0);
  b.crc = 6;
  assert_int_equal(gtp_manifest_check(&a, &b), GTP_E_CRC);
  b.events = 7;
  assert_int_equal(gtp_manifest_check(&a, &b), GTP_E_MANIFEST);
  b = a;
  b.gen = 99; /* gen and ledger are not manifest fields */
  b.dropped = 99;
  assert_int_equal(gtp_manifest_check(&a, &b), 0);
}

static void
test_manifest__compute_refuses_framing_records_in_a_body(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 0, 1);
  gtp_wbuf b;
  gtp_gen_end e;
  gtp_wbuf_init(&b, 0);
  put_clock_simple(&b);
  assert_int_equal(gtp_manifest_compute(b.data, b.len, &e), 0);
  assert_true(e.records == 1 && e.batches == 0 && e.bytes == b.len);
  assert_int_equal(gtp_manifest_compute(b.data, 0, &e), 0);
  assert_true(e.records == 0 && e.crc == 0);
  assert_int_equal(gtf_gen_start(&b, &s), 0);
  assert_int_equal(gtp_manifest_compute(b.data, b.len, &e), GTP_E_CORRUPT);
  gtp_wbuf_fini(&b);
}

static void test_manifest__wire_body_matches_stored_generation(void **state) {
  (void)state;
  /* The agent's view: body records + GEN_END payload. The daemon prepends a
   * GEN_START and appends the GEN_END record; the result must parse. */
  gtf_spec s;
  gtf_spec_init(&s, 5, 77);
  gtp_wbuf body, end, stored;
  gtp_gen_end e, e2;
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_init(&end, 0);
  gtp_wbuf_init(&stored, 0);
  assert_int_equal(gtf_body(&body, &s, &e), 0);
  assert_int_equal(gtp_gen_end_encode(&end, &e), 0);
  assert_int_equal(gtp_gen_end_decode(end.data, end.len, &e2), 0);
  assert_int_equal(gtf_gen_start(&stored, &s), 0);
  gtp_wbuf_put(&stored, body.data, body.len);
  assert_int_equal(gtp_put_gen_end(&stored, &e2), 0);
  gtp_gen g;
  assert_int_equal(gtp_gen_parse(stored.data, stored.len, &g, NULL), 0);
  check_fixture_gen(&g, &s);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&body);
  gtp_wbuf_fini(&end);
  gtp_wbuf_fini(&stored);
}

/* The caller's side of gtp_gen_parse_known, as gentraced's loop has it:
 * the GEN_START and GEN_END decoded from the records it wrote, the body's
 * offsets. Decodes with the full parser's own functions, then parses with
 * the known ends. */
static void split_known_ends(const uint8_t *p, size_t len, gtp_gen_start *start,
                             gtp_gen_end *end, size_t *body_off,
                             size_t *body_len) {
  gtp_record rec;
  assert_int_equal(gtp_record_parse(p, len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_GEN_START);
  assert_int_equal(gtp_gen_start_decode(rec.payload, rec.len, start), 0);
  size_t off = rec.size;
  *body_off = rec.size;
  for (;;) {
    assert_int_equal(gtp_record_parse(p + off, len - off, &rec), 0);
    if (rec.type == GTP_REC_GEN_END)
      break;
    off += rec.size;
  }
  assert_int_equal(gtp_gen_end_decode(rec.payload, rec.len, end), 0);
  assert_int_equal(off + rec.size, len);
  *body_len = off - *body_off;
}

static int parse_with_known_ends(const uint8_t *p, size_t len, int check_events,
                                 gtp_gen *g, gtp_gen_start *start,
                                 gtp_gen_end *end) {
  size_t body_off, body_len;
  split_known_ends(p, len, start, end, &body_off, &body_len);
  return gtp_gen_parse_known(p, len, start, body_off, body_len, end,
                             check_events, g);
}

/* Taking GEN_START and GEN_END as given skips only their decoding: the
 * result is the full parse's, and every check of the body stays (changed
 * bytes, a manifest or gen that does not match, bad events unless lazy,
 * framing records inside the body, offsets outside the input). */
static void
test_gen_parse__known_ends_check_the_body_as_the_full_parse(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 1, 41);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  gtp_gen full, known;
  gtp_gen_start st;
  gtp_gen_end e;
  assert_int_equal(gtp_gen_parse(b.data, b.len, &full, NULL), 0);
  for (int check = 0; check <= 1; check++) {
    assert_int_equal(
        parse_with_known_ends(b.data, b.len, check, &known, &st, &e), 0);
    check_fixture_gen(&known, &s);
    assert_ptr_equal(known.body, full.body);
    assert_int_equal(known.body_len, full.body_len);
    assert_int_equal(known.size, b.len);
    assert_int_equal(known.nstrings, full.nstrings);
    assert_int_equal(known.nstacks, full.nstacks);
    assert_int_equal(known.nmodules, full.nmodules);
    assert_memory_equal(&known.clock, &full.clock, sizeof full.clock);
    assert_true(known.end.gen == full.end.gen &&
                known.end.records == full.end.records &&
                known.end.batches == full.end.batches &&
                known.end.bytes == full.end.bytes &&
                known.end.crc == full.end.crc &&
                known.end.events == full.end.events &&
                known.end.dropped == full.end.dropped);
    gtp_gen_fini(&known);
  }
  size_t body_off = (size_t)(full.body - full.base);
  /* Every body byte changed: refused, as by the full parse (CRC). */
  for (size_t i = body_off; i < body_off + full.body_len; i++) {
    b.data[i] ^= 0x01;
    assert_int_equal(gtp_gen_parse_known(b.data, b.len, &full.start, body_off,
                                         full.body_len, &full.end, 1, &known),
                     GTP_E_CRC);
    assert_null(known.strings);
    b.data[i] ^= 0x01;
  }
  gtp_gen_end bad = full.end;
  bad.events++;
  assert_int_equal(gtp_gen_parse_known(b.data, b.len, &full.start, body_off,
                                       full.body_len, &bad, 1, &known),
                   GTP_E_MANIFEST);
  bad = full.end;
  bad.gen++;
  assert_int_equal(gtp_gen_parse_known(b.data, b.len, &full.start, body_off,
                                       full.body_len, &bad, 1, &known),
                   GTP_E_GEN);
  assert_int_equal(gtp_gen_parse_known(b.data, b.len, &full.start, b.len + 1, 0,
                                       &full.end, 1, &known),
                   GTP_E_INTERNAL);
  assert_int_equal(gtp_gen_parse_known(b.data, b.len, &full.start, body_off,
                                       b.len, &full.end, 1, &known),
                   GTP_E_INTERNAL);
  gtp_gen_fini(&full);
  gtp_wbuf_fini(&b);

  /* A bad event stream: refused when checked, left to the decoder when
   * lazy, as gtp_gen_parse and gtp_gen_parse_lazy do. */
  gtp_wbuf body, out;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, GTP_EV_COUNTER, 1};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(parse_with_known_ends(out.data, out.len, 1, &known, &st, &e),
                   GTP_E_TRUNC);
  assert_int_equal(parse_with_known_ends(out.data, out.len, 0, &known, &st, &e),
                   0);
  gtp_gen_fini(&known);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);

  /* A GEN_START inside the body: two generations run together. */
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  size_t clock_len = body.len;
  assert_int_equal(gtf_gen_start(&body, &s), 0);
  gtp_gen_end me;
  memset(&me, 0, sizeof me);
  assert_int_equal(gtp_manifest_compute(body.data, clock_len, &me), 0);
  gtp_wbuf_init(&out, 0);
  assert_int_equal(gtf_gen_start(&out, &s), 0);
  size_t off = out.len;
  gtp_wbuf_put(&out, body.data, body.len);
  me.gen = 10;
  me.crc = gtp_crc32c(0, body.data, body.len);
  me.bytes = body.len;
  me.records = 2;
  assert_int_equal(gtp_put_gen_end(&out, &me), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(out.data, out.len, &rec), 0);
  assert_int_equal(gtp_gen_start_decode(rec.payload, rec.len, &st), 0);
  assert_int_equal(gtp_gen_parse_known(out.data, out.len, &st, off, body.len,
                                       &me, 1, &known),
                   GTP_E_CORRUPT);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);
}

/* The GEN_START of a session in two steps (its identity encoded once, then
 * per generation) is byte for byte the one-step record, for every length
 * of the gen's varint; an identity over a limit is refused by both. */
static void
test_gen_start__ident_once_then_per_gen_is_the_same_record(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 3, 1);
  gtp_wbuf src, one, ident, two;
  gtp_wbuf_init(&src, 0);
  gtp_wbuf_init(&one, 0);
  assert_int_equal(gtf_gen_start(&src, &s), 0);
  gtp_record rec;
  gtp_gen_start st; /* its strings point into src */
  assert_int_equal(gtp_record_parse(src.data, src.len, &rec), 0);
  assert_int_equal(gtp_gen_start_decode(rec.payload, rec.len, &st), 0);
  assert_int_equal(st.ntags, 2);
  gtp_wbuf_init(&ident, 0);
  assert_int_equal(gtp_put_gen_start_ident(&ident, &st), 0);
  const uint64_t gens[] = {0,     1,          127,        128,       16383,
                           16384, 1ull << 35, 1ull << 63, UINT64_MAX};
  for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
    st.gen = gens[i];
    gtp_wbuf_reset(&one);
    assert_int_equal(gtp_put_gen_start(&one, &st), 0);
    gtp_wbuf_init(&two, 0);
    gtp_wbuf_put(&two, "x", 1); /* appends after what is there */
    assert_int_equal(gtp_put_gen_start_with(&two, st.session, gens[i],
                                            ident.data, ident.len),
                     0);
    assert_int_equal(two.len, one.len + 1);
    assert_memory_equal(two.data + 1, one.data, one.len);
    gtp_wbuf_fini(&two);
  }
  /* A tag value over GTP_IDENT_STR_MAX: refused, nothing appended. */
  static char big[GTP_IDENT_STR_MAX + 1];
  memset(big, 'v', sizeof big);
  st.tags[1].value = (gtp_str){big, sizeof big};
  gtp_wbuf_reset(&ident);
  assert_int_equal(gtp_put_gen_start_ident(&ident, &st), GTP_E_TOOBIG);
  assert_int_equal(ident.len, 0);
  gtp_wbuf_reset(&one);
  assert_int_equal(gtp_put_gen_start(&one, &st), GTP_E_TOOBIG);
  assert_int_equal(one.len, 0);
  /* An identity whose record would pass GTP_RECORD_MAX. */
  gtp_wbuf_init(&two, 0);
  assert_int_equal(
      gtp_put_gen_start_with(&two, st.session, 1, NULL, GTP_RECORD_MAX - 16),
      GTP_E_TOOBIG);
  assert_int_equal(two.len, 0);
  gtp_wbuf_fini(&two);
  gtp_wbuf_fini(&ident);
  gtp_wbuf_fini(&one);
  gtp_wbuf_fini(&src);
}

/* gtp_gen_verify_known's verdict on the generation [p, p+len) with the
 * known ends st and e and body [body_off, body_off + body_len) must be
 * gtp_gen_parse_known's: the same code and, when 0, the same CLOCK. */
static void expect_same_verdict(const uint8_t *p, size_t len,
                                const gtp_gen_start *st, size_t body_off,
                                size_t body_len, const gtp_gen_end *e,
                                int check) {
  gtp_gen known;
  int want =
      gtp_gen_parse_known(p, len, st, body_off, body_len, e, check, &known);
  gtp_clock clock;
  memset(&clock, 0xee, sizeof clock);
  assert_int_equal(
      gtp_gen_verify_known(p + body_off, body_len, st->gen, e, check, &clock),
      want);
  if (want == 0) {
    assert_memory_equal(&clock, &known.clock, sizeof clock);
    gtp_gen_fini(&known);
  }
}

/* The same for a whole generation as written, its ends decoded from it. */
static int expect_same_verdict_whole(const uint8_t *p, size_t len, int check) {
  gtp_gen_start st;
  gtp_gen_end e;
  size_t body_off, body_len;
  split_known_ends(p, len, &st, &e, &body_off, &body_len);
  expect_same_verdict(p, len, &st, body_off, body_len, &e, check);
  gtp_clock k;
  return gtp_gen_verify_known(p + body_off, body_len, st.gen, &e, check, &k);
}

/* A generation 7 of one CLOCK and one STRINGS (n ids) and one STACKS (n
 * ids, one frame each) record. */
static void gen_of_tables(gtp_wbuf *out, const uint64_t *ids, size_t n) {
  gtf_spec s;
  gtf_spec_init(&s, 4, 7);
  gtp_str str[80];
  uint64_t pc[80];
  const uint64_t *pcs[80];
  size_t depth[80];
  assert_true(n <= 80);
  for (size_t i = 0; i < n; i++) {
    str[i] = (gtp_str){"name", 4};
    pc[i] = 0x400000 + i;
    pcs[i] = &pc[i];
    depth[i] = 1;
  }
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  assert_int_equal(gtp_put_strings(&body, ids, str, n), 0);
  assert_int_equal(gtp_put_stacks(&body, ids, pcs, depth, n), 0);
  wrap_body(out, &s, body.data, body.len, 7);
  gtp_wbuf_fini(&body);
}

/* The loop's check without a gtp_gen agrees with gtp_gen_parse_known on
 * every verdict: good generations (tables in its stack room and beyond
 * it, sorted by insertion and by qsort), each body byte changed, the
 * manifest and gen wrong, bad events checked or left, duplicate ids on
 * each side of the room's size. */
static void test_gen_verify__same_verdicts_as_parse_known(void **state) {
  (void)state;
  gtf_spec s;
  gtf_spec_init(&s, 1, 41);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_generation(&b, &s), 0);
  for (int check = 0; check <= 1; check++)
    assert_int_equal(expect_same_verdict_whole(b.data, b.len, check), 0);
  gtp_gen_start st;
  gtp_gen_end e;
  size_t body_off, body_len;
  split_known_ends(b.data, b.len, &st, &e, &body_off, &body_len);
  for (size_t i = body_off; i < body_off + body_len; i++) {
    b.data[i] ^= 0x01;
    expect_same_verdict(b.data, b.len, &st, body_off, body_len, &e, 1);
    b.data[i] ^= 0x01;
  }
  /* The same damage past the CRC (the GEN_END's CRC made to match), and
   * past the manifest too when the damaged body still frames (its counts
   * taken as declared): the errors behind the CRC come in the same order,
   * framing, manifest, then the records' contents. */
  const uint8_t flips[] = {0x01, 0x02, 0x40, 0x80, 0xff};
  for (size_t i = body_off; i < body_off + body_len; i++) {
    for (size_t f = 0; f < sizeof flips; f++) {
      b.data[i] ^= flips[f];
      gtp_gen_end d = e;
      d.crc = gtp_crc32c(0, b.data + body_off, body_len);
      for (int check = 0; check <= 1; check++)
        expect_same_verdict(b.data, b.len, &st, body_off, body_len, &d, check);
      gtp_gen_end m = d;
      if (gtp_manifest_compute(b.data + body_off, body_len, &m) == 0) {
        m.gen = e.gen;
        for (int check = 0; check <= 1; check++)
          expect_same_verdict(b.data, b.len, &st, body_off, body_len, &m,
                              check);
      }
      b.data[i] ^= flips[f];
    }
  }
  gtp_gen_end bad = e;
  bad.events++;
  expect_same_verdict(b.data, b.len, &st, body_off, body_len, &bad, 1);
  bad = e;
  bad.gen++;
  expect_same_verdict(b.data, b.len, &st, body_off, body_len, &bad, 1);
  gtp_wbuf_fini(&b);

  /* A bad event stream: refused when checked, not when lazy. */
  gtp_wbuf body, out;
  gtf_spec_init(&s, 0, 10);
  gtp_wbuf_init(&body, 0);
  put_clock_simple(&body);
  const uint8_t ev[] = {GTP_EV_INSTANT, 1, 1, GTP_EV_COUNTER, 1};
  assert_int_equal(gtp_put_batch(&body, 10, 1, 0, 2, ev, sizeof(ev)), 0);
  wrap_body(&out, &s, body.data, body.len, 10);
  assert_int_equal(expect_same_verdict_whole(out.data, out.len, 1),
                   GTP_E_TRUNC);
  assert_int_equal(expect_same_verdict_whole(out.data, out.len, 0), 0);
  gtp_wbuf_fini(&out);
  gtp_wbuf_fini(&body);

  /* Tables of 1..80 entries (the room holds 32; insertion up to 16),
   * in descending order, then with the last id a duplicate of the first. */
  uint64_t ids[80];
  for (size_t n = 1; n <= 80; n += (n < 40 ? 1 : 13)) {
    for (size_t i = 0; i < n; i++)
      ids[i] = 1000 - i;
    gen_of_tables(&out, ids, n);
    assert_int_equal(expect_same_verdict_whole(out.data, out.len, 1), 0);
    gtp_gen g;
    assert_int_equal(gtp_gen_parse(out.data, out.len, &g, NULL), 0);
    assert_int_equal(g.nstrings, n);
    for (size_t i = 1; i < g.nstrings; i++)
      assert_true(g.strings[i - 1].id < g.strings[i].id &&
                  g.stacks[i - 1].id < g.stacks[i].id);
    gtp_gen_fini(&g);
    gtp_wbuf_fini(&out);
    if (n < 2)
      continue;
    ids[n - 1] = ids[0];
    gen_of_tables(&out, ids, n);
    assert_int_equal(expect_same_verdict_whole(out.data, out.len, 1),
                     GTP_E_CORRUPT);
    gtp_wbuf_fini(&out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gen_parse__fixture_generation_is_complete),
      cmocka_unit_test(
          test_gen_parse__every_event_decodes_in_order_with_its_args),
      cmocka_unit_test(test_gen_parse__arbitrary_generation_numbers),
      cmocka_unit_test(test_gen_parse__manifest_mismatch_is_manifest),
      cmocka_unit_test(test_gen_parse__any_body_byte_changed_is_crc),
      cmocka_unit_test(test_gen_parse__generation_mismatches_are_gen),
      cmocka_unit_test(test_gen_parse__clock_missing_or_twice_is_corrupt),
      cmocka_unit_test(
          test_gen_parse__duplicate_ids_across_records_are_corrupt),
      cmocka_unit_test(
          test_gen_parse__unknown_record_and_event_types_are_tolerated),
      cmocka_unit_test(test_gen_parse__bad_event_stream_in_a_batch_fails),
      cmocka_unit_test(test_gen_parse__lazy_leaves_bad_events_to_event_next),
      cmocka_unit_test(
          test_gen_parse__known_ends_check_the_body_as_the_full_parse),
      cmocka_unit_test(test_gen_parse__batch_check_agrees_with_event_next),
      cmocka_unit_test(
          test_gen_start__ident_once_then_per_gen_is_the_same_record),
      cmocka_unit_test(test_gen_verify__same_verdicts_as_parse_known),
      cmocka_unit_test(test_gen_parse__structure_errors),
      cmocka_unit_test(test_manifest__check_tells_crc_from_counts),
      cmocka_unit_test(
          test_manifest__compute_refuses_framing_records_in_a_body),
      cmocka_unit_test(test_manifest__wire_body_matches_stored_generation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
