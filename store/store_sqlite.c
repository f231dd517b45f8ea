/* store_sqlite.c: the one map from SQLite result codes to the project's
 * error table, shared by the writer (store.c) and the readers
 * (store_read.c), which used to carry a copy each. */
#include "config.h"

#include <errno.h>
#include <sqlite3.h>

#include "gtp_error.h"
#include "store_int.h"

int store_sqlite_err(int rc) {
  switch (rc & 0xff) { /* the primary code: extended codes share its cause */
  case SQLITE_OK:
  case SQLITE_DONE:
  case SQLITE_ROW:
    return 0;
  case SQLITE_FULL:
    return GTP_E_DISKFULL;
  case SQLITE_NOMEM:
    return -ENOMEM;
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return -EBUSY;
  case SQLITE_CORRUPT:
  case SQLITE_NOTADB:
    return GTP_E_CORRUPT;
  case SQLITE_READONLY:
  case SQLITE_PERM:
  case SQLITE_AUTH:
    return -EACCES;
  case SQLITE_CANTOPEN:
    return -ENOENT;
  case SQLITE_IOERR:
    return -EIO;
  default:
    return GTP_E_INTERNAL;
  }
}
