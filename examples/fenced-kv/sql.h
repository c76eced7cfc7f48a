/* sql.h: every SQL statement fenced-kv runs, in one place, because they are
 * also the documentation. proto/README.md ("Checking fences in SQL") shows
 * these very statements to storage layers in other languages, and the unit
 * test test_fence_sql checks that the README still contains each of them
 * (whitespace aside), so the documented SQL is the exercised SQL.
 *
 * A fenced write is one transaction (its fence token, when the store has a
 * key file, was verified before it began):
 *   BEGIN IMMEDIATE                (take the write lock first: no other
 *                                   writer can slip between read and write)
 *   SELECT version, lock_name ...  (the key's lock: another one is 409
 *                                   wrong_lock; no row or NULL: unbound)
 *   SELECT highest ...             (no row: 0, and a new lock)
 *   if fence < highest: ROLLBACK   (409 stale_fence, nothing changed)
 *   SELECT count(*) FROM fences    (only for a new lock: 507 past --max-locks)
 *   if If-Match != version: ROLLBACK (412)
 *   INSERT INTO fences ... upsert  (record the new highest ...)
 *   INSERT INTO kv ... upsert      (... in the same transaction as the value
 *                                   and the key's lock)
 *   COMMIT                         (durable before the reply: synchronous=FULL)
 * A claim is the same without the kv statements. */
#ifndef FENCED_KV_SQL_H
#define FENCED_KV_SQL_H

#define FKV_SQL_PRAGMAS "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"

#define FKV_SQL_SCHEMA                                                     \
  "CREATE TABLE IF NOT EXISTS fences (\n"                                  \
  "  lock_name TEXT PRIMARY KEY,\n"                                        \
  "  highest   INTEGER NOT NULL\n"                                         \
  ");\n"                                                                   \
  "CREATE TABLE IF NOT EXISTS kv (\n"                                      \
  "  key       TEXT PRIMARY KEY,\n"                                        \
  "  value     TEXT NOT NULL,\n"                                           \
  "  version   INTEGER NOT NULL,\n"                                        \
  "  fence     INTEGER NOT NULL,\n"                                        \
  "  lock_name TEXT\n"                                                     \
  ");"

/* A database made before keys were bound to their lock has no lock_name:
 * the column is added (NULL: such a key is bound by its next write). */
#define FKV_SQL_HAS_LOCK_NAME                                              \
  "SELECT count(*) FROM pragma_table_info('kv') WHERE name = 'lock_name';"
#define FKV_SQL_ADD_LOCK_NAME "ALTER TABLE kv ADD COLUMN lock_name TEXT;"

#define FKV_SQL_BEGIN "BEGIN IMMEDIATE;"
#define FKV_SQL_COMMIT "COMMIT;"
#define FKV_SQL_ROLLBACK "ROLLBACK;"

/* ?1 lock name */
#define FKV_SQL_HIGHEST "SELECT highest FROM fences WHERE lock_name = ?1;"

/* ?1 lock name, ?2 fence (already compared: fence >= highest) */
#define FKV_SQL_SET_HIGHEST                                                \
  "INSERT INTO fences (lock_name, highest) VALUES (?1, ?2)\n"              \
  "  ON CONFLICT (lock_name) DO UPDATE SET highest = excluded.highest;"

/* How many locks have a row (bounded by --max-locks). */
#define FKV_SQL_COUNT_LOCKS "SELECT count(*) FROM fences;"

/* ?1 key; no row means version 0 and no lock */
#define FKV_SQL_KEY "SELECT version, lock_name FROM kv WHERE key = ?1;"

/* ?1 key, ?2 value, ?3 fence, ?4 lock name (already compared: the key's
 * lock or NULL); returns the key's new version */
#define FKV_SQL_PUT                                                        \
  "INSERT INTO kv (key, value, version, fence, lock_name) VALUES (?1, ?2, 1, ?3, ?4)\n" \
  "  ON CONFLICT (key) DO UPDATE\n"                                        \
  "  SET value = excluded.value, version = kv.version + 1, fence = excluded.fence,\n" \
  "      lock_name = excluded.lock_name\n"                                 \
  "  RETURNING version;"

/* ?1 key */
#define FKV_SQL_GET "SELECT value, version, fence, lock_name FROM kv WHERE key = ?1;"

#endif
