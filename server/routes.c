/* routes.c: picketd's endpoints, one row each, and the one way a request
 * is routed (routes_prepare).
 *
 * A row says what proto/openapi.yaml says of an endpoint (method, path
 * template, request body schema) and what picketd needs to serve it: who
 * may call it, the handler, its metrics label. Routing, the auth checks,
 * the labels of picket_http_requests_total and the spec cross-check
 * (tests/unit/test_routes.c) all come from this table, so an endpoint is
 * a row, and a primitive a family in api_family.c and its rows here.
 *
 * Matching is by segments: "{name}" matches one non-empty segment as it
 * was sent (api_named decodes it once), so "/v1/locks/a%2Fb/acquire" is
 * lock "a/b" (a bad name, 400), never a deeper path. The web console's
 * files (/ui, /ui/...) are ui.c's, before any row. */
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_admin.h"
#include "api_family.h"
#include "api_json.h"
#include "auth.h"
#include "metrics.h"
#include "origin.h"
#include "ui.h"

#define LOCKS "/v1/locks/{name}"
#define SEMS "/v1/semaphores/{name}"
#define RWS "/v1/rwlocks/{name}"
#define ELS "/v1/elections/{name}"

static const api_route routes[] = {
    /* service: probes, metrics, the spec */
    {"GET", "/healthz", ROUTE_OPEN, api_healthz, NULL, EP_HEALTHZ, "healthz"},
    {"GET", "/readyz", ROUTE_OPEN, api_readyz, NULL, EP_READYZ, "readyz"},
    {"GET", "/metrics", AUTH_METRICS, api_metrics, NULL, EP_METRICS, "metrics"},
    {"GET", "/v1/openapi.yaml", ROUTE_OPEN, api_openapi, NULL, EP_OPENAPI, "openapi"},
    /* operators */
    {"GET", "/v1/locks", AUTH_LIST, api_list, NULL, EP_LIST, "list"},
    {"GET", "/v1/whoami", ROUTE_CALLER, api_admin_whoami, NULL, EP_WHOAMI, "whoami"},
    /* locks */
    {"POST", LOCKS "/acquire", AUTH_LOCK, api_acquire, "AcquireRequest", EP_ACQUIRE, "acquire"},
    {"POST", LOCKS "/renew", AUTH_LOCK, api_renew, "RenewRequest", EP_RENEW, "renew"},
    {"POST", LOCKS "/release", AUTH_LOCK, api_release, "ReleaseRequest", EP_RELEASE, "release"},
    {"GET", LOCKS, AUTH_READ, api_inspect, NULL, EP_INSPECT, "inspect"},
    {"POST", LOCKS "/break", AUTH_ADMIN, api_admin_break, "BreakRequest", EP_BREAK, "break"},
    {"GET", LOCKS "/events", AUTH_READ, api_admin_events, NULL, EP_EVENTS, "events"},
    /* semaphores */
    {"POST", SEMS "/acquire", AUTH_LOCK, api_acquire, "SemaphoreAcquireRequest", EP_SEM_ACQUIRE,
     "semaphore_acquire"},
    {"POST", SEMS "/renew", AUTH_LOCK, api_renew, "RenewRequest", EP_SEM_RENEW, "semaphore_renew"},
    {"POST", SEMS "/release", AUTH_LOCK, api_release, "ReleaseRequest", EP_SEM_RELEASE,
     "semaphore_release"},
    {"GET", SEMS, AUTH_READ, api_inspect, NULL, EP_SEM_INSPECT, "semaphore_inspect"},
    /* read/write locks */
    {"POST", RWS "/acquire", AUTH_LOCK, api_acquire, "RwAcquireRequest", EP_RW_ACQUIRE,
     "rwlock_acquire"},
    {"POST", RWS "/renew", AUTH_LOCK, api_renew, "RenewRequest", EP_RW_RENEW, "rwlock_renew"},
    {"POST", RWS "/release", AUTH_LOCK, api_release, "ReleaseRequest", EP_RW_RELEASE,
     "rwlock_release"},
    {"GET", RWS, AUTH_READ, api_inspect, NULL, EP_RW_INSPECT, "rwlock_inspect"},
    /* elections (docs/elections.md) */
    {"POST", ELS "/campaign", AUTH_LOCK, api_acquire, "CampaignRequest", EP_EL_CAMPAIGN,
     "election_campaign"},
    {"POST", ELS "/renew", AUTH_LOCK, api_renew, "RenewRequest", EP_EL_RENEW, "election_renew"},
    {"POST", ELS "/proclaim", AUTH_LOCK, api_proclaim, "ProclaimRequest", EP_EL_PROCLAIM,
     "election_proclaim"},
    {"POST", ELS "/resign", AUTH_LOCK, api_release, "ReleaseRequest", EP_EL_RESIGN,
     "election_resign"},
    {"GET", ELS, AUTH_READ, api_inspect, NULL, EP_EL_INSPECT, "election_inspect"},
    {"GET", ELS "/observe", AUTH_READ, api_admin_events, NULL, EP_EL_OBSERVE, "election_observe"},
    {"POST", ELS "/break", AUTH_ADMIN, api_admin_break, "BreakRequest", EP_BREAK, "break"},
};
#define NROUTES (sizeof routes / sizeof routes[0])

const api_route *routes_table(size_t *n) {
  *n = NROUTES;
  return routes;
}

void routes_init(void) {
  for (size_t i = 0; i < NROUTES; i++) metrics_endpoint_name(routes[i].endpoint, routes[i].label);
}

/* Whether path matches template t; a "{name}" segment's place goes to
 * *seg. */
static int path_matches(const char *t, const char *path, const char **seg, size_t *seg_len) {
  while (*t && *path) {
    if (strncmp(t, "{name}", 6) == 0) {
      size_t n = strcspn(path, "/");
      if (n == 0) return 0;
      *seg = path, *seg_len = n;
      t += 6, path += n;
    } else if (*t++ != *path++) {
      return 0;
    }
  }
  return *t == '\0' && *path == '\0';
}

static int method_matches(const char *route_method, const char *method) {
  if (strcmp(route_method, method) == 0) return 1;
  return strcmp(route_method, "GET") == 0 && strcmp(method, "HEAD") == 0;
}

routes_match_result routes_match(const char *method, const char *path, const api_route **out,
                                 const char **seg, size_t *seg_len, const char **allow) {
  int get = 0, post = 0;
  *out = NULL;
  *seg = NULL;
  *seg_len = 0;
  for (size_t i = 0; i < NROUTES; i++) {
    const char *s = NULL;
    size_t n = 0;
    if (!path_matches(routes[i].path, path, &s, &n)) continue;
    if (method_matches(routes[i].method, method)) {
      *out = &routes[i], *seg = s, *seg_len = n;
      return ROUTE_FOUND;
    }
    if (*out == NULL) *out = &routes[i];
    get |= strcmp(routes[i].method, "GET") == 0;
    post |= strcmp(routes[i].method, "POST") == 0;
  }
  if (*out == NULL) return ROUTE_NONE;
  *allow = get && post ? "GET, HEAD, POST" : get ? "GET, HEAD" : "POST";
  return ROUTE_NO_METHOD;
}

/* The 404 of a path no row has: a family's name with an action it lacks
 * says which actions it has. */
static api_result not_found(const char *path, api_response *resp) {
  const api_family *f = api_family_of(path);
  const char *rest = f ? path + strlen(f->prefix) : NULL, *slash = rest ? strchr(rest, '/') : NULL;
  if (slash && slash > rest && slash[1] && strchr(slash + 1, '/') == NULL) {
    char msg[120];
    snprintf(msg, sizeof msg, "no such %s action; use %s, %s or %s", f->noun, f->actions[0],
             f->actions[1], f->actions[2]);
    api_error(resp, PICKET_PROTO_ERR_NOT_FOUND, msg);
  } else {
    api_error(resp, PICKET_PROTO_ERR_NOT_FOUND, "no such endpoint; see /v1/openapi.yaml");
  }
  return API_DONE;
}

api_result routes_prepare(const api_request *req, api_call *call, api_response *resp) {
  memset(resp, 0, sizeof *resp);
  resp->endpoint = call->endpoint = EP_OTHER;
  call->started_ms = api_now_ms();
  /* Before anything else, the console's files too: a browser's request on
   * a web page's behalf (origin.c). */
  if (origin_check(req, resp) < 0) return API_DONE;
  if (ui_owns(req->path)) return ui_serve(req, resp); /* the web console's static files */

  const api_route *rt;
  const char *seg, *allow;
  size_t seg_len;
  switch (routes_match(req->method, req->path, &rt, &seg, &seg_len, &allow)) {
    case ROUTE_NONE: return not_found(req->path, resp);
    case ROUTE_NO_METHOD: {
      resp->endpoint = call->endpoint = rt->endpoint;
      resp->allow = allow;
      char msg[80];
      snprintf(msg, sizeof msg, "method not allowed; use %s", allow);
      api_error(resp, PICKET_PROTO_ERR_METHOD_NOT_ALLOWED, msg);
      return API_DONE;
    }
    default: break;
  }
  resp->endpoint = call->endpoint = rt->endpoint;
  call->family = seg ? api_family_of(req->path) : NULL;
  /* Who calls comes before what they send: a stranger learns nothing from
   * the checks of names and bodies. */
  if (api_caller(req, call, rt->auth, resp) < 0) return API_DONE;
  if (seg && api_named(req, call, rt->auth, seg, seg_len, resp) < 0) return API_DONE;
  return rt->handler(req, call, resp);
}

api_result routes_handle(const api_request *req, api_call *call, api_response *resp) {
  api_result res = routes_prepare(req, call, resp);
  while (res == API_STORE) {
    api_run_store(call);
    res = api_finish(call, resp);
  }
  return res;
}
