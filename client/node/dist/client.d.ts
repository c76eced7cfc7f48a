import * as http from "node:http";
import { inspect } from "node:util";
import { Lease, type RwMode } from "./lease.js";
import { HeldLock, type LockOptions } from "./held.js";
import { type LockEvent, type WatchOptions } from "./events.js";
import { LeaderEvent, Leadership } from "./election.js";
import type { BreakResultWire, ElectionBreakWire, ElectionStatusWire, LockListEntryWire, LockListWire, LockStatusWire, RwLockStatusWire, SemaphoreStatusWire, WhoAmIWire } from "./wire.js";
/** The most bytes of a reply body read (a longer one is a TransportError). */
export declare const BODY_MAX = 65536;
export interface ClientOptions {
    /** The bearer token (default: $PICKET_TOKEN). Sent only in Authorization. */
    token?: string | undefined;
    /** PEM CA certificate(s) trusted instead of the system's, for https:// (string or Buffer). */
    ca?: string | Buffer | undefined;
    /** Milliseconds for each request (an acquire's wait comes on top). Default 10000. */
    timeoutMs?: number;
    /** How often a failed request is tried again (transport errors, 502, 503). Default 3. */
    retries?: number;
    /** The owner label of this client's leases (shown to others, never a secret). */
    owner?: string | undefined;
}
export interface AcquireOptions {
    /** Lease time (ms), default 30000. */
    ttlMs?: number;
    /** How long to wait while held (ms), default 0 (LockHeld at once). */
    waitMs?: number;
    /** Your own lease id (32 lowercase hex): a retry with the same id gets the same grant. */
    lease?: string;
    /** The owner label (default: the client's). */
    owner?: string;
    /** If this lease expires without a release, nobody gets the lock for this long (ms). */
    lockDelayMs?: number;
    /** No renewal carries the lease past grant + maxHoldMs. */
    maxHoldMs?: number;
    /** Aborting it cancels a waiting acquire (the promise rejects with the signal's reason). */
    signal?: AbortSignal | undefined;
}
export interface RenewOptions {
    ttlMs?: number;
    signal?: AbortSignal | undefined;
}
export interface CampaignOptions {
    /** Lease time of the leadership (ms), default 30000. */
    ttlMs?: number;
    /** How long to wait while another leads (ms; first come, first served on this picketd), default 0 (LeaderExists at once). */
    waitMs?: number;
    /** What observers are told (null or a string of at most 4096 bytes of UTF-8, no control characters). */
    value?: string | null;
    /** The owner label (default: the client's). */
    owner?: string;
    /** Your own lease id (32 lowercase hex): a retry with the same id gets the same term. */
    lease?: string;
    /** How often the keeper renews (ms); default ttl/3. */
    renewEveryMs?: number;
    /** Aborting it cancels a waiting campaign (the promise rejects with the signal's reason), or resigns once leading. */
    signal?: AbortSignal | undefined;
}
export type ElectionStatus = ElectionStatusWire;
export type ElectionBreak = ElectionBreakWire;
export interface LockStatus extends LockStatusWire {
}
export type SemaphoreStatus = SemaphoreStatusWire;
export type RwLockStatus = RwLockStatusWire;
export type BreakResult = BreakResultWire;
export type WhoAmI = WhoAmIWire;
export type LockListEntry = LockListEntryWire;
/** A page of Client.list(): locks, and cursor to pass back for the next page (null at the end). */
export type LockPage = LockListWire;
/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;
export declare class Client {
    #private;
    /** The picketd URL (http:// or https://, a path prefix kept). */
    readonly url: string;
    readonly timeoutMs: number;
    readonly retries: number;
    readonly owner: string | undefined;
    constructor(url?: string, opts?: ClientOptions);
    /** Close idle keep-alive connections (a later call opens new ones). */
    close(): void;
    toString(): string;
    [inspect.custom](): string;
    toJSON(): Record<string, unknown>;
    /** @internal The headers of a request: Accept and, with a token, Authorization (nowhere else). */
    headers(accept: string): Record<string, string>;
    /** @internal Start a request on this client's agent (TLS settings, keep-alive). */
    start(method: string, path: string, headers: Record<string, string>): http.ClientRequest;
    /**
     * Take lock name for ttlMs, waiting up to waitMs while it is held. Resolves
     * to a Lease; rejects with LockHeld (holder, retryAfterMs) if it stays
     * held, LockDelay (a LockHeld) while an expired lease's lock-delay runs.
     */
    acquire(name: string, opts?: AcquireOptions): Promise<Lease>;
    /** Take one permit of the counting semaphore name of limit permits (SemaphoreFull, LimitMismatch). */
    acquirePermit(name: string, limit: number, opts?: AcquireOptions): Promise<Lease>;
    /** Take read/write lock name in mode "read" (shared) or "write" (alone). */
    acquireRwlock(name: string, mode: RwMode, opts?: AcquireOptions): Promise<Lease>;
    /**
     * Extend the lease to ttlMs from now (default: its ttl). Updates its
     * deadline, ttlMs and fenceToken; rejects with LeaseLost (and marks it
     * lost) when it no longer holds. Never retried past its local deadline.
     */
    renew(lease: Lease, opts?: RenewOptions): Promise<Lease>;
    /** Give the lease up. Rejects with LeaseLost if it had already ended. */
    release(lease: Lease, opts?: {
        signal?: AbortSignal;
    }): Promise<void>;
    /** Where lock name stands: {lock, held, fence (the last issued), ttl_ms, owner, ...}; never a lease id. */
    inspect(name: string): Promise<LockStatus>;
    /** {semaphore, limit, held, permits, waiters} of a semaphore. */
    inspectSemaphore(name: string): Promise<SemaphoreStatus>;
    /** {rwlock, fence, fence_lock, writer, readers, read_leases, writers_waiting, waiters} of a read/write lock. */
    inspectRwlock(name: string): Promise<RwLockStatus>;
    /**
     * Break lock name (POST /v1/locks/{name}/break; the admin verb): its lease
     * ends now and its fence moves past the broken holder's. Never retried: a
     * repeat could break the next holder's fresh grant.
     */
    breakLock(name: string): Promise<BreakResult>;
    /**
     * One page of the held locks, semaphores and read/write locks whose names
     * start with prefix (GET /v1/locks; the list verb under --auth-file), at
     * most limit (1..1000), from cursor (a previous page's, same prefix). A
     * page may hold fewer than limit entries, even none, while its cursor
     * says more follow: locks() follows them.
     */
    list(opts?: {
        prefix?: string;
        limit?: number;
        cursor?: string | null;
    }): Promise<LockPage>;
    /** Every held name under prefix, as list() gives them, following the cursor page by page. */
    locks(opts?: {
        prefix?: string;
        limit?: number;
    }): AsyncGenerator<LockListEntry, void, undefined>;
    /** What this client's token may do (GET /v1/whoami). */
    whoami(): Promise<WhoAmI>;
    /**
     * Follow lock name's events (GET /v1/locks/{name}/events): an async
     * iterable of LockEvent, first a "state", then "granted", "renewed",
     * "released", "expired", "broken", "heartbeat". Ends when signal aborts
     * (or the loop breaks); throws TransportError when the stream breaks or is
     * silent for idleMs. EventsUnsupported (a NotFound) from a picketd without
     * events, Forbidden without the read verb.
     */
    watch(name: string, opts?: WatchOptions): AsyncIterable<LockEvent>;
    /**
     * Run for leader of election name (POST /v1/elections/{name}/campaign),
     * waiting up to waitMs while another leads. Resolves to a Leadership
     * (term: the fence for fenced storage, value, signal, lost) kept renewed
     * every ttlMs/3; rejects with LeaderExists (holder, retryAfterMs) while
     * another leads. Aborting opts.signal cancels the wait, or resigns once
     * leading.
     */
    campaign(name: string, opts?: CampaignOptions): Promise<Leadership>;
    /**
     * Who leads election name (GET /v1/elections/{name}): {election, leader
     * (null, or {term, value, owner, since, ttl_ms}), term (the last issued,
     * 0 if never), candidates (campaigns waiting on this picketd)}.
     */
    leader(name: string): Promise<ElectionStatus>;
    /**
     * Follow election name (GET /v1/elections/{name}/observe): an async
     * iterable of LeaderEvent, first the current state, then one per change
     * of leader (leader null: nobody leads now) or of its value (a proclaim:
     * same term); heartbeats are skipped. Ends when signal aborts (or the
     * loop breaks); throws TransportError when the stream breaks or is
     * silent for idleMs; Forbidden without the read verb.
     */
    observe(name: string, opts?: WatchOptions): AsyncIterable<LeaderEvent>;
    /**
     * Break election name (POST /v1/elections/{name}/break; the admin verb):
     * the leader's lease ends now and the term moves past it. Never retried.
     */
    breakElection(name: string): Promise<ElectionBreak>;
    /**
     * Take lock name and keep it: a HeldLock whose keeper renews it every
     * ttlMs/3 and watches its events, with .signal aborting the moment the
     * lease is lost (or its hold cap reached), .fence, .fenceHeaders() and
     * release(). Aborting opts.signal cancels a wait, or releases once held.
     */
    lock(name: string, opts?: LockOptions): Promise<HeldLock>;
    /** lock() for one permit of semaphore name of limit permits (renewed, not watched). */
    semaphore(name: string, limit: number, opts?: LockOptions): Promise<HeldLock>;
    /** lock() for a read or a write lease of read/write lock name (renewed, not watched). */
    rwlock(name: string, mode: RwMode, opts?: LockOptions): Promise<HeldLock>;
    /**
     * Take lock name, run fn(lock) and release in finally. fn should stop
     * when lock.signal aborts. If fn returned but the lease was lost on the
     * way, withLock rejects with the LockLost: the work ran partly unguarded.
     */
    withLock<T>(name: string, fn: (lock: HeldLock) => Promise<T> | T, opts?: LockOptions): Promise<T>;
}
