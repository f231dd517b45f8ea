/* json.c: JSON writer and validator (see json.h). */
#include "config.h"

#include "json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

void json_init(json *j, size_t limit) {
  memset(j, 0, sizeof *j);
  gtp_wbuf_init(&j->buf, limit);
}

void json_fini(json *j) {
  gtp_wbuf_fini(&j->buf);
}

char *json_take(json *j, size_t *len) {
  gtp_wbuf_put(&j->buf, "", 1);
  if (j->buf.err || j->depth != 0) {
    gtp_wbuf_fini(&j->buf);
    return NULL;
  }
  char *s = (char *)j->buf.data;
  *len = j->buf.len - 1;
  j->buf.data = NULL;
  j->buf.len = j->buf.cap = 0;
  return s;
}

/* Writes the separator a new value needs at the current depth. */
static void sep(json *j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->need_comma[j->depth])
    gtp_wbuf_put(&j->buf, ",", 1);
  j->need_comma[j->depth] = 1;
}

static void open_(json *j, char c) {
  sep(j);
  gtp_wbuf_put(&j->buf, &c, 1);
  /* Nesting past the bound is a programming error in web/, not input: flag
   * it as an error so the answer becomes a 500 instead of broken JSON. */
  if (j->depth >= JSON_DEPTH_MAX) {
    if (!j->buf.err)
      j->buf.err = GTP_E_INTERNAL;
    return;
  }
  j->depth++;
  j->need_comma[j->depth] = 0;
}

static void close_(json *j, char c) {
  if (j->depth <= 0) {
    if (!j->buf.err)
      j->buf.err = GTP_E_INTERNAL;
    return;
  }
  j->depth--;
  gtp_wbuf_put(&j->buf, &c, 1);
}

void json_obj_begin(json *j) {
  open_(j, '{');
}
void json_obj_end(json *j) {
  close_(j, '}');
}
void json_arr_begin(json *j) {
  open_(j, '[');
}
void json_arr_end(json *j) {
  close_(j, ']');
}

static void put_quoted(json *j, const char *s, size_t n) {
  gtp_wbuf_put(&j->buf, "\"", 1);
  gtp_json_escape(gtp_wbuf_sink, &j->buf, s, n);
  gtp_wbuf_put(&j->buf, "\"", 1);
}

void json_key(json *j, const char *key) {
  sep(j);
  put_quoted(j, key, strlen(key));
  gtp_wbuf_put(&j->buf, ":", 1);
  j->after_key = 1;
}

void json_strn(json *j, const char *s, size_t n) {
  sep(j);
  put_quoted(j, s, n);
}

void json_str(json *j, const char *s) {
  if (!s) {
    json_null(j);
    return;
  }
  json_strn(j, s, strlen(s));
}

static void put_fmt(json *j, const char *s) {
  gtp_wbuf_put(&j->buf, s, strlen(s));
}

void json_u64(json *j, uint64_t v) {
  char t[24];
  snprintf(t, sizeof t, "%" PRIu64, v);
  sep(j);
  put_fmt(j, t);
}

void json_i64(json *j, int64_t v) {
  char t[24];
  snprintf(t, sizeof t, "%" PRId64, v);
  sep(j);
  put_fmt(j, t);
}

void json_i64_str(json *j, int64_t v) {
  char t[24];
  snprintf(t, sizeof t, "%" PRId64, v);
  json_str(j, t);
}

void json_bool(json *j, int v) {
  sep(j);
  put_fmt(j, v ? "true" : "false");
}

void json_null(json *j) {
  sep(j);
  put_fmt(j, "null");
}

void json_raw(json *j, const char *text, size_t n) {
  sep(j);
  gtp_wbuf_put(&j->buf, text, n);
}

void json_kv_str(json *j, const char *key, const char *s) {
  json_key(j, key);
  json_str(j, s);
}

void json_kv_u64(json *j, const char *key, uint64_t v) {
  json_key(j, key);
  json_u64(j, v);
}

void json_kv_i64(json *j, const char *key, int64_t v) {
  json_key(j, key);
  json_i64(j, v);
}

/* ------------------------------------------------------------- validator */

typedef struct jv {
  const unsigned char *p, *end;
} jv;

static void ws(jv *v) {
  while (v->p < v->end &&
         (*v->p == ' ' || *v->p == '\t' || *v->p == '\n' || *v->p == '\r'))
    v->p++;
}

static int lit(jv *v, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(v->end - v->p) < n || memcmp(v->p, w, n) != 0)
    return 0;
  v->p += n;
  return 1;
}

static int hex4(jv *v) {
  if (v->end - v->p < 4)
    return 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = v->p[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
          (c >= 'A' && c <= 'F')))
      return 0;
  }
  v->p += 4;
  return 1;
}

/* One UTF-8 sequence starting at v->p (first byte >= 0x80), by the
 * project's one decoder (strict RFC 3629). */
static int utf8(jv *v) {
  uint32_t cp;
  size_t n = gtp_utf8_seq(v->p, (size_t)(v->end - v->p), &cp);
  v->p += n;
  return n != 0;
}

static int string_(jv *v) {
  v->p++; /* opening quote */
  while (v->p < v->end) {
    unsigned char c = *v->p;
    if (c == '"') {
      v->p++;
      return 1;
    }
    if (c < 0x20)
      return 0;
    if (c == '\\') {
      v->p++;
      if (v->p >= v->end)
        return 0;
      c = *v->p++;
      if (c == 'u') {
        if (!hex4(v))
          return 0;
      } else if (!strchr("\"\\/bfnrt", c) || c == 0) {
        return 0;
      }
    } else if (c >= 0x80) {
      if (!utf8(v))
        return 0;
    } else {
      v->p++;
    }
  }
  return 0;
}

/* One or more decimal digits. */
static int digits1(jv *v) {
  const unsigned char *s = v->p;
  while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
    v->p++;
  return v->p != s;
}

static int number(jv *v) {
  if (v->p < v->end && *v->p == '-')
    v->p++;
  if (v->p >= v->end)
    return 0;
  if (*v->p == '0') {
    v->p++;
  } else if (*v->p >= '1' && *v->p <= '9') {
    while (v->p < v->end && *v->p >= '0' && *v->p <= '9')
      v->p++;
  } else {
    return 0;
  }
  if (v->p < v->end && *v->p == '.') {
    v->p++;
    if (!digits1(v))
      return 0;
  }
  if (v->p < v->end && (*v->p == 'e' || *v->p == 'E')) {
    v->p++;
    if (v->p < v->end && (*v->p == '+' || *v->p == '-'))
      v->p++;
    if (!digits1(v))
      return 0;
  }
  return 1;
}

static int value(jv *v, int depth) {
  ws(v);
  if (v->p >= v->end)
    return 0;
  switch (*v->p) {
  case '"':
    return string_(v);
  case 't':
    return lit(v, "true");
  case 'f':
    return lit(v, "false");
  case 'n':
    return lit(v, "null");
  case '{':
  case '[': {
    /* Recursion is bounded by JSON_DEPTH_MAX, so hostile nesting cannot
     * exhaust the stack. */
    if (depth >= JSON_DEPTH_MAX)
      return 0;
    unsigned char close = *v->p == '{' ? '}' : ']';
    int obj = close == '}';
    v->p++;
    ws(v);
    if (v->p < v->end && *v->p == close) {
      v->p++;
      return 1;
    }
    for (;;) {
      if (obj) {
        ws(v);
        if (v->p >= v->end || *v->p != '"' || !string_(v))
          return 0;
        ws(v);
        if (v->p >= v->end || *v->p != ':')
          return 0;
        v->p++;
      }
      if (!value(v, depth + 1))
        return 0;
      ws(v);
      if (v->p >= v->end)
        return 0;
      if (*v->p == ',') {
        v->p++;
        continue;
      }
      if (*v->p == close) {
        v->p++;
        return 1;
      }
      return 0;
    }
  }
  default:
    return number(v);
  }
}

int json_valid(const char *s, size_t n) {
  if (!s)
    return 0;
  jv v = {(const unsigned char *)s, (const unsigned char *)s + n};
  if (!value(&v, 0))
    return 0;
  ws(&v);
  return v.p == v.end;
}
