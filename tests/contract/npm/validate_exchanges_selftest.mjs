// validate_exchanges_selftest.mjs: proves that validate_exchanges.mjs can
// fail, and fails for the right reason. It writes hand-made contract logs to
// a temp dir and runs the validator on each: one that conforms (it must pass,
// skip the fenced-kv exchange and excuse the 400s that OpenAPI cannot
// express), then one log per defect (each must fail, and every failure it
// prints must name that defect), then an empty, a missing and a malformed
// log, and the usage and skip exit codes.
//
// The exchanges are built from the spec's own examples (parameters, request
// bodies, replies, fallbacks), not written out here, so the selftest follows
// proto/openapi.yaml as it changes.
//
// Usage: node validate_exchanges_selftest.mjs SPEC   (proto/openapi.yaml)

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const VALIDATOR = path.join(HERE, 'validate_exchanges.mjs');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const PCHAR = /^[A-Za-z0-9._~!$&'()*+,;=:@-]+$/;

const spec = process.argv[2];
if (!spec || process.argv.length !== 3) {
  console.error('usage: node validate_exchanges_selftest.mjs SPEC');
  process.exit(2);
}
const { OpenAPIBackend } = await import('openapi-backend');
const { main: validatorMain } = await import(VALIDATOR);
const api = new OpenAPIBackend({ definition: spec, strict: true, quick: false, validate: true });
await api.init();
const def = api.definition;

let failures = 0;
function expect(what, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) {
    failures++;
    if (detail) console.log(String(detail).replace(/^/gm, '     | '));
  }
}

// ---- exchanges from the spec's examples ---------------------------------

// All example values of a media type or parameter object.
function examplesOf(obj) {
  if (!obj) return [];
  if (obj.example !== undefined) return [obj.example];
  return Object.values(obj.examples || {}).map((e) => e.value).filter((v) => v !== undefined);
}

function exampleOf(obj) {
  if (!obj) return undefined;
  if (obj.example !== undefined) return obj.example;
  const first = Object.values(obj.examples || {})[0];
  if (first && first.value !== undefined) return first.value;
  return obj.schema?.example;
}

function isJsonMedia(mt) {
  return /^application\/([^;]*\+)?json\s*(;|$)/i.test(mt);
}

// The concrete media types of a content map, application/json first.
function concreteMedia(content) {
  return Object.keys(content || {})
    .filter((k) => !k.includes('*'))
    .sort((a, b) => (b === 'application/json') - (a === 'application/json'));
}

function ex(method, p, status, { body = '', ctype = '', reqBody = '', reqType = '', retryAfter = '', allow = '', wwwAuthenticate = '' } = {}) {
  return {
    method, path: p, status, content_type: ctype, body, retry_after: retryAfter, allow,
    www_authenticate: wwwAuthenticate,
    request_body: reqBody, request_content_type: reqType,
  };
}

function methodsOf(tmpl) {
  return HTTP_METHODS.filter((m) => m in def.paths[tmpl]).map((m) => m.toUpperCase());
}

function fillPath(tmpl, op, value) {
  return tmpl.replace(/\{([^}]+)\}/g, (_, name) => {
    if (value !== undefined) return value;
    const param = (op.parameters || []).find((p) => p.in === 'path' && p.name === name);
    const v = String(exampleOf(param));
    return PCHAR.test(v) ? v : encodeURIComponent(v);
  });
}

function replyHeaders(resp, parsed, tmpl) {
  const out = { retryAfter: '', allow: '', wwwAuthenticate: '' };
  for (const [name, h] of Object.entries(resp.headers || {})) {
    const lower = name.toLowerCase();
    if (lower === 'retry-after') {
      const ms = parsed?.error?.retry_after_ms;
      out.retryAfter = String(Number.isInteger(ms) ? Math.ceil(ms / 1000) : exampleOf(h));
    } else if (lower === 'allow') {
      out.allow = methodsOf(tmpl).join(', ');
    } else if (lower === 'www-authenticate') {
      out.wwwAuthenticate = String(exampleOf(h));
    }
  }
  return out;
}

// One reply of a Response Object from its first example.
function reply(resp, method, tmpl) {
  const media = concreteMedia(resp.content)[0];
  if (!media) return { body: '', ctype: '', ...replyHeaders(resp, null, tmpl) };
  const value = exampleOf(resp.content[media]);
  if (value === undefined) return null;
  const body = method === 'HEAD' ? '' : isJsonMedia(media) ? JSON.stringify(value) : String(value);
  return { body, ctype: media, ...replyHeaders(resp, isJsonMedia(media) ? value : null, tmpl) };
}

const ops = api.router.getOperations();
const good = [];
const by = {}; // named exchanges and building blocks for the defects
for (const op of ops) {
  const method = op.method.toUpperCase();
  const p = fillPath(op.path, op);
  const rb = op.requestBody;
  const reqMedia = rb && concreteMedia(rb.content)[0];
  const reqValue = reqMedia && exampleOf(rb.content[reqMedia]);
  const request = reqValue === undefined || method === 'HEAD'
    ? { reqBody: '', reqType: '' }
    : { reqBody: JSON.stringify(reqValue), reqType: reqMedia };
  for (const [status, resp] of Object.entries(op.responses || {})) {
    if (!/^\d{3}$/.test(status)) continue;
    const r = reply(resp, method, op.path);
    if (!r) continue;
    let e = ex(method, p, Number(status), { ...r, ...request });
    if (status === '400') {
      // A request the spec refuses: no URI at all in the path, or a body
      // that is not JSON; the 400 is then due.
      if (op.path.includes('{')) e = { ...e, path: fillPath(op.path, op, '%zz') };
      else if (rb) e = { ...e, request_body: '{', request_content_type: reqMedia };
      else continue;
      // For the 400s below: the request example with the most keys.
      const richest = examplesOf(rb?.content?.[reqMedia]).filter(isObjectValue)
        .sort((a, b) => Object.keys(b).length - Object.keys(a).length)[0];
      if (richest) by.badRequest ??= { op, p, reqValue: richest, reqMedia, resp, r };
    }
    good.push(e);
    if (method === 'HEAD') by.head ??= e;
    if (e.retry_after) by.retryAfter ??= e;
    if (status === '200' && isJsonMedia(r.ctype)) by.json200 ??= e;
    // A reply with an int64 property, for the big-integer cases.
    const props = resp.content?.[r.ctype]?.schema?.properties || {};
    const int64 = Object.keys(props).find((k) => props[k].format === 'int64' && props[k].maximum === undefined);
    if (status === '200' && int64 && method !== 'HEAD' && Number.isInteger(JSON.parse(r.body)[int64]))
      by.int64 ??= { e, key: int64 };
    if (status === '200' && r.ctype && !isJsonMedia(r.ctype)) by.text200 ??= e;
  }
}

function isObjectValue(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// The fallbacks: a path the spec does not list, a method a path lacks.
const fb = def['x-picket-fallback'] || {};
const unknownPath = '/selftest/no/such/path';
const r404 = reply(fb['unknown-path'], 'GET', '/');
good.push(ex('GET', unknownPath, 404, r404));
const tmpl405 = Object.keys(def.paths)[0];
const method405 = ['DELETE', 'PUT', 'PATCH', 'OPTIONS', 'POST', 'GET'].find((m) => !methodsOf(tmpl405).includes(m));
const path405 = fillPath(tmpl405, ops.find((o) => o.path === tmpl405));
const r405 = reply(fb['unknown-method'], method405, tmpl405);
by.e405 = ex(method405, path405, 405, r405);
good.push(by.e405);

// 400s that OpenAPI cannot express, each excused by the validator.
let excusable = 0;
if (by.badRequest) {
  const { p, reqValue, reqMedia, r } = by.badRequest;
  const base = { ...r, reqType: reqMedia };
  const keys = Object.keys(reqValue);
  if (keys.length) {
    const k = keys[0];
    const raw = `{${JSON.stringify(k)}:${JSON.stringify(reqValue[k])},${JSON.stringify(reqValue).slice(1)}`;
    good.push(ex('POST', p, 400, { ...base, reqBody: raw }));
    excusable++;
  }
  const intKey = keys.find((k) => Number.isInteger(reqValue[k]));
  if (intKey) {
    const raw = JSON.stringify(reqValue).replace(`"${intKey}":${reqValue[intKey]}`, `"${intKey}":${reqValue[intKey]}.0`);
    good.push(ex('POST', p, 400, { ...base, reqBody: raw }));
    excusable++;
  }
  const schema = by.badRequest.op.requestBody.content[reqMedia].schema;
  const bounded = Object.entries(schema?.properties || {}).find(
    ([, s]) => s.type === 'integer' && typeof s.maximum === 'number' && (s.minimum ?? 0) < s.maximum - 1);
  if (bounded) {
    const [k, s] = bounded;
    const parsed = JSON.parse(r.body);
    parsed.error.message = `${k} must be an integer from ${s.minimum ?? 0} to ${s.maximum - 1}`;
    good.push(ex('POST', p, 400, { ...base, body: JSON.stringify(parsed), reqBody: JSON.stringify({ ...reqValue, [k]: s.maximum }) }));
    excusable++;
  }
}
// A body that is not UTF-8 (the harness logs it as hex): not JSON, so the
// 400 is due.
if (by.badRequest) {
  const { p, reqMedia, r } = by.badRequest;
  good.push({ ...ex('POST', p, 400, { ...r, reqType: reqMedia }), request_body: null, request_body_hex: '7b22ff227d' });
}
// 2^63-1 is an int64 that JSON.parse rounds up to 2^63.
const withInt = (v) => {
  const { e, key } = by.int64;
  return { ...e, body: e.body.replace(new RegExp(`"${key}":-?\\d+`), `"${key}":${v}`) };
};
if (by.int64) good.push(withInt('9223372036854775807'));
good.push(ex('PUT', '/kv/k1', 409, { body: '{"error":{"code":"stale_fence"}}', ctype: 'application/json', reqBody: '{}' }));

// ---- running the validator ------------------------------------------------

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'validate_exchanges_selftest.'));
let serial = 0;

function writeLog(exchanges) {
  const file = path.join(tmp, `log${++serial}.jsonl`);
  fs.writeFileSync(file, exchanges.map((e) => (typeof e === 'string' ? e : JSON.stringify(e)) + '\n').join(''));
  return file;
}

// The validator as a command (its exit status and output), for the checks
// of its command line.
function runCommand(args) {
  const r = spawnSync(process.execPath, [VALIDATOR, ...args], { encoding: 'utf8', timeout: 60000 });
  return { code: r.status, out: (r.stdout || '') + (r.stderr || '') };
}

// The validator in this process (its main(), which keeps the loaded spec
// from one log to the next): the same status and report, without paying
// about 2 s to load openapi-backend and the spec for each of the logs.
async function run(args) {
  const lines = [];
  const code = await validatorMain(args, (l) => lines.push(l), (l) => lines.push(l));
  return { code, out: lines.join('\n') + '\n' };
}

function validate(exchanges) {
  return run(['--spec', spec, '--log', writeLog(exchanges)]);
}

// Fails with exit 1, and every violation it prints names the defect.
async function expectDefect(what, exchanges, pattern) {
  const { code, out } = await validate(exchanges);
  const fails = out.split('\n').filter((l) => l.startsWith('FAIL:'));
  expect(`${what}: fails for that reason`, code === 1 && fails.length > 0 && fails.every((l) => pattern.test(l)), out);
}

try {
  let { code, out } = await validate(good);
  expect(`a conforming log of ${good.length} exchanges passes`, code === 0 && / 0 violations/.test(out), out);
  expect('it skips the fenced-kv exchange', / 1 skipped/.test(out), out);
  expect(`it excuses the ${excusable} 400s OpenAPI cannot express`, excusable >= 3 && new RegExp(` ${excusable} 400s excused`).test(out), out);
  expect('it counts the refused requests answered 400', !/ 0 answered 4xx/.test(out), out);

  const e200 = by.json200;
  await expectDefect('an undocumented status', [...good, { ...e200, status: 418 }], /status 418 is not documented/);
  await expectDefect('a body that does not match the schema', [...good, { ...e200, body: '[]' }], /does not match the schema/);
  await expectDefect('a reply with duplicate keys', [...good, { ...e200, body: e200.body.replace('{', `{${e200.body.slice(1, e200.body.indexOf(','))},`) }], /duplicate keys/);
  await expectDefect('a Content-Type the reply does not declare', [...good, { ...e200, content_type: 'text/html' }], /Content-Type "text\/html" is not one of/);
  if (by.text200)
    await expectDefect('a text reply typed as JSON', [...good, { ...by.text200, content_type: 'application/json' }], /Content-Type "application\/json" is not one of/);
  await expectDefect('a 405 without Allow', [...good, { ...by.e405, allow: '' }], /header Allow is missing/);
  await expectDefect('a 405 whose Allow names other methods', [...good, { ...by.e405, allow: 'TRACE' }], /does not name exactly the path's methods/);
  await expectDefect('a method the path lacks answered 404', [...good, { ...by.e405, status: 404, allow: '', ...r404 }], /so the reply must be 405, not 404/);
  await expectDefect('an unknown path answered 400', [...good, ex('GET', unknownPath, 400, { ...by.badRequest.r, allow: '' })], /lists no path .*must be 404, not 400/);
  await expectDefect('an unknown path with a trailing slash answered 200', [...good, { ...e200, path: e200.path + '/' }], /must be 404, not 200/);
  if (by.retryAfter) {
    await expectDefect('a Retry-After that is no integer', [...good, { ...by.retryAfter, retry_after: 'soon' }], /reply headers: .*retry-after/);
    await expectDefect('a missing Retry-After', [...good, { ...by.retryAfter, retry_after: '' }], /header Retry-After is missing/);
  }
  if (by.int64) await expectDefect('an int64 property of 2^63', [...good, withInt('9223372036854775808')], /must match format "int64"/);
  expect('the log has a reply with an int64 property', !!by.int64);
  if (by.head) await expectDefect('a reply to HEAD with a body', [...good, { ...by.head, body: '{}' }], /must have no body/);
  {
    const { p, reqValue, reqMedia, r } = by.badRequest;
    await expectDefect('a request the spec allows answered 400', [...good, ex('POST', p, 400, { ...r, reqBody: JSON.stringify(reqValue), reqType: reqMedia })],
      /the spec allows this request .*but picketd answered 400/);
    const bigger = { ...reqValue };
    const [k, s] = Object.entries(by.badRequest.op.requestBody.content[reqMedia].schema.properties).find(([, s]) => typeof s.maximum === 'number');
    bigger[k] = s.maximum;
    await expectDefect('a 400 naming a bound that is the spec maximum', [...good, ex('POST', p, 400, {
      ...r, body: JSON.stringify({ error: { ...JSON.parse(r.body).error, message: `${k} must be an integer from ${s.minimum ?? 0} to ${s.maximum}` } }),
      reqBody: JSON.stringify(bigger), reqType: reqMedia })], /the spec allows this request/);
  }

  ({ code, out } = await validate([]));
  expect('an empty log fails', code === 1 && /is empty/.test(out), out);
  ({ code, out } = await validate([good[good.length - 1]]));
  expect('a log of fenced-kv exchanges only fails', code === 1 && /holds no picketd exchange/.test(out), out);
  ({ code, out } = await run(['--spec', spec, '--log', path.join(tmp, 'missing.jsonl')]));
  expect('a missing log fails', code === 1 && /does not exist/.test(out), out);
  const { request_body: _a, request_content_type: _b, ...noRequest } = e200;
  ({ code, out } = await validate([noRequest]));
  expect('a log without the request half fails', code === 1 && /needs request_body and request_content_type/.test(out), out);
  ({ code, out } = await validate(['{"method": "GET"']));
  expect('a malformed log line fails', code === 1 && /not a JSON line/.test(out), out);
  // the command itself, once each: its statuses are what ctest reads
  ({ code, out } = runCommand(['--spec', spec, '--log', writeLog(good)]));
  expect('as a command, a conforming log exits 0', code === 0 && / 0 violations/.test(out), out);
  ({ code, out } = runCommand(['--spec', spec, '--log', writeLog([...good, { ...by.json200, status: 418 }])]));
  expect('as a command, a violation exits 1', code === 1 && /status 418 is not documented/.test(out), out);
  ({ code, out } = runCommand(['--spec', spec, '--log', writeLog(good), '--require', path.join(tmp, 'no-picketd')]));
  expect('a missing --require binary skips (77)', code === 77, out);
  ({ code, out } = runCommand(['--spec', spec]));
  expect('bad usage exits 2', code === 2 && /^usage:/.test(out), out);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}

console.log(failures ? `${failures} selftest checks failed` : 'all selftest checks passed');
process.exitCode = failures ? 1 : 0;
