/* stackname.h: the names of stack frames in exports (Chrome JSON, Perfetto,
 * `gentrace stat`), and the one interface through which a symbolizer plugs
 * into them.
 *
 * proto/ holds no debug-info reader (the agent links proto, and must stay
 * small): the writers call a gtp_symbolizer the caller hands them, a
 * function pointer plus context. The libdw implementation lives in sym/
 * (used by web/ and tools/). The name of one frame, innermost first
 * (docs/SYMBOLS.md):
 *
 *   "FUNC (FILE:LINE)"  the symbolizer named it;
 *   "MODULE+0xOFF"      a symbolizer was given but could not name it, and
 *                       the generation's module table holds the pc
 *                       (MODULE = the path's basename, OFF = pc - base);
 *   "0x7f..."           no symbolizer, or no module holds the pc.
 *
 * Memory: a sorted index of the current generation's modules (at most its
 * module count) and nothing else.
 *
 * Invariants:
 *  1. The module index MUST belong to the generation whose frames are
 *     named: gtp_stackname_gen is called for every generation before its
 *     frames, otherwise a pc would be named after another process's map.
 *  2. A frame always gets a name (the hex pc at worst): a symbolizer error
 *     other than ENOMEM falls back, never drops a frame.
 */
#ifndef GTP_STACKNAME_H
#define GTP_STACKNAME_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A symbolizer. resolve appends "FUNC (FILE:LINE)" (or "FUNC" when no line
 * is known) for the return address at offset off of module m (off = pc -
 * m->base; m borrowed for the call) and returns 1; returns 0 when it cannot
 * name it, or -ENOMEM. Called from the writer's thread only. */
typedef struct gtp_symbolizer {
  int (*resolve)(void *ctx, const gtp_module *m, uint64_t off, gtp_wbuf *out);
  void *ctx;
} gtp_symbolizer;

/* Frame names of one writer. */
typedef struct gtp_stackname {
  const gtp_symbolizer *sym; /* NULL = hex pcs (borrowed) */
  const gtp_gen *g;          /* whose modules are indexed (invariant 1) */
  const gtp_module **mods;   /* sorted by base; owned */
  size_t nmods, cap;
  /* What the names were, for a summary (symbolized, module+offset, hex). */
  uint64_t named, module_only, hex;
} gtp_stackname;

void gtp_stackname_init(gtp_stackname *sn, const gtp_symbolizer *sym);
void gtp_stackname_fini(gtp_stackname *sn);
/* Indexes g's modules (a no-op without a symbolizer). 0 or -ENOMEM. */
int gtp_stackname_gen(gtp_stackname *sn, const gtp_gen *g);
/* Appends the name of pc (plain text, not escaped) to out. 0 or -ENOMEM. */
int gtp_stackname_frame(gtp_stackname *sn, uint64_t pc, gtp_wbuf *out);
/* The module of g holding pc, or NULL (after gtp_stackname_gen). */
const gtp_module *gtp_stackname_module(const gtp_stackname *sn, uint64_t pc);

#ifdef __cplusplus
}
#endif
#endif
