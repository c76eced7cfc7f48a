// generated_client.ts: picketd driven through a client nobody here wrote.
//
// tests/contract/generated_client.sh fetches GET /v1/openapi.yaml from a
// running picketd, turns it into TypeScript types with openapi-typescript
// (./picket.ts), compiles this file against them with tsc's strictest
// settings (tsconfig.json) and runs it. Every operation of the spec and
// every error code picketd can be made to answer goes through openapi-fetch
// as a user's program would call it: path parameters percent-encoded, JSON
// bodies typed by the spec, replies typed by the spec. A mismatch between
// server and spec shows up either as a compile error here (a README body the
// types refuse, a field the types make optional) or as a failed check below.
//
// internal_error is the one code not driven: picketd answers it only when
// memory runs out, which no test here can cause from outside.
//
// Every exchange is also appended to $PICKET_CONTRACT_LOG in the harness's
// format, so the suite's validators (our own and openapi-backend) check
// these replies too.
import { execFileSync } from "node:child_process";
import { appendFileSync, readFileSync } from "node:fs";
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./picket.js";
import { readmeCalls } from "./readme_bodies.js";

type Schemas = components["schemas"];

const env = (key: string): string => {
  const v = process.env[key];
  if (v === undefined || v === "") throw new Error(`${key} is not set`);
  return v;
};

let checks = 0;
let failures = 0;
function check(what: string, ok: boolean, detail?: unknown): void {
  checks++;
  if (ok) return;
  failures++;
  console.log(`FAIL ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
}

// ---- the exchange log (the harness's JSONL format) -----------------------

const logFile = process.env["PICKET_CONTRACT_LOG"];
const sent = new WeakMap<Request, string>();
const logger: Middleware = {
  async onRequest({ request }) {
    sent.set(request, request.body === null ? "" : await request.clone().text());
    return request;
  },
  async onResponse({ request, response }) {
    if (logFile === undefined || logFile === "") return response;
    const url = new URL(request.url);
    const body = request.method === "HEAD" ? "" : await response.clone().text();
    appendFileSync(logFile, JSON.stringify({
      method: request.method,
      path: url.pathname,
      status: response.status,
      content_type: response.headers.get("Content-Type") ?? "",
      body,
      retry_after: response.headers.get("Retry-After") ?? "",
      allow: response.headers.get("Allow") ?? "",
      request_body: sent.get(request) ?? "",
      request_content_type: request.headers.get("Content-Type") ?? "",
    }) + "\n");
    return response;
  },
};

function connect(baseUrl: string) {
  const c = createClient<paths>({ baseUrl });
  c.use(logger);
  return c;
}

const redisSock = env("REDIS_SOCK");
const redis = (...args: string[]): string =>
  execFileSync("redis-cli", ["-s", redisSock, ...args], { encoding: "utf8" }).trim();

const main = connect(env("PICKETD_URL"));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- locks: acquire, renew, release, get, head ---------------------------

async function locks(): Promise<void> {
  // The spec's own example name: ':' goes out as "%3A".
  const name = "billing.nightly:eu-west-1";
  const g = await main.POST("/v1/locks/{name}/acquire", {
    params: { path: { name } },
    body: { ttl_ms: 10000, owner: "generated-client" },
  });
  check("acquire a name with ':' is 200", g.response.status === 200, g.error);
  if (g.data === undefined) return;
  const grant: Schemas["Grant"] = g.data;
  check("grant names the decoded lock", grant.lock === name, grant);
  check("grant has a 32-hex lease", /^[0-9a-f]{32}$/.test(grant.lease), grant);
  check("grant echoes the owner", grant.owner === "generated-client", grant);

  const held = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name } }, body: {} });
  check("a second acquire is 409", held.response.status === 409, held.error);
  if (held.error !== undefined && held.error.error.code === "lock_held") {
    // Required in the generated type: no `?.`, no `!`.
    const e: Schemas["LockHeldError"]["error"] = held.error.error;
    const wait: number = e.retry_after_ms;
    const owner: string | null = e.owner;
    check("lock_held carries retry_after_ms", wait > 0 && wait <= 10000, e);
    check("lock_held carries the owner", owner === "generated-client", e);
    check("Retry-After is retry_after_ms in whole seconds, rounded up",
          held.response.headers.get("Retry-After") === String(Math.ceil(wait / 1000)));
  } else {
    check("a second acquire is lock_held", false, held.error);
  }

  const r = await main.POST("/v1/locks/{name}/renew", {
    params: { path: { name } },
    body: { lease: grant.lease }, // ttl_ms left out: the server's default
  });
  check("renew is 200 with the grant's fence", r.data?.fence === grant.fence && r.data.ttl_ms === 30000,
        r.data ?? r.error);

  const st = await main.GET("/v1/locks/{name}", { params: { path: { name } } });
  const status: Schemas["LockStatus"] | undefined = st.data;
  check("GET shows the lock held, the fence and the owner",
        status?.held === true && status.fence === grant.fence && status.owner === "generated-client",
        status ?? st.error);
  check("GET never shows the lease", status !== undefined && !("lease" in status), status);

  const h = await main.HEAD("/v1/locks/{name}", { params: { path: { name } } });
  check("HEAD is 200 with GET's Content-Type and no body",
        h.response.status === 200 && h.data === undefined &&
        h.response.headers.get("Content-Type") === "application/json", h.response.status);

  const rel = await main.POST("/v1/locks/{name}/release", { params: { path: { name } }, body: { lease: grant.lease } });
  check("release is 200 released", rel.data?.released === true && rel.data.lock === name, rel.error);
  const again = await main.POST("/v1/locks/{name}/release", { params: { path: { name } }, body: { lease: grant.lease } });
  check("a second release is lease_lost", again.error?.error.code === "lease_lost", again.error);
  const renewLost = await main.POST("/v1/locks/{name}/renew", {
    params: { path: { name } }, body: { lease: grant.lease, ttl_ms: 1000 },
  });
  check("renew after release is lease_lost", renewLost.error?.error.code === "lease_lost", renewLost.error);

  // A client-chosen lease: the same grant again (idempotent retry).
  const lease = "6f1c2a9e0b7d4e3f8a5c1d2e3f4a5b6c";
  const a1 = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "idem" } }, body: { lease, ttl_ms: 5000 } });
  const a2 = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "idem" } }, body: { lease, ttl_ms: 5000 } });
  check("a retry with the same lease gets the same fence",
        a1.data !== undefined && a2.data?.fence === a1.data.fence && a2.data.lease === lease, [a1.data, a2.data]);
}

// ---- the README's request bodies, as its walkthrough sends them ---------

async function readme(): Promise<void> {
  const leases = new Map<string, string>();
  for (const call of readmeCalls) {
    const path = { name: call.name };
    const lease = leases.get(call.name);
    let status: number;
    let fence: number | undefined;
    switch (call.action) {
      case "acquire": {
        const res = await main.POST("/v1/locks/{name}/acquire", { params: { path }, body: call.body });
        status = res.response.status;
        fence = res.data?.fence;
        if (res.data !== undefined) leases.set(call.name, res.data.lease);
        break;
      }
      case "renew": {
        // The README's lease id is an example; the walkthrough means the one acquire returned.
        const body = lease === undefined ? call.body : { ...call.body, lease };
        const res = await main.POST("/v1/locks/{name}/renew", { params: { path }, body });
        status = res.response.status;
        fence = res.data?.fence;
        break;
      }
      case "release": {
        const body = lease === undefined ? call.body : { ...call.body, lease };
        const res = await main.POST("/v1/locks/{name}/release", { params: { path }, body });
        status = res.response.status;
        if (res.response.status === 200) leases.delete(call.name);
        break;
      }
    }
    check(`${call.where}: ${call.action} ${call.name} answers ${call.expect}`, status === call.expect,
          { status, fence });
  }
}

// ---- fences past 2^53 ----------------------------------------------------

// JSON.parse reads numbers as doubles, exact only up to 2^53. The spec says
// a client that must see larger fences reads the body with a big-integer
// parser; this one reads the text and takes the digits.
function fenceOf(text: string): bigint | undefined {
  const m = /"fence":(\d+)/.exec(text);
  return m?.[1] === undefined ? undefined : BigInt(m[1]);
}

async function bigFences(): Promise<void> {
  const counters = [2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 2n];
  for (const [i, counter] of counters.entries()) {
    const name = `big-${i}`;
    redis("SET", `picket:{${name}}:fence`, counter.toString());
    const res = await main.POST("/v1/locks/{name}/acquire", {
      params: { path: { name } }, body: { ttl_ms: 5000 }, parseAs: "text",
    });
    const text = res.data ?? "";
    const fence = fenceOf(text);
    check(`counter ${counter}: the next fence is exactly ${counter + 1n}`, fence === counter + 1n, text);
    check(`counter ${counter}: the counter holds the fence`, redis("GET", `picket:{${name}}:fence`) === String(counter + 1n));
    const st = await main.GET("/v1/locks/{name}", { params: { path: { name } }, parseAs: "text" });
    check(`counter ${counter}: GET shows the same fence`, fenceOf(st.data ?? "") === counter + 1n, st.data);
  }
  redis("SET", "picket:{big-top}:fence", (2n ** 63n - 1n).toString());
  const top = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "big-top" } }, body: {} });
  check("at 2^63-1 acquire is 502 store_error, never a wrap",
        top.error?.error.code === "store_error" && /no fence left/.test(top.error.error.message), top.error);
}

// ---- operations endpoints ------------------------------------------------

async function operations(): Promise<void> {
  const health = await main.GET("/healthz");
  check("healthz is ok", health.data?.status === "ok", health.error);
  const ready = await main.GET("/readyz");
  check("readyz is ready", ready.data?.status === "ready" && ready.data.replicas === 0, ready.error);
  for (const path of ["/healthz", "/readyz", "/metrics", "/v1/openapi.yaml"] as const) {
    const h = await main.HEAD(path);
    check(`HEAD ${path} is 200 without a body`, h.response.status === 200 && h.data === undefined);
  }
  // openapi-fetch parses every body as JSON unless told otherwise.
  const metrics = await main.GET("/metrics", { parseAs: "text" });
  const mtext: string | undefined = metrics.data;
  check("metrics are Prometheus text", mtext !== undefined && /^picket_http_requests_total\{/m.test(mtext));
  check("metrics come as the declared media type",
        metrics.response.headers.get("Content-Type") === "text/plain; version=0.0.4; charset=utf-8");
  const spec = await main.GET("/v1/openapi.yaml", { parseAs: "text" });
  check("the spec served is the one the types came from",
        spec.data === readFileSync(env("PICKET_SPEC_FILE"), "utf8"));
}

// ---- every error code ------------------------------------------------------

async function errors(): Promise<void> {
  const bad = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "a b" } }, body: {} });
  check("a name with a space is invalid_argument", bad.error?.error.code === "invalid_argument", bad.error);
  const slash = await main.GET("/v1/locks/{name}", { params: { path: { name: "a/b" } } });
  check("a '/' in a name (sent as %2F) is invalid_argument", slash.error?.error.code === "invalid_argument", slash.error);
  const ttl = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "x" } }, body: { ttl_ms: 0 } });
  check("ttl_ms 0 is invalid_argument", ttl.error?.error.code === "invalid_argument", ttl.error);
  const big = await main.POST("/v1/locks/{name}/acquire", {
    params: { path: { name: "x" } }, body: { owner: "o".repeat(9000) },
  });
  check("a 9000-byte body is body_too_large", big.error?.error.code === "body_too_large", big.error);
  const wide = await main.POST("/v1/locks/{name}/acquire", {
    params: { path: { name: "wide-owner" } }, body: { owner: "\u{1F512}".repeat(128) },
  });
  check("128 four-byte characters are an owner maxLength allows", wide.response.status === 200, wide.error);

  // The fallbacks are no operation of the spec, so no typed call reaches
  // them; fetch them plainly and hold the bodies to the spec's types.
  const base = env("PICKETD_URL");
  const nf = await fetch(`${base}/v1/locks/a/b/acquire`, { method: "POST", body: "{}", headers: { "Content-Type": "application/json" } });
  const nfBody = (await nf.json()) as Schemas["NotFoundError"];
  check("a '/' inside a name is 404 not_found", nf.status === 404 && nfBody.error.code === "not_found", nfBody);
  const na = await fetch(`${base}/v1/locks/x`, { method: "DELETE" });
  const naBody = (await na.json()) as Schemas["MethodNotAllowedError"];
  check("DELETE is 405 method_not_allowed with Allow",
        na.status === 405 && naBody.error.code === "method_not_allowed" && na.headers.get("Allow") === "GET, HEAD", naBody);

  redis("SET", "picket:{wrongtype}:lease", "oops");
  const wt = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "wrongtype" } }, body: {} });
  check("a wrong-type key is store_error", wt.error?.error.code === "store_error", wt.error);

  // --max-waiters 1: one parked waiter fills the queue.
  const hold = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "queue" } }, body: { ttl_ms: 20000 } });
  const parked = main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "queue" } }, body: { wait_ms: 10000 } });
  await sleep(300);
  const full = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "queue" } }, body: { wait_ms: 10000 } });
  check("a second waiter is too_many_waiters", full.error?.error.code === "too_many_waiters", full.error);
  if (hold.data !== undefined)
    await main.POST("/v1/locks/{name}/release", { params: { path: { name: "queue" } }, body: { lease: hold.data.lease } });
  const woke = await parked;
  check("the parked waiter is granted once the holder releases", woke.response.status === 200, woke.error);

  const noReplica = connect(env("PICKETD_REPLICAS_URL"));
  const nr = await noReplica.POST("/v1/locks/{name}/acquire", { params: { path: { name: "repl" } }, body: {} });
  check("--min-replicas 1 without a replica is not_replicated", nr.error?.error.code === "not_replicated", nr.error);
  const nrReady = await noReplica.GET("/readyz");
  check("... and so is /readyz", nrReady.error?.error.code === "not_replicated", nrReady.error);

  const noRedis = connect(env("PICKETD_NOREDIS_URL"));
  const su = await noRedis.POST("/v1/locks/{name}/renew", {
    params: { path: { name: "x" } }, body: { lease: "0123456789abcdef0123456789abcdef" },
  });
  check("no Redis is store_unavailable", su.error?.error.code === "store_unavailable", su.error);
  const suGet = await noRedis.GET("/v1/locks/{name}", { params: { path: { name: "x" } } });
  check("... for GET too", suGet.error?.error.code === "store_unavailable", suGet.error);

  // shutting_down: a waiter parked when picketd gets SIGTERM.
  const stopping = connect(env("PICKETD_STOP_URL"));
  const sh = await stopping.POST("/v1/locks/{name}/acquire", { params: { path: { name: "stop" } }, body: {} });
  check("the lock to wait for is granted", sh.response.status === 200, sh.error);
  const waiter = stopping.POST("/v1/locks/{name}/acquire", { params: { path: { name: "stop" } }, body: { wait_ms: 20000 } });
  await sleep(300);
  process.kill(Number(env("PICKETD_STOP_PID")), "SIGTERM");
  const down = await waiter;
  check("a waiter of a stopping picketd is shutting_down", down.error?.error.code === "shutting_down", down.error);

  // Last, since it changes the shared Redis: an evicting policy seen on reconnect.
  redis("CONFIG", "SET", "maxmemory-policy", "allkeys-lru");
  redis("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no");
  const mc = await main.POST("/v1/locks/{name}/acquire", { params: { path: { name: "policy" } }, body: {} });
  check("an evicting Redis is store_misconfigured", mc.error?.error.code === "store_misconfigured", mc.error);
  redis("CONFIG", "SET", "maxmemory-policy", "noeviction");
}

await locks();
await readme();
await bigFences();
await operations();
await errors();
console.log(`${checks - failures} of ${checks} checks passed`);
process.exit(failures === 0 && checks > 0 ? 0 : 1);
