import { sleep } from "./client.js";
import { EventsUnsupported, Forbidden, InvalidArgument, LockLost, LockReleased, Unauthorized, } from "./errors.js";
import { Keeper } from "./keeper.js";
import { inspect } from "node:util";
const WATCH_RETRY_MS = 100;
const WATCH_RETRY_MAX_MS = 10000;
const WHY = {
    expired: "no renewal succeeded before its local deadline",
    lease_lost: "picketd said the lease is lost",
    broken: "it was broken",
    taken: "the lock was released, expired or granted to another",
    max_hold: "its hold cap (maxHoldMs) was reached",
};
export class HeldLock {
    /** The grant: name, fence, fenceToken, fenceLock, deadline, ... */
    lease;
    /** Aborts the moment the lease is lost (reason: a LockLost) or released (reason: a LockReleased). */
    signal;
    /** True once the event stream has said where the lock stands. */
    watching = false;
    /** The refusal after which the keeper only renews (EventsUnsupported, Forbidden), else undefined. */
    watchError;
    #client;
    #keeper;
    /** @internal Made by Client.lock(), semaphore() and rwlock(). */
    constructor(client, lease, opts, watch) {
        this.#client = client;
        this.lease = lease;
        this.#keeper = new Keeper({
            deadline: () => lease.deadline,
            ttlMs: () => lease.ttlMs,
            remainingMs: () => lease.remainingMs(),
            capped: () => lease.capped,
            renew: (signal) => client.renew(lease, { signal }),
            lost: (reason) => {
                const lost = new LockLost(`${lease.describe()} (fence ${lease.fence}) was lost: ${WHY[reason]}`, reason);
                lease.markLost();
                return lost;
            },
        }, opts.renewEveryMs);
        this.signal = this.#keeper.signal;
        this.#keeper.start();
        if (watch && lease.kind === "lock")
            void this.#watch();
        // Aborting the caller's signal releases (node-redlock's pattern, done right).
        this.#keeper.endOn(opts.signal, () => this.release());
    }
    get name() { return this.lease.name; }
    get fence() { return this.lease.fence; }
    get fenceToken() { return this.lease.fenceToken; }
    get fenceLock() { return this.lease.fenceLock; }
    /** The LockLost the signal aborted with, when the lease was lost. */
    get lostReason() { return this.#keeper.lostReason; }
    /** True while held: not lost, not released, before the local deadline. */
    valid() { return !this.signal.aborted && this.lease.valid(); }
    /** Picket-Lock, Picket-Fence (+ Picket-Fence-Token when signed) for a fenced store. */
    fenceHeaders() { return this.lease.fenceHeaders(); }
    /** Throws the signal's reason once it aborted (a LockLost or LockReleased). */
    throwIfLost() { this.signal.throwIfAborted(); }
    async #watch() {
        let retry = WATCH_RETRY_MS;
        const stop = this.#keeper.stopSignal;
        const fence = this.lease.fence;
        while (!stop.aborted) {
            try {
                for await (const ev of this.#client.watch(this.lease.name, { signal: stop })) {
                    if (ev.type === "state") {
                        this.watching = true;
                        retry = WATCH_RETRY_MS;
                    }
                    if (ev.ends(fence)) {
                        this.#keeper.lose(ev.type === "broken" ? "broken" : ev.type === "expired" ? "expired" : "taken");
                        return;
                    }
                }
            }
            catch (e) {
                if (e instanceof EventsUnsupported || e instanceof Unauthorized || e instanceof Forbidden || e instanceof InvalidArgument) {
                    this.watchError = e;
                    return;
                }
                // the stream broke (picketd restarting, a quota of streams): open another
            }
            try {
                await sleep(retry, stop);
            }
            catch {
                return;
            }
            retry = Math.min(retry * 2, WATCH_RETRY_MAX_MS);
        }
    }
    /**
     * Stop renewing and give the lease up; the signal aborts (a LockReleased)
     * if it had not. Resolves true when released, false when the lease had
     * already been lost (nothing to give back then). Rejects when picketd could
     * not be told (the lease then ends at its TTL). Safe to call twice.
     */
    release() {
        return this.#keeper.end(() => new LockReleased(`${this.lease.describe()} was released`), () => this.#client.release(this.lease), () => this.lease.markLost());
    }
    /**
     * Releases: `await using l = await c.lock(...)` in TypeScript 5.2+ or a
     * runtime with explicit resource management (Node 20 defines the symbol
     * but not the syntax: use withLock() or try/finally there).
     */
    async [Symbol.asyncDispose]() {
        await this.release();
    }
    toString() {
        return `HeldLock(${this.lease.describe()}, fence ${this.lease.fence}, ${this.signal.aborted ? "ended" : "held"})`;
    }
    [inspect.custom]() {
        return this.toString();
    }
}
