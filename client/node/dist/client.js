var _a;
// Client: picketd's HTTP API v1 (proto/openapi.yaml) over node:http and
// node:https, no dependencies. Requests are bounded (a timeout on every
// request, reply bodies capped) and retried like libpicket's: capped
// exponential backoff with jitter on transport errors, 502 and 503; an
// acquire is retried with the same client-chosen lease id, so a retry after
// a lost reply gets the same grant and fence; a break is never retried; a
// quota (429) is not retried.
import * as http from "node:http";
import * as https from "node:https";
import { randomBytes } from "node:crypto";
import { inspect } from "node:util";
import { InvalidArgument, replyError, LeaseLost, StoreError, TransportError, Unavailable, } from "./errors.js";
import { driftMarginMs, Lease, now } from "./lease.js";
import { electionName, lockName, rwlockName, semaphoreName } from "./names.js";
import { HeldLock } from "./held.js";
import { openStream, openWatch } from "./events.js";
import { checkValue, LeaderEvent, Leadership } from "./election.js";
/** The most bytes of a reply body read (a longer one is a TransportError). */
export const BODY_MAX = 65536;
const RETRY_DELAYS_MS = [50, 200, 800];
const LEASE_ID = /^[0-9a-f]{32}$/;
/** A grant's or campaign's lease option: the id given (checked), else a new one. */
function leaseIdOpt(v) {
    const id = v ?? randomBytes(16).toString("hex");
    if (typeof id !== "string" || !LEASE_ID.test(id))
        throw new InvalidArgument("lease must be 32 lowercase hex digits");
    return id;
}
const OWNER_MAX = 128;
const PREFIX = /^[A-Za-z0-9._:-]{0,200}$/;
const LIST_MAX = 1000;
function intOpt(v, what, min, dflt) {
    if (v === undefined)
        return dflt;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) {
        throw new InvalidArgument(`${what} must be an integer of at least ${min}, not ${typeof v === "number" ? v : typeof v}`);
    }
    return v;
}
function checkOwner(owner) {
    if (owner === undefined)
        return undefined;
    // eslint-disable-next-line no-control-regex
    if (typeof owner !== "string" || owner.length > OWNER_MAX || /[\x00-\x1f\x7f-\x9f]/.test(owner)) {
        throw new InvalidArgument(`an owner is a string of at most ${OWNER_MAX} characters without control characters`);
    }
    return owner;
}
function abortReason(signal) {
    return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}
/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(abortReason(signal));
        const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, Math.max(0, ms));
        const onAbort = () => { clearTimeout(t); reject(abortReason(signal)); };
        signal?.addEventListener("abort", onAbort, { once: true });
    });
}
function fenceOf(doc, what) {
    const f = doc["fence"];
    if (typeof f !== "number" || !Number.isSafeInteger(f) || f < 0) {
        throw new TransportError(`${what}: a fence that is not an exact integer (above 2^53 needs a big-integer reader)`);
    }
    return f;
}
export class Client {
    /** The picketd URL (http:// or https://, a path prefix kept). */
    url;
    timeoutMs;
    retries;
    owner;
    #token;
    #base;
    #prefix;
    #agent;
    #https;
    constructor(url = "http://127.0.0.1:7070", opts = {}) {
        let u;
        try {
            u = new URL(url);
        }
        catch {
            throw new InvalidArgument("bad picketd url: want http:// or https://host[:port]");
        }
        if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname || u.username || u.password) {
            throw new InvalidArgument(`bad picketd url ${u.protocol}//${u.host}: want http:// or https://host[:port]`);
        }
        this.url = u.origin + u.pathname.replace(/\/+$/, "");
        this.#base = u;
        this.#prefix = u.pathname.replace(/\/+$/, "");
        this.#https = u.protocol === "https:";
        const token = opts.token ?? (process.env["PICKET_TOKEN"] || undefined);
        if (token !== undefined && (typeof token !== "string" || !/^[\x21-\x7e]+$/.test(token))) {
            throw new InvalidArgument("a token is printable ASCII without spaces");
        }
        this.#token = token;
        this.timeoutMs = intOpt(opts.timeoutMs, "timeoutMs", 1, 10000);
        this.retries = intOpt(opts.retries, "retries", 0, RETRY_DELAYS_MS.length);
        this.owner = checkOwner(opts.owner);
        if (opts.ca !== undefined && !this.#https) {
            throw new InvalidArgument("ca given for an http:// url");
        }
        this.#agent = this.#https
            ? new https.Agent({ keepAlive: true, maxSockets: 32, maxFreeSockets: 4, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) })
            : new http.Agent({ keepAlive: true, maxSockets: 32, maxFreeSockets: 4 });
    }
    /** Close idle keep-alive connections (a later call opens new ones). */
    close() {
        this.#agent.destroy();
    }
    toString() {
        return `Client(${this.url}${this.#token !== undefined ? ", token set" : ""})`;
    }
    [inspect.custom]() {
        return this.toString();
    }
    toJSON() {
        return { url: this.url, timeoutMs: this.timeoutMs, retries: this.retries, owner: this.owner, token: this.#token !== undefined };
    }
    // -- one request ----------------------------------------------------------
    /** @internal The headers of a request: Accept and, with a token, Authorization (nowhere else). */
    headers(accept) {
        const h = { Accept: accept };
        if (this.#token !== undefined)
            h["Authorization"] = `Bearer ${this.#token}`;
        return h;
    }
    /** @internal Start a request on this client's agent (TLS settings, keep-alive). */
    start(method, path, headers) {
        const mod = this.#https ? https : http;
        return mod.request({
            protocol: this.#base.protocol, hostname: this.#base.hostname.replace(/^\[|\]$/g, ""),
            port: this.#base.port || (this.#https ? 443 : 80), method, path: this.#prefix + path, headers,
            agent: this.#agent,
        });
    }
    #once(method, path, body, timeoutMs, signal, stamp, fresh = false) {
        const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
        const headers = this.headers("application/json");
        if (data !== undefined) {
            headers["Content-Type"] = "application/json";
            headers["Content-Length"] = String(data.length);
        }
        if (fresh)
            headers["Connection"] = "close";
        return new Promise((resolve, reject) => {
            if (signal?.aborted)
                return reject(abortReason(signal));
            let settled = false;
            const req = this.start(method, path, headers);
            const finish = (err, reply) => {
                if (settled)
                    return;
                settled = true;
                clearTimeout(timer);
                signal?.removeEventListener("abort", onAbort);
                if (err !== undefined) {
                    req.destroy();
                    reject(err);
                }
                else {
                    resolve(reply);
                }
            };
            const timer = setTimeout(() => finish(new TransportError(`${method} ${path}: no reply within ${timeoutMs} ms`)), timeoutMs);
            const onAbort = () => finish(abortReason(signal));
            signal?.addEventListener("abort", onAbort, { once: true });
            req.on("error", (e) => {
                if (settled)
                    return;
                // A keep-alive connection the server had closed: once more, fresh.
                if (req.reusedSocket && !fresh && (e.code === "ECONNRESET" || e.code === "EPIPE")) {
                    settled = true;
                    clearTimeout(timer);
                    signal?.removeEventListener("abort", onAbort);
                    this.#once(method, path, body, timeoutMs, signal, stamp, true).then(resolve, reject);
                    return;
                }
                finish(new TransportError(`${method} ${path}: ${e.code ?? e.message}`, undefined, {}, { cause: e }));
            });
            req.on("response", (res) => {
                const chunks = [];
                let size = 0;
                res.on("data", (c) => {
                    size += c.length;
                    if (size > BODY_MAX) {
                        finish(new TransportError(`${method} ${path}: a reply over ${BODY_MAX} bytes`, undefined, { status: res.statusCode }));
                        return;
                    }
                    chunks.push(c);
                });
                res.on("error", (e) => finish(new TransportError(`${method} ${path}: ${e.message}`, undefined, {}, { cause: e })));
                res.on("end", () => {
                    const raw = Buffer.concat(chunks).toString("utf8");
                    let doc = undefined;
                    try {
                        doc = raw ? JSON.parse(raw) : {};
                    }
                    catch {
                        doc = undefined;
                    }
                    finish(undefined, { status: res.statusCode ?? 0, doc });
                });
            });
            stamp.sent = now();
            req.end(data);
        }).then((r) => {
            if (r.status >= 200 && r.status < 300 && typeof r.doc === "object" && r.doc !== null)
                return r;
            throw replyError(method, path, r.status, r.doc);
        });
    }
    /** A request, retried on transport errors, 502 and 503, never past deadline (performance.now()). */
    async #call(method, path, body, o = {}) {
        const stamp = o.stamp ?? { sent: 0 };
        const retries = o.retries ?? this.retries;
        for (let attempt = 0;; attempt++) {
            let timeout = this.timeoutMs + (o.extraMs ?? 0);
            if (o.deadline !== undefined) {
                timeout = Math.min(timeout, o.deadline - now());
                if (timeout <= 0)
                    throw new TransportError(`${method} ${path}: the lease's local deadline passed`);
            }
            try {
                return (await this.#once(method, path, body, timeout, o.signal, stamp)).doc;
            }
            catch (e) {
                const retriable = e instanceof TransportError || e instanceof Unavailable || e instanceof StoreError;
                if (!retriable || attempt >= retries)
                    throw e;
                const pause = RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)] * (0.5 + Math.random());
                if (o.deadline !== undefined && now() + pause >= o.deadline)
                    throw e;
                await sleep(pause, o.signal);
            }
        }
    }
    static #path(kind, name, verb) {
        const mapped = kind === "locks" ? lockName(name) : kind === "semaphores" ? semaphoreName(name) : rwlockName(name);
        return `/v1/${kind}/${encodeURIComponent(mapped)}${verb ? "/" + verb : ""}`;
    }
    static #leasePath(lease, verb) {
        if (!(lease instanceof Lease))
            throw new InvalidArgument("not a Lease of this client");
        return _a.#path(lease.kind === "lock" ? "locks" : lease.kind === "permit" ? "semaphores" : "rwlocks", lease.name, verb);
    }
    // -- the API ----------------------------------------------------------------
    /**
     * Take lock name for ttlMs, waiting up to waitMs while it is held. Resolves
     * to a Lease; rejects with LockHeld (holder, retryAfterMs) if it stays
     * held, LockDelay (a LockHeld) while an expired lease's lock-delay runs.
     */
    async acquire(name, opts = {}) {
        return await this.#grant("lock", _a.#path("locks", name, "acquire"), {}, opts);
    }
    /** Take one permit of the counting semaphore name of limit permits (SemaphoreFull, LimitMismatch). */
    async acquirePermit(name, limit, opts = {}) {
        const l = intOpt(limit, "limit", 1, 0);
        return await this.#grant("permit", _a.#path("semaphores", name, "acquire"), { limit: l }, opts);
    }
    /** Take read/write lock name in mode "read" (shared) or "write" (alone). */
    async acquireRwlock(name, mode, opts = {}) {
        if (mode !== "read" && mode !== "write")
            throw new InvalidArgument("mode must be 'read' or 'write'");
        return await this.#grant("rwlock", _a.#path("rwlocks", name, "acquire"), { mode }, opts);
    }
    /**
     * POST a grant (acquire, campaign): body.lease is its lease id, and the
     * call may wait waitMs beyond the timeout. When signal cancelled the
     * wait, the grant may have been made all the same: POST giveBack
     * (release, resign) for it, unawaited, and rethrow.
     */
    async #grantCall(path, body, waitMs, signal, stamp, giveBack) {
        try {
            return await this.#call("POST", path, body, { extraMs: waitMs, signal, stamp });
        }
        catch (e) {
            if (signal?.aborted)
                this.#call("POST", giveBack, { lease: body.lease }, { retries: 0 }).catch(() => { });
            throw e;
        }
    }
    async #grant(kind, path, extra, opts) {
        const ttlMs = intOpt(opts.ttlMs, "ttlMs", 1, 30000);
        const waitMs = intOpt(opts.waitMs, "waitMs", 0, 0);
        const lockDelayMs = intOpt(opts.lockDelayMs, "lockDelayMs", 0, 0);
        const maxHoldMs = opts.maxHoldMs === undefined ? undefined : intOpt(opts.maxHoldMs, "maxHoldMs", 0, 0);
        const owner = checkOwner(opts.owner) ?? this.owner;
        const id = leaseIdOpt(opts.lease);
        const body = { ...extra, ttl_ms: ttlMs, lease: id };
        if (waitMs)
            body.wait_ms = waitMs;
        if (lockDelayMs)
            body.lock_delay_ms = lockDelayMs;
        if (maxHoldMs !== undefined)
            body.max_hold_ms = maxHoldMs;
        if (owner !== undefined)
            body.owner = owner;
        const stamp = { sent: 0 };
        const doc = await this.#grantCall(path, body, waitMs, opts.signal, stamp, path.replace(/\/acquire$/, "/release"));
        const what = `POST ${path}`;
        const ttl = doc["ttl_ms"];
        if (typeof ttl !== "number" || !(ttl > 0))
            throw new TransportError(`${what}: a grant without ttl_ms`);
        const common = {
            id, fence: fenceOf(doc, what), ttlMs: ttl,
            owner: (doc["owner"] ?? null),
            fenceToken: typeof doc["fence_token"] === "string" ? doc["fence_token"] : undefined,
            deadline: stamp.sent + ttl - driftMarginMs(ttl), deadlineSent: stamp.sent,
        };
        let lease;
        if (kind === "permit") {
            const g = doc;
            lease = new Lease({ ...common, kind, name: g.semaphore, fenceLock: g.fence_lock, permit: g.permit, limit: g.limit });
        }
        else if (kind === "rwlock") {
            const g = doc;
            lease = new Lease({ ...common, kind, name: g.rwlock, fenceLock: g.fence_lock, mode: g.mode });
        }
        else {
            const g = doc;
            lease = new Lease({ ...common, kind, name: g.lock, fenceLock: g.lock });
        }
        lease.capped = ttl < ttlMs;
        // A waited grant was made at some moment between send and reply: when
        // that gap is over a tenth of the TTL, renew now so the deadline counts
        // from a request sent after the grant.
        if (waitMs && now() - stamp.sent > ttl / 10 && !lease.capped) {
            try {
                await this.renew(lease);
            }
            catch (e) {
                if (!lease.valid()) {
                    await this.release(lease).catch(() => { });
                    throw e;
                }
            }
        }
        return lease;
    }
    /**
     * Extend the lease to ttlMs from now (default: its ttl). Updates its
     * deadline, ttlMs and fenceToken; rejects with LeaseLost (and marks it
     * lost) when it no longer holds. Never retried past its local deadline.
     */
    async renew(lease, opts = {}) {
        const path = _a.#leasePath(lease, "renew");
        const ttlMs = intOpt(opts.ttlMs, "ttlMs", 1, lease.ttlMs);
        if (now() >= lease.deadline) {
            lease.markLost();
            throw new LeaseLost(`${lease.describe()} is past its local deadline`);
        }
        const stamp = { sent: 0 };
        let doc;
        try {
            doc = await this.#call("POST", path, { lease: lease.id, ttl_ms: ttlMs }, { deadline: lease.deadline, signal: opts.signal, stamp });
        }
        catch (e) {
            if (e instanceof LeaseLost)
                lease.markLost();
            throw e;
        }
        const r = doc;
        if (typeof r.ttl_ms !== "number" || !(r.ttl_ms > 0))
            throw new TransportError(`POST ${path}: a renewal without ttl_ms`);
        if (r.ttl_ms < ttlMs)
            lease.capped = true;
        lease.ttlMs = r.ttl_ms;
        lease.renewed(stamp.sent, stamp.sent + r.ttl_ms - driftMarginMs(r.ttl_ms));
        if (typeof r.fence_token === "string")
            lease.fenceToken = r.fence_token;
        return lease;
    }
    /** Give the lease up. Rejects with LeaseLost if it had already ended. */
    async release(lease, opts = {}) {
        await this.#call("POST", _a.#leasePath(lease, "release"), { lease: lease.id }, { signal: opts.signal });
        lease.ended();
    }
    /** Where lock name stands: {lock, held, fence (the last issued), ttl_ms, owner, ...}; never a lease id. */
    async inspect(name) {
        return await this.#call("GET", _a.#path("locks", name));
    }
    /** {semaphore, limit, held, permits, waiters} of a semaphore. */
    async inspectSemaphore(name) {
        return await this.#call("GET", _a.#path("semaphores", name));
    }
    /** {rwlock, fence, fence_lock, writer, readers, read_leases, writers_waiting, waiters} of a read/write lock. */
    async inspectRwlock(name) {
        return await this.#call("GET", _a.#path("rwlocks", name));
    }
    /**
     * Break lock name (POST /v1/locks/{name}/break; the admin verb): its lease
     * ends now and its fence moves past the broken holder's. Never retried: a
     * repeat could break the next holder's fresh grant.
     */
    async breakLock(name) {
        return await this.#call("POST", _a.#path("locks", name, "break"), {}, { retries: 0 });
    }
    /**
     * One page of the held locks, semaphores and read/write locks whose names
     * start with prefix (GET /v1/locks; the list verb under --auth-file), at
     * most limit (1..1000), from cursor (a previous page's, same prefix). A
     * page may hold fewer than limit entries, even none, while its cursor
     * says more follow: locks() follows them.
     */
    async list(opts = {}) {
        const prefix = opts.prefix ?? "";
        if (typeof prefix !== "string" || !PREFIX.test(prefix)) {
            throw new InvalidArgument("a prefix is up to 200 characters of [A-Za-z0-9._:-]");
        }
        const limit = intOpt(opts.limit, "limit", 1, 100);
        if (limit > LIST_MAX)
            throw new InvalidArgument(`limit must be at most ${LIST_MAX}`);
        const q = new URLSearchParams({ limit: String(limit) });
        if (prefix)
            q.set("prefix", prefix);
        if (opts.cursor !== undefined && opts.cursor !== null) {
            if (typeof opts.cursor !== "string" || !opts.cursor)
                throw new InvalidArgument("cursor must be one a page returned");
            q.set("cursor", opts.cursor);
        }
        const doc = await this.#call("GET", `/v1/locks?${q}`);
        if (!Array.isArray(doc.locks) || doc.locks.length > limit)
            throw new TransportError("GET /v1/locks: not a page of locks");
        return { locks: doc.locks, cursor: typeof doc.cursor === "string" ? doc.cursor : null };
    }
    /** Every held name under prefix, as list() gives them, following the cursor page by page. */
    async *locks(opts = {}) {
        let cursor = null;
        do {
            const page = await this.list({ ...opts, cursor });
            yield* page.locks;
            cursor = page.cursor;
        } while (cursor !== null);
    }
    /** What this client's token may do (GET /v1/whoami). */
    async whoami() {
        return await this.#call("GET", "/v1/whoami");
    }
    /**
     * Follow lock name's events (GET /v1/locks/{name}/events): an async
     * iterable of LockEvent, first a "state", then "granted", "renewed",
     * "released", "expired", "broken", "heartbeat". Ends when signal aborts
     * (or the loop breaks); throws TransportError when the stream breaks or is
     * silent for idleMs. EventsUnsupported (a NotFound) from a picketd without
     * events, Forbidden without the read verb.
     */
    watch(name, opts = {}) {
        // A bad name throws here, at once.
        const path = _a.#path("locks", name, "events");
        return { [Symbol.asyncIterator]: () => openWatch(this, path, opts) };
    }
    // -- elections ---------------------------------------------------------------
    static #electionPath(name, verb) {
        return `/v1/elections/${encodeURIComponent(electionName(name))}${verb ? "/" + verb : ""}`;
    }
    /**
     * Run for leader of election name (POST /v1/elections/{name}/campaign),
     * waiting up to waitMs while another leads. Resolves to a Leadership
     * (term: the fence for fenced storage, value, signal, lost) kept renewed
     * every ttlMs/3; rejects with LeaderExists (holder, retryAfterMs) while
     * another leads. Aborting opts.signal cancels the wait, or resigns once
     * leading.
     */
    async campaign(name, opts = {}) {
        const path = _a.#electionPath(name, "campaign");
        const ttlMs = intOpt(opts.ttlMs, "ttlMs", 1, 30000);
        const waitMs = intOpt(opts.waitMs, "waitMs", 0, 0);
        const owner = checkOwner(opts.owner) ?? this.owner;
        const value = checkValue(opts.value);
        const id = leaseIdOpt(opts.lease);
        if (opts.renewEveryMs !== undefined && !(Number.isFinite(opts.renewEveryMs) && opts.renewEveryMs > 0)) {
            throw new InvalidArgument("renewEveryMs must be a positive number");
        }
        const body = { ttl_ms: ttlMs, lease: id };
        if (waitMs)
            body.wait_ms = waitMs;
        if (owner !== undefined)
            body.owner = owner;
        if (value !== null)
            body.value = value;
        const stamp = { sent: 0 };
        const doc = await this.#grantCall(path, body, waitMs, opts.signal, stamp, _a.#electionPath(name, "resign"));
        const g = doc;
        const what = `POST ${path}`;
        if (typeof g.ttl_ms !== "number" || !(g.ttl_ms > 0))
            throw new TransportError(`${what}: a leadership without ttl_ms`);
        if (typeof g.term !== "number" || !Number.isSafeInteger(g.term) || g.term < 1) {
            throw new TransportError(`${what}: a term that is not an exact integer`);
        }
        const lead = new Leadership(this.#leaderCalls, {
            election: g.election, id, term: g.term, ttlMs: g.ttl_ms, owner: g.owner ?? null, value: g.value ?? null,
            token: typeof (g.token ?? g.fence_token) === "string" ? (g.token ?? g.fence_token) : undefined, deadline: stamp.sent + g.ttl_ms - driftMarginMs(g.ttl_ms),
            deadlineSent: stamp.sent,
        }, { renewEveryMs: opts.renewEveryMs, signal: opts.signal });
        // A waited grant was made at some moment between send and reply: when
        // that gap is over a tenth of the TTL, renew now so the deadline counts
        // from a request sent after the grant.
        if (waitMs && now() - stamp.sent > g.ttl_ms / 10) {
            try {
                await lead.renew();
            }
            catch (e) {
                if (!lead.valid()) {
                    await lead.resign().catch(() => { });
                    throw e;
                }
            }
        }
        return lead;
    }
    #leaderCalls = {
        post: (election, verb, body, o) => this.#call("POST", _a.#electionPath(election, verb), body, o),
    };
    /**
     * Who leads election name (GET /v1/elections/{name}): {election, leader
     * (null, or {term, value, owner, since, ttl_ms}), term (the last issued,
     * 0 if never), candidates (campaigns waiting on this picketd)}.
     */
    async leader(name) {
        return await this.#call("GET", _a.#electionPath(name));
    }
    /**
     * Follow election name (GET /v1/elections/{name}/observe): an async
     * iterable of LeaderEvent, first the current state, then one per change
     * of leader (leader null: nobody leads now) or of its value (a proclaim:
     * same term); heartbeats are skipped. Ends when signal aborts (or the
     * loop breaks); throws TransportError when the stream breaks or is
     * silent for idleMs; Forbidden without the read verb.
     */
    observe(name, opts = {}) {
        const path = _a.#electionPath(name, "observe");
        const client = this;
        return {
            async *[Symbol.asyncIterator]() {
                const events = openStream(client, path, opts, (kind, doc) => new LeaderEvent(kind, doc), false);
                for await (const ev of events) {
                    if (ev.type === "leader")
                        yield ev;
                }
            },
        };
    }
    /**
     * Break election name (POST /v1/elections/{name}/break; the admin verb):
     * the leader's lease ends now and the term moves past it. Never retried.
     */
    async breakElection(name) {
        return await this.#call("POST", _a.#electionPath(name, "break"), {}, { retries: 0 });
    }
    /**
     * Take lock name and keep it: a HeldLock whose keeper renews it every
     * ttlMs/3 and watches its events, with .signal aborting the moment the
     * lease is lost (or its hold cap reached), .fence, .fenceHeaders() and
     * release(). Aborting opts.signal cancels a wait, or releases once held.
     */
    async lock(name, opts = {}) {
        const lease = await this.acquire(name, opts);
        return new HeldLock(this, lease, opts, opts.watch ?? true);
    }
    /** lock() for one permit of semaphore name of limit permits (renewed, not watched). */
    async semaphore(name, limit, opts = {}) {
        const lease = await this.acquirePermit(name, limit, opts);
        return new HeldLock(this, lease, opts, false);
    }
    /** lock() for a read or a write lease of read/write lock name (renewed, not watched). */
    async rwlock(name, mode, opts = {}) {
        const lease = await this.acquireRwlock(name, mode, opts);
        return new HeldLock(this, lease, opts, false);
    }
    /**
     * Take lock name, run fn(lock) and release in finally. fn should stop
     * when lock.signal aborts. If fn returned but the lease was lost on the
     * way, withLock rejects with the LockLost: the work ran partly unguarded.
     */
    async withLock(name, fn, opts = {}) {
        const l = await this.lock(name, opts);
        let result;
        try {
            result = await fn(l);
        }
        catch (e) {
            await l.release().catch(() => { });
            throw e;
        }
        const lostBefore = l.lostReason;
        await l.release();
        if (lostBefore !== undefined)
            throw lostBefore;
        return result;
    }
}
_a = Client;
