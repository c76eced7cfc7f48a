/* Integration tests of the fence itself (proto/redis/acquire.lua) against a
 * real redis-server and picketd:
 *
 * exact_near_2_53, exact_near_2_63: counters set by hand at 2^53-1, 2^53,
 *   2^53+1 and 2^63-2: the next fence is exactly one more, in the reply, in
 *   the stored grant, in renew and in GET (a Lua number, a double, would
 *   repeat fences from 2^53 on and wrap at 2^63); with the counter at
 *   2^63-1 acquire is a clear 502 store_error that grants nothing.
 * counter_not_a_count: a counter another writer set to text, a negative
 *   number or a fraction is a 502 store_error; nothing is written.
 * clock_floor: with --fence-floor clock each fence is at least Redis TIME
 *   and above the last; a counter destroyed between grants (DEL, FLUSHALL)
 *   never sends the next fence below the last.
 * idle_ttl: --fence-idle-ttl-ms sets the counter's expiry on every grant
 *   and renew, never shorter than the lease, and to the idle TTL on release; unused for the idle TTL, the
 *   lock leaves no key behind, and its next fence is still above the last;
 *   without it the counter never expires.
 *
 * Each case starts its own Redis and picketd with the flags it needs. */
#include <sys/wait.h>

#include "picketd_common.h"

static const char *const clock_flags[] = {"--fence-floor", "clock", NULL};

static void start_floor(const char *const *args) { start_both(NULL, args); }

static void set_counter(const char *name, const char *value) {
  redisReply *x = harness_redis_cmd(R, "SET picket:{%s}:fence %s", name, value);
  ck_assert_msg(x && x->type == REDIS_REPLY_STATUS, "SET failed");
  freeReplyObject(x);
}

/* The counter or the grant's stored fence, as Redis holds it ("" if none). */
static void redis_str(char *out, size_t cap, const char *fmt, const char *name) {
  redisReply *x = harness_redis_cmd(R, fmt, name);
  ck_assert_ptr_nonnull(x);
  snprintf(out, cap, "%s", x->type == REDIS_REPLY_STRING ? x->str : "");
  freeReplyObject(x);
}

static long long pttl(const char *key_fmt, const char *name) {
  redisReply *x = harness_redis_cmd(R, key_fmt, name);
  ck_assert_msg(x && x->type == REDIS_REPLY_INTEGER, "PTTL failed");
  long long v = x->integer;
  freeReplyObject(x);
  return v;
}

/* One acquire of `name` after the counter was set to `counter`: the fence
 * must be `want` everywhere it shows. Released afterwards. */
static void expect_next(const char *name, const char *counter, const char *want) {
  set_counter(name, counter);
  char lease[33], path[300], body[100], got[32];
  int64_t fence = acquire_ok(name, "{\"ttl_ms\":60000}", lease);
  snprintf(got, sizeof got, "%lld", (long long)fence);
  ck_assert_msg(strcmp(got, want) == 0, "counter %s: acquire said %s, want %s", counter, got, want);
  redis_str(got, sizeof got, "GET picket:{%s}:fence", name);
  ck_assert_msg(strcmp(got, want) == 0, "counter %s: counter holds %s, want %s", counter, got, want);
  redis_str(got, sizeof got, "HGET picket:{%s}:lease fence", name);
  ck_assert_msg(strcmp(got, want) == 0, "counter %s: grant holds %s, want %s", counter, got, want);
  harness_resp r;
  snprintf(path, sizeof path, "/v1/locks/%s/renew", name);
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", lease);
  call("POST", path, body, &r);
  ck_assert_int_eq(r.status, 200);
  snprintf(got, sizeof got, "%lld", (long long)harness_json_int(r.json, "fence"));
  ck_assert_msg(strcmp(got, want) == 0, "counter %s: renew said %s, want %s", counter, got, want);
  harness_resp_free(&r);
  snprintf(path, sizeof path, "/v1/locks/%s", name);
  call("GET", path, NULL, &r);
  snprintf(got, sizeof got, "%lld", (long long)harness_json_int(r.json, "fence"));
  ck_assert_msg(strcmp(got, want) == 0, "counter %s: GET said %s, want %s", counter, got, want);
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call(name, "release", lease, &r), 200);
  harness_resp_free(&r);
}

START_TEST(exact_near_2_53) {
  start_floor(NULL); /* the suite's floor: the counter is far above any clock */
  expect_next("big-a", "9007199254740991", "9007199254740992"); /* 2^53-1 */
  expect_next("big-b", "9007199254740992", "9007199254740993"); /* 2^53 */
  expect_next("big-c", "9007199254740993", "9007199254740994"); /* 2^53+1 */
  expect_next("big-d", "999999999999999999", "1000000000000000000"); /* a carry */
  stop_both();
}
END_TEST

START_TEST(exact_near_2_63) {
  start_floor(NULL);
  expect_next("top", "9223372036854775806", "9223372036854775807"); /* 2^63-2 */
  /* the counter is at its top: no fence left, a clear error, no grant */
  harness_resp r;
  call("POST", "/v1/locks/top/acquire", "{}", &r);
  expect_error(&r, 502, "store_error");
  const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
  ck_assert_msg(strstr(msg, "no fence left") != NULL, "message: %s", msg);
  ck_assert_msg(strstr(msg, "PICKET_COUNTER") == NULL, "internal code shown: %s", msg);
  harness_resp_free(&r);
  char got[32];
  redis_str(got, sizeof got, "GET picket:{%s}:fence", "top");
  ck_assert_str_eq(got, "9223372036854775807");
  ck_assert_int_eq(pttl("PTTL picket:{%s}:lease", "top"), -2);
  stop_both();
}
END_TEST

START_TEST(counter_not_a_count) {
  start_floor(NULL);
  const char *bad[] = {"abc", "-10", "1.5", "007", "", "9223372036854775808", " 5"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    redisReply *x = harness_redis_cmd(R, "SET picket:{odd}:fence %b", bad[i], strlen(bad[i]));
    freeReplyObject(x);
    harness_resp r;
    call("POST", "/v1/locks/odd/acquire", "{}", &r);
    ck_assert_msg(r.status == 502, "counter '%s': %ld %s", bad[i], r.status, r.body);
    expect_error(&r, 502, "store_error");
    harness_resp_free(&r);
    char got[32];
    redis_str(got, sizeof got, "GET picket:{%s}:fence", "odd");
    ck_assert_str_eq(got, bad[i]);
    ck_assert_int_eq(pttl("PTTL picket:{%s}:lease", "odd"), -2);
  }
  stop_both();
}
END_TEST

START_TEST(clock_floor) {
  start_floor(clock_flags);
  int64_t last = 0;
  for (int i = 0; i < 20; i++) {
    char lease[33];
    int64_t t0 = harness_redis_time_us(R);
    int64_t f = acquire_ok("clk", "{\"ttl_ms\":60000}", lease);
    ck_assert_msg(f > last && f >= t0, "grant %d: fence %lld, last %lld, Redis TIME %lld", i,
                  (long long)f, (long long)last, (long long)t0);
    last = f;
    harness_resp r;
    ck_assert_int_eq(lock_call("clk", "release", lease, &r), 200);
    harness_resp_free(&r);
    /* every few grants the counter is destroyed: it must not matter */
    if (i % 5 == 4) {
      redisReply *x = harness_redis_cmd(R, i % 10 == 4 ? "FLUSHALL" : "DEL picket:{clk}:fence");
      freeReplyObject(x);
    }
  }
  /* a counter ahead of the clock (a fence from a faster clock, or from
   * before the floor was turned on at a higher count) still counts up */
  set_counter("clk", "5000000000000000");
  ck_assert_int_eq(acquire_ok("clk2", "{}", NULL) < 5000000000000000LL, 1);
  char lease[33];
  ck_assert_int_eq(acquire_ok("clk", "{}", lease), 5000000000000001LL);
  /* the counter never expires without --fence-idle-ttl-ms */
  ck_assert_int_eq(pttl("PTTL picket:{%s}:fence", "clk"), -1);
  stop_both();
}
END_TEST

START_TEST(idle_ttl) {
  const int64_t scale = harness_time_scale();
  char idle[24];
  snprintf(idle, sizeof idle, "%lld", (long long)(400 * scale));
  const char *args[] = {"--fence-floor", "clock", "--fence-idle-ttl-ms", idle, NULL};
  start_floor(args);
  char lease[33], body[120];
  /* a lease shorter than the idle TTL: the counter lives the idle TTL. (The
   * lease is scaled too: under valgrind an unscaled 50 ms lease expired
   * before its release, a 409.) */
  snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)(50 * scale));
  int64_t f1 = acquire_ok("idle", body, lease);
  long long t = pttl("PTTL picket:{%s}:fence", "idle");
  ck_assert_msg(t > 0 && t <= 400 * scale, "counter PTTL %lld after a %lld ms grant", t,
                (long long)(50 * scale));
  harness_resp r;
  ck_assert_int_eq(lock_call("idle", "release", lease, &r), 200);
  harness_resp_free(&r);
  /* a lease longer than the idle TTL: the counter outlives it */
  snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)(5000 * scale));
  int64_t f2 = acquire_ok("idle", body, lease);
  ck_assert_int_gt(f2, f1);
  t = pttl("PTTL picket:{%s}:fence", "idle");
  ck_assert_msg(t > 4000 * scale, "counter PTTL %lld under a %lld ms lease", t,
                (long long)(5000 * scale));
  /* a renewal moves it too */
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":%lld}", lease, (long long)(20000 * scale));
  call("POST", "/v1/locks/idle/renew", body, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  t = pttl("PTTL picket:{%s}:fence", "idle");
  ck_assert_msg(t > 19000 * scale, "counter PTTL %lld after a renewal to %lld ms", t,
                (long long)(20000 * scale));
  ck_assert_int_eq(lock_call("idle", "release", lease, &r), 200);
  harness_resp_free(&r);
  /* released: no lease to outlive, so the counter is idle from now on */
  t = pttl("PTTL picket:{%s}:fence", "idle");
  ck_assert_msg(t > 0 && t <= 400 * scale, "counter PTTL %lld after the release", t);

  /* unused for the idle TTL: no key left (a name used once costs nothing) */
  snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)(50 * scale));
  int64_t f3 = acquire_ok("once", body, lease);
  ck_assert_int_eq(lock_call("once", "release", lease, &r), 200);
  harness_resp_free(&r);
  int64_t t0 = harness_now_ms();
  long long left = 1;
  while (left != 0 && harness_now_ms() - t0 < 5000 * scale) {
    harness_sleep_ms(50);
    redisReply *x = harness_redis_cmd(R, "EXISTS picket:{once}:fence picket:{once}:lease");
    left = x && x->type == REDIS_REPLY_INTEGER ? x->integer : -1;
    freeReplyObject(x);
  }
  ck_assert_msg(left == 0, "keys of an unused lock still there after %lld ms",
                (long long)(harness_now_ms() - t0));
  printf("idle TTL %s ms: the unused lock's keys were gone %lld ms after its release\n", idle,
         (long long)(harness_now_ms() - t0));
  /* GET of it says never granted, and its next fence is above the last */
  call("GET", "/v1/locks/once", NULL, &r);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), 0);
  harness_resp_free(&r);
  int64_t f4 = acquire_ok("once", "{}", NULL);
  ck_assert_msg(f4 > f3, "fence %lld after the counter expired, %lld before", (long long)f4,
                (long long)f3);
  stop_both();
}
END_TEST

/* --fence-idle-ttl-ms needs the clock floor: without it an expired counter
 * would send fences back to 1. picketd refuses to start (exit 2). */
START_TEST(idle_ttl_needs_clock) {
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "%s/picketd --fence-floor none --fence-idle-ttl-ms 1000 2>&1 | grep -q 'needs --fence-floor clock'",
           getenv("PICKET_BIN_DIR"));
  ck_assert_int_eq(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/picketd --fence-floor none --fence-idle-ttl-ms 1000 2>/dev/null",
           getenv("PICKET_BIN_DIR"));
  int st = system(cmd);
  ck_assert_int_eq(WEXITSTATUS(st), 2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fence");
  TCase *tc = tcase_create("fence");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, exact_near_2_53);
  tcase_add_test(tc, exact_near_2_63);
  tcase_add_test(tc, counter_not_a_count);
  tcase_add_test(tc, clock_floor);
  tcase_add_test(tc, idle_ttl);
  tcase_add_test(tc, idle_ttl_needs_clock);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
