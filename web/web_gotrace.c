/* web_gotrace.c: GET /v1/trace?format=go: a window of one Go session as a
 * Go execution trace file that `go tool trace` and golang.org/x/exp/trace
 * open (web_trace.c hands format=go requests here).
 *
 * The answer is the 16-byte Go header for the session's go_version tag,
 * then the GOTRACE bytes of the window's generations in generation order
 * (proto/gowin.h). A Go trace reader needs one program's generations, in
 * order, without holes (before Go 1.26 a missing generation reads as
 * "generations out of order"), so:
 *   - a window holding several sessions is refused (400, listing them);
 *   - a session that is not a Go session is refused (400);
 *   - when the stored generations of the window have gaps (generations the
 *     client lost or the store deleted), only the newest run without a gap
 *     is sent, and X-Gentrace-Omitted-Generations says how many were left
 *     out.
 *
 * A download (struct godl) is listed by the handler and then read one
 * generation at a time by MHD's content-reader callback, like the gentrace
 * files of web_trace.c, under the same rules: retention never waits for a
 * download, so a generation deleted after the listing ends it there (what
 * went out is whole generations; the transfer ends without its last chunk,
 * so the client sees it incomplete), and only the client's slowness is
 * timed (--http-send-timeout).
 *
 * Invariants:
 *  1. A download ends at the first listed generation that is gone, never
 *     skips it: a Go trace with a hole is not one.
 *  2. `out` holds at most the Go bytes of one generation (or the header),
 *     so memory does not grow with the window.
 *  3. A store reader is borrowed for one payload read only.
 *  4. A download slot (web_dl_slot_take) is taken before the listing and
 *     given back exactly once: by godl_free, or by the handler when no
 *     godl was made.
 *  5. A send deadline is set only while a block handed to MHD is on its
 *     way to the client (slowguard_send_by), none while the next one is
 *     prepared.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gowin.h"
#include "gtp_error.h"
#include "httptime.h"
#include "web_internal.h"

#define GODL_BLOCK (1u << 20)
#define GO_SESSIONS_LISTED 16 /* sessions named in the 400 answer */

typedef struct go_row {
  int64_t seq;
  uint64_t gen;
  int64_t start_ns, end_ns;
  uint64_t lost;
} go_row;

typedef struct godl {
  web_server *w;
  slowguard_conn *guard; /* the connection's, for send deadlines */
  go_row *rows;          /* generations to send, in gen order */
  size_t n, next;
  int minor;
  int header_done;
  int early;    /* a listed generation was gone: ended at `next` */
  int finished; /* the body went out whole (or ended early / failed) */
  int64_t send_by;
  gtp_wbuf raw, out;
  size_t off;
  char sid[33];
} godl;

static int out_sink(void *ctx, const void *p, size_t n) {
  gtp_wbuf *b = ctx;
  gtp_wbuf_put(b, p, n);
  return b->err;
}

static void godl_free(void *cls) {
  godl *d = cls;
  web_server *w = d->w;
  if (d->early) {
    atomic_fetch_add_explicit(&w->ended_early, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->skipped_gens, d->n - d->next,
                              memory_order_relaxed);
    web_log(w, 1,
            "msg=\"download ended early: retention deleted the rest\" "
            "what=\"go trace %s\" sent_generations=%zu "
            "listed_generations=%zu",
            d->sid, d->next, d->n);
  } else if (!d->finished && d->send_by != 0 &&
             slowguard_now_ns() > d->send_by) {
    atomic_fetch_add_explicit(&w->send_timeouts, 1, memory_order_relaxed);
    web_log(w, 1,
            "msg=\"download cut: client slower than --http-send-timeout\" "
            "what=\"go trace %s\" sent_generations=%zu "
            "listed_generations=%zu",
            d->sid, d->next, d->n);
  }
  gtp_wbuf_fini(&d->raw);
  gtp_wbuf_fini(&d->out);
  free(d->rows);
  web_dl_slot_put(w); /* invariant 4 */
  free(d);
}

/* The Go bytes of generation d->next into d->out; 0 (d->early set if it
 * is gone) or an error. */
static int godl_fill(godl *d) {
  web_server *w = d->w;
  storage_reader *sr;
  int rc = readpool_get(w->pool, WEB_POOL_WAIT_MS, &sr);
  if (rc < 0)
    return rc;
  gtp_wbuf_reset(&d->raw);
  rc = storage_read_payload(sr, d->rows[d->next].seq, &d->raw);
  readpool_put(w->pool, sr);  /* invariant 3 */
  if (rc == GTP_E_NOTFOUND) { /* invariant 1 */
    d->early = 1;
    return 0;
  }
  if (rc < 0 || (rc = d->raw.err) < 0)
    return rc;
  gtp_gen g;
  if ((rc = gtp_gen_parse(d->raw.data, d->raw.len, &g, NULL)) < 0)
    return rc;
  if (gtp_gowin_minor(&g.start) != d->minor)
    rc = GTP_E_VERSION; /* the session's tags changed under us: impossible */
  else
    rc = gtp_gowin_put(&g, out_sink, &d->out);
  gtp_gen_fini(&g);
  return rc;
}

/* The body is over: complete, or ended early / failed (then the transfer
 * ends without its last chunk, which clients report as incomplete). */
static ssize_t godl_end(godl *d, int rc) {
  d->finished = 1;
  d->send_by = 0;
  slowguard_send_by(d->guard, 0);
  if (rc < 0)
    web_log(d->w, 2,
            "msg=\"download aborted\" what=\"go trace %s\" gen=%" PRIu64
            " error=%s",
            d->sid, d->next < d->n ? d->rows[d->next].gen : 0, gtp_errname(rc));
  return rc == 0 && !d->early ? MHD_CONTENT_READER_END_OF_STREAM
                              : MHD_CONTENT_READER_END_WITH_ERROR;
}

static ssize_t godl_read(void *cls, uint64_t pos, char *buf, size_t max) {
  godl *d = cls;
  (void)pos;
  d->send_by = 0; /* the client took the last block (invariant 5) */
  slowguard_send_by(d->guard, 0);
  if (d->finished)
    return MHD_CONTENT_READER_END_OF_STREAM;
  if (max > GODL_BLOCK)
    max = GODL_BLOCK;
  while (d->off == d->out.len) {
    gtp_wbuf_reset(&d->out); /* invariant 2 */
    d->off = 0;
    if (!d->header_done) {
      uint8_t h[GTP_GO_HEADER_SIZE];
      gtp_gowin_header(d->minor, h);
      gtp_wbuf_put(&d->out, h, sizeof h);
      d->header_done = 1;
      continue;
    }
    if (d->next == d->n || d->early) {
      gtp_wbuf_fini(&d->out);
      return godl_end(d, 0);
    }
    if (atomic_load_explicit(&d->w->stopping, memory_order_relaxed))
      return godl_end(d, GTP_E_SHUTDOWN);
    int rc = godl_fill(d);
    if (rc < 0)
      return godl_end(d, rc);
    if (!d->early)
      d->next++;
  }
  size_t n = d->out.len - d->off;
  if (n > max)
    n = max;
  memcpy(buf, d->out.data + d->off, n);
  d->off += n;
  atomic_fetch_add_explicit(&d->w->bytes_sent, n, memory_order_relaxed);
  d->send_by = slowguard_now_ns() + d->w->send_timeout_ns;
  slowguard_send_by(d->guard, d->send_by);
  return (ssize_t)n;
}

/* ------------------------------------------------------------- listing */

typedef struct go_list {
  go_row *rows;
  size_t n, cap;
  uint64_t bytes, max_bytes;
  char sessions[GO_SESSIONS_LISTED][33];
  size_t nsessions; /* distinct sessions seen, counted past the list */
  int more_sessions;
  int too_big, oom;
  uint64_t lost_trailing; /* ledgers of rows trim_ledger_only set aside */
} go_list;

static int list_row(void *cls, const store_gen_row *g) {
  go_list *c = cls;
  c->bytes += g->bytes;
  if (c->bytes > c->max_bytes || c->n >= WEB_WINDOW_GENS_MAX) {
    c->too_big = 1;
    return 1;
  }
  size_t i;
  for (i = 0; i < c->nsessions && i < GO_SESSIONS_LISTED; i++)
    if (strncmp(c->sessions[i], g->session, 32) == 0)
      break;
  if (i == c->nsessions || i == GO_SESSIONS_LISTED) {
    if (c->nsessions < GO_SESSIONS_LISTED) {
      snprintf(c->sessions[c->nsessions++], 33, "%s", g->session);
    } else {
      c->more_sessions = 1;
      return 1; /* refused anyway: no need to list further */
    }
  }
  if (c->nsessions > 1)
    return 0; /* refused: only the session names matter now */
  if (c->n == c->cap) {
    size_t ncap = c->cap ? 2 * c->cap : 256;
    go_row *nr = realloc(c->rows, ncap * sizeof *nr);
    if (!nr) {
      c->oom = 1;
      return 1;
    }
    c->rows = nr;
    c->cap = ncap;
  }
  c->rows[c->n++] = (go_row){g->seq, g->gen, g->start_ns, g->end_ns,
                             g->dropped + g->evicted + g->rejected};
  return 0;
}

typedef struct sess_find {
  const char *sid;
  int found;
  int64_t seq; /* one of its generations */
  int minor;
  char service[GTP_IDENT_STR_MAX + 1];
} sess_find;

static int first_row(void *cls, const store_gen_row *g) {
  sess_find *f = cls;
  f->found = 1;
  f->seq = g->seq;
  return 1;
}

/* Who the session is, from the GEN_START of one of its generations (the
 * identity the daemon wrote from its HELLO): one indexed row and one
 * payload, whatever the number of sessions. 0, GTP_E_NOTFOUND, or an
 * error. */
static int session_identity(storage_reader *sr, sess_find *f) {
  int rc =
      storage_read_session_gens(sr, f->sid, 0, INT64_MAX, -1, 1, first_row, f);
  if (rc < 0)
    return rc;
  if (!f->found)
    return GTP_E_NOTFOUND;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  rc = storage_read_payload(sr, f->seq, &b);
  if (rc >= 0)
    rc = b.err;
  gtp_record rec;
  gtp_gen_start st;
  if (rc >= 0 && (rc = gtp_record_parse(b.data, b.len, &rec)) >= 0 &&
      (rc = gtp_gen_start_decode(rec.payload, rec.len, &st)) >= 0) {
    f->minor = gtp_gowin_minor(&st);
    snprintf(f->service, sizeof f->service, "%.*s", (int)st.service.len,
             st.service.ptr);
  }
  gtp_wbuf_fini(&b);
  if (rc == GTP_E_NOTFOUND) /* deleted since the listing */
    f->found = 0;
  return rc == GTP_E_NOTFOUND ? GTP_E_NOTFOUND : rc < 0 ? rc : 0;
}

static int cmp_gen(const void *a, const void *b) {
  const go_row *x = a, *y = b;
  return x->gen < y->gen ? -1 : x->gen > y->gen;
}

/* Same safe-name rule as web_trace.c for Content-Disposition. */
static void safe_name(char *dst, size_t cap, const char *src) {
  size_t i = 0;
  for (; src && *src && i + 1 < cap; src++) {
    char c = *src;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    dst[i++] = ok ? c : '_';
  }
  dst[i] = 0;
  if (i == 0)
    snprintf(dst, cap, "trace");
}

/* Parses the window arguments exactly as web_trace does. 0, or -1 with
 * the 400 queued. */
static int window_args(web_req *r, char sid[33], int *has_session,
                       int64_t *from, int64_t *to) {
  int64_t last = 0;
  int has_from, has_to, has_last;
  if ((*has_session = web_arg_session(r, "session", sid)) < 0 ||
      (has_from = web_arg_time(r, "from", from)) < 0 ||
      (has_to = web_arg_time(r, "to", to)) < 0 ||
      (has_last = web_arg_dur(r, "last", &last)) < 0)
    return -1;
  const char *service = web_arg(r, "service");
  const char *host = web_arg(r, "host");
  if (!*has_session && !service) {
    web_error(r, 400, "bad_parameter",
              "session or service: one is required (session=ID, or "
              "service=NAME with optional host=NAME)");
    return -1;
  }
  if (*has_session && (service || host)) {
    web_error(r, 400, "bad_parameter",
              "session: give either session= or service=/host=, not both");
    return -1;
  }
  if (has_last && (has_from || has_to)) {
    web_error(r, 400, "bad_parameter",
              "last: give either last= or from=/to=, not both");
    return -1;
  }
  if (has_last) {
    *to = r->now_ns;
    *from = *to - last > 0 ? *to - last : 0;
  } else if (has_from || has_to) {
    if (!has_from) {
      web_error(r, 400, "bad_parameter",
                "from: required with to= (or use last=DURATION)");
      return -1;
    }
    if (!has_to)
      *to = r->now_ns;
  } else {
    *to = r->now_ns;
    *from = *to - 60 * INT64_C(1000000000);
  }
  if (*from >= *to) {
    web_error(r, 400, "bad_parameter",
              "from: must be before to (the window is [from, to))");
    return -1;
  }
  return 0;
}

static int any_go_byte(void *ctx, const void *p, size_t n) {
  (void)ctx;
  (void)p;
  return n > 0; /* the first Go byte ends the walk */
}

/* Puts the rows in generation order and sets aside the trailing ones that
 * hold no Go bytes: a generation the client sent only to carry its loss
 * ledger (the losses came after its last Go generation). Left in, such a
 * generation after a gap would be "the newest run without a gap" alone,
 * and the answer an empty trace. Their ledgers still count in
 * X-Gentrace-Lost-Generations (c->lost_trailing). 0 or an error. */
static int trim_ledger_only(storage_reader *sr, go_list *c) {
  if (c->n > 1)
    qsort(c->rows, c->n, sizeof *c->rows, cmp_gen);
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int rc = 0;
  while (c->n > 0) {
    gtp_wbuf_reset(&b);
    rc = storage_read_payload(sr, c->rows[c->n - 1].seq, &b);
    if (rc == GTP_E_NOTFOUND) { /* deleted since the listing */
      rc = 0;
      break; /* the download ends there (invariant 1) */
    }
    if (rc < 0 || (rc = b.err) < 0)
      break;
    gtp_gen g;
    if ((rc = gtp_gen_parse(b.data, b.len, &g, NULL)) < 0)
      break;
    int has = gtp_gowin_put(&g, any_go_byte, NULL);
    gtp_gen_fini(&g);
    if (has)
      break;
    c->lost_trailing += c->rows[--c->n].lost;
  }
  gtp_wbuf_fini(&b);
  return rc;
}

/* Answers the listed window (in generation order, trim_ledger_only);
 * takes c->rows and the download slot. */
static enum MHD_Result respond(web_req *r, go_list *c, const sess_find *f,
                               int64_t from) {
  web_server *w = r->w;
  /* The newest run without a gap. */
  size_t first = c->n;
  while (first > 0 &&
         (first == c->n || c->rows[first - 1].gen + 1 == c->rows[first].gen))
    first--;
  size_t omitted = first;
  godl *d = calloc(1, sizeof *d);
  if (!d) {
    web_dl_slot_put(w);
    return web_error(r, 500, "internal", "out of memory");
  }
  d->w = w;
  d->guard = web_conn_guard(r->conn);
  d->n = c->n - first;
  if (first && d->n)
    memmove(c->rows, c->rows + first, d->n * sizeof *c->rows);
  d->rows = c->rows;
  c->rows = NULL;
  d->minor = f->minor;
  snprintf(d->sid, sizeof d->sid, "%s", f->sid);
  gtp_wbuf_init(&d->raw, 0);
  gtp_wbuf_init(&d->out, 0);
  uint64_t lost = c->lost_trailing;
  int64_t span_start = from, span_end = from;
  for (size_t i = 0; i < d->n; i++) {
    lost += d->rows[i].lost;
    if (i == 0 || d->rows[i].start_ns < span_start)
      span_start = d->rows[i].start_ns;
    if (i == 0 || d->rows[i].end_ns > span_end)
      span_end = d->rows[i].end_ns;
  }
  struct MHD_Response *resp = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, GODL_BLOCK, godl_read, d, godl_free);
  if (!resp) {
    godl_free(d);
    return MHD_NO;
  }
  char v[64], stem[96], fname[160], ts[17];
  MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
  safe_name(stem, sizeof stem, f->service[0] ? f->service : f->sid);
  httptime_format_compact(from, ts);
  snprintf(fname, sizeof fname, "attachment; filename=\"%s-%s.trace\"", stem,
           ts);
  MHD_add_response_header(resp, "Content-Disposition", fname);
  snprintf(v, sizeof v, "%zu", d->n);
  MHD_add_response_header(resp, "X-Gentrace-Generations", v);
  MHD_add_response_header(resp, "X-Gentrace-Sessions", d->n ? "1" : "0");
  snprintf(v, sizeof v, "%zu", omitted);
  MHD_add_response_header(resp, "X-Gentrace-Omitted-Generations", v);
  /* Go sessions count whole Go generations in their ledger. */
  snprintf(v, sizeof v, "%" PRIu64, lost);
  MHD_add_response_header(resp, "X-Gentrace-Lost-Generations", v);
  snprintf(v, sizeof v, "1.%d", f->minor);
  MHD_add_response_header(resp, "X-Gentrace-Go-Version", v);
  if (d->n) {
    char t[HTTPTIME_RFC3339_LEN];
    httptime_format(span_start, t);
    MHD_add_response_header(resp, "X-Gentrace-Start", t);
    httptime_format(span_end, t);
    MHD_add_response_header(resp, "X-Gentrace-End", t);
  }
  return web_queue(r, 200, resp);
}

enum MHD_Result web_gotrace(web_req *r) {
  static const char *const allowed[] = {"session", "service", "host",   "from",
                                        "to",      "last",    "format", NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  web_server *w = r->w;
  char sid[33] = "";
  int has_session;
  int64_t from = 0, to = 0;
  if (window_args(r, sid, &has_session, &from, &to) < 0)
    return r->ret;
  const char *service = web_arg(r, "service");
  const char *host = web_arg(r, "host");
  if (web_dl_slot_take(r) < 0) /* invariant 4 */
    return r->ret;
  storage_reader *sr = web_reader_get(r);
  if (!sr) {
    web_dl_slot_put(w);
    return r->ret;
  }
  go_list *c = calloc(1, sizeof *c);
  if (!c) {
    web_reader_put(r, sr);
    web_dl_slot_put(w);
    return web_error(r, 500, "internal", "out of memory");
  }
  c->max_bytes = w->cfg.max_window_bytes;
  store_window_query q = {has_session ? sid : NULL,
                          has_session ? NULL : service,
                          has_session ? NULL : host, from, to};
  int rc = storage_read_window(sr, &q, list_row, c);
  sess_find f = {.sid = sid};
  if (rc >= 0 && !c->oom && !c->too_big && c->nsessions == 1 && !has_session)
    snprintf(sid, sizeof sid, "%s", c->sessions[0]);
  if (rc >= 0 && !c->oom && !c->too_big && sid[0] && c->nsessions <= 1) {
    rc = session_identity(sr, &f);
    if (rc == GTP_E_NOTFOUND)
      rc = 0; /* f.found = 0: answered 404 below */
    if (rc >= 0 && f.found && f.minor > 0)
      rc = trim_ledger_only(sr, c);
  }
  web_reader_put(r, sr);
  enum MHD_Result ret;
  int taken = 0;
  if (rc < 0 || c->oom) {
    ret = web_error(r, 500, "internal", "listing the window failed: %s",
                    gtp_strerror(rc < 0 ? rc : -ENOMEM));
  } else if (c->nsessions > 1) {
    char list[GO_SESSIONS_LISTED * 34 + 8];
    size_t k = 0;
    for (size_t i = 0; i < c->nsessions; i++)
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "",
                            c->sessions[i]);
    if (c->more_sessions)
      snprintf(list + k, sizeof list - k, ", ...");
    ret = web_error(r, 400, "several_sessions",
                    "format=go needs the window of one program run, and this "
                    "one holds several sessions: %s; ask for one with "
                    "session=ID",
                    list);
  } else if (c->too_big) {
    ret = web_error(r, 413, "window_too_large",
                    "the window holds more trace than the --max-window-bytes "
                    "limit; narrow it (a shorter last= or from=/to=)");
  } else if (!sid[0]) {
    ret = web_error(r, 404, "not_found",
                    "no generation of service %.200s in the window", service);
  } else if (!f.found) {
    ret = web_error(r, 404, "not_found", "no session %s", sid);
  } else if (f.minor == 0) {
    ret = web_error(r, 400, "not_a_go_session",
                    "session %s was not recorded by the Go client (no tag "
                    "format=go): use format=gentrace or format=chrome",
                    sid);
  } else if (f.minor < 0) {
    ret = web_error(r, 400, "bad_go_version",
                    "session %s has format=go but no go_version tag of Go "
                    "1.22 or later",
                    sid);
  } else {
    ret = respond(r, c, &f, from);
    taken = 1; /* the slot goes with the download */
  }
  if (!taken)
    web_dl_slot_put(w);
  free(c->rows);
  free(c);
  return ret;
}
