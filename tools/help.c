/* help.c: the --help texts, man-page style. Kept in one place so they read
 * as a whole and docs/CLI.md can be checked against them. */
#include "cli.h"

/* The end every subcommand's help shares: -h, the exit status contract
 * (docs/CLI.md) and the EXAMPLES heading; HELP_TAIL adds the common -o. */
#define HELP_EXIT                                                              \
  "    -h, --help        show this help\n"                                     \
  "\n"                                                                         \
  "EXIT STATUS\n"                                                              \
  "    0 success, 1 bad input or output error, 2 usage error\n"                \
  "\n"                                                                         \
  "EXAMPLES\n"
#define HELP_TAIL                                                              \
  "    -o, --output OUT  write to OUT (atomically) instead of "                \
  "stdout\n" HELP_EXIT

const char cli_help_main[] =
    "NAME\n"
    "    gentrace - read, summarize, convert and merge gentrace trace files\n"
    "\n"
    "SYNOPSIS\n"
    "    gentrace dump [-o OUT] FILE|-\n"
    "    gentrace stat [--json] [-o OUT] FILE|-\n"
    "    gentrace convert [--to chrome] [-o OUT] FILE|-\n"
    "    gentrace cat [-o OUT] FILE...\n"
    "    gentrace --help | --version | help COMMAND\n"
    "\n"
    "DESCRIPTION\n"
    "    Works on trace files as written by gentraced's HTTP API\n"
    "    (/v1/trace, /v1/agents/{session}/generations/{gen}) or by an agent's\n"
    "    flight recorder (gt_snapshot). FILE '-' reads standard input.\n"
    "\n"
    "    dump      one line per event, tab-separated\n"
    "    stat      per session and generation: span, events by kind, bytes, "
    "loss\n"
    "    convert   Chrome Trace Event JSON, for Perfetto or chrome://tracing\n"
    "    cat       merge files into one valid file, duplicates removed\n"
    "\n"
    "    Run 'gentrace COMMAND --help' for the details of each.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output OUT  write to OUT instead of standard output; OUT is\n"
    "                      written under a temporary name and renamed when\n"
    "                      complete, so a failed run never leaves half a file\n"
    "    -h, --help        show help (also after a command)\n"
    "    -V, --version     show the version and the trace format version\n"
    "\n"
    "EXIT STATUS\n"
    "    0  success\n"
    "    1  bad input (the message names the file, the byte offset of the\n"
    "       generation or event that failed, and the problem), or the "
    "output\n"
    "       could not be written\n"
    "    2  usage error\n"
    "\n"
    "EXAMPLES\n"
    "    curl -s 'http://127.0.0.1:7171/v1/trace?service=api&last=30s' | "
    "gentrace stat -\n"
    "    gentrace convert --to chrome -o trace.json window.gtrace\n"
    "    gentrace cat -o all.gtrace a.gtrace b.gtrace\n";

const char cli_help_dump[] =
    "NAME\n"
    "    gentrace dump - print every event of a trace, one per line\n"
    "\n"
    "SYNOPSIS\n"
    "    gentrace dump [-o OUT] FILE|-\n"
    "\n"
    "DESCRIPTION\n"
    "    Prints one line per event with six tab-separated fields:\n"
    "\n"
    "      TIME     wall-clock time, RFC 3339 UTC with nanoseconds\n"
    "               (2026-11-22T03:04:05.123456789Z)\n"
    "      SESSION  the agent session, 32 hex digits\n"
    "      THREAD   the agent's thread id\n"
    "      KIND     region_begin, region_end, instant, counter, log,\n"
    "               task_begin, task_end, thread_name, region_begin_stack,\n"
    "               instant_stack, log_stack, lost\n"
    "      NAME     region/instant/counter/task/thread name or log category;\n"
    "               '-' for kinds without a name\n"
    "      ARGS     space-separated key=value: value=N (counter),\n"
    "               message=\"...\" (log), task=N parent=N (task_begin),\n"
    "               task=N (task_end), count=N (lost),\n"
    "               stack=0xPC,0xPC,... (stack variants); empty otherwise\n"
    "\n"
    "    Names and messages are escaped (\\t \\n \\r \\\\ \\\" \\xHH) so an "
    "event\n"
    "    is always one line. Within a generation events of all threads are\n"
    "    in time order; generations come in file order.\n"
    "\n"
    "OPTIONS\n" HELP_TAIL
    "    gentrace dump trace.gtrace | awk -F'\\t' '$4 == \"log\"'\n"
    "    gentrace dump - < trace.gtrace | cut -f3 | sort | uniq -c\n";

const char cli_help_stat[] =
    "NAME\n"
    "    gentrace stat - summarize a trace per session and generation\n"
    "\n"
    "SYNOPSIS\n"
    "    gentrace stat [--json] [-o OUT] FILE|-\n"
    "\n"
    "DESCRIPTION\n"
    "    For each session (in order of first appearance): identity, then one\n"
    "    row per generation with its start, duration, events, bytes and loss\n"
    "    ledger (dropped, evicted, rejected), the session's span and its\n"
    "    events by kind. Totals over the whole file come last; lost_markers\n"
    "    sums the counts of the LOST events threads wrote.\n"
    "\n"
    "OPTIONS\n"
    "    --json            one JSON object: "
    "{\"sessions\":[...],\"totals\":{...}}\n"
    "                      (nanosecond times as strings, beside RFC "
    "3339)\n" HELP_TAIL "    gentrace stat trace.gtrace\n"
    "    gentrace stat --json trace.gtrace | python3 -m json.tool\n";

const char cli_help_convert[] =
    "NAME\n"
    "    gentrace convert - convert a trace to Chrome Trace Event JSON\n"
    "\n"
    "SYNOPSIS\n"
    "    gentrace convert [--to chrome] [-o OUT] FILE|-\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes {\"traceEvents\":[...],\"metadata\":{...}}, which Perfetto\n"
    "    (ui.perfetto.dev) and chrome://tracing load. One pid per session\n"
    "    named 'service (host pid)'; tid is the agent's thread id; regions\n"
    "    are B/E slices (a region still open at the end of the input is\n"
    "    closed there), instants and logs are 'i' events (logs named by\n"
    "    category, message in args), counters 'C', tasks async 'b'/'e' with\n"
    "    id = task id, loss 'i' events named gentrace.lost. ts is in\n"
    "    microseconds from the first generation's start; metadata holds the\n"
    "    absolute start and the session list. The same writer serves\n"
    "    gentraced's /v1/trace?format=chrome.\n"
    "\n"
    "OPTIONS\n"
    "    -t, --to FORMAT   output format: chrome (the default; 'perfetto' is\n"
    "                      accepted as a synonym)\n" HELP_TAIL
    "    gentrace convert --to chrome -o trace.json trace.gtrace\n"
    "    curl -s 'http://127.0.0.1:7171/v1/trace?service=api&last=10s' |\n"
    "        gentrace convert --to chrome - > trace.json\n";

const char cli_help_cat[] =
    "NAME\n"
    "    gentrace cat - merge trace files into one\n"
    "\n"
    "SYNOPSIS\n"
    "    gentrace cat [-o OUT] FILE...\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads every FILE (at most one may be '-'), validates every\n"
    "    generation (manifest, CRC32C, events), and writes one file: the\n"
    "    header once, then all generations ordered by start time across the\n"
    "    inputs. A generation present more than once (same session and\n"
    "    generation number) is written once, the first copy in argument\n"
    "    order. Nothing is written if any input is bad.\n"
    "\n"
    "OPTIONS\n"
    "    -o, --output OUT  write to OUT (atomically) instead of stdout; OUT\n"
    "                      may be one of the inputs\n" HELP_EXIT
    "    gentrace cat -o day.gtrace morning.gtrace afternoon.gtrace\n"
    "    gentrace cat a.gtrace b.gtrace | gentrace stat -\n";
