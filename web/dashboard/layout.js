// layout.js: where the viewer puts things: lane geometry (one lane per
// process header, thread, task group and counter), ruler ticks and their
// labels, colours by name, and the searches drawing uses. Pure: no DOM,
// importable in Node (tests/dashboard/layout.test.mjs).
'use strict';

import { fmtDur } from './fmt.js';

export const ROW_H = 18; // one region depth
export const MARK_H = 12; // the instants/logs row at the top of a thread lane
export const LANE_PAD = 4;
export const PROC_H = 28; // the session header: name, lost marks, overview density
export const COUNTER_H = 36;
export const RULER_H = 24;
export const MIN_SPAN = 0.05; // µs: 50 ns, below the clock's resolution anyway

// Lanes, top to bottom: per process a header, its threads (by name, then
// tid), its tasks, its counters.
export function layout(model) {
  const lanes = [];
  let y = 0;
  // Procs by their number (a session's order in the window when loaded
  // progressively, its synthetic pid otherwise).
  const procs = [...model.procs.values()].sort((a, b) => a.pid - b.pid);
  for (const p of procs) {
    lanes.push({ kind: 'proc', label: p.name, proc: p, y, h: PROC_H });
    y += PROC_H;
    const threads = [...p.threads.values()].sort((a, b) =>
      (a.name || '~').localeCompare(b.name || '~', undefined, { numeric: true }) || a.tid - b.tid);
    for (const t of threads) {
      if (!t.rows.length && !t.marks.length && !t.known) continue;
      const hh = MARK_H + Math.max(1, t.rows.length) * ROW_H + LANE_PAD;
      lanes.push({ kind: 'thread', label: t.name || `thread ${t.tid}`, sub: `tid ${t.tid}`, proc: p, thread: t, y, h: hh });
      y += hh;
    }
    if (p.taskRows.length) {
      const hh = p.taskRows.length * ROW_H + LANE_PAD;
      lanes.push({ kind: 'tasks', label: 'tasks', proc: p, rows: p.taskRows, y, h: hh });
      y += hh;
    }
    const counters = [...p.counters.values()].sort((a, b) => a.name.localeCompare(b.name));
    for (const c of counters) {
      lanes.push({ kind: 'counter', label: c.name, proc: p, counter: c, y, h: COUNTER_H });
      y += COUNTER_H;
    }
  }
  return { lanes, height: y };
}

// Region and task colours: a stable hash of the name picks one of a fixed
// palette of light, mutually distinct colours (a name keeps its colour
// across windows, reloads and browsers; dark text stays readable on all).
export const PALETTE = [
  '#8ec5ff', '#ffb38a', '#9ee0a1', '#f5a3c7', '#c6b3ff', '#ffd86e',
  '#83ddd6', '#e7b98f', '#b5d77a', '#f0a6a6', '#a9c1e8', '#d9b3e6',
];
export function hashName(name) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) {
    x ^= name.charCodeAt(i);
    x = Math.imul(x, 16777619);
  }
  // Final avalanche so names differing in the last letter spread out.
  x ^= x >>> 15;
  x = Math.imul(x, 0x2c1b3c6d);
  x ^= x >>> 12;
  return x >>> 0;
}
export function colorOf(name) {
  return PALETTE[hashName(String(name)) % PALETTE.length];
}

// The label to draw in `width` px: the text if it fits, else the longest
// prefix with '…' that fits, else '' (nothing is drawn rather than a label
// spilling into its neighbour). `measure(text)` gives a width in px
// (ctx.measureText in the page, a fixed advance in tests).
export function fitLabel(text, width, measure) {
  if (width <= 0 || !text) return '';
  if (measure(text) <= width) return text;
  if (measure('…') > width) return '';
  let lo = 0, hi = text.length - 1; // longest prefix p with measure(p + '…') <= width
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure(text.slice(0, mid) + '…') <= width) lo = mid;
    else hi = mid - 1;
  }
  return lo > 0 ? text.slice(0, lo) + '…' : '';
}

// First index i in arr (sorted by key) with key(arr[i]) >= x.
export function lowerBound(arr, x, key) {
  let lo = 0, hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (key(arr[mid]) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function niceTick(us) {
  const steps = [0.1, 0.2, 0.5];
  let m = 1;
  for (;;) {
    for (const s of steps) if (s * m >= us) return s * m;
    m *= 10;
    if (m > 1e12) return us;
  }
}

export function fmtRel(us) {
  return fmtDur(us / 1000);
}

// A ruler label: the offset from the window start with as many digits as
// the tick step needs, so neighbouring ticks never read the same.
export function fmtTick(us, step) {
  const digits = (unit) => Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / unit) - 1e-9)));
  if (step >= 1e5) return (us / 1e6).toFixed(digits(1e6)) + ' s';
  if (step >= 100) return (us / 1e3).toFixed(digits(1e3)) + ' ms';
  return us.toFixed(digits(1)) + ' µs';
}

export function argsText(args) {
  if (!args || typeof args !== 'object') return '';
  const out = [];
  for (const [k, v] of Object.entries(args)) {
    let s = typeof v === 'string' ? v : JSON.stringify(v);
    if (s.length > 300) s = s.slice(0, 300) + '…';
    out.push(`${k}: ${s}`);
  }
  return out.join('\n');
}


// The two ends of a task in the lanes: where it began (its begin thread's
// lane at its start) and where it ended (its end thread's lane at its end),
// each null when that thread is not known (the half in an unloaded
// generation, or a task still open) or has no lane. `proc` is the lanes'
// process the task belongs to (the tasks lane's proc).
export function taskEnds(task, proc, lanes) {
  const laneOf = (tid) => (tid === null || tid === undefined ? null
    : lanes.find((l) => l.kind === 'thread' && l.proc === proc && l.thread.tid === tid) || null);
  const a = laneOf(task.bt), b = task.open ? null : laneOf(task.et);
  return {
    from: a && { lane: a, t: task.s },
    to: b && { lane: b, t: task.e },
    crossThread: task.bt !== null && task.et !== null && task.bt !== task.et,
  };
}
