/* internal.h: what the files of libpicket share and users must not see: the
 * lease struct (the keeper updates it in place), the hooks the keeper
 * needs on a client (a private copy, and a flag that aborts a request in
 * flight so that stopping a keeper never waits for a slow server), and
 * what a watch (events.c) borrows from a client: its connection settings,
 * its error mapping and its place for the detail of a failed call.
 * Symbols here are picket__* and hidden. */
#ifndef PICKET_INTERNAL_H
#define PICKET_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "picket/picket.h"

/* What a lease is of (picket_lease.kind). An election's lease is its
 * leader's: its fence is the term, and its "release" is a resign. */
enum { PICKET__KIND_LOCK, PICKET__KIND_SEM, PICKET__KIND_RW, PICKET__KIND_ELECTION };

struct picket_lease {
  char lock[PICKET_NAME_MAX + 1];
  char id[PICKET_LEASE_ID_LEN + 1];
  int64_t fence;
  char fence_token[PICKET_FENCE_TOKEN_MAX + 1]; /* "" when picketd signs no fences */
  int has_owner;
  char owner[PICKET_OWNER_BYTES_MAX + 1];
  /* Written by whichever thread renews, read by any: atomics, so that
   * picket_lease_valid() is safe while a keeper runs. */
  _Atomic int64_t ttl_ms;
  _Atomic int64_t sent_ms;     /* when the last successful grant/renew was sent */
  _Atomic int64_t deadline_ms; /* local deadline; 0 when unknown */
  /* When the grant or renewal that last set deadline_ms was sent
   * (INT64_MAX once released) and its number (renewals are numbered as
   * they start: the tie-break within a millisecond), and the lock that
   * keeps them in step while renewals on several threads move the
   * deadline (picket.c, move_deadline). */
  int64_t deadline_sent_ms;
  uint64_t deadline_seq;
  _Atomic uint64_t renewals_started;
  pthread_mutex_t deadline_mu;
  atomic_int capped;           /* a grant or renewal was cut by max_hold_ms */
  /* What the lease is of, which says where its calls go: a lock's
   * (/v1/locks/), a semaphore's permit (/v1/semaphores/; lock is then the
   * semaphore's name), a read/write lock's read or write lease
   * (/v1/rwlocks/; lock is the rwlock's name) or an election's leader
   * (/v1/elections/; lock is the election's name, fence the term). A permit's slot, and a
   * handed-over rwlock lease's mode, are set at the grant or by the first
   * renew (-1 until then); a renewal never changes them after, so reading
   * them while a keeper renews is safe. */
  int kind;       /* PICKET__KIND_* */
  int64_t permit; /* -1: not a permit, or not known yet */
  int64_t limit;  /* 0: not a permit, or not known */
  int mode;       /* PICKET_MODE_READ/WRITE; -1: not an rwlock's, or not known yet */
  char fence_lock[PICKET_NAME_MAX + 1]; /* "" while unknown */
};

/* A new client with the same server and options as `c`; NULL on failure. */
picket_client *picket__client_clone(const picket_client *c);
/* While *flag is non-zero, requests on `c` stop with PICKET_ECANCELED.
 * flag NULL removes the hook. */
void picket__client_set_abort(picket_client *c, const atomic_int *flag);
/* Overrides the client's retry count (the keeper retries by itself). */
void picket__client_set_retries(picket_client *c, int retries);
/* Backoff before retry number `attempt` (0-based): capped exponential with
 * jitter, from the client's options. */
int64_t picket__client_backoff_ms(picket_client *c, int attempt);
/* picket_renew, but no attempt runs past until_ms (monotonic; 0: no
 * bound), so a keeper learns in time that its deadline came. */
int picket__renew(picket_client *c, picket_lease *l, int64_t ttl_ms, int64_t until_ms);

/* ---- for election.c ---- */

/* picket_acquire of a `kind` thing (PICKET__KIND_*; arg: a semaphore's
 * limit, an rwlock's mode), with `value` (an election's; NULL: none) in
 * the request. */
int picket__acquire(picket_client *c, int kind, const char *name, int64_t arg,
                    const picket_acquire_opts *opts, const char *value, picket_lease **out);
/* picket__renew by another verb whose reply is a renew's (an election's
 * "proclaim"), with the members of `extra` (stolen; NULL: none) added to
 * the request. ttl_ms 0: none sent. Retried like a renew. */
int picket__renew_verb(picket_client *c, picket_lease *l, const char *verb, json_t *extra,
                       int64_t ttl_ms);
/* A lease of a `kind` thing known by name and id (picket_lease_new). */
int picket__lease_new(int kind, const char *name, const char *lease_id, picket_lease **out);
/* GET of a `kind` thing's state, with retries: 0 and *reply (decref it). */
int picket__get_state(picket_client *c, int kind, const char *name, json_t **reply);
/* A failure detected in a reply: PICKET_EPROTO, `what` kept on c. */
int picket__proto_error(picket_client *c, const char *what);
/* A "leader" object (null or {term, value, owner, since, ttl_ms}) and the
 * last term of `j` (a GET's reply or a leader event's data) into *info
 * (candidates -1): 0, or -1 when malformed. */
int picket__leader_take(const json_t *j, picket_leader_info *info);

/* ---- for events.c ---- */

/* Sets on h what every transfer of c has (TLS files, connect timeout, no
 * redirects, no signals), its callbacks (both get ud) and error buffer,
 * and makes *headers (the caller frees them after h) its request headers:
 * c's bearer token, "Accept: `accept`" and the User-Agent. 0, or
 * PICKET_ENOMEM. */
int picket__client_stream_setup(const picket_client *c, CURL *h, const char *accept,
                                struct curl_slist **headers, curl_write_callback on_write,
                                curl_xferinfo_callback on_xfer, void *ud, char *errbuf);
const char *picket__client_base_url(const picket_client *c); /* "http://h:p", no '/' at the end */
const atomic_int *picket__client_abort_flag(const picket_client *c); /* NULL: none */
int64_t picket__client_request_timeout_ms(const picket_client *c);
/* A non-2xx reply (its body, JSON or not) as the PICKET_E* code a call
 * would return, with its detail (status, code, message) kept on c. */
int picket__client_reply_error(picket_client *c, long status, const char *body, size_t len);
/* Forgets the last call's detail: a new call begins. */
void picket__client_clear(picket_client *c);
/* A failure found without a reply: err, with `message` as c's detail. */
int picket__client_fail(picket_client *c, int err, const char *message);
/* The PICKET_E* code of a failed libcurl transfer. */
int picket__err_from_curl(CURLcode rc);
/* An integer member >= min, or -1 when missing, mistyped or smaller. */
int64_t picket__json_int(const json_t *j, const char *key, int64_t min);
/* An "owner" member (NULL, null or a string) into has/buf: 0, or -1 when
 * it has another type. */
int picket__json_owner(const json_t *owner, int *has, char *buf, size_t cap);

/* A watch in two steps, so that a keeper can hand it to its stopping
 * thread (picket_watch_interrupt) before it waits on the network:
 * _new allocates and sets up a watch of a `kind` thing (PICKET__KIND_LOCK:
 * its events; PICKET__KIND_ELECTION: its leader events) (no I/O; the abort
 * flag of c, if any, also ends the watch), _connect sends the request and waits for the reply's
 * head (a refusal's detail goes on c). picket_watch_open is both. */
int picket__watch_new(picket_client *c, int kind, const char *name, picket_watch **out);
int picket__watch_connect(picket_watch *w, picket_client *c);

#endif
