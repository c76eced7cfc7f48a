/* api_family.c: locks, semaphores and read/write locks, one row each
 * (api_family.h): what an acquire of each may say beyond the common
 * members, and how each family's grants, refusals and GETs read.
 *
 * The rows are the only place that knows the families apart: api.c runs
 * every call the same way and asks the row. A semaphore's permit and a
 * rwlock's lease are checked by fenced stores under a lock name the grant
 * states (fence_lock), so picket/fence.h needs no new concept. */
#include "api_family.h"

#include <stdio.h>
#include <string.h>

#include "api_json.h"
#include "metrics.h"
#include "signer.h"
#include "wait.h"

static const config *cfg;

void api_family_init(const config *c) { cfg = c; }

/* ---- locks ---------------------------------------------------------- */

static void lock_grant(api_response *resp, const api_call *call, int renewal) {
  const store_result *r = &call->op.r;
  char token[API_JSON_FENCE_TOKEN_MAX];
  api_json_fence_token(PICKET_PROTO_FENCE_KIND_LOCK, call->name, r->fence, token);
  if (renewal) {
    api_json_reply_fmt(resp, "{\"lock\":\"%s\",\"fence\":%lld,\"ttl_ms\":%lld%s}", call->name,
                       (long long)r->fence, (long long)r->ttl_ms, token);
    return;
  }
  char owner[API_JSON_OWNER_MAX];
  /* ttl_ms: the TTL given, which a hold cap may have cut below the ask */
  api_json_reply_fmt(resp,
                     "{\"lock\":\"%s\",\"lease\":\"%s\",\"fence\":%lld,\"ttl_ms\":%lld,\"owner\":%s%s}",
                     call->name, call->client_lease, (long long)r->fence, (long long)r->ttl_ms,
                     api_json_owner_literal(call->owner, owner), token);
}

/* 409 lock_delay: the last lease expired without a release and asked for
 * a lock-delay, which runs ms more (the store keeps it); the owner is
 * the expired lease's. Read/write locks share it. */
static void reply_delay(api_response *resp, const api_call *call, int64_t ms) {
  metrics_inc(M_ACQUIRE_DELAYED);
  char msg[300];
  snprintf(msg, sizeof msg, "lock '%s': its last lease expired without a release; no grant until "
           "its lock-delay has run", call->name);
  json_t *err = api_json_error(PICKET_PROTO_ERR_LOCK_DELAY, msg);
  json_object_set_new(err, "owner", api_json_owner(call->held_owner));
  api_json_reply_retry(resp, 409, err, ms);
}

/* 409 lock_held with when to retry, or lock_delay. */
static void lock_taken(api_response *resp, const api_call *call, int64_t ms) {
  if (call->held_delay) {
    reply_delay(resp, call, ms);
    return;
  }
  metrics_inc(M_ACQUIRE_HELD);
  char msg[300];
  snprintf(msg, sizeof msg, "lock '%s' is held by another lease", call->name);
  json_t *err = api_json_error(PICKET_PROTO_ERR_LOCK_HELD, msg);
  json_object_set_new(err, "owner", api_json_owner(call->held_owner));
  api_json_reply_retry(resp, 409, err, ms);
}

static void lock_inspect(api_response *resp, api_call *call) {
  const store_result *r = &call->op.r;
  /* A lease key without expiry (PTTL -1: PERSISTed by hand) is "held now",
   * as in lock_taken: the spec's ttl_ms is never negative. */
  int64_t ttl_ms = r->held && r->ttl_ms < 1 ? 1 : r->ttl_ms;
  json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:o}", "lock", call->name, "held", r->held, "fence",
                        (json_int_t)r->fence, "ttl_ms", (json_int_t)ttl_ms, "owner",
                        api_json_owner(r->held ? r->owner : NULL));
  /* an expired lease's lock-delay still to run: acquires get lock_delay */
  if (o && r->delay_ms > 0) json_object_set_new(o, "lock_delay_ms", json_integer(r->delay_ms));
  /* since when, how often renewed (null when not held, or granted before
   * picketd stamped grants), and who waits on this picketd */
  if (o) {
    int known = r->held && r->at > 0;
    json_object_set_new(o, "acquired_at", known ? json_integer(r->at) : json_null());
    json_object_set_new(o, "renewals", known ? json_integer(r->renewals) : json_null());
    json_object_set_new(o, "waiters", json_integer(wait_queue_length(call->key)));
  }
  api_json_reply(resp, 200, o);
}

/* ---- semaphores ----------------------------------------------------- */

/* required: a semaphore's limit is the caller's to say */
static int sem_args(json_t *body, api_call *call, api_response *resp) {
  if (json_object_get(body, "limit") == NULL) {
    char msg[120];
    snprintf(msg, sizeof msg, "limit is required: an integer from 1 to %lld",
             (long long)cfg->max_semaphore_limit);
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, msg);
    return -1;
  }
  return api_json_int(body, "limit", 1, cfg->max_semaphore_limit, 1, &call->limit, resp);
}

/* The lock name a permit's fence is checked under. */
static void sem_fence_lock(const api_call *call, int64_t permit, char lock[PICKET_PROTO_NAME_MAX + 1]) {
  if (picket_proto_sem_fence_lock(lock, PICKET_PROTO_NAME_MAX + 1, call->name, permit) < 0)
    lock[0] = '\0'; /* cannot be: names and limits are bounded to fit */
}

/* 200 for a permit granted (renewal: renewed), with where its fence goes. */
static void sem_grant(api_response *resp, const api_call *call, int renewal) {
  const store_result *r = &call->op.r;
  char lock[PICKET_PROTO_NAME_MAX + 1], token[API_JSON_FENCE_TOKEN_MAX];
  sem_fence_lock(call, r->permit, lock);
  api_json_fence_token(PICKET_PROTO_FENCE_KIND_PERMIT, lock, r->fence, token);
  if (renewal) {
    api_json_reply_fmt(resp, "{\"semaphore\":\"%s\",\"permit\":%lld,\"fence\":%lld,\"ttl_ms\":%lld,"
                       "\"fence_lock\":\"%s\"%s}", call->name, (long long)r->permit,
                       (long long)r->fence, (long long)r->ttl_ms, lock, token);
    return;
  }
  char owner[API_JSON_OWNER_MAX];
  api_json_reply_fmt(resp, "{\"semaphore\":\"%s\",\"permit\":%lld,\"lease\":\"%s\",\"fence\":%lld,"
                     "\"ttl_ms\":%lld,\"limit\":%lld,\"fence_lock\":\"%s\",\"owner\":%s%s}",
                     call->name, (long long)r->permit, call->client_lease, (long long)r->fence,
                     (long long)r->ttl_ms, (long long)call->limit, lock,
                     api_json_owner_literal(call->owner, owner), token);
}

/* 409 semaphore_full: when the first permit frees (its TTL, or its
 * lock-delay after it), unless a release comes first. */
static void sem_taken(api_response *resp, const api_call *call, int64_t ms) {
  metrics_inc(M_ACQUIRE_FULL);
  char msg[300];
  snprintf(msg, sizeof msg, "all %lld permits of semaphore '%s' are held", (long long)call->limit,
           call->name);
  api_json_reply_retry(resp, 409, api_json_error(PICKET_PROTO_ERR_SEMAPHORE_FULL, msg), ms);
}

/* GET /v1/semaphores/{name}: its limit, live permits (never a lease id) and
 * the acquires waiting on this picketd. */
static void sem_inspect(api_response *resp, api_call *call) {
  store_result *r = &call->op.r;
  json_t *permits = json_array();
  for (int i = 0; permits && i < r->npermits; i++) {
    const store_permit *p = &r->permits[i];
    char lock[PICKET_PROTO_NAME_MAX + 1];
    sem_fence_lock(call, p->permit, lock);
    json_t *o = json_pack("{s:I, s:I, s:I, s:o, s:s}", "permit", (json_int_t)p->permit, "fence",
                          (json_int_t)p->fence, "ttl_ms", (json_int_t)p->ttl_ms, "owner",
                          api_json_owner(p->owner), "fence_lock", lock);
    if (o && p->delay_ms > 0) json_object_set_new(o, "lock_delay_ms", json_integer(p->delay_ms));
    json_array_append_new(permits, o);
  }
  api_json_reply(resp, 200,
                 json_pack("{s:s, s:I, s:I, s:o, s:i}", "semaphore", call->name, "limit",
                           (json_int_t)r->limit, "held", (json_int_t)r->live, "permits", permits,
                           "waiters", wait_queue_length(call->key)));
}

/* a semaphore's GET lists at most its limit's worth of permits */
static int64_t sem_inspect_max(void) { return cfg->max_semaphore_limit; }

/* ---- read/write locks ----------------------------------------------- */

/* required: "read" or "write" */
static int rw_args(json_t *body, api_call *call, api_response *resp) {
  const char *mode = json_string_value(json_object_get(body, "mode"));
  if (mode == NULL || (strcmp(mode, "read") != 0 && strcmp(mode, "write") != 0)) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, "mode is required: \"read\" or \"write\"");
    return -1;
  }
  call->write = strcmp(mode, "write") == 0;
  return 0;
}

static void rw_fence_lock(const api_call *call, char lock[PICKET_PROTO_NAME_MAX + 1]) {
  if (picket_proto_rw_fence_lock(lock, PICKET_PROTO_NAME_MAX + 1, call->name) < 0) lock[0] = '\0';
}

/* 200 for a read or write lease granted (renewal: renewed). */
static void rw_grant(api_response *resp, const api_call *call, int renewal) {
  const store_result *r = &call->op.r;
  char lock[PICKET_PROTO_NAME_MAX + 1], token[API_JSON_FENCE_TOKEN_MAX];
  rw_fence_lock(call, lock);
  int write = renewal ? !r->held_by : call->write;
  /* a read lease's fence is its epoch's, the last writer's: only the kind
   * tells their tokens apart, so that a reader cannot write */
  api_json_fence_token(write ? PICKET_PROTO_FENCE_KIND_WRITE : PICKET_PROTO_FENCE_KIND_READ, lock,
                       r->fence, token);
  if (renewal) {
    api_json_reply_fmt(resp, "{\"rwlock\":\"%s\",\"mode\":\"%s\",\"fence\":%lld,\"ttl_ms\":%lld,"
                       "\"fence_lock\":\"%s\"%s}", call->name, write ? "write" : "read",
                       (long long)r->fence, (long long)r->ttl_ms, lock, token);
    return;
  }
  char owner[API_JSON_OWNER_MAX];
  api_json_reply_fmt(resp, "{\"rwlock\":\"%s\",\"mode\":\"%s\",\"lease\":\"%s\",\"fence\":%lld,"
                     "\"ttl_ms\":%lld,\"fence_lock\":\"%s\",\"owner\":%s%s}", call->name,
                     write ? "write" : "read", call->client_lease, (long long)r->fence,
                     (long long)r->ttl_ms, lock, api_json_owner_literal(call->owner, owner), token);
}

/* 409 lock_held for a read/write lock, saying who keeps this mode out; or
 * lock_delay. */
static void rw_taken(api_response *resp, const api_call *call, int64_t ms) {
  if (call->held_delay) {
    reply_delay(resp, call, ms);
    return;
  }
  metrics_inc(M_ACQUIRE_HELD);
  static const char *const why[] = {"a writer holds it", "readers hold it",
                                    "a writer is waiting for it (readers queue behind writers)",
                                    "it has as many read leases as it may (--max-readers)"};
  int by = call->held_by >= 0 && call->held_by < 4 ? call->held_by : 0;
  char msg[360];
  snprintf(msg, sizeof msg, "read/write lock '%s' cannot be had for %s: %s", call->name,
           call->write ? "writing" : "reading", why[by]);
  /* like semaphore_full: a refusal of this lock's state, not of the
   * caller, so 409 with when the first read lease ends */
  json_t *err = api_json_error(by == 3 ? PICKET_PROTO_ERR_TOO_MANY_READERS
                                       : PICKET_PROTO_ERR_LOCK_HELD, msg);
  json_object_set_new(err, "owner", api_json_owner(call->held_by == 0 ? call->held_owner : NULL));
  api_json_reply_retry(resp, 409, err, ms);
}

/* GET /v1/rwlocks/{name}: the writer, the readers (never a lease id), the
 * writers waiting, the last fence issued, and this picketd's waiters. */
static void rw_inspect(api_response *resp, api_call *call) {
  store_result *r = &call->op.r;
  char lock[PICKET_PROTO_NAME_MAX + 1];
  rw_fence_lock(call, lock);
  json_t *writer = json_null();
  if (r->held) {
    writer = json_pack("{s:I, s:o}", "ttl_ms", (json_int_t)r->ttl_ms, "owner",
                       api_json_owner(r->owner));
    if (writer && r->delay_ms > 0)
      json_object_set_new(writer, "lock_delay_ms", json_integer(r->delay_ms));
  }
  json_t *readers = json_array();
  for (int i = 0; readers && i < r->npermits; i++) {
    const store_permit *p = &r->permits[i];
    json_array_append_new(readers, json_pack("{s:I, s:I, s:o}", "fence", (json_int_t)p->fence,
                                              "ttl_ms", (json_int_t)p->ttl_ms, "owner",
                                              api_json_owner(p->owner)));
  }
  api_json_reply(resp, 200,
                 json_pack("{s:s, s:I, s:s, s:o, s:I, s:o, s:I, s:i}", "rwlock", call->name,
                           "fence", (json_int_t)r->fence, "fence_lock", lock, "writer", writer,
                           "readers", (json_int_t)r->live, "read_leases", readers,
                           "writers_waiting", (json_int_t)r->waiting, "waiters",
                           wait_queue_length(call->key)));
}

/* a read/write lock's GET lists its first readers */
static int64_t rw_inspect_max(void) { return PICKET_PROTO_RW_LISTED_MAX; }

/* ---- elections -------------------------------------------------------- */

/* An election is a lock kept under "/e/NAME" whose lease carries a value:
 * its leader holds the lease, candidates wait as acquires do, and the term
 * is the grant's fence, checked by storage under the election's own name
 * (docs/elections.md). */

int api_family_value(json_t *body, int required, api_call *call, api_response *resp) {
  json_t *v = json_object_get(body, "value");
  call->value[0] = '\0';
  call->has_value = v != NULL;
  if (v == NULL && required)
    return api_json_bad_field(resp, "%s is required: a string, or null to clear it", "value", 0, 0);
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_string(v) || !picket_proto_value_valid(json_string_value(v), json_string_length(v)))
    return api_json_bad_field(resp, "%s must be null or a string of up to %lld bytes of UTF-8 "
                              "without control characters", "value",
                              PICKET_PROTO_VALUE_BYTES_MAX, 0);
  memcpy(call->value, json_string_value(v), json_string_length(v) + 1);
  return 0;
}

static int el_args(json_t *body, api_call *call, api_response *resp) {
  return api_family_value(body, 0, call, resp);
}

static json_t *el_value(const char *v) { return v && v[0] ? json_string(v) : json_null(); }

/* The term's signed token, as a lock's fence's: the election's name is the
 * resource storage checks it under. */
static void el_token(json_t *o, const api_call *call, int64_t term) {
  char token[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  if (o && signer_sign(PICKET_PROTO_FENCE_KIND_LOCK, call->name, term, token) == 0)
    json_object_set_new(o, "fence_token", json_string(token));
}

/* 200 for a leadership won (renewal 0), renewed, or proclaimed (a renewal
 * that carried a value). */
static void el_grant(api_response *resp, const api_call *call, int renewal) {
  const store_result *r = &call->op.r;
  json_t *o = json_pack("{s:s, s:I, s:I}", "election", call->name, "term", (json_int_t)r->fence,
                        "ttl_ms", (json_int_t)r->ttl_ms);
  if (o && !renewal) {
    json_object_set_new(o, "lease", json_string(call->client_lease));
    json_object_set_new(o, "owner", api_json_owner(call->owner));
  }
  if (o && (!renewal || call->has_value)) json_object_set_new(o, "value", el_value(call->value));
  el_token(o, call, r->fence);
  api_json_reply(resp, 200, o);
}

/* 409 leader_exists, with when the leader's lease ends unless renewed. */
static void el_taken(api_response *resp, const api_call *call, int64_t ms) {
  metrics_inc(M_ACQUIRE_HELD);
  char msg[300];
  snprintf(msg, sizeof msg, "election '%s' has a leader", call->name);
  json_t *err = api_json_error(PICKET_PROTO_ERR_LEADER_EXISTS, msg);
  json_object_set_new(err, "owner", api_json_owner(call->held_owner));
  api_json_reply_retry(resp, 409, err, ms);
}

json_t *api_family_leader(const store_result *r) {
  if (!r->held) return json_null();
  return json_pack("{s:I, s:o, s:o, s:o, s:I}", "term", (json_int_t)r->fence, "value",
                   el_value(r->value), "owner", api_json_owner(r->owner), "since",
                   r->at > 0 ? json_integer(r->at) : json_null(), "ttl_ms",
                   (json_int_t)(r->ttl_ms < 1 ? 1 : r->ttl_ms));
}

/* GET /v1/elections/{name}: the leader (never its lease), the last term
 * issued, and the candidates waiting on this picketd. */
static void el_inspect(api_response *resp, api_call *call) {
  const store_result *r = &call->op.r;
  api_json_reply(resp, 200,
                 json_pack("{s:s, s:o, s:I, s:i}", "election", call->name, "leader",
                           api_family_leader(r), "term", (json_int_t)r->fence, "candidates",
                           wait_queue_length(call->key)));
}

/* ---- the table ------------------------------------------------------ */

#define COMMON_FIELDS "ttl_ms", "wait_ms", "owner", "lease", "lock_delay_ms", "max_hold_ms"
static const char *const lock_fields[] = {COMMON_FIELDS, NULL};
static const char *const sem_fields[] = {COMMON_FIELDS, "limit", NULL};
static const char *const rw_fields[] = {COMMON_FIELDS, "mode", NULL};
static const char *const el_fields[] = {"ttl_ms", "wait_ms", "owner", "lease", "value", NULL};
#define LEASE_ACTIONS {"acquire", "renew", "release"}, "released"

static const api_family families[] = {
    {"/v1/locks/", "lock", "", "", LEASE_ACTIONS, 0, PICKET_PROTO_NAME_MAX, NULL, STORE_OP_ACQUIRE,
     lock_fields, NULL, lock_grant, lock_taken, lock_inspect, NULL},
    {"/v1/semaphores/", "semaphore", "s/", "", LEASE_ACTIONS, 0, PICKET_PROTO_SEM_NAME_MAX,
     "semaphore names are at most 180 bytes: a permit's fence is checked under NAME:permit:N, a "
     "lock name of at most 200",
     STORE_OP_SEM_ACQUIRE, sem_fields, sem_args, sem_grant, sem_taken, sem_inspect,
     sem_inspect_max},
    {"/v1/rwlocks/", "rwlock", "r/", "", LEASE_ACTIONS, 0, PICKET_PROTO_RW_NAME_MAX,
     "read/write lock names are at most 197 bytes: their fences are checked under NAME:rw, a lock "
     "name of at most 200",
     STORE_OP_RW_ACQUIRE, rw_fields, rw_args, rw_grant, rw_taken, rw_inspect,
     rw_inspect_max},
    {"/v1/elections/", "election", PICKET_PROTO_ELECTION_STORE_PREFIX,
     PICKET_PROTO_ELECTION_STORE_PREFIX, {"campaign", "renew", "resign"}, "resigned", 1,
     PICKET_PROTO_ELECTION_NAME_MAX,
     "election names are at most 197 bytes: the store keeps an election as the lock /e/NAME",
     STORE_OP_ACQUIRE, el_fields, el_args, el_grant, el_taken, el_inspect, NULL},
};

const api_family *api_family_of(const char *path) {
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    if (strncmp(path, families[i].prefix, strlen(families[i].prefix)) == 0) return &families[i];
  return NULL;
}
