/* sql.h: every SQL statement fenced-kv runs, in one place, because they are
 * also the documentation. proto/README.md ("Checking fences in SQL") shows
 * these very statements to storage layers in other languages, and the unit
 * test test_fence_sql checks that the README still contains each of them
 * (whitespace aside), so the documented SQL is the exercised SQL.
 *
 * A fenced write is one transaction:
 *   BEGIN IMMEDIATE                (take the write lock first: no other
 *                                   writer can slip between read and write)
 *   SELECT highest ...             (no row: 0)
 *   if fence < highest: ROLLBACK   (409 stale_fence, nothing changed)
 *   SELECT version ...             (only with If-Match: 412 on mismatch)
 *   INSERT INTO fences ... upsert  (record the new highest ...)
 *   INSERT INTO kv ... upsert      (... in the same transaction as the value)
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
  "  key     TEXT PRIMARY KEY,\n"                                          \
  "  value   TEXT NOT NULL,\n"                                             \
  "  version INTEGER NOT NULL,\n"                                          \
  "  fence   INTEGER NOT NULL\n"                                           \
  ");"

#define FKV_SQL_BEGIN "BEGIN IMMEDIATE;"
#define FKV_SQL_COMMIT "COMMIT;"
#define FKV_SQL_ROLLBACK "ROLLBACK;"

/* ?1 lock name */
#define FKV_SQL_HIGHEST "SELECT highest FROM fences WHERE lock_name = ?1;"

/* ?1 lock name, ?2 fence (already compared: fence >= highest) */
#define FKV_SQL_SET_HIGHEST                                                \
  "INSERT INTO fences (lock_name, highest) VALUES (?1, ?2)\n"              \
  "  ON CONFLICT (lock_name) DO UPDATE SET highest = excluded.highest;"

/* ?1 key */
#define FKV_SQL_VERSION "SELECT version FROM kv WHERE key = ?1;"

/* ?1 key, ?2 value, ?3 fence; returns the key's new version */
#define FKV_SQL_PUT                                                        \
  "INSERT INTO kv (key, value, version, fence) VALUES (?1, ?2, 1, ?3)\n"   \
  "  ON CONFLICT (key) DO UPDATE\n"                                        \
  "  SET value = excluded.value, version = kv.version + 1, fence = excluded.fence\n" \
  "  RETURNING version;"

/* ?1 key */
#define FKV_SQL_GET "SELECT value, version, fence FROM kv WHERE key = ?1;"

#endif
