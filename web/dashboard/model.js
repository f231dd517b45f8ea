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
      // bt: the thread that began it, unknown (null) for the synthetic
      // begin of a task begun before this document's window.
      const before = !!(e.args && e.args['gentrace.begun_before_window']);
      openTasks.set(key, {
        name: String(e.name), s: e.ts, e: null, args: e.args, id: e.id, p,
        bt: before ? null : e.tid | 0, et: null, before,
      });
    } else {
      const t = openTasks.get(key);
      if (t) {
        openTasks.delete(key);
        t.e = e.ts;
        if (e.args) t.endArgs = e.args;
        // A task still open at the window end gets a synthetic end (on no
        // thread): it stays open, to be joined with its other half.
        if (e.args && e.args['gentrace.closed_at_window_end']) t.open = true;
        else t.et = e.tid | 0;
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
export function sortSeries(c) {
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

export function packTasks(tasks) {
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


// The model of several generations loaded one by one (loader.js), as one
// model the viewer draws. `chunks`: [{ key, proc, order, model, off }] where
// `proc` names the session (its lanes stay together across generations),
// `model` is buildModel() of that generation's Chrome JSON and `off` the
// µs from the window's start to the generation's ts 0 (0 once shiftModel
// moved it; then `s`, its start, orders the chunks). `skeleton`: the
// procs to show even with nothing loaded ([{ key, order, name }]), and
// `known`: a Map kept across calls of the threads seen so far, so lanes do
// not come and go as generations are loaded and evicted. Chunks of one
// session never overlap in time (a session's generations follow each
// other), so concatenating their rows in start order keeps invariant 1.
export function mergeModels(chunks, skeleton, known, extent, startNs) {
  const procs = new Map();
  const proc = (key, order, name) => {
    let p = procs.get(key);
    if (!p) {
      p = { pid: order, key, name, threads: new Map(), counters: new Map(), taskRows: [], marks: [], gens: [] };
      procs.set(key, p);
    }
    return p;
  };
  for (const s of skeleton) proc(s.key, s.order, s.name);
  // By start: the listing's start (s) when the chunk is already shifted.
  const at = (c) => (c.s !== undefined ? c.s : c.off);
  const sorted = [...chunks].sort((a, b) => at(a) - at(b));
  const tasks = new Map();
  let events = 0;
  for (const c of sorted) {
    events += c.model.events;
    const p = proc(c.proc, c.order, c.proc);
    const off = c.off;
    for (const cp of c.model.procs.values()) {
      if (!p.named && cp.name && !/^process \d+$/.test(cp.name)) {
        p.name = cp.name;
        p.named = true;
      }
      for (const ct of cp.threads.values()) {
        let t = p.threads.get(ct.tid);
        if (!t) p.threads.set(ct.tid, (t = { tid: ct.tid, name: ct.name, rows: [], marks: [] }));
        if (ct.name) t.name = ct.name;
        ct.rows.forEach((row, d) => {
          while (t.rows.length <= d) t.rows.push([]);
          const dst = t.rows[d];
          if (off === 0) for (const x of row) dst.push(x);
          else for (const x of row) dst.push({ ...x, s: x.s + off, e: x.e + off });
        });
        for (const m of ct.marks) t.marks.push(off === 0 ? m : { ...m, ts: m.ts + off });
      }
      for (const m of cp.marks) p.marks.push(off === 0 ? m : { ...m, ts: m.ts + off });
      for (const cc of cp.counters.values()) {
        let q = p.counters.get(cc.name);
        if (!q) p.counters.set(cc.name, (q = { name: cc.name, ts: [], v: [], min: Infinity, max: -Infinity }));
        for (let i = 0; i < cc.ts.length; i++) {
          q.ts.push(cc.ts[i] + off);
          q.v.push(cc.v[i]);
        }
        q.min = Math.min(q.min, cc.min);
        q.max = Math.max(q.max, cc.max);
      }
      let tl = tasks.get(p);
      if (!tl) tasks.set(p, (tl = []));
      for (const row of cp.taskRows) for (const t of row) tl.push(off === 0 ? t : { ...t, s: t.s + off, e: t.e + off });
    }
  }
  for (const [p, tl] of tasks) tasks.set(p, joinTasks(tl));
  for (const p of procs.values()) {
    // Threads seen before keep their lane (empty now) and their depth.
    let kn = known.get(p.key);
    if (!kn) known.set(p.key, (kn = new Map()));
    for (const t of p.threads.values()) {
      const k = kn.get(t.tid);
      kn.set(t.tid, { name: t.name || (k && k.name) || '', depth: Math.max(t.rows.length, k ? k.depth : 0) });
    }
    for (const [tid, k] of kn) {
      let t = p.threads.get(tid);
      if (!t) p.threads.set(tid, (t = { tid, name: k.name, rows: [], marks: [] }));
      if (!t.name) t.name = k.name;
      while (t.rows.length < k.depth) t.rows.push([]);
      t.known = true;
    }
    for (const c of p.counters.values()) sortSeries(c);
    p.taskRows = packTasks(tasks.get(p) || []);
  }
  return { procs, extent: Math.max(extent, 1), startNs, events };
}

// Joins the halves of tasks that cross a generation edge: in one
// generation's document a task begun there and still open is closed at its
// end (open, no end thread); in the next one the same task id begins at the
// start (before, no begin thread). Halves are joined in time order into a
// new object (the halves belong to cached models and stay as they are), so
// one task of the merged model knows both its begin and its end thread.
// `tl`: the tasks of one session, any order. Returns the joined list.
export function joinTasks(tl) {
  const sorted = [...tl].sort((a, b) => a.s - b.s);
  const open = new Map(); // id -> index in out of an open half
  const out = [];
  for (const t of sorted) {
    const i = t.before ? open.get(t.id) : undefined;
    if (i !== undefined) {
      const a = out[i];
      open.delete(t.id);
      out[i] = {
        ...a, e: Math.max(t.e, a.s), et: t.et, open: !!t.open, endArgs: t.endArgs,
        name: a.name || t.name, joined: true,
      };
      if (t.open) open.set(t.id, i);
      continue;
    }
    out.push(t);
    if (t.open) open.set(t.id, out.length - 1);
  }
  return out;
}

// Moves a model's times by `off` µs in place (a generation decoded once is
// shifted once to the window's time base, so merging it again and again
// copies nothing: mergeModels with off 0 shares the objects).
export function shiftModel(m, off) {
  if (!off) return m;
  for (const p of m.procs.values()) {
    for (const t of p.threads.values()) {
      for (const row of t.rows)
        for (const x of row) {
          x.s += off;
          x.e += off;
        }
      for (const x of t.marks) x.ts += off;
    }
    for (const x of p.marks) x.ts += off;
    for (const c of p.counters.values()) for (let i = 0; i < c.ts.length; i++) c.ts[i] += off;
    for (const row of p.taskRows)
      for (const x of row) {
        x.s += off;
        x.e += off;
      }
  }
  m.extent += off;
  return m;
}
