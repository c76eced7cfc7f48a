/* Integration tests of picketd's API v1 against a real redis-server:
 * grants, holds, renewals, releases, expiry, idempotent retries, what GET
 * shows, every kind of bad input, and the service endpoints. */
#include <ctype.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include "picketd_common.h"

START_TEST(grant_then_held) {
  harness_resp r;
  int64_t t0 = harness_redis_time_us(R);
  call("POST", "/v1/locks/inv/acquire", "{\"ttl_ms\":5000,\"owner\":\"worker-1\"}", &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/json");
  ck_assert_str_eq(harness_json_str(r.json, "lock"), "inv");
  const char *lease = harness_json_str(r.json, "lease");
  ck_assert_msg(lease && strlen(lease) == 32, "lease: %s", r.body);
  for (int i = 0; i < 32; i++) ck_assert(isxdigit((unsigned char)lease[i]) && !isupper((unsigned char)lease[i]));
  /* 1 with --fence-floor none; at least Redis's clock with clock */
  ck_assert_msg(harness_fence_follows(0, harness_json_int(r.json, "fence"), t0), "fence: %s", r.body);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), 5000);
  ck_assert_str_eq(harness_json_str(r.json, "owner"), "worker-1");
  harness_resp_free(&r);

  call("POST", "/v1/locks/inv/acquire", "{\"ttl_ms\":5000}", &r);
  expect_error(&r, 409, "lock_held");
  json_t *e = json_object_get(r.json, "error");
  int64_t retry = harness_json_int(e, "retry_after_ms");
  ck_assert_msg(retry > 0 && retry <= 5000, "retry_after_ms %lld", (long long)retry);
  ck_assert_str_eq(harness_json_str(e, "owner"), "worker-1");
  ck_assert_int_eq(atoi(r.retry_after), (int)((retry + 999) / 1000));
  harness_resp_free(&r);
}
END_TEST

START_TEST(renew_keeps_fence) {
  char lease[33];
  int64_t f = acquire_ok("renew-me", "{\"ttl_ms\":1000}", lease);
  harness_resp r;
  char body[100];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", lease);
  call("POST", "/v1/locks/renew-me/renew", body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), f);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), 60000);
  ck_assert_str_eq(harness_json_str(r.json, "lock"), "renew-me");
  harness_resp_free(&r);
  ck_assert_msg(lock_ttl_ms("renew-me") > 50000, "the renewal's TTL is not in the store");
  /* renewals of one lease at once (a keeper's retry beside its first
   * try): every one takes, on etcd too, where each is a guarded write */
  ck_assert_int_eq(calls_at_once_ok("/v1/locks/renew-me/renew", body, 8, 4), 32);
  /* renew without ttl_ms uses the default (30 s) */
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  call("POST", "/v1/locks/renew-me/renew", body, &r);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), 30000);
  harness_resp_free(&r);
}
END_TEST

START_TEST(wrong_lease_is_lost_and_changes_nothing) {
  char lease[33];
  int64_t f = acquire_ok("mine", "{\"ttl_ms\":60000,\"owner\":\"a\"}", lease);
  const char *other = "0123456789abcdef0123456789abcdef";
  harness_resp r;
  ck_assert_int_eq(lock_call("mine", "release", other, &r), 409);
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("mine", "renew", other, &r), 409);
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  /* the holder's lock is intact */
  call("GET", "/v1/locks/mine", NULL, &r);
  ck_assert(json_is_true(json_object_get(r.json, "held")));
  ck_assert_int_eq(harness_json_int(r.json, "fence"), f);
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("mine", "renew", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("mine", "release", lease, &r), 200);
  ck_assert(json_is_true(json_object_get(r.json, "released")));
  harness_resp_free(&r);
  /* a second release of the same lease is lost: it no longer holds */
  ck_assert_int_eq(lock_call("mine", "release", lease, &r), 409);
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
}
END_TEST

START_TEST(expiry_lets_next_in_with_higher_fence) {
  char lease[33];
  int64_t f1 = acquire_ok("short", "{\"ttl_ms\":150}", lease);
  /* 150 ms on Redis; on etcd whole seconds, at least its minimum, and
   * deleted by the leader's next expiry sweep */
  int64_t until = harness_now_ms() + 5000;
  while (lock_ttl_ms("short") > 0 && harness_now_ms() < until) harness_sleep_ms(50);
  harness_resp r;
  ck_assert_int_eq(lock_call("short", "renew", lease, &r), 409);
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  int64_t f2 = acquire_ok("short", "{\"ttl_ms\":5000}", NULL);
  ck_assert_int_gt(f2, f1);
  /* the last fence outlives the lease */
  call("GET", "/v1/locks/short", NULL, &r);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), f2);
  harness_resp_free(&r);
}
END_TEST

START_TEST(idempotent_reacquire_with_client_lease) {
  const char *L = "aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbb";
  char body[120], lease[33];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":2000}", L);
  int64_t f1 = acquire_ok("idem", body, lease);
  ck_assert_str_eq(lease, L);
  /* a retry after a lost reply: same grant, same fence, TTL refreshed */
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", L);
  int64_t f2 = acquire_ok("idem", body, NULL);
  ck_assert_int_eq(f2, f1);
  ck_assert_int_gt(lock_ttl_ms("idem"), 50000);
  harness_resp r;
  call("POST", "/v1/locks/idem/acquire", "{}", &r);
  expect_error(&r, 409, "lock_held");
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("idem", "release", L, &r), 200);
  harness_resp_free(&r);
  /* after release the same id is a new grant with a higher fence */
  int64_t f3 = acquire_ok("idem", body, NULL);
  ck_assert_int_gt(f3, f1);
}
END_TEST

START_TEST(get_never_shows_lease) {
  char lease[33];
  int64_t f = acquire_ok("secret", "{\"ttl_ms\":60000,\"owner\":\"svc\"}", lease);
  harness_resp r;
  call("GET", "/v1/locks/secret", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_null(strstr(r.body, lease));
  ck_assert_ptr_null(json_object_get(r.json, "lease"));
  ck_assert(json_is_true(json_object_get(r.json, "held")));
  ck_assert_int_eq(harness_json_int(r.json, "fence"), f);
  ck_assert_str_eq(harness_json_str(r.json, "owner"), "svc");
  int64_t ttl = harness_json_int(r.json, "ttl_ms");
  ck_assert(ttl > 0 && ttl <= 60000);
  harness_resp_free(&r);
  /* picketd's log never holds a whole lease id either */
  ck_assert_int_eq(lock_call("secret", "renew", "ffffffffffffffffffffffffffffffff", &r), 409);
  harness_resp_free(&r);
  call("GET", "/v1/locks/never-taken", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert(json_is_false(json_object_get(r.json, "held")));
  ck_assert_int_eq(harness_json_int(r.json, "fence"), 0);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), 0);
  ck_assert(json_is_null(json_object_get(r.json, "owner")));
  harness_resp_free(&r);
  call("HEAD", "/v1/locks/never-taken", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "grep -c -e %s -e ffffffffffffffffffffffffffffffff %s > /dev/null",
           lease, harness_picketd_log(P));
  ck_assert_msg(system(cmd) != 0, "a whole lease id was logged");
}
END_TEST

typedef struct {
  const char *method, *path, *body;
  long status;
  const char *code;
} bad_case;

START_TEST(bad_input_is_rejected_and_changes_nothing) {
  static char big[9000], long_name[260], long_owner[200];
  memset(big, ' ', sizeof big - 1);
  big[0] = '{';
  big[sizeof big - 2] = '}';
  snprintf(long_name, sizeof long_name, "/v1/locks/%0201d/acquire", 0);
  snprintf(long_owner, sizeof long_owner, "{\"owner\":\"%0129d\"}", 0);
  const bad_case cases[] = {
      {"POST", "/v1/locks/bad/acquire", "{", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "[]", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "\"x\"", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":\"5000\"}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":5000.0}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":1e3}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":0}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":-5}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":3600001}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":99999999999999999999}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":true}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"wait_ms\":-1}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"wait_ms\":60001}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"owner\":5}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"owner\":\"a\\u0001b\"}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", long_owner, 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"lease\":\"ABCDEF0123456789ABCDEF0123456789\"}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"lease\":\"abc\"}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"lease\":7}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"surprise\":1}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{\"ttl_ms\":1000,\"ttl_ms\":2000}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", "{} trailing", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/acquire", big, 413, "body_too_large"},
      {"POST", "/v1/locks/bad/renew", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/renew", "{\"lease\":\"0123456789abcdef0123456789abcdeg\"}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/renew", "{\"lease\":\"0123456789abcdef0123456789abcdef\",\"ttl_ms\":0}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/release", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/release", "{\"lease\":null}", 400, "invalid_argument"},
      {"POST", "/v1/locks/ba{d}/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/bad%7Bx%7D/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/ba%2Fd/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/ba%00d/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/b%20ad/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/b/ad/acquire", "{}", 404, "not_found"}, /* no template has it */
      {"POST", "/v1/locks//acquire", "{}", 404, "not_found"},
      {"POST", "/v1/locks/a%/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/a%3/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/a%zz/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/a%253Ab/acquire", "{}", 400, "invalid_argument"}, /* decoded once: "a%3Ab" */
      {"POST", "/v1/locks/a%7Fb/acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/./acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/../acquire", "{}", 400, "invalid_argument"},
      {"POST", "/v1/locks/%2E%2e/acquire", "{}", 400, "invalid_argument"},
      {"GET", "/v1/locks/.", NULL, 400, "invalid_argument"},
      {"POST", long_name, "{}", 400, "invalid_argument"},
      {"GET", "/v1/locks/ba*d", NULL, 400, "invalid_argument"},
      {"POST", "/v1/locks/bad/frobnicate", "{}", 404, "not_found"},
      {"GET", "/v2/locks/bad", NULL, 404, "not_found"},
      {"GET", "/", NULL, 404, "not_found"},
      {"GET", "/v1/locks/", NULL, 404, "not_found"},
      {"GET", "/v1/locks/bad/acquire", NULL, 405, "method_not_allowed"},
      {"PUT", "/v1/locks/bad/release", "{}", 405, "method_not_allowed"},
      {"POST", "/v1/locks/bad", "{}", 405, "method_not_allowed"},
      {"DELETE", "/v1/locks/bad", NULL, 405, "method_not_allowed"},
      {"POST", "/healthz", "{}", 405, "method_not_allowed"},
      {"POST", "/metrics", "{}", 405, "method_not_allowed"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    harness_resp r;
    call(cases[i].method, cases[i].path, cases[i].body, &r);
    ck_assert_msg(r.status == cases[i].status && harness_error_code(&r) &&
                      strcmp(harness_error_code(&r), cases[i].code) == 0,
                  "case %zu: %s %s %.60s -> %ld %s (want %ld %s)", i, cases[i].method,
                  cases[i].path, cases[i].body ? cases[i].body : "", r.status, r.body,
                  cases[i].status, cases[i].code);
    if (r.status == 405) {
      ck_assert_msg(r.allow[0], "405 without Allow");
      ck_assert_str_eq(r.allow, strstr(cases[i].path, "acquire") || strstr(cases[i].path, "release")
                                    ? "POST" : "GET, HEAD");
    }
    harness_resp_free(&r);
  }
  /* nothing was written: no key at all in Redis */
  redisReply *n = harness_redis_cmd(R, "DBSIZE");
  ck_assert_int_eq(n->integer, 0);
  freeReplyObject(n);
}
END_TEST

START_TEST(edge_values_accepted) {
  char path[300];
  snprintf(path, sizeof path, "%0200d", 7); /* a 200-byte name */
  acquire_ok(path, "{\"ttl_ms\":3600000}", NULL);
  acquire_ok("A-z.0_9:x", "{\"ttl_ms\":1,\"owner\":null}", NULL);
  acquire_ok("empty-body", "", NULL);
  acquire_ok("ws-body", " \n ", NULL);
  acquire_ok("owner-empty", "{\"owner\":\"\"}", NULL);
  acquire_ok("owner-utf8", "{\"owner\":\"s\xc3\xa9" "bastien \xe6\x9c\xba\"}", NULL);
  harness_resp r;
  /* an owner with JSON's special characters comes back intact */
  call("POST", "/v1/locks/owner-quote/acquire", "{\"owner\":\"a \\\"q\\\" b\\\\c /\"}", &r);
  ck_assert_msg(r.status == 200 && r.json, "%ld %s", r.status, r.body);
  ck_assert_str_eq(harness_json_str(r.json, "owner"), "a \"q\" b\\c /");
  harness_resp_free(&r);
  call("GET", "/v1/locks/owner-empty", NULL, &r);
  ck_assert(json_is_null(json_object_get(r.json, "owner")));
  harness_resp_free(&r);
}
END_TEST

/* What generated clients send: a path parameter percent-encoded (RFC 6570),
 * so the spec's own example name arrives with ':' as "%3A". It is the same
 * lock as the literal name, decoded exactly once. */
START_TEST(percent_encoded_names_are_the_same_lock) {
  char lease[33];
  int64_t fence = acquire_ok("billing.nightly%3Aeu-west-1", "{\"ttl_ms\":5000}", lease);
  harness_resp r;
  call("GET", "/v1/locks/billing.nightly:eu-west-1", NULL, &r);
  ck_assert_msg(r.status == 200 && json_is_true(json_object_get(r.json, "held")), "%s", r.body);
  ck_assert_str_eq(harness_json_str(r.json, "lock"), "billing.nightly:eu-west-1");
  ck_assert_int_eq(harness_json_int(r.json, "fence"), fence);
  harness_resp_free(&r);
  /* lower-case hex, and letters encoded that need not be */
  call("POST", "/v1/locks/billing.nightly%3aeu-west-1/acquire", "{}", &r);
  expect_error(&r, 409, "lock_held");
  harness_resp_free(&r);
  char body[80];
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  call("POST", "/v1/locks/%62illing.nightly:eu-west-1/renew", body, &r);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
  ck_assert_str_eq(harness_json_str(r.json, "lock"), "billing.nightly:eu-west-1");
  harness_resp_free(&r);
  call("POST", "/v1/locks/billing.nightly:eu-west-1/release", body, &r);
  ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
  harness_resp_free(&r);
  /* one lock, under the decoded name */
  call("GET", "/v1/locks/billing.nightly:eu-west-1", NULL, &r);
  ck_assert_int_gt(harness_json_int(r.json, "fence"), 0);
  harness_resp_free(&r);
  /* "..." is no dot-segment: a name like any other */
  acquire_ok("...", "{}", NULL);
}
END_TEST

/* owner's maxLength counts characters, as JSON Schema does: 128 of them is
 * fine however many bytes they take, 129 is not. */
START_TEST(owner_limit_counts_characters) {
  char body[1024] = "{\"owner\":\"";
  for (int i = 0; i < 128; i++) strcat(body, "\xf0\x9f\x94\x92"); /* U+1F512, 4 bytes */
  strcat(body, "\"}");
  acquire_ok("owner-wide", body, NULL);
  harness_resp r;
  call("GET", "/v1/locks/owner-wide", NULL, &r);
  ck_assert_int_eq(strlen(harness_json_str(r.json, "owner")), 512);
  harness_resp_free(&r);
  call("POST", "/v1/locks/owner-wide/acquire", "{}", &r);
  expect_error(&r, 409, "lock_held");
  ck_assert_int_eq(strlen(harness_json_str(json_object_get(r.json, "error"), "owner")), 512);
  harness_resp_free(&r);
  body[strlen(body) - 2] = '\0';
  strcat(body, "x\"}");
  call("POST", "/v1/locks/owner-wide2/acquire", body, &r);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
}
END_TEST

START_TEST(wrong_type_keys_are_502) {
  redisReply *x = harness_redis_cmd(R, "SET picket:{wt}:lease oops");
  freeReplyObject(x);
  harness_resp r;
  call("POST", "/v1/locks/wt/acquire", "{}", &r);
  expect_error(&r, 502, "store_error");
  ck_assert_msg(strstr(r.body, "WRONGTYPE"), "%s", r.body);
  harness_resp_free(&r);
  call("GET", "/v1/locks/wt", NULL, &r);
  expect_error(&r, 502, "store_error");
  harness_resp_free(&r);
  /* a broken fence counter: no grant, and no lease written */
  x = harness_redis_cmd(R, "HSET picket:{wt2}:fence a b");
  freeReplyObject(x);
  call("POST", "/v1/locks/wt2/acquire", "{}", &r);
  expect_error(&r, 502, "store_error");
  harness_resp_free(&r);
  x = harness_redis_cmd(R, "EXISTS picket:{wt2}:lease");
  ck_assert_int_eq(x->integer, 0);
  freeReplyObject(x);
}
END_TEST

/* Sends raw bytes (NULs and all) and returns the status of the reply. */
static int raw_status(const char *req, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(harness_picketd_port(P)),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(write(fd, req, len), (ssize_t)len);
  char buf[512] = "";
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  int status = 0;
  if (n > 12) sscanf(buf, "HTTP/1.1 %d", &status);
  return status;
}

START_TEST(nul_in_target_is_400_never_another_lock) {
  static const char acq[] = "POST /v1/locks/nul/acquire\0junk HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n";
  ck_assert_int_eq(raw_status(acq, sizeof acq - 1), 400);
  static const char get[] = "GET /v1/locks/nul\0x HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ck_assert_int_eq(raw_status(get, sizeof get - 1), 400);
  /* a query string is no NUL: served (picketd ignores queries) */
  static const char q[] = "GET /v1/locks/nul?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ck_assert_int_eq(raw_status(q, sizeof q - 1), 200);
  harness_resp r;
  call("GET", "/v1/locks/nul", NULL, &r);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), 0); /* never granted */
  harness_resp_free(&r);
}
END_TEST

START_TEST(service_endpoints) {
  harness_resp r;
  call("GET", "/healthz", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(harness_json_str(r.json, "status"), "ok");
  harness_resp_free(&r);
  call("GET", "/readyz", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(harness_json_str(r.json, "status"), "ready");
  ck_assert_int_eq(harness_json_int(r.json, "replicas"), 0);
  harness_resp_free(&r);
  call("GET", "/v1/openapi.yaml", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/yaml");
  ck_assert_msg(strstr(r.body, "\nopenapi: 3"), "%.80s", r.body);
  harness_resp_free(&r);

  char lease[33];
  acquire_ok("metered", "{}", lease);
  ck_assert_int_eq(lock_call("metered", "renew", "00000000000000000000000000000000", &r), 409);
  harness_resp_free(&r);
  call("GET", "/metrics", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_msg(strncmp(r.content_type, "text/plain", 10) == 0, "%s", r.content_type);
  const char *want[] = {"picket_acquire_total{outcome=\"granted\"} ",
                        "picket_renew_total{outcome=\"lease_lost\"} ",
                        "picket_http_requests_total{endpoint=\"renew\",status=\"409\"} ",
                        "picket_store_up 1\n",
                        "picket_request_duration_seconds_bucket{le=\"+Inf\"}",
                        "# TYPE picket_request_duration_seconds histogram\n"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *at = strstr(r.body, want[i]);
    ck_assert_msg(at, "metrics lack %s", want[i]);
    if (want[i][strlen(want[i]) - 1] == ' ') /* a counter: it has counted */
      ck_assert_msg(atol(at + strlen(want[i])) >= 1, "%s is 0", want[i]);
  }
  harness_resp_free(&r);
}
END_TEST

/* A token's max_leases (--auth-file), kept by the store in the lock call
 * itself: at the limit a new grant is 429 too_many_leases and nothing is
 * written; a retry of a lease it holds is never refused; a release makes
 * room. */
static long as_token(harness_picketd *p, const char *path, const char *body, harness_resp *r) {
  const char *h[] = {"Authorization: Bearer quota-test-token-1", NULL};
  ck_assert_int_eq(harness_http_h(harness_picketd_url(p), "POST", path, body, h, r), 0);
  return r->status;
}

START_TEST(quota_max_leases) {
  char hash[80] = "", auth[300], file[512];
  FILE *sh = popen("printf %s quota-test-token-1 | sha256sum | cut -c1-64", "r");
  ck_assert_ptr_nonnull(sh);
  ck_assert_ptr_nonnull(fgets(hash, sizeof hash, sh));
  pclose(sh);
  hash[strcspn(hash, "\n")] = '\0';
  snprintf(auth, sizeof auth, "quota sha256:%s * lock,read max_leases=2\n", hash);
  ck_assert_int_eq(harness_write_tmpfile(file, sizeof file, "auth", auth), 0);
  const char *args[] = {"--auth-file", file, NULL};
  harness_picketd *q = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(q);
  harness_resp r;
  const char *L = "abcdefabcdefabcdefabcdefabcdef01";
  char body[120];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", L);
  ck_assert_int_eq(as_token(q, "/v1/locks/qa/acquire", body, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(as_token(q, "/v1/locks/qb/acquire", "{\"ttl_ms\":60000}", &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(as_token(q, "/v1/locks/qc/acquire", "{\"ttl_ms\":60000}", &r), 429);
  ck_assert_str_eq(harness_error_code(&r), "too_many_leases");
  harness_resp_free(&r);
  call("GET", "/v1/locks/qc", NULL, &r);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), 0); /* nothing written */
  harness_resp_free(&r);
  /* a retry of a lease it holds: granted again, not counted twice */
  ck_assert_int_eq(as_token(q, "/v1/locks/qa/acquire", body, &r), 200);
  harness_resp_free(&r);
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", L);
  ck_assert_int_eq(as_token(q, "/v1/locks/qa/release", body, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(as_token(q, "/v1/locks/qc/acquire", "{\"ttl_ms\":60000}", &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(as_token(q, "/v1/locks/qd/acquire", "{\"ttl_ms\":60000}", &r), 429);
  harness_resp_free(&r);
  harness_picketd_free(q);
  unlink(file); /* (it was left in /tmp, a run at a time) */
}
END_TEST

START_TEST(sigterm_exits_cleanly) {
  harness_picketd *p2 = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_ptr_nonnull(p2);
  ck_assert_int_eq(harness_picketd_stop(p2, SIGTERM), 0);
  harness_picketd_free(p2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("api");
  TCase *tc = tcase_create("api");
  tcase_add_unchecked_fixture(tc, setup_default, stop_both);
  tcase_add_test(tc, grant_then_held);
  tcase_add_test(tc, renew_keeps_fence);
  tcase_add_test(tc, wrong_lease_is_lost_and_changes_nothing);
  tcase_add_test(tc, expiry_lets_next_in_with_higher_fence);
  tcase_add_test(tc, idempotent_reacquire_with_client_lease);
  tcase_add_test(tc, get_never_shows_lease);
  tcase_add_test(tc, edge_values_accepted);
  tcase_add_test(tc, percent_encoded_names_are_the_same_lock);
  tcase_add_test(tc, owner_limit_counts_characters);
  REDIS_CASE(tc, wrong_type_keys_are_502);
  tcase_add_test(tc, service_endpoints);
  tcase_add_test(tc, nul_in_target_is_400_never_another_lock);
  tcase_add_test(tc, sigterm_exits_cleanly);
  tcase_add_test(tc, quota_max_leases);
  suite_add_tcase(s, tc);
  /* bad input gets its own Redis, so "nothing was written" means nothing */
  TCase *bad = tcase_create("bad_input");
  tcase_add_unchecked_fixture(bad, setup_default, stop_both);
  tcase_add_test(bad, bad_input_is_rejected_and_changes_nothing);
  suite_add_tcase(s, bad);
  return harness_run_suite(s);
}
