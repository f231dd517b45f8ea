/* test_format_records: proto/format.c, the file header, record framing, the
 * GEN_START, CLOCK, GEN_END and BATCH records, the tables and the writer's
 * limits. */
#include "format_test.h"

/* ------------------------------------------------------ header, records */

static void test_file_header__round_trip_and_each_error(void **state) {
  (void)state;
  uint8_t h[GTP_FILE_HEADER_SIZE];
  gtp_file_header_write(h);
  assert_memory_equal(h, "gentrace\x01\x00\x01\x00\x00\x00\x00\x00", 16);
  assert_int_equal(gtp_file_header_check(h, 16), 0);
  for (size_t n = 0; n < 16; n++)
    assert_int_equal(gtp_file_header_check(h, n), GTP_E_TRUNC);
  h[10] = 9; /* newer minor: still readable */
  assert_int_equal(gtp_file_header_check(h, 16), 0);
  h[8] = 2; /* other major */
  assert_int_equal(gtp_file_header_check(h, 16), GTP_E_VERSION);
  h[8] = 1;
  h[0] = 'G';
  assert_int_equal(gtp_file_header_check(h, 16), GTP_E_MAGIC);
}

static void test_record_parse__framing_errors(void **state) {
  (void)state;
  gtp_record rec;
  uint8_t buf[16] = {GTP_REC_CLOCK, 3, 1, 2, 3};
  assert_int_equal(gtp_record_parse(buf, 5, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_CLOCK);
  assert_int_equal(rec.len, 3);
  assert_int_equal(rec.size, 5);
  assert_ptr_equal(rec.payload, buf + 2);
  for (size_t n = 0; n < 5; n++)
    assert_int_equal(gtp_record_parse(buf, n, &rec), GTP_E_TRUNC);
  buf[0] = 0;
  assert_int_equal(gtp_record_parse(buf, 5, &rec), GTP_E_CORRUPT);
  buf[0] = 99; /* unknown types parse: readers skip them */
  assert_int_equal(gtp_record_parse(buf, 5, &rec), 0);
  size_t n = 1 + gtp_uvarint_put(buf + 1, GTP_RECORD_MAX + 1);
  assert_int_equal(gtp_record_parse(buf, n, &rec), GTP_E_TOOBIG);
  memset(buf + 1, 0xff, 10);
  assert_int_equal(gtp_record_parse(buf, 11, &rec), GTP_E_VARINT);
}

static void
test_gen_start__round_trip_with_every_tag_at_the_limit(void **state) {
  (void)state;
  static char big[GTP_IDENT_STR_MAX];
  memset(big, 'k', sizeof(big));
  gtp_gen_start s, out;
  memset(&s, 0, sizeof(s));
  for (int i = 0; i < 16; i++)
    s.session[i] = (uint8_t)(0xf0 + i);
  s.gen = UINT64_MAX;
  s.service = (gtp_str){big, GTP_IDENT_STR_MAX};
  s.host = (gtp_str){"h", 1};
  s.agent_version = (gtp_str){"", 0};
  s.pid = 4194304;
  s.process_start_ns = 1767225600123456789ull;
  s.ntags = GTP_TAGS_MAX;
  for (unsigned i = 0; i < GTP_TAGS_MAX; i++) {
    s.tags[i].key = (gtp_str){big, i + 1};
    s.tags[i].value = (gtp_str){big, GTP_IDENT_STR_MAX - i};
  }
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_gen_start(&b, &s), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.size, b.len);
  assert_int_equal(rec.type, GTP_REC_GEN_START);
  assert_int_equal(gtp_gen_start_decode(rec.payload, rec.len, &out), 0);
  assert_memory_equal(out.session, s.session, 16);
  assert_true(out.gen == UINT64_MAX);
  assert_int_equal(out.service.len, GTP_IDENT_STR_MAX);
  assert_true(str_eq(out.host, "h"));
  assert_int_equal(out.agent_version.len, 0);
  assert_true(out.pid == s.pid && out.process_start_ns == s.process_start_ns);
  assert_int_equal(out.ntags, GTP_TAGS_MAX);
  for (unsigned i = 0; i < GTP_TAGS_MAX; i++) {
    assert_int_equal(out.tags[i].key.len, i + 1);
    assert_int_equal(out.tags[i].value.len, GTP_IDENT_STR_MAX - i);
  }
  /* Trailing byte. */
  uint8_t *copy = malloc(rec.len + 1);
  memcpy(copy, rec.payload, rec.len);
  copy[rec.len] = 0;
  assert_int_equal(gtp_gen_start_decode(copy, rec.len + 1, &out),
                   GTP_E_CORRUPT);
  /* Every truncation. */
  for (size_t n = 0; n < rec.len; n += 7)
    assert_true(gtp_gen_start_decode(copy, n, &out) < 0);
  free(copy);
  gtp_wbuf_fini(&b);
}

static void
test_gen_start__over_limit_is_toobig_and_appends_nothing(void **state) {
  (void)state;
  static char big[GTP_IDENT_STR_MAX + 1];
  gtp_gen_start s;
  memset(&s, 0, sizeof(s));
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_wbuf_put(&b, "x", 1);
  s.host = (gtp_str){big, sizeof(big)};
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  s.host = (gtp_str){big, 1};
  s.ntags = GTP_TAGS_MAX + 1;
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  s.ntags = 1;
  s.tags[0].value = (gtp_str){big, sizeof(big)};
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  assert_int_equal(b.len, 1);
  assert_int_equal(b.err, 0);

  /* Decoder side: a host length one over the limit, and 33 tags. */
  uint8_t p[64] = {0};
  size_t n = 16;
  p[n++] = 1;                                         /* gen */
  p[n++] = 0;                                         /* service */
  n += gtp_uvarint_put(p + n, GTP_IDENT_STR_MAX + 1); /* host */
  gtp_gen_start out;
  assert_int_equal(gtp_gen_start_decode(p, sizeof(p), &out), GTP_E_TOOBIG);
  n = 17;
  p[n++] = 0;            /* service */
  p[n++] = 0;            /* host */
  p[n++] = 1;            /* pid */
  p[n++] = 1;            /* start */
  p[n++] = 0;            /* agent version */
  p[n++] = GTP_TAGS_MAX; /* ntags = 32 but no bytes */
  assert_int_equal(gtp_gen_start_decode(p, n, &out), GTP_E_TRUNC);
  p[n - 1] = GTP_TAGS_MAX + 1;
  assert_int_equal(gtp_gen_start_decode(p, n, &out), GTP_E_TOOBIG);
  gtp_wbuf_fini(&b);
}

static void test_clock__round_trip_and_going_back_is_corrupt(void **state) {
  (void)state;
  gtp_clock c = {UINT64_MAX - 5, 0, UINT64_MAX, UINT64_MAX, 10, 0}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_clock(&b, &c), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_clock_decode(rec.payload, rec.len, &out), 0);
  assert_memory_equal(&out, &c, sizeof(c));
  gtp_wbuf_reset(&b);
  gtp_clock back = {10, 0, 0, 9, 0, 0};
  assert_int_equal(gtp_put_clock(&b, &back), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_clock_decode(rec.payload, rec.len, &out), GTP_E_CORRUPT);
  gtp_wbuf_fini(&b);
}

static void test_gen_end__round_trip_with_max_values(void **state) {
  (void)state;
  gtp_gen_end e = {UINT64_MAX, 1, 2, 3, 0xdeadbeef, UINT64_MAX, 7, 8, 9}, out;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_gen_end(&b, &e), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_GEN_END);
  assert_int_equal(gtp_gen_end_decode(rec.payload, rec.len, &out), 0);
  assert_true(out.gen == e.gen && out.records == e.records &&
              out.batches == e.batches && out.bytes == e.bytes &&
              out.crc == e.crc && out.events == e.events &&
              out.dropped == e.dropped && out.evicted == e.evicted &&
              out.rejected == e.rejected);
  /* The bare payload encoder writes exactly the record's payload. */
  gtp_wbuf p;
  gtp_wbuf_init(&p, 0);
  assert_int_equal(gtp_gen_end_encode(&p, &e), 0);
  assert_int_equal(p.len, rec.len);
  assert_memory_equal(p.data, rec.payload, rec.len);
  for (size_t n = 0; n < rec.len; n++)
    assert_int_equal(gtp_gen_end_decode(rec.payload, n, &out), GTP_E_TRUNC);
  gtp_wbuf_fini(&p);
  gtp_wbuf_fini(&b);
}

static void test_batch__round_trip_and_limits(void **state) {
  (void)state;
  static uint8_t ev[GTP_BATCH_MAX + 1];
  memset(ev, GTP_EV_REGION_END, sizeof(ev)); /* 0x02 0x02 ... */
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(
      gtp_put_batch(&b, 7, 1234, 99, GTP_BATCH_MAX / 2, ev, GTP_BATCH_MAX), 0);
  gtp_record rec;
  gtp_batch bt;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_EVENTS);
  assert_int_equal(gtp_batch_decode(rec.payload, rec.len, &bt), 0);
  assert_true(bt.gen == 7 && bt.thread == 1234 && bt.base_ticks == 99);
  assert_true(bt.nevents == GTP_BATCH_MAX / 2);
  assert_int_equal(bt.events_len, GTP_BATCH_MAX);
  gtp_event_iter it;
  gtp_event e;
  uint64_t n = 0;
  int rc;
  gtp_event_iter_init(&it, &bt);
  while ((rc = gtp_event_next(&it, &e)) == 1) {
    n++;
    assert_true(e.ticks == 99 + 2 * n);
  }
  assert_int_equal(rc, 0);
  assert_true(n == GTP_BATCH_MAX / 2);

  size_t before = b.len;
  assert_int_equal(gtp_put_batch(&b, 7, 1, 0, 1, ev, GTP_BATCH_MAX + 1),
                   GTP_E_TOOBIG);
  assert_int_equal(gtp_put_batch(&b, 7, 1, 0, 3, ev, 5), GTP_E_BADARG);
  assert_int_equal(b.len, before);

  /* Decoder: an events part over the limit, and a count over bytes/2. */
  gtp_wbuf_reset(&b);
  gtp_wbuf_put_uvarint(&b, 7);
  gtp_wbuf_put_uvarint(&b, 1);
  gtp_wbuf_put_uvarint(&b, 0);
  gtp_wbuf_put_uvarint(&b, 1);
  gtp_wbuf_put(&b, ev, GTP_BATCH_MAX + 1);
  assert_int_equal(gtp_batch_decode(b.data, b.len, &bt), GTP_E_TOOBIG);
  const uint8_t hdr[] = {7,
                         1,
                         0,
                         3,
                         GTP_EV_REGION_END,
                         1,
                         GTP_EV_REGION_END,
                         1,
                         GTP_EV_REGION_END};
  assert_int_equal(gtp_batch_decode(hdr, sizeof(hdr), &bt), GTP_E_MANIFEST);
  for (size_t k = 0; k < 4; k++)
    assert_int_equal(gtp_batch_decode(hdr, k, &bt), GTP_E_TRUNC);
  gtp_wbuf_fini(&b);
}

static void test_tables__strings_stacks_modules_round_trip(void **state) {
  (void)state;
  static char longest[GTP_STRING_MAX];
  memset(longest, 'z', sizeof(longest));
  const uint64_t ids[] = {5, 1, UINT64_MAX};
  const gtp_str strs[] = {{"five", 4}, {"", 0}, {longest, GTP_STRING_MAX}};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_strings(&b, ids, strs, 3), 0);
  gtp_record rec;
  gtp_table_iter it;
  uint64_t id;
  gtp_str s;
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_STRINGS);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(gtp_strings_next(&it, &id, &s), 1);
    assert_true(id == ids[i]);
    assert_int_equal(s.len, strs[i].len);
    assert_memory_equal(s.ptr, strs[i].ptr, s.len);
  }
  assert_int_equal(gtp_strings_next(&it, &id, &s), 0);

  static uint64_t deep[GTP_STACK_DEPTH_MAX];
  for (unsigned i = 0; i < GTP_STACK_DEPTH_MAX; i++)
    deep[i] = UINT64_MAX - i;
  const uint64_t one[] = {0x401000};
  const uint64_t *pcs[] = {deep, one, NULL};
  const size_t depths[] = {GTP_STACK_DEPTH_MAX, 1, 0};
  const uint64_t sids[] = {3, 1, 2};
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_stacks(&b, sids, pcs, depths, 3), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  for (int i = 0; i < 3; i++) {
    uint64_t got[GTP_STACK_DEPTH_MAX];
    size_t nf;
    assert_int_equal(gtp_stacks_next(&it, &id, got, &nf), 1);
    assert_true(id == sids[i]);
    assert_int_equal(nf, depths[i]);
    if (nf)
      assert_memory_equal(got, pcs[i], nf * sizeof(uint64_t));
  }
  assert_int_equal(gtp_stacks_next(&it, &id, NULL, &(size_t){0}), 0);

  static uint8_t bid[GTP_BUILDID_MAX];
  memset(bid, 0xab, sizeof(bid));
  gtp_module mods[2] = {{{"/bin/x", 6}, 0x400000, 0x1000, bid, sizeof(bid)},
                        {{"", 0}, UINT64_MAX, 0, NULL, 0}};
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_modules(&b, mods, 2), 0);
  assert_int_equal(gtp_record_parse(b.data, b.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_MODULES);
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  gtp_module m;
  assert_int_equal(gtp_modules_next(&it, &m), 1);
  assert_true(str_eq(m.path, "/bin/x"));
  assert_true(m.base == 0x400000 && m.size == 0x1000);
  assert_int_equal(m.build_id_len, GTP_BUILDID_MAX);
  assert_memory_equal(m.build_id, bid, GTP_BUILDID_MAX);
  assert_int_equal(gtp_modules_next(&it, &m), 1);
  assert_true(m.base == UINT64_MAX && m.path.len == 0 && m.build_id_len == 0);
  assert_int_equal(gtp_modules_next(&it, &m), 0);
  gtp_wbuf_fini(&b);
}

static void test_tables__writers_refuse_over_limit_entries(void **state) {
  (void)state;
  static char big[GTP_STRING_MAX + 1];
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  const uint64_t id1 = 1, id0 = 0;
  const gtp_str s_big = {big, sizeof(big)}, s_ok = {"a", 1};
  assert_int_equal(gtp_put_strings(&b, &id1, &s_big, 1), GTP_E_TOOBIG);
  assert_int_equal(gtp_put_strings(&b, &id0, &s_ok, 1), GTP_E_BADARG);
  /* Many strings whose sum exceeds one record. */
  enum { N = 20 };
  uint64_t ids[N];
  gtp_str strs[N];
  for (int i = 0; i < N; i++) {
    ids[i] = (uint64_t)i + 1;
    strs[i] = (gtp_str){big, GTP_STRING_MAX};
  }
  assert_int_equal(gtp_put_strings(&b, ids, strs, N), GTP_E_TOOBIG);
  static uint64_t deep[GTP_STACK_DEPTH_MAX + 1];
  const uint64_t *pcs[] = {deep};
  const size_t depth = GTP_STACK_DEPTH_MAX + 1;
  assert_int_equal(gtp_put_stacks(&b, &id1, pcs, &depth, 1), GTP_E_TOOBIG);
  gtp_module m = {{"p", 1}, 0, 0, (const uint8_t *)big, GTP_BUILDID_MAX + 1};
  assert_int_equal(gtp_put_modules(&b, &m, 1), GTP_E_TOOBIG);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.err, 0);
  gtp_wbuf_fini(&b);
}

static void test_tables__hostile_counts_ids_and_lengths_fail(void **state) {
  (void)state;
  gtp_table_iter it;
  uint64_t id;
  gtp_str s;
  /* A count of 2^62 entries in 3 bytes. */
  uint8_t p[32];
  size_t n = gtp_uvarint_put(p, 1ull << 62);
  p[n++] = 1;
  p[n++] = 0;
  assert_int_equal(gtp_table_iter_init(&it, p, n), GTP_E_TRUNC);
  /* id 0. */
  const uint8_t zero_id[] = {1, 0, 1, 'a'};
  assert_int_equal(gtp_table_iter_init(&it, zero_id, sizeof(zero_id)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_CORRUPT);
  /* A string over GTP_STRING_MAX. */
  n = 0;
  p[n++] = 1;
  p[n++] = 1;
  n += gtp_uvarint_put(p + n, GTP_STRING_MAX + 1);
  assert_int_equal(gtp_table_iter_init(&it, p, n), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_TOOBIG);
  /* A string longer than the record. */
  const uint8_t short_str[] = {1, 1, 5, 'a', 'b'};
  assert_int_equal(gtp_table_iter_init(&it, short_str, sizeof(short_str)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_TRUNC);
  /* Trailing bytes after the last entry. */
  const uint8_t trailing[] = {1, 1, 1, 'a', 0};
  assert_int_equal(gtp_table_iter_init(&it, trailing, sizeof(trailing)), 0);
  assert_int_equal(gtp_strings_next(&it, &id, &s), 1);
  assert_int_equal(gtp_strings_next(&it, &id, &s), GTP_E_CORRUPT);
  /* A stack deeper than the limit. */
  uint64_t pcs[GTP_STACK_DEPTH_MAX];
  size_t nf;
  uint8_t deep[8] = {1, 1};
  n = 2 + gtp_uvarint_put(deep + 2, GTP_STACK_DEPTH_MAX + 1);
  assert_int_equal(gtp_table_iter_init(&it, deep, n + 2), 0);
  assert_int_equal(gtp_stacks_next(&it, &id, pcs, &nf), GTP_E_TOOBIG);
  /* A build id over the limit. */
  const uint8_t mod[] = {1, 0, 0, 0, GTP_BUILDID_MAX + 1, 0, 0};
  gtp_module m;
  assert_int_equal(gtp_table_iter_init(&it, mod, sizeof(mod)), 0);
  assert_int_equal(gtp_modules_next(&it, &m), GTP_E_TOOBIG);
}

static void test_wbuf__limit_is_a_sticky_toobig(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 100);
  assert_int_equal(b.limit, 100);
  gtp_wbuf_put(&b, "0123456789", 10);
  for (int i = 0; i < 9; i++)
    gtp_wbuf_put(&b, "0123456789", 10);
  assert_int_equal(b.len, 100);
  assert_int_equal(b.err, 0);
  assert_true(b.cap <= 100);
  assert_null(gtp_wbuf_grow(&b, 1));
  assert_int_equal(b.err, GTP_E_TOOBIG);
  gtp_wbuf_put_uvarint(&b, 1); /* no-op once failed */
  assert_int_equal(b.len, 100);
  assert_int_equal(gtp_put_clock(&b, &(gtp_clock){0}), GTP_E_TOOBIG);
  gtp_wbuf_reset(&b);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.err, 0);
  gtp_wbuf_put_str(&b, "abc", 3);
  assert_int_equal(b.len, 4);
  assert_memory_equal(b.data,
                      "\x03"
                      "abc",
                      4);
  gtp_wbuf_fini(&b);
  assert_null(b.data);
  gtp_wbuf_init(&b, 0);
  assert_int_equal(b.limit, GTP_GEN_MAX_BYTES);
  gtp_wbuf_fini(&b);
}

/* --------------------------------- one-reservation writers, byte for byte */

/* The field-by-field encoding of FORMAT.md (type, len, then each field
 * with its own put): what gtp_put_gen_start and gtp_put_gen_end write in
 * one reservation must be these bytes. */
static void ref_gen_start(gtp_wbuf *b, const gtp_gen_start *s) {
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  gtp_wbuf_put(&body, s->session, 16);
  gtp_wbuf_put_uvarint(&body, s->gen);
  gtp_wbuf_put_str(&body, s->service.ptr, s->service.len);
  gtp_wbuf_put_str(&body, s->host.ptr, s->host.len);
  gtp_wbuf_put_uvarint(&body, s->pid);
  gtp_wbuf_put_uvarint(&body, s->process_start_ns);
  gtp_wbuf_put_str(&body, s->agent_version.ptr, s->agent_version.len);
  gtp_wbuf_put_uvarint(&body, s->ntags);
  for (uint32_t i = 0; i < s->ntags; i++) {
    gtp_wbuf_put_str(&body, s->tags[i].key.ptr, s->tags[i].key.len);
    gtp_wbuf_put_str(&body, s->tags[i].value.ptr, s->tags[i].value.len);
  }
  uint8_t t = GTP_REC_GEN_START;
  gtp_wbuf_put(b, &t, 1);
  gtp_wbuf_put_uvarint(b, body.len);
  gtp_wbuf_put(b, body.data, body.len);
  gtp_wbuf_fini(&body);
}

static void ref_gen_end(gtp_wbuf *b, const gtp_gen_end *e, int head) {
  gtp_wbuf body;
  gtp_wbuf_init(&body, 0);
  uint8_t crc[4] = {(uint8_t)e->crc, (uint8_t)(e->crc >> 8),
                    (uint8_t)(e->crc >> 16), (uint8_t)(e->crc >> 24)};
  gtp_wbuf_put_uvarint(&body, e->gen);
  gtp_wbuf_put_uvarint(&body, e->records);
  gtp_wbuf_put_uvarint(&body, e->batches);
  gtp_wbuf_put_uvarint(&body, e->bytes);
  gtp_wbuf_put(&body, crc, 4);
  gtp_wbuf_put_uvarint(&body, e->events);
  gtp_wbuf_put_uvarint(&body, e->dropped);
  gtp_wbuf_put_uvarint(&body, e->evicted);
  gtp_wbuf_put_uvarint(&body, e->rejected);
  if (head) {
    uint8_t t = GTP_REC_GEN_END;
    gtp_wbuf_put(b, &t, 1);
    gtp_wbuf_put_uvarint(b, body.len);
  }
  gtp_wbuf_put(b, body.data, body.len);
  gtp_wbuf_fini(&body);
}

static void test_gen_start_end__one_reservation_writes_the_field_by_field_bytes(
    void **state) {
  (void)state;
  static const uint64_t vals[] = {
      0, 1, 127, 128, 16383, 16384, UINT32_MAX, INT64_MAX, UINT64_MAX};
  const size_t nv = sizeof vals / sizeof vals[0];
  static const char *const keys[] = {"env", "", "region", "k"};
  static const char *const values[] = {"prod", "v", "", "x"};
  for (size_t i = 0; i < nv; i++) {
    for (uint32_t ntags = 0; ntags <= 4; ntags++) {
      gtp_gen_start s;
      memset(&s, 0, sizeof s);
      for (int k = 0; k < 16; k++)
        s.session[k] = (uint8_t)(i * 16 + (size_t)k);
      s.gen = vals[i];
      s.service = (gtp_str){"checkout", 8};
      s.host = (gtp_str){ntags & 1 ? "" : "web-1", ntags & 1 ? 0 : 5};
      s.agent_version = (gtp_str){"0.4.0", 5};
      s.pid = vals[(i + 3) % nv];
      s.process_start_ns = vals[(i + 5) % nv];
      s.ntags = ntags;
      for (uint32_t t = 0; t < ntags; t++) {
        s.tags[t].key = (gtp_str){keys[t], strlen(keys[t])};
        s.tags[t].value = (gtp_str){values[t], strlen(values[t])};
      }
      gtp_gen_end e = {.gen = vals[i],
                       .records = vals[(i + 1) % nv],
                       .batches = vals[(i + 2) % nv],
                       .bytes = vals[(i + 4) % nv],
                       .crc = (uint32_t)(0x9e3779b9u * (i + 1)),
                       .events = vals[(i + 6) % nv],
                       .dropped = vals[(i + 7) % nv],
                       .evicted = vals[(i + 8) % nv],
                       .rejected = vals[(nv - 1 - i)]};
      gtp_wbuf got, want;
      gtp_wbuf_init(&got, 0);
      gtp_wbuf_init(&want, 0);
      /* After other bytes, as in a generation's buffer. */
      gtp_wbuf_put(&got, "xyz", 3);
      gtp_wbuf_put(&want, "xyz", 3);
      assert_int_equal(gtp_put_gen_start(&got, &s), 0);
      ref_gen_start(&want, &s);
      assert_int_equal(gtp_put_gen_end(&got, &e), 0);
      ref_gen_end(&want, &e, 1);
      assert_int_equal(gtp_gen_end_encode(&got, &e), 0);
      ref_gen_end(&want, &e, 0);
      assert_int_equal(want.err, 0);
      assert_int_equal(got.len, want.len);
      assert_memory_equal(got.data, want.data, want.len);
      gtp_wbuf_fini(&got);
      gtp_wbuf_fini(&want);
    }
  }
}

static void
test_gen_start_end__a_short_buffer_fails_whole_and_stays_failed(void **state) {
  (void)state;
  gtp_gen_start s;
  memset(&s, 0, sizeof s);
  s.gen = 300;
  s.service = (gtp_str){"svc", 3};
  s.host = (gtp_str){"h", 1};
  s.agent_version = (gtp_str){"1", 1};
  gtp_gen_end e = {.gen = 300, .records = 3, .bytes = 1000, .events = 10};
  gtp_wbuf full;
  gtp_wbuf_init(&full, 0);
  assert_int_equal(gtp_put_gen_start(&full, &s), 0);
  size_t start_len = full.len;
  assert_int_equal(gtp_put_gen_end(&full, &e), 0);
  size_t end_len = full.len - start_len;
  gtp_wbuf_fini(&full);
  /* Limits one byte short of each record: nothing of it is written. */
  gtp_wbuf b;
  gtp_wbuf_init(&b, start_len - 1);
  assert_int_equal(gtp_put_gen_start(&b, &s), GTP_E_TOOBIG);
  assert_int_equal(b.len, 0);
  assert_int_equal(gtp_put_gen_end(&b, &e), GTP_E_TOOBIG); /* sticky */
  assert_int_equal(b.len, 0);
  gtp_wbuf_fini(&b);
  gtp_wbuf_init(&b, start_len + end_len - 1);
  assert_int_equal(gtp_put_gen_start(&b, &s), 0);
  assert_int_equal(gtp_put_gen_end(&b, &e), GTP_E_TOOBIG);
  assert_int_equal(b.len, start_len);
  assert_int_equal(gtp_gen_end_encode(&b, &e), GTP_E_TOOBIG);
  assert_int_equal(b.len, start_len);
  gtp_wbuf_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_header__round_trip_and_each_error),
      cmocka_unit_test(test_record_parse__framing_errors),
      cmocka_unit_test(test_gen_start__round_trip_with_every_tag_at_the_limit),
      cmocka_unit_test(
          test_gen_start__over_limit_is_toobig_and_appends_nothing),
      cmocka_unit_test(test_clock__round_trip_and_going_back_is_corrupt),
      cmocka_unit_test(test_gen_end__round_trip_with_max_values),
      cmocka_unit_test(test_batch__round_trip_and_limits),
      cmocka_unit_test(test_tables__strings_stacks_modules_round_trip),
      cmocka_unit_test(test_tables__writers_refuse_over_limit_entries),
      cmocka_unit_test(test_tables__hostile_counts_ids_and_lengths_fail),
      cmocka_unit_test(test_wbuf__limit_is_a_sticky_toobig),
      cmocka_unit_test(
          test_gen_start_end__one_reservation_writes_the_field_by_field_bytes),
      cmocka_unit_test(
          test_gen_start_end__a_short_buffer_fails_whole_and_stays_failed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
