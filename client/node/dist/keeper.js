// Keeper: what a HeldLock and a Leadership share. It renews the lease
// every ttl/3, retries a failed renewal until the local deadline, and aborts
// .signal (with a LockLost reason) the moment the server says lease_lost or
// the deadline passes without a successful renewal (the timer needs no
// reply); a capped lease (maxHoldMs) is not renewed and ends at its
// deadline. Aborting the caller's signal ends the holding (release, resign),
// and end() does that once. The holder says what a renewal and a giving up
// are, and how a loss reads; a HeldLock adds its event watch on top.
import { InvalidArgument, LeaseLost } from "./errors.js";
import { now } from "./lease.js";
/** @internal The keeper of a HeldLock or a Leadership. */
export class Keeper {
    signal;
    /** Resolves with the LockLost when the lease is lost (never on end). */
    lost;
    #kept;
    #out = new AbortController(); // .signal
    #stop = new AbortController(); // ends the keeper's renewals (and a HeldLock's watch)
    #renewEveryMs;
    #resolveLost;
    #renewTimer;
    #deadlineTimer;
    #lost;
    #ended;
    #userSignal;
    #onUserAbort;
    constructor(kept, renewEveryMs) {
        this.#kept = kept;
        this.signal = this.#out.signal;
        this.lost = new Promise((resolve) => { this.#resolveLost = resolve; });
        if (renewEveryMs !== undefined && !(Number.isFinite(renewEveryMs) && renewEveryMs > 0)) {
            throw new InvalidArgument("renewEveryMs must be a positive number");
        }
        this.#renewEveryMs = renewEveryMs;
    }
    /** Ends the keeper's requests (renewals, a watch). */
    get stopSignal() { return this.#stop.signal; }
    /** The LockLost the signal aborted with, when the lease was lost. */
    get lostReason() { return this.#lost; }
    /** Starts the deadline timer and the renewals. */
    start() {
        this.#armDeadline();
        this.#scheduleRenew();
    }
    /** Aborting signal calls end (the holder's release or resign). */
    endOn(signal, end) {
        if (signal === undefined)
            return;
        this.#userSignal = signal;
        this.#onUserAbort = () => { end().catch(() => { }); };
        if (signal.aborted)
            this.#onUserAbort();
        else
            signal.addEventListener("abort", this.#onUserAbort, { once: true });
    }
    #every() {
        return this.#renewEveryMs ?? this.#kept.ttlMs() / 3;
    }
    #expired() {
        return this.#kept.capped() ? "max_hold" : "expired";
    }
    #armDeadline() {
        clearTimeout(this.#deadlineTimer);
        if (this.#stop.signal.aborted)
            return;
        this.#deadlineTimer = setTimeout(() => {
            if (now() >= this.#kept.deadline())
                this.lose(this.#expired());
            else
                this.#armDeadline();
        }, Math.max(0, Math.ceil(this.#kept.deadline() - now())));
    }
    #scheduleRenew(delayMs = this.#every()) {
        clearTimeout(this.#renewTimer);
        if (this.#stop.signal.aborted || this.#kept.capped())
            return; // capped: it ends at its deadline
        this.#renewTimer = setTimeout(() => void this.#renew(), Math.max(0, delayMs));
    }
    async #renew() {
        if (this.#stop.signal.aborted)
            return;
        try {
            await this.#kept.renew(this.#stop.signal);
            if (this.#stop.signal.aborted)
                return;
            this.#armDeadline();
            this.#scheduleRenew();
        }
        catch (e) {
            if (this.#stop.signal.aborted)
                return;
            if (e instanceof LeaseLost) {
                this.lose(now() >= this.#kept.deadline() ? this.#expired() : "lease_lost");
                return;
            }
            // transport, 503 (already retried), a quota: again soon, until the
            // deadline timer says the lease is gone.
            this.#scheduleRenew(Math.min(250, Math.max(10, this.#kept.remainingMs() / 4)));
        }
    }
    #halt() {
        this.#stop.abort();
        clearTimeout(this.#renewTimer);
        clearTimeout(this.#deadlineTimer);
        if (this.#userSignal !== undefined && this.#onUserAbort !== undefined) {
            this.#userSignal.removeEventListener("abort", this.#onUserAbort);
        }
    }
    /** The lease is lost (the first loss only): stops and aborts the signal. */
    lose(reason) {
        if (this.signal.aborted)
            return;
        this.#lost = this.#kept.lost(reason);
        this.#halt();
        this.#out.abort(this.#lost);
        this.#resolveLost(this.#lost);
    }
    /**
     * Release or resign, once (a second call has the first's promise): stops
     * the keeper, aborts the signal with ended() unless the lease was lost,
     * and gives the lease up. True when given up; false when it had been
     * lost already or picketd says so (LeaseLost: onLeaseLost runs); rejects
     * when picketd could not be told.
     */
    end(ended, giveUp, onLeaseLost) {
        if (this.#ended === undefined) {
            const lost = this.signal.aborted;
            this.#halt();
            if (!lost)
                this.#out.abort(ended());
            const done = giveUp();
            this.#ended = lost
                ? done.then(() => false, () => false)
                : done.then(() => true, (e) => {
                    if (e instanceof LeaseLost) {
                        onLeaseLost?.();
                        return false;
                    }
                    throw e;
                });
        }
        return this.#ended;
    }
}
