// @picket/client: a client for picketd, a lock service whose grants carry
// fencing tokens. Speaks only the HTTP contract (proto/openapi.yaml).
//
//   import { Client } from "@picket/client";
//   const c = new Client("http://127.0.0.1:7070");
//   const l = await c.lock("inventory-sync", { ttlMs: 30000 });
//   try { await work(l.signal, l.fenceHeaders()); } finally { await l.release(); }
export { Client, BODY_MAX } from "./client.js";
export { HeldLock } from "./held.js";
export { Lease, driftMarginMs } from "./lease.js";
export { LockEvent, LINE_MAX } from "./events.js";
export { lockName, rwlockName, semaphoreName, MAX_RWLOCK_NAME, MAX_SEMAPHORE_NAME } from "./names.js";
export * from "./errors.js";
