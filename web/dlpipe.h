/* dlpipe.h: a bounded byte pipe between one producer thread (a converter
 * writing a download's body, e.g. Chrome JSON) and one consumer (the HTTP
 * connection's thread handing the bytes to libmicrohttpd). The producer
 * blocks while the pipe is full, so a converter whose output is hundreds of
 * times its input never holds more than the pipe's capacity.
 *
 * Thread: exactly one producer and one consumer, any threads.
 */
#ifndef DLPIPE_H
#define DLPIPE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct dlpipe dlpipe;

/* cap: bytes held at most (> 0). 0 or -ENOMEM. */
int dlpipe_new(size_t cap, dlpipe **out);
/* Frees the pipe; both sides must be done with it. NULL is fine. */
void dlpipe_free(dlpipe *p);

/* Producer: copies all n bytes in, blocking while the pipe is full.
 * 0, or GTP_E_SHUTDOWN once the consumer closed its end. */
int dlpipe_write(dlpipe *p, const void *data, size_t n);
/* Producer: no more bytes. status: 0 = the body is complete, > 0 = it
 * ended early on purpose (a reason of the caller's), < 0 = an error code.
 * The consumer sees the status after the last byte. */
void dlpipe_close_write(dlpipe *p, int status);

/* Consumer: copies up to max bytes out, blocking until there are some or
 * the producer closed. Returns the count (> 0), or 0 at the end with the
 * producer's status in *status. */
size_t dlpipe_read(dlpipe *p, void *buf, size_t max, int *status);
/* Consumer: gives up; the producer's writes fail from now on. */
void dlpipe_close_read(dlpipe *p);

#endif
