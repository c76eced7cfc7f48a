/* Integration tests of the fence itself (proto/redis/acquire.lua) against a
 * real redis-server and picketd:
 *
 * exact_near_2_53, exact_near_2_63: counters set by hand at 2^53-1, 2^53,
 *   2^53+1 and 2^63-2: the next fence is exactly one more, in the reply, in
 *   the stored grant, in renew and in GET (a Lua number, a double, would
 *   repeat fences from 2^53 on and wrap at 2^63); with the counter at
 *   2^63-1 acquire is a clear 502 store_error that grants nothing.
 * counter_not_a_count: a counter another writer set to text, a negative
 *   number or a fraction, with no grant live: with the clock floor a grant
 *   at the clock and the counter repaired; with none 503 store_tampered and
 *   nothing written; counted in picket_fence_tampered_total and logged.
 * counter_tampered_while_held: the counter set to 0, -10, text, or deleted
 *   while the lock is held: the next acquire, renew or release repairs it
 *   to the live fence (metric, one log line each), so the next fence is
 *   above the live one under both floors; a grant whose own fence was
 *   changed is 503 store_tampered.
 * flushall_while_held: clock: the next holder's fence is above the first's;
 *   none: fences restart at 1; both: the first holder gets lease_lost.
 * counter_reset_while_free: a counter set to 0 with no grant live: clock
 *   still rises, none restarts at 1 (undetectable, documented).
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

/* One command about `name` whose reply does not matter. */
static void redis_do(const char *fmt, const char *name) {
  freeReplyObject(harness_redis_cmd(R, fmt, name));
}

/* The counter holds `want` after `what` (tampered by `how` before). */
static void expect_counter(const char *name, const char *want, const char *how, const char *what) {
  char got[32];
  redis_str(got, sizeof got, "GET picket:{%s}:fence", name);
  ck_assert_msg(strcmp(got, want) == 0, "%s: counter %s after %s, want %s", how, got, what, want);
}

/* A call that must answer 200 with `fence`. */
static void expect_fence(const char *method, const char *path, const char *body, int64_t fence) {
  harness_resp r;
  call(method, path, body, &r);
  ck_assert_msg(r.status == 200, "%s %s: %ld %s", method, path, r.status, r.body);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), fence);
  harness_resp_free(&r);
}

/* How many lines of picketd's log hold `text`. */
static int log_count(const char *text) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "grep -cF -- \"%s\" %s", text, harness_picketd_log(P));
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f && fscanf(f, "%d", &n) != 1) n = -1;
  if (f) pclose(f);
  return n;
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

/* A counter another writer set to something that is not a count, with no
 * grant live to repair it from. With the clock floor it counts as lost:
 * the grant goes on at the clock (above every fence before, as after a
 * FLUSHALL), the counter is repaired and the repair counted and logged.
 * With --fence-floor none no fence is certain: 503 store_tampered, nothing
 * written. A key of the wrong type is still a 502 store_error. */
START_TEST(counter_not_a_count) {
  start_floor(NULL);
  const char *bad[] = {"abc", "-10", "1.5", "007", "", "9223372036854775808", " 5"};
  const int n = (int)(sizeof bad / sizeof bad[0]);
  for (int i = 0; i < n; i++) {
    redisReply *x = harness_redis_cmd(R, "SET picket:{odd}:fence %b", bad[i], strlen(bad[i]));
    freeReplyObject(x);
    harness_resp r;
    int64_t t0 = harness_redis_time_us(R);
    call("POST", "/v1/locks/odd/acquire", "{}", &r);
    char got[32];
    redis_str(got, sizeof got, "GET picket:{%s}:fence", "odd");
    if (harness_fence_clock()) {
      ck_assert_msg(r.status == 200, "counter '%s': %ld %s", bad[i], r.status, r.body);
      int64_t f = harness_json_int(r.json, "fence");
      ck_assert_msg(f >= t0, "counter '%s': fence %lld below Redis TIME %lld", bad[i],
                    (long long)f, (long long)t0);
      ck_assert_int_eq(strtoll(got, NULL, 10), f); /* repaired to the fence granted */
      harness_resp rel; /* its own reply: r's would leak (ASan's leak check) */
      ck_assert_int_eq(lock_call("odd", "release", harness_json_str(r.json, "lease"), &rel), 200);
      harness_resp_free(&rel);
    } else {
      expect_error(&r, 503, "store_tampered");
      const char *msg = harness_json_str(json_object_get(r.json, "error"), "message");
      ck_assert_msg(strstr(msg, "PICKET_") == NULL, "internal code shown: %s", msg);
      ck_assert_str_eq(got, bad[i]); /* nothing written */
      ck_assert_int_eq(pttl("PTTL picket:{%s}:lease", "odd"), -2);
    }
    harness_resp_free(&r);
  }
  double repaired = harness_metric(harness_picketd_url(P),
                                   "picket_fence_tampered_total{action=\"repaired\"}");
  double refused = harness_metric(harness_picketd_url(P),
                                  "picket_fence_tampered_total{action=\"refused\"}");
  ck_assert_int_eq((int)repaired, harness_fence_clock() ? n : 0);
  ck_assert_int_eq((int)refused, harness_fence_clock() ? 0 : n);
  ck_assert_int_eq(log_count(harness_fence_clock() ? "lock odd: its fence counter held a value "
                                                     "that is not a count"
                                                   : "refusing a lock call: the fence counter "
                                                     "picket:{odd}:fence"),
                   harness_fence_clock() ? n : 1); /* refusals: one line a second at most */
  /* GET says so too: no fence of that lock can be stated */
  if (!harness_fence_clock()) {
    harness_resp r;
    call("GET", "/v1/locks/odd", NULL, &r);
    expect_error(&r, 503, "store_tampered");
    harness_resp_free(&r);
  }
  /* the wrong type: as before, a clear 502 that grants nothing */
  redisReply *x = harness_redis_cmd(R, "DEL picket:{odd}:fence");
  freeReplyObject(x);
  x = harness_redis_cmd(R, "HSET picket:{odd}:fence a b");
  freeReplyObject(x);
  harness_resp r;
  call("POST", "/v1/locks/odd/acquire", "{}", &r);
  expect_error(&r, 502, "store_error");
  harness_resp_free(&r);
  ck_assert_int_eq(pttl("PTTL picket:{%s}:lease", "odd"), -2);
  stop_both();
}
END_TEST

/* What another writer does to a counter while its lock is held: set it to
 * 0, to -10, to text, or delete it. Whatever touches the lock next (an
 * acquire by someone else, the holder's renew or release, here each in
 * turn) finds the counter below the live grant's fence, repairs it to that
 * fence, counts and logs it (one line, with the lock name), and goes on.
 * So no fence is ever at or below the live one, under either floor: the
 * next holder's fence is above the first's. (picketd before issue 17's
 * repair, with --fence-floor none, granted fence 1 again.) */
START_TEST(counter_tampered_while_held) {
  start_floor(NULL);
  const char *tamper[] = {"SET picket:{%s}:fence 0", "SET picket:{%s}:fence -10",
                          "SET picket:{%s}:fence abc", "DEL picket:{%s}:fence"};
  const char *why[] = {"was below the live grant's fence", "held a value that is not a count",
                       "held a value that is not a count", "was missing (deleted)"};
  int repairs = 0;
  for (int i = 0; i < 4; i++) {
    char name[16], lease[33], want[32], path[64], body[100], text[120];
    snprintf(name, sizeof name, "held-%d", i);
    set_counter(name, "41"); /* so that a fence from 0 would repeat: 1 is not 42 */
    int64_t f = acquire_ok(name, "{\"ttl_ms\":60000}", lease);
    snprintf(want, sizeof want, "%lld", (long long)f);
    harness_resp r;
    /* someone else's acquire: held (409), and the counter repaired */
    redis_do(tamper[i], name);
    snprintf(path, sizeof path, "/v1/locks/%s/acquire", name);
    call("POST", path, "{}", &r);
    expect_error(&r, 409, "lock_held");
    harness_resp_free(&r);
    expect_counter(name, want, tamper[i], "someone else's acquire");
    /* GET says the live grant's fence while the counter is wrong */
    redis_do(tamper[i], name);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    expect_fence("GET", path, NULL, f);
    /* the holder's renew: the same fence, and the counter repaired */
    snprintf(path, sizeof path, "/v1/locks/%s/renew", name);
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", lease);
    expect_fence("POST", path, body, f);
    expect_counter(name, want, tamper[i], "the renew");
    /* the holder's release: the last moment the live fence is in Redis */
    redis_do(tamper[i], name);
    ck_assert_int_eq(lock_call(name, "release", lease, &r), 200);
    harness_resp_free(&r);
    expect_counter(name, want, tamper[i], "the release");
    repairs += 3;
    /* the next holder's fence is above the first holder's */
    int64_t t0 = harness_redis_time_us(R);
    int64_t next = acquire_ok(name, "{}", NULL);
    ck_assert_msg(harness_fence_follows(f, next, t0), "%s: fence %lld after %lld", tamper[i],
                  (long long)next, (long long)f);
    snprintf(text, sizeof text, "lock %s: its fence counter %s", name, why[i]);
    ck_assert_int_eq(log_count(text), 3);
  }
  ck_assert_int_eq(harness_metric(harness_picketd_url(P),
                                  "picket_fence_tampered_total{action=\"repaired\"}"),
                   repairs);
  /* the grant's own fence changed: nothing is certain, so 503, nothing
   * granted or renewed */
  char lease[33], body[100];
  acquire_ok("held-x", "{\"ttl_ms\":60000}", lease);
  redis_do("HSET picket:{%s}:lease fence -5", "held-x");
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  const char *const calls[][3] = {{"POST", "/v1/locks/held-x/acquire", "{}"},
                                  {"POST", "/v1/locks/held-x/renew", body},
                                  {"GET", "/v1/locks/held-x", NULL}};
  for (int i = 0; i < 3; i++) {
    harness_resp r;
    call(calls[i][0], calls[i][1], calls[i][2], &r);
    expect_error(&r, 503, "store_tampered");
    harness_resp_free(&r);
  }
  stop_both();
}
END_TEST

/* FLUSHALL while a lock is held: the grant and the counter are gone, and
 * a second client gets the lock at once. With the clock floor its fence is
 * above the first holder's (storage that checks fences shuts the first one
 * out); with --fence-floor none fences start again at 1, and reach the
 * first holder's fence again: that is what none gives up (proto/README.md).
 * Under both, fences never fall below 1 and still rise from the flush on,
 * and the first holder learns at its next renew or release: lease_lost. */
START_TEST(flushall_while_held) {
  start_floor(NULL);
  char a[33], body[100];
  for (int i = 0; i < 3; i++) {
    acquire_ok("flush", "{}", a);
    harness_resp r;
    ck_assert_int_eq(lock_call("flush", "release", a, &r), 200);
    harness_resp_free(&r);
  }
  int64_t fa = acquire_ok("flush", "{\"ttl_ms\":60000}", a);
  redisReply *x = harness_redis_cmd(R, "FLUSHALL");
  freeReplyObject(x);
  int64_t last = 0;
  for (int i = 0; i < 5; i++) {
    char b[33];
    int64_t t0 = harness_redis_time_us(R);
    int64_t fb = acquire_ok("flush", "{}", b);
    ck_assert_int_ge(fb, 1);
    ck_assert_msg(harness_fence_follows(last, fb, t0), "fence %lld after %lld", (long long)fb,
                  (long long)last);
    if (harness_fence_clock())
      ck_assert_msg(fb > fa, "fence %lld after FLUSHALL, the first holder's %lld", (long long)fb,
                    (long long)fa);
    else
      ck_assert_int_eq(fb, i + 1); /* 1, 2, 3...: the first holder's fa = 4 comes again */
    last = fb;
    harness_resp r;
    ck_assert_int_eq(lock_call("flush", "release", b, &r), 200);
    harness_resp_free(&r);
  }
  harness_resp r;
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", a);
  call("POST", "/v1/locks/flush/renew", body, &r);
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("flush", "release", a, &r), 409);
  harness_resp_free(&r);
  stop_both();
}
END_TEST

/* A counter set to 0 (or deleted) while no grant is live cannot be told
 * from a lock never granted. With the clock floor the next fence is still
 * above the last; with none it is 1 again (proto/README.md). */
START_TEST(counter_reset_while_free) {
  start_floor(NULL);
  char lease[33];
  set_counter("free", "41");
  int64_t f = acquire_ok("free", "{}", lease);
  harness_resp r;
  ck_assert_int_eq(lock_call("free", "release", lease, &r), 200);
  harness_resp_free(&r);
  set_counter("free", "0");
  int64_t next = acquire_ok("free", "{}", NULL);
  if (harness_fence_clock()) ck_assert_int_gt(next, f);
  else ck_assert_int_eq(next, 1);
  ck_assert_int_eq(harness_metric(harness_picketd_url(P),
                                  "picket_fence_tampered_total{action=\"repaired\"}"),
                   0);
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
  /* the counter expires a day after its last use by default (issue 39) */
  int64_t left = pttl("PTTL picket:{%s}:fence", "clk");
  ck_assert_msg(left > 86400000 - 600000 && left <= 86400000, "PTTL %lld", (long long)left);
  stop_both();
}
END_TEST

START_TEST(idle_ttl) {
  const int64_t scale = harness_time_scale();
  char idle[24];
  snprintf(idle, sizeof idle, "%lld", (long long)(1000 * scale));
  const char *args[] = {"--fence-floor", "clock", "--fence-idle-ttl-ms", idle, NULL};
  start_floor(args);
  char lease[33], body[120];
  /* a lease shorter than the idle TTL: the counter lives the idle TTL. (The
   * lease is scaled too: under valgrind an unscaled 50 ms lease expired
   * before its release, a 409; and on a loaded 2-core machine a 50 ms one
   * did too, so it is 300 ms under a 1 s idle TTL.) */
  snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)(300 * scale));
  int64_t f1 = acquire_ok("idle", body, lease);
  long long t = pttl("PTTL picket:{%s}:fence", "idle");
  ck_assert_msg(t > 0 && t <= 1000 * scale, "counter PTTL %lld after a %lld ms grant", t,
                (long long)(300 * scale));
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
  ck_assert_msg(t > 0 && t <= 1000 * scale, "counter PTTL %lld after the release", t);

  /* unused for the idle TTL: no key left (a name used once costs nothing) */
  snprintf(body, sizeof body, "{\"ttl_ms\":%lld}", (long long)(300 * scale));
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

/* On etcd a fence is the revision of the grant's write: above every fence
 * before it, of this lock and of any other, and still so after the member
 * restarts from its data dir (the harness restarts the etcd with the
 * Redis it stands in for). */
START_TEST(etcd_fences_are_revisions) {
  start_both(NULL, NULL);
  char la[33], lb[33];
  int64_t a1 = acquire_ok("rev-a", "{\"ttl_ms\":60000}", la);
  int64_t b1 = acquire_ok("rev-b", "{\"ttl_ms\":60000}", lb);
  ck_assert_int_gt(b1, a1);
  harness_resp r;
  ck_assert_int_eq(lock_call("rev-a", "release", la, &r), 200);
  harness_resp_free(&r);
  int64_t a2 = acquire_ok("rev-a", "{\"ttl_ms\":60000}", la);
  ck_assert_int_gt(a2, b1);
  ck_assert_int_eq(harness_redis_restart(R), 0);
  int64_t until = harness_now_ms() + 15000;
  long st = 0;
  do {
    char body[80];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lb);
    call("POST", "/v1/locks/rev-b/release", body, &r);
    st = r.status;
    harness_resp_free(&r);
    if (st != 200) harness_sleep_ms(100);
  } while (st != 200 && harness_now_ms() < until);
  ck_assert_msg(st == 200, "the lease did not survive the restart: %ld", st);
  int64_t b2 = acquire_ok("rev-b", "{}", NULL);
  ck_assert_int_gt(b2, a2);
  call("GET", "/v1/locks/rev-b", NULL, &r);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), b2);
  harness_resp_free(&r);
  stop_both();
}
END_TEST

int main(void) {
  Suite *s = suite_create("fence");
  TCase *tc = tcase_create("fence");
  tcase_set_timeout(tc, 60);
  REDIS_CASE(tc, exact_near_2_53);
  REDIS_CASE(tc, exact_near_2_63);
  REDIS_CASE(tc, counter_not_a_count);
  REDIS_CASE(tc, counter_tampered_while_held);
  REDIS_CASE(tc, flushall_while_held);
  REDIS_CASE(tc, counter_reset_while_free);
  REDIS_CASE(tc, clock_floor);
  REDIS_CASE(tc, idle_ttl);
  tcase_add_test(tc, idle_ttl_needs_clock);
  if (harness_backend_etcd()) tcase_add_test(tc, etcd_fences_are_revisions);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
