/* test_format: proto/format.c, files (the reader over many generations,
 * truncation, bit flips), wall-clock conversion, session ids and FORMAT.md's
 * worked example. */
#include "format_test.h"

/* ------------------------------------------------------------ files */

/* Reads a whole file; returns the count of generations or the error; the
 * generation numbers and session numbers go to gens/sess if given. */
static int read_all(const uint8_t *p, size_t n, uint64_t *gens,
                    uint8_t (*sess)[16], size_t max, size_t *err_off) {
  gtp_file_reader r;
  gtp_gen g;
  int rc = gtp_file_reader_init(&r, p, n), count = 0;
  if (rc < 0)
    return rc;
  while ((rc = gtp_file_reader_next(&r, &g)) == 1) {
    if ((size_t)count < max) {
      if (gens)
        gens[count] = g.start.gen;
      if (sess)
        memcpy(sess[count], g.start.session, 16);
    }
    /* Touch everything a consumer would. */
    size_t cur = 0;
    gtp_batch bt;
    while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
      gtp_event_iter it;
      gtp_event ev;
      gtp_event_iter_init(&it, &bt);
      while (gtp_event_next(&it, &ev) == 1) {
        (void)gtp_gen_wall_ns(&g, ev.ticks);
        (void)gtp_gen_string(&g, ev.args[0]);
      }
    }
    gtp_gen_fini(&g);
    count++;
  }
  if (err_off)
    *err_off = r.offset;
  return rc < 0 ? rc : count;
}

static void
test_file_reader__several_sessions_read_back_in_order(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 3, 4, 1000), 0);
  uint64_t gens[12];
  uint8_t sess[12][16];
  assert_int_equal(read_all(b.data, b.len, gens, sess, 12, NULL), 12);
  for (unsigned i = 0; i < 12; i++) {
    uint8_t want[16];
    gtf_session(want, i % 3);
    assert_true(gens[i] == 1000 + i / 3);
    assert_memory_equal(sess[i], want, 16);
  }
  /* Header alone is a valid empty file. */
  assert_int_equal(read_all(b.data, GTP_FILE_HEADER_SIZE, NULL, NULL, 0, NULL),
                   0);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__skips_unknown_records_and_a_second_header(void **state) {
  (void)state;
  gtp_wbuf a, b;
  gtp_wbuf_init(&b, 0);
  one_gen_file(&a, 0, 5);
  gtp_wbuf_put(&b, a.data, a.len);
  const uint8_t future[] = {200, 2, 0xaa, 0xbb};
  gtp_wbuf_put(&b, future, sizeof(future));
  gtp_wbuf_fini(&a);
  one_gen_file(&a, 1, 6); /* as `cat a b` makes it: with its own header */
  gtp_wbuf_put(&b, a.data, a.len);
  gtp_wbuf_put(&b, future, sizeof(future));
  uint64_t gens[4];
  assert_int_equal(read_all(b.data, b.len, gens, NULL, 4, NULL), 2);
  assert_true(gens[0] == 5 && gens[1] == 6);
  /* A second header of another major is an error. */
  size_t second = a.len + sizeof(future);
  b.data[second + 8] = 9;
  assert_int_equal(read_all(b.data, b.len, NULL, NULL, 0, NULL), GTP_E_VERSION);
  gtp_wbuf_fini(&a);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__error_offset_is_the_failing_generation_start(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 1, 3, 0), 0);
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  size_t second = r.offset;
  gtp_gen_fini(&g);
  b.data[b.len - 3] ^= 0xff; /* inside the last GEN_END */
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  gtp_gen_fini(&g);
  size_t third = r.offset;
  assert_true(third > second);
  assert_true(gtp_file_reader_next(&r, &g) < 0);
  assert_int_equal(r.offset, third);
  assert_null(g.strings);
  /* A stray body record at top level. */
  gtp_wbuf_reset(&b);
  assert_int_equal(gtp_put_file_header(&b), 0);
  put_clock_simple(&b);
  size_t off;
  assert_int_equal(read_all(b.data, b.len, NULL, NULL, 0, &off), GTP_E_CORRUPT);
  assert_int_equal(off, GTP_FILE_HEADER_SIZE);
  gtp_wbuf_fini(&b);
}

static void
test_file_reader__every_truncation_point_errors_or_is_a_prefix(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 2, 2, 30), 0);
  /* Boundaries where a shorter file is still whole. */
  size_t bounds[8], nb = 0;
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  bounds[nb++] = r.offset;
  while (gtp_file_reader_next(&r, &g) == 1) {
    gtp_gen_fini(&g);
    bounds[nb++] = r.offset;
  }
  assert_int_equal(nb, 5);
  assert_int_equal(bounds[nb - 1], b.len);
  for (size_t cut = 0; cut < b.len; cut++) {
    /* A fresh allocation of exactly cut bytes so ASan sees any overread. */
    uint8_t *p = malloc(cut ? cut : 1);
    memcpy(p, b.data, cut);
    int rc = read_all(p, cut, NULL, NULL, 0, NULL);
    int whole = -1;
    for (size_t i = 0; i < nb; i++)
      if (bounds[i] == cut)
        whole = (int)i;
    if (whole >= 0)
      assert_int_equal(rc, whole);
    else
      assert_true(rc < 0);
    free(p);
  }
  gtp_wbuf_fini(&b);
}

static void test_file_reader__random_bit_flips_never_crash(void **state) {
  (void)state;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtf_file(&b, 2, 2, 500), 0);
  /* Which bytes are body bytes: a flip there must be an error. */
  uint8_t *is_body = calloc(b.len, 1);
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, b.data, b.len), 0);
  while (gtp_file_reader_next(&r, &g) == 1) {
    memset(is_body + (g.body - b.data), 1, g.body_len);
    gtp_gen_fini(&g);
  }
  uint8_t *p = malloc(b.len);
  rng_state = 0x2545F4914F6CDD1Dull;
  int errors = 0, oks = 0;
  for (int round = 0; round < 4000; round++) {
    memcpy(p, b.data, b.len);
    int nflips = 1 + (int)(rng() % 3), body_hit = 0;
    for (int k = 0; k < nflips; k++) {
      size_t at = (size_t)(rng() % b.len);
      p[at] ^= (uint8_t)(1u << (rng() % 8));
      body_hit |= is_body[at];
    }
    int rc = read_all(p, b.len, NULL, NULL, 0, NULL);
    if (rc < 0)
      errors++;
    else
      oks++;
    /* CRC-32C catches every 1..3-bit error in these lengths. */
    if (body_hit && memcmp(p, b.data, b.len) != 0)
      assert_true(rc < 0);
  }
  /* Both outcomes happen: flips in identity strings still decode. */
  assert_true(errors > 2000);
  assert_true(oks > 0);
  free(p);
  free(is_body);
  gtp_wbuf_fini(&b);
}

/* ------------------------------------------------------------ clock */

static gtp_gen clock_gen(gtp_clock c) {
  gtp_gen g;
  memset(&g, 0, sizeof(g));
  g.clock = c;
  return g;
}

static void test_wall_ns__within_1us_over_a_1s_generation(void **state) {
  (void)state;
  /* A 2.9 GHz TSC shifted right by 5 (about 11 ns per tick), a monotonic
   * clock that started 3 days ago and a wall clock in 2026; the real tick
   * rate is known, so each event's true time is too. */
  const long double hz = 2.9e9L / 32;
  const uint64_t mono0 = 259200000000000ull, real0 = 1767225600000000000ull;
  const uint64_t tick0 = 987654321012ull;
  gtp_clock c;
  c.start_ticks = tick0;
  c.start_mono_ns = mono0;
  c.start_real_ns = real0;
  c.end_mono_ns = mono0 + 1000000000ull;
  c.end_ticks = tick0 + (uint64_t)(1e9L * hz / 1e9L);
  c.end_real_ns = real0 + 1000000000ull;
  gtp_gen g = clock_gen(c);
  for (uint64_t ns = 0; ns <= 1000000000ull; ns += 7919 * 1009) {
    uint64_t ticks = tick0 + (uint64_t)((long double)ns * hz / 1e9L);
    int64_t got = gtp_gen_wall_ns(&g, ticks);
    int64_t err = got - (int64_t)(real0 + ns);
    assert_true(err > -1000 && err < 1000);
  }
  /* Exact at both ends. */
  assert_true(gtp_gen_wall_ns(&g, c.start_ticks) == (int64_t)real0);
  assert_true(gtp_gen_wall_ns(&g, c.end_ticks) ==
              (int64_t)(real0 + 1000000000ull));
}

static void test_wall_ns__equal_ticks_and_times_before_start(void **state) {
  (void)state;
  gtp_clock c = {1000, 0, 5000000, 1000, 0, 5000000};
  gtp_gen g = clock_gen(c);
  /* No span: 1 ns per tick. */
  assert_true(gtp_gen_wall_ns(&g, 1000) == 5000000);
  assert_true(gtp_gen_wall_ns(&g, 1500) == 5000500);
  assert_true(gtp_gen_wall_ns(&g, 0) == 4999000);
  /* 4 ns per tick, ticks before the start extrapolate backwards. */
  gtp_clock c2 = {1000, 100, 8000, 2000, 4100, 12000};
  g = clock_gen(c2);
  assert_true(gtp_gen_wall_ns(&g, 900) == 7600);
  assert_true(gtp_gen_wall_ns(&g, 0) == 4000);
  assert_true(gtp_gen_wall_ns(&g, 2500) == 14000);
  /* Huge values saturate instead of wrapping. */
  gtp_clock c3 = {0, 0, (uint64_t)INT64_MAX - 10, 1, 1000, 0};
  g = clock_gen(c3);
  assert_true(gtp_gen_wall_ns(&g, UINT64_MAX) == INT64_MAX);
  gtp_clock c4 = {UINT64_MAX - 1, 0, 0, UINT64_MAX, 1000, 0};
  g = clock_gen(c4);
  assert_true(gtp_gen_wall_ns(&g, 0) == INT64_MIN);
}

/* ---------------------------------------------------------- session */

/* The test fixture's session numbers (tests/proto/gen_fixture.h): one id
 * per 32-bit number, shown by recovering the number from its id (an
 * inverse exists only for an injective map) over every n below 2^20, a
 * stride through the rest, and the edges; and never the all-zero id. */
static unsigned fixture_session_number(const uint8_t id[16]) {
  uint8_t base[16];
  /* Byte 0 is 0x5a ^ (37 n + 1) mod 256; 37 * 173 = 1 mod 256. */
  unsigned lo = (((unsigned)(id[0] ^ 0x5a) - 1u) * 173u) & 0xffu;
  gtf_session(base, lo);
  return lo | (unsigned)(id[12] ^ base[12]) << 8 |
         (unsigned)(id[13] ^ base[13]) << 16 |
         (unsigned)(id[14] ^ base[14]) << 24;
}

static void test_fixture__session_ids_differ_over_32_bits(void **state) {
  (void)state;
  static const uint8_t zero[16];
  uint8_t id[16], again[16];
  for (uint64_t n = 0; n <= UINT32_MAX;
       n += n < (1u << 20) ? 1 : 65521 + (n & 0xff)) {
    gtf_session(id, (unsigned)n);
    if (fixture_session_number(id) != n || memcmp(id, zero, 16) == 0)
      fail_msg("gtf_session(%llu) is not distinct", (unsigned long long)n);
  }
  const unsigned edge[] = {255,       256,      257,      65535,
                           65536,     16777215, 16777216, UINT32_MAX - 256,
                           UINT32_MAX};
  for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
    gtf_session(id, edge[i]);
    assert_int_equal(fixture_session_number(id), edge[i]);
  }
  /* The numbers the old fixture mixed up: n and n + 256. */
  gtf_session(id, 1000);
  gtf_session(again, 1000 + 256);
  assert_memory_not_equal(id, again, 16);
}

static void test_session__hex_round_trip_and_bad_input(void **state) {
  (void)state;
  uint8_t s[16], back[16];
  char hex[33];
  for (int i = 0; i < 16; i++)
    s[i] = (uint8_t)(i * 17 + 9);
  gtp_session_hex(s, hex);
  assert_int_equal(strlen(hex), 32);
  assert_string_equal(hex, "091a2b3c4d5e6f8091a2b3c4d5e6f708");
  assert_int_equal(gtp_session_parse(hex, back), 0);
  assert_memory_equal(s, back, 16);
  assert_int_equal(gtp_session_parse("091A2B3C4D5E6F8091A2B3C4D5E6F708", back),
                   0);
  assert_memory_equal(s, back, 16);
  memset(back, 0x77, 16);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f70", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f7080", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("091a2b3c4d5e6f8091a2b3c4d5e6f7g8", back),
                   GTP_E_BADARG);
  assert_int_equal(gtp_session_parse("", back), GTP_E_BADARG);
  assert_int_equal(gtp_session_parse(NULL, back), GTP_E_BADARG);
  assert_int_equal(back[0], 0x77); /* untouched on error */
}

/* The worked example of FORMAT.md section 10, byte for byte: keeps the spec
 * and the writer from drifting apart. */
static void test_spec__format_md_worked_example_is_exact(void **state) {
  (void)state;
  static const uint8_t want[] = {
      0x67, 0x65, 0x6e, 0x74, 0x72, 0x61, 0x63, 0x65, 0x01, 0x00, 0x01, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x01, 0x1d, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
      0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x03,
      0x73, 0x76, 0x63, 0x01, 0x68, 0x07, 0xe8, 0x07, 0x01, 0x31, 0x00, 0x03,
      0x06, 0x01, 0x01, 0x03, 0x72, 0x65, 0x71, 0x02, 0x09, 0x01, 0x09, 0x64,
      0x02, 0x01, 0x05, 0x01, 0x02, 0x03, 0x06, 0x0b, 0x64, 0xe8, 0x07, 0x88,
      0x27, 0xc8, 0x01, 0xf8, 0x0a, 0x98, 0x2a, 0x07, 0x0c, 0x01, 0x03, 0x01,
      0x20, 0x83, 0x5a, 0x91, 0xc4, 0x02, 0x02, 0x00, 0x00};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_put_file_header(&b), 0);
  gtp_gen_start s;
  memset(&s, 0, sizeof(s));
  for (int i = 0; i < 16; i++)
    s.session[i] = (uint8_t)(0x11 * i);
  s.gen = 1;
  s.service = (gtp_str){"svc", 3};
  s.host = (gtp_str){"h", 1};
  s.pid = 7;
  s.process_start_ns = 1000;
  s.agent_version = (gtp_str){"1", 1};
  assert_int_equal(gtp_put_gen_start(&b, &s), 0);
  size_t body = b.len;
  const uint64_t id = 1;
  const gtp_str req = {"req", 3};
  assert_int_equal(gtp_put_strings(&b, &id, &req, 1), 0);
  uint8_t ev[2 * GTP_EVENT_MAX];
  gtp_event e1 = {GTP_EV_REGION_BEGIN, 105, {1, 0, 0}, NULL, 0};
  gtp_event e2 = {GTP_EV_REGION_END, 108, {0, 0, 0}, NULL, 0};
  int n1 = gtp_event_encode(ev, &e1, 100);
  int n2 = gtp_event_encode(ev + n1, &e2, 105);
  assert_int_equal(gtp_put_batch(&b, 1, 9, 100, 2, ev, (size_t)(n1 + n2)), 0);
  gtp_clock c = {100, 1000, 5000, 200, 1400, 5400};
  assert_int_equal(gtp_put_clock(&b, &c), 0);
  gtp_gen_end e;
  memset(&e, 0, sizeof(e));
  e.gen = 1;
  e.dropped = 2;
  assert_int_equal(gtp_manifest_compute(b.data + body, b.len - body, &e), 0);
  assert_int_equal(e.crc, 0xc4915a83u);
  assert_int_equal(gtp_put_gen_end(&b, &e), 0);
  assert_int_equal(b.len, sizeof(want));
  assert_memory_equal(b.data, want, sizeof(want));
  gtp_file_reader r;
  gtp_gen g;
  assert_int_equal(gtp_file_reader_init(&r, want, sizeof(want)), 0);
  assert_int_equal(gtp_file_reader_next(&r, &g), 1);
  assert_true(gtp_gen_wall_ns(&g, 105) == 5020);
  assert_true(gtp_gen_wall_ns(&g, 108) == 5032);
  gtp_gen_fini(&g);
  assert_int_equal(gtp_file_reader_next(&r, &g), 0);
  gtp_wbuf_fini(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_reader__several_sessions_read_back_in_order),
      cmocka_unit_test(
          test_file_reader__skips_unknown_records_and_a_second_header),
      cmocka_unit_test(
          test_file_reader__error_offset_is_the_failing_generation_start),
      cmocka_unit_test(
          test_file_reader__every_truncation_point_errors_or_is_a_prefix),
      cmocka_unit_test(test_file_reader__random_bit_flips_never_crash),
      cmocka_unit_test(test_wall_ns__within_1us_over_a_1s_generation),
      cmocka_unit_test(test_wall_ns__equal_ticks_and_times_before_start),
      cmocka_unit_test(test_session__hex_round_trip_and_bad_input),
      cmocka_unit_test(test_fixture__session_ids_differ_over_32_bits),
      cmocka_unit_test(test_spec__format_md_worked_example_is_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
