// The JSON this client sends to and reads from picketd. check/contract.ts
// (run by tests/integration/test_node.sh) asserts these against the types
// openapi-typescript generates from proto/openapi.yaml: every request body
// here is assignable to the contract's, and every reply the contract allows
// is assignable to what the client reads, so the two cannot drift.

export interface AcquireBody {
  ttl_ms: number;
  wait_ms?: number;
  owner?: string;
  lease: string;
  lock_delay_ms?: number;
  max_hold_ms?: number;
}
export interface SemaphoreAcquireBody extends AcquireBody { limit: number; }
export interface RwAcquireBody extends AcquireBody { mode: "read" | "write"; }
export interface RenewBody { lease: string; ttl_ms: number; }
export interface ReleaseBody { lease: string; }

export interface GrantWire {
  lock: string; lease: string; fence: number; ttl_ms: number; owner: string | null; fence_token?: string;
}
export interface PermitGrantWire {
  semaphore: string; permit: number; lease: string; fence: number; ttl_ms: number; limit: number;
  fence_lock: string; owner: string | null; fence_token?: string;
}
export interface RwGrantWire {
  rwlock: string; mode: "read" | "write"; lease: string; fence: number; ttl_ms: number;
  fence_lock: string; owner: string | null; fence_token?: string;
}
/** A renewal of any kind: what the client reads of it. */
export interface RenewalWire { fence: number; ttl_ms: number; fence_token?: string; }

export interface LockStatusWire {
  lock: string; held: boolean; fence: number; ttl_ms: number; owner: string | null;
  lock_delay_ms?: number; acquired_at?: number | null; renewals?: number | null; waiters?: number;
}
export interface SemaphoreStatusWire {
  semaphore: string; limit: number; held: number; waiters: number;
  permits: { permit: number; fence: number; ttl_ms: number; owner: string | null; fence_lock: string; lock_delay_ms?: number }[];
}
export interface RwLockStatusWire {
  rwlock: string; fence: number; fence_lock: string;
  writer: { ttl_ms: number; owner: string | null; lock_delay_ms?: number } | null;
  readers: number; read_leases: { fence: number; ttl_ms: number; owner: string | null }[];
  writers_waiting: number; waiters: number;
}
export interface BreakResultWire { lock: string; broken: boolean; fence: number; owner: string | null; }
export interface WhoAmIWire { token: string | null; verbs: string[]; prefixes: string[]; }

/** The error body: { error: { code, message, retry_after_ms?, owner?, limit? } }. */
export interface ErrorWire {
  error: { code: string; message: string; retry_after_ms?: number; owner?: string | null; limit?: number };
}

/** The data of one lock event (GET /v1/locks/{name}/events). */
export interface LockEventWire {
  time: number; name?: string; held?: boolean; fence?: number; next_fence?: number;
  owner?: string | null; ttl_ms?: number; by?: string;
}

export interface LockListEntryWire {
  kind: "lock" | "semaphore" | "rwlock" | "election"; name: string; holders: number; owner: string | null;
  fence: number | null; ttl_ms: number; acquired_at: number | null; renewals: number | null; waiters: number;
  limit?: number;
}
export interface LockListWire { locks: LockListEntryWire[]; cursor: string | null; }

/** POST /v1/elections/{name}/campaign. */
export interface CampaignBody {
  ttl_ms: number; wait_ms?: number; owner?: string; lease: string; value?: string | null;
}
export interface ProclaimBody { lease: string; value: string | null; ttl_ms?: number; }
export interface ResignBody { lease: string; }
export interface CampaignWire {
  election: string; lease: string; term: number; ttl_ms: number; owner: string | null; value: string | null; token?: string;
  /** The signed term as a lock's grant names it (the first elections picketd sends this). */
  fence_token?: string;
}
/** A renewal or proclaim of a leadership: what the client reads of it. */
export interface LeaderRenewalWire { election: string; term: number; ttl_ms: number; value?: string | null; token?: string; fence_token?: string; }
export interface LeaderWire { term: number; value: string | null; owner: string | null; since: number; ttl_ms: number; }
export interface ElectionStatusWire { election: string; leader: LeaderWire | null; term: number; candidates: number; }
export interface ElectionBreakWire { election: string; broken: boolean; term: number; owner: string | null; }
/** The data of one leader event (GET /v1/elections/{name}/observe). */
export interface LeaderEventWire { election: string; leader: LeaderWire | null; term: number; time: number; }
