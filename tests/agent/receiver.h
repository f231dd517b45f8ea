/* receiver.h: a small gentraced stand-in for the agent tests, built on
 * proto/ only. One thread serves 127.0.0.1:<port 0> one connection at a time:
 * HELLO -> WELCOME, BATCH/GEN_END -> manifest check -> ACK (or ERROR for a
 * generation the test asked it to refuse). It can vanish (close everything,
 * stop listening) and come back on the same port. */
#ifndef TEST_RECEIVER_H
#define TEST_RECEIVER_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

typedef struct rx_gen {
  uint64_t gen;
  uint8_t session[16];
  uint8_t *file; /* header + GEN_START + body + GEN_END: a valid trace file */
  size_t file_len;
  gtp_gen_end end;
} rx_gen;

typedef struct rx rx;

rx *rx_start(void); /* NULL on failure */
int rx_port(rx *r);
void rx_reject_gen(rx *r, uint64_t gen); /* answer ERROR for it */
void rx_vanish(rx *r);
void rx_return(rx *r);
/* Stops the thread; the stored generations stay readable. */
void rx_stop(rx *r);
void rx_free(rx *r);
/* Committed generations, in commit order (valid after rx_stop). */
size_t rx_count(rx *r);
const rx_gen *rx_get(rx *r, size_t i);
uint64_t rx_bad_manifests(rx *r);
uint64_t rx_hellos(rx *r);
/* The next n HELLOs are answered with ERROR(AUTH) (the connection closes),
 * as gentraced answers a HELLO for a session bound to another key. */
void rx_refuse_auth(rx *r, unsigned n);
/* Session id and key of HELLO number i (0-based, the first 64). 0 or -1. */
int rx_hello_id(rx *r, size_t i, uint8_t session[16], uint8_t key[16]);

#endif
