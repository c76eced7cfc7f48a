// Errors of the picket client: PicketError, one subclass per error code of
// picketd's API (the ErrorCode enum of proto/openapi.yaml; check/contract.ts
// fails to type-check when the two differ), TransportError for
// infrastructure failures, and the reasons a held lock's signal aborts with.
/**
 * An error answered by picketd, or found locally (status undefined).
 * code: the API's error code ("lock_held"); status: the HTTP status;
 * retryAfterMs: what the server said to wait (lock_held, lock_delay,
 * semaphore_full, rate_limited); holder: the lease's owner that holds the
 * lock (lock_held); limit: the live permits' limit (limit_mismatch).
 * Messages never carry a token or a lease id.
 */
export class PicketError extends Error {
    code;
    status;
    retryAfterMs;
    holder;
    limit;
    constructor(message, code, fields = {}, options) {
        super(message, options);
        this.code = code ?? new.target.CODE ?? "error";
        this.status = fields.status;
        this.retryAfterMs = fields.retryAfterMs;
        this.holder = fields.holder;
        this.limit = fields.limit;
        this.name = new.target.name;
    }
}
/**
 * No usable reply from picketd: connect refused, DNS, TLS (a wrong CA),
 * a timeout, a dropped connection, or a reply that is not the API's JSON.
 * Infrastructure, not contention: a LockHeld is never a TransportError.
 */
export class TransportError extends PicketError {
    static CODE = "transport";
}
/** A quota of the caller (429, or too_many_waiters/too_many_watchers): not retried. */
export class QuotaExceeded extends PicketError {
}
/** picketd or its store cannot serve now (503): retried a few times. */
export class Unavailable extends PicketError {
}
/** 400: a bad name, body, lease id or value (also raised locally, before any request). */
export class InvalidArgument extends PicketError {
    static CODE = "invalid_argument";
}
/** 404: no such path (or a picketd without the feature asked for). */
export class NotFound extends PicketError {
    static CODE = "not_found";
}
/** 404 on GET /v1/locks/{name}/events: a picketd without lock events. */
export class EventsUnsupported extends NotFound {
}
/** 405: the path does not take this method. */
export class MethodNotAllowed extends PicketError {
    static CODE = "method_not_allowed";
}
/** 409: another lease holds the lock (holder, retryAfterMs). */
export class LockHeld extends PicketError {
    static CODE = "lock_held";
}
/** 409: an expired lease's lock-delay runs (retryAfterMs); a LockHeld. */
export class LockDelay extends LockHeld {
    static CODE = "lock_delay";
}
/** 409: every permit of the semaphore is held (retryAfterMs); a LockHeld. */
export class SemaphoreFull extends LockHeld {
    static CODE = "semaphore_full";
}
/** 409: the read/write lock has --max-readers read leases (retryAfterMs: until one ends). */
export class TooManyReaders extends LockHeld {
    static CODE = "too_many_readers";
}
/** 409: the semaphore's live permits use another limit (limit). */
export class LimitMismatch extends PicketError {
    static CODE = "limit_mismatch";
}
/** 409: this lease no longer holds the lock (or permit). */
export class LeaseLost extends PicketError {
    static CODE = "lease_lost";
}
/** 409: another candidate leads the election (holder: its owner, retryAfterMs). */
export class LeaderExists extends PicketError {
    static CODE = "leader_exists";
}
/** 401: no token, or an unknown one. */
export class Unauthorized extends PicketError {
    static CODE = "unauthenticated";
}
/** 403: the token may not do this to this name. */
export class Forbidden extends PicketError {
    static CODE = "permission_denied";
}
/** 413: the request body is over 8 KiB. */
export class BodyTooLarge extends PicketError {
    static CODE = "body_too_large";
}
/** 411: a body sent without Content-Length. */
export class LengthRequired extends PicketError {
    static CODE = "length_required";
}
/** 429: the token holds its max_leases. */
export class TooManyLeases extends QuotaExceeded {
    static CODE = "too_many_leases";
}
/** 429: too many acquires a second (retryAfterMs). */
export class RateLimited extends QuotaExceeded {
    static CODE = "rate_limited";
}
/** 429/503: too many waiting acquires. */
export class TooManyWaiters extends QuotaExceeded {
    static CODE = "too_many_waiters";
}
/** 429/503: too many event streams open. */
export class TooManyWatchers extends QuotaExceeded {
    static CODE = "too_many_watchers";
}
/** 429: the token holds its --max-connections-per-token connections; this one is closed. */
export class TooManyConnections extends QuotaExceeded {
    static CODE = "too_many_connections";
}
/** 415: a body not sent as application/json. */
export class UnsupportedMediaType extends PicketError {
    static CODE = "unsupported_media_type";
}
/** 403: a call from a web page on another origin. */
export class ForbiddenOrigin extends PicketError {
    static CODE = "forbidden_origin";
}
/** 421: a Host header picketd does not answer as (--allowed-hosts). */
export class MisdirectedRequest extends PicketError {
    static CODE = "misdirected_request";
}
/** 500: picketd ran out of memory. */
export class InternalError extends PicketError {
    static CODE = "internal_error";
}
/** 502: Redis answered with an error (retried). */
export class StoreError extends PicketError {
    static CODE = "store_error";
}
/** 503: Redis unreachable or timed out. */
export class StoreUnavailable extends Unavailable {
    static CODE = "store_unavailable";
}
/** 503: Redis's policy makes fences unsafe. */
export class StoreMisconfigured extends Unavailable {
    static CODE = "store_misconfigured";
}
/** 503: Redis at maxmemory refuses new grants. */
export class StoreFull extends Unavailable {
    static CODE = "store_full";
}
/** 503: the grant did not reach the replicas asked for. */
export class NotReplicated extends Unavailable {
    static CODE = "not_replicated";
}
/** 503: another writer changed this lock's fence state. */
export class StoreTampered extends Unavailable {
    static CODE = "store_tampered";
}
/** 503: picketd is stopping. */
export class ShuttingDown extends Unavailable {
    static CODE = "shutting_down";
}
/** Every API error code and its class (check/contract.ts checks it against proto/openapi.yaml). */
export const ERROR_CLASSES = {
    invalid_argument: InvalidArgument,
    not_found: NotFound,
    method_not_allowed: MethodNotAllowed,
    lock_held: LockHeld,
    lock_delay: LockDelay,
    semaphore_full: SemaphoreFull,
    too_many_readers: TooManyReaders,
    unsupported_media_type: UnsupportedMediaType,
    forbidden_origin: ForbiddenOrigin,
    misdirected_request: MisdirectedRequest,
    limit_mismatch: LimitMismatch,
    lease_lost: LeaseLost,
    leader_exists: LeaderExists,
    unauthenticated: Unauthorized,
    permission_denied: Forbidden,
    body_too_large: BodyTooLarge,
    length_required: LengthRequired,
    too_many_leases: TooManyLeases,
    rate_limited: RateLimited,
    internal_error: InternalError,
    store_error: StoreError,
    store_unavailable: StoreUnavailable,
    store_misconfigured: StoreMisconfigured,
    store_full: StoreFull,
    not_replicated: NotReplicated,
    store_tampered: StoreTampered,
    too_many_waiters: TooManyWaiters,
    too_many_watchers: TooManyWatchers,
    too_many_connections: TooManyConnections,
    shutting_down: ShuttingDown,
};
/** The error for an API error body's code (a plain PicketError for a code this client does not know). */
export function errorFor(code, message, fields) {
    const cls = Object.hasOwn(ERROR_CLASSES, code)
        ? ERROR_CLASSES[code] : PicketError;
    return new cls(message, code, fields);
}
/** The error of a reply that is not a success: its API error body's, else a TransportError. */
export function replyError(method, path, status, doc) {
    const err = doc?.error;
    if (typeof err !== "object" || err === null || typeof err.code !== "string") {
        return new TransportError(`${method} ${path}: HTTP ${status} without an API error body`, undefined, { status });
    }
    return errorFor(err.code, typeof err.message === "string" ? err.message : "", {
        status,
        retryAfterMs: typeof err.retry_after_ms === "number" ? err.retry_after_ms : undefined,
        holder: err.owner,
        limit: typeof err.limit === "number" ? err.limit : undefined,
    });
}
/** The reason of a held lock's signal when the lease was lost: a LeaseLost with .reason. */
export class LockLost extends LeaseLost {
    reason;
    constructor(message, reason) {
        super(message, "lease_lost");
        this.reason = reason;
    }
}
/** The reason of a leadership's signal when it resigned (resign(), or the caller's signal). */
export class Resigned extends PicketError {
    static CODE = "resigned";
}
/** The reason of a held lock's signal when it was released (release(), withLock's end, or the caller's signal). */
export class LockReleased extends PicketError {
    static CODE = "released";
}
