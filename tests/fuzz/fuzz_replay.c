/* fuzz_replay.c: the fuzz entry points without libFuzzer, for make check.
 *
 *   fuzz_replay              seeds from gtp_fuzz_seeds() plus deterministic
 *                            mutations of them, through both entry points
 *   fuzz_replay PATH...      each file (or every file of each directory)
 *                            through both entry points: replays a crash
 *                            artifact or a corpus from fuzz-smoke
 *
 * The mutations are a fixed PRNG sequence, so a failure here reproduces on
 * every run; the long random search is fuzz-smoke's job. Every input is
 * copied into a buffer of exactly its size so ASan sees any over-read. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "frame.h"
#include "fuzz.h"
#include "varint.h"
#include "../lib/prng.h"

#define MUTATIONS_PER_SEED 1500
#define MAX_SEEDS 64

typedef struct seed {
  int kind;
  char name[64];
  uint8_t *p;
  size_t n;
} seed;

static seed seeds[MAX_SEEDS];
static size_t nseeds;
static unsigned long runs;

static void run_both(const uint8_t *p, size_t n) {
  uint8_t *c = malloc(n ? n : 1);
  if (!c) {
    fprintf(stderr, "fuzz_replay: out of memory\n");
    exit(1);
  }
  if (n)
    memcpy(c, p, n);
  gtp_fuzz_frame_one(c, n);
  gtp_fuzz_trace_one(c, n);
  gtp_fuzz_gotrace_one(c, n);
  free(c);
  runs++;
}

static void keep_seed(int kind, const char *name, const uint8_t *p, size_t n,
                      void *ctx) {
  (void)ctx;
  if (nseeds == MAX_SEEDS) {
    fprintf(stderr, "fuzz_replay: more than %d seeds\n", MAX_SEEDS);
    exit(1);
  }
  seed *s = &seeds[nseeds++];
  s->kind = kind;
  snprintf(s->name, sizeof s->name, "%s", name);
  s->p = malloc(n ? n : 1);
  if (!s->p)
    exit(1);
  memcpy(s->p, p, n);
  s->n = n;
}

/* Seeds must be meaningful, or the mutations explore nothing: a frame seed
 * is a run of whole frames, a trace seed holds a generation (or is a valid
 * empty file). */
static int seed_is_valid(const seed *s) {
  if (s->kind == GTP_SEED_FRAME) {
    gtp_frame_decoder d;
    gtp_frame_decoder_init(&d, 0);
    const uint8_t *p = s->p;
    size_t left = s->n, frames = 0;
    int rc;
    do {
      size_t used;
      gtp_frame f;
      rc = gtp_frame_decoder_feed(&d, p, left, &used, &f);
      p += used;
      left -= used;
      frames += rc == 1;
    } while (rc == 1 && left > 0);
    int ok = rc >= 0 && left == 0 && gtp_frame_decoder_buffered(&d) == 0 &&
             frames > 0;
    gtp_frame_decoder_fini(&d);
    return ok;
  }
  if (s->kind == GTP_SEED_GOTRACE)
    return s->n > 0; /* gtp_fuzz_go_seeds parsed each before emitting it */
  gtp_gen g;
  size_t used;
  if (gtp_gen_parse(s->p, s->n, &g, &used) == 0) {
    gtp_gen_fini(&g);
    return used == s->n;
  }
  gtp_file_reader r;
  if (gtp_file_reader_init(&r, s->p, s->n) < 0)
    return 0;
  int rc;
  while ((rc = gtp_file_reader_next(&r, &g)) == 1)
    gtp_gen_fini(&g);
  return rc == 0;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  return xorshift64(&rng);
}

/* One to four stacked mutations of src into a fresh buffer (*out, *on). */
static void mutate(const seed *src, uint8_t **out, size_t *on) {
  size_t cap = src->n * 2 + 64, n = src->n;
  uint8_t *p = malloc(cap);
  if (!p)
    exit(1);
  memcpy(p, src->p, n);
  int k = 1 + (int)(rnd() % 4);
  for (int i = 0; i < k; i++) {
    size_t at = n ? (size_t)(rnd() % n) : 0;
    switch (rnd() % 9) {
    case 0: /* flip one bit */
      if (n)
        p[at] ^= (uint8_t)(1u << (rnd() % 8));
      break;
    case 1: /* a random byte */
      if (n)
        p[at] = (uint8_t)rnd();
      break;
    case 2: { /* an interesting byte: varint edges, small counts */
      static const uint8_t v[] = {0, 1, 2, 0x7f, 0x80, 0x81, 0xfe, 0xff};
      if (n)
        p[at] = v[rnd() % sizeof v];
      break;
    }
    case 3: { /* an interesting u32le: lengths near the limits */
      static const uint32_t v[] = {0,
                                   1,
                                   0xffff,
                                   0x10000,
                                   GTP_FRAME_MAX,
                                   GTP_FRAME_MAX + 1,
                                   0x7fffffff,
                                   0xffffffff};
      if (n >= 4) {
        at = (size_t)(rnd() % (n - 3));
        gtp_put_u32le(p + at, v[rnd() % 8]);
      }
      break;
    }
    case 4: /* truncate */
      n = at;
      break;
    case 5: { /* delete a range */
      size_t len =
          n - at ? 1 + (size_t)(rnd() % (n - at < 32 ? n - at : 32)) : 0;
      memmove(p + at, p + at + len, n - at - len);
      n -= len;
      break;
    }
    case 6: { /* insert random bytes */
      size_t len = 1 + (size_t)(rnd() % 8);
      if (n + len > cap)
        break;
      memmove(p + at + len, p + at, n - at);
      for (size_t j = 0; j < len; j++)
        p[at + j] = (uint8_t)rnd();
      n += len;
      break;
    }
    case 7: { /* duplicate a chunk in place (repeated records, frames) */
      size_t len = n - at ? 1 + (size_t)(rnd() % (n - at)) : 0;
      if (n + len > cap)
        break;
      memmove(p + at + len, p + at, n - at);
      n += len;
      break;
    }
    default: { /* splice the tail of another seed */
      const seed *o = &seeds[rnd() % nseeds];
      size_t from = o->n ? (size_t)(rnd() % o->n) : 0;
      size_t len = o->n - from;
      if (at + len > cap)
        len = cap - at;
      memcpy(p + at, o->p + from, len);
      n = at + len;
      break;
    }
    }
  }
  *out = p;
  *on = n;
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *p = malloc(cap);
  size_t got;
  while (p && (got = fread(p + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *q = realloc(p, cap *= 2);
      if (!q) {
        free(p);
        p = NULL;
      }
      p = q;
    }
  }
  fclose(f);
  if (!p)
    return -1;
  run_both(p, n);
  free(p);
  return 0;
}

static int replay_path(const char *path) {
  struct stat st;
  if (stat(path, &st) < 0) {
    fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return replay_file(path);
  DIR *d = opendir(path);
  if (!d)
    return -1;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    if (replay_path(sub) < 0)
      rc = -1;
  }
  closedir(d);
  return rc;
}

int main(int argc, char **argv) {
  if (argc > 1) {
    int rc = 0;
    for (int i = 1; i < argc; i++)
      if (replay_path(argv[i]) < 0)
        rc = 1;
    printf("fuzz_replay: %lu inputs replayed\n", runs);
    return rc;
  }
  int rc = gtp_fuzz_seeds(keep_seed, NULL);
  if (rc >= 0)
    rc = gtp_fuzz_go_seeds(keep_seed, NULL);
  if (rc < 0) {
    fprintf(stderr, "fuzz_replay: seed generation failed: %s\n",
            gtp_strerror(rc));
    return 1;
  }
  size_t kinds[3] = {0, 0, 0};
  for (size_t i = 0; i < nseeds; i++) {
    if (!seed_is_valid(&seeds[i])) {
      fprintf(stderr, "fuzz_replay: seed %s does not decode\n", seeds[i].name);
      return 1;
    }
    kinds[seeds[i].kind]++;
    run_both(seeds[i].p, seeds[i].n);
  }
  if (kinds[GTP_SEED_FRAME] < 5 || kinds[GTP_SEED_TRACE] < 3 ||
      kinds[GTP_SEED_GOTRACE] < 5) {
    fprintf(stderr, "fuzz_replay: too few seeds\n");
    return 1;
  }
  for (size_t i = 0; i < nseeds; i++)
    for (int m = 0; m < MUTATIONS_PER_SEED; m++) {
      uint8_t *p;
      size_t n;
      mutate(&seeds[i], &p, &n);
      run_both(p, n);
      free(p);
    }
  printf("fuzz_replay: %zu seeds (%zu frame, %zu trace, %zu go), %lu runs, "
         "ok\n",
         nseeds, kinds[GTP_SEED_FRAME], kinds[GTP_SEED_TRACE],
         kinds[GTP_SEED_GOTRACE], runs);
  for (size_t i = 0; i < nseeds; i++)
    free(seeds[i].p);
  return 0;
}
