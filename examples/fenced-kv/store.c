/* store.c: fenced-kv's SQLite store (see store.h). Every statement comes
 * from sql.h, the same text proto/README.md documents; this file only binds
 * parameters, compares, and decides between COMMIT and ROLLBACK. */
#include "store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql.h"

struct store {
  sqlite3 *db;
  char err[256]; /* the last failure, kept across the ROLLBACK that follows it */
  sqlite3_stmt *begin, *commit, *rollback;
  sqlite3_stmt *highest, *set_highest, *count_locks, *key, *put, *get;
  int64_t max_locks;
};

/* Prepares one statement; returns 0 or -1. */
static int prepare(store *s, sqlite3_stmt **st, const char *sql) {
  return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK ? 0 : -1;
}

/* Adds kv.lock_name to a database made before keys were bound to their
 * lock, under the write lock so that two processes opening the same old
 * file do not both add it. Returns 0 or -1. */
static int migrate(store *s) {
  sqlite3_stmt *has = NULL;
  int64_t n = 0;
  int rc = sqlite3_exec(s->db, FKV_SQL_BEGIN, NULL, NULL, NULL) == SQLITE_OK &&
                   prepare(s, &has, FKV_SQL_HAS_LOCK_NAME) == 0 &&
                   sqlite3_step(has) == SQLITE_ROW
               ? 0
               : -1;
  if (rc == 0) n = sqlite3_column_int64(has, 0);
  sqlite3_finalize(has);
  if (rc == 0 && n == 0 && sqlite3_exec(s->db, FKV_SQL_ADD_LOCK_NAME, NULL, NULL, NULL) != SQLITE_OK)
    rc = -1;
  if (rc == 0 && sqlite3_exec(s->db, FKV_SQL_COMMIT, NULL, NULL, NULL) != SQLITE_OK) rc = -1;
  if (rc != 0) {
    snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
    if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, FKV_SQL_ROLLBACK, NULL, NULL, NULL);
  }
  return rc;
}

store *store_open(const char *path, int64_t max_locks, char *err, size_t errlen) {
  store *s = calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  /* Another process may hold the write lock for a moment (BEGIN IMMEDIATE):
   * wait for it rather than fail. */
  if (rc == SQLITE_OK) sqlite3_busy_timeout(s->db, 5000);
  s->max_locks = max_locks;
  if (rc != SQLITE_OK || sqlite3_exec(s->db, FKV_SQL_PRAGMAS, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(s->db, FKV_SQL_SCHEMA, NULL, NULL, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "%s: %s", path, s->db ? sqlite3_errmsg(s->db) : "cannot open");
    store_close(s);
    return NULL;
  }
  if (migrate(s) != 0) {
    snprintf(err, errlen, "%s: adding kv.lock_name: %s", path, s->err);
    store_close(s);
    return NULL;
  }
  if (prepare(s, &s->begin, FKV_SQL_BEGIN) || prepare(s, &s->commit, FKV_SQL_COMMIT) ||
      prepare(s, &s->rollback, FKV_SQL_ROLLBACK) || prepare(s, &s->highest, FKV_SQL_HIGHEST) ||
      prepare(s, &s->set_highest, FKV_SQL_SET_HIGHEST) ||
      prepare(s, &s->count_locks, FKV_SQL_COUNT_LOCKS) || prepare(s, &s->key, FKV_SQL_KEY) ||
      prepare(s, &s->put, FKV_SQL_PUT) || prepare(s, &s->get, FKV_SQL_GET)) {
    snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(s->db));
    store_close(s);
    return NULL;
  }
  return s;
}

void store_close(store *s) {
  if (s == NULL) return;
  sqlite3_stmt *all[] = {s->begin,       s->commit,      s->rollback, s->highest,
                         s->set_highest, s->count_locks, s->key,      s->put,
                         s->get};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sqlite3_finalize(all[i]);
  sqlite3_close(s->db);
  free(s);
}

const char *store_errmsg(store *s) { return s->err; }

/* Remembers SQLite's message for the call that just failed and returns
 * STORE_ERROR. */
static store_result failed(store *s) {
  snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
  return STORE_ERROR;
}

/* Steps a statement that returns no row (or whose rows do not matter) and
 * resets it. Returns 0 or -1. */
static int exec_stmt(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

/* Steps a bound statement whose first column is an integer. Returns 1 and
 * sets *out on a row, 0 (and *out = 0) when there is none, -1 on error. */
static int query_int(sqlite3_stmt *st, int64_t *out) {
  int rc = sqlite3_step(st);
  int ret = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
  *out = ret == 1 ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return ret;
}

/* The lock's highest fence into *h: 1 when the lock has a row, 0 when it
 * has none (*h = 0: a new lock), -1 on error. */
static int read_highest(store *s, const char *lock, int64_t *h) {
  sqlite3_bind_text(s->highest, 1, lock, -1, SQLITE_STATIC);
  return query_int(s->highest, h);
}

/* The key's version into *version (0 when it does not exist) and its lock
 * into lock (lockcap bytes, "" when none). Returns 0 or -1. */
static int read_key(store *s, const char *key, int64_t *version, char *lock, size_t lockcap) {
  sqlite3_bind_text(s->key, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s->key);
  const unsigned char *l = rc == SQLITE_ROW ? sqlite3_column_text(s->key, 1) : NULL;
  *version = rc == SQLITE_ROW ? sqlite3_column_int64(s->key, 0) : 0;
  snprintf(lock, lockcap, "%s", l ? (const char *)l : "");
  sqlite3_reset(s->key);
  sqlite3_clear_bindings(s->key);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* For a lock with no row yet: OK when one more row fits under max_locks,
 * else FULL (or ERROR). */
static store_result lock_room(store *s) {
  int64_t n;
  if (query_int(s->count_locks, &n) < 0) return STORE_ERROR;
  return n < s->max_locks ? STORE_OK : STORE_FULL;
}

static int write_highest(store *s, const char *lock, int64_t fence) {
  sqlite3_bind_text(s->set_highest, 1, lock, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s->set_highest, 2, fence);
  return exec_stmt(s->set_highest);
}

/* Ends the open transaction: COMMIT when `result` is OK, else ROLLBACK.
 * A failed COMMIT is rolled back and becomes STORE_ERROR. */
static store_result finish(store *s, store_result result) {
  if (result == STORE_OK && exec_stmt(s->commit) == 0) return STORE_OK;
  if (result == STORE_OK || result == STORE_ERROR) result = failed(s);
  /* A failed COMMIT may already have ended the transaction. */
  if (!sqlite3_get_autocommit(s->db)) exec_stmt(s->rollback);
  return result;
}

store_result store_put(store *s, const char *key, const char *value, size_t len,
                       const char *lock, int64_t fence, int64_t if_match, int64_t *version,
                       int64_t *highest) {
  *version = 0;
  *highest = 0;
  if (exec_stmt(s->begin) != 0) return failed(s);
  int64_t v;
  char bound[256];
  if (read_key(s, key, &v, bound, sizeof bound) != 0) return finish(s, STORE_ERROR);
  if (fence > 0) {
    /* The key's lock first: another lock's fences say nothing of this key. */
    if (bound[0] != '\0' && strcmp(bound, lock) != 0) return finish(s, STORE_WRONG_LOCK);
    int64_t h;
    int known = read_highest(s, lock, &h);
    if (known < 0) return finish(s, STORE_ERROR);
    if (fence < h) {
      *highest = h;
      return finish(s, STORE_STALE);
    }
    store_result room = known ? STORE_OK : lock_room(s);
    if (room != STORE_OK) return finish(s, room);
  }
  if (if_match >= 0 && v != if_match) {
    *version = v;
    return finish(s, STORE_MISMATCH);
  }
  if (fence > 0 && write_highest(s, lock, fence) != 0) return finish(s, STORE_ERROR);
  sqlite3_bind_text(s->put, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(s->put, 2, value, (int)len, SQLITE_STATIC);
  sqlite3_bind_int64(s->put, 3, fence);
  if (fence > 0) sqlite3_bind_text(s->put, 4, lock, -1, SQLITE_STATIC); /* else NULL */
  if (query_int(s->put, version) != 1) return finish(s, STORE_ERROR);
  *highest = fence;
  return finish(s, STORE_OK);
}

store_result store_get(store *s, const char *key, char **value, size_t *len, int64_t *version,
                       int64_t *fence, char *lock, size_t lockcap) {
  *value = NULL;
  sqlite3_bind_text(s->get, 1, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s->get);
  store_result r = rc == SQLITE_ROW ? STORE_OK : rc == SQLITE_DONE ? STORE_NOT_FOUND : failed(s);
  if (r == STORE_OK) {
    const unsigned char *v = sqlite3_column_text(s->get, 0);
    *len = (size_t)sqlite3_column_bytes(s->get, 0);
    *version = sqlite3_column_int64(s->get, 1);
    *fence = sqlite3_column_int64(s->get, 2);
    const unsigned char *l = sqlite3_column_text(s->get, 3);
    snprintf(lock, lockcap, "%s", l ? (const char *)l : "");
    if ((*value = malloc(*len + 1)) == NULL) {
      snprintf(s->err, sizeof s->err, "out of memory");
      r = STORE_ERROR;
    } else {
      if (*len) memcpy(*value, v, *len);
      (*value)[*len] = '\0';
    }
  }
  sqlite3_reset(s->get);
  sqlite3_clear_bindings(s->get);
  return r;
}

store_result store_claim(store *s, const char *lock, int64_t fence, int64_t *highest) {
  *highest = 0;
  if (exec_stmt(s->begin) != 0) return failed(s);
  int64_t h;
  int known = read_highest(s, lock, &h);
  if (known < 0) return finish(s, STORE_ERROR);
  if (fence < h) {
    *highest = h;
    return finish(s, STORE_STALE);
  }
  store_result room = known ? STORE_OK : lock_room(s);
  if (room != STORE_OK) return finish(s, room);
  if (write_highest(s, lock, fence) != 0) return finish(s, STORE_ERROR);
  *highest = fence;
  return finish(s, STORE_OK);
}

store_result store_highest(store *s, const char *lock, int64_t *highest) {
  return read_highest(s, lock, highest) >= 0 ? STORE_OK : failed(s);
}
