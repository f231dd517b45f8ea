/* webtest_db.h: fills a real gentraced database through the store's write
 * API (store_open/store_submit, the same path ingest uses) with fixture
 * generations from tests/proto/gen_fixture.h. */
#ifndef WEBTEST_DB_H
#define WEBTEST_DB_H

#include <pthread.h>
#include <stdint.h>

#include "gen_fixture.h"
#include "store.h"
#include "web.h"

typedef struct wt_db {
  store *st;
  store_pins *pins;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Protected by lock. */
  unsigned done, failed;
  int64_t last_seq;
  web_server *notify;     /* done() calls web_notify_commit on it */
  int64_t notify_mono_ns; /* CLOCK_MONOTONIC of the last notification */
} wt_db;

int wt_db_open(wt_db *d, const char *path);
/* Submits the generation described by s (tags as JSON text). 0 or < 0. */
int wt_db_submit(wt_db *d, const gtf_spec *s, const char *tags_json);
/* Waits until `total` generations are done (committed or failed). 0, or -1
 * after timeout_ms. */
int wt_db_wait(wt_db *d, unsigned total, int timeout_ms);
void wt_db_set_notify(wt_db *d, web_server *w);
/* A large generation (batches x ~64 KiB of instants) of service "bigsvc". */
int wt_db_submit_big(wt_db *d, const uint8_t session[16], uint64_t gen,
                     int64_t start_ns, unsigned batches);
void wt_db_close(wt_db *d);
int64_t wt_mono_ns(void);

#endif
