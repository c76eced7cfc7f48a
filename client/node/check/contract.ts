// Type-level checks of client/node against proto/openapi.yaml, run by
// tests/integration/test_node.sh: openapi-typescript (pinned in
// package.json) generates ./openapi.ts from the contract next to a copy of
// this file, and `tsc --noEmit` must accept it. Nothing here runs.
//
//  - every request body the client sends is assignable to the contract's,
//    and names no field the contract does not;
//  - every reply the contract allows is assignable to the type the client
//    reads it as (so a field the client needs cannot become optional, or
//    change type, without this failing);
//  - the client's error classes cover exactly the contract's ErrorCode enum.
import type { components } from "./openapi.js";
import type * as W from "../src/wire.js";
import type { ErrorCode } from "../src/errors.js";

type S = components["schemas"];
/** Compiles only when T is assignable to U. */
type Fits<T extends U, U> = T;
/** true when A and B are the same union. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// Requests: what the client sends, the contract takes.
export type AcquireBody = Fits<W.AcquireBody, S["AcquireRequest"]>;
export type SemaphoreAcquireBody = Fits<W.SemaphoreAcquireBody, S["SemaphoreAcquireRequest"]>;
export type RwAcquireBody = Fits<W.RwAcquireBody, S["RwAcquireRequest"]>;
export type RenewBody = Fits<W.RenewBody, S["RenewRequest"]>;
export type ReleaseBody = Fits<W.ReleaseBody, S["ReleaseRequest"]>;

// ...and sends no field the contract does not name (additionalProperties: false).
type NoExtra<T, U> = Same<Exclude<keyof T, keyof U>, never>;
export const acquireFields: NoExtra<W.AcquireBody, S["AcquireRequest"]> = true;
export const semaphoreAcquireFields: NoExtra<W.SemaphoreAcquireBody, S["SemaphoreAcquireRequest"]> = true;
export const rwAcquireFields: NoExtra<W.RwAcquireBody, S["RwAcquireRequest"]> = true;
export const renewFields: NoExtra<W.RenewBody, S["RenewRequest"]> = true;
export const releaseFields: NoExtra<W.ReleaseBody, S["ReleaseRequest"]> = true;

// Replies: what the contract allows, the client reads.
export type Grant = Fits<S["Grant"], W.GrantWire>;
export type PermitGrant = Fits<S["PermitGrant"], W.PermitGrantWire>;
export type RwGrant = Fits<S["RwGrant"], W.RwGrantWire>;
export type Renewal = Fits<S["Renewal"], W.RenewalWire>;
export type PermitRenewal = Fits<S["PermitRenewal"], W.RenewalWire>;
export type RwRenewal = Fits<S["RwRenewal"], W.RenewalWire>;
export type LockStatus = Fits<S["LockStatus"], W.LockStatusWire>;
export type SemaphoreStatus = Fits<S["SemaphoreStatus"], W.SemaphoreStatusWire>;
export type RwLockStatus = Fits<S["RwLockStatus"], W.RwLockStatusWire>;
export type BreakResult = Fits<S["BreakResult"], W.BreakResultWire>;
export type LockList = Fits<S["LockList"], W.LockListWire>;
export type WhoAmI = Fits<S["WhoAmI"], W.WhoAmIWire>;
export type LockEvent = Fits<S["LockEvent"], W.LockEventWire>;
export type ErrorBody = Fits<S["Error"], W.ErrorWire>;
export type LockHeldBody = Fits<S["LockHeldError"], W.ErrorWire>;
export type SemaphoreTakenBody = Fits<S["SemaphoreTakenError"], W.ErrorWire>;

// Error codes: one class per code of the contract, and no other.
export const errorCodesMatch: Same<ErrorCode, S["ErrorCode"]> = true;
