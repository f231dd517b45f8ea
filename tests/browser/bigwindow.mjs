// bigwindow.mjs: the viewer on a window of a few hundred MB of Chrome JSON
// (test_bigwindow.sh makes it with the demo at a high rate), in headless
// Chromium: the overview paints quickly with no size refusal, zooming in
// loads the generations in view and draws their regions, moving around
// keeps the decoded generations and the JS heap bounded, a frame stays
// fast, tooltips go when the pointer leaves, and the page has one scroll
// bar. Figures go to ARTIFACTS/bigwindow.txt, the picture to bigwindow.png.
//
// Env: HTTP, TOKEN, SERVICE, FROM_NS, TO_NS, JSON_BYTES, ARTIFACTS, PROFILE,
// PIDFILE, CHROMIUM (as dashboard.mjs).
import { chromium } from 'playwright-core';
import { env, browserPids } from './lib.mjs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const HTTP = env('HTTP'), TOKEN = env('TOKEN'), SERVICE = env('SERVICE'), ARTIFACTS = env('ARTIFACTS');
const FROM_NS = env('FROM_NS'), TO_NS = env('TO_NS'), JSON_BYTES = Number(env('JSON_BYTES'));
const ORIGIN = `http://${HTTP}`;
const BASE = `${ORIGIN}/?token=${encodeURIComponent(TOKEN)}`;
// Generous bounds (5x or more what this machine takes; ASan runs it too).
const T_OVERVIEW_MS = 15000; // first paint of the whole window
const T_DETAIL_MS = 30000; // regions drawn after zooming in
const T_FRAME_MS = 1000; // one redraw after a zoom
const HEAP_MAX = 700 << 20; // JS heap in use: far below the window's JSON
const CACHE_MAX = (96 << 20) * 2; // loader.js CACHE_BYTES, plus the view it pins

let step = '';
const log = (s) => console.log(`# ${s}`);
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}

const context = await chromium.launchPersistentContext(env('PROFILE'), {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
});
if (process.env.PIDFILE) writeFileSync(process.env.PIDFILE, browserPids().join(' ') + '\n');
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(T_DETAIL_MS);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
page.on('console', (m) => {
  if (m.type() === 'error') pageErrors.push('console: ' + m.text());
});
const cdp = await context.newCDPSession(page);
const heap = async () => {
  await cdp.send('HeapProfiler.collectGarbage').catch(() => {});
  return (await cdp.send('Runtime.getHeapUsage')).usedSize;
};
const body = () => page.evaluate(() => ({ ...document.getElementById('window-body').dataset }));
const viewerData = () => page.evaluate(() => ({ ...document.getElementById('viewer').dataset }));
// Waits until the window view has nothing pending (window.js's settled
// hook: no frame queued, no plan or flame refresh due, no generation
// loading): what the hooks say then stays until the next input, however
// slow the machine is (a fixed wait only guesses when the plan has run).
const settle = () => page.waitForFunction(() => !!window.gentraceWindow && window.gentraceWindow.settled());
const figures = [];
const figure = (k, v) => {
  figures.push(`${k}=${v}`);
  log(`${k}: ${v}`);
};

try {
  step = 'overview';
  figure('window_json_bytes', JSON_BYTES);
  const t0 = Date.now();
  await page.goto(`${BASE}#/window?service=${SERVICE}&from=${FROM_NS}&to=${TO_NS}`);
  await page.waitForFunction(() => document.getElementById('window-body')?.dataset.mode, null, { timeout: T_OVERVIEW_MS });
  const tOverview = Date.now() - t0;
  figure('first_paint_ms', tOverview);
  check(tOverview < T_OVERVIEW_MS, `overview took ${tOverview} ms`);
  const b0 = await body();
  check(b0.mode === 'overview', `a ${JSON_BYTES}-byte window should open as an overview, mode=${b0.mode}`);
  check(!(await page.locator('#window-error').count()), 'the window was refused');
  const facts = await page.locator('#window-facts').textContent();
  log(`facts: ${facts}`);
  check(/, 2 sessions,/.test(facts), 'the service window should hold both demo sessions');
  const heapOverview = await heap();
  figure('heap_overview_bytes', heapOverview);
  await page.screenshot({ path: join(ARTIFACTS, 'bigwindow-overview.png') });

  step = 'zoom in';
  const tz = Date.now();
  for (let i = 0; i < 30; i++) {
    const b = await body();
    if (b.mode === 'detail') break;
    const end = (await viewerData()).viewEnd;
    await page.click('#zoom-in');
    await page.waitForFunction((e) => document.getElementById('viewer').dataset.viewEnd !== e, end);
    await settle(); // the loader plans 60 ms after a view change
  }
  await page.waitForFunction(() => document.getElementById('window-body').dataset.mode === 'detail', null, { timeout: T_DETAIL_MS });
  await page.waitForFunction(() => /worker-\d/.test(document.getElementById('viewer').dataset.lanes || ''));
  const tDetail = Date.now() - tz;
  figure('zoom_to_detail_ms', tDetail);
  check(tDetail < T_DETAIL_MS, `details took ${tDetail} ms`);
  // Zoom on until the regions are wide enough to carry names.
  for (let i = 0; i < 12; i++) {
    await settle();
    const drawn = JSON.parse((await viewerData()).drawnRegions || '[]');
    if (drawn.includes('request')) break;
    const end = (await viewerData()).viewEnd;
    await page.click('#zoom-in');
    await page.waitForFunction((e) => document.getElementById('viewer').dataset.viewEnd !== e, end);
  }
  check(JSON.parse((await viewerData()).drawnRegions).includes('request'), 'no request region drawn');

  step = 'frame time';
  const frame = await page.evaluate(() => new Promise((res) => {
    const t = performance.now();
    window.gentraceViewer.zoom(0.8);
    requestAnimationFrame(() => requestAnimationFrame(() => res(performance.now() - t)));
  }));
  figure('frame_ms', Math.round(frame));
  check(frame < T_FRAME_MS, `a zoom took ${frame} ms to draw`);

  step = 'tooltip';
  await settle(); // the position stays right until the pointer gets there
  const at = await page.evaluate(() => window.gentraceViewer.locate('request'));
  check(at, 'locate(request) found nothing');
  await page.mouse.move(at.x, at.y);
  await page.waitForFunction(() => document.getElementById('viewer').dataset.hover === 'request');
  const tipBox = await page.locator('.tip:not([hidden])').boundingBox();
  check(tipBox && Math.abs(tipBox.x - (at.x + 14)) < 300, 'tooltip is not near the pointer');
  await page.mouse.move(at.x, 5); // over the page header, off the canvas
  await page.waitForFunction(() => document.querySelector('.tip').hidden);
  await page.screenshot({ path: join(ARTIFACTS, 'bigwindow.png') });

  step = 'one scroll bar';
  const scrollers = await page.evaluate(() => [...document.querySelectorAll('*')].filter((e) => {
    const s = getComputedStyle(e);
    return /(auto|scroll)/.test(s.overflowY) && e.scrollHeight > e.clientHeight + 1;
  }).map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className));
  check(scrollers.length === 0, `nested scrolling: ${scrollers.join(', ')}`);

  step = 'move around';
  // Pan across many views: each loads its generations; the LRU keeps the
  // decoded ones bounded.
  for (let i = 0; i < 8; i++) {
    await page.evaluate(() => window.gentraceViewer.pan(3));
    await settle(); // this view planned and its generations loaded
    await page.waitForFunction(() => ['detail', 'overview'].includes(document.getElementById('window-body').dataset.mode) &&
      document.getElementById('window-body').dataset.mode !== 'loading', null, { timeout: T_DETAIL_MS });
  }
  const b1 = await body();
  figure('decoded_generations', b1.cached);
  figure('decoded_json_bytes', b1.cacheBytes);
  check(Number(b1.cacheBytes) <= CACHE_MAX, `decoded generations hold ${b1.cacheBytes} bytes`);
  const heapDetail = await heap();
  figure('heap_after_moving_bytes', heapDetail);
  check(heapDetail < HEAP_MAX, `JS heap ${heapDetail} bytes`);
  await page.evaluate(() => window.gentraceViewer.reset());
  await page.waitForFunction(() => document.getElementById('window-body').dataset.mode === 'overview');
  // Zoomed out again: the threads keep their lanes with the rates of the
  // generations looked at.
  const lanesAfter = JSON.parse((await viewerData()).lanes);
  check(lanesAfter.some((l) => / \/ worker-\d+$/.test(l)), 'thread lanes went away when zoomed out');
  await page.screenshot({ path: join(ARTIFACTS, 'bigwindow-after.png') });

  step = 'errors';
  check(pageErrors.length === 0, `page errors: ${pageErrors.slice(0, 5).join(' | ')}`);
  writeFileSync(join(ARTIFACTS, 'bigwindow.txt'), figures.join('\n') + '\n');
  log('ok');
  await context.close();
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join(' | ')}`);
  await page.screenshot({ path: join(ARTIFACTS, 'bigwindow-fail.png') }).catch(() => {});
  await context.close().catch(() => {});
  process.exit(1);
}
