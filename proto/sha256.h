/* sha256.h: SHA-256 (FIPS 180-4), one-shot.
 *
 * gentraced stores a hash of each session key, never the key itself
 * (PROTOCOL.md 6.9), so a copy of the database cannot be used to take over a
 * live session. The inputs are 16 bytes once per HELLO, so this small,
 * dependency-free implementation is plenty; its test vectors are in
 * tests/proto/test_sha256.c.
 */
#ifndef GTP_SHA256_H
#define GTP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GTP_SHA256_SIZE 32

/* out = SHA-256(p[0..n)). p may be NULL when n is 0. Thread-safe. */
void gtp_sha256(const void *p, size_t n, uint8_t out[GTP_SHA256_SIZE]);

#ifdef __cplusplus
}
#endif
#endif /* GTP_SHA256_H */
