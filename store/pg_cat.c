/* pg_cat.c: the PostgreSQL catalog of the shared store (see pg_cat.h and
 * the schema notes in pg_schema.h).
 *
 * Owns: the connection pool (pg.c) with the statements below.
 *
 * Invariants:
 *   1. A commit MUST take gt_counter's row lock after every other lock it
 *      needs and only just before inserting its generations, and hold it to
 *      COMMIT, otherwise seqs would commit out of order (a feed reader past
 *      N would miss N-1 committing late) or commits would queue behind
 *      unrelated work.
 *   2. A commit MUST lock session rows in one global order (sorted by
 *      session id), otherwise two daemons committing segments of the same
 *      two sessions could deadlock.
 *   3. A failed commit MUST roll back as a whole and report an error for
 *      every generation, otherwise the caller would ACK rows that do not
 *      exist.
 *   4. Reads MUST order by total keys (start_ns, seq; seq; service, host
 *      with byte collation, first_seen_ns, id), otherwise two daemons could
 *      list the same rows in different orders.
 *   5. A generation whose session key hash differs from the one bound to
 *      its session when its segment commits MUST be refused (GTP_E_AUTH)
 *      and leave no row and no count behind; the binding and the check
 *      happen under the session row's lock in the committing transaction,
 *      otherwise two daemons that each admitted another key for one
 *      session id before either committed could both store (the HELLO
 *      check alone sees only committed bindings).
 */
#include "config.h" /* _GNU_SOURCE: asprintf */

#include "pg_cat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gtp_error.h"
#include "pg.h"
#include "pg_schema.h"
#include "pg_sum.h"
#include "text.h"

struct pg_cat {
  pg *pool;
  unsigned test_delay_ms; /* written before use by the test only */
  unsigned test_delays_begun, test_delays_done; /* __atomic: test hooks */
};

pg *pg_cat_pool(pg_cat *c) {
  return c->pool;
}

void pg_cat_set_test_delay(pg_cat *c, unsigned ms) {
  c->test_delay_ms = ms;
}

unsigned pg_cat_test_delays_begun(pg_cat *c) {
  return __atomic_load_n(&c->test_delays_begun, __ATOMIC_ACQUIRE);
}

unsigned pg_cat_test_delays_done(pg_cat *c) {
  return __atomic_load_n(&c->test_delays_done, __ATOMIC_ACQUIRE);
}

#define NOW_NS "(extract(epoch from clock_timestamp()) * 1e9)::bigint"
/* The upsert's row is bound to another key than the segment's first
 * generation of the session carries: that key loses (invariant 5). */
#define KEY_OTHER                                                              \
  "(gt_sessions.key_hash IS NOT NULL AND excluded.key_hash IS NOT NULL AND"    \
  " gt_sessions.key_hash <> excluded.key_hash)"
#define GEN_COLS                                                               \
  "g.seq, s.session, s.service, s.host, g.gen, g.start_ns, g.end_ns,"          \
  " g.events, g.bytes, g.stored_bytes, g.dropped, g.evicted, g.rejected,"      \
  " g.status, g.codec, g.committed_ns"

static const pg_stmt cat_stmts[] = {
    {"seg_insert",
     "INSERT INTO gt_segments(object, bytes, daemon, created_ns, live_gens)"
     " VALUES($1, $2, $3, " NOW_NS ", 0)"
     " ON CONFLICT(object) DO NOTHING RETURNING id"},
    {"seg_owner", "SELECT daemon FROM gt_segments WHERE object = $1"},
    {"seg_live",
     "UPDATE gt_segments SET live_gens = $2::bigint, dead_ns = CASE WHEN"
     " $2::bigint = 0 THEN " NOW_NS " END WHERE id = $1"},
    {"session_upsert",
     "INSERT INTO gt_sessions(session, service, host, pid, process_start_ns,"
     " agent_version, tags, first_seen_ns, last_seen_ns, last_gen, key_hash)"
     " VALUES($1, $2, $3, $4, $5, $6, gt_json_object($7), " NOW_NS ", " NOW_NS
     ", $8, decode($9, 'hex'))"
     " ON CONFLICT(session) DO UPDATE SET"
     " key_hash = coalesce(gt_sessions.key_hash, excluded.key_hash),"
     " last_seen_ns = CASE WHEN " KEY_OTHER " THEN gt_sessions.last_seen_ns"
     " ELSE greatest(gt_sessions.last_seen_ns, excluded.last_seen_ns) END,"
     " last_gen = CASE WHEN " KEY_OTHER " THEN gt_sessions.last_gen"
     " WHEN gt_sessions.last_gen IS NULL OR"
     " excluded.last_gen > gt_sessions.last_gen THEN excluded.last_gen"
     " ELSE gt_sessions.last_gen END"
     " RETURNING id, encode(key_hash, 'hex')"},
    /* A segment whose first key for a session lost to a bound one: the
     * generations of the bound key (if any) still count as seen. */
    {"session_seen",
     "UPDATE gt_sessions SET last_seen_ns = greatest(last_seen_ns, " NOW_NS
     "), last_gen = greatest(coalesce(last_gen, 0), $2::bigint)"
     " WHERE id = $1"},
    {"max_span", "UPDATE gt_meta SET value = $1 WHERE key = 'max_span_ns'"
                 " AND value::bigint < $1::bigint"},
    /* Invariant 1: this row lock orders every commit's seqs. */
    {"seq_take",
     "UPDATE gt_counter SET next_seq = next_seq + $1::bigint WHERE id = 1"
     " RETURNING next_seq - $1::bigint"},
    {"gen_insert",
     "INSERT INTO gt_generations(seq, session_id, gen, start_ns, end_ns,"
     " events, bytes, stored_bytes, dropped, evicted, rejected, codec,"
     " committed_ns, segment_id, off, len, crc)"
     " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, " NOW_NS
     ", $13, $14, $15, $16) ON CONFLICT(session_id, gen) DO NOTHING"
     " RETURNING seq"},
    {"gen_crc",
     "SELECT crc FROM gt_generations WHERE session_id = $1 AND gen = $2"},
    {"session_key",
     "SELECT encode(key_hash, 'hex') FROM gt_sessions WHERE session = $1"},
    {"last_gen", "SELECT last_gen FROM gt_sessions WHERE session = $1"},
    {"hello", "SELECT key_hash, last_gen FROM gt_hello($1)"},
    {"rejected",
     "UPDATE gt_sessions SET rejected = rejected + $2::bigint,"
     " rejected_events = rejected_events + $3::bigint WHERE session = $1"},
    {"sessions",
     "SELECT s.session, s.service, s.host, s.agent_version, s.tags::text,"
     " s.pid, s.process_start_ns, s.first_seen_ns, s.last_seen_ns, s.gens,"
     " (SELECT min(gen) FROM gt_generations WHERE session_id = s.id),"
     " (SELECT max(gen) FROM gt_generations WHERE session_id = s.id),"
     " s.events, s.bytes, s.lost, s.rejected,"
     " EXISTS (SELECT 1 FROM gt_conns k JOIN gt_daemons d ON"
     " d.daemon = k.daemon WHERE k.session = s.session AND d.lease_ns > " NOW_NS
     ") FROM gt_sessions s"
     " WHERE ($1::text IS NULL OR s.service = $1)"
     " AND ($2::text IS NULL OR s.host = $2)"
     " AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM json_each(s.tags) j"
     " WHERE j.key = $3 AND ($4::text IS NULL OR"
     " (json_typeof(j.value) = 'string' AND j.value #>> '{}' = $4))))"
     " ORDER BY s.service COLLATE \"C\", s.host COLLATE \"C\","
     " s.first_seen_ns, s.id"},
    {"session_id", "SELECT id FROM gt_sessions WHERE session = $1"},
    {"session_gens",
     "SELECT " GEN_COLS " FROM gt_generations g JOIN gt_sessions s"
     " ON s.id = g.session_id WHERE g.session_id = $1 AND g.gen > $2"
     " AND g.start_ns < $4 AND g.end_ns > $3 ORDER BY g.gen LIMIT $5"},
    {"max_span_get",
     "SELECT value::bigint FROM gt_meta WHERE key = 'max_span_ns'"},
    {"window_session",
     "SELECT " GEN_COLS " FROM gt_sessions s JOIN gt_generations g"
     " ON g.session_id = s.id WHERE s.session = $1 AND g.start_ns < $3"
     " AND g.start_ns >= $4 AND g.end_ns > $2 ORDER BY g.start_ns, g.seq"},
    {"window_service",
     "SELECT " GEN_COLS " FROM gt_sessions s JOIN gt_generations g"
     " ON g.session_id = s.id WHERE s.service = $1 AND g.start_ns < $3"
     " AND g.start_ns >= $4 AND g.end_ns > $2 ORDER BY g.start_ns, g.seq"},
    {"window_service_host",
     "SELECT " GEN_COLS " FROM gt_sessions s JOIN gt_generations g"
     " ON g.session_id = s.id WHERE s.service = $1 AND s.host = $5"
     " AND g.start_ns < $3 AND g.start_ns >= $4 AND g.end_ns > $2"
     " ORDER BY g.start_ns, g.seq"},
    {"feed",
     "SELECT " GEN_COLS " FROM gt_generations g JOIN gt_sessions s"
     " ON s.id = g.session_id WHERE g.seq > $1 ORDER BY g.seq LIMIT $2"},
    {"max_seq", "SELECT coalesce(max(seq), 0) FROM gt_generations"},
    {"seq_since", "SELECT seq FROM gt_generations WHERE committed_ns >= $1"
                  " ORDER BY committed_ns, seq LIMIT 1"},
    {"locate", "SELECT sg.object, g.off, g.len, g.codec, g.bytes, g.seq"
               " FROM gt_generations g"
               " JOIN gt_segments sg ON sg.id = g.segment_id WHERE g.seq = $1"},
    {"locate_by_gen", "SELECT sg.object, g.off, g.len, g.codec, g.bytes, g.seq"
                      " FROM gt_sessions s"
                      " JOIN gt_generations g ON g.session_id = s.id"
                      " JOIN gt_segments sg ON sg.id = g.segment_id"
                      " WHERE s.session = $1 AND g.gen = $2"},
    {"pin_publish",
     "INSERT INTO gt_pins(daemon, handle, min_seq, expires_ns)"
     " VALUES($1, 0, $2, " NOW_NS " + $3::bigint * 1000000)"
     " ON CONFLICT(daemon, handle) DO UPDATE SET min_seq = excluded.min_seq,"
     " expires_ns = excluded.expires_ns"},
    {"pin_drop", "DELETE FROM gt_pins WHERE daemon = $1 OR expires_ns < " NOW_NS
                 " - 3600000000000"},
    {"retain_lock", "SELECT pg_try_advisory_xact_lock(" PG_LOCK_RETAIN ")"},
    {"pin_min",
     "SELECT coalesce(min(min_seq), 9223372036854775807) FROM gt_pins"
     " WHERE expires_ns > " NOW_NS},
    /* end < cutoff implies start < cutoff: the start_ns index finds them. */
    {"retain_age",
     "DELETE FROM gt_generations WHERE seq IN (SELECT seq FROM gt_generations"
     " WHERE start_ns < $1 AND end_ns < $1 AND seq < $2"
     " AND NOT gt_held(session_id, start_ns, end_ns) LIMIT $3)"},
    {"stored_total",
     "SELECT coalesce(sum(stored_bytes), 0)::bigint FROM gt_generations"},
    /* The oldest rows (below the pin, held by no retention pin) whose
     * running total reaches excess. */
    {"retain_size",
     "DELETE FROM gt_generations WHERE seq IN (SELECT seq FROM"
     " (SELECT seq, sum(stored_bytes) OVER (ORDER BY seq) - stored_bytes"
     " AS before FROM gt_generations WHERE seq < $2"
     " AND NOT gt_held(session_id, start_ns, end_ns) ORDER BY seq LIMIT $3) x"
     " WHERE before < $1)"},
    {"dead_list",
     "SELECT id, object FROM gt_segments WHERE dead_ns IS NOT NULL"
     " AND live_gens = 0 AND dead_ns < " NOW_NS " - $1::bigint * 1000000"
     " ORDER BY id LIMIT $2"},
    {"dead_forget", "DELETE FROM gt_segments WHERE id = $1 AND live_gens = 0"},
};

int pg_cat_open(const char *conninfo, int pool, pg_cat **out, char **cause) {
  *out = NULL;
  pg_cat *c = calloc(1, sizeof *c);
  if (!c)
    return -ENOMEM;
  int rc = pg_open(conninfo, pool, cat_stmts,
                   sizeof cat_stmts / sizeof *cat_stmts, &c->pool, cause);
  if (rc < 0) {
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void pg_cat_close(pg_cat *c) {
  if (!c)
    return;
  pg_close(c->pool);
  free(c);
}

static void hex16(const uint8_t id[16], char out[33]) {
  static const char d[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = d[id[i] >> 4];
    out[2 * i + 1] = d[id[i] & 15];
  }
  out[32] = '\0';
}

/* Decimal text parameters: each call gets its own slots. */
typedef struct numbuf {
  char s[16][24];
  int n;
} numbuf;
static const char *num_i(numbuf *b, int64_t v) {
  char *p = b->s[b->n++ & 15];
  snprintf(p, 24, "%" PRId64, v);
  return p;
}
static const char *num_u(numbuf *b, uint64_t v) {
  /* The catalog's columns are bigint: values past INT64_MAX are clamped
   * (no real ledger or pid gets there; a hostile one must not fail a
   * whole segment's commit). */
  return num_i(b, v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

static int64_t val_i(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col))
    return 0;
  return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void hex_key(const uint8_t key[STORE_KEY_HASH_SIZE],
                    char out[2 * STORE_KEY_HASH_SIZE + 1]) {
  static const char d[] = "0123456789abcdef";
  for (int i = 0; i < STORE_KEY_HASH_SIZE; i++) {
    out[2 * i] = d[key[i] >> 4];
    out[2 * i + 1] = d[key[i] & 15];
  }
  out[2 * STORE_KEY_HASH_SIZE] = '\0';
}

/* 1 and key filled from 64 hex digits, 0 for anything else (NULL, ""). */
static int key_parse(const char *v, uint8_t key[STORE_KEY_HASH_SIZE]) {
  if (strlen(v) != 2 * STORE_KEY_HASH_SIZE)
    return 0;
  for (int b = 0; b < STORE_KEY_HASH_SIZE; b++) {
    unsigned x = 0;
    if (sscanf(v + 2 * b, "%2x", &x) != 1)
      return 0;
    key[b] = (uint8_t)x;
  }
  return 1;
}

/* Highest gen of a session's group sent with key (or with no key at all);
 * key NULL: of every generation. 0 when none. */
static uint64_t group_last(pg_cat_gen *const *grp, size_t n,
                           const uint8_t *key) {
  uint64_t last = 0;
  for (size_t m = 0; m < n; m++) {
    const store_gen *g = grp[m]->g;
    if (key && g->has_key && memcmp(g->key_hash, key, STORE_KEY_HASH_SIZE))
      continue;
    if (g->gen > last)
      last = g->gen;
  }
  return last;
}

/* Orders gens by session id (invariant 2), stable by position. */
static int cmp_gen_session(const void *a, const void *b) {
  const pg_cat_gen *x = *(pg_cat_gen *const *)a, *y = *(pg_cat_gen *const *)b;
  int d = memcmp(x->g->session, y->g->session, 16);
  if (d)
    return d;
  return x < y ? -1 : x > y;
}

int pg_cat_commit_segment(pg_cat *c, const char *object, uint64_t bytes,
                          const char *daemon, pg_cat_gen *gens, size_t n,
                          char **cause) {
  if (cause)
    *cause = NULL;
  if (n == 0)
    return 0;
  PGconn *k = NULL;
  int rc = pg_get(c->pool, &k, cause);
  if (rc < 0)
    return rc;
  pg_cat_gen **ord = malloc(n * sizeof *ord);
  int64_t *sid = malloc(n * sizeof *sid);
  PGresult *r = NULL;
  numbuf nb = {.n = 0};
  if (!ord || !sid) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    ord[i] = &gens[i];
  qsort(ord, n, sizeof *ord, cmp_gen_session);

  rc = pg_cmd(k, "BEGIN", cause);
  if (rc < 0)
    goto out;
  {
    const char *p[] = {object, num_u(&nb, bytes), daemon};
    if (!(r = pg_exec(k, "seg_insert", 3, p, &rc, cause)))
      goto rollback;
  }
  if (PQntuples(r) == 0) {
    /* This object was cataloged by an earlier attempt whose COMMIT reply
     * was lost: every generation in it is already there. Unless the orphan
     * sweep took it for a dead daemon's and deleted it (this daemon lost
     * the catalog for longer than its lease): then nothing is stored and
     * the caller must upload again under a new name. */
    PQclear(r);
    const char *q[] = {object};
    if (!(r = pg_exec(k, "seg_owner", 1, q, &rc, cause)))
      goto rollback;
    int swept =
        PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), PG_ORPHAN_OWNER) == 0;
    PQclear(r);
    r = NULL;
    if (swept) {
      rc =
          gtp_causef(cause, GTP_E_NOTFOUND,
                     "segment %s was swept as an orphan; upload again", object);
      goto rollback;
    }
    rc = pg_cmd(k, "COMMIT", cause);
    if (rc < 0)
      goto out;
    for (size_t i = 0; i < n; i++) {
      gens[i].result = 1;
      gens[i].seq = 0;
    }
    goto out;
  }
  int64_t seg_id = val_i(r, 0, 0);
  PQclear(r);
  r = NULL;

  /* Sessions, one upsert per session, in id order (invariant 2). */
  int64_t max_span = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    uint64_t last;
    while (j < n && memcmp(ord[j]->g->session, ord[i]->g->session, 16) == 0) {
      int64_t span = ord[j]->g->end_ns - ord[j]->g->start_ns;
      if (span > max_span)
        max_span = span;
      j++;
    }
    const store_gen *g = ord[i]->g;
    char hex[33];
    hex16(g->session, hex);
    /* The key of the first generation in the group that carries one; the
     * generations of other keys do not count in last_gen (invariant 5). */
    char keyhex[2 * STORE_KEY_HASH_SIZE + 1];
    const char *key = NULL;
    const uint8_t *first = NULL;
    for (size_t m = i; m < j && !key; m++)
      if (ord[m]->g->has_key) {
        first = ord[m]->g->key_hash;
        hex_key(first, keyhex);
        key = keyhex;
      }
    last = group_last(ord + i, j - i, first);
    nb.n = 0;
    const char *p[] = {hex,
                       g->service ? g->service : "",
                       g->host ? g->host : "",
                       num_u(&nb, g->pid),
                       num_u(&nb, g->process_start_ns),
                       g->agent_version ? g->agent_version : "",
                       g->tags_json ? g->tags_json : "{}",
                       num_u(&nb, last),
                       key};
    if (!(r = pg_exec(k, "session_upsert", 9, p, &rc, cause)))
      goto rollback;
    int64_t id = val_i(r, 0, 0);
    uint8_t bound[STORE_KEY_HASH_SIZE];
    int has_bound =
        key_parse(PQgetisnull(r, 0, 1) ? "" : PQgetvalue(r, 0, 1), bound);
    PQclear(r);
    r = NULL;
    /* Invariant 5: the row lock taken by the upsert is held to COMMIT, so
     * the key read back is the one every other daemon's commit will see. */
    for (size_t m = i; m < j; m++)
      sid[ord[m] - gens] =
          has_bound && ord[m]->g->has_key &&
                  memcmp(ord[m]->g->key_hash, bound, sizeof bound) != 0
              ? -1
              : id;
    if (has_bound && first && memcmp(first, bound, sizeof bound) != 0 &&
        (last = group_last(ord + i, j - i, bound)) > 0) {
      nb.n = 0;
      const char *q[] = {num_i(&nb, id), num_u(&nb, last)};
      if (!(r = pg_exec(k, "session_seen", 2, q, &rc, cause)))
        goto rollback;
      PQclear(r);
      r = NULL;
    }
    i = j;
  }
  {
    nb.n = 0;
    const char *p[] = {num_i(&nb, max_span)};
    if (!(r = pg_exec(k, "max_span", 1, p, &rc, cause)))
      goto rollback;
    PQclear(r);
    r = NULL;
  }

  /* Invariant 1: the counter's row lock, held from here to COMMIT. */
  int64_t seq0;
  {
    nb.n = 0;
    const char *p[] = {num_u(&nb, n)};
    if (!(r = pg_exec(k, "seq_take", 1, p, &rc, cause)))
      goto rollback;
    seq0 = val_i(r, 0, 0);
    PQclear(r);
    r = NULL;
  }
  int64_t live = 0;
  for (size_t i = 0; i < n; i++) { /* arrival order: seq follows it */
    pg_cat_gen *x = &gens[i];
    const store_gen *g = x->g;
    if (sid[i] < 0) { /* another key owns the session: refused, not stored */
      x->result = GTP_E_AUTH;
      x->seq = 0;
      continue;
    }
    nb.n = 0;
    const char *p[] = {num_i(&nb, seq0 + (int64_t)i),
                       num_i(&nb, sid[i]),
                       num_u(&nb, g->gen),
                       num_i(&nb, g->start_ns),
                       num_i(&nb, g->end_ns),
                       num_u(&nb, g->end.events),
                       num_u(&nb, g->len),
                       num_u(&nb, x->len),
                       num_u(&nb, g->end.dropped),
                       num_u(&nb, g->end.evicted),
                       num_u(&nb, g->end.rejected),
                       x->codec,
                       num_i(&nb, seg_id),
                       num_u(&nb, x->off),
                       num_u(&nb, x->len),
                       num_u(&nb, g->end.crc)};
    if (!(r = pg_exec(k, "gen_insert", 16, p, &rc, cause)))
      goto rollback;
    if (PQntuples(r) == 1) {
      x->result = 0;
      x->seq = val_i(r, 0, 0);
      live++;
      PQclear(r);
      r = NULL;
      continue;
    }
    PQclear(r);
    r = NULL;
    /* Already there: a duplicate when its CRC matches, else a resend with
     * other contents under the same (session, gen), refused. */
    const char *q[] = {p[1], p[2]};
    if (!(r = pg_exec(k, "gen_crc", 2, q, &rc, cause)))
      goto rollback;
    int64_t have = PQntuples(r) == 1 ? val_i(r, 0, 0) : -1;
    x->result = have == (int64_t)g->end.crc ? 1 : GTP_E_CONFLICT;
    x->seq = 0;
    PQclear(r);
    r = NULL;
  }
  /* The new generations' summaries, in this transaction (pg_sum.h). */
  if ((rc = pg_sum_copy(k, gens, n, cause)) < 0)
    goto rollback;
  {
    nb.n = 0;
    const char *p[] = {num_i(&nb, seg_id), num_i(&nb, live)};
    if (!(r = pg_exec(k, "seg_live", 2, p, &rc, cause)))
      goto rollback;
    PQclear(r);
    r = NULL;
  }
  if (c->test_delay_ms) {
    __atomic_add_fetch(&c->test_delays_begun, 1, __ATOMIC_RELEASE);
    usleep(c->test_delay_ms * 1000u);
    __atomic_add_fetch(&c->test_delays_done, 1, __ATOMIC_RELEASE);
  }
  rc = pg_cmd(k, "COMMIT", cause);
  if (rc < 0)
    goto rollback;
  goto out;
rollback:
  PQclear(PQexec(k, "ROLLBACK")); /* invariant 3 */
  for (size_t i = 0; i < n; i++) {
    gens[i].result = rc;
    gens[i].seq = 0;
  }
out:
  PQclear(r);
  free(ord);
  free(sid);
  pg_put(c->pool, k);
  return rc;
}

int pg_cat_pin_publish(pg_cat *c, const char *daemon, int64_t min_seq,
                       int64_t ttl_ms, char **cause) {
  PGconn *k;
  int rc = pg_get(c->pool, &k, cause);
  if (rc < 0)
    return rc;
  numbuf nb = {.n = 0};
  PGresult *r;
  if (min_seq == INT64_MAX) {
    const char *p[] = {daemon};
    r = pg_exec(k, "pin_drop", 1, p, &rc, cause);
  } else {
    const char *p[] = {daemon, num_i(&nb, min_seq), num_i(&nb, ttl_ms)};
    r = pg_exec(k, "pin_publish", 3, p, &rc, cause);
  }
  PQclear(r);
  pg_put(c->pool, k);
  return rc;
}

int pg_cat_retain(pg_cat *c, int64_t cutoff_ns, uint64_t max_bytes,
                  uint32_t limit, int *ran, char **cause) {
  *ran = 0;
  PGconn *k;
  int rc = pg_get(c->pool, &k, cause);
  if (rc < 0)
    return rc;
  PGresult *r = NULL;
  numbuf nb = {.n = 0};
  int64_t deleted = 0;
  rc = pg_cmd(k, "BEGIN", cause);
  if (rc < 0)
    goto out;
  if (!(r = pg_exec(k, "retain_lock", 0, NULL, &rc, cause)))
    goto rollback;
  int got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
  PQclear(r);
  r = NULL;
  if (!got) { /* another daemon runs retention now */
    rc = pg_cmd(k, "COMMIT", cause);
    goto out;
  }
  *ran = 1;
  if (!(r = pg_exec(k, "pin_min", 0, NULL, &rc, cause)))
    goto rollback;
  int64_t pin = val_i(r, 0, 0);
  PQclear(r);
  r = NULL;
  if (cutoff_ns > 0) {
    const char *p[] = {num_i(&nb, cutoff_ns), num_i(&nb, pin),
                       num_u(&nb, limit)};
    if (!(r = pg_exec(k, "retain_age", 3, p, &rc, cause)))
      goto rollback;
    deleted += strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    r = NULL;
  }
  if (max_bytes > 0) {
    if (!(r = pg_exec(k, "stored_total", 0, NULL, &rc, cause)))
      goto rollback;
    uint64_t total = (uint64_t)val_i(r, 0, 0);
    PQclear(r);
    r = NULL;
    if (total > max_bytes) {
      uint64_t excess = total - (max_bytes - max_bytes / 16);
      nb.n = 0;
      const char *p[] = {num_u(&nb, excess), num_i(&nb, pin),
                         num_u(&nb, limit)};
      if (!(r = pg_exec(k, "retain_size", 3, p, &rc, cause)))
        goto rollback;
      deleted += strtoll(PQcmdTuples(r), NULL, 10);
      PQclear(r);
      r = NULL;
    }
  }
  rc = pg_cmd(k, "COMMIT", cause);
  if (rc < 0)
    goto rollback;
  goto out;
rollback:
  PQclear(PQexec(k, "ROLLBACK"));
out:
  PQclear(r);
  pg_put(c->pool, k);
  return rc < 0 ? rc : (int)(deleted > INT32_MAX ? INT32_MAX : deleted);
}

int pg_cat_sweep_dead(pg_cat *c, int64_t grace_ms, uint32_t limit,
                      int (*fn)(void *ctx, const char *object), void *ctx,
                      char **cause) {
  PGconn *k;
  int rc = pg_get(c->pool, &k, cause);
  if (rc < 0)
    return rc;
  numbuf nb = {.n = 0};
  const char *p[] = {num_i(&nb, grace_ms), num_u(&nb, limit)};
  PGresult *r = pg_exec(k, "dead_list", 2, p, &rc, cause);
  int removed = 0;
  for (int i = 0; r && i < PQntuples(r); i++) {
    /* The object first, then the row: a crash between leaves a row whose
     * object is gone, which the next sweep removes (DELETE of an absent
     * object succeeds); never an object nothing points at. */
    if (fn(ctx, PQgetvalue(r, i, 1)) != 0)
      continue;
    const char *q[] = {PQgetvalue(r, i, 0)};
    PGresult *d = pg_exec(k, "dead_forget", 1, q, &rc, cause);
    if (!d)
      break;
    removed += strtol(PQcmdTuples(d), NULL, 10) > 0;
    PQclear(d);
  }
  PQclear(r);
  pg_put(c->pool, k);
  return rc < 0 ? rc : removed;
}

/* The prologue of every per-session statement: borrows a connection, runs
 * stmt with the session's hex id as $1 (then extra[0..nextra) as $2...)
 * and gives the connection back. The result, or NULL with *rc and *cause. */
static PGresult *session_exec(pg_cat *c, const char *stmt,
                              const uint8_t session[16], int nextra,
                              const char *const *extra, int *rc, char **cause) {
  PGconn *k;
  *rc = pg_get(c->pool, &k, cause);
  if (*rc < 0)
    return NULL;
  char hex[33];
  hex16(session, hex);
  const char *p[4] = {hex};
  for (int i = 0; i < nextra && i < 3; i++)
    p[1 + i] = extra[i];
  PGresult *r = pg_exec(k, stmt, 1 + nextra, p, rc, cause);
  pg_put(c->pool, k);
  return r;
}

int pg_cat_last_gen(pg_cat *c, const uint8_t session[16], uint64_t *gen,
                    char **cause) {
  int rc;
  PGresult *r = session_exec(c, "last_gen", session, 0, NULL, &rc, cause);
  if (!r)
    return rc;
  rc = 0;
  if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
    *gen = (uint64_t)val_i(r, 0, 0);
    rc = 1;
  }
  PQclear(r);
  return rc;
}

int pg_cat_session_key(pg_cat *c, const uint8_t session[16],
                       uint8_t hash[STORE_KEY_HASH_SIZE], char **cause) {
  int rc;
  PGresult *r = session_exec(c, "session_key", session, 0, NULL, &rc, cause);
  if (!r)
    return rc;
  const char *v =
      PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
  rc = key_parse(v, hash);
  PQclear(r);
  return rc;
}

int pg_cat_hello(pg_cat *c, const uint8_t session[16], pg_cat_hello_row *out,
                 char **cause) {
  memset(out, 0, sizeof *out);
  int rc;
  PGresult *r = session_exec(c, "hello", session, 0, NULL, &rc, cause);
  if (!r)
    return rc;
  if (PQntuples(r) == 1) {
    out->has_key =
        !PQgetisnull(r, 0, 0) && key_parse(PQgetvalue(r, 0, 0), out->key);
    out->has_last = !PQgetisnull(r, 0, 1);
    out->last_gen = (uint64_t)val_i(r, 0, 1);
  }
  PQclear(r);
  return 0;
}

int pg_cat_note_rejected(pg_cat *c, const uint8_t session[16], uint64_t gens,
                         uint64_t events, char **cause) {
  numbuf nb = {.n = 0};
  const char *p[] = {num_u(&nb, gens), num_u(&nb, events)};
  int rc;
  PQclear(session_exec(c, "rejected", session, 2, p, &rc, cause));
  return rc;
}

/* Runs a read statement and hands each row to fn; returns fn's non-zero
 * value, 0, or a negative code. The whole result is one statement's
 * snapshot, so a listing is consistent even while others commit. */
typedef int (*row_fn)(const PGresult *r, int row, void *cb, void *ctx);

static int run_read(pg_cat *c, const char *stmt, int np, const char *const *p,
                    row_fn fn, void *cb, void *ctx) {
  PGconn *k;
  int rc = pg_get(c->pool, &k, NULL);
  if (rc < 0)
    return rc;
  PGresult *r = pg_exec(k, stmt, np, p, &rc, NULL);
  pg_put(c->pool, k);
  if (!r)
    return rc;
  int n = PQntuples(r);
  for (int i = 0; i < n && rc == 0; i++)
    rc = fn(r, i, cb, ctx);
  PQclear(r);
  return rc;
}

static int gen_row(const PGresult *r, int i, void *cb, void *ctx) {
  store_gen_row g = {
      .seq = val_i(r, i, 0),
      .session = PQgetvalue(r, i, 1),
      .service = PQgetvalue(r, i, 2),
      .host = PQgetvalue(r, i, 3),
      .gen = (uint64_t)val_i(r, i, 4),
      .start_ns = val_i(r, i, 5),
      .end_ns = val_i(r, i, 6),
      .events = (uint64_t)val_i(r, i, 7),
      .bytes = (uint64_t)val_i(r, i, 8),
      .stored_bytes = (uint64_t)val_i(r, i, 9),
      .dropped = (uint64_t)val_i(r, i, 10),
      .evicted = (uint64_t)val_i(r, i, 11),
      .rejected = (uint64_t)val_i(r, i, 12),
      .status = PQgetvalue(r, i, 13),
      .codec = PQgetvalue(r, i, 14),
      .committed_ns = val_i(r, i, 15),
  };
  return ((store_gen_cb)cb)(ctx, &g);
}

static int session_row(const PGresult *r, int i, void *cb, void *ctx) {
  store_session_row s = {
      .session = PQgetvalue(r, i, 0),
      .service = PQgetvalue(r, i, 1),
      .host = PQgetvalue(r, i, 2),
      .agent_version = PQgetvalue(r, i, 3),
      .tags_json = PQgetvalue(r, i, 4),
      .pid = (uint64_t)val_i(r, i, 5),
      .started_ns = val_i(r, i, 6),
      .first_seen_ns = val_i(r, i, 7),
      .last_seen_ns = val_i(r, i, 8),
      .generations = (uint64_t)val_i(r, i, 9),
      .has_gens = !PQgetisnull(r, i, 10),
      .first_gen = (uint64_t)val_i(r, i, 10),
      .last_gen = (uint64_t)val_i(r, i, 11),
      .events = (uint64_t)val_i(r, i, 12),
      .bytes = (uint64_t)val_i(r, i, 13),
      .lost = (uint64_t)val_i(r, i, 14),
      .rejected_gens = (uint64_t)val_i(r, i, 15),
      .connected_any = PQgetvalue(r, i, 16)[0] == 't',
  };
  return ((store_session_cb)cb)(ctx, &s);
}

int pg_cat_read_sessions(pg_cat *c, const store_session_filter *f,
                         store_session_cb cb, void *ctx) {
  const char *p[] = {f ? f->service : NULL, f ? f->host : NULL,
                     f ? f->tag_key : NULL, f ? f->tag_value : NULL};
  return run_read(c, "sessions", 4, p, session_row, (void *)cb, ctx);
}

/* One value of a one-row statement. *found 0 when no row or NULL. */
static int read_one(pg_cat *c, const char *stmt, int np, const char *const *p,
                    int64_t *v, int *found) {
  PGconn *k;
  int rc = pg_get(c->pool, &k, NULL);
  if (rc < 0)
    return rc;
  PGresult *r = pg_exec(k, stmt, np, p, &rc, NULL);
  pg_put(c->pool, k);
  if (!r)
    return rc;
  *found = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0);
  *v = *found ? val_i(r, 0, 0) : 0;
  PQclear(r);
  return 0;
}

int pg_cat_read_session_gens(pg_cat *c, const char *session, int64_t from_ns,
                             int64_t to_ns, int64_t after, uint32_t limit,
                             store_gen_cb cb, void *ctx) {
  int64_t id;
  int found;
  const char *q[] = {session};
  int rc = read_one(c, "session_id", 1, q, &id, &found);
  if (rc < 0)
    return rc;
  if (!found)
    return GTP_E_NOTFOUND;
  numbuf nb = {.n = 0};
  const char *p[] = {num_i(&nb, id), num_i(&nb, after), num_i(&nb, from_ns),
                     num_i(&nb, to_ns),
                     limit ? num_i(&nb, limit) : NULL /* LIMIT NULL: all */};
  return run_read(c, "session_gens", 5, p, gen_row, (void *)cb, ctx);
}

int pg_cat_read_window(pg_cat *c, const store_window_query *q, store_gen_cb cb,
                       void *ctx) {
  int64_t span;
  int found;
  int rc = read_one(c, "max_span_get", 0, NULL, &span, &found);
  if (rc < 0)
    return rc;
  /* A generation overlapping [from, to) starts at or after from - span. */
  int64_t lo = q->from_ns - span;
  if (q->from_ns < INT64_MIN + span)
    lo = INT64_MIN;
  numbuf nb = {.n = 0};
  const char *from = num_i(&nb, q->from_ns), *to = num_i(&nb, q->to_ns),
             *low = num_i(&nb, lo);
  if (q->session) {
    const char *p[] = {q->session, from, to, low};
    return run_read(c, "window_session", 4, p, gen_row, (void *)cb, ctx);
  }
  if (!q->service)
    return GTP_E_BADARG;
  if (q->host) {
    const char *p[] = {q->service, from, to, low, q->host};
    return run_read(c, "window_service_host", 5, p, gen_row, (void *)cb, ctx);
  }
  const char *p[] = {q->service, from, to, low};
  return run_read(c, "window_service", 4, p, gen_row, (void *)cb, ctx);
}

int pg_cat_read_feed(pg_cat *c, int64_t after_seq, uint32_t limit,
                     store_gen_cb cb, void *ctx) {
  numbuf nb = {.n = 0};
  const char *p[] = {num_i(&nb, after_seq), limit ? num_i(&nb, limit) : NULL};
  return run_read(c, "feed", 2, p, gen_row, (void *)cb, ctx);
}

int pg_cat_read_max_seq(pg_cat *c, int64_t *seq) {
  int found;
  return read_one(c, "max_seq", 0, NULL, seq, &found);
}

int pg_cat_read_feed_since(pg_cat *c, int64_t since_ns, int64_t *after_seq) {
  numbuf nb = {.n = 0};
  const char *p[] = {num_i(&nb, since_ns)};
  int64_t seq;
  int found;
  int rc = read_one(c, "seq_since", 1, p, &seq, &found);
  if (rc < 0)
    return rc;
  if (found) {
    *after_seq = seq - 1;
    return 0;
  }
  return pg_cat_read_max_seq(c, after_seq);
}

static int locate(pg_cat *c, const char *stmt, int np, const char *const *p,
                  pg_cat_loc *out) {
  memset(out, 0, sizeof *out);
  PGconn *k;
  int rc = pg_get(c->pool, &k, NULL);
  if (rc < 0)
    return rc;
  PGresult *r = pg_exec(k, stmt, np, p, &rc, NULL);
  pg_put(c->pool, k);
  if (!r)
    return rc;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return GTP_E_NOTFOUND;
  }
  out->object = strdup(PQgetvalue(r, 0, 0));
  out->off = (uint64_t)val_i(r, 0, 1);
  out->len = (uint64_t)val_i(r, 0, 2);
  snprintf(out->codec, sizeof out->codec, "%s", PQgetvalue(r, 0, 3));
  out->bytes = (uint64_t)val_i(r, 0, 4);
  out->seq = val_i(r, 0, 5);
  PQclear(r);
  return out->object ? 0 : -ENOMEM;
}

int pg_cat_locate(pg_cat *c, int64_t seq, pg_cat_loc *out) {
  numbuf nb = {.n = 0};
  const char *p[] = {num_i(&nb, seq)};
  return locate(c, "locate", 1, p, out);
}

int pg_cat_locate_by_gen(pg_cat *c, const char *session, uint64_t gen,
                         pg_cat_loc *out) {
  numbuf nb = {.n = 0};
  const char *p[] = {session, num_u(&nb, gen)};
  return locate(c, "locate_by_gen", 2, p, out);
}
