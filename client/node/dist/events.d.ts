import type { Client } from "./client.js";
import type { LockEventWire } from "./wire.js";
/** Bytes of one line (its end not counted), and of one event's data. */
export declare const LINE_MAX = 8192;
export interface WatchOptions {
    /** Aborting it ends the iteration (no error). */
    signal?: AbortSignal | undefined;
    /** A stream silent this long (ms) is a TransportError; picketd sends a heartbeat every 15 s of quiet. Default 60000. */
    idleMs?: number;
}
export type LockEventType = "state" | "granted" | "renewed" | "released" | "expired" | "broken" | "heartbeat" | string;
/** One event of a stream (a lock's, an election's): its type, and data, the whole JSON object, for fields newer than this client. */
export declare class StreamEvent<W extends {
    time: number;
}, T extends string = string> {
    readonly type: T;
    readonly data: W;
    constructor(type: T, data: W);
    /** ms since the Unix epoch. */
    get time(): number;
}
/** One event of a lock's stream; data is the whole JSON object, for fields newer than this client. */
export declare class LockEvent extends StreamEvent<LockEventWire, LockEventType> {
    get name(): string | undefined;
    get held(): boolean | undefined;
    get fence(): number | undefined;
    get nextFence(): number | undefined;
    get owner(): string | null | undefined;
    get ttlMs(): number | undefined;
    get by(): string | undefined;
    /**
     * True when this event says the lease granted with fence is gone: an
     * expired, broken or released event with that fence, a granted or state
     * event with another fence, or nothing held (for events after that grant).
     */
    ends(fence: number): boolean;
}
/** The iterator of Client.watch(): opens the stream on the first next(). */
export declare function openWatch(client: Client, path: string, opts: WatchOptions): AsyncGenerator<LockEvent, void, undefined>;
/**
 * @internal An event stream (GET path) as an async generator of make(type,
 * data); lockEvents: a 404 is EventsUnsupported (a picketd without lock events).
 */
export declare function openStream<T>(client: Client, path: string, opts: WatchOptions, make: (kind: string, doc: object) => T, lockEvents: boolean): AsyncGenerator<T, void, undefined>;
