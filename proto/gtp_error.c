/* gtp_error.c: names and messages for the codes of gtp_error.h. */
/* strerrordesc_np and strerrorname_np are GNU extensions (glibc >= 2.32). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gtp_error.h"

#include <errno.h>
#include <string.h>

const char *gtp_strerror(int code) {
  switch (code) {
#define GTP_ERR_MSG_(name, value, msg)                                         \
  case value:                                                                  \
    return msg;
    GTP_ERRNO_MAP(GTP_ERR_MSG_)
#undef GTP_ERR_MSG_
  default:
    break;
  }
  if (code < 0 && code > -4096) {
    /* strerrordesc_np is static and thread-safe, unlike strerror. */
    const char *s = strerrordesc_np(-code);
    if (s)
      return s;
  }
  return "unknown error";
}

const char *gtp_errname(int code) {
  switch (code) {
#define GTP_ERR_NAME_(name, value, msg)                                        \
  case value:                                                                  \
    return #name;
    GTP_ERRNO_MAP(GTP_ERR_NAME_)
#undef GTP_ERR_NAME_
  default:
    break;
  }
  if (code < 0 && code > -4096) {
    const char *s = strerrorname_np(-code);
    if (s)
      return s;
  }
  return "UNKNOWN";
}
