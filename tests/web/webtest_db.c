/* webtest_db.c: see webtest_db.h. */
#include "config.h"

#include "webtest_db.h"
#include "../lib/prng.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t wt_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Store thread: counts, and wakes feed waiters the way gentraced does. */
static void on_done(void *ctx, store_gen *g) {
  wt_db *d = ctx;
  pthread_mutex_lock(&d->lock);
  if (g->result == 0 || g->result == 1) {
    if (g->seq > d->last_seq)
      d->last_seq = g->seq;
    if (d->notify) {
      d->notify_mono_ns = wt_mono_ns();
      web_notify_commit(d->notify, g->seq);
    }
  } else {
    d->failed++;
  }
  d->done++;
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&d->lock);
  store_gen_free(g);
}

int wt_db_open(wt_db *d, const char *path) {
  memset(d, 0, sizeof *d);
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->cond, NULL);
  d->pins = store_pins_new();
  store_config cfg = {0};
  cfg.path = path;
  cfg.zstd_level = 1;
  cfg.batch_max = 64;
  cfg.pins = d->pins;
  char *cause = NULL;
  int rc = store_open(&cfg, on_done, d, &d->st, &cause);
  if (rc < 0) {
    fprintf(stderr, "store_open: %s\n", cause ? cause : "?");
    free(cause);
  }
  return rc;
}

int wt_db_submit(wt_db *d, const gtf_spec *s, const char *tags_json) {
  store_gen *g = calloc(1, sizeof *g);
  if (!g)
    return -1;
  memcpy(g->session, s->session, 16);
  g->service = strdup(s->service);
  g->host = strdup(s->host);
  g->agent_version = strdup(s->agent_version);
  g->tags_json = strdup(tags_json ? tags_json : "{}");
  g->pid = s->pid;
  g->process_start_ns = s->process_start_ns;
  g->gen = s->gen;
  g->start_ns = (int64_t)s->start_real_ns;
  g->end_ns = (int64_t)(s->start_real_ns + s->period_ns);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_gen_end end;
  if (gtf_gen_start(&b, s) < 0 || gtf_body(&b, s, &end) < 0 ||
      gtp_put_gen_end(&b, &end) < 0) {
    gtp_wbuf_fini(&b);
    store_gen_free(g);
    return -1;
  }
  g->end = end;
  g->payload = b.data; /* taken */
  g->len = b.len;
  int rc = store_submit(d->st, g);
  if (rc < 0)
    store_gen_free(g);
  return rc;
}

int wt_db_wait(wt_db *d, unsigned total, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  int rc = 0;
  pthread_mutex_lock(&d->lock);
  while (d->done < total && rc == 0)
    rc = pthread_cond_timedwait(&d->cond, &d->lock, &ts);
  int ok = d->done >= total;
  pthread_mutex_unlock(&d->lock);
  return ok ? 0 : -1;
}

void wt_db_set_notify(wt_db *d, web_server *w) {
  pthread_mutex_lock(&d->lock);
  d->notify = w;
  pthread_mutex_unlock(&d->lock);
}

void wt_db_close(wt_db *d) {
  if (d->st)
    store_close(d->st);
  d->st = NULL;
  store_pins_free(d->pins);
  pthread_cond_destroy(&d->cond);
  pthread_mutex_destroy(&d->lock);
}

/* A generation of `batches` EVENTS records of ~64 KiB each, for tests that
 * need windows larger than socket buffers. */
int wt_db_submit_big(wt_db *d, const uint8_t session[16], uint64_t gen,
                     int64_t start_ns, unsigned batches) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, session, 16);
  gs.gen = gen;
  gs.service = (gtp_str){"bigsvc", 6};
  gs.host = (gtp_str){"host-a", 6};
  gs.agent_version = (gtp_str){"0.1.0", 5};
  gs.pid = 99;
  gs.process_start_ns = (uint64_t)start_ns;
  gtp_put_gen_start(&b, &gs);
  size_t body = b.len;
  uint64_t id = 1;
  gtp_str name = {"op", 2};
  gtp_put_strings(&b, &id, &name, 1);
  static uint8_t ev[GTP_BATCH_MAX];
  uint64_t x = gen * 2654435761u + 7, base = 1000 + gen * 1000000000ull;
  uint64_t nevents = 0;
  for (unsigned t = 0; t < batches; t++) {
    size_t len = 0;
    uint64_t n = 0, prev = base, tk = base;
    while (len + GTP_EVENT_MAX < sizeof ev) {
      lcg64(&x);
      gtp_event e;
      memset(&e, 0, sizeof e);
      e.type = GTP_EV_INSTANT;
      tk += 1 + (x >> 44);
      e.ticks = tk;
      e.args[0] = 1;
      int k = gtp_event_encode(ev + len, &e, prev);
      if (k < 0)
        break;
      len += (size_t)k;
      prev = tk;
      n++;
    }
    gtp_put_batch(&b, gen, t + 1, base, n, ev, len);
    nevents += n;
  }
  gtp_clock c = {base,
                 base,
                 (uint64_t)start_ns,
                 base + 1000000000ull,
                 base + 1000000000ull,
                 (uint64_t)start_ns + 1000000000ull};
  gtp_put_clock(&b, &c);
  gtp_gen_end end;
  memset(&end, 0, sizeof end);
  end.gen = gen;
  if (b.err || gtp_manifest_compute(b.data + body, b.len - body, &end) < 0 ||
      gtp_put_gen_end(&b, &end) < 0) {
    gtp_wbuf_fini(&b);
    return -1;
  }
  store_gen *g = calloc(1, sizeof *g);
  memcpy(g->session, session, 16);
  g->service = strdup("bigsvc");
  g->host = strdup("host-a");
  g->agent_version = strdup("0.1.0");
  g->tags_json = strdup("{}");
  g->pid = 99;
  g->process_start_ns = (uint64_t)start_ns;
  g->gen = gen;
  g->start_ns = start_ns;
  g->end_ns = start_ns + 1000000000;
  g->end = end;
  g->payload = b.data;
  g->len = b.len;
  int rc = store_submit(d->st, g);
  if (rc < 0)
    store_gen_free(g);
  return rc;
}
