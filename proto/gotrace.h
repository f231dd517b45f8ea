/* gotrace.h: reader of Go 1.22+ execution-trace generations (the bytes of
 * GOTRACE records, FORMAT.md "Reading GOTRACE").
 *
 * A Go generation is a run of batches: EvEventBatch headers (per-M event
 * streams), string-table, stack-table, CPU-sample and sync (frequency, clock
 * snapshot) batches, experimental batches (Go 1.23+) and, from Go 1.26, a
 * one-byte end-of-generation marker. gtp_go_parse validates the whole
 * generation once (every batch header, every event of every event batch,
 * the string table) so that iteration afterwards cannot fail, and keeps
 * borrowed views: the input must outlive the gtp_go_gen.
 *
 * Iteration merges the per-M event batches by timestamp (a k-way merge, as
 * Go's own reader does) and tracks which goroutine each M is running, so
 * every event comes with its goroutine: user regions, tasks and logs land on
 * the goroutine that wrote them, task ends on whatever goroutine ended them.
 *
 * Versions: the event table of Go 1.22 is a prefix of 1.23's (coroutine
 * switch, status with stack, experimental batches), of 1.25's (sync batch
 * with a clock snapshot) and of 1.26's (end-of-generation marker); event
 * numbers and argument counts never changed. Go 1.24 writes "go 1.23 trace".
 *
 * Memory: the tables are bounded by the input (one entry per at least 3
 * input bytes); the iterator holds one cursor per event batch.
 */
#ifndef GTP_GOTRACE_H
#define GTP_GOTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The gentrace body record that carries Go trace bytes (GTP_REC_GOTRACE). */
#define GTP_GO_RECORD_TYPE 8
/* Go trace versions read here (the NN of "go 1.NN trace"). */
#define GTP_GO_MIN_VERSION 22
#define GTP_GO_MAX_VERSION 26
/* Go's own limits (tracev2): batch data, string bytes, frames. */
#define GTP_GO_BATCH_MAX (64u << 10)
#define GTP_GO_STRING_MAX 1024
#define GTP_GO_FRAMES_MAX 128
#define GTP_GO_ARGS_MAX 5 /* arguments after the timestamp delta */

/* What an event means to a viewer; everything else is GTP_GO_OTHER (the
 * raw type and args are still given). */
enum gtp_go_kind {
  GTP_GO_OTHER = 0,
  GTP_GO_REGION_BEGIN, /* name */
  GTP_GO_REGION_END,   /* name */
  GTP_GO_TASK_BEGIN,   /* task, parent, name */
  GTP_GO_TASK_END,     /* task */
  GTP_GO_LOG,          /* task, name = key, value = message */
  GTP_GO_GC_BEGIN,     /* global: a GC cycle starts */
  GTP_GO_GC_END,
  GTP_GO_STW_BEGIN, /* name = kind ("GC mark termination", ...) */
  GTP_GO_STW_END,
  GTP_GO_KIND_COUNT_
};

typedef struct gtp_go_batch {
  const uint8_t *data; /* events, borrowed */
  size_t len;
  uint64_t m;    /* the M (OS thread) that wrote it */
  uint64_t base; /* timestamp the first delta is taken from */
  size_t offset; /* of its header in the input, for messages */
} gtp_go_batch;

typedef struct gtp_go_gen {
  unsigned version;  /* 22..26 */
  uint64_t gen;      /* Go's generation number */
  uint64_t freq;     /* timestamp units per second */
  bool has_snapshot; /* Go 1.25+: wall clock at snap_ts */
  bool end_marker;   /* Go 1.26: EvEndOfGeneration seen */
  uint64_t snap_ts, snap_mono;
  int64_t snap_wall_ns;
  uint64_t min_ts, max_ts;            /* over all timed events (0, 0 if none) */
  uint64_t nevents;                   /* timed events in event batches */
  uint64_t kinds[GTP_GO_KIND_COUNT_]; /* events per kind */
  gtp_string_ent *strings; /* sorted by id; owned array, borrowed bytes */
  size_t nstrings;
  gtp_go_batch *batches; /* event batches in input order; owned */
  size_t nbatches;
  /* Wall-clock mapping: wall(ts) = anchor_wall + (ts - anchor_ts) in ns. */
  int64_t anchor_wall;
  uint64_t anchor_ts;
} gtp_go_gen;

/* Parses one Go generation's bytes (no 16-byte file header). version is the
 * NN of go_version 1.NN (24 reads as 23; others outside 22..26 are
 * GTP_E_VERSION). Returns 0, or a negative code with *err_off (if not NULL)
 * the offset of the batch or event that failed: GTP_E_TRUNC, GTP_E_VARINT,
 * GTP_E_TOOBIG (batch, string or stack over Go's limits), GTP_E_UNKNOWN
 * (event type not in the version's table), GTP_E_GEN (batches of several
 * generations, or generation 0), GTP_E_CORRUPT (anything else malformed:
 * duplicate string id, no frequency, timestamp overflow...). On error
 * nothing stays allocated. The wall clock is anchored at the clock snapshot
 * when there is one, else at Unix time 0 until gtp_go_set_clock. */
int gtp_go_parse(const uint8_t *p, size_t len, unsigned version, gtp_go_gen *g,
                 size_t *err_off);
void gtp_go_fini(gtp_go_gen *g);

/* Anchors a generation without a clock snapshot (Go 1.22-1.24) with the
 * gentrace CLOCK record beside it: its latest event maps to end_real_ns.
 * A generation with a snapshot keeps it (the traced process's own clock). */
void gtp_go_set_clock(gtp_go_gen *g, const gtp_clock *c);

/* Go timestamp -> unix ns (saturating). */
int64_t gtp_go_wall_ns(const gtp_go_gen *g, uint64_t ts);
/* Go timestamp difference -> ns. */
int64_t gtp_go_ns(const gtp_go_gen *g, int64_t dts);

/* String-table lookup; {NULL, 0} for an unknown id or 0. */
gtp_str gtp_go_string(const gtp_go_gen *g, uint64_t id);

/* Parses "1.NN" (a go_version tag) or "go 1.NN trace"-style text into NN;
 * 0 if it is neither. */
unsigned gtp_go_version_parse(const char *s, size_t n);

/* ------------------------------------------------------------ iteration */

typedef struct gtp_go_event {
  uint8_t type; /* Go event type (tracev2 numbering) */
  uint8_t kind; /* enum gtp_go_kind */
  uint64_t ts;  /* Go timestamp */
  int64_t wall_ns;
  uint64_t m; /* M whose batch holds the event */
  uint64_t g; /* goroutine running on that M, 0 = none known */
  uint64_t args[GTP_GO_ARGS_MAX]; /* raw, after the delta */
  uint64_t task, parent;          /* tasks, regions and logs */
  gtp_str name;  /* region/task name, log key, STW kind (may be empty) */
  gtp_str value; /* log message */
} gtp_go_event;

typedef struct gtp_go_cursor gtp_go_cursor;
typedef struct gtp_go_mstate gtp_go_mstate;

typedef struct gtp_go_iter {
  const gtp_go_gen *g;
  gtp_go_cursor *cur; /* one per non-empty event batch */
  gtp_go_cursor **heap;
  size_t nheap;
  gtp_go_mstate *ms; /* M -> running goroutine, open addressing */
  size_t ms_cap;
} gtp_go_iter;

/* 0 or -ENOMEM. */
int gtp_go_iter_init(gtp_go_iter *it, const gtp_go_gen *g);
/* 1 = ev filled, 0 = end. Never fails on a parsed generation. */
int gtp_go_next(gtp_go_iter *it, gtp_go_event *ev);
void gtp_go_iter_fini(gtp_go_iter *it);

/* --------------------------------------- GOTRACE inside a gentrace gen */

/* Whether a parsed gentrace generation carries GOTRACE records (the
 * format=go tag alone does not count: a Go session's ledger-only generation
 * has no Go bytes and reads as an empty native one). */
bool gtp_gen_is_go(const gtp_gen *g);
/* The Go version of a gentrace generation (its go_version tag), 0 if none. */
unsigned gtp_gen_go_version(const gtp_gen *g);
/* The concatenated GOTRACE payloads of g: borrowed when there is one
 * record (*owned = NULL), else copied into malloc'd *owned (the caller
 * frees it). Returns 0 or -ENOMEM. */
int gtp_gen_go_bytes(const gtp_gen *g, const uint8_t **p, size_t *len,
                     uint8_t **owned);

/* ------------------------------------------------------ Go trace files */

#define GTP_GO_HEADER_SIZE 16 /* "go 1.NN trace\0\0\0" */

/* The NN of a Go trace file header "go 1.NN trace" (any version, old
 * format included), or GTP_E_TRUNC / GTP_E_MAGIC. */
int gtp_go_file_version(const uint8_t *p, size_t len);

/* Finds where the first generation of the Go 1.22+ trace bytes in[0..len)
 * (after the file header) ends: *gen_len bytes (batches until one of
 * another generation; for 1.26, through the end-of-generation marker) and
 * its number *gen. Checks batch headers only. Returns 0, or GTP_E_TRUNC,
 * GTP_E_CORRUPT, GTP_E_TOOBIG, GTP_E_VARINT, GTP_E_GEN (a 1.26 generation
 * interleaved with another) with *gen_len the offset reached. */
int gtp_go_split(const uint8_t *in, size_t len, unsigned version,
                 size_t *gen_len, uint64_t *gen);

#ifdef __cplusplus
}
#endif
#endif /* GTP_GOTRACE_H */
