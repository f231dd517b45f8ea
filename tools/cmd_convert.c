/* cmd_convert.c: `gentrace convert --to chrome|perfetto [--symbols DIR]
 * [--symbols-from-host yes|no|DIRS] FILE|-`, through
 * the one Chrome writer of proto/chrome.c or the Perfetto protobuf writer of
 * proto/perfetto.c (the same bytes the HTTP export sends).
 * The window is the input's own span: ts 0 is the first generation's start,
 * regions still open at the end are closed at the latest time seen. Stack
 * frames are named by the libdw symbolizer (cli_sym.c, docs/SYMBOLS.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome.h"
#include "perfetto.h"
#include "cli.h"

typedef struct convert_ctx {
  gtp_chrome *ch;
  gtp_perfetto *pf; /* --to perfetto */
  cli_output *o;
} convert_ctx;

static int convert_gen(void *ctx, const cli_input *in, const gtp_gen *g,
                       size_t *err_off) {
  convert_ctx *c = ctx;
  int rc = c->pf ? gtp_perfetto_gen(c->pf, g) : gtp_chrome_gen(c->ch, g);
  if (rc >= 0)
    return 0;
  if (c->o->err)
    return CLI_EACH_REPORTED; /* an output error is reported by close */
  /* The writer does not say where; on this error path only, decode again
   * to name the event that failed. */
  int rc2 = cli_gen_events(g, in->data, err_off, NULL, NULL);
  return rc2 < 0 ? rc2 : rc;
}

int cmd_convert(int argc, char **argv) {
  cli_opts opt;
  int started = cli_start("convert", argc, argv, CLI_F_TO | CLI_F_SYMBOLS,
                          cli_help_convert, 1, 1, &opt);
  if (started >= 0)
    return started;
  int to_go = opt.to && strcmp(opt.to, "go") == 0; /* convert_go.c */
  if (opt.to && !to_go && strcmp(opt.to, "chrome") &&
      strcmp(opt.to, "perfetto")) {
    cli_usage_error("convert",
                    "unknown format '%s' (supported: chrome, perfetto, go)",
                    opt.to);
    cli_opts_free(&opt);
    return CLI_USAGE;
  }
  int status = CLI_BAD_INPUT, rc;
  cli_input in;
  cli_output *o;
  struct cli_sym *sym = NULL;
  if (!to_go && !(sym = cli_sym_open(&opt, "convert"))) {
    cli_opts_free(&opt);
    return CLI_USAGE;
  }
  if (cli_io_open(&opt, &in, &o, true) < 0)
    goto fail_io;
  if (to_go) {
    status = convert_go(&in, o) == 0 ? CLI_OK : CLI_BAD_INPUT;
    if (cli_output_close(o, status == CLI_OK || o->err))
      status = CLI_BAD_INPUT;
    cli_io_close(&in, o);
    goto fail_io;
  }
  gtp_chrome *ch = NULL;
  gtp_perfetto *pf = NULL;
  if (opt.to && strcmp(opt.to, "perfetto") == 0)
    pf = gtp_perfetto_new(cli_output_sink, o);
  else
    ch = gtp_chrome_new(cli_output_sink, o, 0, 0);
  if (!ch && !pf) {
    fprintf(stderr, "gentrace: out of memory\n");
    goto done;
  }
  if (pf)
    gtp_perfetto_set_symbolizer(pf, cli_sym_get(sym));
  else
    gtp_chrome_set_symbolizer(ch, cli_sym_get(sym));

  convert_ctx c = {ch, pf, o};
  if (cli_each_gen(&in, convert_gen, &c))
    goto done;
  rc = pf ? gtp_perfetto_end(pf) : gtp_chrome_end(ch);
  if (rc < 0 && !o->err) {
    fprintf(stderr, "gentrace: %s: %s\n", in.name, gtp_strerror(rc));
    goto done;
  }
  status = CLI_OK;
done:
  gtp_chrome_free(ch);
  gtp_perfetto_free(pf);
  /* With an output error, close reports it and discards the file. */
  if (cli_output_close(o, status == CLI_OK || o->err))
    status = CLI_BAD_INPUT;
  cli_io_close(&in, o);
fail_io:
  cli_sym_close(sym);
  cli_opts_free(&opt);
  return status;
}
