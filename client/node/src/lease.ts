// Lease: one grant (a lock's, a semaphore permit's, or a read/write lock's
// read or write lease). Its id is the bearer secret of the grant: it is kept
// in a private field and left out of every string form (toString, JSON,
// util.inspect).
import { inspect } from "node:util";

export type LeaseKind = "lock" | "permit" | "rwlock";
export type RwMode = "read" | "write";

/** What a lease's local deadline keeps back from its TTL (ms): 1% plus 2 ms, as libpicket. */
export function driftMarginMs(ttlMs: number): number {
  return ttlMs * 0.01 + 2;
}

/** The monotonic clock the deadlines are on (ms). */
export const now = (): number => performance.now();

/**
 * @internal A holder's local deadline after a successful renewal sent at
 * `sent` whose grant ends at `deadline`; `cur` is its deadline now and the
 * send time of the grant or renewal that set it. The deadline follows the
 * NEWEST-SENT successful renewal, not the largest deadline: a renewal that
 * asked for a shorter TTL than before moves it back (picketd expires the
 * lease sooner now), so a reply to a renewal sent after the one that last
 * set the deadline sets it to its own value, earlier or later. A late reply
 * to an older renewal (the keeper's and the caller's may cross) may only
 * lower it, never raise it: picketd may have applied that one after the
 * newer. Both ways are conservative. After a release (cur.sent Infinity)
 * nothing raises it again.
 */
export function followRenewal(cur: { deadline: number; sent: number }, sent: number, deadline: number): { deadline: number; sent: number } {
  return sent > cur.sent ? { deadline, sent } : { deadline: Math.min(cur.deadline, deadline), sent: cur.sent };
}

export interface LeaseInit {
  kind: LeaseKind;
  name: string;
  id: string;
  fence: number;
  fenceToken: string | undefined;
  ttlMs: number;
  owner: string | null;
  deadline: number;
  /** When the grant was sent (performance.now()): renewals sent later set the deadline. */
  deadlineSent?: number | undefined;
  fenceLock: string;
  permit?: number | undefined;
  limit?: number | undefined;
  mode?: RwMode | undefined;
}

export class Lease {
  /** "lock", "permit" (of a semaphore) or "rwlock" (a read or write lease). */
  readonly kind: LeaseKind;
  /** The lock's, semaphore's or read/write lock's picket name. */
  readonly name: string;
  /** The fence to send with every write (strictly increasing per fenceLock). */
  readonly fence: number;
  /** The signed fence (picketd with --fence-key-file), else undefined. */
  fenceToken: string | undefined;
  /** The lease time granted or last renewed (ms). */
  ttlMs: number;
  readonly owner: string | null;
  /** performance.now() at which this client must assume the lease gone. */
  deadline: number;
  /** A grant or renewal was cut short by maxHoldMs: no renewal can carry it further. */
  capped = false;
  /** The lock name a fenced store checks the fence under (the lock's own name, NAME:permit:I, NAME:rw). */
  readonly fenceLock: string;
  /** A permit's slot (0..limit-1) and its semaphore's limit. */
  readonly permit: number | undefined;
  readonly limit: number | undefined;
  /** A rwlock lease's mode. */
  readonly mode: RwMode | undefined;
  #id: string;
  #lost = false;
  #deadlineSent: number;

  constructor(init: LeaseInit) {
    this.kind = init.kind;
    this.name = init.name;
    this.#id = init.id;
    this.fence = init.fence;
    this.fenceToken = init.fenceToken;
    this.ttlMs = init.ttlMs;
    this.owner = init.owner;
    this.deadline = init.deadline;
    this.#deadlineSent = init.deadlineSent ?? -Infinity;
    this.fenceLock = init.fenceLock;
    this.permit = init.permit;
    this.limit = init.limit;
    this.mode = init.mode;
  }

  /** The lease id: the grant's secret (hand it only to picketd). */
  get id(): string {
    return this.#id;
  }

  /** True once the lease is known lost (a renewal said lease_lost, or its keeper declared it). */
  get lost(): boolean {
    return this.#lost;
  }

  /** @internal */
  markLost(): void {
    this.#lost = true;
  }

  /** @internal A successful renewal sent at `sent` whose grant ends at `deadline` (followRenewal). */
  renewed(sent: number, deadline: number): void {
    ({ deadline: this.deadline, sent: this.#deadlineSent } = followRenewal({ deadline: this.deadline, sent: this.#deadlineSent }, sent, deadline));
  }

  /** @internal Released: gone from now on, and no renewal's late reply moves the deadline on again. */
  ended(): void {
    this.#deadlineSent = Infinity;
    this.deadline = Math.min(this.deadline, now());
  }

  /** Milliseconds left before the local deadline (0 when past it). */
  remainingMs(): number {
    return Math.max(0, this.deadline - now());
  }

  /** True while not known lost and before the local deadline, by this process's clock alone. */
  valid(): boolean {
    return !this.#lost && now() < this.deadline;
  }

  /** The headers a fenced store (examples/fenced-kv) checks: Picket-Lock, Picket-Fence, Picket-Fence-Token when signed. */
  fenceHeaders(): Record<string, string> {
    const h: Record<string, string> = { "Picket-Lock": this.fenceLock, "Picket-Fence": String(this.fence) };
    if (this.fenceToken !== undefined) h["Picket-Fence-Token"] = this.fenceToken;
    return h;
  }

  /** "lease of 'x'", "permit 1 of semaphore 'x'", "read lease of rwlock 'x'". */
  describe(): string {
    if (this.kind === "permit") return `permit ${this.permit} of semaphore '${this.name}'`;
    if (this.kind === "rwlock") return `${this.mode} lease of rwlock '${this.name}'`;
    return `lease of '${this.name}'`;
  }

  toJSON(): Record<string, unknown> {
    return {
      kind: this.kind, name: this.name, fence: this.fence, fenceLock: this.fenceLock,
      ttlMs: this.ttlMs, owner: this.owner, permit: this.permit, limit: this.limit,
      mode: this.mode, capped: this.capped, lost: this.#lost,
    };
  }

  toString(): string {
    return `Lease(${this.describe()}, fence ${this.fence}, ${Math.round(this.remainingMs())} ms left${this.#lost ? ", lost" : ""})`;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}
