/* api_admin.h: the endpoints for operators and tools: GET /v1/locks (a
 * page of the held names), POST /v1/locks/{name}/break and GET
 * /v1/whoami. api.c routes to them once the caller is known (call->who)
 * and allowed; the handlers check their own arguments. */
#ifndef PICKETD_API_ADMIN_H
#define PICKETD_API_ADMIN_H

#include "api_types.h"

/* GET /v1/locks?prefix=&limit=&cursor=: under --auth-file only the names
 * the token's prefixes cover are shown. A page takes one store call per
 * range at least: API_STORE with call->op a page's call, after which
 * api_admin_list_page takes the result (and may ask for the next call). */
api_result api_admin_list(const api_request *req, api_call *call, api_response *resp);
api_result api_admin_list_page(api_call *call, api_response *resp);
/* POST /v1/locks/{call->name}/break (the body is checked here): API_STORE
 * with the break's call, then api_admin_break_outcome. */
api_result api_admin_break(const api_request *req, api_call *call, api_response *resp);
api_result api_admin_break_outcome(api_call *call, api_response *resp);
/* Frees what a listing or a break kept (call->admin). */
void api_admin_end(api_call *call);
/* GET /v1/locks/{call->name}/events: API_STREAM with resp->stream, or
 * an error when the caller has too many streams open (events.h). */
api_result api_admin_events(const api_request *req, api_call *call, api_response *resp);
/* GET /v1/whoami: the caller's token, verbs and prefixes. */
api_result api_admin_whoami(const api_request *req, api_call *call, api_response *resp);
/* Whether the caller may break locks: the admin verb under --auth-file,
 * else a loopback caller. */
int api_admin_may_break(const api_request *req, const api_call *call);

#endif
