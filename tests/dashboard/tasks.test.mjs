// tasks.test.mjs: tasks linked across threads and generations
// (web/dashboard/model.js joinTasks/mergeModels, layout.js taskEnds).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildModel, mergeModels, shiftModel, joinTasks } from '../../web/dashboard/model.js';
import { layout, taskEnds } from '../../web/dashboard/layout.js';

const meta = (start) => [
  { name: 'process_name', ph: 'M', pid: 1, tid: 0, args: { name: 'svc (host 42)' } },
  { name: 'thread_name', ph: 'M', pid: 1, tid: 7, args: { name: 'worker' } },
  { name: 'thread_name', ph: 'M', pid: 1, tid: 9, args: { name: 'mailer' } },
  { name: 'r', ph: 'B', pid: 1, tid: 7, ts: 0 }, { name: 'r', ph: 'E', pid: 1, tid: 7, ts: 1 },
  { name: 'r', ph: 'B', pid: 1, tid: 9, ts: 0 }, { name: 'r', ph: 'E', pid: 1, tid: 9, ts: 1 },
].map((e) => ({ ...e }));
const doc = (events, startNs, endNs) => ({
  traceEvents: events,
  metadata: { gentrace_start_ns: String(startNs), gentrace_end_ns: String(endNs) },
});
const tasksOf = (m) => [...m.procs.values()][0].taskRows.flat();

test('a task begun on one thread and ended on another knows both threads', () => {
  // The end comes first in the file (batch order), as the writer emits it.
  const m = buildModel(doc([...meta(),
    { name: 'send', cat: 'task', id: '0x5', ph: 'e', pid: 1, tid: 9, ts: 50 },
    { name: 'send', cat: 'task', id: '0x5', ph: 'b', pid: 1, tid: 7, ts: 10, args: { task: 5 } },
  ], 0, 100000));
  const [t] = tasksOf(m);
  assert.equal(t.bt, 7);
  assert.equal(t.et, 9);
  assert.equal(t.open, undefined);
  const { lanes } = layout(m);
  const p = [...m.procs.values()][0];
  const ends = taskEnds(t, p, lanes);
  assert.equal(ends.from.lane.label, 'worker');
  assert.equal(ends.to.lane.label, 'mailer');
  assert.equal(ends.from.t, 10);
  assert.equal(ends.to.t, 50);
  assert.ok(ends.crossThread);
});

test('a task crossing a generation edge is joined into one with both threads', () => {
  // Generation 1 (0..1 ms): begun on worker, closed at the window end by the
  // writer (synthetic end on no thread). Generation 2 (1..2 ms): a
  // synthetic unnamed begin at its start, ended on the mailer.
  const g1 = buildModel(doc([...meta(),
    { name: 'send', cat: 'task', id: '0x5', ph: 'b', pid: 1, tid: 7, ts: 900, args: { task: 5 } },
    { name: 'send', cat: 'task', id: '0x5', ph: 'e', pid: 1, tid: 0, ts: 1000, args: { 'gentrace.closed_at_window_end': true } },
  ], 1000000000, 1001000000));
  const g2 = buildModel(doc([...meta(),
    { name: '', cat: 'task', id: '0x5', ph: 'b', pid: 1, tid: 9, ts: 0, args: { task: 5, 'gentrace.begun_before_window': true } },
    { name: '', cat: 'task', id: '0x5', ph: 'e', pid: 1, tid: 9, ts: 300 },
  ], 1001000000, 1002000000));
  const [h1] = tasksOf(g1), [h2] = tasksOf(g2);
  assert.equal(h1.open, true);
  assert.equal(h1.et, null);
  assert.equal(h2.before, true);
  assert.equal(h2.bt, null);
  shiftModel(g1, 0);
  shiftModel(g2, 1000);
  const chunks = [
    { key: 's/2', proc: 's', order: 1, model: g2, off: 0, s: 1000 },
    { key: 's/1', proc: 's', order: 1, model: g1, off: 0, s: 0 },
  ];
  const m = mergeModels(chunks, [{ key: 's', order: 1, name: 'svc' }], new Map(), 2000, 1000000000n);
  const all = tasksOf(m);
  assert.equal(all.length, 1, 'the halves are one task');
  const [t] = all;
  assert.deepEqual([t.name, t.s, t.e, t.bt, t.et, t.open, t.joined], ['send', 900, 1300, 7, 9, false, true]);
  // The cached halves are left as they were.
  assert.equal(h1.e, 1000);
  assert.equal(h1.open, true);
  const ends = taskEnds(t, m.procs.get('s'), layout(m).lanes);
  assert.equal(ends.from.lane.label, 'worker');
  assert.equal(ends.to.lane.label, 'mailer');

  // With only the first generation loaded the task stays open, its end
  // unknown, and the link has only its begin.
  const m1 = mergeModels([chunks[1]], [{ key: 's', order: 1, name: 'svc' }], new Map(), 2000, 1000000000n);
  const [o] = tasksOf(m1);
  assert.equal(o.open, true);
  const e1 = taskEnds(o, m1.procs.get('s'), layout(m1).lanes);
  assert.equal(e1.from.lane.label, 'worker');
  assert.equal(e1.to, null);
});

test('joinTasks joins only an open half with a later begun-before half of the same id', () => {
  const a = { id: '0x1', s: 0, e: 10, open: true, bt: 1, et: null, name: 'a' };
  const b = { id: '0x2', s: 10, e: 20, before: true, bt: null, et: 2, name: '' };
  const c = { id: '0x1', s: 10, e: 15, before: true, bt: null, et: 3, name: '' };
  const d = { id: '0x1', s: 30, e: 40, bt: 4, et: 4, name: 'a' }; // id reused later
  const out = joinTasks([d, c, b, a]);
  assert.equal(out.length, 3);
  const j = out.find((t) => t.joined);
  assert.deepEqual([j.s, j.e, j.bt, j.et, j.name], [0, 15, 1, 3, 'a']);
  assert.ok(out.includes(b) && out.includes(d));
  // A task open across three generations: begun, passing through, ended.
  const x1 = { id: '0x9', s: 0, e: 10, open: true, bt: 1, et: null, name: 'x' };
  const x2 = { id: '0x9', s: 10, e: 20, open: true, before: true, bt: null, et: null, name: '' };
  const x3 = { id: '0x9', s: 20, e: 25, before: true, bt: null, et: 6, name: '' };
  const [y] = joinTasks([x3, x1, x2]);
  assert.deepEqual([y.s, y.e, y.bt, y.et, y.open], [0, 25, 1, 6, false]);
});
