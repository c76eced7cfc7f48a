import { LockLost, type LossReason } from "./errors.js";
/** @internal What a Keeper needs of the lease it keeps. */
export interface Kept {
    /** performance.now() at which the lease must be assumed gone. */
    deadline(): number;
    ttlMs(): number;
    remainingMs(): number;
    /** A renewal can carry it no further (max_hold). */
    capped(): boolean;
    renew(signal: AbortSignal): Promise<unknown>;
    /** The LockLost of a loss for reason (and whatever the loss marks on the lease). */
    lost(reason: LossReason): LockLost;
}
/** @internal The keeper of a HeldLock or a Leadership. */
export declare class Keeper {
    #private;
    readonly signal: AbortSignal;
    /** Resolves with the LockLost when the lease is lost (never on end). */
    readonly lost: Promise<LockLost>;
    constructor(kept: Kept, renewEveryMs: number | undefined);
    /** Ends the keeper's requests (renewals, a watch). */
    get stopSignal(): AbortSignal;
    /** The LockLost the signal aborted with, when the lease was lost. */
    get lostReason(): LockLost | undefined;
    /** Starts the deadline timer and the renewals. */
    start(): void;
    /** Aborting signal calls end (the holder's release or resign). */
    endOn(signal: AbortSignal | undefined, end: () => Promise<unknown>): void;
    /** The lease is lost (the first loss only): stops and aborts the signal. */
    lose(reason: LossReason): void;
    /**
     * Release or resign, once (a second call has the first's promise): stops
     * the keeper, aborts the signal with ended() unless the lease was lost,
     * and gives the lease up. True when given up; false when it had been
     * lost already or picketd says so (LeaseLost: onLeaseLost runs); rejects
     * when picketd could not be told.
     */
    end(ended: () => Error, giveUp: () => Promise<unknown>, onLeaseLost?: () => void): Promise<boolean>;
}
