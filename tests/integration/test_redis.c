/* Integration tests of picketd against Redis as it really behaves: many
 * concurrent clients on one lock (fences unique and rising), restarts with
 * and without the scripts cached, Redis down and back, an evicting
 * maxmemory-policy at startup and on reconnect. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "picketd_common.h"

#define CLIENTS 8
#define PER_CLIENT 130 /* 8 x 130 = 1,040 grants */

typedef struct {
  int64_t fences[PER_CLIENT];
  int n, errors;
  char why[256];
} client_run;

static void *client_main(void *arg) {
  client_run *c = arg;
  for (int i = 0; i < PER_CLIENT; i++) {
    harness_resp r;
    if (harness_http(harness_picketd_url(P), "POST", "/v1/locks/hot/acquire",
                     "{\"ttl_ms\":10000,\"wait_ms\":20000}", &r) < 0 || r.status != 200) {
      snprintf(c->why, sizeof c->why, "acquire: %ld %s", r.status, r.body);
      c->errors++;
      harness_resp_free(&r);
      continue;
    }
    c->fences[c->n++] = harness_json_int(r.json, "fence");
    char body[100];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", harness_json_str(r.json, "lease"));
    harness_resp_free(&r);
    if (harness_http(harness_picketd_url(P), "POST", "/v1/locks/hot/release", body, &r) < 0 ||
        r.status != 200) {
      snprintf(c->why, sizeof c->why, "release: %ld %s", r.status, r.body);
      c->errors++;
    }
    harness_resp_free(&r);
  }
  return NULL;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

START_TEST(concurrent_grants_have_unique_rising_fences) {
  static client_run runs[CLIENTS];
  pthread_t t[CLIENTS];
  int64_t t0 = harness_redis_time_us(R);
  for (int i = 0; i < CLIENTS; i++) pthread_create(&t[i], NULL, client_main, &runs[i]);
  for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL);
  int64_t t1 = harness_redis_time_us(R);
  static int64_t all[CLIENTS * PER_CLIENT];
  int n = 0;
  for (int i = 0; i < CLIENTS; i++) {
    ck_assert_msg(runs[i].errors == 0, "client %d: %d errors, last: %s", i, runs[i].errors,
                  runs[i].why);
    for (int j = 0; j < runs[i].n; j++) {
      if (j > 0) /* each client sees its own grants in rising order */
        ck_assert_int_gt(runs[i].fences[j], runs[i].fences[j - 1]);
      all[n++] = runs[i].fences[j];
    }
  }
  ck_assert_int_ge(n, 1000);
  qsort(all, (size_t)n, sizeof all[0], cmp64);
  if (!harness_fence_clock()) {
    /* no fence twice, and none skipped: exactly 1..n, one count per grant */
    for (int i = 0; i < n; i++) ck_assert_int_eq(all[i], i + 1);
    return;
  }
  /* clock: no fence twice, each at least Redis's clock before the first
   * grant, and none above its clock after the last (plus one per grant, in
   * case two grants met within one microsecond) */
  for (int i = 1; i < n; i++) ck_assert_int_gt(all[i], all[i - 1]);
  ck_assert_int_ge(all[0], t0);
  ck_assert_int_le(all[n - 1], t1 + n);
}
END_TEST

START_TEST(redis_restart_keeps_fences_rising) {
  int64_t before = 0;
  for (int i = 0; i < 3; i++) {
    char lease[33];
    before = acquire_ok("durable", "{\"ttl_ms\":100000}", lease);
    harness_resp r;
    lock_call("durable", "release", lease, &r);
    harness_resp_free(&r);
  }
  ck_assert_int_eq(harness_redis_restart(R), 0);
  /* first call after the restart: picketd notices the closed connection
   * and reconnects, no 503 */
  int64_t after = acquire_ok("durable", "{\"ttl_ms\":1000}", NULL);
  ck_assert_int_gt(after, before);

  /* the NOSCRIPT path: scripts flushed under a live connection */
  redisReply *x = harness_redis_cmd(R, "SCRIPT FLUSH");
  freeReplyObject(x);
  int64_t t0 = harness_redis_time_us(R);
  int64_t again = acquire_ok("durable2", "{}", NULL);
  ck_assert_msg(harness_fence_follows(0, again, t0), "first fence %lld", (long long)again);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "grep -q 'reloading' %s", harness_picketd_log(P));
  ck_assert_msg(system(cmd) == 0, "no NOSCRIPT reload was logged");
}
END_TEST

START_TEST(redis_down_is_503_and_recovers) {
  harness_redis_stop(R, SIGKILL);
  harness_resp r;
  for (int i = 0; i < 5; i++) {
    int64_t t0 = harness_now_ms();
    call("POST", "/v1/locks/down/acquire", "{}", &r);
    int64_t took = harness_now_ms() - t0;
    expect_error(&r, 503, "store_unavailable");
    ck_assert_msg(took < 3000 * harness_time_scale(), "a 503 took %lld ms", (long long)took); /* timeout is 1 s */
    harness_resp_free(&r);
  }
  call("GET", "/readyz", NULL, &r);
  expect_error(&r, 503, "store_unavailable");
  harness_resp_free(&r);
  call("GET", "/healthz", NULL, &r); /* the process itself still serves */
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);

  ck_assert_int_eq(harness_redis_restart(R), 0);
  int64_t t0 = harness_now_ms();
  long status = 0;
  while (harness_now_ms() - t0 < 5000 * harness_time_scale()) {
    call("POST", "/v1/locks/down/acquire", "{}", &r);
    status = r.status;
    harness_resp_free(&r);
    if (status == 200) break;
    harness_sleep_ms(20);
  }
  ck_assert_int_eq(status, 200);
  /* the contract says within 1 s; a noisy CI machine gets 3x margin */
  ck_assert_msg(harness_now_ms() - t0 < 3000 * harness_time_scale(), "recovery took %lld ms",
                (long long)(harness_now_ms() - t0));
  /* every worker thread is back, not just the one that reconnected first:
   * the others skip their reconnect backoff once Redis answers again */
  for (int i = 0; i < 20; i++) {
    call("GET", "/readyz", NULL, &r);
    ck_assert_msg(r.status == 200, "request %d after recovery: %ld %s", i, r.status, r.body);
    harness_resp_free(&r);
  }
}
END_TEST

START_TEST(redis_absent_at_startup) {
  harness_redis_stop(R, SIGKILL);
  harness_picketd *p2 = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_msg(p2 != NULL, "picketd must start without Redis");
  harness_resp r;
  ck_assert_int_eq(harness_http(harness_picketd_url(p2), "GET", "/readyz", NULL, &r), 0);
  expect_error(&r, 503, "store_unavailable");
  harness_resp_free(&r);
  ck_assert_int_eq(harness_redis_restart(R), 0);
  long status = 0;
  for (int i = 0; i < 250 * harness_time_scale() && status != 200; i++) {
    harness_http(harness_picketd_url(p2), "POST", "/v1/locks/late/acquire", "{}", &r);
    status = r.status;
    harness_resp_free(&r);
    if (status != 200) harness_sleep_ms(20);
  }
  ck_assert_int_eq(status, 200);
  harness_picketd_free(p2);
}
END_TEST

/* picketd against a Redis with `policy`; returns its exit status when it
 * exits within 5 s, or -1 when it keeps running (then it is stopped). */
static int start_with_policy(const char *policy, const char *const *args, char *log, size_t cap) {
  char conf[100];
  snprintf(conf, sizeof conf, "maxmemory-policy %s", policy);
  harness_redis_opts o = {.extra_conf = conf};
  harness_redis *r = harness_redis_start(&o);
  ck_assert_ptr_nonnull(r);
  harness_picketd *p = harness_picketd_start(harness_redis_url(r), args);
  int st = -1;
  if (p) {
    snprintf(log, cap, "%s", harness_picketd_log(p));
    st = -1;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s /tmp/picket-policy-log.%d", harness_picketd_log(p), getpid());
    ck_assert_int_eq(system(cmd), 0);
    snprintf(log, cap, "/tmp/picket-policy-log.%d", getpid());
    harness_picketd_free(p);
  } else {
    st = 1; /* harness prints picketd's log when it exits at start */
  }
  harness_redis_free(r);
  return st;
}

static int log_has(const char *log, const char *text) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "grep -q -- '%s' %s", text, log);
  return system(cmd) == 0;
}

START_TEST(evicting_policy_refused_at_startup) {
  char log[400] = "";
  ck_assert_int_eq(start_with_policy("allkeys-lru", NULL, log, sizeof log), 1);
  /* and the message says why, on stderr, with exit code 1 */
  char redis_conf[] = "maxmemory-policy allkeys-lru";
  harness_redis_opts o = {.extra_conf = redis_conf};
  harness_redis *r = harness_redis_start(&o);
  char cmd[800];
  snprintf(cmd, sizeof cmd,
           "%s/picketd --listen 127.0.0.1:0 --redis %s 2>&1 | grep -q 'maxmemory-policy is allkeys-lru'",
           getenv("PICKET_BIN_DIR"), harness_redis_url(r));
  ck_assert_int_eq(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/picketd --listen 127.0.0.1:0 --redis %s 2>/dev/null",
           getenv("PICKET_BIN_DIR"), harness_redis_url(r));
  int st = system(cmd);
  ck_assert_int_eq(WEXITSTATUS(st), 1);
  harness_redis_free(r);

  const char *allow[] = {"--allow-eviction", NULL};
  ck_assert_int_eq(start_with_policy("allkeys-lru", allow, log, sizeof log), -1);
  ck_assert(log_has(log, "allow-eviction is set"));
  unlink(log);
  /* volatile-* evicts live leases: refused as well (issue 17: another
   * application's cache evicted 500 of 500 live leases) */
  ck_assert_int_eq(start_with_policy("volatile-lru", NULL, log, sizeof log), 1);
  ck_assert_int_eq(start_with_policy("volatile-lru", allow, log, sizeof log), -1);
  ck_assert(log_has(log, "a live lease may be evicted"));
  /* appendonly no matters only without the clock floor, which says what
   * it covers instead */
  ck_assert(log_has(log, "appendonly is no") == !harness_fence_clock());
  ck_assert(log_has(log, "fences are floored by Redis") == harness_fence_clock());
  unlink(log);
}
END_TEST

/* CONFIG SET on the suite's Redis. */
static void config_set(const char *name, const char *value) {
  redisReply *x = harness_redis_cmd(R, "CONFIG SET %s %s", name, value);
  ck_assert_msg(x && x->type == REDIS_REPLY_STATUS, "CONFIG SET %s %s failed", name, value);
  freeReplyObject(x);
}

/* Acquires `name` until it is granted, for up to 3 s (times the scale):
 * picketd notices a fixed Redis within its recheck. */
static void acquire_granted_soon(const char *name) {
  char path[300];
  snprintf(path, sizeof path, "/v1/locks/%s/acquire", name);
  long status = 0;
  for (int i = 0; i < 150 * harness_time_scale() && status != 200; i++) {
    harness_resp r;
    call("POST", path, "{}", &r);
    status = r.status;
    harness_resp_free(&r);
    if (status != 200) harness_sleep_ms(20);
  }
  ck_assert_int_eq(status, 200);
}

START_TEST(evicting_policy_seen_on_reconnect) {
  acquire_ok("policy", "{\"ttl_ms\":60000}", NULL);
  config_set("maxmemory-policy", "allkeys-lru");
  redisReply *x = harness_redis_cmd(R, "CLIENT KILL TYPE normal SKIPME no");
  freeReplyObject(x);
  harness_resp r;
  call("POST", "/v1/locks/policy2/acquire", "{}", &r);
  expect_error(&r, 503, "store_misconfigured");
  harness_resp_free(&r);
  call("GET", "/readyz", NULL, &r);
  expect_error(&r, 503, "store_misconfigured");
  harness_resp_free(&r);
  config_set("maxmemory-policy", "noeviction");
  acquire_granted_soon("policy2");
}
END_TEST

START_TEST(redis_password_from_file_or_url) {
  /* the harness PINGs without a password, so set it after the start */
  harness_redis *r = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(r);
  redisReply *x = harness_redis_cmd(r, "CONFIG SET requirepass s3cret-pw");
  freeReplyObject(x);
  char pwfile[64];
  ck_assert_int_eq(harness_write_tmpfile(pwfile, sizeof pwfile, "pw", "s3cret-pw\n"), 0);
  const char *with_file[] = {"--redis-password-file", pwfile, "--log-format", "json", NULL};
  harness_picketd *p = harness_picketd_start(harness_redis_url(r), with_file);
  ck_assert_ptr_nonnull(p);
  harness_resp resp;
  ck_assert_int_eq(harness_http(harness_picketd_url(p), "POST", "/v1/locks/pw/acquire", "{}", &resp), 0);
  ck_assert_msg(resp.status == 200, "%ld %s", resp.status, resp.body);
  harness_resp_free(&resp);
  /* --log-format json: every line of the log is a JSON object */
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' %s",
           harness_picketd_log(p));
  ck_assert_msg(system(cmd) == 0, "picketd's JSON log is not JSON lines");
  harness_picketd_free(p);
  unlink(pwfile);
  /* a wrong password: picketd runs, and says 503 with the reason */
  p = harness_picketd_start(harness_redis_url(r), NULL); /* no password at all */
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(harness_http(harness_picketd_url(p), "POST", "/v1/locks/pw/acquire", "{}", &resp), 0);
  expect_error(&resp, 503, "store_unavailable");
  ck_assert_msg(strstr(resp.body, "NOAUTH") || strstr(resp.body, "auth"), "%s", resp.body);
  harness_resp_free(&resp);
  harness_picketd_free(p);
  x = harness_redis_cmd(r, "AUTH s3cret-pw");
  freeReplyObject(x);
  harness_redis_free(r);
}
END_TEST

/* A runtime CONFIG SET to an evicting policy, with no reconnect: every
 * loop refuses grants within about a second (issue 17: open connections
 * kept granting until the counters were evicted and fences repeated). */
START_TEST(evicting_policy_seen_at_run_time) {
  acquire_ok("policy-rt", "{\"ttl_ms\":60000}", NULL);
  config_set("maxmemory-policy", "allkeys-lru");
  int64_t t0 = harness_now_ms(), seen = -1;
  harness_resp r;
  while (seen < 0 && harness_now_ms() - t0 < 5000 * harness_time_scale()) {
    call("POST", "/v1/locks/policy-rt2/acquire", "{}", &r);
    const char *code = harness_error_code(&r);
    if (r.status == 503 && code && strcmp(code, "store_misconfigured") == 0)
      seen = harness_now_ms() - t0;
    harness_resp_free(&r);
    if (seen < 0) harness_sleep_ms(20);
  }
  printf("evicting policy refused %lld ms after CONFIG SET\n", (long long)seen);
  ck_assert_msg(seen >= 0, "still granting 5 s after the policy changed");
  for (int i = 0; i < 40; i++) { /* every loop and connection agrees */
    call(i % 4 ? "POST" : "GET", i % 4 ? "/v1/locks/policy-rt3/acquire" : "/readyz",
         i % 4 ? "{}" : NULL, &r);
    expect_error(&r, 503, "store_misconfigured");
    harness_resp_free(&r);
  }
  config_set("maxmemory-policy", "noeviction");
  acquire_granted_soon("policy-rt3");
}
END_TEST

/* Redis at maxmemory (noeviction) refuses writes: every lock call that
 * writes is 503 store_full and /readyz says so, until memory is freed
 * (issue 17: it was 502 store_error "OOM command not allowed" with
 * /readyz at 200). Reads, renewals and releases still work. */
START_TEST(full_redis_is_store_full) {
  char lease[33];
  acquire_ok("full-held", "{\"ttl_ms\":60000}", lease);
  config_set("maxmemory", "1");
  harness_resp r;
  call("POST", "/v1/locks/full-new/acquire", "{}", &r);
  expect_error(&r, 503, "store_full");
  ck_assert_msg(strstr(r.body, "out of memory"), "%s", r.body);
  harness_resp_free(&r);
  /* a holder keeps its lock: renew and release add no memory, and Redis
   * lets them through */
  ck_assert_int_eq(lock_call("full-held", "renew", lease, &r), 200);
  harness_resp_free(&r);
  call("GET", "/readyz", NULL, &r);
  expect_error(&r, 503, "store_full");
  harness_resp_free(&r);
  call("GET", "/v1/locks/full-held", NULL, &r);
  ck_assert_int_eq(r.status, 200); /* inspect is read-only */
  harness_resp_free(&r);
  ck_assert_int_ge(harness_metric(harness_picketd_url(P), "picket_redis_errors_total{kind=\"full\"}"), 2);
  ck_assert_int_eq(lock_call("full-held", "release", lease, &r), 200);
  harness_resp_free(&r);
  config_set("maxmemory", "0");
  call("GET", "/readyz", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  acquire_ok("full-new", "{}", NULL);
}
END_TEST

/* --redis naming a replica: /readyz says so (it said 200 while every
 * grant met READONLY), and a lock call is a 503 that changes nothing. */
START_TEST(replica_is_not_ready) {
  harness_redis_opts po = {.tcp = 1};
  harness_redis *primary = harness_redis_start(&po);
  ck_assert_ptr_nonnull(primary);
  char conf[80];
  snprintf(conf, sizeof conf, "replicaof 127.0.0.1 %d", harness_redis_port(primary));
  harness_redis_opts ro = {.extra_conf = conf};
  harness_redis *replica = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(replica);
  harness_picketd *p = harness_picketd_start(harness_redis_url(replica), NULL);
  ck_assert_ptr_nonnull(p);
  harness_resp r;
  ck_assert_int_eq(harness_http(harness_picketd_url(p), "GET", "/readyz", NULL, &r), 0);
  expect_error(&r, 503, "store_unavailable");
  ck_assert_msg(strstr(r.body, "is a replica"), "%s", r.body);
  harness_resp_free(&r);
  ck_assert_int_eq(harness_http(harness_picketd_url(p), "POST", "/v1/locks/ro/acquire", "{}", &r), 0);
  expect_error(&r, 503, "store_unavailable");
  harness_resp_free(&r);
  /* on the primary it is ready, and says where it goes */
  harness_picketd *q = harness_picketd_start(harness_redis_url(primary), NULL);
  ck_assert_ptr_nonnull(q);
  ck_assert_int_eq(harness_http(harness_picketd_url(q), "GET", "/readyz", NULL, &r), 0);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(harness_json_str(r.json, "primary"), harness_redis_socket(primary));
  ck_assert_ptr_null(json_object_get(r.json, "sentinel")); /* only under --sentinel */
  harness_resp_free(&r);
  harness_picketd_free(q);
  harness_picketd_free(p);
  harness_redis_free(replica);
  harness_redis_free(primary);
}
END_TEST

/* A number field of Redis's INFO, read by the test itself. */
static long long redis_info(const char *field) {
  redisReply *x = harness_redis_cmd(R, "INFO");
  ck_assert_msg(x && x->type == REDIS_REPLY_STRING, "INFO failed");
  const char *p = strstr(x->str, field);
  long long v = p ? strtoll(p + strlen(field), NULL, 10) : -1;
  freeReplyObject(x);
  return v;
}

/* The gauges picket_redis_used_memory_bytes and picket_redis_db_keys come
 * from the once-a-second INFO (with the policy re-read): they follow Redis
 * within a second or two, without a SCAN. */
START_TEST(memory_and_key_gauges) {
  /* 5 counters, 2 held leases, and the index of held names (list.lua) */
  for (int i = 0; i < 5; i++) {
    char name[16], lease[33];
    snprintf(name, sizeof name, "gauge-%d", i);
    acquire_ok(name, "{\"ttl_ms\":60000}", lease);
    if (i < 3) {
      harness_resp r;
      ck_assert_int_eq(lock_call(name, "release", lease, &r), 200);
      harness_resp_free(&r);
    }
  }
  redisReply *x = harness_redis_cmd(R, "DBSIZE");
  long long dbsize = x->integer;
  freeReplyObject(x);
  ck_assert_int_eq(dbsize, 5 + 2 + 1);
  double keys = -1, used = -1;
  int64_t t0 = harness_now_ms();
  while (keys != (double)dbsize && harness_now_ms() - t0 < 3000 * harness_time_scale()) {
    harness_resp r;
    call("GET", "/readyz", NULL, &r); /* a call at rest lets the once-a-second INFO run */
    harness_resp_free(&r);
    keys = harness_metric(harness_picketd_url(P), "picket_redis_db_keys");
    used = harness_metric(harness_picketd_url(P), "picket_redis_used_memory_bytes");
    if (keys != (double)dbsize) harness_sleep_ms(100);
  }
  ck_assert_msg(keys == (double)dbsize, "picket_redis_db_keys %g, DBSIZE %lld", keys, dbsize);
  long long now_used = redis_info("used_memory:");
  ck_assert_msg(used > now_used / 2 && used < now_used * 2,
                "picket_redis_used_memory_bytes %g, INFO used_memory %lld", used, now_used);
}
END_TEST

static void setup_aof(void) {
  harness_redis_opts o = {.appendonly = 1};
  start_both(&o, NULL);
}

/* One worker, so the SCRIPT FLUSH certainly hits a connection that had
 * loaded the scripts. */
static void setup_aof_one_thread(void) {
  harness_redis_opts o = {.appendonly = 1};
  const char *args[] = {"--threads", "1", NULL};
  start_both(&o, args);
}

int main(void) {
  Suite *s = suite_create("redis");
  const struct {
    const char *name;
    const TTest *test;
  } cases[] = {{"concurrency", concurrent_grants_have_unique_rising_fences},
               {"restart", redis_restart_keeps_fences_rising},
               {"down", redis_down_is_503_and_recovers},
               {"absent", redis_absent_at_startup},
               {"policy_start", evicting_policy_refused_at_startup},
               {"policy_reconnect", evicting_policy_seen_on_reconnect},
               {"password", redis_password_from_file_or_url},
               {"replica", replica_is_not_ready},
               {"policy_run_time", evicting_policy_seen_at_run_time},
               {"full", full_redis_is_store_full},
               {"gauges", memory_and_key_gauges}};
  /* each case its own Redis (AOF on) and picketd: they break them */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    TCase *tc = tcase_create(cases[i].name);
    tcase_add_unchecked_fixture(tc, i == 1 ? setup_aof_one_thread : setup_aof, stop_both);
    tcase_add_test(tc, cases[i].test);
    suite_add_tcase(s, tc);
  }
  return harness_run_suite(s);
}
