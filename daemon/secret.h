/* secret.h: where gentraced's tokens come from, and the file modes of what
 * it writes.
 *
 * A token given as --token / --read-token shows in the process list (ps,
 * /proc/PID/cmdline) to every local user. The other sources do not:
 * --token-file FILE / --read-token-file FILE (a file only its owner, and
 * optionally its group, can read) and the environment variables
 * GENTRACED_TOKEN / GENTRACED_READ_TOKEN (/proc/PID/environ is private to
 * the process's user). The admin token (retention pins) has the same three
 * sources: --admin-token, --admin-token-file, GENTRACED_ADMIN_TOKEN.
 *
 * Thread: main thread only, before anything starts.
 */
#ifndef SECRET_H
#define SECRET_H

#include "conf.h"

/* Settles c->token, c->read_token and c->admin_token from their sources: the
 * flag (or config key), the file, the environment, in that order of precedence;
 * a flag and a file for the same token together are an error. The environment
 * variables are removed once read, so child processes never inherit them. 0, or
 * a negative code with *cause (malloc'd) naming the source and the problem. */
int secret_resolve(conf *c, char **cause);

/* Reads a token file: one line, surrounding blanks and the newline
 * stripped, at most 4 KiB, no NUL, not empty. Refuses a file that is not
 * regular, that others may read or write, or that its group may write
 * (mode & 0026). 0 with *out malloc'd, or a negative code with *cause. */
int secret_read_file(const char *path, char **out, char **cause);

/* Makes the database files private to the daemon's user: creates the
 * database 0600 if it does not exist yet (SQLite then gives its -wal and
 * -shm the same mode), and takes group and other permissions away from
 * those that already exist. Returns how many existing files were tightened
 * (>= 0) or a negative code with *cause. */
int secret_private_files(const char *db_path, char **cause);

#endif
