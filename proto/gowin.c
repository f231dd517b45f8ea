/* gowin.c: see gowin.h. Pure functions over parsed generations; no state. */
#include "config.h"

#include "gowin.h"

#include <stdio.h>
#include <string.h>

static int str_is(gtp_str s, const char *want) {
  size_t n = strlen(want);
  return s.len == n && memcmp(s.ptr, want, n) == 0;
}

/* "1.NN" -> NN in range, else GTP_E_VERSION. */
static int parse_version(const char *p, size_t len) {
  if (len < 4 || len > 4 || p[0] != '1' || p[1] != '.')
    return GTP_E_VERSION;
  if (p[2] < '0' || p[2] > '9' || p[3] < '0' || p[3] > '9')
    return GTP_E_VERSION;
  int minor = (p[2] - '0') * 10 + (p[3] - '0');
  return minor >= GTP_GO_MINOR_MIN ? minor : GTP_E_VERSION;
}

int gtp_gowin_minor(const gtp_gen_start *s) {
  int go = 0;
  const gtp_str *ver = NULL;
  for (uint32_t i = 0; i < s->ntags && i < GTP_TAGS_MAX; i++) {
    if (str_is(s->tags[i].key, "format"))
      go = str_is(s->tags[i].value, "go");
    else if (str_is(s->tags[i].key, "go_version"))
      ver = &s->tags[i].value;
  }
  if (!go)
    return 0;
  return ver ? parse_version(ver->ptr, ver->len) : GTP_E_VERSION;
}

void gtp_gowin_header(int minor, uint8_t out[GTP_GO_HEADER_SIZE]) {
  char h[GTP_GO_HEADER_SIZE + 1];
  memset(h, 0, sizeof h);
  snprintf(h, sizeof h, "go 1.%d trace", minor);
  memcpy(out, h, GTP_GO_HEADER_SIZE);
}

int gtp_gowin_put(const gtp_gen *g,
                  int (*sink)(void *ctx, const void *p, size_t n), void *ctx) {
  size_t off = 0;
  while (off < g->body_len) {
    gtp_record rec;
    /* The body was parsed whole by gtp_gen_parse: records are well-framed. */
    if (gtp_record_parse(g->body + off, g->body_len - off, &rec) < 0)
      return GTP_E_INTERNAL;
    off += rec.size;
    if (rec.type == GTP_REC_GOTRACE && rec.len) {
      int rc = sink(ctx, rec.payload, rec.len);
      if (rc)
        return rc;
    }
  }
  return 0;
}
