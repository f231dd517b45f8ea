// flameview.js: the window view's aggregate flame panel: an icicle drawing
// (root on top, children below their parent, widths by time) of the region
// tree or of the recorded stacks of what the viewer shows, with the paths
// holding the most self time as a table. The trees come from flame.js
// (pure); this file draws and takes clicks: a click on a box shows its
// subtree, a click on the top box goes one level up.
//
// Invariant: every drawing rewrites the panel's data-* hooks (mode, the
// focus, the boxes of the first levels, totals), so tests read what is
// on screen, not a stale picture.
'use strict';

import { h, fmtDur, fmtCount } from './api.js';
import { colorOf, fitLabel } from './layout.js';
import { buildTrees, icicle, topPaths } from './flame.js';

const BOX_H = 18;
const MAX_HOOK = 60;

const dur = (us) => fmtDur(us / 1000);

export function createFlame(root) {
  let mode = 'regions';
  let focus = [];
  let trees = null;
  let rects = [];
  let byCount = false;
  let why = ''; // why the trees are empty, from the caller
  const tabs = {
    regions: h('button.small#flame-regions', { 'aria-pressed': 'true', title: 'Nested region names, summed over threads and sessions' }, 'region tree'),
    stacks: h('button.small#flame-stacks', { 'aria-pressed': 'false', title: 'Recorded stacks of region begins and instants, outermost frame on top' }, 'stacks'),
  };
  const up = h('button.small#flame-reset', { title: 'Back to the whole tree' }, 'whole tree');
  const caption = h('span.muted#flame-caption');
  const canvas = h('canvas', { 'aria-label': 'Aggregate flame view; click a box to see its subtree' });
  const box = h('div.flamebox', null, canvas);
  const tbody = h('tbody#flame-top');
  const tip = h('div.tip', { hidden: true });
  const panel = h('section.flame#flame', null,
    h('div.toolbar', null, h('b', null, 'Flame'), tabs.regions, tabs.stacks, up, caption),
    box,
    h('div.tablewrap', null, h('table', null,
      h('thead', null, h('tr', null, h('th', null, 'path (most self time first)'),
        h('th.num', null, 'self'), h('th.num', null, 'total'), h('th.num', null, 'count'))),
      tbody)));
  root.append(panel);
  document.body.append(tip);

  for (const [k, b] of Object.entries(tabs))
    b.addEventListener('click', () => {
      mode = k;
      focus = [];
      for (const [kk, bb] of Object.entries(tabs)) bb.setAttribute('aria-pressed', String(kk === k));
      render();
    });
  up.addEventListener('click', () => {
    focus = [];
    render();
  });

  function tree() {
    return trees ? trees[mode] : null;
  }

  function render() {
    const t = tree();
    const lay = t ? icicle(t, focus) : { rects: [], byCount: false, focus: [] };
    rects = lay.rects;
    byCount = lay.byCount;
    focus = lay.focus;
    draw();
    renderTable(t);
    const empty = !t || (t.total <= 0 && t.count <= 0);
    caption.textContent = empty
      ? why || (mode === 'stacks' ? 'no stacks recorded in view (agents record them with GENTRACE_STACKS=1)' : 'no regions in view')
      : (mode === 'stacks' ? `${fmtCount(trees.stackEvents)} events with stacks; ` : '') +
        (byCount ? `${fmtCount(t.count)} events` : `${dur(t.total)} in regions`) +
        (focus.length ? ` · showing ${focus.join(' › ')}` : '') + ' · of the loaded generations in view';
    panel.dataset.mode = mode;
    panel.dataset.focus = JSON.stringify(focus);
    panel.dataset.total = String(t ? t.total : 0);
    panel.dataset.stackEvents = String(trees ? trees.stackEvents : 0);
    panel.dataset.nodes = JSON.stringify(rects.filter((r) => r.depth === 1).slice(0, MAX_HOOK).map((r) => r.node.name));
    panel.dataset.paths = JSON.stringify(rects.filter((r) => r.depth >= 1 && r.depth <= 3).slice(0, MAX_HOOK).map((r) => r.path.join(' > ')));
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = box.clientWidth;
    const depth = rects.reduce((m, r) => Math.max(m, r.depth), 0) + 1;
    const hh = Math.max(BOX_H * 2, depth * BOX_H);
    canvas.style.width = w + 'px';
    canvas.style.height = hh + 'px';
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(hh * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hh);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const measure = (s) => ctx.measureText(s).width;
    for (const r of rects) {
      const x0 = r.x0 * w, x1 = r.x1 * w, y = r.depth * BOX_H;
      if (x1 - x0 < 0.5) continue;
      ctx.fillStyle = r.depth === 0 ? '#d5dbe3' : colorOf(r.node.name);
      ctx.fillRect(x0, y, Math.max(0.5, x1 - x0 - (x1 - x0 > 3 ? 1 : 0)), BOX_H - 1);
      const label = fitLabel(r.depth === 0 ? label0(r) : r.node.name, x1 - x0 - 6, measure);
      if (label) {
        ctx.fillStyle = '#1d2330';
        ctx.fillText(label, x0 + 3, y + BOX_H / 2);
      }
    }
  }

  function label0(r) {
    const t = tree();
    const what = byCount ? `${fmtCount(r.node.count)} events` : dur(r.node.total);
    return (focus.length ? '↑ ' + focus[focus.length - 1] : mode === 'stacks' ? 'all stacks' : 'all regions') + ' · ' + what +
      (t && focus.length && !byCount ? ` (${((r.node.total / Math.max(1e-9, t.total)) * 100).toFixed(1)}% of all)` : '');
  }

  function renderTable(t) {
    tbody.textContent = '';
    if (!t) return;
    for (const p of topPaths(t, 15)) {
      tbody.append(h('tr', null,
        h('td', { title: p.path.join(' › ') }, p.path.join(' › ')),
        h('td.num', null, byCount ? '–' : dur(p.self)),
        h('td.num', null, byCount ? '–' : dur(p.total)),
        h('td.num', null, fmtCount(p.count))));
    }
  }

  function rectAt(e) {
    const b = canvas.getBoundingClientRect();
    const x = (e.clientX - b.left) / b.width, d = Math.floor((e.clientY - b.top) / BOX_H);
    return rects.find((r) => r.depth === d && x >= r.x0 && x < r.x1) || null;
  }
  canvas.addEventListener('click', (e) => {
    const r = rectAt(e);
    if (!r) return;
    focus = r.depth === 0 ? focus.slice(0, -1) : r.path;
    tip.hidden = true;
    render();
  });
  canvas.addEventListener('pointermove', (e) => {
    const r = rectAt(e);
    if (!r) {
      tip.hidden = true;
      return;
    }
    const n = r.node;
    tip.textContent = '';
    tip.append(h('b', null, r.depth === 0 ? label0(r) : n.name),
      '\n' + (r.path.length ? r.path.join(' › ') + '\n' : '') +
      (byCount ? '' : `total ${dur(n.total)}, self ${dur(n.self)}\n`) + `${fmtCount(n.count)} ${mode === 'stacks' ? 'events' : 'regions'}` +
      (r.depth === 0 ? (focus.length ? '\nclick: one level up' : '') : '\nclick: show its subtree'));
    tip.hidden = false;
    tip.style.left = Math.max(4, Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8)) + 'px';
    tip.style.top = e.clientY + 16 + 'px';
    panel.dataset.hover = n.name;
  });
  canvas.addEventListener('pointerleave', () => (tip.hidden = true));
  const ro = new ResizeObserver(() => draw());
  ro.observe(box);

  return {
    // The trees of `model` over the view [v0, v1] (µs), drawn at once;
    // `note` says why nothing may be in them (the view shows an overview).
    update(model, v0, v1, note = '') {
      why = note;
      trees = model ? buildTrees(model, v0, v1) : null;
      render();
    },
    // Test and console hook: the client position of a box by its path.
    locate(path) {
      const b = canvas.getBoundingClientRect();
      const r = rects.find((x) => x.path.join(' > ') === path);
      return r ? { x: b.left + ((r.x0 + r.x1) / 2) * b.width, y: b.top + r.depth * BOX_H + BOX_H / 2 } : null;
    },
    dispose() {
      ro.disconnect();
      tip.remove();
      panel.remove();
    },
  };
}
