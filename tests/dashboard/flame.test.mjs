// flame.test.mjs: web/dashboard/flame.js (the aggregate flame view's trees)
// on models built from Chrome JSON by model.js, in Node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildModel } from '../../web/dashboard/model.js';
import { buildTrees, icicle, topPaths, MAX_STACK_FRAMES } from '../../web/dashboard/flame.js';

const doc = (events) => ({ traceEvents: events, metadata: { gentrace_start_ns: '1000000000' } });
const B = (tid, ts, name, stack) => ({ name, ph: 'B', pid: 1, tid, ts, args: stack ? { stack } : undefined });
const E = (tid, ts) => ({ ph: 'E', pid: 1, tid, ts });

// Two threads; request > (db > query, query), render on thread 7, and
// request > db > query on thread 8.
const model = () => buildModel(doc([
  B(7, 0, 'request', ['0xa', 'main']), B(7, 10, 'db'), B(7, 12, 'query', ['q.c:3', 'db.c:9', 'main']), E(7, 20),
  B(7, 22, 'query', ['q.c:3', 'db.c:9', 'main']), E(7, 30), E(7, 40), B(7, 50, 'render'), E(7, 60), E(7, 100),
  B(8, 0, 'request'), B(8, 5, 'db'), B(8, 5, 'query'), E(8, 25), E(8, 25), E(8, 50),
  { name: 'hit', ph: 'i', pid: 1, tid: 8, ts: 30, s: 't', args: { stack: ['x.c:1', 'main'] } },
]));

const get = (n, ...path) => path.reduce((x, k) => x && x.kids.get(k), n);

test('the region tree sums total, self and count per path over threads (invariants 1, 2)', () => {
  const { regions } = buildTrees(model(), 0, 1000);
  assert.equal(regions.total, 150);
  const req = get(regions, 'request');
  assert.deepEqual([req.total, req.count, req.self], [150, 2, 150 - 30 - 20 - 10]);
  const db = get(regions, 'request', 'db');
  assert.deepEqual([db.total, db.count, db.self], [50, 2, 50 - 36]);
  const q = get(regions, 'request', 'db', 'query');
  assert.deepEqual([q.total, q.count, q.self], [36, 3, 36]);
  assert.equal(get(regions, 'request', 'render').total, 10);
  // No path is invented: query is never directly under request.
  assert.equal(get(regions, 'request', 'query'), undefined);
  assert.equal(regions.kids.size, 1);
});

test('the trees are clipped to the view', () => {
  const { regions } = buildTrees(model(), 15, 55);
  // thread 7: request 15..55 = 40, db 15..40 = 25, query 15..20 + 22..30 = 13,
  // render 50..55 = 5; thread 8: request 15..50 = 35, db 15..25, query 15..25.
  assert.equal(get(regions, 'request').total, 75);
  assert.equal(get(regions, 'request', 'db').total, 35);
  assert.equal(get(regions, 'request', 'db', 'query').total, 23);
  assert.equal(get(regions, 'request', 'render').total, 5);
  const none = buildTrees(model(), 200, 300);
  assert.equal(none.regions.total, 0);
  assert.equal(none.regions.kids.size, 0);
});

test('the stack tree puts frames outermost first, weighted by regions\' self time (invariant 3)', () => {
  const { stacks, stackEvents } = buildTrees(model(), 0, 1000);
  assert.equal(stackEvents, 4); // request, two queries, one instant
  const main = get(stacks, 'main');
  assert.equal(main.count, 4);
  // request's self time on thread 7 (100 - 30 - 10) plus the queries' 16.
  assert.equal(get(stacks, 'main', '0xa', '[request]').total, 60);
  assert.equal(get(stacks, 'main', 'db.c:9', 'q.c:3', '[query]').total, 16);
  assert.equal(get(stacks, 'main', 'db.c:9', 'q.c:3', '[query]').count, 2);
  assert.equal(get(stacks, 'main', 'x.c:1', '[hit]').count, 1);
  assert.equal(get(stacks, 'main', 'x.c:1', '[hit]').total, 0);
  assert.equal(main.total, 76);
  assert.equal(stacks.total, 76);
});

test('symbolized frames are opaque names; a very deep stack is cut', () => {
  const deep = Array.from({ length: MAX_STACK_FRAMES + 50 }, (_, i) => `f${i} (a.c:${i})`);
  const m = buildModel(doc([B(7, 0, 'r', deep), E(7, 10),
    B(7, 10, 'r', ['lib.so+0x10', 'main (m.c:1)']), E(7, 20)]));
  const { stacks } = buildTrees(m, 0, 100);
  let n = stacks, depth = 0;
  while (n.kids.size) {
    n = [...n.kids.values()].sort((a, b) => b.total - a.total || a.name.localeCompare(b.name))[0];
    depth++;
  }
  assert.ok(depth <= MAX_STACK_FRAMES + 2, `depth ${depth}`);
  assert.ok(get(stacks, '…'));
  assert.equal(get(stacks, 'main (m.c:1)', 'lib.so+0x10', '[r]').total, 10);
});

test('icicle lays children inside their parent, largest first, and focuses a subtree', () => {
  const { regions } = buildTrees(model(), 0, 1000);
  const { rects, byCount } = icicle(regions);
  assert.equal(byCount, false);
  const at = (path) => rects.find((r) => r.path.join('>') === path);
  assert.deepEqual([at('').x0, at('').x1], [0, 1]);
  assert.deepEqual([at('request').x0, at('request').x1], [0, 1]);
  const db = at('request>db'), render = at('request>render');
  assert.ok(db.x0 === 0 && Math.abs(db.x1 - 50 / 150) < 1e-9);
  assert.ok(render.x0 >= db.x1 - 1e-9);
  for (const r of rects) {
    if (!r.path.length) continue;
    const up = at(r.path.slice(0, -1).join('>'));
    assert.ok(r.x0 >= up.x0 - 1e-9 && r.x1 <= up.x1 + 1e-9, `${r.path} inside its parent`);
    assert.equal(r.depth, r.path.length);
  }
  const f = icicle(regions, ['request', 'db']);
  assert.deepEqual(f.focus, ['request', 'db']);
  assert.deepEqual([f.rects[0].x0, f.rects[0].x1, f.rects[0].node.name], [0, 1, 'db']);
  // Tiny nodes are left out.
  assert.equal(icicle(regions, [], 0.5).rects.length, 2);
  // A tree of instants only is weighed by count.
  const inst = buildTrees(buildModel(doc([{ name: 'x', ph: 'i', pid: 1, tid: 1, ts: 1, s: 't', args: { stack: ['a'] } }])), 0, 10);
  assert.equal(icicle(inst.stacks).byCount, true);
  assert.equal(icicle(inst.stacks).rects.length, 3);
});

test('topPaths lists the paths with the most self time', () => {
  const { regions } = buildTrees(model(), 0, 1000);
  const top = topPaths(regions, 3);
  assert.deepEqual(top.map((p) => [p.path.join(' > '), p.self]),
    [['request', 90], ['request > db > query', 36], ['request > db', 14]]);
});
