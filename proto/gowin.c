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

/* Finds "key":"value" (a JSON member with a plain string value) in the
 * store's tags object; value must hold no escapes to match. Returns a
 * pointer to the value's first byte and its length, or NULL. */
static const char *json_member(const char *j, const char *key, size_t *len) {
  char pat[64];
  int n = snprintf(pat, sizeof pat, "\"%s\":\"", key);
  if (n < 0 || (size_t)n >= sizeof pat)
    return NULL;
  for (const char *p = j; (p = strstr(p, pat)) != NULL; p++) {
    /* A member starts after '{' or ',' (the daemon writes no spaces);
     * anything else is inside a string. */
    if (p == j || (p[-1] != '{' && p[-1] != ','))
      continue;
    const char *v = p + n, *e = v;
    while (*e && *e != '"' && *e != '\\')
      e++;
    if (*e != '"')
      return NULL;
    *len = (size_t)(e - v);
    return v;
  }
  return NULL;
}

int gtp_gowin_minor_json(const char *tags_json) {
  size_t n = 0;
  const char *f = tags_json ? json_member(tags_json, "format", &n) : NULL;
  if (!f || n != 2 || memcmp(f, "go", 2) != 0)
    return 0;
  const char *v = json_member(tags_json, "go_version", &n);
  return v ? parse_version(v, n) : GTP_E_VERSION;
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
