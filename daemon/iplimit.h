/* iplimit.h: connections per peer address (--max-conns-per-ip), so one
 * host cannot take every agent slot.
 *
 * Addresses are keys of 16 bytes: an IPv4 address as its IPv4-mapped IPv6
 * form, an IPv6 address cut to its /64 (one host usually holds a whole
 * /64, so counting /128s would let it open 2^64 "hosts").
 *
 * Thread: one thread (the ingest loop).
 */
#ifndef IPLIMIT_H
#define IPLIMIT_H

#include <stdint.h>
#include <sys/socket.h>

typedef struct iplimit iplimit;

/* NULL on out-of-memory. */
iplimit *iplimit_new(void);
void iplimit_free(iplimit *l);

/* The key of a peer address; 0, or -1 for a family other than IPv4/IPv6. */
int iplimit_key(const struct sockaddr *sa, uint8_t key[16]);

/* Counts one more connection from key if fewer than max are counted:
 * returns 1 (counted; call iplimit_release once it closes), 0 (over the
 * limit, nothing counted) or -ENOMEM (no memory to count a new address,
 * nothing counted). */
int iplimit_acquire(iplimit *l, const uint8_t key[16], uint64_t max);
void iplimit_release(iplimit *l, const uint8_t key[16]);

/* Connections counted for key (tests, logs). */
uint64_t iplimit_count(const iplimit *l, const uint8_t key[16]);

#endif
