// loader.js: the bookkeeping of the viewer's progressive loading. A window
// is known first as its generations' listing (start, end, events, bytes per
// generation, from /v1/agents/{session}/generations): that is the overview,
// drawn at once for any window length. Details (regions, marks, counters)
// come one generation at a time (/v1/agents/{session}/generations/{gen}
// ?format=chrome) for the generations in view, and only when the view holds
// few enough bytes to decode; decoded generations live in an LRU bounded by
// their JSON size. Pure: no DOM and no fetch, importable in Node
// (tests/dashboard/loader.test.mjs); window.js does the I/O.
//
// Invariants:
//  1. The LRU's byte total MUST stay <= its bound after every set(), except
//     for entries pinned by the current view (a single view never holds more
//     than VIEW_BUDGET events, about a third of the bound), otherwise a long session
//     of zooming grows the tab without limit.
//  2. plan() MUST return no generation to fetch when the view holds more
//     than its budget: the overview is what such a view shows.
'use strict';

// Events of the generations in view above which the view shows only the
// overview: decoding costs per event (about 70 bytes of Chrome JSON each,
// 14x the native size), and 400k events parse in about a second and draw
// in a frame. That is a few seconds of a busy service.
export const VIEW_BUDGET = 400000;
// Chrome JSON bytes of decoded generations kept for zooming back and forth
// (the models take about as much heap again).
export const CACHE_BYTES = 96 << 20;
// Generation downloads in flight at once.
export const MAX_INFLIGHT = 2;

// A least-recently-used map with a byte bound (invariant 1).
export class LRU {
  constructor(maxBytes) {
    this.max = maxBytes;
    this.bytes = 0;
    this.map = new Map(); // insertion order = recency order
  }
  get size() {
    return this.map.size;
  }
  has(k) {
    return this.map.has(k);
  }
  get(k) {
    const e = this.map.get(k);
    if (!e) return undefined;
    this.map.delete(k);
    this.map.set(k, e);
    return e.v;
  }
  // Adds (or replaces) k; evicts the least recently used entries not in
  // `pinned` (a Set of keys) until the total fits. Returns the evicted keys.
  set(k, v, bytes, pinned) {
    const old = this.map.get(k);
    if (old) {
      this.bytes -= old.n;
      this.map.delete(k);
    }
    this.map.set(k, { v, n: bytes });
    this.bytes += bytes;
    const evicted = [];
    for (const [key, e] of this.map) {
      if (this.bytes <= this.max) break;
      if (key === k || (pinned && pinned.has(key))) continue;
      this.map.delete(key);
      this.bytes -= e.n;
      evicted.push(key);
    }
    return evicted;
  }
  keys() {
    return [...this.map.keys()];
  }
}

// One generation of the listing as the loader sees it: times in µs from
// the window's t0 (a BigInt of unix ns), and a key unique in the window.
export function genEntry(session, g, t0) {
  const s = Number((BigInt(g.start_ns) - t0) / 1000n);
  const e = Number((BigInt(g.end_ns) - t0) / 1000n);
  return {
    key: `${session}/${g.gen}`, session, gen: g.gen, s, e: Math.max(e, s),
    events: Number(g.events) || 0, bytes: Number(g.bytes) || 0, lost: Number(g.lost) || 0,
  };
}

// The generations of `gens` (sorted by start) that overlap [v0, v1].
export function inView(gens, v0, v1) {
  const out = [];
  for (const g of gens) if (g.e >= v0 && g.s <= v1) out.push(g);
  return out;
}

// What the view [v0, v1] needs: `detail` is false when its generations hold
// more than `budget` events (invariant 2); `fetch` are those neither
// cached nor in flight, nearest the view's centre first (what the eye is
// on arrives first); `ready` those already cached.
export function plan(gens, v0, v1, budget, cached, inflight) {
  const vis = inView(gens, v0, v1);
  let events = 0, bytes = 0;
  for (const g of vis) {
    events += g.events;
    bytes += g.bytes;
  }
  if (events > budget) return { detail: false, events, bytes, visible: vis, fetch: [], ready: [] };
  const mid = (v0 + v1) / 2;
  const fetch = vis.filter((g) => !cached.has(g.key) && !inflight.has(g.key));
  fetch.sort((a, b) => Math.abs((a.s + a.e) / 2 - mid) - Math.abs((b.s + b.e) / 2 - mid));
  const ready = vis.filter((g) => cached.has(g.key));
  return { detail: true, events, bytes, visible: vis, fetch, ready };
}

// The overview of one session: per generation its event rate relative to
// the busiest generation of the window (0..1), for the density bars.
export function density(gens) {
  let max = 0;
  const rate = (g) => g.events / Math.max(1, g.e - g.s);
  for (const g of gens) max = Math.max(max, rate(g));
  return gens.map((g) => ({ s: g.s, e: g.e, d: max > 0 ? rate(g) / max : 0, lost: g.lost, key: g.key }));
}
