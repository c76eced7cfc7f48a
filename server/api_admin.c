/* api_admin.c: the endpoints for operators and tools (api_admin.h).
 *
 * Listing reads the index of held names that the store's grant and
 * release calls keep: one page per call, never a scan of the whole store
 * (each backend's listing says how). Breaking is one store call that ends
 * the lease and moves the fence on: what makes a break safe is the fence, because
 * a store that checks fences refuses the broken holder's writes once it
 * has seen a higher one. whoami tells a client (the web console) what its
 * token may do, so it need not find out by trying. */
#include "api_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_family.h"
#include "api_json.h"
#include "auth.h"
#include "events.h"
#include "holds.h"
#include "log.h"
#include "quota.h"
#include "wait.h"

#define LIST_DEFAULT 100
#define LIST_MAX 1000

/* A query argument, percent-decoded once (as clients encode it: the
 * console's URLSearchParams sends ':' as "%3A"), into out; NULL when
 * absent, "" with *bad set when it does not decode or needs cap bytes or
 * more. */
static const char *query_text(const api_request *req, const char *key, char *out, size_t cap,
                              int *bad) {
  const char *v = req->query_arg ? req->query_arg(req->query_ctx, key) : NULL;
  if (v == NULL) return NULL;
  if (picket_proto_percent_decode(v, strlen(v), out, cap) < 0) {
    out[0] = '\0';
    *bad = 1;
  }
  return out;
}

/* A query argument as a bounded integer: 0 (def when absent), or -1 with
 * a 400 in *resp. */
static int query_int(const api_request *req, const char *key, int64_t lo, int64_t hi,
                     int64_t def, int64_t *out, api_response *resp) {
  char buf[24];
  int bad = 0;
  const char *v = query_text(req, key, buf, sizeof buf, &bad);
  *out = def;
  if (v == NULL) return 0;
  char *end;
  long long x = strtoll(v, &end, 10);
  if (bad || v[0] < '0' || v[0] > '9' || *end != '\0' || x < lo || x > hi)
    return api_json_bad_field(resp, "%s must be an integer from %lld to %lld", key, lo, hi);
  *out = x;
  return 0;
}

/* ---- what a token may list ---------------------------------------------
 *
 * A listing reads only names the caller may see: the store is asked for
 * the requested prefix narrowed to each of the token's own prefixes (the
 * ranges), never for the whole prefix with the rest filtered out here.
 * That is what keeps other tenants' names out of the cursor too: the
 * store's cursor is the last index member it looked at, and every member
 * it looks at lies inside the range it was given. (Filtering after the
 * fact left empty pages whose cursors named each of another prefix's held
 * locks, issue 39.) It also bounds a scoped token's listing by its own
 * names, not by everybody's. */

#define CURSOR_WHY                                                                     \
  "cursor is not one this listing returned (pass it back unchanged, with the same prefix and " \
  "token)"
#define LIST_RANGES 64 /* an auth line has at most 64 prefixes (auth.c) */
#define EL PICKET_PROTO_ELECTION_STORE_PREFIX
#define EL_LEN (sizeof EL - 1)

/* Elections are held as the locks "/e/NAME" (api_family.c), which no range
 * of lock names holds: each range R of names gets its twin "/e/R" (the
 * range "" holds both already). */
typedef struct {
  int n;
  const char *at[2 * LIST_RANGES]; /* in name order, none a prefix of another */
  char twin[LIST_RANGES][PICKET_PROTO_NAME_MAX + 1]; /* the elections' ranges */
} list_ranges;

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The ranges of names that start with `prefix` and that `who` covers:
 * `prefix` itself when one of the token's prefixes covers it, else each
 * of the token's prefixes that starts with `prefix`. None: the caller may
 * see nothing under `prefix` (403). `prefix` must outlive *out. */
static void list_ranges_of(const auth_principal *who, const char *prefix, list_ranges *out) {
  out->n = 0;
  if (who == NULL || auth_covers(who, prefix)) {
    out->at[out->n++] = prefix;
    return;
  }
  size_t plen = strlen(prefix);
  const char *tp;
  for (int i = 0; (tp = auth_prefix(who, i)) != NULL && out->n < LIST_RANGES; i++)
    if (strncmp(tp, prefix, plen) == 0) out->at[out->n++] = tp;
  qsort(out->at, (size_t)out->n, sizeof out->at[0], by_name);
  int kept = 0; /* a range inside an earlier one would list its names twice */
  for (int i = 0; i < out->n; i++)
    if (kept == 0 || strncmp(out->at[i], out->at[kept - 1], strlen(out->at[kept - 1])) != 0)
      out->at[kept++] = out->at[i];
  out->n = kept;
}

/* Adds each range's elections' twin (prefix's own ranges, from
 * list_ranges_of), in name order again. A range longer than an election
 * name holds no election and gets none: its twin would not fit, and cut
 * short it would hold another tenant's election (tenant_listing_long_prefix). */
static void list_ranges_twin(list_ranges *out) {
  int n = out->n;
  if (n == 1 && out->at[0][0] == '\0') return; /* "" holds every name */
  for (int i = 0; i < n; i++) {
    if (strlen(out->at[i]) > PICKET_PROTO_ELECTION_NAME_MAX) continue;
    snprintf(out->twin[i], sizeof out->twin[i], "%s%s", EL, out->at[i]);
    out->at[out->n++] = out->twin[i];
  }
  qsort(out->at, (size_t)out->n, sizeof out->at[0], by_name);
}

/* A listed name as the store holds it: an election's public name and
 * kind, else the name itself. */
static const char *listed_name(const store_entry *e, char *kind) {
  *kind = e->kind;
  if (e->kind != 'l' || strncmp(e->name, EL, EL_LEN) != 0) return e->name;
  *kind = 'e';
  return e->name + EL_LEN;
}

/* The API's cursor is the store's (opaque to this file: store.h) with the
 * range it is in: the store's text alone when there is one range, else
 * "I~" and the store's text for range I. Clients treat it as opaque. It
 * names nothing the caller could not list: the store reads a cursor back
 * only within the range it is given (else STORE_EARG, a 400 here), and a
 * range is one of the caller's own. Returns the range it resumes in, or
 * -1. */
static int cursor_parse(const char *s, const list_ranges *ranges, store_cursor *at) {
  const char *text = s;
  int i = 0;
  if (ranges->n > 1) {
    char *end;
    long n = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || n >= ranges->n || end[0] != '~') return -1;
    i = (int)n;
    text = end + 1;
  } else if (s[0] == '\0') {
    return -1;
  }
  if (strlen(text) >= sizeof at->text) return -1;
  memcpy(at->text, text, strlen(text) + 1);
  return i;
}

/* The cursor of the page that stops at *at in range i (cursor_parse). */
static json_t *cursor_of(const list_ranges *ranges, int i, const store_cursor *at) {
  char c[STORE_CURSOR_MAX + 16];
  if (ranges->n == 1)
    snprintf(c, sizeof c, "%s", at->text[0] ? at->text : "0");
  else
    snprintf(c, sizeof c, "%d~%s", i, at->text);
  return json_string(c);
}

static json_t *entry_json(const store_entry *e) {
  static const char *const kinds[] = {['l'] = "lock", ['s'] = "semaphore", ['r'] = "rwlock",
                                      ['e'] = "election"};
  char key[PICKET_PROTO_NAME_MAX + 3]; /* its waiters' queue (api_call.key) */
  char kind;
  const char *name = listed_name(e, &kind);
  snprintf(key, sizeof key, "%s%s", e->kind == 's' ? "s/" : e->kind == 'r' ? "r/" : "", e->name);
  json_t *o = json_pack("{s:s, s:s, s:I, s:o, s:I, s:o, s:o, s:i}", "kind",
                        kinds[(unsigned char)kind], "name", name, "holders",
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

/* --list-rate: 0, or 1 with a 429 in *resp. */
static int list_rate_refused(api_call *call, api_response *resp) {
  int64_t retry_ms = 0;
  if (call->subject == NULL || quota_list_take(call->subject, &retry_ms) == 0) return 0;
  quota_count_denied(call->subject, QUOTA_DENY_RATE);
  char msg[160];
  snprintf(msg, sizeof msg, "more than %lld listings per second from this %s (--list-rate)",
           (long long)quota_list_rate(), call->who ? "token" : "address");
  api_json_reply_retry(resp, 429, api_json_error(PICKET_PROTO_ERR_RATE_LIMITED, msg), retry_ms);
  return 1;
}

/* What a listing or a break keeps between its store calls, which the
 * runner (call.c) makes while the request waits. */
struct api_admin_state {
  char prefix[PICKET_PROTO_NAME_MAX + 1]; /* a listing's prefix... */
  list_ranges ranges;  /* ...its ranges (they point into it: it never moves)... */
  int i;               /* ...the one being read */
  int64_t limit, got;  /* the page's size, and the names in it so far */
  store_cursor at;     /* where the store goes on in range i */
  json_t *locks;       /* the page so far */
  char who[AUTH_NAME_MAX + 80]; /* a break's caller, as the broken holder is told */
};

void api_admin_end(api_call *call) {
  if (call->admin == NULL) return;
  json_decref(call->admin->locks);
  free(call->admin);
  call->admin = NULL;
}

/* The store call for range i's next page (API_STORE). */
static api_result list_next(api_call *call) {
  struct api_admin_state *st = call->admin;
  memset(&call->op, 0, sizeof call->op);
  call->op.kind = STORE_OP_LIST;
  call->op.name = st->ranges.at[st->i];
  call->op.limit = st->limit - st->got;
  call->op.cursor = &st->at;
  return API_STORE;
}

api_result api_admin_list(const api_request *req, api_call *call, api_response *resp) {
  int64_t limit;
  if (query_int(req, "limit", 1, LIST_MAX, LIST_DEFAULT, &limit, resp) < 0) return API_DONE;
  char prefix_buf[PICKET_PROTO_NAME_MAX + 2], cursor_buf[PICKET_PROTO_NAME_MAX + 24];
  int bad_prefix = 0, bad_cursor = 0;
  const char *prefix = query_text(req, "prefix", prefix_buf, sizeof prefix_buf, &bad_prefix);
  const char *cursor = query_text(req, "cursor", cursor_buf, sizeof cursor_buf, &bad_cursor);
  if (prefix == NULL) prefix = "";
  size_t plen = strlen(prefix);
  if (bad_prefix || plen > PICKET_PROTO_NAME_MAX ||
      strspn(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") != plen) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT,
              "prefix must be up to 200 bytes of A-Z a-z 0-9 . _ : -");
    return API_DONE;
  }
  struct api_admin_state *st = call->admin = calloc(1, sizeof *call->admin);
  if (st == NULL) {
    api_error(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
    return API_DONE;
  }
  memcpy(st->prefix, prefix, plen + 1);
  list_ranges_of(call->who, st->prefix, &st->ranges);
  list_ranges_twin(&st->ranges);
  if (st->ranges.n == 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "token '%s' may list no name that starts with '%s' (outside its "
             "prefixes)", auth_name(call->who), prefix);
    quota_count_denied(call->subject, QUOTA_DENY_PREFIX);
    api_error(resp, PICKET_PROTO_ERR_PERMISSION_DENIED, msg);
    return API_DONE;
  }
  if (cursor && (bad_cursor || (st->i = cursor_parse(cursor, &st->ranges, &st->at)) < 0)) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, CURSOR_WHY);
    return API_DONE;
  }
  if (list_rate_refused(call, resp)) return API_DONE;
  st->limit = limit;
  if ((st->locks = json_array()) == NULL) {
    api_error(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
    return API_DONE;
  }
  return list_next(call);
}

api_result api_admin_list_page(api_call *call, api_response *resp) {
  struct api_admin_state *st = call->admin;
  store_result *r = &call->op.r;
  if (call->op.st == STORE_EARG) {
    api_error(resp, PICKET_PROTO_ERR_INVALID_ARGUMENT, CURSOR_WHY);
    return API_DONE;
  }
  if (call->op.st != STORE_OK) {
    api_json_store_failure(resp, call->op.st, r, call);
    return API_DONE;
  }
  for (int k = 0; k < r->nentries; k++) {
    char kind;
    if (call->who == NULL || auth_covers(call->who, listed_name(&r->entries[k], &kind))) {
      json_array_append_new(st->locks, entry_json(&r->entries[k]));
      st->got++;
    }
  }
  store_result_clear(r);
  json_t *next = NULL;
  if (r->more) {
    next = cursor_of(&st->ranges, st->i, &st->at);
  } else {
    st->at = (store_cursor){""};
    if (st->got >= st->limit && st->i + 1 < st->ranges.n) /* full: the next range's start */
      next = cursor_of(&st->ranges, st->i + 1, &st->at);
    else if (++st->i < st->ranges.n)
      return list_next(call);
  }
  api_json_reply(resp, 200, json_pack("{s:O, s:o}", "locks", st->locks, "cursor",
                                      next ? next : json_null()));
  return API_DONE;
}

int api_admin_may_break(const api_request *req, const api_call *call) {
  return auth_enabled() ? call->who && auth_allows(call->who, AUTH_ADMIN) : req->peer_loopback;
}

api_result api_admin_break(const api_request *req, api_call *call, api_response *resp) {
  /* {} or no body: break whoever holds it; {"fence": F}: only the grant of
   * fence F, the one a retry of a break whose reply was lost may send */
  static const char *const allowed[] = {"fence", NULL};
  json_t *b = api_json_body(req, allowed, resp);
  if (b == NULL) return API_DONE;
  int64_t fence = 0;
  int bad = api_json_int(b, "fence", 1, PICKET_PROTO_FENCE_MAX, 0, &fence, resp);
  json_decref(b);
  if (bad < 0) return API_DONE;
  struct api_admin_state *st = call->admin = calloc(1, sizeof *call->admin);
  if (st == NULL) {
    api_error(resp, PICKET_PROTO_ERR_INTERNAL, "out of memory");
    return API_DONE;
  }
  if (call->who)
    snprintf(st->who, sizeof st->who, "token '%s'", auth_name(call->who));
  else
    snprintf(st->who, sizeof st->who, "address %.64s",
             req->peer && req->peer[0] ? req->peer : "local");
  memset(&call->op, 0, sizeof call->op);
  call->op.kind = STORE_OP_BREAK;
  call->op.name = call->store_name;
  call->op.who = st->who;
  call->op.fence = fence;
  return API_STORE;
}

api_result api_admin_break_outcome(api_call *call, api_response *resp) {
  const store_result *r = &call->op.r;
  const char *who = call->admin->who;
  if (call->op.st == STORE_HELD) { /* a break given a fence found another grant */
    char msg[400];
    snprintf(msg, sizeof msg, "%s %s is held under %s %lld, not %lld; nothing was broken",
             call->family->noun, call->name, call->family->values ? "term" : "fence",
             (long long)r->fence, (long long)call->op.fence);
    json_t *err = api_json_error(PICKET_PROTO_ERR_LOCK_HELD, msg);
    json_object_set_new(err, "owner", api_json_owner(r->owner));
    api_json_reply_retry(resp, 409, err, r->ttl_ms > 0 ? r->ttl_ms : 1);
    return API_DONE;
  }
  if (call->op.st != STORE_OK) {
    api_json_store_failure(resp, call->op.st, r, call);
    return API_DONE;
  }
  metrics_inc(r->held ? M_BREAK_BROKEN : M_BREAK_NOT_HELD);
  if (r->held) holds_ended(call->key, r->at, HOLD_BROKEN);
  if (r->held)
    LOG(LOG_WARN, "%s %s broken by %s: the lease of owner '%s' ended; its fence is now %lld",
        call->family->noun, call->name, who, r->owner, (long long)r->fence);
  else
    LOG(LOG_INFO, "break of %s by %s: no lease was held; its fence is now %lld", call->name, who,
        (long long)r->fence);
  /* (an election's fence is its term) */
  api_json_reply(resp, 200,
                 json_pack("{s:s, s:b, s:I, s:o}", call->family->noun, call->name, "broken", r->held,
                           call->family->values ? "term" : "fence", (json_int_t)r->fence, "owner",
                           api_json_owner(r->held ? r->owner : NULL)));
  return API_DONE;
}

api_result api_admin_events(const api_request *req, api_call *call, api_response *resp) {
  /* a token's streams count together wherever it connects from; without
   * tokens, an address's */
  const char *client = call->who ? auth_name(call->who) : req->peer && req->peer[0] ? req->peer : "-";
  picket_proto_err err;
  events_sub *s = events_open(call->store_name, client, auth_sees_operators(call->who), &err);
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
