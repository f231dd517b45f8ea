/* store_walbuf.c: the WAL write shim (see store_walbuf.h for why and the
 * invariants). Every file but the WAL is opened by the default VFS into
 * the caller's memory and keeps its own methods; a WAL file gets the
 * methods below, which hold sequential writes and pass everything else
 * through. */
#include "config.h"

#include "store_walbuf.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WB_NAME "gentrace-walbuf"
/* Held bytes at most: a bigger transaction's frames go out in pieces of
 * this size (each piece still one write). */
#define WB_HOLD_MAX (4u << 20)
#define WB_WRITE_MAX (120u << 10) /* one write, under 128 KiB: wb_flush */
#define WB_FRAME_HDR 24 /* a WAL frame header: page number, db size, ... */

typedef struct wb_file {
  sqlite3_file base; /* pMethods = &wb_io */
  sqlite3_file *real;
  uint8_t *buf;
  size_t len, cap;
  sqlite3_int64 off; /* file offset of buf[0] */
  int commit_next;   /* the last write was a commit frame's header */
} wb_file;

static sqlite3_vfs *real_vfs;
static sqlite3_vfs wb_vfs;
static pthread_once_t wb_once = PTHREAD_ONCE_INIT;
static int wb_ok;

/* Writes out what is held (invariant 3: dropped whatever the result), in
 * pieces the default VFS takes whole: its unix write masks a length to 17
 * bits (128 KiB), so a longer one would come back short, as SQLITE_FULL. */
static int wb_flush(wb_file *f) {
  int rc = SQLITE_OK;
  for (size_t at = 0; rc == SQLITE_OK && at < f->len; at += WB_WRITE_MAX) {
    size_t n = f->len - at < WB_WRITE_MAX ? f->len - at : WB_WRITE_MAX;
    rc = f->real->pMethods->xWrite(f->real, f->buf + at, (int)n,
                                   f->off + (sqlite3_int64)at);
  }
  f->len = 0;
  return rc;
}

static int wb_write(sqlite3_file *pf, const void *p, int n, sqlite3_int64 off) {
  wb_file *f = (wb_file *)pf;
  int commit = f->commit_next;
  /* A frame header whose "database size after commit" is not zero: the
   * page written next ends a commit (invariant 2). */
  const uint8_t *b = p;
  f->commit_next = n == WB_FRAME_HDR && (b[4] | b[5] | b[6] | b[7]) != 0;
  int rc = SQLITE_OK;
  if (f->len > 0 && off != f->off + (sqlite3_int64)f->len)
    rc = wb_flush(f); /* invariant 1 */
  if (rc != SQLITE_OK)
    return rc;
  size_t need = f->len + (size_t)n;
  if (n <= 0 || need > WB_HOLD_MAX) {
    rc = wb_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xWrite(f->real, p, n, off);
  }
  if (need > f->cap) {
    size_t cap = f->cap ? f->cap : 64 * 1024;
    while (cap < need)
      cap *= 2;
    uint8_t *nb = realloc(f->buf, cap);
    if (nb == NULL) { /* no room to hold: write through */
      rc = wb_flush(f);
      return rc != SQLITE_OK ? rc
                             : f->real->pMethods->xWrite(f->real, p, n, off);
    }
    f->buf = nb;
    f->cap = cap;
  }
  if (f->len == 0)
    f->off = off;
  memcpy(f->buf + f->len, p, (size_t)n);
  f->len = need;
  return commit ? wb_flush(f) : SQLITE_OK;
}

/* Invariant 1: every other access writes out first. */
static int wb_read(sqlite3_file *pf, void *p, int n, sqlite3_int64 off) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, p, n, off);
}

static int wb_truncate(sqlite3_file *pf, sqlite3_int64 size) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int wb_sync(sqlite3_file *pf, int flags) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int wb_size(sqlite3_file *pf, sqlite3_int64 *size) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int wb_fcntl(sqlite3_file *pf, int op, void *arg) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  return rc != SQLITE_OK ? rc
                         : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int wb_close(sqlite3_file *pf) {
  wb_file *f = (wb_file *)pf;
  int rc = wb_flush(f);
  int rc2 = f->real->pMethods ? f->real->pMethods->xClose(f->real) : SQLITE_OK;
  free(f->buf);
  f->buf = NULL;
  f->cap = 0;
  return rc != SQLITE_OK ? rc : rc2;
}

/* The rest: passed through as they are. */
static int wb_lock(sqlite3_file *pf, int l) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->xLock(r, l);
}
static int wb_unlock(sqlite3_file *pf, int l) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->xUnlock(r, l);
}
static int wb_reserved(sqlite3_file *pf, int *out) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->xCheckReservedLock(r, out);
}
static int wb_sector(sqlite3_file *pf) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->xSectorSize(r);
}
static int wb_devchar(sqlite3_file *pf) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->xDeviceCharacteristics(r);
}
static int wb_shm_map(sqlite3_file *pf, int pg, int sz, int ext,
                      void volatile **pp) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->iVersion >= 2 && r->pMethods->xShmMap
             ? r->pMethods->xShmMap(r, pg, sz, ext, pp)
             : SQLITE_IOERR;
}
static int wb_shm_lock(sqlite3_file *pf, int off, int n, int flags) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->iVersion >= 2 && r->pMethods->xShmLock
             ? r->pMethods->xShmLock(r, off, n, flags)
             : SQLITE_IOERR;
}
static void wb_shm_barrier(sqlite3_file *pf) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  if (r->pMethods->iVersion >= 2 && r->pMethods->xShmBarrier)
    r->pMethods->xShmBarrier(r);
}
static int wb_shm_unmap(sqlite3_file *pf, int del) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->iVersion >= 2 && r->pMethods->xShmUnmap
             ? r->pMethods->xShmUnmap(r, del)
             : SQLITE_OK;
}
static int wb_fetch(sqlite3_file *pf, sqlite3_int64 off, int n, void **pp) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  *pp = NULL; /* "no mapping": SQLite reads instead */
  return r->pMethods->iVersion >= 3 && r->pMethods->xFetch
             ? r->pMethods->xFetch(r, off, n, pp)
             : SQLITE_OK;
}
static int wb_unfetch(sqlite3_file *pf, sqlite3_int64 off, void *p) {
  sqlite3_file *r = ((wb_file *)pf)->real;
  return r->pMethods->iVersion >= 3 && r->pMethods->xUnfetch
             ? r->pMethods->xUnfetch(r, off, p)
             : SQLITE_OK;
}

static const sqlite3_io_methods wb_io = {3,
                                         wb_close,
                                         wb_read,
                                         wb_write,
                                         wb_truncate,
                                         wb_sync,
                                         wb_size,
                                         wb_lock,
                                         wb_unlock,
                                         wb_reserved,
                                         wb_fcntl,
                                         wb_sector,
                                         wb_devchar,
                                         wb_shm_map,
                                         wb_shm_lock,
                                         wb_shm_barrier,
                                         wb_shm_unmap,
                                         wb_fetch,
                                         wb_unfetch};

static int wb_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf,
                   int flags, int *out_flags) {
  (void)vfs;
  if (!(flags & SQLITE_OPEN_WAL)) /* the file is the default VFS's own */
    return real_vfs->xOpen(real_vfs, name, pf, flags, out_flags);
  wb_file *f = (wb_file *)pf;
  memset(f, 0, sizeof *f);
  f->real = (sqlite3_file *)(f + 1);
  int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
  f->base.pMethods = rc == SQLITE_OK ? &wb_io : NULL;
  return rc;
}

/* The VFS methods other than xOpen: the default VFS's. */
static int wb_delete(sqlite3_vfs *v, const char *n, int sync) {
  (void)v;
  return real_vfs->xDelete(real_vfs, n, sync);
}
static int wb_access(sqlite3_vfs *v, const char *n, int flags, int *out) {
  (void)v;
  return real_vfs->xAccess(real_vfs, n, flags, out);
}
static int wb_fullpath(sqlite3_vfs *v, const char *n, int len, char *out) {
  (void)v;
  return real_vfs->xFullPathname(real_vfs, n, len, out);
}
static void *wb_dlopen(sqlite3_vfs *v, const char *n) {
  (void)v;
  return real_vfs->xDlOpen(real_vfs, n);
}
static void wb_dlerror(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  real_vfs->xDlError(real_vfs, n, out);
}
static void (*wb_dlsym(sqlite3_vfs *v, void *h, const char *n))(void) {
  (void)v;
  return real_vfs->xDlSym(real_vfs, h, n);
}
static void wb_dlclose(sqlite3_vfs *v, void *h) {
  (void)v;
  real_vfs->xDlClose(real_vfs, h);
}
static int wb_random(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xRandomness(real_vfs, n, out);
}
static int wb_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return real_vfs->xSleep(real_vfs, us);
}
static int wb_time(sqlite3_vfs *v, double *out) {
  (void)v;
  return real_vfs->xCurrentTime(real_vfs, out);
}
static int wb_lasterr(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, n, out)
                                 : 0;
}
static int wb_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static void wb_init(void) {
  real_vfs = sqlite3_vfs_find(NULL);
  /* xCurrentTimeInt64 is a version 2 method: older VFSes are left alone. */
  if (real_vfs == NULL || real_vfs->iVersion < 2)
    return;
  wb_vfs = (sqlite3_vfs){
      .iVersion = 2,
      .szOsFile = (int)sizeof(wb_file) + real_vfs->szOsFile,
      .mxPathname = real_vfs->mxPathname,
      .zName = WB_NAME,
      .xOpen = wb_open,
      .xDelete = wb_delete,
      .xAccess = wb_access,
      .xFullPathname = wb_fullpath,
      .xDlOpen = wb_dlopen,
      .xDlError = wb_dlerror,
      .xDlSym = wb_dlsym,
      .xDlClose = wb_dlclose,
      .xRandomness = wb_random,
      .xSleep = wb_sleep,
      .xCurrentTime = wb_time,
      .xGetLastError = wb_lasterr,
      .xCurrentTimeInt64 = wb_time64,
  };
  wb_ok = sqlite3_vfs_register(&wb_vfs, 0) == SQLITE_OK;
}

const char *store_walbuf_vfs(void) {
  pthread_once(&wb_once, wb_init);
  return wb_ok ? WB_NAME : NULL;
}
