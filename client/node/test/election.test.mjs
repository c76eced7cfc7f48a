// Leader elections against a real picketd: campaign (term, value,
// leader_exists, the waited handover on resign), proclaim, leader(),
// observe(), the keeper's loss signal (a break, renewals stopped), terms
// strictly increasing, the caller's AbortSignal resigning, and a term
// checked by a real fenced-kv as a fence.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Client, InvalidArgument, LeaderEvent, LeaderExists, Leadership, LeaseLost, LockHeld, LockLost, Resigned, electionName, lockName,
} from "@picket/client";
import { aborted, env, fresh, sleep, until } from "./env.mjs";

const url = env("PICKET_TEST_URL");
const c = new Client(url, { owner: "node-elect" });

/** The next value of an async iterator, or a failure after ms. */
async function next(it, ms = 5000, what = "event") {
  let t;
  const r = await Promise.race([
    it.next(),
    new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms); }),
  ]);
  clearTimeout(t);
  assert.equal(r.done, false, `the stream ended before the ${what}`);
  return r.value;
}

test("campaign: term, value, owner, deadline; leader() shows it; resign ends it", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 10000, value: "host-a:8080" });
  assert.ok(lead instanceof Leadership);
  assert.equal(lead.election, name);
  assert.ok(Number.isSafeInteger(lead.term) && lead.term >= 1);
  assert.equal(lead.value, "host-a:8080");
  assert.equal(lead.owner, "node-elect");
  assert.equal(lead.ttlMs, 10000);
  assert.equal(lead.token, undefined);
  assert.ok(lead.valid());
  assert.ok(lead.remainingMs() > 9000 && lead.remainingMs() <= 10000 - (10000 * 0.01 + 2));
  assert.deepEqual(lead.fenceHeaders(), { "Picket-Lock": name, "Picket-Fence": String(lead.term) });
  assert.ok(!String(lead).includes(lead.id) && !JSON.stringify(lead).includes(lead.id), "the lease id is a secret");
  const st = await c.leader(name);
  assert.equal(st.election, name);
  assert.equal(st.term, lead.term);
  assert.equal(st.leader.term, lead.term);
  assert.equal(st.leader.value, "host-a:8080");
  assert.equal(st.leader.owner, "node-elect");
  assert.ok(st.leader.ttl_ms > 5000 && st.leader.since > 0);
  assert.equal(await lead.resign(), true);
  assert.ok(lead.signal.aborted);
  assert.ok(lead.signal.reason instanceof Resigned);
  assert.ok(!lead.valid());
  const after = await c.leader(name);
  assert.equal(after.leader, null);
  assert.equal(after.term, lead.term);
  assert.equal(await lead.resign(), true, "a second resign is the first's");
  const never = await c.leader(fresh());
  assert.equal(never.leader, null);
  assert.equal(never.term, 0);
});

test("a second campaign gets leader_exists (its own error class), at once", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 10000, owner: "first" });
  try {
    const t0 = performance.now();
    const e = await c.campaign(name, { ttlMs: 10000, owner: "second" }).then(() => null, (err) => err);
    assert.ok(e instanceof LeaderExists, `got ${e}`);
    assert.ok(!(e instanceof LockHeld));
    assert.equal(e.code, "leader_exists");
    assert.equal(e.status, 409);
    assert.equal(e.holder, "first");
    assert.ok(e.retryAfterMs > 0 && e.retryAfterMs <= 10000, `retryAfterMs ${e.retryAfterMs}`);
    assert.ok(performance.now() - t0 < 1000);
    // a lock of the same name is another namespace
    const l = await c.acquire(name, { ttlMs: 1000 });
    await c.release(l);
  } finally {
    await lead.resign();
  }
});

test("a waiting candidate leads within a second of the resign, with a higher term", async (t) => {
  const name = fresh();
  const first = await c.campaign(name, { ttlMs: 30000, value: "a" });
  const c2 = new Client(url);
  let at;
  const second = c2.campaign(name, { ttlMs: 30000, waitMs: 10000, value: "b" }).then((l) => { at = performance.now(); return l; });
  await until(async () => (await c.leader(name)).candidates >= 1, 5000, "the second campaign to wait");
  const resigned = performance.now();
  assert.equal(await first.resign(), true);
  const lead = await second;
  try {
    const handover = at - resigned;
    t.diagnostic(`measured: election handover after resign ${handover.toFixed(0)} ms`);
    assert.ok(handover < 1000, `handover ${handover} ms`);
    assert.ok(lead.term > first.term);
    assert.equal(lead.value, "b");
    assert.equal((await c.leader(name)).leader.term, lead.term);
  } finally {
    await lead.resign();
    c2.close();
  }
});

test("proclaim changes the value and keeps the term", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 5000, value: "v1" });
  try {
    const d0 = lead.deadline;
    await sleep(20);
    await lead.proclaim("v2");
    assert.equal(lead.value, "v2");
    assert.ok(lead.deadline > d0, "a proclaim renews");
    let st = await c.leader(name);
    assert.equal(st.leader.term, lead.term);
    assert.equal(st.leader.value, "v2");
    await lead.proclaim(null);
    assert.equal(lead.value, null);
    st = await c.leader(name);
    assert.equal(st.leader.value, null);
    assert.equal(st.leader.term, lead.term);
    await assert.rejects(lead.proclaim("bad\nvalue"), InvalidArgument);
    await assert.rejects(lead.proclaim("x".repeat(4097)), InvalidArgument);
  } finally {
    await lead.resign();
  }
});

test("observe: the current state first, then a proclaim, leader null on resign, the next leader", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 10000, value: "one", owner: "obs" });
  const ac = new AbortController();
  const it = c.observe(name, { signal: ac.signal })[Symbol.asyncIterator]();
  let nxt;
  try {
    const first = await next(it, 5000, "state");
    assert.ok(first instanceof LeaderEvent);
    assert.equal(first.type, "leader");
    assert.equal(first.election, name);
    assert.equal(first.leaderTerm, lead.term);
    assert.equal(first.value, "one");
    assert.equal(first.owner, "obs");
    assert.equal(first.term, lead.term);
    assert.ok(first.time > 0);
    await lead.proclaim("two");
    const p = await next(it, 5000, "proclaim");
    assert.equal(p.leaderTerm, lead.term, "a proclaim keeps the term");
    assert.equal(p.value, "two");
    await lead.resign();
    const r = await next(it, 5000, "resign");
    assert.equal(r.leader, null);
    assert.equal(r.term, lead.term);
    nxt = await c.campaign(name, { ttlMs: 10000, value: "three" });
    const n = await next(it, 5000, "next leader");
    assert.equal(n.leaderTerm, nxt.term);
    assert.ok(nxt.term > lead.term);
    assert.equal(n.value, "three");
  } finally {
    ac.abort();
    assert.deepEqual(await it.next(), { done: true, value: undefined }, "the abort ends the iteration");
    await lead.resign();
    await nxt?.resign();
  }
});

test("the keeper aborts the signal with lease_lost after a break; lost resolves", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 1000 });
  const br = await c.breakElection(name); // loopback may break without --auth-file
  assert.equal(br.broken, true);
  assert.ok(br.term >= lead.term);
  const t0 = performance.now();
  await aborted(lead.signal, 2000);
  assert.ok(performance.now() - t0 < 1000, "found at the next renewal (ttl/3)");
  assert.ok(lead.signal.reason instanceof LockLost);
  assert.ok(lead.signal.reason instanceof LeaseLost);
  assert.equal(lead.signal.reason.reason, "lease_lost");
  assert.equal(await lead.lost, lead.signal.reason);
  assert.equal(lead.lostReason, lead.signal.reason);
  assert.ok(!lead.valid());
  assert.equal(await lead.resign(), false, "nothing to resign after a loss");
  const again = await c.campaign(name, { ttlMs: 1000 });
  assert.ok(again.term > lead.term && again.term >= br.term);
  await again.resign();
});

test("a leadership not renewed is lost at its local deadline (reason expired)", async () => {
  const name = fresh();
  const lead = await c.campaign(name, { ttlMs: 1000, renewEveryMs: 3600000 });
  const at = await aborted(lead.signal, 3000);
  const late = at - lead.deadline;
  assert.ok(late >= 0 && late < 500, `aborted ${late} ms from the deadline`);
  assert.equal(lead.signal.reason.reason, "expired");
  await until(async () => (await c.leader(name)).leader === null, 3000, "the server's lease to end");
  await assert.rejects(lead.renew(), LeaseLost);
});

test("a leadership renewed or proclaimed with a shorter TTL: the local deadline moves back", async () => {
  const lead = await c.campaign(fresh(), { ttlMs: 10000 });
  assert.ok(lead.remainingMs() > 9000);
  await lead.renew({ ttlMs: 1000 });
  assert.equal(lead.ttlMs, 1000);
  assert.ok(lead.remainingMs() <= 1000, `remaining ${lead.remainingMs()} ms after renew`);
  await lead.renew({ ttlMs: 10000 });
  assert.ok(lead.remainingMs() > 9000);
  await lead.proclaim("shorter", { ttlMs: 1000 });
  assert.ok(lead.remainingMs() <= 1000, `remaining ${lead.remainingMs()} ms after proclaim`);
  assert.equal(await lead.resign(), true);
});

test("terms strictly increase across campaigns", async () => {
  const name = fresh();
  const terms = [];
  for (let i = 0; i < 4; i++) {
    const lead = await c.campaign(name, { ttlMs: 10000 });
    terms.push(lead.term);
    await lead.resign();
  }
  for (let i = 1; i < terms.length; i++) assert.ok(terms[i] > terms[i - 1], `terms ${terms}`);
});

test("aborting the caller's signal resigns; it also cancels a waiting campaign", async () => {
  const name = fresh();
  const ac = new AbortController();
  const lead = await c.campaign(name, { ttlMs: 10000, signal: ac.signal });
  const ac2 = new AbortController();
  const waiting = c.campaign(name, { ttlMs: 10000, waitMs: 10000, signal: ac2.signal });
  await until(async () => (await c.leader(name)).candidates >= 1, 5000, "the second campaign to wait");
  ac2.abort();
  await assert.rejects(waiting);
  ac.abort();
  await aborted(lead.signal);
  assert.ok(lead.signal.reason instanceof Resigned);
  await until(async () => (await c.leader(name)).leader === null, 3000, "the resign");
});

test("bad names, values and lease ids are refused locally", async () => {
  await assert.rejects(c.campaign("x".repeat(199)), InvalidArgument);
  await assert.rejects(c.campaign(fresh(), { value: 7 }), InvalidArgument);
  await assert.rejects(c.campaign(fresh(), { value: "a\u0001" }), InvalidArgument);
  await assert.rejects(c.campaign(fresh(), { lease: "nope" }), InvalidArgument);
  assert.equal(electionName("a b"), lockName("a b"));
});

test("the term guards a fenced-kv: a signed term is accepted, a deposed leader's refused", async () => {
  const sc = new Client(env("PICKET_TEST_SIGNED_URL"));
  const kv = env("PICKET_TEST_KV_URL");
  const name = fresh();
  const put = (lead, v) => fetch(`${kv}/kv/${name}-job`, { method: "PUT", headers: lead.fenceHeaders(), body: v });
  const old = await sc.campaign(name, { ttlMs: 10000 });
  assert.equal(typeof old.token, "string");
  assert.equal((await put(old, "run-1")).status, 200);
  await old.resign();
  const nu = await sc.campaign(name, { ttlMs: 10000 });
  try {
    assert.ok(nu.term > old.term);
    assert.equal((await put(nu, "run-2")).status, 200);
    const r = await put(old, "zombie");
    assert.equal(r.status, 409);
    assert.match(await r.text(), /stale_fence/);
  } finally {
    await nu.resign();
    sc.close();
  }
});
