// viewer.js: a trace viewer on canvas for one window, drawn from the Chrome
// JSON the daemon exports (format=chrome), so there is one decoder (proto/)
// and the page never parses the binary format. This file draws and takes
// input; the model is built by model.js and laid out by layout.js.
//
// Model (buildModel): per process (one synthetic pid per session) its
// threads, each with its regions as nested slices (B/E matched per thread,
// one row per depth) and its marks (instants, logs, lost markers); its
// async tasks (b/e) packed into rows; its counters (C) as series.
// Times are microseconds from the window start, as in the JSON.
//
// Invariants:
//  1. The slices of one row MUST be sorted by start and not overlap, so the
//     ends are sorted too and a binary search on the end finds the first
//     visible one; otherwise panning a long trace would scan every slice.
//  2. The view [v0, v1] MUST stay inside [0, extent] and at least MIN_SPAN
//     wide, otherwise zooming in forever reaches float noise and NaN.
//  3. Every draw MUST rewrite the data-* hooks (lanes, drawn region names,
//     view span), otherwise tests and tools read a stale picture.
//  4. The page has one scroll bar: the viewer is as tall as its lanes and
//     its canvas sticks below the page header, drawing the lanes the page
//     has scrolled to (no scrolling container of its own).
//  5. A tooltip is shown only while the pointer is over the item it
//     describes: it follows the pointer and goes on leave, scroll, wheel,
//     drag, blur and dispose.
//  6. A task's link (an arrow from the thread that began it to the thread
//     that ended it) is drawn only for the task under the pointer or the
//     one clicked, and data-task-link says which, so a dense tasks lane
//     never turns into a web of arrows.
'use strict';

import { h, fmtClock } from './api.js';
import { buildModel } from './model.js';
import {
  ROW_H, MARK_H, PROC_H, COUNTER_H, RULER_H, MIN_SPAN,
  layout, colorOf, fitLabel, lowerBound, niceTick, fmtRel, fmtTick, argsText, taskEnds,
} from './layout.js';

export { buildModel };

const MAX_HOOK_NAMES = 500;
const MARK_COL = { instant: '#7b3fb0', log: '#c98a00', lost: '#d0453a' };


// --------------------------------------------------------------- viewer

// Mounts a viewer in `root`. Returns { zoom(f), reset(), pan(f),
// setModel(m), redraw(), dispose() }. opts.overview(proc) may return the
// density bars of a proc's generations ([{ s, e, d (0..1), lost, key }]) and
// opts.loaded(key) whether that generation's details are drawn; opts.onView
// hears every view change (window.js loads what the view needs).
export function createViewer(root, model, opts = {}) {
  let lanes, height;
  const canvas = h('canvas', { tabindex: '0', 'aria-label': 'Trace viewer; Ctrl+wheel or W/S to zoom, drag or A/D to pan' });
  const wrap = h('div.viewer#viewer', null, canvas);
  const help = h('div.help', null, 'drag: pan · Ctrl+wheel or W/S: zoom · A/D: pan · 0: reset · click: details');
  const tip = h('div.tip', { hidden: true });
  const details = h('div.details#details', null, 'Hover a region, mark or counter for details; click to keep them here.');
  root.append(help, wrap, details);
  document.body.append(tip);
  const header = document.querySelector('header.top');
  let stickTop = 0;
  // Invariant 4: how far the page has scrolled into the lanes.
  const scrollY = () => Math.max(0, Math.min(height + RULER_H - cssH, stickTop - wrap.getBoundingClientRect().top));
  const measure = (t) => canvasCtx().measureText(t).width;
  const canvasCtx = () => canvas.getContext('2d');
  let hoverTask = null, pickedTask = null; // { item, lane } (invariant 6)
  const hideTip = () => {
    tip.hidden = true;
    wrap.dataset.hover = '';
    if (hoverTask) {
      hoverTask = null;
      schedule();
    }
  };

  let v0 = 0, v1 = model.extent; // invariant 2
  let cssW = 0, cssH = 0;
  let labelW = 160;
  let hits = null;
  let selected = null;
  const startMs = model.startNs !== null ? Number(model.startNs / 1000n) / 1000 : null;

  function setModel(m) {
    model = m;
    ({ lanes, height } = layout(model));
    wrap.style.height = height + RULER_H + 'px';
    wrap.dataset.lanes = JSON.stringify(lanes.filter((l) => l.kind === 'thread').map((l) => `${l.proc.name} / ${l.label}`));
    wrap.dataset.counters = JSON.stringify(lanes.filter((l) => l.kind === 'counter').map((l) => l.label));
    if (selected && !lanes.length) selected = null;
    // A new model has new lanes (and joined tasks are new objects): the
    // picked task is found again by its id, else let go.
    for (const k of ['pickedTask', 'hoverTask']) {
      const lt = k === 'pickedTask' ? pickedTask : hoverTask;
      if (!lt) continue;
      const lane = lanes.find((l) => l.kind === 'tasks' && l.proc.key === lt.lane.proc.key && l.proc.pid === lt.lane.proc.pid);
      const item = lane && lane.rows.flat().find((x) => x.id === lt.item.id && x.s <= lt.item.e && x.e >= lt.item.s);
      const v = item ? { item, lane } : null;
      if (k === 'pickedTask') pickedTask = v;
      else hoverTask = v;
    }
    hits = null;
    schedule();
  }

  function clampView() {
    let span = Math.max(MIN_SPAN, v1 - v0);
    if (span > model.extent) span = model.extent;
    if (v0 < 0) v0 = 0;
    if (v0 + span > model.extent) v0 = model.extent - span;
    v1 = v0 + span;
  }

  const xOf = (t) => labelW + ((t - v0) / (v1 - v0)) * (cssW - labelW);
  const tOf = (x) => v0 + ((x - labelW) / (cssW - labelW)) * (v1 - v0);

  let queued = false;
  function schedule() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      draw();
    });
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    cssW = wrap.clientWidth;
    stickTop = header ? header.offsetHeight : 0;
    canvas.style.top = stickTop + 'px';
    cssH = Math.max(120, Math.min(window.innerHeight - stickTop, height + RULER_H));
    labelW = cssW < 600 ? 96 : 170;
    if (cssW <= labelW + 10) return;
    canvas.style.width = cssW + 'px';
    canvas.style.height = cssH + 'px';
    if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const sy = scrollY();
    const drawn = new Set();
    hits = [];

    // Lanes, clipped below the ruler.
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, RULER_H, cssW, cssH - RULER_H);
    ctx.clip();
    for (const lane of lanes) {
      const y = RULER_H + lane.y - sy;
      if (y + lane.h < RULER_H || y > cssH) continue;
      drawLane(ctx, lane, y, drawn);
    }
    drawTaskLink(ctx, sy);
    ctx.restore();
    drawRuler(ctx);

    // Invariant 3.
    wrap.dataset.drawnRegions = JSON.stringify([...drawn].slice(0, MAX_HOOK_NAMES));
    wrap.dataset.viewStart = String(v0);
    wrap.dataset.viewEnd = String(v1);
    wrap.dataset.extent = String(model.extent);
    if (opts.onView) opts.onView(v0, v1);
  }

  // Invariant 6: the picked (else hovered) task, outlined in its lane, and
  // an arrow from its begin (on the thread that began it) to its end (on
  // the thread that ended it), across generations once they are joined.
  function drawTaskLink(ctx, sy) {
    const lt = pickedTask || hoverTask;
    if (!lt || !lanes.includes(lt.lane)) {
      wrap.dataset.taskLink = '';
      return;
    }
    const t = lt.item;
    const ends = taskEnds(t, lt.lane.proc, lanes);
    const row = lt.lane.rows.findIndex((r) => r.includes(t));
    ctx.strokeStyle = '#1d2330';
    ctx.lineWidth = 1.5;
    if (row >= 0) {
      const y = RULER_H + lt.lane.y - sy + 2 + row * ROW_H;
      ctx.strokeRect(Math.max(labelW, xOf(t.s)), y, Math.max(2, Math.min(cssW, xOf(t.e)) - Math.max(labelW, xOf(t.s))), ROW_H - 2);
    }
    const pt = (end) => end && { x: xOf(end.t), y: RULER_H + end.lane.y - sy + MARK_H + ROW_H / 2 };
    const a = pt(ends.from), b = pt(ends.to);
    const dot = (p, col) => {
      ctx.fillStyle = col;
      ctx.beginPath();
      ctx.arc(p.x, p.y, 4, 0, 2 * Math.PI);
      ctx.fill();
      ctx.stroke();
    };
    if (a && b) {
      // A curve bowing away from the lanes between, ending in a head.
      const mx = (a.x + b.x) / 2, my = Math.min(a.y, b.y) - 18;
      ctx.strokeStyle = '#c0392b';
      ctx.beginPath();
      ctx.moveTo(a.x, a.y);
      ctx.quadraticCurveTo(mx, my, b.x, b.y);
      ctx.stroke();
      const ang = Math.atan2(b.y - my, b.x - mx);
      ctx.fillStyle = '#c0392b';
      ctx.beginPath();
      ctx.moveTo(b.x, b.y);
      ctx.lineTo(b.x - 9 * Math.cos(ang - 0.4), b.y - 9 * Math.sin(ang - 0.4));
      ctx.lineTo(b.x - 9 * Math.cos(ang + 0.4), b.y - 9 * Math.sin(ang + 0.4));
      ctx.closePath();
      ctx.fill();
    }
    ctx.strokeStyle = '#1d2330';
    if (a) dot(a, '#2e9e5b');
    if (b) dot(b, '#c0392b');
    ctx.lineWidth = 1;
    const name = (end) => (end ? `${end.lane.proc.name} / ${end.lane.label}` : null);
    wrap.dataset.taskLink = JSON.stringify({ name: t.name, from: name(ends.from), to: name(ends.to), joined: !!t.joined });
  }

  function drawRuler(ctx) {
    ctx.fillStyle = '#f5f7fa';
    ctx.fillRect(0, 0, cssW, RULER_H);
    ctx.strokeStyle = '#dde1e7';
    ctx.beginPath();
    ctx.moveTo(0, RULER_H - 0.5);
    ctx.lineTo(cssW, RULER_H - 0.5);
    ctx.stroke();
    const step = niceTick(((v1 - v0) / (cssW - labelW)) * 90);
    ctx.fillStyle = '#6a7280';
    ctx.textAlign = 'left';
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      if (x < labelW) continue;
      ctx.strokeStyle = '#c4c9d1';
      ctx.beginPath();
      ctx.moveTo(x, RULER_H - 6);
      ctx.lineTo(x, RULER_H);
      ctx.stroke();
      ctx.fillText(fmtTick(t, step), x + 3, RULER_H / 2);
    }
    // The gutter names the clock time at the view's left edge; the ticks
    // are offsets from the window start.
    ctx.fillStyle = '#f5f7fa';
    ctx.fillRect(0, 0, labelW, RULER_H - 1);
    ctx.fillStyle = '#1d2330';
    const left = startMs !== null ? fmtClock(startMs + v0 / 1000) : 'time';
    ctx.fillText(labelW > 120 ? 'at ' + left : left, 6, RULER_H / 2);
    // Vertical grid lines through the lanes help reading alignment.
    ctx.strokeStyle = 'rgba(0,0,0,0.05)';
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = Math.round(xOf(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, RULER_H);
      ctx.lineTo(x, cssH);
      ctx.stroke();
    }
  }

  function laneLabel(ctx, lane, y, bold) {
    ctx.fillStyle = lane.kind === 'proc' ? '#e6ecf3' : '#fafbfc';
    ctx.fillRect(0, y, labelW, lane.h);
    ctx.fillStyle = '#1d2330';
    ctx.font = bold ? '600 11px system-ui, sans-serif' : '11px system-ui, sans-serif';
    ctx.textAlign = 'left';
    ctx.fillText(fitLabel(lane.label, labelW - 10, measure), 6, y + Math.min(lane.h / 2, 10));
    if (lane.sub && lane.h > 26) {
      ctx.fillStyle = '#6a7280';
      ctx.fillText(fitLabel(lane.sub, labelW - 10, measure), 6, y + 22);
    }
    ctx.font = '11px system-ui, sans-serif';
    ctx.strokeStyle = '#dde1e7';
    ctx.beginPath();
    ctx.moveTo(0, y + lane.h - 0.5);
    ctx.lineTo(cssW, y + lane.h - 0.5);
    ctx.moveTo(labelW - 0.5, y);
    ctx.lineTo(labelW - 0.5, y + lane.h);
    ctx.stroke();
  }

  function drawLane(ctx, lane, y, drawn) {
    if (lane.kind === 'proc') {
      ctx.fillStyle = '#eef3f9';
      ctx.fillRect(labelW, y, cssW - labelW, lane.h);
      drawOverview(ctx, lane.proc, y, lane.h);
      drawMarks(ctx, lane.proc.marks, y + 5, lane);
      laneLabel(ctx, lane, y, true);
      return;
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(labelW, y, cssW - labelW, lane.h);
    ctx.clip();
    if (lane.kind === 'thread') {
      drawPending(ctx, lane.proc, y, lane.h, lane.thread.tid);
      drawMarks(ctx, lane.thread.marks, y + 1, lane);
      lane.thread.rows.forEach((row, d) => drawRow(ctx, row, y + MARK_H + d * ROW_H, lane, drawn));
    } else if (lane.kind === 'tasks') {
      lane.rows.forEach((row, d) => drawRow(ctx, row, y + 2 + d * ROW_H, lane, null));
    } else if (lane.kind === 'counter') {
      drawCounter(ctx, lane.counter, y, lane);
    }
    ctx.restore();
    laneLabel(ctx, lane, y, false);
  }

  // One depth of slices (invariant 1). Slices under a pixel merge into grey
  // runs, so a dense second costs a few hundred rectangles, not a million.
  function drawRow(ctx, row, y, lane, drawn) {
    const i0 = lowerBound(row, v0, (s) => s.e);
    const h0 = ROW_H - 2;
    // A run of regions under a pixel each takes the colour of its longest
    // region, so a dense lane still shows what it is busy with.
    let runX0 = -1, runX1 = -1, runName = '', runLen = -1;
    const flush = () => {
      if (runX1 >= runX0 && runX0 >= 0) {
        ctx.fillStyle = colorOf(runName);
        ctx.fillRect(runX0, y, Math.max(1, runX1 - runX0), h0);
      }
      runX0 = runX1 = -1;
      runLen = -1;
    };
    for (let i = i0; i < row.length; i++) {
      const s = row[i];
      if (s.s > v1) break;
      const x0 = xOf(s.s), x1 = xOf(s.e);
      const w = x1 - x0;
      if (w < 1.5) {
        if (runX0 >= 0 && x0 <= runX1 + 1) runX1 = Math.max(runX1, x1, x0 + 1);
        else {
          flush();
          runX0 = x0;
          runX1 = Math.max(x1, x0 + 1);
        }
        if (s.e - s.s > runLen) {
          runLen = s.e - s.s;
          runName = s.name;
        }
        continue;
      }
      flush();
      const cx0 = Math.max(x0, labelW - 1), cx1 = Math.min(x1, cssW + 1);
      ctx.fillStyle = s === selected ? '#f2c14e' : colorOf(s.name);
      ctx.fillRect(cx0, y, cx1 - cx0 - (w > 3 ? 1 : 0), h0);
      if (drawn) drawn.add(s.name);
      hits.push(s);
      if (cx1 - cx0 > 16) {
        // Only what fits inside its own bar (never over a neighbour).
        const label = fitLabel(s.name, cx1 - cx0 - 6, measure);
        if (label) {
          ctx.fillStyle = '#1d2330';
          ctx.textAlign = 'left';
          ctx.fillText(label, cx0 + 3, y + h0 / 2 + 0.5);
        }
      }
    }
    flush();
  }

  // The overview in a session's header lane: one bar per generation, its
  // height the generation's event rate relative to the busiest one, drawn
  // for every window length from the listing alone. Generations whose
  // details are not drawn (not loaded yet, or the view is too wide to
  // decode) are hatched in the lanes below by drawPending.
  function drawOverview(ctx, p, y, hh) {
    const bars = opts.overview ? opts.overview(p) : null;
    if (!bars || !bars.length) return;
    const i0 = lowerBound(bars, v0, (b) => b.e);
    for (let i = i0; i < bars.length && bars[i].s <= v1; i++) {
      const b = bars[i];
      const x0 = Math.max(labelW, xOf(b.s)), x1 = Math.min(cssW, xOf(b.e));
      const bh = Math.max(1, Math.round(b.d * (hh - 6)));
      ctx.fillStyle = b.lost ? 'rgba(208,69,58,0.55)' : 'rgba(31,95,168,0.35)';
      ctx.fillRect(x0, y + hh - 2 - bh, Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 1 : 0)), bh);
    }
  }

  // The thread lane where details are not drawn: the thread's remembered
  // event rate in that generation (once decoded) as a bar, else grey.
  function drawPending(ctx, p, y, hh, tid) {
    const bars = opts.overview && opts.loaded ? opts.overview(p) : null;
    if (!bars) return;
    const i0 = lowerBound(bars, v0, (b) => b.e);
    for (let i = i0; i < bars.length && bars[i].s <= v1; i++) {
      const b = bars[i];
      if (opts.loaded(b.key)) continue;
      const x0 = Math.max(labelW, xOf(b.s)), x1 = Math.min(cssW, xOf(b.e));
      const w = Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 1 : 0));
      ctx.fillStyle = '#eceef2';
      ctx.fillRect(x0, y, w, hh - 1);
      const r = opts.threadRate ? opts.threadRate(p.key, tid, b.key) : null;
      if (r !== null) {
        const bh = Math.max(1, Math.round(r * (hh - 6)));
        ctx.fillStyle = 'rgba(31,95,168,0.35)';
        ctx.fillRect(x0, y + hh - 2 - bh, w, bh);
      }
    }
  }

  function drawMarks(ctx, marks, y, lane) {
    if (!marks.length) return;
    const i0 = lowerBound(marks, v0, (m) => m.ts);
    let lastX = -10, lastKind = '';
    for (let i = i0; i < marks.length; i++) {
      const m = marks[i];
      if (m.ts > v1) break;
      const x = Math.round(xOf(m.ts));
      if (x === lastX && m.kind === lastKind) continue; // same pixel, same look
      lastX = x;
      lastKind = m.kind;
      ctx.fillStyle = MARK_COL[m.kind] || MARK_COL.instant;
      ctx.beginPath();
      ctx.moveTo(x, y);
      ctx.lineTo(x + 4, y + 5);
      ctx.lineTo(x, y + 10);
      ctx.lineTo(x - 4, y + 5);
      ctx.closePath();
      ctx.fill();
    }
  }

  function drawCounter(ctx, c, y, lane) {
    const top = y + 4, bot = y + lane.h - 4;
    // Scaled to the 99th percentile so one outlier (a slow request) does
    // not flatten the rest; points above it are clipped at the top.
    const lo = Math.min(0, c.min), hi = c.p99 > lo ? c.p99 : c.max > lo ? c.max : lo + 1;
    const yOf = (v) => bot - ((Math.min(v, hi) - lo) / (hi - lo)) * (bot - top);
    let i = Math.max(0, lowerBound(c.ts, v0, (t) => t) - 1);
    if (i >= c.ts.length) return;
    ctx.fillStyle = 'rgba(31,95,168,0.25)';
    ctx.strokeStyle = '#1f5fa8';
    ctx.beginPath();
    let x = Math.max(labelW, xOf(c.ts[i]));
    ctx.moveTo(x, bot);
    ctx.lineTo(x, yOf(c.v[i]));
    // Step graph through every point in view (a counter per request is a
    // few thousand points a second: cheap enough to draw them all).
    for (i = i + 1; i < c.ts.length; i++) {
      const nx = xOf(c.ts[i]);
      const yv = yOf(c.v[i]);
      ctx.lineTo(nx, yOf(c.v[i - 1]));
      ctx.lineTo(nx, yv);
      x = nx;
      if (c.ts[i] > v1) break;
    }
    ctx.lineTo(Math.min(cssW, Math.max(x, xOf(Math.min(v1, model.extent)))), yOf(c.v[Math.min(i, c.v.length - 1)]));
    ctx.stroke();
    ctx.lineTo(Math.min(cssW, Math.max(x, xOf(Math.min(v1, model.extent)))), bot);
    ctx.closePath();
    ctx.fill();
    ctx.fillStyle = '#6a7280';
    ctx.textAlign = 'right';
    ctx.fillText(c.max > hi ? `p99 ${c.p99} · max ${c.max}` : `max ${c.max}`, cssW - 6, y + 9);
  }

  // --------------------------------------------------------- hit test
  function laneAt(py) {
    const y = py - RULER_H + scrollY();
    for (const l of lanes) if (y >= l.y && y < l.y + l.h) return { lane: l, dy: y - l.y };
    return null;
  }

  function findSlice(row, t, tol) {
    let i = lowerBound(row, t - tol, (s) => s.e);
    let best = null;
    for (; i < row.length && row[i].s <= t + tol; i++) best = row[i];
    return best;
  }

  function findMark(marks, t, tol) {
    const i = lowerBound(marks, t - tol, (m) => m.ts);
    let best = null, bd = Infinity;
    for (let k = i; k < marks.length && marks[k].ts <= t + tol; k++) {
      const d = Math.abs(marks[k].ts - t);
      if (d < bd) {
        bd = d;
        best = marks[k];
      }
    }
    return best;
  }

  function itemAt(px, py) {
    if (px < labelW || py < RULER_H) return null;
    const hit = laneAt(py);
    if (!hit) return null;
    const { lane, dy } = hit;
    const t = tOf(px);
    const tol = ((v1 - v0) / (cssW - labelW)) * 3; // 3 px
    if (lane.kind === 'proc') {
      const m = findMark(lane.proc.marks, t, tol);
      return m && { type: 'mark', item: m, lane };
    }
    if (lane.kind === 'thread') {
      if (dy < MARK_H) {
        const m = findMark(lane.thread.marks, t, tol);
        return m && { type: 'mark', item: m, lane };
      }
      const d = Math.floor((dy - MARK_H) / ROW_H);
      const row = lane.thread.rows[d];
      const s = row && findSlice(row, t, tol / 3);
      return s && { type: 'slice', item: s, lane };
    }
    if (lane.kind === 'tasks') {
      const row = lane.rows[Math.floor((dy - 2) / ROW_H)];
      const s = row && findSlice(row, t, tol / 3);
      return s && { type: 'task', item: s, lane };
    }
    if (lane.kind === 'counter') {
      const c = lane.counter;
      const i = lowerBound(c.ts, t, (x) => x) - 1;
      if (i < 0) return null;
      return { type: 'counter', item: { name: c.name, ts: c.ts[i], value: c.v[i] }, lane };
    }
    return null;
  }

  function describe(hit) {
    const it = hit.item;
    const where = `${hit.lane.proc.name} / ${hit.lane.label}`;
    const at = (us) => fmtRel(us) + (startMs !== null ? ` (${fmtClock(startMs + us / 1000)})` : '');
    if (hit.type === 'slice' || hit.type === 'task') {
      return {
        title: it.name,
        text: `${hit.type === 'task' ? 'task' : 'region'}, ${fmtRel(it.e - it.s)}\nstart ${at(it.s)}\n${where}` +
          (hit.type === 'slice' ? `, depth ${it.depth}` : '') + (hit.type === 'task' ? taskThreads(hit) : '') +
          (it.open ? '\nstill open at the window end' : '') +
          (it.args ? '\n' + argsText(it.args) : '') + (it.endArgs ? '\n' + argsText(it.endArgs) : ''),
      };
    }
    if (hit.type === 'mark')
      return { title: it.name, text: `${it.kind} at ${at(it.ts)}\n${where}` + (it.args ? '\n' + argsText(it.args) : '') };
    return { title: it.name, text: `counter = ${it.value}\nsince ${at(it.ts)}\n${where}` };
  }

  function taskThreads(hit) {
    const ends = taskEnds(hit.item, hit.lane.proc, lanes);
    // A thread not known is in a generation not loaded (before the view,
    // or outside the window).
    const t = (end, tid) => (end ? end.lane.label : tid === null || tid === undefined ? '? (a generation not loaded)' : `thread ${tid}`);
    return `\nbegun on ${t(ends.from, hit.item.bt)}, ended on ${hit.item.open ? '? (not yet, or a generation not loaded)' : t(ends.to, hit.item.et)}` +
      (hit.item.joined ? '\n(crosses a generation edge)' : '');
  }

  function showTip(hit, e) {
    if (!hit) {
      hideTip();
      return;
    }
    const d = describe(hit);
    tip.textContent = '';
    tip.append(h('b', null, d.title), '\n' + d.text);
    tip.hidden = false;
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    tip.style.left = Math.max(4, Math.min(e.clientX + 14, window.innerWidth - tw - 8)) + 'px';
    tip.style.top = (e.clientY + 16 + th > window.innerHeight ? e.clientY - th - 10 : e.clientY + 16) + 'px';
    wrap.dataset.hover = d.title;
  }

  // ------------------------------------------------------ interaction
  function zoomAt(px, factor) {
    const t = tOf(px);
    const span = Math.min(model.extent, Math.max(MIN_SPAN, (v1 - v0) * factor));
    const f = (px - labelW) / (cssW - labelW);
    v0 = t - f * span;
    v1 = v0 + span;
    clampView();
    schedule();
  }
  function panBy(dt) {
    v0 += dt;
    v1 += dt;
    clampView();
    schedule();
  }

  canvas.addEventListener('wheel', (e) => {
    hideTip();
    const px = e.clientX - canvas.getBoundingClientRect().left;
    if (e.ctrlKey || e.metaKey || e.altKey) {
      e.preventDefault();
      zoomAt(Math.max(labelW, px), Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.002)));
    } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      const d = e.shiftKey ? e.deltaY || e.deltaX : e.deltaX;
      panBy((d / (cssW - labelW)) * (v1 - v0));
    }
    // A plain vertical wheel scrolls the lanes (native scrolling).
  }, { passive: false });

  let drag = null;
  canvas.addEventListener('pointerdown', (e) => {
    if (e.button !== 0) return;
    canvas.focus({ preventScroll: true });
    canvas.setPointerCapture(e.pointerId);
    drag = { x: e.clientX, y: e.clientY, v0, v1, top: window.scrollY, moved: false };
  });
  canvas.addEventListener('pointermove', (e) => {
    const r = canvas.getBoundingClientRect();
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      canvas.classList.add('dragging');
      const dt = (-dx / (cssW - labelW)) * (drag.v1 - drag.v0);
      v0 = drag.v0 + dt;
      v1 = drag.v1 + dt;
      clampView();
      window.scrollTo(window.scrollX, drag.top - dy);
      hideTip();
      schedule();
      return;
    }
    const hit = itemAt(e.clientX - r.left, e.clientY - r.top);
    showTip(hit, e);
    const ht = hit && hit.type === 'task' ? hit : null;
    if ((ht && ht.item) !== (hoverTask && hoverTask.item)) {
      hoverTask = ht && { item: ht.item, lane: ht.lane };
      schedule();
    }
  });
  canvas.addEventListener('pointerup', (e) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    canvas.classList.remove('dragging');
    if (moved) return;
    const r = canvas.getBoundingClientRect();
    const hit = itemAt(e.clientX - r.left, e.clientY - r.top);
    selected = hit && hit.type === 'slice' ? hit.item : null;
    pickedTask = hit && hit.type === 'task' ? { item: hit.item, lane: hit.lane } : null;
    details.textContent = '';
    if (hit) {
      const d = describe(hit);
      details.append(h('b', null, d.title), '\n' + d.text);
    }
    schedule();
  });
  canvas.addEventListener('pointerleave', hideTip);
  canvas.addEventListener('pointercancel', hideTip);
  window.addEventListener('blur', hideTip);
  canvas.addEventListener('dblclick', (e) => {
    zoomAt(e.clientX - canvas.getBoundingClientRect().left, 0.5);
  });
  canvas.addEventListener('keydown', (e) => {
    const mid = labelW + (cssW - labelW) / 2;
    const k = e.key.toLowerCase();
    if (k === 'w' || k === '+' || k === '=') zoomAt(mid, 0.7);
    else if (k === 's' || k === '-') zoomAt(mid, 1 / 0.7);
    else if (k === 'a' || e.key === 'ArrowLeft') panBy(-(v1 - v0) * 0.15);
    else if (k === 'd' || e.key === 'ArrowRight') panBy((v1 - v0) * 0.15);
    else if (k === '0') reset();
    else return;
    e.preventDefault();
  });
  // The page's scroll moves through the lanes (invariant 4); the item under
  // a still pointer changes, so the tooltip goes (invariant 5).
  const onScroll = () => {
    hideTip();
    schedule();
  };
  window.addEventListener('scroll', onScroll, { passive: true });
  window.addEventListener('resize', schedule);
  const ro = new ResizeObserver(schedule);
  ro.observe(wrap);

  function reset() {
    v0 = 0;
    v1 = model.extent;
    schedule();
  }

  // Test and console hook: where a drawn region with this name is, in
  // client coordinates (for hover tests), or null.
  function locate(name) {
    // A new model clears the hits until the next frame draws it: draw now,
    // so a caller right after setModel sees the picture it is about to get.
    if (!hits || queued) draw();
    const r = canvas.getBoundingClientRect();
    for (const s of hits || []) {
      if (s.name !== name) continue;
      const lane = lanes.find((l) => l.kind === 'thread' && l.thread.rows[s.depth] && l.thread.rows[s.depth].includes(s));
      if (!lane) continue;
      const x = (Math.max(xOf(s.s), labelW) + Math.min(xOf(s.e), cssW)) / 2;
      const y = RULER_H + lane.y - scrollY() + MARK_H + s.depth * ROW_H + ROW_H / 2;
      if (y < RULER_H || y > cssH) continue;
      return { x: r.left + x, y: r.top + y };
    }
    return null;
  }

  // Test and console hook: where a drawn task whose begin and end threads
  // differ and both have lanes is, in client coordinates, or null.
  function locateTask() {
    if (queued) draw(); // lanes are the new model's; draw it first (as locate)
    const r = canvas.getBoundingClientRect();
    for (const lane of lanes) {
      if (lane.kind !== 'tasks') continue;
      const y0 = RULER_H + lane.y - scrollY() + 2;
      for (let d = 0; d < lane.rows.length; d++)
        for (const t of lane.rows[d]) {
          if (t.e < v0 || t.s > v1) continue;
          const ends = taskEnds(t, lane.proc, lanes);
          if (!ends.crossThread || !ends.from || !ends.to) continue;
          const x0 = Math.max(xOf(t.s), labelW), x1 = Math.min(xOf(t.e), cssW);
          const y = y0 + d * ROW_H + ROW_H / 2;
          if (x1 - x0 < 4 || y < RULER_H || y > cssH) continue;
          return { x: r.left + (x0 + x1) / 2, y: r.top + y, name: t.name };
        }
    }
    return null;
  }

  setModel(model);
  draw();
  return {
    locateTask,
    // Test hook: a frame is queued (the hooks still show the last one).
    pending: () => queued,
    model: () => model,
    setModel,
    redraw: schedule,
    view: () => [v0, v1],
    zoom: (f) => zoomAt(labelW + (cssW - labelW) / 2, f),
    pan: (f) => panBy((v1 - v0) * f),
    reset,
    locate,
    lanes: () => JSON.parse(wrap.dataset.lanes),
    drawnRegions: () => JSON.parse(wrap.dataset.drawnRegions || '[]'),
    dispose() {
      ro.disconnect();
      window.removeEventListener('scroll', onScroll);
      window.removeEventListener('resize', schedule);
      window.removeEventListener('blur', hideTip);
      tip.remove();
    },
  };
}
