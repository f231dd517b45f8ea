// pinsq.js: retention pins' pure parts (no DOM, no fetch): the admin token
// kept in the tab's sessionStorage (typed once; never in a URL, never in
// localStorage, gone with the tab), the body of POST /v1/pins for a window,
// what the page says for each answer of the pins API, and the window a pin
// covers. Tested in Node (tests/dashboard/pinsq.test.mjs); pins.js draws.
'use strict';

export const ADMIN_KEY = 'gentrace.adminToken';
export const MAX_REASON_BYTES = 512;

// `storage`: window.sessionStorage in the page (a Map-like stand-in in
// tests). Storage can throw (disabled, private mode): then nothing is kept
// and the page asks again.
export function loadAdmin(storage) {
  try {
    return (storage && storage.getItem(ADMIN_KEY)) || '';
  } catch (_) {
    return '';
  }
}
export function saveAdmin(storage, token) {
  try {
    if (token) storage.setItem(ADMIN_KEY, token);
  } catch (_) {
    // Not kept: asked again next time.
  }
}
export function forgetAdmin(storage) {
  try {
    storage.removeItem(ADMIN_KEY);
  } catch (_) {
    // Nothing was kept.
  }
}

// The API's duration grammar (docs/HTTP.md), for an early, clear refusal.
const DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d))+$/;

// The body of POST /v1/pins for the window `sel` ({session} or {service,
// host}) over [from, to] (unix ns as BigInt or decimal strings). A window
// of one host of a service pins the whole service (pins name a service or
// a session; `widened` says so). Throws an Error with a message for people.
export function pinBody(sel, from, to, reason, ttl) {
  const body = {};
  if (sel.session) body.session = String(sel.session);
  else if (sel.service) body.service = String(sel.service);
  else throw new Error('a pin needs a session or a service');
  const f = BigInt(from), t = BigInt(to);
  if (t <= f) throw new Error('the window is empty');
  body.from = f + 'ns';
  body.to = t + 'ns';
  const r = String(reason || '').trim();
  if (!r) throw new Error('say why this window is kept (the reason is shown in the pin list)');
  if (new TextEncoder().encode(r).length > MAX_REASON_BYTES)
    throw new Error(`the reason is over ${MAX_REASON_BYTES} bytes`);
  body.reason = r;
  const d = String(ttl || '').trim();
  if (d) {
    if (!DURATION.test(d)) throw new Error(`keep for: "${d}" is not a duration (e.g. 7d, 36h)`);
    body.ttl = d;
  }
  return { body, widened: !sel.session && !!sel.host };
}

// What to tell the user about a failed pins call. op: 'list' | 'create' |
// 'delete'; status, code, message: the API's answer (ApiError).
export function pinsErrorText(op, status, code, message) {
  const said = message ? ` (${message})` : '';
  // A daemon from before pins has no /v1/pins (404) and takes no writes
  // at all (405).
  if ((status === 404 && op !== 'delete') || status === 405)
    return 'this gentraced has no retention pins (/v1/pins answered 404): it predates them; upgrade the daemon to pin windows';
  if (status === 404) return 'no such pin: it expired or was deleted' + said;
  if (status === 403) return 'pins are switched off on this daemon: start gentraced with --admin-token (or --admin-token-file)' + said;
  if (status === 401)
    return op === 'list' ? 'the read token was refused' + said : 'the admin token was refused; type it again' + said;
  if (status === 507) return 'the pinned bytes cap is full: delete a pin or pin a shorter window' + said;
  if (status === 400) return 'the daemon refused the pin' + said;
  return (message || `HTTP ${status}`) + (code && !message ? ` (${code})` : '');
}

// Whether an answer means the stored admin token is wrong.
export const adminRefused = (status) => status === 401;

// The window route parameters of a pin: {session} or {service} and from/to
// in unix ns strings.
export function pinWindow(pin) {
  const sel = pin.session ? { session: pin.session } : { service: pin.service };
  return { sel, from: String(pin.from_ns), to: String(pin.to_ns) };
}

// "session 3f2a…" / "service checkout"
export function pinTarget(pin) {
  return pin.session ? `session ${String(pin.session).slice(0, 12)}` : `service ${pin.service}`;
}
