/* gentrace-demo: a fake multi-threaded web service traced with libgentrace.
 *
 * Worker threads take "requests" from a queue fed by an acceptor thread and
 * handle each with nested regions (parse, auth, db, render), an async task
 * that a background "mailer" thread finishes, logs, counters (queue depth,
 * latency) and occasional errors. Configure the agent with GENTRACE_*.
 *
 *   gentrace-demo [--duration SEC] [--threads N] [--rate REQ_PER_SEC] [--quiet]
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gentrace.h"

#define QCAP 1024

/* Set by the signal handler and main, read by every thread: an atomic (a
 * lock-free atomic_int is async-signal-safe), not a volatile, which is a
 * data race between threads. */
static atomic_int stop_flag;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static uint64_t queue[QCAP];
static size_t qhead, qlen;
static uint64_t mail[QCAP];
static size_t mhead, mlen;
static pthread_mutex_t mlock = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static void spin_us(unsigned us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do
    clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void handle(uint64_t req, unsigned *seed) {
  static const char *routes[] = {"/index.html", "/api/users", "/api/orders",
                                 "/static/app.js"};
  const char *route = routes[rand_r(seed) % 4];
  uint64_t t0 = now_us();
  GT_SCOPE("request");
  {
    GT_SCOPE("parse");
    spin_us(5 + rand_r(seed) % 20);
  }
  {
    GT_SCOPE("auth");
    spin_us(10 + rand_r(seed) % 30);
    if (rand_r(seed) % 200 == 0) {
      gt_log("auth", "token expired; refusing request");
      gt_instant("error");
      return;
    }
  }
  {
    GT_SCOPE("db");
    int queries = 1 + rand_r(seed) % 3;
    for (int i = 0; i < queries; i++) {
      GT_SCOPE("db.query");
      spin_us(20 + rand_r(seed) % 80);
    }
  }
  {
    GT_SCOPE("render");
    spin_us(10 + rand_r(seed) % 40);
  }
  uint64_t task = gt_task_begin("send_receipt", 0);
  pthread_mutex_lock(&mlock);
  if (mlen < QCAP) {
    mail[(mhead + mlen++) % QCAP] = task;
    task = 0;
  }
  pthread_mutex_unlock(&mlock);
  if (task)
    gt_task_end(task); /* mailer full: give up on the receipt */
  char line[128];
  snprintf(line, sizeof line, "GET %s 200 req=%llu", route,
           (unsigned long long)req);
  gt_log("http", line);
  gt_counter("latency_us", (int64_t)(now_us() - t0));
}

static void *worker(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "worker-%d", (int)(intptr_t)arg);
  gt_thread_name(name);
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
  for (;;) {
    pthread_mutex_lock(&qlock);
    while (qlen == 0 && !stop_flag)
      pthread_cond_wait(&qcond, &qlock);
    if (stop_flag) {
      pthread_mutex_unlock(&qlock);
      break;
    }
    uint64_t req = queue[qhead];
    qhead = (qhead + 1) % QCAP;
    qlen--;
    pthread_mutex_unlock(&qlock);
    handle(req, &seed);
  }
  return NULL;
}

static void *mailer(void *arg) {
  (void)arg;
  gt_thread_name("mailer");
  while (!stop_flag) {
    uint64_t task = 0;
    pthread_mutex_lock(&mlock);
    if (mlen > 0) {
      task = mail[mhead];
      mhead = (mhead + 1) % QCAP;
      mlen--;
    }
    pthread_mutex_unlock(&mlock);
    if (task) {
      GT_SCOPE("smtp.send");
      spin_us(30);
      gt_task_end(task);
    } else {
      usleep(1000);
    }
  }
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f, "usage: gentrace-demo [--duration SEC] [--threads N] "
             "[--rate REQ_PER_SEC] [--quiet]\n"
             "A fake multi-threaded web service traced with libgentrace.\n"
             "The agent is configured from GENTRACE_* (GENTRACE_ADDR, default "
             "127.0.0.1:7170).\nRuns until SIGINT/SIGTERM or --duration; "
             "prints its gt_stats once a second unless --quiet.\n");
}

int main(int argc, char **argv) {
  double duration = 0;
  int threads = 4, quiet = 0;
  long rate = 2000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--quiet")) {
      quiet = 1;
    } else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
      duration = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--rate") && i + 1 < argc) {
      rate = atol(argv[++i]);
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || rate < 1) {
    usage(stderr);
    return 2;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  if (getenv("GENTRACE_SERVICE") == NULL)
    setenv("GENTRACE_SERVICE", "gentrace-demo", 0);
  int rc = gt_start(NULL);
  if (rc != 0) {
    fprintf(stderr, "gentrace-demo: gt_start: %s\n", strerror(-rc));
    return 1;
  }
  gt_thread_name("acceptor");
  pthread_t th[65];
  for (int i = 0; i < threads; i++)
    pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
  pthread_create(&th[threads], NULL, mailer, NULL);
  uint64_t start = now_us(), next_print = start + 1000000, req = 0;
  uint64_t interval = 1000000 / (uint64_t)rate;
  while (!stop_flag) {
    uint64_t now = now_us();
    if (duration > 0 && now - start >= (uint64_t)(duration * 1e6))
      break;
    pthread_mutex_lock(&qlock);
    if (qlen < QCAP) {
      queue[(qhead + qlen++) % QCAP] = ++req;
      pthread_cond_signal(&qcond);
    }
    size_t depth = qlen;
    pthread_mutex_unlock(&qlock);
    gt_counter("queue_depth", (int64_t)depth);
    if (!quiet && now >= next_print) {
      gt_stats_t st;
      gt_stats(&st);
      printf("requests=%llu events=%llu dropped=%llu delivered=%llu "
             "gens sealed=%llu acked=%llu evicted=%llu conn=%d "
             "mem=%llu\n",
             (unsigned long long)req, (unsigned long long)st.events_written,
             (unsigned long long)st.events_dropped,
             (unsigned long long)st.events_delivered,
             (unsigned long long)st.gens_sealed,
             (unsigned long long)st.gens_acked,
             (unsigned long long)st.gens_evicted, st.conn_state,
             (unsigned long long)st.mem_in_use);
      fflush(stdout);
      next_print += 1000000;
    }
    usleep((useconds_t)interval);
  }
  stop_flag = 1;
  pthread_mutex_lock(&qlock);
  pthread_cond_broadcast(&qcond);
  pthread_mutex_unlock(&qlock);
  for (int i = 0; i <= threads; i++)
    pthread_join(th[i], NULL);
  gt_stop();
  if (!quiet) {
    /* The session's final counters (tests check them against the store). */
    gt_stats_t st;
    gt_stats(&st);
    printf("final events=%llu dropped=%llu delivered=%llu evicted=%llu "
           "rejected=%llu pending=%llu auth_refused=%llu tls_failures=%llu\n",
           (unsigned long long)st.events_written,
           (unsigned long long)st.events_dropped,
           (unsigned long long)st.events_delivered,
           (unsigned long long)st.events_evicted,
           (unsigned long long)st.events_rejected,
           (unsigned long long)st.events_pending,
           (unsigned long long)st.auth_refused,
           (unsigned long long)st.tls_failures);
  }
  return 0;
}
