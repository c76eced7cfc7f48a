/* Shared helpers for the picketd integration suites: one Redis and one
 * picketd per test case (unchecked fixtures), and short HTTP calls. */
#ifndef PICKETD_TEST_COMMON_H
#define PICKETD_TEST_COMMON_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static harness_redis *R;
static harness_picketd *P;

static inline void start_both(const harness_redis_opts *ro, const char *const *args) {
  R = harness_redis_start(ro);
  ck_assert_msg(R != NULL, "redis-server did not start");
  P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_msg(P != NULL, "picketd did not start");
}

static inline void stop_both(void) {
  harness_picketd_free(P);
  harness_redis_free(R);
  P = NULL;
  R = NULL;
}

static inline void setup_default(void) { start_both(NULL, NULL); }

/* POST/GET against the fixture's picketd; asserts the exchange happened. */
static inline void call(const char *method, const char *path, const char *body, harness_resp *r) {
  ck_assert_msg(harness_http(harness_picketd_url(P), method, path, body, r) == 0,
                "%s %s: transport error", method, path);
}

static inline void expect_error(harness_resp *r, long status, const char *code) {
  ck_assert_msg(r->status == status, "expected %ld %s, got %ld: %s", status, code, r->status,
                r->body);
  ck_assert_ptr_nonnull(harness_error_code(r));
  ck_assert_str_eq(harness_error_code(r), code);
  ck_assert_str_eq(r->content_type, "application/json");
  const char *msg = json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
  ck_assert_msg(msg && *msg, "error without a message: %s", r->body);
}

/* Acquires `name`; returns the fence and copies the lease id into lease. */
static inline int64_t acquire_ok(const char *name, const char *body, char lease[33]) {
  char path[512];
  harness_resp r;
  snprintf(path, sizeof path, "/v1/locks/%s/acquire", name);
  call("POST", path, body, &r);
  ck_assert_msg(r.status == 200, "acquire %s: %ld %s", name, r.status, r.body);
  int64_t fence = harness_json_int(r.json, "fence");
  if (lease) snprintf(lease, 33, "%s", harness_json_str(r.json, "lease"));
  harness_resp_free(&r);
  return fence;
}

static inline long lock_call(const char *name, const char *action, const char *lease, harness_resp *r) {
  char path[512], body[100];
  snprintf(path, sizeof path, "/v1/locks/%s/%s", name, action);
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  call("POST", path, body, r);
  return r->status;
}

#endif
