/* log.h: gentraced's logger: one logfmt line per event.
 *
 *   ts=2026-01-02T03:04:05.678Z level=info msg=listening agent=127.0.0.1:7170
 *
 * Values are quoted only when they need it (space, quote, '=' or control
 * characters), so simple lines stay greppable as plain text.
 *
 * Thread: every function is safe from any thread. Each line is written with
 * one write(2) under a mutex, so lines from different threads never mix.
 * log_reopen (SIGHUP) swaps the file descriptor under the same mutex.
 */
#ifndef LOG_H
#define LOG_H

#include <stdarg.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/* Logs to path (appending, created 0640) or to stderr when path is NULL or
 * "-". Returns 0 or -errno (the logger then stays on stderr). */
int log_open(const char *path);
/* Reopens the same path (after logrotate moved it). 0 or -errno; on error
 * the old descriptor stays in use. No-op for stderr. */
int log_reopen(void);
void log_close(void);
/* Lines below this level are dropped (default LOG_INFO). */
void log_set_level(enum log_level lvl);

/* Writes one line: ts, level, msg, then fields. fields is a printf format
 * producing "key=value key=value" text that is appended as is (the caller
 * quotes values it does not control with log_quote); NULL for none. */
void log_msg(enum log_level lvl, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes one line whose body kv is already logfmt ("msg=... k=v"): used by
 * modules that must not depend on this logger (web/, the store), which hand
 * their lines over through a callback. */
void log_kv(enum log_level lvl, const char *kv);

/* Quotes s for a logfmt value into buf (always NUL-terminated, truncated
 * with "..." to fit); returns buf. Plain words are copied unquoted. */
char *log_quote(char *buf, unsigned size, const char *s);

#define log_info(msg, ...) log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)
#define log_debug(msg, ...) log_msg(LOG_DEBUG, msg, __VA_ARGS__)

#endif
