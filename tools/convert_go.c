/* convert_go.c: `gentrace convert --to go FILE`: the generations of one Go
 * session (recorded by the Go client, or downloaded with format=gentrace)
 * as a Go execution trace file for `go tool trace`, the same bytes as
 * gentraced's /v1/trace?format=go.
 *
 * Two passes over the input: the first checks that every generation
 * belongs to one Go session, in increasing generation order, and finds the
 * newest run without a gap (a Go trace reader before 1.26 refuses holes);
 * the second writes the Go header and that run's GOTRACE bytes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gowin.h"

typedef struct go_scan {
  int have, minor;
  uint8_t session[16];
  uint64_t last, run_start; /* gen of the last one, first of the newest run */
  uint64_t gens, omitted;
} go_scan;

static int scan_gen(void *ctx, const cli_input *in, const gtp_gen *g,
                    size_t *err_off) {
  go_scan *s = ctx;
  char a[33], b[33];
  (void)err_off;
  int minor = gtp_gowin_minor(&g->start);
  gtp_session_hex(g->start.session, a);
  if (minor == 0) {
    fprintf(stderr,
            "gentrace: %s: session %s is not a Go session (no format=go "
            "tag); convert it --to chrome instead\n",
            in->name, a);
    return CLI_EACH_REPORTED;
  }
  if (minor < 0) {
    fprintf(stderr,
            "gentrace: %s: session %s has no go_version tag of Go 1.22 or "
            "later\n",
            in->name, a);
    return CLI_EACH_REPORTED;
  }
  if (!s->have) {
    s->have = 1;
    s->minor = minor;
    memcpy(s->session, g->start.session, 16);
    s->run_start = g->start.gen;
  } else if (memcmp(s->session, g->start.session, 16) != 0) {
    gtp_session_hex(s->session, b);
    fprintf(stderr,
            "gentrace: %s: holds several sessions (%s, %s, ...); a Go trace "
            "is one program run: download one with session=ID\n",
            in->name, b, a);
    return CLI_EACH_REPORTED;
  } else if (g->start.gen <= s->last) {
    fprintf(stderr,
            "gentrace: %s: generation %" PRIu64 " after %" PRIu64
            ": not in generation order\n",
            in->name, g->start.gen, s->last);
    return CLI_EACH_REPORTED;
  } else if (g->start.gen != s->last + 1) {
    s->omitted += s->gens; /* a gap: only what follows it is kept */
    s->gens = 0;
    s->run_start = g->start.gen;
  }
  s->last = g->start.gen;
  s->gens++;
  return 0;
}

typedef struct go_write {
  const go_scan *s;
  cli_output *o;
} go_write;

static int write_gen(void *ctx, const cli_input *in, const gtp_gen *g,
                     size_t *err_off) {
  go_write *w = ctx;
  (void)in;
  (void)err_off;
  if (g->start.gen < w->s->run_start)
    return 0;
  gtp_gowin_put(g, cli_output_sink, w->o);
  return w->o->err ? CLI_EACH_REPORTED : 0;
}

int convert_go(const cli_input *in, cli_output *o) {
  go_scan s;
  memset(&s, 0, sizeof s);
  if (cli_each_gen(in, scan_gen, &s))
    return -1;
  if (!s.have) {
    fprintf(stderr,
            "gentrace: %s: no generation: nothing to make a Go trace of\n",
            in->name);
    return -1;
  }
  if (s.omitted)
    fprintf(stderr,
            "gentrace: %s: %" PRIu64
            " generations before the gap at generation %" PRIu64
            " left out (a Go trace cannot have holes)\n",
            in->name, s.omitted, s.run_start);
  uint8_t h[GTP_GO_HEADER_SIZE];
  gtp_gowin_header(s.minor, h);
  cli_output_write(o, h, sizeof h);
  go_write w = {&s, o};
  if (cli_each_gen(in, write_gen, &w))
    return -1;
  return o->err ? -1 : 0;
}
