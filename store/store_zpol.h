/* store_zpol.h: one compressor thread's zstd context and its choice of
 * zstd's shortest match per session (store_zpol.c).
 *
 * A trace's events are a few varint bytes each. When consecutive events
 * differ only in a byte or two (B1's counters: type, tick delta 0 or 1,
 * name id, a value counting up, whose low byte alone changes), what
 * repeats from one event to the next is the event's length less one: 5
 * bytes for 6-byte events (values under 2^20), 6 for 7-byte ones. zstd's
 * level 1 asks for 7 on large inputs (it is tuned on text) and then finds
 * none of them: such a generation is stored at 0.48-0.53 of its size with
 * 7, at 0.20 with 5 or 6, for 3-10% more CPU. On events whose bytes do not
 * repeat that way (random durations, many names) 5 or 6 find short
 * matches that shrink nothing and cost up to 2.3x the CPU of 7
 * (bench_sumwalk's regions). So each session's choice is measured: a
 * 64 KiB slice of one of its generations is compressed at 5, 6 and 7, and
 * 5 or 6 is taken when it stores at most STORE_ZPOL_GAIN of what 7 does;
 * the choice holds for the session's next STORE_ZPOL_HOLD generations,
 * then is measured again.
 *
 * Thread: each compressor owns its store_zpol; nothing is shared.
 */
#ifndef STORE_ZPOL_H
#define STORE_ZPOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct store_zpol store_zpol;

/* Sessions remembered per compressor (direct-mapped; a collision only
 * costs a new measurement). */
#define STORE_ZPOL_SLOTS 1024
/* Generations a choice holds before it is measured again. */
#define STORE_ZPOL_HOLD 32
/* The slice measured both ways, from the middle of a generation (events,
 * not the tables at its start). */
#define STORE_ZPOL_PROBE (64u << 10)
/* Payloads below this are compressed with zstd's own choice for their
 * size (5 at level 1 up to 128 KiB): a probe would cost more than it
 * saves. */
#define STORE_ZPOL_MIN (256u << 10)
/* 5 or 6 is taken when its slice is at most this share of 7's (1/100).
 * Their search costs up to 1.5x 7's CPU on bytes that repeat at every
 * event, which the store thread earns back only when it writes much less
 * (about 2.3 ns per stored byte here, B1): B1's counters store 0.40 of
 * 7's and take 5 or 6; random tick deltas 0.73 (bench_sumwalk's counters,
 * 1.37x the zstd CPU) and keep 7. */
#define STORE_ZPOL_GAIN 60

/* A context at zstd level `level`; NULL when out of memory. */
store_zpol *store_zpol_new(int level);
void store_zpol_free(store_zpol *z);

/* Compresses src[0, len) of session into dst (cap bytes, at least
 * ZSTD_compressBound(len)) as one zstd frame with the session's shortest
 * match (measured first when due). Returns the frame's size, or a zstd
 * error code (ZSTD_isError). */
size_t store_zpol_compress(store_zpol *z, const uint8_t session[16],
                           const uint8_t *src, size_t len, void *dst,
                           size_t cap);

/* One frame of src[0, len) at zstd level `level` (negative: zstd's fast
 * levels) with zstd's own shortest match for it, no measurement: what a
 * compressor makes while it is behind (store.c invariant 15). The context
 * stays at the level given to store_zpol_new. Returns the frame's size or
 * a zstd error code. */
size_t store_zpol_compress_at(store_zpol *z, int level, const uint8_t *src,
                              size_t len, void *dst, size_t cap);

/* The shortest match the last store_zpol_compress used (0: zstd's own,
 * for a small payload), and how many measurements z made so far. */
int store_zpol_last_mml(const store_zpol *z);
uint64_t store_zpol_probes(const store_zpol *z);

#endif
