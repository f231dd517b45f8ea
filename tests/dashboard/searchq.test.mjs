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

test('bucketHi follows the summary scheme: 1 us, then two buckets per power of two', async () => {
  const { bucketHi } = await import('../../web/dashboard/searchq.js');
  assert.equal(bucketHi(0n), 1000n);
  assert.equal(bucketHi(1000n), 2000n);
  assert.equal(bucketHi(2000n), 3000n);
  assert.equal(bucketHi(3000n), 4000n);
  assert.equal(bucketHi(64000n), 96000n);
  assert.equal(bucketHi(96000n), 128000n);
  assert.equal(bucketHi(12345n), null);
  assert.equal(bucketHi(5000n), null);
});

test('histSlots fills the empty buckets between listed ones; selectedBar finds a bucket search', async () => {
  const { histSlots, selectedBar, bucketQuery } = await import('../../web/dashboard/searchq.js');
  const bars = histSlots([
    { lo_ns: '64000', hi_ns: '96000', count: 4 },
    { lo_ns: '192000', hi_ns: '256000', count: 2 },
    { lo_ns: '8589934592000000', hi_ns: null, count: 1 },
  ]);
  // 64-96, 96-128 (empty), 128-192 (empty), 192-256, then the last one:
  // the fill stops where the scheme is not followed to it within 70 steps.
  assert.deepEqual(bars.slice(0, 4).map((b) => [String(b.lo), String(b.hi), b.count]),
    [['64000', '96000', 4], ['96000', '128000', 0], ['128000', '192000', 0], ['192000', '256000', 2]]);
  assert.equal(bars[bars.length - 1].hi, null);
  for (let i = 1; i < bars.length; i++) assert.ok(bars[i].lo >= bars[i - 1].hi);
  assert.equal(bars[0].frac, 1);
  const q = bucketQuery({ name: 'x', last: '1h' }, bars[3]);
  assert.equal(selectedBar(bars, q), 3);
  assert.equal(selectedBar(bars, bucketQuery({}, bars[bars.length - 1])), bars.length - 1);
  assert.equal(selectedBar(bars, { min: '200ms' }), -1);
});
