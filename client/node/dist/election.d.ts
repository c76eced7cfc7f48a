import { inspect } from "node:util";
import { LockLost } from "./errors.js";
import { StreamEvent } from "./events.js";
import type { LeaderEventWire, LeaderWire } from "./wire.js";
/** @internal A value of a campaign or proclaim: null, or a string of at most 4096 bytes of UTF-8 without control characters. */
export declare function checkValue(v: unknown): string | null;
/** The leader of an election: its term, value, owner, since (unix ms of the grant) and ttl_ms. Never its lease id. */
export type Leader = LeaderWire;
/** One "leader" event of an election's stream (Client.observe). */
export declare class LeaderEvent extends StreamEvent<LeaderEventWire> {
    get election(): string;
    /** null when nobody leads now (resigned, expired, broken). */
    get leader(): Leader | null;
    /** The last term issued. */
    get term(): number;
    /** The leader's term, value and owner (undefined when nobody leads). */
    get leaderTerm(): number | undefined;
    get value(): string | null | undefined;
    get owner(): string | null | undefined;
}
/** @internal What a Leadership needs of its Client. */
export interface LeaderCalls {
    post(election: string, verb: string, body: Record<string, unknown>, o: {
        deadline?: number;
        signal?: AbortSignal | undefined;
        stamp?: {
            sent: number;
        };
    }): Promise<Record<string, unknown>>;
}
export interface LeadershipInit {
    election: string;
    id: string;
    term: number;
    ttlMs: number;
    owner: string | null;
    value: string | null;
    token: string | undefined;
    deadline: number;
    /** When the campaign was sent (performance.now()): renewals sent later set the deadline. */
    deadlineSent?: number | undefined;
}
/**
 * A won campaign (Client.campaign). The keeper renews every ttl/3, retries
 * a failed renewal until the local deadline, and aborts .signal (with a
 * LockLost reason, a LeaseLost) the moment picketd says lease_lost or the
 * deadline passes without a successful renewal; .lost resolves with that
 * LockLost. resign() (or aborting the signal given to campaign) steps
 * down: .signal aborts with a Resigned, .lost never resolves. While it
 * leads, its timers keep the process alive: resign() lets it exit.
 */
export declare class Leadership {
    #private;
    /** The election's picket name (the lock name a fenced store checks the term under). */
    readonly election: string;
    /** The fence to send with every write (strictly increasing per election). */
    readonly term: number;
    readonly owner: string | null;
    /** The value last proclaimed (null: none). */
    value: string | null;
    /** The lease time granted or last renewed (ms). */
    ttlMs: number;
    /** The signed term (picketd with --fence-key-file), else undefined. */
    token: string | undefined;
    /** performance.now() at which this client must assume the leadership gone. */
    deadline: number;
    /** Aborts the moment the leadership is lost (reason: a LockLost) or resigned (reason: a Resigned). */
    readonly signal: AbortSignal;
    /** Resolves with the LockLost when the leadership is lost (never on resign). */
    readonly lost: Promise<LockLost>;
    /** @internal Made by Client.campaign(). */
    constructor(calls: LeaderCalls, init: LeadershipInit, opts: {
        renewEveryMs?: number | undefined;
        signal?: AbortSignal | undefined;
        keep?: boolean;
    });
    /** The lease id: the leadership's secret (hand it only to picketd). */
    get id(): string;
    /** The term, as a lease calls its fence. */
    get fence(): number;
    /** The lock name a fenced store checks the term under: the election's name. */
    get fenceLock(): string;
    /** The LockLost the signal aborted with, when the leadership was lost. */
    get lostReason(): LockLost | undefined;
    /** Milliseconds left before the local deadline (0 when past it). */
    remainingMs(): number;
    /** True while leading: not lost, not resigned, before the local deadline (this process's clock alone). */
    valid(): boolean;
    /** Throws the signal's reason once it aborted (a LockLost or Resigned). */
    throwIfLost(): void;
    /** The headers a fenced store (examples/fenced-kv) checks: Picket-Lock (the election), Picket-Fence (the term), Picket-Fence-Token when signed. */
    fenceHeaders(): Record<string, string>;
    describe(): string;
    /**
     * Extend the leadership to ttlMs from now (default: its ttl) and move its
     * deadline (the keeper does this every ttl/3). Rejects with LeaseLost when
     * it is no longer the leader. Never retried past the local deadline.
     */
    renew(opts?: {
        ttlMs?: number;
        signal?: AbortSignal | undefined;
    }): Promise<this>;
    /**
     * Publish a new value (a string, or null for none) keeping the term:
     * observers see a leader event with the same term. Renews too (to ttlMs,
     * default the lease's current TTL). Rejects with LeaseLost when it is no
     * longer the leader.
     */
    proclaim(value: string | null, opts?: {
        ttlMs?: number;
        signal?: AbortSignal | undefined;
    }): Promise<this>;
    /**
     * Stop the keeper and step down: the next waiting candidate leads within
     * milliseconds; the signal aborts (a Resigned) if it had not. Resolves
     * true when resigned, false when the leadership had already been lost.
     * Rejects when picketd could not be told (it then ends at its TTL). Safe
     * to call twice.
     */
    resign(): Promise<boolean>;
    /** Resigns: `await using lead = await c.campaign(...)` where the syntax exists. */
    [Symbol.asyncDispose](): Promise<void>;
    toJSON(): Record<string, unknown>;
    toString(): string;
    [inspect.custom](): string;
}
