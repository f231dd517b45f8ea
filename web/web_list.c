/* web_list.c: the metadata listings of the HTTP API: /v1/agents and
 * /v1/agents/{session}/generations. Each is one short read on a pooled
 * reader, streamed row by row into a JSON buffer. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"

/* Closes the listing in j ({"...":[ rows ) and answers it, or answers the
 * error of rc (or of j's buffer) and frees j. */
static enum MHD_Result reply_listing(web_req *r, json *j, int rc,
                                     const char *what) {
  json_arr_end(j);
  json_obj_end(j);
  if (rc < 0 || j->buf.err) {
    json_fini(j);
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "listing %s failed: %s", what,
                     gtp_strerror(rc < 0 ? rc : j->buf.err));
  }
  return web_reply_json(r, 200, j);
}

typedef struct agents_ctx {
  web_server *w;
  json *j;
} agents_ctx;

static int agent_row(void *cls, const store_session_row *s) {
  agents_ctx *a = cls;
  json *j = a->j;
  json_obj_begin(j);
  json_kv_str(j, "session", s->session);
  json_kv_str(j, "service", s->service);
  json_kv_str(j, "host", s->host);
  json_kv_u64(j, "pid", s->pid);
  json_kv_str(j, "agent_version", s->agent_version);
  json_key(j, "tags");
  /* Tags are stored as JSON text; never pass through text that would
   * break the answer (invariant: every answer is valid JSON). */
  if (s->tags_json && json_valid(s->tags_json, strlen(s->tags_json)) &&
      s->tags_json[strspn(s->tags_json, " \t\r\n")] == '{')
    json_raw(j, s->tags_json, strlen(s->tags_json));
  else
    json_raw(j, "{}", 2);
  web_put_time(j, "started", s->started_ns);
  web_put_time(j, "first_seen", s->first_seen_ns);
  web_put_time(j, "last_seen", s->last_seen_ns);
  /* Here, or (shared store) on any daemon whose lease runs. */
  json_key(j, "connected");
  json_bool(j, s->connected_any ||
                   (a->w->cfg.connected &&
                    a->w->cfg.connected(a->w->cfg.ctx, s->session) == 1));
  json_kv_u64(j, "generations", s->generations);
  json_key(j, "first_gen");
  if (s->has_gens)
    json_u64(j, s->first_gen);
  else
    json_null(j);
  json_key(j, "last_gen");
  if (s->has_gens)
    json_u64(j, s->last_gen);
  else
    json_null(j);
  json_kv_u64(j, "events", s->events);
  json_kv_u64(j, "bytes", s->bytes);
  json_kv_u64(j, "lost", s->lost);
  json_kv_u64(j, "rejected_generations", s->rejected_gens);
  json_obj_end(j);
  return j->buf.err ? 1 : 0;
}

enum MHD_Result web_agents(web_req *r) {
  static const char *const allowed[] = {"service", "host", "tag", NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  store_session_filter f = {0};
  f.service = web_arg(r, "service");
  f.host = web_arg(r, "host");
  char tag[2 * GTP_IDENT_STR_MAX + 2];
  const char *t = web_arg(r, "tag");
  if (t) {
    const char *colon = strchr(t, ':');
    if (!colon || colon == t || strlen(t) >= sizeof tag)
      return web_error(r, 400, "bad_parameter",
                       "tag: expected KEY:VALUE, e.g. tag=az:eu-1");
    memcpy(tag, t, strlen(t) + 1);
    tag[colon - t] = 0;
    f.tag_key = tag;
    f.tag_value = tag + (colon - t) + 1;
  }
  storage_reader *sr = web_reader_get(r);
  if (!sr)
    return r->ret;
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_key(&j, "agents");
  json_arr_begin(&j);
  agents_ctx a = {r->w, &j};
  int rc = storage_read_sessions(sr, &f, agent_row, &a);
  web_reader_put(r, sr);
  return reply_listing(r, &j, rc, "agents");
}

static int gen_row(void *cls, const store_gen_row *g) {
  json *j = cls;
  json_obj_begin(j);
  json_kv_u64(j, "gen", g->gen);
  web_put_time(j, "start", g->start_ns);
  web_put_time(j, "end", g->end_ns);
  json_kv_u64(j, "events", g->events);
  json_kv_u64(j, "bytes", g->bytes);
  json_kv_u64(j, "stored_bytes", g->stored_bytes);
  json_kv_u64(j, "lost", g->dropped + g->evicted + g->rejected);
  json_key(j, "ledger");
  json_obj_begin(j);
  json_kv_u64(j, "dropped", g->dropped);
  json_kv_u64(j, "evicted", g->evicted);
  json_kv_u64(j, "rejected", g->rejected);
  json_obj_end(j);
  json_kv_str(j, "status", g->status);
  json_kv_str(j, "codec", g->codec);
  web_put_time(j, "committed", g->committed_ns);
  json_obj_end(j);
  return j->buf.err ? 1 : 0;
}

enum MHD_Result web_session_gens(web_req *r, const char *session) {
  static const char *const allowed[] = {"from", "to", "after", "limit", NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  int64_t from = 0, to = INT64_MAX;
  uint64_t after = 0, limit = 1000;
  int has_after = 0;
  if (web_arg_time(r, "from", &from) < 0 || web_arg_time(r, "to", &to) < 0 ||
      (has_after = web_arg_u64(r, "after", 0, INT64_MAX, &after)) < 0 ||
      web_arg_u64(r, "limit", 1, WEB_LIST_LIMIT_MAX, &limit) < 0)
    return r->ret;
  if (from >= to)
    return web_error(r, 400, "bad_parameter",
                     "from: must be before to (the window is [from, to))");
  storage_reader *sr = web_reader_get(r);
  if (!sr)
    return r->ret;
  json j;
  json_init(&j, 0);
  json_obj_begin(&j);
  json_kv_str(&j, "session", session);
  json_key(&j, "generations");
  json_arr_begin(&j);
  int rc = storage_read_session_gens(sr, session, from, to,
                                     has_after ? (int64_t)after : -1,
                                     (uint32_t)limit, gen_row, &j);
  web_reader_put(r, sr);
  if (rc == GTP_E_NOTFOUND) {
    json_fini(&j);
    return web_error(r, 404, "not_found", "no session %s", session);
  }
  return reply_listing(r, &j, rc, "generations");
}
