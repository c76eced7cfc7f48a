/* picket_proto: the small contract that picketd, libpicket, the examples and
 * the benchmark share, so that none of them re-states a rule the others could
 * drift from: lock-name and lease-id validation, limits and defaults, the
 * error-code table of the HTTP API, header and environment names, the Redis
 * key layout, and the embedded Redis scripts and OpenAPI document.
 *
 * proto/openapi.yaml and proto/README.md describe the same contract for
 * people and other languages; keep them in step with this file. */
#ifndef PICKET_PROTO_H
#define PICKET_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Limits and defaults of API v1. */
#define PICKET_PROTO_NAME_MAX 200          /* lock names: 1..200 bytes */
#define PICKET_PROTO_OWNER_MAX 128         /* owner: 0..128 characters */
#define PICKET_PROTO_OWNER_BYTES_MAX (4 * PICKET_PROTO_OWNER_MAX) /* in UTF-8 */
#define PICKET_PROTO_LEASE_LEN 32          /* lease id: 32 lowercase hex */
#define PICKET_PROTO_BODY_MAX 8192         /* request bodies: 8 KiB */
#define PICKET_PROTO_TTL_DEFAULT_MS 30000  /* acquire and renew default */
#define PICKET_PROTO_MAX_TTL_DEFAULT_MS 3600000
#define PICKET_PROTO_MAX_WAIT_DEFAULT_MS 60000
#define PICKET_PROTO_HOLD_MAX_MS (86400000LL * 365) /* max_hold_ms: 0 (no cap) or up to a year */
/* Semaphore names leave room for ":permit:" and a slot number below the
 * limit in their fence's lock name (picket_proto_sem_fence_lock). */
#define PICKET_PROTO_SEM_NAME_MAX 180
#define PICKET_PROTO_SEM_LIMIT_MAX 100000 /* --max-semaphore-limit's own bound */
#define PICKET_PROTO_SEM_LIMIT_DEFAULT 4096
#define PICKET_PROTO_RW_NAME_MAX 197   /* NAME:rw is a lock name */
#define PICKET_PROTO_RW_LISTED_MAX 100 /* GET lists at most this many readers */
#define PICKET_PROTO_RW_READERS_MAX 100000 /* --max-readers's own bound */
/* Elections (docs/elections.md): an election NAME is kept in the store as
 * the lock "/e/NAME" ('/' is no name byte: never a lock's name, and no
 * listing range of lock names holds it), which leaves 197 bytes for its
 * name. Its leader's value is 0..4096 bytes of UTF-8 without control
 * characters. */
#define PICKET_PROTO_ELECTION_NAME_MAX 197
#define PICKET_PROTO_ELECTION_STORE_PREFIX "/e/"
#define PICKET_PROTO_VALUE_BYTES_MAX 4096
#define PICKET_PROTO_FENCE_MAX INT64_MAX   /* fences are 1..2^63-1 */
#define PICKET_PROTO_KEY_PREFIX_DEFAULT "picket:"
#define PICKET_PROTO_KEY_PREFIX_MAX 64

/* Headers a fenced write carries (fenced-kv and any storage that checks). */
#define PICKET_PROTO_HEADER_LOCK "Picket-Lock"
#define PICKET_PROTO_HEADER_FENCE "Picket-Fence"
/* The grant's signed fence (proto/README.md "Signed fences"), which storage
 * with the key file requires beside Picket-Fence. */
#define PICKET_PROTO_HEADER_FENCE_TOKEN "Picket-Fence-Token"

/* Environment that `picket run` gives the child. */
#define PICKET_PROTO_ENV_LOCK "PICKET_LOCK"
#define PICKET_PROTO_ENV_FENCE "PICKET_FENCE"
#define PICKET_PROTO_ENV_FENCE_TOKEN "PICKET_FENCE_TOKEN"
#define PICKET_PROTO_ENV_LEASE "PICKET_LEASE"
#define PICKET_PROTO_ENV_DEADLINE_MS "PICKET_DEADLINE_MS"
/* ...and, for a semaphore's permit (PICKET_LOCK is then its fence lock,
 * NAME:permit:I), its slot and the semaphore; for a read/write lock's
 * lease (PICKET_LOCK is NAME:rw), "read" or "write" and the rwlock. */
#define PICKET_PROTO_ENV_PERMIT "PICKET_PERMIT"
#define PICKET_PROTO_ENV_SEMAPHORE "PICKET_SEMAPHORE"
#define PICKET_PROTO_ENV_MODE "PICKET_MODE"
#define PICKET_PROTO_ENV_RWLOCK "PICKET_RWLOCK"

/* The error codes of the HTTP API: X(ENUM, wire code, HTTP status, message).
 * Servers turn their internal results into one of these; clients map the
 * wire code back. One table, so a new code cannot be half added. */
#define PICKET_PROTO_ERROR_MAP(X)                                                      \
  X(INVALID_ARGUMENT, "invalid_argument", 400, "invalid argument")                    \
  X(NOT_FOUND, "not_found", 404, "no such resource")                                   \
  X(METHOD_NOT_ALLOWED, "method_not_allowed", 405, "method not allowed")               \
  X(LOCK_HELD, "lock_held", 409, "the lock is held by another lease")                 \
  X(LEADER_EXISTS, "leader_exists", 409, "the election has a leader")                \
  X(LOCK_DELAY, "lock_delay", 409, "the last lease expired without a release; its lock-delay is running") \
  X(SEMAPHORE_FULL, "semaphore_full", 409, "every permit of the semaphore is held")    \
  X(TOO_MANY_READERS, "too_many_readers", 409, "the read/write lock has as many read leases as it may (--max-readers)") \
  X(LIMIT_MISMATCH, "limit_mismatch", 409, "the semaphore's live permits were granted under another limit") \
  X(LEASE_LOST, "lease_lost", 409, "the lease is no longer held (expired, released or never yours)") \
  X(STALE_FENCE, "stale_fence", 409, "a newer fence has been seen for this lock")     \
  X(VERSION_MISMATCH, "version_mismatch", 412, "the stored version does not match If-Match") \
  X(WRONG_LOCK, "wrong_lock", 409, "this key is written under another lock")          \
  X(FENCE_INVALID, "fence_invalid", 403, "the fence is not signed by picketd for this lock") \
  X(TOO_MANY_LOCKS, "too_many_locks", 507, "the store tracks as many locks as it may (--max-locks)") \
  X(UNAUTHENTICATED, "unauthenticated", 401, "authentication required")               \
  X(PERMISSION_DENIED, "permission_denied", 403, "this token may not do that")         \
  X(BODY_TOO_LARGE, "body_too_large", 413, "request body too large")                  \
  X(LENGTH_REQUIRED, "length_required", 411, "a request body must come with Content-Length (Transfer-Encoding is refused)") \
  X(UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, "a request body must be sent as Content-Type: application/json") \
  X(FORBIDDEN_ORIGIN, "forbidden_origin", 403, "a web page on another origin may not change anything") \
  X(MISDIRECTED_REQUEST, "misdirected_request", 421, "picketd does not answer as this Host") \
  X(TOO_MANY_LEASES, "too_many_leases", 429, "this token holds as many leases as it may") \
  X(QUOTA_WAITERS, "too_many_waiters", 429, "this client has as many waiting acquires as it may") \
  X(RATE_LIMITED, "rate_limited", 429, "too many acquires per second from this client") \
  X(QUOTA_WATCHERS, "too_many_watchers", 429, "this client has as many event streams open as it may") \
  X(TOO_MANY_CONNECTIONS, "too_many_connections", 429, "this token holds as many open connections as it may") \
  X(INTERNAL, "internal_error", 500, "internal error")                                \
  X(STORE_ERROR, "store_error", 502, "Redis answered with an error")                  \
  X(STORE_UNAVAILABLE, "store_unavailable", 503, "Redis is unreachable or timed out") \
  X(STORE_MISCONFIGURED, "store_misconfigured", 503, "Redis evicts keys (maxmemory-policy); fences are unsafe") \
  X(STORE_FULL, "store_full", 503, "Redis is out of memory (maxmemory reached): writes refused") \
  X(NOT_REPLICATED, "not_replicated", 503, "too few replicas acknowledged the write") \
  X(STORE_TAMPERED, "store_tampered", 503, "another writer changed this lock's fence counter; no fence is certain") \
  X(TOO_MANY_WAITERS, "too_many_waiters", 503, "too many waiting acquires")           \
  X(TOO_MANY_WATCHERS, "too_many_watchers", 503, "too many event streams open")        \
  X(SHUTTING_DOWN, "shutting_down", 503, "the server is shutting down")

typedef enum {
#define PICKET_PROTO_ERR_ENUM(e, code, status, msg) PICKET_PROTO_ERR_##e,
  PICKET_PROTO_ERROR_MAP(PICKET_PROTO_ERR_ENUM)
#undef PICKET_PROTO_ERR_ENUM
  PICKET_PROTO_ERR_COUNT
} picket_proto_err;

/* Wire code ("lock_held"), HTTP status and default message of an error. */
const char *picket_proto_err_code(picket_proto_err e);
int picket_proto_err_status(picket_proto_err e);
const char *picket_proto_err_message(picket_proto_err e);
/* The error whose wire code is `code`, or -1 if none. */
int picket_proto_err_from_code(const char *code);

/* Validation. Each returns 1 when valid, 0 otherwise; `s` need not be
 * NUL-terminated (an embedded NUL is invalid). */
/* Names: [A-Za-z0-9._:-]{1,200}, except "." and ".." (dot-segments, which
 * URL libraries remove, so no client could address them). */
int picket_proto_name_valid(const char *s, size_t len);
int picket_proto_lease_valid(const char *s, size_t len); /* [0-9a-f]{32} */
/* s[0..len) percent-decoded exactly once (RFC 3986) into out, with a
 * NUL: returns the decoded length, or -1 when a '%' is not followed by two
 * hex digits, a NUL would be decoded, or the text needs more than cap - 1
 * bytes. Checking what the text may contain is the caller's. */
int picket_proto_percent_decode(const char *s, size_t len, char *out, size_t cap);
/* A lock name as a URL path segment carries it: percent-decoded exactly
 * once (RFC 3986; generated clients send ':' as "%3A"), then held to the
 * name rule, so a decoded '/' or NUL is refused, never another path. A '%'
 * not followed by two hex digits is refused. Writes the name and a NUL to
 * out; returns its length, or -1 when refused. */
int picket_proto_name_from_path(const char *seg, size_t len, char out[PICKET_PROTO_NAME_MAX + 1]);
/* Owner: 0..128 characters (Unicode code points, so at most 512 bytes) of
 * UTF-8 without control characters (C0, DEL, C1). */
int picket_proto_owner_valid(const char *s, size_t len);
/* An election's value: 0..4096 bytes of UTF-8 without control characters. */
int picket_proto_value_valid(const char *s, size_t len);

/* Parses a fence: a decimal integer 1..2^63-1, no sign, no spaces, no
 * leading zeros. Returns 1 and sets *out, or 0 when malformed. */
int picket_proto_fence_parse(const char *s, size_t len, int64_t *out);

/* Fills out[0..32] with a fresh lease id (32 lowercase hex and a NUL) from
 * the kernel's CSPRNG (getrandom). Returns 0, or -1 with errno set. */
int picket_proto_lease_new(char out[PICKET_PROTO_LEASE_LEN + 1]);
/* The parts of picket_proto_lease_new, for a caller that keeps a pool of
 * random bytes: n bytes from getrandom (0, or -1 with errno set), and 16
 * random bytes as a lease id. */
int picket_proto_random(void *buf, size_t n);

/* Signed fences (fence_token.c; proto/README.md "Signed fences"): a fence
 * token is "v2." KIND "." KID "." and the hex HMAC-SHA256, under the key
 * KID, of "picket-fence-v2" NUL KIND NUL KID NUL PREFIX NUL LOCK NUL FENCE.
 * KIND is what the grant was: the kinds below, by name. */
#define PICKET_PROTO_FENCE_KEYS_MAX 16
#define PICKET_PROTO_FENCE_KID_MAX 32
#define PICKET_PROTO_FENCE_TOKEN_MAX (3 + 7 + PICKET_PROTO_FENCE_KID_MAX + 1 + 64)
#define PICKET_PROTO_FENCE_KIND_BY_NAME 0u /* verify: the kind the lock name's shape says */
#define PICKET_PROTO_FENCE_KIND_LOCK 1u    /* "lock": a lock's lease */
#define PICKET_PROTO_FENCE_KIND_PERMIT 2u  /* "permit": a semaphore's permit (NAME:permit:I) */
#define PICKET_PROTO_FENCE_KIND_READ 4u    /* "read": a read lease (NAME:rw, its epoch's fence) */
#define PICKET_PROTO_FENCE_KIND_WRITE 8u   /* "write": a write lease (NAME:rw) */
typedef struct {
  char kid[PICKET_PROTO_FENCE_KID_MAX + 1];
  unsigned char key[64];
  size_t key_len;
} picket_proto_fence_key;
typedef struct {
  int n;                                       /* keys[0] signs; all verify */
  picket_proto_fence_key keys[PICKET_PROTO_FENCE_KEYS_MAX];
  int accept_v1; /* verify v1 tokens (no kind) too: an upgrade's window, off by default */
} picket_proto_fence_keys;
/* A key file's text ("KID HEX" per line, '#' comments): 0, or -1 with the
 * line and why in err (never key material). */
int picket_proto_fence_keys_parse(const char *text, size_t len, picket_proto_fence_keys *out,
                                  char *err, size_t errlen);
int picket_proto_fence_keys_load(const char *path, picket_proto_fence_keys *out, char *err,
                                 size_t errlen);
/* "lock", "permit", "read" or "write" for one kind bit; NULL otherwise. */
const char *picket_proto_fence_kind_name(unsigned kind);
/* The kind a fenced store expects under this lock name when it is not
 * told: WRITE for NAME:rw, PERMIT for NAME:permit:DIGITS, else LOCK. */
unsigned picket_proto_fence_kind_of_name(const char *lock);
/* The v2 token of (kind, prefix, lock, fence) under k: 0, or -1 (fence < 1,
 * or kind not one kind bit). */
int picket_proto_fence_token(const picket_proto_fence_key *k, unsigned kind, const char *prefix,
                             const char *lock, int64_t fence,
                             char out[PICKET_PROTO_FENCE_TOKEN_MAX + 1]);
/* 1 when token (len bytes) is a valid v2 token of (prefix, lock, fence)
 * whose kind is one of `kinds` (a mask; KIND_BY_NAME: the name's kind),
 * under one of ks's keys, or with ks->accept_v1 a valid v1 token of
 * (prefix, lock, fence); else 0. Compared in constant time. */
int picket_proto_fence_token_verify(const picket_proto_fence_keys *ks, const char *prefix,
                                    const char *lock, int64_t fence, unsigned kinds,
                                    const char *token, size_t len);
void picket_proto_lease_format(const unsigned char raw[PICKET_PROTO_LEASE_LEN / 2],
                               char out[PICKET_PROTO_LEASE_LEN + 1]);

/* Redis keys of lock `name` under `prefix`: "<prefix>{<name>}:lease" and
 * "<prefix>{<name>}:fence"; the release channel is "<prefix>release".
 * Each writes a NUL-terminated string into buf and returns its length, or
 * -1 when it does not fit. */
int picket_proto_key_lease(char *buf, size_t cap, const char *prefix, const char *name);
int picket_proto_key_fence(char *buf, size_t cap, const char *prefix, const char *name);
/* P{NAME}:sem, a semaphore's base key (proto/redis/semaphore.lua derives
 * the others from it). */
int picket_proto_key_sem(char *buf, size_t cap, const char *prefix, const char *name);
/* P{NAME}:rw, a read/write lock's base key (proto/redis/rwlock.lua). */
int picket_proto_key_rw(char *buf, size_t cap, const char *prefix, const char *name);
/* The lock name a fenced store checks read/write lock `name`'s fences
 * under: NAME:rw. -1 when that is no valid lock name (too long). */
int picket_proto_rw_fence_lock(char *buf, size_t cap, const char *name);
/* The lock name a fenced store checks permit `permit` of semaphore `name`
 * under: NAME:permit:I. -1 when that is no valid lock name (too long). */
int picket_proto_sem_fence_lock(char *buf, size_t cap, const char *name, int64_t permit);
/* P{/token/TOKEN}:leases: the count of a token's held leases (its
 * max_leases; proto/redis/quota.lua). */
int picket_proto_key_token_leases(char *buf, size_t cap, const char *prefix, const char *token);
int picket_proto_channel(char *buf, size_t cap, const char *prefix);
/* P{NAME}:events, the channel of lock `name`'s events while it is watched
 * (proto/redis/events.lua; docs/events.md). */
int picket_proto_channel_events(char *buf, size_t cap, const char *prefix, const char *name);

/* Prefixes: 0..64 bytes of [A-Za-z0-9._:-] (no braces: they would change
 * the hash tag). Returns 1 when valid. */
int picket_proto_prefix_valid(const char *s, size_t len);

/* The embedded sources (NUL-terminated, *_len without the NUL). */
extern const char picket_proto_lua_acquire[];
extern const size_t picket_proto_lua_acquire_len;
extern const char picket_proto_lua_renew[];
extern const size_t picket_proto_lua_renew_len;
extern const char picket_proto_lua_release[];
extern const size_t picket_proto_lua_release_len;
extern const char picket_proto_lua_quota[];
extern const size_t picket_proto_lua_quota_len;
extern const char picket_proto_lua_inspect[];
extern const size_t picket_proto_lua_inspect_len;
extern const char picket_proto_lua_semaphore[];
extern const size_t picket_proto_lua_semaphore_len;
extern const char picket_proto_lua_sem_inspect[];
extern const size_t picket_proto_lua_sem_inspect_len;
extern const char picket_proto_lua_rwlock[];
extern const size_t picket_proto_lua_rwlock_len;
extern const char picket_proto_lua_rw_inspect[];
extern const size_t picket_proto_lua_rw_inspect_len;
extern const char picket_proto_lua_list[];
extern const size_t picket_proto_lua_list_len;
extern const char picket_proto_lua_watch[];
extern const size_t picket_proto_lua_watch_len;
extern const char picket_proto_lua_break[];
extern const size_t picket_proto_lua_break_len;
extern const char picket_proto_openapi[];
extern const size_t picket_proto_openapi_len;

#endif
