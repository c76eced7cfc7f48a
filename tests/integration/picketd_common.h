/* Shared helpers for the picketd integration suites: one Redis and one
 * picketd per test case (unchecked fixtures), and short HTTP calls. */
#ifndef PICKETD_TEST_COMMON_H
#define PICKETD_TEST_COMMON_H

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Adds a case that reads or changes Redis itself (its keys, its config, a
 * Redis-only flag): left out when the suite runs on etcd
 * (PICKET_TEST_BACKEND=etcd, tests/integration/picketd_etcd.cmake). */
#define REDIS_CASE(tc, fn)                         \
  do {                                             \
    if (!harness_backend_etcd()) tcase_add_test(tc, fn); \
  } while (0)

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

/* What GET says is left of lock `name`'s lease: its ttl_ms, 0 when free. */
static inline int64_t lock_ttl_ms(const char *name) {
  char path[512];
  harness_resp r;
  snprintf(path, sizeof path, "/v1/locks/%s", name);
  call("GET", path, NULL, &r);
  ck_assert_msg(r.status == 200, "GET %s: %ld %s", name, r.status, r.body);
  int64_t ttl = json_is_true(json_object_get(r.json, "held")) ? harness_json_int(r.json, "ttl_ms") : 0;
  harness_resp_free(&r);
  return ttl;
}

static inline long lock_call(const char *name, const char *action, const char *lease, harness_resp *r) {
  char path[512], body[100];
  snprintf(path, sizeof path, "/v1/locks/%s/%s", name, action);
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  call("POST", path, body, r);
  return r->status;
}

/* A call to /v1/{family}/{name}[/{action}] (family "locks", "semaphores",
 * "rwlocks"); the caller frees the reply. */
static inline harness_resp family_call(const char *family, const char *method, const char *name,
                                       const char *action, const char *body) {
  char path[512];
  harness_resp r;
  snprintf(path, sizeof path, "/v1/%s/%s%s%s", family, name, action ? "/" : "",
           action ? action : "");
  call(method, path, body, &r);
  return r;
}

/* The same call sent by n threads at once, `rounds` times over: how many
 * answered 200. Renewals of one lease at once must all take, as Redis
 * takes them (a keeper whose renewal timed out on its side sends another
 * while the first still runs): none may say the lease was lost. */
typedef struct {
  const char *path, *body;
  long status;
} at_once_call;

static inline void *at_once_main(void *arg) {
  at_once_call *a = arg;
  harness_resp r;
  a->status = harness_http(harness_picketd_url(P), "POST", a->path, a->body, &r) == 0 ? r.status : -1;
  if (a->status >= 0) harness_resp_free(&r);
  return NULL;
}

static inline int calls_at_once_ok(const char *path, const char *body, int n, int rounds) {
  at_once_call a[16];
  pthread_t th[16];
  int ok = 0;
  ck_assert(n <= 16);
  for (int round = 0; round < rounds; round++) {
    for (int i = 0; i < n; i++) {
      a[i] = (at_once_call){path, body, 0};
      ck_assert_int_eq(pthread_create(&th[i], NULL, at_once_main, &a[i]), 0);
    }
    for (int i = 0; i < n; i++) {
      pthread_join(th[i], NULL);
      ok += a[i].status == 200;
    }
  }
  return ok;
}

/* Releases lease of family's name: the status. */
static inline long family_release(const char *family, const char *name, const char *lease) {
  char body[80];
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  harness_resp r = family_call(family, "POST", name, "release", body);
  long st = r.status;
  harness_resp_free(&r);
  return st;
}

/* POST path with body must be 400 invalid_argument naming `field`. */
static inline void expect_bad_field(const char *path, const char *body, const char *field) {
  harness_resp r;
  call("POST", path, body, &r);
  expect_error(&r, 400, "invalid_argument");
  const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
  ck_assert_msg(msg && strstr(msg, field), "%s %s: message does not name %s: %s", path, body,
                field, r.body);
  harness_resp_free(&r);
}

/* A POST made in a thread of its own (a waiting acquire): bg_post_start,
 * then bg_post_join; r and done_ms are its reply and when it came. */
typedef struct {
  char path[256];
  const char *body;
  harness_resp r;
  int64_t done_ms;
  pthread_t t;
} bg_post;

static inline void *bg_post_main(void *arg) {
  bg_post *b = arg;
  harness_http(harness_picketd_url(P), "POST", b->path, b->body, &b->r);
  b->done_ms = harness_now_ms();
  return NULL;
}

static inline void bg_post_start(bg_post *b, const char *path, const char *body) {
  snprintf(b->path, sizeof b->path, "%s", path);
  b->body = body;
  ck_assert_int_eq(pthread_create(&b->t, NULL, bg_post_main, b), 0);
}

static inline void bg_post_join(bg_post *b) { pthread_join(b->t, NULL); }

/* A real fenced-kv on a loopback port, its db in a temp dir (one per test
 * process): fkv_start, fkv_put (PUT /kv/KEY under lock `lock` with `fence`:
 * the status), fkv_stop. */
static char fkv_dir[256], fkv_url[64];
static pid_t fkv_pid;

static inline void fkv_start(void) {
  ck_assert_int_eq(harness_make_tmpdir(fkv_dir, sizeof fkv_dir, "fkv"), 0);
  char db[300], pf[300], log[300], bin[1024];
  snprintf(db, sizeof db, "%s/kv.db", fkv_dir);
  snprintf(pf, sizeof pf, "%s/port", fkv_dir);
  snprintf(log, sizeof log, "%s/kv.log", fkv_dir);
  const char *dir = getenv("PICKET_BIN_DIR");
  snprintf(bin, sizeof bin, "%s/fenced-kv", dir ? dir : "build/bin");
  char *argv[] = {bin, "--db", db, "--listen", "127.0.0.1:0", "--port-file", pf, NULL};
  fkv_pid = harness_spawn(argv, log);
  ck_assert_int_gt(fkv_pid, 0);
  for (int i = 0; i < 500 && fkv_url[0] == '\0'; i++) {
    FILE *f = fopen(pf, "r");
    int port = 0;
    if (f) {
      if (fscanf(f, "%d", &port) != 1) port = 0;
      fclose(f);
    }
    if (port > 0) snprintf(fkv_url, sizeof fkv_url, "http://127.0.0.1:%d", port);
    else harness_sleep_ms(10);
  }
  ck_assert_msg(fkv_url[0], "fenced-kv did not start");
}

static inline long fkv_put(const char *key, const char *lock, int64_t fence, const char *value) {
  char path[128], h1[260], h2[64];
  snprintf(path, sizeof path, "/kv/%s", key);
  snprintf(h1, sizeof h1, "Picket-Lock: %s", lock);
  snprintf(h2, sizeof h2, "Picket-Fence: %lld", (long long)fence);
  const char *headers[] = {h1, h2, NULL};
  harness_resp r;
  ck_assert_int_eq(harness_http_h(fkv_url, "PUT", path, value, headers, &r), 0);
  long st = r.status;
  harness_resp_free(&r);
  return st;
}

static inline void fkv_stop(void) {
  kill(fkv_pid, SIGKILL);
  harness_rm_rf(fkv_dir);
}

#endif
