/* rlimits.c: the process limits gentraced adjusts for itself at start-up
 * (see rlimits.h): the open-files limit, and the scheduling weight of the
 * storage threads.
 *
 * Why: every agent is one connection, i.e. one file descriptor; the usual
 * soft limit (1024) would refuse a fleet long before --max-connections, and
 * a raise of the soft limit to the hard one needs no privilege. The storage
 * thread is the latency-critical one (an ACK waits for its COMMIT): on a
 * busy host it was runnable but waiting for a CPU most of the time at
 * 10,000 agents (bench/RESULTS.md, fleet section), so an operator may
 * have it created with a lower nice value than the loop and HTTP threads
 * (--store-priority, off by default: a seccomp filter may forbid the call).
 *
 * Invariants:
 *   1. Nothing here fails start-up: a limit that cannot be raised is
 *      reported (the caller logs it) and the daemon runs with what it has.
 *   2. rlimits_nice_end MUST restore the calling thread's own nice value,
 *      so only threads created between begin and end get the boost (Linux
 *      threads inherit the creator's nice value at pthread_create).
 */
#include "config.h"

#include "rlimits.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int rlimits_raise_nofile(uint64_t want, uint64_t *soft, uint64_t *hard) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return -errno;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    struct rlimit n = rl;
    /* Above the hard limit only with CAP_SYS_RESOURCE; else up to it. */
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
      n.rlim_cur = n.rlim_max = want;
      if (setrlimit(RLIMIT_NOFILE, &n) != 0) {
        n = rl;
        n.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &n);
      }
    } else {
      n.rlim_cur = want;
      (void)setrlimit(RLIMIT_NOFILE, &n);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
      return -errno;
  }
  *soft = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
  *hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_max;
  return 0;
}

static pid_t self_tid(void) {
  return (pid_t)syscall(SYS_gettid);
}

int rlimits_nice_begin(int boost, int *saved) {
  *saved = 0;
  if (boost <= 0)
    return 0; /* no system call at all (a seccomp filter may forbid them) */
  errno = 0;
  int now = getpriority(PRIO_PROCESS, (id_t)self_tid());
  if (now == -1 && errno != 0)
    return -errno;
  *saved = now;
  int want = now - boost < -20 ? -20 : now - boost;
  if (setpriority(PRIO_PROCESS, (id_t)self_tid(), want) != 0)
    return -errno;
  return 0;
}

void rlimits_nice_end(int boost, int saved) {
  if (boost <= 0)
    return;
  /* Raising the nice value back never needs a privilege. */
  (void)setpriority(PRIO_PROCESS, (id_t)self_tid(), saved);
}

int rlimits_nice_of(long tid) {
  errno = 0;
  int v = getpriority(PRIO_PROCESS, (id_t)(tid ? tid : self_tid()));
  return v == -1 && errno != 0 ? -100 : v;
}
