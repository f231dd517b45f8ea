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
    if (ret < 4096)
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
  mod_acc *acc = calloc(1, sizeof *acc);
  if (acc == NULL)
    return -ENOMEM;
  dl_iterate_phdr(module_cb, acc);
  int rc = gtp_put_modules(b, acc->mods, acc->n);
  free(acc);
  return rc;
}
