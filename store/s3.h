/* s3.h: a small S3 client over libcurl for the shared store's segment
 * objects: PUT, GET (whole or a byte range), HEAD, DELETE, LIST, and bucket
 * creation (set-up and tests).
 *
 * Path-style addressing (ENDPOINT/BUCKET/PREFIXKEY), signed with libcurl's
 * built-in SigV4 ("aws:amz:REGION:s3"). Endpoint, region and credentials
 * come from the s3_config fields when set (config-file keys), else from the
 * environment: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION or
 * AWS_DEFAULT_REGION (default us-east-1), AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY.
 *
 * Errors: 0 on success, else a negative code with *cause set to a malloc'd
 * message naming the request (free it): GTP_E_UNAVAIL when the server
 * cannot be reached, times out or answers 5xx (retry later);
 * GTP_E_NOTFOUND for 404; GTP_E_AUTH for 401/403; GTP_E_TRUNC when a body
 * is shorter than asked for; GTP_E_TOOBIG when longer than the caller's
 * bound; GTP_E_BADARG for a bad key or URL, other 4xx; -ENOMEM.
 *
 * Thread: an s3 handle is one libcurl easy handle (it keeps its connection
 * alive between requests) and MUST be used by one thread at a time; open one
 * per thread. s3_open and s3_close may run on any thread.
 */
#ifndef S3_H
#define S3_H

#include <stddef.h>
#include <stdint.h>

typedef struct s3 s3;

typedef struct s3_config {
  /* NULL = from the environment (see above). Borrowed during s3_open. */
  const char *endpoint; /* http://host:port or https://host:port */
  const char *region;
  const char *access_key; /* may contain ':' (Swift tempauth: account:user) */
  const char *secret_key;
  /* The object location, as gentraced's --objects: s3://BUCKET[/PREFIX]. */
  const char *url;
  long connect_timeout_ms; /* 0 = 3000 */
  long timeout_ms;         /* whole request; 0 = 60000 */
} s3_config;

/* Resolves cfg (fields, then environment), checks it and opens a client.
 * Does no network I/O (s3_check does). */
int s3_open(const s3_config *cfg, s3 **out, char **cause);
void s3_close(s3 *c);

/* The bucket and prefix s3_open parsed (borrowed; prefix "" or ending '/'). */
const char *s3_bucket(const s3 *c);
const char *s3_prefix(const s3 *c);

/* "s3://BUCKET" of c (malloc'd): a client opened on it addresses keys
 * from the bucket's root. The shared store catalogs bucket-relative keys
 * (prefix included), so daemons agree on them whatever prefix each was
 * started with. */
char *s3_root_url(const s3 *c);

/* HEAD of the bucket: reachable, credentials good, bucket present. */
int s3_check(s3 *c, char **cause);
/* Creates the bucket; an existing bucket of ours is success. */
int s3_create_bucket(s3 *c, char **cause);

/* key: relative to the prefix; [A-Za-z0-9._/-], 1..512 bytes, no "..". */
int s3_put(s3 *c, const char *key, const void *data, size_t len, char **cause);
/* GET of len bytes at off (len 0: the whole object, at most max bytes).
 * On success *out is malloc'd (caller frees), *n its length: exactly len
 * for a range. */
int s3_get(s3 *c, const char *key, uint64_t off, uint64_t len, size_t max,
           uint8_t **out, size_t *n, char **cause);
/* Size of an object; GTP_E_NOTFOUND when absent. */
int s3_head(s3 *c, const char *key, uint64_t *size, char **cause);
/* Deletes an object; deleting an absent object is success (as S3 does). */
int s3_delete(s3 *c, const char *key, char **cause);
/* Lists the objects whose keys start with prefix (relative to the client's
 * prefix, like every key here), in key order, a page at a time: fn(ctx,
 * key relative to the client's prefix, size) for each; a non-zero return
 * stops the listing (still 0). Keys we could not have written (outside
 * [A-Za-z0-9._/-]) are skipped. */
typedef int (*s3_list_fn)(void *ctx, const char *key, uint64_t size);
int s3_list(s3 *c, const char *prefix, s3_list_fn fn, void *ctx, char **cause);

/* Requests so far, process-wide, by kind (metrics). */
enum { S3_OP_PUT, S3_OP_GET, S3_OP_HEAD, S3_OP_DELETE, S3_OP_LIST, S3_OPS };
typedef struct s3_stats {
  uint64_t requests, errors; /* errors: unreachable, or not 2xx */
  uint64_t bytes;            /* bodies sent (PUT) or received */
  uint64_t ns;               /* time in requests */
} s3_stats;
void s3_stats_get(s3_stats out[S3_OPS]);

#endif /* S3_H */
