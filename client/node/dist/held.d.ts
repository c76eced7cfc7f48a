import type { AcquireOptions, Client } from "./client.js";
import { LockLost, PicketError } from "./errors.js";
import type { Lease } from "./lease.js";
import { inspect } from "node:util";
export interface LockOptions extends AcquireOptions {
    /** How often the keeper renews (ms); default ttl/3. */
    renewEveryMs?: number;
    /** Follow the lock's events too (locks only); default true. */
    watch?: boolean;
}
export declare class HeldLock {
    #private;
    /** The grant: name, fence, fenceToken, fenceLock, deadline, ... */
    readonly lease: Lease;
    /** Aborts the moment the lease is lost (reason: a LockLost) or released (reason: a LockReleased). */
    readonly signal: AbortSignal;
    /** True once the event stream has said where the lock stands. */
    watching: boolean;
    /** The refusal after which the keeper only renews (EventsUnsupported, Forbidden), else undefined. */
    watchError: PicketError | undefined;
    /** @internal Made by Client.lock(), semaphore() and rwlock(). */
    constructor(client: Client, lease: Lease, opts: {
        renewEveryMs?: number;
        signal?: AbortSignal | undefined;
    }, watch: boolean);
    get name(): string;
    get fence(): number;
    get fenceToken(): string | undefined;
    get fenceLock(): string;
    /** The LockLost the signal aborted with, when the lease was lost. */
    get lostReason(): LockLost | undefined;
    /** True while held: not lost, not released, before the local deadline. */
    valid(): boolean;
    /** Picket-Lock, Picket-Fence (+ Picket-Fence-Token when signed) for a fenced store. */
    fenceHeaders(): Record<string, string>;
    /** Throws the signal's reason once it aborted (a LockLost or LockReleased). */
    throwIfLost(): void;
    /**
     * Stop renewing and give the lease up; the signal aborts (a LockReleased)
     * if it had not. Resolves true when released, false when the lease had
     * already been lost (nothing to give back then). Rejects when picketd could
     * not be told (the lease then ends at its TTL). Safe to call twice.
     */
    release(): Promise<boolean>;
    /**
     * Releases: `await using l = await c.lock(...)` in TypeScript 5.2+ or a
     * runtime with explicit resource management (Node 20 defines the symbol
     * but not the syntax: use withLock() or try/finally there).
     */
    [Symbol.asyncDispose](): Promise<void>;
    toString(): string;
    [inspect.custom](): string;
}
