/* format.h: the gentrace trace format (writer and reader). Spec: FORMAT.md.
 *
 * Layout of a file:
 *
 *   header (16 bytes)  "gentrace" | u16le major | u16le minor | u32le 0
 *   generation*        GEN_START record, body records, GEN_END record
 *
 * Every record is  u8 type | uvarint len | payload[len]  (len <= GTP_RECORD_MAX),
 * so a reader can skip record types it does not know. A generation is
 * decodable on its own: string and stack ids restart in every generation.
 * Body records: EVENTS (one thread's batch), STRINGS, STACKS, MODULES, CLOCK
 * (exactly one per generation), in any order. The GEN_END manifest covers the
 * body: record count, EVENTS count, byte count, CRC32C of the body bytes, event
 * count, and the loss ledger.
 *
 * On the wire the agent sends only body records (BATCH frames) and the GEN_END
 * payload; the daemon synthesizes GEN_START from the authenticated HELLO, so a
 * stored generation is GEN_START + body + GEN_END and a file is the header plus
 * any run of stored generations.
 *
 * Memory: everything here works on caller buffers. The only functions that
 * allocate are gtp_wbuf_* (realloc, documented there) and gtp_gen_parse
 * (tables; freed by gtp_gen_fini). All strings handed out are borrowed views
 * (gtp_str) into the input and are NOT NUL-terminated.
 *
 * Version rule: bump GTP_FORMAT_MINOR when adding a record type or event type
 * (old readers skip unknown records; an unknown event type makes that batch
 * undecodable for an old reader, which reports GTP_E_UNKNOWN). Bump
 * GTP_FORMAT_MAJOR when changing the layout of anything that exists; readers
 * refuse other majors.
 */
#ifndef GTP_FORMAT_H
#define GTP_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "gtp_error.h"
#include "text.h"
#include "varint.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_FORMAT_MAGIC "gentrace" /* 8 bytes, no NUL */
#define GTP_FORMAT_MAJOR 1
#define GTP_FORMAT_MINOR 1 /* 1: GOTRACE records */
#define GTP_FILE_HEADER_SIZE 16

/* Limits every decoder enforces (hostile input). */
#define GTP_RECORD_MAX (1u << 20)   /* payload bytes of one record */
#define GTP_BATCH_MAX (64u << 10)   /* EVENTS record: event bytes, header excluded */
#define GTP_IDENT_STR_MAX 1024      /* service, host, agent version, tag k/v */
#define GTP_TAGS_MAX 32             /* tags per session */
#define GTP_STRING_MAX 65535        /* one interned string */
#define GTP_LOG_MAX 8192            /* inline log message bytes */
#define GTP_STACK_DEPTH_MAX 128     /* frames per stack */
#define GTP_BUILDID_MAX 64          /* build-id bytes */
#define GTP_GEN_MAX_BYTES (256u << 20) /* bytes of one whole generation */

/* Record types. Append only (minor bump). */
enum gtp_record_type {
  GTP_REC_GEN_START = 1,
  GTP_REC_EVENTS = 2,
  GTP_REC_STRINGS = 3,
  GTP_REC_STACKS = 4,
  GTP_REC_MODULES = 5,
  GTP_REC_CLOCK = 6,
  GTP_REC_GEN_END = 7,
  GTP_REC_GOTRACE = 8, /* minor 1: a chunk of a Go 1.22+ trace generation */
};

/* Event types: u8 type | uvarint ts delta | args (all uvarint) in this order.
 * "str" args are string-table ids (0 = no string); "s" args are zigzag; LOG's
 * message is inline (uvarint len <= GTP_LOG_MAX, bytes). Append only. */
enum gtp_event_type {
  GTP_EV_REGION_BEGIN = 1,       /* name:str */
  GTP_EV_REGION_END = 2,         /* (none) ends the innermost open region */
  GTP_EV_INSTANT = 3,            /* name:str */
  GTP_EV_COUNTER = 4,            /* name:str value:s */
  GTP_EV_LOG = 5,                /* category:str message:inline */
  GTP_EV_TASK_BEGIN = 6,         /* task:u parent:u name:str */
  GTP_EV_TASK_END = 7,           /* task:u */
  GTP_EV_THREAD_NAME = 8,        /* name:str */
  GTP_EV_REGION_BEGIN_STACK = 9, /* name:str stack:u (stack-table id) */
  GTP_EV_INSTANT_STACK = 10,     /* name:str stack:u */
  GTP_EV_LOG_STACK = 11,         /* category:str stack:u message:inline */
  GTP_EV_LOST = 12,              /* count:u events this thread dropped */
  GTP_EV_COUNT_ /* one past the last */
};

#define GTP_EVENT_ARGS_MAX 3
/* Worst-case encoded size of one event, log message excluded. */
/* type byte, ts delta, args, and the message length varint: 10 bytes each. */
#define GTP_EVENT_MAX (1 + 10 * (1 + GTP_EVENT_ARGS_MAX) + 10)

/* Static description of an event type (for dump, stat, tests). */
typedef struct gtp_event_info {
  const char *name;     /* "region_begin", ... */
  uint8_t nargs;        /* uvarint args, not counting an inline message */
  uint8_t has_message;  /* LOG, LOG_STACK: inline message follows the args */
  uint8_t str_mask;     /* bit i set: arg i is a string id */
  uint8_t signed_mask;  /* bit i set: arg i is zigzag-encoded */
  uint8_t stack_arg;    /* index+1 of the stack-id arg, 0 = none */
} gtp_event_info;

/* NULL for unknown types. */
const gtp_event_info *gtp_event_info_get(uint8_t type);

/* A borrowed byte string (not NUL-terminated). */
typedef struct gtp_str {
  const char *ptr;
  size_t len;
} gtp_str;

/* ---------------------------------------------------------------- records */

typedef struct gtp_tag {
  gtp_str key, value;
} gtp_tag;

/* GEN_START payload:
 *   session[16] | uvarint gen | str service | str host | uvarint pid |
 *   uvarint process_start_ns (unix) | str agent_version | uvarint ntags |
 *   ntags x (str key | str value)
 * where str = uvarint len (<= GTP_IDENT_STR_MAX) | bytes. */
typedef struct gtp_gen_start {
  uint8_t session[16];
  uint64_t gen;
  gtp_str service, host, agent_version;
  uint64_t pid;
  uint64_t process_start_ns;
  uint32_t ntags;
  gtp_tag tags[GTP_TAGS_MAX];
} gtp_gen_start;

/* CLOCK payload: six uvarints, in this order. Ticks are the agent's clock unit
 * (e.g. rdtsc >> shift, or CLOCK_MONOTONIC ns). */
typedef struct gtp_clock {
  uint64_t start_ticks, start_mono_ns, start_real_ns;
  uint64_t end_ticks, end_mono_ns, end_real_ns;
} gtp_clock;

/* GEN_END payload:
 *   uvarint gen | uvarint records | uvarint batches | uvarint bytes |
 *   u32le crc32c | uvarint events | uvarint dropped | uvarint evicted |
 *   uvarint rejected
 * records/bytes/crc cover every body record (type, len and payload bytes) in
 * order; batches = EVENTS records; events = sum of their nevents. The ledger
 * counts events (not LOST markers) lost before they reached this generation:
 * dropped (buffer pool full), evicted (generations pushed out of the agent's
 * spool), rejected (generations the daemon refused). */
typedef struct gtp_gen_end {
  uint64_t gen;
  uint64_t records, batches, bytes;
  uint32_t crc;
  uint64_t events;
  uint64_t dropped, evicted, rejected;
} gtp_gen_end;

/* EVENTS payload header: uvarint gen | uvarint thread | uvarint base_ticks |
 * uvarint nevents, then the events to the end of the payload. The first
 * event's delta is from base_ticks, each next from the previous event. */
typedef struct gtp_batch {
  uint64_t gen, thread, base_ticks, nevents;
  const uint8_t *events; /* borrowed */
  size_t events_len;
} gtp_batch;

/* One module (shared object) for symbolization. */
typedef struct gtp_module {
  gtp_str path;
  uint64_t base, size;
  const uint8_t *build_id; /* borrowed */
  size_t build_id_len;     /* <= GTP_BUILDID_MAX */
} gtp_module;

/* One parsed record header. */
typedef struct gtp_record {
  uint8_t type;
  const uint8_t *payload; /* borrowed, len bytes */
  size_t len;
  size_t size; /* whole record: type + len varint + payload */
} gtp_record;

/* File header. */
void gtp_file_header_write(uint8_t out[GTP_FILE_HEADER_SIZE]);
/* 0, GTP_E_TRUNC (len < 16), GTP_E_MAGIC, or GTP_E_VERSION. */
int gtp_file_header_check(const uint8_t *p, size_t len);

/* Parses the record at p. Returns 0 and fills rec, or GTP_E_TRUNC /
 * GTP_E_TOOBIG (len > GTP_RECORD_MAX) / GTP_E_VARINT / GTP_E_CORRUPT (type 0). */
int gtp_record_parse(const uint8_t *p, size_t len, gtp_record *rec);

/* Payload decoders: 0 or a negative code; trailing bytes are GTP_E_CORRUPT
 * except where noted. Outputs borrow from the payload. */
int gtp_gen_start_decode(const uint8_t *p, size_t len, gtp_gen_start *out);
int gtp_clock_decode(const uint8_t *p, size_t len, gtp_clock *out);
int gtp_gen_end_decode(const uint8_t *p, size_t len, gtp_gen_end *out);
int gtp_batch_decode(const uint8_t *p, size_t len, gtp_batch *out);

/* Table iterators: init on a STRINGS/STACKS/MODULES payload, then call next
 * until it returns 0 (done) or < 0 (error). 1 = one entry produced.
 * STRINGS payload: uvarint count | count x (uvarint id>=1 | uvarint len | bytes)
 * STACKS payload:  uvarint count | count x (uvarint id>=1 | uvarint nframes |
 *                  nframes x uvarint pc)
 * MODULES payload: uvarint count | count x (str path | uvarint base |
 *                  uvarint size | uvarint build_id_len | bytes) */
typedef struct gtp_table_iter {
  const uint8_t *p, *end;
  uint64_t left;
} gtp_table_iter;
int gtp_table_iter_init(gtp_table_iter *it, const uint8_t *p, size_t len);
int gtp_strings_next(gtp_table_iter *it, uint64_t *id, gtp_str *s);
/* pcs receives up to GTP_STACK_DEPTH_MAX entries. */
int gtp_stacks_next(gtp_table_iter *it, uint64_t *id, uint64_t *pcs,
                    size_t *nframes);
int gtp_modules_next(gtp_table_iter *it, gtp_module *m);

/* ----------------------------------------------------------------- events */

typedef struct gtp_event {
  uint8_t type;
  uint64_t ticks;                      /* absolute, agent clock */
  uint64_t args[GTP_EVENT_ARGS_MAX];   /* signed args: cast to int64_t, already un-zigzagged */
  const uint8_t *msg;                  /* LOG/LOG_STACK message, borrowed */
  size_t msg_len;
} gtp_event;

typedef struct gtp_event_iter {
  const uint8_t *p, *end;
  uint64_t ticks;
  uint64_t left; /* events still announced by the batch header */
} gtp_event_iter;

void gtp_event_iter_init(gtp_event_iter *it, const gtp_batch *b);
/* 1 = ev filled, 0 = end of batch (bytes and count both exhausted),
 * < 0 = error (GTP_E_TRUNC, GTP_E_UNKNOWN, GTP_E_VARINT, GTP_E_TOOBIG,
 * GTP_E_MANIFEST if the count and the bytes disagree). */
int gtp_event_next(gtp_event_iter *it, gtp_event *ev);

/* gtp_event_next itself, inline, for the hot loops that decode every event
 * of a generation (gtp_gen_parse's check, the summary at commit): the same
 * checks and results. Always inlined: a call per event, and an event
 * struct in memory, cost the walks a third of their time. */
extern const gtp_event_info gtp_event_infos[GTP_EV_COUNT_];
static inline __attribute__((always_inline)) int
gtp_event_next_inline(gtp_event_iter *it, gtp_event *ev) {
  if (it->left == 0)
    return it->p == it->end ? 0 : GTP_E_MANIFEST;
  if (it->p == it->end)
    return GTP_E_MANIFEST;
  const uint8_t *p = it->p, *end = it->end;
  uint8_t type = *p++;
  if (type == 0 || type >= GTP_EV_COUNT_)
    return GTP_E_UNKNOWN;
  uint64_t delta, v;
  int rc;
  if ((rc = gtp_uvarint_get(&p, end, &delta)) < 0)
    return rc;
  if (delta > UINT64_MAX - it->ticks)
    return GTP_E_CORRUPT; /* time would wrap */
  ev->type = type;
  ev->ticks = it->ticks + delta;
  ev->msg = NULL;
  ev->msg_len = 0;
  ev->args[0] = ev->args[1] = ev->args[2] = 0;
  /* The commonest kinds (B1's counters, regions) without the table's
   * loop: the same reads in the same order as the loop below makes. */
  switch (type) {
  case GTP_EV_REGION_END:
    break;
  case GTP_EV_REGION_BEGIN:
    if ((rc = gtp_uvarint_get(&p, end, &v)) < 0)
      return rc;
    ev->args[0] = v;
    break;
  case GTP_EV_COUNTER:
    if ((rc = gtp_uvarint_get(&p, end, &v)) < 0)
      return rc;
    ev->args[0] = v;
    if ((rc = gtp_uvarint_get(&p, end, &v)) < 0)
      return rc;
    ev->args[1] = (uint64_t)gtp_unzigzag(v);
    break;
  default: {
    const gtp_event_info *info = &gtp_event_infos[type];
    for (unsigned i = 0; i < info->nargs; i++) {
      if ((rc = gtp_uvarint_get(&p, end, &v)) < 0)
        return rc;
      ev->args[i] =
          (info->signed_mask >> i & 1) ? (uint64_t)gtp_unzigzag(v) : v;
    }
    if (info->has_message) {
      uint64_t n;
      if ((rc = gtp_uvarint_get(&p, end, &n)) < 0)
        return rc;
      if (n > GTP_LOG_MAX)
        return GTP_E_TOOBIG;
      if ((size_t)(end - p) < n)
        return GTP_E_TRUNC;
      ev->msg = p;
      ev->msg_len = (size_t)n;
      p += n;
    }
    break;
  }
  }
  it->p = p;
  it->ticks = ev->ticks;
  it->left--;
  return 1;
}

/* A run of COUNTER events of one name (gtp_event_counter_run): B1's
 * events, and most of any metrics-heavy trace. */
typedef struct gtp_counter_run {
  uint64_t name; /* string id */
  uint64_t n;    /* events (>= 1) */
  int64_t first; /* the first event's value, and its ticks */
  uint64_t first_ticks;
  int64_t min, max;
  int64_t last; /* the last event's value, and its ticks */
  uint64_t last_ticks;
} gtp_counter_run;

/* When the next event of it is a COUNTER, decodes it and every COUNTER of
 * the same name right after it, each with gtp_event_next's checks in its
 * order, into *run, and returns 1 (it stands after the run). 0: the next
 * event is no counter (or the batch is at its end): it is unchanged, for
 * gtp_event_next. < 0: gtp_event_next's error for a counter of the run.
 * One loop with no event struct and no table: the walks that check or
 * summarize every event (gtp_gen_parse, the summary) decode counters
 * with it. */
static inline __attribute__((always_inline)) int
gtp_event_counter_run(gtp_event_iter *it, gtp_counter_run *run) {
  const uint8_t *p = it->p, *end = it->end, *q;
  uint64_t ticks = it->ticks, left = it->left, d, id, v, name;
  int64_t x, mn, mx;
  int rc;
  if (left == 0 || p == end || *p != GTP_EV_COUNTER)
    return 0;
  /* The first counter names the run; the loop takes the same name only
   * (no per-event test of "first"). Reads in gtp_event_next's order. */
  q = p + 1;
  if ((rc = gtp_uvarint_get(&q, end, &d)) < 0)
    return rc;
  if (d > UINT64_MAX - ticks)
    return GTP_E_CORRUPT; /* time would wrap */
  if ((rc = gtp_uvarint_get(&q, end, &name)) < 0 ||
      (rc = gtp_uvarint_get(&q, end, &v)) < 0)
    return rc;
  ticks += d;
  x = mn = mx = gtp_unzigzag(v);
  run->name = name;
  run->first = x;
  run->first_ticks = ticks;
  left--;
  p = q;
  while (left > 0 && p != end && *p == GTP_EV_COUNTER) {
    q = p + 1;
    if ((rc = gtp_uvarint_get(&q, end, &d)) < 0)
      return rc;
    if (d > UINT64_MAX - ticks)
      return GTP_E_CORRUPT;
    if ((rc = gtp_uvarint_get(&q, end, &id)) < 0)
      return rc;
    if (id != name)
      break; /* another name: the next run */
    if ((rc = gtp_uvarint_get(&q, end, &v)) < 0)
      return rc;
    ticks += d;
    x = gtp_unzigzag(v);
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
    left--;
    p = q;
  }
  run->n = it->left - left;
  run->min = mn;
  run->max = mx;
  run->last = x;
  run->last_ticks = ticks;
  it->p = p;
  it->ticks = ticks;
  it->left = left;
  return 1;
}

/* Encodes ev (type, ticks, args, msg) at out with delta from prev_ticks
 * (ev->ticks must be >= prev_ticks). out needs GTP_EVENT_MAX + msg_len bytes.
 * Returns bytes written, or GTP_E_UNKNOWN / GTP_E_TOOBIG (message too long). */
int gtp_event_encode(uint8_t *out, const gtp_event *ev, uint64_t prev_ticks);

/* ----------------------------------------------------------------- writer */

/* The output buffer, gtp_wbuf, lives in text.h (included above). */

/* Record writers: append one whole record (type, len, payload). They return
 * b->err after writing (0 on success), GTP_E_TOOBIG if a field is over its
 * limit (nothing appended then). */
int gtp_put_file_header(gtp_wbuf *b);
int gtp_put_gen_start(gtp_wbuf *b, const gtp_gen_start *s);
/* A GEN_START in two steps, for a writer that sends many generations of
 * one session: gtp_put_gen_start_ident appends the identity part of s's
 * payload (the bytes after gen: service through the tags, the same in
 * every generation of the session; gen and session are not read), once;
 * gtp_put_gen_start_with then appends, per generation, the record
 * gtp_put_gen_start would write for that session and gen, from those bytes
 * (copied, not re-encoded, so no string is measured again). */
int gtp_put_gen_start_ident(gtp_wbuf *b, const gtp_gen_start *s);
int gtp_put_gen_start_with(gtp_wbuf *b, const uint8_t session[16],
                           uint64_t gen, const uint8_t *ident,
                           size_t ident_len);
int gtp_put_clock(gtp_wbuf *b, const gtp_clock *c);
int gtp_put_gen_end(gtp_wbuf *b, const gtp_gen_end *e);
/* EVENTS record around already-encoded events (events_len <= GTP_BATCH_MAX). */
int gtp_put_batch(gtp_wbuf *b, uint64_t gen, uint64_t thread,
                  uint64_t base_ticks, uint64_t nevents, const uint8_t *events,
                  size_t events_len);
int gtp_put_strings(gtp_wbuf *b, const uint64_t *ids, const gtp_str *strs,
                    size_t n);
int gtp_put_stacks(gtp_wbuf *b, const uint64_t *ids,
                   const uint64_t *const *pcs, const size_t *depths, size_t n);
int gtp_put_modules(gtp_wbuf *b, const gtp_module *mods, size_t n);

/* GEN_END payload alone (the wire's GEN_END frame carries it). */
int gtp_gen_end_encode(gtp_wbuf *b, const gtp_gen_end *e);

/* Walks body records [p, p+len) and fills the manifest fields of e (records,
 * batches, bytes, crc, events); gen and the ledger are left alone. Returns 0
 * or the first record/batch-header error. Used by the agent to seal and by
 * the daemon to validate. */
int gtp_manifest_compute(const uint8_t *p, size_t len, gtp_gen_end *e);
/* 0 if the manifest fields of a and b agree, else GTP_E_MANIFEST (or GTP_E_CRC
 * when only the CRC differs). */
int gtp_manifest_check(const gtp_gen_end *want, const gtp_gen_end *got);

/* ------------------------------------------------------ generation reader */

typedef struct gtp_string_ent {
  uint64_t id;
  gtp_str s;
} gtp_string_ent;

typedef struct gtp_stack_ent {
  uint64_t id;
  const uint8_t *frames; /* borrowed: nframes uvarints */
  size_t frames_len;
  uint32_t nframes;
} gtp_stack_ent;

/* One whole generation, parsed and validated. Borrows the input bytes, which
 * must outlive it; owns the table arrays. */
typedef struct gtp_gen {
  gtp_gen_start start;
  gtp_clock clock;
  gtp_gen_end end;
  const uint8_t *base; /* first byte of GEN_START */
  size_t size;         /* through the last byte of GEN_END */
  const uint8_t *body; /* first body record */
  size_t body_len;
  gtp_string_ent *strings; /* sorted by id; owned */
  size_t nstrings;
  gtp_stack_ent *stacks; /* sorted by id; owned */
  size_t nstacks;
  gtp_module *modules; /* owned array, entries borrow input */
  size_t nmodules;
} gtp_gen;

/* Parses the generation starting at p (a GEN_START record) through its
 * GEN_END; validates the manifest (counts, bytes, CRC32C), that the GEN_END
 * and every EVENTS gen equal GEN_START's, exactly one CLOCK, unique ids.
 * *consumed = bytes of the generation. Allocates the tables (bounded by the
 * input size); on error nothing stays allocated. */
int gtp_gen_parse(const uint8_t *p, size_t len, gtp_gen *g, size_t *consumed);
/* The same without decoding each event of each batch (framing, manifest,
 * CRC and tables are checked as above): for a caller that decodes every
 * event itself with gtp_event_next, which checks each one, so a bad event
 * is still an error, only later. gentraced's loop parses lazily and its
 * store checks the events in the walk that summarizes them
 * (gtp_summary_compute_check): one decode per event, off the loop. */
int gtp_gen_parse_lazy(const uint8_t *p, size_t len, gtp_gen *g,
                       size_t *consumed);
/* gtp_gen_parse (check_events 1) or gtp_gen_parse_lazy (0) for a caller
 * that wrote the generation's GEN_START and GEN_END records itself from
 * *start and *end, which are therefore not decoded back: p[0, body_off) is
 * the GEN_START record, the body's body_len bytes follow, then the GEN_END
 * record through p[len - 1]. Every check of the body is made as there (CRC,
 * manifest against *end, gens, one CLOCK, unique ids, the body holds no
 * GEN_START or GEN_END). g->start borrows start's strings, which must
 * outlive g. gentraced's loop: the GEN_START comes from
 * the checked HELLO and the GEN_END from the decoded GEN_END frame. */
int gtp_gen_parse_known(const uint8_t *p, size_t len,
                        const gtp_gen_start *start, size_t body_off,
                        size_t body_len, const gtp_gen_end *end,
                        int check_events, gtp_gen *g);
/* The checks of gtp_gen_parse_known, in the same order with the same
 * errors, for a caller that keeps nothing of the parse but its CLOCK: the
 * body [body, body + body_len) of generation gen with its GEN_END end
 * (GEN_START and GEN_END being the caller's, as there). No gtp_gen to
 * fill and free: a small generation's tables are checked in scratch room
 * on the stack (no allocation); larger ones are allocated and freed. 0
 * with *clock set, or the error. */
int gtp_gen_verify_known(const uint8_t *body, size_t body_len, uint64_t gen,
                         const gtp_gen_end *end, int check_events,
                         gtp_clock *clock);
/* The event check gtp_gen_parse makes and gtp_gen_parse_lazy skips, on a
 * lazily parsed generation: 0 when every event of every batch decodes (an
 * unknown event type ends its batch without error, as in gtp_gen_parse),
 * else the first error. No allocation. */
int gtp_gen_check_events(const gtp_gen *g);
void gtp_gen_fini(gtp_gen *g);

/* Lookups; an unknown id gives {NULL, 0} / -GTP_E_NOTFOUND. */
gtp_str gtp_gen_string(const gtp_gen *g, uint64_t id);
/* The string of id in s[0..n), sorted by id (a generation's, a Go
 * generation's or an old Go trace's table); {NULL, 0} if absent. */
gtp_str gtp_strings_find(const gtp_string_ent *s, size_t n, uint64_t id);
const gtp_stack_ent *gtp_gen_stack(const gtp_gen *g, uint64_t id);

/* Agent ticks -> unix ns (wall clock), using the CLOCK record: the monotonic
 * rate over the generation, anchored at start_real_ns. Ticks outside the
 * clock's span are extrapolated. */
int64_t gtp_gen_wall_ns(const gtp_gen *g, uint64_t ticks);

/* Batch iteration over a parsed generation: call with *cursor = 0 first;
 * returns 1 with b filled, 0 at the end. */
int gtp_gen_next_batch(const gtp_gen *g, size_t *cursor, gtp_batch *b);

/* Whole-file walk: checks the header then yields generations one at a time.
 * offset is where the next generation starts (for error messages). */
typedef struct gtp_file_reader {
  const uint8_t *data;
  size_t len;
  size_t offset;
} gtp_file_reader;

int gtp_file_reader_init(gtp_file_reader *r, const uint8_t *data, size_t len);
/* 1 = g filled (caller calls gtp_gen_fini), 0 = clean end of file,
 * < 0 = error at r->offset. Unknown top-level records between generations
 * are skipped. */
int gtp_file_reader_next(gtp_file_reader *r, gtp_gen *g);

/* Formats a session id as 32 lowercase hex digits plus NUL. */
void gtp_session_hex(const uint8_t session[16], char out[33]);
/* Parses 32 hex digits; 0 or GTP_E_BADARG. */
int gtp_session_parse(const char *hex, uint8_t session[16]);

#ifdef __cplusplus
}
#endif
#endif /* GTP_FORMAT_H */
