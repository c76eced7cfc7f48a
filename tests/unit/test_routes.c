/* Unit tests of the route table (server/routes.c): it and
 * proto/openapi.yaml describe the same endpoints (every row is a path and
 * method of the spec with the same request body schema, and every path
 * and method of the spec but the console's files is a row), and the
 * matcher routes by whole segments. No server: the table and the spec
 * embedded in picket_proto are read in memory. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_json.h"
#include "config.h"
#include "harness.h"
#include "picket_proto.h"
#include "routes.h"
#include "store_stub.h"

/* One operation of the spec: path, method ("get", "post", "head") and
 * the request body's schema ("" for none). */
typedef struct {
  char path[96], method[8], schema[64];
  int seen;
} spec_op;

static spec_op ops[128];
static int nops;

/* Whether a path item's key is an operation ("get:"), not "parameters:". */
static int is_method(const char *key) {
  static const char *const methods[] = {"get:", "post:", "head:", "put:", "delete:", "patch:"};
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    if (strcmp(key, methods[i]) == 0) return 1;
  return 0;
}

/* Reads the spec's `paths:` section: a path at indent 2, its operations
 * at indent 4, a requestBody's $ref below the operation. */
static void read_spec(void) {
  const char *s = picket_proto_openapi, *end = s + picket_proto_openapi_len;
  int in_paths = 0, in_body = 0;
  char path[96] = "";
  nops = 0;
  while (s < end) {
    const char *eol = memchr(s, '\n', (size_t)(end - s));
    if (eol == NULL) eol = end;
    size_t n = (size_t)(eol - s), indent = strspn(s, " ");
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(n < 255 ? n : 255), s);
    if (indent == 0 && n > 0) in_paths = strcmp(line, "paths:") == 0;
    else if (in_paths && indent == 2 && line[2] == '/') {
      snprintf(path, sizeof path, "%.*s", (int)(strcspn(line + 2, ":")), line + 2);
    } else if (in_paths && indent == 4 && is_method(line + 4) && nops < 128) {
      spec_op *o = &ops[nops++];
      snprintf(o->path, sizeof o->path, "%s", path);
      snprintf(o->method, sizeof o->method, "%.*s", (int)(n - 5), line + 4);
      o->schema[0] = '\0';
      in_body = 0;
    } else if (in_paths && indent == 6 && strncmp(line + 6, "requestBody:", 12) == 0) {
      in_body = 1;
    } else if (in_paths && indent <= 6 && indent > 0) {
      in_body = indent == 6 ? 0 : in_body;
    }
    static const char needle[] = "$ref: '#/components/schemas/";
    const char *ref = strstr(line, needle), *name = ref ? ref + sizeof needle - 1 : NULL;
    if (in_paths && in_body && ref && nops > 0 && ops[nops - 1].schema[0] == '\0')
      snprintf(ops[nops - 1].schema, sizeof ops[nops - 1].schema, "%.*s",
               (int)strcspn(name, "'"), name);
    s = eol + 1;
  }
}

static spec_op *spec_find(const char *path, const char *method) {
  for (int i = 0; i < nops; i++)
    if (strcmp(ops[i].path, path) == 0 && strcasecmp(ops[i].method, method) == 0) return &ops[i];
  return NULL;
}

START_TEST(table_is_the_spec) {
  read_spec();
  ck_assert_int_gt(nops, 30);
  size_t n;
  const api_route *rt = routes_table(&n);
  for (size_t i = 0; i < n; i++) {
    spec_op *o = spec_find(rt[i].path, rt[i].method);
    ck_assert_msg(o, "%s %s is a route and no path of the spec", rt[i].method, rt[i].path);
    ck_assert_msg(strcmp(o->schema, rt[i].schema ? rt[i].schema : "") == 0,
                  "%s %s: the spec's body is '%s', the route's '%s'", rt[i].method, rt[i].path,
                  o->schema, rt[i].schema ? rt[i].schema : "");
    o->seen = 1;
    if (strcmp(rt[i].method, "GET") == 0) { /* HEAD is served alike: the spec says so too */
      spec_op *h = spec_find(rt[i].path, "head");
      ck_assert_msg(h, "GET %s has no HEAD in the spec", rt[i].path);
      h->seen = 1;
    }
    ck_assert_msg(rt[i].label && rt[i].label[0], "%s %s has no metrics label", rt[i].method,
                  rt[i].path);
    for (size_t k = 0; k < i; k++)
      ck_assert_msg(strcmp(rt[k].path, rt[i].path) || strcmp(rt[k].method, rt[i].method),
                    "%s %s is a route twice", rt[i].method, rt[i].path);
  }
  for (int i = 0; i < nops; i++)
    ck_assert_msg(ops[i].seen || strncmp(ops[i].path, "/ui", 3) == 0,
                  "%s %s is in the spec and no route", ops[i].method, ops[i].path);
}
END_TEST

static routes_match_result match(const char *method, const char *path, const api_route **rt,
                                 char *seg, const char **allow) {
  const char *s;
  size_t n;
  routes_match_result m = routes_match(method, path, rt, &s, &n, allow);
  snprintf(seg, 64, "%.*s", s ? (int)n : 0, s ? s : "");
  return m;
}

START_TEST(matching) {
  const api_route *rt;
  const char *allow = NULL;
  char seg[64];
  ck_assert_int_eq(match("POST", "/v1/locks/a.b/acquire", &rt, seg, &allow), ROUTE_FOUND);
  ck_assert_str_eq(rt->path, "/v1/locks/{name}/acquire");
  ck_assert_str_eq(seg, "a.b");
  ck_assert_int_eq(match("HEAD", "/v1/elections/e%3A1", &rt, seg, &allow), ROUTE_FOUND);
  ck_assert_str_eq(rt->label, "election_inspect");
  ck_assert_str_eq(seg, "e%3A1"); /* as sent: api_named decodes it once */
  ck_assert_int_eq(match("GET", "/v1/locks", &rt, seg, &allow), ROUTE_FOUND);
  ck_assert_str_eq(rt->label, "list");
  ck_assert_int_eq(match("GET", "/v1/locks/a/acquire", &rt, seg, &allow), ROUTE_NO_METHOD);
  ck_assert_str_eq(allow, "POST");
  ck_assert_int_eq(match("DELETE", "/v1/locks/a", &rt, seg, &allow), ROUTE_NO_METHOD);
  ck_assert_str_eq(allow, "GET, HEAD");
  static const char *const none[] = {"/v1/locks/a/b/acquire", "/v1/locks//acquire", "/v1/locks/",
                                     "/v1/locks/a/acquire/", "/v1/semaphores/a/break",
                                     "/v1/rwlocks/a/events", "/healthz/", "/v1/lockss", ""};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
    ck_assert_msg(match("POST", none[i], &rt, seg, &allow) == ROUTE_NONE &&
                      match("GET", none[i], &rt, seg, &allow) == ROUTE_NONE,
                  "%s is routed", none[i]);
}
END_TEST

/* ---- requests through the table, on the fuzzer's in-memory store ----- */

static const char *no_query(void *ctx, const char *key) {
  return strcmp(key, "limit") == 0 ? ctx : NULL; /* the one query argument sent here */
}

/* Sends one request; returns its status, with the body in body. */
static int send(const char *method, const char *path, const char *json, char *body, size_t cap,
                const char **allow) {
  api_request req = {.method = method, .path = path, .body = json, .body_len = json ? strlen(json) : 0,
                     .peer = "127.0.0.1", .peer_loopback = 1, .query_arg = no_query,
                     .query_ctx = "2", .content_type = "application/json"};
  api_call call = {0};
  api_response resp;
  stub_request_begin(STUB_FAULT_NONE, STUB_WHEN_EVERY);
  routes_handle(&req, &call, &resp);
  snprintf(body, cap, "%.*s", (int)resp.body_len, resp.body ? resp.body : "");
  if (allow) *allow = resp.allow;
  int status = resp.status;
  api_call_end(&call);
  api_response_free(&resp);
  return status;
}

START_TEST(answers) {
  static config cfg;
  char *argv[] = {"picketd", NULL}, *env[] = {NULL}, err[300], body[2048];
  ck_assert_int_eq(config_load(&cfg, 1, argv, env, err, sizeof err), CONFIG_RUN);
  api_init(&cfg);
  routes_init();
  stub_reset();
  const char *allow = NULL;
  ck_assert_int_eq(send("POST", "/v1/locks/r.a/acquire", "{\"ttl_ms\":5000}", body, sizeof body,
                        NULL), 200);
  ck_assert_msg(strstr(body, "\"fence\""), "%s", body);
  ck_assert_int_eq(send("HEAD", "/v1/locks/r.a", NULL, body, sizeof body, NULL), 200);
  ck_assert_int_eq(send("GET", "/v1/locks", NULL, body, sizeof body, NULL), 200); /* a listing */
  ck_assert_msg(strstr(body, "r.a"), "%s", body);
  ck_assert_int_eq(send("GET", "/v1/locks/r.a/acquire", NULL, body, sizeof body, &allow), 405);
  ck_assert_str_eq(allow, "POST");
  ck_assert_int_eq(send("POST", "/v1/semaphores/r.a/break", "{}", body, sizeof body, NULL), 404);
  ck_assert_msg(strstr(body, "no such semaphore action; use acquire, renew or release"), "%s",
                body);
  ck_assert_int_eq(send("GET", "/v1/nope", NULL, body, sizeof body, NULL), 404);
  ck_assert_msg(strstr(body, "no such endpoint"), "%s", body);
  ck_assert_int_eq(send("POST", "/v1/locks/a%2Fb/acquire", "{}", body, sizeof body, NULL), 400);
  ck_assert_int_eq(send("POST", "/v1/elections/r.e/break", "{}", body, sizeof body, NULL), 200);
  ck_assert_msg(strstr(body, "\"term\""), "%s", body);
}
END_TEST

int main(void) {
  Suite *s = suite_create("routes");
  TCase *tc = tcase_create("routes");
  tcase_add_test(tc, table_is_the_spec);
  tcase_add_test(tc, matching);
  tcase_add_test(tc, answers);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
