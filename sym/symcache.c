/* symcache.c: opened modules for symbolization (see symcache.h).
 *
 * Design notes. One libdwfl session (Dwfl) per module file, keyed by the
 * module's build id and reported at bias 0, so a frame's address in the
 * file is min_vaddr + off: the agent records base = the lowest PT_LOAD
 * address in memory, and min_vaddr is the lowest PT_LOAD p_vaddr of the
 * file, so both sides count from the same segment. Frames are return
 * addresses; the lookup uses address - 1, inside the call instruction, so
 * the line is the call's and not the next statement's.
 *
 * Names come from the innermost DWARF scope that is a function (an inlined
 * function names itself, consistent with the line, which is the inlined
 * code's), else from the symbol table; the line from the line table.
 *
 * One mutex guards everything, lookups included: a Dwfl is not
 * thread-safe (it loads lazily), and requests keep their own cache of
 * names (symreq.c) so they come here once per distinct frame.
 *
 * Invariants:
 *  1. An entry is in the hash table iff it is in the LRU list; present
 *     entries own their Dwfl, absent ones own nothing.
 *  2. After every insertion, nmods <= max_modules, bytes <= max_bytes and
 *     nabsent <= SYMCACHE_ABSENT_MAX: the least recently used entries of
 *     the kind over its cap are freed first.
 *  3. A file is read only after symfile.h's rule allowed it and its build
 *     id equals the module's (the debug file's too).
 */
#include "config.h"

#include "symcache.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "lru.h"
#include "symfile.h"

#define SYMCACHE_RETRY_S 60      /* an absent module is looked for again */
#define SYMCACHE_ABSENT_MAX 4096 /* absent entries remembered */
#define SYMCACHE_BUCKETS 1024    /* hash buckets (power of two) */
/* The distribution's debug files (trusted, like DIR) when host files are
 * allowed. */
#define SYMCACHE_SYSTEM_DEBUG "/usr/lib/debug"

typedef struct sc_ent {
  uint8_t bid[GTP_BUILDID_MAX];
  size_t bid_len;
  uint64_t hash;        /* of the build id: the bucket */
  uint64_t path_hash;   /* absent entries: of the path looked at */
  struct sc_ent *hnext; /* bucket chain */
  gtp_lru_link lru;
  int present;
  int64_t absent_until; /* monotonic s, absent entries */
  Dwfl *dwfl;
  Dwfl_Module *mod;
  uint64_t min_vaddr, bytes;
  const symcache *owner; /* for the debuginfo callback */
} sc_ent;

struct symcache {
  pthread_mutex_t mu;
  symfile_rules rules, system; /* system: /usr/lib/debug as a tree */
  unsigned max_modules;
  uint64_t max_bytes;
  sc_ent *buckets[SYMCACHE_BUCKETS];
  gtp_lru lru;
  uint64_t nmods, nabsent, bytes;
  symcache_stats st; /* the *_total counters */
};

static int64_t now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

static uint64_t bid_hash(const uint8_t *p, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* -------------------------------------------------------- LRU, table */

/* The entry of a build id: the opened module whatever its path, else
 * the absent entry of this path (a path refused or without the file says
 * nothing about another path with the same build id). */
static sc_ent *find(symcache *c, const uint8_t *bid, size_t n, uint64_t h,
                    uint64_t ph) {
  sc_ent *absent = NULL;
  for (sc_ent *e = c->buckets[h & (SYMCACHE_BUCKETS - 1)]; e; e = e->hnext) {
    if (e->hash != h || e->bid_len != n || memcmp(e->bid, bid, n))
      continue;
    if (e->present)
      return e;
    if (e->path_hash == ph)
      absent = e;
  }
  return absent;
}

static void ent_free(symcache *c, sc_ent *e) {
  sc_ent **pp = &c->buckets[e->hash & (SYMCACHE_BUCKETS - 1)];
  while (*pp != e)
    pp = &(*pp)->hnext;
  *pp = e->hnext;
  gtp_lru_unlink(&c->lru, &e->lru);
  if (e->present) {
    c->nmods--;
    c->bytes -= e->bytes;
    dwfl_end(e->dwfl);
  } else {
    c->nabsent--;
  }
  free(e);
}

/* Invariant 2: frees least recently used entries of a kind over its cap
 * (keep, the entry just made, stays). */
static void trim(symcache *c, sc_ent *keep) {
  sc_ent *e = GTP_LRU_ENTRY(c->lru.tail, sc_ent, lru);
  while (e && (c->nmods > c->max_modules || c->bytes > c->max_bytes ||
               c->nabsent > SYMCACHE_ABSENT_MAX)) {
    sc_ent *prev = GTP_LRU_ENTRY(e->lru.prev, sc_ent, lru);
    int over_present = c->nmods > c->max_modules || c->bytes > c->max_bytes;
    if (e != keep &&
        (e->present ? over_present : c->nabsent > SYMCACHE_ABSENT_MAX)) {
      if (e->present)
        c->st.evicted_total++;
      ent_free(c, e);
    }
    e = prev;
  }
}

/* Lock held. 0, or minus the first invariant broken. */
static int check_locked(const symcache *c) {
  uint64_t mods = 0, absent = 0, bytes = 0, listed = 0, hashed = 0;
  for (const gtp_lru_link *l = c->lru.head; l; l = l->next) {
    const sc_ent *e = GTP_LRU_ENTRY(l, const sc_ent, lru);
    listed++;
    if (e->present ? !e->dwfl : e->dwfl != NULL)
      return -1;
    mods += e->present != 0;
    absent += e->present == 0;
    bytes += e->present ? e->bytes : 0;
    const sc_ent *b = c->buckets[e->hash & (SYMCACHE_BUCKETS - 1)];
    while (b && b != e)
      b = b->hnext;
    if (!b)
      return -1;
  }
  for (size_t i = 0; i < SYMCACHE_BUCKETS; i++)
    for (const sc_ent *e = c->buckets[i]; e; e = e->hnext)
      hashed++;
  if (hashed != listed || mods != c->nmods || absent != c->nabsent ||
      bytes != c->bytes)
    return -1;
  if (c->nmods > c->max_modules || c->bytes > c->max_bytes ||
      c->nabsent > SYMCACHE_ABSENT_MAX)
    return -2;
  return 0;
}

int symcache_check_invariants(symcache *c) {
  pthread_mutex_lock(&c->mu);
  int rc = check_locked(c);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* ---------------------------------------------------------- loading */

/* libdwfl asks for the debug info of a module whose file has none: the
 * tree's (or the system's) .debug file of the same build id. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name) {
  sc_ent *e = *userdata;
  const symcache *c = e->owner;
  const symfile_rules *trees[2] = {&c->rules, &c->system};
  for (int i = 0; i < 2; i++) {
    int fd;
    uint64_t size;
    if (symfile_open_tree(trees[i], e->bid, e->bid_len, ".debug", &fd, &size) <
        0)
      continue;
    if (symfile_build_id_is(fd, e->bid, e->bid_len)) /* invariant 3 */
      return fd;
    close(fd);
  }
  return -1;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = NULL,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = NULL,
};

/* The main file of module m: the tree's binary, the host path, or the
 * tree's debug file alone. 0 with *fd, or -1. */
static int open_main(symcache *c, const gtp_module *m, int *fd,
                     uint64_t *size) {
  const char *suffix[2] = {"", ".debug"};
  for (int i = 0; i < 3; i++) {
    int f = -1;
    if (i == 1) {
      const char *why;
      if (symfile_open_host(&c->rules, m->path.ptr, m->path.len, &f, size,
                            &why) < 0) {
        if (c->rules.from_host && strcmp(why, "missing"))
          c->st.refused_total++;
        continue;
      }
    } else if (symfile_open_tree(&c->rules, m->build_id, m->build_id_len,
                                 suffix[i / 2], &f, size) < 0) {
      continue;
    }
    if (symfile_build_id_is(f, m->build_id, m->build_id_len)) {
      *fd = f;
      return 0;
    }
    c->st.mismatch_total++;
    close(f);
  }
  return -1;
}

static uint64_t lowest_load(Elf *elf) {
  size_t n;
  uint64_t lo = UINT64_MAX;
  if (elf_getphdrnum(elf, &n) != 0)
    return UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
        ph.p_vaddr < lo)
      lo = ph.p_vaddr;
  }
  return lo;
}

/* Fills a new entry e for m: present when a file was found. */
static void load(symcache *c, sc_ent *e, const gtp_module *m) {
  int fd;
  uint64_t size;
  e->present = 0;
  e->absent_until = now_s() + SYMCACHE_RETRY_S;
  if (m->build_id_len == 0 || open_main(c, m, &fd, &size) < 0)
    return;
  Dwfl *d = dwfl_begin(&callbacks);
  if (!d) {
    close(fd);
    return;
  }
  dwfl_report_begin(d);
  /* Takes fd on success (dwfl_end closes it). */
  Dwfl_Module *mod = dwfl_report_elf(d, "m", "m", fd, 0, true);
  dwfl_report_end(d, NULL, NULL);
  if (!mod) {
    close(fd);
    dwfl_end(d);
    return;
  }
  void **ud;
  dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
  *ud = e;
  Dwarf_Addr bias;
  Elf *elf = dwfl_module_getelf(mod, &bias);
  uint64_t lo = elf ? lowest_load(elf) : UINT64_MAX;
  if (lo == UINT64_MAX) {
    dwfl_end(d);
    return;
  }
  e->present = 1;
  e->dwfl = d;
  e->mod = mod;
  e->min_vaddr = lo + bias;
  e->bytes = size;
  c->st.loaded_total++;
}

/* ------------------------------------------------------------ naming */

/* The innermost function scope at addr (inlined or not), from DWARF. */
static const char *dwarf_function(Dwfl_Module *mod, Dwarf_Addr addr) {
  Dwarf_Addr bias;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
  if (!cu)
    return NULL;
  Dwarf_Die *scopes = NULL;
  int n = dwarf_getscopes(cu, addr - bias, &scopes);
  const char *name = NULL;
  for (int i = 0; i < n && !name; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
      continue;
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(&scopes[i], DW_AT_name, &a))
      name = dwarf_formstring(&a);
  }
  free(scopes);
  return name;
}

/* dir/file (file alone when absolute or dir is NULL) with "." and
 * "name/.." segments removed lexically, into out: the compiler's
 * "/build/../src/x.c" reads "/src/x.c". A name that does not fit is kept
 * as it was. */
static const char *clean_path(const char *dir, const char *file, char *out,
                              size_t cap) {
  char joined[2 * PATH_MAX];
  int n = dir && file[0] != '/'
              ? snprintf(joined, sizeof joined, "%s/%s", dir, file)
              : snprintf(joined, sizeof joined, "%s", file);
  if (n < 0 || (size_t)n >= sizeof joined || (size_t)n >= cap)
    return file;
  size_t len = 0, keep = 0; /* keep: the ".." prefix nothing can pop */
  int abs = joined[0] == '/';
  if (abs)
    out[len++] = '/', keep = 1;
  for (char *seg = joined; *seg;) {
    size_t sl = strcspn(seg, "/");
    int dotdot = sl == 2 && seg[0] == '.' && seg[1] == '.';
    if (sl == 0 || (sl == 1 && seg[0] == '.') || (dotdot && abs && len <= 1)) {
      /* nothing ("/.." is "/") */
    } else if (dotdot && len > keep) {
      while (len > keep && out[len - 1] != '/')
        len--; /* drop the last name ... */
      if (len > keep)
        len--; /* ... and its slash */
    } else {
      if (len > 0 && out[len - 1] != '/')
        out[len++] = '/';
      memcpy(out + len, seg, sl);
      len += sl;
      if (dotdot)
        keep = len; /* a relative path's leading ".." stays */
    }
    seg += sl + (seg[sl] == '/');
  }
  if (len == 0)
    out[len++] = '.';
  out[len] = '\0';
  return out;
}

static int describe(sc_ent *e, uint64_t off, gtp_wbuf *out) {
  Dwarf_Addr addr = e->min_vaddr + off - (off > 0);
  const char *fn = dwarf_function(e->mod, addr);
  if (!fn)
    fn = dwfl_module_addrname(e->mod, addr);
  if (!fn || !fn[0])
    return 0;
  Dwfl_Line *l = dwfl_module_getsrc(e->mod, addr);
  int line = 0;
  const char *file = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
  if (file && line > 0) {
    /* A relative file name is relative to the compilation directory. */
    const char *dir = file[0] != '/' ? dwfl_line_comp_dir(l) : NULL;
    char path[PATH_MAX];
    gtp_wbuf_printf(
        out, "%s (%s:%d)", fn,
        clean_path(dir && dir[0] ? dir : NULL, file, path, sizeof path), line);
  } else
    gtp_wbuf_printf(out, "%s", fn);
  return out->err == -ENOMEM ? -ENOMEM : 1;
}

/* ------------------------------------------------------------ public */

int symcache_new(const symcache_config *cfg, symcache **out, char **cause) {
  *out = NULL;
  elf_version(EV_CURRENT);
  symcache *c = calloc(1, sizeof *c);
  if (!c)
    return -ENOMEM;
  c->max_modules = cfg->max_modules ? cfg->max_modules : 64;
  c->max_bytes = cfg->max_bytes ? cfg->max_bytes : 512ull << 20;
  int rc = symfile_rules_init(&c->rules, cfg->dir, cfg->from_host, c->max_bytes,
                              cause);
  if (rc < 0)
    goto fail_rules;
  if (c->rules.from_host) {
    char *ignored = NULL;
    /* Missing on many machines: then simply no system tree. */
    if (symfile_rules_init(&c->system, SYMCACHE_SYSTEM_DEBUG, "no",
                           c->max_bytes, &ignored) < 0)
      memset(&c->system, 0, sizeof c->system);
    free(ignored);
  }
  if ((rc = pthread_mutex_init(&c->mu, NULL)) != 0) {
    rc = -rc;
    goto fail_mu;
  }
  *out = c;
  return 0;
fail_mu:
  symfile_rules_fini(&c->system);
  symfile_rules_fini(&c->rules);
fail_rules:
  free(c);
  return rc;
}

void symcache_free(symcache *c) {
  if (!c)
    return;
  while (c->lru.head)
    ent_free(c, GTP_LRU_ENTRY(c->lru.head, sc_ent, lru));
  symfile_rules_fini(&c->rules);
  symfile_rules_fini(&c->system);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

int symcache_resolve(symcache *c, const gtp_module *m, uint64_t off,
                     symcache_budget *b, gtp_wbuf *out) {
  if (m->build_id_len == 0 || m->build_id_len > GTP_BUILDID_MAX)
    return 0; /* nothing could prove a file is this module */
  uint64_t h = bid_hash(m->build_id, m->build_id_len);
  uint64_t ph = bid_hash((const uint8_t *)m->path.ptr, m->path.len);
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  sc_ent *e = find(c, m->build_id, m->build_id_len, h, ph);
  if (e && !e->present && now_s() >= e->absent_until) {
    ent_free(c, e); /* look again: the file may be there now */
    e = NULL;
  }
  if (!e) {
    if (b->loads == 0) {
      c->st.over_budget_total++;
      rc = SYMCACHE_OVER_BUDGET;
      goto done;
    }
    b->loads--;
    if (!(e = calloc(1, sizeof *e))) {
      rc = -ENOMEM;
      goto done;
    }
    memcpy(e->bid, m->build_id, m->build_id_len);
    e->bid_len = m->build_id_len;
    e->hash = h;
    e->path_hash = ph;
    e->owner = c;
    load(c, e, m);
    e->hnext = c->buckets[h & (SYMCACHE_BUCKETS - 1)];
    c->buckets[h & (SYMCACHE_BUCKETS - 1)] = e;
    if (e->present) {
      c->nmods++;
      c->bytes += e->bytes;
    } else {
      c->nabsent++;
    }
    gtp_lru_push(&c->lru, &e->lru);
    trim(c, e);
    GTP_ASSERT(check_locked(c) == 0);
  } else {
    gtp_lru_unlink(&c->lru, &e->lru);
    gtp_lru_push(&c->lru, &e->lru);
  }
  if (!e->present)
    goto done;
  if (b->lookups == 0) {
    c->st.over_budget_total++;
    rc = SYMCACHE_OVER_BUDGET;
    goto done;
  }
  b->lookups--;
  c->st.lookups_total++;
  rc = describe(e, off, out);
done:
  pthread_mutex_unlock(&c->mu);
  return rc;
}

void symcache_get_stats(symcache *c, symcache_stats *st) {
  pthread_mutex_lock(&c->mu);
  *st = c->st;
  st->modules = c->nmods;
  st->bytes = c->bytes;
  st->absent = c->nabsent;
  pthread_mutex_unlock(&c->mu);
}

void symcache_metrics(symcache *c, gtp_wbuf *out) {
  symcache_stats s;
  symcache_get_stats(c, &s);
  const struct {
    const char *name, *type, *help;
    uint64_t v;
  } m[] = {
      {"modules", "gauge", "Modules open for symbolization.", s.modules},
      {"bytes", "gauge", "File bytes of the open modules.", s.bytes},
      {"absent", "gauge", "Modules remembered as not found.", s.absent},
      {"loaded_total", "counter", "Modules opened.", s.loaded_total},
      {"refused_total", "counter",
       "Module paths refused by the host file rule.", s.refused_total},
      {"mismatch_total", "counter",
       "Files whose build id differed from the module's.", s.mismatch_total},
      {"evicted_total", "counter", "Open modules evicted by the caps.",
       s.evicted_total},
      {"lookups_total", "counter", "Frames looked up in debug info.",
       s.lookups_total},
      {"over_budget_total", "counter",
       "Frames left as module+offset by a request's budget.",
       s.over_budget_total},
  };
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    gtp_wbuf_printf(out,
                    "# HELP gentrace_symbols_%s %s\n# TYPE gentrace_symbols_%s "
                    "%s\ngentrace_symbols_%s %" PRIu64 "\n",
                    m[i].name, m[i].help, m[i].name, m[i].type, m[i].name,
                    m[i].v);
}
