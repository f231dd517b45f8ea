/* assets.h: static files served by the HTTP API (the dashboard), compiled
 * in so the daemon is one binary with nothing to install beside it.
 *
 * The sources are the readable files in web/dashboard/; web/embed turns
 * them into the generated web/dashboard_assets.c (build dir) at make time,
 * which defines web_assets[]. Everything here is immutable static data:
 * any thread may read it at any time.
 */
#ifndef WEB_ASSETS_H
#define WEB_ASSETS_H

#include <stddef.h>

typedef struct web_asset {
  const char *path;          /* URL path, e.g. "/app.js" */
  const char *ctype;         /* Content-Type header value */
  const char *etag;          /* strong ETag, quotes included */
  const unsigned char *data; /* len bytes, followed by a NUL not counted */
  size_t len;
} web_asset;

/* Sorted by path. Defined by the generated web/dashboard_assets.c. */
extern const web_asset web_assets[];
extern const size_t web_assets_count;

/* The asset served at url ("/" means "/index.html"), or NULL. The result is
 * static (never freed). */
const web_asset *web_asset_find(const char *url);

/* 1 if an If-None-Match header value names etag (a list, or "*"), so the
 * answer can be 304. NULL header = 0. */
int web_asset_etag_match(const char *if_none_match, const char *etag);

#endif
