/* failalloc.h: a test allocator that fails the Nth allocation, for walking
 * every allocation failure of a setup path (SQLite's fault-injection loop).
 *
 * Link the test with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,
 *   --wrap=strndup,--wrap=free
 * so every allocation made by the project's own objects goes through the
 * counters here (allocations inside shared libraries, libc's own and
 * SQLite's, are not counted).
 *
 * fa_walk runs an operation for N = 1, 2, ... with the Nth allocation
 * failing, until a run completes without reaching its Nth allocation (every
 * failure point visited). Each run must fail cleanly or succeed, and must
 * free everything: fa_walk keeps the set of blocks the project's code
 * allocated during each run (free is wrapped too) and reports any left
 * after it; what libc or SQLite allocate for us (asprintf, sqlite3_*) is
 * not in that set, and LeakSanitizer checks it in the ASan build.
 * FA_TRACE=1 in the environment prints where each failure lands (a
 * backtrace on stderr).
 */
#ifndef FAILALLOC_H
#define FAILALLOC_H

#include <stddef.h>

/* One run: 0 on success, or the negative code of a clean failure, with a
 * human message in *why (static or NULL), or a positive value when it saw
 * a wrong result (a broken promise: fa_walk reports it as a bad code).
 * Must free all it allocated. */
typedef int (*fa_op)(void *ctx, const char **why);

/* Fails the nth allocation from now (1-based); 0 disarms. */
void fa_arm(long nth);
/* Counts one allocation; 1 if it is the one to fail. For allocators the
 * wrap cannot reach (SQLite's, through sqlite3_config). */
int fa_should_fail(void);
/* Stops counting towards the armed allocation, keeping fa_fired; returns
 * how many allocations were still to come before it (0: none armed, or it
 * failed already). With fa_resume, an operation keeps its own set-up and
 * tear-down out of the walk: n = fa_pause(); set up; fa_resume(n); ... */
long fa_pause(void);
/* Arms the nth allocation from now (0: none), keeping fa_fired. */
void fa_resume(long nth);
/* on = 1: the calling thread's allocations are not counted and never fail
 * (a test's own client beside the threads under test); they are still in
 * the live set. */
void fa_exempt(int on);
/* 1 once the armed allocation was failed. */
int fa_fired(void);
/* Allocations seen since the last fa_arm. */
long fa_seen(void);

/* SQLite allocates through its own methods, out of the wrap's reach:
 * fa_sqlite_hook (before any other SQLite call) routes them through the
 * same counter, so a walk fails SQLite's allocations too while
 * fa_sqlite_walk is on (on: the initial setting). */
void fa_sqlite_hook(int on);
void fa_sqlite_walk(int on);

/* The walks' scratch files. fa_scratch_dir makes dir = a fresh directory
 * named after prefix, on tmpfs when there is one (thousands of database
 * files are created and synced, and a walk is about memory, not disks);
 * 0 or -1. fa_unlink_db removes an SQLite database with its -wal and -shm
 * files. */
int fa_scratch_dir(char *dir, size_t cap, const char *prefix);
void fa_unlink_db(const char *path);

typedef struct fa_report {
  long runs;     /* operations run (failure points + the clean run) */
  long failures; /* runs in which the injected failure fired */
  long leaks;    /* runs after which memory was left allocated */
  int bad_rc;    /* a run that failed without a negative code, or 0 */
} fa_report;

/* Walks op over every allocation failure, at most max runs. Returns 0 when
 * every run failed cleanly or succeeded and nothing leaked; fills *rep. */
int fa_walk(const char *name, fa_op op, void *ctx, long max, fa_report *rep);
/* The same over N = 1, 1 + step, 1 + 2 step, ...: a sample of a walk too
 * long to run whole in `make check`. */
int fa_walk_step(const char *name, fa_op op, void *ctx, long max, long step,
                 fa_report *rep);

#endif
