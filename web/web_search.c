/* web_search.c: GET /v1/search (spans by name and duration, fleet-wide) and
 * GET /v1/summary (per-name statistics and histograms) over the summary
 * tables of either backend (store/storage.h, docs/SEARCH.md).
 *
 * Both answers are built in memory: a search page holds at most
 * WEB_SEARCH_LIMIT_MAX spans and a summary one row per distinct name, both
 * bounded by the JSON writer's limit (web_reply then accounts the bytes
 * held against WEB_HELD_MAX like every other listing).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httptime.h"
#include "storage.h"
#include "store_search.h"
#include "summary.h"
#include "web_internal.h"

#define WEB_SEARCH_LIMIT_DEFAULT 100
#define WEB_SEARCH_LIMIT_MAX 10000
#define WEB_NAME_MAX 1024
#define NS_PER_S INT64_C(1000000000)

/* from=/to=/last= into [from, to): last= alone, or from= (to= defaults to
 * now), or nothing: the last hour. -1 after answering 400. */
static int parse_range(web_req *r, int64_t *from, int64_t *to) {
  int64_t last = 0;
  int has_from, has_to, has_last;
  *from = 0;
  *to = 0;
  if ((has_from = web_arg_time(r, "from", from)) < 0 ||
      (has_to = web_arg_time(r, "to", to)) < 0 ||
      (has_last = web_arg_dur(r, "last", &last)) < 0)
    return -1;
  if (has_last && (has_from || has_to)) {
    web_error(r, 400, "bad_parameter",
              "last: give either last= or from=/to=, not both");
    return -1;
  }
  if (has_last || (!has_from && !has_to)) {
    if (!has_last)
      last = 3600 * NS_PER_S;
    *to = r->now_ns;
    *from = *to - last > 0 ? *to - last : 0;
  } else {
    if (!has_from) {
      web_error(r, 400, "bad_parameter",
                "from: required with to= (or use last=DURATION)");
      return -1;
    }
    if (!has_to)
      *to = r->now_ns;
  }
  if (*from >= *to) {
    web_error(r, 400, "bad_parameter",
              "from: must be before to (the range is [from, to))");
    return -1;
  }
  return 0;
}

/* name=X exact, name=X* prefix (the * only at the end). */
static int parse_name(web_req *r, char *out, size_t cap, const char **name,
                      int *prefix) {
  const char *n = web_arg(r, "name");
  *name = NULL;
  *prefix = 0;
  if (!n)
    return 0;
  size_t len = strlen(n);
  if (len == 0 || len >= cap) {
    web_error(r, 400, "bad_parameter",
              "name: expected 1 to %d bytes, e.g. name=checkout or "
              "name=checkout.*",
              (int)cap - 1);
    return -1;
  }
  memcpy(out, n, len + 1);
  if (out[len - 1] == '*') {
    out[--len] = 0;
    *prefix = 1;
  }
  if (strchr(out, '*')) {
    web_error(r, 400, "bad_parameter",
              "name: '*' is allowed only at the end (a prefix match)");
    return -1;
  }
  *name = out;
  return 0;
}

/* service= (must be known: 404 otherwise) or session=. -1 after an error
 * answer. */
static int parse_scope(web_req *r, storage_reader *sr, const char **service,
                       char sid[33], const char **session) {
  int has = web_arg_session(r, "session", sid);
  if (has < 0)
    return -1;
  *session = has ? sid : NULL;
  *service = web_arg(r, "service");
  if (*service && *session) {
    web_error(r, 400, "bad_parameter",
              "session: give either session= or service=, not both");
    return -1;
  }
  if (*service) {
    int k = storage_search_service_known(sr, *service);
    if (k < 0) {
      web_error(r, web_rc_status(k), web_rc_code(k),
                "looking up the service failed: %s", gtp_strerror(k));
      return -1;
    }
    if (k == 0) {
      web_error(r, 404, "not_found", "no such service: %.200s", *service);
      return -1;
    }
  }
  return 0;
}

/* Borrows a reader (either backend: storage.h), parses the scope
 * (service=, session=) and opens the answer in j:
 * {"from":...,"to":...,"<key>":[ . Returns the reader (to give back), or
 * NULL after answering (the reader given back, j untouched). */
static storage_reader *open_answer(web_req *r, const char **service,
                                   char sid[33], const char **session,
                                   int64_t from_ns, int64_t to_ns,
                                   const char *key, json *j) {
  storage_reader *sr = web_reader_get(r);
  if (!sr)
    return NULL;
  if (parse_scope(r, sr, service, sid, session) < 0) {
    web_reader_put(r, sr);
    return NULL;
  }
  json_init(j, 0);
  json_obj_begin(j);
  web_put_time(j, "from", from_ns);
  web_put_time(j, "to", to_ns);
  json_key(j, key);
  json_arr_begin(j);
  return sr;
}

static const char *kind_name(int kind) {
  return kind == GTP_SUM_TASK ? "task" : "region";
}

/* ----------------------------------------------------------- /v1/search */

static int span_row(void *cls, const store_span_row *s) {
  json *j = cls;
  json_obj_begin(j);
  json_kv_str(j, "session", s->session);
  json_kv_str(j, "service", s->service);
  json_kv_str(j, "host", s->host);
  json_kv_u64(j, "gen", s->gen);
  json_kv_str(j, "kind", kind_name(s->kind));
  json_key(j, "name");
  json_strn(j, s->name, s->name_len);
  json_kv_u64(j, "thread", s->thread);
  web_put_time(j, "start", s->start_ns);
  json_key(j, "duration_ns");
  json_i64_str(j, (int64_t)s->dur_ns);
  /* The window around it: the span plus half its length (at least 100 ms)
   * on each side, so what led to it and what followed are in view. */
  int64_t pad = (int64_t)(s->dur_ns / 2);
  if (pad < NS_PER_S / 10)
    pad = NS_PER_S / 10;
  int64_t from = s->start_ns - pad;
  int64_t to = s->start_ns + (int64_t)s->dur_ns + pad;
  char url[160];
  snprintf(url, sizeof url,
           "/v1/trace?session=%s&from=%" PRId64 "ns&to=%" PRId64 "ns",
           s->session ? s->session : "", from, to);
  json_kv_str(j, "window", url);
  json_obj_end(j);
  return j->buf.err ? 1 : 0;
}

static int parse_cursor(const char *c, int64_t *seq, uint64_t *skip) {
  char *end;
  errno = 0;
  unsigned long long a = strtoull(c, &end, 10);
  if (errno || end == c || *end != '.' || a == 0 || a > INT64_MAX ||
      c[0] == '-' || c[0] == '+')
    return -1;
  const char *p = end + 1;
  if (*p < '0' || *p > '9')
    return -1;
  unsigned long long b = strtoull(p, &end, 10);
  if (errno || *end != 0 || b > UINT32_MAX)
    return -1;
  *seq = (int64_t)a;
  *skip = b;
  return 0;
}

enum MHD_Result web_search(web_req *r) {
  static const char *const allowed[] = {"service", "session", "name", "min",
                                        "max",     "from",    "to",   "last",
                                        "limit",   "cursor",  NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  store_search_query q;
  memset(&q, 0, sizeof q);
  char name[WEB_NAME_MAX + 1];
  int64_t min = 0, max = 0;
  int has_max;
  uint64_t limit = WEB_SEARCH_LIMIT_DEFAULT;
  if (web_arg_dur(r, "min", &min) < 0 ||
      (has_max = web_arg_dur(r, "max", &max)) < 0 ||
      web_arg_u64(r, "limit", 1, WEB_SEARCH_LIMIT_MAX, &limit) < 0 ||
      parse_range(r, &q.from_ns, &q.to_ns) < 0 ||
      parse_name(r, name, sizeof name, &q.name, &q.prefix) < 0)
    return r->ret;
  if (has_max && max < min)
    return web_error(r, 400, "bad_parameter",
                     "max: must be at least min (both inclusive)");
  const char *cur = web_arg(r, "cursor");
  if (cur && parse_cursor(cur, &q.cursor_seq, &q.cursor_skip) < 0)
    return web_error(r, 400, "bad_parameter",
                     "cursor: not a cursor of this search (pass next_cursor "
                     "as it came)");
  q.min_ns = (uint64_t)min;
  q.max_ns = has_max ? (uint64_t)max : UINT64_MAX;
  q.limit = (uint32_t)limit;
  char sid[33];
  json j;
  storage_reader *rd = open_answer(r, &q.service, sid, &q.session, q.from_ns,
                                   q.to_ns, "spans", &j);
  if (!rd)
    return r->ret;
  int64_t next_seq = 0;
  uint64_t next_skip = 0;
  int rc = storage_search_spans(rd, &q, span_row, &j, &next_seq, &next_skip);
  web_reader_put(r, rd);
  json_arr_end(&j);
  json_key(&j, "next_cursor");
  if (next_seq > 0) {
    char c[48];
    snprintf(c, sizeof c, "%" PRId64 ".%" PRIu64, next_seq, next_skip);
    json_str(&j, c);
  } else {
    json_null(&j);
  }
  json_obj_end(&j);
  if (rc < 0 || j.buf.err) {
    json_fini(&j);
    rc = rc < 0 ? rc : j.buf.err;
    return web_error(r, web_rc_status(rc), web_rc_code(rc), "search failed: %s",
                     gtp_strerror(rc));
  }
  return web_reply_json(r, 200, &j);
}

/* ---------------------------------------------------------- /v1/summary */

static int stats_row(void *cls, const store_name_stats *s) {
  json *j = cls;
  json_obj_begin(j);
  json_kv_str(j, "kind", kind_name(s->kind));
  json_key(j, "name");
  json_strn(j, s->name, s->name_len);
  json_kv_u64(j, "count", s->count);
  json_kv_u64(j, "generations", s->gens);
  json_key(j, "total_ns");
  json_i64_str(j, (int64_t)s->total_ns);
  json_key(j, "min_ns");
  json_i64_str(j, (int64_t)s->min_ns);
  json_key(j, "max_ns");
  json_i64_str(j, (int64_t)s->max_ns);
  static const struct {
    const char *key;
    double q;
  } qs[] = {{"p50_ns", 0.5}, {"p90_ns", 0.9}, {"p99_ns", 0.99}};
  for (size_t i = 0; i < 3; i++) {
    json_key(j, qs[i].key);
    json_i64_str(j, (int64_t)gtp_sum_quantile(s->hist, qs[i].q, s->max_ns));
  }
  /* Non-empty buckets: [lo, hi) in ns and the count. */
  json_key(j, "buckets");
  json_arr_begin(j);
  for (unsigned b = 0; b < GTP_SUM_BUCKETS; b++) {
    if (!s->hist[b])
      continue;
    json_obj_begin(j);
    json_key(j, "lo_ns");
    json_i64_str(j, (int64_t)gtp_sum_bucket_lo(b));
    json_key(j, "hi_ns");
    uint64_t hi = gtp_sum_bucket_hi(b);
    if (hi == UINT64_MAX)
      json_null(j);
    else
      json_i64_str(j, (int64_t)hi);
    json_kv_u64(j, "count", s->hist[b]);
    json_obj_end(j);
  }
  json_arr_end(j);
  json_obj_end(j);
  return j->buf.err ? 1 : 0;
}

enum MHD_Result web_summary(web_req *r) {
  static const char *const allowed[] = {"service", "session", "name", "from",
                                        "to",      "last",    NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  store_summary_query q;
  memset(&q, 0, sizeof q);
  char name[WEB_NAME_MAX + 1];
  if (parse_range(r, &q.from_ns, &q.to_ns) < 0 ||
      parse_name(r, name, sizeof name, &q.name, &q.prefix) < 0)
    return r->ret;
  char sid[33];
  json j;
  storage_reader *rd = open_answer(r, &q.service, sid, &q.session, q.from_ns,
                                   q.to_ns, "names", &j);
  if (!rd)
    return r->ret;
  uint64_t pending = 0;
  int rc = storage_search_summary(rd, &q, stats_row, &j, &pending);
  web_reader_put(r, rd);
  json_arr_end(&j);
  json_kv_u64(&j, "unsummarized_generations", pending);
  json_obj_end(&j);
  if (rc < 0 || j.buf.err) {
    json_fini(&j);
    rc = rc < 0 ? rc : j.buf.err;
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "summary failed: %s", gtp_strerror(rc));
  }
  return web_reply_json(r, 200, &j);
}
