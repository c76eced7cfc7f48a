import { inspect } from "node:util";
export type LeaseKind = "lock" | "permit" | "rwlock";
export type RwMode = "read" | "write";
/** What a lease's local deadline keeps back from its TTL (ms): 1% plus 2 ms, as libpicket. */
export declare function driftMarginMs(ttlMs: number): number;
/** The monotonic clock the deadlines are on (ms). */
export declare const now: () => number;
/**
 * @internal A holder's local deadline after a successful renewal sent at
 * `sent` whose grant ends at `deadline`; `cur` is its deadline now and the
 * send time of the grant or renewal that set it. The deadline follows the
 * NEWEST-SENT successful renewal, not the largest deadline: a renewal that
 * asked for a shorter TTL than before moves it back (picketd expires the
 * lease sooner now), so a reply to a renewal sent after the one that last
 * set the deadline sets it to its own value, earlier or later. A late reply
 * to an older renewal (the keeper's and the caller's may cross) may only
 * lower it, never raise it: picketd may have applied that one after the
 * newer. Both ways are conservative. After a release (cur.sent Infinity)
 * nothing raises it again.
 */
export declare function followRenewal(cur: {
    deadline: number;
    sent: number;
}, sent: number, deadline: number): {
    deadline: number;
    sent: number;
};
export interface LeaseInit {
    kind: LeaseKind;
    name: string;
    id: string;
    fence: number;
    fenceToken: string | undefined;
    ttlMs: number;
    owner: string | null;
    deadline: number;
    /** When the grant was sent (performance.now()): renewals sent later set the deadline. */
    deadlineSent?: number | undefined;
    fenceLock: string;
    permit?: number | undefined;
    limit?: number | undefined;
    mode?: RwMode | undefined;
}
export declare class Lease {
    #private;
    /** "lock", "permit" (of a semaphore) or "rwlock" (a read or write lease). */
    readonly kind: LeaseKind;
    /** The lock's, semaphore's or read/write lock's picket name. */
    readonly name: string;
    /** The fence to send with every write (strictly increasing per fenceLock). */
    readonly fence: number;
    /** The signed fence (picketd with --fence-key-file), else undefined. */
    fenceToken: string | undefined;
    /** The lease time granted or last renewed (ms). */
    ttlMs: number;
    readonly owner: string | null;
    /** performance.now() at which this client must assume the lease gone. */
    deadline: number;
    /** A grant or renewal was cut short by maxHoldMs: no renewal can carry it further. */
    capped: boolean;
    /** The lock name a fenced store checks the fence under (the lock's own name, NAME:permit:I, NAME:rw). */
    readonly fenceLock: string;
    /** A permit's slot (0..limit-1) and its semaphore's limit. */
    readonly permit: number | undefined;
    readonly limit: number | undefined;
    /** A rwlock lease's mode. */
    readonly mode: RwMode | undefined;
    constructor(init: LeaseInit);
    /** The lease id: the grant's secret (hand it only to picketd). */
    get id(): string;
    /** True once the lease is known lost (a renewal said lease_lost, or its keeper declared it). */
    get lost(): boolean;
    /** @internal */
    markLost(): void;
    /** @internal A successful renewal sent at `sent` whose grant ends at `deadline` (followRenewal). */
    renewed(sent: number, deadline: number): void;
    /** @internal Released: gone from now on, and no renewal's late reply moves the deadline on again. */
    ended(): void;
    /** Milliseconds left before the local deadline (0 when past it). */
    remainingMs(): number;
    /** True while not known lost and before the local deadline, by this process's clock alone. */
    valid(): boolean;
    /** The headers a fenced store (examples/fenced-kv) checks: Picket-Lock, Picket-Fence, Picket-Fence-Token when signed. */
    fenceHeaders(): Record<string, string>;
    /** "lease of 'x'", "permit 1 of semaphore 'x'", "read lease of rwlock 'x'". */
    describe(): string;
    toJSON(): Record<string, unknown>;
    toString(): string;
    [inspect.custom](): string;
}
