/* cmd_import.c: `gentrace import FILE --service NAME [--addr HOST:PORT]
 * [--host H] [--now] [-o OUT]`: a Go execution trace file (Go 1.11 to 1.26)
 * stored as a finished gentrace session (import.h says how each version maps).
 *
 * The whole file is decoded and every generation built before anything is
 * sent, so a bad file stores nothing; the error names the Go version and
 * the byte offset. With -o the generations go to a gentrace file instead
 * of a daemon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "import.h"

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The file's modification time: the end of a trace without a wall clock. */
static int64_t mtime_of(const char *name) {
  struct stat st;
  if (strcmp(name, "-") && stat(name, &st) == 0)
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  return now_ns();
}

static int write_file(cli_output *o, gtp_gen_start *id, const import_set *s) {
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  int rc = gtp_put_file_header(&b);
  cli_output_write(o, b.data, b.len);
  for (size_t i = 0; !rc && i < s->ngens; i++) {
    gtp_wbuf_reset(&b);
    id->gen = s->gens[i].gen;
    if ((rc = gtp_put_gen_start(&b, id)))
      break;
    gtp_wbuf_put(&b, s->gens[i].body, s->gens[i].body_len);
    if ((rc = gtp_put_gen_end(&b, &s->gens[i].end)))
      break;
    cli_output_write(o, b.data, b.len);
  }
  gtp_wbuf_fini(&b);
  return rc;
}

int cmd_import(int argc, char **argv) {
  cli_opts opt;
  if (cli_parse("import", argc, argv, CLI_F_IMPORT, &opt))
    return CLI_USAGE;
  if (opt.help) {
    fputs(cli_help_import, stdout);
    cli_opts_free(&opt);
    return CLI_OK;
  }
  int status = CLI_USAGE;
  if (opt.nargs != 1) {
    cli_usage_error("import", "expected one Go trace FILE (or - for stdin)");
    goto fail_usage;
  }
  if (!opt.service || !*opt.service) {
    cli_usage_error("import", "--service NAME is required");
    goto fail_usage;
  }
  if (strlen(opt.service) > GTP_IDENT_STR_MAX ||
      (opt.host && strlen(opt.host) > GTP_IDENT_STR_MAX)) {
    cli_usage_error("import", "--service and --host take at most %d bytes",
                    GTP_IDENT_STR_MAX);
    goto fail_usage;
  }
  const char *addr = opt.addr;
  char addrbuf[256];
  if (!addr && !opt.out) {
    /* Like the agent: GENTRACE_ADDR, the first of its failover list. */
    const char *env = getenv("GENTRACE_ADDR");
    snprintf(addrbuf, sizeof addrbuf, "%s",
             env && *env ? env : "127.0.0.1:7170");
    addrbuf[strcspn(addrbuf, ",")] = 0;
    addr = addrbuf;
  }
  status = CLI_BAD_INPUT;
  cli_input in;
  if (cli_input_open(&in, opt.args[0]))
    goto fail_usage;

  import_set s;
  size_t off = 0;
  int rc = import_build(in.data, in.len, opt.now ? now_ns() : mtime_of(in.name),
                        &s, &off);
  if (rc) {
    if (s.version)
      fprintf(stderr, "gentrace: %s: go 1.%u trace: offset %zu: %s%s\n",
              in.name, s.version, off, gtp_strerror(rc),
              rc == GTP_E_VERSION ? " (import reads Go 1.11 to 1.26)" : "");
    else
      fprintf(stderr, "gentrace: %s: offset %zu: %s (not a Go trace file?)\n",
              in.name, off, gtp_strerror(rc));
    goto fail_build;
  }

  char host[256] = "";
  if (opt.host)
    snprintf(host, sizeof host, "%s", opt.host);
  else if (gethostname(host, sizeof host - 1) != 0)
    snprintf(host, sizeof host, "import");
  char ver[8], agent[64];
  snprintf(ver, sizeof ver, "1.%u", s.version);
  snprintf(agent, sizeof agent, "gentrace-import %s", PACKAGE_VERSION);
  gtp_gen_start id = {
      .service = {opt.service, strlen(opt.service)},
      .host = {host, strlen(host)},
      .agent_version = {agent, strlen(agent)},
      .process_start_ns = s.start_ns > 0 ? (uint64_t)s.start_ns : 0,
  };
  id.tags[id.ntags++] = (gtp_tag){{"go_version", 10}, {ver, strlen(ver)}};
  if (s.go_format)
    id.tags[id.ntags++] = (gtp_tag){{"format", 6}, {"go", 2}};
  id.tags[id.ntags++] = (gtp_tag){{"source", 6}, {"import", 6}};
  if (getrandom(id.session, sizeof id.session, 0) != sizeof id.session) {
    fprintf(stderr, "gentrace: cannot draw a session id: %s\n",
            strerror(errno));
    goto fail_send;
  }
  char hex[33];
  gtp_session_hex(id.session, hex);

  if (opt.out) {
    cli_output *o = malloc(sizeof *o);
    if (!o || cli_output_open(o, opt.out)) {
      free(o);
      goto fail_send;
    }
    rc = write_file(o, &id, &s);
    if (rc)
      fprintf(stderr, "gentrace: %s: %s\n", in.name, gtp_strerror(rc));
    if (cli_output_close(o, rc == 0) || rc) {
      free(o);
      goto fail_send;
    }
    free(o);
  } else {
    size_t acked = 0;
    char msg[600];
    rc = import_send(addr, &id, getenv("GENTRACE_TOKEN"), &s, &acked, msg,
                     sizeof msg);
    if (rc) {
      fprintf(stderr,
              "gentrace: %s: import to %s failed after %zu of %zu "
              "generations: %s%s%s\n",
              in.name, addr, acked, s.ngens, gtp_strerror(rc),
              msg[0] ? ": " : "", msg);
      goto fail_send;
    }
  }
  printf("session=%s service=%s go_version=%s generations=%zu regions=%llu "
         "tasks=%llu logs=%llu\n",
         hex, opt.service, ver, s.ngens, (unsigned long long)s.regions,
         (unsigned long long)s.tasks, (unsigned long long)s.logs);
  status = CLI_OK;
fail_send:
  import_free(&s);
fail_build:
  cli_input_close(&in);
fail_usage:
  cli_opts_free(&opt);
  return status;
}
