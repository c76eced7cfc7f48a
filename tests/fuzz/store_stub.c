/* store_stub.c: an in-memory server/store.h for the fuzz harness, so that
 * picketd's request path (api.c) can be fuzzed without Redis.
 *
 * It keeps what the scripts in proto/redis keep, per lock: a fence counter that
 * never goes down and is never forgotten, and the live grant (lease id,
 * owner, expiry). Time is a virtual clock that advances one millisecond
 * per call, so the same input always gives the same answers. The table is
 * bounded (STUB_LOCKS names); past it an acquire answers the way a full
 * Redis does (an OOM error reply), and nothing is evicted, because a
 * forgotten fence counter is exactly what picket must never see.
 *
 * Failures are chosen per request (stub_request_begin): a failing call
 * changes nothing and returns the status and message store_redis.c would,
 * except not_replicated after a grant, which (like the real store) has
 * already spent a fence. */
#include "store_stub.h"

#include "cursor.h"

#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STUB_LOCKS 16
#define STUB_CLOCK_START 1000000
#define STUB_NO_EXPIRY INT64_MAX

typedef struct {
  char name[PICKET_PROTO_NAME_MAX + 1];
  int64_t fence;
  int has_grant;
  char lease[PICKET_PROTO_LEASE_LEN + 1];
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  int64_t expires_ms;
} stub_lock;

static stub_lock locks[STUB_LOCKS];
static int nlocks;
static int64_t now_ms = STUB_CLOCK_START;
static stub_fault fault;
static stub_when when;
static int calls;
static int last_created;
static int preheld;
static char preheld_owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
static int64_t preheld_ttl_ms;

/* Tokens' lease counts, as proto/redis/quota.lua keeps them: per token a
 * set of lock names with their expiry. An input has at most 32 requests
 * (fuzz_api.c's MAX_REQUESTS) and the stub is reset for each, and a
 * request takes at most one entry: 32 entries never fill. */
#define STUB_COUNTED 32
static struct {
  char token[AUTH_NAME_MAX + 1];
  char name[PICKET_PROTO_NAME_MAX + 1];
  int64_t expiry_ms;
} counted[STUB_COUNTED];

void stub_reset(void) {
  memset(locks, 0, sizeof locks);
  nlocks = 0;
  memset(counted, 0, sizeof counted);
  now_ms = STUB_CLOCK_START;
  fault = STUB_FAULT_NONE;
  when = STUB_WHEN_EVERY;
  calls = 0;
  preheld = 0;
}

void stub_request_begin(stub_fault f, stub_when w) {
  fault = f;
  when = w;
  calls = 0;
}

void stub_preheld(const char *owner, size_t len, int64_t ttl_ms) {
  preheld = 1;
  preheld_ttl_ms = ttl_ms;
  /* store_redis.c copy_owner: a string of up to OWNER_BYTES_MAX bytes is
   * taken as it is (an embedded NUL ends it), a longer one is dropped. */
  preheld_owner[0] = '\0';
  if (len <= PICKET_PROTO_OWNER_BYTES_MAX) {
    memcpy(preheld_owner, owner, len);
    preheld_owner[len] = '\0';
  }
}

void stub_advance_ms(int64_t ms) { now_ms += ms; }

int stub_calls(void) { return calls; }

int stub_last_created(void) { return last_created; }

/* PTTL: the remaining TTL, or -1 for a key without expiry. */
static int64_t pttl(const stub_lock *l) {
  return l->expires_ms == STUB_NO_EXPIRY ? -1 : l->expires_ms - now_ms;
}

static stub_lock *find(const char *name) {
  for (int i = 0; i < nlocks; i++)
    if (strcmp(locks[i].name, name) == 0) return &locks[i];
  return NULL;
}

/* The lock's entry, created when `create` is set and there is room. */
static stub_lock *lookup(const char *name, int create) {
  stub_lock *l = find(name);
  if (l == NULL && create && nlocks < STUB_LOCKS) {
    l = &locks[nlocks++];
    snprintf(l->name, sizeof l->name, "%s", name);
  }
  if (l && l->has_grant && l->expires_ms <= now_ms) l->has_grant = 0; /* PX expiry */
  return l;
}

int stub_lookup(const char *name, int64_t *fence, int *held, char *lease) {
  stub_lock *l = lookup(name, 0);
  if (l == NULL) return 0;
  *fence = l->fence;
  *held = l->has_grant;
  memcpy(lease, l->lease, sizeof l->lease);
  return 1;
}

/* Counts a call, moves the clock, and installs a pending foreign holder.
 * Returns the fault this call must answer with, or STUB_FAULT_NONE. */
static stub_fault enter(const char *name) {
  int i = calls++;
  now_ms++;
  if (name && preheld) {
    preheld = 0;
    stub_lock *l = lookup(name, 1);
    if (l && !l->has_grant) {
      l->fence++; /* the foreign grant took a fence, as acquire.lua does */
      l->has_grant = 1;
      memset(l->lease, 'f', PICKET_PROTO_LEASE_LEN);
      l->lease[PICKET_PROTO_LEASE_LEN] = '\0';
      memcpy(l->owner, preheld_owner, sizeof l->owner);
      l->expires_ms = preheld_ttl_ms < 0 ? STUB_NO_EXPIRY : now_ms + preheld_ttl_ms;
    }
  }
  int hit = when == STUB_WHEN_EVERY || (when == STUB_WHEN_FIRST && i == 0) ||
            (when == STUB_WHEN_SECOND && i == 1) || (when == STUB_WHEN_AFTER_FIRST && i >= 1);
  return hit ? fault : STUB_FAULT_NONE;
}

/* The answer to a failing call; `odd` is the status this call never gives. */
static store_status failed(stub_fault f, store_status odd, store_result *r) {
  switch (f) {
    case STUB_FAULT_UNAVAIL:
      snprintf(r->err, sizeof r->err, "Redis connection failed: Connection refused");
      return STORE_EUNAVAIL;
    case STUB_FAULT_REPLY:
      snprintf(r->err, sizeof r->err,
               "Redis error: WRONGTYPE Operation against a key holding the wrong kind of value");
      return STORE_EREPLY;
    case STUB_FAULT_MISCONF:
      snprintf(r->err, sizeof r->err,
               "Redis maxmemory-policy is allkeys-lru: it could evict fence counters");
      return STORE_EMISCONF;
    case STUB_FAULT_NOTREPL:
      snprintf(r->err, sizeof r->err, "only 0 of 1 replicas acknowledged within 100 ms");
      return STORE_ENOTREPL;
    case STUB_FAULT_UNAVAIL_QUIET: r->err[0] = '\0'; return STORE_EUNAVAIL;
    case STUB_FAULT_ODD_STATUS: return odd;
    case STUB_FAULT_LONG_MESSAGE:
    default:
      memset(r->err, 'x', sizeof r->err - 1);
      memcpy(r->err, "Redis error: ERR ", 17);
      r->err[sizeof r->err - 1] = '\0';
      return STORE_EREPLY;
  }
}

int store_init(const config *cfg, char *err, size_t errlen) {
  stub_reset();
  return 0;
}

void store_thread_done(void) {}

/* A token's lease count (see `counted` above), kept by the lock calls
 * themselves, as leases.lua keeps it in the scripts. */
static int counts(const store_op *op) { return op->token && op->max_leases > 0; }

/* The index of op's lock in its token's count, or -1. Forgets expired
 * entries first (ZREMRANGEBYSCORE); *mine gets the token's entries, and
 * *free_slot an empty one (-1: none). */
static int count_find(const store_op *op, int *mine, int *free_slot) {
  int at = -1;
  *mine = 0;
  *free_slot = -1;
  for (int i = 0; i < STUB_COUNTED; i++) {
    if (counted[i].expiry_ms <= now_ms) counted[i].token[0] = '\0';
    if (counted[i].token[0] == '\0') {
      if (*free_slot < 0) *free_slot = i;
      continue;
    }
    if (strcmp(counted[i].token, op->token) != 0) continue;
    ++*mine;
    if (strcmp(counted[i].name, op->name) == 0) at = i;
  }
  return at;
}

/* Whether a new grant of op's lock fits under the token's max_leases. A
 * full table would refuse too (stricter, never looser), but it does not
 * fill: see STUB_COUNTED. */
static int count_room(const store_op *op) {
  int mine, free_slot, at = count_find(op, &mine, &free_slot);
  return at >= 0 || (mine < op->max_leases && free_slot >= 0);
}

/* Counts op's lock until now + ttl_ms, never back: `add` for a grant (ZADD),
 * else only an entry there already moves (a renew: ZADD XX GT). */
static void count_hold(const store_op *op, int add) {
  int mine, free_slot, at = count_find(op, &mine, &free_slot);
  if (at < 0 && add && free_slot >= 0) {
    at = free_slot;
    snprintf(counted[at].token, sizeof counted[at].token, "%s", op->token);
    snprintf(counted[at].name, sizeof counted[at].name, "%s", op->name);
    counted[at].expiry_ms = 0;
  }
  if (at >= 0 && now_ms + op->ttl_ms > counted[at].expiry_ms)
    counted[at].expiry_ms = now_ms + op->ttl_ms;
}

static void count_drop(const store_op *op) {
  int mine, free_slot, at = count_find(op, &mine, &free_slot);
  if (at >= 0) counted[at].token[0] = '\0';
}

/* The lock whose live grant is op's lease, or NULL (renew and release:
 * the lease is lost). */
static stub_lock *held_by(const store_op *op) {
  stub_lock *l = lookup(op->name, 0);
  return l && l->has_grant && strcmp(l->lease, op->lease) == 0 ? l : NULL;
}

/* The lock's entry, made if need be; NULL (an OOM reply in r) when the
 * table is full, as a Redis at maxmemory refuses the write. */
static stub_lock *lookup_or_oom(const char *name, store_result *r) {
  stub_lock *l = lookup(name, 1);
  if (l == NULL)
    snprintf(r->err, sizeof r->err,
             "Redis error: OOM command not allowed when used memory > 'maxmemory'.");
  return l;
}

static store_status stub_acquire(const store_op *op, store_result *r) {
  const char *name = op->name, *lease = op->lease;
  stub_fault f = enter(name);
  if (f == STUB_FAULT_NOTREPL) { /* granted, WAIT fell short, undone: the fence is spent */
    stub_lock *l = lookup(name, 1);
    if (l && !l->has_grant) l->fence++;
  }
  if (f != STUB_FAULT_NONE) return failed(f, STORE_LOST, r);
  stub_lock *l = lookup_or_oom(name, r);
  if (l == NULL) return STORE_EREPLY;
  if (l->has_grant && strcmp(l->lease, lease) != 0) {
    r->ttl_ms = pttl(l);
    memcpy(r->owner, l->owner, sizeof r->owner);
    return STORE_HELD;
  }
  r->created = !l->has_grant;
  if (r->created && counts(op) && !count_room(op)) return STORE_EQUOTA;
  last_created = r->created;
  if (r->created) {
    l->fence++;
    l->has_grant = 1;
    memcpy(l->lease, lease, sizeof l->lease);
    snprintf(l->owner, sizeof l->owner, "%s", op->owner ? op->owner : "");
  }
  l->expires_ms = now_ms + op->ttl_ms;
  r->fence = l->fence;
  r->ttl_ms = op->ttl_ms; /* (no hold cap or lock-delay here: those are the scripts') */
  if (counts(op)) count_hold(op, 1);
  return STORE_OK;
}

static store_status stub_renew(const store_op *op, store_result *r) {
  stub_fault f = enter(op->name);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_HELD, r);
  stub_lock *l = held_by(op);
  if (l == NULL) return STORE_LOST;
  l->expires_ms = now_ms + op->ttl_ms;
  r->fence = l->fence;
  r->ttl_ms = op->ttl_ms;
  if (counts(op)) count_hold(op, 0);
  return STORE_OK;
}

static store_status stub_release(const store_op *op, store_result *r) {
  stub_fault f = enter(op->name);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_HELD, r);
  stub_lock *l = held_by(op);
  if (l == NULL) return STORE_LOST;
  l->has_grant = 0;
  if (counts(op)) count_drop(op);
  return STORE_OK;
}

static store_status stub_inspect(const char *name, store_result *r) {
  stub_fault f = enter(name);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_LOST, r);
  stub_lock *l = lookup(name, 0);
  if (l == NULL) return STORE_OK; /* never granted: fence 0, not held */
  r->fence = l->fence;
  r->held = l->has_grant;
  if (l->has_grant) {
    r->ttl_ms = pttl(l);
    memcpy(r->owner, l->owner, sizeof r->owner);
  }
  return STORE_OK;
}

/* Semaphores and read/write locks, each modelled as one exclusive lease
 * under "s/NAME" or "r/NAME": a semaphore of one permit (slot 0), a
 * rwlock whose readers exclude each other too. Stricter than the scripts,
 * and every reply the API builds from it is one the real store can give. */
static store_status stub_family(store_op *op) {
  char key[PICKET_PROTO_NAME_MAX + 3];
  int rw = op->kind >= STORE_OP_RW_ACQUIRE;
  snprintf(key, sizeof key, "%c/%s", rw ? 'r' : 's', op->name);
  store_op as = *op;
  as.name = key;
  as.kind = store_op_base(op->kind);
  store_result *r = &op->r;
  store_status st;
  switch (as.kind) {
    case STORE_OP_ACQUIRE: st = stub_acquire(&as, r); break;
    case STORE_OP_RENEW: st = stub_renew(&as, r); break;
    case STORE_OP_RELEASE: st = stub_release(&as, r); break;
    default:
      if (op->kind == STORE_OP_RW_FORGET) { /* a writer stopped waiting */
        stub_fault f = enter(key);
        return f != STUB_FAULT_NONE ? failed(f, STORE_HELD, r) : STORE_OK;
      }
      st = stub_inspect(key, r);
      if (st != STORE_OK) return st;
      if (rw) return STORE_OK; /* the holder shows as the writer; no readers */
      r->limit = r->live = r->held ? 1 : 0;
      if (r->held) {
        r->permits = calloc(1, sizeof *r->permits);
        if (r->permits == NULL) return STORE_EUNAVAIL;
        r->npermits = 1;
        r->permits[0].fence = r->fence;
        r->permits[0].ttl_ms = r->ttl_ms;
        memcpy(r->permits[0].owner, r->owner, sizeof r->owner);
      }
      return STORE_OK;
  }
  if (st == STORE_OK) r->permit = 0;
  return st;
}

void store_run(store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  switch (op->kind) {
    case STORE_OP_ACQUIRE: op->st = stub_acquire(op, &op->r); break;
    case STORE_OP_RENEW: op->st = stub_renew(op, &op->r); break;
    case STORE_OP_RELEASE: op->st = stub_release(op, &op->r); break;
    case STORE_OP_INSPECT: op->st = stub_inspect(op->name, &op->r); break;
    case STORE_OP_LIST:
      op->st = store_list(op->name, (int)op->limit, op->cursor, &op->r.more, &op->r);
      break;
    case STORE_OP_BREAK: op->st = store_break(op->name, op->who, op->fence, &op->r); break;
    case STORE_OP_READY: op->st = store_ready((int)op->limit, &op->r, &op->r.body); break;
    default: op->st = stub_family(op); break;
  }
}

/* The stub's index is its table: every name with a live grant, in table
 * order, "s/" and "r/" ones (stub_family) listed as a semaphore or
 * read/write lock. The cursor's member is the last name given. */
store_status store_list(const char *prefix, int limit, store_cursor *at, int *more,
                        store_result *r) {
  memset(r, 0, sizeof *r);
  *more = 0;
  stub_fault f = enter(NULL);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_HELD, r);
  int slot, start = 0;
  char after[PICKET_PROTO_NAME_MAX + 3];
  if (store_cursor_read(at, prefix, &slot, after) < 0) return STORE_EARG;
  r->entries = calloc(STUB_LOCKS, sizeof *r->entries);
  if (r->entries == NULL) return STORE_EUNAVAIL;
  if (after[0]) /* after the entry whose "NAME K" member is after */
    for (int i = 0; i < nlocks; i++) {
      const char *n = locks[i].name;
      int fam = n[0] && n[1] == '/' && (n[0] == 's' || n[0] == 'r');
      char member[PICKET_PROTO_NAME_MAX + 3];
      snprintf(member, sizeof member, "%.200s %c", fam ? n + 2 : n, fam ? n[0] : 'l');
      if (strcmp(member, after) == 0) start = i + 1;
    }
  for (int i = start; i < nlocks; i++) {
    stub_lock *l = lookup(locks[i].name, 0);
    int fam = l->name[1] == '/' && (l->name[0] == 's' || l->name[0] == 'r');
    const char *name = fam ? l->name + 2 : l->name;
    if (!l->has_grant || strncmp(name, prefix, strlen(prefix)) != 0) continue;
    if (r->nentries == limit) {
      *more = 1;
      break;
    }
    store_entry *e = &r->entries[r->nentries++];
    e->kind = fam ? l->name[0] : 'l';
    snprintf(e->name, sizeof e->name, "%s", name);
    e->holders = 1;
    e->fence = e->kind == 's' ? 0 : l->fence;
    e->ttl_ms = pttl(l) > 0 ? pttl(l) : 1;
    e->limit = e->kind == 's' ? 1 : 0;
    memcpy(e->owner, l->owner, sizeof e->owner);
    snprintf(after, sizeof after, "%s %c", name, e->kind);
  }
  if (*more) store_cursor_write(at, 0, after);
  else at->text[0] = '\0';
  return STORE_OK;
}

/* break.lua: the grant goes, the fence moves on whether or not one was
 * held (an unknown name gets an entry, as the counter key would); with a
 * fence, a grant of another fence is left alone (held). */
store_status store_break(const char *name, const char *who, int64_t fence, store_result *r) {
  (void)who;
  memset(r, 0, sizeof *r);
  stub_fault f = enter(name);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_LOST, r);
  stub_lock *l = lookup_or_oom(name, r);
  if (l == NULL) return STORE_EREPLY;
  if (fence > 0 && l->has_grant && l->fence != fence) {
    r->fence = l->fence;
    r->ttl_ms = 1000;
    memcpy(r->owner, l->owner, sizeof r->owner);
    return STORE_HELD;
  }
  r->held = l->has_grant;
  if (l->has_grant) memcpy(r->owner, l->owner, sizeof r->owner);
  l->has_grant = 0;
  r->fence = ++l->fence;
  r->at = now_ms;
  return STORE_OK;
}

/* Lock events: the in-memory store follows no lock, so a follower never
 * reports one ready. Complete for the fuzz harness, which never starts the
 * events thread (events_start), their only caller; events_open and
 * events_close, which the fuzzer does reach, need none of them. */
store_events *store_events_new(const store_events_hooks *hooks, void *ctx) {
  (void)hooks;
  (void)ctx;
  return NULL;
}
void store_events_free(store_events *e) { (void)e; }
int store_events_add(store_events *e, const char *name) {
  (void)e;
  (void)name;
  return -1;
}
void store_events_remove(store_events *e, const char *name) {
  (void)e;
  (void)name;
}
int64_t store_events_run(store_events *e, int readable) {
  (void)e;
  (void)readable;
  return INT64_MAX;
}
int store_events_fd(const store_events *e) {
  (void)e;
  return -1;
}

store_status store_ready(int detail, store_result *r, json_t **body) {
  *body = NULL;
  stub_fault f = enter(NULL);
  if (f != STUB_FAULT_NONE) return failed(f, STORE_HELD, r);
  r->replicas = 0;
  /* The in-memory store is its own (single) node. */
  *body = detail ? json_pack("{s:s, s:i, s:s}", "status", "ready", "replicas", 0, "primary",
                             "in-memory")
                 : json_pack("{s:s, s:i}", "status", "ready", "replicas", 0);
  return STORE_OK;
}

/* The release feed and store_stop: the in-memory store runs no thread and
 * announces no release. Complete for the fuzz harness, which parks no
 * waiter (wait_start is never called under it: the harness retries a
 * waiting acquire's API_WAIT itself, api_retry_acquire). */
int store_feed_start(void (*released)(const char *key)) {
  (void)released;
  return 0;
}
void store_feed_want(int on) { (void)on; }
void store_feed_stop(void) {}
void store_stop(void) {}


/* No pipelining: the harness runs no loop (the runner, call.c, makes
 * every call on the harness's thread), so these are never called; they
 * exist because loop.c, which the core links, names them. */
int store_pipeline_enabled(void) { return 0; }
store_pipe *store_pipe_new(void) { return NULL; }
int store_pipe_connect(store_pipe *p) { return p ? 0 : -1; }
void store_pipe_free(store_pipe *p) { (void)p; }
int store_pipe_append(store_pipe *p, store_op *op) {
  (void)p;
  store_run(op);
  return -1;
}
void store_pipe_flush(store_pipe *p) { (void)p; }
int store_pipe_fd(const store_pipe *p, unsigned long *opens) {
  (void)p;
  *opens = 0;
  return -1;
}
void store_pipe_read(store_pipe *p) { (void)p; }
int64_t store_pipe_timeout_ms(const store_pipe *p) {
  (void)p;
  return -1;
}
void store_pipe_expire(store_pipe *p) { (void)p; }
