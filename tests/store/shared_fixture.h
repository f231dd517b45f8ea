/* shared_fixture.h: helpers for the shared-backend tests: a fresh
 * PostgreSQL database per test binary on the cluster that
 * tests/store/test_shared.sh started (GENTRACE_CATALOG names it), and
 * store_gen values to commit. Header-only; each test includes it once. */
#ifndef SHARED_FIXTURE_H
#define SHARED_FIXTURE_H

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

static void fixture_quiet(void *arg, const char *msg) {
  (void)arg;
  (void)msg;
}

/* Creates database NAME_<pid> and writes its URI to out. 0 or -1. */
static inline int fixture_db(const char *name, char *out, size_t cap) {
  const char *base = getenv("GENTRACE_CATALOG");
  if (!base)
    return -1;
  const char *slash = strrchr(base, '/');
  if (!slash || slash < base + 13)
    return -1;
  PGconn *c = PQconnectdb(base);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "fixture_db: %s", PQerrorMessage(c));
    PQfinish(c);
    return -1;
  }
  PQsetNoticeProcessor(c, fixture_quiet, NULL);
  char db[96], sql[160];
  snprintf(db, sizeof db, "%s_%ld", name, (long)getpid());
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
  PQclear(PQexec(c, sql));
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
  PGresult *r = PQexec(c, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok)
    fprintf(stderr, "fixture_db: %s", PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
  snprintf(out, cap, "%.*s/%s", (int)(slash - base), base, db);
  return ok ? 0 : -1;
}

/* The shared store of a conformance test: a fresh database NAME_<pid> (its
 * URI in db) and the objects prefix NAME-<pid> under GENTRACE_OBJECTS (in
 * objects). -1 when tests/store/test_shared.sh provided no cluster (the
 * caller skips) or the database cannot be made. */
static inline int fixture_shared(const char *name, char *db, size_t dbcap,
                                 char *objects, size_t objcap) {
  const char *obj = getenv("GENTRACE_OBJECTS");
  if (!getenv("GENTRACE_CATALOG") || !obj) {
    printf("(shared backend skipped: no cluster in the environment)\n");
    return -1;
  }
  snprintf(objects, objcap, "%s/%s-%ld", obj, name, (long)getpid());
  return fixture_db(name, db, dbcap);
}

/* Runs SQL on uri and returns the first value as an integer (-1 if none). */
static inline long long fixture_sql_int(const char *uri, const char *sql) {
  PGconn *c = PQconnectdb(uri);
  PGresult *r = PQexec(c, sql);
  long long v = -1;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
      !PQgetisnull(r, 0, 0))
    v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  else if (PQresultStatus(r) != PGRES_TUPLES_OK)
    fprintf(stderr, "fixture_sql_int: %s", PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
  return v;
}

/* A generation of session sid (its first byte), gen, 1 s long from
 * start_s seconds, with a payload of len bytes of a pattern. */
static inline store_gen *fixture_gen(uint8_t sid, const char *service,
                                     uint64_t gen, int64_t start_s,
                                     size_t len) {
  store_gen *g = calloc(1, sizeof *g);
  memset(g->session, 0, 16);
  g->session[0] = sid;
  g->session[15] = 0x5a;
  g->service = strdup(service);
  g->host = strdup("host-a");
  g->agent_version = strdup("test");
  g->tags_json = strdup("{\"az\":\"b\"}");
  g->pid = 1000 + sid;
  g->process_start_ns = 5;
  g->gen = gen;
  g->start_ns = start_s * 1000000000LL;
  g->end_ns = g->start_ns + 1000000000LL;
  g->end.gen = gen;
  g->end.events = 10 * gen + sid;
  g->end.dropped = 1;
  g->payload = malloc(len ? len : 1);
  for (size_t i = 0; i < len; i++)
    g->payload[i] = (uint8_t)(i * 31 + gen * 7 + sid);
  g->len = len;
  return g;
}

static inline void fixture_hex(const uint8_t id[16], char out[33]) {
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", id[i]);
}

#endif /* SHARED_FIXTURE_H */
