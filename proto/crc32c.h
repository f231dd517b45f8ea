/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of a generation's body. Table-driven (slicing-by-8) in portable C;
 * uses the SSE4.2 crc32 instruction when the CPU has it (checked once).
 * Stateless apart from constant tables: thread-safe. */
#ifndef GTP_CRC32C_H
#define GTP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Continues a CRC: pass 0 to start; returns the CRC of everything fed so far
 * (pre- and post-inversion are handled inside, so calls chain). Check value:
 * gtp_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t gtp_crc32c(uint32_t crc, const void *p, size_t n);

/* Internal, for tests and benchmarks: the table path alone, the SSE4.2 path
 * alone (falls back to the table path when the CPU lacks SSE4.2), and whether
 * the CPU has it. Same contract as gtp_crc32c. */
uint32_t gtp__crc32c_sw(uint32_t crc, const void *p, size_t n);
uint32_t gtp__crc32c_hw(uint32_t crc, const void *p, size_t n);
int gtp__crc32c_have_hw(void);

#ifdef __cplusplus
}
#endif
#endif
