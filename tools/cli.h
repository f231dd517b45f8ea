/* cli.h: what the gentrace subcommands share: exit codes, input loading,
 * atomic output, error messages, time formatting and a tiny option parser.
 *
 * Exit status contract (docs/CLI.md): 0 ok, 1 bad input or failed
 * output, 2 usage. Messages go to stderr prefixed "gentrace: ".
 */
#ifndef GT_TOOLS_CLI_H
#define GT_TOOLS_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

enum { CLI_OK = 0, CLI_BAD_INPUT = 1, CLI_USAGE = 2 };

/* Largest input read from a pipe. Files are mapped and not limited. */
#define CLI_STDIN_MAX ((size_t)4 << 30)

/* ------------------------------------------------------------- input */

/* One whole input: a file mapped read-only, or a pipe/stdin read into
 * memory. name is what the user typed ("-" for stdin), borrowed. */
typedef struct cli_input {
  const char *name;
  const uint8_t *data;
  size_t len;
  void *map;     /* mmap base (data == map) or NULL */
  uint8_t *heap; /* malloc'd copy (data == heap) or NULL */
} cli_input;

/* Loads name ("-" = stdin). On failure prints "gentrace: NAME: reason"
 * and returns a negative code. */
int cli_input_open(cli_input *in, const char *name);
void cli_input_close(cli_input *in);

/* Decodes every event of g in batch order (the reader validates the
 * manifest, not the events). fn, if not NULL, is called with ev NULL at the
 * start of each batch, then with each event of it. Returns 0, or the first
 * error with *err_off set to the input offset of the event (or generation)
 * that failed; data is the input g was parsed from. */
typedef void cli_event_fn(void *ctx, const gtp_event *ev);
int cli_gen_events(const gtp_gen *g, const uint8_t *data, size_t *err_off,
                   cli_event_fn *fn, void *ctx);

/* What a cli_gen_fn returns besides 0 (go on) and a negative code from
 * gtp_error.h (bad input at *err_off, printed by cli_each_gen). */
enum {
  CLI_EACH_STOP = 1,    /* stop early, not an error */
  CLI_EACH_REPORTED = 2 /* failed, and the callback already said why (or
                           leaves it to cli_output_close) */
};
/* Called for one generation; *err_off holds the input offset where the
 * generation starts and may be moved to the event that failed. */
typedef int cli_gen_fn(void *ctx, const cli_input *in, const gtp_gen *g,
                       size_t *err_off);

/* Walks every generation of in, in file order, calling fn for each and
 * finalizing it afterwards (fn must not keep pointers into g's tables;
 * strings borrowed from in->data are fine). A reader error or a negative
 * return of fn is printed as "gentrace: NAME: offset N: problem", so every
 * subcommand reports a damaged input the same way. Returns 0 (all walked,
 * or CLI_EACH_STOP), the negative code, or CLI_EACH_REPORTED. */
int cli_each_gen(const cli_input *in, cli_gen_fn *fn, void *ctx);

/* A generation of a Go session (GOTRACE records) in its native form
 * (proto/goconv.h), for subcommands that read events: when g is Go,
 * converts it into buf, parses it into *ng and returns ng; otherwise
 * returns g untouched. NULL on failure (*rc set). The native generation
 * borrows buf: gtp_gen_fini(ng) and gtp_wbuf_fini(buf) when done (both are
 * no-ops when g was returned, as long as buf was gtp_wbuf_init'ed and ng
 * zeroed). Identity strings of ng point into buf, not into the input. */
const gtp_gen *cli_gen_native(const gtp_gen *g, gtp_wbuf *buf, gtp_gen *ng,
                              int *rc);

/* Prints "gentrace: NAME: offset N: problem" for a decode error. */
void cli_bad_input(const char *name, size_t offset, int code);

/* ------------------------------------------------------------ output */

/* Buffered output to stdout, or to -o FILE through a temporary file in the
 * same directory renamed over FILE on success, so a failure never leaves a
 * half-written FILE behind. */
typedef struct cli_output {
  int fd;
  const char *path; /* -o FILE or NULL (stdout); borrowed */
  char *tmp;        /* temporary path while writing to FILE; owned */
  int err;          /* first write error (-errno); later writes no-ops */
  size_t len;
  char buf[64 << 10];
} cli_output;

/* path NULL or "-" = stdout. Returns 0 or -errno (message printed). */
int cli_output_open(cli_output *o, const char *path);
void cli_output_write(cli_output *o, const void *p, size_t n);
void cli_output_puts(cli_output *o, const char *s);
void cli_output_printf(cli_output *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* ok: flush, close and rename into place; returns 0 or -errno (message
 * printed). !ok: a file is discarded (temporary removed), stdout is still
 * flushed. Always frees. */
int cli_output_close(cli_output *o, bool ok);

struct cli_opts;
/* The I/O of a one-FILE subcommand: allocates *o, opens the input named by
 * opt->args[0] and, with open_output, the output (-o or stdout). 0, or -1
 * after the problem was reported, with nothing left open. */
int cli_io_open(const struct cli_opts *opt, cli_input *in, cli_output **o,
                bool open_output);
/* Closes the input and frees o; the output must be closed already. */
void cli_io_close(cli_input *in, cli_output *o);
/* gtp_sink_fn adapter (ctx = cli_output *). */
int cli_output_sink(void *ctx, const void *p, size_t n);

/* -------------------------------------------------------------- misc */

/* "2026-11-22T03:04:05.123456789Z" (30 chars + NUL) through gtp_rfc3339;
 * "@NS" for a time gmtime cannot break down. */
void cli_rfc3339(int64_t unix_ns, char out[40]);

/* Escapes bytes for one-line text output: backslash, tab, newline, CR and
 * other control or non-ASCII-printable bytes as \\, \t, \n, \r, \xHH; with
 * quote also '"' as \". Valid UTF-8 passes unchanged. */
void cli_output_escaped(cli_output *o, const char *p, size_t n, bool quote);

/* Options common to every subcommand, parsed by cli_parse. */
typedef struct cli_opts {
  const char *out; /* -o FILE */
  const char *to;  /* --to FORMAT (convert) */
  bool json;       /* --json (stat) */
  /* import: --service, --addr, --host, --now */
  const char *service, *addr, *host;
  bool now;
  /* convert, stat: --symbols DIR, --symbols-from-host yes|no|DIRS */
  const char *symbols, *symbols_from_host;
  bool help;
  int nargs;
  char **args; /* positional arguments (borrowed from argv) */
} cli_opts;

/* Flags a subcommand accepts beyond -o and --help. */
enum { CLI_F_TO = 1, CLI_F_JSON = 2, CLI_F_IMPORT = 4, CLI_F_SYMBOLS = 8 };

/* Parses argv[1..] of a subcommand; "--" ends options, a lone "-" is a
 * positional argument (stdin). On a usage error prints it plus a hint and
 * returns -1. */
int cli_parse(const char *cmd, int argc, char **argv, unsigned flags,
              cli_opts *o);
void cli_opts_free(cli_opts *o);
/* The start every subcommand shares: cli_parse, then --help (prints help),
 * then the count of FILE arguments (min..max; max 0 = no limit). Returns -1
 * when the command should run with *o filled, else the exit status to
 * return (o already freed). */
int cli_start(const char *cmd, int argc, char **argv, unsigned flags,
              const char *help, int min_args, int max_args, cli_opts *o);
void cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Subcommands: argc/argv start at the subcommand name. Return the exit
 * status. */
int cmd_dump(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_convert(int argc, char **argv);
/* convert --to go (convert_go.c): 0, or -1 after saying why. */
int convert_go(const cli_input *in, cli_output *o);
int cmd_cat(int argc, char **argv);
int cmd_import(int argc, char **argv);

/* Stack symbolization of convert and stat (cli_sym.c): the libdw
 * symbolizer per --symbols / --symbols-from-host (host files by default),
 * or NULL after saying why (bad option: exit 2). */
struct cli_sym;
struct cli_sym *cli_sym_open(const cli_opts *o, const char *cmd);
const struct gtp_symbolizer *cli_sym_get(struct cli_sym *s);
void cli_sym_close(struct cli_sym *s); /* NULL is fine */

/* The top stacks of `gentrace stat` (stat_stacks.c). */
typedef struct stat_stacks stat_stacks;
stat_stacks *
stat_stacks_new(const struct gtp_symbolizer *sym); /* NULL: ENOMEM */
void stat_stacks_free(stat_stacks *s);
/* Counts g's events with a stack (data: the input g was parsed from). */
int stat_stacks_gen(stat_stacks *s, const gtp_gen *g, const uint8_t *data);
/* Text section (nothing without stacks); JSON member ",\"stacks\":{...}". */
void stat_stacks_text(const stat_stacks *s, cli_output *o);
void stat_stacks_json(const stat_stacks *s, cli_output *o);

/* Help texts (help.c). */
extern const char cli_help_main[], cli_help_dump[], cli_help_stat[],
    cli_help_convert[], cli_help_cat[], cli_help_import[];

#endif
