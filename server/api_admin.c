/* api_admin.c: the endpoints for operators and tools (api_admin.h).
 *
 * Listing reads the index of held names that the grant and release
 * scripts keep (proto/redis/list.lua): one page per call, never a scan of
 * Redis. Breaking is a script that ends the lease and moves the fence on
 * (proto/redis/break.lua): what makes a break safe is the fence, because
 * a store that checks fences refuses the broken holder's writes once it
 * has seen a higher one. whoami tells a client (the web console) what its
 * token may do, so it need not find out by trying. */
#include "api_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_json.h"
#include "auth.h"
#include "events.h"
#include "holds.h"
#include "log.h"
#include "wait.h"

#define LIST_DEFAULT 100
#define LIST_MAX 1000

/* A query argument as a bounded integer: 0 (def when absent), or -1 with
 * a 400 in *resp. */
static int query_int(const api_request *req, const char *key, int64_t lo, int64_t hi,
                     int64_t def, int64_t *out, api_response *resp) {
  const char *v = req->query_arg ? req->query_arg(req->query_ctx, key) : NULL;
  *out = def;
  if (v == NULL) return 0;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end != '\0' || x < lo || x > hi)
    return api_json_bad_field(resp, "%s must be an integer from %lld to %lld", key, lo, hi);
  *out = x;
  return 0;
}

/* The cursor is "SLOT-K-NAME" or "SLOT": where the last page stopped (the
 * hash slot, 0 outside Redis Cluster, and the index member "NAME K" after
 * which to go on, or the slot's start). Clients treat it as opaque; it
 * names nothing they could not list. */
static int cursor_parse(const char *s, store_cursor *at) {
  char *end;
  long slot = strtol(s, &end, 10);
  if (s[0] < '0' || s[0] > '9' || slot < 0 || slot > 16383) return -1;
  at->slot = (int)slot;
  at->after[0] = '\0';
  if (end[0] == '\0') return 0;
  if (end[0] != '-' ||
      strchr("lsr", end[1]) == NULL || end[1] == '\0' || end[2] != '-' ||
      !picket_proto_name_valid(end + 3, strlen(end + 3)))
    return -1;
  snprintf(at->after, sizeof at->after, "%s %c", end + 3, end[1]);
  return 0;
}

static json_t *entry_json(const store_entry *e) {
  static const char *const kinds[] = {['l'] = "lock", ['s'] = "semaphore", ['r'] = "rwlock"};
  char key[PICKET_PROTO_NAME_MAX + 3]; /* its waiters' queue (api_call.key) */
  snprintf(key, sizeof key, "%s%s", e->kind == 's' ? "s/" : e->kind == 'r' ? "r/" : "", e->name);
  json_t *o = json_pack("{s:s, s:s, s:I, s:o, s:I, s:o, s:o, s:i}", "kind",
                        kinds[(unsigned char)e->kind], "name", e->name, "holders",
                        (json_int_t)e->holders, "owner", api_json_owner(e->owner), "ttl_ms",
                        (json_int_t)e->ttl_ms,
                        "acquired_at", e->at > 0 ? json_integer(e->at) : json_null(), "renewals",
                        e->kind == 's' || e->at <= 0 ? json_null() : json_integer(e->renewals),
                        "waiters", wait_queue_length(key));
  if (o == NULL) return NULL;
  json_object_set_new(o, "fence", e->kind == 's' ? json_null() : json_integer(e->fence));
  if (e->kind == 's') json_object_set_new(o, "limit", json_integer(e->limit));
  return o;
}

api_result api_admin_list(const api_request *req, api_call *call, api_response *resp) {
  int64_t limit;
  if (query_int(req, "limit", 1, LIST_MAX, LIST_DEFAULT, &limit, resp) < 0) return API_DONE;
  const char *prefix = req->query_arg ? req->query_arg(req->query_ctx, "prefix") : NULL;
  const char *cursor = req->query_arg ? req->query_arg(req->query_ctx, "cursor") : NULL;
  if (prefix == NULL) prefix = "";
  size_t plen = strlen(prefix);
  if (plen > PICKET_PROTO_NAME_MAX ||
      strspn(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") != plen) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT,
              "prefix must be up to 200 bytes of A-Z a-z 0-9 . _ : -");
    return API_DONE;
  }
  store_cursor at = {0, ""};
  if (cursor && (cursor_parse(cursor, &at) < 0 ||
                 (at.after[0] && strncmp(at.after, prefix, plen) != 0))) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT,
              "cursor is not one this listing returned (pass it back unchanged, with the same "
              "prefix)");
    return API_DONE;
  }
  store_result r;
  int more;
  store_status st = store_list(prefix, (int)limit, &at, &more, &r);
  if (st != STORE_OK) {
    api_json_store_failure(resp, st, &r);
    return API_DONE;
  }
  json_t *locks = json_array();
  for (int i = 0; locks && i < r.nentries; i++)
    if (call->who == NULL || auth_covers(call->who, r.entries[i].name))
      json_array_append_new(locks, entry_json(&r.entries[i]));
  store_result_clear(&r);
  json_t *next = json_null();
  if (more) {
    char c[PICKET_PROTO_NAME_MAX + 16];
    size_t n = strlen(at.after);
    if (n >= 2) /* "NAME K" -> "SLOT-K-NAME" */
      snprintf(c, sizeof c, "%d-%c-%.*s", at.slot, at.after[n - 1], (int)(n - 2), at.after);
    else /* the next slot's first */
      snprintf(c, sizeof c, "%d", at.slot);
    next = json_string(c);
  }
  api_json_reply(resp, 200, json_pack("{s:o, s:o}", "locks", locks, "cursor", next));
  return API_DONE;
}

int api_admin_may_break(const api_request *req, const api_call *call) {
  return auth_enabled() ? call->who && auth_allows(call->who, AUTH_ADMIN) : req->peer_loopback;
}

api_result api_admin_break(const api_request *req, api_call *call, api_response *resp) {
  static const char *const allowed[] = {NULL}; /* {} or no body */
  json_t *b = api_json_body(req, allowed, resp);
  if (b == NULL) return API_DONE;
  json_decref(b);
  char who[AUTH_NAME_MAX + 80];
  if (call->who)
    snprintf(who, sizeof who, "token '%s'", auth_name(call->who));
  else
    snprintf(who, sizeof who, "address %.64s", req->peer && req->peer[0] ? req->peer : "local");
  store_result r;
  store_status st = store_break(call->name, who, &r);
  if (st != STORE_OK) {
    api_json_store_failure(resp, st, &r);
    return API_DONE;
  }
  metrics_inc(r.held ? M_BREAK_BROKEN : M_BREAK_NOT_HELD);
  if (r.held) holds_ended(call->name, r.at, HOLD_BROKEN);
  if (r.held)
    LOG(LOG_WARN, "lock %s broken by %s: the lease of owner '%s' ended; its fence is now %lld",
        call->name, who, r.owner, (long long)r.fence);
  else
    LOG(LOG_INFO, "break of %s by %s: no lease was held; its fence is now %lld", call->name, who,
        (long long)r.fence);
  api_json_reply(resp, 200,
                 json_pack("{s:s, s:b, s:I, s:o}", "lock", call->name, "broken", r.held, "fence",
                           (json_int_t)r.fence, "owner", api_json_owner(r.held ? r.owner : NULL)));
  return API_DONE;
}

api_result api_admin_events(const api_request *req, api_call *call, api_response *resp) {
  /* a token's streams count together wherever it connects from; without
   * tokens, an address's */
  const char *client = call->who ? auth_name(call->who) : req->peer && req->peer[0] ? req->peer : "-";
  picket_proto_err err;
  events_sub *s = events_open(call->name, client, &err);
  if (s == NULL) {
    api_error(resp, err, NULL);
    if (err == PICKET_PROTO_ERR_QUOTA_WATCHERS || err == PICKET_PROTO_ERR_TOO_MANY_WATCHERS)
      snprintf(resp->retry_after, sizeof resp->retry_after, "1");
    return API_DONE;
  }
  resp->status = 200;
  resp->content_type = "text/event-stream";
  resp->stream = s;
  return API_STREAM;
}

api_result api_admin_whoami(const api_request *req, api_call *call, api_response *resp) {
  static const struct {
    auth_verb verb;
    const char *name;
  } verbs[] = {{AUTH_LOCK, "lock"}, {AUTH_READ, "read"}, {AUTH_METRICS, "metrics"},
               {AUTH_LIST, "list"}, {AUTH_ADMIN, "admin"}};
  json_t *v = json_array(), *p = json_array();
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
    int has = call->who ? auth_allows(call->who, verbs[i].verb)
                        : verbs[i].verb != AUTH_ADMIN || api_admin_may_break(req, call);
    if (has) json_array_append_new(v, json_string(verbs[i].name));
  }
  const char *pre;
  for (int i = 0; (pre = call->who ? auth_prefix(call->who, i) : i == 0 ? "*" : NULL); i++)
    json_array_append_new(p, json_string(pre));
  api_json_reply(resp, 200,
                 json_pack("{s:o, s:o, s:o}", "token",
                           call->who ? json_string(auth_name(call->who)) : json_null(), "verbs", v,
                           "prefixes", p));
  return API_DONE;
}
