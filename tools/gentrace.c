/* gentrace.c: the CLI entry point; dispatches to the subcommands. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"

static const struct {
  const char *name;
  int (*run)(int, char **);
  const char *help;
} cmds[] = {
    {"dump", cmd_dump, cli_help_dump},
    {"stat", cmd_stat, cli_help_stat},
    {"convert", cmd_convert, cli_help_convert},
    {"cat", cmd_cat, cli_help_cat},
    {"import", cmd_import, cli_help_import},
};

int main(int argc, char **argv) {
  if (argc < 2) {
    cli_usage_error(NULL, "missing command (dump, stat, convert, cat, import)");
    return CLI_USAGE;
  }
  const char *a = argv[1];
  if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
    fputs(cli_help_main, stdout);
    return CLI_OK;
  }
  if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
    printf("gentrace %s (trace format %d.%d)\n", PACKAGE_VERSION,
           GTP_FORMAT_MAJOR, GTP_FORMAT_MINOR);
    return CLI_OK;
  }
  if (!strcmp(a, "help")) {
    for (size_t i = 0; argc > 2 && i < sizeof cmds / sizeof cmds[0]; i++)
      if (!strcmp(argv[2], cmds[i].name)) {
        fputs(cmds[i].help, stdout);
        return CLI_OK;
      }
    fputs(cli_help_main, stdout);
    return argc > 2 ? CLI_USAGE : CLI_OK;
  }
  /* A reader piping into `head` should end quietly, which the default
   * SIGPIPE action does; make sure an inherited SIG_IGN does not turn it
   * into EPIPE messages. */
  signal(SIGPIPE, SIG_DFL);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(a, cmds[i].name))
      return cmds[i].run(argc - 1, argv + 1);
  cli_usage_error(NULL, "unknown command '%s'", a);
  return CLI_USAGE;
}
