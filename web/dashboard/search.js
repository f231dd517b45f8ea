// search.js: the search view (#/search?name=&min=&max=&last=&service=):
// a form, the per-name latency histograms of the range (click a bar: the
// spans of that bucket), and the matching spans, each opening the window
// around it.
'use strict';

import { h, getJSON, hashLink, windowRoute, fmtDateTime, nsToMs } from './api.js';
import { searchPath, summaryPath, spanWindow, histSlots, bucketQuery, selectedBar, fmtNs } from './searchq.js';

const FIELDS = ['name', 'min', 'max', 'last', 'service'];

function routeOf(f) {
  const q = new URLSearchParams();
  for (const k of FIELDS) if (f[k]) q.set(k, f[k]);
  return '/search?' + q.toString();
}

export function searchView(root, params, crumbs) {
  crumbs.append(hashLink('/', 'fleet'), ' / search');
  const f = {};
  for (const k of FIELDS) f[k] = params.get(k) || '';
  if (!f.last) f.last = '1h';
  const inputs = {};
  const hints = {
    name: 'name or prefix*, e.g. checkout.*', min: 'min, e.g. 200ms',
    max: 'max', last: 'last, e.g. 1h', service: 'service (any)',
  };
  const form = h('form#search-form.toolbar', null,
    ...FIELDS.map((k) => (inputs[k] = h('input', {
      id: 'search-' + k, placeholder: hints[k], value: f[k], 'aria-label': hints[k],
    }))),
    h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const nf = {};
    for (const k of FIELDS) nf[k] = inputs[k].value.trim();
    location.hash = '#' + routeOf(nf);
  });
  const hists = h('div#search-hists');
  const tbody = h('tbody#search-rows');
  const note = h('p.muted#search-note');
  const bucketNote = h('p#search-bucket');
  const more = h('button#search-more', { hidden: true }, 'More');
  root.append(h('h1', null, 'Search'), form, hists, bucketNote,
    h('div.tablewrap', null, h('table#search', null,
      h('thead', null, h('tr', null, h('th', null, 'start'), h('th.num', null, 'duration'),
        h('th', null, 'name'), h('th', null, 'service / host'), h('th.num', null, 'thread'),
        h('th', null, 'window'))), tbody)), more, note);

  const ctl = new AbortController();
  let cursor = null;
  async function page() {
    try {
      const d = (await getJSON(searchPath(f, cursor), ctl.signal)).json;
      for (const s of d.spans) {
        const w = spanWindow(s);
        tbody.append(h('tr', { dataset: { durationNs: String(s.duration_ns), name: s.name } },
          h('td', null, fmtDateTime(nsToMs(s.start_ns))),
          h('td.num', null, fmtNs(s.duration_ns)),
          h('td', null, s.name, s.kind === 'task' ? ' (task)' : ''),
          h('td', null, s.service + ' / ' + s.host),
          h('td.num', null, String(s.thread)),
          h('td', null, hashLink(windowRoute({ session: s.session }, w.from, w.to), 'open'))));
      }
      cursor = d.next_cursor;
      more.hidden = !cursor;
      note.textContent = tbody.children.length ? tbody.children.length + ' spans' : 'No span matches.';
    } catch (e) {
      if (e.name !== 'AbortError') note.textContent = String(e.message || e);
    }
  }
  more.addEventListener('click', page);

  async function summary() {
    try {
      const d = (await getJSON(summaryPath(f), ctl.signal)).json;
      for (const n of d.names.slice(0, 12)) {
        // On the log axis, empty buckets included; a click lists the spans
        // of that bucket (min = its lower bound, max = just under its upper).
        const bars = histSlots(n.buckets);
        const sel = f.name === n.name ? selectedBar(bars, f) : -1;
        const row = h('div.hist-bars');
        bars.forEach((b, i) => {
          const range = fmtNs(b.lo) + (b.hi === null ? '+' : ' - ' + fmtNs(b.hi));
          const a = h('a.hist-bar' + (b.count ? '' : '.empty') + (i === sel ? '.sel' : ''), {
            href: '#' + routeOf(bucketQuery({ ...f, name: n.name }, b)),
            title: range + ': ' + b.count + (b.count ? ' (click: list them)' : ''),
            'aria-current': i === sel ? 'true' : null,
            dataset: { lo: String(b.lo), hi: b.hi === null ? '' : String(b.hi), count: String(b.count), name: n.name },
          });
          // Through the CSSOM: the page's CSP refuses inline style attributes.
          a.style.height = (b.count ? Math.max(2, Math.round(b.frac * 40)) : 1) + 'px';
          row.append(a);
          if (i === sel) bucketNote.textContent = `Spans of ${n.name} from ${range} (${b.count} in the summary's generations):`;
        });
        hists.append(h('div.hist', null,
          h('div.hist-name', null, n.name, ' ', h('span.muted', null,
            n.count + ' x, p50 ' + fmtNs(n.p50_ns) + ', p99 ' + fmtNs(n.p99_ns) +
            ', max ' + fmtNs(n.max_ns))), row));
      }
    } catch (e) {
      if (e.name !== 'AbortError') hists.append(h('p.error', null, String(e.message || e)));
    }
  }
  if (f.name || f.min) page(); else note.textContent = 'Give a name or a minimum duration.';
  summary();
  return { dispose() { ctl.abort(); } };
}
