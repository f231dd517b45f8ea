// session.js: one session (#/session/ID): who it is, whether it flows, and a
// live timeline of its recent generations (one bar per generation, height by
// events, red where the ledger counted loss). Click a bar to open that
// generation's window; drag across bars to open the window they span.
'use strict';

import {
  h, getJSON, fmtAgo, fmtBytes, fmtCount, fmtClock, fmtDateTime, fmtDur,
  serverNowMs, hashLink, windowRoute, msToNs, api, onNextFrame,
} from './api.js';
import { fleet } from './store.js';
import { lifeRange, fmtRange, lastWindow } from './fleetq.js';

const RANGES = [['1m', 60e3], ['5m', 300e3], ['15m', 900e3], ['1h', 3600e3]];
const PAD_L = 44, PAD_R = 8, PAD_T = 8, PAD_B = 20; // css px around the plot

export function sessionView(root, id, params, crumbs) {
  crumbs.append(hashLink('/', 'fleet'), ' / ');
  const crumbName = h('span', null, id.slice(0, 12));
  crumbs.append(crumbName);

  let rangeMs = 60e3;
  const rp = params.get('range');
  for (const [k, v] of RANGES) if (k === rp) rangeMs = v;

  const title = h('h1', null, 'Session ', h('span.mono', null, id));
  const cards = h('div.cards');
  const rangeBtns = h('span.toolbar');
  for (const [k, v] of RANGES) {
    rangeBtns.append(h('button.small', {
      'aria-pressed': String(v === rangeMs), dataset: { range: k },
      onclick: () => {
        rangeMs = v;
        history.replaceState(null, '', `#/session/${id}?range=${k}`);
        for (const b of rangeBtns.children) b.setAttribute('aria-pressed', String(b.dataset.range === k));
        loadHistory();
        draw();
      },
    }, k));
  }
  const quick = h('span.toolbar', null, 'window of the last',
    ...[1, 2, 5, 10, 30].map((s) => h('a.button.small', {
      href: `#/window?session=${id}&last=${s}s`, dataset: { last: String(s) },
    }, s + 's')));
  const canvas = h('canvas', { 'aria-label': 'Generations timeline; click a bar or drag to choose a window' });
  const tl = h('div.timeline#timeline', null, canvas);
  const tip = h('div.tip', { hidden: true });
  const info = h('div.legend', null,
    h('span.sw', { class: 'sw sw-ok' }), 'events per generation',
    h('span.sw', { class: 'sw sw-lost' }), 'generation with lost events',
    h('span', null, ' · click a bar or drag across bars to open that window'));
  const tableBody = h('tbody');
  const err = h('p.error');
  root.append(title, cards,
    h('div.toolbar', null, 'timeline', rangeBtns, quick),
    tl, info, err,
    h('h2', null, 'Latest generations'),
    h('div.tablewrap', null, h('table#gens', null,
      h('thead', null, h('tr', null, h('th.num', null, 'gen'), h('th', null, 'start'),
        h('th.num', null, 'length'), h('th.num', null, 'events'), h('th.num', null, 'bytes'),
        h('th.num', null, 'lost'), h('th', null, 'open'))),
      tableBody)));
  document.body.append(tip);
  // The swatches take their colours from the same constants as the canvas.
  info.querySelector('.sw-ok').style.background = COL_OK;
  info.querySelector('.sw-lost').style.background = COL_LOST;

  const sess = () => fleet.session(id);

  // ---------------------------------------------------------- header
  function renderHead() {
    const s = sess();
    const now = serverNowMs();
    const r = fleet.rates(s, now);
    cards.textContent = '';
    const card = (k, v, bad) => h('div.card' + (bad ? '.bad' : ''), null, h('div.v', null, v), h('div.k', null, k));
    // Until /v1/agents lists the session its state and identity are not
    // known (the feed may already have named its service): say so instead
    // of a made-up "gone ? ?".
    if (!s.fromAgents) {
      crumbName.textContent = s.service || id.slice(0, 12) + '…';
      cards.append(card('state', fleet.agentsLoaded ? 'not listed by /v1/agents' : 'loading…'));
      return;
    }
    crumbName.textContent = `${s.service || '?'} · ${s.host || '?'} · ${s.pid || '?'}`;
    cards.append(
      card('service / host / pid', `${s.service || '?'} / ${s.host || '?'} / ${s.pid || '?'}`),
      card('state', s.connected ? 'connected' : 'ended ' + fmtRange(lifeRange(s).fromMs, lifeRange(s).toMs, now)),
      card('last seen', s.lastSeenMs ? fmtAgo(s.lastSeenMs, now) : '–'),
      card('events/s', fmtCount(r.eventsPerS)),
      card('bytes/s', fmtBytes(r.bytesPerS)),
      card('lost events (retained)', fmtCount(s.lost || 0), r.lostMin > 0),
      card('generations stored', String(s.generations || 0)));
    const tags = Object.entries(s.tags || {}).map(([k, v]) => k + '=' + v).join(', ');
    title.title = `started ${s.startedMs ? fmtDateTime(s.startedMs) : '?'}` +
      (s.agentVersion ? `, agent ${s.agentVersion}` : '') + (tags ? `, tags ${tags}` : '');
  }

  function renderTable() {
    tableBody.textContent = '';
    const rec = sess().recent;
    for (let i = rec.length - 1; i >= 0 && i >= rec.length - 15; i--) {
      const g = rec[i];
      tableBody.append(h('tr', null,
        h('td.num', null, String(g.gen)),
        h('td', null, fmtClock(g.startMs)),
        h('td.num', null, fmtDur(g.endMs - g.startMs)),
        h('td.num', null, fmtCount(g.events)),
        h('td.num', null, fmtBytes(g.bytes)),
        h('td.num' + (g.lost > 0 ? '.lost' : ''), null, String(g.lost)),
        h('td', null,
          hashLink(windowRoute({ session: id }, g.start_ns, g.end_ns), 'view'), ' ',
          h('a', { href: api(`/v1/agents/${id}/generations/${g.gen}`), download: '' }, 'file'))));
    }
  }

  // -------------------------------------------------------- timeline
  let cssW = 0, cssH = 0;
  let drag = null; // { x0, x1 } in css px while the mouse is down
  let hover = null; // generation under the mouse

  // An ended session's timeline ends at its last contact (a range up to
  // now would be empty once it is older than the range).
  const ended = () => sess().fromAgents && !sess().connected && sess().lastSeenMs > 0;
  function endMs() {
    const now = serverNowMs();
    return ended() ? Math.min(now, sess().lastSeenMs + rangeMs * 0.05) : now;
  }

  function geometry() {
    const t1 = endMs(), t0 = t1 - rangeMs;
    const w = Math.max(10, cssW - PAD_L - PAD_R);
    return {
      t0, t1, w,
      x: (t) => PAD_L + ((t - t0) / (t1 - t0)) * w,
      t: (x) => t0 + ((x - PAD_L) / w) * (t1 - t0),
    };
  }

  function visibleGens(geo) {
    const rec = sess().recent;
    const out = [];
    for (let i = rec.length - 1; i >= 0; i--) {
      const g = rec[i];
      if (g.endMs < geo.t0) break;
      if (g.startMs <= geo.t1) out.push(g);
    }
    return out.reverse();
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const rect = canvas.getBoundingClientRect();
    cssW = Math.round(rect.width);
    cssH = Math.round(rect.height);
    if (cssW === 0) return;
    if (canvas.width !== cssW * dpr || canvas.height !== cssH * dpr) {
      canvas.width = cssW * dpr;
      canvas.height = cssH * dpr;
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    const geo = geometry();
    const gens = visibleGens(geo);
    const plotH = cssH - PAD_T - PAD_B;
    let max = 1;
    for (const g of gens) max = Math.max(max, g.events);

    // Grid and axis labels: about one label per 110 px.
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#6a7280';
    ctx.strokeStyle = '#eef0f3';
    const step = niceStep(((geo.t1 - geo.t0) / geo.w) * 110);
    for (let t = Math.ceil(geo.t0 / step) * step; t <= geo.t1; t += step) {
      const x = Math.round(geo.x(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, PAD_T);
      ctx.lineTo(x, PAD_T + plotH);
      ctx.stroke();
      ctx.textAlign = 'center';
      // A label cut by the right edge reads as a different time: skip it.
      if (x < cssW - 28) ctx.fillText(fmtClock(t, step < 1000 ? 1 : 0), x, cssH - 6);
    }
    ctx.textAlign = 'right';
    ctx.fillText(fmtCount(max), PAD_L - 6, PAD_T + 10);
    ctx.fillText('0', PAD_L - 6, PAD_T + plotH);
    ctx.save();
    ctx.translate(10, PAD_T + plotH / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'center';
    ctx.fillText('events', 0, 0);
    ctx.restore();

    // One bar per generation; square-root height so quiet generations stay
    // visible next to busy ones.
    let lostGens = 0;
    for (const g of gens) {
      const x0 = Math.max(PAD_L, geo.x(g.startMs));
      const x1 = Math.min(PAD_L + geo.w, geo.x(g.endMs));
      const bw = Math.max(1, x1 - x0 - 1);
      const bh = Math.max(2, Math.sqrt(g.events / max) * (plotH - 8));
      ctx.fillStyle = g.lost > 0 ? COL_LOST : (g === hover ? '#0e3f75' : COL_OK);
      ctx.fillRect(x0, PAD_T + plotH - bh, bw, bh);
      if (g.lost > 0) {
        lostGens++;
        ctx.fillRect(x0, PAD_T, bw, 3); // a loss stripe along the top
      }
    }
    ctx.strokeStyle = '#c4c9d1';
    ctx.beginPath();
    ctx.moveTo(PAD_L, PAD_T + plotH + 0.5);
    ctx.lineTo(PAD_L + geo.w, PAD_T + plotH + 0.5);
    ctx.stroke();

    if (drag) {
      const a = Math.min(drag.x0, drag.x1), b = Math.max(drag.x0, drag.x1);
      ctx.fillStyle = 'rgba(31,95,168,0.18)';
      ctx.fillRect(a, PAD_T, b - a, plotH);
      ctx.strokeStyle = '#1f5fa8';
      ctx.strokeRect(a + 0.5, PAD_T + 0.5, b - a, plotH);
    }
    if (gens.length === 0) {
      ctx.fillStyle = '#6a7280';
      ctx.textAlign = 'center';
      ctx.fillText('no generations in this range', PAD_L + geo.w / 2, PAD_T + plotH / 2);
    }
    // Read by tests and handy for debugging: what the canvas shows.
    tl.dataset.gens = String(gens.length);
    tl.dataset.lastGen = gens.length ? String(gens[gens.length - 1].gen) : '';
    tl.dataset.lostGens = String(lostGens);
  }

  function genAt(x) {
    const geo = geometry();
    const t = geo.t(x);
    for (const g of visibleGens(geo)) if (t >= g.startMs && t < g.endMs) return g;
    return null;
  }

  function localX(e) {
    return e.clientX - canvas.getBoundingClientRect().left;
  }

  canvas.addEventListener('pointerdown', (e) => {
    canvas.setPointerCapture(e.pointerId);
    drag = { x0: localX(e), x1: localX(e) };
  });
  canvas.addEventListener('pointermove', (e) => {
    const x = localX(e);
    if (drag) {
      drag.x1 = x;
      tip.hidden = true;
      draw();
      return;
    }
    const g = genAt(x);
    if (g !== hover) {
      hover = g;
      draw();
    }
    if (!g) {
      tip.hidden = true;
      return;
    }
    tip.textContent = '';
    tip.append(h('b', null, `generation ${g.gen}`),
      `\n${fmtClock(g.startMs)} – ${fmtClock(g.endMs)} (${fmtDur(g.endMs - g.startMs)})` +
      `\n${g.events} events, ${fmtBytes(g.bytes)}` + (g.lost > 0 ? `\n${g.lost} events lost` : '') +
      '\nclick to open this window');
    tip.hidden = false;
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 260) + 'px';
    tip.style.top = e.clientY + 14 + 'px';
  });
  canvas.addEventListener('pointerleave', () => {
    tip.hidden = true;
    if (hover) {
      hover = null;
      draw();
    }
  });
  canvas.addEventListener('pointerup', (e) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    draw();
    if (Math.abs(d.x1 - d.x0) < 4) {
      const g = genAt(d.x0);
      if (g) location.hash = windowRoute({ session: id }, g.start_ns, g.end_ns);
      return;
    }
    // A drag selects a time range; the window is asked for exactly that
    // range and the daemon answers with the whole generations overlapping it.
    const geo = geometry();
    const a = geo.t(Math.min(d.x0, d.x1)), b = geo.t(Math.max(d.x0, d.x1));
    location.hash = windowRoute({ session: id }, msToNs(a), msToNs(b));
  });
  canvas.addEventListener('pointercancel', () => {
    drag = null;
    draw();
  });

  // ------------------------------------------------------------ data
  let loadSeq = 0;
  async function loadHistory() {
    const my = ++loadSeq;
    try {
      const from = ended() ? Math.round(endMs() - rangeMs) + 'ms' : '-' + Math.round(rangeMs / 1000) + 's';
      const { json } = await getJSON(`/v1/agents/${id}/generations?from=${from}&limit=5000`);
      if (my !== loadSeq) return;
      fleet.mergeHistory(id, json.generations || []);
      err.textContent = '';
    } catch (e) {
      err.textContent = e.status === 404 ? 'This session is not in the store (retention may have removed it).' : String(e.message || e);
    }
  }

  let anchored = false;
  const schedule = onNextFrame(() => {
    // Once /v1/agents says the session ended: its history up to its end,
    // and quick links to windows before its end.
    if (!anchored && ended()) {
      anchored = true;
      loadHistory();
      for (const a of quick.querySelectorAll('a[data-last]')) {
        const w = lastWindow(sess(), serverNowMs(), Number(a.dataset.last));
        a.href = '#' + windowRoute({ session: id }, w.from, w.to);
      }
    }
    renderHead();
    renderTable();
    draw();
  });
  const unsub = fleet.subscribe(schedule);
  // The time axis follows the clock even between generations.
  const tick = setInterval(schedule, 500);
  const ro = new ResizeObserver(schedule);
  ro.observe(tl);
  loadHistory();
  schedule();
  return {
    dispose() {
      unsub();
      clearInterval(tick);
      ro.disconnect();
      tip.remove();
      loadSeq++;
    },
  };
}

const COL_OK = '#4a86c5';
const COL_LOST = '#d0453a';

// A round time step (ms) of at least `ms`.
export function niceStep(ms) {
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3,
    120e3, 300e3, 600e3, 900e3, 1800e3, 3600e3];
  for (const s of steps) if (s >= ms) return s;
  return 3600e3 * Math.ceil(ms / 3600e3);
}
