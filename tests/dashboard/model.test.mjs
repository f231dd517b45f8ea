// model.test.mjs: web/dashboard/model.js in Node (node --test), no browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildModel, MAX_TASK_ROWS } from '../../web/dashboard/model.js';

const doc = (events) => ({ traceEvents: events, metadata: { gentrace_start_ns: '1000000000' } });
const meta = [
  { name: 'process_name', ph: 'M', pid: 1, tid: 0, args: { name: 'svc (host 42)' } },
  { name: 'thread_name', ph: 'M', pid: 1, tid: 7, args: { name: 'worker' } },
];

test('regions nest per thread into one row per depth, sorted (invariant 1)', () => {
  const m = buildModel(doc([
    ...meta,
    { name: 'outer', ph: 'B', pid: 1, tid: 7, ts: 10 },
    { name: 'inner', ph: 'B', pid: 1, tid: 7, ts: 12 },
    { name: 'inner', ph: 'E', pid: 1, tid: 7, ts: 15 },
    { name: 'inner2', ph: 'B', pid: 1, tid: 7, ts: 16 },
    { name: 'inner2', ph: 'E', pid: 1, tid: 7, ts: 18 },
    { name: 'outer', ph: 'E', pid: 1, tid: 7, ts: 20 },
  ]));
  const t = m.procs.get(1).threads.get(7);
  assert.equal(t.name, 'worker');
  assert.equal(t.rows.length, 2);
  assert.deepEqual(t.rows[0].map((s) => [s.name, s.s, s.e]), [['outer', 10, 20]]);
  assert.deepEqual(t.rows[1].map((s) => [s.name, s.s, s.e]), [['inner', 12, 15], ['inner2', 16, 18]]);
  for (const row of t.rows)
    for (let i = 1; i < row.length; i++) assert.ok(row[i].s >= row[i - 1].e);
});

test('a region still open at the end is closed at the window end and says so', () => {
  const m = buildModel(doc([...meta, { name: 'open', ph: 'B', pid: 1, tid: 7, ts: 5 },
    { name: 'x', ph: 'i', pid: 1, tid: 7, ts: 30, s: 't' }]));
  const s = m.procs.get(1).threads.get(7).rows[0][0];
  assert.equal(s.e, m.extent);
  assert.equal(s.endArgs['gentrace.closed_at_window_end'], true);
});

test('events out of time order are sorted before B/E matching', () => {
  const m = buildModel(doc([...meta,
    { name: 'a', ph: 'E', pid: 1, tid: 7, ts: 9 },
    { name: 'a', ph: 'B', pid: 1, tid: 7, ts: 3 }]));
  assert.deepEqual(m.procs.get(1).threads.get(7).rows[0].map((s) => [s.s, s.e]), [[3, 9]]);
});

test('marks: instants, logs and lost markers are told apart', () => {
  const m = buildModel(doc([...meta,
    { name: 'tick', ph: 'i', pid: 1, tid: 7, ts: 1, s: 't' },
    { name: 'db', ph: 'i', pid: 1, tid: 7, ts: 2, s: 't', args: { message: 'slow query' } },
    { name: 'gentrace.lost', ph: 'i', pid: 1, tid: 0, ts: 3, s: 'p', args: { count: 4 } }]));
  const kinds = m.procs.get(1).threads.get(7).marks.map((k) => k.kind);
  assert.deepEqual(kinds, ['instant', 'log']);
});

test('tasks overlapping in time go to separate rows, at most MAX_TASK_ROWS', () => {
  const evs = [...meta];
  for (let i = 0; i < MAX_TASK_ROWS + 3; i++) {
    evs.push({ name: 'req', cat: 'task', ph: 'b', id: i + 1, pid: 1, tid: 7, ts: 10 + i });
    evs.push({ name: 'req', cat: 'task', ph: 'e', id: i + 1, pid: 1, tid: 7, ts: 100 });
  }
  const m = buildModel(doc(evs));
  const rows = m.procs.get(1).taskRows;
  assert.equal(rows.length, MAX_TASK_ROWS);
  assert.equal(rows.reduce((n, r) => n + r.length, 0), MAX_TASK_ROWS + 3);
});

test('counters become time-ordered series even when written out of order', () => {
  const m = buildModel(doc([...meta,
    { name: 'q', ph: 'C', pid: 1, tid: 7, ts: 5, args: { value: 2 } },
    { name: 'q', ph: 'C', pid: 1, tid: 8, ts: 1, args: { value: 9 } }]));
  const c = m.procs.get(1).counters.get('q');
  assert.deepEqual(c.ts, [1, 5]);
  assert.deepEqual(c.v, [9, 2]);
});

test('hostile input: not an object, no traceEvents, junk entries', () => {
  for (const d of [null, 42, {}, { traceEvents: 'x' }, { traceEvents: [null, 7, { ph: 'B' }] }]) {
    const m = buildModel(d);
    assert.ok(m.extent >= 1);
  }
});
