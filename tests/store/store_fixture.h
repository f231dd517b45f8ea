/* store_fixture.h: helpers shared by the store tests (test_store.c,
 * test_store_read.c): a scratch directory, real generations built with the
 * proto writer (tests/proto/gen_fixture.h), and a done() collector.
 * Header-only, static functions; each test binary includes it once. */
#ifndef STORE_FIXTURE_H
#define STORE_FIXTURE_H

#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../proto/gen_fixture.h"
#include "format.h"
#include "store.h"
#include "../lib/prng.h"

/* ------------------------------------------------------------ scratch dir */

typedef struct sf_dir {
  char dir[64];
  char db[128];
} sf_dir;

static inline void sf_dir_make(sf_dir *d) {
  snprintf(d->dir, sizeof d->dir, "/tmp/gt-store-XXXXXX");
  if (!mkdtemp(d->dir)) {
    perror("mkdtemp");
    abort();
  }
  snprintf(d->db, sizeof d->db, "%s/test.db", d->dir);
}

static inline void sf_dir_remove(sf_dir *d) {
  DIR *dh = opendir(d->dir);
  if (dh) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(dh)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
      unlink(p);
    }
    closedir(dh);
  }
  rmdir(d->dir);
}

static inline int64_t sf_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void sf_sleep_ms(unsigned ms) {
  struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

static inline uint64_t sf_file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ------------------------------------------------------------ generations */

/* What a test wants in one generation. */
typedef struct sf_gen_opts {
  unsigned session; /* gtf_session number */
  uint64_t gen;
  int64_t start_ns;  /* 0: the gen_fixture default (2026-01-01 + gen s) */
  int64_t period_ns; /* 0: 1 s */
  size_t noise;      /* > 0: add this many incompressible log bytes */
  const char *service, *host; /* NULL: gen_fixture's */
  const char *tags_json;      /* NULL: {"env":"prod","zone":"eu-1"} */
} sf_gen_opts;

/* EVENTS records full of LOG events with random text, so zstd cannot
 * shrink the generation (size-retention and disk-full tests need real
 * bytes on disk). */
static inline int sf_put_noise(gtp_wbuf *b, const gtf_spec *s, size_t noise) {
  uint64_t rng = s->gen * 7919 + 17;
  uint8_t *events = malloc(GTP_BATCH_MAX);
  char msg[4096];
  int rc = 0;
  if (!events)
    return -1;
  while (noise > 0 && rc == 0) {
    size_t len = 0;
    uint64_t prev = s->start_ticks, n = 0;
    while (len + sizeof msg + GTP_EVENT_MAX <= GTP_BATCH_MAX && noise > 0) {
      size_t m = noise < sizeof msg ? noise : sizeof msg;
      for (size_t i = 0; i < m; i++)
        msg[i] = (char)(xorshift64star(&rng) >> 56);
      gtp_event ev;
      memset(&ev, 0, sizeof ev);
      ev.type = GTP_EV_LOG;
      ev.ticks = prev + 1;
      ev.args[0] = GTF_S_HTTP;
      ev.msg = (const uint8_t *)msg;
      ev.msg_len = m;
      int k = gtp_event_encode(events + len, &ev, prev);
      if (k < 0) {
        rc = k;
        break;
      }
      len += (size_t)k;
      prev = ev.ticks;
      n++;
      noise -= m;
    }
    if (rc == 0)
      rc = gtp_put_batch(b, s->gen, 999, s->start_ticks, n, events, len);
  }
  free(events);
  return rc;
}

/* Builds a whole generation (GEN_START + body + GEN_END) into b and returns
 * its manifest in *end. */
static inline int sf_build(gtp_wbuf *b, const sf_gen_opts *o, gtp_gen_end *end,
                           gtf_spec *spec_out) {
  gtf_spec s;
  gtf_spec_init(&s, o->session, o->gen);
  if (o->start_ns)
    s.start_real_ns = (uint64_t)o->start_ns;
  if (o->period_ns)
    s.period_ns = (uint64_t)o->period_ns;
  if (o->service)
    s.service = o->service;
  if (o->host)
    s.host = o->host;
  int rc = gtf_gen_start(b, &s);
  if (rc < 0)
    return rc;
  size_t body = b->len;
  if ((rc = gtf_body(b, &s, end)) < 0)
    return rc;
  if (o->noise) {
    if ((rc = sf_put_noise(b, &s, o->noise)) < 0)
      return rc;
    gtp_gen_end e2 = *end;
    if ((rc = gtp_manifest_compute(b->data + body, b->len - body, &e2)) < 0)
      return rc;
    *end = e2;
  }
  if ((rc = gtp_put_gen_end(b, end)) < 0)
    return rc;
  if (spec_out)
    *spec_out = s;
  return b->err;
}

static inline char *sf_strdup(const char *s) {
  char *p = strdup(s);
  if (!p)
    abort();
  return p;
}

/* A store_gen as the ingest loop would hand it over. */
static inline store_gen *sf_gen_new(const sf_gen_opts *o) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_gen_end end;
  gtf_spec s;
  if (sf_build(&b, o, &end, &s) != 0)
    abort();
  store_gen *g = calloc(1, sizeof *g);
  if (!g)
    abort();
  memcpy(g->session, s.session, 16);
  g->service = sf_strdup(s.service);
  g->host = sf_strdup(s.host);
  g->agent_version = sf_strdup(s.agent_version);
  g->tags_json = sf_strdup(
      o->tags_json ? o->tags_json : "{\"env\":\"prod\",\"zone\":\"eu-1\"}");
  g->pid = s.pid;
  g->process_start_ns = s.process_start_ns;
  g->gen = s.gen;
  g->start_ns = (int64_t)s.start_real_ns;
  g->end_ns = (int64_t)(s.start_real_ns + s.period_ns);
  g->end = end;
  g->payload = b.data; /* ownership moves to g */
  g->len = b.len;
  return g;
}

static inline void sf_session_hex(unsigned n, char out[33]) {
  uint8_t id[16];
  gtf_session(id, n);
  gtp_session_hex(id, out);
}

/* ------------------------------------------------------- done collector */

typedef struct sf_done_rec {
  uint64_t gen;
  int result;
  int64_t seq;
  uint64_t stored_bytes;
  uint8_t session[16];
  int more; /* store_gen.done_more as done() saw it */
} sf_done_rec;

typedef struct sf_done {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  sf_done_rec recs[4096];
  size_t n;
  size_t
      keep; /* keep this many store_gens instead of freeing (payload checks) */
  store_gen *kept[256];
  size_t nkept;
} sf_done;

static inline void sf_done_init(sf_done *d) {
  memset(d, 0, sizeof *d);
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->cond, NULL);
}

static inline void sf_done_fini(sf_done *d) {
  for (size_t i = 0; i < d->nkept; i++)
    store_gen_free(d->kept[i]);
  pthread_mutex_destroy(&d->lock);
  pthread_cond_destroy(&d->cond);
}

static inline void sf_done_cb(void *ctx, store_gen *g) {
  sf_done *d = ctx;
  pthread_mutex_lock(&d->lock);
  if (d->n < sizeof d->recs / sizeof d->recs[0]) {
    sf_done_rec *r = &d->recs[d->n];
    r->gen = g->gen;
    r->result = g->result;
    r->seq = g->seq;
    r->stored_bytes = g->stored_bytes;
    memcpy(r->session, g->session, 16);
    r->more = g->done_more;
  }
  d->n++;
  if (d->nkept < d->keep && d->nkept < 256)
    d->kept[d->nkept++] = g;
  else
    store_gen_free(g);
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&d->lock);
}

/* Waits until at least n completions arrived (10 s at most). Returns the
 * count seen. */
static inline size_t sf_done_wait(sf_done *d, size_t n) {
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += 10;
  pthread_mutex_lock(&d->lock);
  while (d->n < n) {
    if (pthread_cond_timedwait(&d->cond, &d->lock, &dl) != 0)
      break;
  }
  size_t got = d->n;
  pthread_mutex_unlock(&d->lock);
  return got;
}

/* Submits g and waits for its completion; returns its result. */
static inline int sf_commit_one(store *s, sf_done *d, store_gen *g) {
  pthread_mutex_lock(&d->lock);
  size_t want = d->n + 1;
  pthread_mutex_unlock(&d->lock);
  if (store_submit(s, g) != 0)
    abort();
  if (sf_done_wait(d, want) < want)
    return -99999;
  pthread_mutex_lock(&d->lock);
  int r = d->recs[want - 1].result;
  pthread_mutex_unlock(&d->lock);
  return r;
}

/* Polls store stats until pred holds (timeout_ms at most). */
#define SF_WAIT_STATS(s, st, timeout_ms, pred)                                 \
  ({                                                                           \
    int ok_ = 0;                                                               \
    for (unsigned w_ = 0; w_ <= (timeout_ms) / 20; w_++) {                     \
      store_stats_get((s), &(st));                                             \
      if (pred) {                                                              \
        ok_ = 1;                                                               \
        break;                                                                 \
      }                                                                        \
      sf_sleep_ms(20);                                                         \
    }                                                                          \
    ok_;                                                                       \
  })

/* ------------------------------------------------------ raw SQLite peeks */

/* The first column of sql's first row on an open connection (-1: none). */
static inline int64_t sf_db_int(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static inline int64_t sf_sql_int(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  int64_t v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    v = sf_db_int(h, sql);
  }
  sqlite3_close(h);
  return v;
}

/* Runs sql (no rows) on a separate read-write connection; SQLite code. */
static inline int sf_sql_exec(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(h, 5000);
    rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
  }
  sqlite3_close(h);
  return rc;
}

/* PRAGMA integrity_check == "ok", on an open connection. */
static inline int sf_db_integrity_ok(sqlite3 *h) {
  sqlite3_stmt *st = NULL;
  int ok = 0;
  if (sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(st, 0);
    ok = t && strcmp(t, "ok") == 0;
  }
  sqlite3_finalize(st);
  return ok;
}

/* The same on a read-only connection of its own to the file db. */
static inline int sf_integrity_ok(const char *db) {
  sqlite3 *h = NULL;
  int ok = 0;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
    ok = sf_db_integrity_ok(h);
  sqlite3_close(h);
  return ok;
}

static inline store_config sf_config(const sf_dir *d) {
  store_config c;
  memset(&c, 0, sizeof c);
  c.path = d->db;
  c.zstd_level = 3;
  c.batch_max = 64;
  return c;
}

#endif /* STORE_FIXTURE_H */
