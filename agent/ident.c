/* ident.c: the session's configuration and identity: gt_config defaults,
 * the GENTRACE_* environment, tags, the process start time and the random
 * session id and key (drawn here, at every gt_start). Pure setup, no shared
 * state: everything lands in the gt_config or gt__ident the caller passes.
 */
#include "config.h"

#include "ident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "frame.h"

static uint32_t env_u32(const char *name, uint32_t dflt) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0')
    return dflt;
  char *end;
  unsigned long x = strtoul(v, &end, 10);
  if (*end != '\0' || x > UINT32_MAX)
    return dflt;
  return (uint32_t)x;
}

void gt_config_init(gt_config *cfg) {
  if (cfg == NULL)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->size = sizeof *cfg;
  cfg->addr = "127.0.0.1:7170";
  cfg->period_ms = 1000;
  cfg->buffer_mb = 16;
  cfg->spool_mb = 64;
  cfg->flush_timeout_ms = 0; /* automatic, see agent_main's stop */
  cfg->log_level = GT_LOG_INFO;
}

void gt__config_from_env(gt_config *c) {
  gt_config_init(c);
  const char *v;
  if ((v = getenv("GENTRACE_ADDR")) && *v)
    c->addr = v;
  if ((v = getenv("GENTRACE_SERVICE")) && *v)
    c->service = v;
  if ((v = getenv("GENTRACE_TOKEN")) && *v)
    c->token = v;
  if ((v = getenv("GENTRACE_HOST")) && *v)
    c->host = v;
  if ((v = getenv("GENTRACE_TLS_CA")) && *v)
    c->tls_ca = v;
  if ((v = getenv("GENTRACE_TLS_CERT")) && *v)
    c->tls_cert = v;
  if ((v = getenv("GENTRACE_TLS_KEY")) && *v)
    c->tls_key = v;
  if ((v = getenv("GENTRACE_TAGS")) && *v)
    c->tags = v;
  c->period_ms = env_u32("GENTRACE_PERIOD_MS", c->period_ms);
  c->buffer_mb = env_u32("GENTRACE_BUFFER_MB", c->buffer_mb);
  c->spool_mb = env_u32("GENTRACE_SPOOL_MB", c->spool_mb);
  c->stacks = (int)env_u32("GENTRACE_STACKS", 0) != 0;
  c->flush_timeout_ms = env_u32("GENTRACE_FLUSH_MS", c->flush_timeout_ms);
}

/* Replaces every non-ASCII byte of s by '?' unless s is valid UTF-8 (the
 * daemon refuses identity strings that are not, PROTOCOL.md 3.1, and a
 * program name or host name can hold any bytes). */
static void text_clean(char *s) {
  if (s == NULL || gtp_frame_text_ok(s, strlen(s)))
    return;
  for (; *s; s++)
    if ((unsigned char)*s >= 0x80)
      *s = '?';
}

/* Parses "k=v,k=v" into id->tags (bytes owned by id->tags_buf). */
static int parse_tags(gt__ident *id, const char *tags) {
  id->ntags = 0;
  if (tags == NULL || *tags == '\0')
    return 0;
  id->tags_buf = strdup(tags);
  if (id->tags_buf == NULL)
    return -ENOMEM;
  text_clean(id->tags_buf);
  char *save = NULL;
  for (char *kv = strtok_r(id->tags_buf, ",", &save); kv != NULL;
       kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv || id->ntags >= GTP_TAGS_MAX)
      return -EINVAL;
    *eq = '\0';
    size_t kl = strlen(kv), vl = strlen(eq + 1);
    if (kl > GTP_IDENT_STR_MAX || vl > GTP_IDENT_STR_MAX)
      return -EINVAL;
    id->tags[id->ntags].key = (gtp_str){kv, kl};
    id->tags[id->ntags].value = (gtp_str){eq + 1, vl};
    id->ntags++;
  }
  return 0;
}

static uint64_t process_start_ns(void) {
  /* Field 22 of /proc/self/stat: start time in clock ticks since boot. */
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return gt__ns(CLOCK_REALTIME);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return gt__ns(CLOCK_REALTIME);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return gt__ns(CLOCK_REALTIME);
  unsigned long long start = 0;
  int field = 2;
  for (char *s = p + 1; *s && field < 22; s++)
    if (*s == ' ') {
      field++;
      if (field == 22)
        start = strtoull(s + 1, NULL, 10);
    }
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0)
    hz = 100;
  uint64_t boot_real = gt__ns(CLOCK_REALTIME) - gt__ns(CLOCK_BOOTTIME);
  return boot_real + start * (1000000000ull / (uint64_t)hz);
}

void gt__ident_fini(gt__ident *id) {
  free(id->service);
  free(id->host);
  free(id->token);
  free(id->tags_buf);
  memset(id, 0, sizeof *id);
}

/* Fills out with n random bytes. Without entropy yet (early boot, where
 * GRND_NONBLOCK fails) it falls back to clock, pid and address bits: unique
 * enough for an id, guessable as a key, which only matters if someone on
 * the network also learns the id before the first HELLO. */
static void draw_random(uint8_t *out, size_t n, uint64_t salt) {
  if (getrandom(out, n, GRND_NONBLOCK) == (ssize_t)n)
    return;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = gt__ns(CLOCK_REALTIME) ^ (uint64_t)getpid() << 32 ^
                 gt__ns(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull ^
                 (uint64_t)(uintptr_t)out ^ salt ^ i * 0xBF58476D1CE4E5B9ull;
    memcpy(out + i, &x, n - i < 8 ? n - i : 8);
  }
}

int gt__ident_init(gt__ident *id, const gt_config *c) {
  memset(id, 0, sizeof *id);
  /* A new id and key at every gt_start, also in a forked child (which
   * starts afresh: atfork_child forgets the parent's session). */
  draw_random(id->session, sizeof id->session, 1);
  draw_random(id->session_key, sizeof id->session_key, 2);
  const char *svc = c->service;
  if (svc == NULL || *svc == '\0')
    svc = program_invocation_short_name;
  id->service = strndup(svc, GTP_IDENT_STR_MAX);
  char host[256] = "";
  if (c->host != NULL && *c->host != '\0')
    snprintf(host, sizeof host, "%s", c->host);
  else
    gethostname(host, sizeof host - 1);
  id->host = strdup(host);
  text_clean(id->service);
  text_clean(id->host);
  id->token = c->token && *c->token ? strndup(c->token, GTP_TOKEN_MAX) : NULL;
  id->pid = (uint64_t)getpid();
  id->start_ns = process_start_ns();
  if (id->service == NULL || id->host == NULL ||
      (c->token && *c->token && id->token == NULL)) {
    gt__ident_fini(id);
    return -ENOMEM;
  }
  int rc = parse_tags(id, c->tags);
  if (rc != 0) {
    gt__ident_fini(id);
    return rc;
  }
  return 0;
}
