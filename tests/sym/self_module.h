/* self_module.h: the module table entry of the running test program (as
 * the agent records it, agent/stack.c), so the sym/ tests resolve real
 * addresses of their own code against a real ELF file with a build id.
 * Header-only, for tests/sym/ alone. */
#ifndef TESTS_SYM_SELF_MODULE_H
#define TESTS_SYM_SELF_MODULE_H

#include <elf.h>
#include <link.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

typedef struct self_module {
  gtp_module m;
  char path[PATH_MAX];
  uint8_t bid[GTP_BUILDID_MAX];
  const char *want; /* dlpi_name to match; "" = the main program */
} self_module;

static int self_module_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  self_module *s = arg;
  (void)size;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (s->want[0] ? !strstr(name, s->want) : name[0] != '\0')
    return 0;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (a < lo)
        lo = a;
      if (a + ph->p_memsz > hi)
        hi = a + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE && s->m.build_id_len == 0) {
      const uint8_t *p = (const uint8_t *)a;
      size_t left = ph->p_memsz;
      while (left >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
        size_t total = sizeof *nh + ((nh->n_namesz + 3) & ~3u) +
                       ((nh->n_descsz + 3) & ~3u);
        if (total > left)
          break;
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_descsz <= GTP_BUILDID_MAX) {
          memcpy(s->bid, p + sizeof *nh + ((nh->n_namesz + 3) & ~3u),
                 nh->n_descsz);
          s->m.build_id_len = nh->n_descsz;
          break;
        }
        p += total;
        left -= total;
      }
    }
  }
  if (s->want[0])
    snprintf(s->path, sizeof s->path, "%s", name);
  else if (!realpath("/proc/self/exe", s->path))
    return 0;
  s->m.path = (gtp_str){s->path, strlen(s->path)};
  s->m.base = lo;
  s->m.size = hi - lo;
  s->m.build_id = s->bid;
  return 1;
}

/* Fills s for the main program (want "") or the first shared object whose
 * name contains want. 0 if found with a build id. */
static inline int self_module_get(self_module *s, const char *want) {
  memset(s, 0, sizeof *s);
  s->want = want;
  return dl_iterate_phdr(self_module_cb, s) == 1 && s->m.build_id_len ? 0 : -1;
}

#endif
