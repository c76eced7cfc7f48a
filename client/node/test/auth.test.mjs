// Tokens, typed errors for every code a client can meet, TLS, secrets,
// signed fences carried to fenced-kv.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { inspect } from "node:util";
import {
  Client, Unauthorized, Forbidden, TooManyLeases, RateLimited, InvalidArgument, NotFound, LockHeld,
  LeaseLost, StoreUnavailable, TransportError, PicketError, LockLost, EventsUnsupported, ERROR_CLASSES,
} from "@picket/client";
import { aborted, env, fresh, until } from "./env.mjs";

const authUrl = env("PICKET_TEST_AUTH_URL");
const T = {
  locker: env("PICKET_TEST_T_LOCKER"), reader: env("PICKET_TEST_T_READER"), one: env("PICKET_TEST_T_ONE"),
  fast: env("PICKET_TEST_T_FAST"), ops: env("PICKET_TEST_T_OPS"),
};
const locker = new Client(authUrl, { token: T.locker });

async function failure(p) {
  return p.then((v) => assert.fail(`succeeded: ${inspect(v)}`), (e) => e);
}

test("bearer tokens: whoami names the token; the token goes nowhere but Authorization", async () => {
  const me = await locker.whoami();
  assert.equal(me.token, "locker");
  assert.deepEqual(me.verbs.sort(), ["lock", "read"]);
  for (const s of [inspect(locker), String(locker), JSON.stringify(locker)]) {
    assert.ok(!s.includes(T.locker), `the token in ${s}`);
  }
  const l = await locker.lock(fresh(), { ttlMs: 5000 });
  const forms = [inspect(l), String(l), inspect(l.lease), String(l.lease), JSON.stringify(l.lease),
    inspect(l.lease, { showHidden: true, depth: 5 }), inspect(l, { showHidden: true, depth: 5 })];
  for (const s of forms) {
    assert.ok(!s.includes(l.lease.id), `the lease id in ${s}`);
    assert.ok(!s.includes(T.locker), `the token in ${s}`);
  }
  await l.release();
  // Errors carry neither: a lost lease's, a refused one's, a transport one's.
  const e1 = await failure(locker.release(l.lease));
  const e2 = await failure(new Client(authUrl, { token: "pkt_wrong_" + "ab".repeat(16) }).acquire(fresh(), { ttlMs: 1000 }));
  const e3 = await failure(new Client("http://127.0.0.1:1", { token: T.locker, retries: 0 }).acquire(fresh(), { lease: l.lease.id }));
  for (const e of [e1, e2, e3]) {
    for (const s of [String(e), e.message, inspect(e), e.stack, JSON.stringify(e)]) {
      assert.ok(!s.includes(l.lease.id) && !s.includes(T.locker) && !s.includes("pkt_wrong_"), `a secret in ${s}`);
    }
  }
});

test("typed errors for every code a client meets", async () => {
  // 401: no token, an unknown token
  let e = await failure(new Client(authUrl).acquire(fresh(), { ttlMs: 1000 }));
  assert.ok(e instanceof Unauthorized && e.status === 401 && e.code === "unauthenticated", String(e));
  e = await failure(new Client(authUrl, { token: "pkt_nobody_00" }).inspect(fresh()));
  assert.ok(e instanceof Unauthorized, String(e));
  // 403: a verb the token lacks, a name outside its prefixes
  e = await failure(new Client(authUrl, { token: T.reader }).acquire(fresh(), { ttlMs: 1000 }));
  assert.ok(e instanceof Forbidden && e.status === 403 && e.code === "permission_denied", String(e));
  e = await failure(locker.acquire("payroll.x", { ttlMs: 1000 }));
  assert.ok(e instanceof Forbidden, String(e));
  // 429: max_leases, acquire_rate (not retried)
  const one = new Client(authUrl, { token: T.one });
  const held = await one.acquire(fresh("one."), { ttlMs: 5000 });
  e = await failure(one.acquire(fresh("one."), { ttlMs: 5000 }));
  assert.ok(e instanceof TooManyLeases && e.status === 429, String(e));
  await one.release(held);
  const fast = new Client(authUrl, { token: T.fast });
  let limited;
  for (let i = 0; i < 6 && !limited; i++) {
    const r = await fast.acquire(fresh("fast."), { ttlMs: 1000 }).then((l) => fast.release(l), (x) => x);
    if (r instanceof Error) limited = r;
  }
  assert.ok(limited instanceof RateLimited && limited.status === 429, String(limited));
  assert.ok(limited.retryAfterMs > 0, `retryAfterMs ${limited.retryAfterMs}`);
  // 400 from picketd: a ttl over its --max-ttl-ms
  e = await failure(locker.acquire(fresh(), { ttlMs: 3600001 }));
  assert.ok(e instanceof InvalidArgument && e.status === 400, String(e));
  // 404: a path picketd does not have (a url with a prefix it does not serve)
  e = await failure(new Client(authUrl + "/nope", { token: T.locker }).whoami());
  assert.ok(e instanceof NotFound && e.status === 404, String(e));
  // 409: held, and a lease that is gone
  const name = fresh();
  const a = await locker.acquire(name, { ttlMs: 5000 });
  e = await failure(locker.acquire(name, { ttlMs: 5000 }));
  assert.ok(e instanceof LockHeld && e.status === 409, String(e));
  await locker.release(a);
  e = await failure(locker.release(a));
  assert.ok(e instanceof LeaseLost && e.status === 409, String(e));
  e = await failure(locker.renew(a)); // past its local deadline now: found locally
  assert.ok(e instanceof LeaseLost && e.status === undefined, String(e));
  // 503: a picketd without its Redis, retried, then StoreUnavailable (infrastructure, not contention)
  const nr = new Client(env("PICKET_TEST_NOREDIS_URL"), { retries: 1 });
  e = await failure(nr.acquire(fresh(), { ttlMs: 1000 }));
  assert.ok(e instanceof StoreUnavailable && e.status === 503, String(e));
  assert.ok(!(e instanceof LockHeld));
  // Transport: nothing listening
  e = await failure(new Client("http://127.0.0.1:1", { retries: 0 }).acquire(fresh()));
  assert.ok(e instanceof TransportError && e instanceof PicketError && e.code === "transport", String(e));
  // Every class's code is its key.
  for (const [code, cls] of Object.entries(ERROR_CLASSES)) assert.equal(new cls("m").code, code);
});

test("a token without the read verb: the keeper renews only", async () => {
  const noRead = new Client(authUrl, { token: T.one });
  const l = await noRead.lock(fresh("one."), { ttlMs: 600 });
  await until(() => l.watchError !== undefined, 3000, "the watch's refusal");
  assert.ok(l.watchError instanceof Forbidden || l.watchError instanceof EventsUnsupported, String(l.watchError));
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(l.signal.aborted, false);
  await l.release();
});

test("a break is signalled to the holder by its events, well within one renewal interval", async (t) => {
  const ops = new Client(authUrl, { token: T.ops });
  const ttl = 30000;
  const name = fresh();
  const l = await locker.lock(name, { ttlMs: ttl });
  await until(() => l.watching, 3000, "the watch");
  const r = await ops.breakLock(name);
  const replied = performance.now();
  assert.equal(r.broken, true);
  assert.ok(r.fence > l.fence);
  const at = await aborted(l.signal);
  t.diagnostic(`measured: break signalled ${(at - replied).toFixed(1)} ms after the break's reply (renewal interval ${ttl / 3} ms)`);
  assert.ok(l.signal.reason instanceof LockLost);
  assert.equal(l.signal.reason.reason, "broken");
  assert.ok(at - replied < ttl / 3 / 5, `${at - replied} ms`);
});

test("TLS: the test CA is trusted; another CA or none is a TransportError", async () => {
  const tlsUrl = env("PICKET_TEST_TLS_URL");
  const ok = new Client(tlsUrl, { ca: readFileSync(env("PICKET_TEST_TLS_CA")) });
  const l = await ok.lock(fresh(), { ttlMs: 1500 });
  await until(() => l.watching, 3000, "the watch over TLS");
  await l.release();
  for (const bad of [new Client(tlsUrl, { ca: readFileSync(env("PICKET_TEST_TLS_OTHER_CA")), retries: 0 }),
    new Client(tlsUrl, { retries: 0 })]) {
    const e = await failure(bad.acquire(fresh(), { ttlMs: 1000 }));
    assert.ok(e instanceof TransportError, String(e));
  }
});

test("signed fences are carried to fenced-kv; a forged or stale fence is refused", async () => {
  const sc = new Client(env("PICKET_TEST_SIGNED_URL"));
  const kv = env("PICKET_TEST_KV_URL");
  const key = fresh("k.");
  const put = (headers, value) => fetch(`${kv}/kv/${key}`, { method: "PUT", headers, body: value });
  const name = fresh();
  const a = await sc.lock(name, { ttlMs: 5000 });
  assert.match(a.fenceToken, /^v2\.lock\.k1\.[0-9a-f]+$/);
  const h = a.fenceHeaders();
  assert.deepEqual(Object.keys(h).sort(), ["Picket-Fence", "Picket-Fence-Token", "Picket-Lock"]);
  assert.equal((await put(h, "one")).status, 200);
  const forged = { ...h, "Picket-Fence": String(a.fence + 1000) };
  assert.equal((await put(forged, "forged")).status, 403);
  const unsigned = { "Picket-Lock": name, "Picket-Fence": String(a.fence) };
  assert.equal((await put(unsigned, "unsigned")).status, 403);
  await a.release();
  const b = await sc.lock(name, { ttlMs: 5000 });
  assert.equal((await put(b.fenceHeaders(), "two")).status, 200);
  const stale = await put(h, "stale");
  assert.equal(stale.status, 409);
  assert.equal((await stale.json()).error.code, "stale_fence");
  await b.release();
  const got = await (await fetch(`${kv}/kv/${key}`)).json();
  assert.equal(got.value, "two");
});

test("list and locks(): the held names under a prefix, page by page (the list verb)", async () => {
  const ops = new Client(authUrl, { token: T.ops });
  const base = fresh() + ".";
  const held = [];
  for (let i = 0; i < 3; i++) held.push(await ops.acquire(`${base}${i}`, { ttlMs: 5000, owner: `w${i}` }));
  const page = await ops.list({ prefix: base, limit: 2 });
  assert.ok(page.locks.length <= 2);
  const all = [];
  for await (const e of ops.locks({ prefix: base, limit: 2 })) all.push(e);
  assert.deepEqual(all.map((e) => e.name), [`${base}0`, `${base}1`, `${base}2`]);
  assert.equal(all[1].kind, "lock");
  assert.equal(all[1].owner, "w1");
  assert.equal(all[1].fence, held[1].fence);
  await assert.rejects(locker.list({ prefix: base }), Forbidden);
  await assert.rejects(ops.list({ prefix: "bad prefix" }), InvalidArgument);
  await assert.rejects(ops.list({ limit: 1001 }), InvalidArgument);
  for (const l of held) await ops.release(l);
});
