/* api_types.h: the request, response and call types that the API layer
 * (api.c and its helpers) shares with what carries a call: http.c, wait.c
 * (a parked acquire), events.c (a stream's reply). Types only, so that
 * those can hold a call without depending on the handlers. */
#ifndef PICKETD_API_TYPES_H
#define PICKETD_API_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
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
  int peer_loopback;      /* ...and whether it is loopback (conns_peer_loopback) and
                             trusted as this host's own (--loopback-trust on) */
  /* The query's argument `key`, percent-decoded, or NULL when absent (or
   * no query_arg): GET /v1/locks's prefix, limit and cursor. */
  const char *(*query_arg)(void *query_ctx, const char *key);
  void *query_ctx;
  /* Its connection (conns.h), which counts against the token a request
   * on it is authenticated as (--max-connections-per-token); NULL: none. */
  struct conns_client *conn;
  /* Headers that tell a browser's request from a client's (origin.c), or
   * NULL when absent. */
  const char *host;
  const char *origin;
  const char *sec_fetch_site;
  const char *content_type;
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
  char store_name[PICKET_PROTO_NAME_MAX + 1]; /* the name the store keeps it under: the
                                                 name, or an election's "/e/NAME" */
  char lease[PICKET_PROTO_LEASE_LEN + 1];        /* the id in the store (see auth_bind_lease) */
  char client_lease[PICKET_PROTO_LEASE_LEN + 1]; /* the id the client knows */
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  int64_t ttl_ms;
  int64_t wait_ms;
  const api_family *family; /* lock, semaphore or read/write lock (api_family.h) */
  int write;              /* rwlock acquire: mode write (else read) */
  int marked;             /* rwlock: a write acquire told the store it waits */
  int forgotten;          /* rwlock: its wait's end was told to the store */
  int64_t limit;          /* semaphore acquire: its limit */
  int has_value;          /* election campaign or proclaim: a value was given... */
  char value[PICKET_PROTO_VALUE_BYTES_MAX + 1]; /* ...this one ("": none, or cleared) */
  char key[PICKET_PROTO_NAME_MAX + 3]; /* its waiters' queue and release message:
                                          the lock name, or "s/" and the semaphore's,
                                          "r/" and the read/write lock's, "/e/" and
                                          the election's */
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
  struct api_admin_state *admin; /* a listing's pages so far, a break's caller (api_admin.c):
                                    malloc'd, freed by api_call_end */
} api_call;

/* API_STREAM: a 200 whose body is resp->stream's events, for as long as
 * the stream lasts (http.c feeds it; events_close ends it). */
typedef enum { API_DONE = 0, API_WAIT, API_STORE, API_STREAM } api_result;

/* The monotonic clock every deadline of a call is on, in ms. */
static inline int64_t api_now_ms(void) { return clock_mono_ms(); }

#endif
