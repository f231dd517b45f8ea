/* web_trace.c: trace downloads: /v1/trace (a window) and
 * /v1/agents/{session}/generations/{gen} (one generation), as gentrace
 * files or Chrome JSON, streamed one generation at a time.
 *
 * A download (struct dl) is created by the handler after a short listing
 * and then driven by MHD's content-reader callback on the connection's
 * thread until the end or until the client goes away; MHD frees it through
 * dl_free.
 *
 * gentrace files: states HEADER (file header pending in `out`) -> GENS (one
 * stored generation at a time: seqs[next]) -> TRAILER -> DONE. dl_read
 * moves between them whenever `out` has been fully sent. Payloads come from
 * read-ahead threads (struct prefetch below) when the download has more
 * than one generation.
 *
 * Chrome JSON: a generation of a few KB can expand to hundreds of MB of
 * JSON (long names repeated by many events), so its rendering is never
 * held whole: a pump thread (started at the first body read) reads and
 * parses one generation at a time and writes the JSON into a bounded pipe
 * (dlpipe.h), blocking while the client has not taken what is there; the
 * connection's thread only copies from the pipe.
 *
 * Compressed answers (Accept-Encoding, docs/HTTP.md): a native download
 * asking for zstd sends the stored zstd frames as they are (zpass: one frame
 * for the file header, then each generation's stored frame; concatenated
 * frames are one valid zstd stream of the file), read ahead like plain
 * payloads and never decompressed. Everything else (gzip, Chrome JSON as
 * zstd) goes through a streaming encoder (dlenc.h) between the plain bytes
 * and the socket, in fixed memory.
 *
 * Retention never waits for a download (docs/HTTP.md "Downloads that end
 * early"): a generation deleted after the listing ends the download there.
 * What was sent is a valid file (whole generations; Chrome JSON closed),
 * then the transfer ends without its final chunk so the client sees an
 * incomplete transfer; the log and
 * gentrace_http_downloads_ended_early_total say so.
 *
 * Invariants:
 *  1. A download MUST end at the first listed generation that is gone
 *     (GTP_E_NOTFOUND), never skip it, so what a client got is always a
 *     prefix of what the headers promised.
 *  2. Memory MUST NOT follow the size of the answer: `out` holds at most
 *     one stored generation (plus the header), the Chrome pipe at most
 *     DL_PIPE bytes, the read-ahead ring PF_SLOTS generations.
 *  3. A store reader MUST be borrowed only for one payload read and never
 *     while waiting for the client, otherwise slow clients would starve the
 *     pool and hold a read transaction open (starving checkpoints).
 *  4. active_downloads MUST be incremented (web_dl_slot_take) before a dl
 *     exists and decremented exactly once: by dl_free, or by the handler
 *     when no dl was made, otherwise the --http-max-downloads cap drifts.
 *  5. While a block handed to MHD is on its way to the client, the
 *     connection MUST carry a send deadline (slowguard_send_by), and none
 *     while the server prepares the next one, so only the client's
 *     slowness is timed.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chrome.h"
#include "perfetto.h"
#include "dlenc.h"
#include "dlpipe.h"
#include "gtp_error.h"
#include "httptime.h"
#include "symreq.h"
#include "web_internal.h"

#include <zstd.h>

/* Bytes MHD asks for at most per read callback; large enough that a
 * multi-megabyte generation goes out in a few writes. */
#define DL_BLOCK (1u << 20)
/* Chrome JSON waiting for the client, per download. */
#define DL_PIPE (256u << 10)
/* Formats (the `chrome` field of a dl: non-zero = converted by the pump). */
enum { DL_FMT_NATIVE = 0, DL_FMT_CHROME = 1, DL_FMT_PERFETTO = 2 };
/* dlpipe status of a pump that stopped at a deleted generation. */
#define DL_EARLY 1

enum dl_state { DL_HEADER, DL_GENS, DL_TRAILER, DL_DONE };

typedef struct dl {
  web_server *w;
  slowguard_conn *guard; /* the connection's, for send deadlines */
  int chrome;
  enum dl_state state;
  int64_t *seqs; /* listed generations in send order */
  size_t n, next;
  gtp_wbuf out; /* gentrace: bytes still to send: out.data[off..len) */
  size_t off;
  gtp_wbuf raw; /* chrome: one generation's stored bytes (pump thread) */
  gtp_chrome *ch;
  gtp_perfetto *pft; /* format=perfetto: the pump's writer instead of ch */
  symreq *sym;       /* chrome/perfetto: names stack frames, or NULL */
  dlpipe *pipe;      /* chrome: JSON from the pump */
  pthread_t pump;    /* valid when pump_started */
  int pump_started;
  int early;               /* a listed generation was gone: ended at `next` */
  int finished;            /* the body went out whole (or ended early) */
  int64_t send_by;         /* deadline of the block last handed out, 0 = none */
  char what[80];           /* for log lines */
  struct prefetch *pf;     /* NULL: payloads are read inline */
  int zpass;               /* native + zstd: stored frames pass through */
  dlenc *ez;               /* gzip, or zstd of Chrome JSON: encoder stage */
  int plain_end, plain_rc; /* ez: the plain body ended, with this status */
} dl;

/* Read-ahead: PF_WORKERS threads per download (started at the first body
 * read, so HEAD requests never start one) read the next payloads into a
 * ring of PF_SLOTS buffers while the consumer (the connection's thread, or
 * the Chrome pump) sends the current one, so decompression overlaps with
 * the socket copies. Decompression is the costliest step per byte (zstd),
 * slower than the socket: one reader thread alone would bound the download
 * at its speed, two decompress consecutive generations side by side.
 * Payloads are claimed in order, so payload i always lands in slot
 * i % PF_SLOTS.
 *
 * Invariants (beyond the file's):
 *  6. At most PF_SLOTS payloads are held besides `out`, otherwise memory
 *     would grow with the window (invariant 2): a worker claims payload i
 *     only once the consumer has taken payload i - PF_SLOTS from its slot.
 *  7. dl_free MUST stop and join every worker before freeing anything they
 *     touch (the slots, seqs).
 */
#define PF_SLOTS 2
#define PF_WORKERS 2

typedef struct prefetch {
  pthread_t th[PF_WORKERS];
  int nth; /* workers started */
  /* Protected by mu. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  int failed;         /* a read failed: claim nothing more */
  size_t claim;       /* next payload to claim */
  int full[PF_SLOTS]; /* slot i % PF_SLOTS holds payload i, with rc */
  int busy[PF_SLOTS]; /* a worker is reading payload idx[k] into slot k */
  size_t idx[PF_SLOTS];
  int rc[PF_SLOTS];
  gtp_wbuf buf[PF_SLOTS];
} prefetch;

/* Reads payload i into b; 0, GTP_E_NOTFOUND, or another error. Any
 * thread; borrows a pool reader for this one read only (invariant 3). */
static int read_payload(dl *d, size_t i, gtp_wbuf *b) {
  web_server *w = d->w;
  storage_reader *sr;
  int rc = readpool_get(w->pool, WEB_POOL_WAIT_MS, &sr);
  if (rc < 0)
    return rc;
  gtp_wbuf_reset(b);
  rc = d->zpass ? storage_read_payload_zstd(sr, d->seqs[i], b)
                : storage_read_payload(sr, d->seqs[i], b);
  readpool_put(w->pool, sr);
  return rc < 0 ? rc : b->err;
}

static void *pf_main(void *arg) {
  dl *d = arg;
  prefetch *pf = d->pf;
  pthread_mutex_lock(&pf->mu);
  for (;;) {
    size_t k = pf->claim % PF_SLOTS;
    while (!pf->stop && !pf->failed && pf->claim < d->n &&
           (pf->full[k] || pf->busy[k])) {
      pthread_cond_wait(&pf->cv, &pf->mu);
      k = pf->claim % PF_SLOTS;
    }
    /* stop: dl_free, nobody waits for slots any more. failed: the consumer
     * ends the stream on that payload and asks no more. */
    if (pf->stop || pf->failed || pf->claim >= d->n)
      break;
    size_t i = pf->claim++;
    pf->busy[k] = 1;
    pf->idx[k] = i;
    pthread_mutex_unlock(&pf->mu);
    /* The slot is busy for this worker alone: no lock needed for the read
     * itself. A server shutdown still fills the slot (with an error)
     * because the consumer may already be waiting for it. */
    int rc = atomic_load_explicit(&d->w->stopping, memory_order_relaxed)
                 ? GTP_E_SHUTDOWN
                 : read_payload(d, i, &pf->buf[k]);
    pthread_mutex_lock(&pf->mu);
    pf->rc[k] = rc;
    pf->busy[k] = 0;
    pf->full[k] = 1;
    if (rc < 0) /* the consumer stops at this one (invariant 1) */
      pf->failed = 1;
    pthread_cond_broadcast(&pf->cv);
  }
  pthread_mutex_unlock(&pf->mu);
  return NULL;
}

static void pf_free(prefetch *pf) {
  for (int k = 0; k < PF_SLOTS; k++)
    gtp_wbuf_fini(&pf->buf[k]);
  pthread_cond_destroy(&pf->cv);
  pthread_mutex_destroy(&pf->mu);
  free(pf);
}

static void pf_stop(dl *d) {
  prefetch *pf = d->pf;
  if (!pf)
    return;
  pthread_mutex_lock(&pf->mu);
  pf->stop = 1;
  pthread_cond_broadcast(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
  for (int t = 0; t < pf->nth; t++)
    pthread_join(pf->th[t], NULL); /* invariant 7 */
  pf_free(pf);
  d->pf = NULL;
}

/* Starts the workers; without any (no memory, no thread), payloads are
 * read inline. A second worker only when there are at least two payloads
 * to read ahead besides the one the connection waits for, and more than two
 * CPUs: on two, the connection's thread and one worker already keep both
 * busy, and measured (bench_download, 2 vCPU) a second worker only made
 * the three threads preempt each other. */
static void pf_start(dl *d) {
  prefetch *pf = calloc(1, sizeof *pf);
  if (!pf)
    return; /* inline reads still work */
  pthread_mutex_init(&pf->mu, NULL);
  pthread_cond_init(&pf->cv, NULL);
  for (int k = 0; k < PF_SLOTS; k++)
    gtp_wbuf_init(&pf->buf[k], 0);
  d->pf = pf;
  int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  /* Tests force the two-worker path on small machines so it runs under
   * TSan in CI (test_web sets it); never set it in production. */
  const char *force = getenv("GENTRACE_TEST_DL_WORKERS");
  if (force && *force)
    cpus = atoi(force) > 1 ? 3 : 1;
  int want = d->n > 2 && cpus > 2 ? PF_WORKERS : 1;
  for (int t = 0; t < want; t++) {
    if (pthread_create(&pf->th[t], NULL, pf_main, d) != 0)
      break;
    pf->nth++; /* only this thread writes nth; workers never read it */
  }
  if (pf->nth == 0) {
    d->pf = NULL;
    pf_free(pf);
  }
}

/* Payload i into *dst: from the read-ahead ring (swapping buffers, no
 * copy) or read inline. */
static int take_payload(dl *d, size_t i, gtp_wbuf *dst) {
  prefetch *pf = d->pf;
  if (!pf)
    return read_payload(d, i, dst);
  size_t k = i % PF_SLOTS;
  pthread_mutex_lock(&pf->mu);
  while (!pf->full[k])
    pthread_cond_wait(&pf->cv, &pf->mu);
  int rc = pf->rc[k];
  gtp_wbuf t = *dst;
  *dst = pf->buf[k];
  pf->buf[k] = t;
  pf->full[k] = 0;
  pthread_cond_broadcast(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
  return rc;
}

/* ------------------------------------------------------- Chrome pump */

static int pipe_sink(void *ctx, const void *p, size_t n) {
  dl *d = ctx;
  if (atomic_load_explicit(&d->w->stopping, memory_order_relaxed))
    return GTP_E_SHUTDOWN;
  return dlpipe_write(d->pipe, p, n);
}

/* The pump: every listed generation through the Chrome writer into the
 * pipe, then the document's end. Stops at a deleted generation (invariant
 * 1) but still closes the document, so the client holds valid JSON. */
static void *pump_main(void *arg) {
  dl *d = arg;
  int rc = d->pft ? 0 : gtp_chrome_begin(d->ch);
  if (rc == 0 && d->n > 1)
    pf_start(d);
  while (rc == 0 && d->next < d->n) {
    size_t i = d->next;
    rc = take_payload(d, i, &d->raw);
    if (rc == GTP_E_NOTFOUND) {
      d->early = 1;
      rc = 0;
      break;
    }
    if (rc < 0)
      break;
    gtp_gen g;
    size_t used;
    rc = gtp_gen_parse(d->raw.data, d->raw.len, &g, &used);
    if (rc < 0)
      break;
    rc = d->pft ? gtp_perfetto_gen(d->pft, &g) : gtp_chrome_gen(d->ch, &g);
    gtp_gen_fini(&g);
    if (rc < 0)
      break;
    d->next++;
  }
  /* Give the generation's memory back while the end goes out. */
  gtp_wbuf_fini(&d->raw);
  if (rc == 0)
    rc = d->pft ? gtp_perfetto_end(d->pft) : gtp_chrome_end(d->ch);
  dlpipe_close_write(d->pipe, rc < 0 ? rc : d->early ? DL_EARLY : 0);
  return NULL;
}

/* ---------------------------------------------------------- lifecycle */

static void dl_free(void *cls) {
  dl *d = cls;
  web_server *w = d->w;
  if (d->pipe)
    dlpipe_close_read(d->pipe); /* the pump's next write fails */
  if (d->pump_started)
    pthread_join(d->pump, NULL);
  pf_stop(d);
  if (d->early) {
    atomic_fetch_add_explicit(&w->ended_early, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->skipped_gens, d->n - d->next,
                              memory_order_relaxed);
    web_log(w, 1,
            "msg=\"download ended early: retention deleted the rest\" "
            "what=\"%s\" sent_generations=%zu listed_generations=%zu",
            d->what, d->next, d->n);
  } else if (!d->finished && d->send_by != 0 &&
             slowguard_now_ns() > d->send_by) {
    atomic_fetch_add_explicit(&w->send_timeouts, 1, memory_order_relaxed);
    web_log(w, 1,
            "msg=\"download cut: client slower than --http-send-timeout\" "
            "what=\"%s\" sent_generations=%zu listed_generations=%zu",
            d->what, d->next, d->n);
  }
  gtp_chrome_free(d->ch);
  gtp_perfetto_free(d->pft);
  symreq_free(d->sym);
  dlpipe_free(d->pipe);
  dlenc_free(d->ez);
  gtp_wbuf_fini(&d->out);
  gtp_wbuf_fini(&d->raw);
  free(d->seqs);
  web_dl_slot_put(w); /* invariant 4 */
  free(d);
}

/* gentrace files: fills d->out with the next generation. 0 = something
 * queued, or d->early set; < 0 = the stream must abort. Thread: the
 * connection's. */
static int dl_load(dl *d) {
  size_t i = d->next;
  /* Worth a thread only when there is something to read ahead. */
  if (i == 0 && d->n > 1)
    pf_start(d);
  int rc = take_payload(d, i, &d->out);
  if (rc == GTP_E_NOTFOUND) { /* invariant 1 */
    d->early = 1;
    gtp_wbuf_reset(&d->out);
    return 0;
  }
  if (rc < 0)
    return rc;
  d->next++;
  return d->out.err;
}

/* Hands n bytes to MHD: counts them and starts the block's send deadline
 * (invariant 5). */
static ssize_t dl_sent(dl *d, size_t n) {
  atomic_fetch_add_explicit(&d->w->bytes_sent, n, memory_order_relaxed);
  d->send_by = slowguard_now_ns() + d->w->send_timeout_ns;
  slowguard_send_by(d->guard, d->send_by);
  return (ssize_t)n;
}

/* The body is over: complete, or ended early / failed (the transfer then
 * ends without its last chunk, which clients report as incomplete). */
static ssize_t dl_end(dl *d, int rc) {
  d->finished = 1;
  d->send_by = 0;
  slowguard_send_by(d->guard, 0);
  if (rc < 0)
    /* Mid-stream the status line is gone: the only honest signal left is
     * an aborted transfer (curl reports it), never a silently short
     * file. */
    web_log(d->w, 2,
            "msg=\"download aborted\" what=\"%s\" gen_index=%zu error=%s",
            d->what, d->next, gtp_errname(rc));
  return rc == 0 && !d->early ? MHD_CONTENT_READER_END_OF_STREAM
                              : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The plain body (before any Content-Encoding): up to max bytes into buf
 * and their count, or 0 at its end with the status in *end_rc. */
static size_t dl_plain_chrome(dl *d, char *buf, size_t max, int *end_rc) {
  if (!d->pump_started) {
    if (pthread_create(&d->pump, NULL, pump_main, d) != 0) {
      *end_rc = -EAGAIN;
      return 0;
    }
    d->pump_started = 1;
  }
  int status = 0;
  size_t n = dlpipe_read(d->pipe, buf, max, &status);
  if (n == 0)
    *end_rc = status < 0 ? status : 0;
  return n;
}

static size_t dl_plain(dl *d, char *buf, size_t max, int *end_rc) {
  *end_rc = 0;
  if (d->chrome)
    return dl_plain_chrome(d, buf, max, end_rc);
  for (;;) {
    if (d->off < d->out.len) {
      size_t n = d->out.len - d->off;
      if (n > max)
        n = max;
      memcpy(buf, d->out.data + d->off, n);
      d->off += n;
      return n;
    }
    gtp_wbuf_reset(&d->out);
    d->off = 0;
    int rc = 0;
    if (d->next < d->n && !d->early) {
      d->state = DL_GENS;
      rc = dl_load(d);
      if (rc == 0 && !d->early)
        continue;
    }
    d->state = DL_DONE;
    /* Give a large generation's memory back before the end. */
    gtp_wbuf_fini(&d->out);
    *end_rc = rc;
    return 0;
  }
}

/* The encoder stage: plain bytes in, encoded bytes to buf. */
static ssize_t dl_read_encoded(dl *d, char *buf, size_t max) {
  for (;;) {
    int done = 0;
    long n = dlenc_run(d->ez, (uint8_t *)buf, max, &done);
    if (n < 0)
      return dl_end(d, (int)n);
    if (n > 0)
      return dl_sent(d, (size_t)n);
    if (done) /* the stream is closed: an early end still shows */
      return dl_end(d, d->plain_rc);
    size_t cap;
    uint8_t *in = dlenc_space(d->ez, &cap);
    if (!in)
      continue; /* the codec still holds input: run again */
    int rc = 0;
    size_t got = dl_plain(d, (char *)in, cap, &rc);
    if (got > 0) {
      dlenc_fed(d->ez, got);
      continue;
    }
    if (rc < 0)
      return dl_end(d, rc);
    d->plain_end = 1;
    d->plain_rc = rc;
    dlenc_finish(d->ez);
  }
}

static ssize_t dl_read(void *cls, uint64_t pos, char *buf, size_t max) {
  dl *d = cls;
  (void)pos;
  /* The client took the last block; from here the time is ours. */
  d->send_by = 0;
  slowguard_send_by(d->guard, 0);
  if (max > DL_BLOCK)
    max = DL_BLOCK;
  if (d->finished)
    return MHD_CONTENT_READER_END_OF_STREAM;
  if (atomic_load_explicit(&d->w->stopping, memory_order_relaxed))
    return dl_end(d, GTP_E_SHUTDOWN);
  if (d->ez)
    return dl_read_encoded(d, buf, max);
  int rc = 0;
  size_t n = dl_plain(d, buf, max, &rc);
  return n > 0 ? dl_sent(d, n) : dl_end(d, rc);
}

/* Allocates a download; takes seqs (malloc'd, n entries) and the download
 * slot the caller took. NULL on ENOMEM (seqs freed, slot released). */
static dl *dl_new(web_req *r, int chrome, int enc, int64_t *seqs, size_t n,
                  int64_t span_start, int64_t span_end) {
  web_server *w = r->w;
  dl *d = calloc(1, sizeof *d);
  if (!d)
    goto fail;
  d->w = w;
  d->guard = web_conn_guard(r->conn);
  d->chrome = chrome;
  d->seqs = seqs;
  d->n = n;
  /* A stored generation is at most GTP_GEN_MAX_BYTES (invariant 2). */
  gtp_wbuf_init(&d->out, 0);
  gtp_wbuf_init(&d->raw, 0);
  if (chrome) {
    if (dlpipe_new(DL_PIPE, &d->pipe) < 0)
      goto fail_all;
    if (chrome == DL_FMT_PERFETTO)
      d->pft = gtp_perfetto_new(pipe_sink, d);
    else
      d->ch = gtp_chrome_new(pipe_sink, d, span_start, span_end);
    if (!d->ch && !d->pft)
      goto fail_all;
    /* Stack frames named through the shared symbol cache unless the
     * request said symbols=no (docs/SYMBOLS.md). */
    const char *sa = web_arg(r, "symbols");
    if (!sa || strcmp(sa, "no")) {
      if (!(d->sym = symreq_new(w->syms)))
        goto fail_all;
      if (d->pft)
        gtp_perfetto_set_symbolizer(d->pft, symreq_symbolizer(d->sym));
      else
        gtp_chrome_set_symbolizer(d->ch, symreq_symbolizer(d->sym));
    }
  } else {
    gtp_put_file_header(&d->out);
    if (d->out.err)
      goto fail_all;
  }
  if (enc == DLENC_ZSTD && !chrome) {
    /* The file header as a frame of its own; the generations follow as
     * their stored frames. */
    uint8_t z[64];
    size_t zn = ZSTD_compress(z, sizeof z, d->out.data, d->out.len, 1);
    if (ZSTD_isError(zn))
      goto fail_all;
    gtp_wbuf_reset(&d->out);
    gtp_wbuf_put(&d->out, z, zn);
    if (d->out.err)
      goto fail_all;
    d->zpass = 1;
  } else if (enc != DLENC_NONE && dlenc_new(enc, &d->ez) < 0) {
    goto fail_all;
  }
  return d;

fail_all:
  dlenc_free(d->ez);
  gtp_chrome_free(d->ch);
  gtp_perfetto_free(d->pft);
  symreq_free(d->sym);
  dlpipe_free(d->pipe);
  gtp_wbuf_fini(&d->out);
  gtp_wbuf_fini(&d->raw);
fail:
  free(d);
  free(seqs);
  web_dl_slot_put(w);
  return NULL;
}

/* Turns the filename stem into something safe inside a quoted
 * Content-Disposition value. */
static void safe_name(char *dst, size_t cap, const char *src) {
  size_t i = 0;
  for (; src && *src && i + 1 < cap; src++) {
    char c = *src;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    dst[i++] = ok ? c : '_';
  }
  dst[i] = 0;
  if (i == 0)
    snprintf(dst, cap, "trace");
}

typedef struct dl_info {
  const char *stem; /* service or session, for the file name */
  int64_t name_ns;  /* time in the file name */
  uint64_t gens, sessions, lost;
  int64_t span_start, span_end;
} dl_info;

/* Builds and queues the streaming response. Takes seqs and the download
 * slot. */
static enum MHD_Result dl_respond(web_req *r, int chrome, int64_t *seqs,
                                  size_t n, const dl_info *info,
                                  const char *what) {
  int enc = dlenc_pick(MHD_lookup_connection_value(
      r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
  dl *d = dl_new(r, chrome, enc, seqs, n, info->span_start, info->span_end);
  if (!d)
    return web_error(r, 500, "internal", "out of memory");
  snprintf(d->what, sizeof d->what, "%s", what);
  struct MHD_Response *resp = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, DL_BLOCK, dl_read, d, dl_free);
  if (!resp) {
    dl_free(d);
    return MHD_NO;
  }
  char v[64], stem[96], fname[160], ts[17];
  MHD_add_response_header(resp, "Content-Type",
                          chrome == DL_FMT_CHROME ? "application/json"
                                                  : "application/octet-stream");
  safe_name(stem, sizeof stem, info->stem);
  httptime_format_compact(info->name_ns, ts);
  snprintf(fname, sizeof fname, "attachment; filename=\"%s-%s.%s\"", stem, ts,
           chrome == DL_FMT_CHROME     ? "json"
           : chrome == DL_FMT_PERFETTO ? "pftrace"
                                       : "gentrace");
  MHD_add_response_header(resp, "Content-Disposition", fname);
  /* Caches must not hand a compressed answer to a client that did not ask
   * for one. */
  MHD_add_response_header(resp, "Vary", "Accept-Encoding");
  if (enc != DLENC_NONE)
    MHD_add_response_header(resp, "Content-Encoding", dlenc_name(enc));
  snprintf(v, sizeof v, "%" PRIu64, info->gens);
  MHD_add_response_header(resp, "X-Gentrace-Generations", v);
  snprintf(v, sizeof v, "%" PRIu64, info->sessions);
  MHD_add_response_header(resp, "X-Gentrace-Sessions", v);
  snprintf(v, sizeof v, "%" PRIu64, info->lost);
  MHD_add_response_header(resp, "X-Gentrace-Lost-Events", v);
  if (info->gens) {
    /* The exact span covered: whole generations, so usually wider than
     * the window asked for. */
    char t[HTTPTIME_RFC3339_LEN];
    httptime_format(info->span_start, t);
    MHD_add_response_header(resp, "X-Gentrace-Start", t);
    httptime_format(info->span_end, t);
    MHD_add_response_header(resp, "X-Gentrace-End", t);
    snprintf(v, sizeof v, "%" PRId64, info->span_start);
    MHD_add_response_header(resp, "X-Gentrace-Start-Ns", v);
    snprintf(v, sizeof v, "%" PRId64, info->span_end);
    MHD_add_response_header(resp, "X-Gentrace-End-Ns", v);
  }
  return web_queue(r, 200, resp);
}

static int parse_format(web_req *r, int *chrome) {
  const char *f = web_arg(r, "format");
  *chrome = 0;
  if (!f || strcmp(f, "gentrace") == 0)
    return 0;
  if (strcmp(f, "chrome") == 0) {
    *chrome = DL_FMT_CHROME;
    return 0;
  }
  if (strcmp(f, "perfetto") == 0) {
    *chrome = DL_FMT_PERFETTO;
    return 0;
  }
  web_error(r, 400, "bad_parameter",
            "format: expected gentrace, chrome or perfetto (and go on "
            "/v1/trace)");
  return -1;
}

/* symbols=yes|no (Chrome and Perfetto: name stack frames, the default, or
 * keep hex pcs). */
static int parse_symbols(web_req *r) {
  const char *s = web_arg(r, "symbols");
  if (!s || !strcmp(s, "yes") || !strcmp(s, "no"))
    return 0;
  web_error(r, 400, "bad_parameter", "symbols: expected yes or no");
  return -1;
}

/* ---------------------------------------------------------- the window */

/* Sessions seen while listing: a small open-addressing set of 32-hex ids,
 * only to count them for X-Gentrace-Sessions. */
typedef struct sess_set {
  char (*ids)[33];
  size_t cap, n;
  int err;
} sess_set;

static uint64_t hash_hex(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211u;
  return h;
}

static void sess_add(sess_set *s, const char *id) {
  if (s->err || !id)
    return;
  if (2 * (s->n + 1) > s->cap) {
    size_t ncap = s->cap ? 2 * s->cap : 64;
    char(*nids)[33] = calloc(ncap, sizeof *nids);
    if (!nids) {
      s->err = 1;
      return;
    }
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->ids[i][0])
        continue;
      size_t k = hash_hex(s->ids[i]) & (ncap - 1);
      while (nids[k][0])
        k = (k + 1) & (ncap - 1);
      memcpy(nids[k], s->ids[i], 33);
    }
    free(s->ids);
    s->ids = nids;
    s->cap = ncap;
  }
  size_t k = hash_hex(id) & (s->cap - 1);
  while (s->ids[k][0]) {
    if (strncmp(s->ids[k], id, 32) == 0)
      return;
    k = (k + 1) & (s->cap - 1);
  }
  snprintf(s->ids[k], 33, "%s", id);
  s->n++;
}

typedef struct win_ctx {
  int64_t *seqs;
  size_t n, cap;
  uint64_t bytes, max_bytes, lost;
  int64_t span_start, span_end;
  sess_set sessions;
  char service[GTP_IDENT_STR_MAX + 1];
  int too_big, oom;
} win_ctx;

static int win_row(void *cls, const store_gen_row *g) {
  win_ctx *c = cls;
  c->bytes += g->bytes;
  /* Stop listing as soon as the answer is known to be 413: keeps both the
   * listing time and its memory bounded by the limit. */
  if (c->bytes > c->max_bytes || c->n >= WEB_WINDOW_GENS_MAX) {
    c->too_big = 1;
    return 1;
  }
  if (c->n == c->cap) {
    size_t ncap = c->cap ? 2 * c->cap : 256;
    int64_t *ns = realloc(c->seqs, ncap * sizeof *ns);
    if (!ns) {
      c->oom = 1;
      return 1;
    }
    c->seqs = ns;
    c->cap = ncap;
  }
  c->seqs[c->n++] = g->seq;
  c->lost += g->dropped + g->evicted + g->rejected;
  if (c->n == 1 || g->start_ns < c->span_start)
    c->span_start = g->start_ns;
  if (c->n == 1 || g->end_ns > c->span_end)
    c->span_end = g->end_ns;
  if (c->n == 1 && g->service)
    snprintf(c->service, sizeof c->service, "%s", g->service);
  sess_add(&c->sessions, g->session);
  return c->sessions.err ? (c->oom = 1) : 0;
}

static void fmt_size(char *out, size_t cap, uint64_t b) {
  if (b >= (UINT64_C(1) << 30))
    snprintf(out, cap, "%.1f GiB", (double)b / (1u << 30));
  else if (b >= (1u << 20))
    snprintf(out, cap, "%.1f MiB", (double)b / (1u << 20));
  else
    snprintf(out, cap, "%" PRIu64 " bytes", b);
}

/* An empty window is only "no data" when what it names exists: a typo in
 * service=, host= or session= must answer 404, not a valid empty file
 * (HTTP.md, status codes). 1 known, 0 unknown, <0 error. */
static int stop_at_first(void *ctx, const void *row) {
  (void)row;
  *(int *)ctx = 1;
  return 1;
}
static int sess_seen(void *ctx, const store_session_row *row) {
  return stop_at_first(ctx, row);
}
static int gen_seen(void *ctx, const store_gen_row *row) {
  return stop_at_first(ctx, row);
}
static int subject_known(storage_reader *sr, const store_window_query *q) {
  int seen = 0, rc;
  if (q->session) {
    rc = storage_read_session_gens(sr, q->session, 0, INT64_MAX, -1, 1,
                                   gen_seen, &seen);
    if (rc == GTP_E_NOTFOUND)
      return 0;
    return rc < 0 ? rc : 1; /* a session without rows is still known */
  }
  store_session_filter f = {q->service, q->host, NULL, NULL};
  rc = storage_read_sessions(sr, &f, sess_seen, &seen);
  return rc < 0 ? rc : seen;
}

/* A download's slot (web_dl_slot_take) and a pooled reader; NULL with the
 * answer queued (and the slot given back) when either is not to be had. */
static storage_reader *dl_begin(web_req *r) {
  if (web_dl_slot_take(r) < 0)
    return NULL;
  storage_reader *sr = web_reader_get(r);
  if (!sr)
    web_dl_slot_put(r->w);
  return sr;
}

enum MHD_Result web_trace(web_req *r) {
  const char *fmt = web_arg(r, "format");
  if (fmt && strcmp(fmt, "go") == 0)
    return web_gotrace(r); /* a Go session as a Go trace: web_gotrace.c */
  static const char *const allowed[] = {"session", "service", "host",
                                        "from",    "to",      "last",
                                        "format",  "symbols", NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  web_server *w = r->w;
  char sid[33];
  int has_session, chrome;
  int64_t from = 0, to = 0, last = 0;
  int has_from, has_to, has_last;
  if ((has_session = web_arg_session(r, "session", sid)) < 0 ||
      (has_from = web_arg_time(r, "from", &from)) < 0 ||
      (has_to = web_arg_time(r, "to", &to)) < 0 ||
      (has_last = web_arg_dur(r, "last", &last)) < 0 ||
      parse_format(r, &chrome) < 0 || parse_symbols(r) < 0)
    return r->ret;
  const char *service = web_arg(r, "service");
  const char *host = web_arg(r, "host");
  if (!has_session && !service)
    return web_error(r, 400, "bad_parameter",
                     "session or service: one is required (session=ID, or "
                     "service=NAME with optional host=NAME)");
  if (has_session && (service || host))
    return web_error(r, 400, "bad_parameter",
                     "session: give either session= or service=/host=, "
                     "not both");
  if (has_last && (has_from || has_to))
    return web_error(r, 400, "bad_parameter",
                     "last: give either last= or from=/to=, not both");
  if (has_last) {
    to = r->now_ns;
    from = to - last > 0 ? to - last : 0;
  } else if (has_from || has_to) {
    if (!has_from)
      return web_error(r, 400, "bad_parameter",
                       "from: required with to= (or use last=DURATION)");
    if (!has_to)
      to = r->now_ns;
  } else {
    /* Nothing said: the last minute, the most common question. */
    to = r->now_ns;
    from = to - 60 * INT64_C(1000000000);
  }
  if (from >= to)
    return web_error(r, 400, "bad_parameter",
                     "from: must be before to (the window is [from, to))");
  storage_reader *sr = dl_begin(r);
  if (!sr)
    return r->ret;
  win_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    web_reader_put(r, sr);
    web_dl_slot_put(w);
    return web_error(r, 500, "internal", "out of memory");
  }
  c->max_bytes = w->cfg.max_window_bytes;
  store_window_query q = {has_session ? sid : NULL,
                          has_session ? NULL : service,
                          has_session ? NULL : host, from, to};
  int rc = storage_read_window(sr, &q, win_row, c);
  int known = 1;
  if (rc >= 0 && !c->oom && c->n == 0)
    known = subject_known(sr, &q);
  web_reader_put(r, sr);
  enum MHD_Result ret;
  int slot = 1; /* still ours to release */
  if (known == 0 && has_session) {
    ret = web_error(r, 404, "not_found",
                    "no session %s (GET /v1/agents lists the sessions)", sid);
  } else if (known == 0 && host) {
    ret = web_error(r, 404, "not_found",
                    "no session of service \"%s\" on host \"%s\" (GET "
                    "/v1/agents lists services and hosts)",
                    service, host);
  } else if (known == 0) {
    ret = web_error(r, 404, "not_found",
                    "no service \"%s\" (GET /v1/agents lists the services)",
                    service);
  } else if (rc < 0 || c->oom || known < 0) {
    rc = rc < 0 ? rc : known < 0 ? known : -ENOMEM;
    ret = web_error(r, web_rc_status(rc), web_rc_code(rc),
                    "listing the window failed: %s", gtp_strerror(rc));
  } else if (c->too_big) {
    char lim[32];
    fmt_size(lim, sizeof lim, c->max_bytes);
    ret = web_error(
        r, 413, "window_too_large",
        "the window holds more than %s of trace (the --max-window-bytes "
        "limit); narrow it: a shorter window (last=10s, or from=/to= closer "
        "together), one agent with session=, or one machine with host=",
        lim);
  } else {
    dl_info info = {0};
    info.stem = has_session ? (c->service[0] ? c->service : sid) : service;
    info.name_ns = from;
    info.gens = c->n;
    info.sessions = c->sessions.n;
    info.lost = c->lost;
    info.span_start = c->n ? c->span_start : from;
    info.span_end = c->n ? c->span_end : to;
    /* Before the headers: a shared store that cannot serve the window
     * now gets a clean 503 instead of a stream cut short. */
    storage_reader *cr;
    int crc = readpool_get(w->pool, WEB_POOL_WAIT_MS, &cr);
    if (crc == 0) {
      crc = storage_read_check(cr, c->seqs, c->n);
      readpool_put(w->pool, cr);
    }
    if (crc < 0) {
      ret = web_error(r, web_rc_status(crc), web_rc_code(crc),
                      "the store cannot serve this window now: %s",
                      gtp_strerror(crc));
    } else {
      char what[80];
      snprintf(what, sizeof what, "window %.64s", info.stem);
      ret = dl_respond(r, chrome, c->seqs, c->n, &info, what);
      c->seqs = NULL; /* taken */
      slot = 0;       /* taken */
    }
  }
  if (slot)
    web_dl_slot_put(w);
  free(c->seqs);
  free(c->sessions.ids);
  free(c);
  return ret;
}

/* ------------------------------------------------ one whole generation */

typedef struct one_ctx {
  uint64_t want;
  int found;
  int64_t seq, start_ns, end_ns;
  uint64_t lost;
  char service[GTP_IDENT_STR_MAX + 1];
} one_ctx;

static int one_row(void *cls, const store_gen_row *g) {
  one_ctx *c = cls;
  if (g->gen == c->want) {
    c->found = 1;
    c->seq = g->seq;
    c->start_ns = g->start_ns;
    c->end_ns = g->end_ns;
    c->lost = g->dropped + g->evicted + g->rejected;
    snprintf(c->service, sizeof c->service, "%s", g->service ? g->service : "");
  }
  return 1; /* one row is all we asked for */
}

enum MHD_Result web_session_gen(web_req *r, const char *session,
                                const char *gen) {
  static const char *const allowed[] = {"format", "symbols", NULL};
  if (web_args_check(r, allowed))
    return r->ret;
  int chrome;
  if (parse_format(r, &chrome) < 0 || parse_symbols(r) < 0)
    return r->ret;
  uint64_t g = 0;
  const char *p = gen;
  int ok = *p != 0 && strlen(gen) <= 19;
  for (; ok && *p; p++)
    ok = *p >= '0' && *p <= '9' && (g = g * 10 + (uint64_t)(*p - '0'), 1);
  if (!ok || g > INT64_MAX)
    return web_error(r, 404, "not_found",
                     "no such path: %.200s (generation must be a number)",
                     r->url);
  web_server *w = r->w;
  storage_reader *sr = dl_begin(r);
  if (!sr)
    return r->ret;
  one_ctx c = {.want = g};
  int rc = storage_read_session_gens(sr, session, 0, INT64_MAX, (int64_t)g - 1,
                                     1, one_row, &c);
  web_reader_put(r, sr);
  if (rc == GTP_E_NOTFOUND || (rc >= 0 && !c.found)) {
    web_dl_slot_put(w);
    if (rc == GTP_E_NOTFOUND)
      return web_error(r, 404, "not_found", "no session %s", session);
    return web_error(r, 404, "not_found",
                     "session %s has no generation %" PRIu64, session, g);
  }
  if (rc < 0) {
    web_dl_slot_put(w);
    return web_error(r, web_rc_status(rc), web_rc_code(rc),
                     "reading the generation failed: %s", gtp_strerror(rc));
  }
  int64_t *seqs = malloc(sizeof *seqs);
  if (!seqs) {
    web_dl_slot_put(w);
    return web_error(r, 500, "internal", "out of memory");
  }
  seqs[0] = c.seq;
  storage_reader *cr;
  int crc = readpool_get(w->pool, WEB_POOL_WAIT_MS, &cr);
  if (crc == 0) {
    crc = storage_read_check(cr, seqs, 1);
    readpool_put(w->pool, cr);
  }
  if (crc < 0) {
    free(seqs);
    web_dl_slot_put(w);
    return web_error(r, web_rc_status(crc), web_rc_code(crc),
                     "the store cannot serve this generation now: %s",
                     gtp_strerror(crc));
  }
  dl_info info = {.stem = c.service[0] ? c.service : session,
                  .name_ns = c.start_ns,
                  .gens = 1,
                  .sessions = 1,
                  .lost = c.lost,
                  .span_start = c.start_ns,
                  .span_end = c.end_ns};
  char what[80];
  snprintf(what, sizeof what, "generation %.32s/%" PRIu64, session, g);
  return dl_respond(r, chrome, seqs, 1, &info, what);
}
