/* bench_ingest: daemon benchmarks, printing BENCH lines.
 *
 *   bench_ingest b2 [MiB [N]]  B2: wire bytes received, validated and
 *                           queued for the store, vs iperf3 over loopback;
 *                           N > 1 spreads the MiB over N agent connections
 *                           sending at once (the bar is N = 1); with N = 1
 *                           the floor (b2_floor.h) beside it, same run
 *   bench_ingest b2tls [MiB]  B2 over TLS (--tls-cert/--tls-key, GnuTLS on
 *                           both ends) beside B2 in plain text, same run
 *                           (the goal: TLS costs at most 15%)
 *   bench_ingest s1 [N]     S1: N idle agent connections (default 10000):
 *                           RSS of gentraced, and a new agent's WELCOME time
 *
 * This process is the load generator; gentraced runs as its own process
 * (started here on 127.0.0.1 port 0 and stopped by PID). Never part of
 * `make check`; the figures never fail the build.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "b2_floor.h"
#include "bench_env.h"
#include "client.h"
#include "tls_client.h"
#include "tls_floor.h"
#include "varint.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int nfds(pid_t pid) {
  char cmd[96];
  snprintf(cmd, sizeof cmd, "ls /proc/%d/fd | wc -l", (int)pid);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &n) != 1)
      n = -1;
    pclose(f);
  }
  return n;
}

/* Frames of `mib` MiB of big generations (16 threads of log events) for
 * session `id`, prebuilt so sending costs only the socket. */
static void b2_frames(unsigned id, size_t mib, gtp_wbuf *frames, size_t *ngens,
                      size_t *per_gen) {
  gtf_spec s;
  gtf_spec_init(&s, id, 1);
  gtc_gen g;
  gtc_gen_build_random(&g, &s, 15, 1);
  *per_gen = g.body.len;
  *ngens = mib * (1u << 20) / *per_gen + 1;
  gtc_gen_fini(&g);
  gtp_wbuf_init(frames, (size_t)-1 >> 1);
  for (size_t i = 0; i < *ngens; i++) {
    /* Same bytes under every gen number would fail gtp_gen_parse (EVENTS
     * carry their gen), so each gen gets its own build. */
    gtc_gen gi;
    gtf_spec si = s;
    si.gen = i + 1;
    gtc_gen_build_random(&gi, &si, 15, (unsigned)i + id * 7919u);
    for (size_t r = 0; r < gi.nrec; r++)
      gtp_frame_batch_encode(frames, si.gen, gi.body.data + gi.off[r],
                             gi.off[r + 1] - gi.off[r]);
    gtp_gen_end e = gi.end;
    gtp_frame_gen_end_encode(frames, &e);
    gtc_gen_fini(&gi);
  }
}

typedef struct b2_conn {
  gtc c;
  gtp_wbuf frames;
  pthread_t th;
  int rc;
} b2_conn;

static void *b2_send(void *arg) {
  b2_conn *bc = arg;
  bc->rc = gtc_send_raw(&bc->c, bc->frames.data, bc->frames.len);
  return NULL;
}

/* CPU seconds of this process (the sending client and its polling). */
static double self_cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* gtd_metric, over HTTPS when the daemon serves TLS (pki != NULL). */
static int64_t metric_any(gtd *d, const char *pki, const char *name) {
  if (pki == NULL)
    return gtd_metric(d, name);
  char ca[600];
  snprintf(ca, sizeof ca, "%s/ca.pem", pki);
  return gtd_metric_tls(d, ca, name);
}

/* Wraps c in TLS trusting pki/ca.pem, full records. 0 or -1. */
static int tls_wrap(gtc *c, const char *pki) {
  char ca[600];
  snprintf(ca, sizeof ca, "%s/ca.pem", pki);
  return gtc_tls_wrap(c, ca, 0, 0);
}

/* One B2 run's figures, for b2tls's same-run comparison. */
typedef struct b2_fig {
  double bytes;   /* payload (frame) bytes sent */
  double wall_s;  /* first byte sent to last frame handled */
  double cpu_s;   /* gentraced, every thread (schedstat) */
  double loop_s;  /* gentraced's loop thread */
  double me_s;    /* the sender (this process) */
  int cipher;     /* negotiated (TLS runs) */
  unsigned polls; /* /metrics polls inside the window */
} b2_fig;

/* GB/s two cores allow a receiver needing r CPU-s per GB (its most
 * loaded thread `serial`) and a sender needing s: every thread on a core
 * of its own, and the two cores' sum. */
static double b2_cap(double r, double s, double serial) {
  double m = serial > s ? serial : s;
  double cap = m > 0 ? 1 / m : 0;
  if (r + s > 0 && 2 / (r + s) < cap)
    cap = 2 / (r + s);
  return cap;
}

/* B2's BENCH lines: gentraced against iperf3, and with one connection
 * the floor (b2_floor.h) beside both, in the same run, with every side's
 * CPU seconds per GB and what two cores allow at the goal. rate in bytes/s
 * over wall_s; cpu_s, role: gentraced, all threads and by role;
 * me_s: the sender. 0, or -1 when the floor failed (a floor that cannot
 * run is the code rotting; iperf3 missing is a baseline missing). */
static int b2_report(b2_conn *bc, unsigned conns, const char *dir, double rate,
                     double wall_s, double cpu_s, const double role[B2_ROLES],
                     double me_s) {
  double loop_s = role[B2_ROLE_LOOP];
  double bytes = rate * wall_s;
  b2_floor_fig fl = {0}, fh = {0}, fs = {0};
  const uint8_t *fp = bc[0].frames.data;
  size_t fn = bc[0].frames.len;
  if (conns == 1 && (b2_floor_run(fp, fn, B2_FLOOR_REUSE, dir, &fl) < 0 ||
                     b2_floor_run(fp, fn, B2_FLOOR_HOLD, dir, &fh) < 0 ||
                     b2_floor_run(fp, fn, B2_FLOOR_STORE, dir, &fs) < 0))
    return -1;
  double ip = 0, ip_send = 0, ip_recv = 0;
  if (b2_floor_iperf3(3, &ip, &ip_send, &ip_recv) < 0)
    fprintf(stderr, "bench: iperf3 did not run (installed? ./setup.sh "
                    "--bench installs it)\n");
  double ratio = ip > 0 ? rate / ip : 0;
  /* No iperf3: its figure reads "missing" (bench/quick says why). */
  char ipv[32] = "missing";
  if (ip > 0)
    snprintf(ipv, sizeof ipv, "%.1f", ip / 1e6);
  char unit[32] = "MB/s";
  if (conns > 1)
    snprintf(unit, sizeof unit, "MB/s(%uconns)", conns);
  fflush(stderr);
  printf("BENCH id=B2 value=%.1f unit=%s baseline=iperf3-loopback:%s "
         "ratio=%.2f bar=0.80 pass=%d\n",
         rate / 1e6, unit, ipv, ratio, ratio >= 0.8);
  if (conns == 1) {
    double fr = fl.bytes / fl.wall_s, hr = fh.bytes / fh.wall_s,
           sr = fs.bytes / fs.wall_s;
    printf("BENCH id=B2-floor value=%.1f unit=MB/s "
           "baseline=iperf3-loopback:%s ratio=%.2f bar=0.80 pass=%d\n",
           fr / 1e6, ipv, ip > 0 ? fr / ip : 0, ip > 0 && fr / ip >= 0.8);
    printf("BENCH id=B2-floor-hold value=%.1f unit=MB/s "
           "baseline=iperf3-loopback:%s ratio=%.2f bar=0.80 pass=%d\n",
           hr / 1e6, ipv, ip > 0 ? hr / ip : 0, ip > 0 && hr / ip >= 0.8);
    /* The steady state's floor: a receiver that stores every byte. */
    printf("BENCH id=B2-floor-store value=%.1f unit=MB/s "
           "baseline=iperf3-loopback:%s ratio=%.2f bar=0.80 pass=%d\n",
           sr / 1e6, ipv, ip > 0 ? sr / ip : 0, ip > 0 && sr / ip >= 0.8);
    /* At the goal gentraced must reach 0.8 of iperf3, i.e. this share of
     * what the floor reached in the same run. */
    double need = ip > 0 && fr > 0 ? 0.8 * ip / fr : 0;
    printf("BENCH id=B2-of-floor value=%.1f unit=MB/s baseline=B2-floor:%.1f "
           "ratio=%.2f bar=%.2f pass=%d\n",
           rate / 1e6, fr / 1e6, fr > 0 ? rate / fr : 0, need,
           need > 0 && rate / fr >= need);
    /* CPU seconds per GB, both ends of each. Two cores cap a pair whose
     * ends need r and s CPU-s per GB at 1/max(r, s) GB/s (each end on
     * its own core) and at 2/(r + s) (both cores busy); gentraced's loop
     * thread alone is serial, so it caps it at 1/loop. */
    double g = bytes / 1e9, gf = fl.bytes / 1e9, gh = fh.bytes / 1e9;
    double gr = cpu_s / g, gl = loop_s / g, gs = me_s / g;
    double flr = fl.recv_cpu_s / gf, fls = fl.send_cpu_s / gf;
    double fhr = fh.recv_cpu_s / gh, fhs = fh.send_cpu_s / gh;
    double gsf = fs.bytes / 1e9;
    double fsr = fs.recv_cpu_s / gsf, fss = fs.send_cpu_s / gsf,
           fsx = fs.read_cpu_s / gsf;
    double goal = 0.8 * ip / 1e9; /* GB/s */
    printf("BENCH id=B2-cpu value=%.3f unit=cpu-s/GB(receiver) "
           "baseline=B2-floor:%.3f ratio=%.2f bar=<=%.2f pass=%d\n",
           gr, flr, flr > 0 ? gr / flr : 0,
           flr > 0 && goal > 0 ? (2 / goal - gs) / flr : 0,
           goal > 0 && gr + gs <= 2 / goal && gl <= 1 / goal);
    double gfl = role[B2_ROLE_FILLER] / g, gst = role[B2_ROLE_STORE] / g;
    /* What gentraced's ingest does (loop and filler) against the floor
     * that, like it, holds every byte; the store's compressors apart. */
    printf("BENCH id=B2-ingest-cpu value=%.3f unit=cpu-s/GB(loop+filler) "
           "baseline=B2-floor-hold:%.3f ratio=%.2f bar=<=1.10 pass=%d\n",
           gl + gfl, fhr, fhr > 0 ? (gl + gfl) / fhr : 0,
           fhr > 0 && (gl + gfl) / fhr <= 1.10);
    printf("b2_floor: CPU-s per GB (receiver / sender): iperf3 %.3f / %.3f, "
           "floor %.3f / %.3f, floor holding every byte %.3f / %.3f, "
           "floor storing every byte %.3f (reading thread %.3f) / %.3f (%u "
           "fdatasync, %.3f s in them), gentraced %.3f (loop thread %.3f, "
           "buffer filler %.3f, store %.3f) / %.3f\n",
           ip_recv, ip_send, flr, fls, fhr, fhs, fsr, fsx, fss, fs.syncs,
           fs.sync_s, gr, gl, gfl, gst, gs);
    printf("b2_floor: the goal, 0.8 of iperf3, is %.2f GB/s: on two cores "
           "that allows %.3f CPU-s per GB for both ends together and %.3f "
           "for any one thread; two cores cap the floor at %.2f GB/s "
           "(measured %.2f), the floor holding every byte at %.2f "
           "(measured %.2f; %.2f were its work spread over both cores), "
           "the floor storing every byte (the steady state) at %.2f "
           "(measured %.2f; %.2f of iperf3; %.2f were its work spread over "
           "both cores), gentraced at %.2f (measured "
           "%.2f); load %.2f\n",
           goal, goal > 0 ? 2 / goal : 0, goal > 0 ? 1 / goal : 0,
           b2_cap(flr, fls, flr), fr / 1e9, b2_cap(fhr, fhs, fhr), hr / 1e9,
           b2_cap(fhr, fhs, 0), b2_cap(fsr, fss, fsx), sr / 1e9,
           ip > 0 ? b2_cap(fsr, fss, fsx) * 1e9 / ip : 0, b2_cap(fsr, fss, 0),
           b2_cap(gr, gs, gl), rate / 1e9, bench_load1());
  }
  fflush(stdout);
  return 0;
}

/* BENCH_B2_LIVE_STORE's steady state: waits (at most 120 s) until the
 * store has committed all ngens generations and prints gentraced's CPU
 * per GB from the window's start (t0, cpu0, role0) to the last commit,
 * by thread role, beside which b2_report prints the storing floor's. */
static void b2_live(gtd *d, size_t ngens, double bytes, double t0, double cpu0,
                    const double role0[B2_ROLES]) {
  int64_t got = 0;
  for (int i = 0; i < 12000; i++) {
    got = gtd_metric(d, "gentrace_generations_committed_total");
    if (got >= (int64_t)ngens)
      break;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  double t = now_s() - t0, cpu = tls_floor_proc_cpu_s(d->pid, NULL) - cpu0;
  double role[B2_ROLES] = {0};
  (void)b2_floor_roles(d->pid, role);
  double g = bytes / 1e9;
  printf("b2_floor: live store: %lld of %zu generations committed %.3f s "
         "after the first byte (%.1f MB/s); gentraced %.3f CPU-s per GB "
         "(loop thread %.3f, buffer filler %.3f, store and compressors "
         "%.3f)\n",
         (long long)got, ngens, t, bytes / t / 1e6, cpu / g,
         (role[B2_ROLE_LOOP] - role0[B2_ROLE_LOOP]) / g,
         (role[B2_ROLE_FILLER] - role0[B2_ROLE_FILLER]) / g,
         (role[B2_ROLE_STORE] - role0[B2_ROLE_STORE]) / g);
  fflush(stdout); /* before the floors fork */
}

/* B2 over `conns` agent connections at once (1: the B2 bar; more:
 * how the one loop does when agents arrive together), mib MiB in all.
 * With fig (b2tls) the figures go there, with no iperf3 run and no BENCH
 * line of its own. */
static int b2(size_t mib, unsigned conns, const char *pki, b2_fig *fig) {
  gtd d;
  /* B2 is the ingest path alone (received, validated, queued): the store
   * is held back (it sleeps before its first commit) so its SQLite work
   * does not share the two CPUs with the loop; C1 measures the store. */
  char cert[600], key[600];
  snprintf(cert, sizeof cert, "%s/srv.pem", pki ? pki : "");
  snprintf(key, sizeof key, "%s/srv.key", pki ? pki : "");
  /* BENCH_B2_LIVE_STORE: the store commits as it goes (buffers come back
   * to the pool), for a look at the steady state; not B2's figure. */
  const char *delay = getenv("BENCH_B2_LIVE_STORE") ? "0" : "600000";
  const char *args[] = {"--max-buffer",
                        "4G",
                        "--max-conn-buffer",
                        "4G",
                        "--test-store-delay-ms",
                        delay,
                        pki ? "--tls-cert" : NULL,
                        cert,
                        "--tls-key",
                        key,
                        NULL};
  if (conns < 1 || conns > 256 || mib < conns) {
    fprintf(stderr, "bench: b2 wants 1..256 connections and >= 1 MiB each\n");
    return 2;
  }
  if (gtd_init(&d) < 0)
    return 1;
  if (gtd_start(&d, args, NULL) < 0) {
    fprintf(stderr, "bench: gentraced did not start\n");
    return 1;
  }
  b2_conn *bc = calloc(conns, sizeof *bc);
  if (bc == NULL)
    return 1;
  size_t ngens = 0, per_gen = 0, total = 0;
  for (unsigned k = 0; k < conns; k++) {
    size_t ng;
    b2_frames(77 + k, mib / conns, &bc[k].frames, &ng, &per_gen);
    ngens += ng;
    total += bc[k].frames.len;
    gtf_spec s;
    gtf_spec_init(&s, 77 + k, 1);
    gtp_welcome w;
    if (gtc_connect(&bc[k].c, d.agent_port) < 0 ||
        (pki != NULL && tls_wrap(&bc[k].c, pki) < 0) ||
        gtc_hello(&bc[k].c, &s, NULL, &w) < 0) {
      fprintf(stderr, "bench: handshake %u failed\n", k);
      gtd_cleanup(&d);
      return 1;
    }
  }
  int64_t base = metric_any(&d, pki, "gentrace_bytes_received_total");
  int64_t frames0 =
      pki != NULL ? metric_any(&d, pki, "gentrace_frames_received_total") : 0;
  double loop0 = 0, loop1 = 0;
  double cpu0 = tls_floor_proc_cpu_s(d.pid, &loop0), me0 = self_cpu_s();
  double role0[B2_ROLES] = {0}, role1[B2_ROLES] = {0};
  (void)b2_floor_roles(d.pid, role0);
  unsigned polls = 0;
  double t0 = now_s();
  if (conns == 1) {
    b2_send(&bc[0]);
  } else {
    for (unsigned k = 0; k < conns; k++)
      if (pthread_create(&bc[k].th, NULL, b2_send, &bc[k]) != 0)
        b2_send(&bc[k]); /* no thread: send inline */
    for (unsigned k = 0; k < conns; k++)
      if (bc[k].th)
        pthread_join(bc[k].th, NULL);
  }
  for (unsigned k = 0; k < conns; k++)
    if (bc[k].rc < 0) {
      fprintf(stderr, "bench: send failed\n");
      gtd_cleanup(&d);
      return 1;
    }
  /* Done when every byte was received and every generation validated and
   * queued (frames counted after their handling). */
  int64_t want = base + (int64_t)total;
  const char *done_metric = "gentrace_bytes_received_total";
  if (pki != NULL) {
    /* Over TLS the bytes counted are ciphertext: wait for the frames. */
    int64_t nframes = 0;
    for (unsigned k = 0; k < conns; k++) {
      gtp_frame_decoder dec;
      gtp_frame_decoder_init(&dec, GTP_FRAME_MAX);
      const uint8_t *p = bc[k].frames.data;
      size_t n = bc[k].frames.len;
      while (n > 0) {
        size_t used = 0;
        gtp_frame f;
        int rc = gtp_frame_decoder_feed(&dec, p, n, &used, &f);
        if (rc < 0)
          break;
        p += used;
        n -= used;
        nframes += rc == 1;
      }
      gtp_frame_decoder_fini(&dec);
    }
    done_metric = "gentrace_frames_received_total";
    want = frames0 + nframes;
  }
  while (polls++, metric_any(&d, pki, done_metric) < want) {
    /* Poll gently: the daemon shares the CPUs with this process. */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  double t = now_s() - t0;
  double cpu = tls_floor_proc_cpu_s(d.pid, &loop1) - cpu0,
         me = self_cpu_s() - me0;
  (void)b2_floor_roles(d.pid, role1);
  for (int i = 0; i < B2_ROLES; i++)
    role1[i] -= role0[i];
  /* The store's compression threads work behind the loop: at the last
   * frame some of the window's compression is still to come, more of it
   * the faster the window went. b2tls compares plain and TLS windows of
   * different lengths, so it waits until the daemon's CPU settles (less
   * than 1 ms in 50 ms; at most 5 s) and counts all of it. */
  double settled = cpu;
  for (int i = 0; fig != NULL && i < 100; i++) {
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    double now = tls_floor_proc_cpu_s(d.pid, NULL) - cpu0;
    if (now - settled < 0.001) {
      settled = now;
      break;
    }
    settled = now;
  }

  /* How the generation buffers came: prepared off the loop thread, read
   * in place (staged frames), or made on the loop itself. */
  int64_t prepared =
      metric_any(&d, pki, "gentrace_ingest_buffer_prepared_used_total");
  int64_t staged = metric_any(&d, pki, "gentrace_ingest_staged_frames_total");
  double rate = (double)total / t;
  if (fig != NULL) {
    fig->bytes = (double)total;
    fig->wall_s = t;
    fig->cpu_s = settled;
    fig->loop_s = loop1 - loop0;
    fig->me_s = me;
    fig->cipher = pki != NULL ? gtc_tls_cipher(&bc[0].c) : 0;
    fig->polls = polls;
    fprintf(stderr,
            "bench: B2 %s %.0f MB in %.3f s (%.0f MB/s); gentraced %.3f CPU s "
            "at the last frame, %.3f settled (loop thread %.3f), sender "
            "%.3f; %u polls; %lld staged, %lld prepared\n",
            pki != NULL ? "TLS  " : "plain", total / 1e6, t, rate / 1e6, cpu,
            settled, loop1 - loop0, me, polls, (long long)staged,
            (long long)prepared);
    goto out;
  }
  if (getenv("BENCH_B2_LIVE_STORE") != NULL)
    b2_live(&d, ngens, (double)total, t0, cpu0, role0);
  if (b2_report(bc, conns, d.dir, rate, t, cpu, role1, me) < 0) {
    gtd_kill9(&d);
    gtd_cleanup(&d);
    return 1;
  }
  fprintf(stderr,
          "bench: B2 %zu generations of %zu bytes over %u connection(s), "
          "%.3f s; gentraced used %.3f CPU s (%.0f MB per CPU second), the "
          "sender (this process) %.3f; %lld generations in prepared buffers, "
          "%lld BATCH frames read in place\n",
          ngens, per_gen, conns, t, cpu,
          cpu > 0 ? (double)total / cpu / 1e6 : 0.0, me, (long long)prepared,
          (long long)staged);
out:
  for (unsigned k = 0; k < conns; k++) {
    gtc_tls_end(&bc[k].c);
    gtc_close(&bc[k].c);
    gtp_wbuf_fini(&bc[k].frames);
  }
  free(bc);
  /* BENCH_B2_BEFORE_KILL: a command run with the daemon's pid first, e.g.
   * `callgrind_control -d` when GENTRACED is a script starting gentraced
   * under callgrind (its counts are dumped on request, never on SIGKILL). */
  const char *hook = getenv("BENCH_B2_BEFORE_KILL");
  if (hook != NULL && *hook != '\0') {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s %d >&2", hook, (int)d.pid);
    if (system(cmd) != 0)
      fprintf(stderr, "bench: %s failed\n", cmd);
  }
  gtd_kill9(&d); /* a drain would wait for the held-back store */
  gtd_cleanup(&d);
  return 0;
}

static int s1(unsigned n) {
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < n + 64) {
    fprintf(stderr, "bench: ulimit -n %lu is below %u connections\n",
            (unsigned long)rl.rlim_cur, n);
    n = (unsigned)rl.rlim_cur - 64;
  }
  gtd d;
  const char *args[] = {"--idle-timeout", "10m", NULL};
  if (gtd_init(&d) < 0 || gtd_start(&d, args, NULL) < 0) {
    fprintf(stderr, "bench: gentraced did not start\n");
    return 1;
  }
  long rss0 = gtd_proc_kib(d.pid, "VmRSS");
  gtc *cs = calloc(n, sizeof *cs);
  unsigned ok = 0;
  for (unsigned i = 0; i < n; i++) {
    gtf_spec s;
    gtf_spec_init(&s, 1000 + i, 1);
    /* gtf_session ids repeat every 256; a repeat would replace a
     * connection instead of adding one. */
    gtp_put_u32le(s.session, i + 1);
    /* 10,000 agents are many hosts: at most 200 per loopback source
     * address, under --max-conns-per-ip (256). */
    char src[32];
    snprintf(src, sizeof src, "127.1.%u.%u", i / 200 / 250, 1 + i / 200 % 250);
    if (gtc_connect_from(&cs[i], src, d.agent_port) < 0)
      break;
    if (gtc_send_hello(&cs[i], &s, NULL, GTP_PROTO_VERSION, GTP_PROTO_VERSION) <
        0)
      break;
    ok++;
  }
  unsigned welcomed = 0;
  for (unsigned i = 0; i < ok; i++) {
    gtp_frame f;
    if (gtc_read_frame(&cs[i], &f, GTC_TIMEOUT_MS) == 1 &&
        f.type == GTP_FR_WELCOME)
      welcomed++;
    /* Free the decoder's partial buffer: only the daemon is measured. */
  }
  long rss = gtd_proc_kib(d.pid, "VmRSS");
  /* One more agent must still be served promptly. */
  gtc extra;
  gtf_spec s;
  gtf_spec_init(&s, 999, 1);
  gtp_welcome w;
  double t0 = now_s();
  int hrc = gtc_connect(&extra, d.agent_port);
  if (hrc == 0)
    hrc = gtc_hello(&extra, &s, NULL, &w);
  double welcome_ms = (now_s() - t0) * 1e3;
  fflush(stderr);
  printf("BENCH id=S1 value=%.1f unit=MiB baseline=limit:256 ratio=%.2f "
         "bar=1.00 pass=%d\n",
         (double)rss / 1024, (double)rss / 1024 / 256,
         welcomed >= 10000 && rss <= 256 * 1024 && hrc == 0);
  fprintf(stderr,
          "bench: S1 %u connections welcomed (of %u), RSS %ld KiB before, "
          "%ld KiB after (%.0f bytes/conn), new agent WELCOME in %.1f ms "
          "(rc %d); gentraced pid %d holds %d fds\n",
          welcomed, n, rss0, rss,
          welcomed ? (double)(rss - rss0) * 1024 / welcomed : 0, welcome_ms,
          hrc, (int)d.pid, nfds(d.pid));
  if (hrc == 0)
    gtc_close(&extra);
  for (unsigned i = 0; i < ok; i++)
    gtc_close(&cs[i]);
  free(cs);
  gtd_stop(&d);
  gtd_cleanup(&d);
  return 0;
}

#define TLS_ROUNDS_MAX 9

/* B2 over TLS beside B2 in plain text, same run: rounds alternate plain
 * and TLS (BENCH_TLS_ROUNDS, default 5), each figure is the median of its
 * rounds, the wall ratio the median of the rounds' ratios; beside them the
 * floor (tls_floor.h): this CPU's AEAD cost for the negotiated cipher,
 * measured between rounds, and the ratio a TLS with no overhead beyond
 * it would reach. */
static int b2tls(size_t mib) {
  int rounds = 5;
  const char *er = getenv("BENCH_TLS_ROUNDS");
  if (er != NULL && atoi(er) >= 1 && atoi(er) <= TLS_ROUNDS_MAX)
    rounds = atoi(er);
  char pki[] = "/tmp/gt-bench-tls-XXXXXX";
  if (mkdtemp(pki) == NULL || gtc_tls_pki(pki) < 0) {
    fprintf(stderr, "bench: cannot make certificates (certtool)\n");
    return 1;
  }
  double load0 = bench_load1();
  double wall_p[TLS_ROUNDS_MAX], wall_t[TLS_ROUNDS_MAX];
  tls_floor_round fl[TLS_ROUNDS_MAX];
  int cipher = 0;
  for (int i = 0; i < rounds; i++) {
    b2_fig p = {0}, t = {0};
    if (b2(mib, 1, NULL, &p) != 0 || b2(mib, 1, pki, &t) != 0)
      return 1;
    cipher = t.cipher;
    double enc, dec;
    if (tls_floor_aead(cipher, &enc, &dec) < 0) {
      fprintf(stderr, "bench: GnuTLS has no AEAD %d\n", cipher);
      return 1;
    }
    wall_p[i] = p.bytes / p.wall_s / 1e6;
    wall_t[i] = t.bytes / t.wall_s / 1e6;
    tls_floor_round *r = &fl[i];
    *r = (tls_floor_round){
        /* the daemon opens records, the load generator seals them */
        .srv_aead_ns = dec,
        .peer_aead_ns = enc,
        .wall_ratio = wall_t[i] / wall_p[i],
        .srv_plain_ns = p.cpu_s * 1e9 / p.bytes, /* ns per payload byte */
        .srv_tls_ns = t.cpu_s * 1e9 / t.bytes,
        .loop_plain_ns = p.loop_s * 1e9 / p.bytes,
        .loop_tls_ns = t.loop_s * 1e9 / t.bytes,
        .peer_plain_ns = p.me_s * 1e9 / p.bytes,
        .peer_tls_ns = t.me_s * 1e9 / t.bytes,
        .busy_plain = (p.cpu_s + p.me_s) / p.wall_s,
        .busy_tls = (t.cpu_s + t.me_s) / t.wall_s,
    };
    fprintf(stderr,
            "bench: round %d: plain %.0f TLS %.0f MB/s (ratio %.2f); "
            "gentraced %.3f / %.3f ns/B (loop %.3f / %.3f); sender %.3f / "
            "%.3f ns/B; AEAD enc %.3f dec %.3f ns/B; load %.2f\n",
            i + 1, wall_p[i], wall_t[i], r->wall_ratio, r->srv_plain_ns,
            r->srv_tls_ns, r->loop_plain_ns, r->loop_tls_ns, r->peer_plain_ns,
            r->peer_tls_ns, enc, dec, bench_load1());
  }
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", pki);
  if (system(rm) != 0)
    fprintf(stderr, "bench: could not remove %s\n", pki);
  double mp = tls_floor_median(wall_p, rounds),
         mt = tls_floor_median(wall_t, rounds);
  tls_floor_fig f;
  tls_floor_fig_of(&f, "B2-TLS", cipher, fl, rounds);
  double mr = f.wall_ratio, msp = f.srv_plain_ns, mst = f.srv_tls_ns;
  printf("BENCH id=B2-TLS value=%.1f unit=MB/s baseline=B2-plain:%.1f "
         "ratio=%.2f bar=0.85 pass=%d\n",
         mt, mp, mr, mr >= 0.85);
  /* The daemon's CPU per byte moves far less with the machine's load
   * than MB/s does (the client encrypts on the same CPUs). */
  double cratio = mst > 0 ? msp / mst : 0;
  printf("BENCH id=B2-TLS-cpu value=%.1f unit=MB/cpu-s(gentraced) "
         "baseline=B2-plain-cpu:%.1f ratio=%.2f bar=0.85 pass=%d\n",
         1e3 / mst, 1e3 / msp, cratio, cratio >= 0.85);
  tls_floor_print(&f);
  printf("tls_floor: B2-TLS %d rounds of %zu MiB, load average %.2f before, "
         "%.2f after\n",
         rounds, mib, load0, bench_load1());
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "b2") == 0)
    return b2(argc >= 3 ? (size_t)atol(argv[2]) : 256,
              argc >= 4 ? (unsigned)atol(argv[3]) : 1, NULL, NULL);
  if (argc >= 2 && strcmp(argv[1], "b2tls") == 0)
    return b2tls(argc >= 3 ? (size_t)atol(argv[2]) : 256);
  if (argc >= 2 && strcmp(argv[1], "s1") == 0)
    return s1(argc >= 3 ? (unsigned)atol(argv[2]) : 10000);
  fprintf(stderr,
          "usage: bench_ingest b2 [MiB [connections]] | s1 [connections]\n");
  return 2;
}
