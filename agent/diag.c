/* diag.c: the agent's diagnostics: one line to the user's gt_config.log
 * callback, never to stdout or stderr (the agent never prints inside its
 * host). Any thread; the callback is the user's to make thread-safe.
 */
#include "config.h"

#include "agent_int.h"

#include <stdarg.h>
#include <stdio.h>

void logf_(int level, const char *fmt, ...) {
  if (A.cfg.log == NULL || level < A.cfg.log_level)
    return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  A.cfg.log(A.cfg.log_ctx, level, line);
}
