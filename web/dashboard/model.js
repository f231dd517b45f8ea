// model.js: the trace model of the dashboard's viewer, built from the
// Chrome JSON the daemon exports (format=chrome): per process (one synthetic
// pid per session) its threads, each with its regions as nested slices (B/E
// matched per thread, one row per depth) and its marks (instants, logs, lost
// markers); its async tasks (b/e) packed into rows; its counters (C) as
// series. Times are microseconds from the window start, as in the JSON.
// Pure: no DOM, importable in Node (tests/dashboard/model.test.mjs).
//
// Invariant 1 (viewer.js): the slices of one row MUST be sorted by start and
// not overlap, so the ends are sorted too and a binary search on the end
// finds the first visible one.
'use strict';

export const MAX_TASK_ROWS = 8;

export function buildModel(doc) {
  const evs = Array.isArray(doc && doc.traceEvents) ? doc.traceEvents : [];
  const procs = new Map();
  const proc = (pid) => {
    let p = procs.get(pid);
    if (!p) {
      p = { pid, name: 'process ' + pid, threads: new Map(), counters: new Map(), tasks: [], marks: [] };
      procs.set(pid, p);
    }
    return p;
  };
  const thread = (p, tid) => {
    let t = p.threads.get(tid);
    if (!t) {
      t = { tid, name: '', rows: [], marks: [], stack: [], events: [] };
      p.threads.set(tid, t);
    }
    return t;
  };

  let extent = 0;
  const openTasks = new Map();
  const taskEvents = [];
  for (const e of evs) {
    if (!e || typeof e !== 'object') continue;
    const ts = typeof e.ts === 'number' && Number.isFinite(e.ts) ? e.ts : null;
    if (ts !== null && ts > extent) extent = ts;
    const p = proc(e.pid | 0);
    switch (e.ph) {
      case 'M':
        if (e.name === 'process_name' && e.args) p.name = String(e.args.name);
        else if (e.name === 'thread_name' && e.args) thread(p, e.tid | 0).name = String(e.args.name);
        break;
      case 'B':
      case 'E':
      case 'i':
      case 'I':
        if (ts === null) break;
        // Process-scoped instants (the ledger's lost counts) go on the
        // process lane; the rest on their thread.
        if ((e.ph === 'i' || e.ph === 'I') && (e.s === 'p' || e.s === 'g')) p.marks.push(mark(e, ts));
        else thread(p, e.tid | 0).events.push(e);
        break;
      case 'C': {
        if (ts === null || !e.args) break;
        for (const [k, v] of Object.entries(e.args)) {
          const name = k === 'value' ? String(e.name) : `${e.name}.${k}`;
          let c = p.counters.get(name);
          if (!c) p.counters.set(name, (c = { name, ts: [], v: [], min: Infinity, max: -Infinity }));
          const x = Number(v);
          if (!Number.isFinite(x)) continue;
          c.ts.push(ts);
          c.v.push(x);
          if (x < c.min) c.min = x;
          if (x > c.max) c.max = x;
        }
        break;
      }
      case 'b':
      case 'e':
        if (ts !== null) taskEvents.push(e);
        break;
      default:
        break;
    }
  }
  // The file is ordered per batch (one thread at a time), not globally: a
  // task ended by another thread can appear before its begin, so tasks are
  // matched in time order. The sort is stable, so a b and e at the same
  // time keep their file order.
  taskEvents.sort((a, b) => a.ts - b.ts);
  for (const e of taskEvents) {
    const p = proc(e.pid | 0);
    const key = `${e.pid}|${e.cat || ''}|${e.id}`;
    if (e.ph === 'b') {
      openTasks.set(key, { name: String(e.name), s: e.ts, e: null, args: e.args, id: e.id, p });
    } else {
      const t = openTasks.get(key);
      if (t) {
        openTasks.delete(key);
        t.e = e.ts;
        if (e.args) t.endArgs = e.args;
        p.tasks.push(t);
      }
    }
  }
  if (doc && doc.metadata && doc.metadata.gentrace_end_ns && doc.metadata.gentrace_start_ns) {
    try {
      const span = Number((BigInt(doc.metadata.gentrace_end_ns) - BigInt(doc.metadata.gentrace_start_ns)) / 1000n);
      if (span > extent) extent = span;
    } catch (_) {
      // Malformed metadata: the events' own extent will do.
    }
  }
  // Tasks still open at the end of the window run to its edge.
  for (const t of openTasks.values()) {
    t.e = extent;
    t.open = true;
    t.p.tasks.push(t);
  }

  for (const p of procs.values()) {
    for (const t of p.threads.values()) {
      buildThread(t, extent);
      delete t.events;
      delete t.stack;
    }
    p.marks.sort((a, b) => a.ts - b.ts);
    for (const c of p.counters.values()) sortSeries(c);
    p.taskRows = packTasks(p.tasks);
    delete p.tasks;
  }
  let startNs = null;
  try {
    if (doc && doc.metadata && doc.metadata.gentrace_start_ns) startNs = BigInt(doc.metadata.gentrace_start_ns);
  } catch (_) {
    startNs = null;
  }
  return { procs, extent: Math.max(extent, 1), startNs, events: evs.length };
}

// A counter written by several threads (latency per request) arrives in
// batch order; drawing and lookup need it in time order.
function sortSeries(c) {
  const q = [...c.v].sort((a, b) => a - b);
  c.p99 = q.length ? q[Math.min(q.length - 1, Math.floor(q.length * 0.99))] : 0;
  let sorted = true;
  for (let i = 1; i < c.ts.length && sorted; i++) sorted = c.ts[i] >= c.ts[i - 1];
  if (sorted) return;
  const idx = c.ts.map((_, i) => i).sort((a, b) => c.ts[a] - c.ts[b] || a - b);
  c.ts = idx.map((i) => c.ts[i]);
  c.v = idx.map((i) => c.v[i]);
}

function mark(e, ts) {
  let kind = 'instant';
  if (e.name === 'gentrace.lost') kind = 'lost';
  else if (e.args && typeof e.args.message === 'string') kind = 'log';
  return { ts, name: String(e.name), kind, args: e.args };
}

// Matches B/E per thread into nested slices (invariant 1: each row fills
// in time order because a row's slices close in the order they opened).
function buildThread(t, extent) {
  const evs = t.events;
  let sorted = true;
  for (let i = 1; i < evs.length; i++)
    if (evs[i].ts < evs[i - 1].ts) {
      sorted = false;
      break;
    }
  if (!sorted) evs.sort((a, b) => a.ts - b.ts); // stable: B/E order at equal ts kept
  const stack = [];
  const close = (end, endArgs) => {
    const o = stack.pop();
    const depth = stack.length;
    while (t.rows.length <= depth) t.rows.push([]);
    t.rows[depth].push({ name: o.name, s: o.s, e: Math.max(end, o.s), depth, args: o.args, endArgs });
  };
  for (const e of evs) {
    if (e.ph === 'B') stack.push({ name: String(e.name), s: e.ts, args: e.args });
    else if (e.ph === 'E') {
      if (stack.length) close(e.ts, e.args); // an E with no B began before the window
    } else t.marks.push(mark(e, e.ts));
  }
  while (stack.length) close(extent, { 'gentrace.closed_at_window_end': true });
  for (const r of t.rows) r.sort((a, b) => a.s - b.s);
  t.marks.sort((a, b) => a.ts - b.ts);
}

function packTasks(tasks) {
  tasks.sort((a, b) => a.s - b.s);
  const rows = [];
  const ends = [];
  for (const t of tasks) {
    let r = ends.findIndex((end) => end <= t.s);
    if (r < 0) {
      if (rows.length < MAX_TASK_ROWS) {
        rows.push([]);
        ends.push(0);
        r = rows.length - 1;
      } else {
        // Too many at once to show apart: the last row takes the rest,
        // drawn over each other (hover still finds the latest).
        r = MAX_TASK_ROWS - 1;
      }
    }
    rows[r].push(t);
    ends[r] = Math.max(ends[r], t.e);
  }
  // The overflow row may now overlap; keep it sorted by end for the search.
  for (const r of rows) r.sort((a, b) => a.s - b.s);
  return rows;
}

