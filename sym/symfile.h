/* symfile.h: which files the symbolizer may open, and opening them.
 *
 * Module paths come from agents, so they are hostile: an agent could name
 * /dev/watchdog, a FIFO, /proc/self/mem or a 100 GB file. The rule
 * (docs/SYMBOLS.md "What the daemon opens"):
 *
 *   host files (the module's own path), only with from_host on:
 *     - an absolute path without NUL bytes;
 *     - resolved (symlinks followed), it is not under /proc, /sys or /dev
 *       and is under one of the allowed roots ("/" unless a list is given);
 *     - it is a regular file (checked before opening, so no device or FIFO
 *       is ever opened, and again on the open descriptor, same inode) of at
 *       most max_file_bytes;
 *     - and the caller then checks that its GNU build id equals the
 *       module's (a module without a build id is never read from the host).
 *   the --symbols DIR tree (trusted: the operator's):
 *     DIR/.build-id/XX/REST (the binary) and DIR/.build-id/XX/REST.debug
 *     (its debug info), XX the first byte of the build id in hex, REST the
 *     others; regular files within the size cap, build id checked too.
 */
#ifndef SYMFILE_H
#define SYMFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct symfile_rules {
  char *dir;     /* --symbols DIR, NULL = none; owned */
  int from_host; /* 1 = module paths may be opened */
  char **roots;  /* resolved allowed roots; empty = "/"; owned */
  size_t nroots;
  uint64_t max_file_bytes; /* larger files are refused */
} symfile_rules;

/* dir: NULL or a directory; from_host: "yes", "no" or a list of absolute
 * directories separated by ':' or ',' (= yes, only under them; each must
 * exist). 0, or GTP_E_BADARG with *cause (malloc'd). */
int symfile_rules_init(symfile_rules *r, const char *dir, const char *from_host,
                       uint64_t max_file_bytes, char **cause);
void symfile_rules_fini(symfile_rules *r);

/* Opens a module's own path under the rules: 0 with *fd (O_RDONLY,
 * close-on-exec) and *size, or -1 with *why (a static reason: "not
 * absolute", "outside the allowed roots", "not a regular file", ...). */
int symfile_open_host(const symfile_rules *r, const char *path, size_t len,
                      int *fd, uint64_t *size, const char **why);
/* Opens DIR/.build-id/XX/REST plus suffix ("" or ".debug"): 0 with *fd and
 * *size, or -1 (no tree, missing, not regular, too big). */
int symfile_open_tree(const symfile_rules *r, const uint8_t *bid, size_t n,
                      const char *suffix, int *fd, uint64_t *size);
/* 1 if the ELF file open on fd has the GNU build id bid, else 0. */
int symfile_build_id_is(int fd, const uint8_t *bid, size_t n);

#endif
