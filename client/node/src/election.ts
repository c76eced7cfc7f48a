// Leader elections (POST /v1/elections/{name}/campaign, ...): a Leadership is
// a won campaign kept by a keeper, as a HeldLock keeps a lease. An election
// is a lease with a term: the term is that grant's fence, checked by fenced
// storage exactly like a lock's fence with the election's name as the lock
// (Picket-Lock: NAME, Picket-Fence: TERM).
import { inspect } from "node:util";
import { InvalidArgument, LeaseLost, LockLost, Resigned, TransportError } from "./errors.js";
import { StreamEvent } from "./events.js";
import { Keeper } from "./keeper.js";
import { driftMarginMs, followRenewal, now } from "./lease.js";
import type { LeaderEventWire, LeaderRenewalWire, LeaderWire } from "./wire.js";

const VALUE_MAX = 4096; // bytes of UTF-8

/** @internal A value of a campaign or proclaim: null, or a string of at most 4096 bytes of UTF-8 without control characters. */
export function checkValue(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== "string") throw new InvalidArgument(`a leader's value is a string or null, not ${typeof v}`);
  if (Buffer.byteLength(v, "utf8") > VALUE_MAX) throw new InvalidArgument(`a leader's value is at most ${VALUE_MAX} bytes of UTF-8`);
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f-\x9f]/.test(v)) throw new InvalidArgument("a leader's value has no control characters");
  return v;
}

/** The leader of an election: its term, value, owner, since (unix ms of the grant) and ttl_ms. Never its lease id. */
export type Leader = LeaderWire;

/** One "leader" event of an election's stream (Client.observe). */
export class LeaderEvent extends StreamEvent<LeaderEventWire> {
  get election(): string { return this.data.election; }
  /** null when nobody leads now (resigned, expired, broken). */
  get leader(): Leader | null { return this.data.leader ?? null; }
  /** The last term issued. */
  get term(): number { return this.data.term; }
  /** The leader's term, value and owner (undefined when nobody leads). */
  get leaderTerm(): number | undefined { return this.data.leader?.term; }
  get value(): string | null | undefined { return this.data.leader === null ? undefined : this.data.leader?.value; }
  get owner(): string | null | undefined { return this.data.leader === null ? undefined : this.data.leader?.owner; }
}

/** @internal What a Leadership needs of its Client. */
export interface LeaderCalls {
  post(election: string, verb: string, body: Record<string, unknown>,
    o: { deadline?: number; signal?: AbortSignal | undefined; stamp?: { sent: number } }): Promise<Record<string, unknown>>;
}

export interface LeadershipInit {
  election: string; id: string; term: number; ttlMs: number; owner: string | null; value: string | null;
  token: string | undefined; deadline: number;
  /** When the campaign was sent (performance.now()): renewals sent later set the deadline. */
  deadlineSent?: number | undefined;
}

/**
 * A won campaign (Client.campaign). The keeper renews every ttl/3, retries
 * a failed renewal until the local deadline, and aborts .signal (with a
 * LockLost reason, a LeaseLost) the moment picketd says lease_lost or the
 * deadline passes without a successful renewal; .lost resolves with that
 * LockLost. resign() (or aborting the signal given to campaign) steps
 * down: .signal aborts with a Resigned, .lost never resolves. While it
 * leads, its timers keep the process alive: resign() lets it exit.
 */
export class Leadership {
  /** The election's picket name (the lock name a fenced store checks the term under). */
  readonly election: string;
  /** The fence to send with every write (strictly increasing per election). */
  readonly term: number;
  readonly owner: string | null;
  /** The value last proclaimed (null: none). */
  value: string | null;
  /** The lease time granted or last renewed (ms). */
  ttlMs: number;
  /** The signed term (picketd with --fence-key-file), else undefined. */
  token: string | undefined;
  /** performance.now() at which this client must assume the leadership gone. */
  deadline: number;
  /** Aborts the moment the leadership is lost (reason: a LockLost) or resigned (reason: a Resigned). */
  readonly signal: AbortSignal;
  /** Resolves with the LockLost when the leadership is lost (never on resign). */
  readonly lost: Promise<LockLost>;
  readonly #calls: LeaderCalls;
  readonly #id: string;
  readonly #keeper: Keeper;
  #deadlineSent: number;

  /** @internal Made by Client.campaign(). */
  constructor(calls: LeaderCalls, init: LeadershipInit, opts: { renewEveryMs?: number | undefined; signal?: AbortSignal | undefined; keep?: boolean }) {
    this.#calls = calls;
    this.election = init.election;
    this.#id = init.id;
    this.term = init.term;
    this.ttlMs = init.ttlMs;
    this.owner = init.owner;
    this.value = init.value;
    this.token = init.token;
    this.deadline = init.deadline;
    this.#deadlineSent = init.deadlineSent ?? -Infinity;
    this.#keeper = new Keeper({
      deadline: () => this.deadline,
      ttlMs: () => this.ttlMs,
      remainingMs: () => this.remainingMs(),
      capped: () => false,
      renew: (signal) => this.renew({ signal }),
      lost: (reason) => {
        const why = reason === "expired" ? "no renewal succeeded before its local deadline" : "picketd said the lease is lost";
        return new LockLost(`${this.describe()} was lost: ${why}`, reason);
      },
    }, opts.renewEveryMs);
    this.signal = this.#keeper.signal;
    this.lost = this.#keeper.lost;
    if (opts.keep ?? true) this.#keeper.start();
    this.#keeper.endOn(opts.signal, () => this.resign());
  }

  /** The lease id: the leadership's secret (hand it only to picketd). */
  get id(): string { return this.#id; }
  /** The term, as a lease calls its fence. */
  get fence(): number { return this.term; }
  /** The lock name a fenced store checks the term under: the election's name. */
  get fenceLock(): string { return this.election; }
  /** The LockLost the signal aborted with, when the leadership was lost. */
  get lostReason(): LockLost | undefined { return this.#keeper.lostReason; }
  /** Milliseconds left before the local deadline (0 when past it). */
  remainingMs(): number { return Math.max(0, this.deadline - now()); }
  /** True while leading: not lost, not resigned, before the local deadline (this process's clock alone). */
  valid(): boolean { return !this.signal.aborted && now() < this.deadline; }
  /** Throws the signal's reason once it aborted (a LockLost or Resigned). */
  throwIfLost(): void { this.signal.throwIfAborted(); }

  /** The headers a fenced store (examples/fenced-kv) checks: Picket-Lock (the election), Picket-Fence (the term), Picket-Fence-Token when signed. */
  fenceHeaders(): Record<string, string> {
    const h: Record<string, string> = { "Picket-Lock": this.election, "Picket-Fence": String(this.term) };
    if (this.token !== undefined) h["Picket-Fence-Token"] = this.token;
    return h;
  }

  describe(): string {
    return `leadership of '${this.election}' (term ${this.term})`;
  }

  async #post(verb: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<LeaderRenewalWire> {
    if (now() >= this.deadline) {
      throw new LeaseLost(`${this.describe()} is past its local deadline`);
    }
    const stamp = { sent: 0 };
    const doc = await this.#calls.post(this.election, verb, body, { deadline: this.deadline, signal, stamp }) as unknown as LeaderRenewalWire;
    if (typeof doc.ttl_ms !== "number" || !(doc.ttl_ms > 0)) throw new TransportError(`POST .../${verb}: a reply without ttl_ms`);
    this.ttlMs = doc.ttl_ms;
    // the deadline follows the newest-sent renewal (followRenewal)
    ({ deadline: this.deadline, sent: this.#deadlineSent } = followRenewal({ deadline: this.deadline, sent: this.#deadlineSent },
      stamp.sent, stamp.sent + doc.ttl_ms - driftMarginMs(doc.ttl_ms)));
    const token = doc.token ?? doc.fence_token;
    if (typeof token === "string") this.token = token;
    return doc;
  }

  /**
   * Extend the leadership to ttlMs from now (default: its ttl) and move its
   * deadline (the keeper does this every ttl/3). Rejects with LeaseLost when
   * it is no longer the leader. Never retried past the local deadline.
   */
  async renew(opts: { ttlMs?: number; signal?: AbortSignal | undefined } = {}): Promise<this> {
    const ttlMs = opts.ttlMs ?? this.ttlMs;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) throw new InvalidArgument("ttlMs must be an integer of at least 1");
    await this.#post("renew", { lease: this.#id, ttl_ms: ttlMs }, opts.signal);
    return this;
  }

  /**
   * Publish a new value (a string, or null for none) keeping the term:
   * observers see a leader event with the same term. Renews too (to ttlMs,
   * default the lease's current TTL). Rejects with LeaseLost when it is no
   * longer the leader.
   */
  async proclaim(value: string | null, opts: { ttlMs?: number; signal?: AbortSignal | undefined } = {}): Promise<this> {
    const body: Record<string, unknown> = { lease: this.#id, value: checkValue(value) };
    if (opts.ttlMs !== undefined) {
      if (!Number.isSafeInteger(opts.ttlMs) || opts.ttlMs < 1) throw new InvalidArgument("ttlMs must be an integer of at least 1");
      body["ttl_ms"] = opts.ttlMs;
    }
    const doc = await this.#post("proclaim", body, opts.signal);
    this.value = doc.value === undefined ? checkValue(value) : doc.value;
    return this;
  }

  /**
   * Stop the keeper and step down: the next waiting candidate leads within
   * milliseconds; the signal aborts (a Resigned) if it had not. Resolves
   * true when resigned, false when the leadership had already been lost.
   * Rejects when picketd could not be told (it then ends at its TTL). Safe
   * to call twice.
   */
  resign(): Promise<boolean> {
    return this.#keeper.end(() => new Resigned(`${this.describe()} was resigned`),
      () => this.#calls.post(this.election, "resign", { lease: this.#id }, {}).then(() => {
        this.#deadlineSent = Infinity;
        this.deadline = Math.min(this.deadline, now());
      }));
  }

  /** Resigns: `await using lead = await c.campaign(...)` where the syntax exists. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.resign();
  }

  toJSON(): Record<string, unknown> {
    return { election: this.election, term: this.term, value: this.value, owner: this.owner, ttlMs: this.ttlMs, lost: this.#keeper.lostReason !== undefined };
  }

  toString(): string {
    return `Leadership(${this.describe()}, ${Math.round(this.remainingMs())} ms left${this.signal.aborted ? ", ended" : ""})`;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}
