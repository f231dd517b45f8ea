/* web_feed.c: /v1/feed, generations in commit order, with long polling.
 *
 * The cursor is the commit seq of the last generation answered, written as
 * a decimal string; clients treat it as opaque (docs/HTTP.md), so a shared
 * backend can change its form later.
 *
 * Waiting: a request with nothing new and wait > 0 sleeps on w->feed_cond,
 * which web_notify_commit signals. It re-reads the store at least once a
 * second even without a signal, so a missed or absent notification costs
 * at most a second, never a full wait.
 *
 * Invariants:
 *  1. The wake test MUST compare last_seq with the value taken under
 *     feed_lock *before* the read (`seen`), otherwise a commit announced
 *     between the read and the wait would be slept through, or a
 *     generation deleted after its announcement would make the loop spin.
 *  2. feed_waiters MUST be decremented on every exit from the wait loop,
 *     otherwise the gauge drifts.
 *  3. A request holds a long_polls slot from its first wait to its answer,
 *     and never waits without one: past max_long_polls it is answered 503
 *     at once, so parked feeds never take every connection.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"

typedef struct feed_ctx {
  json *j;
  int64_t cursor;
  uint32_t n;
} feed_ctx;

static int feed_row(void *cls, const store_gen_row *g) {
  feed_ctx *f = cls;
  json *j = f->j;
  char t[HTTPTIME_RFC3339_LEN];
  json_obj_begin(j);
  json_kv_str(j, "session", g->session);
  json_kv_str(j, "service", g->service);
  json_kv_str(j, "host", g->host);
  json_kv_u64(j, "gen", g->gen);
  httptime_format(g->start_ns, t);
  json_kv_str(j, "start", t);
  httptime_format(g->end_ns, t);
  json_kv_str(j, "end", t);
  json_key(j, "start_ns");
  json_i64_str(j, g->start_ns);
  json_key(j, "end_ns");
  json_i64_str(j, g->end_ns);
  json_kv_u64(j, "events", g->events);
  json_kv_u64(j, "bytes", g->bytes);
  json_kv_u64(j, "lost", g->dropped + g->evicted + g->rejected);
  json_obj_end(j);
  if (g->seq > f->cursor)
    f->cursor = g->seq;
  f->n++;
  return j->buf.err ? 1 : 0;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads one page after `after` into a fresh answer. Returns rows (>= 0) or
 * a negative code; on success *j holds the whole answer. */
static int feed_read(web_req *r, int64_t after, uint32_t limit, json *j) {
  storage_reader *sr;
  int rc = readpool_get(r->w->pool, WEB_POOL_WAIT_MS, &sr);
  if (rc < 0)
    return rc;
  feed_ctx f = {j, after, 0};
  json_obj_begin(j);
  json_key(j, "generations");
  json_arr_begin(j);
  rc = storage_read_feed(sr, after, limit, feed_row, &f);
  readpool_put(r->w->pool, sr);
  json_arr_end(j);
  json_key(j, "cursor");
  json_i64_str(j, f.cursor);
  json_obj_end(j);
  if (rc < 0)
    return rc;
  if (j->buf.err)
    return j->buf.err;
  /* A real row proves its seq committed, even if no notification came (a
   * client's `after` proves nothing, so only rows count). */
  if (f.n > 0) {
    pthread_mutex_lock(&r->w->feed_lock);
    if (f.cursor > r->w->last_seq)
      r->w->last_seq = f.cursor;
    pthread_mutex_unlock(&r->w->feed_lock);
  }
  return (int)f.n;
}

/* The cursor a feed starts from: just before the first generation committed
 * at or after since_ns, or the newest (since_ns < 0). On failure the error
 * answer is queued (r->ret) and a negative code returned. */
static int feed_start(web_req *r, int64_t since_ns, int64_t *cursor) {
  storage_reader *sr;
  int rc = readpool_get(r->w->pool, WEB_POOL_WAIT_MS, &sr);
  if (rc == 0) {
    rc = since_ns < 0 ? storage_read_max_seq(sr, cursor)
                      : storage_read_feed_since(sr, since_ns, cursor);
    readpool_put(r->w->pool, sr);
  }
  if (rc == GTP_E_LIMIT)
    web_error(r, 503, "overloaded",
              "every database reader is busy; retry shortly");
  else if (rc < 0)
    web_error(r, web_rc_status(rc), web_rc_code(rc),
                       "reading the feed failed: %s",
              gtp_strerror(rc));
  return rc < 0 ? rc : 0;
}

enum MHD_Result web_feed(web_req *r) {
  static const char *const allowed[] = {"after", "since", "wait", "limit",
                                        NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  web_server *w = r->w;
  uint64_t after = 0, limit = WEB_FEED_LIMIT_DEFAULT, wait_s = 0;
  const char *wv = web_arg(r, "wait");
  const char *av = web_arg(r, "after");
  const char *sv = web_arg(r, "since");
  if (av && sv)
    return web_error(r, 400, "bad_parameter",
                     "after and since: give one (after continues from a "
                     "cursor, since starts at a time)");
  if (sv) {
    /* A dashboard opening on a fleet with days retained starts a minute
     * back instead of replaying everything (store_read_feed_since finds
     * the spot with an index search). */
    int64_t since = 0;
    const char *why = NULL;
    if (gtp_time_parse(sv, r->now_ns, &since, &why) != 0)
      return web_error(r, 400, "bad_parameter", "since: %s", why);
    int64_t cur = 0;
    if (since < 0)
      since = 0; /* before 1970: everything (and < 0 means "newest" below) */
    if (feed_start(r, since, &cur) < 0)
      return r->ret;
    after = (uint64_t)cur;
  } else if (av && strcmp(av, "latest") == 0) {
    /* A dashboard that wants only what commits from now on starts here
     * instead of paging through everything retained. */
    int64_t max = 0;
    if (feed_start(r, -1, &max) < 0)
      return r->ret;
    after = (uint64_t)max;
  } else if (web_arg_u64(r, "after", 0, INT64_MAX, &after) < 0) {
    return r->ret;
  }
  if (web_arg_u64(r, "limit", 1, WEB_FEED_LIMIT_MAX, &limit) < 0)
    return r->ret;
  if (wv) {
    /* Seconds as an integer, or a duration (30s, 500ms). */
    int64_t d = 0;
    int ok = 0;
    if (wv[0] && strspn(wv, "0123456789") == strlen(wv) && strlen(wv) <= 6) {
      d = (int64_t)strtoull(wv, NULL, 10) * 1000000000;
      ok = 1;
    } else {
      ok = httpdur_parse(wv, &d) == 0;
    }
    if (!ok || d > WEB_FEED_WAIT_MAX_S * INT64_C(1000000000))
      return web_error(r, 400, "bad_parameter",
                       "wait: expected seconds from 0 to %d",
                       WEB_FEED_WAIT_MAX_S);
    wait_s = (uint64_t)d; /* in ns from here on */
  }
  int64_t deadline = mono_ns() + (int64_t)wait_s;
  if (wait_s)
    /* MHD's idle timeout would otherwise count the poll as inactivity and
     * drop the connection right when the answer is ready. */
    MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                              (unsigned)(wait_s / 1000000000) +
                                  w->cfg.timeout_s);
  int parked = 0;
  enum MHD_Result ret;
  for (;;) {
    /* Invariant 1: what was announced before this read is covered by it;
     * only an announcement after `seen` is a reason to read again. */
    pthread_mutex_lock(&w->feed_lock);
    int64_t seen = w->last_seq > (int64_t)after ? w->last_seq : (int64_t)after;
    pthread_mutex_unlock(&w->feed_lock);
    json j;
    json_init(&j, 0);
    int n = feed_read(r, (int64_t)after, (uint32_t)limit, &j);
    if (n < 0) {
      json_fini(&j);
      if (n == GTP_E_LIMIT)
        ret = web_error(r, 503, "overloaded",
                        "every database reader is busy; retry shortly");
      else
        ret = web_error(r, web_rc_status(n), web_rc_code(n),
                        "reading the feed failed: %s", gtp_strerror(n));
      break;
    }
    int64_t now = mono_ns();
    if (n > 0 || now >= deadline ||
        atomic_load_explicit(&w->stopping, memory_order_relaxed)) {
      ret = web_reply_json(r, 200, &j);
      break;
    }
    json_fini(&j);
    if (!parked) { /* invariant 3 */
      if ((unsigned)atomic_fetch_add_explicit(&w->long_polls, 1,
                                              memory_order_relaxed) >=
          w->max_long_polls) {
        atomic_fetch_sub_explicit(&w->long_polls, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&w->long_polls_refused, 1,
                                  memory_order_relaxed);
        return web_error(r, 503, "overloaded",
                         "too many feed requests waiting (%u, the "
                         "--http-max-long-polls limit); retry shortly",
                         w->max_long_polls);
      }
      parked = 1;
    }

    /* Nothing new yet: sleep until a commit, the deadline, or a second,
     * whichever comes first, then read again. */
    int64_t until = deadline < now + 1000000000 ? deadline : now + 1000000000;
    struct timespec ts = {(time_t)(until / 1000000000),
                          (long)(until % 1000000000)};
    atomic_fetch_add_explicit(&w->feed_waiters, 1, memory_order_relaxed);
    pthread_mutex_lock(&w->feed_lock);
    while (w->last_seq <= seen && !atomic_load(&w->stopping)) {
      if (pthread_cond_timedwait(&w->feed_cond, &w->feed_lock, &ts) ==
          ETIMEDOUT)
        break;
    }
    pthread_mutex_unlock(&w->feed_lock);
    atomic_fetch_sub_explicit(&w->feed_waiters, 1, memory_order_relaxed);
  }
  if (parked)
    atomic_fetch_sub_explicit(&w->long_polls, 1, memory_order_relaxed);
  return ret;
}
