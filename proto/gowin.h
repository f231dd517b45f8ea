/* gowin.h: Go trace files out of stored Go generations (FORMAT.md 4.8).
 *
 * A Go session (HELLO tags format=go, go_version=1.NN) stores each Go 1.22+
 * execution-trace generation as GOTRACE records: chunks of the bytes
 * runtime/trace wrote, in order. A Go trace file is the 16-byte Go header
 * for go_version followed by whole generations in order, so a window of a
 * Go session is that header plus the concatenated GOTRACE payloads of its
 * generations. This module only frames and extracts bytes; it does not
 * interpret Go events (the Go reader does).
 */
#ifndef GTP_GOWIN_H
#define GTP_GOWIN_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_GO_HEADER_SIZE 16
#define GTP_GO_MINOR_MIN 22 /* first Go with generations */
#define GTP_GO_MINOR_MAX 99

/* The Go minor version of a generation's session: 22..99 when its tags say
 * format=go and go_version=1.NN, 0 when it is not a Go session (no
 * format=go tag), GTP_E_VERSION when format=go but go_version is missing or
 * not 1.22..1.99. */
int gtp_gowin_minor(const gtp_gen_start *s);

/* The Go file header, "go 1.NN trace" padded with NULs to 16 bytes. */
void gtp_gowin_header(int minor, uint8_t out[GTP_GO_HEADER_SIZE]);

/* Hands the Go bytes of a parsed generation to sink: its GOTRACE payloads
 * in body order (nothing for a generation without any). Returns 0, or the
 * first non-zero value sink returned. */
int gtp_gowin_put(const gtp_gen *g,
                  int (*sink)(void *ctx, const void *p, size_t n), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
