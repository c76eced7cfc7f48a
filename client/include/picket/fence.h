/* picket/fence.h: the storage side of fencing, for C storage services.
 *
 * A fence protects nothing until the storage checks it. This header gives a
 * service an in-process, thread-safe register of the highest fence admitted
 * per resource (usually the lock name), with one rule:
 *
 *   admit a write for resource R only if its fence >= the highest fence
 *   admitted for R, and record the new highest in the same atomic step as
 *   the write.
 *
 * and a claim: advance the highest fence without writing, so that a new
 * holder shuts out a zombie (a paused former holder) before it starts work.
 *
 * The register lives in memory. A service that must keep refusing zombies
 * across its own restart stores the fence with each write (the write callback
 * of picket_fence_admit is the place) and, at start, claims every stored
 * highest fence back into a new register before it serves. Storage that is
 * a database should rather apply the same rule in SQL, in the transaction of
 * the write: proto/README.md has the statements for SQLite and PostgreSQL.
 *
 * Fencing orders writes; it does not make them exactly-once. A zombie's
 * write that lands before the new holder's first write or claim is admitted,
 * and a non-idempotent delta applied twice is still applied twice.
 *
 * With signed fences (below) the storage also checks that picketd issued
 * the fence, so that a made-up fence cannot raise the highest.
 *
 * This header stands alone: it needs neither picket.h nor any other picket
 * header, so a storage service can use it without the lock client. */
#ifndef PICKET_FENCE_H
#define PICKET_FENCE_H

#include <stddef.h>
#include <stdint.h>

#ifndef PICKET_EXTERN
#define PICKET_EXTERN __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Why a fence was or was not admitted. */
typedef enum {
  PICKET_FENCE_ADMITTED = 0,     /* fence >= highest: recorded (admit, claim) or would be (check) */
  PICKET_FENCE_STALE = 1,        /* fence < highest: refused, nothing changed */
  PICKET_FENCE_MALFORMED = 2,    /* resource is not a valid lock name, or fence < 1 */
  PICKET_FENCE_FULL = 3,         /* a new resource, and the register already holds its maximum */
  PICKET_FENCE_WRITE_FAILED = 4  /* admit: the write callback failed; nothing recorded */
} picket_fence_verdict;

/* Default for picket_fence_register_new(0). */
#define PICKET_FENCE_DEFAULT_MAX_RESOURCES 100000

typedef struct picket_fence_register picket_fence_register;

/* The write an admit guards. Called with the resource's entry locked, after
 * the fence was found admissible and before the new highest is recorded; no
 * other admit or claim of the same resource runs meanwhile. Return 0 when
 * the write is done (durably, if the service needs that): the fence is then
 * recorded. Any other value means the write did not happen: the highest
 * fence stays as it was and the admit answers PICKET_FENCE_WRITE_FAILED.
 * The callback must not call back into the register for the same resource
 * (it would deadlock); other resources are fine. */
typedef int (*picket_fence_write_fn)(void *arg, const char *resource, int64_t fence);

/* A new, empty register that tracks at most `max_resources` resources
 * (0 means PICKET_FENCE_DEFAULT_MAX_RESOURCES). Entries are never evicted:
 * forgetting a resource's highest fence would admit a zombie's write. Once
 * the register is full, a new resource gets PICKET_FENCE_FULL (answer it as
 * "unavailable"), while every resource already tracked keeps working; an
 * entry costs about 80 bytes plus the name. Returns NULL when out of
 * memory. Free it with picket_fence_register_free. */
PICKET_EXTERN picket_fence_register *picket_fence_register_new(size_t max_resources);

/* Frees the register and every entry. NULL is fine. No call may be running
 * on it. */
PICKET_EXTERN void picket_fence_register_free(picket_fence_register *reg);

/* Parses a fence as it travels in the Picket-Fence header or the
 * PICKET_FENCE variable: a decimal integer 1..2^63-1, no sign, no spaces,
 * no leading zeros. `s` need not be NUL-terminated. Returns the fence, or 0
 * when malformed (and 0 passed on as a fence is PICKET_FENCE_MALFORMED). */
PICKET_EXTERN int64_t picket_fence_parse(const char *s, size_t len);

/* Would a write with `fence` for `resource` be admitted now? Changes
 * nothing, and the answer can be out of date as soon as it returns: use it
 * to refuse early, never instead of picket_fence_admit. `resource` is a
 * NUL-terminated lock name ([A-Za-z0-9._:-]{1,200}). If `highest` is not
 * NULL it receives the highest fence admitted so far (0 if none). */
PICKET_EXTERN picket_fence_verdict picket_fence_check(picket_fence_register *reg,
                                                      const char *resource, int64_t fence,
                                                      int64_t *highest);

/* Checks `fence` and, when admissible, calls write(arg, resource, fence) and
 * records fence as the new highest, all as one step for this resource. With
 * `write` NULL it is a claim. Returns ADMITTED, STALE (nothing called),
 * MALFORMED, FULL or WRITE_FAILED. If `highest` is not NULL it receives the
 * highest fence after the call (the one that made it STALE, or 0 for
 * MALFORMED and FULL). */
PICKET_EXTERN picket_fence_verdict picket_fence_admit(picket_fence_register *reg,
                                                      const char *resource, int64_t fence,
                                                      picket_fence_write_fn write, void *arg,
                                                      int64_t *highest);

/* Advances the highest fence of `resource` to `fence` without a write, so a
 * new holder shuts out older holders before it reads anything. A claim
 * equal to the highest is admitted (retries are harmless). Same verdicts
 * and `highest` as picket_fence_admit. */
PICKET_EXTERN picket_fence_verdict picket_fence_claim(picket_fence_register *reg,
                                                      const char *resource, int64_t fence,
                                                      int64_t *highest);

/* The highest fence admitted for `resource`, 0 if none (or not valid). */
PICKET_EXTERN int64_t picket_fence_highest(picket_fence_register *reg, const char *resource);

/* How many resources the register tracks. */
PICKET_EXTERN size_t picket_fence_count(picket_fence_register *reg);

/* "admitted", "stale", "malformed", "full", "write_failed"; "unknown" for
 * anything else. Static strings. */
PICKET_EXTERN const char *picket_fence_verdict_str(picket_fence_verdict v);

/* ---- signed fences ----
 *
 * A fence alone is a number anybody can make up, and storage that admits
 * any fence >= the highest it has seen is locked out for good by one
 * forged 2^63-1. picketd started with --fence-key-file signs each grant's
 * fence: the grant carries a fence token ("fence_token" in the acquire
 * reply, PICKET_FENCE_TOKEN under `picket run`, the Picket-Fence-Token
 * header on a write), an HMAC-SHA256 of (kind, prefix, lock, fence) under
 * a key that picketd and the storage share. Storage given the same key
 * file verifies the token before its fence check and refuses a write or
 * claim whose token does not verify, without changing anything; so only
 * fences picketd granted can raise the highest. The format is in
 * proto/README.md ("Signed fences"), for verifiers in other languages.
 *
 * The kind is what the grant was: a lock's lease, a semaphore's permit
 * (its fence lock is NAME:permit:I), a read/write lock's read or write
 * lease (NAME:rw). A read lease's fence is the write epoch it reads, the
 * last writer's fence, so only the kind keeps a reader from writing with
 * it; and a plain lock may be named NAME:permit:3, so only the kind keeps
 * its holder from writing as the permit's. */

typedef struct picket_fence_keys picket_fence_keys;

/* Reads a key file: one key per line, "KID HEX" (KID 1-32 bytes of
 * [A-Za-z0-9_-], the key 32 to 64 bytes as 64 to 128 hex digits), '#'
 * comment lines and blank lines ignored, at most 16 keys, the file at most
 * 8 KiB. Every key verifies (the first is the one picketd signs with), so a
 * file with the new key first and the old one after accepts the tokens of
 * both while a rotation is under way. Returns the keys (free them with
 * picket_fence_keys_free), or NULL with why in err (errlen bytes; err may
 * be NULL): the path and the line, never key material. */
PICKET_EXTERN picket_fence_keys *picket_fence_keys_load(const char *path, char *err,
                                                        size_t errlen);

/* Wipes the key material and frees it. NULL is fine. */
PICKET_EXTERN void picket_fence_keys_free(picket_fence_keys *keys);

/* The kinds of grant a token can be signed for; a verifier takes a mask. */
#define PICKET_FENCE_KIND_LOCK 1u   /* a lock's lease */
#define PICKET_FENCE_KIND_PERMIT 2u /* a semaphore's permit, lock name NAME:permit:I */
#define PICKET_FENCE_KIND_READ 4u   /* a read lease, lock name NAME:rw: never for a write */
#define PICKET_FENCE_KIND_WRITE 8u  /* a write lease, lock name NAME:rw */

/* 1 when `token` (NUL-terminated) is a valid fence token for `lock` and
 * `fence` under one of the keys and `prefix` (picketd's --key-prefix;
 * NULL means its default, "picket:"), signed for the kind the lock name's
 * shape says: WRITE for NAME:rw, PERMIT for NAME:permit:DIGITS, LOCK for
 * every other name. Else 0: also for a token of another kind (a read
 * lease's; a plain lock's named like a permit), a NULL or malformed token,
 * an invalid lock name or prefix, a fence < 1, and a v1 token unless
 * picket_fence_keys_accept_v1 turned them on. The MAC is compared in
 * constant time. Thread-safe: the keys are only read. */
PICKET_EXTERN int picket_fence_token_verify(const picket_fence_keys *keys, const char *prefix,
                                            const char *lock, int64_t fence, const char *token);

/* The same with the kinds said: 1 only when the token's signed kind is in
 * `kinds` (PICKET_FENCE_KIND_* ORed; 0 means the name's kind, as above).
 * For a store that knows its lock: a plain lock named like a fence lock
 * (x:rw) passes PICKET_FENCE_KIND_LOCK; a store that serves reads checked
 * against the epoch passes READ | WRITE. */
PICKET_EXTERN int picket_fence_token_verify_kinds(const picket_fence_keys *keys,
                                                  const char *prefix, const char *lock,
                                                  int64_t fence, unsigned kinds,
                                                  const char *token);

/* Whether `keys` also verify v1 tokens (the format before kinds were
 * signed: a v1 read lease's token passes as its writer's). Off by default; on only while a deployment upgrades: the
 * verifiers first (with this on), then picketd, then off once every lease
 * granted before has ended (proto/README.md "Signed fences"). */
PICKET_EXTERN void picket_fence_keys_accept_v1(picket_fence_keys *keys, int on);

#ifdef __cplusplus
}
#endif

#endif
