// evil_page.mjs: a page on another origin, in real chromium, tries to
// break a lock and take one through picketd on loopback without
// --auth-file (issue 39, item 3; run by tests/tenant/test_browser.sh).
//
// The page is served by this script on http://localhost:EVILPORT, picketd
// is http://127.0.0.1:PORT: another site, as a page on the web is. It
// sends what a page may send without a CORS preflight: a body-less
// fetch() POST to .../break, a text/plain fetch() POST to .../acquire, an
// HTML form POST to .../break; and it tries to read the listing. Then the
// lock must still be held by its owner with its fence, no lease taken,
// and the listing unread. Env: PICKETD_URL.
import http from 'node:http';
import puppeteer from 'puppeteer-core';

const API = process.env.PICKETD_URL;
const fail = (m) => { console.error('FAIL: ' + m); process.exitCode = 1; };
const ok = (m) => console.log('ok: ' + m);

async function api(method, path, body) {
  const init = { method, headers: body ? { 'Content-Type': 'application/json' } : {} };
  if (body) init.body = JSON.stringify(body);
  const r = await fetch(API + path, init);
  return { status: r.status, json: await r.json().catch(() => null) };
}

const page = `<!DOCTYPE html><html><body>
<form id="f" method="POST" action="${API}/v1/locks/page-victim/break"></form>
<script>
window.attacks = Promise.allSettled([
  fetch('${API}/v1/locks/page-victim/break', { method: 'POST', mode: 'no-cors' }),
  fetch('${API}/v1/locks/page-grab/acquire', { method: 'POST', mode: 'no-cors',
    headers: { 'Content-Type': 'text/plain' }, body: '{"ttl_ms":3600000,"owner":"evil"}' }),
  fetch('${API}/v1/locks').then((r) => r.text()),
]).then((rs) => rs.map((r) => r.status + ' ' + (r.status === 'fulfilled' ? typeof r.value : r.reason)));
</script></body></html>`;

const server = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(page);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const evil = `http://localhost:${server.address().port}/`;

const g = await api('POST', '/v1/locks/page-victim/acquire', { ttl_ms: 600000, owner: 'alice' });
if (g.status !== 200) fail('alice takes page-victim: ' + JSON.stringify(g));

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  userDataDir: process.env.BROWSER_DIR,
  args: [...(process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []),
    '--disable-gpu', '--no-first-run', '--no-default-browser-check', '--disable-dev-shm-usage'],
});
try {
  const tab = await browser.newPage();
  await tab.goto(evil, { waitUntil: 'load' });
  const outcomes = await tab.evaluate(() => window.attacks);
  // the listing's read must fail: no CORS headers, so the page gets no body
  if (!/^rejected/.test(outcomes[2])) fail('the page read the listing: ' + outcomes[2]);
  else ok('the page cannot read the listing (' + outcomes[2] + ')');
  const seen = tab.waitForNavigation({ waitUntil: 'load' });
  await tab.evaluate(() => document.getElementById('f').submit());
  await seen;
  const text = await tab.evaluate(() => document.body.innerText);
  if (!text.includes('forbidden_origin')) fail('the form POST got: ' + text.slice(0, 200));
  else ok('the form POST to break got 403 forbidden_origin');
} finally {
  await browser.close();
  server.close();
}

const v = await api('GET', '/v1/locks/page-victim');
if (!(v.json && v.json.held && v.json.owner === 'alice' && v.json.fence === g.json.fence))
  fail('page-victim after the page: ' + JSON.stringify(v.json));
else ok('page-victim is still held by alice with fence ' + v.json.fence);
const t = await api('GET', '/v1/locks/page-grab');
if (!(t.json && !t.json.held && t.json.fence === 0)) fail('page-grab after the page: ' + JSON.stringify(t.json));
else ok('page-grab was never granted');
