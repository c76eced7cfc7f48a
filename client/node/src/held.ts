// HeldLock: a lease kept by a keeper. The keeper renews every ttl/3,
// retries a failed renewal until the lease's local deadline, and aborts
// .signal (with a LockLost reason) the moment the server says lease_lost,
// the deadline passes without a successful renewal (picketd unreachable or
// paused: the timer needs no reply), or the hold cap is reached. For a lock
// it also follows the lock's events, so a break, an expiry or another's
// grant aborts the signal at once rather than at the next renewal; against
// a picketd without events, or a token without the read verb, it renews only.
// While it keeps a lease, its timers keep the process alive: release() (or
// the end of withLock) lets it exit.
import type { AcquireOptions, Client } from "./client.js";
import { sleep } from "./client.js";
import {
  EventsUnsupported, Forbidden, InvalidArgument, LeaseLost, LockLost, LockReleased, PicketError,
  Unauthorized, type LossReason,
} from "./errors.js";
import { now, type Lease } from "./lease.js";
import { inspect } from "node:util";

const WATCH_RETRY_MS = 100;
const WATCH_RETRY_MAX_MS = 10000;

export interface LockOptions extends AcquireOptions {
  /** How often the keeper renews (ms); default ttl/3. */
  renewEveryMs?: number;
  /** Follow the lock's events too (locks only); default true. */
  watch?: boolean;
}

export class HeldLock {
  /** The grant: name, fence, fenceToken, fenceLock, deadline, ... */
  readonly lease: Lease;
  /** Aborts the moment the lease is lost (reason: a LockLost) or released (reason: a LockReleased). */
  readonly signal: AbortSignal;
  /** True once the event stream has said where the lock stands. */
  watching = false;
  /** The refusal after which the keeper only renews (EventsUnsupported, Forbidden), else undefined. */
  watchError: PicketError | undefined;
  readonly #client: Client;
  readonly #out = new AbortController();   // .signal
  readonly #stop = new AbortController();  // ends the keeper's renewals and watch
  readonly #renewEveryMs: number | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #lost: LockLost | undefined;
  #released: Promise<boolean> | undefined;
  #userSignal: AbortSignal | undefined;
  #onUserAbort: (() => void) | undefined;

  /** @internal Made by Client.lock(), semaphore() and rwlock(). */
  constructor(client: Client, lease: Lease, opts: { renewEveryMs?: number; signal?: AbortSignal | undefined }, watch: boolean) {
    this.#client = client;
    this.lease = lease;
    this.signal = this.#out.signal;
    if (opts.renewEveryMs !== undefined && !(Number.isFinite(opts.renewEveryMs) && opts.renewEveryMs > 0)) {
      throw new InvalidArgument("renewEveryMs must be a positive number");
    }
    this.#renewEveryMs = opts.renewEveryMs;
    this.#armDeadline();
    this.#scheduleRenew();
    if (watch && lease.kind === "lock") void this.#watch();
    // Aborting the caller's signal releases (node-redlock's pattern, done right).
    if (opts.signal !== undefined) {
      this.#userSignal = opts.signal;
      this.#onUserAbort = () => { this.release().catch(() => {}); };
      if (opts.signal.aborted) this.#onUserAbort();
      else opts.signal.addEventListener("abort", this.#onUserAbort, { once: true });
    }
  }

  get name(): string { return this.lease.name; }
  get fence(): number { return this.lease.fence; }
  get fenceToken(): string | undefined { return this.lease.fenceToken; }
  get fenceLock(): string { return this.lease.fenceLock; }
  /** The LockLost the signal aborted with, when the lease was lost. */
  get lostReason(): LockLost | undefined { return this.#lost; }
  /** True while held: not lost, not released, before the local deadline. */
  valid(): boolean { return !this.signal.aborted && this.lease.valid(); }
  /** Picket-Lock, Picket-Fence (+ Picket-Fence-Token when signed) for a fenced store. */
  fenceHeaders(): Record<string, string> { return this.lease.fenceHeaders(); }
  /** Throws the signal's reason once it aborted (a LockLost or LockReleased). */
  throwIfLost(): void { this.signal.throwIfAborted(); }

  #every(): number {
    return this.#renewEveryMs ?? this.lease.ttlMs / 3;
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => {
      if (now() >= this.lease.deadline) {
        this.#lose(this.lease.capped ? "max_hold" : "expired");
      } else {
        this.#armDeadline();
      }
    }, Math.max(0, Math.ceil(this.lease.deadline - now())));
  }

  #scheduleRenew(delayMs = this.#every()): void {
    clearTimeout(this.#renewTimer);
    if (this.#stop.signal.aborted || this.lease.capped) return; // capped: it ends at its deadline
    this.#renewTimer = setTimeout(() => void this.#renew(), Math.max(0, delayMs));
  }

  async #renew(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    try {
      await this.#client.renew(this.lease, { signal: this.#stop.signal });
      if (this.#stop.signal.aborted) return;
      this.#armDeadline();
      this.#scheduleRenew();
    } catch (e) {
      if (this.#stop.signal.aborted) return;
      if (e instanceof LeaseLost) {
        this.#lose(now() >= this.lease.deadline ? (this.lease.capped ? "max_hold" : "expired") : "lease_lost");
        return;
      }
      // transport, 503 (already retried), a quota: again soon, until the
      // deadline timer says the lease is gone.
      this.#scheduleRenew(Math.min(250, Math.max(10, this.lease.remainingMs() / 4)));
    }
  }

  async #watch(): Promise<void> {
    let retry = WATCH_RETRY_MS;
    const stop = this.#stop.signal;
    const fence = this.lease.fence;
    while (!stop.aborted) {
      try {
        for await (const ev of this.#client.watch(this.lease.name, { signal: stop })) {
          if (ev.type === "state") {
            this.watching = true;
            retry = WATCH_RETRY_MS;
          }
          if (ev.ends(fence)) {
            this.#lose(ev.type === "broken" ? "broken" : ev.type === "expired" ? "expired" : "taken");
            return;
          }
        }
      } catch (e) {
        if (e instanceof EventsUnsupported || e instanceof Unauthorized || e instanceof Forbidden || e instanceof InvalidArgument) {
          this.watchError = e;
          return;
        }
        // the stream broke (picketd restarting, a quota of streams): open another
      }
      try {
        await sleep(retry, stop);
      } catch {
        return;
      }
      retry = Math.min(retry * 2, WATCH_RETRY_MAX_MS);
    }
  }

  #halt(): void {
    this.#stop.abort();
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#deadlineTimer);
    if (this.#userSignal !== undefined && this.#onUserAbort !== undefined) {
      this.#userSignal.removeEventListener("abort", this.#onUserAbort);
    }
  }

  #lose(reason: LossReason): void {
    if (this.signal.aborted) return;
    const why = {
      expired: "no renewal succeeded before its local deadline",
      lease_lost: "picketd said the lease is lost",
      broken: "it was broken",
      taken: "the lock was released, expired or granted to another",
      max_hold: "its hold cap (maxHoldMs) was reached",
    }[reason];
    this.#lost = new LockLost(`${this.lease.describe()} (fence ${this.lease.fence}) was lost: ${why}`, reason);
    this.lease.markLost();
    this.#halt();
    this.#out.abort(this.#lost);
  }

  /**
   * Stop renewing and give the lease up; the signal aborts (a LockReleased)
   * if it had not. Resolves true when released, false when the lease had
   * already been lost (nothing to give back then). Rejects when picketd could
   * not be told (the lease then ends at its TTL). Safe to call twice.
   */
  release(): Promise<boolean> {
    if (this.#released === undefined) {
      const lost = this.signal.aborted;
      this.#halt();
      if (!lost) this.#out.abort(new LockReleased(`${this.lease.describe()} was released`));
      this.#released = lost
        ? this.#client.release(this.lease).then(() => false, () => false)
        : this.#client.release(this.lease).then(() => true, (e: unknown) => {
          if (e instanceof LeaseLost) {
            this.lease.markLost();
            return false;
          }
          throw e;
        });
    }
    return this.#released;
  }

  /**
   * Releases: `await using l = await c.lock(...)` in TypeScript 5.2+ or a
   * runtime with explicit resource management (Node 20 defines the symbol
   * but not the syntax: use withLock() or try/finally there).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  toString(): string {
    return `HeldLock(${this.lease.describe()}, fence ${this.lease.fence}, ${this.signal.aborted ? "ended" : "held"})`;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}
