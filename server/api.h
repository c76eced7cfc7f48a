/* api.h: picketd's request handlers, one per endpoint, independent of the
 * HTTP library: http.c hands in method, path and body, and sends back the
 * api_response. This is also the fuzzer's entry point. Only this layer
 * turns store results into HTTP statuses and JSON error bodies. */
#ifndef PICKETD_API_H
#define PICKETD_API_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "picket_proto.h"
#include "store.h"

typedef struct {
  const char *method;
  const char *path;       /* as received, not percent-decoded */
  const char *body;
  size_t body_len;
  int body_too_large;     /* the body passed PICKET_PROTO_BODY_MAX and was cut */
  const char *authorization; /* the Authorization header, or NULL */
  const char *peer;       /* the client's address ("" if unknown), for per-address limits */
  int peer_loopback;      /* ...and whether it is loopback (conns_peer_loopback) */
  /* The query's argument `key`, percent-decoded, or NULL when absent (or
   * no query_arg): GET /v1/locks's prefix, limit and cursor. */
  const char *(*query_arg)(void *query_ctx, const char *key);
  void *query_ctx;
} api_request;

typedef struct {
  int status;
  char *body;             /* malloc'd; the response owns it (api_response_free) */
  size_t body_len;
  const char *content_type;
  const char *allow;      /* Allow header, or NULL */
  char retry_after[24];   /* Retry-After header, or "" */
  const char *www_authenticate; /* WWW-Authenticate header (401), or NULL */
  const char *const *extra_headers; /* more headers: name, value, ..., NULL (static), or NULL */
  metrics_endpoint endpoint;
  int close;              /* http.c: close the connection after it (framing not trusted) */
  struct events_sub *stream; /* API_STREAM: the event stream the body comes from (events.h) */
} api_response;

typedef struct api_family api_family;

/* The state of one call that may outlive one handler invocation: an
 * acquire that waits is parked (wait.c) and retried on each wake. */
typedef struct {
  metrics_endpoint endpoint;
  char name[PICKET_PROTO_NAME_MAX + 1];
  char lease[PICKET_PROTO_LEASE_LEN + 1];        /* the id in the store (see auth_bind_lease) */
  char client_lease[PICKET_PROTO_LEASE_LEN + 1]; /* the id the client knows */
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  int64_t ttl_ms;
  int64_t wait_ms;
  const api_family *family; /* lock, semaphore or read/write lock (api_family.h) */
  int write;              /* rwlock acquire: mode write (else read) */
  int forgotten;          /* rwlock: its wait's end was told to the store */
  int64_t limit;          /* semaphore acquire: its limit */
  char key[PICKET_PROTO_NAME_MAX + 3]; /* its waiters' queue and release message:
                                          the lock name, or "s/" and the semaphore's,
                                          "r/" and the read/write lock's */
  int64_t lock_delay_ms;  /* acquire: the lock-delay (0: none) */
  int64_t max_hold_ms;    /* acquire: the cap on holding (0: none) */
  int64_t started_ms;     /* monotonic, when the request was complete */
  int64_t deadline_ms;    /* monotonic, when a wait ends */
  int64_t retry_at_ms;    /* monotonic, the holder's expiry: retry then */
  int64_t held_ttl_ms;    /* the last lock_held answer, for the timeout reply */
  int held_delay;         /* ...which was lock_delay: a lock-delay, not a holder */
  int held_by;            /* ...rwlock: 0 a writer, 1 readers, 2 a writer waits */
  char held_owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  store_op op;            /* the store call of API_STORE, and its result */
  struct auth_principal *who;    /* with --auth-file: the caller (a reference) */
  struct quota_subject *subject; /* whose limits apply (a reference), or NULL */
  int waiter_counted;     /* 1: counted as one of the subject's waiters */
  int retrying;           /* 1: a waiting acquire's retry (api_retry_acquire) */
  int unavailable;        /* 1: its last try found the store unavailable */
} api_call;

/* API_STREAM: a 200 whose body is resp->stream's events, for as long as
 * the stream lasts (http.c feeds it; events_close ends it). */
typedef enum { API_DONE = 0, API_WAIT, API_STORE, API_STREAM } api_result;

void api_init(const config *cfg);

/* A parked acquire left its wait (granted or not): a read/write lock's
 * writer that was not granted stops keeping new readers out. Runs a store
 * call on the calling thread when there is something to undo. */
void api_wait_left(api_call *call, int granted);

/* Handles a complete request, its store call included (on the calling
 * thread). Returns API_DONE with *resp filled, or API_WAIT when an acquire
 * with wait_ms must wait: call->name, deadline_ms and retry_at_ms say for
 * what and until when; the caller parks it and later calls
 * api_retry_acquire or api_wait_expired. */
api_result api_handle(const api_request *req, api_call *call, api_response *resp);
/* api_handle in halves, so the store call can be run elsewhere (the
 * pipeline): api_prepare returns API_DONE with *resp filled (an error, or
 * an endpoint without a lock call), or API_STORE with call->op describing
 * the one store call to make. Once call->op.st and .r are set (store_submit,
 * or api_run_store), api_finish gives API_DONE or API_WAIT as api_handle
 * does. call->op points into *call: call must not move in between. */
api_result api_prepare(const api_request *req, api_call *call, api_response *resp);
void api_run_store(api_call *call);
api_result api_finish(api_call *call, api_response *resp);
/* 1 when the call's last store call made a new grant (not a same-lease
 * refresh): one that must be undone if its reply never reaches the client.
 * Read from the store result itself, so it holds whether or not
 * api_finish has run (a piped call whose client left while suspended). */
int api_granted(const api_call *call);
/* Gives back a new grant whose reply never reached its client (the lock,
 * and its place in the token's lease count). */
void api_undo_grant(api_call *call);
/* The end of a call, whatever happened: gives back what api_prepare took
 * (the principal, the quota subject, a waiter's place). */
void api_call_end(api_call *call);
/* Tries a parked acquire again: API_DONE (granted, or an error, or the
 * wait is over) or API_WAIT (still held; retry_at_ms updated). */
api_result api_retry_acquire(api_call *call, api_response *resp);
/* The reply to a wait that ran out: 409 lock_held. */
void api_wait_expired(api_call *call, api_response *resp);
/* An error reply with the table's status and code and `message` (NULL: the
 * table's default message). */
void api_error(api_response *resp, picket_proto_err e, const char *message);
void api_response_free(api_response *resp);

int64_t api_now_ms(void);

#endif
