/* ident.h: configuration and identity of an agent session (ident.c). */
#ifndef GT_IDENT_H
#define GT_IDENT_H

#include "gentrace.h"
#include "sender.h"

/* Fills c from the GENTRACE_* environment over gt_config_init's defaults.
 * The strings stay owned by the environment. */
void gt__config_from_env(gt_config *c);
/* Fills id from c: a fresh random session id, service, host, token, pid,
 * process start time and tags (copied; free with gt__ident_fini). 0,
 * -ENOMEM or -EINVAL (bad tags). */
int gt__ident_init(gt__ident *id, const gt_config *c);
void gt__ident_fini(gt__ident *id);

#endif
