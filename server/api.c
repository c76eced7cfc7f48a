/* api.c: one handler per endpoint of API v1 (proto/openapi.yaml), plus the
 * routing, body parsing and JSON replies they share.
 *
 * Every input is checked before anything is changed: a request that fails
 * validation never reaches the store. Store results become HTTP statuses
 * and error codes here and nowhere else, through the proto error table. */
#include "api.h"

#include "api_admin.h"
#include "api_family.h"
#include "api_json.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "call.h"
#include "clock.h"
#include "conns.h"
#include "conns_token.h"
#include "events.h"
#include "holds.h"
#include "log.h"
#include "origin.h"
#include "quota.h"
#include "signer.h"
#include "store.h"
#include "ui.h"
#include "wait.h"

static const config *cfg;

void api_init(const config *c) {
  cfg = c;
  api_family_init(c);
  events_init(c);
}

#define UNAVAILABLE_RETRY_MS 200 /* a waiting acquire's next try after a 503 */

static api_result fail(api_response *resp, picket_proto_err e, const char *message) {
  api_error(resp, e, message);
  return API_DONE;
}

/* 409 limit_mismatch: the live permits of a semaphore use another limit;
 * never a second semaphore of the same name. */
static void reply_limit_mismatch(api_response *resp, const api_call *call) {
  char msg[300];
  snprintf(msg, sizeof msg, "semaphore '%s' has live permits granted with limit %lld, not %lld",
           call->name, (long long)call->op.r.limit, (long long)call->limit);
  json_t *err = api_json_error(PICKET_PROTO_ERR_LIMIT_MISMATCH, msg);
  json_object_set_new(err, "limit", json_integer(call->op.r.limit));
  api_json_reply(resp, 409, json_pack("{s:o}", "error", err));
}

/* A store call that outlives its request (the undo of a grant nobody
 * received, a writer's forget): a copy of what it names, handed to the
 * runner and freed when it is done. Its outcome changes nothing: a
 * failure leaves the lease to its TTL, the mark to its wait's end. */
typedef struct {
  store_op op;
  char name[PICKET_PROTO_NAME_MAX + 1];
  char lease[PICKET_PROTO_LEASE_LEN + 1];
  char token[AUTH_NAME_MAX + 1];
} detached_call;

static void detached_done(store_op *op) {
  store_result_clear(&op->r);
  free(op); /* the first member of its detached_call */
}

static void submit_detached(store_op_kind kind, const char *name, const char *lease,
                            const char *token, int64_t max_leases) {
  detached_call *d = calloc(1, sizeof *d);
  if (d == NULL) return; /* as a failure would: left to the TTL */
  snprintf(d->name, sizeof d->name, "%s", name);
  snprintf(d->lease, sizeof d->lease, "%s", lease);
  snprintf(d->token, sizeof d->token, "%s", token ? token : "");
  d->op = (store_op){.kind = kind, .name = d->name, .lease = d->lease,
                     .token = token ? d->token : NULL, .max_leases = max_leases,
                     .done = detached_done};
  call_submit(&d->op);
}

/* The store keeps a writer that waits as a mark that keeps new readers
 * out (until its wait would end, at the latest): any end of the call but a
 * grant, which takes the mark out itself, must take it out too, or one
 * refused writer (429 max_waiters, 503 too_many_waiters) would keep every
 * reader out for its whole wait_ms. */
/* Whether the call's end must take its writer's mark out (and then marks
 * it as done). */
static int must_forget(api_call *call) {
  if (!call->marked || call->forgotten) return 0;
  if (store_op_base(call->op.kind) == STORE_OP_ACQUIRE && call->op.st == STORE_OK) return 0;
  /* A store that just did not answer would most likely not answer this
   * either, and a second timeout would hold the 503 back: what it may
   * have marked ends with the writer's wait at the latest (a waiting
   * writer's last try is only unavailable at its wait's end). */
  if (call->op.st == STORE_EUNAVAIL) return 0;
  call->forgotten = 1;
  return 1;
}

int api_wait_left_call(api_call *call) {
  if (!must_forget(call)) return 0;
  memset(&call->op, 0, sizeof call->op);
  call->op.kind = STORE_OP_RW_FORGET;
  call->op.name = call->store_name;
  call->op.lease = call->lease;
  return 1;
}

void api_wait_left(api_call *call) {
  /* a failure leaves it to its wait's end */
  if (must_forget(call)) submit_detached(STORE_OP_RW_FORGET, call->store_name, call->lease, NULL, 0);
}

/* Maps a failed store call to its reply. */
static api_result store_failure(api_response *resp, store_status st, const store_result *r,
                                const api_call *call) {
  api_json_store_failure(resp, st, r, call);
  return API_DONE;
}

/* ---- request bodies ------------------------------------------------- */

/* ttl_ms when a body leaves it out: the protocol default, or --max-ttl-ms
 * when that is lower. */
static int64_t ttl_default(void) {
  return PICKET_PROTO_TTL_DEFAULT_MS < cfg->max_ttl_ms ? PICKET_PROTO_TTL_DEFAULT_MS
                                                       : cfg->max_ttl_ms;
}

/* The lease id a client knows, and the one the store holds for it: the same
 * without --auth-file, else bound to the caller's token. */
static void bind_lease(api_call *call) {
  if (call->who) auth_bind_lease(call->who, call->client_lease, call->lease);
  else memcpy(call->lease, call->client_lease, sizeof call->lease);
}

static int get_lease(json_t *o, int required, api_call *call, api_response *resp) {
  json_t *v = json_object_get(o, "lease");
  call->client_lease[0] = call->lease[0] = '\0';
  if (v == NULL && !required) return 0;
  if (v == NULL) return api_json_bad_field(resp, "%s is required", "lease", 0, 0);
  if (!json_is_string(v) ||
      !picket_proto_lease_valid(json_string_value(v), json_string_length(v)))
    return api_json_bad_field(resp, "%s must be 32 lowercase hex digits", "lease", 0, 0);
  memcpy(call->client_lease, json_string_value(v), PICKET_PROTO_LEASE_LEN + 1);
  bind_lease(call);
  return 0;
}

static int get_owner(json_t *o, char out[PICKET_PROTO_OWNER_BYTES_MAX + 1], api_response *resp) {
  json_t *v = json_object_get(o, "owner");
  out[0] = '\0';
  if (v == NULL || json_is_null(v)) return 0;
  if (!json_is_string(v) || !picket_proto_owner_valid(json_string_value(v), json_string_length(v)))
    return api_json_bad_field(resp, "%s must be null or a string of up to %lld characters without control characters",
                     "owner", PICKET_PROTO_OWNER_MAX, 0);
  memcpy(out, json_string_value(v), json_string_length(v) + 1);
  return 0;
}

/* ---- who may call (auth.c, quota.c) ------------------------------------ */

/* Without --auth-file, the limits of a client address, or NULL when none
 * apply. By default loopback is not limited: there, one address is every
 * sidecar and worker of the host, not one client. (--list-rate is
 * quota.c's own, for every subject; loopback has none.) */
static quota_subject *address_subject(const char *peer, int loopback) {
  int64_t waiters = cfg->max_waiters_per_ip;
  if (waiters == CONFIG_AUTO) waiters = loopback ? 0 : cfg->max_waiters >= 4 ? cfg->max_waiters / 4 : 1;
  if (waiters == 0 && cfg->acquire_rate_per_ip == 0 && (loopback || cfg->list_rate == 0))
    return NULL;
  char key[80];
  snprintf(key, sizeof key, "ip %.64s", peer);
  quota_limits ip = {0, waiters, cfg->acquire_rate_per_ip};
  return quota_get(key, &ip);
}

/* A refusal: counted against the caller, answered with e. */
static api_result deny(api_call *call, api_response *resp, picket_proto_err e, quota_deny why,
                       const char *msg) {
  quota_count_denied(call->subject, why);
  return fail(resp, e, msg);
}

/* With --auth-file, the caller's token: 0, or -1 with a 401 in *resp. The
 * token itself is never quoted back, logged or counted by value. */
static int authenticate(const api_request *req, api_call *call, api_response *resp) {
  if (!auth_enabled()) return 0;
  char msg[160];
  quota_deny why;
  if (auth_resolve(req->authorization, &call->who, msg, sizeof msg, &why) != 0) {
    quota_count_denied(NULL, why);
    /* RFC 6750 3.1: a token that was sent but is no good is invalid_token */
    resp->www_authenticate = why == QUOTA_DENY_NO_TOKEN
                                 ? "Bearer realm=\"picket\""
                                 : "Bearer realm=\"picket\", error=\"invalid_token\"";
    fail(resp, PICKET_PROTO_ERR_UNAUTHENTICATED, msg);
    return -1;
  }
  call->subject = quota_ref(auth_subject(call->who));
  if (conns_authenticated(req->conn, call->who) < 0) {
    /* The connection is closed after the reply: kept open, it would be
     * one the token holds past its cap. */
    char full[200];
    snprintf(full, sizeof full, "token '%s' holds as many open connections as it may (%d); "
             "reuse one (keep-alive) or close one", auth_name(call->who), conns_token_cap());
    deny(call, resp, PICKET_PROTO_ERR_TOO_MANY_CONNECTIONS, QUOTA_DENY_CONNECTIONS, full);
    resp->close = 1;
    snprintf(resp->retry_after, sizeof resp->retry_after, "1");
    return -1;
  }
  return 0;
}

/* Whether the caller's token has `verb` (and, for a lock, covers its
 * name): 0, or -1 with a 403 in *resp. */
static int authorize(api_call *call, auth_verb verb, const char *name, api_response *resp) {
  if (call->who == NULL) return 0;
  static const char *const verb_names[] = {[AUTH_LOCK] = "lock", [AUTH_READ] = "read",
                                           [AUTH_METRICS] = "metrics", [AUTH_LIST] = "list",
                                           [AUTH_ADMIN] = "admin"};
  char msg[300];
  if (!auth_allows(call->who, verb)) {
    snprintf(msg, sizeof msg, "token '%s' lacks the verb '%s'", auth_name(call->who),
             verb_names[verb]);
    deny(call, resp, PICKET_PROTO_ERR_PERMISSION_DENIED, QUOTA_DENY_VERB, msg);
    return -1;
  }
  if (name && !auth_covers(call->who, name)) {
    snprintf(msg, sizeof msg, "token '%s' may not use %s '%s' (outside its prefixes)",
             auth_name(call->who), call->family ? call->family->noun : "lock", name);
    deny(call, resp, PICKET_PROTO_ERR_PERMISSION_DENIED, QUOTA_DENY_PREFIX, msg);
    return -1;
  }
  return 0;
}

void api_wait_over(api_call *call) {
  if (call->waiter_counted) quota_waiter_leave(call->subject);
  call->waiter_counted = 0;
}

void api_call_end(api_call *call) {
  api_admin_end(call);
  api_wait_over(call);
  quota_put(call->subject);
  call->subject = NULL;
  auth_put(call->who);
  call->who = NULL;
}

/* ---- lock endpoints ------------------------------------------------- */

/* Each lock endpoint is two halves: the handler checks the request and
 * describes its one store call in call->op (API_STORE); the caller runs
 * that call, directly or through the pipeline, and the outcome half turns
 * the result into the reply. */
static api_result store_call(api_call *call, store_op_kind kind) {
  memset(&call->op, 0, sizeof call->op);
  /* a semaphore's or rwlock's call is the lock call's counterpart (store.h) */
  call->op.kind = (store_op_kind)(call->family->kind + kind);
  call->op.limit = call->limit;
  call->op.write = call->write;
  if (call->write && call->wait_ms > 0 && kind == STORE_OP_ACQUIRE) {
    /* a read/write lock's writer that will wait keeps new readers out
     * meanwhile */
    int64_t left = call->deadline_ms - api_now_ms();
    call->op.wait_ms = left > 0 ? left : 0;
    call->marked |= call->op.wait_ms > 0;
  }
  call->op.name = call->store_name;
  call->op.lease = call->lease;
  call->op.owner = call->owner;
  /* an election's value: a campaign's (none: "") is its grant's, and a
   * same-lease retry's sets it again; a proclaim's replaces it */
  call->op.value = call->family->values && (call->has_value || kind == STORE_OP_ACQUIRE)
                       ? call->value : NULL;
  call->op.ttl_ms = call->ttl_ms;
  call->op.lock_delay_ms = call->lock_delay_ms;
  call->op.max_hold_ms = call->max_hold_ms;
  /* A token's max_leases is counted by the store, in the lock call itself
   * (store.h), so concurrent acquires on any picketd of this store cannot
   * overshoot it. */
  if (call->subject && quota_token(call->subject)) {
    call->op.token = quota_token(call->subject);
    call->op.max_leases = quota_limits_of(call->subject)->max_leases;
  }
  return API_STORE;
}

void api_run_store(api_call *call) { call_run(&call->op); }

/* An attempt at the grant: API_DONE (granted or failed) or API_WAIT. */
static api_result acquire_outcome(api_call *call, api_response *resp) {
  store_status st = call->op.st;
  const store_result *r = &call->op.r;
  if (st == STORE_ELIMIT) {
    metrics_inc(M_ACQUIRE_ERROR);
    reply_limit_mismatch(resp, call);
    return API_DONE;
  }
  if (st == STORE_OK) {
    metrics_inc(M_ACQUIRE_GRANTED);
    if (r->created && call->subject) quota_count_grant(call->subject);
    char lease_log[16];
    LOG(LOG_DEBUG, "granted %s %s fence %lld lease %s ttl %lld ms", call->family->noun,
        call->name, (long long)r->fence,
        log_lease(call->client_lease, lease_log), (long long)r->ttl_ms);
    call->family->grant(resp, call, 0);
    return API_DONE;
  }
  if (st == STORE_EQUOTA) {
    char msg[200];
    snprintf(msg, sizeof msg, "token '%s' holds its max_leases (%lld); release one first",
             call->op.token, (long long)call->op.max_leases);
    return deny(call, resp, PICKET_PROTO_ERR_TOO_MANY_LEASES, QUOTA_DENY_LEASES, msg);
  }
  int64_t now = api_now_ms();
  /* A waiting acquire rides out a store that is unavailable for a moment
   * (a failover, a lapse of the primary's lease): it tries again every
   * UNAVAILABLE_RETRY_MS until its wait_ms runs out, as the blocking locks
   * of other lock services do, instead of failing the whole
   * wait on one refusal. A first try's 503 still goes to the client at
   * once: it has not waited yet, and may prefer another picketd. */
  call->unavailable = st == STORE_EUNAVAIL;
  if (st == STORE_EUNAVAIL && call->retrying && now + UNAVAILABLE_RETRY_MS < call->deadline_ms) {
    call->retry_at_ms = now + UNAVAILABLE_RETRY_MS;
    return API_WAIT;
  }
  if (st != STORE_HELD && st != STORE_DELAYED) {
    metrics_inc(M_ACQUIRE_ERROR);
    return store_failure(resp, st, r, call);
  }
  call->held_delay = st == STORE_DELAYED;
  call->held_by = r->held_by;
  call->held_ttl_ms = r->ttl_ms;
  memcpy(call->held_owner, r->owner, sizeof r->owner);
  if (call->wait_ms > 0 && now < call->deadline_ms) {
    if (call->subject && !call->waiter_counted) {
      if (quota_waiter_enter(call->subject) < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "this %s has %lld waiting acquires, its max_waiters",
                 call->who ? "token" : "address",
                 (long long)quota_limits_of(call->subject)->max_waiters);
        metrics_inc(M_WAIT_REJECTED);
        return deny(call, resp, PICKET_PROTO_ERR_QUOTA_WAITERS, QUOTA_DENY_WAITERS, msg);
      }
      call->waiter_counted = 1;
    }
    /* Retry at the holder's expiry (or the lock-delay's end) unless a
     * release wakes us first. */
    call->retry_at_ms = now + (r->ttl_ms > 0 ? r->ttl_ms : 1);
    return API_WAIT;
  }
  call->family->taken(resp, call, r->ttl_ms);
  return API_DONE;
}

int api_granted(const api_call *call) {
  /* Only a new grant may be undone if its reply is lost: a same-lease
   * retry refreshes a grant the client already holds and knows about. */
  const store_op *op = &call->op;
  return store_op_base(op->kind) == STORE_OP_ACQUIRE && op->st == STORE_OK && op->r.created;
}

api_result api_retry_acquire(api_call *call) {
  store_call(call, STORE_OP_ACQUIRE);
  call->retrying = 1;
  return API_STORE;
}

void api_undo_grant(api_call *call) {
  submit_detached(store_op_release_of(call->op.kind), call->store_name, call->lease,
                  call->op.token, call->op.max_leases);
  char lease_log[16];
  LOG(LOG_INFO, "grant of %s (lease %s) was not delivered; releasing it", call->name,
      log_lease(call->client_lease, lease_log));
}

void api_wait_expired(api_call *call, api_response *resp) {
  if (call->unavailable) { /* the wait ended on a store it could not reach */
    metrics_inc(M_ACQUIRE_ERROR);
    store_failure(resp, STORE_EUNAVAIL, &call->op.r, call);
    return;
  }
  int64_t left = call->retry_at_ms - api_now_ms();
  call->family->taken(resp, call, left > 0 ? left : call->held_ttl_ms);
}

/* A fresh lease id from the kernel's CSPRNG. Each thread reads 32
 * ids' worth at a time, which saves a system call on 31 acquires in 32;
 * an id's bytes are zeroed as it is taken, so none is handed out twice or
 * lingers. (The pool is per thread and picketd never forks, so no copy of
 * it can exist; the client library, which may be forked, reads per id.) */
static int lease_new(char out[PICKET_PROTO_LEASE_LEN + 1]) {
  enum { ID_BYTES = PICKET_PROTO_LEASE_LEN / 2, POOL = 32 * ID_BYTES };
  static __thread unsigned char pool[POOL];
  static __thread size_t used = POOL;
  if (used == POOL) {
    if (picket_proto_random(pool, POOL) < 0) return -1;
    used = 0;
  }
  picket_proto_lease_format(pool + used, out);
  memset(pool + used, 0, ID_BYTES);
  used += ID_BYTES;
  return 0;
}

api_result api_acquire(const api_request *req, api_call *call, api_response *resp) {
  json_t *b = api_json_body(req, call->family->fields, resp);
  if (b == NULL) return API_DONE;
  if (call->family->acquire_args && call->family->acquire_args(b, call, resp) < 0) {
    json_decref(b);
    return API_DONE;
  }
  int bad = api_json_int(b, "ttl_ms", 1, cfg->max_ttl_ms, ttl_default(), &call->ttl_ms, resp) < 0 ||
            api_json_int(b, "wait_ms", 0, cfg->max_wait_ms, 0, &call->wait_ms, resp) < 0 ||
            api_json_int(b, "lock_delay_ms", 0, cfg->max_lock_delay_ms, 0, &call->lock_delay_ms,
                    resp) < 0 ||
            api_json_int(b, "max_hold_ms", 0, PICKET_PROTO_HOLD_MAX_MS, 0, &call->max_hold_ms, resp) < 0 ||
            get_owner(b, call->owner, resp) < 0 || get_lease(b, 0, call, resp) < 0;
  json_decref(b);
  if (bad) return API_DONE;
  if (call->lease[0] == '\0') {
    if (lease_new(call->client_lease) < 0)
      return fail(resp, PICKET_PROTO_ERR_INTERNAL, "cannot read the kernel's random source");
    bind_lease(call);
  }
  call->deadline_ms = call->started_ms + call->wait_ms;
  if (call->subject == NULL) call->subject = address_subject(req->peer ? req->peer : "", req->peer_loopback);
  int64_t retry_ms = 0;
  if (call->subject && quota_rate_take(call->subject, &retry_ms) < 0) {
    quota_count_denied(call->subject, QUOTA_DENY_RATE);
    char msg[160];
    snprintf(msg, sizeof msg, "more than %lld acquires per second from this %s",
             (long long)quota_limits_of(call->subject)->acquire_rate,
             call->who ? "token" : "address");
    api_json_reply_retry(resp, 429, api_json_error(PICKET_PROTO_ERR_RATE_LIMITED, msg), retry_ms);
    return API_DONE;
  }
  return store_call(call, STORE_OP_ACQUIRE);
}

/* hold_broken's "broken by WHO at MS" as the caller is told it: the time
 * in UTC (ISO 8601), and WHO only to a caller that may see operators
 * (auth_sees_operators; the others read AUTH_OPERATOR_HIDDEN). In a static
 * buffer of the calling thread. */
static const char *readable_why(const char *why, const auth_principal *caller) {
  static __thread char out[240];
  const char *at = strrchr(why, ' ');
  char *end = NULL;
  long long ms = at ? strtoll(at + 1, &end, 10) : 0;
  time_t sec = (time_t)(ms / 1000);
  struct tm tm;
  int timed = at && at - why >= 3 && strncmp(at - 3, " at", 3) == 0 && *end == '\0' && ms > 0 &&
              gmtime_r(&sec, &tm) != NULL;
  char when[40] = "";
  if (timed) {
    strftime(when, sizeof when, " at %Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + strlen(when), sizeof when - strlen(when), ".%03lldZ", ms % 1000);
  }
  if (auth_sees_operators(caller))
    snprintf(out, sizeof out, "%.*s%s", timed ? (int)(at - 3 - why) : (int)strlen(why), why, when);
  else
    snprintf(out, sizeof out, "broken by " AUTH_OPERATOR_HIDDEN "%s", when);
  return out;
}

/* A renew or release that did not succeed: lease_lost is the signal of a
 * holder that overran its TTL, worth a log line and its own counter. */
static api_result renew_or_release_failed(api_call *call, const char *what, metrics_counter lost,
                                          metrics_counter error, api_response *resp) {
  if (call->op.st == STORE_LOST) {
    metrics_inc(lost);
    /* (a broken lease was counted by the picketd that broke it) */
    if (call->op.r.why[0]) holds_forget(call->key);
    else holds_ended(call->key, 0, HOLD_LOST);
    char lease_log[16];
    LOG(LOG_INFO, "%s of %s by lease %s: lease lost (%s)", what, call->name,
        log_lease(call->client_lease, lease_log),
        call->op.r.why[0] ? call->op.r.why : "expired, released or never held");
    if (call->op.r.why[0]) { /* broken by an operator: say so, and when */
      char msg[280];
      snprintf(msg, sizeof msg, "the lease is no longer held: %s",
               readable_why(call->op.r.why, call->who));
      return fail(resp, PICKET_PROTO_ERR_LEASE_LOST, msg);
    }
    return fail(resp, PICKET_PROTO_ERR_LEASE_LOST, NULL);
  }
  metrics_inc(error);
  return store_failure(resp, call->op.st, &call->op.r, call);
}

api_result api_renew(const api_request *req, api_call *call, api_response *resp) {
  static const char *const allowed[] = {"lease", "ttl_ms", NULL};
  json_t *b = api_json_body(req, allowed, resp);
  if (b == NULL) return API_DONE;
  int bad = get_lease(b, 1, call, resp) < 0 ||
            api_json_int(b, "ttl_ms", 1, cfg->max_ttl_ms, ttl_default(), &call->ttl_ms, resp) < 0;
  json_decref(b);
  if (bad) return API_DONE;
  return store_call(call, STORE_OP_RENEW);
}

/* POST /v1/elections/{name}/proclaim: the leader's new value, written by a
 * renewal of its lease (with the TTL it has, unless ttl_ms says another),
 * so it is set only while the lease is the leader's and the term stays. */
api_result api_proclaim(const api_request *req, api_call *call, api_response *resp) {
  static const char *const allowed[] = {"lease", "value", "ttl_ms", NULL};
  json_t *b = api_json_body(req, allowed, resp);
  if (b == NULL) return API_DONE;
  int bad = get_lease(b, 1, call, resp) < 0 || api_family_value(b, 1, call, resp) < 0 ||
            api_json_int(b, "ttl_ms", 1, cfg->max_ttl_ms, 0, &call->ttl_ms, resp) < 0;
  json_decref(b);
  if (bad) return API_DONE;
  return store_call(call, STORE_OP_RENEW);
}

static api_result renew_outcome(api_call *call, api_response *resp) {
  if (call->op.st != STORE_OK)
    return renew_or_release_failed(call, "renew", M_RENEW_LOST, M_RENEW_ERROR, resp);
  metrics_inc(M_RENEW_RENEWED);
  holds_renewed(call->key, call->op.r.at, clock_wall_ms() + call->op.r.ttl_ms);
  call->family->grant(resp, call, 1);
  return API_DONE;
}

api_result api_release(const api_request *req, api_call *call, api_response *resp) {
  static const char *const allowed[] = {"lease", NULL};
  json_t *b = api_json_body(req, allowed, resp);
  if (b == NULL) return API_DONE;
  int bad = get_lease(b, 1, call, resp) < 0;
  json_decref(b);
  if (bad) return API_DONE;
  return store_call(call, STORE_OP_RELEASE);
}

static api_result release_outcome(api_call *call, api_response *resp) {
  if (call->op.st != STORE_OK)
    return renew_or_release_failed(call, "release", M_RELEASE_LOST, M_RELEASE_ERROR, resp);
  metrics_inc(M_RELEASE_RELEASED);
  holds_ended(call->key, call->op.r.at, HOLD_RELEASED);
  api_json_reply_fmt(resp, "{\"%s\":\"%s\",\"%s\":true}", call->family->noun, call->name,
                     call->family->released);
  return API_DONE;
}

static api_result inspect_outcome(api_call *call, api_response *resp) {
  const store_result *r = &call->op.r;
  if (call->op.st != STORE_OK) return store_failure(resp, call->op.st, r, call);
  call->family->inspect(resp, call);
  store_result_clear(&call->op.r);
  return API_DONE;
}

static api_result ready_outcome(api_call *call, api_response *resp);

api_result api_finish(api_call *call, api_response *resp) {
  memset(resp, 0, sizeof *resp);
  resp->endpoint = call->endpoint;
  switch (store_op_base(call->op.kind)) {
    case STORE_OP_LIST: return api_admin_list_page(call, resp);
    case STORE_OP_BREAK: return api_admin_break_outcome(call, resp);
    case STORE_OP_READY: return ready_outcome(call, resp);
    case STORE_OP_ACQUIRE: return acquire_outcome(call, resp);
    case STORE_OP_RENEW: return renew_outcome(call, resp);
    case STORE_OP_RELEASE: return release_outcome(call, resp);
    default: return inspect_outcome(call, resp);
  }
}

/* ---- service endpoints ---------------------------------------------- */

static void reply_text(api_response *resp, const char *type, char *body, size_t len) {
  resp->status = 200;
  resp->content_type = type;
  resp->body = body;
  resp->body_len = len;
}

/* Whether /readyz may say where the store is and why it is not ready. It
 * is open (load balancers probe it without a token), but under --auth-file
 * the addresses, socket paths and the store's own messages are for operators:
 * a token with the metrics verb. Anyone else gets the status, the error
 * code and the replica count. A bad token is not refused here: it is a
 * stranger's probe. */
static int ready_detail(const api_request *req, api_call *call) {
  if (!auth_enabled()) return 1;
  if (req->authorization == NULL || req->authorization[0] == '\0') return 0;
  char msg[160];
  quota_deny why;
  if (auth_resolve(req->authorization, &call->who, msg, sizeof msg, &why) != 0) return 0;
  return auth_allows(call->who, AUTH_METRICS);
}

api_result api_readyz(const api_request *req, api_call *call, api_response *resp) {
  (void)resp;
  memset(&call->op, 0, sizeof call->op);
  call->op.kind = STORE_OP_READY;
  call->op.limit = ready_detail(req, call);
  return API_STORE;
}

static api_result ready_outcome(api_call *call, api_response *resp) {
  store_status st = call->op.st;
  store_result *r = &call->op.r;
  if (st != STORE_OK && !call->op.limit) { /* (and api_json_store_failure shows no r.err) */
    store_result_clear(r);
    api_error(resp, api_json_store_err(st), "not ready (the reason is shown to a token "
                                                   "with the metrics verb)");
    return API_DONE;
  }
  if (st != STORE_OK) {
    store_result_clear(r);
    return store_failure(resp, st, r, call);
  }
  api_json_reply(resp, 200, r->body); /* (it takes the reference) */
  r->body = NULL;
  return API_DONE;
}

api_result api_metrics(const api_request *req, api_call *call, api_response *resp) {
  (void)req;
  size_t len;
  char *text = metrics_render(&len, auth_covers_all(call->who));
  if (text == NULL) return fail(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
  reply_text(resp, "text/plain; version=0.0.4; charset=utf-8", text, len);
  return API_DONE;
}

api_result api_openapi(const api_request *req, api_call *call, api_response *resp) {
  (void)req, (void)call;
  char *copy = malloc(picket_proto_openapi_len);
  if (copy == NULL) return fail(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
  memcpy(copy, picket_proto_openapi, picket_proto_openapi_len);
  reply_text(resp, "application/yaml", copy, picket_proto_openapi_len);
  return API_DONE;
}

api_result api_healthz(const api_request *req, api_call *call, api_response *resp) {
  (void)req, (void)call;
  api_json_reply(resp, 200, json_pack("{s:s}", "status", "ok"));
  return API_DONE;
}

api_result api_list(const api_request *req, api_call *call, api_response *resp) {
  if (call->subject == NULL)
    call->subject = address_subject(req->peer ? req->peer : "", req->peer_loopback);
  return api_admin_list(req, call, resp);
}

api_result api_inspect(const api_request *req, api_call *call, api_response *resp) {
  (void)req, (void)resp;
  call->limit = call->family->inspect_max ? call->family->inspect_max() : 0;
  return store_call(call, STORE_OP_INSPECT);
}

/* ---- the checks every route makes (routes.c) ------------------------ */

int api_caller(const api_request *req, api_call *call, int auth, api_response *resp) {
  if (auth == 0) return 0; /* ROUTE_OPEN */
  if (authenticate(req, call, resp) < 0) return -1;
  return auth < 0 ? 0 : authorize(call, (auth_verb)auth, NULL, resp); /* < 0: ROUTE_CALLER */
}

int api_named(const api_request *req, api_call *call, int auth, const char *seg, size_t seg_len,
              api_response *resp) {
  /* The name segment is percent-decoded once, as generated clients
   * encode it (':' as "%3A"); a decoded '/' or NUL is then a bad name
   * (400), never another lock. */
  if (picket_proto_name_from_path(seg, seg_len, call->name) < 0) {
    fail(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT,
         "lock names are 1 to 200 bytes of A-Z a-z 0-9 . _ : - (percent-encoded or not), "
         "other than . and ..");
    return -1;
  }
  if (strlen(call->name) > call->family->name_max) {
    fail(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, call->family->name_why);
    return -1;
  }
  snprintf(call->key, sizeof call->key, "%s%s", call->family->key_prefix, call->name);
  snprintf(call->store_name, sizeof call->store_name, "%s%s", call->family->store_prefix,
           call->name);
  if (authorize(call, (auth_verb)auth, call->name, resp) < 0) return -1;
  if (auth == AUTH_ADMIN && !api_admin_may_break(req, call)) {
    fail(resp, PICKET_PROTO_ERR_PERMISSION_DENIED,
         "only a local caller may break a lock when picketd runs without --auth-file");
    return -1;
  }
  if (req->body_too_large) {
    char msg[80];
    snprintf(msg, sizeof msg, "request bodies are limited to %d bytes", PICKET_PROTO_BODY_MAX);
    fail(resp, PICKET_PROTO_ERR_BODY_TOO_LARGE, msg);
    return -1;
  }
  return 0;
}
