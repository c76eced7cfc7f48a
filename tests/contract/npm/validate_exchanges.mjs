// validate_exchanges.mjs: checks every HTTP exchange the test suite logged
// against proto/openapi.yaml with a third-party validator, openapi-backend
// (pinned in package-lock.json), so that "the replies conform" does not rest
// only on picket's own reading of OpenAPI.
//
// Why beside validate_responses.py: that one is ours (our $ref resolution,
// our `nullable`, our routing), so a misreading of OpenAPI there and the
// same misreading in the spec would agree with each other. Here routing,
// parameter decoding, request and response validation are openapi-backend's
// and Ajv's. And it also checks requests, which the other does not: the
// harness (tests/harness/harness.c, contract_log) logs each request body and
// the Content-Type really sent, so this can ask "does the spec allow this
// request?" and hold picketd to the answer. The rule: any request the spec
// allows (one a generated client may send) must not get 400
// invalid_argument; that catches a spec that promises more than picketd
// accepts, which no check of replies alone can see.
//
// Per exchange (the fenced-kv server's /kv/... and /fence/... are counted
// and skipped):
//   * route it with openapi-backend's router on the raw path as sent. A
//     path no template fits must be 404 and a listed path with an unlisted
//     method 405, with the bodies of the spec's x-picket-fallback responses
//     (validated by the Ajv that openapi-backend builds) and, on 405, an
//     Allow naming exactly the path's methods;
//   * the request: path parameters (percent-decoded by openapi-backend, as
//     OpenAPI says) and body by api.validateRequest; the Content-Type sent
//     against the operation's request media types (openapi-backend does not
//     look at it). Bodies are read as JSON whatever the Content-Type says,
//     as picketd reads them, and an empty body is {};
//   * the reply: status documented for the operation, Content-Type one of
//     that response's media types (parameters ignored only when the spec's
//     media type has none), a JSON body (no duplicate keys) by
//     api.validateResponse, the headers the harness records (Retry-After,
//     Allow) by api.validateResponseHeaders, required ones present. A HEAD
//     reply has no body, so only its status and headers. Text replies
//     (/metrics, /v1/openapi.yaml) are checked by media type only;
//     validate_responses.py checks their content.
//   * a spec-valid request answered 400 is a failure, except for what
//     OpenAPI cannot express (INEXPRESSIBLE below). A request the spec
//     refuses but picketd grants (2xx) is only a NOTE, grouped by reason:
//     a server may accept more than its spec promises, but a spec that
//     refuses what clients really send (say, curl's default Content-Type)
//     leaves those requests out of the cross-check.
//
// Usage: node validate_exchanges.mjs --spec proto/openapi.yaml
//          --log build/contract.jsonl [--require build/bin/picketd]
//          [--max-report N] [--verbose: why each refused request is refused]
// Exit status: 0 all conform; 1 a violation, or the log is missing, empty or
// has no picketd exchange (so it cannot pass by seeing nothing); 2 bad
// usage; 77 --require names a file that does not exist (picketd not built).

import fs from 'node:fs';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

const USAGE =
  'usage: node validate_exchanges.mjs --spec OPENAPI.yaml --log CONTRACT.jsonl ' +
  '[--require BINARY] [--max-report N] [--verbose]';

// Where the report goes: stdout, or the printer of main's caller (the
// selftest runs main in-process and reads what it printed).
let say = (line) => console.log(line);
let sayUsage = (line) => console.error(line);

// Paths of the other servers the suite talks to through the same harness.
const OTHER_SERVERS = /^\/(kv|fence)(\/|$)/;

// The reply headers the harness records, by the key it logs them under.
const LOGGED_HEADERS = { 'retry-after': 'retry_after', allow: 'allow', 'www-authenticate': 'www_authenticate' };

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// What makes picketd answer 400 to a request the spec allows because
// OpenAPI 3.0 (JSON Schema over the parsed body) cannot say it. Each entry
// returns the reason when it applies to the exchange, else null. Keep this
// list short: anything else is a disagreement to fix in the spec or the
// server.
const INEXPRESSIBLE = [
  // JSON.parse keeps the last of duplicate keys, so the schema sees one;
  // picketd rejects the body (JSON_REJECT_DUPLICATES).
  function duplicateKeys({ scan }) {
    return scan && scan.duplicates.length
      ? `duplicate JSON keys (${scan.duplicates.join(', ')}), which JSON.parse merges`
      : null;
  },
  // `1.0` or `1e3` parse to integers, so `type: integer` holds; picketd
  // requires JSON integers (no fraction, no exponent).
  function integralNonInteger({ scan }) {
    return scan && scan.integral.length
      ? `number(s) written with a fraction or exponent (${scan.integral.join(', ')}), which ` +
          'JSON.parse makes integers'
      : null;
  },
  // --max-ttl-ms / --max-wait-ms below the spec's maximum: the bound is the
  // server's configuration, the spec can only give the default one. The
  // server's message names the bound it applied.
  function configuredBound({ reqBody, reqSchema, reply }) {
    const m = /^(\w+) must be an integer from (-?\d+) to (-?\d+)$/.exec(errorOf(reply)?.message || '');
    if (!m || !isObject(reqBody) || !(m[1] in reqBody)) return null;
    const bound = Number(m[3]);
    const specMax = reqSchema?.properties?.[m[1]]?.maximum;
    return typeof specMax === 'number' && bound < specMax && reqBody[m[1]] > bound
      ? `${m[1]} ${reqBody[m[1]]} is above the server's configured maximum ${bound} ` +
          `(the spec's is ${specMax})`
      : null;
  },
  // GET /v1/locks: a cursor belongs to the prefix it was returned with; one
  // of another prefix (both well-formed, each alone allowed) is refused.
  function cursorOfAnotherPrefix({ target, reply }) {
    const q = new URLSearchParams(target.split('?')[1] || '');
    const c = /^\d+-[lsr]-(.*)$/.exec(q.get('cursor') || '');
    return c && q.has('prefix') && !c[1].startsWith(q.get('prefix')) &&
      /^cursor is not one this listing returned/.test(errorOf(reply)?.message || '')
      ? `cursor ${q.get('cursor')} is not under prefix ${q.get('prefix')}`
      : null;
  },
];

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function errorOf(reply) {
  return isObject(reply) && isObject(reply.error) ? reply.error : null;
}

// ---- JSON text details that JSON.parse hides --------------------------

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

// JSON.parse, plus what it hides: duplicate object keys, numbers with a
// fraction or exponent whose value is an integer, and integers a double
// cannot hold. Throws on a text that is not JSON.
//
// Big integers: picketd sends fences up to 2^63-1 exactly (the spec's
// Fence), and JSON.parse rounds 9223372036854775807 up to 2^63, which
// Ajv's int64 format (a comparison of doubles) then refuses. So an integer
// beyond 2^53 whose double fell on the other side of an int64 bound than
// its exact value is replaced by the nearest double on the exact value's
// side: the format check then judges the number that was sent, in both
// directions (2^63-1 passes, 2^63 and -2^63-1 fail).
function parseJson(text) {
  const value = JSON.parse(text);
  const duplicates = [];
  const integral = [];
  const number = /-?\d+(\.\d+)?([eE][-+]?\d+)?/y;
  const word = /true|false|null/y;
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\r\n'.includes(text[i])) i++;
  };
  const string = () => {
    const start = i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const patch = (keys, v) => {
    if (!keys.length) return v;
    let o = value;
    for (const k of keys.slice(0, -1)) o = o[k];
    o[keys[keys.length - 1]] = v;
    return value;
  };
  let root = value;
  const walk = (keys) => {
    const where = keys.map((k) => `/${k}`).join('') || '/';
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') return void i++;
      const seen = new Set();
      for (;;) {
        ws();
        const key = string();
        if (seen.has(key)) duplicates.push(`${where === '/' ? '' : where}/${key}`);
        seen.add(key);
        ws();
        i++; // ':'
        walk([...keys, key]);
        ws();
        if (text[i++] === '}') return;
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (let n = 0; ; n++) {
        walk([...keys, n]);
        ws();
        if (text[i++] === ']') return;
      }
    }
    if (c === '"') return void string();
    for (const rx of [number, word]) {
      rx.lastIndex = i;
      const m = rx.exec(text);
      if (!m) continue;
      i += m[0].length;
      if (rx !== number) return;
      const d = Number(m[0]);
      if ((m[1] || m[2]) && Number.isInteger(d)) integral.push(`${where}: ${m[0]}`);
      if (!m[1] && !m[2] && !Number.isSafeInteger(d)) {
        const exact = BigInt(m[0]);
        if (exact <= INT64_MAX && d >= 2 ** 63) root = patch(keys, 2 ** 63 - 1024);
        else if (exact >= INT64_MIN && d < -(2 ** 63)) root = patch(keys, -(2 ** 63));
        else if (exact < INT64_MIN && d >= -(2 ** 63)) root = patch(keys, -(2 ** 63) - 2048);
      }
      return;
    }
    throw new Error(`parseJson: unexpected ${JSON.stringify(c)} at ${i}`);
  };
  walk([]);
  return { value: root, scan: { duplicates, integral } };
}

// ---- media types -------------------------------------------------------

function parseMediaType(s) {
  const [essence, ...rest] = String(s).split(';');
  const m = /^\s*([^\s/]+)\/([^\s/]+)\s*$/.exec(essence);
  if (!m) return null;
  const params = new Map();
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    const name = p.slice(0, eq).trim().toLowerCase();
    let v = p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    if (name === 'charset') v = v.toLowerCase();
    params.set(name, v);
  }
  return { type: m[1].toLowerCase(), subtype: m[2].toLowerCase(), params };
}

// How specifically the spec's media type (range) `key` covers `actual`:
// 0 not at all, 1 */*, 2 type/*, 3 type/subtype. Parameters are ignored
// when the spec's media type has none, else they must be equal.
function mediaScore(key, actual) {
  const k = parseMediaType(key);
  const a = parseMediaType(actual);
  if (!k || !a) return 0;
  if (k.type === '*' && k.subtype === '*') return 1;
  if (k.type !== a.type) return 0;
  if (k.subtype === '*') return 2;
  if (k.subtype !== a.subtype) return 0;
  if (k.params.size && !isDeepStrictEqual(k.params, a.params)) return 0;
  return 3;
}

// The key of `content` that describes `actual`, most specific first.
function selectMedia(content, actual) {
  let best = null;
  let score = 0;
  for (const key of Object.keys(content || {})) {
    const s = mediaScore(key, actual);
    if (s > score) [best, score] = [key, s];
  }
  return best;
}

function isJsonMedia(mt) {
  const p = parseMediaType(mt);
  return !!p && p.type === 'application' && (p.subtype === 'json' || p.subtype.endsWith('+json'));
}

// The media type openapi-backend validates request bodies against.
const BACKEND_REQUEST_MEDIA = ['application/json', 'multipart/form-data', 'application/x-www-form-urlencoded'];

// ---- the checker -------------------------------------------------------

function ajvErrors(errors) {
  return (errors || []).map((e) => `${e.instancePath || '(root)'} ${e.message}`).join('; ');
}

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

class Checker {
  constructor(api, ValidationContext, verbose) {
    this.api = api;
    this.verbose = verbose; // print why each refused request is refused
    this.spec = api.definition;
    this.responseAjv = api.validator.getAjv(ValidationContext.Response);
    this.headersAjv = api.validator.getAjv(ValidationContext.ResponseHeaders, { coerceTypes: true });
    this.requestAjv = api.validator.getAjv(ValidationContext.RequestBody);
    this.compiled = new Map();
    this.fallbackHeaders = new Map();
    this.routes = new Map();
    // Exact regexes of the path templates. openapi-backend's router
    // collapses a leading "//" and reads a template's "." as any
    // character; picketd does neither, so a match is kept only when the
    // raw path fits the template exactly (one segment per parameter).
    this.templates = Object.keys(this.spec.paths || {}).map((t) => [
      t,
      new RegExp(
        '^' + t.split(/(\{[^}]*\})/).map((p) => (p.startsWith('{') ? '[^/]+' : escapeRegExp(p))).join('') + '$',
      ),
    ]);
    this.fallback = this.spec['x-picket-fallback'] || {};
    this.covered = new Map(); // operationId -> Set of statuses
    this.unrecorded = new Set(); // documented reply headers the log lacks
    this.counts = { invalid4xx: 0, invalid2xx: 0, excused: 0 };
    this.invalid2xxReasons = new Map();
    this.excuses = new Map();
  }

  compile(ajv, schema) {
    let v = this.compiled.get(schema);
    if (!v) {
      v = ajv.compile(schema);
      this.compiled.set(schema, v);
    }
    return v;
  }

  // Memoized: the suite sends the same few paths tens of thousands of
  // times, and openapi-backend's router rebuilds its operation list on
  // every match.
  route(method, path) {
    const key = `${method} ${path}`;
    if (!this.routes.has(key)) this.routes.set(key, this.routeOnce(method, path));
    return this.routes.get(key);
  }

  routeOnce(method, target) {
    const path = target.split('?')[0]; // routed without its query, as picketd does
    let op;
    try {
      op = this.api.router.matchOperation({ method, path, headers: {} }, true);
    } catch (e) {
      if (!/^40[45]-/.test(e.message)) throw e;
    }
    const templates = this.templates.filter(([, rx]) => rx.test(path)).map(([t]) => t);
    if (op && templates.includes(op.path)) return { op };
    if (!templates.length) return { fallback: 'unknown-path' };
    const declared = templates.flatMap((t) => HTTP_METHODS.filter((m) => m in this.spec.paths[t]));
    if (declared.includes(method.toLowerCase()))
      return { problem: `openapi-backend's router finds no ${method} operation for ${templates.join(', ')}` };
    return { fallback: 'unknown-method', allow: declared.map((m) => m.toUpperCase()) };
  }

  // Problems with one exchange ([] when it conforms).
  check(ex) {
    const method = ex.method.toUpperCase();
    const r = this.route(method, ex.path);
    if (r.problem) return [r.problem];
    if (r.fallback) return this.checkFallback(ex, method, r);
    const { op } = r;
    const problems = [];
    const req = this.checkRequest(ex, method, op);
    const resp = this.checkReply(ex, method, op, problems);
    if (resp && !problems.length) {
      if (!this.covered.has(op.operationId)) this.covered.set(op.operationId, new Set());
      this.covered.get(op.operationId).add(ex.status);
    }

    const reply = req.replyJson;
    if (this.verbose && req.issues.length)
      say(`  refused: line ${ex.line}: ${ex.method} ${ex.path} ${clip(ex.request_body, 80)} -> ` +
        `${ex.status}: ${req.issues.join('; ')}`);
    if (req.issues.length === 0 && ex.status === 400) {
      const ctx = { ...req, reply, target: ex.path };
      const rule = INEXPRESSIBLE.find((f) => f(ctx));
      if (rule) {
        this.counts.excused++;
        if (!this.excuses.has(rule.name)) this.excuses.set(rule.name, { n: 0, why: rule(ctx), ex });
        this.excuses.get(rule.name).n++;
      } else {
        const e = errorOf(reply);
        problems.push(
          `the spec allows this request (openapi-backend finds no fault in it) but picketd answered ` +
            `400 ${e ? `${e.code}: ${e.message}` : ''}; request body: ${clip(ex.request_body)}, ` +
            `Content-Type: ${JSON.stringify(ex.request_content_type)}`,
        );
      }
    } else if (req.issues.length && ex.status >= 400 && ex.status < 500) {
      this.counts.invalid4xx++;
    } else if (req.issues.length && ex.status >= 200 && ex.status < 300) {
      this.counts.invalid2xx++;
      const key = `${op.operationId}: ${req.issues[0]}`;
      if (!this.invalid2xxReasons.has(key)) this.invalid2xxReasons.set(key, { n: 0, ex });
      this.invalid2xxReasons.get(key).n++;
    }
    return problems;
  }

  // What the spec finds wrong with the request (issues: [] when it allows
  // it), with the parsed body for the INEXPRESSIBLE rules.
  checkRequest(ex, method, op) {
    const issues = [];
    const out = { issues, scan: null, reqBody: undefined, reqSchema: undefined, replyJson: undefined };
    try {
      out.replyJson = parseJson(ex.body || '').value;
    } catch {
      /* not JSON: the reply check says so where it matters */
    }
    const raw = method === 'HEAD' ? '' : ex.request_body;
    const ctype = ex.request_content_type || '';
    const rb = op.requestBody;
    if (raw === null) {
      issues.push('the body is not UTF-8, so not JSON');
      return out;
    }
    // The spec: an empty body, or one of only whitespace, means {}.
    let body = {};
    if (raw.trim() !== '') {
      try {
        ({ value: body, scan: out.scan } = parseJson(raw));
      } catch (e) {
        issues.push(`the body is not JSON (${e.message})`);
      }
    }
    out.reqBody = body;
    let media = null;
    if (rb && (raw !== '' || ctype)) {
      // No Content-Type: RFC 9110 lets the recipient assume
      // application/octet-stream, which only a range like */* covers.
      media = selectMedia(rb.content, ctype || 'application/octet-stream');
      if (!media)
        issues.push(
          `request Content-Type ${JSON.stringify(ctype)} is not one of ${Object.keys(rb.content || {}).join(', ')}`,
        );
    } else if (!rb && raw !== '') {
      issues.push('the spec documents no request body for this operation');
    }
    const backendMedia = rb && BACKEND_REQUEST_MEDIA.find((k) => rb.content?.[k]);
    const mediaSchema = rb?.content?.[media || backendMedia]?.schema;
    out.reqSchema = mediaSchema;
    // openapi-backend validates a body that is not an object only when the
    // Content-Type is exactly application/json; picketd reads every body
    // as JSON, so that is what it is told. The Content-Type really sent
    // was checked above. An object goes in parsed (big integers kept on
    // the right side of int64); anything else as sent, since
    // openapi-backend parses a string body once more.
    const headers = {};
    if (rb) headers['content-type'] = 'application/json';
    const given = raw === '' ? {} : body !== null && typeof body === 'object' ? body : raw;
    let result;
    try {
      result = this.api.validateRequest({ method, path: ex.path, headers, body: given }, op);
    } catch (e) {
      // decodeURIComponent of a path parameter: "%zz" is no URI at all.
      issues.push(`the path cannot be read (${e.message})`);
      return out;
    }
    let errors = result.errors || [];
    // openapi-backend validates against application/json's schema; when
    // the media type sent selects another one with a different schema,
    // the body is validated against that one (same Ajv setup) instead.
    if (media && backendMedia && media !== backendMedia &&
        !isDeepStrictEqual(rb.content[media].schema, rb.content[backendMedia].schema)) {
      errors = errors.filter((e) => !/^\/requestBody/.test(e.instancePath) &&
        e.params?.missingProperty !== 'requestBody');
      if (mediaSchema && raw !== '' && issues.length === 0) {
        const v = this.compile(this.requestAjv, mediaSchema);
        if (!v(body)) errors = errors.concat(v.errors.map((e) => ({ ...e, instancePath: '/requestBody' + e.instancePath })));
      }
    }
    if (errors.length) issues.push(`openapi-backend: ${ajvErrors(errors)}`);
    return out;
  }

  // Checks the reply to a matched operation; returns the documented
  // response (or null) and appends to `problems`.
  checkReply(ex, method, op, problems) {
    const responses = op.responses || {};
    const key = [String(ex.status), `${Math.floor(ex.status / 100)}XX`, 'default'].find((k) => k in responses);
    if (!key) {
      problems.push(`status ${ex.status} is not documented for ${op.operationId} (documented: ${Object.keys(responses).join(', ')})`);
      return null;
    }
    const resp = responses[key];
    problems.push(...this.checkContent(ex, method, resp, (parsed, media) => {
      if (media === 'application/json') {
        const v = this.api.validateResponse(parsed, op, ex.status);
        return v.errors ? ajvErrors(v.errors) : null;
      }
      const schema = resp.content[media].schema;
      if (!schema) return null;
      const v = this.compile(this.responseAjv, schema);
      return v(parsed) ? null : ajvErrors(v.errors);
    }));
    const logged = this.loggedHeaders(ex);
    const v = this.api.validateResponseHeaders(logged, op, { statusCode: ex.status, setMatchType: 'any' });
    if (v.errors) problems.push(`reply headers: ${ajvErrors(v.errors)}`);
    problems.push(...this.requiredHeaders(resp, logged));
    return resp;
  }

  // A path or method the spec does not list: the x-picket-fallback reply.
  checkFallback(ex, method, r) {
    const status = r.fallback === 'unknown-path' ? 404 : 405;
    const what = r.fallback === 'unknown-path'
      ? `the spec lists no path ${ex.path}`
      : `the spec lists only ${r.allow.join(', ')} for this path`;
    if (ex.status !== status) return [`${what}, so the reply must be ${status}, not ${ex.status}`];
    const resp = this.fallback[r.fallback];
    if (!isObject(resp)) return [`the spec has no x-picket-fallback/${r.fallback} to check this ${status} against`];
    const problems = this.checkContent(ex, method, resp, (parsed, media) => {
      const schema = resp.content[media].schema;
      if (!schema || !isJsonMedia(media)) return null;
      const v = this.compile(this.responseAjv, schema);
      return v(parsed) ? null : ajvErrors(v.errors);
    });
    const logged = this.loggedHeaders(ex);
    // The headers schema as openapi-backend builds it for an operation's
    // response (names lowercased, each its header's schema, coerced).
    if (!this.fallbackHeaders.has(resp)) {
      const properties = {};
      for (const [name, h] of Object.entries(resp.headers || {}))
        if (h.schema) properties[name.toLowerCase()] = h.schema;
      this.fallbackHeaders.set(resp, this.headersAjv.compile({ type: 'object', properties }));
    }
    const hv = this.fallbackHeaders.get(resp);
    if (!hv({ ...logged })) problems.push(`reply headers: ${ajvErrors(hv.errors)}`);
    problems.push(...this.requiredHeaders(resp, logged));
    if (status === 405 && logged.allow !== undefined) {
      const got = new Set(logged.allow.split(',').map((m) => m.trim().toUpperCase()).filter(Boolean));
      if (!isDeepStrictEqual(got, new Set(r.allow)))
        problems.push(`Allow ${JSON.stringify(logged.allow)} does not name exactly the path's methods (${r.allow.join(', ')})`);
    }
    const id = `(${r.fallback})`;
    if (!problems.length) {
      if (!this.covered.has(id)) this.covered.set(id, new Set());
      this.covered.get(id).add(ex.status);
    }
    return problems;
  }

  // Content-Type and body of a reply against a Response Object.
  // validateJson(parsed, mediaKey) returns schema errors or null.
  checkContent(ex, method, resp, validateJson) {
    const problems = [];
    const content = resp.content || {};
    const body = ex.body || '';
    const ctype = ex.content_type || '';
    const head = method === 'HEAD';
    if (head && body) problems.push(`a reply to HEAD must have no body, got ${body.length} bytes`);
    if (!Object.keys(content).length) {
      if (body && !head) problems.push(`the spec documents no body for this reply, got ${body.length} bytes`);
      return problems;
    }
    // HEAD: a Content-Type is optional (it names what GET would send).
    if (head && !ctype) return problems;
    const media = selectMedia(content, ctype);
    if (!media) {
      problems.push(`Content-Type ${JSON.stringify(ctype)} is not one of ${Object.keys(content).join(', ')}`);
      return problems;
    }
    if (head) return problems;
    if (!isJsonMedia(media)) return problems; // text: the media type is the contract
    let parsed;
    let scan;
    try {
      ({ value: parsed, scan } = parseJson(body));
    } catch (e) {
      problems.push(`the body is not JSON (${e.message}): ${clip(body)}`);
      return problems;
    }
    if (scan.duplicates.length) problems.push(`the body has duplicate keys: ${scan.duplicates.join(', ')}`);
    const errors = validateJson(parsed, media);
    if (errors) problems.push(`the body does not match the schema: ${errors}; body: ${clip(body)}`);
    return problems;
  }

  loggedHeaders(ex) {
    const out = {};
    for (const [name, key] of Object.entries(LOGGED_HEADERS)) if (ex[key]) out[name] = ex[key];
    return out;
  }

  requiredHeaders(resp, logged) {
    const problems = [];
    for (const [name, h] of Object.entries(resp.headers || {})) {
      const lower = name.toLowerCase();
      if (!(lower in LOGGED_HEADERS)) {
        this.unrecorded.add(name); // the harness does not record it
        continue;
      }
      if (h.required && !(lower in logged)) problems.push(`header ${name} is missing`);
    }
    return problems;
  }
}

function clip(s, n = 300) {
  s = String(s ?? '');
  return JSON.stringify(s.length > n ? s.slice(0, n) + '...' : s);
}

// ---- the log -----------------------------------------------------------

function readLog(file) {
  const exchanges = [];
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, n) => {
    if (!line.trim()) return;
    let ex;
    try {
      ex = JSON.parse(line);
    } catch (e) {
      throw new Error(`${file}:${n + 1}: not a JSON line (${e.message})`);
    }
    if (!isObject(ex) || typeof ex.method !== 'string' || typeof ex.path !== 'string' ||
        !Number.isInteger(ex.status))
      throw new Error(`${file}:${n + 1}: needs method, path and status`);
    // Without the request half the cross-check would pass unseen.
    if (!(typeof ex.request_body === 'string' ||
          (ex.request_body === null && typeof ex.request_body_hex === 'string')) ||
        typeof ex.request_content_type !== 'string')
      throw new Error(`${file}:${n + 1}: needs request_body and request_content_type ` +
        '(tests/harness/harness.c contract_log logs them)');
    ex.line = n + 1;
    exchanges.push(ex);
  });
  return exchanges;
}

function parseArgs(argv) {
  const args = { maxReport: 60, verbose: false };
  const names = { '--spec': 'spec', '--log': 'log', '--require': 'require', '--max-report': 'maxReport' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--verbose') {
      args.verbose = true;
      continue;
    }
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) return null;
    args[key] = argv[++i];
  }
  args.maxReport = Number(args.maxReport);
  if (!args.spec || !args.log || !Number.isInteger(args.maxReport) || args.maxReport < 0) return null;
  return args;
}

// The loaded spec per path: loading openapi-backend and compiling the spec
// takes about 2 s, which the selftest would otherwise pay for each of its
// 25 logs (57 s of the main ctest, issue 41).
const loaded = new Map();

async function loadApi(OpenAPIBackend, spec) {
  if (!loaded.has(spec)) {
    // strict: a spec openapi-backend finds invalid is an error, not a
    // warning. ignoreTrailingSlashes off: picketd routes "/healthz/" to 404.
    const api = new OpenAPIBackend({
      definition: spec, strict: true, quick: false, validate: true, ignoreTrailingSlashes: false,
    });
    await api.init();
    loaded.set(spec, api);
  }
  return loaded.get(spec);
}

// Checks the log that argv names and returns the exit status; every line of
// the report goes to print, the usage message to printUsage (by default
// stdout and stderr).
export async function main(argv, print = (line) => console.log(line),
  printUsage = (line) => console.error(line)) {
  const saved = [say, sayUsage];
  [say, sayUsage] = [print, printUsage];
  try {
    return await check(argv);
  } finally {
    [say, sayUsage] = saved;
  }
}

async function check(argv) {
  const args = parseArgs(argv);
  if (!args) {
    sayUsage(USAGE);
    return 2;
  }
  if (args.require && !fs.existsSync(args.require)) {
    say(`SKIP: ${args.require} is not built, so no exchange to check`);
    return 77;
  }
  let backend;
  try {
    backend = await import('openapi-backend');
  } catch (e) {
    say(`FAIL: cannot load openapi-backend (${e.message}); run scripts/deps ` +
      '(npm ci in tests/contract/npm)');
    return 1;
  }
  const { OpenAPIBackend, ValidationContext } = backend;
  let checker;
  try {
    const api = await loadApi(OpenAPIBackend, args.spec);
    checker = new Checker(api, ValidationContext, args.verbose);
  } catch (e) {
    say(`FAIL: openapi-backend cannot load ${args.spec}: ${e.message}`);
    return 1;
  }
  if (!fs.existsSync(args.log)) {
    say(`FAIL: ${args.log} does not exist: no test logged an exchange. This test checks ` +
      'the exchanges of the other tests; run the whole suite.');
    return 1;
  }
  let exchanges;
  try {
    exchanges = readLog(args.log);
  } catch (e) {
    say(`FAIL: ${e.message}`);
    return 1;
  }
  if (!exchanges.length) {
    say(`FAIL: ${args.log} is empty: no test logged an exchange`);
    return 1;
  }

  let checked = 0;
  let skipped = 0;
  const violations = [];
  for (const ex of exchanges) {
    if (OTHER_SERVERS.test(ex.path)) {
      skipped++;
      continue;
    }
    checked++;
    let problems;
    try {
      problems = checker.check(ex);
    } catch (e) {
      problems = [`validator error: ${e.stack || e}`];
    }
    for (const p of problems) violations.push(`line ${ex.line}: ${ex.method} ${ex.path} -> ${ex.status}: ${p}`);
  }

  const ops = checker.api.router.getOperations().map((o) => o.operationId);
  for (const [id, statuses] of [...checker.covered].sort()) say(`  ${id.padEnd(24)} statuses ${[...statuses].sort().join(' ')}`);
  const missing = ops.filter((id) => !checker.covered.has(id));
  if (missing.length) say(`  not exercised: ${missing.join(', ')}`);
  if (checker.unrecorded.size)
    say(`  documented reply headers the log does not record, so unchecked: ${[...checker.unrecorded].join(', ')}`);
  for (const [rule, { n, why, ex }] of checker.excuses)
    say(`  ${n} x 400 excused (${rule}), OpenAPI cannot express it: e.g. line ${ex.line}: ${why}`);
  for (const [why, { n, ex }] of checker.invalid2xxReasons)
    say(`  NOTE: ${n} x the spec refuses the request but picketd answered 2xx: ${why}; ` +
      `e.g. line ${ex.line}: ${ex.method} ${ex.path} body ${clip(ex.request_body, 120)} -> ${ex.status}`);
  for (const v of violations.slice(0, args.maxReport)) say(`FAIL: ${v}`);
  if (violations.length > args.maxReport) say(`FAIL: ... and ${violations.length - args.maxReport} more`);
  say(
    `${checked} exchanges checked, ${skipped} skipped (fenced-kv), ${violations.length} violations; ` +
      `requests the spec refuses: ${checker.counts.invalid4xx} answered 4xx, ` +
      `${checker.counts.invalid2xx} answered 2xx; ${checker.counts.excused} 400s excused; ` +
      `${ops.length - missing.length} of ${ops.length} operations exercised`,
  );
  if (checked === 0) {
    say(`FAIL: ${args.log} holds no picketd exchange`);
    return 1;
  }
  return violations.length ? 1 : 0;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
