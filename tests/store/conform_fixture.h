/* conform_fixture.h: the two halves of a storage interface conformance
 * test (test_storage.c, test_storage_search.c): a scenario run on SQLite in
 * a scratch directory, then on the shared store (when
 * tests/store/test_shared.sh provides a cluster), whose dump must equal
 * SQLite's byte for byte. Header-only; include after cmocka.h. */
#ifndef CONFORM_FIXTURE_H
#define CONFORM_FIXTURE_H

#include "shared_fixture.h"
#include "storage.h"
#include "store_fixture.h"

/* Runs the scenario on the storage cfg describes; returns its dump
 * (malloc'd, NUL-terminated). */
typedef char *(*conform_scenario)(const storage_config *cfg);

static inline char *conform_sqlite(conform_scenario run) {
  sf_dir dir;
  sf_dir_make(&dir);
  storage_config cfg = {.sqlite = {.path = dir.db}};
  char *dump = run(&cfg);
  sf_dir_remove(&dir);
  return dump;
}

/* Skips without a cluster. GT_SHOW_DUMP=1 prints both dumps. */
static inline void conform_shared(const char *name, conform_scenario run,
                                  const char *sqlite_dump) {
  char db[256], objects[256];
  if (fixture_shared(name, db, sizeof db, objects, sizeof objects))
    skip();
  storage_config cfg = {
      .catalog = db, .objects = objects, .shared = {.max_age_ms = 200}};
  char *shared = run(&cfg);
  assert_non_null(sqlite_dump);
  if (getenv("GT_SHOW_DUMP") || strcmp(shared, sqlite_dump) != 0)
    fprintf(stderr, "--- sqlite\n%s--- shared\n%s", sqlite_dump, shared);
  assert_string_equal(shared, sqlite_dump);
  free(shared);
}

#endif /* CONFORM_FIXTURE_H */
