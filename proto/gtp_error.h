/* gtp_error.h: the one table of gentrace error codes.
 *
 * Every function in the project that can fail returns int: 0 (or a count) on
 * success, or a negative code. System errors are -errno; the project's own
 * codes live in the reserved range -7000..-7999 and are listed here once, as
 * libuv does, so the enum, the names and the messages cannot drift apart.
 *
 * Rule: codes are append-only. Never renumber one: they travel in ERROR and
 * GOODBYE frames (as their positive value) and appear in logs.
 */
#ifndef GTP_ERROR_H
#define GTP_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, message) */
#define GTP_ERRNO_MAP(XX)                                                      \
  XX(TRUNC, -7001, "input ends inside a record or frame")                      \
  XX(MAGIC, -7002, "bad magic number")                                         \
  XX(VERSION, -7003, "unsupported version")                                    \
  XX(TOOBIG, -7004, "length or count exceeds its limit")                       \
  XX(CORRUPT, -7005, "malformed record or frame")                              \
  XX(CRC, -7006, "CRC32C mismatch")                                            \
  XX(MANIFEST, -7007, "generation does not match its manifest")                \
  XX(STATE, -7008, "frame not allowed in this connection state")               \
  XX(TOKEN, -7009, "authentication failed")                                    \
  XX(UNKNOWN, -7010, "unknown record, frame or event type")                    \
  XX(VARINT, -7011, "varint longer than 10 bytes or overflowing 64 bits")      \
  XX(GEN, -7012, "generation number out of order or mismatched")               \
  XX(LIMIT, -7013, "server limit reached")                                     \
  XX(TIMEOUT, -7014, "timed out")                                              \
  XX(SHUTDOWN, -7015, "peer is shutting down")                                 \
  XX(DISKFULL, -7016, "storage full; ingest paused")                           \
  XX(NOTFOUND, -7017, "not found")                                             \
  XX(BADARG, -7018, "bad argument")                                            \
  XX(INTERNAL, -7019, "internal error")                                       \
  XX(AUTH, -7020, "not authorized for this session or service")              \
  XX(CONFLICT, -7021, "differs from what is stored under the same name")     \
  XX(UNAVAIL, -7022, "storage backend unavailable; retrying")                \
  XX(TLS, -7023, "TLS handshake or record failed")

enum {
#define GTP_ERR_ENUM_(name, value, msg) GTP_E_##name = (value),
  GTP_ERRNO_MAP(GTP_ERR_ENUM_)
#undef GTP_ERR_ENUM_
};

/* Message for any code of this table or any -errno. Never NULL; the string is
 * static (borrowed). Thread-safe. Unknown codes give "unknown error". */
const char *gtp_strerror(int code);

/* Short name ("TRUNC", "ENOMEM", ...) for logs and JSON. Static, never NULL. */
const char *gtp_errname(int code);

#ifdef __cplusplus
}
#endif
#endif /* GTP_ERROR_H */
