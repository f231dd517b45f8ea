// searchq.js: the search view's pure parts (no DOM): the API paths of a
// search and a summary, the window around a found span, and the bars of a
// latency histogram. Tested in Node (tests/dashboard/searchq.test.mjs).
'use strict';

// Form values -> '/v1/search?...' (empty values left out).
export function searchPath(f, cursor) {
  const q = new URLSearchParams();
  for (const k of ['service', 'name', 'min', 'max', 'last']) {
    if (f[k]) q.set(k, String(f[k]).trim());
  }
  q.set('limit', String(f.limit || 100));
  if (cursor) q.set('cursor', cursor);
  return '/v1/search?' + q.toString();
}

export function summaryPath(f) {
  const q = new URLSearchParams();
  for (const k of ['service', 'name', 'last']) {
    if (f[k]) q.set(k, String(f[k]).trim());
  }
  return '/v1/summary?' + q.toString();
}

// The window around a span (the span plus half its length, at least
// 100 ms, on each side), as unix ns BigInts.
export function spanWindow(span) {
  const start = BigInt(span.start_ns);
  const dur = BigInt(span.duration_ns);
  let pad = dur / 2n;
  if (pad < 100000000n) pad = 100000000n;
  return { from: start - pad, to: start + dur + pad };
}

// Bars of a histogram: [{lo, hi, count, frac}] with frac = count / the
// largest count (0..1), in bucket order.
export function histBars(buckets) {
  const max = buckets.reduce((m, b) => Math.max(m, b.count), 0);
  return buckets.map((b) => ({
    lo: BigInt(b.lo_ns),
    hi: b.hi_ns === null ? null : BigInt(b.hi_ns),
    count: b.count,
    frac: max ? b.count / max : 0,
  }));
}

// The search form values that list the spans of one bucket: min = its
// lower bound, max = just under its upper bound (both inclusive).
export function bucketQuery(f, bar) {
  const out = { ...f, min: bar.lo + 'ns' };
  if (bar.hi !== null) out.max = (bar.hi - 1n) + 'ns';
  else delete out.max;
  return out;
}

// A duration in ns (string or BigInt) for people: 1.2 s, 340 ms, 12 us.
export function fmtNs(v) {
  const n = Number(BigInt(v));
  if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 1 : 2) + ' s';
  if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + ' ms';
  if (n >= 1e3) return (n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + ' us';
  return n + ' ns';
}
