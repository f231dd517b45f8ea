// layout.test.mjs: web/dashboard/layout.js and fmt.js in Node (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildModel } from '../../web/dashboard/model.js';
import {
  layout, colorOf, hashName, PALETTE, fitLabel, lowerBound, niceTick, fmtTick, PROC_H, COUNTER_H,
} from '../../web/dashboard/layout.js';
import { fmtDur, fmtBytes, fmtCount } from '../../web/dashboard/fmt.js';

const model = buildModel({
  traceEvents: [
    { name: 'thread_name', ph: 'M', pid: 2, tid: 3, args: { name: 'worker-10' } },
    { name: 'thread_name', ph: 'M', pid: 2, tid: 4, args: { name: 'worker-9' } },
    { name: 'a', ph: 'B', pid: 2, tid: 3, ts: 1 }, { name: 'a', ph: 'E', pid: 2, tid: 3, ts: 2 },
    { name: 'b', ph: 'i', pid: 2, tid: 4, ts: 1, s: 't' },
    { name: 'z', ph: 'C', pid: 2, tid: 4, ts: 1, args: { value: 1 } },
    { name: 'a', ph: 'B', pid: 1, tid: 5, ts: 1 }, { name: 'a', ph: 'E', pid: 1, tid: 5, ts: 2 },
  ],
});

test('lanes: processes by pid, threads by name (numeric aware), then counters; no gaps', () => {
  const { lanes, height } = layout(model);
  assert.deepEqual(lanes.map((l) => l.kind + ':' + l.label),
    ['proc:process 1', 'thread:thread 5', 'proc:process 2', 'thread:worker-9', 'thread:worker-10', 'counter:z']);
  let y = 0;
  for (const l of lanes) {
    assert.equal(l.y, y);
    y += l.h;
  }
  assert.equal(height, y);
  assert.equal(lanes[0].h, PROC_H);
  assert.equal(lanes[lanes.length - 1].h, COUNTER_H);
});

test('colours are a function of the name alone', () => {
  assert.equal(colorOf('GET /api'), colorOf('GET /api'));
  assert.notEqual(colorOf('GET /api'), colorOf('GET /apj'));
  assert.ok(PALETTE.includes(colorOf('')));
});

test('colours: every name maps into the palette, and common names spread over it', () => {
  const names = ['request', 'db.query', 'cache.get', 'render', 'GET /a', 'GET /b', 'parse', 'serialize',
    'lock', 'io.read', 'io.write', 'auth', 'http.handle', 'json.encode', 'gc', 'sleep'];
  const used = new Set(names.map(colorOf));
  for (const c of used) assert.ok(PALETTE.includes(c));
  // 16 names over 12 colours: a fair hash uses most of them.
  assert.ok(used.size >= 7, `only ${used.size} colours for 16 names`);
  // Stable across runs and sessions: a fixed value for a fixed name.
  assert.equal(hashName('request'), hashName('request'));
  assert.equal(colorOf('request'), PALETTE[hashName('request') % PALETTE.length]);
});

test('fitLabel: fits, ellipsizes to the longest prefix that fits, or draws nothing', () => {
  const m = (t) => t.length * 6; // a fixed 6 px advance
  assert.equal(fitLabel('request', 42, m), 'request');
  assert.equal(fitLabel('request', 41, m), 'reque…');
  assert.equal(fitLabel('request', 12, m), 'r…');
  assert.equal(fitLabel('request', 11, m), '');
  assert.equal(fitLabel('request', 0, m), '');
  assert.equal(fitLabel('', 100, m), '');
  // Whatever it returns fits (labels never spill into the neighbour).
  for (let w = 0; w < 60; w++) assert.ok(m(fitLabel('db.query.slow', w, m)) <= w);
});

test('lowerBound finds the first element not below x', () => {
  const a = [1, 3, 3, 7];
  const id = (v) => v;
  assert.deepEqual([0, 1, 3, 4, 8].map((x) => lowerBound(a, x, id)), [0, 0, 1, 3, 4]);
});

test('ruler ticks are 1, 2 or 5 times a power of ten, and neighbouring labels differ', () => {
  for (const want of [0.07, 3, 40, 999, 12345, 7e6]) {
    const t = niceTick(want);
    assert.ok(t >= want);
    assert.ok(t < want * 5.0001);
    const labels = [0, 1, 2].map((i) => fmtTick(i * t, t));
    assert.equal(new Set(labels).size, 3, labels.join(' '));
  }
});

test('formatters', () => {
  assert.equal(fmtDur(0.0005), '500 ns');
  assert.equal(fmtDur(12.5), '12.5 ms');
  assert.equal(fmtDur(1500), '1.50 s');
  assert.equal(fmtBytes(1536000), '1.54 MB');
  assert.equal(fmtBytes(NaN), '–');
  assert.equal(fmtCount(999), '999');
  assert.equal(fmtCount(12345), '12.3k');
});
