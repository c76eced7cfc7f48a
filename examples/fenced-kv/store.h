/* store.h: fenced-kv's durable state in one SQLite file: values with their
 * version and the fence that wrote them, and the highest fence admitted per
 * lock. The fence rule lives here, in SQL (sql.h), so that it holds in the
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
  STORE_NOT_FOUND, /* get: no such key */
  STORE_ERROR      /* SQLite failed; store_errmsg says why; nothing changed */
} store_result;

/* Opens (creating if needed) the database at `path` with WAL and
 * synchronous=FULL, and prepares every statement. Returns NULL and writes
 * a message into err (errlen bytes) on failure. Free with store_close. */
store *store_open(const char *path, char *err, size_t errlen);
void store_close(store *s); /* NULL is fine */
const char *store_errmsg(store *s); /* why the last STORE_ERROR; owned by s */

/* Writes `value` (len bytes) at `key`. With fence > 0 the write is fenced by
 * `lock`: refused as STALE when fence < the lock's highest, else the highest
 * becomes fence in the same transaction. fence == 0 writes unfenced (the
 * --no-fence plain store) and records 0 as the key's fence. if_match >= 0
 * requires the key's current version to be if_match (0: the key must not
 * exist yet), checked after the fence. On OK *version is the new version;
 * on STALE *highest is the lock's highest; on MISMATCH *version is the
 * stored version (0 if none). A STALE, MISMATCH or ERROR changes nothing. */
store_result store_put(store *s, const char *key, const char *value, size_t len,
                       const char *lock, int64_t fence, int64_t if_match, int64_t *version,
                       int64_t *highest);

/* Reads `key`. On OK *value is a malloc'd NUL-terminated copy (the caller
 * frees it) of *len bytes, with the version and the fence that wrote it. */
store_result store_get(store *s, const char *key, char **value, size_t *len, int64_t *version,
                       int64_t *fence);

/* Claims `fence` for `lock`: OK (the highest is now fence; a claim equal to
 * the highest is OK too) or STALE with *highest. */
store_result store_claim(store *s, const char *lock, int64_t fence, int64_t *highest);

/* The highest fence admitted for `lock` (0 if never seen). */
store_result store_highest(store *s, const char *lock, int64_t *highest);

#endif
