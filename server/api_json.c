/* api_json.c: the JSON of the lock endpoints, both ways (api_json.h).
 *
 * Kept apart from api.c so that the request path there and the three
 * families' replies in api_family.c build bodies one way: the hot replies
 * (grant, renew, release) are formatted directly, everything else is a
 * jansson tree. */
#include "api_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "signer.h"

void api_json_reply(api_response *resp, int status, json_t *j) {
  resp->status = status;
  resp->content_type = "application/json";
  resp->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (resp->body == NULL) { /* out of memory: a fixed body still says so */
    resp->status = 500;
    resp->body = strdup("{\"error\":{\"code\":\"internal_error\",\"message\":\"out of memory\"}}");
  }
  resp->body_len = resp->body ? strlen(resp->body) : 0;
}

/* The hot replies have a fixed shape and only strings validated on the
 * way in, so they are formatted directly: no JSON tree per request. Names
 * are [A-Za-z0-9._:-] and lease ids hex, so they need no escaping; a
 * request's owner is UTF-8 without control characters, so only quote and
 * backslash do (api_json_owner_literal). An owner read back from the
 * store goes through jansson: the store may hold anything. */
void api_json_reply_fmt(api_response *resp, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *body = (n > 0 && (size_t)n < sizeof buf) ? malloc((size_t)n + 1) : NULL;
  if (body == NULL) {
    api_error(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
    return;
  }
  memcpy(body, buf, (size_t)n + 1);
  resp->status = 200;
  resp->content_type = "application/json";
  resp->body = body;
  resp->body_len = (size_t)n;
}

/* A message may quote what a client sent (jansson's "near '...'" can cut
 * a character in two) or what the store holds, so it is not always UTF-8; then
 * its other bytes become '?', because a message that is not a JSON string
 * would turn the whole reply into a 500. */
json_t *api_json_error(picket_proto_err e, const char *message) {
  const char *m = message ? message : picket_proto_err_message(e);
  json_t *text = json_string(m);
  if (text == NULL) {
    char clean[512];
    snprintf(clean, sizeof clean, "%s", m);
    for (char *p = clean; *p; p++)
      if ((unsigned char)*p >= 0x80) *p = '?';
    text = json_string(clean);
  }
  return json_pack("{s:s, s:o}", "code", picket_proto_err_code(e), "message", text);
}

void api_json_reply_retry(api_response *resp, int status, json_t *err, int64_t ms) {
  if (ms < 1) ms = 1; /* a key without expiry (-1) is still "held now" */
  json_object_set_new(err, "retry_after_ms", json_integer(ms));
  api_json_reply(resp, status, json_pack("{s:o}", "error", err));
  snprintf(resp->retry_after, sizeof resp->retry_after, "%lld", (long long)((ms + 999) / 1000));
}

/* An owner read back from the store was not necessarily written by picketd
 * (the store's own command-line client, another program): one that is not valid UTF-8 cannot be a
 * JSON string, and is shown as null rather than failing the whole reply. */
json_t *api_json_owner(const char *owner) {
  json_t *s = owner && owner[0] ? json_string(owner) : NULL;
  return s ? s : json_null();
}

const char *api_json_owner_literal(const char *owner, char out[API_JSON_OWNER_MAX]) {
  if (owner == NULL || owner[0] == '\0') return "null";
  size_t n = 0;
  out[n++] = '"';
  for (; *owner; owner++) {
    if (*owner == '"' || *owner == '\\') out[n++] = '\\';
    out[n++] = *owner;
  }
  out[n++] = '"';
  out[n] = '\0';
  return out;
}

const char *api_json_fence_token(unsigned kind, const char *lock, int64_t fence,
                                 char out[API_JSON_FENCE_TOKEN_MAX]) {
  char token[PICKET_PROTO_FENCE_TOKEN_MAX + 1];
  out[0] = '\0';
  if (signer_sign(kind, lock, fence, token) == 0)
    snprintf(out, API_JSON_FENCE_TOKEN_MAX, ",\"fence_token\":\"%s\"", token);
  return out;
}

static int only_space(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
  return 1;
}

json_t *api_json_body(const api_request *req, const char *const *allowed, api_response *resp) {
  if (req->body_len == 0 || only_space(req->body, req->body_len)) return json_object();
  json_error_t jerr;
  json_t *j = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr);
  char msg[300];
  if (j == NULL) {
    snprintf(msg, sizeof msg, "malformed JSON body: %s (line %d, column %d)", jerr.text, jerr.line,
             jerr.column);
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, msg);
    return NULL;
  }
  if (!json_is_object(j)) {
    json_decref(j);
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, "the body must be a JSON object");
    return NULL;
  }
  const char *key;
  json_t *v;
  json_object_foreach(j, key, v) {
    int ok = 0;
    for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
    if (!ok) {
      snprintf(msg, sizeof msg, "unknown field '%.64s'", key);
      json_decref(j);
      api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, msg);
      return NULL;
    }
  }
  return j;
}

int api_json_bad_field(api_response *resp, const char *fmt, const char *field, long long lo,
                       long long hi) {
  char msg[200];
  snprintf(msg, sizeof msg, fmt, field, lo, hi);
  api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, msg);
  return -1;
}

int api_json_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out,
                 api_response *resp) {
  json_t *v = json_object_get(o, key);
  if (v == NULL) {
    *out = def;
    return 0;
  }
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return api_json_bad_field(resp, "%s must be an integer from %lld to %lld", key, lo, hi);
  *out = json_integer_value(v);
  return 0;
}

picket_proto_err api_json_store_err(store_status st) {
  switch (st) {
    case STORE_EREPLY: return PICKET_PROTO_ERR_STORE_ERROR;
    case STORE_EMISCONF: return PICKET_PROTO_ERR_STORE_MISCONFIGURED;
    case STORE_EFULL: return PICKET_PROTO_ERR_STORE_FULL;
    case STORE_ENOTREPL: return PICKET_PROTO_ERR_NOT_REPLICATED;
    case STORE_ETAMPERED: return PICKET_PROTO_ERR_STORE_TAMPERED;
    case STORE_EUNAVAIL:
    default: return PICKET_PROTO_ERR_STORE_UNAVAILABLE;
  }
}

void api_json_store_failure(api_response *resp, store_status st, const store_result *r,
                            const api_call *call) {
  int detail = !auth_enabled() || (call && call->who && auth_allows(call->who, AUTH_METRICS));
  api_error(resp, api_json_store_err(st), detail && r->err[0] ? r->err : NULL);
}

void api_error(api_response *resp, picket_proto_err e, const char *message) {
  api_json_reply(resp, picket_proto_err_status(e),
                 json_pack("{s:o}", "error", api_json_error(e, message)));
}

void api_response_free(api_response *resp) {
  free(resp->body);
  resp->body = NULL;
}
