// dashboard.mjs: drives the dashboard in headless Chromium against a real
// gentraced fed by the real demo service (started by test_dashboard.sh).
//
// Env: HTTP (host:port of the daemon), TOKEN (its --read-token), SERVICE (the
// demo's service name), GENTRACE (the CLI), ARTIFACTS (screenshots and the
// downloaded window go there), PROFILE (a fresh --user-data-dir), PIDFILE
// (the browser's PID is written there so the shell can stop it by PID if
// this script dies without closing it).
//
// Each step says what it checks; the first failure throws, prints the
// reason and a screenshot named fail-*.png, and exits 1.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} not set`);
  return v;
};
const HTTP = env('HTTP'), TOKEN = env('TOKEN'), SERVICE = env('SERVICE');
const GENTRACE = env('GENTRACE'), ARTIFACTS = env('ARTIFACTS'), PROFILE = env('PROFILE');
const ORIGIN = `http://${HTTP}`;
const BASE = `${ORIGIN}/?token=${encodeURIComponent(TOKEN)}`;
const T_STEP = 20000; // generous: the suite also runs under ASan

let step = '';
const log = (s) => console.log(`# ${s}`);
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}

// Children of this process whose command is the browser: its PID, so the
// shell's trap can stop it by PID (Playwright starts it in its own group).
function browserPids() {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) out.push(Number(d));
    } catch (_) {
      // The process ended while we looked.
    }
  }
  return out;
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
page.on('console', (m) => {
  if (m.type() === 'error') pageErrors.push('console: ' + m.text());
});
const foreign = [];
let perfettoAllowed = false;
context.on('request', (r) => {
  const u = r.url();
  if (u.startsWith(ORIGIN + '/') || u.startsWith('data:') || u.startsWith('blob:')) return;
  if (perfettoAllowed && u.startsWith('https://ui.perfetto.dev/')) return;
  foreign.push(u);
});

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
    drawn = JSON.parse(await page.locator('#viewer').getAttribute('data-drawn-regions'));
    if (i >= 2 && drawn.includes('request') && drawn.includes('db.query')) break;
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
  // Hovering a drawn region names it.
  const at = await page.evaluate(() => window.gentraceViewer.locate('request'));
  check(at, 'locate(request) found nothing');
  await page.mouse.move(at.x, at.y);
  await page.waitForFunction(() => document.getElementById('viewer').dataset.hover === 'request');
  const tip = await page.locator('.tip:not([hidden])').textContent();
  check(/request/.test(tip) && /region/.test(tip), `tooltip says: ${tip}`);
  await shot('window');
  // Keyboard pan moves the view.
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
  await page.locator('.hist-bar').first().click();
  await page.waitForURL(/#\/search\?.*max=/);
  await page.waitForFunction(() => document.querySelectorAll('#search-rows tr').length > 0 ||
    /No span/.test(document.getElementById('search-note').textContent));
  await shot('search-bucket');
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

  step = 'offline';
  check(foreign.length === 0, `requests left the daemon: ${foreign.slice(0, 5).join(', ')}`);
  check(pageErrors.length === 0, `page errors: ${pageErrors.slice(0, 5).join(' | ')}`);
  log('ok');
  await context.close();
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join(' | ')}`);
  try {
    await shot('fail-' + step.replace(/\W+/g, '-'));
  } catch (_) {
    // The page may be gone; the message above is what matters.
  }
  await context.close().catch(() => {});
  process.exit(1);
}
