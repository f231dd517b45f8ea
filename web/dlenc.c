/* dlenc.c: streaming gzip (zlib deflate) and zstd for downloads.
 *
 * Invariants:
 *  1. Memory is fixed at dlenc_new: one DLENC_IN input block plus the
 *     codec's state; nothing grows with the answer.
 *  2. Input is only accepted once the previous block was consumed whole,
 *     so no byte is dropped or reordered between producer and codec.
 *  3. done is reported only after the codec's end (gzip trailer, zstd
 *     frame epilogue) was returned, so a complete transfer is a complete
 *     compressed stream; an early end closes the stream too (the prefix
 *     decodes), and the transfer itself then signals the truncation.
 */
#include "config.h"

#include "dlenc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

#define DLENC_IN (256u << 10)

struct dlenc {
  int kind;
  ZSTD_CCtx *z;
  z_stream gz;
  int gz_inited;
  uint8_t *in;
  size_t in_len, in_off;
  int finishing, done;
};

/* Parses one "coding;q=0.5" element: the coding into name, returns q > 0. */
static int element(const char *p, size_t n, char *name, size_t cap) {
  while (n && isspace((unsigned char)*p))
    p++, n--;
  size_t i = 0;
  while (i < n && p[i] != ';' && !isspace((unsigned char)p[i]))
    i++;
  if (i == 0 || i >= cap)
    return 0;
  memcpy(name, p, i);
  name[i] = 0;
  const char *q = memchr(p + i, ';', n - i);
  if (q) {
    const char *e = p + n;
    for (q++; q < e && isspace((unsigned char)*q); q++)
      ;
    if (e - q >= 2 && (q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
      /* q=0, q=0.0, q=0.000: refused; anything else is accepted. */
      const char *v = q + 2;
      int nonzero = 0;
      for (; v < e && (isdigit((unsigned char)*v) || *v == '.'); v++)
        if (*v >= '1' && *v <= '9')
          nonzero = 1;
      return nonzero;
    }
  }
  return 1;
}

int dlenc_pick(const char *ae) {
  if (!ae)
    return DLENC_NONE;
  int gzip = 0, zstd = 0;
  const char *p = ae;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    char name[16] = "";
    int ok = element(p, n, name, sizeof name);
    if (strcasecmp(name, "zstd") == 0)
      zstd = ok ? 1 : -1;
    else if (strcasecmp(name, "gzip") == 0 || strcasecmp(name, "x-gzip") == 0)
      gzip = ok ? 1 : -1;
    if (!c)
      break;
    p = c + 1;
  }
  return zstd > 0 ? DLENC_ZSTD : gzip > 0 ? DLENC_GZIP : DLENC_NONE;
}

const char *dlenc_name(int kind) {
  return kind == DLENC_ZSTD ? "zstd" : kind == DLENC_GZIP ? "gzip" : NULL;
}

int dlenc_new(int kind, dlenc **out) {
  *out = NULL;
  dlenc *e = calloc(1, sizeof *e);
  if (!e)
    return -ENOMEM;
  e->kind = kind;
  e->in = malloc(DLENC_IN);
  if (!e->in)
    goto fail;
  if (kind == DLENC_ZSTD) {
    e->z = ZSTD_createCCtx();
    if (!e->z ||
        ZSTD_isError(
            ZSTD_CCtx_setParameter(e->z, ZSTD_c_compressionLevel, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(e->z, ZSTD_c_checksumFlag, 1)))
      goto fail;
  } else if (kind == DLENC_GZIP) {
    /* windowBits 15 + 16: a gzip wrapper; memLevel 8 (~256 KiB state). */
    if (deflateInit2(&e->gz, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
      goto fail;
    e->gz_inited = 1;
  } else {
    goto fail;
  }
  *out = e;
  return 0;
fail:
  dlenc_free(e);
  return -ENOMEM;
}

void dlenc_free(dlenc *e) {
  if (!e)
    return;
  ZSTD_freeCCtx(e->z);
  if (e->gz_inited)
    deflateEnd(&e->gz);
  free(e->in);
  free(e);
}

uint8_t *dlenc_space(dlenc *e, size_t *cap) {
  if (e->finishing || e->in_off < e->in_len)
    return NULL; /* invariant 2 */
  e->in_off = e->in_len = 0;
  *cap = DLENC_IN;
  return e->in;
}

void dlenc_fed(dlenc *e, size_t n) {
  e->in_len = n <= DLENC_IN ? n : DLENC_IN;
  e->in_off = 0;
}

void dlenc_finish(dlenc *e) {
  e->finishing = 1;
}

long dlenc_run(dlenc *e, uint8_t *out, size_t max, int *done) {
  *done = e->done;
  if (e->done || max == 0)
    return 0;
  if (e->kind == DLENC_ZSTD) {
    ZSTD_inBuffer in = {e->in, e->in_len, e->in_off};
    ZSTD_outBuffer o = {out, max, 0};
    int ending = e->finishing && e->in_off == e->in_len;
    size_t left = ZSTD_compressStream2(e->z, &o, &in,
                                       ending ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(left))
      return -EIO;
    e->in_off = in.pos;
    if (ending && left == 0)
      e->done = 1;
    *done = e->done;
    return (long)o.pos;
  }
  int ending = e->finishing && e->in_off == e->in_len;
  e->gz.next_in = e->in + e->in_off;
  e->gz.avail_in = (uInt)(e->in_len - e->in_off);
  e->gz.next_out = out;
  e->gz.avail_out = (uInt)(max > UINT32_MAX ? UINT32_MAX : max);
  int rc = deflate(&e->gz, ending ? Z_FINISH : Z_NO_FLUSH);
  if (rc == Z_STREAM_ERROR)
    return -EIO;
  e->in_off = e->in_len - e->gz.avail_in;
  if (ending && rc == Z_STREAM_END)
    e->done = 1;
  *done = e->done;
  return (long)(e->gz.next_out - out);
}
