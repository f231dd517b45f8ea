/* args.c: the subcommands' option parser.
 *
 * Hand-written rather than getopt_long because every subcommand takes the
 * same small set, options may follow file names (as users type them:
 * `gentrace dump trace.gt -o out.txt`), and a usage error must exit 2 with a
 * message naming the subcommand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "gentrace%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'gentrace %s%s--help'.\n", cmd ? cmd : "",
          cmd ? " " : "");
}

/* Matches "--name VALUE" and "--name=VALUE" (and the short form). Returns
 * 1 and sets *val (or 0 = no match, -1 = missing value). */
static int opt_value(const char *cmd, int argc, char **argv, int *i,
                     const char *lng, const char *shrt, const char **val) {
  const char *a = argv[*i];
  size_t ll = strlen(lng);
  if (!strncmp(a, lng, ll) && a[ll] == '=') {
    *val = a + ll + 1;
    return 1;
  }
  if (strcmp(a, lng) && (!shrt || strcmp(a, shrt)))
    return 0;
  if (*i + 1 >= argc) {
    cli_usage_error(cmd, "option '%s' needs a value", a);
    return -1;
  }
  *val = argv[++*i];
  return 1;
}

int cli_parse(const char *cmd, int argc, char **argv, unsigned flags,
              cli_opts *o) {
  memset(o, 0, sizeof *o);
  o->args = calloc((size_t)argc + 1, sizeof *o->args);
  if (!o->args) {
    fprintf(stderr, "gentrace: out of memory\n");
    return -1;
  }
  bool dashdash = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v;
    int r;
    if (dashdash || a[0] != '-' || !strcmp(a, "-")) {
      o->args[o->nargs++] = argv[i];
      continue;
    }
    if (!strcmp(a, "--")) {
      dashdash = true;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      o->help = true;
      continue;
    }
    if ((r = opt_value(cmd, argc, argv, &i, "--output", "-o", &v))) {
      if (r < 0)
        goto fail;
      if (o->out) {
        cli_usage_error(cmd, "-o given twice");
        goto fail;
      }
      o->out = v;
      continue;
    }
    if ((flags & CLI_F_TO) &&
        ((r = opt_value(cmd, argc, argv, &i, "--to", "-t", &v)) ||
         (r = opt_value(cmd, argc, argv, &i, "--format", NULL, &v)))) {
      if (r < 0)
        goto fail;
      o->to = v;
      continue;
    }
    if ((flags & CLI_F_IMPORT) &&
        ((r = opt_value(cmd, argc, argv, &i, "--service", "-s", &o->service)) ||
         (r = opt_value(cmd, argc, argv, &i, "--addr", NULL, &o->addr)) ||
         (r = opt_value(cmd, argc, argv, &i, "--host", NULL, &o->host)))) {
      if (r < 0)
        goto fail;
      continue;
    }
    if ((flags & CLI_F_IMPORT) && !strcmp(a, "--now")) {
      o->now = true;
      continue;
    }
    if ((flags & CLI_F_SYMBOLS) &&
        ((r = opt_value(cmd, argc, argv, &i, "--symbols", NULL, &o->symbols)) ||
         (r = opt_value(cmd, argc, argv, &i, "--symbols-from-host", NULL,
                        &o->symbols_from_host)))) {
      if (r < 0)
        goto fail;
      continue;
    }
    if ((flags & CLI_F_JSON) && !strcmp(a, "--json")) {
      o->json = true;
      continue;
    }
    cli_usage_error(cmd, "unknown option '%s'", a);
    goto fail;
  }
  return 0;
fail:
  free(o->args);
  o->args = NULL;
  return -1;
}

void cli_opts_free(cli_opts *o) {
  free(o->args);
  o->args = NULL;
}

int cli_start(const char *cmd, int argc, char **argv, unsigned flags,
              const char *help, int min_args, int max_args, cli_opts *o) {
  if (cli_parse(cmd, argc, argv, flags, o))
    return CLI_USAGE;
  if (o->help) {
    fputs(help, stdout);
    cli_opts_free(o);
    return CLI_OK;
  }
  if (o->nargs < min_args || (max_args && o->nargs > max_args)) {
    if (max_args == 1)
      cli_usage_error(cmd, "expected one FILE (or - for stdin)");
    else
      cli_usage_error(cmd, "expected at least one FILE");
    cli_opts_free(o);
    return CLI_USAGE;
  }
  return -1;
}
