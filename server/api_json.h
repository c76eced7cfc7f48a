/* api_json.h: the JSON of the lock endpoints, both ways: request bodies
 * (members checked against a list, bounded integers) and replies (whole
 * trees, or the hot replies formatted directly, the error object, owners
 * and signed fences as members), and the error reply. The API layer
 * (api.c, api_family.c, api_admin.c, ui.c) shares it; http.c uses its
 * error reply. */
#ifndef PICKETD_API_JSON_H
#define PICKETD_API_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "api_types.h"

#define API_JSON_OWNER_MAX (2 * PICKET_PROTO_OWNER_BYTES_MAX + 3)
#define API_JSON_FENCE_TOKEN_MAX (PICKET_PROTO_FENCE_TOKEN_MAX + 20)

/* An error reply with the table's status and code and `message` (NULL: the
 * table's default message). */
void api_error(api_response *resp, picket_proto_err e, const char *message);
/* Frees what resp owns (its body). */
void api_response_free(api_response *resp);

/* Takes ownership of j and serializes it as the reply body (a 500 when
 * that runs out of memory). */
void api_json_reply(api_response *resp, int status, json_t *j);
/* A 200 whose body is the formatted text, at most 1 KiB (a 500 beyond). */
void api_json_reply_fmt(api_response *resp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The error object {"code", "message"} of e (message NULL: the table's);
 * a new reference. */
json_t *api_json_error(picket_proto_err e, const char *message);
/* An error reply (409, 429) whose error object gets retry_after_ms, and
 * Retry-After in whole seconds rounded up: takes ownership of err. */
void api_json_reply_retry(api_response *resp, int status, json_t *err, int64_t ms);
/* An owner read back from the store as JSON: null when empty or not
 * UTF-8; a new reference. */
json_t *api_json_owner(const char *owner);
/* A validated owner (a request's) as a JSON literal in out: null or quoted. */
const char *api_json_owner_literal(const char *owner, char out[API_JSON_OWNER_MAX]);
/* With --fence-key-file, the grant's signed fence, of `kind`
 * (PICKET_PROTO_FENCE_KIND_*), as a member (",\"fence_token\":\"v2...\""),
 * else "": in out. */
const char *api_json_fence_token(unsigned kind, const char *lock, int64_t fence,
                                 char out[API_JSON_FENCE_TOKEN_MAX]);

/* The request's body as an object whose members are all in `allowed`
 * (NULL-terminated); an empty body is {}. NULL with a 400 in *resp. The
 * caller owns the object. */
json_t *api_json_body(const api_request *req, const char *const *allowed, api_response *resp);
/* o's integer member key, from lo to hi (def when absent): 0, or -1 with a
 * 400 in *resp. */
int api_json_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out,
                 api_response *resp);
/* A 400 invalid_argument whose message is fmt with field, lo and hi; -1. */
int api_json_bad_field(api_response *resp, const char *fmt, const char *field, long long lo,
                       long long hi);

/* The error reply of a failed store call (st is not STORE_OK). */
/* The error code of a failed store call. */
picket_proto_err api_json_store_err(store_status st);
/* A failed store call's reply. The store's own message (its address or
 * socket path, the backend's own words) goes only to those /readyz shows
 * it to: everyone without --auth-file, a token with the metrics verb under
 * it; others get the error table's message (call NULL: a stranger). */
void api_json_store_failure(api_response *resp, store_status st, const store_result *r,
                            const api_call *call);

#endif
