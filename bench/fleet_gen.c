/* fleet_gen.c: bench_fleet's small generation (see fleet_gen.h). */
#include "config.h"

#include "fleet_gen.h"

#include <string.h>

int fleet_gen_body(gtp_wbuf *body, uint64_t gen, unsigned nevents,
                   gtp_gen_end *e) {
  uint8_t ev_buf[16384];
  size_t ev_len = 0;
  uint64_t base = 1000000000ull + gen * 250000000ull, prev = base;
  for (unsigned i = 0; i < nevents && ev_len + 64 < sizeof ev_buf; i++) {
    gtp_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = i % 3 == 0   ? GTP_EV_INSTANT
              : i % 3 == 1 ? GTP_EV_REGION_BEGIN
                           : GTP_EV_REGION_END;
    ev.ticks = base + (uint64_t)i * 1000;
    ev.args[0] = ev.type == GTP_EV_REGION_END ? 0 : 1 + (i % 3 == 0);
    int n = gtp_event_encode(ev_buf + ev_len, &ev, prev);
    if (n < 0)
      return n;
    ev_len += (size_t)n;
    prev = ev.ticks;
  }
  size_t at = body->len;
  gtp_put_batch(body, gen, 1, base, nevents, ev_buf, ev_len);
  static const uint64_t ids[] = {1, 2};
  const gtp_str strs[] = {{"request", 7}, {"tick", 4}};
  gtp_put_strings(body, ids, strs, 2);
  gtp_clock c;
  c.start_ticks = base;
  c.start_mono_ns = base * 4;
  c.start_real_ns = 1767225600000000000ull + gen * 1000000000ull;
  c.end_ticks = base + 250000000ull;
  c.end_mono_ns = c.start_mono_ns + 1000000000ull;
  c.end_real_ns = c.start_real_ns + 1000000000ull;
  gtp_put_clock(body, &c);
  if (body->err)
    return body->err;
  memset(e, 0, sizeof *e);
  e->gen = gen;
  return gtp_manifest_compute(body->data + at, body->len - at, e);
}
