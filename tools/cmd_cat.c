/* cmd_cat.c: `gentrace cat FILE...`, merges trace files into one.
 *
 * Every generation of every input is parsed and validated (manifest, CRC,
 * every event decodable) before a byte is written, so the output is either
 * a whole valid file or nothing. The output is the file header once, then
 * the generations ordered by wall-clock start (ties: session, generation
 * number), each (session, gen) once: the first copy met in argument order
 * wins. Generations are copied byte for byte; unknown top-level records
 * between generations are not carried over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct gen_ref {
  int64_t start_ns;
  uint8_t session[16];
  uint64_t gen;
  size_t input, offset, size; /* where the bytes are */
  size_t order;               /* argument order, then file order */
  bool dup;
} gen_ref;

static int by_identity(const void *a, const void *b) {
  const gen_ref *x = a, *y = b;
  int c = memcmp(x->session, y->session, 16);
  if (c)
    return c;
  if (x->gen != y->gen)
    return x->gen < y->gen ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static int by_time(const void *a, const void *b) {
  const gen_ref *x = a, *y = b;
  if (x->start_ns != y->start_ns)
    return x->start_ns < y->start_ns ? -1 : 1;
  return by_identity(a, b);
}

/* What cat gathers from every input: one ref per generation. */
typedef struct cat_ctx {
  gen_ref *refs;
  size_t nrefs, cap;
  size_t input; /* index of the input being read */
} cat_ctx;

static int cat_gen(void *ctx, const cli_input *in, const gtp_gen *g,
                   size_t *err_off) {
  cat_ctx *c = ctx;
  /* cat promises a valid file, and the reader checks the manifest but not
   * the events inside the batches. */
  int rc = cli_gen_events(g, in->data, err_off, NULL, NULL);
  if (rc < 0)
    return rc;
  if (c->nrefs == c->cap) {
    size_t nc = c->cap ? c->cap * 2 : 64;
    gen_ref *nr = realloc(c->refs, nc * sizeof *nr);
    if (!nr) {
      fprintf(stderr, "gentrace: out of memory\n");
      return CLI_EACH_REPORTED;
    }
    c->refs = nr;
    c->cap = nc;
  }
  gen_ref *ref = &c->refs[c->nrefs];
  ref->start_ns = gtp_gen_wall_ns(g, g->clock.start_ticks);
  memcpy(ref->session, g->start.session, 16);
  ref->gen = g->start.gen;
  ref->input = c->input;
  ref->offset = (size_t)(g->base - in->data);
  ref->size = g->size;
  ref->order = c->nrefs;
  ref->dup = false;
  c->nrefs++;
  return 0;
}

int cmd_cat(int argc, char **argv) {
  cli_opts opt;
  int started = cli_start("cat", argc, argv, 0, cli_help_cat, 1, 0, &opt);
  if (started >= 0)
    return started;
  int nstdin = 0;
  for (int i = 0; i < opt.nargs; i++)
    nstdin += !strcmp(opt.args[i], "-");
  if (nstdin > 1) {
    cli_usage_error("cat", "stdin (-) can be read only once");
    cli_opts_free(&opt);
    return CLI_USAGE;
  }

  int status = CLI_BAD_INPUT;
  size_t nin = 0;
  cat_ctx c = {0};
  cli_input *ins = calloc(opt.nargs > 0 ? (size_t)opt.nargs : 1, sizeof *ins);
  cli_output *o = malloc(sizeof *o);
  if (!ins || !o) {
    fprintf(stderr, "gentrace: out of memory\n");
    goto out;
  }
  for (; nin < (size_t)opt.nargs; nin++) {
    if (cli_input_open(&ins[nin], opt.args[nin]))
      goto out;
    c.input = nin;
    if (cli_each_gen(&ins[nin], cat_gen, &c)) {
      nin++; /* opened: closed at out */
      goto out;
    }
  }

  /* Duplicates: same (session, gen); the copy met first is kept. */
  gen_ref *refs = c.refs;
  size_t nrefs = c.nrefs;
  if (nrefs)
    qsort(refs, nrefs, sizeof *refs, by_identity);
  for (size_t i = 1; i < nrefs; i++)
    if (!memcmp(refs[i].session, refs[i - 1].session, 16) &&
        refs[i].gen == refs[i - 1].gen)
      refs[i].dup = true;
  if (nrefs)
    qsort(refs, nrefs, sizeof *refs, by_time);

  if (cli_output_open(o, opt.out)) {
    free(o);
    o = NULL;
    goto out;
  }
  uint8_t hdr[GTP_FILE_HEADER_SIZE];
  gtp_file_header_write(hdr);
  cli_output_write(o, hdr, sizeof hdr);
  for (size_t i = 0; i < nrefs; i++)
    if (!refs[i].dup)
      cli_output_write(o, ins[refs[i].input].data + refs[i].offset,
                       refs[i].size);
  status = cli_output_close(o, true) ? CLI_BAD_INPUT : CLI_OK;

out:
  for (size_t i = 0; i < nin; i++)
    cli_input_close(&ins[i]);
  free(ins);
  free(o);
  free(c.refs);
  cli_opts_free(&opt);
  return status;
}
