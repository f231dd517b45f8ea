// api.js: talking to gentraced's HTTP API (docs/HTTP.md) and formatting
// what it answers. Everything the dashboard shows comes through here, so the
// page needs nothing the public API does not offer to any other client.
'use strict';

import { fmtBytes } from './fmt.js';

// A ?token= in the page's own URL is forwarded to every API call (the
// daemon's --read-token); hash routing never touches location.search, so it
// survives navigation inside the page.
export const token = new URLSearchParams(location.search).get('token');

// Adds the token to an API path (or a URL relative to this origin).
export function api(path) {
  if (!token) return path;
  return path + (path.includes('?') ? '&' : '?') + 'token=' + encodeURIComponent(token);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(r) {
  let code = 'http_' + r.status;
  let msg = r.status + ' ' + r.statusText;
  try {
    const j = await r.json();
    if (j && j.error) {
      code = j.error;
      msg = j.message || j.error;
    }
  } catch (_) {
    // Not JSON (a proxy in between): the status line is all we have.
  }
  return new ApiError(r.status, code, msg);
}

// GET path as JSON; throws ApiError with the API's message on failure.
export async function getJSON(path, signal) {
  const r = await fetch(api(path), { signal, cache: 'no-store' });
  if (!r.ok) throw await failure(r);
  const j = await r.json();
  return { json: j, headers: r.headers };
}

// A write (POST/DELETE) with the admin token in the Authorization header
// and never in the URL (retention pins, docs/HTTP.md). The read token is not
// sent: writes are authorized by the admin token alone. Returns { json
// (null for 204), status, headers }; throws ApiError on failure.
export async function sendAdmin(method, path, body, adminToken, signal) {
  const headers = { Authorization: 'Bearer ' + adminToken };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {
    method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw await failure(r);
  let json = null;
  if (r.status !== 204) {
    try {
      json = await r.json();
    } catch (_) {
      json = null;
    }
  }
  return { json, status: r.status, headers: r.headers };
}

// GET path as bytes, refusing to hold more than `limit` bytes in the page:
// a window's Chrome JSON grows with the traffic (the demo writes about 2 MB
// per second), and a browser tab should say "narrow it" rather than freeze.
export async function getBytes(path, limit, signal, onProgress) {
  const r = await fetch(api(path), { signal, cache: 'no-store' });
  if (!r.ok) throw await failure(r);
  const reader = r.body.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      reader.cancel().catch(() => {});
      throw new ApiError(413, 'too_large_for_page',
        `this window is over ${fmtBytes(limit)} of Chrome JSON; choose a shorter one ` +
        '(or download it and open it in Perfetto)');
    }
    parts.push(value);
    if (onProgress) onProgress(n);
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return { buffer: out.buffer, headers: r.headers };
}

// ---------------------------------------------------------------- times
// Nanosecond times travel as decimal strings (they exceed 2^53); BigInt
// keeps them exact where they become URLs, Number (ms) where they are drawn.

export function ns(s) {
  try {
    return BigInt(s);
  } catch (_) {
    return 0n;
  }
}

export function nsToMs(s) {
  return Number(ns(s) / 1000n) / 1000;
}

export function msToNs(ms) {
  return BigInt(Math.round(ms * 1000)) * 1000n;
}

// The server's clock as seen from here: the daemon stamps every answer with
// a Date header (1 s resolution); only a skew above 2 s is worth correcting.
let skewMs = 0;
export function noteServerDate(headers) {
  const d = headers && headers.get('Date');
  if (!d) return;
  const t = Date.parse(d);
  if (!Number.isFinite(t)) return;
  const s = t - Date.now();
  skewMs = Math.abs(s) > 2000 ? s : 0;
}
export function serverNowMs() {
  return Date.now() + skewMs;
}

// The formatters are pure and live in fmt.js (importable in Node for the
// unit tests); re-exported so pages keep importing them from here.
export { fmtClock, fmtDateTime, fmtAgo, fmtDur, fmtBytes, fmtCount } from './fmt.js';

// --------------------------------------------------------------- DOM

// Returns a function that runs fn once at the next animation frame however
// often it is called before then: data updates, timers and resizes coalesce
// into one render.
export function onNextFrame(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

// h('div.cls#id', {attrs}, children...): a tiny element builder. Text goes
// in as text nodes, never as HTML, so names from traces cannot inject markup.
export function h(tag, attrs, ...kids) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(tag);
  const el = document.createElement(m ? m[1] : 'div');
  if (m && m[2])
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === '.') el.classList.add(part.slice(1));
      else el.id = part.slice(1);
    }
  if (attrs)
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

// Hash links: '#/session/ID' etc.
export function hashLink(route, text, title) {
  return h('a', { href: '#' + route, title }, text);
}

// The route for a window view. sel = {session} or {service, host}; from/to
// are unix ns as BigInt or decimal strings.
export function windowRoute(sel, from, to) {
  const q = new URLSearchParams();
  if (sel.session) q.set('session', sel.session);
  if (sel.service) q.set('service', sel.service);
  if (sel.host) q.set('host', sel.host);
  q.set('from', String(from));
  q.set('to', String(to));
  return '/window?' + q.toString();
}

// A "last N seconds" window route computed now (links get fixed times, so
// they can be shared and still show the same data).
export function lastRoute(sel, seconds) {
  const to = msToNs(serverNowMs());
  return windowRoute(sel, to - BigInt(seconds) * 1000000000n, to);
}
