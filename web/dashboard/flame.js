// flame.js: the aggregate flame view's pure parts (no DOM): the region tree
// of what the viewer shows (every path of nested region names, with its
// total and self time and count, summed over threads and sessions) and the
// stack tree (the recorded args.stack of region begins and instants,
// outermost frame first, each frame an opaque string), both clipped to a
// view [v0, v1] in µs; then the rectangles of an icicle drawing and the
// paths with the most self time. Tested in Node
// (tests/dashboard/flame.test.mjs); flameview.js draws.
//
// Invariants:
//  1. A node's total MUST equal the sum of the time its slices spend in
//     the view, and its self MUST be its total minus its children's totals
//     (never below 0), otherwise the widths lie: a child is drawn inside
//     its parent only if it is not wider.
//  2. Each slice MUST count once, under the one parent slice that holds
//     it (the deepest-row slice of the row above that contains its start),
//     otherwise a region nested in two candidates would be counted twice.
//  3. The stack tree's time MUST be regions' self time (time a region spent
//     not inside a nested region), so a region and the regions it holds are
//     not counted twice when their stacks differ.
'use strict';

import { lowerBound } from './layout.js';

// Most frames of one stack taken into the tree (deeper ones are cut, and
// the cut is marked with a '…' frame): a hostile trace cannot make the
// page build a tree of unbounded depth.
export const MAX_STACK_FRAMES = 128;

function node(name) {
  return { name, total: 0, self: 0, count: 0, kids: new Map() };
}

function child(n, name) {
  let c = n.kids.get(name);
  if (!c) n.kids.set(name, (c = node(name)));
  return c;
}

const inView = (s, v0, v1) => Math.max(0, Math.min(s.e, v1) - Math.max(s.s, v0));

// The index in `up` (the row above, sorted by start, not overlapping) of
// the slice that holds s, or -1 (invariant 2): among the slices ending at
// or after s's start and starting at or before it, the last one that holds
// it whole, else the first of them.
function parentIndex(up, s) {
  let i = lowerBound(up, s.s, (x) => x.e);
  let best = -1;
  for (; i < up.length && up[i].s <= s.s; i++) if (up[i].e >= s.e || best < 0) best = i;
  return best;
}

// The region tree and the stack tree of a model (model.js: procs with
// threads with rows of slices {name, s, e, depth, args}, and marks) over
// the view [v0, v1]. Returns { regions, stacks, stackEvents } where each
// tree is a root node {name, total, self, count, kids: Map} in µs.
// Per thread the nodes and the children's time of each slice are kept in
// arrays beside its rows (a view holds up to 400,000 events: Maps keyed
// by slice cost twice the time and most of it in garbage).
export function buildTrees(model, v0, v1) {
  const regions = node('all');
  const stacks = node('all');
  let stackEvents = 0;
  for (const p of model.procs.values())
    for (const t of p.threads.values()) {
      const nodes = [], busy = [];
      t.rows.forEach((row, d) => {
        const nd = (nodes[d] = new Array(row.length).fill(null));
        busy[d] = new Float64Array(row.length);
        for (let i = 0; i < row.length; i++) {
          const s = row[i];
          const dur = inView(s, v0, v1);
          if (dur <= 0 && !(s.s >= v0 && s.s <= v1)) continue;
          const pi = d > 0 ? parentIndex(t.rows[d - 1], s) : -1;
          const parentNode = pi >= 0 ? nodes[d - 1][pi] : regions;
          if (!parentNode) continue; // its parent is out of view: so is it
          const n = child(parentNode, s.name);
          n.total += dur;
          n.count++;
          nd[i] = n;
          if (pi >= 0) busy[d - 1][pi] += dur;
        }
      });
      // Self time per slice, then the stack tree (invariant 3).
      t.rows.forEach((row, d) => {
        for (let i = 0; i < row.length; i++) {
          if (!nodes[d][i]) continue;
          const s = row[i];
          const st = s.args && s.args.stack;
          if (!Array.isArray(st) || !st.length) continue;
          stackEvents++;
          addStack(stacks, st, s.name, Math.max(0, inView(s, v0, v1) - busy[d][i]));
        }
      });
      for (const m of t.marks) {
        if (m.ts < v0 || m.ts > v1) continue;
        const st = m.args && m.args.stack;
        if (Array.isArray(st) && st.length) {
          stackEvents++;
          addStack(stacks, st, m.name, 0);
        }
      }
    }
  finish(regions);
  regions.total = sumKids(regions);
  regions.self = 0;
  finishStacks(stacks);
  return { regions, stacks, stackEvents };
}

// One stack (innermost first, as exported) into the tree, outermost
// first, with the event's name as a last pseudo-frame in brackets.
function addStack(root, st, name, time) {
  let n = root;
  const k = Math.min(st.length, MAX_STACK_FRAMES);
  n.count++;
  if (st.length > k) {
    n = child(n, '…');
    n.count++;
  }
  for (let i = k - 1; i >= 0; i--) {
    n = child(n, String(st[i]));
    n.count++;
  }
  n = child(n, '[' + name + ']');
  n.count++;
  n.self += time;
}

const sumKids = (n) => {
  let x = 0;
  for (const c of n.kids.values()) x += c.total;
  return x;
};

// Region tree: self = total - children's totals (invariant 1).
function finish(n) {
  for (const c of n.kids.values()) {
    finish(c);
    c.self = Math.max(0, c.total - sumKids(c));
  }
}

// Stack tree: the leaves carry self time; totals add up from them.
function finishStacks(n) {
  let t = n.self;
  for (const c of n.kids.values()) t += finishStacks(c);
  n.total = t;
  return t;
}

// The rectangles of an icicle drawing of `root` (or of the subtree at
// `focus`, a path of names from the root): [{depth, x0, x1, node, path}]
// with x in 0..1 of the focused node's width, children left to right by
// total (largest first), nodes narrower than minFrac left out. The weight is
// total time, or the count when the tree holds no time (instants only).
export function icicle(root, focus = [], minFrac = 0.001, maxDepth = 64) {
  let top = root;
  const path = [];
  for (const name of focus) {
    const c = top.kids.get(name);
    if (!c) break;
    top = c;
    path.push(name);
  }
  const byCount = root.total <= 0;
  const w = (n) => (byCount ? n.count : n.total);
  const out = [];
  const whole = w(top);
  if (whole <= 0) return { rects: out, byCount, focus: path };
  const walk = (n, depth, x0, p) => {
    const x1 = x0 + w(n) / whole;
    out.push({ depth, x0, x1, node: n, path: p });
    if (depth >= maxDepth) return;
    let x = x0;
    for (const c of sortedKids(n, w)) {
      const f = w(c) / whole;
      if (f < minFrac) break;
      walk(c, depth + 1, x, [...p, c.name]);
      x += f;
    }
  };
  walk(top, 0, 0, path);
  return { rects: out, byCount, focus: path };
}

function sortedKids(n, w) {
  return [...n.kids.values()].sort((a, b) => w(b) - w(a) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

// The `limit` paths with the most self time (or count, for a tree without
// time), as [{path: [names], self, total, count}].
export function topPaths(root, limit = 20) {
  const byCount = root.total <= 0;
  const out = [];
  const walk = (n, p) => {
    for (const c of n.kids.values()) {
      const q = [...p, c.name];
      // Frames that only pass time on to deeper ones say nothing here.
      if (byCount || c.self > 0) out.push({ path: q, self: c.self, total: c.total, count: c.count });
      walk(c, q);
    }
  };
  walk(root, []);
  out.sort((a, b) => (byCount ? b.count - a.count : b.self - a.self) || b.total - a.total);
  return out.slice(0, limit);
}
