/* test_intern.c: per-generation string tables and the per-thread cache. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
  /* The copy is padded like a strtab arena (GT_STRCACHE_PAD). */
  static const char copy[16] = "alpha";
  strcpy(buf, "alpha");
  gt__strcache_ent e = {buf, copy, 7, 5, 3};
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

/* The word-wise check against a byte-by-byte reference: every cached length
 * up to 40 (word boundaries and the NUL's position in its word), the
 * caller's string changed at each position, shortened and lengthened. */
static void
test_strcache__word_check_matches_bytewise_for_every_length(void **state) {
  (void)state;
  gt__strtab t;
  assert_int_equal(gt__strtab_init(&t, 64, 4096), 0);
  for (size_t len = 0; len <= 40; len++) {
    char ref[64];
    for (size_t i = 0; i < len; i++)
      ref[i] = (char)('a' + (i * 7 + len) % 26);
    ref[len] = '\0';
    const char *copy = NULL;
    uint32_t id = gt__strtab_intern(&t, ref, len, &copy);
    assert_int_not_equal(id, 0);
    /* Unaligned starts too: the caller's strings are anywhere. */
    for (size_t off = 0; off < 8; off++) {
      char buf[80];
      char *s = buf + off;
      memset(buf, 'x', sizeof buf);
      memcpy(s, ref, len + 1);
      gt__strcache_ent e = {s, copy, 9, (uint32_t)len, id};
      assert_int_equal(gt__strcache_get(&e, s, 9), id);
      for (size_t i = 0; i < len; i++) { /* one byte changed */
        s[i] ^= 1;
        assert_int_equal(gt__strcache_get(&e, s, 9), 0);
        s[i] ^= 1;
      }
      for (size_t k = 0; k < len; k++) { /* shortened to k bytes */
        char saved = s[k];
        s[k] = '\0';
        assert_int_equal(gt__strcache_get(&e, s, 9), 0);
        s[k] = saved;
      }
      s[len] = 'q'; /* lengthened: the NUL is compared too */
      assert_int_equal(gt__strcache_get(&e, s, 9), 0);
      s[len] = '\0';
      assert_int_equal(gt__strcache_get(&e, s, 9), id);
    }
  }
  gt__strtab_fini(&t);
}

/* A reused buffer whose new, shorter string ends right before an unreadable
 * page: the check must miss without reading into that page (a fault would
 * kill the test). The cached entry is longer than the whole readable tail. */
static void
test_strcache__shorter_string_before_unmapped_page_misses(void **state) {
  (void)state;
  long pg = sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  assert_int_equal(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
  gt__strtab t;
  assert_int_equal(gt__strtab_init(&t, 4, 256), 0);
  const char *copy = NULL;
  const char *longer = "abcdefghijklmnopqrstuvwxyz0123456789";
  uint32_t id = gt__strtab_intern(&t, longer, strlen(longer), &copy);
  assert_int_not_equal(id, 0);
  for (size_t tail = 1; tail <= 24; tail++) {
    /* tail readable bytes: tail - 1 of them matching, then the NUL. */
    char *s = m + pg - tail;
    memcpy(s, longer, tail - 1);
    s[tail - 1] = '\0';
    gt__strcache_ent e = {s, copy, 3, (uint32_t)strlen(longer), id};
    assert_int_equal(gt__strcache_get(&e, s, 3), 0);
  }
  /* An exact match that ends on the page's last byte still hits. */
  size_t n = strlen(longer);
  char *s = m + pg - (n + 1);
  memcpy(s, longer, n + 1);
  gt__strcache_ent e = {s, copy, 3, (uint32_t)n, id};
  assert_int_equal(gt__strcache_get(&e, s, 3), id);
  gt__strtab_fini(&t);
  munmap(m, (size_t)pg * 2);
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

/* One table serves strings and stacks; its bookkeeping is checked after
 * use, and a broken bookkeeping is reported (the check can fail). */
static void
test_itab__invariants_hold_and_a_broken_table_is_caught(void **state) {
  (void)state;
  gt__strtab s;
  gt__stacktab k;
  assert_int_equal(gt__strtab_init(&s, 16, 256), 0);
  assert_int_equal(gt__stacktab_init(&k, 16, 64), 0);
  const char *c;
  const uint64_t *kc;
  uint64_t pcs[4] = {10, 20, 30, 40};
  for (int i = 0; i < 20; i++) { /* past max_ents: full tables answer 0 */
    char name[16];
    snprintf(name, sizeof name, "name-%d", i);
    gt__strtab_intern(&s, name, strlen(name), &c);
    pcs[0] = (uint64_t)i;
    gt__stacktab_intern(&k, pcs, 4, gt__stack_hash(pcs, 4), &kc);
  }
  assert_int_equal(gt__itab_check_invariants(&s), 0);
  assert_int_equal(gt__itab_check_invariants(&k), 0);
  assert_int_equal(gt__itab_count(&s), 16);
  assert_int_equal(gt__itab_count(&k), 16);
  atomic_fetch_sub(&s.top, 1); /* a copy no longer where the arena says */
  assert_int_equal(gt__itab_check_invariants(&s), -1);
  atomic_fetch_add(&s.top, 1);
  k.slots[0] = 99; /* a slot naming no entry */
  assert_int_equal(gt__itab_check_invariants(&k), -3);
  k.slots[0] = 0;
  /* An entry named by two slots (invariant 5: each slot names a distinct
   * entry). */
  size_t mask = s.nslots - 1, at = s.ents[0].hash & mask;
  while (s.slots[at] != 1)
    at = (at + 1) & mask;
  size_t free_at = (at + 1) & mask;
  while (s.slots[free_at] != 0)
    free_at = (free_at + 1) & mask;
  s.slots[free_at] = 1;
  assert_int_equal(gt__itab_check_invariants(&s), -3);
  s.slots[free_at] = 0;
  assert_int_equal(gt__itab_check_invariants(&s), 0);
  gt__strtab_fini(&s);
  gt__stacktab_fini(&k);
}

/* Invariant 5: writers intern the same new names at once, without a lock.
 * Every id a thread got names exactly its bytes, equal names get one id
 * (a lost race's reserved entry is unnamed, never a second id handed out),
 * and the table's invariants hold after every round. */
enum { RACE_THREADS = 4, RACE_NAMES = 64, RACE_ROUNDS = 200 };
typedef struct race_arg {
  gt__strtab *t;
  pthread_barrier_t *bar;
  uint32_t ids[RACE_ROUNDS][RACE_NAMES];
  int bad;
} race_arg;

static void *race_worker(void *p) {
  race_arg *a = p;
  char name[32];
  for (int r = 0; r < RACE_ROUNDS; r++) {
    pthread_barrier_wait(a->bar);
    for (int i = 0; i < RACE_NAMES; i++) {
      int len = snprintf(name, sizeof name, "race.name.%d", i);
      const char *c = NULL;
      uint32_t id = gt__strtab_intern(a->t, name, (size_t)len, &c);
      a->ids[r][i] = id;
      if (id == 0 || c == NULL || strcmp(c, name) != 0)
        a->bad++;
    }
    pthread_barrier_wait(a->bar); /* the main thread checks and resets */
    pthread_barrier_wait(a->bar);
  }
  return NULL;
}

static void test_itab__concurrent_writers_agree_without_a_lock(void **state) {
  (void)state;
  gt__strtab t;
  assert_int_equal(gt__strtab_init(&t, 1024, 64 << 10), 0);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, RACE_THREADS + 1);
  static race_arg args[RACE_THREADS];
  pthread_t th[RACE_THREADS];
  for (int i = 0; i < RACE_THREADS; i++) {
    args[i] = (race_arg){.t = &t, .bar = &bar};
    assert_int_equal(pthread_create(&th[i], NULL, race_worker, &args[i]), 0);
  }
  for (int r = 0; r < RACE_ROUNDS; r++) {
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    assert_int_equal(gt__itab_check_invariants(&t), 0);
    for (int i = 0; i < RACE_NAMES; i++)
      for (int k = 1; k < RACE_THREADS; k++)
        assert_int_equal(args[k].ids[r][i], args[0].ids[r][i]);
    assert_true(gt__itab_count(&t) >= RACE_NAMES);
    gt__strtab_reset(&t);
    pthread_barrier_wait(&bar);
  }
  for (int i = 0; i < RACE_THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].bad, 0);
  }
  pthread_barrier_destroy(&bar);
  gt__strtab_fini(&t);
}

/* Invariant 2's exception: a literal of the main program (this test) is
 * read-only, a stack or heap buffer is not; only a FIXED entry answers
 * without comparing (the entry below points at a copy that differs). */
static void test_rodata__literals_of_the_program_are_fixed(void **state) {
  (void)state;
  gt__rodata_init();
  static const char lit[32] = "a.literal.name"; /* room for word loads */
  char stackbuf[16] = "a.stack.name";
  assert_true(gt__rodata_has(lit, sizeof lit));
  assert_true(gt__rodata_has("another literal", 16));
  assert_false(gt__rodata_has(stackbuf, sizeof stackbuf));
  char *heap = strdup("a.heap.name");
  assert_false(gt__rodata_has(heap, strlen(heap) + 1));
  free(heap);
  static const char other[32] = "different";
  gt__strcache_ent e = {lit, other, 5, (uint32_t)strlen(lit), 7};
  assert_int_equal(gt__strcache_get(&e, lit, 5), 0); /* compared: differs */
  e.len |= GT_STRCACHE_FIXED;
  assert_int_equal(gt__strcache_get(&e, lit, 5), 7);
  assert_int_equal(gt__strcache_get(&e, lit, 6), 0); /* another stamp */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strtab__same_bytes_same_id_until_reset),
      cmocka_unit_test(test_strtab__full_table_gives_zero),
      cmocka_unit_test(test_strcache__reused_buffer_with_new_contents_misses),
      cmocka_unit_test(
          test_strcache__word_check_matches_bytewise_for_every_length),
      cmocka_unit_test(
          test_strcache__shorter_string_before_unmapped_page_misses),
      cmocka_unit_test(test_stacktab__dedups_by_frames),
      cmocka_unit_test(test_itab__invariants_hold_and_a_broken_table_is_caught),
      cmocka_unit_test(test_itab__concurrent_writers_agree_without_a_lock),
      cmocka_unit_test(test_rodata__literals_of_the_program_are_fixed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
