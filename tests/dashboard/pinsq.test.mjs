// pinsq.test.mjs: web/dashboard/pinsq.js (retention pins in the page: the
// admin token in sessionStorage, the POST body, the messages) in Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ADMIN_KEY, MAX_REASON_BYTES, loadAdmin, saveAdmin, forgetAdmin, pinBody, pinsErrorText, pinWindow, pinTarget,
} from '../../web/dashboard/pinsq.js';

class Storage {
  constructor() { this.m = new Map(); }
  getItem(k) { return this.m.has(k) ? this.m.get(k) : null; }
  setItem(k, v) { this.m.set(k, String(v)); }
  removeItem(k) { this.m.delete(k); }
}

test('the admin token is kept in the given storage under one key, and forgotten', () => {
  const st = new Storage();
  assert.equal(loadAdmin(st), '');
  saveAdmin(st, 'adm-1');
  assert.equal(st.getItem(ADMIN_KEY), 'adm-1');
  assert.equal(loadAdmin(st), 'adm-1');
  saveAdmin(st, ''); // an empty field keeps what was there
  assert.equal(loadAdmin(st), 'adm-1');
  forgetAdmin(st);
  assert.equal(loadAdmin(st), '');
  // Storage that throws (disabled): nothing kept, nothing thrown.
  const bad = { getItem() { throw new Error('no'); }, setItem() { throw new Error('no'); }, removeItem() { throw new Error('no'); } };
  assert.equal(loadAdmin(bad), '');
  saveAdmin(bad, 'x');
  forgetAdmin(bad);
  assert.equal(loadAdmin(null), '');
});

test('the POST body names a session or a service, the window in ns, the reason and the ttl', () => {
  const a = pinBody({ session: 'ab12' }, 1795600000000000000n, '1795600005000000000', '  slow checkout ', '');
  assert.deepEqual(a.body, { session: 'ab12', from: '1795600000000000000ns', to: '1795600005000000000ns', reason: 'slow checkout' });
  assert.equal(a.widened, false);
  const b = pinBody({ service: 'checkout', host: 'web-1' }, '10', '20', 'x', '36h');
  assert.deepEqual(b.body, { service: 'checkout', from: '10ns', to: '20ns', reason: 'x', ttl: '36h' });
  assert.equal(b.widened, true, 'one host of a service pins the service');
  assert.equal('session' in b.body, false, 'exactly one of service and session');
});

test('bad pins are refused before they are sent', () => {
  assert.throws(() => pinBody({}, 1, 2, 'r'), /session or a service/);
  assert.throws(() => pinBody({ session: 'a' }, 5, 5, 'r'), /empty/);
  assert.throws(() => pinBody({ session: 'a' }, 1, 2, '   '), /why/);
  assert.throws(() => pinBody({ session: 'a' }, 1, 2, 'é'.repeat(MAX_REASON_BYTES / 2 + 1)), /512 bytes/);
  assert.doesNotThrow(() => pinBody({ session: 'a' }, 1, 2, 'é'.repeat(MAX_REASON_BYTES / 2)));
  assert.throws(() => pinBody({ session: 'a' }, 1, 2, 'r', 'forever'), /not a duration/);
  assert.doesNotThrow(() => pinBody({ session: 'a' }, 1, 2, 'r', '1h30m'));
});

test('each answer of the pins API gets a message that says what to do', () => {
  assert.match(pinsErrorText('create', 404, 'not_found', 'no such endpoint'), /no retention pins.*404.*upgrade/);
  assert.match(pinsErrorText('list', 404), /no retention pins/);
  assert.match(pinsErrorText('create', 405, 'method_not_allowed', 'POST not allowed'), /no retention pins/);
  assert.match(pinsErrorText('delete', 405), /no retention pins/);
  assert.match(pinsErrorText('delete', 404, 'not_found', 'no pin 7'), /no such pin.*no pin 7/);
  assert.match(pinsErrorText('create', 403, 'forbidden', 'pins need --admin-token'), /--admin-token.*pins need/);
  assert.match(pinsErrorText('create', 401, 'unauthorized', 'bad'), /admin token was refused/);
  assert.match(pinsErrorText('list', 401, 'unauthorized', 'bad'), /read token/);
  assert.match(pinsErrorText('create', 507, 'insufficient_storage', 'over --max-pinned-bytes'), /cap.*over --max-pinned-bytes/);
  assert.equal(pinsErrorText('create', 500, 'internal', 'disk I/O error'), 'disk I/O error');
});

test('a pin opens its window and says what it holds', () => {
  const p = { id: 3, service: null, session: 'abcdef0123456789abcdef0123456789', from_ns: '100', to_ns: '200' };
  assert.deepEqual(pinWindow(p), { sel: { session: p.session }, from: '100', to: '200' });
  assert.equal(pinTarget(p), 'session abcdef012345');
  const q = { id: 4, service: 'checkout', session: null, from_ns: '1', to_ns: '2' };
  assert.deepEqual(pinWindow(q).sel, { service: 'checkout' });
  assert.equal(pinTarget(q), 'service checkout');
});
