/* bench_download.c: D1, window download throughput of the HTTP API; D2,
 * the same window as Chrome JSON (format=chrome, streamed through the
 * bounded pipe and pump thread of web_trace.c) against the same-run
 * in-process conversion of those bytes by gtp_chrome into memory (what the
 * HTTP answer cost before it streamed, without any socket).
 *
 * Fills a real database (store_open/store_submit, zstd) with one session of
 * ~1 MiB generations, starts the web server on 127.0.0.1 port 0 and
 * downloads the whole window with curl to /dev/null. Baselines,
 * measured in the same run: iperf3 loopback (single stream) and nginx
 * serving the very bytes of the window from a file (sendfile), each only if
 * installed. Prints BENCH
 * lines; never fails the build.
 *
 *   bench_download [MiB] [tls|demo]     (default 256)
 *
 * demo: the window is made of generations shaped like the demo service's
 * (demo_gen.h: nested request regions, tasks, logs, counters; zstd stores
 * them at about 40% of their size, as real demo traces) instead of the
 * default regions and counters (about 73%): D1zstd with the data users
 * will download. tls: D1 over HTTPS beside plain HTTP (d1_tls).
 *
 * Five rounds (BENCH_D1_ROUNDS=1..5 for fewer), each downloading from
 * gentraced, nginx and iperf3 back to back; the BENCH lines give the median
 * per-round ratio, which holds up on a machine whose load swings (the figures
 * alone do not).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_env.h"
#include "bench_gen.h"
#include "chrome.h"
#include "demo_gen.h"
#include "format.h"
#include "store.h"
#include "store_pin.h"
#include "tls_floor.h"
#include "web.h"
#include "../tests/lib/prng.h"

#define SEC INT64_C(1000000000)
#define T0 INT64_C(1767225600000000000)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned ndone, nfail;

static void on_done(void *ctx, store_gen *g) {
  pthread_mutex_lock(&lock);
  ndone++;
  if (g->result < 0)
    nfail++;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  store_gen_free(g);
}

/* One ~1 MiB generation: 16 threads' batches of regions and counters. */
static int build_gen(gtp_wbuf *b, const uint8_t session[16], uint64_t gen,
                     gtp_gen_end *end) {
  gtp_gen_start gs;
  memset(&gs, 0, sizeof gs);
  memcpy(gs.session, session, 16);
  gs.gen = gen;
  gs.service = (gtp_str){"bench", 5};
  gs.host = (gtp_str){"bench-host", 10};
  gs.agent_version = (gtp_str){"0.1.0", 5};
  gs.pid = 4242;
  gs.process_start_ns = (uint64_t)T0;
  if (gtp_put_gen_start(b, &gs) < 0)
    return -1;
  size_t body = b->len;
  static const char *const names[] = {"GET /cart",   "db.query", "render",
                                      "queue_depth", "auth",     "cache.get",
                                      "serialize",   "flush"};
  uint64_t ids[8];
  gtp_str strs[8];
  for (int i = 0; i < 8; i++) {
    ids[i] = (uint64_t)i + 1;
    strs[i] = (gtp_str){names[i], strlen(names[i])};
  }
  gtp_put_strings(b, ids, strs, 8);
  uint64_t base = 1000000 + gen * 250000000ull;
  static uint8_t ev[GTP_BATCH_MAX];
  uint64_t x = gen * 2654435761u + 1;
  for (unsigned t = 0; t < 16; t++) {
    size_t len = 0;
    uint64_t n = 0, prev = base, tk = base;
    int64_t depth = 100;
    while (len + 3 * GTP_EVENT_MAX < sizeof ev) {
      lcg64(&x);
      gtp_event e = {0};
      tk += 20 + (x >> 58);
      e.type = (n % 3 == 0)   ? GTP_EV_REGION_BEGIN
               : (n % 3 == 1) ? GTP_EV_COUNTER
                              : GTP_EV_REGION_END;
      e.ticks = tk;
      e.args[0] = 1 + (x >> 61);
      /* A counter such as a queue depth walks up and down by small steps;
       * the timestamps carry the jitter. */
      depth += (int64_t)((x >> 40) & 3) - 1;
      if (depth < 0)
        depth = 0;
      e.args[1] = (uint64_t)depth;
      int k = gtp_event_encode(ev + len, &e, prev);
      if (k < 0)
        return -1;
      len += (size_t)k;
      prev = tk;
      n++;
    }
    gtp_put_batch(b, gen, 100 + t, base, n, ev, len);
  }
  gtp_clock c = {base,
                 5 * SEC + gen * SEC,
                 (uint64_t)T0 + gen * SEC,
                 base + 250000000ull,
                 6 * SEC + gen * SEC,
                 (uint64_t)T0 + (gen + 1) * SEC};
  gtp_put_clock(b, &c);
  memset(end, 0, sizeof *end);
  end->gen = gen;
  if (b->err || gtp_manifest_compute(b->data + body, b->len - body, end) < 0)
    return -1;
  return gtp_put_gen_end(b, end);
}

static uint16_t free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  socklen_t sl = sizeof sa;
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&sa, sizeof sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  close(fd);
  return ntohs(sa.sin_port);
}

static int port_open(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

/* One curl download of url (to out_file, or /dev/null): MB/s, 0 on error. */
static double curl_once(const char *url, const char *out_file,
                        uint64_t *bytes) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "curl -s -f -o %s -w '%%{size_download} %%{time_total}' '%s'",
           out_file ? out_file : "/dev/null", url);
  FILE *p = popen(cmd, "r");
  double size = 0, t = 0;
  if (!p)
    return 0;
  int ok = fscanf(p, "%lf %lf", &size, &t) == 2;
  if (pclose(p) != 0 || !ok || t <= 0)
    return 0;
  if (bytes)
    *bytes = (uint64_t)size;
  return size / t / 1e6;
}

/* One download with Accept-Encoding: enc, discarded: the seconds it took
 * (0 on error) and the bytes on the wire in *wire. */
static double curl_enc_secs(const char *url, const char *enc, uint64_t *wire) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "curl -s -f -H 'Accept-Encoding: %s' -o /dev/null "
           "-w '%%{size_download} %%{time_total}' '%s'",
           enc, url);
  FILE *p = popen(cmd, "r");
  double size = 0, t = 0;
  if (!p)
    return 0;
  int ok = fscanf(p, "%lf %lf", &size, &t) == 2;
  if (pclose(p) != 0 || !ok || t <= 0)
    return 0;
  *wire = (uint64_t)size;
  return t;
}

static pid_t spawn(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static void reap(pid_t pid) {
  if (pid <= 0)
    return;
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
}

/* iperf3 loopback, one stream for 1 s against a running server: MB/s.
 * Retried while the server is not up yet (no connect probe: iperf3 would
 * take the probe for a test client). */
static double iperf3_once(uint16_t port) {
  char cmd[256];
  snprintf(cmd, sizeof cmd,
           "iperf3 -c 127.0.0.1 -p %u -t 1 -f m 2>/dev/null | "
           "awk '/receiver/ {print $7}'",
           port);
  double mbit = 0;
  for (int i = 0; i < 50 && mbit <= 0; i++) {
    FILE *p = popen(cmd, "r");
    if (p) {
      if (fscanf(p, "%lf", &mbit) != 1)
        mbit = 0;
      pclose(p);
    }
    if (mbit <= 0)
      usleep(50000);
  }
  return mbit / 8; /* Mbit/s -> MB/s */
}

/* Starts a private nginx serving dir (sendfile on) on a free port; returns
 * its pid (0 if nginx is not installed) and the port. */
static pid_t nginx_start(const char *dir, uint16_t *port) {
  const char *bin = getenv("NGINX");
  static const char *const cands[] = {"/usr/sbin/nginx",
                                      "/usr/local/sbin/nginx", NULL};
  if (!bin || access(bin, X_OK) != 0) {
    bin = NULL;
    for (int i = 0; cands[i] && !bin; i++)
      if (access(cands[i], X_OK) == 0)
        bin = cands[i];
  }
  if (!bin)
    return 0;
  *port = free_port();
  char conf[512], logs[512], elog[600];
  snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
  snprintf(logs, sizeof logs, "%s/logs", dir);
  snprintf(elog, sizeof elog, "%s/error.log", logs);
  mkdir(logs, 0755);
  FILE *f = fopen(conf, "w");
  if (!f)
    return 0;
  fprintf(f,
          "worker_processes 1;\npid %s/nginx.pid;\nerror_log %s;\n"
          "events { worker_connections 64; }\n"
          "http { access_log off; sendfile on; tcp_nopush on;\n"
          " client_body_temp_path %s; proxy_temp_path %s;"
          " fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;\n"
          " server { listen 127.0.0.1:%u; root %s; } }\n",
          dir, elog, logs, logs, logs, logs, logs, *port, dir);
  fclose(f);
  char *argv[] = {(char *)bin, "-p", (char *)dir, "-e",          elog,
                  "-c",        conf, "-g",        "daemon off;", NULL};
  pid_t pid = spawn(argv);
  for (int i = 0; i < 200 && !port_open(*port); i++)
    usleep(10000);
  return pid;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define ROUNDS 5
/* Rounds actually run: BENCH_D1_ROUNDS (1..5; bench/quick runs REPS). */
static int rounds = ROUNDS;

/* Median over rounds of gentraced/baseline, each round measuring both back
 * to back, so load swings on a shared machine hit both sides alike. */
static void bench_line_id(const char *id, const double *ours,
                          const double *base, const char *name);
static void bench_line(const double *ours, const double *base,
                       const char *name) {
  bench_line_id("D1", ours, base, name);
}

static int count_sink(void *ctx, const void *p, size_t n) {
  (void)p;
  *(uint64_t *)ctx += n;
  return 0;
}

/* The baseline of D2: the downloaded window converted to Chrome JSON in
 * memory (bytes counted, not kept): MB/s of JSON. */
static double chrome_convert_once(const char *file) {
  FILE *f = fopen(file, "rb");
  if (!f)
    return 0;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *data = len > 0 ? malloc((size_t)len) : NULL;
  int ok = data && fread(data, 1, (size_t)len, f) == (size_t)len;
  fclose(f);
  if (!ok) {
    free(data);
    return 0;
  }
  uint64_t out = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  gtp_chrome *c = gtp_chrome_new(count_sink, &out, 0, 0);
  gtp_file_reader fr;
  gtp_gen g;
  if (c && gtp_file_reader_init(&fr, data, (size_t)len) == 0)
    while (gtp_file_reader_next(&fr, &g) == 1) {
      gtp_chrome_gen(c, &g);
      gtp_gen_fini(&g);
    }
  if (c)
    gtp_chrome_end(c);
  gtp_chrome_free(c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  free(data);
  double t = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  return t > 0 ? (double)out / t / 1e6 : 0;
}

static void bench_line_bar(const char *id, const double *ours,
                           const double *base, const char *name, double bar);
static void bench_line_id(const char *id, const double *ours,
                          const double *base, const char *name) {
  bench_line_bar(id, ours, base, name, 0.5);
}

static void bench_line_unit(const char *id, const double *ours,
                            const double *base, const char *name, double bar,
                            const char *unit);
static void bench_line_bar(const char *id, const double *ours,
                           const double *base, const char *name, double bar) {
  bench_line_unit(id, ours, base, name, bar, "MB/s");
}

static void bench_line_unit(const char *id, const double *ours,
                            const double *base, const char *name, double bar,
                            const char *unit) {
  double r[ROUNDS], o[ROUNDS], b[ROUNDS];
  int n = 0;
  for (int i = 0; i < rounds; i++)
    if (base[i] > 0 && ours[i] > 0) {
      r[n] = ours[i] / base[i];
      o[n] = ours[i];
      b[n] = base[i];
      n++;
    }
  if (n == 0) {
    for (int i = 0; i < rounds; i++)
      o[i] = ours[i];
    printf("BENCH id=%s value=%.0f unit=%s baseline=%s:missing ratio=0 "
           "bar=%.2f pass=0\n",
           id, median(o, rounds), unit, name, bar);
    return;
  }
  double ratio = median(r, n);
  printf("BENCH id=%s value=%.0f unit=%s baseline=%s:%.0f ratio=%.2f "
         "bar=%.2f pass=%d\n",
         id, median(o, n), unit, name, median(b, n), ratio, bar, ratio >= bar);
}

/* User + system CPU seconds of this process (who = RUSAGE_SELF) or of its
 * reaped children (RUSAGE_CHILDREN). */
static double cpu_s(int who) {
  struct rusage a;
  getrusage(who, &a);
  return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec) +
         (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec) / 1e6;
}

static double srv_cpu[2], cli_cpu[2]; /* d1_tls: plain, https, summed */

static double cpu_both(void) {
  return cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN);
}

/* D1 over HTTPS (issue 15): a throwaway CA and certificate for 127.0.0.1
 * in dir (certtool), a second server on the same database with them, and
 * plain and HTTPS downloads alternately, same run. */
static int d1_tls(const char *dir, const char *db, const char *plain_url,
                  int64_t from, int64_t to) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "(cd '%s' && "
           "certtool --generate-privkey --key-type=ecdsa --outfile ca.key && "
           "printf 'cn = bench CA\\nca\\ncert_signing_key\\n' > ca.tmpl && "
           "certtool --generate-self-signed --load-privkey ca.key "
           "--template ca.tmpl --outfile ca.pem && "
           "certtool --generate-privkey --key-type=ecdsa --outfile srv.key && "
           "chmod 600 srv.key ca.key && "
           "printf 'cn = gentraced\\nip_address = 127.0.0.1\\n"
           "tls_www_server\\n' > srv.tmpl && "
           "certtool --generate-certificate --load-privkey srv.key "
           "--load-ca-certificate ca.pem --load-ca-privkey ca.key "
           "--template srv.tmpl --outfile srv.pem) >/dev/null 2>&1",
           dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "bench_download: certtool failed\n");
    return 1;
  }
  char cert[300], key[300], ca[300];
  snprintf(cert, sizeof cert, "%s/srv.pem", dir);
  snprintf(key, sizeof key, "%s/srv.key", dir);
  snprintf(ca, sizeof ca, "%s/ca.pem", dir);
  web_config wc;
  web_config_init(&wc);
  wc.port = 0;
  wc.db_path = db;
  wc.max_window_bytes = UINT64_C(16) << 30;
  wc.tls_cert = cert;
  wc.tls_key = key;
  web_server *w;
  uint16_t port;
  char *cause = NULL;
  if (web_start(&wc, &w, &port, &cause) < 0) {
    fprintf(stderr, "bench_download: HTTPS: %s\n", cause ? cause : "?");
    return 1;
  }
  double plain[ROUNDS], tls[ROUNDS];
  /* CPU per byte, both ends (this process serves; curl is its child):
   * on a shared machine it moves far less with the load than MB/s. */
  double cpu_plain[ROUNDS], cpu_tls[ROUNDS];
  /* The floor (tls_floor.h), per round: ns per byte of each end, the
   * AEAD's cost, cores kept busy. */
  tls_floor_round fl[ROUNDS];
  int nfloor = 0;
  /* The suite curl negotiates ("SSL connection using TLSv1.3 / NAME"). */
  char suite[128] = "?";
  snprintf(cmd, sizeof cmd,
           "curl -sv --cacert %s -o /dev/null 'https://127.0.0.1:%u/healthz' "
           "2>&1 | sed -n 's/.*SSL connection using [^/]*\\/ *//p'",
           ca, port);
  FILE *sf = popen(cmd, "r");
  if (sf != NULL) {
    if (fgets(suite, sizeof suite, sf) != NULL)
      suite[strcspn(suite, "\r\n")] = '\0';
    pclose(sf);
  }
  int cipher = tls_floor_cipher_by_name(suite);
  double load0 = bench_load1();
  for (int i = 0; i < rounds; i++) {
    double c0 = cpu_both(), s0 = cpu_s(RUSAGE_SELF);
    uint64_t pbytes = 0;
    plain[i] = curl_once(plain_url, NULL, &pbytes);
    double c1 = cpu_both(), s1 = cpu_s(RUSAGE_SELF);
    srv_cpu[0] += s1 - s0;
    cli_cpu[0] += c1 - c0 - (s1 - s0);
    /* curl_once quotes its URL: pass the option outside the quotes. */
    char hcmd[1024];
    snprintf(hcmd, sizeof hcmd,
             "curl -s -f --cacert %s -o /dev/null -w '%%{size_download} "
             "%%{time_total}' 'https://127.0.0.1:%u/v1/trace?service=bench&"
             "from=%" PRId64 "&to=%" PRId64 "'",
             ca, port, from, to);
    FILE *p = popen(hcmd, "r");
    double size = 0, t = 0;
    int ok = p != NULL && fscanf(p, "%lf %lf", &size, &t) == 2;
    if (p != NULL && pclose(p) != 0)
      ok = 0;
    tls[i] = ok && t > 0 ? size / t / 1e6 : 0;
    double c2 = cpu_both(), s2 = cpu_s(RUSAGE_SELF);
    srv_cpu[1] += s2 - s1;
    cli_cpu[1] += c2 - c1 - (s2 - s1);
    /* Bytes per CPU second (MB/s at one fully used CPU): higher is better,
     * so the ratio reads like the throughput one. */
    cpu_plain[i] = c1 > c0 && pbytes > 0 ? (double)pbytes / (c1 - c0) / 1e6 : 0;
    cpu_tls[i] = ok && c2 > c1 ? size / (c2 - c1) / 1e6 : 0;
    double enc, dec;
    if (ok && pbytes > 0 && plain[i] > 0 && tls[i] > 0 &&
        tls_floor_aead(cipher, &enc, &dec) == 0) {
      /* The server seals records, curl opens them (with OpenSSL: GnuTLS's
       * AEAD stands for it; both use AES-NI). */
      fl[nfloor++] = (tls_floor_round){
          .srv_aead_ns = enc,
          .peer_aead_ns = dec,
          .srv_plain_ns = (s1 - s0) * 1e9 / (double)pbytes,
          .peer_plain_ns = (c1 - c0 - (s1 - s0)) * 1e9 / (double)pbytes,
          .srv_tls_ns = (s2 - s1) * 1e9 / size,
          .peer_tls_ns = (c2 - c1 - (s2 - s1)) * 1e9 / size,
          /* CPU s over wall s, wall s from the MB/s curl reported */
          .busy_plain = (c1 - c0) / ((double)pbytes / 1e6 / plain[i]),
          .busy_tls = (c2 - c1) / (size / 1e6 / tls[i]),
          .wall_ratio = tls[i] / plain[i],
      };
    }
    fprintf(stderr,
            "bench_download: round %d plain %.0f https %.0f MB/s; CPU "
            "(server + curl) plain %.3f s https %.3f s\n",
            i + 1, plain[i], tls[i], c1 - c0, c2 - c1);
  }
  web_stop(w);
  fprintf(stderr,
          "bench_download: CPU s over the %d rounds: server plain %.3f https "
          "%.3f; curl plain %.3f https %.3f\n",
          rounds, srv_cpu[0], srv_cpu[1], cli_cpu[0], cli_cpu[1]);
  bench_line_bar("D1-TLS", tls, plain, "D1-plain", 0.85);
  bench_line_unit("D1-TLS-cpu", cpu_tls, cpu_plain, "D1-plain-cpu", 0.85,
                  "MB/cpu-s(server+curl)");
  if (nfloor == 0) {
    printf("tls_floor: D1-TLS no complete round: no floor\n");
    return 0;
  }
  tls_floor_fig f;
  tls_floor_fig_of(&f, "D1-TLS", cipher, fl, nfloor);
  double msp = f.srv_plain_ns, mst = f.srv_tls_ns;
  double sratio = mst > 0 ? msp / mst : 0;
  printf("BENCH id=D1-TLS-server-cpu value=%.0f unit=MB/cpu-s(server) "
         "baseline=D1-plain-server-cpu:%.0f ratio=%.2f bar=0.85 pass=%d\n",
         1e3 / mst, 1e3 / msp, sratio, sratio >= 0.85);
  tls_floor_print(&f);
  printf("tls_floor: D1-TLS curl negotiated %s; %d rounds, load average "
         "%.2f before, %.2f after\n",
         suite, nfloor, load0, bench_load1());
  return 0;
}

int main(int argc, char **argv) {
  unsigned mib = argc > 1 ? (unsigned)atoi(argv[1]) : 256;
  const char *er = getenv("BENCH_D1_ROUNDS");
  if (er != NULL && atoi(er) >= 1 && atoi(er) <= ROUNDS)
    rounds = atoi(er);
  if (mib == 0)
    mib = 256;
  char dir[] = "/tmp/gt-bench-web-XXXXXX";
  if (!mkdtemp(dir))
    return 1;
  /* nginx workers drop root privileges: they must be able to read it. */
  chmod(dir, 0755);
  char db[256];
  snprintf(db, sizeof db, "%s/gentrace.db", dir);
  store_pins *pins = store_pins_new();
  store_config sc = {0};
  sc.path = db;
  sc.zstd_level = 1;
  sc.batch_max = 16;
  sc.pins = pins;
  store *st;
  char *cause = NULL;
  if (store_open(&sc, on_done, NULL, &st, &cause) < 0) {
    fprintf(stderr, "bench_download: %s\n", cause ? cause : "store_open");
    return 1;
  }
  uint8_t session[16];
  for (int i = 0; i < 16; i++)
    session[i] = (uint8_t)(0xb0 + i);
  uint64_t total = 0;
  unsigned ngens = 0;
  int demo = argc > 2 && strcmp(argv[2], "demo") == 0;
  while (total < (uint64_t)mib << 20) {
    gtp_wbuf b;
    gtp_wbuf_init(&b, 0);
    gtp_gen_end end;
    if ((demo ? demo_gen_build(&b, session, ngens, T0, 1u << 20, &end)
              : build_gen(&b, session, ngens, &end)) < 0) {
      fprintf(stderr, "bench_download: building a generation failed\n");
      return 1;
    }
    store_gen *g =
        bench_gen_new(session,
                      &(bench_gen_id){.host = "bench-host",
                                      .agent_version = "0.1.0",
                                      .pid = 4242,
                                      .process_start_ns = (uint64_t)T0},
                      ngens, T0 + (int64_t)ngens * SEC, SEC);
    g->end = end;
    g->payload = b.data;
    g->len = b.len;
    total += b.len;
    if (store_submit(st, g) < 0)
      return 1;
    ngens++;
  }
  pthread_mutex_lock(&lock);
  while (ndone < ngens)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  store_close(st);
  if (nfail) {
    fprintf(stderr, "bench_download: %u generations failed to commit\n", nfail);
    return 1;
  }
  web_config wc;
  web_config_init(&wc);
  wc.port = 0;
  wc.db_path = db;
  wc.max_window_bytes = UINT64_C(16) << 30;
  web_server *w;
  uint16_t port;
  if (web_start(&wc, &w, &port, &cause) < 0) {
    fprintf(stderr, "bench_download: %s\n", cause ? cause : "web_start");
    return 1;
  }
  char url[256], file[300], nurl[256];
  snprintf(url, sizeof url,
           "http://127.0.0.1:%u/v1/trace?service=bench&from=%" PRId64
           "&to=%" PRId64,
           port, T0, T0 + (int64_t)ngens * SEC);
  snprintf(file, sizeof file, "%s/window.gentrace", dir);
  uint64_t got = 0;
  /* The first download also keeps the bytes for nginx to serve. */
  if (curl_once(url, file, &got) <= 0) {
    fprintf(stderr, "bench_download: downloading the window failed\n");
    return 1;
  }
  if (argc > 2 && strcmp(argv[2], "tls") == 0) {
    int rc = d1_tls(dir, db, url, T0, T0 + (int64_t)ngens * SEC);
    web_stop(w);
    char rm[400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
      fprintf(stderr, "bench_download: could not remove %s\n", dir);
    store_pins_free(pins);
    return rc;
  }
  uint16_t nport = 0, iport = free_port();
  pid_t ngx = nginx_start(dir, &nport);
  snprintf(nurl, sizeof nurl, "http://127.0.0.1:%u/window.gentrace", nport);
  pid_t ip = 0;
  if (system("command -v iperf3 >/dev/null 2>&1") == 0) {
    char ps[8];
    snprintf(ps, sizeof ps, "%u", iport);
    char *sargv[] = {"iperf3", "-s", "-p", ps, NULL};
    ip = spawn(sargv);
  }
  double ours[ROUNDS], nginx[ROUNDS] = {0}, iperf[ROUNDS] = {0};
  double load0 = bench_load1();
  for (int i = 0; i < rounds; i++) {
    ours[i] = curl_once(url, NULL, NULL);
    if (ngx > 0)
      nginx[i] = curl_once(nurl, NULL, NULL);
    if (ip > 0)
      iperf[i] = iperf3_once(iport);
    fprintf(stderr,
            "bench_download: round %d gentraced %.0f nginx %.0f iperf3 %.0f "
            "MB/s\n",
            i + 1, ours[i], nginx[i], iperf[i]);
  }
  /* D1 compressed: effective trace bytes per second (the plain window's
   * size over the time of a compressed download), zstd (stored frames
   * passed through) and gzip (re-encoded, streaming), against nginx
   * sending the plain file. */
  double zs[ROUNDS] = {0}, gz[ROUNDS] = {0};
  uint64_t zwire = 0, gwire = 0;
  for (int i = 0; i < rounds; i++) {
    double t = curl_enc_secs(url, "zstd", &zwire);
    zs[i] = t > 0 ? (double)got / t / 1e6 : 0;
    t = curl_enc_secs(url, "gzip", &gwire);
    gz[i] = t > 0 ? (double)got / t / 1e6 : 0;
    if (ngx > 0 && nginx[i] <= 0)
      nginx[i] = curl_once(nurl, NULL, NULL);
    fprintf(stderr,
            "bench_download: round %d effective trace MB/s: zstd %.0f gzip "
            "%.0f plain %.0f nginx %.0f\n",
            i + 1, zs[i], gz[i], ours[i], nginx[i]);
  }
  fprintf(stderr,
          "bench_download: wire bytes: plain %" PRIu64 " zstd %" PRIu64
          " gzip %" PRIu64 "\n",
          got, zwire, gwire);
  /* D2: Chrome JSON over HTTP (bounded pipe) vs converting in memory. */
  char curl_chrome[300];
  snprintf(curl_chrome, sizeof curl_chrome, "%s&format=chrome", url);
  double chrome_http[ROUNDS], chrome_mem[ROUNDS];
  for (int i = 0; i < rounds; i++) {
    chrome_http[i] = curl_once(curl_chrome, NULL, NULL);
    chrome_mem[i] = chrome_convert_once(file);
    fprintf(stderr,
            "bench_download: round %d chrome over HTTP %.0f, in memory %.0f "
            "MB/s\n",
            i + 1, chrome_http[i], chrome_mem[i]);
  }
  reap(ngx);
  reap(ip);
  web_stop(w);
  fprintf(stderr,
          "bench_download: %u generations, %" PRIu64 " bytes per window; "
          "load average %.2f before the rounds, %.2f after\n",
          ngens, got, load0, bench_load1());
  if (ip <= 0)
    fprintf(stderr, "bench_download: iperf3 not installed (apt-get install "
                    "iperf3)\n");
  if (ngx <= 0)
    fprintf(stderr, "bench_download: nginx not found (apt-get install nginx, "
                    "or NGINX=/path/to/sbin/nginx)\n");
  bench_line(ours, iperf, "iperf3");
  bench_line(ours, nginx, "nginx");
  bench_line_id("D2", chrome_http, chrome_mem, "chrome_in_memory");
  bench_line_bar("D1zstd", zs, nginx, "nginx", 2.0);
  bench_line_bar("D1gzip", gz, nginx, "nginx", 2.0);
  bench_line_bar("D1zstd_vs_plain", zs, ours, "gentraced_plain", 1.0);

  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "bench_download: could not remove %s\n", dir);
  store_pins_free(pins);
  return 0;
}
