/* test_stackname.c: stack frame names (proto/stackname.c) and their use by
 * the Chrome and Perfetto writers, with a resolver that names one known
 * offset (the libdw one is tested in tests/sym/ and end to end in
 * tests/integration/test_symbols.sh). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chrome.h"
#include "gen_fixture.h"
#include "perfetto.h"
#include "stackname.h"

/* Names offset 0x1234 of a module with a build id; else 0 (after writing
 * junk, which must not leak into the name). mode 1: -ENOMEM; mode 2: a
 * hostile name with JSON metacharacters. */
typedef struct fake {
  int mode;
  unsigned calls;
} fake;

static int fake_resolve(void *ctx, const gtp_module *m, uint64_t off,
                        gtp_wbuf *out) {
  fake *f = ctx;
  f->calls++;
  if (f->mode == 1)
    return -ENOMEM;
  if (off == 0x1234 && m->build_id_len) {
    gtp_wbuf_printf(out, f->mode == 2 ? "evil\"}\n (x.c:1)"
                                      : "handle (/src/cart.c:42)");
    return 1;
  }
  gtp_wbuf_printf(out, "junk");
  return 0;
}

static gtp_module mods[3];
static const uint8_t bid[4] = {1, 2, 3, 4};

static void gen_with_modules(gtp_gen *g) {
  memset(g, 0, sizeof *g);
  memset(mods, 0, sizeof mods);
  /* Out of order on purpose: the index sorts them. */
  mods[0] = (gtp_module){
      {"/lib/libc.so.6", 14}, 0x7f0000000000ull, 0x200000, NULL, 0};
  mods[1] = (gtp_module){{"/usr/bin/checkout", 17}, 0x400000, 0x10000, bid, 4};
  mods[2] = (gtp_module){{"", 0}, 0x500000, 0x1000, bid, 4}; /* no path */
  g->modules = mods;
  g->nmodules = 3;
}

static char *name_of(gtp_stackname *sn, uint64_t pc) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_stackname_frame(sn, pc, &b), 0);
  gtp_wbuf_put(&b, "", 1);
  return (char *)b.data;
}

static void expect_name(gtp_stackname *sn, uint64_t pc, const char *want) {
  char *got = name_of(sn, pc);
  assert_string_equal(got, want);
  free(got);
}

static void no_symbolizer_gives_hex_pcs(void **state) {
  (void)state;
  gtp_gen g;
  gen_with_modules(&g);
  gtp_stackname sn;
  gtp_stackname_init(&sn, NULL);
  assert_int_equal(gtp_stackname_gen(&sn, &g), 0);
  expect_name(&sn, 0x401234, "0x401234");
  expect_name(&sn, 0x7f0000001000ull, "0x7f0000001000");
  assert_int_equal(sn.hex, 2);
  gtp_stackname_fini(&sn);
}

static void symbolized_module_offset_and_hex(void **state) {
  (void)state;
  gtp_gen g;
  gen_with_modules(&g);
  fake f = {0};
  gtp_symbolizer sym = {fake_resolve, &f};
  gtp_stackname sn;
  gtp_stackname_init(&sn, &sym);
  assert_int_equal(gtp_stackname_gen(&sn, &g), 0);
  expect_name(&sn, 0x401234, "handle (/src/cart.c:42)");
  /* Not named: module basename + offset, the resolver's junk dropped. */
  expect_name(&sn, 0x401000, "checkout+0x1000");
  expect_name(&sn, 0x7f0000001000ull, "libc.so.6+0x1000");
  /* Outside every module (below, between, past the end): the hex pc. */
  expect_name(&sn, 0x1000, "0x1000");
  expect_name(&sn, 0x410000, "0x410000");
  expect_name(&sn, 0x7f0000200000ull, "0x7f0000200000");
  /* A module without a path cannot be named either. */
  expect_name(&sn, 0x500010, "0x500010");
  assert_int_equal(sn.named, 1);
  assert_int_equal(sn.module_only, 2);
  assert_int_equal(sn.hex, 4);
  assert_ptr_equal(gtp_stackname_module(&sn, 0x40ffff), &mods[1]);
  assert_null(gtp_stackname_module(&sn, 0x3fffff));
  gtp_stackname_fini(&sn);
}

static void resolver_out_of_memory_is_an_error(void **state) {
  (void)state;
  gtp_gen g;
  gen_with_modules(&g);
  fake f = {1, 0};
  gtp_symbolizer sym = {fake_resolve, &f};
  gtp_stackname sn;
  gtp_stackname_init(&sn, &sym);
  assert_int_equal(gtp_stackname_gen(&sn, &g), 0);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  assert_int_equal(gtp_stackname_frame(&sn, 0x401234, &b), -ENOMEM);
  gtp_wbuf_fini(&b);
  gtp_stackname_fini(&sn);
}

static void hostile_module_tables_never_wrap(void **state) {
  (void)state;
  gtp_gen g;
  memset(&g, 0, sizeof g);
  gtp_module m[2] = {
      {{"a", 1}, UINT64_MAX - 0x10, UINT64_MAX, bid, 4}, /* size past 2^64 */
      {{"b", 1}, 0x1000, 0, bid, 4},                     /* empty */
  };
  g.modules = m;
  g.nmodules = 2;
  fake f = {0};
  gtp_symbolizer sym = {fake_resolve, &f};
  gtp_stackname sn;
  gtp_stackname_init(&sn, &sym);
  assert_int_equal(gtp_stackname_gen(&sn, &g), 0);
  expect_name(&sn, 0x1000, "0x1000"); /* size 0 holds nothing */
  expect_name(&sn, UINT64_MAX, "a+0x10");
  expect_name(&sn, 0x10, "0x10");
  gtp_stackname_fini(&sn);
}

/* ------------------------------------------------------------ writers */

static int wbuf_sink(void *ctx, const void *p, size_t n) {
  return gtp_wbuf_sink(ctx, p, n);
}

/* One fixture generation with stacks (checkout at 0x400000 with a build
 * id, libc without; stack 1 = 0x401000, 0x401234, 0x7f0000001000). */
static void fixture(gtp_wbuf *file, gtp_gen *g) {
  gtf_spec s;
  gtf_spec_init(&s, 1, 1);
  s.stacks = 1;
  gtp_wbuf_init(file, 0);
  assert_int_equal(gtf_generation(file, &s), 0);
  size_t used;
  assert_int_equal(gtp_gen_parse(file->data, file->len, g, &used), 0);
}

static void chrome_names_frames_and_escapes_them(void **state) {
  (void)state;
  gtp_wbuf file, out;
  gtp_gen g;
  fixture(&file, &g);
  for (int mode = 0; mode <= 2; mode += 2) {
    fake f = {mode, 0};
    gtp_symbolizer sym = {fake_resolve, &f};
    gtp_wbuf_init(&out, 0);
    gtp_chrome *c = gtp_chrome_new(wbuf_sink, &out, 0, 0);
    assert_non_null(c);
    gtp_chrome_set_symbolizer(c, &sym);
    assert_int_equal(gtp_chrome_gen(c, &g), 0);
    assert_int_equal(gtp_chrome_end(c), 0);
    gtp_chrome_free(c);
    gtp_wbuf_put(&out, "", 1);
    const char *j = (const char *)out.data;
    if (mode == 0)
      assert_non_null(strstr(j, "[\"checkout+0x1000\",\"handle "
                                "(/src/cart.c:42)\",\"libc.so.6+0x1000\"]"));
    else /* the hostile name stays inside its string */
      assert_non_null(strstr(j, "\"evil\\\"}\\u000a (x.c:1)\""));
    assert_non_null(strstr(j, "\"gentrace_frames\":{\"symbolized\":"));
    assert_null(strstr(j, "junk"));
    assert_true(f.calls > 0);
    gtp_wbuf_fini(&out);
  }
  /* Without a symbolizer: hex pcs and no frame summary, as before. */
  gtp_wbuf_init(&out, 0);
  gtp_chrome *c = gtp_chrome_new(wbuf_sink, &out, 0, 0);
  assert_int_equal(gtp_chrome_gen(c, &g), 0);
  assert_int_equal(gtp_chrome_end(c), 0);
  gtp_chrome_free(c);
  gtp_wbuf_put(&out, "", 1);
  assert_non_null(strstr((const char *)out.data,
                         "[\"0x401000\",\"0x401234\",\"0x7f0000001000\"]"));
  assert_null(strstr((const char *)out.data, "gentrace_frames"));
  gtp_wbuf_fini(&out);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&file);
}

static size_t count(const uint8_t *hay, size_t n, const char *needle) {
  size_t k = strlen(needle), c = 0;
  for (size_t i = 0; i + k <= n; i++)
    c += memcmp(hay + i, needle, k) == 0;
  return c;
}

static void perfetto_carries_the_stack_annotation(void **state) {
  (void)state;
  gtp_wbuf file, out;
  gtp_gen g;
  fixture(&file, &g);
  fake f = {0};
  gtp_symbolizer sym = {fake_resolve, &f};
  gtp_wbuf_init(&out, 0);
  gtp_perfetto *p = gtp_perfetto_new(wbuf_sink, &out);
  assert_non_null(p);
  gtp_perfetto_set_symbolizer(p, &sym);
  assert_int_equal(gtp_perfetto_gen(p, &g), 0);
  assert_int_equal(gtp_perfetto_end(p), 0);
  gtp_perfetto_free(p);
  /* Three *_STACK events per thread reference stacks: each carries the
   * names (tests/integration decodes the protobuf structure). */
  size_t handle = count(out.data, out.len, "handle (/src/cart.c:42)");
  assert_true(handle > 0);
  assert_int_equal(count(out.data, out.len, "checkout+0x1000"), handle);
  assert_int_equal(count(out.data, out.len, "junk"), 0);
  gtp_wbuf_fini(&out);
  gtp_gen_fini(&g);
  gtp_wbuf_fini(&file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_symbolizer_gives_hex_pcs),
      cmocka_unit_test(symbolized_module_offset_and_hex),
      cmocka_unit_test(resolver_out_of_memory_is_an_error),
      cmocka_unit_test(hostile_module_tables_never_wrap),
      cmocka_unit_test(chrome_names_frames_and_escapes_them),
      cmocka_unit_test(perfetto_carries_the_stack_annotation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
