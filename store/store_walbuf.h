/* store_walbuf.h: a VFS shim for the store's write connection that writes a
 * transaction's WAL frames with one write() instead of two per page.
 *
 * Why: SQLite appends each WAL frame in two writes (its 24-byte header,
 * then the page), one system call each. A fleet's transaction of 20 small
 * generations rewrites about 30 pages, so it paid about 60 pwrite calls,
 * and the store thread spent a third of its time in the kernel at 1,000
 * agents (bench/RESULTS.md, helper fleet1k). The shim gathers the WAL's
 * sequential writes in memory and writes them out at once when the
 * commit frame is complete, before SQLite publishes the commit in the
 * WAL index, so readers and a crash see exactly what they saw before.
 *
 * Invariants (store_walbuf.c):
 *   1. Bytes are held back only for the WAL file, only while each write
 *      continues the one before it; any other access to the WAL (read,
 *      size, sync, truncate, close, file control, a write elsewhere)
 *      writes them out first, so SQLite never reads or syncs around them.
 *   2. The write that completes a commit frame (the page after a frame
 *      header whose "database size" field is not zero) writes out
 *      everything held and returns that write's result: a commit is
 *      published (walIndexWriteHdr, after its frames) only once its frames
 *      are in the file, and a full disk fails the COMMIT as before.
 *   3. What a failed write-out held is dropped: SQLite treats the
 *      transaction as failed and frames past the last commit as garbage.
 *
 * Thread: one connection's files are used by that connection's thread;
 * registering the VFS is thread-safe (pthread_once).
 */
#ifndef STORE_WALBUF_H
#define STORE_WALBUF_H

/* The VFS name for sqlite3_open_v2, registered (not as the default) on
 * first use; NULL when it could not be (then open with the default). */
const char *store_walbuf_vfs(void);

#endif /* STORE_WALBUF_H */
