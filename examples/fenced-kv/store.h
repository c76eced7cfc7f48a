/* store.h: fenced-kv's durable state in one SQLite file: values with their
 * version, the fence that wrote them and the lock they are bound to, and
 * the highest fence admitted per lock (at most max_locks locks). The fence rule lives here, in SQL (sql.h), so that it holds in the
 * same transaction as the write and survives a restart.
 *
 * A store is used by one thread at a time (fenced-kv's single HTTP thread);
 * other processes may open the same file: BEGIN IMMEDIATE serialises them. */
#ifndef FENCED_KV_STORE_H
#define FENCED_KV_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct store store;

typedef enum {
  STORE_OK = 0,
  STORE_STALE,     /* fence < highest admitted for the lock; *highest says which */
  STORE_MISMATCH,  /* If-Match did not match; *version holds the stored one */
  STORE_WRONG_LOCK, /* put: the key is bound to another lock */
  STORE_FULL,      /* a new lock, and max_locks locks already have a row */
  STORE_NOT_FOUND, /* get: no such key */
  STORE_ERROR      /* SQLite failed; store_errmsg says why; nothing changed */
} store_result;

/* Opens (creating if needed) the database at `path` with WAL and
 * synchronous=FULL, adds the kv.lock_name column to a database made before
 * it, and prepares every statement. A write or claim that would give a
 * lock its row when `max_locks` locks have one is STORE_FULL. Returns NULL
 * and writes a message into err (errlen bytes) on failure. Free with
 * store_close. */
store *store_open(const char *path, int64_t max_locks, char *err, size_t errlen);
void store_close(store *s); /* NULL is fine */
const char *store_errmsg(store *s); /* why the last STORE_ERROR; owned by s */

/* Writes `value` (len bytes) at `key`. With fence > 0 the write is fenced by
 * `lock`: refused as WRONG_LOCK when the key is bound to another lock (its
 * first fenced write binds it; a key without a lock is bound by its next),
 * as STALE when fence < the lock's highest, as FULL when the lock is new
 * and max_locks locks have a row; else the highest becomes fence in the
 * same transaction. fence == 0 writes unfenced (the --no-fence plain
 * store) and records 0 as the key's fence and no lock. if_match >= 0
 * requires the key's current version to be if_match (0: the key must not
 * exist yet), checked last. On OK *version is the new version; on STALE
 * *highest is the lock's highest; on MISMATCH *version is the stored
 * version (0 if none). Anything but OK changes nothing. */
store_result store_put(store *s, const char *key, const char *value, size_t len,
                       const char *lock, int64_t fence, int64_t if_match, int64_t *version,
                       int64_t *highest);

/* Reads `key`. On OK *value is a malloc'd NUL-terminated copy (the caller
 * frees it) of *len bytes, with the version and the fence that wrote it,
 * and its lock in lock (lockcap bytes; "" when the key has none). */
store_result store_get(store *s, const char *key, char **value, size_t *len, int64_t *version,
                       int64_t *fence, char *lock, size_t lockcap);

/* Claims `fence` for `lock`: OK (the highest is now fence; a claim equal to
 * the highest is OK too), STALE with *highest, or FULL for a new lock past
 * max_locks. */
store_result store_claim(store *s, const char *lock, int64_t fence, int64_t *highest);

/* The highest fence admitted for `lock` (0 if never seen). */
store_result store_highest(store *s, const char *lock, int64_t *highest);

#endif
