/* test_intern.c: per-generation string tables and the per-thread cache. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "intern.h"

static void test_strtab__same_bytes_same_id_until_reset(void **state) {
  (void)state;
  gt__strtab t;
  assert_int_equal(gt__strtab_init(&t, 4, 64), 0);
  const char *c1, *c2, *c3;
  uint32_t a = gt__strtab_intern(&t, "alpha", 5, &c1);
  uint32_t b = gt__strtab_intern(&t, "beta", 4, &c2);
  uint32_t a2 = gt__strtab_intern(&t, "alpha", 5, &c3);
  assert_int_equal(a, 1);
  assert_int_equal(b, 2);
  assert_int_equal(a2, a);
  assert_ptr_equal(c1, c3);
  assert_string_equal(c1, "alpha");
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  assert_int_equal(gt__strtab_encode(&t, &w), 0);
  gtp_record rec;
  assert_int_equal(gtp_record_parse(w.data, w.len, &rec), 0);
  assert_int_equal(rec.type, GTP_REC_STRINGS);
  gtp_table_iter it;
  assert_int_equal(gtp_table_iter_init(&it, rec.payload, rec.len), 0);
  uint64_t id;
  gtp_str s;
  assert_int_equal(gtp_strings_next(&it, &id, &s), 1);
  assert_int_equal(id, 1);
  assert_memory_equal(s.ptr, "alpha", 5);
  gtp_wbuf_fini(&w);
  gt__strtab_reset(&t);
  assert_int_equal(gt__strtab_intern(&t, "beta", 4, &c2), 1);
  gt__strtab_fini(&t);
}

static void test_strtab__full_table_gives_zero(void **state) {
  (void)state;
  gt__strtab t;
  gt__strtab_init(&t, 2, 1024);
  const char *c;
  assert_int_not_equal(gt__strtab_intern(&t, "a", 1, &c), 0);
  assert_int_not_equal(gt__strtab_intern(&t, "b", 1, &c), 0);
  assert_int_equal(gt__strtab_intern(&t, "c", 1, &c), 0);
  assert_int_equal(gt__strtab_intern(&t, "a", 1, &c), 1); /* still found */
  gt__strtab_fini(&t);
  gt__strtab_init(&t, 16, 8); /* byte budget */
  assert_int_not_equal(gt__strtab_intern(&t, "abcdef", 6, &c), 0);
  assert_int_equal(gt__strtab_intern(&t, "xy", 2, &c), 0);
  gt__strtab_fini(&t);
}

static void
test_strcache__reused_buffer_with_new_contents_misses(void **state) {
  (void)state;
  char buf[16];
  strcpy(buf, "alpha");
  gt__strcache_ent e = {buf, "alpha", 7, 5, 3};
  assert_int_equal(gt__strcache_get(&e, buf, 7), 3);
  assert_int_equal(gt__strcache_get(&e, buf, 8), 0); /* other generation */
  strcpy(buf, "alphb");
  assert_int_equal(gt__strcache_get(&e, buf, 7), 0);
  strcpy(buf, "alp");
  assert_int_equal(gt__strcache_get(&e, buf, 7), 0);
  strcpy(buf, "alphabet");
  assert_int_equal(gt__strcache_get(&e, buf, 7), 0); /* longer */
  strcpy(buf, "alpha");
  assert_int_equal(gt__strcache_get(&e, buf, 7), 3);
}

static void test_stacktab__dedups_by_frames(void **state) {
  (void)state;
  gt__stacktab t;
  assert_int_equal(gt__stacktab_init(&t, 8, 64), 0);
  uint64_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4};
  const uint64_t *c;
  uint32_t ia = gt__stacktab_intern(&t, a, 3, gt__stack_hash(a, 3), &c);
  uint32_t ib = gt__stacktab_intern(&t, b, 3, gt__stack_hash(b, 3), &c);
  uint32_t ia2 = gt__stacktab_intern(&t, a, 3, gt__stack_hash(a, 3), &c);
  assert_int_equal(ia, ia2);
  assert_int_not_equal(ia, ib);
  gtp_wbuf w;
  gtp_wbuf_init(&w, 0);
  assert_int_equal(gt__stacktab_encode(&t, &w), 0);
  assert_true(w.len > 0);
  gtp_wbuf_fini(&w);
  gt__stacktab_fini(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strtab__same_bytes_same_id_until_reset),
      cmocka_unit_test(test_strtab__full_table_gives_zero),
      cmocka_unit_test(test_strcache__reused_buffer_with_new_contents_misses),
      cmocka_unit_test(test_stacktab__dedups_by_frames),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
