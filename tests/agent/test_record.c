/* test_record.c: the hot paths of agent/record.c against the test receiver
 * (receiver.c), decoded back: gt_log's word-at-a-time message copy (every
 * length around its word and fast-path limits, strings that end at the
 * last byte before an unmapped page, messages changed in place between
 * calls, over-long ones cut at GTP_LOG_MAX) and gt_task_begin/gt_task_end
 * (ids unique, ends name their begins, parents kept), in the same order
 * they were emitted; and the tick delta every kind writes when the clock
 * reads behind the buffer's last event (a thread moved to a core whose
 * TSC lags): 0, the buffer's last tick kept. */
#include "config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_int.h"
#include "format.h"
#include "gentrace.h"
#include "receiver.h"

/* What the test emitted, in order, to compare with what arrived. */
typedef struct want {
  uint8_t type;
  const char *str; /* category (LOG) or name (TASK_BEGIN) */
  char *msg;       /* LOG: the message as it was at the call */
  size_t msg_len;
  uint64_t a, b; /* TASK_BEGIN: id, parent; TASK_END: id */
} want;

#define MAXW 4096
static want ws[MAXW];
static size_t nws;

static void want_log(const char *cat, const char *msg) {
  size_t n = strnlen(msg, GTP_LOG_MAX);
  assert_true(nws < MAXW);
  ws[nws].type = GTP_EV_LOG;
  ws[nws].str = cat;
  ws[nws].msg = malloc(n + 1);
  assert_non_null(ws[nws].msg);
  memcpy(ws[nws].msg, msg, n);
  ws[nws].msg_len = n;
  nws++;
}

static void emit_log(const char *cat, const char *msg) {
  want_log(cat, msg);
  gt_log(cat, msg);
}

static void start(rx **r, char *addr, size_t n) {
  *r = rx_start();
  assert_non_null(*r);
  snprintf(addr, n, "127.0.0.1:%d", rx_port(*r));
  gt_config c;
  gt_config_init(&c);
  c.addr = addr;
  c.service = "test-record";
  c.period_ms = 10000; /* one generation: the caches stay warm */
  c.flush_timeout_ms = 4000;
  assert_int_equal(gt_start(&c), 0);
  nws = 0;
}

/* Every event the receiver got (LOST and THREAD_NAME aside) must be the
 * next one of ws, with the same strings, message bytes and ids. */
static void check(rx *r) {
  size_t k = 0;
  for (size_t i = 0; i < rx_count(r); i++) {
    const rx_gen *rg = rx_get(r, i);
    gtp_file_reader fr;
    assert_int_equal(gtp_file_reader_init(&fr, rg->file, rg->file_len), 0);
    gtp_gen g;
    int rc;
    while ((rc = gtp_file_reader_next(&fr, &g)) == 1) {
      assert_int_equal(g.end.dropped + g.end.evicted + g.end.rejected, 0);
      size_t cur = 0;
      gtp_batch b;
      while (gtp_gen_next_batch(&g, &cur, &b) == 1) {
        gtp_event_iter it;
        gtp_event ev;
        gtp_event_iter_init(&it, &b);
        int erc;
        while ((erc = gtp_event_next(&it, &ev)) == 1) {
          if (ev.type == GTP_EV_LOST || ev.type == GTP_EV_THREAD_NAME)
            continue;
          assert_true(k < nws);
          const want *w = &ws[k++];
          assert_int_equal(ev.type, w->type);
          if (w->type == GTP_EV_LOG) {
            gtp_str s = gtp_gen_string(&g, ev.args[0]);
            assert_int_equal(s.len, strlen(w->str));
            assert_memory_equal(s.ptr, w->str, s.len);
            assert_int_equal(ev.msg_len, w->msg_len);
            if (w->msg_len)
              assert_memory_equal(ev.msg, w->msg, w->msg_len);
          } else if (w->type == GTP_EV_TASK_BEGIN) {
            assert_int_equal(ev.args[0], w->a);
            assert_int_equal(ev.args[1], w->b);
            gtp_str s = gtp_gen_string(&g, ev.args[2]);
            assert_int_equal(s.len, strlen(w->str));
            assert_memory_equal(s.ptr, w->str, s.len);
          } else {
            assert_int_equal(ev.args[0], w->a);
          }
        }
        assert_int_equal(erc, 0);
      }
      gtp_gen_fini(&g);
    }
    assert_int_equal(rc, 0);
  }
  assert_int_equal(k, nws);
  for (size_t i = 0; i < nws; i++)
    free(ws[i].msg);
  nws = 0;
}

static void test_log__every_length_and_alignment_arrives_exactly(void **st) {
  (void)st;
  rx *r;
  char addr[64];
  start(&r, addr, sizeof addr);
  static char text[512];
  for (size_t i = 0; i < sizeof text - 1; i++)
    text[i] = (char)('a' + i % 26);
  /* Lengths 0..200 (the fast path takes < 128) at every offset mod 8,
   * the message read from a buffer whose bytes after the NUL are not 0. */
  char *m = malloc(300);
  assert_non_null(m);
  for (size_t len = 0; len <= 200; len++)
    for (size_t off = 0; off < 8; off += (len % 7 == 0 ? 1 : 3)) {
      memset(m, 'x', 300);
      memcpy(m + off, text, len);
      m[off + len] = '\0';
      emit_log("len", m + off);
    }
  /* The same buffer with new contents: the copy reads it every time. */
  strcpy(m, "first message");
  emit_log("reuse", m);
  strcpy(m, "2nd");
  emit_log("reuse", m);
  /* Empty and over-long (cut at GTP_LOG_MAX) messages. */
  emit_log("edge", "");
  char *big = malloc(GTP_LOG_MAX + 100);
  assert_non_null(big);
  memset(big, 'L', GTP_LOG_MAX + 99);
  big[GTP_LOG_MAX + 99] = '\0';
  emit_log("edge", big);
  free(big);
  free(m);
  gt_stop();
  rx_stop(r);
  check(r);
  rx_free(r);
}

/* Messages whose NUL is the last byte before an unmapped page: a copy that
 * read a word past the page's end would fault here. */
static void test_log__message_at_page_end_never_reads_past_it(void **st) {
  (void)st;
  long pg = sysconf(_SC_PAGESIZE);
  uint8_t *map = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(map != MAP_FAILED);
  assert_int_equal(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
  rx *r;
  char addr[64];
  start(&r, addr, sizeof addr);
  for (size_t len = 0; len <= 140; len++) {
    char *s = (char *)map + pg - 1 - len;
    memset(s, 'p', len);
    s[len] = '\0';
    emit_log("page", s);
  }
  gt_stop();
  rx_stop(r);
  check(r);
  rx_free(r);
  munmap(map, (size_t)pg * 2);
}

static void test_task__ids_unique_and_ends_match_their_begins(void **st) {
  (void)st;
  rx *r;
  char addr[64];
  start(&r, addr, sizeof addr);
  uint64_t parent = 0, seen[600];
  for (int i = 0; i < 600; i++) {
    const char *name = i % 3 ? "task.child" : "task.root";
    uint64_t id = gt_task_begin(name, parent);
    assert_true(id != 0);
    for (int j = 0; j < i; j++)
      assert_true(seen[j] != id);
    seen[i] = id;
    assert_true(nws + 2 <= MAXW);
    ws[nws++] =
        (want){.type = GTP_EV_TASK_BEGIN, .str = name, .a = id, .b = parent};
    if (i % 3 == 0) {
      parent = id;
    } else {
      gt_task_end(id);
      ws[nws++] = (want){.type = GTP_EV_TASK_END, .a = id};
    }
  }
  gt_task_end(1ull << 63); /* any id ends: the reader pairs them */
  ws[nws++] = (want){.type = GTP_EV_TASK_END, .a = 1ull << 63};
  gt_stop();
  rx_stop(r);
  check(r);
  rx_free(r);
}

/* Every kind, each through its cold path (a name not cached yet) and its
 * fast path, at a moment the buffer's last tick lies ahead of the clock
 * (put_head_at computes the delta without a branch, as a max): each event
 * gets delta 0, so its time is its predecessor's, and the buffer's last
 * tick stays where it was; once the clock is ahead again the next event's
 * delta brings the decoded time back to the clock, and last_ticks with it.
 * A version that stored the clock reading (or wrapped the negative delta)
 * fails on the last tick or on the decoded times. */
static void emit_every_kind(int round) {
  gt_instant("tick.instant");
  gt_region_begin("tick.region");
  gt_region_end();
  gt_counter("tick.counter", round);
  gt_log("tick.log", "behind");
  gt_task_end(gt_task_begin("tick.task", 0));
}
enum { EVERY_KIND = 7 };

static void test_ticks__clock_behind_the_buffer_gives_zero_deltas(void **st) {
  (void)st;
  rx *r;
  char addr[64];
  start(&r, addr, sizeof addr);
  gt_instant("tick.first"); /* registers; takes this generation's buffer */
  gt__thread *t = gt__tls_self;
  uint64_t stamp = atomic_load(&gt__stamp_now);
  gt__buf *b = atomic_load(&t->bufs[stamp & 1]);
  assert_non_null(b);
  uint64_t first = b->last_ticks, ahead = first + (1ull << 40);
  b->last_ticks = ahead; /* as if the last event ran on a core far ahead */
  for (int round = 0; round < 2; round++)
    emit_every_kind(round);
  assert_ptr_equal(atomic_load(&t->bufs[stamp & 1]), b); /* no refill */
  assert_true(b->last_ticks == ahead);
  b->last_ticks = first; /* the clock is ahead again */
  uint64_t before = gt__ticks();
  gt_instant("tick.after");
  uint64_t after_last = b->last_ticks;
  assert_true(after_last >= before && after_last <= gt__ticks());
  gt_stop();
  rx_stop(r);
  size_t k = 0;
  for (size_t i = 0; i < rx_count(r); i++) {
    gtp_file_reader fr;
    assert_int_equal(
        gtp_file_reader_init(&fr, rx_get(r, i)->file, rx_get(r, i)->file_len),
        0);
    gtp_gen g;
    while (gtp_file_reader_next(&fr, &g) == 1) {
      size_t cur = 0;
      gtp_batch bt;
      while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
        gtp_event_iter it;
        gtp_event ev;
        gtp_event_iter_init(&it, &bt);
        while (gtp_event_next(&it, &ev) == 1) {
          if (ev.type == GTP_EV_LOST || ev.type == GTP_EV_THREAD_NAME)
            continue;
          if (k == 0) /* tick.first: its time is the buffer's last tick */
            assert_true(ev.ticks == first);
          else if (k <= 2 * EVERY_KIND) /* behind: no time passes */
            assert_true(ev.ticks == first);
          else /* tick.after: the clock again */
            assert_true(ev.ticks == after_last);
          k++;
        }
      }
      gtp_gen_fini(&g);
    }
  }
  assert_int_equal(k, 2 + 2 * EVERY_KIND);
  rx_free(r);
}

/* Drops (no free buffer) are counted by gt_stats the moment they happen,
 * not when a generation is sealed or a LOST marker written: read right
 * after the emitting thread ends, events_dropped already equals what the
 * session's ledger (the dropped of every GEN_END) says once gt_stop has
 * sealed and delivered everything, and it does not move after. The pool is
 * held empty but for one buffer, so the thread records one buffer's worth
 * and drops the rest; it ends before it could get a buffer back, so no
 * LOST marker carries those drops, only the ledger. */
enum { DROP_EVENTS = 100000 };

static void *drop_writer(void *arg) {
  (void)arg;
  for (int i = 0; i < DROP_EVENTS; i++)
    gt_counter("drop.seq", i);
  return NULL;
}

static void test_drop__counted_in_stats_as_soon_as_the_thread_ends(void **st) {
  (void)st;
  rx *r;
  char addr[64];
  start(&r, addr, sizeof addr);
  gt__buf *held = NULL, *b;
  while ((b = gt__pool_get(&gt__A.pool)) != NULL) {
    b->next = held;
    held = b;
  }
  assert_non_null(held);
  b = held; /* one buffer back: the writer records, then drops */
  held = b->next;
  gt__pool_put(&gt__A.pool, b);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, drop_writer, NULL), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  gt_stats_t now, fin;
  assert_int_equal(gt_stats(&now), 0);
  assert_int_equal(now.events_written, DROP_EVENTS);
  assert_true(now.events_dropped > 0);
  assert_true(now.events_dropped < DROP_EVENTS);
  while (held != NULL) {
    b = held;
    held = b->next;
    gt__pool_put(&gt__A.pool, b);
  }
  gt_stop();
  rx_stop(r);
  assert_int_equal(gt_stats(&fin), 0);
  assert_int_equal(fin.events_written, DROP_EVENTS);
  assert_int_equal(fin.events_dropped, now.events_dropped);
  assert_int_equal(fin.events_evicted + fin.events_rejected, 0);
  assert_int_equal(fin.events_delivered + fin.events_dropped, DROP_EVENTS);
  uint64_t ledger = 0, recorded = 0, markers = 0;
  for (size_t i = 0; i < rx_count(r); i++) {
    const rx_gen *rg = rx_get(r, i);
    gtp_file_reader fr;
    assert_int_equal(gtp_file_reader_init(&fr, rg->file, rg->file_len), 0);
    gtp_gen g;
    while (gtp_file_reader_next(&fr, &g) == 1) {
      ledger += g.end.dropped;
      assert_int_equal(g.end.evicted + g.end.rejected, 0);
      size_t cur = 0;
      gtp_batch bt;
      while (gtp_gen_next_batch(&g, &cur, &bt) == 1) {
        gtp_event_iter it;
        gtp_event ev;
        gtp_event_iter_init(&it, &bt);
        while (gtp_event_next(&it, &ev) == 1) {
          if (ev.type == GTP_EV_COUNTER)
            assert_int_equal(ev.args[1], recorded++); /* the first ones */
          markers += ev.type == GTP_EV_LOST;
        }
      }
      gtp_gen_fini(&g);
    }
  }
  assert_int_equal(ledger, now.events_dropped);
  assert_int_equal(recorded + ledger, DROP_EVENTS);
  assert_int_equal(markers, 0);
  rx_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log__every_length_and_alignment_arrives_exactly),
      cmocka_unit_test(test_log__message_at_page_end_never_reads_past_it),
      cmocka_unit_test(test_task__ids_unique_and_ends_match_their_begins),
      cmocka_unit_test(test_ticks__clock_behind_the_buffer_gives_zero_deltas),
      cmocka_unit_test(test_drop__counted_in_stats_as_soon_as_the_thread_ends),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
