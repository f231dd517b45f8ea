/* b2_floor.h: B2's same-run floor (issue 19). B2 asks gentraced to ingest
 * at 0.8 of iperf3 over loopback; iperf3 only moves bytes. The floor is
 * the least any receiver of B2's frames must do: read them off loopback
 * TCP and CRC-32C every payload byte (the generation's manifest check,
 * which no ingest can skip), nothing else. Driven by the same sender with
 * the same prebuilt frames as B2, right after it, it says how much of the
 * gap to iperf3 is the machine (the floor's own gap) and how much is
 * gentraced (its gap to the floor). bench_ingest b2 prints both, with the
 * CPU seconds per GB of each side of iperf3, the floor and gentraced.
 * A third mode stores what it reads (write(2), fdatasync at the cadence
 * of gentraced's WAL checkpoints): the floor of the steady state, where
 * the daemon reuses its buffers but must put every byte on disk.
 */
#ifndef B2_FLOOR_H
#define B2_FLOOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One pass of the floor. CPU seconds are the whole receiver process
 * (wait4's rusage: it is a forked child) and the sending thread. */
typedef struct b2_floor_fig {
  double bytes;      /* bytes sent (the frames) */
  double wall_s;     /* first byte sent to the receiver's exit */
  double recv_cpu_s; /* the receiver, user + system */
  double send_cpu_s; /* the sender (this thread), user + system */
  uint64_t frames;   /* frames the receiver walked */
  uint32_t crc;      /* CRC-32C of every payload, chained */
  uint32_t syncs;    /* fdatasync calls (B2_FLOOR_STORE) */
  double sync_s;     /* wall seconds the receiver spent in them */
  double read_cpu_s; /* the receiver's reading thread alone (the rest of
                      * recv_cpu_s: B2_FLOOR_STORE's syncing thread) */
} b2_floor_fig;

/* How the receiver keeps what it reads. */
typedef enum {
  B2_FLOOR_REUSE, /* one 256 KiB buffer, read into again and again */
  B2_FLOOR_HOLD,  /* every byte kept in fresh memory, as gentraced must
                   * keep a generation until the store has it: the page
                   * faults of memory that is not reused */
  B2_FLOOR_STORE  /* the steady state: one reused buffer, every read
                   * appended to a file with write(2) and fdatasync'd
                   * every 64 MiB, the cadence of gentraced's WAL
                   * checkpoints (synchronous=NORMAL syncs nothing else) */
} b2_floor_mode;

/* Sends frames[0..len) once to a receiver forked for the purpose, over
 * 127.0.0.1 (port 0, read back); the receiver walks the frames (5-byte
 * headers, GTP_FRAME_HEADER_SIZE) and CRCs their payloads. dir: where
 * B2_FLOOR_STORE writes its file (the daemon's data directory, so the
 * same file system; removed after the run). 0, or -1 with a line on
 * stderr (also when the receiver saw other bytes than sent). */
int b2_floor_run(const uint8_t *frames, size_t len, b2_floor_mode mode,
                 const char *dir, b2_floor_fig *fig);

/* iperf3, one stream over 127.0.0.1 for `secs` seconds (-J): bytes/s at
 * the receiver and CPU seconds per GB of its sender (the client) and
 * receiver (the server) as iperf3 reports them. 0, or -1 when iperf3 did
 * not run (not installed, no port). */
int b2_floor_iperf3(int secs, double *bps, double *send_cpu_s_gb,
                    double *recv_cpu_s_gb);

/* gentraced's threads by role, CPU seconds so far (schedstat): the loop
 * (the main thread: reads, CRC, reassembly), the buffer filler (thread
 * "gt-genpool": faults in fresh generation buffers), and the store (every
 * other thread but libmicrohttpd's: in B2 the compressors working on the
 * first generations while the commit is held back). 0, or -1. */
enum { B2_ROLE_LOOP, B2_ROLE_FILLER, B2_ROLE_STORE, B2_ROLES };
int b2_floor_roles(pid_t pid, double cpu_s[B2_ROLES]);

#endif
