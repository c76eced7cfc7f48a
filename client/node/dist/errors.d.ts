/** The fields of an API error body this client reads. */
export interface ErrorFields {
    status?: number | undefined;
    retryAfterMs?: number | undefined;
    holder?: string | null | undefined;
    limit?: number | undefined;
}
/**
 * An error answered by picketd, or found locally (status undefined).
 * code: the API's error code ("lock_held"); status: the HTTP status;
 * retryAfterMs: what the server said to wait (lock_held, lock_delay,
 * semaphore_full, rate_limited); holder: the lease's owner that holds the
 * lock (lock_held); limit: the live permits' limit (limit_mismatch).
 * Messages never carry a token or a lease id.
 */
export declare class PicketError extends Error {
    readonly code: string;
    readonly status: number | undefined;
    readonly retryAfterMs: number | undefined;
    readonly holder: string | null | undefined;
    readonly limit: number | undefined;
    constructor(message: string, code?: string, fields?: ErrorFields, options?: {
        cause?: unknown;
    });
}
/**
 * No usable reply from picketd: connect refused, DNS, TLS (a wrong CA),
 * a timeout, a dropped connection, or a reply that is not the API's JSON.
 * Infrastructure, not contention: a LockHeld is never a TransportError.
 */
export declare class TransportError extends PicketError {
    static readonly CODE: string;
}
/** A quota of the caller (429, or too_many_waiters/too_many_watchers): not retried. */
export declare class QuotaExceeded extends PicketError {
}
/** picketd or its store cannot serve now (503): retried a few times. */
export declare class Unavailable extends PicketError {
}
/** 400: a bad name, body, lease id or value (also raised locally, before any request). */
export declare class InvalidArgument extends PicketError {
    static readonly CODE: string;
}
/** 404: no such path (or a picketd without the feature asked for). */
export declare class NotFound extends PicketError {
    static readonly CODE: string;
}
/** 404 on GET /v1/locks/{name}/events: a picketd without lock events. */
export declare class EventsUnsupported extends NotFound {
}
/** 405: the path does not take this method. */
export declare class MethodNotAllowed extends PicketError {
    static readonly CODE: string;
}
/** 409: another lease holds the lock (holder, retryAfterMs). */
export declare class LockHeld extends PicketError {
    static readonly CODE: string;
}
/** 409: an expired lease's lock-delay runs (retryAfterMs); a LockHeld. */
export declare class LockDelay extends LockHeld {
    static readonly CODE: string;
}
/** 409: every permit of the semaphore is held (retryAfterMs); a LockHeld. */
export declare class SemaphoreFull extends LockHeld {
    static readonly CODE: string;
}
/** 409: the read/write lock has --max-readers read leases (retryAfterMs: until one ends). */
export declare class TooManyReaders extends LockHeld {
    static readonly CODE: string;
}
/** 409: the semaphore's live permits use another limit (limit). */
export declare class LimitMismatch extends PicketError {
    static readonly CODE: string;
}
/** 409: this lease no longer holds the lock (or permit). */
export declare class LeaseLost extends PicketError {
    static readonly CODE: string;
}
/** 409: another candidate leads the election (holder: its owner, retryAfterMs). */
export declare class LeaderExists extends PicketError {
    static readonly CODE: string;
}
/** 401: no token, or an unknown one. */
export declare class Unauthorized extends PicketError {
    static readonly CODE: string;
}
/** 403: the token may not do this to this name. */
export declare class Forbidden extends PicketError {
    static readonly CODE: string;
}
/** 413: the request body is over 8 KiB. */
export declare class BodyTooLarge extends PicketError {
    static readonly CODE: string;
}
/** 411: a body sent without Content-Length. */
export declare class LengthRequired extends PicketError {
    static readonly CODE: string;
}
/** 429: the token holds its max_leases. */
export declare class TooManyLeases extends QuotaExceeded {
    static readonly CODE: string;
}
/** 429: too many acquires a second (retryAfterMs). */
export declare class RateLimited extends QuotaExceeded {
    static readonly CODE: string;
}
/** 429/503: too many waiting acquires. */
export declare class TooManyWaiters extends QuotaExceeded {
    static readonly CODE: string;
}
/** 429/503: too many event streams open. */
export declare class TooManyWatchers extends QuotaExceeded {
    static readonly CODE: string;
}
/** 429: the token holds its --max-connections-per-token connections; this one is closed. */
export declare class TooManyConnections extends QuotaExceeded {
    static readonly CODE: string;
}
/** 415: a body not sent as application/json. */
export declare class UnsupportedMediaType extends PicketError {
    static readonly CODE: string;
}
/** 403: a call from a web page on another origin. */
export declare class ForbiddenOrigin extends PicketError {
    static readonly CODE: string;
}
/** 421: a Host header picketd does not answer as (--allowed-hosts). */
export declare class MisdirectedRequest extends PicketError {
    static readonly CODE: string;
}
/** 500: picketd ran out of memory. */
export declare class InternalError extends PicketError {
    static readonly CODE: string;
}
/** 502: Redis answered with an error (retried). */
export declare class StoreError extends PicketError {
    static readonly CODE: string;
}
/** 503: Redis unreachable or timed out. */
export declare class StoreUnavailable extends Unavailable {
    static readonly CODE: string;
}
/** 503: Redis's policy makes fences unsafe. */
export declare class StoreMisconfigured extends Unavailable {
    static readonly CODE: string;
}
/** 503: Redis at maxmemory refuses new grants. */
export declare class StoreFull extends Unavailable {
    static readonly CODE: string;
}
/** 503: the grant did not reach the replicas asked for. */
export declare class NotReplicated extends Unavailable {
    static readonly CODE: string;
}
/** 503: another writer changed this lock's fence state. */
export declare class StoreTampered extends Unavailable {
    static readonly CODE: string;
}
/** 503: picketd is stopping. */
export declare class ShuttingDown extends Unavailable {
    static readonly CODE: string;
}
/** Every API error code and its class (check/contract.ts checks it against proto/openapi.yaml). */
export declare const ERROR_CLASSES: {
    readonly invalid_argument: typeof InvalidArgument;
    readonly not_found: typeof NotFound;
    readonly method_not_allowed: typeof MethodNotAllowed;
    readonly lock_held: typeof LockHeld;
    readonly lock_delay: typeof LockDelay;
    readonly semaphore_full: typeof SemaphoreFull;
    readonly too_many_readers: typeof TooManyReaders;
    readonly unsupported_media_type: typeof UnsupportedMediaType;
    readonly forbidden_origin: typeof ForbiddenOrigin;
    readonly misdirected_request: typeof MisdirectedRequest;
    readonly limit_mismatch: typeof LimitMismatch;
    readonly lease_lost: typeof LeaseLost;
    readonly leader_exists: typeof LeaderExists;
    readonly unauthenticated: typeof Unauthorized;
    readonly permission_denied: typeof Forbidden;
    readonly body_too_large: typeof BodyTooLarge;
    readonly length_required: typeof LengthRequired;
    readonly too_many_leases: typeof TooManyLeases;
    readonly rate_limited: typeof RateLimited;
    readonly internal_error: typeof InternalError;
    readonly store_error: typeof StoreError;
    readonly store_unavailable: typeof StoreUnavailable;
    readonly store_misconfigured: typeof StoreMisconfigured;
    readonly store_full: typeof StoreFull;
    readonly not_replicated: typeof NotReplicated;
    readonly store_tampered: typeof StoreTampered;
    readonly too_many_waiters: typeof TooManyWaiters;
    readonly too_many_watchers: typeof TooManyWatchers;
    readonly too_many_connections: typeof TooManyConnections;
    readonly shutting_down: typeof ShuttingDown;
};
export type ErrorCode = keyof typeof ERROR_CLASSES;
/** The error for an API error body's code (a plain PicketError for a code this client does not know). */
export declare function errorFor(code: string, message: string, fields: ErrorFields): PicketError;
/** The error of a reply that is not a success: its API error body's, else a TransportError. */
export declare function replyError(method: string, path: string, status: number, doc: unknown): PicketError;
/** Why a held lock's signal aborted (LockLost.reason). */
export type LossReason = "expired" | "lease_lost" | "broken" | "taken" | "max_hold";
/** The reason of a held lock's signal when the lease was lost: a LeaseLost with .reason. */
export declare class LockLost extends LeaseLost {
    readonly reason: LossReason;
    constructor(message: string, reason: LossReason);
}
/** The reason of a leadership's signal when it resigned (resign(), or the caller's signal). */
export declare class Resigned extends PicketError {
    static readonly CODE: string;
}
/** The reason of a held lock's signal when it was released (release(), withLock's end, or the caller's signal). */
export declare class LockReleased extends PicketError {
    static readonly CODE: string;
}
