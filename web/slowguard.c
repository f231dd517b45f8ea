/* slowguard.c: cuts HTTP clients that take too long to send a request.
 *
 * libmicrohttpd's connection timeout counts idle time only, so a client that
 * trickles its request headers a byte at a time (slowloris) keeps a
 * connection, and with it one of the per-IP slots, forever. The guard gives
 * every connection a deadline for each request's headers: from the moment
 * the connection opens (or its previous response completed) until web.c's
 * handler first sees the request. A watchdog thread shuts the socket down
 * when the deadline passes; libmicrohttpd then sees end of input and closes
 * the connection itself, so its own state stays consistent.
 *
 * Owns: the tracker of every open connection (a doubly linked list) and the
 * watchdog thread.
 *
 * Invariants:
 *  1. A tracker MUST stay in the list until libmicrohttpd reports the
 *     connection closed (slowguard_conn_closed), and the watchdog MUST call
 *     shutdown() only under `lock`; libmicrohttpd closes the descriptor only
 *     after that notification, so the fd the watchdog shuts down can never
 *     belong to a newer connection.
 *  2. A connection inside a request (headers received, answer not yet
 *     completed: long polls, downloads) MUST NOT be cut by the guard,
 *     except past a send deadline its download set (slowguard_send_by):
 *     a client that reads, but too slowly, is never idle, so
 *     libmicrohttpd's idle timeout alone would let it hold a download
 *     forever.
 *  3. shutdown() is called at most once per tracker (`cut`), so a connection
 *     is counted once.
 */
#include "config.h"

#include "slowguard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "check.h"

struct slowguard_conn {
  /* Written once at start. */
  int fd;
  /* Protected by the guard's lock. */
  struct slowguard_conn *prev, *next;
  int cut;
  /* Written by the connection's thread, read by the watchdog. */
  atomic_int in_request;
  _Atomic int64_t phase_ns; /* when the wait for the next request began */
  _Atomic int64_t send_by_ns; /* a download's send deadline, 0 = none */
};

struct slowguard {
  int64_t deadline_ns; /* written once */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC; signalled at stop */
  /* Protected by lock. */
  struct slowguard_conn *head;
  int stop;
  atomic_uint_fast64_t cuts;
};

/* Lock held. 0, or -1 when the tracker list is not a well-formed doubly
 * linked list (invariant 1: every open connection's tracker is in it once),
 * -3 when a cut flag is neither 0 nor 1. */
static int guard_check_locked(const slowguard *g) {
  const slowguard_conn *prev = NULL;
  for (const slowguard_conn *c = g->head; c != NULL; c = c->next) {
    if (c->prev != prev)
      return -1;
    if (c->cut != 0 && c->cut != 1)
      return -3;
    prev = c;
  }
  return 0;
}

int slowguard_check_invariants(slowguard *g) {
  pthread_mutex_lock(&g->lock);
  int rc = guard_check_locked(g);
  pthread_mutex_unlock(&g->lock);
  return rc;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *watchdog(void *arg) {
  slowguard *g = arg;
  /* Checking four times per deadline keeps the overshoot under 25 %. */
  int64_t step = g->deadline_ns / 4;
  if (step < 50000000)
    step = 50000000;
  if (step > 1000000000)
    step = 1000000000;
  pthread_mutex_lock(&g->lock);
  while (!g->stop) {
    int64_t now = mono_ns();
    for (slowguard_conn *c = g->head; c != NULL; c = c->next) {
      if (c->cut)
        continue;
      if (atomic_load(&c->in_request)) {
        int64_t by = atomic_load(&c->send_by_ns);
        if (by != 0 && now > by) {
          c->cut = 1;
          shutdown(c->fd, SHUT_RDWR);
        }
        continue;
      }
      if (now - atomic_load(&c->phase_ns) > g->deadline_ns) {
        c->cut = 1;
        shutdown(c->fd, SHUT_RDWR);
        atomic_fetch_add(&g->cuts, 1);
      }
    }
    int64_t until = now + step;
    struct timespec ts = {(time_t)(until / 1000000000),
                          (long)(until % 1000000000)};
    while (!g->stop &&
           pthread_cond_timedwait(&g->cond, &g->lock, &ts) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&g->lock);
  return NULL;
}

int slowguard_new(int64_t deadline_ns, slowguard **out) {
  slowguard *g = calloc(1, sizeof *g);
  if (g == NULL)
    return -ENOMEM;
  g->deadline_ns = deadline_ns > 0 ? deadline_ns : 30 * INT64_C(1000000000);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&g->lock, NULL);
  int rc = pthread_create(&g->thread, NULL, watchdog, g);
  if (rc != 0) {
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
    return -rc;
  }
  *out = g;
  return 0;
}

void slowguard_free(slowguard *g) {
  if (g == NULL)
    return;
  pthread_mutex_lock(&g->lock);
  g->stop = 1;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
  pthread_join(g->thread, NULL);
  /* libmicrohttpd has reported every connection closed by now (web_stop
   * stops it first); free whatever it did not, to be safe. */
  for (slowguard_conn *c = g->head, *n; c != NULL; c = n) {
    n = c->next;
    free(c);
  }
  pthread_cond_destroy(&g->cond);
  pthread_mutex_destroy(&g->lock);
  free(g);
}

slowguard_conn *slowguard_conn_started(slowguard *g, int fd) {
  slowguard_conn *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL; /* unguarded; the idle timeout still applies */
  c->fd = fd;
  atomic_store(&c->phase_ns, mono_ns());
  pthread_mutex_lock(&g->lock);
  c->next = g->head;
  if (g->head)
    g->head->prev = c;
  g->head = c;
  GTP_ASSERT(guard_check_locked(g) == 0);
  pthread_mutex_unlock(&g->lock);
  return c;
}

void slowguard_conn_closed(slowguard *g, slowguard_conn *c) {
  if (c == NULL)
    return;
  pthread_mutex_lock(&g->lock);
  if (c->prev)
    c->prev->next = c->next;
  else
    g->head = c->next;
  if (c->next)
    c->next->prev = c->prev;
  GTP_ASSERT(guard_check_locked(g) == 0);
  pthread_mutex_unlock(&g->lock);
  free(c);
}

void slowguard_request_began(slowguard_conn *c) {
  if (c) {
    atomic_store(&c->send_by_ns, 0);
    atomic_store(&c->in_request, 1);
  }
}

void slowguard_send_by(slowguard_conn *c, int64_t deadline_ns) {
  if (c)
    atomic_store(&c->send_by_ns, deadline_ns);
}

int64_t slowguard_now_ns(void) {
  return mono_ns();
}

void slowguard_request_done(slowguard_conn *c) {
  if (c == NULL)
    return;
  atomic_store(&c->send_by_ns, 0);
  atomic_store(&c->phase_ns, mono_ns());
  atomic_store(&c->in_request, 0);
}

uint64_t slowguard_cuts(slowguard *g) {
  return g ? (uint64_t)atomic_load(&g->cuts) : 0;
}
