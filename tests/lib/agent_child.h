/* agent_child.h: an honest agent for tests and benchmarks that put the real
 * libgentrace beside a daemon (test_ledger, test_attack, bench_attack):
 * a child process whose threads write a paced mix of regions and counters
 * for a while, stop the agent (flushing what it holds) and report how many
 * events they wrote; then the sums the daemon's database holds for its
 * service, to check "written = stored + lost" exactly.
 *
 * Not cmocka: callers assert on the results.
 */
#ifndef AGENT_CHILD_H
#define AGENT_CHILD_H

#include <stdint.h>
#include <sys/types.h>

typedef struct ac_config {
  const char *addr;    /* gentraced's agent address, "127.0.0.1:port" */
  const char *service; /* the session's service name */
  double rate;         /* events per second offered, all threads together */
  double seconds;      /* how long the threads write */
  int threads;         /* writing threads (at most 32) */
  uint32_t buffer_mb;  /* gt_config.buffer_mb */
  uint32_t flush_timeout_ms;
  int pace_ms;     /* sleep between rounds of writing; 0: spin (the most
                    * events a thread can write, for the ledger's loss tests) */
  int settle_gens; /* then an event every 5 ms until the agent sealed this
                    * many more generations (at most 30 s): a thread that
                    * dropped writes its LOST marker into the next buffer it
                    * gets, which a starved sealer may not have returned
                    * before the burst ended */
} ac_config;

typedef struct ac_child {
  pid_t pid;
  int fd; /* the pipe the child reports on */
} ac_child;

/* Forks the child; 0, or -errno (nothing started). */
int ac_start(ac_child *c, const ac_config *cfg);
/* Waits for the child: the events it wrote, or -1 if it failed (gt_start
 * refused, or it died). */
int64_t ac_wait(ac_child *c);

/* For service in the daemon's database at db: events stored, events the
 * ledgers say were lost (dropped + evicted + rejected), and generation
 * numbers missing between the first and the last. 0, or -1 if the
 * database could not be read. */
int ac_db_sums(const char *db, const char *service, int64_t *stored,
               int64_t *lost, int64_t *gaps);

#endif
