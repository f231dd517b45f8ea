// window.js: the window view (#/window?session=ID&from=NS&to=NS, or
// service=&host=, or last=10s): fetches the window as Chrome JSON from
// /v1/trace, draws it with viewer.js, and offers the same window as files
// (gentrace, Chrome JSON), as a curl command, and in Perfetto UI.
'use strict';

import {
  h, api, getBytes, hashLink, fmtBytes, fmtCount, fmtDateTime, fmtDur, ns, msToNs,
  serverNowMs, windowRoute,
} from './api.js';
import { buildModel, createViewer } from './viewer.js';
import { openInPerfetto } from './perfetto.js';

// The most Chrome JSON the page will parse and draw (about 30 s of the demo
// service); larger windows are for downloads and Perfetto.
const MAX_JSON_BYTES = 64 << 20;

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

  const zoomBtns = h('span.toolbar', null,
    h('button.small', { title: 'Earlier window of the same length', onclick: () => shift(-1) }, '← earlier'),
    h('button.small', { title: 'Later window of the same length', onclick: () => shift(1) }, 'later →'),
    h('button.small#zoom-in', { title: 'Zoom in (W)', onclick: () => viewer && viewer.zoom(0.5) }, '+'),
    h('button.small#zoom-out', { title: 'Zoom out (S)', onclick: () => viewer && viewer.zoom(2) }, '−'),
    h('button.small#zoom-reset', { title: 'Whole window (0)', onclick: () => viewer && viewer.reset() }, 'reset'));
  const body = h('div#window-body', null, h('p.progress', null, 'loading the window…'));
  root.append(
    h('div.winhead', null, h('h1', null, 'Window: ', what), span, facts),
    h('div.toolbar', null, dlGentrace, dlChrome, perfettoBtn, h('div.curl', null, curlIn, copyBtn)),
    zoomBtns, body);

  let viewer = null;
  let buffer = null;
  const ctl = new AbortController();
  (async () => {
    try {
      const got = await getBytes(traceChrome, MAX_JSON_BYTES, ctl.signal, (n) => {
        body.firstChild.textContent = `loading the window… ${fmtBytes(n)}`;
      });
      buffer = got.buffer;
      const hd = got.headers;
      const gens = hd.get('X-Gentrace-Generations') || '0';
      const sessions = hd.get('X-Gentrace-Sessions') || '0';
      const lost = Number(hd.get('X-Gentrace-Lost-Events') || 0);
      const s0 = hd.get('X-Gentrace-Start-Ns'), s1 = hd.get('X-Gentrace-End-Ns');
      let covered = '';
      if (s0 && s1) covered = `, covers ${fmtDateTime(Number(ns(s0) / 1000000n))} + ${fmtDur(Number((ns(s1) - ns(s0)) / 1000n) / 1000)}`;
      facts.textContent = `${gens} generation${gens === '1' ? '' : 's'}, ${sessions} session${sessions === '1' ? '' : 's'}` +
        `, ${fmtBytes(buffer.byteLength)} JSON${covered}`;
      if (lost > 0) facts.append(h('span.error', null, ` · ${fmtCount(lost)} events lost`));
      body.firstChild.textContent = 'drawing…';
      const doc = JSON.parse(new TextDecoder().decode(buffer));
      const model = buildModel(doc);
      body.textContent = '';
      if (model.events === 0 || gens === '0') {
        body.append(h('p.empty#window-empty', null, 'No generations in this window. Try a wider one: ',
          h('a', { href: '#' + windowRoute(sel, fromNs - 30000000000n, toNs) }, '30 s earlier start'), '.'));
        return;
      }
      facts.append(` · ${fmtCount(model.events)} trace events`);
      viewer = createViewer(body, model);
      window.gentraceViewer = viewer; // console and test hook
      perfettoBtn.disabled = false;
    } catch (e) {
      if (e.name === 'AbortError') return;
      body.textContent = '';
      body.append(h('p.error#window-error', null, String(e.message || e)));
    }
  })();

  perfettoBtn.addEventListener('click', async () => {
    if (!buffer) return;
    if (!navigator.onLine) {
      perfettoFallback('the browser is offline');
      return;
    }
    perfettoBtn.textContent = 'waiting for Perfetto…';
    try {
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
      window.removeEventListener('online', showOnline);
      window.removeEventListener('offline', showOnline);
      if (viewer) viewer.dispose();
      if (window.gentraceViewer === viewer) delete window.gentraceViewer;
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
