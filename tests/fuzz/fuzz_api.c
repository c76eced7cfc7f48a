/* fuzz_api.c: the fuzz target over picketd's request path: server/api.c
 * with the in-memory store of store_stub.c, no HTTP library and no Redis.
 * Built with libFuzzer (-DPICKET_FUZZ=ON, clang) as fuzz_api, and with a
 * plain main (fuzz_replay.c) as fuzz_api_replay, which runs the seed corpus
 * in every ctest run.
 *
 * An input is one to MAX_REQUESTS requests against one fresh store, so a
 * grant can be followed by its renew and release:
 *
 *   input   = request *( "\n--\n" request )
 *   request = M S F path "\n" [ owner "\n" ] [ authorization "\n" ] body
 *
 *   M     method: METHODS[M % 8]
 *   S     store failure: stub_fault S % 8, on the calls chosen by S >> 6
 *         (0 every call, 1 the first, 2 the second, 3 all but the first);
 *         so '0' is no failure and '1'..'7' fail every call
 *   F     flags (FLAG_*); the digits '0'..'9' use only the low four bits
 *   path  as libmicrohttpd hands it over: not decoded, ends at a NUL
 *   owner present when FLAG_OWNER_LINE: the raw owner of a foreign holder
 *   authorization  present when FLAG_AUTH (bit 4 without bit 5), which also turns --auth-file
 *         on (AUTH_FILE below): the Authorization header's value, or no
 *         header when the line is "NONE"
 *   body  the rest; past PICKET_PROTO_BODY_MAX it is cut and flagged too
 *         large, as server/http.c does
 *
 * "\n--\n" never occurs in a valid JSON body (a raw newline cannot be in a
 * JSON string), so the separator never splits one.
 *
 * Every reply is checked against the contract (proto/openapi.yaml and the
 * error table of picket_proto.h), and against the store: a grant the store
 * does not hold, a fence that is not the store's, a bad request that
 * reached the store, a 500, are all reported and abort(), so the fuzzer
 * finds wrong answers, not only crashes.
 *
 * The store may also hold what picketd never writes itself but redis-cli
 * or another program could leave behind (an owner that is not UTF-8, a
 * lease key without expiry): replies must stay well-formed then too. */
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "api_json.h"
#include "auth.h"
#include "routes.h"
#include "signer.h"
#include "config.h"
#include "events.h"
#include "log.h"
#include "picket_proto.h"
#include "store_stub.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REQUESTS 32
#define PATH_CAP 8192
#define MAX_RETRIES 3
#define SEPARATOR "\n--\n"

enum {
  FLAG_TOO_LARGE = 1 << 0,   /* the body passed the limit (http.c cut it) */
  FLAG_PREHELD = 1 << 1,     /* a foreign lease holds the lock named first */
  FLAG_OWNER_LINE = 1 << 2,  /* a line with the foreign holder's owner follows the path */
  FLAG_EXPIRE = 1 << 3,      /* before each retry of a waiting acquire, holders expire */
  /* bits 4 and 5 are both set in the digits: AUTH is bit 4 without bit 5
   * (flag bytes 0x10-0x1f, 0x50-0x5f, ...), so no digit seed turns it on */
  FLAG_AUTH = 1 << 4,        /* --auth-file AUTH_FILE, and an Authorization line follows */
  FLAG_AUTH_MASK = 3 << 4,
  FLAG_SMALL_CONFIG = 1 << 6, /* --max-ttl-ms 20000 --max-wait-ms 50 */
  FLAG_NO_EXPIRY = 1 << 7    /* the foreign holder's key has no expiry (PTTL -1) */
};

static const char *const METHODS[8] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "post"};
static config default_cfg, small_cfg;

/* The tokens "good-billing" (locks under billing. and inventory-sync, no
 * metrics, two leases at once) and "good-ops" (everything); the hashes are
 * their SHA-256. */
static const char AUTH_FILE[] =
    "# the fuzzer's tokens\n"
    "billing sha256:b0e2cf3235af051355db534510b944501f3e302085bbf8e4c6082e6ad48fdd97 "
    "billing.,inventory-sync lock,read max_leases=2 max_waiters=1 acquire_rate=1000000\n"
    "ops sha256:59cc1dd12be1df5ec22b4db45b6e6a342c8f7b7c5d4e74282dafa130c9292225 * "
    "lock,read,metrics,list,admin\n";
static auth_table *fuzz_auth;
/* With FLAG_AUTH fences are signed too, with this key (id "fz"). */
static picket_proto_fence_keys fuzz_keys;
static int verbose;       /* PICKET_FUZZ_VERBOSE=1: print each exchange */

/* What one request was, for the checks and for the report of a failure. */
typedef struct {
  const api_request *req;
  const config *cfg;
  stub_fault fault;
  int retried;            /* the reply came from a retry or a wait's end */
  int auth;               /* --auth-file is on (FLAG_AUTH) */
} request_ctx;

static void load_config(config *cfg, int argc, char **argv) {
  char err[600];
  if (config_load(cfg, argc, argv, NULL, err, sizeof err) != CONFIG_RUN) {
    fprintf(stderr, "fuzz_api: config: %s\n", err);
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char *def[] = {"fuzz_api", NULL};
  char *small[] = {"fuzz_api", "--max-ttl-ms", "20000", "--max-wait-ms", "50", NULL};
  load_config(&default_cfg, 1, def);
  load_config(&small_cfg, 5, small);
  log_setup(LOG_WARN, LOG_FORMAT_TEXT); /* api.c logs at debug and info only */
  const char *v = getenv("PICKET_FUZZ_VERBOSE");
  verbose = v && strcmp(v, "1") == 0;
  char err[300];
  store_init(&default_cfg, err, sizeof err);
  static const char keys[] = "fz 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";
  if (picket_proto_fence_keys_parse(keys, sizeof keys - 1, &fuzz_keys, err, sizeof err) < 0) abort();
  if ((fuzz_auth = auth_parse(AUTH_FILE, sizeof AUTH_FILE - 1, err, sizeof err)) == NULL) {
    fprintf(stderr, "fuzz_api: AUTH_FILE: %s\n", err);
    abort();
  }
  return 0;
}

/* Reports a broken reply with its request, and aborts (a libFuzzer crash). */
__attribute__((format(printf, 3, 4), noreturn)) static void
broken(const request_ctx *ctx, const api_response *resp, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "fuzz_api: broken reply: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n  request: %s %s (fault %d%s), %zu body bytes%s: %.*s\n", ctx->req->method,
          ctx->req->path, (int)ctx->fault, ctx->retried ? ", after a wait" : "",
          ctx->req->body_len, ctx->req->body_too_large ? " (too large)" : "",
          (int)(ctx->req->body_len > 300 ? 300 : ctx->req->body_len),
          ctx->req->body ? ctx->req->body : "");
  fprintf(stderr, "  reply: %d %s: %.*s\n", resp->status,
          resp->content_type ? resp->content_type : "(no type)",
          (int)(resp->body_len > 600 ? 600 : resp->body_len), resp->body ? resp->body : "");
  abort();
}

#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) broken(ctx, resp, __VA_ARGS__); \
  } while (0)

/* The lock name in a /v1/locks/ path and whether an action follows it;
 * 0 when the path is not under /v1/locks/. */
/* The lock a /v1/locks path names, as the spec's templates read it: one
 * name segment (percent-decoded once, by the shared rule) and at most one
 * action segment. Returns 0 for any other path or a name the rule refuses. */
static int path_lock(const char *path, char *name, size_t cap, const char **action) {
  static const char prefix[] = "/v1/locks/";
  if (cap < PICKET_PROTO_NAME_MAX + 1 || strncmp(path, prefix, sizeof prefix - 1) != 0) return 0;
  const char *rest = path + sizeof prefix - 1;
  const char *slash = strchr(rest, '/');
  if (slash && strchr(slash + 1, '/')) return 0;
  size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
  *action = slash ? slash + 1 : NULL;
  return picket_proto_name_from_path(rest, n, name) >= 0;
}

/* The integer member `key`, or fails the check. */
static json_int_t int_member(const request_ctx *ctx, const api_response *resp, json_t *o,
                             const char *key, json_int_t min) {
  json_t *v = json_object_get(o, key);
  CHECK(json_is_integer(v), "'%s' is not an integer", key);
  CHECK(json_integer_value(v) >= min, "'%s' is below %lld", key, (long long)min);
  return json_integer_value(v);
}

static void check_owner(const request_ctx *ctx, const api_response *resp, json_t *o) {
  json_t *v = json_object_get(o, "owner");
  CHECK(v != NULL, "no 'owner' member");
  CHECK(json_is_null(v) || (json_is_string(v) && json_string_length(v) > 0),
        "'owner' is neither null nor a non-empty string");
}

/* The body member `key` of the request, or NULL (the request body is JSON
 * that api.c accepted, or the reply would not be a 200). */
static json_t *request_member(const api_request *req, const char *key) {
  if (req->body_len == 0) return NULL;
  json_t *b = json_loadb(req->body, req->body_len, 0, NULL);
  json_t *v = json_incref(json_object_get(b, key));
  json_decref(b);
  return v;
}

/* The checks on an error reply: the table's code, its status, its headers. */
static void check_error(const request_ctx *ctx, const api_response *resp, json_t *j) {
  json_t *err = json_object_get(j, "error");
  CHECK(json_is_object(err) && json_object_size(j) == 1, "not {\"error\": {...}}");
  const char *code = json_string_value(json_object_get(err, "code"));
  CHECK(code != NULL, "error.code is not a string");
  int e = picket_proto_err_from_code(code);
  CHECK(e >= 0, "error.code '%s' is not in PICKET_PROTO_ERROR_MAP", code);
  int status_ok = 0; /* a code may have a row per status (too_many_waiters: 429, 503) */
  for (int i = 0; i < PICKET_PROTO_ERR_COUNT; i++)
    status_ok |= strcmp(picket_proto_err_code(i), code) == 0 &&
                 picket_proto_err_status(i) == resp->status;
  CHECK(status_ok, "status %d does not match code %s", resp->status, code);
  const char *msg = json_string_value(json_object_get(err, "message"));
  CHECK(msg && msg[0], "error.message is not a non-empty string");
  /* picketd never says these: they are fenced-kv's, or an out-of-memory
   * that the fuzzer cannot cause. */
  CHECK(e != PICKET_PROTO_ERR_STALE_FENCE && e != PICKET_PROTO_ERR_VERSION_MISMATCH &&
            e != PICKET_PROTO_ERR_INTERNAL,
        "picketd must not answer %s here", code);
  CHECK((e == PICKET_PROTO_ERR_METHOD_NOT_ALLOWED) == (resp->allow != NULL),
        "Allow must come with 405 and only with it");
  if (resp->allow)
    CHECK(strcmp(resp->allow, "GET, HEAD") == 0 || strcmp(resp->allow, "POST") == 0,
          "odd Allow '%s'", resp->allow);
  if (e == PICKET_PROTO_ERR_LOCK_HELD) {
    json_int_t ms = int_member(ctx, resp, err, "retry_after_ms", 0);
    check_owner(ctx, resp, err);
    CHECK(json_object_size(err) == 4, "lock_held has members beyond code, message, "
                                      "retry_after_ms, owner");
    char want[24];
    snprintf(want, sizeof want, "%lld", (long long)((ms + 999) / 1000));
    CHECK(strcmp(resp->retry_after, want) == 0, "Retry-After '%s' is not %s (retry_after_ms %lld)",
          resp->retry_after, want, (long long)ms);
  } else if (e == PICKET_PROTO_ERR_RATE_LIMITED) {
    json_int_t ms = int_member(ctx, resp, err, "retry_after_ms", 1);
    CHECK(json_object_size(err) == 3, "rate_limited has members beyond code, message, "
                                      "retry_after_ms");
    char want[24];
    snprintf(want, sizeof want, "%lld", (long long)((ms + 999) / 1000));
    CHECK(strcmp(resp->retry_after, want) == 0, "Retry-After '%s' is not %s", resp->retry_after,
          want);
  } else {
    CHECK(resp->retry_after[0] == '\0', "Retry-After on a %s", code);
    CHECK(json_object_size(err) == 2, "%s has members beyond code and message", code);
  }
  /* Every input is checked before anything is changed (api.c): a refused
   * request must not have reached the store. The one input the store
   * checks is a listing's cursor (opaque to api.c, store/cursor.c): its
   * 400 comes from the page's read, which changes nothing, so one call. */
  int cursor_refused = resp->endpoint == EP_LIST && e == PICKET_PROTO_ERR_INVALID_ARGUMENT &&
                       msg && strstr(msg, "cursor is not one this listing returned");
  if (!ctx->retried && (resp->status == 400 || resp->status == 404 || resp->status == 405 ||
                        resp->status == 413))
    CHECK(stub_calls() <= cursor_refused, "a %s request reached the store (%d calls)", code,
          stub_calls());
  /* Only an injected failure may look like one (store_error is also what
   * the stub answers when its table is full). */
  if (ctx->fault == STUB_FAULT_NONE)
    CHECK(e != PICKET_PROTO_ERR_STORE_UNAVAILABLE && e != PICKET_PROTO_ERR_STORE_MISCONFIGURED &&
              e != PICKET_PROTO_ERR_STORE_FULL && e != PICKET_PROTO_ERR_NOT_REPLICATED,
          "%s without a store failure", code);
}

/* The token a valid Authorization value names: 1 billing, 2 ops, 0 none
 * (the scheme is case-insensitive, spaces or tabs follow it). */
static int token_of(const char *h) {
  if (h == NULL || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 0;
  h += 6 + strspn(h + 6, " \t");
  size_t n = strcspn(h, " \t");
  if (h[n + strspn(h + n, " \t")] != '\0') return 0;
  if (n == 12 && strncmp(h, "good-billing", 12) == 0) return 1;
  if (n == 8 && strncmp(h, "good-ops", 8) == 0) return 2;
  return 0;
}

/* With --auth-file: a lock call or /metrics without a known token is 401
 * with WWW-Authenticate, and never reaches the store; billing's token
 * gets nothing outside its prefixes nor /metrics. */
static void check_auth(const request_ctx *ctx, const api_response *resp, const api_call *call) {
  CHECK((resp->status == 401) == (resp->www_authenticate != NULL),
        "WWW-Authenticate must come with 401 and only with it");
  const char *path = ctx->req->path;
  size_t plen = strlen(path);
  int is_break = plen > 6 && strcmp(path + plen - 6, "/break") == 0;
  if (!ctx->auth) {
    /* (a break from an address that is not loopback is the one 403) */
    CHECK(resp->status != 401 && (resp->status != 403 || is_break), "%d without --auth-file",
          resp->status);
    CHECK(strcmp(call->lease, call->client_lease) == 0, "a lease bound without --auth-file");
    return;
  }
  int guarded = strncmp(path, "/v1/locks", 9) == 0 || strcmp(path, "/metrics") == 0 ||
                strcmp(path, "/v1/whoami") == 0;
  int who = token_of(ctx->req->authorization);
  if (resp->status == 401 || resp->status == 403)
    CHECK(stub_calls() == 0, "a %d reached the store", resp->status);
  if (!guarded || resp->status == 404 || resp->status == 405) return;
  CHECK(who != 0 || resp->status == 401, "no known token, and %d", resp->status);
  if (resp->status != 200) return;
  char name[PATH_CAP];
  const char *action;
  if (who == 1) {
    CHECK(strcmp(path, "/metrics") != 0, "billing's token read /metrics");
    CHECK(strcmp(path, "/v1/locks") != 0 && !is_break, "billing's token listed or broke");
    CHECK(strcmp(path, "/v1/whoami") == 0 ||
              (path_lock(path, name, sizeof name, &action) &&
               (strncmp(name, "billing.", 8) == 0 || strncmp(name, "inventory-sync", 14) == 0)),
          "billing's token got a 200 outside its prefixes");
  }
  if (call->client_lease[0])
    CHECK(strcmp(call->lease, call->client_lease) != 0, "a lease not bound to its token");
}

/* With signed fences (FLAG_AUTH inputs), the reply's fence_token verifies
 * for its kind, lock and fence under the fuzzer's key, and for nothing
 * else. */
static void check_fence_token(const request_ctx *ctx, const api_response *resp, json_t *j,
                              const char *name, unsigned kind) {
  json_t *t = json_object_get(j, "fence_token");
  if (!ctx->auth) {
    CHECK(t == NULL, "a fence_token without signing");
    return;
  }
  const char *s = json_string_value(t);
  int64_t fence = json_integer_value(json_object_get(j, "fence"));
  CHECK(s && picket_proto_fence_token_verify(&fuzz_keys, ctx->cfg->key_prefix, name, fence, kind,
                                             s, strlen(s)),
        "fence_token does not verify for its lock and fence");
  CHECK(!picket_proto_fence_token_verify(&fuzz_keys, ctx->cfg->key_prefix, name, fence + 1, kind,
                                         s, strlen(s)),
        "fence_token verifies for another fence");
  CHECK(!picket_proto_fence_token_verify(&fuzz_keys, ctx->cfg->key_prefix, name, fence, 15u & ~kind,
                                         s, strlen(s)),
        "fence_token verifies as another kind");
}

static int is_semaphore_path(const char *path) {
  return strncmp(path, "/v1/semaphores/", 15) == 0;
}

/* The checks on a 200 from a semaphore's or read/write lock's endpoint
 * (the stub models each as one exclusive lease: store_stub.c): the path
 * and name it names, and for a grant or renewal a fence from 1 and its
 * fence lock (and signed fence) for that name. */
static void check_family_ok(const request_ctx *ctx, const api_response *resp,
                            const api_call *call, json_t *j) {
  int sem = is_semaphore_path(ctx->req->path);
  const char *member = sem ? "semaphore" : "rwlock";
  CHECK(json_is_string(json_object_get(j, member)) &&
            strcmp(json_string_value(json_object_get(j, member)), call->name) == 0,
        "'%s' is not the name in the path", member);
  json_t *fence = json_object_get(j, "fence");
  if (json_object_get(j, "lease") || json_object_get(j, "ttl_ms")) { /* a grant or renewal */
    int64_t f = int_member(ctx, resp, j, "fence", 1);
    char lock[PICKET_PROTO_NAME_MAX + 1];
    if (sem)
      picket_proto_sem_fence_lock(lock, sizeof lock, call->name,
                                  int_member(ctx, resp, j, "permit", 0));
    else
      picket_proto_rw_fence_lock(lock, sizeof lock, call->name);
    CHECK(json_is_string(json_object_get(j, "fence_lock")) &&
              strcmp(json_string_value(json_object_get(j, "fence_lock")), lock) == 0,
          "'fence_lock' is not %s", lock);
    const char *mode = json_string_value(json_object_get(j, "mode"));
    check_fence_token(ctx, resp, j, lock,
                      sem ? PICKET_PROTO_FENCE_KIND_PERMIT
                      : mode && strcmp(mode, "read") == 0 ? PICKET_PROTO_FENCE_KIND_READ
                                                           : PICKET_PROTO_FENCE_KIND_WRITE);
    (void)f;
  } else if (fence) {
    int_member(ctx, resp, j, "fence", 0);
  }
}

/* The checks on a 200 from an election endpoint: its name, and a
 * leadership's term against the store, which keeps the election as the
 * lock "/e/NAME" (api_family.c). */
static void check_election_ok(const request_ctx *ctx, const api_response *resp,
                              const api_call *call, json_t *j) {
  CHECK(strlen(call->name) <= PICKET_PROTO_ELECTION_NAME_MAX &&
            json_is_string(json_object_get(j, "election")) &&
            strcmp(json_string_value(json_object_get(j, "election")), call->name) == 0,
        "'election' is not the name in the path");
  char key[sizeof PICKET_PROTO_ELECTION_STORE_PREFIX + PICKET_PROTO_NAME_MAX],
      lease[PICKET_PROTO_LEASE_LEN + 1] = "";
  snprintf(key, sizeof key, "%s%s", PICKET_PROTO_ELECTION_STORE_PREFIX, call->name);
  int64_t fence = 0;
  int held = 0;
  int known = stub_lookup(key, &fence, &held, lease); /* the store holds the election */
  json_t *leader = json_object_get(j, "leader");
  if (json_object_get(j, "lease")) { /* a campaign won */
    int64_t term = int_member(ctx, resp, j, "term", 1);
    const char *l = json_string_value(json_object_get(j, "lease"));
    CHECK(l && strcmp(l, call->client_lease) == 0, "the reply's lease is not the client's");
    CHECK(known && held && strcmp(lease, call->lease) == 0 && fence == term,
          "a leadership the store does not hold (term %lld, store %lld)", (long long)term,
          (long long)fence);
    check_owner(ctx, resp, j);
    check_fence_token(ctx, resp, j, call->name, PICKET_PROTO_FENCE_KIND_LOCK);
  } else if (json_object_get(j, "ttl_ms")) { /* renewed or proclaimed */
    int_member(ctx, resp, j, "term", 1);
    check_fence_token(ctx, resp, j, call->name, PICKET_PROTO_FENCE_KIND_LOCK);
  } else if (json_object_get(j, "candidates")) { /* GET */
    CHECK(json_is_null(leader) || json_is_object(leader), "'leader' is neither null nor an object");
    CHECK(json_is_null(leader) == !held, "'leader' disagrees with the store");
    int_member(ctx, resp, j, "term", 0);
  } else {
    CHECK(json_is_true(json_object_get(j, "resigned")) || json_object_get(j, "broken"),
          "an election reply of no known shape");
  }
}

/* The checks on a 200 from a lock endpoint, against the store. */
static void check_lock_ok(const request_ctx *ctx, const api_response *resp, const api_call *call,
                          json_t *j) {
  char name[PATH_CAP];
  const char *action;
  CHECK(path_lock(ctx->req->path, name, sizeof name, &action),
        "a 200 on an unknown path or for an invalid name");
  CHECK(json_is_string(json_object_get(j, "lock")) &&
            strcmp(json_string_value(json_object_get(j, "lock")), name) == 0,
        "'lock' is not the name in the path");
  CHECK(strcmp(ctx->req->method, action ? "POST" : "GET") == 0 ||
            (!action && strcmp(ctx->req->method, "HEAD") == 0),
        "a 200 for method %s", ctx->req->method);
  int64_t fence = 0;
  int held = 0;
  char lease[PICKET_PROTO_LEASE_LEN + 1] = "";
  int known = stub_lookup(name, &fence, &held, lease);
  if (action && strcmp(action, "acquire") == 0) {
    CHECK(json_object_size(j) == (size_t)(ctx->auth ? 6 : 5),
          "acquire reply is not {lock, lease, fence, ttl_ms, owner%s}", ctx->auth ? ", fence_token" : "");
    check_fence_token(ctx, resp, j, name, PICKET_PROTO_FENCE_KIND_LOCK);
    const char *l = json_string_value(json_object_get(j, "lease"));
    CHECK(l && picket_proto_lease_valid(l, strlen(l)), "'lease' is not 32 lowercase hex");
    CHECK(api_granted(call) == stub_last_created(),
          "api_granted is %d for a grant that is %s", api_granted(call),
          stub_last_created() ? "new" : "a same-lease refresh");
    CHECK(strcmp(l, call->client_lease) == 0, "the reply's lease is not the client's");
    CHECK(known && held && strcmp(lease, call->lease) == 0,
          "granted a lease the store does not hold");
    CHECK(int_member(ctx, resp, j, "fence", 1) == fence, "fence is not the store's (%lld)",
          (long long)fence);
    json_int_t ttl = int_member(ctx, resp, j, "ttl_ms", 1);
    check_owner(ctx, resp, j);
    json_t *asked = request_member(ctx->req, "lease");
    int same = asked == NULL || strcmp(json_string_value(asked), l) == 0;
    json_decref(asked);
    CHECK(same, "the reply's lease is not the one the client chose");
    /* The owner is the one the request named (null for none or ""). */
    asked = request_member(ctx->req, "owner");
    const char *want_owner = json_string_value(asked);
    json_t *got = json_object_get(j, "owner");
    same = want_owner && want_owner[0] ? json_is_string(got) &&
                                             strcmp(json_string_value(got), want_owner) == 0
                                       : json_is_null(got);
    json_decref(asked);
    CHECK(same, "the reply's owner is not the one the request named");
    asked = request_member(ctx->req, "ttl_ms");
    int64_t def = PICKET_PROTO_TTL_DEFAULT_MS < ctx->cfg->max_ttl_ms ? PICKET_PROTO_TTL_DEFAULT_MS
                                                                     : ctx->cfg->max_ttl_ms;
    int64_t want = asked ? json_integer_value(asked) : def;
    json_decref(asked);
    CHECK(ttl == want, "ttl_ms %lld is not the %lld asked for", (long long)ttl, (long long)want);
  } else if (action && strcmp(action, "renew") == 0) {
    CHECK(json_object_size(j) == (size_t)(ctx->auth ? 4 : 3),
          "renew reply is not {lock, fence, ttl_ms%s}", ctx->auth ? ", fence_token" : "");
    check_fence_token(ctx, resp, j, name, PICKET_PROTO_FENCE_KIND_LOCK);
    CHECK(known && held, "renewed a lock the store does not hold");
    CHECK(int_member(ctx, resp, j, "fence", 1) == fence, "fence is not the store's");
    int_member(ctx, resp, j, "ttl_ms", 1);
  } else if (action && strcmp(action, "break") == 0) {
    CHECK(json_object_size(j) == 4 && json_is_boolean(json_object_get(j, "broken")),
          "break reply is not {lock, broken, fence, owner}");
    CHECK(known && !held, "broken, but the store still holds the lock");
    CHECK(int_member(ctx, resp, j, "fence", 1) == fence, "the break's fence is not the store's");
    check_owner(ctx, resp, j);
  } else if (action && strcmp(action, "release") == 0) {
    CHECK(json_object_size(j) == 2 && json_is_true(json_object_get(j, "released")),
          "release reply is not {lock, released: true}");
    CHECK(known && !held, "released, but the store still holds the lock");
  } else {
    CHECK(action == NULL, "a 200 for action '%s'", action);
    CHECK(json_object_size(j) == 8,
          "inspect reply is not {lock, held, fence, ttl_ms, owner, acquired_at, renewals, waiters}");
    json_t *h = json_object_get(j, "held");
    CHECK(json_is_boolean(h) && json_is_true(h) == (known && held), "'held' is not the store's");
    CHECK(int_member(ctx, resp, j, "fence", 0) == (known ? fence : 0), "fence is not the store's");
    int_member(ctx, resp, j, "ttl_ms", 0);
    check_owner(ctx, resp, j);
    if (!json_is_true(h)) CHECK(json_is_null(json_object_get(j, "owner")), "a free lock with an owner");
  }
}

static void check_reply(const request_ctx *ctx, const api_response *resp, const api_call *call) {
  CHECK(resp->status == 200 || resp->status == 400 || resp->status == 401 ||
            resp->status == 403 || resp->status == 404 || resp->status == 405 ||
            resp->status == 409 || resp->status == 413 || resp->status == 429 ||
            resp->status == 502 || resp->status == 503,
        "status %d is not one picketd answers", resp->status);
  check_auth(ctx, resp, call);
  CHECK(resp->content_type != NULL, "no Content-Type");
  CHECK(resp->body != NULL, "no body");
  const char *path = ctx->req->path;
  if (resp->status == 200 && strcmp(path, "/metrics") == 0) {
    CHECK(strncmp(resp->content_type, "text/plain", 10) == 0, "metrics are not text/plain");
    return;
  }
  if (resp->status == 200 && strcmp(path, "/v1/openapi.yaml") == 0) {
    CHECK(strcmp(resp->content_type, "application/yaml") == 0 &&
              resp->body_len == picket_proto_openapi_len,
          "the spec is not served whole as application/yaml");
    return;
  }
  if (resp->status == 200 && (strcmp(path, "/ui") == 0 || strncmp(path, "/ui/", 4) == 0)) {
    /* the console's static files, each under the console's CSP */
    CHECK(strncmp(resp->content_type, "text/", 5) == 0 ||
              strncmp(resp->content_type, "image/svg+xml", 13) == 0,
          "a console file as %s", resp->content_type);
    int csp = 0;
    for (const char *const *h = resp->extra_headers; h && h[0] && h[1]; h += 2)
      csp |= strcmp(h[0], "Content-Security-Policy") == 0 && strstr(h[1], "default-src 'none'");
    CHECK(csp, "a console file without its Content-Security-Policy");
    return;
  }
  CHECK(strcmp(resp->content_type, "application/json") == 0, "JSON reply without application/json");
  CHECK(strlen(resp->body) == resp->body_len, "body_len is not the body's length");
  json_error_t jerr;
  json_t *j = json_loadb(resp->body, resp->body_len, JSON_REJECT_DUPLICATES, &jerr);
  CHECK(json_is_object(j), "the body is not a JSON object: %s", j ? "not an object" : jerr.text);
  if (resp->status != 200) {
    check_error(ctx, resp, j);
    CHECK(!api_granted(call), "api_granted is set on a %d", resp->status);
  } else if (strcmp(path, "/healthz") == 0) {
    CHECK(json_object_size(j) == 1 &&
              json_is_string(json_object_get(j, "status")) &&
              strcmp(json_string_value(json_object_get(j, "status")), "ok") == 0,
          "healthz is not {\"status\":\"ok\"}");
  } else if (strcmp(path, "/readyz") == 0) {
    /* under --auth-file, where Redis is goes to a metrics token only */
    int detail = !ctx->auth || token_of(ctx->req->authorization) == 2;
    CHECK(json_object_size(j) == (detail ? 3u : 2u) &&
              json_is_string(json_object_get(j, "status")) &&
              strcmp(json_string_value(json_object_get(j, "status")), "ready") == 0 &&
              json_is_integer(json_object_get(j, "replicas")) &&
              json_is_string(json_object_get(j, "primary")) == detail,
          detail ? "readyz is not {status: ready, replicas, primary}"
                 : "readyz tells a stranger more than {status: ready, replicas}");
    int_member(ctx, resp, j, "replicas", 0);
  } else if (strcmp(path, "/v1/locks") == 0) {
    json_t *locks = json_object_get(j, "locks"), *e;
    size_t i;
    CHECK(json_object_size(j) == 2 && json_is_array(locks), "list reply is not {locks, cursor}");
    json_t *c = json_object_get(j, "cursor");
    CHECK(json_is_null(c) || json_is_string(c), "cursor is neither null nor a string");
    json_array_foreach(locks, i, e) {
      const char *kind = json_string_value(json_object_get(e, "kind"));
      const char *n = json_string_value(json_object_get(e, "name"));
      CHECK(kind && n && picket_proto_name_valid(n, strlen(n)), "a listed entry without kind or name");
      int64_t fence = 0;
      int held = 0;
      char lease[PICKET_PROTO_LEASE_LEN + 1], key[PICKET_PROTO_NAME_MAX + 3];
      snprintf(key, sizeof key, "%s%s", strcmp(kind, "semaphore") == 0 ? "s/"
                                        : strcmp(kind, "rwlock") == 0  ? "r/"
                                        : strcmp(kind, "election") == 0
                                            ? PICKET_PROTO_ELECTION_STORE_PREFIX : "", n);
      CHECK(stub_lookup(key, &fence, &held, lease) && held, "listed %s, which is not held", n);
      int_member(ctx, resp, e, "holders", 1);
      int_member(ctx, resp, e, "ttl_ms", 1);
      check_owner(ctx, resp, e);
    }
  } else if (strcmp(path, "/v1/whoami") == 0) {
    CHECK(json_object_size(j) == 3 && json_is_array(json_object_get(j, "verbs")) &&
              json_is_array(json_object_get(j, "prefixes")),
          "whoami reply is not {token, verbs, prefixes}");
  } else if (is_semaphore_path(path) || strncmp(path, "/v1/rwlocks/", 12) == 0) {
    CHECK(resp->allow == NULL && resp->retry_after[0] == '\0', "a 200 with Allow or Retry-After");
    check_family_ok(ctx, resp, call, j);
  } else if (strncmp(path, "/v1/elections/", 14) == 0) {
    CHECK(resp->allow == NULL && resp->retry_after[0] == '\0', "a 200 with Allow or Retry-After");
    check_election_ok(ctx, resp, call, j);
  } else {
    CHECK(resp->allow == NULL && resp->retry_after[0] == '\0', "a 200 with Allow or Retry-After");
    check_lock_ok(ctx, resp, call, j);
  }
  json_decref(j);
}

/* The checks on an API_WAIT: only a waiting acquire may wait, it says
 * until when, and it has no reply yet (nothing to leak). */
static void check_wait(const request_ctx *ctx, const api_response *resp, const api_call *call) {
  CHECK((call->endpoint == EP_ACQUIRE || call->endpoint == EP_SEM_ACQUIRE) && call->wait_ms > 0 &&
            resp->body == NULL,
        "API_WAIT from something that is not a waiting acquire");
  CHECK(call->retry_at_ms > 0 && call->deadline_ms >= call->started_ms, "a wait without times");
  CHECK(!api_granted(call), "API_WAIT after a grant");
}

/* Runs one request through api.c the way server/http.c does, including a
 * waiting acquire's retries and the end of its wait. */
static void run_request(const api_request *req, const config *cfg, stub_fault fault, int flags) {
  api_call call;
  api_response resp;
  memset(&call, 0, sizeof call);
  request_ctx ctx = {req, cfg, fault, 0, (flags & FLAG_AUTH_MASK) == FLAG_AUTH};
  api_result r = routes_handle(req, &call, &resp);
  if (r == API_STREAM) { /* an event stream: its first read finds nothing yet (no thread) */
    char buf[64];
    if (resp.status != 200 || resp.stream == NULL) broken(&ctx, &resp, "API_STREAM without a stream");
    if (events_read(resp.stream, buf, sizeof buf) != 0)
      broken(&ctx, &resp, "an event stream had bytes at once");
    events_close(resp.stream);
    api_call_end(&call);
    return;
  }
  for (int i = 0; r == API_WAIT; i++) {
    check_wait(&ctx, &resp, &call);
    ctx.retried = 1;
    if (i == MAX_RETRIES) {
      api_wait_expired(&call, &resp);
      break;
    }
    if (flags & FLAG_EXPIRE) stub_advance_ms(30LL * 24 * 3600 * 1000);
    api_retry_acquire(&call);
    api_run_store(&call);
    r = api_finish(&call, &resp);
  }
  if (verbose)
    printf("%s %s (fault %d, %zu body bytes) -> %d %.*s\n", req->method, req->path, (int)fault,
           req->body_len, resp.status, (int)(resp.body_len > 200 ? 200 : resp.body_len),
           resp.body ? resp.body : "");
  check_reply(&ctx, &resp, &call);
  api_call_end(&call);
  api_response_free(&resp);
}

/* Finds `needle` in data[0..size), or returns NULL. */
static const uint8_t *find(const uint8_t *data, size_t size, const char *needle, size_t n) {
  for (size_t i = 0; i + n <= size; i++)
    if (memcmp(data + i, needle, n) == 0) return data + i;
  return NULL;
}

/* Decodes and runs one request of the input (see the top of the file). */
/* api_request.query_arg over "k=v&k=v" (the first k wins; a k with no
 * "=" has the value ""). The values live in a static copy. */
static const char *query_arg(void *ctx, const char *key) {
  static char copy[PATH_CAP + 1];
  const char *q = ctx;
  size_t klen = strlen(key);
  for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
    if (strncmp(p, key, klen) != 0 || (p[klen] != '=' && p[klen] != '&' && p[klen] != '\0'))
      continue;
    const char *v = p[klen] == '=' ? p + klen + 1 : p + klen;
    size_t vlen = strcspn(v, "&");
    memcpy(copy, v, vlen);
    copy[vlen] = '\0';
    return copy;
  }
  return NULL;
}

static void run_one(const uint8_t *data, size_t size) {
  if (size < 3) return;
  const char *method = METHODS[data[0] % 8];
  stub_fault fault = (stub_fault)(data[1] % 8);
  stub_when when = (stub_when)(data[1] >> 6);
  int flags = data[2];
  data += 3;
  size -= 3;

  static char path[PATH_CAP + 1];
  const uint8_t *nl = memchr(data, '\n', size);
  size_t plen = nl ? (size_t)(nl - data) : size;
  memcpy(path, data, plen < PATH_CAP ? plen : PATH_CAP);
  path[plen < PATH_CAP ? plen : PATH_CAP] = '\0'; /* an embedded NUL ends it, as in C */
  size_t used = nl ? plen + 1 : plen;
  data += used;
  size -= used;

  const char *owner = "other-worker";
  size_t olen = strlen(owner);
  if (flags & FLAG_OWNER_LINE) {
    nl = memchr(data, '\n', size);
    olen = nl ? (size_t)(nl - data) : size;
    owner = (const char *)data;
    used = nl ? olen + 1 : olen;
    data += used;
    size -= used;
  }
  static char authz[PATH_CAP + 1];
  const char *authorization = NULL;
  if ((flags & FLAG_AUTH_MASK) == FLAG_AUTH) {
    nl = memchr(data, '\n', size);
    size_t alen = nl ? (size_t)(nl - data) : size;
    if (alen > PATH_CAP) alen = PATH_CAP;
    memcpy(authz, data, alen);
    authz[alen] = '\0'; /* as libmicrohttpd hands a header over: a C string */
    authorization = strcmp(authz, "NONE") == 0 ? NULL : authz;
    used = nl ? (size_t)(nl - data) + 1 : size;
    data += used;
    size -= used;
  }
  /* A copy of the body in its own allocation, so that ASan catches a read
   * past its end; no body is NULL, as in server/http.c. */
  int too_large = (flags & FLAG_TOO_LARGE) || size > PICKET_PROTO_BODY_MAX;
  size_t blen = size > PICKET_PROTO_BODY_MAX ? PICKET_PROTO_BODY_MAX : size;
  char *body = NULL;
  if (blen) {
    body = malloc(blen);
    if (body == NULL) abort();
    memcpy(body, data, blen);
  }

  const config *cfg = flags & FLAG_SMALL_CONFIG ? &small_cfg : &default_cfg;
  api_init(cfg);
  routes_init();
  stub_request_begin(fault, when);
  if (flags & FLAG_PREHELD) stub_preheld(owner, olen, flags & FLAG_NO_EXPIRY ? -1 : 5000);
  /* "?k=v&k=v" after the path is its query, as libmicrohttpd splits it
   * (without the percent-decoding: the handlers see any bytes) */
  char *query = strchr(path, '?');
  if (query) *query++ = '\0';
  /* Sent as a client sends it (no Host, Origin or Sec-Fetch-Site; a JSON
   * body), so the handlers behind origin.c's checks are what is fuzzed. */
  api_request req = {.method = method, .path = path, .body = body, .body_len = blen,
                     .body_too_large = too_large, .authorization = authorization,
                     .peer = "192.0.2.1", .query_arg = query_arg, .query_ctx = query,
                     .content_type = "application/json"};
  int auth = (flags & FLAG_AUTH_MASK) == FLAG_AUTH;
  auth_set_table(auth ? fuzz_auth : NULL);
  signer_set_key(auth ? &fuzz_keys.keys[0] : NULL, cfg);
  run_request(&req, cfg, fault, flags);
  auth_set_table(NULL);
  signer_set_key(NULL, cfg);
  free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stub_reset();
  static const char sep[] = SEPARATOR;
  for (int n = 0; n < MAX_REQUESTS; n++) {
    const uint8_t *end = find(data, size, sep, sizeof sep - 1);
    size_t len = end ? (size_t)(end - data) : size;
    run_one(data, len);
    if (end == NULL) break;
    data += len + sizeof sep - 1;
    size -= len + sizeof sep - 1;
  }
  return 0;
}
