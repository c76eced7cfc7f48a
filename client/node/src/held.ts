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
  EventsUnsupported, Forbidden, InvalidArgument, LockLost, LockReleased, PicketError,
  Unauthorized, type LossReason,
} from "./errors.js";
import { Keeper } from "./keeper.js";
import type { Lease } from "./lease.js";
import { inspect } from "node:util";

const WATCH_RETRY_MS = 100;
const WATCH_RETRY_MAX_MS = 10000;

const WHY: Record<LossReason, string> = {
  expired: "no renewal succeeded before its local deadline",
  lease_lost: "picketd said the lease is lost",
  broken: "it was broken",
  taken: "the lock was released, expired or granted to another",
  max_hold: "its hold cap (maxHoldMs) was reached",
};

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
  readonly #keeper: Keeper;

  /** @internal Made by Client.lock(), semaphore() and rwlock(). */
  constructor(client: Client, lease: Lease, opts: { renewEveryMs?: number; signal?: AbortSignal | undefined }, watch: boolean) {
    this.#client = client;
    this.lease = lease;
    this.#keeper = new Keeper({
      deadline: () => lease.deadline,
      ttlMs: () => lease.ttlMs,
      remainingMs: () => lease.remainingMs(),
      capped: () => lease.capped,
      renew: (signal) => client.renew(lease, { signal }),
      lost: (reason) => {
        const lost = new LockLost(`${lease.describe()} (fence ${lease.fence}) was lost: ${WHY[reason]}`, reason);
        lease.markLost();
        return lost;
      },
    }, opts.renewEveryMs);
    this.signal = this.#keeper.signal;
    this.#keeper.start();
    if (watch && lease.kind === "lock") void this.#watch();
    // Aborting the caller's signal releases (node-redlock's pattern, done right).
    this.#keeper.endOn(opts.signal, () => this.release());
  }

  get name(): string { return this.lease.name; }
  get fence(): number { return this.lease.fence; }
  get fenceToken(): string | undefined { return this.lease.fenceToken; }
  get fenceLock(): string { return this.lease.fenceLock; }
  /** The LockLost the signal aborted with, when the lease was lost. */
  get lostReason(): LockLost | undefined { return this.#keeper.lostReason; }
  /** True while held: not lost, not released, before the local deadline. */
  valid(): boolean { return !this.signal.aborted && this.lease.valid(); }
  /** Picket-Lock, Picket-Fence (+ Picket-Fence-Token when signed) for a fenced store. */
  fenceHeaders(): Record<string, string> { return this.lease.fenceHeaders(); }
  /** Throws the signal's reason once it aborted (a LockLost or LockReleased). */
  throwIfLost(): void { this.signal.throwIfAborted(); }

  async #watch(): Promise<void> {
    let retry = WATCH_RETRY_MS;
    const stop = this.#keeper.stopSignal;
    const fence = this.lease.fence;
    while (!stop.aborted) {
      try {
        for await (const ev of this.#client.watch(this.lease.name, { signal: stop })) {
          if (ev.type === "state") {
            this.watching = true;
            retry = WATCH_RETRY_MS;
          }
          if (ev.ends(fence)) {
            this.#keeper.lose(ev.type === "broken" ? "broken" : ev.type === "expired" ? "expired" : "taken");
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

  /**
   * Stop renewing and give the lease up; the signal aborts (a LockReleased)
   * if it had not. Resolves true when released, false when the lease had
   * already been lost (nothing to give back then). Rejects when picketd could
   * not be told (the lease then ends at its TTL). Safe to call twice.
   */
  release(): Promise<boolean> {
    return this.#keeper.end(() => new LockReleased(`${this.lease.describe()} was released`),
      () => this.#client.release(this.lease), () => this.lease.markLost());
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
