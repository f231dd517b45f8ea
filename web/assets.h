/* assets.h: static files served by the HTTP API, compiled in so the daemon
 * is one binary with nothing to install beside it. */
#ifndef WEB_ASSETS_H
#define WEB_ASSETS_H

#include <stddef.h>

/* GET / : the dashboard page (HTML with inline script and style). */
extern const char web_asset_index_html[];
extern const size_t web_asset_index_html_len;

#endif
