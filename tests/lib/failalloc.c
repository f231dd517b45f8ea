/* failalloc.c: see failalloc.h. */
#include "config.h"

#include "failalloc.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void __wrap_free(void *p);

/* Relaxed: the agent allocates from its own thread too; a count, nothing
 * else is ordered by it. */
static atomic_long fail_at, seen;
static atomic_int fired;
/* A thread whose allocations are neither counted nor failed (fa_exempt). */
static _Thread_local int exempt;

/* The live set: every block the project's code allocated during a run and
 * has not freed yet (open addressing, linear probing, tombstones). Blocks
 * allocated elsewhere (libc's asprintf, SQLite) are not in it, so freeing
 * them is ignored here: LeakSanitizer covers those in the ASan build. */
#define LIVE_SLOTS (1u << 16)
#define TOMB ((void *)1)
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static void *live[LIVE_SLOTS];
static long nlive;
static int live_overflow;

static size_t slot_of(void *p) {
  uintptr_t k = (uintptr_t)p;
  return (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull >> 48) & (LIVE_SLOTS - 1);
}

static void live_add(void *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&live_lock);
  if (nlive >= (long)(LIVE_SLOTS / 2)) {
    live_overflow = 1;
  } else {
    size_t i = slot_of(p);
    while (live[i] != NULL && live[i] != TOMB)
      i = (i + 1) & (LIVE_SLOTS - 1);
    live[i] = p;
    nlive++;
  }
  pthread_mutex_unlock(&live_lock);
}

static void live_del(void *p) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&live_lock);
  for (size_t i = slot_of(p), k = 0; live[i] != NULL && k < LIVE_SLOTS;
       i = (i + 1) & (LIVE_SLOTS - 1), k++)
    if (live[i] == p) {
      live[i] = TOMB;
      nlive--;
      break;
    }
  pthread_mutex_unlock(&live_lock);
}

static void live_clear(void) {
  pthread_mutex_lock(&live_lock);
  memset(live, 0, sizeof live);
  nlive = 0;
  live_overflow = 0;
  pthread_mutex_unlock(&live_lock);
}

int fa_should_fail(void) {
  if (exempt)
    return 0;
  long at = atomic_load_explicit(&fail_at, memory_order_relaxed);
  long n = atomic_fetch_add_explicit(&seen, 1, memory_order_relaxed) + 1;
  if (at > 0 && n == at) {
    atomic_store_explicit(&fired, 1, memory_order_relaxed);
    if (getenv("FA_TRACE") != NULL) { /* where each failure lands */
      void *pc[12];
      fprintf(stderr, "failalloc: allocation %ld fails here:\n", n);
      backtrace_symbols_fd(pc, backtrace(pc, 12), 2);
    }
    return 1;
  }
  return 0;
}

static sqlite3_mem_methods sqlite_real;
static atomic_int sqlite_walk;

static void *sqlite_fa_malloc(int n) {
  return atomic_load_explicit(&sqlite_walk, memory_order_relaxed) &&
                 fa_should_fail()
             ? NULL
             : sqlite_real.xMalloc(n);
}

static void *sqlite_fa_realloc(void *p, int n) {
  return atomic_load_explicit(&sqlite_walk, memory_order_relaxed) &&
                 fa_should_fail()
             ? NULL
             : sqlite_real.xRealloc(p, n);
}

void fa_sqlite_hook(int on) {
  atomic_store(&sqlite_walk, on);
  sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_real);
  sqlite3_mem_methods m = sqlite_real;
  m.xMalloc = sqlite_fa_malloc;
  m.xRealloc = sqlite_fa_realloc;
  sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
}

void fa_sqlite_walk(int on) {
  atomic_store(&sqlite_walk, on);
}

int fa_scratch_dir(char *dir, size_t cap, const char *prefix) {
  snprintf(dir, cap, "%s/%s-XXXXXX",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", prefix);
  return mkdtemp(dir) != NULL ? 0 : -1;
}

void fa_unlink_db(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s-wal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", path);
  unlink(p);
  unlink(path);
}

void *__wrap_malloc(size_t n) {
  void *p = fa_should_fail() ? NULL : __real_malloc(n);
  live_add(p);
  return p;
}

void *__wrap_calloc(size_t n, size_t size) {
  void *p = fa_should_fail() ? NULL : __real_calloc(n, size);
  live_add(p);
  return p;
}

void *__wrap_realloc(void *old, size_t n) {
  if (fa_should_fail())
    return NULL; /* old stays allocated, as realloc promises */
  void *p = __real_realloc(old, n);
  if (p != NULL) {
    live_del(old);
    live_add(p);
  }
  return p;
}

char *__wrap_strdup(const char *s) {
  char *p = fa_should_fail() ? NULL : __real_strdup(s);
  live_add(p);
  return p;
}

char *__wrap_strndup(const char *s, size_t n) {
  char *p = fa_should_fail() ? NULL : __real_strndup(s, n);
  live_add(p);
  return p;
}

void __wrap_free(void *p) {
  live_del(p);
  __real_free(p);
}

void fa_arm(long nth) {
  atomic_store(&fired, 0);
  atomic_store(&seen, 0);
  atomic_store(&fail_at, nth);
}

long fa_pause(void) {
  long at = atomic_exchange(&fail_at, 0);
  long n = atomic_load(&seen);
  return at > n ? at - n : 0;
}

void fa_resume(long nth) {
  atomic_store(&seen, 0);
  atomic_store(&fail_at, nth);
}

void fa_exempt(int on) {
  exempt = on;
}

int fa_fired(void) {
  return atomic_load(&fired);
}

long fa_seen(void) {
  return atomic_load(&seen);
}

/* Blocks allocated since live_clear and not freed; -1 if too many to
 * track. */
static long live_count(void) {
  pthread_mutex_lock(&live_lock);
  long n = live_overflow ? -1 : nlive;
  pthread_mutex_unlock(&live_lock);
  return n;
}

int fa_walk(const char *name, fa_op op, void *ctx, long max, fa_report *rep) {
  return fa_walk_step(name, op, ctx, max, 1, rep);
}

int fa_walk_step(const char *name, fa_op op, void *ctx, long max, long step,
                 fa_report *rep) {
  memset(rep, 0, sizeof *rep);
  /* A clean run first: one-time allocations (libc's, SQLite's caches) are
   * made here, so they do not count as leaks of the runs below. */
  const char *why = NULL;
  fa_arm(0);
  int rc = op(ctx, &why);
  if (rc != 0) {
    fprintf(stderr, "%s: fails without injected failure: %d %s\n", name, rc,
            why ? why : "");
    rep->bad_rc = rc;
    return -1;
  }
  if (step < 1)
    step = 1;
  for (long n = 1; n <= max; n += step) {
    why = NULL;
    live_clear();
    fa_arm(n);
    rc = op(ctx, &why);
    int hit = fa_fired();
    fa_arm(0);
    long left = live_count();
    rep->runs++;
    if (hit)
      rep->failures++;
    if (left != 0) {
      rep->leaks++;
      fprintf(stderr, "%s: allocation %ld failing leaves %ld blocks (%s)\n",
              name, n, left, why ? why : "no message");
    }
    if (!hit) /* every allocation point was failed once: done */
      break;
    if (rc < 0 && why == NULL) {
      fprintf(stderr, "%s: allocation %ld failing gave %d without a message\n",
              name, n, rc);
      rep->bad_rc = rc;
    } else if (rc > 0) { /* the operation saw a wrong result */
      fprintf(stderr, "%s: allocation %ld failing gave a wrong result (%d)\n",
              name, n, rc);
      rep->bad_rc = rc;
    }
  }
  fprintf(stderr, "%s: %ld runs, %ld with a failed allocation, %ld leaking\n",
          name, rep->runs, rep->failures, rep->leaks);
  return rep->leaks == 0 && rep->bad_rc == 0 && !fa_fired() ? 0 : -1;
}
