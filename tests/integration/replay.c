/* replay: sends the generations of a native gentrace file (a /v1/trace
 * download of one session) to a gentraced as that same session, the way its
 * agent sent them: HELLO with the session's identity, each body record as a
 * BATCH frame, GEN_END, and waits for every ACK. So one workload of the real
 * agent can be stored by two daemons on different backends and their
 * answers compared (tests/integration/test_shared_search.sh).
 *
 *   replay AGENT_PORT FILE
 *
 * Exit 0 when every generation was ACKed; 1 with a message otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client.h"
#include "format.h"
#include "frame.h"

static int die(const char *what, int rc) {
  fprintf(stderr, "replay: %s: %s\n", what, gtp_strerror(rc));
  return 1;
}

/* The whole file (a download: its size is known), malloc'd. */
static uint8_t *slurp(const char *path, size_t *len) {
  struct stat st;
  FILE *f = fopen(path, "rb");
  uint8_t *b = NULL;
  if (f && fstat(fileno(f), &st) == 0 && st.st_size > 0 &&
      (b = malloc((size_t)st.st_size)) != NULL &&
      fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
    free(b);
    b = NULL;
  }
  if (f)
    fclose(f);
  *len = b ? (size_t)st.st_size : 0;
  return b;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: replay AGENT_PORT FILE\n");
    return 2;
  }
  size_t len = 0;
  uint8_t *data = slurp(argv[2], &len);
  if (!data)
    return die(argv[2], -errno);
  gtp_file_reader fr;
  int rc = gtp_file_reader_init(&fr, data, len);
  if (rc < 0)
    return die("file header", rc);
  gtc c;
  int connected = 0;
  unsigned long sent = 0;
  gtp_gen g;
  while ((rc = gtp_file_reader_next(&fr, &g)) == 1) {
    if (!connected) {
      char svc[256], host[256], ver[256];
      snprintf(svc, sizeof svc, "%.*s", (int)g.start.service.len,
               g.start.service.ptr);
      snprintf(host, sizeof host, "%.*s", (int)g.start.host.len,
               g.start.host.ptr);
      snprintf(ver, sizeof ver, "%.*s", (int)g.start.agent_version.len,
               g.start.agent_version.ptr);
      gtf_spec s;
      memset(&s, 0, sizeof s);
      memcpy(s.session, g.start.session, 16);
      memset(s.session_key, 0x42, sizeof s.session_key);
      s.service = svc;
      s.host = host;
      s.agent_version = ver;
      s.pid = g.start.pid;
      s.process_start_ns = g.start.process_start_ns;
      gtp_welcome w;
      if ((rc = gtc_connect(&c, (uint16_t)atoi(argv[1]))) < 0)
        return die("connect", rc);
      if ((rc = gtc_hello(&c, &s, NULL, &w)) != 0)
        return die("hello", rc);
      connected = 1;
    }
    /* Each body record as one BATCH frame, as the agent cuts them. */
    const uint8_t *p = g.body, *end = g.body + g.body_len;
    while (rc >= 0 && p < end) {
      gtp_record rec;
      if ((rc = gtp_record_parse(p, (size_t)(end - p), &rec)) < 0)
        break;
      gtp_wbuf b;
      gtp_wbuf_init(&b, 0);
      gtp_frame_batch_encode(&b, g.end.gen, p, rec.size);
      rc = b.err ? b.err : gtc_send_raw(&c, b.data, b.len);
      gtp_wbuf_fini(&b);
      p += rec.size;
    }
    if (rc >= 0) {
      gtp_wbuf b;
      gtp_wbuf_init(&b, 0);
      gtp_frame_gen_end_encode(&b, &g.end);
      rc = b.err ? b.err : gtc_send_raw(&c, b.data, b.len);
      gtp_wbuf_fini(&b);
    }
    uint64_t acked = 0;
    int code = 0;
    if (rc >= 0 &&
        (rc = gtc_read_reply(&c, &acked, &code, GTC_TIMEOUT_MS)) != 1)
      rc = rc == 2 ? code : rc < 0 ? rc : GTP_E_STATE;
    uint64_t gen = g.end.gen;
    gtp_gen_fini(&g);
    if (rc < 0 || (rc == 1 && acked != gen)) {
      fprintf(stderr, "replay: generation %llu: %s\n", (unsigned long long)gen,
              rc < 0 ? gtp_strerror(rc) : "ACK of another generation");
      return 1;
    }
    sent++;
  }
  if (rc < 0)
    return die("reading the file", rc);
  if (connected)
    gtc_close(&c);
  free(data);
  printf("replayed=%lu\n", sent);
  return 0;
}
