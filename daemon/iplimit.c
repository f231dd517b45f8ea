/* iplimit.c: a count of open connections per peer address.
 *
 * Owns: a chained hash table of (key, count) entries.
 *
 * Invariants:
 *  1. An entry exists exactly while its count is > 0: release frees it at
 *     0, otherwise a scan of many addresses would leave the table growing
 *     for ever.
 *  2. The hash is keyed with a random seed drawn at iplimit_new, otherwise
 *     a peer choosing addresses (an IPv6 /48 has plenty) could put them all
 *     in one bucket and make every accept walk a long chain.
 */
#include "config.h"

#include "iplimit.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IPLIMIT_BUCKETS 4096 /* power of two */

typedef struct ipent {
  struct ipent *next;
  uint8_t key[16];
  uint64_t count;
} ipent;

struct iplimit {
  uint64_t seed;
  ipent *b[IPLIMIT_BUCKETS];
};

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static unsigned bucket(const iplimit *l, const uint8_t k[16]) {
  uint64_t a, b;
  memcpy(&a, k, 8);
  memcpy(&b, k + 8, 8);
  return (unsigned)(mix64(mix64(a ^ l->seed) ^ b) & (IPLIMIT_BUCKETS - 1));
}

iplimit *iplimit_new(void) {
  iplimit *l = calloc(1, sizeof *l);
  if (l == NULL)
    return NULL;
  if (getrandom(&l->seed, sizeof l->seed, GRND_NONBLOCK) !=
      (ssize_t)sizeof l->seed) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    l->seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^
                    (uint64_t)(uintptr_t)l);
  }
  return l;
}

void iplimit_free(iplimit *l) {
  if (l == NULL)
    return;
  for (unsigned i = 0; i < IPLIMIT_BUCKETS; i++) {
    ipent *e = l->b[i];
    while (e != NULL) {
      ipent *n = e->next;
      free(e);
      e = n;
    }
  }
  free(l);
}

int iplimit_key(const struct sockaddr *sa, uint8_t key[16]) {
  memset(key, 0, 16);
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    key[10] = key[11] = 0xff;
    memcpy(key + 12, &s4->sin_addr, 4);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    const uint8_t *a = s6->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a, mapped, 12) == 0)
      memcpy(key, a, 16); /* an IPv4 peer on a dual-stack socket */
    else
      memcpy(key, a, 8); /* the /64 */
    return 0;
  }
  return -1;
}

static ipent **find(iplimit *l, const uint8_t k[16]) {
  ipent **pp = &l->b[bucket(l, k)];
  while (*pp != NULL && memcmp((*pp)->key, k, 16) != 0)
    pp = &(*pp)->next;
  return pp;
}

int iplimit_acquire(iplimit *l, const uint8_t key[16], uint64_t max) {
  ipent **pp = find(l, key);
  if (*pp == NULL) {
    if (max == 0)
      return 0;
    ipent *e = calloc(1, sizeof *e);
    if (e == NULL)
      return -ENOMEM; /* refusing is the safe answer */
    memcpy(e->key, key, 16);
    *pp = e;
  }
  if ((*pp)->count >= max)
    return 0;
  (*pp)->count++;
  return 1;
}

void iplimit_release(iplimit *l, const uint8_t key[16]) {
  ipent **pp = find(l, key);
  ipent *e = *pp;
  if (e == NULL)
    return;
  if (--e->count == 0) { /* invariant 1 */
    *pp = e->next;
    free(e);
  }
}

uint64_t iplimit_count(const iplimit *l, const uint8_t key[16]) {
  ipent **pp = find((iplimit *)l, key);
  return *pp != NULL ? (*pp)->count : 0;
}
