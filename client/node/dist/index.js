// @picket/client: a client for picketd, a lock service whose grants carry
// fencing tokens. Speaks only the HTTP contract (proto/openapi.yaml).
//
//   import { Client } from "@picket/client";
//   const c = new Client("http://127.0.0.1:7070");
//   const l = await c.lock("inventory-sync", { ttlMs: 30000 });
//   try { await work(l.signal, l.fenceHeaders()); } finally { await l.release(); }
//   const lead = await c.campaign("scheduler", { ttlMs: 10000, waitMs: 60000, value: "host-a" });
//   try { await schedule(lead.signal, lead.fenceHeaders()); } finally { await lead.resign(); }
export { Client, BODY_MAX } from "./client.js";
export { HeldLock } from "./held.js";
export { Lease, driftMarginMs } from "./lease.js";
export { LockEvent, LINE_MAX } from "./events.js";
export { Leadership, LeaderEvent } from "./election.js";
export { electionName, lockName, rwlockName, semaphoreName, MAX_ELECTION_NAME, MAX_RWLOCK_NAME, MAX_SEMAPHORE_NAME } from "./names.js";
export * from "./errors.js";
