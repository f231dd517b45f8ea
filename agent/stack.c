/* stack.c: see stack.h for the invariants. */
#include "config.h"

#include "stack.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------ executable ranges
 *
 * Host code built without frame pointers leaves data in the frame-pointer
 * register, and the walk then reads saved strings or counters as return
 * addresses (seen: "/users 2" as 0x322073726573752f after the demo's real
 * frames). A return address must lie in an executable segment of a loaded
 * object (invariant 3): the table of those segments is built once by the
 * first thread that walks and again by the sealer with every MODULES
 * record, and published whole (an immutable, sorted array) through one
 * atomic pointer. Tables replaced are kept, never freed, because a walker
 * may still read one; after XR_KEEP replacements the last stays (objects
 * loaded after that end the stacks that pass through them), so memory
 * stays bounded. */
#define XR_MAX 1024 /* executable segments kept: more are not checked */
#define XR_KEEP 32

typedef struct xrange {
  uintptr_t lo, hi; /* [lo, hi) */
} xrange;
typedef struct xtable {
  size_t n;
  xrange r[];
} xtable;

static const xtable *xr_cur; /* __atomic: the published table */
static xtable *xr_old[XR_KEEP];
static unsigned xr_nold;
static pthread_mutex_t xr_lock = PTHREAD_MUTEX_INITIALIZER;

static int xr_cmp(const void *a, const void *b) {
  const xrange *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int xr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  xtable *t = arg;
  for (int i = 0; i < info->dlpi_phnum && t->n < XR_MAX; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) != 0) {
      uintptr_t a = info->dlpi_addr + ph->p_vaddr;
      t->r[t->n++] = (xrange){a, a + ph->p_memsz};
    }
  }
  return 0;
}

/* Builds the table of executable segments and publishes it if it changed.
 * wait = 0 (a host thread): gives up rather than wait for another writer. */
static void xr_refresh(int wait) {
  if (wait ? pthread_mutex_lock(&xr_lock) != 0
           : pthread_mutex_trylock(&xr_lock) != 0)
    return;
  const xtable *cur = __atomic_load_n(&xr_cur, __ATOMIC_ACQUIRE);
  xtable *t = malloc(sizeof *t + XR_MAX * sizeof t->r[0]);
  if (t != NULL && (cur == NULL || xr_nold < XR_KEEP)) {
    t->n = 0;
    dl_iterate_phdr(xr_cb, t);
    qsort(t->r, t->n, sizeof t->r[0], xr_cmp);
    if (t->n > 0 && (cur == NULL || cur->n != t->n ||
                     memcmp(cur->r, t->r, t->n * sizeof t->r[0]) != 0)) {
      if (cur != NULL)
        xr_old[xr_nold++] = (xtable *)cur; /* kept: walkers may read it */
      __atomic_store_n(&xr_cur, t, __ATOMIC_RELEASE);
      t = NULL;
    }
  }
  free(t);
  pthread_mutex_unlock(&xr_lock);
}

/* Invariant 3: 1 when ret may be a return address (inside an executable
 * segment, or no table to tell). */
static int xr_code(uintptr_t ret) {
  const xtable *t = __atomic_load_n(&xr_cur, __ATOMIC_ACQUIRE);
  if (t == NULL)
    return 1;
  size_t lo = 0, hi = t->n; /* the last range with r.lo <= ret */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->r[mid].lo <= ret)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && ret < t->r[lo - 1].hi;
}

int gt__stack_bounds(uintptr_t *lo, uintptr_t *hi) {
  pthread_attr_t attr;
  int rc = pthread_getattr_np(pthread_self(), &attr);
  if (rc != 0)
    return -rc;
  void *addr;
  size_t size;
  rc = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    return -rc;
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
  /* The first walk of the process needs the table (invariant 3). */
  if (__atomic_load_n(&xr_cur, __ATOMIC_ACQUIRE) == NULL)
    xr_refresh(0);
  return 0;
}

/* Collects return addresses from the frame record at fp outward, skipping
 * the first `skip`. */
static size_t walk(uintptr_t fp, uintptr_t lo, uintptr_t hi, uint64_t *pcs,
                   size_t max, size_t skip) {
  size_t n = 0;
  uintptr_t prev = 0;
  while (n < max) {
    /* Invariant 1: aligned, strictly growing, both words inside the stack. */
    if (fp == 0 || (fp & (sizeof(uintptr_t) - 1)) != 0 || fp <= prev ||
        fp < lo || fp > hi - 2 * sizeof(uintptr_t))
      break;
    const uintptr_t *frame = (const uintptr_t *)fp;
    uintptr_t ret = frame[1];
    uintptr_t next = frame[0];
    if (ret < 4096 || !xr_code(ret))
      break; /* not a code address: the chain is garbage from here */
    if (skip > 0)
      skip--;
    else
      pcs[n++] = (uint64_t)ret;
    prev = fp;
    fp = next;
  }
  return n;
}

/* Not inlined and frame pointer kept, so the first frame is ours and the
 * chain starts from a valid record even in hosts built without them. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) size_t
gt__stack_walk(uintptr_t lo, uintptr_t hi, uint64_t *pcs, size_t max,
               size_t skip) {
  return walk((uintptr_t)__builtin_frame_address(0), lo, hi, pcs, max, skip);
}

size_t gt__stack_walk_from(uintptr_t fp, uintptr_t lo, uintptr_t hi,
                           uint64_t *pcs, size_t max) {
  return walk(fp, lo, hi, pcs, max, 0);
}

#define GT_MODULES_MAX 512 /* x ~1.1 KiB stays under GTP_RECORD_MAX */

typedef struct mod_acc {
  gtp_module mods[GT_MODULES_MAX];
  size_t n;
  char exe[4096];
} mod_acc;

static void build_id(const struct dl_phdr_info *info, const ElfW(Phdr) * ph,
                     gtp_module *m) {
  const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
  size_t left = ph->p_memsz;
  while (left >= sizeof(ElfW(Nhdr))) {
    const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
    size_t namesz = (nh->n_namesz + 3) & ~(size_t)3;
    size_t descsz = (nh->n_descsz + 3) & ~(size_t)3;
    size_t total = sizeof *nh + namesz + descsz;
    if (total > left)
      return;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
        memcmp(p + sizeof *nh, "GNU", 4) == 0) {
      size_t len = nh->n_descsz;
      if (len > GTP_BUILDID_MAX)
        len = GTP_BUILDID_MAX;
      m->build_id = p + sizeof *nh + namesz;
      m->build_id_len = len;
      return;
    }
    p += total;
    left -= total;
  }
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  mod_acc *acc = arg;
  if (acc->n >= GT_MODULES_MAX)
    return 1;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  gtp_module m;
  memset(&m, 0, sizeof m);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t a = info->dlpi_addr + ph->p_vaddr;
      if (a < lo)
        lo = a;
      if (a + ph->p_memsz > hi)
        hi = a + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE && m.build_id == NULL) {
      build_id(info, ph, &m);
    }
  }
  if (hi == 0)
    return 0;
  const char *path = info->dlpi_name;
  if (path == NULL || path[0] == '\0') {
    /* The main program has an empty name: resolve it once. */
    if (acc->exe[0] == '\0') {
      ssize_t r = readlink("/proc/self/exe", acc->exe, sizeof acc->exe - 1);
      acc->exe[r > 0 ? r : 0] = '\0';
    }
    path = acc->exe;
  }
  size_t plen = strlen(path);
  if (plen > GTP_IDENT_STR_MAX)
    plen = GTP_IDENT_STR_MAX;
  m.path = (gtp_str){path, plen};
  m.base = lo;
  m.size = hi - lo;
  acc->mods[acc->n++] = m;
  return 0;
}

int gt__modules_encode(gtp_wbuf *b) {
  xr_refresh(1); /* objects loaded since: their frames pass (invariant 3) */
  mod_acc *acc = calloc(1, sizeof *acc);
  if (acc == NULL)
    return -ENOMEM;
  dl_iterate_phdr(module_cb, acc);
  int rc = gtp_put_modules(b, acc->mods, acc->n);
  free(acc);
  return rc;
}
