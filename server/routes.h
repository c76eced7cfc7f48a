/* routes.h: picketd's endpoints, one row each (routes.c). */
#ifndef PICKETD_ROUTES_H
#define PICKETD_ROUTES_H

#include <stddef.h>

#include "api_types.h"

typedef api_result api_handler(const api_request *req, api_call *call, api_response *resp);

/* Who may call a route, besides a verb (auth_verb) the token must have. */
enum { ROUTE_OPEN = 0, /* anyone, with a token or without (the probes, the spec) */
       ROUTE_CALLER = -1 /* any valid token under --auth-file (whoami) */ };

/* One endpoint, as proto/openapi.yaml has it. */
typedef struct {
  const char *method;        /* "GET" (HEAD is answered alike) or "POST" */
  const char *path;          /* the spec's template: "{name}" stands for one segment */
  int auth;                  /* ROUTE_OPEN, ROUTE_CALLER or the auth_verb needed */
  api_handler *handler;      /* once the caller is allowed (and the name checked) */
  const char *schema;        /* the body's schema in the spec (components/schemas), or NULL */
  metrics_endpoint endpoint; /* its row of picket_http_requests_total... */
  const char *label;         /* ...labelled endpoint="label" */
} api_route;

/* The table, and how many rows it has. */
const api_route *routes_table(size_t *n);

/* Names each route's metrics row (metrics_endpoint_name). Once, at start. */
void routes_init(void);

/* What a request's method and path match. */
typedef enum {
  ROUTE_FOUND,     /* *out is the route; a "{name}" segment is at *seg (seg_len bytes) */
  ROUTE_NO_METHOD, /* the path is a route's, not for this method: *out is one of them,
                      *allow the methods it has ("GET, HEAD", "POST") */
  ROUTE_NONE       /* no route has this path */
} routes_match_result;

routes_match_result routes_match(const char *method, const char *path, const api_route **out,
                                 const char **seg, size_t *seg_len, const char **allow);

/* Routes a complete request and runs the checks its row asks for, then its
 * handler: API_DONE with *resp filled, API_STORE with call->op the store
 * call to make (then api_finish, api.h), API_WAIT or API_STREAM. */
api_result routes_prepare(const api_request *req, api_call *call, api_response *resp);
/* routes_prepare with its store calls made on the calling thread, which
 * must not be a loop's (the fuzzer's). */
api_result routes_handle(const api_request *req, api_call *call, api_response *resp);

#endif
