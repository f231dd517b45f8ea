/* store_ckpt.h: WAL checkpoints off the store thread (store_ckpt.c has the
 * design note and the invariants). Used by store.c only. */
#ifndef STORE_CKPT_H
#define STORE_CKPT_H

#include <sqlite3.h>
#include <stdint.h>

typedef struct store_ckpt store_ckpt;

typedef struct store_ckpt_stats {
  uint64_t passes, pass_ns_total, pass_ns_max; /* the checkpointer's */
  uint64_t finishes, finish_ns_max; /* the store thread's short finishes */
  int busy;                         /* a pass under way or asked for */
} store_ckpt_stats;

/* Opens a second connection on path (a WAL database the write connection
 * wdb has open), starts the checkpointer thread and takes over wdb's WAL
 * hook (SQLite's automatic checkpoint inside COMMIT is then off).
 * target_frames: the WAL size in frames at which a checkpoint starts.
 * sync_full: the write connection's synchronous = FULL (else NORMAL).
 * Returns NULL on failure, wdb then keeps its automatic checkpoint. */
store_ckpt *store_ckpt_start(sqlite3 *wdb, const char *path,
                             int64_t target_frames, int sync_full);

/* Stops the thread (waits for a pass under way) and closes its
 * connection; wdb's automatic checkpoint is back. Before wdb closes. */
void store_ckpt_stop(store_ckpt *c, sqlite3 *wdb, int64_t target_frames);

/* On the store thread, between transactions (store_maint.c): when the
 * hook found the checkpointer's pass done and few frames left, checkpoints
 * those on wdb, so the next transaction restarts the WAL. */
void store_ckpt_finish(store_ckpt *c, sqlite3 *wdb);

void store_ckpt_stats_get(store_ckpt *c, store_ckpt_stats *out);

#endif /* STORE_CKPT_H */
