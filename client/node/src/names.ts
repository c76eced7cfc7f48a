// Resource names to picket names, as every picket client maps them
// (proto/README.md, "Names from other ecosystems").
import { createHash } from "node:crypto";
import { InvalidArgument } from "./errors.js";

const NAME = /^[A-Za-z0-9._:-]{1,200}$/;
/** A semaphore's name leaves room for ":permit:I" (its fence lock). */
export const MAX_SEMAPHORE_NAME = 180;
/** A read/write lock's name leaves room for ":rw" (its fence lock). */
export const MAX_RWLOCK_NAME = 197;
/** The longest election name. */
export const MAX_ELECTION_NAME = 198;

/**
 * The picket lock name of a resource: a valid lock name (1..200 characters
 * of [A-Za-z0-9._:-], not "." or "..") as it is; any other string (a class
 * name, a path, UTF-8, "") maps to "h." and the first 32 hex digits of the
 * SHA-256 of its UTF-8 bytes, so workers in any language meet on one lock.
 * Not a string: InvalidArgument.
 */
export function lockName(resource: string): string {
  if (typeof resource !== "string") {
    throw new InvalidArgument(`a lock name is a string, not ${typeof resource}`);
  }
  if (NAME.test(resource) && resource !== "." && resource !== "..") return resource;
  return "h." + createHash("sha256").update(resource, "utf8").digest("hex").slice(0, 32);
}

/** lockName(resource), which must come to at most 180 characters (a mapped name always does). */
export function semaphoreName(resource: string): string {
  const name = lockName(resource);
  if (name.length > MAX_SEMAPHORE_NAME) {
    throw new InvalidArgument(`a semaphore name is at most ${MAX_SEMAPHORE_NAME} characters, not ${name.length}`);
  }
  return name;
}

/** lockName(resource), which must come to at most 197 characters (a mapped name always does). */
export function rwlockName(resource: string): string {
  const name = lockName(resource);
  if (name.length > MAX_RWLOCK_NAME) {
    throw new InvalidArgument(`a read/write lock name is at most ${MAX_RWLOCK_NAME} characters, not ${name.length}`);
  }
  return name;
}

/** lockName(resource), which must come to at most 198 characters (a mapped name always does). */
export function electionName(resource: string): string {
  const name = lockName(resource);
  if (name.length > MAX_ELECTION_NAME) {
    throw new InvalidArgument(`an election name is at most ${MAX_ELECTION_NAME} characters, not ${name.length}`);
  }
  return name;
}
