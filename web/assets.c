/* assets.c: lookup of the embedded dashboard files (the files of
 * web/dashboard/, turned into web_assets[] by web/embed at make time). The page
 * itself only uses the public API (/v1/agents, /v1/feed, /v1/trace), so it
 * needs nothing the API does not offer to any other client. */
#include "config.h"

#include <string.h>

#include "assets.h"

const web_asset *web_asset_find(const char *url) {
  if (!url)
    return NULL;
  if (strcmp(url, "/") == 0)
    url = "/index.html";
  /* Binary search: the table is sorted by path (web/embed sorts it). */
  size_t lo = 0, hi = web_assets_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(url, web_assets[mid].path);
    if (c == 0)
      return &web_assets[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

int web_asset_etag_match(const char *inm, const char *etag) {
  if (!inm || !etag)
    return 0;
  size_t el = strlen(etag);
  /* RFC 9110: a comma-separated list of entity tags, or "*"; weak
   * comparison (W/ prefixes ignored) is what If-None-Match uses. */
  const char *p = inm;
  while (*p) {
    while (*p == ' ' || *p == '\t' || *p == ',')
      p++;
    if (!*p)
      break;
    if (*p == '*')
      return 1;
    if (p[0] == 'W' && p[1] == '/')
      p += 2;
    size_t n = strcspn(p, ",");
    size_t t = n;
    while (t > 0 && (p[t - 1] == ' ' || p[t - 1] == '\t'))
      t--;
    if (t == el && memcmp(p, etag, el) == 0)
      return 1;
    p += n;
  }
  return 0;
}
