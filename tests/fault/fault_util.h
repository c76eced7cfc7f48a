/* fault_util.h: small helpers shared by the fault suites (tests/fault):
 * one lock call against a given picketd that returns what the fault tests
 * look at (status, error code, fence, lease, time taken), a random
 * client-chosen lease id, and a child-process liveness check. Header-only
 * (static inline) so each suite stays one .c file. */
#ifndef PICKET_FAULT_UTIL_H
#define PICKET_FAULT_UTIL_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The outcome of one lock call, copied out of the reply so the caller
 * frees nothing. status 0 means a transport error (no HTTP reply). */
typedef struct {
  long status;
  char code[40];   /* error code, "" on success */
  int64_t fence;   /* -1 when the reply has none */
  char lease[33];  /* acquire only */
  int held;        /* GET only: 1 or 0; -1 when the reply has none */
  int64_t t0, t1;  /* monotonic ms: request sent, reply received */
} fault_call;

/* POST /v1/locks/NAME/ACTION with `body` (or GET when action is NULL)
 * against base; fills *out and returns out->status. */
static inline long fault_lock(const char *base, const char *name, const char *action,
                              const char *body, fault_call *out) {
  char path[300];
  harness_resp r;
  memset(out, 0, sizeof *out);
  out->fence = -1;
  out->held = -1;
  if (action)
    snprintf(path, sizeof path, "/v1/locks/%s/%s", name, action);
  else
    snprintf(path, sizeof path, "/v1/locks/%s", name);
  out->t0 = harness_now_ms();
  int rc = harness_http(base, action ? "POST" : "GET", path, body, &r);
  out->t1 = harness_now_ms();
  out->status = rc == 0 ? r.status : 0;
  if (rc == 0) {
    out->fence = harness_json_int(r.json, "fence");
    json_t *held = json_object_get(r.json, "held");
    if (json_is_boolean(held)) out->held = json_is_true(held);
    const char *code = harness_error_code(&r);
    const char *lease = harness_json_str(r.json, "lease");
    if (code) snprintf(out->code, sizeof out->code, "%s", code);
    if (lease) snprintf(out->lease, sizeof out->lease, "%s", lease);
  }
  harness_resp_free(&r);
  return out->status;
}

/* acquire with ttl_ms and, when lease is not NULL, a client-chosen lease id
 * (so a retry after a lost reply is idempotent). */
static inline long fault_acquire(const char *base, const char *name, int64_t ttl_ms,
                                 const char *lease, fault_call *out) {
  char body[120];
  if (lease)
    snprintf(body, sizeof body, "{\"ttl_ms\":%lld,\"lease\":\"%s\"}", (long long)ttl_ms, lease);
  else
    snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)ttl_ms);
  return fault_lock(base, name, "acquire", body, out);
}

/* renew or release (action) of `lease`. */
static inline long fault_lease_call(const char *base, const char *name, const char *action,
                                    const char *lease, fault_call *out) {
  char body[200];
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  return fault_lock(base, name, action, body, out);
}

/* 32 lowercase hex from /dev/urandom into out[33]: 0, or -1 when
 * urandom fails. No Check assert, so load threads may call it. */
static inline int fault_random_lease(char out[33]) {
  unsigned char b[16] = {0};
  int fd = open("/dev/urandom", O_RDONLY);
  int ok = fd >= 0 && read(fd, b, sizeof b) == (ssize_t)sizeof b;
  if (fd >= 0) close(fd);
  if (!ok) return -1;
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

/* fault_random_lease, asserting (Check) that urandom answered. */
static inline void fault_lease_id(char out[33]) {
  ck_assert_msg(fault_random_lease(out) == 0, "urandom");
}

/* 1 while our child `pid` runs (not exited, not reaped). */
static inline int fault_child_alive(pid_t pid) {
  int st;
  return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
}

/* Sends SIGSTOP to pid and waits (up to 5 s) until it has really stopped:
 * a process stops only when next scheduled, which on a busy machine can
 * take a while. Asserts. */
static inline void fault_stop_process(pid_t pid) {
  kill(pid, SIGSTOP);
  char path[64], stat[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  for (int i = 0; i < 500; i++) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f) fclose(f);
    stat[n] = '\0';
    const char *end = strrchr(stat, ')'); /* the state follows "(comm) " */
    if (end && end[1] == ' ' && end[2] == 'T') return;
    harness_sleep_ms(10);
  }
  ck_abort_msg("process %d did not stop", (int)pid);
}

/* 1 when file `log` contains `text` (fixed string). */
static inline int fault_log_has(const char *log, const char *text) {
  FILE *f = fopen(log, "r");
  if (f == NULL) return 0;
  char line[2048];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  fclose(f);
  return found;
}

/* A field of INFO replication as an integer, -1 when absent. */
static inline long long fault_info_int(harness_redis *r, const char *field) {
  redisReply *x = harness_redis_cmd(r, "INFO replication");
  long long v = -1;
  if (x && x->type == REDIS_REPLY_STRING) {
    char key[64];
    snprintf(key, sizeof key, "\n%s:", field);
    const char *at = strstr(x->str, key);
    if (at) v = atoll(at + strlen(key));
  }
  if (x) freeReplyObject(x);
  return v;
}

/* A new redis-server replicating `primary` (which listens on TCP); asserts. */
static inline harness_redis *fault_replica_start(harness_redis *primary) {
  char conf[100];
  snprintf(conf, sizeof conf, "replicaof 127.0.0.1 %d", harness_redis_port(primary));
  harness_redis_opts ro = {.extra_conf = conf};
  harness_redis *replica = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(replica);
  return replica;
}

/* Waits (up to 15 s) until `n` replicas acknowledge a write to `primary`:
 * a replica that says its link is up, or that the primary lists as online,
 * may still not be streaming (Redis 7 starts at the replica's first
 * REPLCONF ACK, sent once a second). Returns the ms it took; asserts. */
static inline int64_t fault_wait_replicating(harness_redis *primary, int n) {
  int64_t t0 = harness_now_ms();
  redisContext *c = harness_redis_connect(primary);
  ck_assert_ptr_nonnull(c);
  long long acked = 0;
  while (acked < n && harness_now_ms() - t0 < 15000) {
    redisReply *x = redisCommand(c, "INCR fault:probe");
    if (x) freeReplyObject(x);
    x = redisCommand(c, "WAIT %d 100", n);
    acked = x && x->type == REDIS_REPLY_INTEGER ? x->integer : 0;
    if (x) freeReplyObject(x);
    if (acked < n) harness_sleep_ms(20);
  }
  redisFree(c);
  ck_assert_msg(acked >= n, "only %lld of %d replicas acknowledge writes", acked, n);
  return harness_now_ms() - t0;
}

/* Runs the suite made of one case per test (so each gets its own fork and
 * timeout) and returns main's exit status. */
static inline int fault_run(const char *suite, const TTest *const *tests, int n) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* the figures show even when a test fails */
  Suite *s = suite_create(suite);
  for (int i = 0; i < n; i++) {
    TCase *tc = tcase_create(tests[i]->name);
    tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
  }
  return harness_run_suite(s);
}

#endif
