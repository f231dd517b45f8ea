/* store_int.h: helpers shared by the files of the storage library
 * (store.c, store_read.c); not part of its interface. */
#ifndef STORE_INT_H
#define STORE_INT_H

/* Sets *cause (if cause is not NULL) to a malloc'd message for a human, or
 * to NULL when even that allocation fails. */
void store_set_cause(char **cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
