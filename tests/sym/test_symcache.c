/* test_symcache.c: the libdw symbol cache (sym/symcache.c) and the
 * per-request names (sym/symreq.c) on this test program's own code and on
 * a shared library it links: names and lines, build-id checks, the
 * allowed roots, the LRU caps and the per-request budget. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "self_module.h"
#include "symcache.h"
#include "symreq.h"

static volatile int after_call;

__attribute__((noinline)) static uintptr_t return_address(void) {
  return (uintptr_t)__builtin_return_address(0);
}

/* A return address inside probe_site, and the line of its call. */
__attribute__((noinline)) static uintptr_t probe_site(int *line) {
  uintptr_t pc = (*line = __LINE__, return_address()); /* one line */
  after_call++;
  return pc;
}

/* Every case starts from this program's own module and a return address
 * inside probe_site: fresh per case, since cases change the build id. */
typedef struct fx {
  self_module self;
  int line;
  uintptr_t pc;
} fx;

static int fx_setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  if (f == NULL || self_module_get(&f->self, "") != 0) {
    free(f);
    return -1;
  }
  f->pc = probe_site(&f->line);
  *state = f;
  return 0;
}

static int fx_teardown(void **state) {
  free(*state);
  return 0;
}

static symcache *cache_new(const char *dir, const char *from_host,
                           unsigned max_modules) {
  symcache_config cfg = {dir, from_host, max_modules, 0};
  symcache *c = NULL;
  char *cause = NULL;
  assert_int_equal(symcache_new(&cfg, &c, &cause), 0);
  assert_null(cause);
  return c;
}

static symcache_budget plenty(void) {
  return (symcache_budget){100, 100000};
}

static char *resolve(symcache *c, const gtp_module *m, uint64_t pc,
                     symcache_budget *b, int *rc) {
  gtp_wbuf out;
  gtp_wbuf_init(&out, 0);
  *rc = symcache_resolve(c, m, pc - m->base, b, &out);
  gtp_wbuf_put(&out, "", 1);
  return (char *)out.data;
}

static void names_own_function_and_call_line(void **state) {
  fx *f = *state;
  self_module *s = &f->self;
  int line = f->line;
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 0);
  symcache_budget b = plenty();
  int rc;
  char *name = resolve(c, &s->m, pc, &b, &rc);
  assert_int_equal(rc, 1);
  char want[64];
  snprintf(want, sizeof want, "test_symcache.c:%d)", line);
  if (strncmp(name, "probe_site (", 12) || !strstr(name, want) ||
      name[strlen(name) - 1] != ')')
    fail_msg("got \"%s\", want probe_site (.../%s", name, want);
  assert_true(strstr(name, " (/") != NULL); /* a full path, */
  assert_null(strstr(name, "/../"));        /* cleaned */
  assert_null(strstr(name, "/./"));
  free(name);
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_int_equal(st.modules, 1);
  assert_int_equal(st.loaded_total, 1);
  assert_int_equal(st.lookups_total, 1);
  symcache_free(c);
}

static void build_id_mismatch_and_no_build_id_give_nothing(void **state) {
  fx *f = *state;
  self_module *s = &f->self;
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 0);
  symcache_budget b = plenty();
  s->bid[0] ^= 0xff; /* the file on disk no longer matches */
  int rc;
  free(resolve(c, &s->m, pc, &b, &rc));
  assert_int_equal(rc, 0);
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_int_equal(st.mismatch_total, 1);
  assert_int_equal(st.absent, 1);
  assert_int_equal(st.modules, 0);
  assert_int_equal(symcache_check_invariants(c), 0);
  /* Remembered as absent: no second look at the file. */
  free(resolve(c, &s->m, pc, &b, &rc));
  symcache_get_stats(c, &st);
  assert_int_equal(st.mismatch_total, 1);
  /* Without a build id nothing can prove a file is the module. */
  s->m.build_id_len = 0;
  free(resolve(c, &s->m, pc, &b, &rc));
  assert_int_equal(rc, 0);
  symcache_get_stats(c, &st);
  assert_int_equal(st.mismatch_total, 1);
  assert_int_equal(st.loaded_total, 0);
  symcache_free(c);
}

static void host_files_off_or_outside_roots_are_refused(void **state) {
  fx *f = *state;
  self_module *s = &f->self;
  uintptr_t pc = f->pc;
  char dir[] = "/tmp/gt-symroot-XXXXXX";
  assert_non_null(mkdtemp(dir));
  const char *modes[2] = {"no", dir};
  for (int i = 0; i < 2; i++) {
    symcache *c = cache_new(NULL, modes[i], 0);
    symcache_budget b = plenty();
    int rc;
    free(resolve(c, &s->m, pc, &b, &rc));
    assert_int_equal(rc, 0);
    symcache_stats st;
    symcache_get_stats(c, &st);
    assert_int_equal(st.loaded_total, 0);
    assert_int_equal(st.refused_total, i == 1); /* "no" is not a refusal */
    symcache_free(c);
  }
  rmdir(dir);
}

static void lru_keeps_at_most_max_modules(void **state) {
  fx *f = *state;
  const self_module *self = &f->self;
  self_module lib;
  if (self_module_get(&lib, "libcmocka") != 0)
    skip();
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 1);
  symcache_budget b = plenty();
  int rc;
  free(resolve(c, &self->m, pc, &b, &rc));
  assert_int_equal(rc, 1);
  /* Any address of the library: its first function-ish byte. */
  free(resolve(c, &lib.m, (uintptr_t)&_cmocka_run_group_tests + 1, &b, &rc));
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_int_equal(st.loaded_total, 2);
  assert_int_equal(st.modules, 1);
  assert_int_equal(st.evicted_total, 1);
  assert_int_equal(symcache_check_invariants(c), 0);
  /* The first is opened again when asked for. */
  free(resolve(c, &self->m, pc, &b, &rc));
  assert_int_equal(rc, 1);
  symcache_get_stats(c, &st);
  assert_int_equal(st.loaded_total, 3);
  assert_int_equal(st.modules, 1);
  symcache_free(c);
}

static void budget_stops_loads_and_lookups(void **state) {
  fx *f = *state;
  self_module *s = &f->self;
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 0);
  symcache_budget none = {0, 100};
  int rc;
  free(resolve(c, &s->m, pc, &none, &rc));
  assert_int_equal(rc, SYMCACHE_OVER_BUDGET);
  symcache_budget one = {1, 1};
  free(resolve(c, &s->m, pc, &one, &rc));
  assert_int_equal(rc, 1);
  free(resolve(c, &s->m, pc, &one, &rc));
  assert_int_equal(rc, SYMCACHE_OVER_BUDGET);
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_int_equal(st.over_budget_total, 2);
  symcache_free(c);
}

static void request_names_each_frame_once(void **state) {
  fx *f = *state;
  self_module *s = &f->self;
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 0);
  symreq *r = symreq_new(c);
  assert_non_null(r);
  const gtp_symbolizer *sym = symreq_symbolizer(r);
  char first[512] = "";
  for (int i = 0; i < 3; i++) {
    gtp_wbuf out;
    gtp_wbuf_init(&out, 0);
    assert_int_equal(sym->resolve(sym->ctx, &s->m, pc - s->m.base, &out), 1);
    gtp_wbuf_put(&out, "", 1);
    if (i == 0)
      snprintf(first, sizeof first, "%s", (char *)out.data);
    assert_string_equal((char *)out.data, first);
    gtp_wbuf_fini(&out);
  }
  /* Same offset, another module (build id): not the cached name. */
  s->bid[1] ^= 0x55;
  gtp_wbuf out;
  gtp_wbuf_init(&out, 0);
  assert_int_equal(sym->resolve(sym->ctx, &s->m, pc - s->m.base, &out), 0);
  gtp_wbuf_fini(&out);
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_int_equal(st.lookups_total, 1);
  symreq_free(r);
  symcache_free(c);
}

/* Downloads symbolize side by side: each thread its own request over one
 * cache that holds a single module, so every other lookup evicts what
 * another thread just loaded. Every name must still be right (run under
 * TSan in CI). */
typedef struct racer {
  symcache *c;
  const self_module *self, *lib;
  uintptr_t pc, lib_pc;
  const char *want; /* the probe's name */
  int bad;
} racer;

static void *race(void *arg) {
  racer *r = arg;
  for (int i = 0; i < 40 && !r->bad; i++) {
    symreq *q = symreq_new(r->c); /* a new request: no name cached */
    if (!q) {
      r->bad = 1;
      break;
    }
    const gtp_symbolizer *sym = symreq_symbolizer(q);
    gtp_wbuf out;
    gtp_wbuf_init(&out, 0);
    int rc = sym->resolve(sym->ctx, &r->self->m, r->pc - r->self->m.base, &out);
    gtp_wbuf_put(&out, "", 1);
    if (rc != 1 || strcmp((char *)out.data, r->want))
      r->bad = 1;
    gtp_wbuf_reset(&out);
    rc = sym->resolve(sym->ctx, &r->lib->m, r->lib_pc - r->lib->m.base, &out);
    if (rc < 0)
      r->bad = 1;
    gtp_wbuf_fini(&out);
    symreq_free(q);
  }
  return NULL;
}

static void concurrent_requests_share_one_cache(void **state) {
  fx *f = *state;
  const self_module *self = &f->self;
  self_module lib;
  if (self_module_get(&lib, "libcmocka") != 0)
    skip();
  uintptr_t pc = f->pc;
  symcache *c = cache_new(NULL, "yes", 1);
  symcache_budget b = plenty();
  int rc;
  char *want = resolve(c, &self->m, pc, &b, &rc);
  assert_int_equal(rc, 1);
  racer r[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (racer){
        c, self, &lib, pc, (uintptr_t)&_cmocka_run_group_tests + 1, want, 0};
    assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(r[i].bad, 0);
  }
  symcache_stats st;
  symcache_get_stats(c, &st);
  assert_true(st.evicted_total > 0);
  assert_int_equal(symcache_check_invariants(c), 0);
  free(want);
  symcache_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(names_own_function_and_call_line,
                                      fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(
          build_id_mismatch_and_no_build_id_give_nothing, fx_setup,
          fx_teardown),
      cmocka_unit_test_setup_teardown(
          host_files_off_or_outside_roots_are_refused, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(lru_keeps_at_most_max_modules, fx_setup,
                                      fx_teardown),
      cmocka_unit_test_setup_teardown(budget_stops_loads_and_lookups, fx_setup,
                                      fx_teardown),
      cmocka_unit_test_setup_teardown(request_names_each_frame_once, fx_setup,
                                      fx_teardown),
      cmocka_unit_test_setup_teardown(concurrent_requests_share_one_cache,
                                      fx_setup, fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
