/* Integration tests of semaphores (/v1/semaphores, proto/redis/semaphore.lua)
 * against a real redis-server and picketd.
 *
 * n_permits: limit 3 grants permits 0, 1, 2 and no fourth (409
 *   semaphore_full with retry_after_ms); GET lists them (no lease ids); a
 *   released permit's slot is the next one granted; a same-lease retry
 *   gets its own permit back.
 * crashed_holder_back_at_ttl: a permit never released comes back at its TTL,
 *   with a higher fence for its slot.
 * per_slot_fences_in_fenced_kv: a real fenced-kv, written under each
 *   grant's fence_lock, refuses a paused permit holder's late write once
 *   the slot went to another holder, and keeps other slots apart.
 * limit_mismatch: another limit while permits live is 409 limit_mismatch
 *   naming the live one; once all are gone a new limit is taken.
 * waiters_fifo: waiters are granted in arrival order, each on a release.
 * renew_and_release: renew moves the TTL and keeps permit and fence; a
 *   lease that is not a holder's gets lease_lost; release frees the slot.
 * lock_delay_and_cap: a permit's lock-delay keeps its slot after an expiry;
 *   max_hold_ms cuts its renewals.
 * apart_from_locks: a lock and a semaphore of one name do not meet.
 * bad_input: a missing or bad limit, a name too long for a fence lock, bad
 *   fields: 400 naming them, nothing changed; --max-semaphore-limit. */
#include "picketd_common.h"

static void setup(void) { setup_default(); }

static harness_resp sem(const char *method, const char *name, const char *action,
                       const char *body) {
  return family_call("semaphores", method, name, action, body);
}

typedef struct {
  char lease[33];
  int64_t permit, fence;
  char fence_lock[210];
} permit;

/* The permit a 200 acquire reply grants, checked. */
static permit permit_of(const char *name, harness_resp *r) {
  permit p;
  snprintf(p.lease, sizeof p.lease, "%s", harness_json_str(r->json, "lease"));
  p.permit = harness_json_int(r->json, "permit");
  p.fence = harness_json_int(r->json, "fence");
  snprintf(p.fence_lock, sizeof p.fence_lock, "%s", harness_json_str(r->json, "fence_lock"));
  char want[210];
  snprintf(want, sizeof want, "%s:permit:%lld", name, (long long)p.permit);
  ck_assert_str_eq(p.fence_lock, want);
  ck_assert_str_eq(harness_json_str(r->json, "semaphore"), name);
  return p;
}

static permit take(const char *name, const char *body) {
  harness_resp r = sem("POST", name, "acquire", body);
  ck_assert_msg(r.status == 200, "acquire %s %s: %ld %s", name, body, r.status, r.body);
  permit p = permit_of(name, &r);
  harness_resp_free(&r);
  return p;
}

/* take(), once a permit is free: polls while the semaphore is full (a
 * holder's TTL runs out on etcd up to its leader's next sweep later, and in
 * whole seconds), for at most bound_ms. */
static permit take_within(const char *name, const char *body, int64_t bound_ms) {
  int64_t until = harness_now_ms() + bound_ms;
  for (;;) {
    harness_resp r = sem("POST", name, "acquire", body);
    if (r.status == 200) {
      permit p = permit_of(name, &r);
      harness_resp_free(&r);
      return p;
    }
    expect_error(&r, 409, "semaphore_full");
    harness_resp_free(&r);
    ck_assert_msg(harness_now_ms() < until, "%s still full after %lld ms", name, (long long)bound_ms);
    harness_sleep_ms(50);
  }
}

static long give_back(const char *name, const char *lease) {
  return family_release("semaphores", name, lease);
}

START_TEST(n_permits) {
  permit p[3];
  for (int i = 0; i < 3; i++) p[i] = take("s1", "{\"limit\":3,\"ttl_ms\":20000,\"owner\":\"w\"}");
  ck_assert(p[0].permit != p[1].permit && p[1].permit != p[2].permit && p[0].permit != p[2].permit);
  for (int i = 0; i < 3; i++) ck_assert(p[i].permit >= 0 && p[i].permit < 3);
  harness_resp r = sem("POST", "s1", "acquire", "{\"limit\":3,\"ttl_ms\":20000}");
  expect_error(&r, 409, "semaphore_full");
  int64_t ra = harness_json_int(json_object_get(r.json, "error"), "retry_after_ms");
  ck_assert_msg(ra > 0 && ra <= 20000, "retry_after_ms %lld", (long long)ra);
  harness_resp_free(&r);

  r = sem("GET", "s1", NULL, NULL);
  ck_assert_msg(r.status == 200, "%s", r.body);
  ck_assert_int_eq(harness_json_int(r.json, "limit"), 3);
  ck_assert_int_eq(harness_json_int(r.json, "held"), 3);
  json_t *list = json_object_get(r.json, "permits");
  ck_assert_int_eq(json_array_size(list), 3);
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "owner")), "w");
  ck_assert_msg(strstr(r.body, p[0].lease) == NULL, "GET shows a lease id: %s", r.body);
  harness_resp_free(&r);

  /* a same-lease retry: its own permit and fence */
  char body[120];
  snprintf(body, sizeof body, "{\"limit\":3,\"ttl_ms\":20000,\"lease\":\"%s\"}", p[1].lease);
  permit again = take("s1", body);
  ck_assert_int_eq(again.permit, p[1].permit);
  ck_assert_int_eq(again.fence, p[1].fence);

  ck_assert_int_eq(give_back("s1", p[1].lease), 200);
  permit next = take("s1", "{\"limit\":3,\"ttl_ms\":20000}");
  ck_assert_int_eq(next.permit, p[1].permit);
  ck_assert_msg(next.fence > p[1].fence, "slot %lld: fence %lld after %lld", (long long)next.permit,
                (long long)next.fence, (long long)p[1].fence);
}
END_TEST

START_TEST(crashed_holder_back_at_ttl) {
  permit a = take("s2", "{\"limit\":1,\"ttl_ms\":300}");
  harness_resp r = sem("POST", "s2", "acquire", "{\"limit\":1,\"ttl_ms\":300}");
  expect_error(&r, 409, "semaphore_full");
  harness_resp_free(&r);
  /* the holder "crashed": no release, no renew; back at its TTL */
  permit b = take_within("s2", "{\"limit\":1,\"ttl_ms\":300}", 5000);
  ck_assert_int_eq(b.permit, 0);
  ck_assert_msg(b.fence > a.fence, "fence %lld after %lld", (long long)b.fence, (long long)a.fence);
}
END_TEST

START_TEST(per_slot_fences_in_fenced_kv) {
  fkv_start();
  /* two report builders, each writing its own output under its permit */
  permit a = take("reports", "{\"limit\":2,\"ttl_ms\":400}");
  permit b = take("reports", "{\"limit\":2,\"ttl_ms\":20000}");
  ck_assert_int_eq(fkv_put("out-a", a.fence_lock, a.fence, "a1"), 200);
  ck_assert_int_eq(fkv_put("out-b", b.fence_lock, b.fence, "b1"), 200);
  /* a pauses past its TTL; its slot goes to c */
  permit c = take_within("reports", "{\"limit\":2,\"ttl_ms\":20000}", 5000);
  ck_assert_int_eq(c.permit, a.permit);
  ck_assert_int_eq(fkv_put("out-a", c.fence_lock, c.fence, "c1"), 200);
  /* a wakes up and writes with its old fence: refused */
  ck_assert_int_eq(fkv_put("out-a", a.fence_lock, a.fence, "a2"), 409);
  /* b's slot is its own: its fence is still good */
  ck_assert_int_eq(fkv_put("out-b", b.fence_lock, b.fence, "b2"), 200);
  fkv_stop();
}
END_TEST

START_TEST(limit_mismatch) {
  permit a = take("s3", "{\"limit\":2,\"ttl_ms\":20000}");
  harness_resp r = sem("POST", "s3", "acquire", "{\"limit\":5,\"ttl_ms\":20000}");
  expect_error(&r, 409, "limit_mismatch");
  ck_assert_int_eq(harness_json_int(json_object_get(r.json, "error"), "limit"), 2);
  harness_resp_free(&r);
  r = sem("GET", "s3", NULL, NULL);
  ck_assert_int_eq(harness_json_int(r.json, "held"), 1); /* nothing was granted */
  harness_resp_free(&r);
  ck_assert_int_eq(give_back("s3", a.lease), 200);
  permit b = take("s3", "{\"limit\":5,\"ttl_ms\":20000}");
  ck_assert_int_eq(b.permit, 0);
  r = sem("GET", "s3", NULL, NULL);
  ck_assert_int_eq(harness_json_int(r.json, "limit"), 5);
  harness_resp_free(&r);
}
END_TEST

static int64_t waiters_now(const char *name) {
  harness_resp r = sem("GET", name, NULL, NULL);
  int64_t n = harness_json_int(r.json, "waiters");
  harness_resp_free(&r);
  return n;
}

START_TEST(waiters_fifo) {
  permit a = take("s4", "{\"limit\":1,\"ttl_ms\":20000}");
  bg_post w1, w2;
  const char *wait = "{\"limit\":1,\"ttl_ms\":20000,\"wait_ms\":15000}";
  bg_post_start(&w1, "/v1/semaphores/s4/acquire", wait);
  while (waiters_now("s4") < 1) harness_sleep_ms(10);
  bg_post_start(&w2, "/v1/semaphores/s4/acquire", wait);
  while (waiters_now("s4") < 2) harness_sleep_ms(10);
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(give_back("s4", a.lease), 200);
  bg_post_join(&w1);
  ck_assert_msg(w1.r.status == 200, "first waiter: %ld %s", w1.r.status, w1.r.body);
  ck_assert_msg(w1.done_ms - t0 < 2000 * harness_time_scale(), "woken %lld ms after the release",
                (long long)(w1.done_ms - t0));
  ck_assert_int_eq(waiters_now("s4"), 1); /* the second still waits */
  ck_assert_int_eq(give_back("s4", harness_json_str(w1.r.json, "lease")), 200);
  bg_post_join(&w2);
  ck_assert_msg(w2.r.status == 200, "second waiter: %ld %s", w2.r.status, w2.r.body);
  ck_assert_int_gt(harness_json_int(w2.r.json, "fence"), harness_json_int(w1.r.json, "fence"));
  harness_resp_free(&w1.r);
  harness_resp_free(&w2.r);
}
END_TEST

START_TEST(renew_and_release) {
  permit a = take("s5", "{\"limit\":2,\"ttl_ms\":500}");
  char body[120];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", a.lease);
  harness_resp r = sem("POST", "s5", "renew", body);
  ck_assert_msg(r.status == 200, "%s", r.body);
  ck_assert_int_eq(harness_json_int(r.json, "permit"), a.permit);
  ck_assert_int_eq(harness_json_int(r.json, "fence"), a.fence);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), 20000);
  ck_assert_str_eq(harness_json_str(r.json, "fence_lock"), a.fence_lock);
  harness_resp_free(&r);
  /* renewals of one lease at once: every one takes */
  ck_assert_int_eq(calls_at_once_ok("/v1/semaphores/s5/renew", body, 8, 4), 32);
  harness_sleep_ms(700); /* past the first TTL: the renewal holds it */
  r = sem("GET", "s5", NULL, NULL);
  ck_assert_int_eq(harness_json_int(r.json, "held"), 1);
  harness_resp_free(&r);
  r = sem("POST", "s5", "renew", "{\"lease\":\"0123456789abcdef0123456789abcdef\"}");
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  ck_assert_int_eq(give_back("s5", "0123456789abcdef0123456789abcdef"), 409);
  ck_assert_int_eq(give_back("s5", a.lease), 200);
  ck_assert_int_eq(give_back("s5", a.lease), 409);
  r = sem("GET", "s5", NULL, NULL);
  ck_assert_int_eq(harness_json_int(r.json, "held"), 0);
  ck_assert_int_eq(harness_json_int(r.json, "limit"), 0);
  harness_resp_free(&r);
}
END_TEST

START_TEST(lock_delay_and_cap) {
  take("s6", "{\"limit\":1,\"ttl_ms\":200,\"lock_delay_ms\":1500}");
  /* expired (on etcd: its whole second, and the leader's sweep), its delay
   * running: GET says so */
  int64_t until = harness_now_ms() + 5000;
  harness_resp r;
  for (;;) {
    r = sem("GET", "s6", NULL, NULL);
    json_t *p0 = json_array_get(json_object_get(r.json, "permits"), 0);
    if (p0 && harness_json_int(p0, "ttl_ms") == 0) {
      ck_assert_msg(harness_json_int(p0, "lock_delay_ms") > 0, "%s", r.body);
      break;
    }
    ck_assert_msg(harness_now_ms() < until, "no permit in its delay: %s", r.body);
    harness_resp_free(&r);
    harness_sleep_ms(50);
  }
  harness_resp_free(&r);
  r = sem("POST", "s6", "acquire", "{\"limit\":1,\"ttl_ms\":200}");
  expect_error(&r, 409, "semaphore_full"); /* expired, but its delay keeps the slot */
  harness_resp_free(&r);

  /* the cap cuts the TTL (etcd's leases are whole seconds, at least 1 s) */
  int64_t cap = harness_backend_etcd() ? 3000 : 800;
  char body[120];
  snprintf(body, sizeof body, "{\"limit\":1,\"ttl_ms\":5000,\"max_hold_ms\":%lld}", (long long)cap);
  r = sem("POST", "s7", "acquire", body);
  ck_assert_int_eq(harness_json_int(r.json, "ttl_ms"), cap);
  harness_resp_free(&r);
}
END_TEST

START_TEST(apart_from_locks) {
  char lease[33];
  int64_t lf = acquire_ok("both", "{\"ttl_ms\":20000}", lease);
  permit s = take("both", "{\"limit\":1,\"ttl_ms\":20000}");
  ck_assert_int_gt(lf, 0);
  ck_assert_int_eq(s.permit, 0);
  harness_resp r;
  ck_assert_int_eq(lock_call("both", "release", s.lease, &r), 409); /* a permit is no lock lease */
  harness_resp_free(&r);
  ck_assert_int_eq(give_back("both", lease), 409);
  ck_assert_int_eq(give_back("both", s.lease), 200);
  ck_assert_int_eq(lock_call("both", "release", lease, &r), 200);
  harness_resp_free(&r);
}
END_TEST

static void expect_bad(const char *name, const char *body, const char *field) {
  char path[300];
  snprintf(path, sizeof path, "/v1/semaphores/%s/acquire", name);
  expect_bad_field(path, body, field);
}

START_TEST(bad_input) {
  expect_bad("bad", "{}", "limit");
  expect_bad("bad", "{\"limit\":0}", "limit");
  expect_bad("bad", "{\"limit\":-1}", "limit");
  expect_bad("bad", "{\"limit\":\"3\"}", "limit");
  expect_bad("bad", "{\"limit\":4097}", "limit"); /* --max-semaphore-limit 4096 */
  expect_bad("bad", "{\"limit\":2,\"lock_delay_ms\":-5}", "lock_delay_ms");
  expect_bad("bad", "{\"limit\":2,\"max_hold_ms\":1.5}", "max_hold_ms");
  expect_bad("bad", "{\"limit\":2,\"mode\":\"read\"}", "mode");
  char name[200];
  memset(name, 'n', 181);
  name[181] = '\0';
  expect_bad(name, "{\"limit\":2}", "180");
  name[180] = '\0';
  take(name, "{\"limit\":4096,\"ttl_ms\":1000}"); /* 180 bytes and a 4-digit slot fit */
  harness_resp r = sem("GET", "bad", NULL, NULL);
  ck_assert_msg(r.status == 200 && harness_json_int(r.json, "held") == 0, "%s", r.body);
  harness_resp_free(&r);
  r = sem("POST", "bad", "frobnicate", "{}");
  ck_assert_int_eq(r.status, 404);
  harness_resp_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("semaphore");
  TCase *tc = tcase_create("semaphore");
  tcase_add_unchecked_fixture(tc, setup, stop_both);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, n_permits);
  tcase_add_test(tc, crashed_holder_back_at_ttl);
  tcase_add_test(tc, per_slot_fences_in_fenced_kv);
  tcase_add_test(tc, limit_mismatch);
  tcase_add_test(tc, waiters_fifo);
  tcase_add_test(tc, renew_and_release);
  tcase_add_test(tc, lock_delay_and_cap);
  tcase_add_test(tc, apart_from_locks);
  tcase_add_test(tc, bad_input);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
