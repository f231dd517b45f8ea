/* store_int.h: helpers shared by the files of the storage library
 * (store.c, store_read.c); not part of its interface. */
#ifndef STORE_INT_H
#define STORE_INT_H

#include "text.h"

/* Sets *cause (if cause is not NULL) to a malloc'd message for a human, or
 * to NULL when even that allocation fails: the project's one cause helper. */
#define store_set_cause(cause, ...) ((void)gtp_causef((cause), 0, __VA_ARGS__))

/* The one map from an SQLite result code to the project's error table
 * (0, -errno or GTP_E_*), for the writer and the readers alike. */
int store_sqlite_err(int rc);

/* A reader's connection, for the other read-side files (store_search.c). */
struct sqlite3;
struct store_reader;
struct sqlite3 *store_reader_db(struct store_reader *r);

#endif
