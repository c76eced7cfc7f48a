// Client.lock()'s keeper: renewal past the TTL, the loss signal (a paused
// picketd, a break, the hold cap, lease_lost), release, withLock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, HeldLock, LockLost, LockReleased, LeaseLost } from "@picket/client";
import { aborted, env, fresh, sleep, until } from "./env.mjs";

const url = env("PICKET_TEST_URL");
const c = new Client(url, { owner: "node-keeper" });

test("the keeper renews past several TTLs; release aborts the signal with LockReleased", async () => {
  const name = fresh();
  const l = await c.lock(name, { ttlMs: 450 });
  assert.ok(l instanceof HeldLock);
  await sleep(2000); // over 4 TTLs
  assert.equal(l.signal.aborted, false);
  assert.ok(l.valid());
  const st = await c.inspect(name);
  assert.equal(st.held, true);
  assert.equal(st.fence, l.fence);
  assert.ok(st.renewals >= 4, `renewals ${st.renewals}`);
  assert.equal(await l.release(), true);
  assert.ok(l.signal.aborted);
  assert.ok(l.signal.reason instanceof LockReleased);
  assert.ok(!(l.signal.reason instanceof LeaseLost));
  assert.equal((await c.inspect(name)).held, false);
  assert.equal(await l.release(), true, "a second release is the first's");
});

test("the hold cap aborts the signal with reason max_hold", async (t) => {
  const name = fresh();
  const t0 = performance.now();
  // a 1.5 s lease: a 0.4 s one lost a renewal on a loaded machine and
  // ended as expired before the cap came (as the Python keeper's test did)
  const l = await c.lock(name, { ttlMs: 1500, maxHoldMs: 3000 });
  const at = await aborted(l.signal);
  const held = at - t0;
  t.diagnostic(`measured: hold cap 3000 ms, signal aborted after ${held.toFixed(0)} ms`);
  assert.ok(l.signal.reason instanceof LockLost);
  assert.equal(l.signal.reason.reason, "max_hold");
  assert.ok(held >= 2900 && held < 5000, `aborted after ${held} ms`);
  assert.equal(await l.release(), false, "nothing to give back after a loss");
});

test("a renewal answered lease_lost aborts with reason lease_lost (watch off)", async () => {
  const name = fresh();
  const l = await c.lock(name, { ttlMs: 600, watch: false });
  await c.breakLock(name); // loopback may break without --auth-file
  await aborted(l.signal);
  assert.equal(l.signal.reason.reason, "lease_lost");
  assert.ok(l.signal.reason instanceof LeaseLost);
  assert.equal(l.signal.reason.code, "lease_lost");
  assert.ok(l.lease.lost);
});

test("withLock: runs fn under the lock, releases after, and says when the lease was lost", async () => {
  const name = fresh();
  const r = await c.withLock(name, async (l) => {
    assert.equal((await c.inspect(name)).fence, l.fence);
    assert.equal(l.signal.aborted, false);
    return 42;
  }, { ttlMs: 2000 });
  assert.equal(r, 42);
  assert.equal((await c.inspect(name)).held, false);
  await assert.rejects(c.withLock(name, async () => { throw new Error("work failed"); }, { ttlMs: 2000 }), /work failed/);
  assert.equal((await c.inspect(name)).held, false, "released after a throw too");
  const e = await c.withLock(name, async (l) => {
    await c.breakLock(name);
    await aborted(l.signal);
    return "done";
  }, { ttlMs: 2000 }).then(() => assert.fail("no loss reported"), (e) => e);
  assert.ok(e instanceof LockLost, String(e));
});

test("aborting the caller's signal releases the held lock", async () => {
  const name = fresh();
  const ac = new AbortController();
  const l = await c.lock(name, { ttlMs: 5000, signal: ac.signal });
  ac.abort();
  await until(async () => !(await c.inspect(name)).held, 3000, "the release");
  assert.ok(l.signal.reason instanceof LockReleased);
});

test("Symbol.asyncDispose releases", async () => {
  const name = fresh();
  const l = await c.lock(name, { ttlMs: 5000 });
  await l[Symbol.asyncDispose]();
  assert.equal((await c.inspect(name)).held, false);
});

test("a paused picketd: the signal aborts at the lease's local deadline", async (t) => {
  const pc = new Client(env("PICKET_TEST_PAUSE_URL"), { timeoutMs: 5000 });
  const pid = Number(env("PICKET_TEST_PAUSE_PID"));
  const ttl = 1500;
  const l = await pc.lock(fresh(), { ttlMs: ttl });
  await until(() => l.watching, 3000, "the watch");
  process.kill(pid, "SIGSTOP");
  let at, deadline;
  try {
    const stopped = performance.now();
    at = await aborted(l.signal);
    deadline = l.lease.deadline;
    t.diagnostic(`measured: paused picketd: loss signalled ${(at - deadline).toFixed(1)} ms after the lease's local deadline ` +
      `(${(at - stopped).toFixed(0)} ms after SIGSTOP; ttl ${ttl} ms, renewal interval ${ttl / 3} ms)`);
  } finally {
    process.kill(pid, "SIGCONT");
  }
  assert.equal(l.signal.reason.reason, "expired");
  assert.ok(at >= deadline, "not before the deadline");
  assert.ok(at - deadline < ttl / 3, `within one renewal interval: ${at - deadline} ms`);
  await l.release();
});
