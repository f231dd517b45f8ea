/* frame.h: the agent <-> daemon wire protocol over TCP. Spec: PROTOCOL.md.
 *
 * A frame is  u32le length | u8 type | payload[length], with length <=
 * GTP_FRAME_MAX (the receiver's configured maximum may be lower, never
 * higher). A header announcing more is refused at once (GTP_E_TOOBIG) and the
 * connection closed: nothing else of it is read.
 *
 * Payloads (str = uvarint len | bytes; all ints uvarint unless said):
 *   HELLO    u32le GTP_HELLO_MAGIC | min_version | max_version | session[16] |
 *            [session_key[16], present when max_version >= 2] |
 *            str service | str host | pid | process_start_ns |
 *            str agent_version | ntags | ntags x (str k | str v) | str token
 *            (service, host, agent_version and tags: valid UTF-8, no NUL)
 *   WELCOME  version | has_last (0/1) | last_gen | idle_timeout_ms |
 *            max_gen_bytes
 *   BATCH    gen | one or more whole body records (format.h), to the end
 *   GEN_END  the GEN_END record payload of format.h (starts with gen)
 *   ACK      gen
 *   HEARTBEAT  (empty)
 *   ERROR    code (positive value of a gtp_error.h code) | has_gen (0/1) |
 *            gen | str reason
 *   GOODBYE  code | str reason
 *
 * Version rule: GTP_PROTO_VERSION is bumped for any change to a payload
 * layout or to the state machine; each side says the range it speaks (HELLO
 * min..max) and the daemon picks the highest common one (WELCOME version), so
 * a fleet upgrades one side at a time. New frame types need a version bump;
 * a frame type unknown to the negotiated version is a protocol error.
 */
#ifndef GTP_FRAME_H
#define GTP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "gtp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2 (wave 2) added the HELLO session key; the daemon speaks only 2
 * (a version-1 HELLO gets ERROR(VERSION)). */
#define GTP_PROTO_VERSION 2
#define GTP_PROTO_VERSION_MIN 2
/* The first version whose HELLO carries session_key. */
#define GTP_PROTO_VERSION_KEY 2
#define GTP_SESSION_KEY_SIZE 16
#define GTP_FRAME_HEADER_SIZE 5
#define GTP_FRAME_MAX (1u << 20) /* hard maximum payload */
#define GTP_HELLO_MAGIC 0x4C485447u /* "GTHL" little-endian */
#define GTP_TOKEN_MAX 256
#define GTP_REASON_MAX 512

enum gtp_frame_type {
  GTP_FR_HELLO = 1,
  GTP_FR_WELCOME = 2,
  GTP_FR_BATCH = 3,
  GTP_FR_GEN_END = 4,
  GTP_FR_ACK = 5,
  GTP_FR_HEARTBEAT = 6,
  GTP_FR_ERROR = 7,
  GTP_FR_GOODBYE = 8,
};

/* Name of a frame type ("HELLO"), "?" if unknown. Static. */
const char *gtp_frame_name(uint8_t type);

typedef struct gtp_hello {
  uint32_t min_version, max_version;
  uint8_t session[16];
  /* Secret drawn with the session id; on the wire only when max_version >=
   * GTP_PROTO_VERSION_KEY (decoded as zeros otherwise). Proves ownership of
   * the session: the daemon binds the first key it sees (PROTOCOL.md 6.9). */
  uint8_t session_key[GTP_SESSION_KEY_SIZE];
  gtp_str service, host, agent_version;
  uint64_t pid, process_start_ns;
  uint32_t ntags;
  gtp_tag tags[GTP_TAGS_MAX];
  gtp_str token; /* len 0 = none */
  /* Set by the decoder only, when it refused a text field (GTP_E_CORRUPT:
   * NUL or invalid UTF-8): "service", "host", "agent_version", "tag key" or
   * "tag value". Static; NULL otherwise. Ignored by the encoder. */
  const char *bad_field;
} gtp_hello;

typedef struct gtp_welcome {
  uint32_t version;
  int has_last;
  uint64_t last_gen; /* last generation committed for this session */
  uint64_t idle_timeout_ms;
  uint64_t max_gen_bytes;
} gtp_welcome;

typedef struct gtp_error_frame {
  int32_t code; /* negative gtp_error.h code after decoding */
  int has_gen;
  uint64_t gen;
  gtp_str reason;
} gtp_error_frame;

typedef struct gtp_goodbye {
  int32_t code; /* negative, or 0 for a normal close */
  gtp_str reason;
} gtp_goodbye;

/* A decoded frame header + borrowed payload. */
typedef struct gtp_frame {
  uint8_t type;
  const uint8_t *payload;
  uint32_t len;
} gtp_frame;

/* Encoders append one whole frame (header + payload) to b; 0 or b->err or
 * GTP_E_TOOBIG (a field over its limit; nothing appended). On any failure b
 * holds no part of the frame. ERROR/GOODBYE take the negative code (a
 * positive one is sent as is); ERROR with code 0, or either with INT_MIN,
 * is GTP_E_BADARG. A NULL reason is sent as "". */
int gtp_frame_hello_encode(gtp_wbuf *b, const gtp_hello *h);
int gtp_frame_welcome_encode(gtp_wbuf *b, const gtp_welcome *w);
/* BATCH around already-encoded body records. */
int gtp_frame_batch_encode(gtp_wbuf *b, uint64_t gen, const uint8_t *records,
                           size_t len);
/* BATCH's header and generation only, for len bytes of records the caller
 * sends right after them from its own memory (the agent's sender, without
 * copying the body). Same checks as gtp_frame_batch_encode; on failure
 * nothing is appended. */
int gtp_frame_batch_head_encode(gtp_wbuf *b, uint64_t gen, size_t len);
int gtp_frame_gen_end_encode(gtp_wbuf *b, const gtp_gen_end *e);
int gtp_frame_ack_encode(gtp_wbuf *b, uint64_t gen);
int gtp_frame_heartbeat_encode(gtp_wbuf *b);
int gtp_frame_error_encode(gtp_wbuf *b, int code, int has_gen, uint64_t gen,
                           const char *reason);
int gtp_frame_goodbye_encode(gtp_wbuf *b, int code, const char *reason);

/* Writes the 5-byte header for a payload of len bytes (for callers that
 * build the payload in place). */
void gtp_frame_header_put(uint8_t out[GTP_FRAME_HEADER_SIZE], uint8_t type,
                          uint32_t len);

/* Payload decoders (payload = frame.payload, len = frame.len). 0 or a
 * negative code; outputs borrow from the payload. The HELLO decoder refuses
 * (GTP_E_CORRUPT, h->bad_field set) identity strings that hold a NUL byte or
 * are not valid UTF-8: they would be truncated or mangled downstream (C
 * strings, JSON, log lines), so two peers could look like one. */
int gtp_frame_hello_decode(const uint8_t *p, size_t len, gtp_hello *h);
int gtp_frame_welcome_decode(const uint8_t *p, size_t len, gtp_welcome *w);
/* gen and the records that follow it (borrowed). */
int gtp_frame_batch_decode(const uint8_t *p, size_t len, uint64_t *gen,
                           const uint8_t **records, size_t *records_len);
int gtp_frame_gen_end_decode(const uint8_t *p, size_t len, gtp_gen_end *e);
int gtp_frame_ack_decode(const uint8_t *p, size_t len, uint64_t *gen);
int gtp_frame_error_decode(const uint8_t *p, size_t len, gtp_error_frame *e);
int gtp_frame_goodbye_decode(const uint8_t *p, size_t len, gtp_goodbye *g);

/* 1 if [p, p+n) is text the HELLO decoder accepts in an identity string:
 * well-formed UTF-8 without NUL. For senders that want to clean their
 * identity before sending it. */
int gtp_frame_text_ok(const char *p, size_t n);

/* Incremental decoder: accepts the byte stream split at any point.
 *
 * Invariants:
 *  1. A header whose length exceeds max MUST fail with GTP_E_TOOBIG before
 *     any of its payload is buffered, otherwise a peer could make us allocate
 *     up to 4 GiB.
 *  2. A frame that lies whole inside the caller's input is returned without a
 *     copy (payload points into the input); only frames split across feeds
 *     are buffered, so idle connections hold no frame buffer.
 *  3. After an error the decoder stays failed (every later call returns the
 *     same code).
 */
typedef struct gtp_frame_decoder {
  uint32_t max;   /* max payload accepted, <= GTP_FRAME_MAX */
  int err;        /* sticky error */
  uint8_t hdr[GTP_FRAME_HEADER_SIZE];
  uint8_t hdr_have;
  uint8_t type;
  uint32_t len;   /* payload length of the frame in progress */
  uint8_t *buf;   /* partial payload, allocated to len; owned */
  uint32_t have;
} gtp_frame_decoder;

void gtp_frame_decoder_init(gtp_frame_decoder *d, uint32_t max);
void gtp_frame_decoder_fini(gtp_frame_decoder *d);
/* Bytes buffered for a partial frame (header included). */
size_t gtp_frame_decoder_buffered(const gtp_frame_decoder *d);

/* Consumes bytes from [p, p+n). Returns 1 with *f filled (payload valid until
 * the next call or fini) and *used = bytes consumed, 0 when all n bytes were
 * consumed without completing a frame (*used = n), or < 0 on error
 * (GTP_E_TOOBIG, -ENOMEM). Call again with p+*used, n-*used to get the next
 * frame of the same input. */
int gtp_frame_decoder_feed(gtp_frame_decoder *d, const uint8_t *p, size_t n,
                           size_t *used, gtp_frame *f);
/* 0, or -1 when the decoder's state breaks frame.c's invariants (a buffer
 * over the limit or held in the wrong state). Debug builds check it on
 * every feed. */
int gtp_frame_decoder_check_invariants(const gtp_frame_decoder *d);

#ifdef __cplusplus
}
#endif
#endif /* GTP_FRAME_H */
