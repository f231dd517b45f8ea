/* ingest_metrics.c: the ingest loop's counters as Prometheus text, health
 * and the connected-session lookup. Runs on HTTP threads: counters are read
 * with relaxed atomic loads (each is written by the loop thread alone), the
 * session table under sess_lock.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ingest_int.h"
#include "tls_conn.h"

static const char *const limit_names[LIM_COUNT_] = {
    "max-connections",   "max-conn-buffer",
    "max-buffer",        "max-frame",
    "max-gen-size",      "open-generations",
    "handshake-timeout", "idle-timeout",
    "write-queue",       "token",
    "max-conns-per-ip",  "hello-size",
    "max-buffer-shed"};

/* ----------------------------------------------------------------- metrics */

static void metric(gtp_wbuf *b, const char *name, const char *type,
                   const char *help, const char *labels, uint64_t v) {
  char line[512];
  int n;
  if (help != NULL) {
    n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n", name, help,
                 name, type);
    gtp_wbuf_put(b, line, (size_t)n);
  }
  n = snprintf(line, sizeof line, "%s%s %" PRIu64 "\n", name,
               labels != NULL ? labels : "", v);
  gtp_wbuf_put(b, line, (size_t)n);
}

static void metric_f(gtp_wbuf *b, const char *name, const char *type,
                     const char *help, double v) {
  char line[512];
  int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.9f\n",
                   name, help, name, type, name, v);
  gtp_wbuf_put(b, line, (size_t)n);
}

#define C(f) CTR_GET(ing, f)
void ingest_metrics(ingest *ing, gtp_wbuf *b) {
  genpool_stats gp;
  genpool_stats_get(&ing->pool, &gp);
  metric(b, "gentrace_agent_connections", "gauge",
         "Agent connections open now.", NULL, C(connections));
  metric(b, "gentrace_agent_connections_total", "counter",
         "Agent connections accepted.", NULL, C(connections_total));
  metric(b, "gentrace_agent_connections_refused_total", "counter",
         "Agent connections refused by --max-connections.", NULL,
         C(refused_total));
  metric(b, "gentrace_agent_handshakes_total", "counter",
         "Agents that completed HELLO.", NULL, C(handshakes_total));
  metric(b, "gentrace_agent_sessions_replaced_total", "counter",
         "Connections replaced by a newer one of the same session.", NULL,
         C(replaced_total));
  metric(b, "gentrace_frames_received_total", "counter",
         "Frames received from agents.", NULL, C(frames));
  metric(b, "gentrace_bytes_received_total", "counter",
         "Bytes received from agents.", NULL, C(bytes));
  metric(b, "gentrace_ingest_buffer_pool_bytes", "gauge",
         "Idle generation buffers kept for reuse (with buffered bytes, under "
         "--max-buffer).",
         NULL, gp.bytes);
  metric(b, "gentrace_ingest_buffer_pool_reused_total", "counter",
         "Generations assembled in a reused buffer.", NULL, gp.reused);
  metric(b, "gentrace_ingest_buffer_prepared_used_total", "counter",
         "Generations assembled in a buffer prepared off the loop thread.",
         NULL, gp.prepared_used);
  metric(b, "gentrace_ingest_buffer_prepared_ready", "gauge",
         "Buffers prepared off the loop thread, waiting for a generation.",
         NULL, gp.prepared_ready);
  metric(b, "gentrace_ingest_loop_polls_total", "counter",
         "Rounds of the ingest loop (its polls for socket events).", NULL,
         __atomic_load_n(&ing->coal.polls, __ATOMIC_RELAXED));
  metric(b, "gentrace_ingest_loop_pauses_total", "counter",
         "Rounds the busy ingest loop paused --loop-coalesce before polling.",
         NULL, __atomic_load_n(&ing->coal.pauses, __ATOMIC_RELAXED));
  metric(b, "gentrace_ingest_store_wakeups_total", "counter",
         "Wake-ups of the ingest loop by the store thread to hand back "
         "committed generations (one per batch of completions).",
         NULL, __atomic_load_n(&ing->done.wakes, __ATOMIC_RELAXED));
  metric(b, "gentrace_ingest_staged_frames_total", "counter",
         "BATCH frames whose rest was read straight into the generation.", NULL,
         C(staged_frames));
  metric(b, "gentrace_protocol_errors_total", "counter",
         "Connections closed for a protocol error.", NULL, C(protocol_errors));
  metric(b, "gentrace_out_of_memory_total", "counter",
         "Allocations that failed: on the ingest path each ended the agent "
         "connection that needed it (the agent resends); in the buffer "
         "filler, the loop made the buffer itself.",
         "{where=\"ingest\"}", C(oom));
  metric(b, "gentrace_out_of_memory_total", "counter", NULL,
         "{where=\"buffer-filler\"}", gp.fill_failed);
  metric(b, "gentrace_generations_committed_total", "counter",
         "Generations stored.", NULL, C(committed));
  metric(b, "gentrace_generations_rejected_total", "counter",
         "Generations refused (validation or limits).", NULL, C(rejected));
  metric(b, "gentrace_generations_duplicate_total", "counter",
         "Generations received again after they were stored (ACKed).", NULL,
         C(duplicate));
  metric(b, "gentrace_store_errors_total", "counter",
         "Generations the store failed for other reasons than a full disk.",
         NULL, C(store_errors));
  metric(b, "gentrace_ledger_events_total", "counter",
         "Events lost before they were stored, by cause.",
         "{cause=\"dropped\"}", C(ledger_dropped));
  metric(b, "gentrace_ledger_events_total", "counter", NULL,
         "{cause=\"evicted\"}", C(ledger_evicted));
  metric(b, "gentrace_ledger_events_total", "counter", NULL,
         "{cause=\"rejected\"}", C(ledger_rejected) + C(rejected_events));
  metric(b, "gentrace_buffered_bytes", "gauge",
         "Bytes held for agents (partial frames, open and queued "
         "generations).",
         NULL, C(buffered));
  metric(b, "gentrace_ingest_budget_bytes", "gauge",
         "The memory budget (--max-buffer) for the bytes below.", NULL,
         ing->cfg.max_buffer);
  metric(b, "gentrace_ingest_held_bytes", "gauge",
         "Bytes counted against --max-buffer by kind (partial_frames, "
         "open_generations and queued_generations add up to "
         "gentrace_buffered_bytes).",
         "{kind=\"partial_frames\"}", C(budget_frames));
  metric(b, "gentrace_ingest_held_bytes", "gauge", NULL,
         "{kind=\"open_generations\"}", C(budget_open));
  metric(b, "gentrace_ingest_held_bytes", "gauge", NULL,
         "{kind=\"queued_generations\"}", C(budget_queued));
  metric(b, "gentrace_ingest_held_bytes", "gauge", NULL,
         "{kind=\"identities\"}", C(budget_ident));
  metric(b, "gentrace_ingest_held_bytes", "gauge", NULL, "{kind=\"replies\"}",
         C(budget_replies));
  metric(b, "gentrace_ingest_held_bytes", "gauge", NULL,
         "{kind=\"tls_sessions\"}", C(budget_tls));
  if (ing->store != NULL)
    metric(b, "gentrace_ingest_held_bytes", "gauge", NULL,
           "{kind=\"compression_scratch\"}", storage_scratch_bytes(ing->store));
  metric(b, "gentrace_ingest_paused", "gauge",
         "1 while every read is paused (--max-buffer or disk full).", NULL,
         C(global_paused));
  metric(b, "gentrace_ingest_shed_connections_total", "counter",
         "Connections closed to keep --max-buffer (their partial work was "
         "the oldest).",
         NULL, C(shed_conns));
  metric(b, "gentrace_ingest_shed_bytes_total", "counter",
         "Bytes of partial work freed by those closes.", NULL, C(shed_bytes));
  metric(b, "gentrace_agent_connections_refused_per_ip_total", "counter",
         "Agent connections refused by --max-conns-per-ip.", NULL,
         C(refused_per_ip));
  metric(b, "gentrace_agent_hello_too_big_total", "counter",
         "Connections closed for a frame over 64 KiB before HELLO.", NULL,
         C(hello_toobig));
  metric(b, "gentrace_reads_paused_total", "counter",
         "Times reading from agents paused for backpressure.", NULL,
         C(reads_paused));
  metric(b, "gentrace_connections_paused", "gauge",
         "Connections paused by --max-conn-buffer now.", NULL, C(paused_now));
  metric(b, "gentrace_heartbeats_sent_total", "counter",
         "HEARTBEAT frames sent to agents.", NULL, C(heartbeats_sent));
  for (int i = 0; i < LIM_COUNT_; i++) {
    char lab[64];
    snprintf(lab, sizeof lab, "{limit=\"%s\"}", limit_names[i]);
    metric(b, "gentrace_limit_hits_total", "counter",
           i == 0 ? "Times each limit was hit." : NULL, lab, C(limit_hits[i]));
  }
  metric(b, "gentrace_disk_full", "gauge",
         "1 while ingest is paused because storage is full.", NULL,
         C(disk_full));
  metric(b, "gentrace_disk_full_total", "counter", "Times storage became full.",
         NULL, C(disk_full_total));
  if (ing->store != NULL) {
    store_stats st;
    storage_stats_get(ing->store, &st);
    metric(b, "gentrace_store_queue_generations", "gauge",
           "Generations waiting for the store thread.", NULL, st.queued_gens);
    metric(b, "gentrace_store_queue_bytes", "gauge",
           "Bytes waiting for the store thread.", NULL, st.queued_bytes);
    metric(b, "gentrace_store_committed_bytes_total", "counter",
           "Payload bytes committed.", NULL, st.committed_bytes);
    metric(b, "gentrace_store_transactions_total", "counter",
           "Store transactions.", NULL, st.transactions);
    metric_f(b, "gentrace_store_commit_seconds_total", "counter",
             "Time spent committing.", (double)st.commit_ns_total / 1e9);
    metric_f(b, "gentrace_store_commit_seconds_max", "gauge", "Longest commit.",
             (double)st.commit_ns_max / 1e9);
    metric(b, "gentrace_store_checkpoints_total", "counter",
           "WAL checkpoint passes on the checkpointer thread.", NULL,
           st.ckpt_passes);
    metric_f(b, "gentrace_store_checkpoint_seconds_total", "counter",
             "Time the checkpointer thread spent in checkpoints.",
             (double)st.ckpt_pass_ns_total / 1e9);
    metric_f(b, "gentrace_store_checkpoint_seconds_max", "gauge",
             "Longest checkpoint pass.", (double)st.ckpt_pass_ns_max / 1e9);
    metric(b, "gentrace_store_checkpoint_finishes_total", "counter",
           "Short checkpoints of the WAL's remainder on the store thread.",
           NULL, st.ckpt_finishes);
    metric_f(b, "gentrace_store_checkpoint_finish_seconds_max", "gauge",
             "Longest finish on the store thread (its ACKs wait for it).",
             (double)st.ckpt_finish_ns_max / 1e9);
    metric(b, "gentrace_store_retention_deleted_total", "counter",
           "Generations deleted by retention.", NULL,
           st.retention_deleted_gens);
    metric(b, "gentrace_store_db_bytes", "gauge",
           "Database size, WAL included, last measured.", NULL, st.db_bytes);
    metric(b, "gentrace_store_disk_full", "gauge",
           "1 while the store reports no room.", NULL, (uint64_t)st.disk_full);
    metric(b, "gentrace_summary_backfill_pending", "gauge",
           "Stored generations still without a summary (schema migration).",
           NULL, st.summary_pending);
    metric(b, "gentrace_summary_backfilled_total", "counter",
           "Generations summarized by the background backfill.", NULL,
           st.summary_backfilled);
    metric(b, "gentrace_rollup_pending_slots", "gauge",
           "Ten-minute slots whose summary rollup is being (re)built;"
           " summaries read their raw rows meanwhile.",
           NULL, st.rollup_pending_slots);
    metric(b, "gentrace_rollup_rebuilt_slots_total", "counter",
           "Slot rollups built or rebuilt by the maintenance tick.", NULL,
           st.rollup_rebuilt_slots);
    storage_metrics(ing->store, b); /* the shared store's own */
    acklat_metrics(&ing->ack_lat, b, "gentrace_ack_seconds",
                   "Generations ACKed: GEN_END read to ACK written.");
    acklat_metrics(&ing->commit_lat, b, "gentrace_ack_commit_seconds",
                   "Generations ACKed: GEN_END read to its COMMIT returned"
                   " (the rest of gentrace_ack_seconds is the loop's).");
  }
  session_auth_metrics(ing, b);
  if (ing->tls != NULL)
    tls_server_metrics(ing->tls, b);
}
#undef C

int ingest_healthy(ingest *ing, const char **reason) {
  if (__atomic_load_n(&ing->ctr.disk_full, __ATOMIC_RELAXED)) {
    if (reason != NULL)
      *reason = "storage full; ingest paused";
    return 0;
  }
  return 1;
}

void ingest_stats_get(ingest *ing, ingest_stats *o) {
  memset(o, 0, sizeof *o);
  o->connections = CTR_GET(ing, connections);
  o->connections_total = CTR_GET(ing, connections_total);
  o->refused_total = CTR_GET(ing, refused_total);
  o->frames = CTR_GET(ing, frames);
  o->bytes = CTR_GET(ing, bytes);
  o->committed = CTR_GET(ing, committed);
  o->rejected = CTR_GET(ing, rejected);
  o->duplicate = CTR_GET(ing, duplicate);
  o->buffered = CTR_GET(ing, buffered);
  o->reads_paused = CTR_GET(ing, reads_paused);
  o->disk_full = (int)CTR_GET(ing, disk_full);
}
