/* b1_agent.h: the agent side of a B1 trial, shared by bench_b1 and
 * bench_cluster: a forked child starts the real libgentrace, emits paced
 * gt_counter events from T threads and reports what the agent counted. */
#ifndef GT_BENCH_B1_AGENT_H
#define GT_BENCH_B1_AGENT_H

/* In a fresh child: gt_start with addr (a failover list
 * "host:port[,host:port...]" is passed as is) and service, `rate` events/s
 * in all over `threads` threads for `seconds`, gt_stop (its flush waits up
 * to 10 s for the ACKs), then one line "written dropped elapsed emitted\n" on
 * fd (elapsed: seconds the slowest thread took to emit its share; emitted:
 * the gt_counter calls the threads made, counted by the threads, which a
 * trial compares with what was stored, as bench/lttng.sh compares
 * lttng_bench's own count with what relayd wrote). The
 * agent's GENTRACE_BUFFER_MB, GENTRACE_PERIOD_MS and GENTRACE_SPOOL_MB come
 * from the environment. With ready_fd >= 0, once the agent is connected
 * (at most 60 s) one byte goes to ready_fd and the threads start only at
 * end of file on go_fd: the caller starts many agents together (their
 * start-up outside the trial, as bench/lttng.sh does for LTTng apps); -1
 * and -1 start at once. 0, or 1 when the agent did not start. */
int b1_agent_run(const char *addr, const char *service, double rate,
                 unsigned threads, double seconds, int fd, int ready_fd,
                 int go_fd);

#endif
