/* picket.h: the public C API of libpicket, the client of picketd.
 *
 * libpicket acquires, renews, releases and inspects leases on named locks,
 * and permits of counting semaphores (a permit is a lease too), over
 * picketd's HTTP API, keeps a lease alive from a background thread
 * (picket_keeper), and follows a lock's events as they happen
 * (picket_watch; a keeper uses them to learn of a loss at once). It also
 * campaigns in leader elections (picket_campaign: a leadership is a lease
 * whose fence is its term) and observes them (picket_observe_open). Every
 * grant carries a fencing token: pass it to the
 * storage you write to (see picket/fence.h) so that a holder that lost its
 * lease without knowing it cannot overwrite a newer holder's work.
 *
 * A lease also knows its *local deadline*: the monotonic time at which the
 * acquire (or the last successful renew) request was sent, plus the TTL,
 * less a drift margin. The server's expiry can only be later, so a holder
 * that stops touching fenced storage at its local deadline never overlaps
 * the next holder as far as its own clock can tell.
 *
 * Conventions:
 *  - Calls return 0 or a negative PICKET_E* code; picket_strerror() names
 *    it, and the handle keeps the detail of the last call (HTTP status, the
 *    server's error code and message).
 *  - Every object the library allocates comes with a _free (or _stop) that
 *    accepts NULL; strings returned by accessors belong to the object.
 *  - Thread safety: a picket_client is used by one thread at a time (one
 *    handle per thread). A picket_lease may be read from any thread while a
 *    keeper renews it (its deadline and TTL are updated atomically), but it
 *    must not be freed while a keeper uses it. A keeper owns a private
 *    client handle, so it never shares one with the caller.
 *  - Times are milliseconds; "monotonic" times are CLOCK_MONOTONIC, the
 *    clock picket_now_ms() reads.
 *  - libpicket never logs and never installs signal handlers.
 */
#ifndef PICKET_PICKET_H
#define PICKET_PICKET_H

#include <stddef.h> /* size_t */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; only PICKET_EXTERN symbols
 * are exported (fence.h uses it too). */
#if defined(__GNUC__) && __GNUC__ >= 4
#define PICKET_EXTERN __attribute__((visibility("default")))
#else
#define PICKET_EXTERN
#endif

#define PICKET_VERSION "0.1.0"
#define PICKET_NAME_MAX 200  /* lock names: 1..200 bytes of [A-Za-z0-9._:-] */
#define PICKET_SEM_NAME_MAX 180 /* semaphore names: lock names of 1..180 bytes (room
                                   for ":permit:I", the lock name of a permit's fence) */
#define PICKET_SEM_LIMIT_MAX 100000 /* a semaphore's limit: 1..this (picketd's own
                                       --max-semaphore-limit, 4096 by default, may say less) */
#define PICKET_RW_NAME_MAX 197 /* read/write lock names: lock names of 1..197 bytes
                                  (room for the fence lock's ":rw") */
#define PICKET_MODE_READ 0  /* an rwlock lease's mode: one of many readers */
#define PICKET_MODE_WRITE 1 /* ... or the one writer */
#define PICKET_OWNER_MAX 128 /* owner: 0..128 characters (code points) of UTF-8 */
#define PICKET_OWNER_BYTES_MAX 512 /* ... which is at most 512 bytes */
#define PICKET_LEASE_ID_LEN 32 /* lease ids: 32 lowercase hex digits */
#define PICKET_FENCE_TOKEN_MAX 107 /* a signed fence: "v2." KIND "." KID "." 64 hex (proto/README.md) */
#define PICKET_ELECTION_NAME_MAX 197 /* election names: 1..197 bytes of [A-Za-z0-9._:-] */
#define PICKET_ELECTION_VALUE_MAX 4096 /* a leader's value: 0..4096 bytes of UTF-8 */
#define PICKET_DEFAULT_SERVER "http://127.0.0.1:7070"

/* Error codes: X(NAME, value, message). One table, so a code cannot be half
 * added; PICKET_E<NAME> is the enum constant. */
#define PICKET_ERRNO_MAP(X)                                                                \
  X(EINVAL, -1, "invalid argument")                                                       \
  X(ENOMEM, -2, "out of memory")                                                          \
  X(EHELD, -3, "the lock is held by another lease")                                       \
  X(ELOST, -4, "the lease is no longer held (expired, released or never yours)")          \
  X(EEXPIRED, -5, "the lease's local deadline has passed")                                \
  X(EUNAVAIL, -6, "the lock service is unavailable (503)")                                \
  X(ESTORE, -7, "the lock store answered with an error (502)")                            \
  X(ETIMEDOUT, -8, "the request timed out")                                               \
  X(ETRANSPORT, -9, "could not reach the server")                                         \
  X(EPROTO, -10, "unexpected reply from the server")                                      \
  X(EAUTH, -11, "the server refused the credentials (401/403)")                           \
  X(ESERVER, -12, "the server refused the request")                                       \
  X(ECANCELED, -13, "the request was canceled")                                           \
  X(ESYS, -14, "a system call failed")                                                    \
  X(ELIMIT, -15, "a quota of this client was reached (429)")                            \
  X(ECAPPED, -16, "the lease reached its max_hold_ms")                                    \
  X(EMISMATCH, -17, "the semaphore's live permits were granted under another limit")        \
  X(EUNSUPPORTED, -18, "the server does not have this endpoint (an older picketd)")         \
  X(ELEADER, -19, "the election has a leader (another candidate's lease)")

typedef enum {
#define PICKET_ERRNO_ENUM(name, value, msg) PICKET_##name = value,
  PICKET_ERRNO_MAP(PICKET_ERRNO_ENUM)
#undef PICKET_ERRNO_ENUM
} picket_errno;

/* A static message for a PICKET_E* code ("unknown error" otherwise). */
PICKET_EXTERN const char *picket_strerror(int err);
/* The code's name without the PICKET_ prefix ("EHELD"), or "UNKNOWN". */
PICKET_EXTERN const char *picket_err_name(int err);

/* The monotonic clock (CLOCK_MONOTONIC) in milliseconds. */
PICKET_EXTERN int64_t picket_now_ms(void);

/* ---- client ----------------------------------------------------------- */

typedef struct picket_client picket_client;

/* Client options. Fill them with picket_options_init() and change what you
 * need; picket_client_new copies them (and the token and CA file strings).
 * New fields are only ever added at the end. */
typedef struct picket_options {
  int64_t connect_timeout_ms; /* TCP connect bound; default 2000 */
  int64_t request_timeout_ms; /* whole-request bound; default 10000 (a waiting
                                 acquire gets its wait_ms on top) */
  const char *bearer_token;   /* sent as "Authorization: Bearer ..."; NULL: none */
  int retries;                /* extra attempts for safe-to-repeat calls on 503
                                 and transport errors; default 3, 0: none */
  int64_t retry_base_ms;      /* first backoff; doubles per attempt; default 50 */
  int64_t retry_max_ms;       /* backoff cap; default 1000 (with jitter: each
                                 sleep is a random point in [cap/2, cap]) */
  int drift_permille;         /* drift margin, per mille of the TTL; default 10 */
  int64_t drift_min_ms;       /* drift margin, fixed part; default 2 */
  const char *ca_file;        /* https:// servers: a PEM bundle of the CAs to trust
                                 instead of the system's store; NULL: the system's.
                                 libcurl reads it when it connects: an unreadable
                                 file makes calls fail with PICKET_ETRANSPORT */
  const char *cert_file;      /* https:// to a picketd with --tls-client-ca: this
                                 client's PEM certificate (chain, leaf first)... */
  const char *key_file;       /* ...and its unencrypted PEM key; both or neither
                                 (else PICKET_EINVAL); NULL: no client certificate */
} picket_options;

/* Sets the defaults above. */
PICKET_EXTERN void picket_options_init(picket_options *opts);

/* Creates a client of the picketd at base_url ("http://host:port", no
 * path; NULL means PICKET_DEFAULT_SERVER). opts NULL means the defaults.
 * Returns 0 and sets *out (free it with picket_client_free), or
 * PICKET_EINVAL / PICKET_ENOMEM. One keep-alive connection per handle. */
PICKET_EXTERN int picket_client_new(const char *base_url, const picket_options *opts,
                                    picket_client **out);
PICKET_EXTERN void picket_client_free(picket_client *c);

/* The detail of the last call on this handle. Strings belong to the handle
 * and change with the next call. */
PICKET_EXTERN long picket_client_status(const picket_client *c); /* HTTP status, 0 if none */
PICKET_EXTERN const char *picket_client_error_code(const picket_client *c); /* "lock_held", "" */
PICKET_EXTERN const char *picket_client_error_message(const picket_client *c); /* "" if none */
/* After PICKET_EHELD (or PICKET_ELEADER): how long until the holder's (the
 * leader's) lease expires (the code "semaphore_full": the first permit's),
 * and its owner (NULL when it has none, and for a semaphore). After PICKET_ELIMIT with the code
 * "rate_limited": when the next acquire is allowed. -1 / NULL otherwise. */
PICKET_EXTERN int64_t picket_client_retry_after_ms(const picket_client *c);
PICKET_EXTERN const char *picket_client_holder(const picket_client *c);
/* After PICKET_EMISMATCH: the limit the semaphore's live permits were
 * granted under (acquire with that one, or wait until they are all gone).
 * -1 otherwise. */
PICKET_EXTERN int64_t picket_client_sem_limit(const picket_client *c);

/* ---- leases ----------------------------------------------------------- */

typedef struct picket_lease picket_lease;

/* A lease known only by lock name and id, e.g. one handed over from another
 * process, for picket_renew and picket_release. It has no local deadline
 * (picket_lease_valid() is 0) until a renew succeeds. Returns 0 and sets
 * *out, or PICKET_EINVAL / PICKET_ENOMEM. Free with picket_lease_free. */
PICKET_EXTERN int picket_lease_new(const char *lock, const char *lease_id, picket_lease **out);
PICKET_EXTERN void picket_lease_free(picket_lease *l);

PICKET_EXTERN const char *picket_lease_lock(const picket_lease *l); /* a permit: the semaphore; an rwlock lease: the rwlock */
PICKET_EXTERN const char *picket_lease_id(const picket_lease *l); /* a secret: do not log */
PICKET_EXTERN int64_t picket_lease_fence(const picket_lease *l);  /* 0 if unknown */
/* The grant's signed fence (picketd with --fence-key-file), for storage
 * that verifies fences (picket/fence.h); NULL when picketd signs none. */
PICKET_EXTERN const char *picket_lease_fence_token(const picket_lease *l);
PICKET_EXTERN int64_t picket_lease_ttl_ms(const picket_lease *l); /* of the last grant/renew */
PICKET_EXTERN const char *picket_lease_owner(const picket_lease *l); /* NULL: none */
/* Local deadline, monotonic ms (0 if unknown). */
PICKET_EXTERN int64_t picket_lease_deadline_ms(const picket_lease *l);
/* 1 while picket_now_ms() is before the local deadline, else 0. Asks no
 * server: the answer comes from the local clock alone. */
PICKET_EXTERN int picket_lease_valid(const picket_lease *l);
/* Milliseconds left before the local deadline (0 once past or unknown). */
PICKET_EXTERN int64_t picket_lease_remaining_ms(const picket_lease *l);
/* 1 once a grant or renewal got less ttl_ms than it asked for: the lease's
 * max_hold_ms is reached, and it ends at its local deadline. */
PICKET_EXTERN int picket_lease_capped(const picket_lease *l);

/* A semaphore's permit is a picket_lease too: picket_renew, picket_release
 * and keepers work on it unchanged, and picket_lease_lock() names the
 * semaphore. These say which permit it is. */

/* The permit's slot, 0 to limit-1; -1 for a lock's lease (or a permit made
 * by picket_sem_lease_new before its first renew, which learns it). */
PICKET_EXTERN int64_t picket_lease_permit(const picket_lease *l);
/* 1 when the lease is a semaphore's permit, 0 for a lock's lease. */
PICKET_EXTERN int picket_lease_is_permit(const picket_lease *l);
/* The limit the permit was granted under; 0 for a lock's lease or when
 * unknown (a handed-over permit). */
PICKET_EXTERN int64_t picket_lease_limit(const picket_lease *l);
/* The lock name a fenced store checks this lease's fence under
 * (picket/fence.h): the lock's own name for a lock's lease, the permit's
 * "NAME:permit:I" for a permit, "NAME:rw" for an rwlock's lease. NULL while unknown (a handed-over permit
 * before its first renew). Belongs to the lease. */
PICKET_EXTERN const char *picket_lease_fence_lock(const picket_lease *l);

/* A read/write lock's read or write lease is a picket_lease too:
 * picket_renew, picket_release and keepers work on it unchanged,
 * picket_lease_lock() names the rwlock and picket_lease_fence_lock() is
 * "NAME:rw". */

/* 1 when the lease is a leader's lease of an election (picket_campaign),
 * 0 otherwise. Its fence is the term; picket_lease_lock() and
 * picket_lease_fence_lock() name the election. */
PICKET_EXTERN int picket_lease_is_election(const picket_lease *l);

/* 1 when the lease is a read/write lock's, 0 otherwise. */
PICKET_EXTERN int picket_lease_is_rwlock(const picket_lease *l);
/* An rwlock lease's mode, PICKET_MODE_READ or PICKET_MODE_WRITE; -1 for
 * other leases (and for one made by picket_rw_lease_new before its first
 * renew, which learns it). */
PICKET_EXTERN int picket_lease_mode(const picket_lease *l);

/* picket_lease_new for a read or write lease of rwlock `rwlock` held by
 * lease_id (its mode comes with the first successful picket_renew).
 * Returns 0 and sets *out, or PICKET_EINVAL / PICKET_ENOMEM. */
PICKET_EXTERN int picket_rw_lease_new(const char *rwlock, const char *lease_id,
                                      picket_lease **out);

/* picket_lease_new for a permit of semaphore `semaphore` held by lease_id
 * (its slot and fence lock come with the first successful picket_renew).
 * Returns 0 and sets *out, or PICKET_EINVAL / PICKET_ENOMEM. */
PICKET_EXTERN int picket_sem_lease_new(const char *semaphore, const char *lease_id,
                                       picket_lease **out);

/* ---- calls ------------------------------------------------------------ */

typedef struct picket_acquire_opts {
  int64_t ttl_ms;       /* 0: the server's default (30000) */
  int64_t wait_ms;      /* > 0: the server holds the request until the lock
                           frees or the wait ends; 0: fail at once */
  const char *owner;    /* shown to others by inspect and lock_held; NULL: none */
  const char *lease_id; /* 32 hex chosen by the caller; NULL: a fresh one */
  int server_lease_id;  /* 1: send no lease id and let the server choose one;
                           the call is then not retried */
  /* (appended; 0 for both is the old behaviour) */
  int64_t lock_delay_ms; /* > 0: if this lease expires without a release, the
                            lock goes to nobody for this long after (409
                            lock_delay, PICKET_EHELD); bounded by picketd's
                            --max-lock-delay-ms */
  int64_t max_hold_ms;  /* > 0: no renewal carries the lease past grant +
                           this; picket_lease_capped() says when one was cut */
} picket_acquire_opts;

/* Acquires lock `name`. opts NULL means all defaults. A lease id is chosen
 * on the client by default, so a retry after a lost reply returns the same
 * grant (same fence); retries then happen on 503 and transport errors.
 * Returns 0 and sets *out (free with picket_lease_free), PICKET_EHELD when
 * another lease holds it, or an expired one's lock-delay runs
 * (picket_client_error_code() says "lock_held" or "lock_delay"; see
 * picket_client_retry_after_ms), PICKET_ELIMIT
 * when a quota of the caller's token or address says no (429; the code
 * says which: too_many_leases, too_many_waiters, rate_limited), or another
 * PICKET_E* code. */
PICKET_EXTERN int picket_acquire(picket_client *c, const char *name,
                                 const picket_acquire_opts *opts, picket_lease **out);

/* Acquires one permit of counting semaphore `name` (1..PICKET_SEM_NAME_MAX
 * bytes of the lock-name bytes), which has `limit` permits (1..
 * PICKET_SEM_LIMIT_MAX; every live permit of a semaphore is granted under
 * one limit). opts as for picket_acquire (ttl, wait, owner, lease id,
 * lock-delay and hold cap, each per permit); retries are as safe. Returns
 * 0 and sets *out to the permit (a picket_lease: free it with
 * picket_lease_free), PICKET_EHELD when every permit is held (the code
 * "semaphore_full"; picket_client_retry_after_ms says when the first one
 * frees, unless released sooner), PICKET_EMISMATCH when the live permits
 * were granted under another limit (picket_client_sem_limit says which),
 * PICKET_ELIMIT as for picket_acquire (each permit counts as a lease), or
 * another PICKET_E* code. */
PICKET_EXTERN int picket_sem_acquire(picket_client *c, const char *name, int64_t limit,
                                     const picket_acquire_opts *opts, picket_lease **out);

/* Acquires a read (mode PICKET_MODE_READ) or write (PICKET_MODE_WRITE)
 * lease of read/write lock `name` (1..PICKET_RW_NAME_MAX bytes of the
 * lock-name bytes): many readers or one writer, and a writer that waits
 * keeps new readers out. A write's fence is above every earlier grant's,
 * a read's is the last write's; a fenced store checks them under
 * picket_lease_fence_lock(), "NAME:rw". opts as for picket_acquire;
 * retries are as safe. Returns 0 and sets *out (a picket_lease: free it
 * with picket_lease_free), PICKET_EHELD when the mode cannot be had now
 * (a writer holds or waits for it, or, for a write, readers hold it; the
 * code "lock_held" or "lock_delay", picket_client_retry_after_ms and
 * picket_client_holder as for picket_acquire), PICKET_ELIMIT as for
 * picket_acquire, or another PICKET_E* code (PICKET_EINVAL for another
 * mode). */
PICKET_EXTERN int picket_rw_acquire(picket_client *c, const char *name, int mode,
                                    const picket_acquire_opts *opts, picket_lease **out);

/* Extends the lease by ttl_ms (0: the server's default, 30000) and moves its
 * local deadline to this renewal's send time + the TTL granted (less the
 * drift margin), earlier too when ttl_ms is shorter than before; a late
 * reply to an older renewal only ever lowers it. PICKET_ELOST when the
 * server no longer has it. Retries never run past the lease's local
 * deadline. */
PICKET_EXTERN int picket_renew(picket_client *c, picket_lease *lease, int64_t ttl_ms);

/* Releases the lease; its local deadline is cleared (the lease stays
 * allocated: free it with picket_lease_free). PICKET_ELOST when the server
 * no longer had it. A retry that finds the lease gone after an attempt
 * that may have reached the server counts as success. */
PICKET_EXTERN int picket_release(picket_client *c, picket_lease *lease);

/* What anyone may know about a lock (never its lease id). */
typedef struct picket_lock_info {
  int held;                         /* 1 when a lease is live */
  int64_t fence;                    /* the last fence issued; 0 if never */
  int64_t ttl_ms;                   /* remaining TTL of the live lease, else 0 */
  int has_owner;                    /* 1 when owner is set */
  char owner[PICKET_OWNER_BYTES_MAX + 1]; /* the holder's owner, "" if none */
  /* (appended) */
  int64_t acquired_at_ms; /* when the live lease was granted: Redis's clock, ms
                             since the Unix epoch; 0 when not held or unknown */
  int64_t renewals;       /* how often the live lease was renewed; -1 when
                             not held or unknown */
  int64_t waiters;        /* acquires waiting for it on this picketd; -1 when
                             the server does not say (a picketd before these fields) */
} picket_lock_info;

/* Fills *info about lock `name`. Returns 0 or a PICKET_E* code. */
PICKET_EXTERN int picket_inspect(picket_client *c, const char *name, picket_lock_info *info);

/* ---- operators: listing and breaking ------------------------------------ */

#define PICKET_LIST_MAX 1000       /* the most entries of one picket_list page */
#define PICKET_LIST_CURSOR_MAX 220 /* a listing's cursor: at most this many bytes */

/* What a listed name is (picket_lock_entry.kind). */
#define PICKET_KIND_LOCK 0
#define PICKET_KIND_SEMAPHORE 1
#define PICKET_KIND_RWLOCK 2

/* One held name of a listing (never a lease id). */
typedef struct picket_lock_entry {
  int kind;                 /* PICKET_KIND_* */
  char name[PICKET_NAME_MAX + 1];
  int64_t holders;          /* live leases: 1 for a lock or a writer; a
                               semaphore's permits, an rwlock's readers */
  int has_owner;            /* 1 when owner is set */
  char owner[PICKET_OWNER_BYTES_MAX + 1]; /* a lock's or writer's owner, "" if none */
  int64_t fence;            /* a lock's fence, an rwlock's last write's; -1 for
                               a semaphore (each permit has its own) */
  int64_t ttl_ms;           /* until its last live lease expires */
  int64_t acquired_at_ms;   /* a lock's or writer's grant time (Redis's clock,
                               ms since the Unix epoch); 0 when unknown */
  int64_t renewals;         /* how often that lease was renewed; -1 when unknown */
  int64_t waiters;          /* acquires waiting for it on this picketd */
  int64_t limit;            /* a semaphore's limit; 0 for the others */
} picket_lock_entry;

/* One page of a listing. */
typedef struct picket_lock_list {
  size_t nentries;
  picket_lock_entry *entries; /* nentries of them, in the server's order */
  char *cursor;               /* pass it to the next picket_list (with the same
                                 prefix) for the next page; NULL at the end */
} picket_lock_list;

/* Lists the held locks, semaphores and read/write locks whose names start
 * with `prefix` (NULL or "": all; else up to PICKET_NAME_MAX bytes of the
 * lock-name bytes), one page of at most `limit` entries (1..
 * PICKET_LIST_MAX; 0: the server's default, 100), from `cursor` (NULL: the
 * start; else a cursor a previous page of the same prefix returned). A
 * page may hold fewer than `limit` entries, even none, while its cursor
 * says more follow. Needs the `list` verb under picketd's --auth-file,
 * and shows only the names the token's prefixes cover. Retried as a GET.
 * Returns 0 (free what *out holds with picket_lock_list_clear) or a
 * PICKET_E* code (then it holds nothing): PICKET_EINVAL for a bad
 * argument, here or by the server (a cursor of another prefix). */
PICKET_EXTERN int picket_list(picket_client *c, const char *prefix, int limit,
                              const char *cursor, picket_lock_list *out);
/* Frees list's entries and cursor and zeroes it; NULL is fine. */
PICKET_EXTERN void picket_lock_list_clear(picket_lock_list *list);

/* What a break did. */
typedef struct picket_break_result {
  int broken;     /* 1 when a live lease was ended; 0 when none was held */
  int64_t fence;  /* the lock's fence counter after the break: above every
                     fence the broken holder has; the next grant's is above it */
  int has_owner;  /* 1 when owner is set */
  char owner[PICKET_OWNER_BYTES_MAX + 1]; /* the broken lease's owner, "" if none */
} picket_break_result;

/* Breaks lock `name`: ends its lease now, wakes its waiters and moves its
 * fence on, so that a store that checks fences refuses the broken
 * holder's writes once it has seen a newer one; that holder's renew and
 * release then fail with PICKET_ELOST. A lock nobody holds is no error
 * (broken is 0; its fence moves on all the same). Needs the `admin` verb
 * under picketd's --auth-file; without it picketd lets only loopback
 * callers break (PICKET_EAUTH otherwise). Never retried: a repeat could
 * break the lease the next holder was just granted. Returns 0 and fills
 * *out, or a PICKET_E* code (then *out is zeroed). */
PICKET_EXTERN int picket_break(picket_client *c, const char *name, picket_break_result *out);

/* One live permit of a semaphore (never its lease id). */
typedef struct picket_permit_info {
  int64_t permit;        /* the slot, 0 to limit-1 */
  int64_t fence;         /* the slot's last fence */
  int64_t ttl_ms;        /* remaining TTL; 0 for a permit whose lock-delay runs */
  int64_t lock_delay_ms; /* > 0: the slot expired with a lock-delay, still this long */
  int has_owner;
  char owner[PICKET_OWNER_BYTES_MAX + 1];  /* "" if none */
  char fence_lock[PICKET_NAME_MAX + 1];    /* "NAME:permit:I" */
} picket_permit_info;

/* What anyone may know about a semaphore. */
typedef struct picket_sem_info {
  int64_t limit;   /* the live permits' limit; 0 while none is live */
  int64_t held;    /* live permits */
  int64_t waiters; /* acquires waiting for a permit on this picketd */
  size_t npermits;
  picket_permit_info *permits; /* npermits of them, lowest slot first; owned by
                                  the info: picket_sem_info_clear frees it */
} picket_sem_info;

/* Fills *info about semaphore `name`. Returns 0 (free what it holds with
 * picket_sem_info_clear) or a PICKET_E* code (then it holds nothing). */
PICKET_EXTERN int picket_sem_inspect(picket_client *c, const char *name, picket_sem_info *info);
/* Frees info's permits and zeroes it; NULL is fine. */
PICKET_EXTERN void picket_sem_info_clear(picket_sem_info *info);

/* One live read lease of an rwlock (never its lease id). */
typedef struct picket_read_info {
  int64_t fence;  /* the write epoch it reads */
  int64_t ttl_ms; /* remaining TTL */
  int has_owner;
  char owner[PICKET_OWNER_BYTES_MAX + 1]; /* "" if none */
} picket_read_info;

/* What anyone may know about a read/write lock. */
typedef struct picket_rw_info {
  int64_t fence;           /* the last fence issued; 0 if never */
  int writer;              /* 1 when a writer holds it (or its lock-delay runs) */
  int64_t writer_ttl_ms;   /* its remaining TTL; 0 while its lock-delay runs */
  int64_t writer_lock_delay_ms; /* > 0: it expired with a lock-delay, still this long */
  int has_writer_owner;
  char writer_owner[PICKET_OWNER_BYTES_MAX + 1]; /* "" if none */
  int64_t readers;         /* live read leases */
  int64_t writers_waiting; /* writers waiting (they keep new readers out) */
  int64_t waiters;         /* acquires waiting for it on this picketd */
  size_t nreads;
  picket_read_info *reads; /* the first nreads (at most 100) readers; owned
                              by the info: picket_rw_info_clear frees it */
} picket_rw_info;

/* Fills *info about read/write lock `name`. Returns 0 (free what it holds
 * with picket_rw_info_clear) or a PICKET_E* code (then it holds nothing). */
PICKET_EXTERN int picket_rw_inspect(picket_client *c, const char *name, picket_rw_info *info);
/* Frees info's reads and zeroes it; NULL is fine. */
PICKET_EXTERN void picket_rw_info_clear(picket_rw_info *info);

/* ---- events: watching a lock -------------------------------------------- */

/* A lock's events, from picketd's GET /v1/locks/{name}/events (a stream of
 * Server-Sent Events; docs/events.md): who got it, each renewal, its
 * release, its expiry, a break. A watch has its own connection, open for
 * as long as the watch lasts, and is used by one thread at a time, except
 * picket_watch_interrupt. Only locks have events (not semaphores or
 * read/write locks). */

typedef struct picket_watch picket_watch;

/* picket_event.type. */
typedef enum picket_event_type {
  PICKET_EVENT_OTHER = 0, /* an event this libpicket does not know (a newer
                             picketd): type_name and data say what it is */
  PICKET_EVENT_STATE,     /* first, at once, and after picketd resubscribed
                             (events in between may be missing): the lock now */
  PICKET_EVENT_GRANTED,   /* a new grant */
  PICKET_EVENT_RENEWED,
  PICKET_EVENT_RELEASED,
  PICKET_EVENT_EXPIRED,   /* the lease's TTL ran out without a release */
  PICKET_EVENT_BROKEN,    /* an operator broke it */
  PICKET_EVENT_HEARTBEAT, /* nothing happened for a while (15 s by default) */
  PICKET_EVENT_LEADER     /* an election's (picket_observe_open): first, the
                             election now; then each change of leader or of its
                             value (held: 1 while there is a leader; fence: its
                             term, or with no leader the last term issued;
                             owner and ttl_ms: the leader's). The value and the
                             rest: picket_event_leader() */
} picket_event_type;

#define PICKET_EVENT_LINE_MAX 8192 /* the longest line of a stream, and the most
                                      data of one event; more ends the watch */
#define PICKET_EVENT_BY_MAX 255    /* broken: who broke it, up to this many bytes
                                      (longer is cut at a character's start) */

/* One event. Members an event does not carry are -1 (numbers) or "". */
typedef struct picket_event {
  int type;          /* PICKET_EVENT_* */
  char type_name[32]; /* as sent: "granted", ...; "" for a name that does not fit */
  char name[PICKET_NAME_MAX + 1]; /* the lock, or the election ("" for a heartbeat) */
  int held;          /* state: 1 when held, else 0; leader: 1 while there is a
                        leader; -1 for the other events */
  int64_t fence;     /* state: the holder's fence, or the last issued (0: never);
                        granted, renewed, released, expired: the lease's; broken:
                        the broken lease's (0 when none was held) */
  int64_t next_fence; /* broken: the fence the break moved the counter to */
  int has_owner;     /* state, granted: 1 when the holder has an owner */
  char owner[PICKET_OWNER_BYTES_MAX + 1];
  int64_t ttl_ms;    /* state (0 when free), granted, renewed */
  int64_t time_ms;   /* when, in ms since the Unix epoch (Redis's clock for
                        granted, renewed, released and broken, picketd's else) */
  char by[PICKET_EVENT_BY_MAX + 1]; /* broken: "token 'NAME'" or "address IP" */
  const char *data;  /* the event's data, a JSON object, as sent; belongs to the
                        watch and lasts until the next picket_watch_next or close */
} picket_event;

/* Opens a watch of lock `name`: sends the request and waits (up to the
 * client's request_timeout_ms) for picketd to accept it. The watch gets
 * its own connection, configured like c's (server, token, TLS files,
 * connect timeout); c is not used after this returns, and keeps the
 * detail of a refusal like any call. Returns 0 and sets *out (close it
 * with picket_watch_close), or PICKET_EINVAL (a bad name, or 400),
 * PICKET_EUNSUPPORTED (404: a picketd without events; fall back to
 * renewing or polling), PICKET_EAUTH (401/403: the token's read verb and
 * prefixes), PICKET_ELIMIT (429 too_many_watchers: this client already has
 * picketd's --max-watchers-per-client streams), PICKET_EUNAVAIL (503: too
 * many streams in all, or shutting down), PICKET_ETIMEDOUT,
 * PICKET_ETRANSPORT, PICKET_EPROTO (a 200 that is no event stream). Never
 * retried. */
PICKET_EXTERN int picket_watch_open(picket_client *c, const char *name, picket_watch **out);

/* Waits up to timeout_ms (< 0: no bound; 0: only what has arrived) for
 * the next event and fills *ev. The first event of a watch is a state.
 * Returns 0; PICKET_ETIMEDOUT when none came in time (the watch goes on);
 * or, once the watch is over (every later call says the same):
 * PICKET_ECANCELED after picket_watch_interrupt, PICKET_ETRANSPORT when
 * the stream ended (picketd stopped, or this client fell 8 KiB behind:
 * open a new watch, whose state says where the lock stands),
 * PICKET_EPROTO on a line or an event over PICKET_EVENT_LINE_MAX, or an
 * event that is not what docs/events.md says. picket_watch_error_message
 * says more. A watch that got nothing for much longer than picketd's
 * heartbeat (15 s) is best closed and opened again. */
PICKET_EXTERN int picket_watch_next(picket_watch *w, picket_event *ev, int64_t timeout_ms);

/* Ends the watch from any thread (not from a signal handler): a
 * picket_watch_next in progress, and every later one, returns
 * PICKET_ECANCELED at once. The watch must still be closed. */
PICKET_EXTERN void picket_watch_interrupt(picket_watch *w);

/* Why the watch ended ("" while it goes on); belongs to the watch. */
PICKET_EXTERN const char *picket_watch_error_message(const picket_watch *w);

/* Closes the connection and frees the watch. NULL is fine. */
PICKET_EXTERN void picket_watch_close(picket_watch *w);

/* 1 when ev, seen after the grant of the lease with fence `fence`, says
 * that lease is gone: an expired, broken or released event with its fence,
 * or a granted or state event with another fence or nothing held
 * (docs/events.md); for a leader's lease, a leader event with no leader or
 * another term; else 0. */
PICKET_EXTERN int picket_event_ends(const picket_event *ev, int64_t fence);

/* Opens a watch of election `name`'s leader (GET
 * /v1/elections/{name}/observe): its events are PICKET_EVENT_LEADER (the
 * first one says who leads now) and heartbeats. Otherwise as
 * picket_watch_open: the same watch, calls and return codes
 * (PICKET_EINVAL for a bad election name). */
PICKET_EXTERN int picket_observe_open(picket_client *c, const char *name, picket_watch **out);

/* ---- keeper: background renewal ---------------------------------------- */

typedef struct picket_keeper picket_keeper;

/* Called once, from one of the keeper's threads, when the lease is lost:
 * err is PICKET_ELOST (the server, or an event of the lock, says it is
 * gone), PICKET_EEXPIRED (no renewal succeeded before the local deadline)
 * or PICKET_ECAPPED (the lease's max_hold_ms cut a renewal short, and its
 * local deadline has come). Keep it short and thread-safe. */
typedef void (*picket_lost_cb)(picket_lease *lease, int err, void *arg);

typedef struct picket_keeper_options {
  int renew_divisor;  /* renew every ttl/renew_divisor; default 3 */
  int64_t ttl_ms;     /* the TTL each renew asks for; 0: the lease's TTL */
  picket_lost_cb on_lost; /* NULL: none (poll picket_keeper_lost) */
  void *arg;              /* passed to on_lost */
  /* (appended) */
  int watch;          /* 1 (default): a lock's lease is also watched (its
                         events, on a second thread and connection; a
                         leader's lease: its election's leader events), so a
                         break, an expiry or another's grant is reported at
                         once rather than at the next renewal; 0: renew only */
} picket_keeper_options;

PICKET_EXTERN void picket_keeper_options_init(picket_keeper_options *opts);

/* Starts a thread that renews `lease` every ttl/renew_divisor. A failed
 * renewal (503, timeout, unreachable) is retried with backoff until the
 * local deadline; the lease is declared lost at once when the server says
 * so, or when the deadline passes. The keeper uses its own connection,
 * configured like `c` (c itself is not used after this call returns).
 * With opts->watch (the default) and a lock's lease, a second thread
 * watches the lock's events (a leader's lease: the election's leader
 * events, picket_observe_open) on a connection of its own (opened again when
 * it drops) and declares the lease lost, PICKET_ELOST (PICKET_EEXPIRED
 * once past the local deadline), the moment an event says it is gone
 * (picket_event_ends); the renewals stop then too. A picketd without
 * events, or a token without the read verb, leaves the keeper renewing
 * only (picket_keeper_watching says so). The
 * lease must outlive the keeper; stop the keeper before releasing the
 * lease, or it will report the release as a loss. Returns 0 and sets
 * *out, or a PICKET_E* code (PICKET_EINVAL for a lease without a local
 * deadline). */
PICKET_EXTERN int picket_keeper_start(picket_client *c, picket_lease *lease,
                                      const picket_keeper_options *opts, picket_keeper **out);
/* 0 while the lease is kept; once lost, the PICKET_E* code that lost it.
 * Safe from any thread. */
PICKET_EXTERN int picket_keeper_lost(const picket_keeper *k);
/* Renewals that succeeded so far. Safe from any thread. */
PICKET_EXTERN int64_t picket_keeper_renewals(const picket_keeper *k);
/* 1 while the keeper's watch is open and has had its first (state) event;
 * 0 while it is not (starting, opening again, stopped, or opts->watch 0,
 * or not a lock's lease); a negative PICKET_E* code once picketd refused
 * it for good (PICKET_EUNSUPPORTED, PICKET_EAUTH, PICKET_EINVAL) and the
 * keeper renews only. Safe from any thread. */
PICKET_EXTERN int picket_keeper_watching(const picket_keeper *k);
/* Stops the threads (interrupting a renewal in flight, ending the watch),
 * joins them and frees the keeper. Returns what picket_keeper_lost() would. NULL is fine (0). */
PICKET_EXTERN int picket_keeper_stop(picket_keeper *k);

/* ---- elections ----------------------------------------------------------- */

/* An election is a lease with a term (docs/elections.md): the leader holds
 * a lease on the election, and the term is that grant's fence, strictly
 * increasing per election, so storage checks it like a lock's fence with
 * the election's name as the lock (fenced-kv: Picket-Lock NAME,
 * Picket-Fence TERM; picket/fence.h). Candidates are waiters: a campaign
 * with wait_ms waits in line (first come, first served on one picketd)
 * until it leads or the wait ends. Elections and locks are separate: lock
 * "x" and election "x" never block each other.
 *
 * A picket_leadership is the grant of a campaign: its lease (a
 * picket_lease whose renew and release go to the election: picket_renew,
 * picket_release, picket_lease_valid and the keeper all work on it), its
 * term and its value. To stay leader, renew it before its local deadline,
 * or start a keeper on picket_leadership_lease() (picket_keeper_start: it
 * renews every ttl/3, watches the election's leader events, and reports
 * the loss); stop the keeper before picket_resign. */

typedef struct picket_leadership picket_leadership;

typedef struct picket_campaign_opts {
  int64_t ttl_ms;       /* 0: the server's default (30000) */
  int64_t wait_ms;      /* > 0: wait in line this long for the leadership;
                           0: fail at once when another leads */
  const char *owner;    /* shown to others (picket_leader, leader_exists); NULL: none */
  const char *lease_id; /* 32 hex chosen by the caller, so that a campaign
                           repeated with it (after a lost reply, a wait that
                           ended on this side) returns the same leadership;
                           NULL: a fresh one */
  const char *value;    /* the leader's value, 0..PICKET_ELECTION_VALUE_MAX
                           bytes of UTF-8 without control characters, e.g.
                           its address; NULL: none */
} picket_campaign_opts;

/* Campaigns in election `name` (1..PICKET_ELECTION_NAME_MAX bytes of the
 * lock-name bytes). opts NULL means all defaults. Retried like
 * picket_acquire (the lease id is chosen here). Returns 0 and sets *out
 * (free with picket_leadership_free), PICKET_ELEADER when another
 * candidate leads and the wait ended (picket_client_retry_after_ms and
 * picket_client_holder say until when and who), PICKET_ELIMIT as for
 * picket_acquire, or another PICKET_E* code. */
PICKET_EXTERN int picket_campaign(picket_client *c, const char *name,
                                  const picket_campaign_opts *opts, picket_leadership **out);
/* A leadership known only by election and lease id, e.g. one handed over
 * from another process (`picket elect` exports PICKET_LEASE), for
 * picket_renew_leadership, picket_proclaim and picket_resign. Its term is
 * 0 and it has no local deadline until one of them succeeds; its value is
 * unknown (NULL) until a proclaim. Returns 0 and sets *out, or
 * PICKET_EINVAL / PICKET_ENOMEM. */
PICKET_EXTERN int picket_leadership_new(const char *election, const char *lease_id,
                                        picket_leadership **out);
/* Frees the leadership (it does not resign: see picket_resign). NULL is fine. */
PICKET_EXTERN void picket_leadership_free(picket_leadership *l);

PICKET_EXTERN const char *picket_leadership_election(const picket_leadership *l);
PICKET_EXTERN int64_t picket_leadership_term(const picket_leadership *l);
/* The value last campaigned or proclaimed with; NULL: none. Belongs to the
 * leadership and changes with picket_proclaim (same thread only). */
PICKET_EXTERN const char *picket_leadership_value(const picket_leadership *l);
/* The leadership's lease (belongs to the leadership): its id (a secret),
 * TTL, local deadline, validity; what picket_keeper_start keeps. */
PICKET_EXTERN picket_lease *picket_leadership_lease(const picket_leadership *l);
/* The term's signed fence (picketd with --fence-key-file: a lock token of
 * resource NAME); NULL when picketd signs none. */
PICKET_EXTERN const char *picket_leadership_token(const picket_leadership *l);
/* The local deadline (monotonic ms): the leader must stop acting as one
 * after it, whatever the server thinks. */
PICKET_EXTERN int64_t picket_leadership_deadline_ms(const picket_leadership *l);

/* Renews the leadership by ttl_ms (0: the server's default): picket_renew
 * on its lease. PICKET_ELOST when it is no longer the leader. */
PICKET_EXTERN int picket_renew_leadership(picket_client *c, picket_leadership *l, int64_t ttl_ms);
/* Sets the leader's value (NULL: none; observers get a leader event with
 * the same term) and renews by ttl_ms (0: the lease's current TTL). Returns
 * 0, PICKET_ELOST when no longer the leader, or another PICKET_E* code. */
PICKET_EXTERN int picket_proclaim(picket_client *c, picket_leadership *l, const char *value,
                                  int64_t ttl_ms);
/* Gives the leadership up: the next candidate in line leads within
 * milliseconds. picket_release on its lease (its deadline is cleared; a
 * retry that finds it gone counts as success). PICKET_ELOST when it was
 * no longer the leader. Stop a keeper of it first. */
PICKET_EXTERN int picket_resign(picket_client *c, picket_leadership *l);

/* Who leads an election (never the lease id). */
typedef struct picket_leader_info {
  int has_leader;      /* 1 while a leader holds it */
  int64_t term;        /* the leader's term; 0 when there is none */
  int has_value;       /* 1 when the leader has a value */
  char value[PICKET_ELECTION_VALUE_MAX + 1];
  int has_owner;       /* 1 when the leader has an owner */
  char owner[PICKET_OWNER_BYTES_MAX + 1];
  int64_t since_ms;    /* when the leader's term began, ms since the Unix epoch
                          (the store's clock); 0 when none */
  int64_t ttl_ms;      /* the leader's remaining TTL; 0 when none */
  int64_t last_term;   /* the last term issued, 0 if never */
  int64_t candidates;  /* picket_leader: campaigns waiting on this picketd;
                          picket_event_leader: -1 */
} picket_leader_info;

/* Fills *info about election `name` (GET; retried). Returns 0 or a
 * PICKET_E* code (then *info is zeroed). */
PICKET_EXTERN int picket_leader(picket_client *c, const char *name, picket_leader_info *info);
/* Fills *info from a PICKET_EVENT_LEADER event. Returns 0, or
 * PICKET_EINVAL for another event. */
PICKET_EXTERN int picket_event_leader(const picket_event *ev, picket_leader_info *info);

#ifdef __cplusplus
}
#endif

#endif
