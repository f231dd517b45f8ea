// fleet.js: the fleet view (#/): every service and its sessions, with
// whether data is flowing (events/s, bytes/s from the live feed) and being
// lost (ledger totals, and loss in the last minute), filterable.
'use strict';

import { h, fmtAgo, fmtBytes, fmtCount, serverNowMs, hashLink, onNextFrame, windowRoute } from './api.js';
import { fleet } from './store.js';
import { listed, sessionState, lifeRange, fmtRange, lastWindow, compareSessions } from './fleetq.js';

export function fleetView(root, params, crumbs) {
  crumbs.append('fleet');
  const q0 = params.get('q') || '';
  const filter = h('input', {
    type: 'search', placeholder: 'filter: service, host, pid, session, tag', value: q0,
    'aria-label': 'Filter sessions', id: 'filter',
  });
  const onlyLive = h('input', { type: 'checkbox', id: 'only-connected' });
  if (params.get('connected') === '1') onlyLive.checked = true;
  const cards = h('div.cards');
  const tbody = h('tbody#fleet-rows');
  const note = h('p.muted');
  root.append(
    h('h1', null, 'Fleet'),
    cards,
    h('div.toolbar', null, filter, h('label.check', null, onlyLive, 'connected only')),
    h('div.tablewrap', null,
      h('table#fleet', null,
        h('thead', null, h('tr', null,
          h('th', null, 'service / host'), h('th.num', null, 'pid'),
          h('th.hide-narrow', null, 'session'), h('th', null, 'state'),
          h('th', null, 'last seen'), h('th.num', null, 'events/s'),
          h('th.num', null, 'bytes/s'), h('th.num', null, 'lost'),
          h('th.num.hide-narrow', null, 'generations'), h('th', null, 'window'))),
        tbody)),
    note);

  // The filter goes into the hash (replaceState: no history entry per key),
  // so a filtered fleet can be linked to.
  function saveFilter() {
    const p = new URLSearchParams();
    if (filter.value) p.set('q', filter.value);
    if (onlyLive.checked) p.set('connected', '1');
    const s = p.toString();
    history.replaceState(null, '', '#/' + (s ? '?' + s : ''));
    render();
  }
  filter.addEventListener('input', saveFilter);
  onlyLive.addEventListener('change', saveFilter);

  function matches(s, words) {
    if (onlyLive.checked && !s.connected) return false;
    if (!words.length) return true;
    const hay = [s.service, s.host, String(s.pid), s.session,
      ...Object.entries(s.tags || {}).map(([k, v]) => k + ':' + v)].join(' ').toLowerCase();
    return words.every((w) => hay.includes(w));
  }

  function render() {
    const now = serverNowMs();
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const byService = new Map();
    let totEv = 0, totBy = 0, lostMin = 0, live = 0, all = 0, lostAll = 0;
    for (const s of fleet.sessions.values()) {
      if (!listed(s)) continue; // ended, and none of its generations left
      const r = fleet.rates(s, now);
      all++;
      if (s.connected) live++;
      totEv += r.eventsPerS;
      totBy += r.bytesPerS;
      lostMin += r.lostMin;
      lostAll += s.lost || 0;
      if (!matches(s, words)) continue;
      if (!byService.has(s.service)) byService.set(s.service, []);
      byService.get(s.service).push({ s, r });
    }

    cards.textContent = '';
    const card = (k, v, bad, id) => h('div.card' + (bad ? '.bad' : ''), { id }, h('div.v', null, v), h('div.k', null, k));
    cards.append(
      card('services', String(new Set([...fleet.sessions.values()].filter(listed).map((s) => s.service)).size), false, 'card-services'),
      card('sessions connected', `${live} / ${all}`, false, 'card-sessions'),
      card('events/s', fmtCount(totEv), false, 'card-events'),
      card('bytes/s', fmtBytes(totBy), false, 'card-bytes'),
      card('lost events, last minute', fmtCount(lostMin), lostMin > 0, 'card-lost-min'),
      card('lost events, retained', fmtCount(lostAll), false, 'card-lost'));

    tbody.textContent = '';
    const services = [...byService.keys()].sort();
    for (const name of services) {
      const rows = byService.get(name).sort((a, b) => compareSessions(a.s, b.s));
      let ev = 0, by = 0, lost = 0, lm = 0, conn = 0;
      for (const { s, r } of rows) {
        ev += r.eventsPerS;
        by += r.bytesPerS;
        lost += s.lost || 0;
        lm += r.lostMin;
        if (s.connected) conn++;
      }
      tbody.append(h('tr.service', { dataset: { service: name } },
        h('td', { colspan: 3 }, name || '(no name)', h('span.muted', null, ` · ${rows.length} session${rows.length === 1 ? '' : 's'}`)),
        h('td', null, `${conn} connected`),
        h('td'),
        h('td.num', null, fmtCount(ev)),
        h('td.num', null, fmtBytes(by)),
        h('td.num' + (lm > 0 ? '.lost' : ''), { title: `${lm} in the last minute` }, fmtCount(lost)),
        h('td.hide-narrow'),
        h('td', null, hashLink('/window?service=' + encodeURIComponent(name) + '&last=5s', 'last 5s',
          'Every session of this service, the last 5 seconds'))));
      for (const { s, r } of rows) {
        const state = sessionState(s, now);
        const stale = state === 'stalled';
        const range = lifeRange(s);
        const win = lastWindow(s, now, 5);
        tbody.append(h('tr.session' + (s.connected ? '' : '.gone'), {
          dataset: { session: s.session, service: s.service, state, from: range.fromMs || '', to: range.toMs || '' },
        },
          h('td', null, hashLink('/session/' + s.session, s.host || '?', 'Open this session')),
          h('td.num', null, String(s.pid || '')),
          h('td.mono.hide-narrow', { title: s.session }, hashLink('/session/' + s.session, s.session.slice(0, 12))),
          h('td', { title: stale ? 'connected, but nothing committed for ' + fmtAgo(s.lastSeenMs, now).replace(' ago', '') : '' },
            h('span.dot' + (s.connected ? (stale ? '.stale' : '.on') : '')), state,
            state === 'ended' ? h('span.range', { title: 'first to last contact' }, ' ' + fmtRange(range.fromMs, range.toMs, now)) : null),
          h('td', { title: new Date(s.lastSeenMs).toISOString() }, s.lastSeenMs ? fmtAgo(s.lastSeenMs, now) : '–'),
          h('td.num', null, fmtCount(r.eventsPerS)),
          h('td.num', null, fmtBytes(r.bytesPerS)),
          h('td.num' + (r.lostMin > 0 ? '.lost' : ''), { title: `${r.lostMin} in the last minute; ${s.lost || 0} in the retained generations` },
            fmtCount(s.lost || 0)),
          h('td.num.hide-narrow', null, String(s.generations || 0)),
          h('td', null, hashLink(windowRoute({ session: s.session }, win.from, win.to), 'last 5s',
            s.connected ? 'This session, the last 5 seconds' : 'This session, its last 5 seconds before it ended'))));
      }
    }
    note.textContent = fleet.sessions.size === 0
      ? 'No agent has sent anything yet. Start a traced program with GENTRACE_ADDR pointing at this daemon\'s agent port.'
      : (services.length === 0 ? 'Nothing matches the filter.' : '');
  }

  const schedule = onNextFrame(render);
  const unsub = fleet.subscribe(schedule);
  // "last seen" and the rates age even when nothing arrives.
  const tick = setInterval(schedule, 1000);
  render();
  return {
    dispose() {
      unsub();
      clearInterval(tick);
    },
  };
}
