/* fuzz_trace.c: the trace reader (tools, web export, daemon validation) on
 * hostile bytes.
 *
 * The input is read three ways: as a whole file (gtp_file_reader), as one
 * bare generation (gtp_gen_parse at offset 0, and after a file header if
 * there is one), and record by record. Every generation that parses has all
 * its batches and events walked, every string and stack id an event names
 * looked up, and its manifest recomputed: a generation gtp_gen_parse accepted
 * must match its own GEN_END (oracle), and everything handed out must lie
 * inside the input; the summary's one walk over the events must reach
 * gtp_gen_parse's verdict (oracle), and so must gtp_gen_parse_known given
 * the generation's own GEN_START and GEN_END (oracle). */
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "summary.h"
#include "varint.h"

static int in(const void *q, size_t qn, const uint8_t *p, size_t n) {
  const uint8_t *x = q;
  return qn == 0 || (x >= p && x <= p + n && qn <= (size_t)(p + n - x));
}

static void walk_stack(const gtp_stack_ent *st, const uint8_t *data,
                       size_t size) {
  fuzz_check(in(st->frames, st->frames_len, data, size));
  fuzz_check(st->nframes <= GTP_STACK_DEPTH_MAX);
  const uint8_t *p = st->frames, *end = st->frames + st->frames_len;
  for (uint32_t i = 0; i < st->nframes; i++) {
    uint64_t pc;
    fuzz_check(gtp_uvarint_get(&p, end, &pc) == 0);
  }
}

static void walk_gen(const gtp_gen *g, const uint8_t *data, size_t size) {
  fuzz_check(in(g->base, g->size, data, size));
  fuzz_check(in(g->body, g->body_len, g->base, g->size));
  fuzz_check(g->start.ntags <= GTP_TAGS_MAX);
  fuzz_check(g->end.gen == g->start.gen);

  /* Oracle: the manifest of the accepted body is the one GEN_END claims. */
  gtp_gen_end m = g->end;
  fuzz_check(gtp_manifest_compute(g->body, g->body_len, &m) == 0);
  fuzz_check(gtp_manifest_check(&g->end, &m) == 0);

  for (size_t i = 0; i < g->nstrings; i++) {
    fuzz_check(in(g->strings[i].s.ptr, g->strings[i].s.len, data, size));
    if (i > 0)
      fuzz_check(g->strings[i - 1].id < g->strings[i].id);
    gtp_str s = gtp_gen_string(g, g->strings[i].id);
    fuzz_check(s.ptr == g->strings[i].s.ptr && s.len == g->strings[i].s.len);
  }
  for (size_t i = 0; i < g->nstacks; i++) {
    walk_stack(&g->stacks[i], data, size);
    if (i > 0)
      fuzz_check(g->stacks[i - 1].id < g->stacks[i].id);
    fuzz_check(gtp_gen_stack(g, g->stacks[i].id) == &g->stacks[i]);
  }
  for (size_t i = 0; i < g->nmodules; i++)
    fuzz_check(
        in(g->modules[i].path.ptr, g->modules[i].path.len, data, size) &&
        in(g->modules[i].build_id, g->modules[i].build_id_len, data, size));

  size_t cursor = 0;
  gtp_batch b;
  uint64_t events = 0, batches = 0;
  while (gtp_gen_next_batch(g, &cursor, &b) == 1) {
    batches++;
    fuzz_check(b.gen == g->start.gen);
    fuzz_check(in(b.events, b.events_len, g->body, g->body_len));
    gtp_event_iter it;
    gtp_event ev;
    int rc;
    gtp_event_iter_init(&it, &b);
    while ((rc = gtp_event_next(&it, &ev)) == 1) {
      events++;
      const gtp_event_info *info = gtp_event_info_get(ev.type);
      fuzz_check(info != NULL);
      fuzz_check(in(ev.msg, ev.msg_len, b.events, b.events_len));
      fuzz_check(ev.msg_len <= GTP_LOG_MAX);
      for (unsigned a = 0; a < info->nargs; a++) {
        if (info->str_mask & (1u << a)) {
          gtp_str s = gtp_gen_string(g, ev.args[a]);
          fuzz_check(in(s.ptr, s.len, data, size));
        }
        if (info->stack_arg == a + 1) {
          const gtp_stack_ent *st = gtp_gen_stack(g, ev.args[a]);
          if (st)
            walk_stack(st, data, size);
        }
      }
      (void)gtp_gen_wall_ns(g, ev.ticks);
    }
    fuzz_check(rc <= 0);
  }
  fuzz_check(batches == g->end.batches);
  /* The events actually decodable can be fewer (a bad event stops its
   * batch), never more than the manifest counts. */
  fuzz_check(events <= g->end.events);
}

/* Oracle: gtp_gen_parse_known, given the GEN_START and GEN_END decoded from
 * the records (as gentraced's loop knows them, having written them), accepts
 * exactly the generations gtp_gen_parse accepts, with the same tables. p
 * holds a GEN_START record through the first GEN_END after it; full_rc and
 * full are gtp_gen_parse's verdict and result on the same bytes. */
static void check_known_ends(const uint8_t *p, size_t n, int full_rc,
                             const gtp_gen *full) {
  gtp_record rec;
  gtp_gen_start st;
  gtp_gen_end e;
  if (gtp_record_parse(p, n, &rec) < 0 || rec.type != GTP_REC_GEN_START ||
      gtp_gen_start_decode(rec.payload, rec.len, &st) < 0)
    return;
  size_t body_off = rec.size, off = rec.size;
  for (;;) {
    if (off >= n || gtp_record_parse(p + off, n - off, &rec) < 0 ||
        rec.type == GTP_REC_GEN_START)
      return; /* no GEN_END the loop could have written */
    if (rec.type == GTP_REC_GEN_END)
      break;
    off += rec.size;
  }
  if (gtp_gen_end_decode(rec.payload, rec.len, &e) < 0)
    return;
  gtp_gen k;
  int rc = gtp_gen_parse_known(p, off + rec.size, &st, body_off, off - body_off,
                               &e, 1, &k);
  fuzz_check((rc == 0) == (full_rc == 0));
  if (rc == 0) {
    fuzz_check(k.size == full->size && k.body == full->body &&
               k.body_len == full->body_len);
    fuzz_check(k.nstrings == full->nstrings && k.nstacks == full->nstacks &&
               k.nmodules == full->nmodules);
    fuzz_check(k.clock.start_real_ns == full->clock.start_real_ns &&
               k.clock.end_real_ns == full->clock.end_real_ns);
    gtp_gen_fini(&k);
  } else {
    fuzz_check(k.strings == NULL && k.stacks == NULL && k.modules == NULL);
  }
}

static void parse_gen_at(const uint8_t *data, size_t size, size_t off) {
  gtp_gen g;
  size_t consumed = 0;
  if (off > size)
    return;
  int rc = gtp_gen_parse(data + off, size - off, &g, &consumed);
  check_known_ends(data + off, size - off, rc, &g);
  if (rc == 0) {
    fuzz_check(consumed > 0 && consumed <= size - off);
    fuzz_check(g.base == data + off && g.size == consumed);
    walk_gen(&g, data, size);
    gtp_gen_fini(&g);
  }
}

/* The table iterators and record decoders on their own, for every record at
 * the top level (a file's records, or a bare body). */
static void walk_records(const uint8_t *data, size_t size, size_t off) {
  while (off < size) {
    gtp_record rec;
    if (gtp_record_parse(data + off, size - off, &rec) < 0)
      return;
    fuzz_check(rec.size > 0 && rec.size <= size - off);
    fuzz_check(in(rec.payload, rec.len, data, size));
    gtp_table_iter it;
    uint64_t id, pcs[GTP_STACK_DEPTH_MAX];
    size_t depth;
    gtp_str s;
    gtp_module m;
    union {
      gtp_gen_start s;
      gtp_clock c;
      gtp_gen_end e;
      gtp_batch b;
    } u;
    switch (rec.type) {
    case GTP_REC_GEN_START:
      if (gtp_gen_start_decode(rec.payload, rec.len, &u.s) == 0)
        fuzz_check(u.s.ntags <= GTP_TAGS_MAX &&
                   in(u.s.service.ptr, u.s.service.len, data, size));
      break;
    case GTP_REC_CLOCK:
      (void)gtp_clock_decode(rec.payload, rec.len, &u.c);
      break;
    case GTP_REC_GEN_END:
      (void)gtp_gen_end_decode(rec.payload, rec.len, &u.e);
      break;
    case GTP_REC_EVENTS:
      if (gtp_batch_decode(rec.payload, rec.len, &u.b) == 0)
        fuzz_check(in(u.b.events, u.b.events_len, rec.payload, rec.len));
      break;
    case GTP_REC_STRINGS:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while (gtp_strings_next(&it, &id, &s) == 1)
          fuzz_check(in(s.ptr, s.len, rec.payload, rec.len));
      break;
    case GTP_REC_STACKS:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while (gtp_stacks_next(&it, &id, pcs, &depth) == 1)
          fuzz_check(depth <= GTP_STACK_DEPTH_MAX);
      break;
    case GTP_REC_MODULES:
      if (gtp_table_iter_init(&it, rec.payload, rec.len) == 0)
        while (gtp_modules_next(&it, &m) == 1)
          fuzz_check(in(m.path.ptr, m.path.len, rec.payload, rec.len));
      break;
    default:
      break;
    }
    off += rec.size;
  }
}

/* gentraced checks the events of a lazily parsed generation in the walk
 * that summarizes them: that verdict (and the plain check's) must be
 * gtp_gen_parse's, full, on every input. */
static void check_one_walk(const uint8_t *p, size_t n, int full) {
  gtp_gen g;
  size_t used;
  if (gtp_gen_parse_lazy(p, n, &g, &used) < 0) {
    fuzz_check(full < 0);
    return;
  }
  fuzz_check((gtp_gen_check_events(&g) == 0) == (full == 0));
  gtp_summary s;
  int check = 1;
  int rc = gtp_summary_compute_check(&g, &s, &check);
  fuzz_check((check == 0) == (full == 0));
  if (rc == 0)
    gtp_summary_fini(&s);
  gtp_gen_fini(&g);
}

/* Random mutations almost never keep the CRC32C and the counts of GEN_END
 * right, so gtp_gen_parse would stop at the manifest and never reach the
 * table and event decoders. This pass rebuilds the GEN_END of the first
 * generation from its body (as an agent seals it) and parses the result, so
 * the fuzzer explores everything behind the manifest check too. */
static void parse_repaired(const uint8_t *data, size_t size, size_t off) {
  gtp_record rec;
  gtp_gen_start st;
  if (off > size || gtp_record_parse(data + off, size - off, &rec) < 0 ||
      rec.type != GTP_REC_GEN_START ||
      gtp_gen_start_decode(rec.payload, rec.len, &st) < 0)
    return;
  size_t body = off + rec.size, at = body;
  gtp_gen_end e;
  memset(&e, 0, sizeof e);
  for (;;) {
    if (gtp_record_parse(data + at, size - at, &rec) < 0 ||
        rec.type == GTP_REC_GEN_START)
      return;
    if (rec.type == GTP_REC_GEN_END) {
      /* Keep the ledger the input had, if it decodes. */
      (void)gtp_gen_end_decode(rec.payload, rec.len, &e);
      break;
    }
    at += rec.size;
  }
  e.gen = st.gen;
  if (gtp_manifest_compute(data + body, at - body, &e) < 0)
    return;
  gtp_wbuf b;
  gtp_wbuf_init(&b, 0);
  gtp_wbuf_put(&b, data + off, at - off);
  if (gtp_put_gen_end(&b, &e) == 0) {
    gtp_gen g;
    size_t consumed;
    int full = gtp_gen_parse(b.data, b.len, &g, &consumed);
    if (full == 0) {
      fuzz_check(consumed == b.len);
      walk_gen(&g, b.data, b.len);
      gtp_gen_fini(&g);
    }
    check_one_walk(b.data, b.len, full);
  }
  gtp_wbuf_fini(&b);
}

int gtp_fuzz_trace_one(const uint8_t *data, size_t size) {
  /* A whole file, generation by generation. */
  gtp_file_reader r;
  if (gtp_file_reader_init(&r, data, size) == 0) {
    gtp_gen g;
    int rc;
    size_t last = r.offset;
    while ((rc = gtp_file_reader_next(&r, &g)) == 1) {
      fuzz_check(r.offset > last && r.offset <= size);
      last = r.offset;
      walk_gen(&g, data, size);
      gtp_gen_fini(&g);
    }
    fuzz_check(rc <= 0 && r.offset <= size);
  }
  /* One bare generation (what the daemon stores per row), with and without
   * a file header in front. */
  parse_gen_at(data, size, 0);
  int has_header = gtp_file_header_check(data, size) == 0;
  if (has_header)
    parse_gen_at(data, size, GTP_FILE_HEADER_SIZE);
  walk_records(data, size, has_header ? GTP_FILE_HEADER_SIZE : 0);
  parse_repaired(data, size, has_header ? GTP_FILE_HEADER_SIZE : 0);
  return 0;
}

#ifndef GTP_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return gtp_fuzz_trace_one(data, size);
}
#endif
