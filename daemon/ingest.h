/* ingest.h: gentraced's agent side: one libuv loop that accepts agents,
 * speaks the PROTOCOL.md state machine, reassembles generations, validates
 * them and hands them to the store, then ACKs them once committed.
 *
 * Lifecycle (main thread, which also runs the loop):
 *   ingest_new -> store_open(..., ingest_store_done, ing, ...) ->
 *   ingest_set_store -> ingest_start -> uv_run ... ingest_stop(cb) ->
 *   cb: uv_stop -> store_close -> ingest_free (runs the loop until every
 *   handle is closed).
 *
 * Thread: everything is loop-thread only except ingest_store_done (store
 * thread), ingest_metrics, ingest_healthy and ingest_connected (any thread).
 * ingest_new starts one helper thread (it prepares generation buffers off
 * the loop) and ingest_free joins it.
 */
#ifndef INGEST_H
#define INGEST_H

#include <stdint.h>

#include <uv.h>

#include "format.h"
#include "storage.h"

typedef struct ingest ingest;

typedef struct ingest_config {
  const char *host;         /* listen address, numeric */
  uint16_t port;            /* 0 = pick a free one */
  const char *token;        /* NULL or "" = no token required; copied */
  uint64_t max_connections; /* agent connections at once */
  uint64_t max_conns_per_ip; /* of those, from one address (IPv6: /64) */
  uint64_t max_conn_buffer; /* bytes buffered per connection */
  uint64_t max_buffer;      /* bytes buffered in total */
  uint32_t max_frame;       /* payload bytes, <= GTP_FRAME_MAX */
  uint64_t max_gen_size;    /* bytes of one assembled generation */
  uint64_t handshake_timeout_ms;
  uint64_t idle_timeout_ms;
  uint64_t max_gen_span_ns;   /* CLOCK span bound; 0 = none (tests only) */
  uint64_t max_clock_skew_ns; /* CLOCK distance from our clock; 0 = off */
  /* Pause before the next poll of a busy loop, so one wake-up serves
   * several agents (loopcoal.c); 0 = off. */
  uint64_t loop_coalesce_ns;
  /* Called on the store thread for every generation committed (not for
   * duplicates); main.c wires it to web_notify_commit. May be NULL. */
  void (*on_commit)(void *ctx, int64_t seq);
  void *on_commit_ctx;
} ingest_config;

/* Fills the defaults of docs/DAEMON.md (127.0.0.1:7170, 16384 connections, ...). */
void ingest_config_init(ingest_config *cfg);

/* Allocates the ingest state and its loop handles (not yet listening).
 * 0 or a negative code with *cause malloc'd. */
int ingest_new(uv_loop_t *loop, const ingest_config *cfg, ingest **out,
               char **cause);
/* The store generations go to; set once before ingest_start. */
void ingest_set_store(ingest *ing, storage *s);
/* Binds and listens; *port gets the bound port. */
int ingest_start(ingest *ing, uint16_t *port, char **cause);

/* store_done_fn: pass as store_open's done with ctx = ing. Store thread. */
void ingest_store_done(void *ctx, store_gen *g);

/* Begins the shutdown: stops accepting and reading, waits for every
 * submitted generation to commit and be ACKed (at most drain_ms), says
 * GOODBYE to every agent, closes the connections, then calls done once. */
void ingest_stop(ingest *ing, uint64_t drain_ms, void (*done)(void *arg),
                 void *arg);
/* Closes every remaining handle (running the loop until they are closed)
 * and frees ing. Call after the store is closed (no more done callbacks). */
void ingest_free(ingest *ing);

/* Appends Prometheus text for the ingest and store counters. Any thread. */
void ingest_metrics(ingest *ing, gtp_wbuf *out);
/* 1 if accepting and the store has room; else 0 and a static reason. */
int ingest_healthy(ingest *ing, const char **reason);
/* 1 if the session (32 hex digits) has a live, handshaken connection. */
int ingest_connected(ingest *ing, const char *session_hex);

/* A snapshot of a few counters, for tests and the shutdown log line. */
typedef struct ingest_stats {
  uint64_t connections, connections_total, refused_total;
  uint64_t frames, bytes;
  uint64_t committed, rejected, duplicate;
  uint64_t buffered, reads_paused;
  int disk_full;
} ingest_stats;
void ingest_stats_get(ingest *ing, ingest_stats *out);

#endif
