/* fuzz.h: the fuzz entry points and the seed generator, shared by the
 * libFuzzer binaries (fuzz-smoke) and the plain replay driver (make check).
 *
 * Each entry point takes arbitrary bytes and must never crash, leak, read out
 * of bounds or hang; an oracle violation (two decodings that should agree
 * but do not) calls fuzz_fail(), which aborts so both libFuzzer and the
 * replay driver report it with the input that caused it. */
#ifndef GTP_FUZZ_H
#define GTP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Incremental frame decoder in pseudo-random splits + payload decoders. */
int gtp_fuzz_frame_one(const uint8_t *data, size_t size);
/* File reader, generation parser, table iterators, event iteration. */
int gtp_fuzz_trace_one(const uint8_t *data, size_t size);

/* Go 1.22+ generation reader (first byte: version). */
int gtp_fuzz_gotrace_one(const uint8_t *data, size_t size);

/* Seed kinds passed to the emit callback. */
enum { GTP_SEED_FRAME = 0, GTP_SEED_TRACE = 1, GTP_SEED_GOTRACE = 2 };
typedef void (*gtp_seed_emit)(int kind, const char *name, const uint8_t *p,
                              size_t n, void *ctx);
/* Builds every seed with the real writer APIs and hands each to emit.
 * Returns 0, or a negative code if a writer failed. */
int gtp_fuzz_seeds(gtp_seed_emit emit, void *ctx);
/* The Go reader's seeds (fuzz_gotrace.c), one per Go version. */
int gtp_fuzz_go_seeds(gtp_seed_emit emit, void *ctx);

#define fuzz_fail(what)                                                        \
  do {                                                                         \
    fprintf(stderr, "%s:%d: fuzz oracle failed: %s\n", __FILE__, __LINE__,     \
            what);                                                             \
    abort();                                                                   \
  } while (0)

#define fuzz_check(cond)                                                       \
  do {                                                                         \
    if (!(cond))                                                               \
      fuzz_fail(#cond);                                                        \
  } while (0)

#endif
