/* operators.c: what an operator does on Redis, and what the lock events
 * keep up: a listing of held names (proto/redis/list.lua, one index per
 * hash slot under --redis-cluster), a break (break.lua) with the broken
 * lease's place given back to its token, and the watch that keeps a lock's
 * events published (watch.lua, for store_events.c). Each is one or a few
 * direct calls (direct.c), on the calling thread.
 *
 * The index is a sorted set of "NAME K" members (one per hash slot under
 * --redis-cluster: a cursor's index number, store/cursor.h's
 * STORE_CURSOR_SLOTS of them, is a hash slot here). The grant scripts
 * (acquire.lua, semaphore.lua, rwlock.lua) put a name in, a release or a
 * break takes it out, and list.lua drops the names it finds expired, which
 * is what the background sweep (sweep.c) counts on; a page reads the index,
 * never a scan of Redis. A break is one script, break.lua. */
#include "operators.h"

#include <stdlib.h>
#include <string.h>

#include "cursor.h"
#include "direct.h"
#include "feed.h"
#include "lease_count.h"
#include "node.h"
#include "redis.h"

/* A listing call looks at most this many hash slots of Redis Cluster (a
 * page may come back short, with more set); so does each page of the
 * background sweep (sweep.c). */
#define LIST_SLOTS 512

store_status store_redis_list(const char *prefix, int limit, store_cursor *at, int *more,
                              store_result *r) {
  memset(r, 0, sizeof *r);
  *more = 0;
  int cluster = node_is_cluster(), slot;
  char after[PICKET_PROTO_NAME_MAX + 3];
  if (store_cursor_read(at, prefix, &slot, after) < 0) {
    set_err(r, "not a cursor of this %s", "listing");
    return STORE_EARG;
  }
  if (!cluster) slot = 0; /* one index */
  for (int visited = 0; visited < LIST_SLOTS; visited++) {
    store_op op = {.kind = STORE_OP_LIST, .name = prefix, .after = after,
                   .index_slot = slot, .limit = limit - r->nentries};
    store_redis_run(&op);
    if (op.st != STORE_OK) {
      store_result_clear(r);
      memcpy(r->err, op.r.err, sizeof r->err);
      return op.st;
    }
    if (op.r.nentries > 0) { /* append this slot's entries to the page */
      store_entry *all = realloc(r->entries, (size_t)(r->nentries + op.r.nentries) * sizeof *all);
      if (all == NULL) {
        store_result_clear(&op.r);
        store_result_clear(r);
        set_err(r, "out of memory listing %s", "held names");
        return STORE_EUNAVAIL;
      }
      memcpy(all + r->nentries, op.r.entries, (size_t)op.r.nentries * sizeof *all);
      r->entries = all;
      r->nentries += op.r.nentries;
    }
    store_result_clear(&op.r);
    if (op.r.next[0]) { /* this index has more */
      store_cursor_write(at, slot, op.r.next);
      *more = 1;
      return STORE_OK;
    }
    after[0] = '\0';
    if (!cluster || slot + 1 >= NODE_SLOTS) {
      at->text[0] = '\0';
      return STORE_OK;
    }
    slot++;
    if (r->nentries >= limit) break;
  }
  store_cursor_write(at, slot, ""); /* a full page, or LIST_SLOTS slots looked at */
  *more = 1;
  return STORE_OK;
}

store_status store_redis_break(const char *name, const char *who, int64_t fence,
                               store_result *r) {
  store_op op = {.kind = STORE_OP_BREAK, .name = name, .who = who, .fence = fence};
  store_redis_run(&op);
  *r = op.r;
  if (op.st != STORE_OK || r->token[0] == '\0') return op.st;
  /* The broken lease's place in its token's max_leases goes back now, not
   * at its TTL (quota.lua: the count may live in another slot). */
  store_op note = {.kind = STORE_OP_RELEASE, .name = name, .token = r->token, .max_leases = 1};
  lease_count_note(&note, "drop");
  if (direct_run(&note) != STORE_OK) lease_count_note_failed(&note);
  return op.st;
}

store_status store_redis_watch(const char *name, int64_t for_ms, store_result *r) {
  store_op op = {.kind = STORE_OP_WATCH, .name = name, .ttl_ms = for_ms};
  store_redis_run(&op);
  *r = op.r;
  return op.st;
}
