/* session_auth.c: session ownership and validation at the door.
 *
 * Owns: nothing but counters (ing->ctr.trust); the key hashes live in the
 * connections (conn.key_hash) and in the store's session index.
 *
 * Session ownership (protocol v2, PROTOCOL.md 6.9). Session ids are public
 * (/v1/agents lists them), so an id alone must not let a peer speak for a
 * session. Each agent draws a 128-bit random key with its session id and
 * sends it in every HELLO. Who holds the binding, in order:
 *   1. the session's live connection (conn.key_hash), else
 *   2. the store's session index (bound at the first store_submit of the
 *      session, persisted as sessions.key_hash at its first commit; on the
 *      shared store the catalog's committed binding, and a commit whose
 *      key lost to one another daemon committed first is refused with
 *      AUTH in its transaction, store/pg_cat.c invariant 5), else
 *   3. nobody: the session has no connection and nothing stored or in
 *      flight, so there is nothing to protect and the HELLO binds its key.
 * Case 3 keeps no state for sessions that store nothing: a throwaway HELLO
 * costs its connection and nothing after it closes.
 *
 * Invariants:
 *  1. A HELLO whose key hash differs from the binding MUST be refused
 *     before anything of the session is touched (the live connection, its
 *     open generations, the session map), otherwise knowing an id would be
 *     enough to disconnect an agent or to interleave generations with it.
 *  2. The key MUST NOT be stored, logged or served; only its SHA-256 is
 *     kept, compared in constant time, otherwise a database copy, a log or
 *     a timing oracle would hand out the key.
 *  3. A generation MUST pass the door checks (number in [1, 2^63), CLOCK
 *     ordered, spanning at most --max-gen-span, within --max-clock-skew of
 *     the daemon's wall clock, ledger counts at most GTP_LEDGER_MAX) before
 *     it is submitted, otherwise one row could make window queries scan
 *     everything (span), escape age retention (a far future), wrap the
 *     session totals (ledger) or be stored under a negative number.
 */
#include "config.h"

#include "session_auth.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ingest_int.h"
#include "log.h"
#include "sha256.h"

#define NS_PER_SEC ((uint64_t)1000000000)

static const char *const trust_names[TR_COUNT_] = {
    "auth", "conflict", "gen-range", "clock", "ledger", "text"};

/* AUTH refusals are logged at most AUTH_LOG_PER_S a second (a claim flood
 * must not flood the log); the next line logged says how many were not.
 * Loop thread only. */
#define AUTH_LOG_PER_S 10
static uint64_t auth_log_sec, auth_log_n, auth_log_quiet;

static void count(ingest *ing, enum trust_id id) {
  CTR_ADD(ing, trust[id], 1);
}

/* Constant time in the contents (invariant 2). */
static int hash_equal(const uint8_t *a, const uint8_t *b) {
  return gtp_ct_equal(a, STORE_KEY_HASH_SIZE, b, STORE_KEY_HASH_SIZE);
}

void session_auth_key(conn *c, const gtp_hello *h) {
  memcpy(c->session, h->session, sizeof c->session); /* not in the map yet */
  gtp_sha256(h->session_key, sizeof h->session_key, c->key_hash);
}

int session_auth_hello(conn *c, const gtp_hello *h, conn *live) {
  session_auth_key(c, h);
  uint8_t bound[STORE_KEY_HASH_SIZE];
  int k = 0;
  if (live == NULL && c->ing->store != NULL)
    k = storage_session_key(c->ing->store, h->session, bound);
  return session_auth_decide(c, live, k, bound);
}

int session_auth_decide(conn *c, conn *live, int key_rc,
                        const uint8_t *key) {
  ingest *ing = c->ing;
  const uint8_t *want = NULL;
  if (live != NULL)
    want = live->key_hash;
  else if (key_rc < 0) {
    /* The shared store looks the key up in its catalog: while that is
     * unreachable, refuse for now rather than admit an unchecked key. */
    ingest_conn_close(c, GTP_E_UNAVAIL, 0, 0,
                      "the store cannot check this session's key now; "
                      "retry later");
    return -1;
  } else if (key_rc > 0)
    want = key;
  if (want == NULL || hash_equal(want, c->key_hash))
    return 0;
  count(ing, TR_AUTH);
  char hex[33];
  gtp_session_hex(c->session, hex);
  uint64_t sec = uv_now(ing->loop) / 1000;
  if (sec != auth_log_sec) {
    auth_log_sec = sec;
    auth_log_n = 0;
  }
  if (auth_log_n++ < AUTH_LOG_PER_S) {
    /* Logged without the key (invariant 2); the live connection, if any,
     * is named so an operator can tell which agent was targeted. */
    log_warn("session key refused",
             "conn=%" PRIu64 " peer=%s session=%s live_conn=%" PRIu64
             " not_logged=%" PRIu64,
             c->id, c->peer, hex, live != NULL ? live->id : 0,
             auth_log_quiet);
    auth_log_quiet = 0;
  } else {
    auth_log_quiet++;
  }
  ingest_conn_close(c, GTP_E_AUTH, 0, 0,
                    "session belongs to another key (session ids are not "
                    "secret; each agent start draws its own id and key)");
  return -1;
}

int session_auth_bad_text(conn *c, const gtp_hello *h) {
  count(c->ing, TR_TEXT);
  CTR_ADD(c->ing, protocol_errors, 1);
  char r[128];
  snprintf(r, sizeof r, "HELLO %s holds a NUL byte or invalid UTF-8",
           h->bad_field != NULL ? h->bad_field : "text");
  ingest_conn_close(c, GTP_E_CORRUPT, 0, 0, r);
  return -1;
}

int session_auth_gen_ok(conn *c, uint64_t gen, const char **why) {
  if (gen >= 1 && gen <= (uint64_t)INT64_MAX)
    return 1;
  count(c->ing, TR_GEN_RANGE);
  *why = "generation number outside [1, 2^63)";
  return 0;
}

static uint64_t absdiff(uint64_t a, uint64_t b) {
  return a > b ? a - b : b - a;
}

static uint64_t wall_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

int session_auth_gen_check(conn *c, const gtp_clock *k, const gtp_gen_end *e,
                           const char **why) {
  ingest *ing = c->ing;
  /* One reason buffer is enough: the loop thread handles one frame at a
   * time and the caller copies the reason into the ERROR at once. */
  static char reason[160];
  uint64_t span = ing->cfg.max_gen_span_ns;
  /* The parser checked that ticks and monotonic time do not go back; wall
   * time may step back a little (NTP) and is stored as [min, max]. */
  uint64_t mono = k->end_mono_ns - k->start_mono_ns;
  uint64_t wall = absdiff(k->end_real_ns, k->start_real_ns);
  if (span > 0 && (mono > span || wall > span)) {
    count(ing, TR_CLOCK);
    snprintf(reason, sizeof reason,
             "CLOCK spans %" PRIu64 " s, over --max-gen-span (%" PRIu64 " s)",
             (mono > wall ? mono : wall) / NS_PER_SEC, span / NS_PER_SEC);
    *why = reason;
    return GTP_E_CORRUPT;
  }
  uint64_t skew = ing->cfg.max_clock_skew_ns;
  if (k->start_real_ns > (uint64_t)INT64_MAX ||
      k->end_real_ns > (uint64_t)INT64_MAX) {
    count(ing, TR_CLOCK);
    *why = "CLOCK wall time past 2262 (over 2^63 ns)";
    return GTP_E_CORRUPT;
  }
  if (skew > 0) {
    uint64_t now = wall_now_ns();
    uint64_t d = absdiff(k->start_real_ns, now);
    if (absdiff(k->end_real_ns, now) > d)
      d = absdiff(k->end_real_ns, now);
    if (d > skew) {
      count(ing, TR_CLOCK);
      snprintf(reason, sizeof reason,
               "CLOCK wall time is %" PRIu64
               " s from the daemon's clock, over --max-clock-skew (%" PRIu64
               " s)",
               d / NS_PER_SEC, skew / NS_PER_SEC);
      *why = reason;
      return GTP_E_CORRUPT;
    }
  }
  if (e->dropped > GTP_LEDGER_MAX || e->evicted > GTP_LEDGER_MAX ||
      e->rejected > GTP_LEDGER_MAX) {
    count(ing, TR_LEDGER);
    *why = "ledger count over 2^48 in one generation";
    return GTP_E_TOOBIG;
  }
  return 0;
}

void session_auth_store_refused(conn *c, const store_gen *g) {
  ingest *ing = c->ing;
  if (g->result == GTP_E_AUTH) {
    /* The shared store bound the session to another key at commit
     * (another daemon admitted it first): nothing of this generation is
     * stored, and nothing is noted on the winner's session row. The
     * connection goes as a HELLO refusal would (invariant 1); the agent's
     * next HELLO meets the committed binding. */
    count(ing, TR_AUTH);
    CTR_ADD(ing, rejected, 1);
    CTR_ADD(ing, rejected_events, g->end.events);
    char hex[33];
    gtp_session_hex(g->session, hex);
    log_warn("session key refused at commit",
             "conn=%" PRIu64 " session=%s gen=%" PRIu64, c->id, hex, g->gen);
    ingest_conn_close(c, GTP_E_AUTH, 0, 0,
                      "session belongs to another key (bound by another "
                      "daemon's commit)");
    return;
  }
  int conflict = g->result == GTP_E_CONFLICT;
  count(ing, conflict ? TR_CONFLICT : TR_LEDGER);
  CTR_ADD(ing, rejected, 1);
  CTR_ADD(ing, rejected_events, g->end.events);
  storage_note_rejected(ing->store, g->session, g->end.events);
  char hex[33];
  gtp_session_hex(g->session, hex);
  log_warn("generation rejected",
           "conn=%" PRIu64 " session=%s gen=%" PRIu64 " error=%s", c->id, hex,
           g->gen, gtp_errname(g->result));
  if (c->state == CONN_ACTIVE || c->state == CONN_DRAINING)
    ingest_send_error(c, g->result, 1, g->gen,
                      conflict ? "generation already stored with other bytes "
                                 "(CRC differs); the stored one stays"
                               : "session ledger totals would overflow");
}

/* ----------------------------------------------------------------- metrics */

#define line gtp_wbuf_printf /* the text layer's formatted append */

void session_auth_metrics(ingest *ing, gtp_wbuf *b) {
  line(b, "# HELP gentrace_refused_total Agent input refused at the door, by "
          "reason (auth: HELLO with another session's key; conflict: "
          "re-sent generation with other bytes; gen-range, clock, ledger, "
          "text: see PROTOCOL.md 6.11).\n"
          "# TYPE gentrace_refused_total counter\n");
  for (int i = 0; i < TR_COUNT_; i++)
    line(b, "gentrace_refused_total{reason=\"%s\"} %" PRIu64 "\n",
         trust_names[i], CTR_GET(ing, trust[i]));
  line(b, "# HELP gentrace_ingest_max_gen_span_seconds --max-gen-span.\n"
          "# TYPE gentrace_ingest_max_gen_span_seconds gauge\n"
          "gentrace_ingest_max_gen_span_seconds %" PRIu64 "\n",
       ing->cfg.max_gen_span_ns / NS_PER_SEC);
  line(b, "# HELP gentrace_ingest_max_clock_skew_seconds --max-clock-skew (0: "
          "off).\n"
          "# TYPE gentrace_ingest_max_clock_skew_seconds gauge\n"
          "gentrace_ingest_max_clock_skew_seconds %" PRIu64 "\n",
       ing->cfg.max_clock_skew_ns / NS_PER_SEC);
  if (ing->store == NULL)
    return;
  store_stats st;
  storage_stats_get(ing->store, &st);
  line(b, "# HELP gentrace_sessions_indexed Sessions in the daemon's "
          "in-memory session index (stored, bound or with rejections).\n"
          "# TYPE gentrace_sessions_indexed gauge\n"
          "gentrace_sessions_indexed %" PRIu64 "\n",
       st.index_sessions);
  line(b, "# HELP gentrace_sessions_unstored Sessions that stored nothing "
          "but had generations rejected, tracked now (bounded; each expires "
          "10 minutes after its last rejection).\n"
          "# TYPE gentrace_sessions_unstored gauge\n"
          "gentrace_sessions_unstored %" PRIu64 "\n",
       st.norow_sessions);
  line(b, "# HELP gentrace_sessions_unstored_untracked_total Rejections of "
          "sessions that stored nothing, not tracked because the bound was "
          "reached.\n"
          "# TYPE gentrace_sessions_unstored_untracked_total counter\n"
          "gentrace_sessions_unstored_untracked_total %" PRIu64 "\n",
       st.norow_untracked);
}
