// layout.js: where the viewer puts things: lane geometry (one lane per
// process header, thread, task group and counter), ruler ticks and their
// labels, colours by name, and the searches drawing uses. Pure: no DOM,
// importable in Node (tests/dashboard/layout.test.mjs).
'use strict';

import { fmtDur } from './fmt.js';

export const ROW_H = 18; // one region depth
export const MARK_H = 12; // the instants/logs row at the top of a thread lane
export const LANE_PAD = 4;
export const PROC_H = 22;
export const COUNTER_H = 36;
export const RULER_H = 24;
export const MIN_SPAN = 0.05; // µs: 50 ns, below the clock's resolution anyway

// Lanes, top to bottom: per process a header, its threads (by name, then
// tid), its tasks, its counters.
export function layout(model) {
  const lanes = [];
  let y = 0;
  const pids = [...model.procs.keys()].sort((a, b) => a - b);
  for (const pid of pids) {
    const p = model.procs.get(pid);
    lanes.push({ kind: 'proc', label: p.name, proc: p, y, h: PROC_H });
    y += PROC_H;
    const threads = [...p.threads.values()].sort((a, b) =>
      (a.name || '~').localeCompare(b.name || '~', undefined, { numeric: true }) || a.tid - b.tid);
    for (const t of threads) {
      if (!t.rows.length && !t.marks.length) continue;
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

export function colorOf(name) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) {
    x ^= name.charCodeAt(i);
    x = Math.imul(x, 16777619);
  }
  const hue = (x >>> 0) % 360;
  return `hsl(${hue}, 55%, 74%)`;
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

