/* slowguard.h: a deadline for each HTTP request's headers (slowloris guard).
 * See slowguard.c for the design. Thread: any, except where noted. */
#ifndef SLOWGUARD_H
#define SLOWGUARD_H

#include <stdint.h>

typedef struct slowguard slowguard;
typedef struct slowguard_conn slowguard_conn;

/* Starts the watchdog. deadline_ns: time a client has to send a request's
 * headers (<= 0: 30 s). 0 or a negative code. */
int slowguard_new(int64_t deadline_ns, slowguard **out);
/* Stops the watchdog and frees the guard. Call after libmicrohttpd stopped. */
void slowguard_free(slowguard *g);

/* A connection opened on socket fd; returns its tracker (NULL on ENOMEM: the
 * connection is then not guarded). Thread: libmicrohttpd's notify callback. */
slowguard_conn *slowguard_conn_started(slowguard *g, int fd);
/* The connection closed; frees the tracker. NULL is fine. */
void slowguard_conn_closed(slowguard *g, slowguard_conn *c);
/* Headers of a request arrived / its answer completed. NULL is fine. */
void slowguard_request_began(slowguard_conn *c);
void slowguard_request_done(slowguard_conn *c);

/* A download handed the connection a block to send: cut the connection if
 * it is still inside this request at deadline_ns (slowguard_now_ns clock;
 * 0 = no deadline, e.g. while the server itself prepares the next block).
 * Thread: the connection's. NULL is fine. */
void slowguard_send_by(slowguard_conn *c, int64_t deadline_ns);
/* The guard's clock (CLOCK_MONOTONIC, ns). */
int64_t slowguard_now_ns(void);

/* 0, or minus the first of slowguard.c's invariants that does not hold.
 * Debug builds also check at every connection start and close. */
int slowguard_check_invariants(slowguard *g);

/* Connections cut so far for slow request headers. */
uint64_t slowguard_cuts(slowguard *g);

#endif
