/* json.h: a small JSON writer over a growable buffer, so every answer of the
 * HTTP API is valid JSON by construction, and a strict validator for JSON
 * text that comes from elsewhere (a session's tags).
 *
 * The writer tracks nesting and inserts commas itself; strings go through
 * gtp_json_escape (proto/text.h), the one escaping routine of the project.
 * Memory: the buffer grows with realloc (gtp_wbuf); the first failure sticks
 * in json.buf.err and later writes are no-ops, so callers check once.
 */
#ifndef WEB_JSON_H
#define WEB_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define JSON_DEPTH_MAX 32

typedef struct json {
  gtp_wbuf buf;
  int depth;
  /* need_comma[d]: the container at depth d already holds a member. */
  uint8_t need_comma[JSON_DEPTH_MAX + 1];
  uint8_t after_key; /* a key was just written: the value takes no comma */
} json;

/* limit: maximum bytes (0 = GTP_GEN_MAX_BYTES). */
void json_init(json *j, size_t limit);
void json_fini(json *j);
/* Hands the NUL-terminated text to the caller (free() it); *len excludes the
 * NUL. Returns NULL (and frees) if any write failed. */
char *json_take(json *j, size_t *len);

void json_obj_begin(json *j);
void json_obj_end(json *j);
void json_arr_begin(json *j);
void json_arr_end(json *j);
/* Object member name; the next value call writes its value. */
void json_key(json *j, const char *key);
void json_str(json *j, const char *s); /* NULL writes null */
void json_strn(json *j, const char *s, size_t n);
void json_u64(json *j, uint64_t v);
void json_i64(json *j, int64_t v);
void json_bool(json *j, int v);
void json_null(json *j);
/* Integer as a JSON string ("123"): for ns values past 2^53. */
void json_i64_str(json *j, int64_t v);
/* Pre-validated JSON text as a value (see json_valid). */
void json_raw(json *j, const char *text, size_t n);

/* Shorthands: key + value. */
void json_kv_str(json *j, const char *key, const char *s);
void json_kv_u64(json *j, const char *key, uint64_t v);
void json_kv_i64(json *j, const char *key, int64_t v);

/* 1 if [s, s+n) is exactly one valid JSON value (RFC 8259; nesting at most
 * JSON_DEPTH_MAX, surrounding whitespace allowed), else 0. */
int json_valid(const char *s, size_t n);

#endif
