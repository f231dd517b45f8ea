// fleetq.test.mjs: web/dashboard/fleetq.js (which sessions the fleet lists,
// their state and time range) in Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { listed, sessionState, lifeRange, fmtRange, lastWindow, compareSessions, STALE_MS } from '../../web/dashboard/fleetq.js';

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);
const sess = (o) => ({ session: 'ab', host: 'h', pid: 1, connected: false, fromAgents: true, generations: 0, lastSeenMs: 0, ...o });

test('an ended session is listed while any of its generations is retained', () => {
  assert.equal(listed(sess({ connected: true })), true);
  assert.equal(listed(sess({ generations: 3 })), true);
  assert.equal(listed(sess({ generations: 0 })), false, 'retention removed all of it');
  // Seen in the feed before /v1/agents listed it: it just committed.
  assert.equal(listed(sess({ fromAgents: false })), true);
});

test('state: connected, stalled after STALE_MS without a commit, ended', () => {
  assert.equal(sessionState(sess({ connected: true, lastSeenMs: NOW - 100 }), NOW), 'connected');
  assert.equal(sessionState(sess({ connected: true, lastSeenMs: NOW - STALE_MS - 1 }), NOW), 'stalled');
  assert.equal(sessionState(sess({ lastSeenMs: NOW - 100 }), NOW), 'ended');
});

test('the time range of an ended session is first to last contact', () => {
  const s = sess({ firstSeenMs: NOW - 600000, startedMs: NOW - 700000, lastSeenMs: NOW - 60000 });
  assert.deepEqual(lifeRange(s), { fromMs: NOW - 600000, toMs: NOW - 60000 });
  assert.deepEqual(lifeRange({ ...s, connected: true }), { fromMs: NOW - 600000, toMs: null });
  assert.deepEqual(lifeRange(sess({ oldestMs: 5, lastSeenMs: 9 })), { fromMs: 5, toMs: 9 });
  const txt = fmtRange(NOW - 600000, NOW - 60000, NOW);
  assert.match(txt, /^\d\d:\d\d:\d\d – \d\d:\d\d:\d\d, 9\.0 min$/);
  // Another day: the date is shown.
  assert.match(fmtRange(NOW - 3 * 86400e3, NOW - 3 * 86400e3 + 5000, NOW), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d – \d\d:\d\d:\d\d, 5\.00 s$/);
  assert.match(fmtRange(NOW - 1000, null, NOW), /^since /);
});

test('the last-seconds window of an ended session ends at its last contact', () => {
  const w = lastWindow(sess({ lastSeenMs: NOW - 3600e3 }), NOW, 5);
  assert.equal(w.to, BigInt(NOW - 3600e3 + 1) * 1000000n);
  assert.equal(w.to - w.from, 5000000000n);
  const c = lastWindow(sess({ connected: true, lastSeenMs: NOW - 10 }), NOW, 5);
  assert.equal(c.to, BigInt(NOW) * 1000000n);
});

test('connected sessions first, then ended ones newest first', () => {
  const list = [
    sess({ session: 'e1', lastSeenMs: 100 }), sess({ session: 'c2', connected: true, host: 'b' }),
    sess({ session: 'e2', lastSeenMs: 200 }), sess({ session: 'c1', connected: true, host: 'a' }),
  ].sort(compareSessions);
  assert.deepEqual(list.map((s) => s.session), ['c1', 'c2', 'e2', 'e1']);
});
