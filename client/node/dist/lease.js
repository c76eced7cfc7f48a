// Lease: one grant (a lock's, a semaphore permit's, or a read/write lock's
// read or write lease). Its id is the bearer secret of the grant: it is kept
// in a private field and left out of every string form (toString, JSON,
// util.inspect).
import { inspect } from "node:util";
/** What a lease's local deadline keeps back from its TTL (ms): 1% plus 2 ms, as libpicket. */
export function driftMarginMs(ttlMs) {
    return ttlMs * 0.01 + 2;
}
/** The monotonic clock the deadlines are on (ms). */
export const now = () => performance.now();
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
export function followRenewal(cur, sent, deadline) {
    return sent > cur.sent ? { deadline, sent } : { deadline: Math.min(cur.deadline, deadline), sent: cur.sent };
}
export class Lease {
    /** "lock", "permit" (of a semaphore) or "rwlock" (a read or write lease). */
    kind;
    /** The lock's, semaphore's or read/write lock's picket name. */
    name;
    /** The fence to send with every write (strictly increasing per fenceLock). */
    fence;
    /** The signed fence (picketd with --fence-key-file), else undefined. */
    fenceToken;
    /** The lease time granted or last renewed (ms). */
    ttlMs;
    owner;
    /** performance.now() at which this client must assume the lease gone. */
    deadline;
    /** A grant or renewal was cut short by maxHoldMs: no renewal can carry it further. */
    capped = false;
    /** The lock name a fenced store checks the fence under (the lock's own name, NAME:permit:I, NAME:rw). */
    fenceLock;
    /** A permit's slot (0..limit-1) and its semaphore's limit. */
    permit;
    limit;
    /** A rwlock lease's mode. */
    mode;
    #id;
    #lost = false;
    #deadlineSent;
    constructor(init) {
        this.kind = init.kind;
        this.name = init.name;
        this.#id = init.id;
        this.fence = init.fence;
        this.fenceToken = init.fenceToken;
        this.ttlMs = init.ttlMs;
        this.owner = init.owner;
        this.deadline = init.deadline;
        this.#deadlineSent = init.deadlineSent ?? -Infinity;
        this.fenceLock = init.fenceLock;
        this.permit = init.permit;
        this.limit = init.limit;
        this.mode = init.mode;
    }
    /** The lease id: the grant's secret (hand it only to picketd). */
    get id() {
        return this.#id;
    }
    /** True once the lease is known lost (a renewal said lease_lost, or its keeper declared it). */
    get lost() {
        return this.#lost;
    }
    /** @internal */
    markLost() {
        this.#lost = true;
    }
    /** @internal A successful renewal sent at `sent` whose grant ends at `deadline` (followRenewal). */
    renewed(sent, deadline) {
        ({ deadline: this.deadline, sent: this.#deadlineSent } = followRenewal({ deadline: this.deadline, sent: this.#deadlineSent }, sent, deadline));
    }
    /** @internal Released: gone from now on, and no renewal's late reply moves the deadline on again. */
    ended() {
        this.#deadlineSent = Infinity;
        this.deadline = Math.min(this.deadline, now());
    }
    /** Milliseconds left before the local deadline (0 when past it). */
    remainingMs() {
        return Math.max(0, this.deadline - now());
    }
    /** True while not known lost and before the local deadline, by this process's clock alone. */
    valid() {
        return !this.#lost && now() < this.deadline;
    }
    /** The headers a fenced store (examples/fenced-kv) checks: Picket-Lock, Picket-Fence, Picket-Fence-Token when signed. */
    fenceHeaders() {
        const h = { "Picket-Lock": this.fenceLock, "Picket-Fence": String(this.fence) };
        if (this.fenceToken !== undefined)
            h["Picket-Fence-Token"] = this.fenceToken;
        return h;
    }
    /** "lease of 'x'", "permit 1 of semaphore 'x'", "read lease of rwlock 'x'". */
    describe() {
        if (this.kind === "permit")
            return `permit ${this.permit} of semaphore '${this.name}'`;
        if (this.kind === "rwlock")
            return `${this.mode} lease of rwlock '${this.name}'`;
        return `lease of '${this.name}'`;
    }
    toJSON() {
        return {
            kind: this.kind, name: this.name, fence: this.fence, fenceLock: this.fenceLock,
            ttlMs: this.ttlMs, owner: this.owner, permit: this.permit, limit: this.limit,
            mode: this.mode, capped: this.capped, lost: this.#lost,
        };
    }
    toString() {
        return `Lease(${this.describe()}, fence ${this.fence}, ${Math.round(this.remainingMs())} ms left${this.#lost ? ", lost" : ""})`;
    }
    [inspect.custom]() {
        return this.toString();
    }
}
