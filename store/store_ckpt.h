/* store_ckpt.h: WAL checkpoints on a thread of their own, so a commit (and
 * so every ACK behind it) does not wait for one.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL
 * past its threshold, on the committing connection: the store thread.
 * With a fleet writing 25-30 MB of WAL a second, that was one checkpoint
 * of 64 MiB every two or three seconds, each holding the store thread for
 * up to 180 ms while ACKs queued behind it (bench/RESULTS.md, fourth
 * session). Here a second connection on the same file checkpoints
 * (PASSIVE: it never blocks the writer, which keeps appending to the WAL)
 * when the write connection's WAL hook reports the WAL at or past the
 * threshold; the writer restarts the WAL from its start, as before, once a
 * checkpoint has copied all of it and no reader still needs it.
 *
 * Thread: store_ckpt_start and store_ckpt_stop on the thread that owns db
 * (before the store thread starts and after it stopped); the hook runs on
 * whichever thread commits on db.
 */
#ifndef STORE_CKPT_H
#define STORE_CKPT_H

#include <sqlite3.h>
#include <stdint.h>

typedef struct store_ckpt store_ckpt;

/* Opens a second connection on path (synchronous as sync_full says, like
 * the write connection), starts the checkpoint thread and installs a WAL
 * hook on db that replaces its automatic checkpoint: a checkpoint is asked
 * for once the WAL holds target_frames frames. Returns 0, or a negative
 * code from proto/gtp_error.h (or -errno) with db left as it was (its
 * automatic checkpoint on). */
int store_ckpt_start(sqlite3 *db, const char *path, int sync_full,
                     int target_frames, store_ckpt **out);

/* Stops the thread (a checkpoint under way finishes first), closes its
 * connection, gives db its automatic checkpoint back (target_frames) and
 * frees c. NULL is a no-op. */
void store_ckpt_stop(store_ckpt *c, sqlite3 *db);

/* Checkpoints run so far (for tests). */
uint64_t store_ckpt_runs(store_ckpt *c);

#endif
