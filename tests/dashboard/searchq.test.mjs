// searchq.test.mjs: web/dashboard/searchq.js in Node (node --test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  searchPath, summaryPath, spanWindow, histBars, bucketQuery, fmtNs,
} from '../../web/dashboard/searchq.js';

test('searchPath keeps given fields and the cursor', () => {
  const p = searchPath({ name: 'checkout.*', min: '200ms', max: '', last: '1h' }, '12.3');
  const q = new URLSearchParams(p.split('?')[1]);
  assert.equal(p.split('?')[0], '/v1/search');
  assert.equal(q.get('name'), 'checkout.*');
  assert.equal(q.get('min'), '200ms');
  assert.equal(q.get('max'), null);
  assert.equal(q.get('cursor'), '12.3');
  assert.equal(q.get('limit'), '100');
  assert.equal(summaryPath({ service: 'shop', last: '1h', min: '1s' }), '/v1/summary?service=shop&last=1h');
});

test('spanWindow pads by half the span, at least 100 ms', () => {
  const short = spanWindow({ start_ns: '1000000000000', duration_ns: '1000000' });
  assert.equal(short.from, 1000000000000n - 100000000n);
  assert.equal(short.to, 1000000000000n + 1000000n + 100000000n);
  const long = spanWindow({ start_ns: '5000000000', duration_ns: '2000000000' });
  assert.equal(long.from, 4000000000n);
  assert.equal(long.to, 8000000000n);
});

test('histBars scale to the largest bucket; bucketQuery lists one bucket', () => {
  const bars = histBars([
    { lo_ns: '1000', hi_ns: '2000', count: 10 },
    { lo_ns: '200000000', hi_ns: '300000000', count: 5 },
    { lo_ns: '8589934592000', hi_ns: null, count: 1 },
  ]);
  assert.deepEqual(bars.map((b) => b.frac), [1, 0.5, 0.1]);
  assert.deepEqual(bucketQuery({ name: 'x', max: '9s' }, bars[1]),
    { name: 'x', min: '200000000ns', max: '299999999ns' });
  assert.deepEqual(bucketQuery({ name: 'x', max: '9s' }, bars[2]),
    { name: 'x', min: '8589934592000ns' });
});

test('fmtNs picks a unit', () => {
  assert.equal(fmtNs('250000000'), '250 ms');
  assert.equal(fmtNs(1500000000n), '1.50 s');
  assert.equal(fmtNs('12000'), '12 us');
  assert.equal(fmtNs('999'), '999 ns');
});
