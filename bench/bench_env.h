/* bench_env.h: what the benchmarks read from their environment, once:
 * the shared store they run against, numeric knobs, the scratch directory
 * and the load average they print beside every figure; and their command
 * line options. Header-only,
 * static functions; each benchmark includes it once. */
#ifndef BENCH_ENV_H
#define BENCH_ENV_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shared store of `make bench-shared` (scripts/cluster-up):
 * GENTRACE_CATALOG and GENTRACE_OBJECTS. 1 with both set; 0 after a line
 * saying why `bench` skips (a benchmark without its store is no failure). */
static inline int bench_shared_env(const char *bench, const char **catalog,
                                   const char **objects) {
  *catalog = getenv("GENTRACE_CATALOG");
  *objects = getenv("GENTRACE_OBJECTS");
  if (*catalog != NULL && *objects != NULL)
    return 1;
  printf("# %s: no shared store in the environment; run "
         "make bench-shared (starts one with scripts/cluster-up)\n",
         bench);
  return 0;
}

/* The number in environment variable name, or dflt when it is unset. */
static inline uint64_t bench_env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v != NULL ? strtoull(v, NULL, 10) : dflt;
}

/* Where benchmarks put their files: BENCH_DIR, else ".". */
static inline const char *bench_dir(void) {
  const char *d = getenv("BENCH_DIR");
  return d != NULL ? d : ".";
}

/* The 1-minute load average, printed beside the figures: on a shared
 * machine it says how far to trust them (-1 if unknown). */
static inline double bench_load1(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f != NULL) {
    if (fscanf(f, "%lf", &l) != 1)
      l = -1;
    fclose(f);
  }
  return l;
}

/* Command-line options "--name VALUE" (a flag takes none), by table. */
typedef enum {
  BENCH_UNSIGNED,
  BENCH_DOUBLE,
  BENCH_SIZE,
  BENCH_STRING,
  BENCH_FLAG
} bench_opt_kind;
typedef struct bench_opt {
  const char *name; /* "--agents" */
  bench_opt_kind kind;
  void *dst; /* unsigned *, double *, size_t *, const char **, int * */
} bench_opt;

/* Parses argv[first..argc) against opts (n entries). 0, or the index of
 * the first argument that names no option (the caller prints its usage). */
static inline int bench_opts_parse(int argc, char **argv, int first,
                                   const bench_opt *opts, size_t n) {
  for (int i = first; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    size_t k = 0;
    while (k < n && strcmp(argv[i], opts[k].name) != 0)
      k++;
    if (k == n)
      return i;
    switch (opts[k].kind) {
    case BENCH_FLAG:
      *(int *)opts[k].dst = 1;
      continue; /* no value */
    case BENCH_UNSIGNED:
      *(unsigned *)opts[k].dst = (unsigned)atoi(v);
      break;
    case BENCH_DOUBLE:
      *(double *)opts[k].dst = atof(v);
      break;
    case BENCH_SIZE:
      *(size_t *)opts[k].dst = (size_t)atol(v);
      break;
    case BENCH_STRING:
      *(const char **)opts[k].dst = v;
      break;
    }
    i++;
  }
  return 0;
}

#endif
