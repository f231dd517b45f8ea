/* client.c: see client.h. */
#include "config.h"

#include "client.h"

static int index_records(gtc_gen *g);

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

int gtc_connect(gtc *c, uint16_t port) {
  return gtc_connect_from(c, NULL, port);
}

int gtc_connect_from(gtc *c, const char *src, uint16_t port) {
  memset(c, 0, sizeof *c);
  gtp_frame_decoder_init(&c->dec, GTP_FRAME_MAX);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return -errno;
  if (src != NULL) {
    struct sockaddr_in from;
    memset(&from, 0, sizeof from);
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
        bind(c->fd, (struct sockaddr *)&from, sizeof from) < 0) {
      int e = errno ? errno : EINVAL;
      close(c->fd);
      c->fd = -1;
      return -e;
    }
  }
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return -e;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return 0;
}

void gtc_close(gtc *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
  gtp_frame_decoder_fini(&c->dec);
}

int gtc_send_raw(gtc *c, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    struct pollfd pf = {c->fd, POLLOUT, 0};
    int pr = poll(&pf, 1, GTC_TIMEOUT_MS);
    if (pr == 0)
      return -ETIMEDOUT;
    if (pr < 0 && errno != EINTR)
      return -errno;
    ssize_t w = c->xsend != NULL ? c->xsend(c->xctx, b, n)
                                 : send(c->fd, b, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return -errno;
    }
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static int send_wbuf(gtc *c, gtp_wbuf *b) {
  int rc = b->err ? b->err : gtc_send_raw(c, b->data, b->len);
  gtp_wbuf_fini(b);
  return rc;
}

int gtc_send_hello(gtc *c, const gtf_spec *s, const char *token,
                   uint32_t min_version, uint32_t max_version) {
  gtp_hello h;
  memset(&h, 0, sizeof h);
  h.min_version = min_version;
  h.max_version = max_version;
  memcpy(h.session, s->session, 16);
  memcpy(h.session_key, s->session_key, 16);
  h.service = (gtp_str){s->service, strlen(s->service)};
  h.host = (gtp_str){s->host, strlen(s->host)};
  h.agent_version = (gtp_str){s->agent_version, strlen(s->agent_version)};
  h.pid = s->pid;
  h.process_start_ns = s->process_start_ns;
  h.ntags = 2;
  h.tags[0].key = (gtp_str){"env", 3};
  h.tags[0].value = (gtp_str){"prod", 4};
  h.tags[1].key = (gtp_str){"zone", 4};
  h.tags[1].value = (gtp_str){"eu-1", 4};
  if (token != NULL)
    h.token = (gtp_str){token, strlen(token)};
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int rc = gtp_frame_hello_encode(&b, &h);
  if (rc < 0) {
    gtp_wbuf_fini(&b);
    return rc;
  }
  return send_wbuf(c, &b);
}

int gtc_read_frame(gtc *c, gtp_frame *f, int timeout_ms) {
  return gtc_read_any(c, f, timeout_ms, 1);
}

int gtc_read_any(gtc *c, gtp_frame *f, int timeout_ms, int skip_heartbeats) {
  int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    while (c->in_off < c->in_len) {
      size_t used;
      int rc = gtp_frame_decoder_feed(&c->dec, c->in + c->in_off,
                                      c->in_len - c->in_off, &used, f);
      if (rc < 0)
        return rc;
      c->in_off += used;
      if (rc == 1) {
        if (skip_heartbeats && f->type == GTP_FR_HEARTBEAT)
          continue;
        return 1;
      }
    }
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return -ETIMEDOUT;
    struct pollfd pf = {c->fd, POLLIN, 0};
    /* A transport may hold decrypted bytes the socket no longer shows. */
    int pr = c->xrecv != NULL ? 1 : poll(&pf, 1, (int)left);
    if (pr == 0)
      return -ETIMEDOUT;
    if (pr < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    ssize_t r = c->xrecv != NULL ? c->xrecv(c->xctx, c->in, sizeof c->in)
                                 : recv(c->fd, c->in, sizeof c->in, 0);
    if (r == 0)
      return 0;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      if (errno == ECONNRESET)
        return 0;
      return -errno;
    }
    c->in_off = 0;
    c->in_len = (size_t)r;
  }
}

int gtc_hello(gtc *c, const gtf_spec *s, const char *token, gtp_welcome *w) {
  int rc =
      gtc_send_hello(c, s, token, GTP_PROTO_VERSION_MIN, GTP_PROTO_VERSION);
  if (rc < 0)
    return rc;
  gtp_frame f;
  rc = gtc_read_frame(c, &f, GTC_TIMEOUT_MS);
  if (rc <= 0)
    return rc == 0 ? -ECONNRESET : rc;
  if (f.type == GTP_FR_WELCOME)
    return gtp_frame_welcome_decode(f.payload, f.len, w);
  if (f.type == GTP_FR_ERROR) {
    gtp_error_frame e;
    rc = gtp_frame_error_decode(f.payload, f.len, &e);
    return rc < 0 ? rc : e.code;
  }
  return GTP_E_STATE;
}

int gtc_gen_build(gtc_gen *g, const gtf_spec *s) {
  memset(g, 0, sizeof *g);
  gtp_wbuf_init(&g->body, 0);
  int rc = gtf_body(&g->body, s, &g->end);
  if (rc < 0)
    return rc;
  return index_records(g);
}

static int index_records(gtc_gen *g) {
  size_t off = 0;
  while (off < g->body.len) {
    gtp_record rec;
    int rc = gtp_record_parse(g->body.data + off, g->body.len - off, &rec);
    if (rc < 0)
      return rc;
    if (g->nrec + 1 >= sizeof g->off / sizeof g->off[0])
      return GTP_E_TOOBIG;
    g->off[g->nrec++] = off;
    off += rec.size;
  }
  g->off[g->nrec] = off;
  return 0;
}

int gtc_gen_build_random(gtc_gen *g, const gtf_spec *s, size_t batches,
                         unsigned seed) {
  memset(g, 0, sizeof *g);
  gtp_wbuf_init(&g->body, 0);
  uint64_t ids[1] = {1};
  gtp_str strs[1] = {{"random", 6}};
  int rc = gtp_put_strings(&g->body, ids, strs, 1);
  static uint8_t ev[GTP_BATCH_MAX];
  uint8_t msg[7000];
  uint64_t nevents = 0;
  for (size_t b = 0; rc == 0 && b < batches; b++) {
    size_t len = 0;
    uint64_t prev = s->start_ticks, n = 0;
    while (len + sizeof msg + GTP_EVENT_MAX <= sizeof ev) {
      for (size_t i = 0; i < sizeof msg; i++) {
        seed = seed * 1103515245u + 12345u;
        msg[i] = (uint8_t)(seed >> 16);
      }
      gtp_event e;
      memset(&e, 0, sizeof e);
      e.type = GTP_EV_LOG;
      e.ticks = prev + 10;
      e.args[0] = 1;
      e.msg = msg;
      e.msg_len = sizeof msg;
      int w = gtp_event_encode(ev + len, &e, prev);
      if (w < 0)
        return w;
      len += (size_t)w;
      prev = e.ticks;
      n++;
    }
    rc = gtp_put_batch(&g->body, s->gen, 100 + b, s->start_ticks, n, ev, len);
    nevents += n;
  }
  if (rc == 0) {
    gtp_clock c = {s->start_ticks,
                   s->start_mono_ns,
                   s->start_real_ns,
                   s->start_ticks + s->period_ns / 4,
                   s->start_mono_ns + s->period_ns,
                   s->start_real_ns + s->period_ns};
    rc = gtp_put_clock(&g->body, &c);
  }
  if (rc < 0)
    return rc;
  memset(&g->end, 0, sizeof g->end);
  g->end.gen = s->gen;
  rc = gtp_manifest_compute(g->body.data, g->body.len, &g->end);
  if (rc < 0)
    return rc;
  (void)nevents;
  return index_records(g);
}

int gtc_gen_build_long_names(gtc_gen *g, const gtf_spec *s, size_t name_len,
                             size_t nevents) {
  memset(g, 0, sizeof *g);
  gtp_wbuf_init(&g->body, 0);
  if (name_len == 0 || name_len > GTP_STRING_MAX)
    return GTP_E_BADARG;
  char *name = malloc(name_len);
  if (name == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < name_len; i++)
    name[i] = (char)('a' + i % 26);
  uint64_t ids[1] = {1};
  gtp_str strs[1] = {{name, name_len}};
  int rc = gtp_put_strings(&g->body, ids, strs, 1);
  free(name);
  static uint8_t ev[GTP_BATCH_MAX];
  uint64_t span = s->period_ns / 4, step = span / (nevents + 1);
  uint64_t tk = s->start_ticks;
  size_t done = 0;
  for (unsigned b = 0; rc == 0 && done < nevents; b++) {
    size_t len = 0;
    uint64_t base = tk, prev = tk, n = 0;
    while (done < nevents && len + GTP_EVENT_MAX <= sizeof ev) {
      gtp_event e;
      memset(&e, 0, sizeof e);
      e.type = GTP_EV_INSTANT;
      e.ticks = tk += step ? step : 1;
      e.args[0] = 1;
      int w = gtp_event_encode(ev + len, &e, prev);
      if (w < 0)
        return w;
      len += (size_t)w;
      prev = e.ticks;
      n++;
      done++;
    }
    rc = gtp_put_batch(&g->body, s->gen, 100 + b, base, n, ev, len);
  }
  if (rc == 0) {
    gtp_clock c = {s->start_ticks,
                   s->start_mono_ns,
                   s->start_real_ns,
                   s->start_ticks + span,
                   s->start_mono_ns + s->period_ns,
                   s->start_real_ns + s->period_ns};
    rc = gtp_put_clock(&g->body, &c);
  }
  if (rc < 0)
    return rc;
  memset(&g->end, 0, sizeof g->end);
  g->end.gen = s->gen;
  rc = gtp_manifest_compute(g->body.data, g->body.len, &g->end);
  if (rc < 0)
    return rc;
  return index_records(g);
}

void gtc_gen_fini(gtc_gen *g) {
  gtp_wbuf_fini(&g->body);
}

int gtc_send_batch(gtc *c, const gtc_gen *g, size_t i) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_frame_batch_encode(&b, g->end.gen, g->body.data + g->off[i],
                         g->off[i + 1] - g->off[i]);
  return send_wbuf(c, &b);
}

int gtc_send_gen_end(gtc *c, const gtc_gen *g) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_frame_gen_end_encode(&b, &g->end);
  return send_wbuf(c, &b);
}

int gtc_send_gen(gtc *c, const gtc_gen *g) {
  for (size_t i = 0; i < g->nrec; i++) {
    int rc = gtc_send_batch(c, g, i);
    if (rc < 0)
      return rc;
  }
  return gtc_send_gen_end(c, g);
}

int gtc_read_reply(gtc *c, uint64_t *gen, int *code, int timeout_ms) {
  for (;;) {
    gtp_frame f;
    int rc = gtc_read_frame(c, &f, timeout_ms);
    if (rc <= 0)
      return rc;
    if (f.type == GTP_FR_ACK)
      return gtp_frame_ack_decode(f.payload, f.len, gen) < 0 ? GTP_E_CORRUPT
                                                             : 1;
    if (f.type == GTP_FR_ERROR) {
      gtp_error_frame e;
      if (gtp_frame_error_decode(f.payload, f.len, &e) < 0)
        return GTP_E_CORRUPT;
      *gen = e.has_gen ? e.gen : UINT64_MAX;
      *code = e.code;
      return 2;
    }
    if (f.type == GTP_FR_GOODBYE)
      return 0;
  }
}

int gtc_wait_closed(gtc *c, int *code, int timeout_ms) {
  *code = 0;
  int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    gtp_frame f;
    int64_t left = deadline - now_ms();
    if (left <= 0)
      return -ETIMEDOUT;
    int rc = gtc_read_frame(c, &f, (int)left);
    if (rc == 0)
      return 1;
    if (rc < 0) {
      /* A decoder error on our side means garbage came back: still a
       * result, but not a clean close. */
      return rc;
    }
    if (f.type == GTP_FR_ERROR) {
      gtp_error_frame e;
      if (gtp_frame_error_decode(f.payload, f.len, &e) == 0 && *code == 0)
        *code = e.code;
    } else if (f.type == GTP_FR_GOODBYE) {
      gtp_goodbye gb;
      if (gtp_frame_goodbye_decode(f.payload, f.len, &gb) == 0 && *code == 0)
        *code = gb.code;
    }
  }
}

/* ---------------------------------------------------------------- daemon */

int gtd_init(gtd *d) {
  memset(d, 0, sizeof *d);
  d->pid = -1;
  const char *tmp = getenv("TMPDIR");
  snprintf(d->dir, sizeof d->dir, "%s/gtd-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(d->dir) == NULL)
    return -errno;
  snprintf(d->db, sizeof d->db, "%s/t.db", d->dir);
  snprintf(d->log, sizeof d->log, "%s/gentraced.log", d->dir);
  return 0;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0)
      break;
    if (len + 1 >= cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  buf[len] = '\0';
  fclose(f);
  return buf;
}

int gtd_log_has(gtd *d, const char *s) {
  char *all = slurp(d->log);
  int found = all != NULL && strstr(all, s) != NULL;
  free(all);
  return found;
}

/* Port after "key=HOST:" on the line holding "msg=listening". */
static int parse_port(const char *line, const char *key, uint16_t *port) {
  const char *p = strstr(line, key);
  if (p == NULL)
    return -1;
  const char *end = strchr(p, ' ');
  const char *colon = NULL;
  for (const char *q = p; *q && q != end && *q != '\n'; q++)
    if (*q == ':')
      colon = q;
  if (colon == NULL)
    return -1;
  *port = (uint16_t)atoi(colon + 1);
  return *port > 0 ? 0 : -1;
}

/* Daemons started and not yet reaped. A cmocka test that fails part-way
 * longjmps past its gtd_stop; at exit the test binary kills what is left
 * by PID, so no daemon outlives a failed test (and holds its port, its
 * temporary directory and a CPU on the next CI run). */
enum { LIVE_MAX = 64 };
static pid_t live_pids[LIVE_MAX];

static void live_kill_all(void) {
  for (int i = 0; i < LIVE_MAX; i++)
    if (live_pids[i] > 0) {
      kill(live_pids[i], SIGKILL);
      waitpid(live_pids[i], NULL, 0);
      live_pids[i] = 0;
    }
}

static void live_add(pid_t pid) {
  static int registered;
  if (!registered) {
    atexit(live_kill_all);
    registered = 1;
  }
  for (int i = 0; i < LIVE_MAX; i++)
    if (live_pids[i] <= 0) {
      live_pids[i] = pid;
      return;
    }
}

/* The pid was reaped: it may be reused, never kill it at exit. */
static void live_forget(pid_t pid) {
  for (int i = 0; i < LIVE_MAX; i++)
    if (live_pids[i] == pid)
      live_pids[i] = 0;
}

int gtd_start(gtd *d, const char *const *args, const char *const *env) {
  const char *top = getenv("top_builddir");
  char bin[512];
  const char *override = getenv("GENTRACED");
  if (override != NULL)
    snprintf(bin, sizeof bin, "%s", override);
  else
    snprintf(bin, sizeof bin, "%s/daemon/gentraced", top ? top : ".");
  unlink(d->log);

  const char *argv[64];
  int n = 0;
  argv[n++] = bin;
  argv[n++] = "--agent-listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--http-listen";
  argv[n++] = "127.0.0.1:0";
  argv[n++] = "--db";
  argv[n++] = d->db;
  argv[n++] = "--log";
  argv[n++] = d->log;
  /* Fixture generations are dated from 2026-01-01 (gen_fixture.h), so the
   * wall-clock bound is off unless a test passes its own (later flags
   * win). */
  argv[n++] = "--max-clock-skew";
  argv[n++] = "0";
  for (; args != NULL && *args != NULL && n < 62; args++)
    argv[n++] = *args;
  argv[n] = NULL;

  const char *envp[256];
  int e = 0;
  for (char **p = environ; *p != NULL && e < 200; p++)
    envp[e++] = *p;
  for (; env != NULL && *env != NULL && e < 254; env++)
    envp[e++] = *env;
  envp[e] = NULL;

  /* stdout/stderr to a file in the private dir: a daemon outliving a
   * failed test must not hold the test runner's pipes open. */
  char out[300];
  snprintf(out, sizeof out, "%s/stderr.log", d->dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  int rc = posix_spawn(&d->pid, bin, &fa, NULL, (char *const *)argv,
                       (char *const *)envp);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    d->pid = -1;
    return -rc;
  }
  live_add(d->pid);
  /* Readiness: the `listening` log line (never a bare sleep). */
  int64_t deadline = now_ms() + 20000;
  while (now_ms() < deadline) {
    char *all = slurp(d->log);
    char *line = all ? strstr(all, "msg=listening ") : NULL;
    if (line != NULL && strchr(line, '\n') != NULL) {
      int ok = parse_port(line, "agent=", &d->agent_port) == 0 &&
               parse_port(line, "http=", &d->http_port) == 0;
      free(all);
      return ok ? 0 : GTP_E_CORRUPT;
    }
    free(all);
    int status;
    if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
      live_forget(d->pid);
      d->pid = -1;
      return GTP_E_SHUTDOWN;
    }
    sleep_ms(10);
  }
  gtd_kill9(d);
  return -ETIMEDOUT;
}

int gtd_stop(gtd *d) {
  if (d->pid <= 0)
    return -1;
  kill(d->pid, SIGTERM);
  int64_t deadline = now_ms() + 20000;
  int status;
  while (now_ms() < deadline) {
    pid_t r = waitpid(d->pid, &status, WNOHANG);
    if (r == d->pid) {
      live_forget(d->pid);
      d->pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    sleep_ms(10);
  }
  gtd_kill9(d);
  return -1;
}

void gtd_kill9(gtd *d) {
  if (d->pid <= 0)
    return;
  kill(d->pid, SIGKILL);
  waitpid(d->pid, NULL, 0);
  live_forget(d->pid);
  d->pid = -1;
}

int gtd_alive(gtd *d) {
  if (d->pid <= 0)
    return 0;
  if (waitpid(d->pid, NULL, WNOHANG) == 0)
    return 1;
  live_forget(d->pid);
  return 0;
}

void gtd_cleanup(gtd *d) {
  gtd_kill9(d);
  DIR *dir = opendir(d->dir);
  if (dir != NULL) {
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        continue;
      char p[600];
      snprintf(p, sizeof p, "%s/%s", d->dir, de->d_name);
      unlink(p);
    }
    closedir(dir);
  }
  rmdir(d->dir);
}

char *gtd_http_get(gtd *d, const char *path, int *status) {
  gtc c;
  *status = 0;
  if (gtc_connect(&c, d->http_port) < 0)
    return NULL;
  char req[512];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Connection: close\r\n\r\n",
                   path);
  if (gtc_send_raw(&c, req, (size_t)n) < 0) {
    gtc_close(&c);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int64_t deadline = now_ms() + GTC_TIMEOUT_MS;
  for (;;) {
    struct pollfd pf = {c.fd, POLLIN, 0};
    int64_t left = deadline - now_ms();
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
      break;
    if (len + 4096 > cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    ssize_t r = recv(c.fd, buf + len, cap - len - 1, 0);
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  gtc_close(&c);
  buf[len] = '\0';
  if (strncmp(buf, "HTTP/1.", 7) != 0) {
    free(buf);
    return NULL;
  }
  *status = atoi(buf + 9);
  char *body = strstr(buf, "\r\n\r\n");
  if (body == NULL) {
    free(buf);
    return NULL;
  }
  /* Chunked bodies keep their chunk lines; metric lookups do not care. */
  memmove(buf, body + 4, strlen(body + 4) + 1);
  return buf;
}

/* The value text of metric `name` in a /metrics body, or NULL. */
static const char *metric_value(const char *text, const char *name) {
  size_t nl = strlen(name);
  for (const char *l = text; l != NULL && *l;) {
    if (strncmp(l, name, nl) == 0 && l[nl] == ' ')
      return l + nl + 1;
    l = strchr(l, '\n');
    if (l != NULL)
      l++;
  }
  return NULL;
}

int64_t gtd_metric_in(const char *text, const char *name) {
  const char *v = metric_value(text, name);
  return v != NULL ? strtoll(v, NULL, 10) : -1;
}

double gtd_metric_f_in(const char *text, const char *name) {
  const char *v = metric_value(text, name);
  return v != NULL ? strtod(v, NULL) : -1;
}

double gtd_metric_hist_pct(const char *m0, const char *m1, const char *name,
                           double p) {
  char key[200];
  snprintf(key, sizeof key, "%s_count", name);
  int64_t total = gtd_metric_in(m1, key) - gtd_metric_in(m0, key);
  snprintf(key, sizeof key, "%s_bucket{le=\"", name);
  size_t kl = strlen(key);
  /* Buckets are printed in ascending order of le. */
  for (const char *l = m1; total > 0 && l != NULL && *l;) {
    if (strncmp(l, key, kl) == 0) {
      const char *q = strchr(l + kl, '"');
      char full[256];
      if (q == NULL || q[1] != '}' || (size_t)(q + 2 - l) >= sizeof full)
        return -1;
      snprintf(full, sizeof full, "%.*s", (int)(q + 2 - l), l);
      int64_t n = gtd_metric_in(m1, full) - gtd_metric_in(m0, full);
      if ((double)n >= p * (double)total)
        return l[kl] == '+' ? INFINITY : strtod(l + kl, NULL);
    }
    l = strchr(l, '\n');
    if (l != NULL)
      l++;
  }
  return -1;
}

int64_t gtd_metric(gtd *d, const char *name) {
  int status;
  char *m = gtd_http_get(d, "/metrics", &status);
  if (m == NULL)
    return -1;
  int64_t v = gtd_metric_in(m, name);
  free(m);
  return v;
}

/* ------------------------------------------------------ /proc of a pid */

long gtd_proc_kib(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  size_t fl = strlen(field);
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, field, fl) == 0 && line[fl] == ':')
      kib = strtol(line + fl + 1, NULL, 10);
  fclose(f);
  return kib;
}

double gtd_proc_cpu_s(pid_t pid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  char *ok = fgets(line, sizeof line, f);
  fclose(f);
  char *p = ok != NULL ? strrchr(line, ')') : NULL;
  unsigned long ut, st;
  /* Fields after "(comm)": state is 3rd, utime 14th, stime 15th. */
  if (p == NULL ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
             &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ------------------------------------------------------------ attackers */

int gtc_stall_hello(gtc *c, const char *src, uint16_t port) {
  int rc = gtc_connect_from(c, src, port);
  if (rc < 0)
    return rc;
  size_t n = GTP_FRAME_HEADER_SIZE + (64u << 10);
  uint8_t *frame = malloc(n);
  if (frame == NULL)
    return -ENOMEM;
  gtp_frame_header_put(frame, GTP_FR_HELLO, 64u << 10);
  memset(frame + GTP_FRAME_HEADER_SIZE, 'h', 64u << 10);
  (void)send(c->fd, frame, n - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  free(frame);
  return 0;
}
