/* api.h: picketd's request handlers, one per endpoint, independent of the
 * HTTP library: http.c hands in method, path and body, and sends back the
 * api_response. This is also the fuzzer's entry point. Only this layer
 * turns store results into HTTP statuses and JSON error bodies. */
#ifndef PICKETD_API_H
#define PICKETD_API_H

#include "api_types.h"
#include "config.h"

void api_init(const config *cfg);

/* A call is over for its client. A read/write lock's writer that told
 * the store it would wait and was not granted stops keeping new readers
 * out, whatever ended it (a refusal such as 429 or 503, its wait's
 * timeout, its client leaving, shutdown): at most once per call.
 *
 * Before its reply is sent (a client that reads it may act on it at
 * once, and a reader must not meet the mark), api_wait_left_call puts
 * that store call in call->op and returns 1: the caller runs it (the
 * runner, call.c) and sends the reply once it is done; 0 when there is
 * nothing to take out. When no reply follows (the client is gone),
 * api_wait_left hands the call to the runner and does not wait for it. */
int api_wait_left_call(api_call *call);
void api_wait_left(api_call *call);

/* routes.c's routes_prepare gives API_DONE with *resp filled (an error,
 * or an endpoint without a store call), or API_STORE with call->op
 * describing the store call to make. Once call->op.st and .r are set
 * (call_submit's done, or api_run_store), api_finish gives API_DONE,
 * API_WAIT when an acquire with wait_ms must wait (call->name,
 * deadline_ms and retry_at_ms say for what and until when; the caller
 * parks it and later calls api_retry_acquire or api_wait_expired), or
 * API_STORE again: the request's next store call (a listing's next
 * range). call->op points into *call: call must not move in between.
 * api_run_store runs the call on the calling thread (not a loop's). */
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
/* A parked acquire is no longer waiting (granted, refused, timed out,
 * its client gone): gives back its place in the caller's max_waiters.
 * Called before the reply is queued, since a client that reads the
 * reply may wait again at once (api_call_end would be too late: it runs
 * once libmicrohttpd has sent the reply). */
void api_wait_over(api_call *call);
/* The end of a call, whatever happened: gives back what api_prepare took
 * (the principal, the quota subject, a waiter's place). */
void api_call_end(api_call *call);
/* Tries a parked acquire again: API_STORE with the acquire's store call
 * in call->op; api_finish then gives API_DONE (granted, or an error, or
 * the wait is over) or API_WAIT (still held; retry_at_ms updated). */
api_result api_retry_acquire(api_call *call);
/* The reply to a wait that ran out: 409 lock_held. */
void api_wait_expired(api_call *call, api_response *resp);

/* ---- for the route table (routes.c) ------------------------------------ */

/* The caller may use a route of `auth` (routes.h: ROUTE_OPEN,
 * ROUTE_CALLER or an auth_verb): 0, or -1 with a 401 or 403 in *resp. */
int api_caller(const api_request *req, api_call *call, int auth, api_response *resp);
/* The "{name}" segment of a family route (call->family set): decoded
 * into call->name, checked against the family's bound and the token's
 * prefixes (and, for a break, who may break), call->key and store_name
 * set: 0, or -1 with the 4xx in *resp. */
int api_named(const api_request *req, api_call *call, int auth, const char *seg, size_t seg_len,
              api_response *resp);

/* The handlers of the routes: each checks its own body and query. */
api_result api_acquire(const api_request *req, api_call *call, api_response *resp);
api_result api_renew(const api_request *req, api_call *call, api_response *resp);
api_result api_release(const api_request *req, api_call *call, api_response *resp);
api_result api_proclaim(const api_request *req, api_call *call, api_response *resp);
api_result api_inspect(const api_request *req, api_call *call, api_response *resp);
api_result api_healthz(const api_request *req, api_call *call, api_response *resp);
api_result api_readyz(const api_request *req, api_call *call, api_response *resp);
api_result api_metrics(const api_request *req, api_call *call, api_response *resp);
api_result api_openapi(const api_request *req, api_call *call, api_response *resp);
api_result api_list(const api_request *req, api_call *call, api_response *resp);

#endif
