/* dlenc.h: the Content-Encoding of a download (gzip or zstd), applied as a
 * streaming stage between a download's plain bytes and the socket, in
 * bounded memory: a fixed input block and the codec's own state (zstd level
 * 1: about 1.3 MiB; deflate level 1: about 300 KiB), whatever the size of
 * the answer.
 *
 * Thread: one download, one thread at a time (the connection's).
 */
#ifndef DLENC_H
#define DLENC_H

#include <stddef.h>
#include <stdint.h>

enum dlenc_kind { DLENC_NONE = 0, DLENC_GZIP = 1, DLENC_ZSTD = 2 };

/* The encoding to answer an Accept-Encoding header with (NULL: none):
 * zstd before gzip, any q=0 refuses that coding. */
int dlenc_pick(const char *accept_encoding);
/* The Content-Encoding token of kind ("gzip", "zstd"), NULL for NONE. */
const char *dlenc_name(int kind);

typedef struct dlenc dlenc;

/* 0 or -ENOMEM. */
int dlenc_new(int kind, dlenc **out);
void dlenc_free(dlenc *e); /* NULL is fine */

/* Input: the space where the next plain bytes go, *cap of them, when the
 * encoder has taken all earlier input (NULL otherwise); dlenc_fed says how
 * many were written there. */
uint8_t *dlenc_space(dlenc *e, size_t *cap);
void dlenc_fed(dlenc *e, size_t n);
/* No more input: the next dlenc_run calls flush and close the stream. */
void dlenc_finish(dlenc *e);
/* Encodes into out (max > 0 bytes) what it can; returns the bytes written
 * (may be 0 when it needs input), or < 0 on a codec error. *done becomes 1
 * once the stream is closed and every byte of it was returned. */
long dlenc_run(dlenc *e, uint8_t *out, size_t max, int *done);

#endif
