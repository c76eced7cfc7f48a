/* Integration tests of the operators' endpoints (issue 27) against a real
 * redis-server and picketd: GET /v1/locks, the richer GET of one lock,
 * POST /v1/locks/{name}/break and GET /v1/whoami.
 *
 * list_pages: 250 locks under one prefix and others beside them come back
 *   in pages of 100, in name order, each exactly once, with kind, owner,
 *   fence, ttl_ms, acquired_at, renewals and waiters; the cursor ends null;
 *   semaphores and read/write locks are listed with their kind.
 * list_forgets_the_gone: a release takes the name out of the index at
 *   once; an expired lease is dropped from the listing and from the index
 *   when the listing meets it, or by the sweeper when nobody lists.
 * list_bad_input: limit, cursor and prefix out of bounds are 400
 *   invalid_argument naming the argument.
 * inspect_fields: acquired_at is the grant's time, renewals counts the
 *   renewals, waiters the acquires waiting on this picketd.
 * break_moves_fence: a break ends the lease at once: the waiter is granted
 *   within a second with a fence above the break's, which is above the
 *   broken holder's; the broken holder's renew and release are lease_lost
 *   saying it was broken and by whom; its next write to a real fenced-kv
 *   is refused once the new holder has written. A break of a free lock
 *   moves the fence too and says broken false.
 * break_with_fence: a break given the holder's fence, then its retry (as
 *   after a lost reply): both 200, and the broken holder's renew still
 *   says who broke it; the same break once a new holder took the lock is
 *   409 lock_held (its owner) and the new holder keeps the lock; a bad fence is 400.
 * whoami_local: without --auth-file a loopback caller may do everything,
 *   breaking included.
 * hold_metrics: a lease renewed 1.2 s after its grant is the oldest hold
 *   (picket_lock_oldest_hold_seconds, no label: no series names a lock),
 *   its release lands in picket_hold_duration_seconds{outcome="released"}
 *   with its age, a break in outcome="broken"; two waiters on one name
 *   show in picket_lock_waiters_max.
 * (Tokens, the list and admin verbs and prefix filtering: test_auth.py.) */
#include "picketd_common.h"

static void setup(void) { setup_default(); }

static harness_resp get(const char *path) {
  harness_resp r;
  call("GET", path, NULL, &r);
  return r;
}

static int64_t lease_fence(const char *name, const char *body, char lease[33]) {
  return acquire_ok(name, body, lease);
}

START_TEST(list_pages) {
  char lease[33], name[64];
  for (int i = 0; i < 250; i++) {
    snprintf(name, sizeof name, "pg.%03d", i);
    lease_fence(name, "{\"ttl_ms\":60000,\"owner\":\"w\"}", lease);
  }
  lease_fence("pf.other", "{\"ttl_ms\":60000}", lease); /* sorts next to pg., not in it */
  lease_fence("qq", "{\"ttl_ms\":60000}", lease);
  harness_resp s = family_call("semaphores", "POST", "pg.sem", "acquire",
                               "{\"limit\":4,\"ttl_ms\":60000}");
  ck_assert_int_eq(s.status, 200);
  harness_resp_free(&s);
  s = family_call("rwlocks", "POST", "pg.rw", "acquire", "{\"mode\":\"read\",\"ttl_ms\":60000}");
  ck_assert_int_eq(s.status, 200);
  harness_resp_free(&s);

  int seen = 0, pages = 0, sem = 0, rw = 0;
  char cursor[300] = "", last[64] = "";
  do {
    char path[400];
    snprintf(path, sizeof path, "/v1/locks?prefix=pg.&limit=100%s%s", cursor[0] ? "&cursor=" : "",
             cursor);
    harness_resp r = get(path);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    json_t *locks = json_object_get(r.json, "locks"), *e;
    size_t i;
    ck_assert_msg(json_array_size(locks) <= 100, "a page of %zu", json_array_size(locks));
    json_array_foreach(locks, i, e) {
      const char *n = harness_json_str(e, "name"), *kind = harness_json_str(e, "kind");
      ck_assert_msg(strncmp(n, "pg.", 3) == 0, "listed %s outside the prefix", n);
      ck_assert_msg(strcmp(n, last) > 0, "%s listed after %s: not in name order", n, last);
      snprintf(last, sizeof last, "%s", n);
      ck_assert_int_ge(harness_json_int(e, "holders"), 1);
      ck_assert_int_gt(harness_json_int(e, "ttl_ms"), 0);
      ck_assert_int_eq(harness_json_int(e, "waiters"), 0);
      if (strcmp(kind, "semaphore") == 0) {
        sem++;
        ck_assert_int_eq(harness_json_int(e, "limit"), 4);
        ck_assert(json_is_null(json_object_get(e, "fence")));
        continue;
      }
      if (strcmp(kind, "rwlock") == 0) {
        rw++;
        continue;
      }
      ck_assert_str_eq(kind, "lock");
      ck_assert_str_eq(harness_json_str(e, "owner"), "w");
      ck_assert_int_gt(harness_json_int(e, "fence"), 0);
      ck_assert_int_gt(harness_json_int(e, "acquired_at"), 0);
      ck_assert_int_eq(harness_json_int(e, "renewals"), 0);
      seen++;
    }
    json_t *c = json_object_get(r.json, "cursor");
    snprintf(cursor, sizeof cursor, "%s", json_is_string(c) ? json_string_value(c) : "");
    harness_resp_free(&r);
    ck_assert_int_lt(++pages, 10);
  } while (cursor[0]);
  ck_assert_int_eq(seen, 250);
  ck_assert_int_eq(sem, 1);
  ck_assert_int_eq(rw, 1);

  harness_resp r = get("/v1/locks"); /* all of them: 254 in pages of 100 */
  ck_assert_int_eq(json_array_size(json_object_get(r.json, "locks")), 100);
  ck_assert(json_is_string(json_object_get(r.json, "cursor")));
  harness_resp_free(&r);
}
END_TEST

static int indexed(const char *member) {
  redisReply *x = harness_redis_cmd(R, "ZSCORE picket:index %s", member);
  ck_assert_ptr_nonnull(x);
  int in = x->type != REDIS_REPLY_NIL;
  freeReplyObject(x);
  return in;
}

static int listed(const char *prefix) {
  char path[128];
  snprintf(path, sizeof path, "/v1/locks?prefix=%s", prefix);
  harness_resp r = get(path);
  ck_assert_int_eq(r.status, 200);
  int n = (int)json_array_size(json_object_get(r.json, "locks"));
  harness_resp_free(&r);
  return n;
}

/* On etcd a listing is a range of the live keys: a released or expired
 * lease is gone from it with its key (etcd deletes an expired lease's keys
 * at its leader's next sweep, within about half a second). */
START_TEST(etcd_list_drops_the_ended) {
  char lease[33];
  lease_fence("ended.released", "{\"ttl_ms\":60000}", lease);
  ck_assert_int_eq(listed("ended."), 1);
  harness_resp r;
  ck_assert_int_eq(lock_call("ended.released", "release", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(listed("ended."), 0);
  lease_fence("ended.expired", "{\"ttl_ms\":1000}", lease);
  ck_assert_int_eq(listed("ended."), 1);
  int64_t until = harness_now_ms() + 5000;
  while (listed("ended.") != 0) {
    ck_assert_msg(harness_now_ms() < until, "an expired lease still listed after 5 s");
    harness_sleep_ms(100);
  }
}
END_TEST

START_TEST(list_forgets_the_gone) {
  char lease[33];
  lease_fence("gone.released", "{\"ttl_ms\":60000}", lease);
  ck_assert(indexed("gone.released l"));
  harness_resp r;
  ck_assert_int_eq(lock_call("gone.released", "release", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert(!indexed("gone.released l"));

  lease_fence("gone.expired", "{\"ttl_ms\":200}", lease);
  ck_assert_int_eq(listed("gone."), 1);
  harness_sleep_ms(400);
  /* Nothing runs at an expiry: the listing (or the sweeper, whichever
   * comes first) drops the name. */
  ck_assert_int_eq(listed("gone."), 0);
  ck_assert(!indexed("gone.expired l"));

  /* ...and with nobody listing, the sweeper does (sweep.c: a page a
   * second, so 30 names go in one pass) */
  for (int i = 0; i < 30; i++) {
    char name[32];
    snprintf(name, sizeof name, "swept.%d", i);
    lease_fence(name, "{\"ttl_ms\":200}", lease);
  }
  ck_assert(indexed("swept.0 l"));
  int64_t t0 = harness_now_ms();
  int left = 30;
  while (left > 0 && harness_now_ms() - t0 < 10000 * harness_time_scale()) {
    harness_sleep_ms(100);
    left = 0;
    for (int i = 0; i < 30; i++) {
      char member[40];
      snprintf(member, sizeof member, "swept.%d l", i);
      left += indexed(member);
    }
  }
  ck_assert_msg(left == 0, "%d expired names still in the index after 10 s", left);
  printf("list_forgets_the_gone: the sweeper dropped 30 expired names in %lld ms\n",
         (long long)(harness_now_ms() - t0));
}
END_TEST

static void expect_list_bad(const char *query, const char *what) {
  char path[300];
  snprintf(path, sizeof path, "/v1/locks?%s", query);
  harness_resp r = get(path);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
  r = get(path);
  const char *msg = harness_json_str(json_object_get(r.json, "error"), "message");
  ck_assert_msg(msg && strstr(msg, what), "%s: %s does not name %s", path, r.body, what);
  harness_resp_free(&r);
}

START_TEST(list_bad_input) {
  expect_list_bad("limit=0", "limit");
  expect_list_bad("limit=1001", "limit");
  expect_list_bad("limit=ten", "limit");
  expect_list_bad("limit=-1", "limit");
  expect_list_bad("cursor=x", "cursor");
  expect_list_bad("cursor=99999", "cursor");
  expect_list_bad("cursor=0-q-a", "cursor");
  expect_list_bad("prefix=a&cursor=0-l-b", "cursor"); /* a cursor of another prefix */
  expect_list_bad("prefix=a%7Bb", "prefix");
  harness_resp r;
  call("POST", "/v1/locks", "{}", &r);
  ck_assert_int_eq(r.status, 405);
  harness_resp_free(&r);
  call("POST", "/v1/semaphores/s/break", "{}", &r);
  ck_assert_int_eq(r.status, 404); /* only locks break */
  harness_resp_free(&r);
}
END_TEST

START_TEST(inspect_fields) {
  char lease[33];
  int64_t t0 = (int64_t)time(NULL) * 1000;
  lease_fence("insp", "{\"ttl_ms\":60000,\"owner\":\"w1\"}", lease);
  for (int i = 0; i < 3; i++) {
    char body[80];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":60000}", lease);
    harness_resp r;
    call("POST", "/v1/locks/insp/renew", body, &r);
    ck_assert_int_eq(r.status, 200);
    harness_resp_free(&r);
  }
  bg_post w;
  bg_post_start(&w, "/v1/locks/insp/acquire", "{\"wait_ms\":3000}");
  harness_sleep_ms(500);
  harness_resp r = get("/v1/locks/insp");
  int64_t at = harness_json_int(r.json, "acquired_at");
  ck_assert_msg(at >= t0 - 2000 && at <= t0 + 5000, "acquired_at %lld, now %lld: %s",
                (long long)at, (long long)t0, r.body);
  ck_assert_int_eq(harness_json_int(r.json, "renewals"), 3);
  ck_assert_int_eq(harness_json_int(r.json, "waiters"), 1);
  harness_resp_free(&r);
  bg_post_join(&w);
  ck_assert_int_eq(w.r.status, 409);
  harness_resp_free(&w.r);
  r = get("/v1/locks/never-held");
  ck_assert(json_is_null(json_object_get(r.json, "acquired_at")));
  ck_assert(json_is_null(json_object_get(r.json, "renewals")));
  harness_resp_free(&r);
}
END_TEST

START_TEST(break_moves_fence) {
  fkv_start();
  char old[33];
  int64_t f1 = lease_fence("brk", "{\"ttl_ms\":60000,\"owner\":\"stuck-job\"}", old);
  ck_assert_int_eq(fkv_put("k", "brk", f1, "old holder's first write"), 200);
  bg_post w;
  bg_post_start(&w, "/v1/locks/brk/acquire", "{\"wait_ms\":20000,\"owner\":\"next\"}");
  harness_sleep_ms(300);
  harness_resp r;
  call("POST", "/v1/locks/brk/break", NULL, &r);
  int64_t t_break = harness_now_ms();
  ck_assert_msg(r.status == 200 && json_is_true(json_object_get(r.json, "broken")), "%ld %s",
                r.status, r.body);
  ck_assert_str_eq(harness_json_str(r.json, "owner"), "stuck-job");
  int64_t fb = harness_json_int(r.json, "fence");
  ck_assert_msg(fb > f1, "the break's fence %lld is not above the holder's %lld", (long long)fb,
                (long long)f1);
  harness_resp_free(&r);
  bg_post_join(&w);
  ck_assert_msg(w.r.status == 200, "the waiter: %ld %s", w.r.status, w.r.body);
  ck_assert_msg(w.done_ms - t_break < 1000, "the waiter was granted %lld ms after the break",
                (long long)(w.done_ms - t_break));
  int64_t f2 = harness_json_int(w.r.json, "fence");
  ck_assert_msg(f2 > fb, "the next grant's fence %lld is not above the break's %lld",
                (long long)f2, (long long)fb);
  harness_resp_free(&w.r);

  for (int i = 0; i < 2; i++) { /* renew, then release */
    char body[80];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", old);
    call("POST", i ? "/v1/locks/brk/release" : "/v1/locks/brk/renew", body, &r);
    expect_error(&r, 409, "lease_lost");
    const char *msg = harness_json_str(json_object_get(r.json, "error"), "message");
    ck_assert_msg(msg && strstr(msg, "broken by address"), "%s", r.body);
    harness_resp_free(&r);
  }
  ck_assert_int_eq(fkv_put("k", "brk", f2, "the new holder's write"), 200);
  ck_assert_int_eq(fkv_put("k", "brk", f1, "the broken holder, still writing"), 409);

  call("POST", "/v1/locks/free-lock/break", "{}", &r); /* nobody holds it */
  ck_assert_msg(r.status == 200 && json_is_false(json_object_get(r.json, "broken")), "%s", r.body);
  ck_assert(json_is_null(json_object_get(r.json, "owner")));
  int64_t ff = harness_json_int(r.json, "fence");
  harness_resp_free(&r);
  ck_assert_int_gt(lease_fence("free-lock", "{}", old), ff);
  call("POST", "/v1/locks/brk/break", "{\"why\":1}", &r);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
  fkv_stop();
}
END_TEST

/* A renew of lease `lease` of `name`: its status, and the message when
 * `why` must be in it. */
static long renew_says(const char *name, const char *lease, const char *why) {
  char path[120], body[80];
  snprintf(path, sizeof path, "/v1/locks/%s/renew", name);
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  harness_resp r;
  call("POST", path, body, &r);
  long status = r.status;
  const char *msg = harness_json_str(json_object_get(r.json, "error"), "message");
  if (why) ck_assert_msg(msg && strstr(msg, why), "renew does not say '%s': %s", why, r.body);
  harness_resp_free(&r);
  return status;
}

START_TEST(break_with_fence) {
  char held[33], next[33], body[80];
  int64_t f1 = lease_fence("brkf", "{\"ttl_ms\":60000,\"owner\":\"stuck\"}", held);
  snprintf(body, sizeof body, "{\"fence\":%lld}", (long long)f1);
  harness_resp r;
  for (int i = 0; i < 2; i++) { /* the break, then its retry after a lost reply */
    call("POST", "/v1/locks/brkf/break", body, &r);
    ck_assert_msg(r.status == 200, "break %d: %ld %s", i, r.status, r.body);
    if (i == 0) ck_assert_msg(json_is_true(json_object_get(r.json, "broken")), "%s", r.body);
    harness_resp_free(&r);
  }
  ck_assert_int_eq(renew_says("brkf", held, "broken by address"), 409);
  /* a new holder: the same break, sent late once more, leaves it alone */
  int64_t f2 = lease_fence("brkf", "{\"ttl_ms\":60000,\"owner\":\"next\"}", next);
  call("POST", "/v1/locks/brkf/break", body, &r);
  expect_error(&r, 409, "lock_held");
  ck_assert_str_eq(harness_json_str(json_object_get(r.json, "error"), "owner"), "next");
  harness_resp_free(&r);
  ck_assert_int_eq(renew_says("brkf", next, NULL), 200);
  r = get("/v1/locks/brkf");
  ck_assert_msg(json_is_true(json_object_get(r.json, "held")) &&
                    harness_json_int(r.json, "fence") == f2, "%s", r.body);
  harness_resp_free(&r);
  call("POST", "/v1/locks/brkf/break", "{\"fence\":0}", &r);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
  call("POST", "/v1/locks/brkf/break", "{\"fence\":\"1\"}", &r);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
}
END_TEST

START_TEST(whoami_local) {
  harness_resp r = get("/v1/whoami");
  ck_assert_int_eq(r.status, 200);
  ck_assert(json_is_null(json_object_get(r.json, "token")));
  json_t *verbs = json_object_get(r.json, "verbs");
  ck_assert_int_eq(json_array_size(verbs), 5);
  ck_assert_str_eq(json_string_value(json_array_get(verbs, 4)), "admin");
  ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r.json, "prefixes"), 0)), "*");
  harness_resp_free(&r);
}
END_TEST

static double metric(const char *sample) { return harness_metric(harness_picketd_url(P), sample); }

START_TEST(hold_metrics) {
  char lease[33], body[80];
  double released0 = metric("picket_hold_duration_seconds_count{outcome=\"released\"}");
  double sum0 = metric("picket_hold_duration_seconds_sum{outcome=\"released\"}");
  double broken0 = metric("picket_hold_duration_seconds_count{outcome=\"broken\"}");
  lease_fence("hm.old", "{\"ttl_ms\":30000}", lease);
  harness_sleep_ms(1200);
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":30000}", lease);
  harness_resp r;
  call("POST", "/v1/locks/hm.old/renew", body, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  double oldest = metric("picket_lock_oldest_hold_seconds");
  ck_assert_msg(oldest >= 1.1 && oldest < 60, "oldest hold %g s", oldest);

  char other[33];
  lease_fence("hm.busy", "{\"ttl_ms\":30000}", other);
  bg_post w1, w2;
  bg_post_start(&w1, "/v1/locks/hm.busy/acquire", "{\"wait_ms\":2000}");
  bg_post_start(&w2, "/v1/locks/hm.busy/acquire", "{\"wait_ms\":2000}");
  harness_sleep_ms(500);
  ck_assert_int_eq((int)metric("picket_lock_waiters_max"), 2);
  bg_post_join(&w1);
  bg_post_join(&w2);
  harness_resp_free(&w1.r);
  harness_resp_free(&w2.r);

  ck_assert_int_eq(lock_call("hm.old", "release", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq((int)metric("picket_hold_duration_seconds_count{outcome=\"released\"}"),
                   (int)released0 + 1);
  double held = metric("picket_hold_duration_seconds_sum{outcome=\"released\"}") - sum0;
  ck_assert_msg(held >= 1.1 && held < 60, "the release's hold: %g s", held);
  ck_assert_int_eq((int)metric("picket_lock_oldest_hold_seconds"), 0);
  call("POST", "/v1/locks/hm.busy/break", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  ck_assert_int_eq((int)metric("picket_hold_duration_seconds_count{outcome=\"broken\"}"),
                   (int)broken0 + 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("admin");
  TCase *tc = tcase_create("admin");
  tcase_add_unchecked_fixture(tc, setup, stop_both);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, list_pages);
  REDIS_CASE(tc, list_forgets_the_gone);
  if (harness_backend_etcd()) tcase_add_test(tc, etcd_list_drops_the_ended);
  tcase_add_test(tc, list_bad_input);
  tcase_add_test(tc, inspect_fields);
  tcase_add_test(tc, break_moves_fence);
  tcase_add_test(tc, break_with_fence);
  tcase_add_test(tc, whoami_local);
  suite_add_tcase(s, tc);
  /* its own picketd: the oldest-hold gauge names the oldest of all */
  TCase *tm = tcase_create("metrics");
  tcase_add_unchecked_fixture(tm, setup, stop_both);
  tcase_set_timeout(tm, 60);
  tcase_add_test(tm, hold_metrics);
  suite_add_tcase(s, tm);
  return harness_run_suite(s);
}
