import { sleep } from "./client.js";
import { EventsUnsupported, Forbidden, InvalidArgument, LeaseLost, LockLost, LockReleased, Unauthorized, } from "./errors.js";
import { now } from "./lease.js";
import { inspect } from "node:util";
const WATCH_RETRY_MS = 100;
const WATCH_RETRY_MAX_MS = 10000;
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
    #out = new AbortController(); // .signal
    #stop = new AbortController(); // ends the keeper's renewals and watch
    #renewEveryMs;
    #renewTimer;
    #deadlineTimer;
    #lost;
    #released;
    #userSignal;
    #onUserAbort;
    /** @internal Made by Client.lock(), semaphore() and rwlock(). */
    constructor(client, lease, opts, watch) {
        this.#client = client;
        this.lease = lease;
        this.signal = this.#out.signal;
        if (opts.renewEveryMs !== undefined && !(Number.isFinite(opts.renewEveryMs) && opts.renewEveryMs > 0)) {
            throw new InvalidArgument("renewEveryMs must be a positive number");
        }
        this.#renewEveryMs = opts.renewEveryMs;
        this.#armDeadline();
        this.#scheduleRenew();
        if (watch && lease.kind === "lock")
            void this.#watch();
        // Aborting the caller's signal releases (node-redlock's pattern, done right).
        if (opts.signal !== undefined) {
            this.#userSignal = opts.signal;
            this.#onUserAbort = () => { this.release().catch(() => { }); };
            if (opts.signal.aborted)
                this.#onUserAbort();
            else
                opts.signal.addEventListener("abort", this.#onUserAbort, { once: true });
        }
    }
    get name() { return this.lease.name; }
    get fence() { return this.lease.fence; }
    get fenceToken() { return this.lease.fenceToken; }
    get fenceLock() { return this.lease.fenceLock; }
    /** The LockLost the signal aborted with, when the lease was lost. */
    get lostReason() { return this.#lost; }
    /** True while held: not lost, not released, before the local deadline. */
    valid() { return !this.signal.aborted && this.lease.valid(); }
    /** Picket-Lock, Picket-Fence (+ Picket-Fence-Token when signed) for a fenced store. */
    fenceHeaders() { return this.lease.fenceHeaders(); }
    /** Throws the signal's reason once it aborted (a LockLost or LockReleased). */
    throwIfLost() { this.signal.throwIfAborted(); }
    #every() {
        return this.#renewEveryMs ?? this.lease.ttlMs / 3;
    }
    #armDeadline() {
        clearTimeout(this.#deadlineTimer);
        this.#deadlineTimer = setTimeout(() => {
            if (now() >= this.lease.deadline) {
                this.#lose(this.lease.capped ? "max_hold" : "expired");
            }
            else {
                this.#armDeadline();
            }
        }, Math.max(0, Math.ceil(this.lease.deadline - now())));
    }
    #scheduleRenew(delayMs = this.#every()) {
        clearTimeout(this.#renewTimer);
        if (this.#stop.signal.aborted || this.lease.capped)
            return; // capped: it ends at its deadline
        this.#renewTimer = setTimeout(() => void this.#renew(), Math.max(0, delayMs));
    }
    async #renew() {
        if (this.#stop.signal.aborted)
            return;
        try {
            await this.#client.renew(this.lease, { signal: this.#stop.signal });
            if (this.#stop.signal.aborted)
                return;
            this.#armDeadline();
            this.#scheduleRenew();
        }
        catch (e) {
            if (this.#stop.signal.aborted)
                return;
            if (e instanceof LeaseLost) {
                this.#lose(now() >= this.lease.deadline ? (this.lease.capped ? "max_hold" : "expired") : "lease_lost");
                return;
            }
            // transport, 503 (already retried), a quota: again soon, until the
            // deadline timer says the lease is gone.
            this.#scheduleRenew(Math.min(250, Math.max(10, this.lease.remainingMs() / 4)));
        }
    }
    async #watch() {
        let retry = WATCH_RETRY_MS;
        const stop = this.#stop.signal;
        const fence = this.lease.fence;
        while (!stop.aborted) {
            try {
                for await (const ev of this.#client.watch(this.lease.name, { signal: stop })) {
                    if (ev.type === "state") {
                        this.watching = true;
                        retry = WATCH_RETRY_MS;
                    }
                    if (ev.ends(fence)) {
                        this.#lose(ev.type === "broken" ? "broken" : ev.type === "expired" ? "expired" : "taken");
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
    #halt() {
        this.#stop.abort();
        clearTimeout(this.#renewTimer);
        clearTimeout(this.#deadlineTimer);
        if (this.#userSignal !== undefined && this.#onUserAbort !== undefined) {
            this.#userSignal.removeEventListener("abort", this.#onUserAbort);
        }
    }
    #lose(reason) {
        if (this.signal.aborted)
            return;
        const why = {
            expired: "no renewal succeeded before its local deadline",
            lease_lost: "picketd said the lease is lost",
            broken: "it was broken",
            taken: "the lock was released, expired or granted to another",
            max_hold: "its hold cap (maxHoldMs) was reached",
        }[reason];
        this.#lost = new LockLost(`${this.lease.describe()} (fence ${this.lease.fence}) was lost: ${why}`, reason);
        this.lease.markLost();
        this.#halt();
        this.#out.abort(this.#lost);
    }
    /**
     * Stop renewing and give the lease up; the signal aborts (a LockReleased)
     * if it had not. Resolves true when released, false when the lease had
     * already been lost (nothing to give back then). Rejects when picketd could
     * not be told (the lease then ends at its TTL). Safe to call twice.
     */
    release() {
        if (this.#released === undefined) {
            const lost = this.signal.aborted;
            this.#halt();
            if (!lost)
                this.#out.abort(new LockReleased(`${this.lease.describe()} was released`));
            this.#released = lost
                ? this.#client.release(this.lease).then(() => false, () => false)
                : this.#client.release(this.lease).then(() => true, (e) => {
                    if (e instanceof LeaseLost) {
                        this.lease.markLost();
                        return false;
                    }
                    throw e;
                });
        }
        return this.#released;
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
