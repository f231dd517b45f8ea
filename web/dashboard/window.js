// window.js: the window view (#/window?session=ID&from=NS&to=NS, or
// service=&host=, or last=10s): lists the window's generations, draws
// their overview at once and loads the generations in view one by one as
// Chrome JSON (loader.js keeps the bookkeeping, viewer.js draws), so a
// window of any length opens; offers the same window as files (gentrace,
// Chrome JSON), as a curl command, and in Perfetto UI.
'use strict';

import {
  h, api, getBytes, getJSON, hashLink, fmtBytes, fmtCount, fmtDateTime, fmtDur, ns, msToNs,
  serverNowMs, windowRoute,
} from './api.js';
import { buildModel, createViewer } from './viewer.js';
import { mergeModels, shiftModel } from './model.js';
import { openInPerfetto } from './perfetto.js';
import { createFlame } from './flameview.js';
import { pinControl } from './pins.js';
import { VIEW_BUDGET, CACHE_BYTES, MAX_INFLIGHT, LRU, genEntry, plan, density } from './loader.js';

// The most Chrome JSON of one generation the page will parse (a generation
// is bounded by the agent's buffer; this only stops a hostile answer).
const MAX_GEN_JSON = 256 << 20;
// The most Chrome JSON handed to Perfetto from the page; beyond it the
// button downloads the window as a Perfetto file instead.
const MAX_PERFETTO_JSON = 512 << 20;

// Parses a duration like the API does for the common cases (30s, 500ms,
// 2m, 1h), to turn last= into fixed times.
function durMs(s) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(s || '');
  if (!m) return null;
  return Number(m[1]) * { ms: 1, s: 1e3, m: 60e3, h: 3600e3 }[m[2]];
}

export function windowView(root, params, crumbs) {
  const sel = {};
  for (const k of ['session', 'service', 'host']) if (params.get(k)) sel[k] = params.get(k);
  if (!sel.session && !sel.service) {
    root.append(h('p.error', null, 'A window needs session= or service= (', hashLink('/', 'choose one in the fleet'), ').'));
    return null;
  }
  // last= becomes fixed times at once, so the address can be shared and
  // still shows the same data later.
  let from = params.get('from'), to = params.get('to');
  const last = durMs(params.get('last'));
  if (last !== null || !from) {
    const t1 = msToNs(serverNowMs());
    from = String(t1 - msToNs(last !== null ? last : 10000));
    to = String(t1);
    history.replaceState(null, '', '#' + windowRoute(sel, from, to));
  }
  if (!to) to = String(msToNs(serverNowMs()));

  crumbs.append(hashLink('/', 'fleet'), ' / ');
  if (sel.session) crumbs.append(hashLink('/session/' + sel.session, sel.session.slice(0, 12)), ' / ');
  else crumbs.append(h('span', null, sel.service + (sel.host ? ' @ ' + sel.host : '')), ' / ');
  crumbs.append('window');

  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(sel)) q.set(k, v);
  q.set('from', from);
  q.set('to', to);
  const traceGentrace = '/v1/trace?' + q.toString();
  const traceChrome = traceGentrace + '&format=chrome';
  const tracePerfetto = traceGentrace + '&format=perfetto';

  const fromNs = ns(from), toNs = ns(to);
  const lenMs = Number((toNs - fromNs) / 1000n) / 1000;
  const what = sel.session ? `session ${sel.session.slice(0, 12)}` : `service ${sel.service}` + (sel.host ? ` on ${sel.host}` : '');
  const span = h('span.span', null, `${fmtDateTime(Number(fromNs / 1000000n))} + ${fmtDur(lenMs)}`);
  const facts = h('span.muted#window-facts');
  const shift = (f) => {
    const d = BigInt(Math.round(Number(toNs - fromNs) * f));
    location.hash = windowRoute(sel, fromNs + d, toNs + d);
  };

  // Downloads are plain links: the daemon's Content-Disposition names the
  // file, and the browser streams it to disk without holding it here.
  const dlGentrace = h('a.button.primary#download-gentrace', { href: api(traceGentrace), download: '' }, 'Download .gentrace');
  const dlChrome = h('a.button#download-chrome', { href: api(traceChrome), download: '' }, 'Chrome JSON');
  const curlCmd = curlFor(traceGentrace);
  const curlIn = h('input#curl', { readonly: true, value: curlCmd, 'aria-label': 'curl command for this window' });
  const copyBtn = h('button.small', {
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(curlCmd);
      } catch (_) {
        // No clipboard API (an insecure origin): select it for Ctrl+C.
        curlIn.select();
        document.execCommand('copy');
      }
      copyBtn.textContent = 'copied';
      setTimeout(() => (copyBtn.textContent = 'copy'), 1500);
    },
  }, 'copy');
  const perfettoBtn = h('button#open-perfetto', { disabled: true, title: 'Open this window in ui.perfetto.dev (needs the internet; without it, downloads a Perfetto trace)' }, 'Open in Perfetto');
  // Offline, the button says what it will do instead of hanging.
  const showOnline = () => (perfettoBtn.textContent = navigator.onLine ? 'Open in Perfetto' : 'Download for Perfetto');
  window.addEventListener('online', showOnline);
  window.addEventListener('offline', showOnline);
  showOnline();
  // The fallback when the Perfetto UI cannot load: the same window as
  // Perfetto's own trace format, saved by the browser, with a message
  // saying how to open it.
  const perfettoFallback = (why) => {
    const a = h('a#perfetto-fallback-link', { href: api(tracePerfetto), download: '' }, 'the .pftrace file');
    document.body.append(a);
    a.click();
    a.remove();
    const msg = h('span.error#perfetto-fallback', null,
      ` · ${why}: downloading this window as a Perfetto trace instead; open it at ui.perfetto.dev (Open trace file) when online, or `,
      h('a', { href: api(tracePerfetto), download: '' }, 'download it again'), '.');
    const old = document.getElementById('perfetto-fallback');
    if (old) old.remove();
    facts.append(msg);
  };

  const pin = pinControl(sel, from, to);
  const zoomBtns = h('span.toolbar', null,
    h('button.small', { title: 'Earlier window of the same length', onclick: () => shift(-1) }, '← earlier'),
    h('button.small', { title: 'Later window of the same length', onclick: () => shift(1) }, 'later →'),
    h('button.small#zoom-in', { title: 'Zoom in (W)', onclick: () => viewer && viewer.zoom(0.5) }, '+'),
    h('button.small#zoom-out', { title: 'Zoom out (S)', onclick: () => viewer && viewer.zoom(2) }, '−'),
    h('button.small#zoom-reset', { title: 'Whole window (0)', onclick: () => viewer && viewer.reset() }, 'reset'),
    h('button.small#show-flame', {
      title: 'Aggregate flame view of the regions (and recorded stacks) in view', 'aria-pressed': 'false',
      onclick: (e) => toggleFlame(e.currentTarget),
    }, 'flame'));
  const body = h('div#window-body', null, h('p.progress', null, 'loading the window…'));
  const flameBox = h('div#flame-box');
  root.append(
    h('div.winhead', null, h('h1', null, 'Window: ', what), span, facts),
    h('div.toolbar', null, dlGentrace, dlChrome, perfettoBtn, pin.button, h('div.curl', null, curlIn, copyBtn)),
    pin.form, zoomBtns, body, flameBox);

  // The flame panel: built on demand, fed the drawn model and the view
  // (debounced: a drag moves the view every frame).
  let flame = null, flameTimer = 0, drawnModel = null;
  function toggleFlame(btn) {
    if (flame) {
      flame.dispose();
      flame = null;
    } else {
      flame = createFlame(flameBox);
      window.gentraceFlame = flame; // console and test hook
      refreshFlame();
    }
    btn.setAttribute('aria-pressed', String(!!flame));
  }
  let flameFed = null; // what the panel shows: a redraw for a hover needs no new trees
  function refreshFlame() {
    flameTimer = 0;
    if (!flame || !viewer) return;
    const [v0, v1] = viewer.view();
    if (flameFed && flameFed.flame === flame && flameFed.m === drawnModel && flameFed.v0 === v0 && flameFed.v1 === v1) return;
    flameFed = { flame, m: drawnModel, v0, v1 };
    flame.update(drawnModel, v0, v1, planned && !planned.detail
      ? 'the view holds too many events to load their regions (the viewer shows the overview): zoom in' : '');
  }
  const scheduleFlame = () => {
    if (flame && !flameTimer) flameTimer = setTimeout(refreshFlame, 150);
  };

  let viewer = null;
  // Test hook: settled() is true when nothing is pending (no frame queued,
  // no plan or flame refresh due, no generation loading), so the picture
  // and its data-* hooks stay as they are until the next input. A test
  // that reads a position and then moves the pointer there waits for it;
  // otherwise a generation landing in between moves what it aimed at.
  const hook = {
    settled: () => !!viewer && !viewer.pending() && !planTimer && !flameTimer && inflight.size === 0,
  };
  const ctl = new AbortController();
  const cache = new LRU(CACHE_BYTES);
  const inflight = new Set(), failed = new Map();
  const known = new Map(); // threads seen per session (mergeModels)
  // Per session, per thread, per generation: its event rate, remembered
  // after the generation's details are dropped, so a zoomed-out view
  // still shows which threads were busy where it has been looked at.
  const threadRates = new Map(), rateMax = new Map();
  let gens = [], bars = new Map(), skeleton = [], t0 = 0n, extent = 1, order = new Map();
  let windowEvents = 0;
  let shown = ''; // keys of the generations merged into the drawn model
  let shownSet = new Set();
  let planned = null, planTimer = 0, firstPaint = 0;
  const t0ms = performance.now();
  const state = h('span.loadstate#load-state');
  const setState = (mode, text) => {
    body.dataset.mode = mode;
    body.dataset.cached = String(cache.size);
    body.dataset.cacheBytes = String(cache.bytes);
    state.textContent = text;
  };
  const has = (k) => inflight.has(k) || failed.has(k);

  // The drawn model: the cached generations in view, merged (only those,
  // so a merge costs at most VIEW_BUDGET's worth of regions).
  function remodel() {
    const chunks = [];
    if (planned && planned.detail)
      for (const g of planned.visible) {
        const c = cache.get(g.key);
        if (c) chunks.push(c);
      }
    const keys = chunks.map((c) => c.key).join(',');
    if (keys === shown && viewer) return;
    shown = keys;
    shownSet = new Set(chunks.map((c) => c.key));
    drawnModel = mergeModels(chunks, skeleton, known, extent, t0);
    viewer.setModel(drawnModel);
    scheduleFlame();
  }

  function replan() {
    planTimer = 0;
    if (!viewer) return;
    const [v0, v1] = viewer.view();
    planned = plan(gens, v0, v1, VIEW_BUDGET, cache, { has });
    remodel();
    const n = planned.visible.length;
    if (!planned.detail) {
      setState('overview', `overview: ${n} generations, ${fmtCount(planned.events)} events in view; zoom in to under ${fmtCount(VIEW_BUDGET)} events to see regions`);
      return;
    }
    for (const g of planned.fetch) {
      if (inflight.size >= MAX_INFLIGHT) break;
      load(g);
    }
    const have = planned.visible.filter((g) => cache.has(g.key)).length;
    const bad = planned.visible.filter((g) => failed.has(g.key));
    setState(have === n ? 'detail' : 'loading', (have === n ? '' : `loading ${have}/${n} generations in view… `) +
      `${cache.size} decoded (${fmtBytes(cache.bytes)} JSON)` +
      (bad.length ? ` · generation ${bad[0].gen} failed: ${failed.get(bad[0].key)}` : ''));
  }
  const schedulePlan = () => {
    if (!planTimer) planTimer = setTimeout(replan, 60);
  };

  async function load(g) {
    inflight.add(g.key);
    try {
      const got = await getBytes(`/v1/agents/${encodeURIComponent(g.session)}/generations/${g.gen}?format=chrome`, MAX_GEN_JSON, ctl.signal);
      const doc = JSON.parse(new TextDecoder().decode(got.buffer));
      const model = buildModel(doc);
      let off = g.s;
      try {
        if (model.startNs !== null) off = Number(model.startNs - t0) / 1000;
      } catch (_) {
        // No start in the metadata: the listing's start will do.
      }
      const pinned = new Set(planned && planned.detail ? planned.visible.map((x) => x.key) : []);
      shiftModel(model, off); // once, so merges share its objects
      rememberRates(g, model);
      cache.set(g.key, { key: g.key, proc: g.session, order: order.get(g.session), model, off: 0, s: off }, got.buffer.byteLength, pinned);
      if (!firstPaint) {
        firstPaint = performance.now() - t0ms;
        body.dataset.firstDetailMs = String(Math.round(firstPaint));
      }
    } catch (e) {
      if (e.name === 'AbortError') return;
      failed.set(g.key, String(e.message || e));
    } finally {
      inflight.delete(g.key);
    }
    shown = ''; // the cached set changed
    schedulePlan();
  }

  function rememberRates(g, model) {
    let per = threadRates.get(g.session);
    if (!per) threadRates.set(g.session, (per = new Map()));
    for (const p of model.procs.values())
      for (const t of p.threads.values()) {
        let n = t.marks.length;
        for (const row of t.rows) n += row.length;
        const r = n / Math.max(1, g.e - g.s);
        let m = per.get(t.tid);
        if (!m) per.set(t.tid, (m = new Map()));
        m.set(g.key, r);
        rateMax.set(g.session, Math.max(rateMax.get(g.session) || 0, r));
      }
  }

  (async () => {
    try {
      // The sessions of the window, then each one's generations in it.
      let sessions = [];
      if (sel.session) sessions = [{ session: sel.session, name: `session ${sel.session.slice(0, 12)}` }];
      else {
        const aq = new URLSearchParams({ service: sel.service });
        if (sel.host) aq.set('host', sel.host);
        const { json } = await getJSON('/v1/agents?' + aq.toString(), ctl.signal);
        sessions = (json.agents || []).map((a) => ({ session: a.session, name: `${a.service} (${a.host} pid ${a.pid})` }));
      }
      const lists = [];
      for (const se of sessions) {
        // Paged by generation number (a listing page holds at most 100,000).
        const all = [];
        for (let after = null; ;) {
          const gq = new URLSearchParams({ from, to, limit: '100000' });
          if (after !== null) gq.set('after', String(after));
          const { json } = await getJSON(`/v1/agents/${encodeURIComponent(se.session)}/generations?${gq}`, ctl.signal);
          const page = Array.isArray(json.generations) ? json.generations : [];
          for (const g of page) all.push(g); // not push(...page): 100k arguments
          if (page.length < 100000) break;
          after = page[page.length - 1].gen;
        }
        lists.push({ se, gens: all });
      }
      let lo = null, hi = null, nGens = 0, bytes = 0, lost = 0, events = 0;
      for (const { gens: gl } of lists)
        for (const g of gl) {
          const a = BigInt(g.start_ns), b = BigInt(g.end_ns);
          if (lo === null || a < lo) lo = a;
          if (hi === null || b > hi) hi = b;
          nGens++;
          bytes += Number(g.bytes) || 0;
          lost += Number(g.lost) || 0;
          events += Number(g.events) || 0;
        }
      body.textContent = '';
      if (nGens === 0) {
        body.append(h('p.empty#window-empty', null, 'No generations in this window. Try a wider one: ',
          h('a', { href: '#' + windowRoute(sel, fromNs - 30000000000n, toNs) }, '30 s earlier start'), '.'));
        return;
      }
      windowEvents = events;
      t0 = lo;
      extent = Math.max(1, Number((hi - lo) / 1000n));
      lists.forEach(({ se, gens: gl }, i) => {
        order.set(se.session, i + 1);
        skeleton.push({ key: se.session, order: i + 1, name: se.name });
        const es = gl.map((g) => genEntry(se.session, g, t0)).sort((a, b) => a.s - b.s);
        bars.set(se.session, density(es));
        gens.push(...es);
      });
      gens.sort((a, b) => a.s - b.s);
      facts.textContent = `${nGens} generation${nGens === 1 ? '' : 's'}, ${sessions.length} session${sessions.length === 1 ? '' : 's'}` +
        `, ${fmtBytes(bytes)}, ${fmtCount(events)} events, covers ${fmtDateTime(Number(lo / 1000000n))} + ${fmtDur(extent / 1000)}`;
      if (lost > 0) facts.append(h('span.error', null, ` · ${fmtCount(lost)} events lost`));
      body.append(state);
      viewer = createViewer(body, mergeModels([], skeleton, known, extent, t0), {
        overview: (p) => bars.get(p.key),
        loaded: (k) => shownSet.has(k),
        threadRate: (pk, tid, gk) => {
          const m = threadRates.get(pk) && threadRates.get(pk).get(tid);
          const r = m && m.get(gk);
          return r === undefined ? null : r / (rateMax.get(pk) || 1);
        },
        onView: () => {
          schedulePlan();
          scheduleFlame();
        },
      });
      body.dataset.overviewMs = String(Math.round(performance.now() - t0ms));
      window.gentraceViewer = viewer; // console and test hook
      window.gentraceWindow = hook;
      perfettoBtn.disabled = false;
      replan();
    } catch (e) {
      if (e.name === 'AbortError') return;
      body.textContent = '';
      body.append(h('p.error#window-error', null, String(e.message || e)));
    }
  })();

  perfettoBtn.addEventListener('click', async () => {
    if (!navigator.onLine) {
      perfettoFallback('the browser is offline');
      return;
    }
    // About 70 bytes of Chrome JSON per event: a window that would not fit
    // is downloaded as a Perfetto file at once rather than after 512 MB.
    if (windowEvents * 70 > MAX_PERFETTO_JSON) {
      perfettoFallback(`this window (${fmtCount(windowEvents)} events) is too big to hand to Perfetto from the page`);
      return;
    }
    perfettoBtn.textContent = 'waiting for Perfetto…';
    try {
      const { buffer } = await getBytes(traceChrome, MAX_PERFETTO_JSON, ctl.signal);
      await openInPerfetto(buffer, `gentrace ${what} ${span.textContent}`);
    } catch (e) {
      perfettoFallback(e.message);
    } finally {
      showOnline();
    }
  });

  return {
    dispose() {
      ctl.abort();
      clearTimeout(planTimer);
      clearTimeout(flameTimer);
      if (flame) flame.dispose();
      if (window.gentraceFlame === flame) delete window.gentraceFlame;
      window.removeEventListener('online', showOnline);
      window.removeEventListener('offline', showOnline);
      if (viewer) viewer.dispose();
      if (window.gentraceViewer === viewer) delete window.gentraceViewer;
      if (window.gentraceWindow === hook) delete window.gentraceWindow;
    },
  };
}

// The same window for a terminal. The token, if any, goes in a header from
// an environment variable rather than into the command (shell history and
// screenshots keep commands).
function curlFor(path) {
  const url = location.origin + path;
  const auth = new URLSearchParams(location.search).get('token') ? ' -H "Authorization: Bearer $GENTRACE_READ_TOKEN"' : '';
  return `curl -sOJ${auth} '${url}'`;
}
