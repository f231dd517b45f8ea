/* tracebuild.h: builds trace files with the proto writer API, for the CLI's
 * fixture writer (mktrace) and the Chrome writer's unit test.
 *
 * Usage: tb_init, then per generation tb_gen_begin, any number of
 * tb_batch_begin / tb_ev... / tb_batch_end, tb_gen_end; the file is in
 * tb->out (header included). Strings and stacks are interned per generation,
 * as the agent does. The clock is 1 tick = 1 ns, so a tick value is the
 * generation's monotonic ns and wall = start_real + (ticks - start_ticks).
 * Every failure of the writer API aborts the test program (it is a bug in
 * the fixture, not a scenario).
 */
#ifndef GT_TESTS_TRACEBUILD_H
#define GT_TESTS_TRACEBUILD_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

#define TB_STRINGS_MAX 256
#define TB_STACKS_MAX 64

typedef struct tb {
  gtp_wbuf out, body, ev;
  gtp_gen_start st;
  gtp_clock clk;
  /* interned per generation */
  char *strs[TB_STRINGS_MAX];
  size_t nstrs;
  uint64_t stacks[TB_STACKS_MAX][8];
  size_t stack_depth[TB_STACKS_MAX];
  size_t nstacks;
  /* open batch */
  uint64_t thread, base, prev, nev;
  /* what was written, for the tests' expectations */
  uint64_t events, by_type[GTP_EV_COUNT_];
} tb;

static inline void tb_check(int rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "tracebuild: %s: %s\n", what, gtp_strerror(rc));
    abort();
  }
}

static inline void tb_init(tb *t) {
  memset(t, 0, sizeof *t);
  gtp_wbuf_init(&t->out, 0);
  gtp_wbuf_init(&t->body, 0);
  gtp_wbuf_init(&t->ev, 0);
  tb_check(gtp_put_file_header(&t->out), "file header");
}

static inline void tb_fini(tb *t) {
  for (size_t i = 0; i < t->nstrs; i++)
    free(t->strs[i]);
  gtp_wbuf_fini(&t->out);
  gtp_wbuf_fini(&t->body);
  gtp_wbuf_fini(&t->ev);
}

/* Session ids built from a small number, so tests can name them. */
static inline void tb_session(uint8_t id[16], unsigned n) {
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(0xa0 + i);
  id[15] = (uint8_t)n;
  id[14] = (uint8_t)(n >> 8);
}

static inline void tb_gen_begin(tb *t, const uint8_t session[16], uint64_t gen,
                                const char *service, const char *host,
                                uint64_t pid, int64_t start_real_ns,
                                uint64_t start_ticks) {
  for (size_t i = 0; i < t->nstrs; i++)
    free(t->strs[i]);
  t->nstrs = 0;
  t->nstacks = 0;
  gtp_wbuf_reset(&t->body);
  memset(&t->st, 0, sizeof t->st);
  memcpy(t->st.session, session, 16);
  t->st.gen = gen;
  t->st.service = (gtp_str){service, strlen(service)};
  t->st.host = (gtp_str){host, strlen(host)};
  t->st.agent_version = (gtp_str){"test-1", 6};
  t->st.pid = pid;
  t->st.process_start_ns = (uint64_t)start_real_ns - 1000000000ull;
  t->st.ntags = 1;
  t->st.tags[0] = (gtp_tag){{"env", 3}, {"test", 4}};
  t->clk.start_ticks = start_ticks;
  t->clk.start_mono_ns = start_ticks;
  t->clk.start_real_ns = (uint64_t)start_real_ns;
}

/* Returns the id of s in this generation's string table (1-based). */
static inline uint64_t tb_str(tb *t, const char *s) {
  for (size_t i = 0; i < t->nstrs; i++)
    if (!strcmp(t->strs[i], s))
      return i + 1;
  if (t->nstrs == TB_STRINGS_MAX)
    abort();
  t->strs[t->nstrs] = strdup(s);
  return ++t->nstrs;
}

static inline uint64_t tb_stack(tb *t, const uint64_t *pcs, size_t n) {
  if (t->nstacks == TB_STACKS_MAX || n > 8)
    abort();
  memcpy(t->stacks[t->nstacks], pcs, n * sizeof *pcs);
  t->stack_depth[t->nstacks] = n;
  return ++t->nstacks;
}

static inline void tb_batch_begin(tb *t, uint64_t thread, uint64_t base) {
  gtp_wbuf_reset(&t->ev);
  t->thread = thread;
  t->base = t->prev = base;
  t->nev = 0;
}

static inline void tb_ev_msg(tb *t, uint8_t type, uint64_t ticks, uint64_t a0,
                             uint64_t a1, uint64_t a2, const char *msg,
                             size_t msg_len) {
  gtp_event e = {.type = type, .ticks = ticks, .args = {a0, a1, a2}};
  e.msg = (const uint8_t *)msg;
  e.msg_len = msg_len;
  uint8_t *p = gtp_wbuf_grow(&t->ev, GTP_EVENT_MAX + msg_len);
  tb_check(p ? 0 : t->ev.err, "event buffer");
  int n = gtp_event_encode(p, &e, t->prev);
  tb_check(n, "event encode");
  t->ev.len -= GTP_EVENT_MAX + msg_len - (size_t)n;
  t->prev = ticks;
  t->nev++;
  t->events++;
  t->by_type[type]++;
}

static inline void tb_ev(tb *t, uint8_t type, uint64_t ticks, uint64_t a0,
                         uint64_t a1, uint64_t a2) {
  tb_ev_msg(t, type, ticks, a0, a1, a2, NULL, 0);
}

static inline void tb_batch_end(tb *t) {
  tb_check(gtp_put_batch(&t->body, t->st.gen, t->thread, t->base, t->nev,
                         t->ev.data, t->ev.len),
           "batch");
}

static inline void tb_gen_end(tb *t, uint64_t end_ticks, uint64_t dropped,
                              uint64_t evicted, uint64_t rejected) {
  if (t->nstrs) {
    uint64_t ids[TB_STRINGS_MAX];
    gtp_str strs[TB_STRINGS_MAX];
    for (size_t i = 0; i < t->nstrs; i++) {
      ids[i] = i + 1;
      strs[i] = (gtp_str){t->strs[i], strlen(t->strs[i])};
    }
    tb_check(gtp_put_strings(&t->body, ids, strs, t->nstrs), "strings");
  }
  if (t->nstacks) {
    uint64_t ids[TB_STACKS_MAX];
    const uint64_t *pcs[TB_STACKS_MAX];
    for (size_t i = 0; i < t->nstacks; i++) {
      ids[i] = i + 1;
      pcs[i] = t->stacks[i];
    }
    tb_check(gtp_put_stacks(&t->body, ids, pcs, t->stack_depth, t->nstacks),
             "stacks");
  }
  t->clk.end_ticks = end_ticks;
  t->clk.end_mono_ns = end_ticks;
  t->clk.end_real_ns = t->clk.start_real_ns + (end_ticks - t->clk.start_ticks);
  tb_check(gtp_put_clock(&t->body, &t->clk), "clock");

  gtp_gen_end e = {.gen = t->st.gen,
                   .dropped = dropped,
                   .evicted = evicted,
                   .rejected = rejected};
  tb_check(gtp_manifest_compute(t->body.data, t->body.len, &e), "manifest");
  tb_check(gtp_put_gen_start(&t->out, &t->st), "gen start");
  gtp_wbuf_put(&t->out, t->body.data, t->body.len);
  tb_check(gtp_put_gen_end(&t->out, &e), "gen end");
}

#endif
