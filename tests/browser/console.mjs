// console.mjs: the web console's checks in a real headless chromium, run by
// test_console.sh (which starts redis-server, picketd with --auth-file and
// fenced-kv, and removes them).
//
//   serving   /ui (the page too), /ui/, app.js, style.css, favicon.svg: the
//             bytes of server/ui/, their types, the security headers on
//             every reply (404 and 405 too), no token needed
//   (a)       the page loads with no console error, no page error and no
//             Content-Security-Policy violation (checked to the end)
//   (b)       a lock taken through the API shows with its owner and fence
//   (c)       its release shows within a second of the release's reply
//   (f)       the details of a lock follow its events stream (one fetch()
//             with the token in Authorization, ended when the details
//             close): a renewal and then a release by the test show in its
//             history within a second each, and its TTL and row follow;
//             a break through the dialog shows as broken, by whom, at once
//   (d)       a read-only token sees no Break button, and its own
//             POST .../break is 403 permission_denied
//   (e)       an admin breaks a lock through the dialog: the old holder's
//             renew is 409 lease_lost, a new holder's fence is higher and
//             fenced-kv admits its write, then refuses the old holder's
//   (g)       an election campaigned through the API (its value HTML-like)
//             shows as a row of kind election with its term; its details
//             (GET /v1/elections/{name}) show the value as text, and follow
//             its observe stream (one, with the token): a proclaim and a new
//             leader show within a second; Break deposes the leader, whose
//             renew is then lease_lost and whose term fenced-kv refuses
//
// Env: PICKETD_URL FKV_URL CHROMIUM BROWSER_DIR T_ADMIN T_READER, and
// PICKET_SOURCE_DIR; PICKET_CONTRACT_LOG (every picketd exchange, the
// browser's included, is logged for the contract checks); PICKET_SCREENSHOT=1
// saves docs/console.png.
import { readFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const E = process.env;
const BASE = E.PICKETD_URL;
const SRC = E.PICKET_SOURCE_DIR;
const ADMIN = E.T_ADMIN;
const READER = E.T_READER;
const SCALE = Number(E.PICKET_TIME_SCALE || '1') || 1;
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const failures = [];
function check(cond, what) {
  if (!cond) {
    failures.push(what);
    console.log('FAIL: ' + what);
  }
  return cond;
}
function ok(what) {
  console.log('ok: ' + what);
}
// A check that later steps cannot do without.
function must(cond, what) {
  if (!check(cond, what)) throw new Error('cannot go on: ' + what);
}

// ---- the contract log (the format of tests/contract/contract_log.py) ----

function contractLog(method, path, reqBody, reqType, status, headers, body) {
  if (!E.PICKET_CONTRACT_LOG) return;
  const line = {
    method, path, status, content_type: headers['content-type'] || '', body,
    retry_after: headers['retry-after'] || '', allow: headers['allow'] || '',
    www_authenticate: headers['www-authenticate'] || '',
    request_body: reqBody || '', request_content_type: reqType || '',
  };
  appendFileSync(E.PICKET_CONTRACT_LOG, JSON.stringify(line) + '\n');
}

// ---- HTTP from the test itself ------------------------------------------

async function http(base, method, path, { body, token, headers = {}, raw } = {}) {
  const h = { ...headers };
  if (token) h.Authorization = 'Bearer ' + token;
  let data;
  if (body !== undefined) {
    data = typeof body === 'string' ? body : JSON.stringify(body);
    if (!raw) h['Content-Type'] = 'application/json';
  }
  const r = await fetch(base + path, { method, headers: h, body: data, redirect: 'manual' });
  const text = await r.text();
  const hdrs = {};
  r.headers.forEach((v, k) => (hdrs[k] = v));
  if (base === BASE) contractLog(method, path, data, h['Content-Type'], r.status, hdrs, text);
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: hdrs, text, json };
}
const api = (method, path, opts) => http(BASE, method, path, opts);
const code = (r) => r.json && r.json.error && r.json.error.code;
const show = (r) => r.status + ' ' + r.text.slice(0, 300);

function acquire(name, owner, ttl_ms = 60000) {
  return api('POST', `/v1/locks/${name}/acquire`, { body: { ttl_ms, owner }, token: ADMIN });
}
function fkvPut(key, lock, fence, value) {
  return http(E.FKV_URL, 'PUT', '/kv/' + key, {
    body: value, raw: true, headers: { 'Picket-Lock': lock, 'Picket-Fence': String(fence) },
  });
}

// ---- serving ---------------------------------------------------------------

async function serving() {
  const files = [['/ui', 'index.html', 'text/html; charset=utf-8'], ['/ui/', 'index.html', 'text/html; charset=utf-8'],
    ['/ui/app.js', 'app.js', 'text/javascript; charset=utf-8'],
    ['/ui/style.css', 'style.css', 'text/css; charset=utf-8'], ['/ui/favicon.svg', 'favicon.svg', 'image/svg+xml']];
  for (const [path, file, type] of files) {
    const r = await api('GET', path); // no token, under --auth-file: the files are open
    check(r.status === 200, `GET ${path}: ${r.status}`);
    check(r.text === readFileSync(join(SRC, 'server/ui', file), 'utf8'),
      `GET ${path} serves server/ui/${file} byte for byte`);
    check(r.headers['content-type'] === type, `${path} type ${r.headers['content-type']}`);
    const h = await api('HEAD', path);
    check(h.status === 200 && h.text === '' && h.headers['content-type'] === r.headers['content-type'],
      `HEAD ${path}: ${h.status}, ${h.text.length} bytes`);
  }
  const replies = {
    missing: await api('GET', '/ui/missing.js'),
    postMissing: await api('POST', '/ui/missing.js', { body: {} }),
    post: await api('POST', '/ui/', { body: {} }),
  };
  check(replies.postMissing.status === 404, `POST /ui/missing.js: ${show(replies.postMissing)}`);
  check(replies.missing.status === 404 && code(replies.missing) === 'not_found', `/ui/missing.js: ${show(replies.missing)}`);
  check(replies.post.status === 405 && replies.post.headers.allow === 'GET, HEAD' &&
    code(replies.post) === 'method_not_allowed', `POST /ui/: ${show(replies.post)}`);
  for (const [what, r] of Object.entries({ ...replies, index: await api('GET', '/ui/') })) {
    check(r.headers['content-security-policy'] === CSP, `${what}: CSP ${r.headers['content-security-policy']}`);
    check(r.headers['x-content-type-options'] === 'nosniff', `${what}: X-Content-Type-Options`);
    check(r.headers['referrer-policy'] === 'no-referrer', `${what}: Referrer-Policy`);
    check(r.headers['cache-control'] === 'no-cache', `${what}: Cache-Control`);
  }
  ok('/ui/ serves its files with their types and the security headers; 404, 405');
}

// ---- the browser -----------------------------------------------------------

const problems = []; // console errors, page errors and CSP violations, of every page
const UNAUTHORIZED = 'Failed to load resource: the server responded with a status of 401';

async function openConsole(browser, token, label) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const pending = [];
  const c = { page, context, pending, label, tokenInUse: false };
  await page.setViewport({ width: 1180, height: 760 });
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    // Before its token is pasted, the page asks picketd (under --auth-file)
    // what it may do and is told 401: chromium logs that reply as an
    // error. It is the only error allowed, and only then.
    if (!c.tokenInUse && m.text().startsWith(UNAUTHORIZED)) return;
    problems.push(`${label}: console error: ${m.text()} (${JSON.stringify(m.location())})`);
  });
  page.on('pageerror', (e) => problems.push(`${label}: page error: ${e.message}`));
  // Set up through the DevTools protocol, so the page's CSP does not apply
  // to it; a violation is also a console error, this names the directive.
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`));
  });
  // The page's streams (a lock's events, an election's observe): request
  // -> {name, kind, auth, open}.
  c.streams = new Map();
  page.on('request', (req) => {
    const m = /\/v1\/(locks\/([^/?]+)\/events|elections\/([^/?]+)\/observe)$/.exec(req.url());
    if (m) c.streams.set(req, { name: decodeURIComponent(m[2] || m[3]), kind: m[2] ? 'lock' : 'election',
      auth: req.headers().authorization, open: true });
  });
  const ended = (req) => { const s = c.streams.get(req); if (s) s.open = false; };
  page.on('requestfinished', ended);
  page.on('requestfailed', ended);
  page.on('response', (r) => {
    if (!r.url().startsWith(BASE + '/')) return;
    pending.push((async () => {
      const req = r.request();
      // An events stream's body never ends while the page follows it: its
      // status and headers are logged, its body is not waited for.
      const streaming = (r.headers()['content-type'] || '').startsWith('text/event-stream');
      let body = '';
      try {
        body = req.method() === 'HEAD' || r.status() === 308 || streaming ? '' : await r.text();
      } catch {
        return; // the page moved on or closed before the body was read: nothing to check
      }
      const u = new URL(r.url());
      contractLog(req.method(), u.pathname + u.search, req.postData() || '',
        req.headers()['content-type'] || '', r.status(), r.headers(), body);
    })());
  });
  const resp = await page.goto(BASE + '/ui/', { waitUntil: 'load' });
  must(resp && resp.status() === 200, `${label}: GET /ui/ in the browser: ${resp && resp.status()}`);
  // Under --auth-file and without a token, the console says it needs one.
  await page.waitForFunction(() => /^picketd needs a token/.test(document.getElementById('status').textContent),
    { polling: 50, timeout: 5000 * SCALE }).catch(() => check(false, `${label}: no 'needs a token' prompt`));
  if (token) {
    await page.type('#token', token);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /^A token is set for this tab\. Token '/.test(document.getElementById('token-state').textContent),
      { polling: 50, timeout: 5000 * SCALE }).catch(() => check(false, `${label}: the token was not taken`));
    c.tokenInUse = true;
  }
  return c;
}

const rowSel = (kind, name) => `#locks-body tr[data-kind="${kind}"][data-name="${name}"]`;

// The row's cells as text, or null when it is not there.
function row(page, name, kind = 'lock') {
  return page.evaluate((sel) => {
    const tr = document.querySelector(sel);
    if (!tr) return null;
    return {
      kind: tr.children[0].textContent, owner: tr.children[2].textContent, fence: tr.children[3].textContent,
      ttl: tr.children[4].textContent, waiters: tr.children[5].textContent,
      breakButton: !!tr.querySelector('button.break'),
    };
  }, rowSel(kind, name));
}

async function waitRow(page, name, pred, what, timeout = 10000, kind = 'lock') {
  try {
    await page.waitForFunction(pred, { polling: 50, timeout: timeout * SCALE }, rowSel(kind, name));
    return true;
  } catch (e) {
    check(false, `${what}: not seen in ${timeout} ms (row: ${JSON.stringify(await row(page, name, kind))}; ` +
      `status: ${await page.$eval('#status', (s) => s.textContent)})`);
    return false;
  }
}

// The labels every control must have, and the token kept where it should be.
async function hygiene(c, token) {
  const unlabelled = await c.page.evaluate(() => {
    const bad = [];
    for (const el of document.querySelectorAll('input, button, select, textarea')) {
      const name = el.labels && el.labels.length ? el.labels[0].textContent : el.getAttribute('aria-label') || el.textContent;
      if (!name || !name.trim()) bad.push(el.outerHTML.slice(0, 80));
    }
    return bad;
  });
  check(unlabelled.length === 0, `${c.label}: controls without a label: ${unlabelled.join(' | ')}`);
  const kept = await c.page.evaluate(() => ({
    session: sessionStorage.getItem('picket.token'), local: localStorage.length,
    url: location.href, field: document.getElementById('token').value,
  }));
  check(kept.session === token, `${c.label}: the token is in sessionStorage`);
  check(kept.local === 0, `${c.label}: localStorage holds ${kept.local} items`);
  check(!kept.url.includes(token) && kept.field === '', `${c.label}: the token is out of the URL and the field`);
}

async function main() {
  await serving();

  // (b) a lock taken through the API, and a couple more for the screenshot
  const held = {};
  for (const [name, owner] of [['inventory-sync', 'worker-7'], ['billing.nightly', 'cron@db-2'],
    ['console.b', 'test-b']]) {
    const g = await acquire(name, owner);
    must(g.status === 200, `acquire ${name}: ${show(g)}`);
    held[name] = g.json;
  }

  const browser = await puppeteer.launch({
    executablePath: E.CHROMIUM,
    headless: true,
    userDataDir: join(E.BROWSER_DIR, 'profile'),
    // As root (CI), chromium's sandbox cannot start.
    args: [...(process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []),
      '--disable-gpu', '--no-first-run', '--no-default-browser-check', '--disable-dev-shm-usage'],
  });
  const pages = [];
  try {
    const admin = await openConsole(browser, ADMIN, 'admin');
    pages.push(admin);
    const b = held['console.b'];
    if (await waitRow(admin.page, 'console.b', (sel) => {
      const tr = document.querySelector(sel);
      return tr && tr.children[2].textContent === 'test-b';
    }, '(b) console.b with its owner')) {
      const r = await row(admin.page, 'console.b');
      check(r.fence === String(b.fence), `(b) console.b shows fence ${r.fence}, want ${b.fence}`);
      // the 60 s lease was taken before chromium started: a loaded machine
      // took 12 s to get here, so only the form and a sane value are checked
      check(/^\d+\.\d s$/.test(r.ttl) && parseFloat(r.ttl) > 20 && parseFloat(r.ttl) <= 60,
            `(b) console.b TTL cell '${r.ttl}'`);
      ok(`(b) console.b shows owner ${r.owner}, fence ${r.fence}, TTL ${r.ttl}`);
    }
    await hygiene(admin, ADMIN);

    // The TTL counts down between polls.
    const t1 = parseFloat((await row(admin.page, 'console.b')).ttl);
    await new Promise((res) => setTimeout(res, 1200));
    const t2 = parseFloat((await row(admin.page, 'console.b')).ttl);
    check(t2 < t1, `the TTL counts down: ${t1} then ${t2}`);

    // Details and history of console.b: open by keyboard.
    await admin.page.focus(rowSel('lock', 'console.b') + ' button.details');
    await admin.page.keyboard.press('Enter');
    await admin.page.waitForFunction(() => !document.getElementById('detail').hidden &&
      document.querySelectorAll('#history li').length > 0, { polling: 50, timeout: 5000 * SCALE });
    const seen = await admin.page.$eval('#history', (h) => h.textContent);
    check(seen.includes('fence ' + b.fence) && seen.includes('test-b'), `(b) history of console.b: ${seen}`);

    if (E.PICKET_SCREENSHOT === '1') {
      await admin.page.evaluate(() => document.activeElement.blur()); // no focus ring in the README
      await admin.page.screenshot({ path: join(SRC, 'docs/console.png'), fullPage: true });
      ok('saved docs/console.png');
    }

    // (f) the details follow console.b's events: first where it stands...
    const history = () => admin.page.$eval('#history', (h) => h.textContent);
    const untilHistory = async (text, what) => {
      const t0 = performance.now();
      try {
        await admin.page.waitForFunction((t) => document.getElementById('history').textContent.includes(t),
          { polling: 20, timeout: 5000 * SCALE }, text);
        return Math.round(performance.now() - t0);
      } catch {
        check(false, `(f) ${what}: '${text}' not in the history after 5 s: ${await history()}`);
        return null;
      }
    };
    await admin.page.waitForFunction(() => /^Live:/.test(document.getElementById('live').textContent),
      { polling: 50, timeout: 5000 * SCALE }).catch(async () =>
      check(false, '(f) the details of console.b are not live: ' + await admin.page.$eval('#live', (l) => l.textContent)));
    check((await history()).includes(`Following its events: held, fence ${b.fence}, owner 'test-b'`),
      `(f) the history says where console.b stood: ${await history()}`);
    const bStreams = [...admin.streams.values()].filter((x) => x.name === 'console.b');
    check(bStreams.length === 1 && bStreams[0].open && bStreams[0].auth === 'Bearer ' + ADMIN,
      `(f) one open events stream for console.b, with the admin token (${bStreams.length} streams, ` +
      `auth ${bStreams[0] && bStreams[0].auth ? 'set' : 'missing'})`);
    // ...then a renewal...
    let r = await api('POST', '/v1/locks/console.b/renew', { body: { lease: b.lease, ttl_ms: 45000 }, token: ADMIN });
    must(r.status === 200, `renew console.b: ${show(r)}`);
    const renewMs = await untilHistory(`Renewed: fence ${b.fence}, TTL 45.0 s.`, 'the renewal');
    if (renewMs !== null) {
      check(renewMs <= 1000 * SCALE, `(f) the renewal showed after ${renewMs} ms, want <= 1000`);
      const ttl = parseFloat(await admin.page.$eval('#detail-fields dd.ttl', (d) => d.textContent));
      check(ttl > 40 && ttl <= 45, `(f) the TTL follows the renewal: ${ttl} s`);
      ok(`(f) console.b's renewal showed in its history ${renewMs} ms after its reply (TTL now ${ttl} s)`);
    }

    // (c) ...and its release, in the list and the history, within a second
    r = await api('POST', '/v1/locks/console.b/release', { body: { lease: b.lease }, token: ADMIN });
    must(r.status === 200, `release console.b: ${show(r)}`);
    const released = performance.now();
    try {
      await admin.page.waitForFunction((sel) => !document.querySelector(sel),
        { polling: 20, timeout: 5000 * SCALE }, rowSel('lock', 'console.b'));
      const ms = Math.round(performance.now() - released);
      check(ms <= 1000 * SCALE, `(c) the release showed after ${ms} ms, want <= 1000`);
      ok(`(c) the release of console.b left the list ${ms} ms after its reply`);
    } catch {
      check(false, '(c) the release of console.b did not show in 5 s');
    }
    const releaseMs = await untilHistory(`Released by its holder: fence ${b.fence}.`, 'the release');
    if (releaseMs !== null) {
      const ms = Math.round(performance.now() - released);
      check(ms <= 1000 * SCALE, `(f) the release showed in the history after ${ms} ms, want <= 1000`);
      const st = await admin.page.$eval('#detail-fields', (d) => d.textContent);
      check(/not held: released by its holder/.test(st), `(f) the details say it was released: ${st}`);
      ok(`(f) console.b's release showed in its history ${ms} ms after its reply`);
    }
    // A poll that was under way must not bring the released lock back.
    await new Promise((res) => setTimeout(res, 2500));
    check(!(await row(admin.page, 'console.b')), '(f) console.b came back into the list after its release');

    // The prefix filter: picketd filters, the page shows what it sent.
    await admin.page.type('#prefix', 'billing.');
    await admin.page.waitForFunction(() => {
      const rows = [...document.querySelectorAll('#locks-body tr')].map((tr) => tr.dataset.name);
      return rows.length === 1 && rows[0] === 'billing.nightly';
    }, { polling: 50, timeout: 5000 * SCALE }).then(() => ok("the prefix 'billing.' shows billing.nightly only"),
      () => check(false, "the prefix 'billing.' does not narrow the list to billing.nightly"));
    await admin.page.click('#prefix', { count: 3 }); // select it all, then delete it
    await admin.page.keyboard.press('Backspace');
    await waitRow(admin.page, 'inventory-sync', (sel) => !!document.querySelector(sel), 'the list without a prefix');

    // (d) a read-only token: it lists, but sees no Break button...
    const reader = await openConsole(browser, READER, 'reader');
    pages.push(reader);
    if (await waitRow(reader.page, 'inventory-sync', (sel) => !!document.querySelector(sel),
      '(d) the reader sees inventory-sync')) {
      // ...once it knows what the token may do (GET /v1/whoami answered).
      await reader.page.waitForFunction(() => /may /.test(document.getElementById('token-state').textContent),
        { polling: 50, timeout: 5000 * SCALE }).catch(() => {});
      const state = await reader.page.$eval('#token-state', (s) => s.textContent);
      const buttons = await reader.page.$$eval('button.break', (bs) => bs.length);
      check(buttons === 0, `(d) the reader sees ${buttons} Break buttons (${state})`);
      ok(`(d) no Break button for the read-only token (${state})`);
    }
    await hygiene(reader, READER);
    // ...and is refused if it calls break itself.
    r = await api('POST', '/v1/locks/inventory-sync/break', { body: {}, token: READER });
    check(r.status === 403 && code(r) === 'permission_denied', `(d) the reader's own break: ${show(r)}`);
    r = await api('GET', '/v1/locks/inventory-sync', { token: ADMIN });
    check(r.status === 200 && r.json.held === true && r.json.fence === held['inventory-sync'].fence,
      `(d) inventory-sync is still held by its holder after the refused break: ${show(r)}`);

    // (e) an admin breaks a lock through the UI
    const old = await acquire('console.e', 'old-holder');
    must(old.status === 200, `acquire console.e: ${show(old)}`);
    r = await fkvPut('console-e-data', 'console.e', old.json.fence, 'written by the old holder');
    must(r.status === 200, `the old holder's first write: ${show(r)}`);
    const breakSel = rowSel('lock', 'console.e') + ' button.break';
    try {
      await admin.page.waitForSelector(breakSel, { timeout: 5000 * SCALE });
    } catch {
      const who = await api('GET', '/v1/whoami', { token: ADMIN });
      must(false, `(e) no Break button for the admin token (GET /v1/whoami: ${show(who)})`);
    }
    // Its details follow its events (console.b's stream ends).
    await admin.page.click(rowSel('lock', 'console.e') + ' button.details');
    await admin.page.waitForFunction(() => /^Live:/.test(document.getElementById('live').textContent) &&
      document.getElementById('history').textContent.includes('Following its events: held'),
      { polling: 50, timeout: 5000 * SCALE }).catch(() => check(false, '(f) the details of console.e are not live'));
    const open = [...admin.streams.values()].filter((x) => x.open).map((x) => x.name);
    check(open.length === 1 && open[0] === 'console.e', `(f) open events streams: ${open.join(', ')}`);
    // Escape leaves the dialog and breaks nothing.
    await admin.page.click(breakSel);
    await admin.page.waitForSelector('#break-dialog[open]', { timeout: 5000 * SCALE });
    const dialog = await admin.page.$eval('#break-dialog', (d) => ({
      text: d.textContent.replace(/\s+/g, ' '), focus: document.activeElement.id,
    }));
    check(/fence/.test(dialog.text) && /refuses/.test(dialog.text) && dialog.text.includes('console.e'),
      `(e) the dialog says what breaking does: ${dialog.text}`);
    check(dialog.focus === 'break-cancel', `(e) the dialog's focus starts on Cancel, not ${dialog.focus}`);
    await admin.page.keyboard.press('Escape');
    await admin.page.waitForFunction(() => !document.getElementById('break-dialog').open,
      { polling: 50, timeout: 5000 * SCALE });
    r = await api('GET', '/v1/locks/console.e', { token: ADMIN });
    check(r.json && r.json.held === true && r.json.fence === old.json.fence, `(e) Escape broke nothing: ${show(r)}`);
    // Now confirm it.
    await admin.page.click(breakSel);
    await admin.page.waitForSelector('#break-dialog[open]', { timeout: 5000 * SCALE });
    await admin.page.click('#break-confirm');
    await admin.page.waitForFunction(() => !document.getElementById('break-dialog').open,
      { polling: 50, timeout: 5000 * SCALE }).catch(async () =>
      must(false, '(e) the dialog stayed open: ' + await admin.page.$eval('#break-error', (e) => e.textContent)));
    const said = await admin.page.$eval('#notice', (s) => s.textContent);
    check(/^Broke 'console\.e'/.test(said), `(e) the console says it broke console.e: ${said}`);
    if (await untilHistory(`Broken by token 'admin': the lease of fence ${old.json.fence} ended`, 'the break') !== null) {
      const st = await admin.page.$eval('#detail-fields', (d) => d.textContent);
      check(/not held: broken/.test(st), `(f) the details say console.e was broken: ${st}`);
      ok('(f) the break of console.e showed in its history from its events');
    }

    r = await api('POST', '/v1/locks/console.e/renew', { body: { lease: old.json.lease }, token: ADMIN });
    check(r.status === 409 && code(r) === 'lease_lost', `(e) the old holder's renew after the break: ${show(r)}`);
    const next = await acquire('console.e', 'new-holder');
    must(next.status === 200, `(e) a new holder acquires console.e: ${show(next)}`);
    check(next.json.fence > old.json.fence, `(e) new fence ${next.json.fence} > old ${old.json.fence}`);
    r = await fkvPut('console-e-data', 'console.e', next.json.fence, 'written by the new holder');
    check(r.status === 200, `(e) the new holder's write: ${show(r)}`);
    r = await fkvPut('console-e-data', 'console.e', old.json.fence, 'the zombie write');
    check(r.status === 409 && code(r) === 'stale_fence', `(e) the old holder's write after the break: ${show(r)}`);
    r = await http(E.FKV_URL, 'GET', '/kv/console-e-data');
    check(r.json && r.json.value === 'written by the new holder', `(e) fenced-kv keeps the new holder's value: ${show(r)}`);
    ok(`(e) broken through the console: renew lease_lost, fence ${old.json.fence} -> ${next.json.fence}, ` +
      'the old holder\'s write refused by fenced-kv');
    await untilHistory(`Granted: fence ${next.json.fence}, owner 'new-holder'`, 'the new grant');
    await api('POST', '/v1/locks/console.e/release', { body: { lease: next.json.lease }, token: ADMIN });

    // (g) an election: its row, its details (its value shown as text, never
    // as HTML), its leader events as they come, and a break from the console.
    const campaign = (owner, value, more = {}) => api('POST', '/v1/elections/console.g/campaign',
      { body: { ttl_ms: 60000, owner, value, ...more }, token: ADMIN });
    const VALUE = '<b>x</b>';
    const g1 = await campaign('leader-1', VALUE);
    must(g1.status === 200 && g1.json.term > 0, `(g) campaign console.g: ${show(g1)}`);
    const gSel = rowSel('election', 'console.g');
    if (await waitRow(admin.page, 'console.g', (sel) => !!document.querySelector(sel),
      '(g) the row of election console.g', 10000, 'election')) {
      const r = await row(admin.page, 'console.g', 'election');
      if (check(r.kind === 'election' && r.owner === 'leader-1' && r.fence === String(g1.json.term) && r.breakButton,
        `(g) console.g's row: ${JSON.stringify(r)}; want kind election, owner leader-1, term ${g1.json.term}, Break`)) ok(`(g) console.g listed as an election: owner ${r.owner}, term ${r.fence}, TTL ${r.ttl}`);
    }
    // Its details: where it stands from its leader events and its GET.
    const fieldOf = (label) => admin.page.evaluate((l) => {
      const dt = [...document.querySelectorAll('#detail-fields dt')].find((d) => d.textContent === l);
      return dt ? dt.nextElementSibling.textContent : null;
    }, label);
    await admin.page.click(gSel + ' button.details');
    try {
      await admin.page.waitForFunction((v, t) => /^Live:/.test(document.getElementById('live').textContent) &&
        document.getElementById('history').textContent.includes('Following its leader: term ' + t) &&
        [...document.querySelectorAll('#detail-fields dt')].some((d) => d.textContent === 'Last term issued') &&
        (document.querySelector('#detail-fields dd.value') || {}).textContent === v,
      { polling: 50, timeout: 5000 * SCALE }, VALUE, g1.json.term);
      const f = { leader: await fieldOf('Leader'), term: await fieldOf('Term'), last: await fieldOf('Last term issued') };
      if (check(f.leader === 'leader-1' && f.term === String(g1.json.term) && f.last === String(g1.json.term),
        `(g) console.g's details: ${JSON.stringify(f)}`)) ok(`(g) console.g's details are live and show its value ${VALUE} as text (${JSON.stringify(f)})`);
    } catch {
      check(false, `(g) the details of console.g: live '${await admin.page.$eval('#live', (l) => l.textContent)}', ` +
        `fields '${await admin.page.$eval('#detail-fields', (d) => d.textContent)}', history '${await history()}'`);
    }
    const tags = await admin.page.$$eval('main b, main i', (els) => els.length);
    check(tags === 0, `(g) the leader's value made ${tags} HTML elements in the page`);
    const gStreams = [...admin.streams.values()].filter((x) => x.open);
    check(gStreams.length === 1 && gStreams[0].kind === 'election' && gStreams[0].name === 'console.g' &&
      gStreams[0].auth === 'Bearer ' + ADMIN,
      `(g) open streams: ${JSON.stringify(gStreams.map((x) => [x.kind, x.name, !!x.auth]))}, want console.g's observe`);
    // A proclaim shows within a second...
    const VALUE2 = '<i>y</i> & z';
    r = await api('POST', '/v1/elections/console.g/proclaim', { body: { lease: g1.json.lease, value: VALUE2 }, token: ADMIN });
    must(r.status === 200, `(g) proclaim: ${show(r)}`);
    const proclaimMs = await untilHistory(`Proclaimed: term ${g1.json.term}, value ${JSON.stringify(VALUE2)}.`, 'the proclaim');
    if (proclaimMs !== null) {
      check(proclaimMs <= 1000 * SCALE, `(g) the proclaim showed after ${proclaimMs} ms, want <= 1000`);
      const v = await admin.page.$eval('#detail-fields dd.value', (d) => d.textContent);
      check(v === VALUE2, `(g) the details show the proclaimed value: '${v}'`);
      ok(`(g) console.g's proclaim showed ${proclaimMs} ms after its reply`);
    }
    // ...and a new leader: a waiting candidate takes over when leader-1 resigns.
    const candidate = campaign('leader-2', 'second', { wait_ms: 20000 });
    await new Promise((res) => setTimeout(res, 200));
    r = await api('POST', '/v1/elections/console.g/resign', { body: { lease: g1.json.lease }, token: ADMIN });
    must(r.status === 200, `(g) resign: ${show(r)}`);
    const g2 = await candidate;
    must(g2.status === 200 && g2.json.term > g1.json.term, `(g) the candidate's campaign: ${show(g2)}`);
    const leaderMs = await untilHistory(`New leader: term ${g2.json.term}, owner 'leader-2'`, 'the new leader');
    if (leaderMs !== null) {
      check(leaderMs <= 1000 * SCALE, `(g) the new leader showed after ${leaderMs} ms, want <= 1000`);
      const rr = await row(admin.page, 'console.g', 'election');
      check(rr && rr.owner === 'leader-2' && rr.fence === String(g2.json.term), `(g) the row follows: ${JSON.stringify(rr)}`);
      ok(`(g) console.g's new leader (term ${g1.json.term} -> ${g2.json.term}) showed ${leaderMs} ms after its grant`);
    }
    r = await fkvPut('console-g-data', 'console.g', g2.json.term, 'written by leader-2');
    must(r.status === 200, `(g) leader-2's write: ${show(r)}`);
    // Break it from the console.
    await admin.page.click(gSel + ' button.break');
    await admin.page.waitForSelector('#break-dialog[open]', { timeout: 5000 * SCALE });
    const gDialog = await admin.page.$eval('#break-dialog', (d) => d.innerText.replace(/\s+/g, ' '));
    check(/^Break this election\?/.test(gDialog) && gDialog.includes('console.g') && /term/.test(gDialog) &&
      !/lock's fence/.test(gDialog), `(g) the dialog says what breaking an election does: ${gDialog}`);
    await admin.page.click('#break-confirm');
    await admin.page.waitForFunction(() => !document.getElementById('break-dialog').open,
      { polling: 50, timeout: 5000 * SCALE }).catch(async () =>
      must(false, '(g) the dialog stayed open: ' + await admin.page.$eval('#break-error', (e) => e.textContent)));
    const gSaid = await admin.page.$eval('#notice', (s) => s.textContent);
    const m = /^Broke 'console\.g'; its term is now (\d+)\.$/.exec(gSaid);
    check(m && Number(m[1]) > g2.json.term, `(g) the console says it broke console.g: ${gSaid}`);
    if (await untilHistory(`No leader: the leadership of term ${g2.json.term} ended`, 'the break') !== null &&
        await untilHistory("Broken from this console: owner 'leader-2' lost the leadership", 'the break') !== null) {
      const st = await admin.page.$eval('#detail-fields', (d) => d.textContent);
      check(/no leader: its leadership ended/.test(st), `(g) the details say console.g has no leader: ${st}`);
      check(!(await row(admin.page, 'console.g', 'election')), '(g) console.g is still listed after the break');
    }
    r = await api('POST', '/v1/elections/console.g/renew', { body: { lease: g2.json.lease }, token: ADMIN });
    check(r.status === 409 && code(r) === 'lease_lost', `(g) the deposed leader's renew: ${show(r)}`);
    const g3 = await campaign('leader-3', null);
    must(g3.status === 200 && g3.json.term > g2.json.term, `(g) a new leader after the break: ${show(g3)}`);
    r = await fkvPut('console-g-data', 'console.g', g3.json.term, 'written by leader-3');
    check(r.status === 200, `(g) the new leader's write: ${show(r)}`);
    r = await fkvPut('console-g-data', 'console.g', g2.json.term, 'the deposed leader\'s write');
    check(r.status === 409 && code(r) === 'stale_fence', `(g) the deposed leader's write: ${show(r)}`);
    ok(`(g) broken through the console: renew lease_lost, term ${g2.json.term} -> ${g3.json.term}, ` +
      'the deposed leader\'s write refused by fenced-kv');
    await untilHistory(`New leader: term ${g3.json.term}, owner 'leader-3', no value`, 'the next leader');
    await api('POST', '/v1/elections/console.g/resign', { body: { lease: g3.json.lease }, token: ADMIN });
    // Closing the details ends the stream.
    await admin.page.click('#detail-close');
    await admin.page.waitForFunction(() => document.getElementById('detail').hidden, { timeout: 5000 * SCALE });
    const t0 = performance.now();
    while ([...admin.streams.values()].some((x) => x.open) && performance.now() - t0 < 5000 * SCALE) {
      await new Promise((res) => setTimeout(res, 20));
    }
    const left = [...admin.streams.values()].filter((x) => x.open).map((x) => x.name);
    check(left.length === 0, `(f) events streams left open after the details closed: ${left.join(', ')}`);

    // (a) no console error, page error or CSP violation on any page, all along
    for (const c of pages) await Promise.allSettled(c.pending);
    check(problems.length === 0, '(a) ' + (problems.join('\n    ') || ''));
    if (problems.length === 0) ok('(a) no console error, page error or CSP violation');
  } finally {
    for (const c of pages) await Promise.allSettled(c.pending);
    await browser.close();
  }
}

try {
  await main();
} catch (e) {
  failures.push(String(e && e.stack || e));
  console.log('FAIL: ' + (e && e.stack || e));
}
console.log(failures.length ? `${failures.length} failures` : 'all console checks passed');
process.exitCode = failures.length ? 1 : 0;
