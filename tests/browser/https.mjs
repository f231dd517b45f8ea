// https.mjs: the dashboard over HTTPS in headless Chromium (started by
// test_https.sh). The browser runs with HOME=BROWSER_HOME, whose NSS
// database trusts the test CA; no certificate error is ignored, so a page
// that loads proves the chain verified.
//
// Env: HTTP (host:port, served over TLS), TOKEN (read token), SERVICE,
// ARTIFACTS, BROWSER_HOME, PROFILE, PIDFILE, CHROMIUM.
import { chromium } from 'playwright-core';
import { env, browserPids } from './lib.mjs';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const HTTP = env('HTTP'), TOKEN = env('TOKEN'), SERVICE = env('SERVICE');
const ARTIFACTS = env('ARTIFACTS'), PROFILE = env('PROFILE'), BHOME = env('BROWSER_HOME');
const ORIGIN = `https://${HTTP}`;
const BASE = `${ORIGIN}/?token=${encodeURIComponent(TOKEN)}`;

let step = '';
const log = (s) => console.log(`# ${s}`);
function check(cond, msg) {
  if (!cond) throw new Error(`${step}: ${msg}`);
}

const context = await chromium.launchPersistentContext(PROFILE, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // No --ignore-certificate-errors and no ignoreHTTPSErrors: trust comes
  // from the NSS database under HOME.
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  env: { ...process.env, HOME: BHOME },
  viewport: { width: 1280, height: 800 },
});
if (process.env.PIDFILE) writeFileSync(process.env.PIDFILE, browserPids().join(' ') + '\n');
const page = context.pages()[0] || (await context.newPage());
page.setDefaultTimeout(20000);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
page.on('console', (m) => {
  if (m.type() === 'error') pageErrors.push('console: ' + m.text());
});
const plain = [];
context.on('request', (r) => {
  if (!r.url().startsWith(ORIGIN + '/') && !r.url().startsWith('data:')) plain.push(r.url());
});
const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `https-${name}.png`) });

try {
  step = 'page over https';
  const resp = await page.goto(BASE);
  check(resp && resp.ok(), `GET / answered ${resp && resp.status()}`);
  const sec = await resp.securityDetails();
  check(sec, 'no TLS on the page');
  log(`TLS: ${sec.protocol}, issuer "${sec.issuer}", subject "${sec.subjectName}"`);
  check(/gentrace test CA/.test(sec.issuer), `issuer ${sec.issuer}`);
  check(await page.evaluate(() => window.isSecureContext), 'not a secure context');

  // The fleet fills from /v1/agents and goes live on /v1/feed, both HTTPS.
  step = 'feed over https';
  const row = page.locator(`tr.session[data-service="${SERVICE}"]`).first();
  await row.waitFor();
  await page.waitForFunction(() => document.getElementById('status').dataset.state === 'live');
  const sid = await row.getAttribute('data-session');
  // Live: the session's generation count grows while the page follows the feed.
  const gens0 = Number(await row.locator('td:nth-child(9)').textContent());
  await page.waitForFunction(([svc, g]) => {
    const r = document.querySelector(`tr.session[data-service="${svc}"]`);
    return r && Number(r.children[8].textContent) > g;
  }, [SERVICE, gens0]);
  log(`fleet over https: ${SERVICE} session ${sid.slice(0, 12)}, generations ${gens0} -> ${await row.locator('td:nth-child(9)').textContent()}`);
  await shot('fleet');

  step = 'window over https';
  await page.goto(`${BASE}#/window?session=${sid}&last=3s`);
  await page.waitForFunction(() => /worker-\d/.test(document.getElementById('viewer')?.dataset.lanes || ''));
  const curl = await page.inputValue('#curl');
  check(curl.includes(`${ORIGIN}/v1/trace?`), `curl: ${curl}`);
  await shot('window');

  step = 'search over https';
  await page.goto(`${BASE}#/search?name=request&min=1us&last=1h&service=${SERVICE}`);
  await page.waitForFunction(() => document.querySelectorAll('#search-rows tr').length > 0);
  await shot('search');

  step = 'clean';
  check(plain.length === 0, `requests not to the HTTPS origin: ${plain.slice(0, 3).join(', ')}`);
  check(pageErrors.length === 0, `page errors: ${pageErrors.slice(0, 5).join(' | ')}`);
  log('ok');
  await context.close();
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  if (pageErrors.length) console.error(`page errors: ${pageErrors.join(' | ')}`);
  try {
    await page.screenshot({ path: join(ARTIFACTS, 'https-fail-' + step.replace(/\W+/g, '-') + '.png') });
  } catch (_) {
    // The page may be gone.
  }
  await context.close().catch(() => {});
  process.exit(1);
}
