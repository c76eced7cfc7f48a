// acquire/renew/release, conflict, blocking waits, names, semaphores,
// rwlocks and watch against a plain picketd (PICKET_TEST_URL).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import {
  Client, Lease, LockHeld, LockDelay, LeaseLost, TransportError, InvalidArgument, SemaphoreFull, LimitMismatch,
  lockName, semaphoreName, rwlockName, LockEvent, driftMarginMs,
} from "@picket/client";
import { env, fresh, sleep } from "./env.mjs";

const url = env("PICKET_TEST_URL");
const c = new Client(url, { owner: "node-test" });

test("acquire, renew, release; the fence increases", async () => {
  const name = fresh();
  const a = await c.acquire(name, { ttlMs: 5000 });
  assert.ok(a instanceof Lease);
  assert.equal(a.name, name);
  assert.equal(a.kind, "lock");
  assert.equal(a.owner, "node-test");
  assert.equal(a.fenceLock, name);
  assert.ok(Number.isSafeInteger(a.fence) && a.fence > 0);
  assert.ok(a.valid());
  const st = await c.inspect(name);
  assert.equal(st.held, true);
  assert.equal(st.fence, a.fence);
  const before = a.deadline;
  await sleep(20);
  await c.renew(a, { ttlMs: 8000 });
  assert.equal(a.ttlMs, 8000);
  assert.ok(a.deadline > before);
  await c.release(a);
  assert.equal((await c.inspect(name)).held, false);
  await assert.rejects(c.release(a), LeaseLost);
  await assert.rejects(c.renew(a), LeaseLost);
  const b = await c.acquire(name, { ttlMs: 5000 });
  assert.ok(b.fence > a.fence, `fence ${b.fence} after ${a.fence}`);
  await c.release(b);
});

test("a renewal with a shorter TTL moves the local deadline back", async () => {
  // picketd ends the lease at about the renewal's send + its new TTL
  const a = await c.acquire(fresh(), { ttlMs: 10000 });
  assert.ok(a.remainingMs() > 9000);
  const t0 = performance.now();
  await c.renew(a, { ttlMs: 1000 });
  const t1 = performance.now();
  assert.equal(a.ttlMs, 1000);
  assert.ok(a.deadline >= t0 + 1000 - driftMarginMs(1000) - 1 && a.deadline <= t1 + 1000 - driftMarginMs(1000) + 1,
    `deadline ${a.deadline} after a 1 s renewal sent in [${t0}, ${t1}]`);
  assert.ok(a.remainingMs() <= 1000, `remaining ${a.remainingMs()} ms`);
  await c.renew(a, { ttlMs: 10000 });
  assert.ok(a.remainingMs() > 9000);
  await c.release(a);
});

test("a retry with the same lease id gets the same grant", async () => {
  const name = fresh();
  const id = randomBytes(16).toString("hex");
  const a = await c.acquire(name, { ttlMs: 5000, lease: id });
  const again = await c.acquire(name, { ttlMs: 5000, lease: id });
  assert.equal(again.fence, a.fence);
  await c.release(a);
});

test("conflict: LockHeld with the holder and retryAfterMs, not a TransportError", async () => {
  const name = fresh();
  const a = await c.acquire(name, { ttlMs: 5000, owner: "holder-A" });
  const err = await c.acquire(name, { ttlMs: 5000 }).then(() => assert.fail("granted twice"), (e) => e);
  assert.ok(err instanceof LockHeld, String(err));
  assert.ok(!(err instanceof TransportError));
  assert.equal(err.code, "lock_held");
  assert.equal(err.status, 409);
  assert.equal(err.holder, "holder-A");
  assert.ok(err.retryAfterMs > 0 && err.retryAfterMs <= 5000, `retryAfterMs ${err.retryAfterMs}`);
  await c.release(a);
});

test("an expired lease's lock-delay: LockDelay, a LockHeld, with retryAfterMs", async () => {
  const name = fresh();
  await c.acquire(name, { ttlMs: 150, lockDelayMs: 5000, owner: "gone" });
  await sleep(300); // expires without a release
  const e = await c.acquire(name, { ttlMs: 1000 }).then(() => assert.fail("granted in the delay"), (e) => e);
  assert.ok(e instanceof LockDelay && e instanceof LockHeld, String(e));
  assert.equal(e.code, "lock_delay");
  assert.equal(e.status, 409);
  assert.ok(e.retryAfterMs > 0 && e.retryAfterMs <= 5000, `retryAfterMs ${e.retryAfterMs}`);
});

test("a blocking wait is woken by the release", async (t) => {
  const name = fresh();
  const a = await c.acquire(name, { ttlMs: 10000 });
  const t0 = performance.now();
  const waiting = c.acquire(name, { ttlMs: 5000, waitMs: 8000 });
  await sleep(200);
  const released = performance.now();
  await c.release(a);
  const b = await waiting;
  const woke = performance.now() - released;
  t.diagnostic(`measured: waiter granted ${woke.toFixed(1)} ms after the release (waited ${(performance.now() - t0).toFixed(0)} ms)`);
  assert.ok(b.fence > a.fence);
  assert.ok(woke < 2000, `woken ${woke} ms after the release`);
  await c.release(b);
});

test("an aborted signal cancels a waiting acquire promptly, and the wait leaves nothing held", async (t) => {
  const name = fresh();
  const a = await c.acquire(name, { ttlMs: 10000 });
  const ac = new AbortController();
  const waiting = c.acquire(name, { ttlMs: 5000, waitMs: 20000, signal: ac.signal });
  await sleep(150);
  const t0 = performance.now();
  ac.abort();
  const err = await waiting.then(() => assert.fail("granted"), (e) => e);
  const took = performance.now() - t0;
  t.diagnostic(`measured: wait cancelled ${took.toFixed(1)} ms after the abort`);
  assert.equal(err.name, "AbortError");
  assert.ok(took < 1000, `${took} ms`);
  await c.release(a);
  // The cancelled waiter does not get the lock afterwards.
  await sleep(100);
  const b = await c.acquire(name, { ttlMs: 1000 });
  await c.release(b);
  // An already aborted signal: no request at all.
  await assert.rejects(c.acquire(name, { signal: AbortSignal.abort() }), { name: "AbortError" });
});

test("bad input is a typed InvalidArgument before any request", async () => {
  const dead = new Client("http://127.0.0.1:1", { retries: 0 });
  for (const opts of [{ ttlMs: 0 }, { ttlMs: -5 }, { ttlMs: 1.5 }, { ttlMs: "30" }, { waitMs: -1 },
    { lease: "nothex" }, { owner: "a\nb" }, { owner: "x".repeat(129) }, { maxHoldMs: -1 }]) {
    const e = await dead.acquire("x", opts).then(() => assert.fail("accepted"), (e) => e);
    assert.ok(e instanceof InvalidArgument, `${JSON.stringify(opts)}: ${e}`);
    assert.equal(e.status, undefined);
    assert.equal(e.code, "invalid_argument");
  }
  await assert.rejects(dead.acquire(42), InvalidArgument);
  await assert.rejects(dead.acquirePermit("s", 0), InvalidArgument);
  await assert.rejects(dead.acquireRwlock("r", "both"), InvalidArgument);
  await assert.rejects(dead.lock("x", { ttlMs: 0 }), InvalidArgument);
  assert.throws(() => dead.watch(7), InvalidArgument);
  assert.throws(() => new Client("ftp://x"), InvalidArgument);
  assert.throws(() => new Client("http://127.0.0.1:7070", { ca: "x" }), InvalidArgument);
  assert.throws(() => new Client("not a url"), InvalidArgument);
});

test("resource names map as every picket client maps them", async () => {
  assert.equal(lockName("orders.42"), "orders.42");
  const cls = "App\\Jobs\\InventorySync";
  const want = "h." + createHash("sha256").update(cls).digest("hex").slice(0, 32);
  assert.equal(lockName(cls), want);
  assert.equal(lockName(""), "h." + createHash("sha256").update("").digest("hex").slice(0, 32));
  assert.equal(lockName(".."), "h." + createHash("sha256").update("..").digest("hex").slice(0, 32));
  assert.equal(lockName("ü"), "h." + createHash("sha256").update("ü", "utf8").digest("hex").slice(0, 32));
  assert.throws(() => semaphoreName("s".repeat(181)), InvalidArgument);
  assert.throws(() => rwlockName("r".repeat(198)), InvalidArgument);
  const l = await c.acquire(cls, { ttlMs: 2000 });
  assert.equal(l.name, want);
  assert.equal((await c.inspect(cls)).held, true);
  await c.release(l);
});

test("semaphores: permits, SemaphoreFull, LimitMismatch, a kept permit", async () => {
  const name = fresh();
  const p0 = await c.acquirePermit(name, 2, { ttlMs: 5000 });
  const p1 = await c.acquirePermit(name, 2, { ttlMs: 5000 });
  assert.equal(p0.kind, "permit");
  assert.deepEqual([p0.permit, p1.permit].sort(), [0, 1]);
  assert.equal(p0.limit, 2);
  assert.equal(p0.fenceLock, `${name}:permit:${p0.permit}`);
  const full = await c.acquirePermit(name, 2, { ttlMs: 5000 }).then(() => assert.fail("a third permit"), (e) => e);
  assert.ok(full instanceof SemaphoreFull && full instanceof LockHeld, String(full));
  assert.equal(full.status, 409);
  const mm = await c.acquirePermit(name, 3, { ttlMs: 5000 }).then(() => assert.fail("another limit"), (e) => e);
  assert.ok(mm instanceof LimitMismatch, String(mm));
  assert.equal(mm.limit, 2);
  assert.equal((await c.inspectSemaphore(name)).held, 2);
  await c.renew(p0);
  await c.release(p0);
  await c.release(p1);
  const h = await c.semaphore(name, 2, { ttlMs: 450 });
  await sleep(1200);
  assert.equal(h.signal.aborted, false, "the keeper renews a permit");
  assert.equal((await c.inspectSemaphore(name)).held, 1);
  assert.equal(await h.release(), true);
  assert.equal((await c.inspectSemaphore(name)).held, 0);
});

test("rwlocks: readers share, a writer waits for them", async () => {
  const name = fresh();
  const r1 = await c.acquireRwlock(name, "read", { ttlMs: 5000 });
  const r2 = await c.acquireRwlock(name, "read", { ttlMs: 5000 });
  assert.equal(r1.mode, "read");
  assert.equal(r1.fenceLock, `${name}:rw`);
  await assert.rejects(c.acquireRwlock(name, "write", { ttlMs: 5000 }), LockHeld);
  const st = await c.inspectRwlock(name);
  assert.equal(st.readers, 2);
  await c.release(r1);
  await c.release(r2);
  const w = await c.rwlock(name, "write", { ttlMs: 450 });
  assert.equal(w.lease.mode, "write");
  assert.ok(w.fence > r1.fence || r1.fence === 0);
  await sleep(1200);
  assert.equal(w.signal.aborted, false, "the keeper renews a write lease");
  assert.deepEqual(w.fenceHeaders(), { "Picket-Lock": `${name}:rw`, "Picket-Fence": String(w.fence) });
  await w.release();
  assert.equal((await c.inspectRwlock(name)).writer, null);
});

test("watch: an async iterator of a lock's events, ended by its signal", async () => {
  const name = fresh();
  const ac = new AbortController();
  const seen = [];
  const done = (async () => {
    for await (const ev of c.watch(name, { signal: ac.signal })) {
      assert.ok(ev instanceof LockEvent);
      seen.push(ev);
      if (ev.type === "released") ac.abort();
    }
  })();
  await sleep(200);
  const l = await c.acquire(name, { ttlMs: 5000 });
  await c.renew(l);
  await c.release(l);
  await done;
  const types = seen.map((e) => e.type);
  assert.equal(types[0], "state");
  assert.deepEqual(types.slice(1), ["granted", "renewed", "released"]);
  assert.equal(seen[1].fence, l.fence);
  assert.ok(seen[3].ends(l.fence));
  assert.ok(!seen[2].ends(l.fence));
});
