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

// The upper bound of the histogram bucket starting at lo (ns, BigInt) in
// the summary's scheme (docs/SEARCH.md): [0, 1 us), then per power of two
// of microseconds [2^k, 1.5*2^k) and [1.5*2^k, 2^(k+1)); null past it.
export function bucketHi(lo) {
  if (lo === 0n) return 1000n;
  if (lo % 1000n !== 0n) return null;
  const us = lo / 1000n;
  for (let k = 0n; k < 34n; k++) {
    const p = 1n << k;
    if (us === p) return k === 0n ? 2000n : (p * 3n / 2n) * 1000n;
    if (k > 0n && us === (p * 3n) / 2n) return p * 2n * 1000n;
  }
  return null;
}

// The bars of a histogram on its log axis: the non-empty buckets the API
// lists (histBars) with the empty buckets between them filled in as bars of
// count 0, so the shape reads true (a gap is a gap).
export function histSlots(buckets) {
  const bars = histBars(buckets);
  const out = [];
  for (let i = 0; i < bars.length; i++) {
    out.push(bars[i]);
    const next = bars[i + 1];
    let hi = bars[i].hi;
    for (let n = 0; next && hi !== null && hi < next.lo && n < 70; n++) {
      const h2 = bucketHi(hi);
      if (h2 === null || h2 > next.lo) break;
      out.push({ lo: hi, hi: h2, count: 0, frac: 0 });
      hi = h2;
    }
  }
  return out;
}

// The index of the bar a bucket search (bucketQuery) asked for, or -1:
// f.min is its lower bound, f.max its upper bound less one (in ns).
export function selectedBar(bars, f) {
  const m = /^(\d+)ns$/.exec(f.min || '');
  if (!m) return -1;
  const mx = /^(\d+)ns$/.exec(f.max || '');
  const lo = BigInt(m[1]);
  return bars.findIndex((b) => b.lo === lo && (b.hi === null ? !mx : mx && b.hi - 1n === BigInt(mx[1])));
}
