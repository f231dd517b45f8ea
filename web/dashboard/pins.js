// pins.js: retention pins in the page: the window view's "Pin this window"
// form (POST /v1/pins) and the pins view (#/pins: GET /v1/pins, DELETE
// /v1/pins/ID). Writes need the daemon's admin token: typed once, kept in
// this tab's sessionStorage (pinsq.js), sent only in the Authorization
// header, never in a URL. A daemon without pins answers 404: the page says
// so instead of failing quietly.
'use strict';

import { h, getJSON, sendAdmin, hashLink, windowRoute, fmtBytes, fmtDateTime } from './api.js';
import {
  loadAdmin, saveAdmin, forgetAdmin, pinBody, pinsErrorText, adminRefused, pinWindow, pinTarget,
} from './pinsq.js';

const store = () => {
  try {
    return window.sessionStorage;
  } catch (_) {
    return null;
  }
};

// The admin token field: shown only while no token is kept.
function adminField(id) {
  const input = h('input', {
    id, type: 'password', autocomplete: 'off', placeholder: 'admin token',
    'aria-label': 'Admin token (kept in this tab only)',
  });
  const wrap = h('span.admin', null, input);
  const sync = () => (wrap.hidden = !!loadAdmin(store()));
  sync();
  return {
    wrap, sync,
    // The token to use: typed now (then kept and cleared from the field)
    // or kept from before; '' when none.
    take() {
      const typed = input.value.trim();
      if (typed) {
        saveAdmin(store(), typed);
        input.value = '';
        sync();
        return typed;
      }
      return loadAdmin(store());
    },
    refused() {
      forgetAdmin(store());
      sync();
    },
  };
}

const fmtTime = (rfc, nsStr) => {
  if (nsStr) return fmtDateTime(Number(BigInt(nsStr) / 1000000n));
  const t = Date.parse(rfc);
  return Number.isFinite(t) ? fmtDateTime(t) : String(rfc || '–');
};

// The window view's pin button and its form. sel, from, to: the window.
export function pinControl(sel, from, to) {
  const btn = h('button#pin-window', { title: 'Keep this window out of retention (needs the admin token)' }, 'Pin this window');
  const reason = h('input#pin-reason', { placeholder: 'why keep it? (shown in the pin list)', maxlength: 512, 'aria-label': 'Reason' });
  const ttl = h('input#pin-ttl', { placeholder: 'keep for (default 7d)', size: 12, 'aria-label': 'Keep for' });
  const admin = adminField('pin-admin');
  const submit = h('button.primary#pin-submit', { type: 'submit' }, 'Pin');
  const msg = h('span#pin-msg');
  const form = h('form#pin-form.toolbar', { hidden: true }, reason, ttl, admin.wrap, submit, msg);
  btn.addEventListener('click', () => {
    form.hidden = !form.hidden;
    admin.sync();
    if (!form.hidden) reason.focus();
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.className = '';
    msg.textContent = '';
    let req;
    try {
      req = pinBody(sel, from, to, reason.value, ttl.value);
    } catch (e) {
      msg.className = 'error';
      msg.textContent = e.message;
      return;
    }
    const token = admin.take();
    if (!token) {
      msg.className = 'error';
      msg.textContent = 'type the admin token (kept in this tab only)';
      return;
    }
    submit.disabled = true;
    try {
      const { json } = await sendAdmin('POST', '/v1/pins', req.body, token);
      msg.className = 'ok';
      msg.dataset.pin = String(json && json.id);
      msg.append(`Pinned #${json && json.id}` + (req.widened ? ` (the whole service ${sel.service}: pins cover every host)` : '') +
        `, kept until ${fmtTime(json && json.expires)}, ${fmtBytes(Number(json && json.bytes) || 0)} held. `,
      hashLink('/pins', 'All pins'));
      reason.value = '';
    } catch (e) {
      if (adminRefused(e.status)) admin.refused();
      msg.className = 'error';
      msg.dataset.status = String(e.status || '');
      msg.textContent = pinsErrorText('create', e.status, e.code, e.message);
    } finally {
      submit.disabled = false;
    }
  });
  return { button: btn, form };
}

// #/pins: every pin, newest first, each with its window and a delete
// button.
export function pinsView(root, params, crumbs) {
  crumbs.append(hashLink('/', 'fleet'), ' / pins');
  const admin = adminField('pins-admin');
  const forget = h('button.small#pins-forget', { title: 'Forget the admin token kept in this tab' }, 'forget admin token');
  const msg = h('p.muted#pins-msg');
  const tbody = h('tbody#pins-rows');
  root.append(h('h1', null, 'Retention pins'),
    h('p.muted', null, 'A pin keeps every generation of its window (of a service on every host, or of one session) out of retention until it expires or is deleted. Pin a window from its window view.'),
    h('div.toolbar', null, admin.wrap, forget), msg,
    h('div.tablewrap', null, h('table#pins', null,
      h('thead', null, h('tr', null, h('th.num', null, 'id'), h('th', null, 'what'), h('th', null, 'window'),
        h('th', null, 'reason'), h('th', null, 'expires'), h('th.num', null, 'bytes'), h('th'))),
      tbody)));
  forget.addEventListener('click', () => {
    admin.refused();
    msg.textContent = 'The admin token is forgotten in this tab.';
  });
  const ctl = new AbortController();

  async function load() {
    try {
      const { json } = await getJSON('/v1/pins', ctl.signal);
      tbody.textContent = '';
      const pins = Array.isArray(json.pins) ? json.pins : [];
      for (const p of pins) {
        const w = pinWindow(p);
        const del = h('button.small.pin-delete', { dataset: { id: String(p.id) } }, 'delete');
        del.addEventListener('click', () => remove(p, del));
        tbody.append(h('tr', { dataset: { id: String(p.id) } },
          h('td.num', null, String(p.id)),
          h('td', null, pinTarget(p)),
          h('td', null, hashLink(windowRoute(w.sel, w.from, w.to), fmtTime(p.from, p.from_ns) + ' – ' + fmtTime(p.to, p.to_ns))),
          h('td', { title: 'created ' + fmtTime(p.created) }, String(p.reason || '')),
          h('td', null, fmtTime(p.expires)),
          h('td.num', null, fmtBytes(Number(p.bytes) || 0)),
          h('td', null, del)));
      }
      msg.textContent = pins.length ? `${pins.length} pin${pins.length === 1 ? '' : 's'}` : 'No pins.';
      msg.className = 'muted';
    } catch (e) {
      if (e.name === 'AbortError') return;
      msg.className = 'error';
      msg.dataset.status = String(e.status || '');
      msg.textContent = pinsErrorText('list', e.status, e.code, e.message);
    }
  }

  async function remove(p, btn) {
    const token = admin.take();
    if (!token) {
      msg.className = 'error';
      msg.textContent = 'type the admin token first (kept in this tab only)';
      return;
    }
    btn.disabled = true;
    try {
      await sendAdmin('DELETE', '/v1/pins/' + encodeURIComponent(p.id), undefined, token, ctl.signal);
      await load();
      msg.textContent = `Pin #${p.id} deleted. ` + msg.textContent;
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (adminRefused(e.status)) admin.refused();
      msg.className = 'error';
      msg.textContent = pinsErrorText('delete', e.status, e.code, e.message);
      btn.disabled = false;
    }
  }

  load();
  return { dispose() { ctl.abort(); } };
}
