/* store_fx.h: the cmocka fixture of the tests that run one store (the
 * writer) in a scratch directory: test_store.c, test_store_group.c and
 * test_store_summary.c. setup/teardown make and remove the directory, the
 * done() collector and the pins; open_store opens the store on them or
 * fails the test with the cause. Header-only, static functions (needs
 * <cmocka.h> first); each test binary includes it once. */
#ifndef STORE_FX_H
#define STORE_FX_H

#include <stdlib.h>
#include <string.h>

#include "store_fixture.h"
#include "store_pin.h"
#include "store_read.h"

typedef struct fx {
  sf_dir dir;
  sf_done done;
  store_pins *pins;
  store *s;
} fx;

static int setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  sf_dir_make(&f->dir);
  sf_done_init(&f->done);
  f->pins = store_pins_new();
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  store_close(f->s);
  sf_done_fini(&f->done);
  store_pins_free(f->pins);
  sf_dir_remove(&f->dir);
  free(f);
  return 0;
}

static void open_store(fx *f, store_config *c) {
  char *cause = NULL;
  c->pins = f->pins;
  int rc = store_open(c, sf_done_cb, &f->done, &f->s, &cause);
  if (rc != 0)
    fail_msg("store_open: %d %s", rc, cause ? cause : "");
  free(cause);
}

static inline void open_default(fx *f) {
  store_config c = sf_config(&f->dir);
  open_store(f, &c);
}

/* The file holds an older schema: a reader alone refuses it and says how to
 * fix that (its queries need what the writer's migration adds); then the
 * writer opens it, which migrates. */
static inline void reader_refuses_older_then_open(fx *f) {
  store_reader *r = NULL;
  char *cause = NULL;
  assert_int_equal(store_reader_open(f->dir.db, &r, &cause), GTP_E_VERSION);
  assert_non_null(cause);
  assert_non_null(strstr(cause, "older"));
  free(cause);
  f->done.n = 0;
  open_default(f);
}

#endif
