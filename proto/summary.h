/* summary.h: the summary of one generation, computed from its bytes alone.
 *
 * What it holds (per generation):
 *   - per region name and per task name: count, total, min and max duration
 *     and a log-scaled duration histogram (GTP_SUM_BUCKETS buckets);
 *   - per counter name: number of samples, min, max and last value;
 *   - per log category: number of log events;
 *   - the long spans: every region and task whose duration is at least
 *     span_floor_ns, as (kind, name, thread, start, duration).
 *
 * Histogram: bucket 0 holds durations under 1 us; then two buckets per power
 * of two of microseconds, [2^k, 1.5*2^k) us and [1.5*2^k, 2^(k+1)) us, for
 * k = 0..32 (up to 2^33 us, about 2.4 h), in buckets 1..66; bucket 67 holds
 * anything longer. A bucket's bounds are gtp_sum_bucket_lo/hi.
 *
 * The span rule (what makes search exact): span_floor_ns starts at
 * GTP_SUM_SPAN_FLOOR_NS (1 ms). If a generation has more than GTP_SUM_SPANS_MAX
 * spans at or over it, only the GTP_SUM_SPANS_MAX longest are kept and
 * span_floor_ns is raised to one more than the longest span left out. So in
 * every case: EVERY span of the generation with duration >= span_floor_ns is
 * in spans[]. A search for min >= span_floor_ns is answered from spans[];
 * for a smaller min, the searcher decodes the generations whose per-name row
 * says a matching span may exist (max_ns >= min and min_ns <= max).
 *
 * Generation edges: a region (or task) is summarized in the generation where
 * both its begin and end are. A region still open when its generation ends
 * is counted in open_at_end and listed in opens[]; an END with no begin in
 * the generation (its begin was in an earlier one) is counted in
 * unmatched_ends and listed in ends[]. gtp_summary_carry pairs them across
 * consecutive generations of a session, counting the span where it ends.
 *
 * Memory: gtp_summary_compute allocates arrays bounded by the generation's
 * size (at most a few words per event and per string); gtp_summary_fini
 * frees them. Names are borrowed from the generation (the input bytes must
 * outlive the summary). Pure: no I/O, no globals; hostile-safe: every event
 * goes through the bounded decoders of format.h.
 */
#ifndef GTP_SUMMARY_H
#define GTP_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_SUM_BUCKETS 68
#define GTP_SUM_SPAN_FLOOR_NS UINT64_C(1000000) /* 1 ms */
#define GTP_SUM_SPANS_MAX 4096                  /* per generation */
#define GTP_SUM_DEPTH_MAX 4096 /* region nesting tracked per thread */
#define GTP_SUM_OPEN_MAX 1024  /* opens[] and ends[] kept per generation */
/* Room for gtp_sum_hist_encode's output: 1 + 10 bytes per bucket. */
#define GTP_SUM_HIST_MAX (GTP_SUM_BUCKETS * 11)

enum gtp_sum_kind { GTP_SUM_REGION = 1, GTP_SUM_TASK = 2 };

typedef struct gtp_sum_name {
  uint8_t kind; /* GTP_SUM_REGION or GTP_SUM_TASK */
  gtp_str name; /* borrowed; empty for unnamed */
  uint64_t count, total_ns, min_ns, max_ns;
  uint64_t hist[GTP_SUM_BUCKETS];
} gtp_sum_name;

typedef struct gtp_sum_counter {
  gtp_str name;
  uint64_t count;
  int64_t min, max, last;
  uint64_t last_ticks; /* when last was sampled */
} gtp_sum_counter;

typedef struct gtp_sum_log {
  gtp_str name; /* the category */
  uint64_t count;
} gtp_sum_log;

typedef struct gtp_sum_span {
  uint32_t name; /* index into names[] (kind and name there) */
  uint64_t thread;
  int64_t start_ns; /* unix ns */
  uint64_t dur_ns;
  int carried; /* 1: begun in an earlier generation (gtp_summary_carry) */
} gtp_sum_span;

/* A region or task open when the generation ended: key is the thread of a
 * region, the task id of a task. In stack order per thread (outermost
 * first), threads ascending, then tasks. */
typedef struct gtp_sum_open {
  uint8_t kind;
  gtp_str name;
  uint64_t key, thread;
  int64_t start_ns;
} gtp_sum_open;

/* An END with no begin in its generation, in the order met per thread. */
typedef struct gtp_sum_end {
  uint8_t kind;
  uint64_t key; /* thread (region) or task id (task) */
  int64_t end_ns;
} gtp_sum_end;

typedef struct gtp_summary {
  gtp_sum_name *names;
  size_t nnames;
  gtp_sum_counter *counters;
  size_t ncounters;
  gtp_sum_log *logs;
  size_t nlogs;
  gtp_sum_span *spans; /* longest first */
  size_t nspans;
  uint64_t span_floor_ns; /* every span >= this is in spans[] */
  uint64_t open_at_end;   /* regions/tasks begun here, not ended here */
  uint64_t unmatched_ends;
  gtp_sum_open *opens; /* the open_at_end ones (at most GTP_SUM_OPEN_MAX) */
  size_t nopens;
  gtp_sum_end *ends; /* the unmatched ones (at most GTP_SUM_OPEN_MAX) */
  size_t nends;
} gtp_summary;

/* Summarizes a parsed generation. 0, -ENOMEM, or a decode error of the
 * events (the generation is then not summarized; nothing stays allocated). */
int gtp_summary_compute(const gtp_gen *g, gtp_summary *out);
/* The same with another span rule: spans >= floor_ns, at most spans_max
 * (the search's fallback decodes a generation with floor_ns = its min and
 * spans_max = SIZE_MAX, which keeps every matching span). */
int gtp_summary_compute_spans(const gtp_gen *g, uint64_t floor_ns,
                              size_t spans_max, gtp_summary *out);
/* gtp_summary_compute on a generation parsed with gtp_gen_parse_lazy, and in
 * the same walk the check gtp_gen_parse makes of every event (one decode
 * per event, not two: what gentraced's store runs). *check receives 0 when
 * gtp_gen_parse would accept the events, else its error: the generation is
 * invalid, out is empty and that error is returned. With valid events it
 * returns what gtp_summary_compute returns for the parsed generation: 0,
 * GTP_E_UNKNOWN (an event type of a newer minor; no summary), or -ENOMEM
 * (no summary; *check then comes from gtp_gen_check_events). */
int gtp_summary_compute_check(const gtp_gen *g, gtp_summary *out, int *check);
void gtp_summary_fini(gtp_summary *s);

/* Spans across a generation edge. prev[0..nprev) are the regions and tasks
 * still open after the session's previous generation (its opens, plus what
 * it carried and did not close). Pairs them with cur's unmatched ends: a
 * region END closes the innermost open region of its thread, a task END the
 * open task with its id. Each pair is added to cur as a span (its name's
 * statistics and, whatever its length, spans[] with carried = 1: the
 * searcher cannot find it by decoding one generation). Names of prev are
 * borrowed: they must outlive cur. *left receives malloc'd the entries that
 * stay open after cur (prev's unclosed ones, then cur's opens), at most
 * GTP_SUM_OPEN_MAX; *nleft its length. 0 or -ENOMEM. */
int gtp_summary_carry(gtp_summary *cur, const gtp_sum_open *prev, size_t nprev,
                      gtp_sum_open **left, size_t *nleft);

/* Histogram bucket of a duration, and a bucket's bounds [lo, hi) in ns
 * (hi of the last bucket is UINT64_MAX). */
unsigned gtp_sum_bucket(uint64_t dur_ns);
uint64_t gtp_sum_bucket_lo(unsigned b);
uint64_t gtp_sum_bucket_hi(unsigned b);

/* Compact histogram: (u8 bucket, uvarint count) for each non-empty bucket,
 * buckets increasing. encode returns the bytes written (out needs
 * GTP_SUM_HIST_MAX). decode ADDS the counts into hist (so histograms of many
 * generations merge); 0 or GTP_E_CORRUPT. */
size_t gtp_sum_hist_encode(const uint64_t hist[GTP_SUM_BUCKETS], uint8_t *out);
int gtp_sum_hist_decode(const uint8_t *p, size_t len,
                        uint64_t hist[GTP_SUM_BUCKETS]);

/* The duration at quantile q (0..1) of a histogram: the upper bound of the
 * bucket holding it (clamped to max_ns when given, max_ns 0 = none); 0 for an
 * empty histogram. */
uint64_t gtp_sum_quantile(const uint64_t hist[GTP_SUM_BUCKETS], double q,
                          uint64_t max_ns);

#ifdef __cplusplus
}
#endif
#endif /* GTP_SUMMARY_H */
