/* b2_floor.c: B2's same-run floor and iperf3's CPU per byte (b2_floor.h).
 *
 * The receiver is a forked process, as gentraced and iperf3's server are,
 * so its CPU is measured the same way for all three: the whole process,
 * every thread, user and system time (wait4's rusage here). It reads with
 * plain blocking read() calls of 256 KiB, the size of gentraced's shared
 * read buffer, and does nothing a receiver could skip: no event loop, no
 * reassembly, no parse, no queue. It walks the frame headers only to CRC
 * what the daemon CRCs (the payloads; the headers are 5 bytes in 64 KiB).
 */
#include "config.h"

#include "b2_floor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "crc32c.h"
#include "frame.h"
#include "varint.h"

#define FLOOR_READ (256u << 10) /* gentraced's READ_BUF_SIZE */
/* The storing floor's fdatasync cadence: gentraced's store runs SQLite's
 * WAL with synchronous=NORMAL, which syncs only at a checkpoint, and
 * checkpoints when the WAL reaches STORE_WAL_TARGET (store_writer.h,
 * 64 MiB; wal_autocheckpoint is set to it). Commits themselves do not
 * sync, so neither does this floor between checkpoints. */
#define FLOOR_SYNC_BYTES (64u << 20)

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval a, struct timeval b) {
  return (double)(a.tv_sec + b.tv_sec) + (double)(a.tv_usec + b.tv_usec) / 1e6;
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The receiver's frame walk: where the next header byte or payload byte
 * goes, carried across reads. */
typedef struct walker {
  uint8_t hdr[GTP_FRAME_HEADER_SIZE];
  size_t hn;   /* header bytes held */
  size_t left; /* payload bytes of the current frame still to come */
  uint64_t frames, bytes;
  uint32_t crc;
} walker;

static void walk(walker *w, const uint8_t *p, size_t n) {
  w->bytes += n;
  while (n > 0) {
    if (w->left == 0) {
      size_t k = GTP_FRAME_HEADER_SIZE - w->hn;
      if (k > n)
        k = n;
      memcpy(w->hdr + w->hn, p, k);
      w->hn += k;
      p += k;
      n -= k;
      if (w->hn == GTP_FRAME_HEADER_SIZE) {
        w->left = gtp_get_u32le(w->hdr);
        w->hn = 0;
        w->frames++;
      }
      continue;
    }
    size_t k = w->left < n ? w->left : n;
    w->crc = gtp_crc32c(w->crc, p, k);
    w->left -= k;
    p += k;
    n -= k;
  }
}

/* What the child reports through its pipe. */
typedef struct floor_out {
  walker w;
  uint32_t syncs; /* fdatasync calls (B2_FLOOR_STORE) */
  double sync_s;  /* wall seconds spent in them */
  double read_s;  /* CPU seconds of the reading thread alone */
} floor_out;

/* The storing floor's syncer: fdatasync off the reading thread, as
 * gentraced's checkpoints run on its store thread, not its loop. The
 * reader asks for a sync every FLOOR_SYNC_BYTES and waits only when the
 * previous one is still running (a disk slower than the wire). */
typedef struct syncer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fd;
  uint32_t asked, done; /* syncs requested and finished */
  int stop, failed;
  double sync_s;
} syncer;

static void *syncer_main(void *arg) {
  syncer *y = arg;
  pthread_mutex_lock(&y->mu);
  for (;;) {
    while (!y->stop && y->done == y->asked)
      pthread_cond_wait(&y->cv, &y->mu);
    if (y->done == y->asked)
      break; /* stop, nothing asked */
    pthread_mutex_unlock(&y->mu);
    double t = mono_s();
    int rc = fdatasync(y->fd);
    t = mono_s() - t;
    pthread_mutex_lock(&y->mu);
    y->sync_s += t;
    y->failed |= rc < 0;
    y->done++;
    pthread_cond_broadcast(&y->cv);
  }
  pthread_mutex_unlock(&y->mu);
  return NULL;
}

/* Asks for one more sync once the one before it has finished. */
static void syncer_ask(syncer *y) {
  pthread_mutex_lock(&y->mu);
  while (y->done != y->asked)
    pthread_cond_wait(&y->cv, &y->mu);
  y->asked++;
  pthread_cond_broadcast(&y->cv);
  pthread_mutex_unlock(&y->mu);
}

/* Appends p[0..n) to fd with write(2) calls of at most `chunk` bytes
 * (0: as few as the kernel takes), resuming short writes. 0 or -1. */
static int write_all(int fd, const uint8_t *p, size_t n, size_t chunk) {
  while (n > 0) {
    ssize_t w = write(fd, p, chunk > 0 && chunk < n ? chunk : n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The child: accepts one connection on ls, reads it to EOF, writes its
 * floor_out to out and exits. HOLD: room for every byte (len), never
 * reused; STORE: every read appended to the file `path` and synced every
 * FLOOR_SYNC_BYTES. */
static void receiver(int ls, int out, size_t len, b2_floor_mode mode,
                     const char *path) {
  int fd = accept(ls, NULL, NULL);
  if (fd < 0)
    _exit(3);
  int hold = mode == B2_FLOOR_HOLD;
  uint8_t *buf = malloc(hold ? len + FLOOR_READ : FLOOR_READ);
  if (buf == NULL)
    _exit(4);
  int lf = -1;
  syncer y = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  pthread_t th;
  if (mode == B2_FLOOR_STORE) {
    lf = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    y.fd = lf;
    if (lf < 0 || pthread_create(&th, NULL, syncer_main, &y) != 0)
      _exit(6);
  }
  /* BENCH_B2_FLOOR_WRITE=N: write(2) calls of N bytes at most, e.g.
   * 4096 for SQLite's one call per 4 KiB page (not the figure B2 prints
   * by default: that is the floor's, every read written whole). */
  const char *wenv = getenv("BENCH_B2_FLOOR_WRITE");
  size_t chunk = wenv != NULL ? (size_t)strtoul(wenv, NULL, 10) : 0;
  floor_out o;
  memset(&o, 0, sizeof o);
  size_t off = 0, unsynced = 0;
  for (;;) {
    ssize_t r = read(fd, buf + off, FLOOR_READ);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    walk(&o.w, buf + off, (size_t)r);
    if (hold && off + (size_t)r <= len)
      off += (size_t)r;
    if (lf >= 0) {
      if (write_all(lf, buf, (size_t)r, chunk) < 0)
        _exit(7);
      unsynced += (size_t)r;
      if (unsynced >= FLOOR_SYNC_BYTES) {
        syncer_ask(&y);
        unsynced -= FLOOR_SYNC_BYTES;
      }
    }
  }
  o.read_s = thread_cpu_s();
  if (lf >= 0) {
    /* The last sync asked for ends inside the window; the bytes since
     * wait for the next checkpoint, as they would in gentraced. */
    pthread_mutex_lock(&y.mu);
    y.stop = 1;
    pthread_cond_broadcast(&y.cv);
    pthread_mutex_unlock(&y.mu);
    pthread_join(th, NULL);
    if (y.failed)
      _exit(8);
    o.syncs = y.done;
    o.sync_s = y.sync_s;
  }
  ssize_t wr = write(out, &o, sizeof o);
  _exit(wr == (ssize_t)sizeof o ? 0 : 5);
}

/* What the sender's own walk of frames says the receiver must see. */
static void expect(const uint8_t *frames, size_t len, walker *w) {
  memset(w, 0, sizeof *w);
  walk(w, frames, len);
}

int b2_floor_run(const uint8_t *frames, size_t len, b2_floor_mode mode,
                 const char *dir, b2_floor_fig *fig) {
  memset(fig, 0, sizeof *fig);
  char path[512];
  snprintf(path, sizeof path, "%s/b2-floor.log", dir != NULL ? dir : ".");
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa;
  socklen_t sl = sizeof sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int pfd[2] = {-1, -1};
  if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 ||
      listen(ls, 1) < 0 || getsockname(ls, (struct sockaddr *)&sa, &sl) < 0 ||
      pipe(pfd) < 0) {
    fprintf(stderr, "bench: floor: no loopback socket: %s\n", strerror(errno));
    goto fail_sock;
  }
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "bench: floor: fork: %s\n", strerror(errno));
    goto fail_sock;
  }
  if (pid == 0) {
    close(pfd[0]);
    receiver(ls, pfd[1], len, mode, path);
  }
  close(pfd[1]);
  pfd[1] = -1;
  gtc c;
  if (gtc_connect(&c, ntohs(sa.sin_port)) < 0) {
    fprintf(stderr, "bench: floor: cannot connect\n");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    goto fail_sock;
  }
  double t0 = mono_s(), me0 = thread_cpu_s();
  int src = gtc_send_raw(&c, frames, len);
  fig->send_cpu_s = thread_cpu_s() - me0;
  gtc_close(&c); /* EOF: the receiver finishes */
  int st = 0;
  struct rusage ru;
  pid_t w = wait4(pid, &st, 0, &ru);
  fig->wall_s = mono_s() - t0;
  floor_out got;
  walker want;
  ssize_t rd = read(pfd[0], &got, sizeof got);
  close(pfd[0]);
  close(ls);
  if (mode == B2_FLOOR_STORE)
    unlink(path); /* its dirty pages go with it, not into the next run */
  if (src < 0 || w != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
      rd != (ssize_t)sizeof got) {
    fprintf(stderr, "bench: floor: send %d, receiver status %d\n", src, st);
    return -1;
  }
  expect(frames, len, &want);
  if (got.w.bytes != want.bytes || got.w.frames != want.frames ||
      got.w.crc != want.crc) {
    fprintf(stderr,
            "bench: floor: received %llu bytes %llu frames, sent "
            "%llu bytes %llu frames (or a CRC differs)\n",
            (unsigned long long)got.w.bytes, (unsigned long long)got.w.frames,
            (unsigned long long)want.bytes, (unsigned long long)want.frames);
    return -1;
  }
  fig->bytes = (double)len;
  fig->recv_cpu_s = tv_s(ru.ru_utime, ru.ru_stime);
  fig->frames = got.w.frames;
  fig->crc = got.w.crc;
  fig->syncs = got.syncs;
  fig->sync_s = got.sync_s;
  fig->read_cpu_s = got.read_s;
  return 0;

fail_sock:
  if (pfd[0] >= 0)
    close(pfd[0]);
  if (pfd[1] >= 0)
    close(pfd[1]);
  if (ls >= 0)
    close(ls);
  return -1;
}

/* The number after "key": in s at or after from; -1 if absent. */
static double json_num(const char *s, const char *from, const char *key) {
  const char *p = from != NULL ? strstr(s, from) : s;
  if (p == NULL || (p = strstr(p, key)) == NULL)
    return -1;
  p += strlen(key);
  while (*p == '"' || *p == ':' || *p == ' ' || *p == '\t')
    p++;
  char *end;
  double v = strtod(p, &end);
  return end == p ? -1 : v;
}

/* Runs the client once: the JSON report into out (NUL-terminated). */
static int iperf3_client(int port, int secs, char *out, size_t cap) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "iperf3 -c 127.0.0.1 -p %d -t %d -J 2>/dev/null",
           port, secs);
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return -1;
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  pclose(f);
  return 0;
}

int b2_floor_iperf3(int secs, double *bps, double *send_cpu_s_gb,
                    double *recv_cpu_s_gb) {
  *bps = *send_cpu_s_gb = *recv_cpu_s_gb = -1;
  int port = 20000 + (int)(getpid() % 20000);
  pid_t srv = fork();
  if (srv < 0)
    return -1;
  if (srv == 0) {
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    if (freopen("/dev/null", "w", stdout) == NULL)
      _exit(127);
    execlp("iperf3", "iperf3", "-s", "-1", "-p", p, "-B", "127.0.0.1",
           (char *)NULL);
    _exit(127);
  }
  size_t cap = 1u << 20;
  char *js = malloc(cap);
  for (int attempt = 0; js != NULL && attempt < 50 && *bps < 0; attempt++) {
    if (iperf3_client(port, secs, js, cap) < 0)
      break;
    /* The end section: bytes and seconds at the receiver, and both
     * ends' CPU in percent of the test's wall time. */
    double bytes = json_num(js, "\"sum_received\"", "\"bytes\"");
    double s = json_num(js, "\"sum_received\"", "\"seconds\"");
    double host = json_num(js, "\"cpu_utilization_percent\"", "\"host_total\"");
    double remote =
        json_num(js, "\"cpu_utilization_percent\"", "\"remote_total\"");
    if (bytes > 0 && s > 0) {
      *bps = bytes / s;
      if (host >= 0)
        *send_cpu_s_gb = host / 100 * s / (bytes / 1e9);
      if (remote >= 0)
        *recv_cpu_s_gb = remote / 100 * s / (bytes / 1e9);
    } else {
      struct timespec ts = {0, 100000000};
      nanosleep(&ts, NULL); /* the server is not up yet: retry */
    }
  }
  free(js);
  kill(srv, SIGTERM);
  waitpid(srv, NULL, 0);
  return *bps > 0 ? 0 : -1;
}

int b2_floor_roles(pid_t pid, double cpu_s[B2_ROLES]) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  for (int i = 0; i < B2_ROLES; i++)
    cpu_s[i] = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char name[32] = "", p2[128];
    unsigned long long ns = 0;
    snprintf(p2, sizeof p2, "/proc/%d/task/%.16s/comm", (int)pid, e->d_name);
    FILE *f = fopen(p2, "r");
    if (f != NULL) {
      if (fscanf(f, "%31s", name) != 1)
        name[0] = '\0';
      fclose(f);
    }
    snprintf(p2, sizeof p2, "/proc/%d/task/%.16s/schedstat", (int)pid,
             e->d_name);
    if ((f = fopen(p2, "r")) != NULL) {
      if (fscanf(f, "%llu", &ns) != 1)
        ns = 0;
      fclose(f);
    }
    int role = atoi(e->d_name) == (int)pid       ? B2_ROLE_LOOP
               : strcmp(name, "gt-genpool") == 0 ? B2_ROLE_FILLER
               : strncmp(name, "MHD", 3) == 0    ? -1
                                                 : B2_ROLE_STORE;
    if (role >= 0)
      cpu_s[role] += (double)ns / 1e9;
  }
  closedir(d);
  return 0;
}
