// dashboard.mjs: drives the dashboard in headless Chromium against a real
// gentraced fed by the real demo service (started by test_dashboard.sh).
//
// Env: HTTP (host:port of the daemon), TOKEN (its --read-token), ADMIN (its
// --admin-token, empty when the daemon has no retention pins), SERVICE (the
// demo's service name), GENTRACE (the CLI), ARTIFACTS (screenshots and the
// downloaded window go there), PROFILE (a fresh --user-data-dir), PIDFILE
// (the browser's PID is written there so the shell can stop it by PID if
// this script dies without closing it).
//
// Each step says what it checks; the first failure throws, prints the
// reason and a screenshot named fail-*.png, and exits 1.
import { chromium } from 'playwright-core';
import { env, browserPids } from './lib.mjs';
import { execFileSync } from 'node:child_process';
import { writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const HTTP = env('HTTP'), TOKEN = env('TOKEN'), SERVICE = env('SERVICE');
const ADMIN = process.env.ADMIN || '';
const GENTRACE = env('GENTRACE'), ARTIFACTS = env('ARTIFACTS'), PROFILE = env('PROFILE');
const ORIGIN = `http://${HTTP}`;
const BASE = `${ORIGIN}/?token=${encodeURIComponent(TOKEN)}`;
const T_STEP = 20000; // generous: the suite also runs under ASan

let step = '';
const log = (s) => console.log(`# ${s}`);
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}


const context = await chromium.launchPersistentContext(PROFILE, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
  acceptDownloads: true,
});
if (process.env.PIDFILE) writeFileSync(process.env.PIDFILE, browserPids().join(' ') + '\n');

const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(T_STEP);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
// The pins step provokes refusals on purpose (a wrong admin token; no
// pins API on an older daemon): the browser logs those as errors.
let expectRefusals = false;
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  if (expectRefusals && /status of (401|404|405)/.test(m.text())) return;
  pageErrors.push('console: ' + m.text());
});
const foreign = [];
const urls = [];
let perfettoAllowed = false;
context.on('request', (r) => {
  const u = r.url();
  urls.push(u);
  if (u.startsWith(ORIGIN + '/') || u.startsWith('data:') || u.startsWith('blob:')) return;
  if (perfettoAllowed && u.startsWith('https://ui.perfetto.dev/')) return;
  foreign.push(u);
});

// Waits until the window view has nothing pending (window.js's settled
// hook: no frame queued, no plan or flame refresh due, no generation
// loading). Only then do the data-* hooks and locate() describe what stays
// on screen: a generation that lands between reading a position and moving
// the pointer there would move what the test aimed at. A fixed wait cannot
// promise that on a loaded machine; this waits for the state itself.
const settle = (p = page) => p.waitForFunction(() => !!window.gentraceWindow && window.gentraceWindow.settled());

async function shot(name, p = page) {
  await p.screenshot({ path: join(ARTIFACTS, name + '.png'), fullPage: false });
}

try {
  // ------------------------------------------------------------ fleet
  step = 'fleet';
  await page.goto(BASE);
  // Rows only appear if /v1/agents answered: the daemon has a read token,
  // so this also proves the page forwards ?token=.
  const row = page.locator(`tr.session[data-service="${SERVICE}"]`).first();
  await row.waitFor();
  await page.waitForFunction((svc) => {
    const r = document.querySelector(`tr.session[data-service="${svc}"]`);
    return r && /connected/.test(r.textContent) && !/\b0 B\b/.test(r.children[6].textContent);
  }, SERVICE);
  check(await page.locator(`tr.service[data-service="${SERVICE}"]`).count() === 1, 'no service row');
  await page.waitForFunction(() => document.getElementById('status').dataset.state === 'live');
  const rowText = await row.textContent();
  log(`fleet row: ${rowText}`);
  check(/\d/.test(await page.locator('#card-events .v').textContent()), 'no events/s card');
  // Filtering hides what does not match and keeps the filter in the hash.
  await page.fill('#filter', 'no-such-service-xyz');
  await page.waitForFunction(() => document.querySelectorAll('tr.session').length === 0);
  check(page.url().includes('q=no-such-service-xyz'), 'filter not in the address');
  await page.fill('#filter', SERVICE);
  await row.waitFor();
  await shot('fleet');

  // The session that ended before the page opened: listed, greyed, with
  // its first-to-last time range; its "last 5s" is the 5 s before its end.
  step = 'ended session';
  const ended = page.locator(`tr.session[data-state="ended"][data-service="${SERVICE}"]`).first();
  await ended.waitFor();
  check(await ended.evaluate((r) => r.classList.contains('gone')), 'ended row not greyed');
  const endedText = await ended.textContent();
  check(/ended \d\d:\d\d:\d\d – \d\d:\d\d:\d\d, /.test(endedText), `ended row: ${endedText}`);
  const endedTo = Number(await ended.getAttribute('data-to'));
  const href = await ended.locator('td:last-child a').getAttribute('href');
  const hp = new URLSearchParams(href.split('?')[1]);
  check(Math.abs(Number(BigInt(hp.get('to')) / 1000000n) - endedTo) < 1000, `its window ${href} does not end at its end ${endedTo}`);
  log(`ended session: ${endedText.replace(/\s+/g, ' ').trim()}`);
  await ended.locator('td:last-child a').click();
  await page.waitForFunction(() => /worker-\d/.test(document.getElementById('viewer')?.dataset.lanes || ''));
  await shot('ended-window');
  await page.goBack();
  await row.waitFor();

  // ---------------------------------------------------------- session
  step = 'session';
  const sid = await row.getAttribute('data-session');
  await row.locator('td').first().locator('a').click();
  await page.waitForURL(new RegExp(`#/session/${sid}`));
  await page.waitForFunction(() => Number(document.getElementById('timeline')?.dataset.gens) > 0);
  const firstLast = Number(await page.locator('#timeline').getAttribute('data-last-gen'));
  // Live: a newer generation shows up without reloading.
  await page.waitForFunction((g) => Number(document.getElementById('timeline').dataset.lastGen) > g, firstLast);
  const laterLast = Number(await page.locator('#timeline').getAttribute('data-last-gen'));
  log(`timeline: last gen ${firstLast} -> ${laterLast}`);
  check(await page.locator('#gens tbody tr').count() > 0, 'no generations table');
  await shot('session');

  // Drag across the newest generations to choose a window.
  step = 'choose window';
  const box = await page.locator('#timeline canvas').boundingBox();
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width - 130, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width - 80, y, { steps: 5 });
  await page.mouse.move(box.x + box.width - 12, y, { steps: 5 });
  await page.mouse.up();
  await page.waitForURL(/#\/window\?session=/);
  log(`window: ${page.url().split('#')[1]}`);

  // ----------------------------------------------------------- window
  step = 'window';
  // The overview comes first; the lanes of threads with the generations'
  // details (loaded one by one).
  await page.waitForFunction(() => /worker-\d/.test(document.getElementById('viewer')?.dataset.lanes || ''));
  const lanes = JSON.parse(await page.locator('#viewer').getAttribute('data-lanes'));
  log(`lanes: ${lanes.join(', ')}`);
  check(lanes.some((l) => / \/ worker-\d+$/.test(l)), 'no worker lane');
  check(lanes.some((l) => l.startsWith(SERVICE + ' (')), 'lanes not named after the service');
  // Zoom in (the toolbar button) until regions are wide enough to draw by
  // name rather than as merged runs.
  const spanBefore = Number(await page.locator('#viewer').getAttribute('data-view-end')) -
    Number(await page.locator('#viewer').getAttribute('data-view-start'));
  let drawn = [];
  for (let i = 0; i < 16; i++) {
    await settle(); // the regions of every generation in view, drawn
    drawn = JSON.parse(await page.locator('#viewer').getAttribute('data-drawn-regions'));
    if (i >= 2 && drawn.includes('request') && drawn.includes('db.query')) break;
    // The demo idles now and then: zooming at the centre alone can narrow
    // onto a gap with nothing to draw. Keep the loaded request nearest the
    // centre in the middle of the view (the viewer's pan hook).
    if (await page.evaluate(() => {
      const v = window.gentraceViewer;
      const [a, b] = v.view();
      const mid = (a + b) / 2;
      let best = null;
      for (const p of v.model().procs.values())
        for (const t of p.threads.values())
          for (const x of t.rows[0] || [])
            if (x.name === 'request' && (best === null || Math.abs((x.s + x.e) / 2 - mid) < Math.abs(best - mid))) best = (x.s + x.e) / 2;
      if (best === null || Math.abs(best - mid) <= (b - a) / 8) return false;
      v.pan((best - mid) / (b - a));
      return true;
    })) await settle(); // the redraw, and the generations the pan brought in
    const end = await page.locator('#viewer').getAttribute('data-view-end');
    await page.click('#zoom-in');
    // The redraw (next animation frame) rewrites the view hooks.
    await page.waitForFunction((e) => document.getElementById('viewer').dataset.viewEnd !== e, end);
  }
  const spanAfter = Number(await page.locator('#viewer').getAttribute('data-view-end')) -
    Number(await page.locator('#viewer').getAttribute('data-view-start'));
  log(`drawn regions: ${drawn.join(', ')} (view ${spanBefore} -> ${spanAfter} us)`);
  check(spanAfter < spanBefore, 'zoom did not narrow the view');
  check(drawn.includes('request') && drawn.includes('db.query'), 'demo regions not drawn');
  // Hovering a drawn region names it (settled: the picture stays put
  // between locate and the pointer's arrival).
  await settle();
  const at = await page.evaluate(() => window.gentraceViewer.locate('request'));
  check(at, 'locate(request) found nothing');
  await page.mouse.move(at.x, at.y);
  await page.waitForFunction(() => document.getElementById('viewer').dataset.hover === 'request');
  const tip = await page.locator('.tip:not([hidden])').textContent();
  check(/request/.test(tip) && /region/.test(tip), `tooltip says: ${tip}`);
  await shot('window');

  // Tasks: the demo's send_receipt begins on a worker and ends on the
  // mailer thread; hovering one draws the link between the two threads.
  step = 'task link';
  // Pan (D, or A when the view already ends at the window's end, where D
  // cannot move it) until one is on screen, each view settled first: its
  // generations loaded and drawn, so locateTask sees all of them and the
  // position it returns is still right when the pointer gets there.
  let tat = null;
  const atEnd = await page.evaluate(() => { const [, b] = window.gentraceViewer.view(); return b >= window.gentraceViewer.model().extent; });
  for (let i = 0; i < 8 && !tat; i++) {
    await settle();
    tat = await page.evaluate(() => window.gentraceViewer.locateTask());
    if (!tat) {
      await page.locator('#viewer canvas').focus();
      await page.keyboard.press(atEnd ? 'a' : 'd');
    }
  }
  check(tat, 'no task with both ends on screen');
  await page.mouse.move(tat.x, tat.y);
  await page.waitForFunction(() => (document.getElementById('viewer').dataset.taskLink || '').length > 0);
  const link = JSON.parse(await page.locator('#viewer').getAttribute('data-task-link'));
  log(`task link: ${JSON.stringify(link)}`);
  check(link.name === 'send_receipt' && / \/ worker-\d+$/.test(link.from) && / \/ mailer$/.test(link.to), `link ${JSON.stringify(link)}`);
  const ttip = await page.locator('.tip:not([hidden])').textContent();
  check(/begun on worker-\d+, ended on mailer/.test(ttip), `task tooltip: ${ttip}`);
  await shot('task-link');
  await page.mouse.move(5, 5);
  await page.waitForFunction(() => !document.getElementById('viewer').dataset.taskLink);

  // Across generations: with the whole window loaded, a task the writer
  // split at a generation edge (closed at one generation's end, begun at
  // the next one's start) is one task again, with both its threads; no
  // split half is left whose other half is loaded.
  step = 'tasks across generations';
  await page.click('#zoom-reset');
  await page.waitForFunction(() => document.getElementById('viewer').dataset.viewStart === '0');
  // The view's plan runs 60 ms after the view changed (then 'loading' until
  // every generation in view is decoded): settled, the mode is the whole
  // window's, not the zoomed view's it had before.
  await settle();
  await page.waitForFunction(() => document.getElementById('window-body').dataset.mode === 'detail');
  const tj = await page.evaluate(() => {
    const out = { tasks: 0, joined: 0, joinedBoth: 0, split: 0 };
    for (const p of window.gentraceViewer.model().procs.values()) {
      const ts = p.taskRows.flat();
      const open = new Map(ts.filter((t) => t.open).map((t) => [t.id, t]));
      for (const t of ts) {
        out.tasks++;
        if (t.joined) out.joined++;
        if (t.joined && t.bt !== null && t.et !== null) out.joinedBoth++;
        const o = t.before && open.get(t.id);
        if (o && o.e <= t.s) out.split++;
      }
    }
    return out;
  });
  log(`tasks across generations: ${JSON.stringify(tj)}`);
  check(tj.tasks > 0 && tj.split === 0, `split halves left: ${JSON.stringify(tj)}`);
  check(tj.joinedBoth === tj.joined, `a joined task without both threads: ${JSON.stringify(tj)}`);
  // Back to a part of the window (the keyboard pan below needs room).
  await page.click('#zoom-in');
  await page.waitForFunction(() => document.getElementById('viewer').dataset.viewStart !== '0');
  await settle();

  // The aggregate flame view of what the viewer shows: the region tree
  // (request > db > db.query, ...) and the stacks the demo recorded.
  step = 'flame';
  await page.click('#show-flame');
  // Settled: the panel was fed the drawn model of this view, and no later
  // refresh re-lays its boxes between locate and the click below.
  await settle();
  await page.waitForFunction(() => Number(document.getElementById('flame')?.dataset.total) > 0);
  const fpaths = JSON.parse(await page.locator('#flame').getAttribute('data-paths'));
  check(fpaths.includes('request > db > db.query'), `flame paths ${fpaths}`);
  const fnodes = JSON.parse(await page.locator('#flame').getAttribute('data-nodes'));
  check(fnodes.includes('request'), `flame top nodes ${fnodes}`);
  check(Number(await page.locator('#flame').getAttribute('data-total')) > 0, 'flame total 0');
  check(await page.locator('#flame-top tr').count() > 0, 'no top paths');
  await page.locator('#flame canvas').scrollIntoViewIfNeeded();
  await shot('flame');
  await settle(); // the scroll above redrew the viewer
  const dbAt = await page.evaluate(() => window.gentraceFlame.locate('request > db'));
  check(dbAt, 'no request > db box');
  await page.mouse.click(dbAt.x, dbAt.y);
  await page.waitForFunction(() => document.getElementById('flame').dataset.focus === '["request","db"]');
  await shot('flame-focus');
  await page.click('#flame-reset');
  await page.click('#flame-stacks');
  await page.waitForFunction(() => document.getElementById('flame').dataset.mode === 'stacks');
  const stackEvents = Number(await page.locator('#flame').getAttribute('data-stack-events'));
  const spaths = JSON.parse(await page.locator('#flame').getAttribute('data-paths'));
  log(`flame: regions ${fnodes.join(', ')}; ${stackEvents} events with stacks, e.g. ${spaths.slice(0, 2).join(' | ')}`);
  // The stacks are weighted by their regions' self time, so which region
  // ends the listed (heaviest) paths depends on the run: any region will do.
  check(stackEvents > 0 && spaths.some((p) => / > \[[^\]]+\]$/.test(p)), `stacks: ${stackEvents} ${spaths}`);
  await shot('flame-stacks');
  await page.click('#show-flame');
  await page.evaluate(() => window.scrollTo(0, 0));

  // Keyboard pan moves the view.
  step = 'keyboard pan';
  await page.locator('#viewer canvas').focus();
  const v0 = Number(await page.locator('#viewer').getAttribute('data-view-start'));
  await page.keyboard.press('a');
  await page.waitForFunction((x) => Number(document.getElementById('viewer').dataset.viewStart) !== x, v0);

  step = 'curl';
  const curl = await page.inputValue('#curl');
  check(curl.startsWith('curl -sOJ') && curl.includes(`${ORIGIN}/v1/trace?session=${sid}&from=`), `curl: ${curl}`);
  check(curl.includes('$GENTRACE_READ_TOKEN') && !curl.includes(TOKEN), 'curl must not embed the token');

  step = 'download';
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download-gentrace')]);
  const file = join(ARTIFACTS, 'window.gentrace');
  await dl.saveAs(file);
  check(/\.gentrace$/.test(dl.suggestedFilename()), `file name ${dl.suggestedFilename()}`);
  check(statSync(file).size > 16, 'empty download');
  const stat = execFileSync(GENTRACE, ['stat', file], { encoding: 'utf8' });
  log(`gentrace stat: ${stat.split('\n').slice(0, 3).join(' | ')}`);
  check(stat.trim().length > 0, 'stat printed nothing');

  // --------------------------------------------------------- perfetto
  // The real ui.perfetto.dev is not reachable here; a stand-in served by
  // the browser's request routing speaks the same handshake: PONG to PING,
  // then record what it was sent.
  step = 'perfetto';
  if (await page.locator('#open-perfetto').isVisible()) {
    perfettoAllowed = true;
    await context.route('https://ui.perfetto.dev/**', (route) => route.fulfill({
      contentType: 'text/html',
      body: `<!doctype html><title>fake perfetto</title><script>
        addEventListener('message', (e) => {
          if (e.data === 'PING') e.source.postMessage('PONG', e.origin);
          else if (e.data && e.data.perfetto) {
            const p = e.data.perfetto;
            const doc = JSON.parse(new TextDecoder().decode(p.buffer));
            document.title = 'got ' + p.buffer.byteLength + ' ' + doc.traceEvents.length + ' ' + p.title;
          }
        });</script>`,
    }));
    await page.waitForFunction(() => !document.getElementById('open-perfetto').disabled);
    const [popup] = await Promise.all([context.waitForEvent('page'), page.click('#open-perfetto')]);
    await popup.waitForFunction(() => document.title.startsWith('got '));
    const title = await popup.title();
    log(`perfetto stand-in: ${title}`);
    const parts = title.split(' ');
    check(Number(parts[1]) > 100 && Number(parts[2]) > 10, `perfetto got ${title}`);
    await popup.close();
    await context.unroute('https://ui.perfetto.dev/**');

    // Without the internet the UI never loads: the page falls back to a
    // Perfetto trace download and says so (within its 8 s give-up).
    step = 'perfetto-offline';
    await context.route('https://ui.perfetto.dev/**', (route) => route.abort('internetdisconnected'));
    const [dlp] = await Promise.all([
      page.waitForEvent('download', { timeout: 20000 }),
      page.click('#open-perfetto'),
    ]);
    check(/\.pftrace$/.test(dlp.suggestedFilename()), `fallback file name ${dlp.suggestedFilename()}`);
    const pfile = join(ARTIFACTS, 'fallback.pftrace');
    await dlp.saveAs(pfile);
    check(statSync(pfile).size > 100, 'fallback .pftrace is empty');
    const msg = await page.locator('#perfetto-fallback').textContent();
    check(/Perfetto trace instead/.test(msg), `fallback message: ${msg}`);
    log(`perfetto offline fallback: ${dlp.suggestedFilename()} (${statSync(pfile).size} bytes), "${msg.trim().slice(0, 80)}…"`);
    for (const p of context.pages()) if (p !== page && p.url().startsWith('https://ui.perfetto.dev')) await p.close();
    await context.unroute('https://ui.perfetto.dev/**');
    perfettoAllowed = false;
  } else {
    log('perfetto: browser says offline, button hidden (not tested)');
  }

  // ------------------------------------------------ session, first load
  // Opened directly, before /v1/agents answers: the header says it is
  // loading, never "gone ? ?", then fills in.
  step = 'session-first-load';
  const first = await context.newPage();
  let release;
  const gate = new Promise((r) => (release = r));
  await first.route(/\/v1\/agents(\?|$)/, async (route) => {
    await gate;
    await route.continue();
  });
  await first.goto(`${BASE}#/session/${sid}`);
  await first.waitForFunction(() => /loading/.test(document.querySelector('.cards')?.textContent || ''));
  const early = await first.evaluate(() => document.querySelector('.cards').textContent);
  check(!/gone|\?/.test(early), `session header before the first reply: ${early}`);
  release();
  await first.waitForFunction((svc) => (document.querySelector('.cards')?.textContent || '').includes(svc), SERVICE);
  log(`session header before the first reply: "${early.trim()}"`);
  await first.close();

  // ----------------------------------------------------------- search
  // The demo's "db.query" regions: found by name prefix, with a latency
  // histogram whose bars list their bucket; a result opens its window.
  step = 'search';
  await page.goto(`${BASE}#/search?name=db.*&min=1us&last=1h&service=${SERVICE}`);
  await page.waitForFunction(() => document.querySelectorAll('#search-rows tr').length > 0);
  await page.waitForFunction(() => document.querySelectorAll('.hist-bar').length > 0);
  const found = await page.locator('#search-rows tr').count();
  const names = await page.locator('#search-rows tr td:nth-child(3)').allTextContents();
  check(names.every((n) => n.startsWith('db')), `search found other names: ${names.slice(0, 3)}`);
  log(`search: ${found} spans, ${await page.locator('.hist-bar').count()} histogram bars`);
  await shot('search');
  step = 'search-bucket';
  // The fullest bucket of the first histogram: its spans are listed, and
  // every one of them lies in the bucket.
  const bars = page.locator('.hist-bar:not(.empty)');
  let best = 0, bestN = -1;
  for (let i = 0; i < await bars.count(); i++) {
    const n = Number(await bars.nth(i).getAttribute('data-count'));
    if (n > bestN && (await bars.nth(i).getAttribute('data-name')) === (await bars.first().getAttribute('data-name'))) {
      bestN = n;
      best = i;
    }
  }
  const lo = BigInt(await bars.nth(best).getAttribute('data-lo'));
  const hiAttr = await bars.nth(best).getAttribute('data-hi');
  await bars.nth(best).click();
  await page.waitForURL(/#\/search\?.*min=/);
  await page.waitForSelector('.hist-bar.sel');
  await page.waitForFunction(() => document.querySelectorAll('#search-rows tr').length > 0);
  const durs = await page.locator('#search-rows tr').evaluateAll((rs) => rs.map((r) => r.dataset.durationNs));
  for (const d of durs)
    check(BigInt(d) >= lo && (!hiAttr || BigInt(d) < BigInt(hiAttr)), `span of ${d} ns listed for bucket ${lo}-${hiAttr}`);
  log(`bucket ${lo}-${hiAttr} ns: ${durs.length} spans listed, all inside (${await page.locator('#search-bucket').textContent()})`);
  await shot('search-bucket');
  // A listed span opens its window.
  await page.locator('#search-rows tr td a').first().click();
  await page.waitForURL(/#\/window\?session=/);
  await page.waitForSelector('#viewer[data-lanes]');
  step = 'search-open';
  await page.goto(`${BASE}#/search?name=db.*&min=1us&last=1h&service=${SERVICE}`);
  await page.locator('#search-rows tr').first().waitFor();
  await page.locator('#search-rows tr td a').first().click();
  await page.waitForURL(/#\/window\?session=/);
  await page.waitForSelector('#viewer[data-lanes]');
  await shot('search-window');

  // ----------------------------------------------------------- narrow
  step = 'narrow';
  const narrow = await context.newPage();
  await narrow.setViewportSize({ width: 400, height: 800 });
  await narrow.goto(BASE);
  await narrow.locator(`tr.session[data-service="${SERVICE}"]`).first().waitFor();
  const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(overflow <= 1, `page is ${overflow}px wider than a 400px window`);
  await shot('fleet-narrow', narrow);
  await narrow.goto(`${BASE}#/session/${sid}`);
  await narrow.waitForFunction(() => Number(document.getElementById('timeline')?.dataset.gens) > 0);
  await shot('session-narrow', narrow);
  await narrow.goto(`${BASE}#/window?session=${sid}&last=2s`);
  await narrow.waitForSelector('#viewer[data-lanes]');
  const woverflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check(woverflow <= 1, `window view is ${woverflow}px too wide`);
  await shot('window-narrow', narrow);
  await narrow.close();

  // ------------------------------------------------------------- pins
  // Pin a window with the admin token typed once (kept in the tab's
  // sessionStorage, never in a URL), list it, delete it. A daemon without
  // pins answers 404/405: the page must say so, and the rest is skipped.
  step = 'pins';
  expectRefusals = true;
  await page.goto(`${BASE}#/window?session=${sid}&last=2s`);
  await page.waitForSelector('#viewer[data-lanes]');
  await page.click('#pin-window');
  await page.fill('#pin-reason', 'browser test: keep this');
  await page.fill('#pin-admin', ADMIN ? 'wrong-' + ADMIN : 'any-admin-token');
  await page.click('#pin-submit');
  await page.waitForFunction(() => document.getElementById('pin-msg').textContent.length > 0);
  let pmsg = await page.locator('#pin-msg').textContent();
  const pstatus = await page.locator('#pin-msg').getAttribute('data-status');
  if (!ADMIN) {
    check(/no retention pins/.test(pmsg), `pin on a daemon without pins: ${pmsg}`);
    await shot('pins-missing');
    log(`SKIP pins: this gentraced has no --admin-token (page says: "${pmsg}")`);
  } else {
    check(pstatus === '401' && /refused/.test(pmsg), `wrong admin token: ${pstatus} ${pmsg}`);
    check(!(await page.evaluate(() => sessionStorage.getItem('gentrace.adminToken'))), 'a refused token is kept');
    await page.fill('#pin-admin', ADMIN);
    await page.click('#pin-submit');
    await page.waitForFunction(() => document.getElementById('pin-msg').dataset.pin);
    pmsg = await page.locator('#pin-msg').textContent();
    const pinId = await page.locator('#pin-msg').getAttribute('data-pin');
    check(/^Pinned #\d+/.test(pmsg), `pin answer: ${pmsg}`);
    check(await page.evaluate(() => sessionStorage.getItem('gentrace.adminToken')) === ADMIN, 'admin token not kept in sessionStorage');
    await shot('pin');
    await page.goto(`${BASE}#/pins`);
    const prow = page.locator(`#pins-rows tr[data-id="${pinId}"]`);
    await prow.waitFor();
    check(/browser test: keep this/.test(await prow.textContent()), 'pin row without its reason');
    await shot('pins');
    // Typed once: deleting needs no new typing in this tab.
    await prow.locator('.pin-delete').click();
    await prow.waitFor({ state: 'detached' });
    log(`pins: #${pinId} pinned, listed and deleted ("${pmsg.slice(0, 60)}…")`);
  }
  const leaked = urls.filter((u) => (ADMIN && u.includes(ADMIN)) || u.includes('any-admin-token'));
  check(leaked.length === 0, `the admin token went into a URL: ${leaked[0]}`);
  expectRefusals = false;

  step = 'offline';
  check(foreign.length === 0, `requests left the daemon: ${foreign.slice(0, 5).join(', ')}`);
  check(pageErrors.length === 0, `page errors: ${pageErrors.slice(0, 5).join(' | ')}`);
  log('ok');
  await context.close();
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  try {
    // The flame panel's hooks, when it is open, say what it showed.
    const fl = await page.evaluate(() => {
      const f = document.getElementById('flame');
      return f ? JSON.stringify(f.dataset) : '';
    });
    if (fl) console.error(`flame panel: ${fl}`);
  } catch (_) {
    // The page may be gone.
  }
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join(' | ')}`);
  try {
    await shot('fail-' + step.replace(/\W+/g, '-'));
  } catch (_) {
    // The page may be gone; the message above is what matters.
  }
  await context.close().catch(() => {});
  process.exit(1);
}
