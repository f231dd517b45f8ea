// loader.test.mjs: web/dashboard/loader.js (progressive loading bookkeeping)
// and model.js mergeModels in Node (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LRU, genEntry, inView, plan, density } from '../../web/dashboard/loader.js';
import { buildModel, mergeModels, shiftModel } from '../../web/dashboard/model.js';
import { layout } from '../../web/dashboard/layout.js';

test('LRU: evicts least recently used first and keeps its byte bound', () => {
  const c = new LRU(100);
  c.set('a', 1, 40);
  c.set('b', 2, 40);
  assert.equal(c.get('a'), 1); // a is now the most recent
  const ev = c.set('c', 3, 40);
  assert.deepEqual(ev, ['b']);
  assert.deepEqual(c.keys(), ['a', 'c']);
  assert.equal(c.bytes, 80);
  // Replacing an entry re-counts its bytes.
  c.set('a', 9, 10);
  assert.equal(c.bytes, 50);
  assert.equal(c.get('a'), 9);
  // One entry bigger than the bound evicts everything else but stays.
  assert.deepEqual(c.set('big', 0, 500), ['c', 'a']);
  assert.equal(c.size, 1);
  assert.equal(c.get('zzz'), undefined);
});

test('LRU: pinned entries survive eviction; the bound holds again once unpinned', () => {
  const c = new LRU(100);
  c.set('v1', 1, 60);
  c.set('v2', 2, 30);
  const pinned = new Set(['v1', 'v2']);
  assert.deepEqual(c.set('v3', 3, 50, pinned), []);
  assert.equal(c.bytes, 140);
  assert.deepEqual(c.set('x', 4, 1, new Set(['v3'])), ['v1']);
  assert.ok(c.bytes <= 100);
  // A long run of zooming never grows past the bound.
  for (let i = 0; i < 1000; i++) {
    c.set('k' + i, i, 7 + (i % 13));
    assert.ok(c.bytes <= 100);
  }
});

const T0 = 1700000000000000000n;
const listing = (n, bytes = 1000, ms = 500) => Array.from({ length: n }, (_, i) => genEntry('s1', {
  gen: i + 1, start_ns: String(T0 + BigInt(i * ms) * 1000000n), end_ns: String(T0 + BigInt((i + 1) * ms) * 1000000n),
  events: (i + 1) * 10, bytes, lost: i === 2 ? 5 : 0,
}, T0));

test('genEntry: µs from t0, a key per session and generation', () => {
  const g = listing(3)[1];
  assert.deepEqual([g.key, g.gen, g.s, g.e, g.events, g.bytes], ['s1/2', 2, 500000, 1000000, 20, 1000]);
});

test('plan: overview only above the byte budget, nothing to fetch', () => {
  const gens = listing(1200); // 10 minutes of half-second generations
  const none = new Set();
  const p = plan(gens, 0, 600e6, 50000, none, none);
  assert.equal(p.detail, false);
  assert.equal(p.fetch.length, 0);
  assert.equal(p.visible.length, 1200);
  assert.equal(p.bytes, 1200000);
  assert.equal(p.events, 10 * 1200 * 1201 / 2);
});

test('plan: under the budget fetches the generations in view, centre first, skipping cached and in flight', () => {
  const gens = listing(1200);
  const cached = new Set(['s1/101']), inflight = new Set(['s1/102']);
  const p = plan(gens, 49.9e6, 52.1e6, 50000, cached, inflight); // gens 100..105 overlap, 6k events
  assert.equal(p.detail, true);
  assert.deepEqual(p.visible.map((g) => g.gen), [100, 101, 102, 103, 104, 105]);
  assert.deepEqual(p.ready.map((g) => g.gen), [101]);
  assert.deepEqual(p.fetch.map((g) => g.gen).slice(0, 2), [103, 104]);
  assert.deepEqual(p.fetch.map((g) => g.gen).sort((a, b) => a - b), [100, 103, 104, 105]);
  assert.deepEqual(inView(gens, 0, 0).map((g) => g.gen), [1]);
});

test('density: relative event rate per generation, 1 for the busiest', () => {
  const d = density(listing(4));
  assert.deepEqual(d.map((b) => b.d), [0.25, 0.5, 0.75, 1]);
  assert.equal(d[2].lost, 5);
  assert.deepEqual(density([]), []);
});

// One generation's Chrome JSON as the daemon writes it: ts from its start.
const genDoc = (startNs, evs) => ({
  traceEvents: [
    { name: 'process_name', ph: 'M', pid: 1, args: { name: 'svc (h pid 7)' } },
    { name: 'thread_name', ph: 'M', pid: 1, tid: 9, args: { name: 'worker-1' } },
    ...evs,
  ],
  metadata: { gentrace_start_ns: String(startNs), gentrace_end_ns: String(startNs + 1000000n) },
});

test('mergeModels: generations side by side in time, lanes stay when a generation is evicted', () => {
  const a = buildModel(genDoc(T0, [
    { name: 'request', ph: 'B', pid: 1, tid: 9, ts: 10 }, { name: 'request', ph: 'E', pid: 1, tid: 9, ts: 20 },
    { name: 'n', ph: 'C', pid: 1, tid: 9, ts: 5, args: { value: 3 } },
    { name: 'job', ph: 'b', pid: 1, tid: 9, ts: 1, id: 1, cat: 't' }, { name: 'job', ph: 'e', pid: 1, tid: 9, ts: 2, id: 1, cat: 't' },
  ]));
  const b = buildModel(genDoc(T0 + 1000000n, [
    { name: 'request', ph: 'B', pid: 1, tid: 9, ts: 1 }, { name: 'db.query', ph: 'B', pid: 1, tid: 9, ts: 2 },
    { name: 'db.query', ph: 'E', pid: 1, tid: 9, ts: 3 }, { name: 'request', ph: 'E', pid: 1, tid: 9, ts: 4 },
    { name: 'n', ph: 'C', pid: 1, tid: 9, ts: 1, args: { value: 8 } },
  ]));
  const known = new Map();
  const skel = [{ key: 's1', order: 1, name: 'session s1' }];
  // Given out of order: merged by offset.
  const m = mergeModels([{ key: 's1/2', proc: 's1', order: 1, model: b, off: 1000 }, { key: 's1/1', proc: 's1', order: 1, model: a, off: 0 }],
    skel, known, 2000, T0);
  const p = m.procs.get('s1');
  assert.equal(p.name, 'svc (h pid 7)');
  const t = p.threads.get(9);
  assert.deepEqual(t.rows[0].map((s) => [s.name, s.s, s.e]), [['request', 10, 20], ['request', 1001, 1004]]);
  assert.deepEqual(t.rows[1].map((s) => [s.name, s.s, s.e]), [['db.query', 1002, 1003]]);
  assert.deepEqual(p.counters.get('n').ts, [5, 1001]);
  assert.equal(p.counters.get('n').max, 8);
  assert.deepEqual(p.taskRows.flat().map((x) => [x.name, x.s, x.e]), [['job', 1, 2]]);
  assert.equal(m.extent, 2000);
  assert.equal(m.events, a.events + b.events);
  // Invariant 1 of model.js holds on the merge.
  for (const row of t.rows) for (let i = 1; i < row.length; i++) assert.ok(row[i].s >= row[i - 1].e);
  // Nothing loaded any more (zoomed out): the session and its thread keep
  // their lanes, with the depth they had.
  const empty = mergeModels([], skel, known, 2000, T0);
  const lanes = layout(empty).lanes.map((l) => `${l.kind}:${l.label}`);
  assert.deepEqual(lanes, ['proc:session s1', 'thread:worker-1']);
  assert.equal(empty.procs.get('s1').threads.get(9).rows.length, 2);
  // The originals are not modified (they stay cached for the next merge).
  assert.equal(b.procs.get(1).threads.get(9).rows[0][0].s, 1);
});

test('shiftModel then merge with off 0: same picture, objects shared, not copied', () => {
  const mk = (t) => buildModel(genDoc(T0 + BigInt(t) * 1000n, [
    { name: 'request', ph: 'B', pid: 1, tid: 9, ts: 1 }, { name: 'request', ph: 'E', pid: 1, tid: 9, ts: 4 },
    { name: 'x', ph: 'i', pid: 1, tid: 9, ts: 2, s: 't' },
    { name: 'n', ph: 'C', pid: 1, tid: 9, ts: 3, args: { value: 1 } },
  ]));
  const a = shiftModel(mk(0), 0), b = shiftModel(mk(1000), 1000);
  const m = mergeModels([{ key: 'b', proc: 's1', order: 1, model: b, off: 0, s: 1000 }, { key: 'a', proc: 's1', order: 1, model: a, off: 0, s: 0 }],
    [], new Map(), 2000, T0);
  const t = m.procs.get('s1').threads.get(9);
  assert.deepEqual(t.rows[0].map((x) => [x.s, x.e]), [[1, 4], [1001, 1004]]);
  assert.equal(t.rows[0][1], b.procs.get(1).threads.get(9).rows[0][0]);
  assert.deepEqual(t.marks.map((x) => x.ts), [2, 1002]);
  assert.deepEqual(m.procs.get('s1').counters.get('n').ts, [3, 1003]);
});
