/** A semaphore's name leaves room for ":permit:I" (its fence lock). */
export declare const MAX_SEMAPHORE_NAME = 180;
/** A read/write lock's name leaves room for ":rw" (its fence lock). */
export declare const MAX_RWLOCK_NAME = 197;
/** The longest election name. */
export declare const MAX_ELECTION_NAME = 198;
/**
 * The picket lock name of a resource: a valid lock name (1..200 characters
 * of [A-Za-z0-9._:-], not "." or "..") as it is; any other string (a class
 * name, a path, UTF-8, "") maps to "h." and the first 32 hex digits of the
 * SHA-256 of its UTF-8 bytes, so workers in any language meet on one lock.
 * Not a string: InvalidArgument.
 */
export declare function lockName(resource: string): string;
/** lockName(resource), which must come to at most 180 characters (a mapped name always does). */
export declare function semaphoreName(resource: string): string;
/** lockName(resource), which must come to at most 197 characters (a mapped name always does). */
export declare function rwlockName(resource: string): string;
/** lockName(resource), which must come to at most 198 characters (a mapped name always does). */
export declare function electionName(resource: string): string;
