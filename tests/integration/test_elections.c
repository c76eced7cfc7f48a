/* Integration tests of elections (/v1/elections, docs/elections.md) against
 * a real store (Redis, or etcd under PICKET_TEST_BACKEND=etcd) and picketd.
 *
 * campaign_and_leader: a campaign wins the term (the grant's fence) with
 *   its value; GET shows the leader (never its lease); a second campaign
 *   is 409 leader_exists with when to retry.
 * resign_hands_over: a candidate waiting with wait_ms is counted in GET's
 *   `candidates` and leads at once when the leader resigns (not at the
 *   TTL), with a higher term; a resign of a lease that leads nothing is
 *   409 lease_lost.
 * proclaim: the leader's value changes and its term stays; null clears
 *   it; the TTL is the lease's own unless given; a lease that does not
 *   lead is refused and changes nothing.
 * terms_increase_and_namespaces: terms strictly increase across leaders;
 *   an election and a lock of the same name never block each other.
 * observe: the stream starts with the leader now, then a `leader` event
 *   for a proclaim, `leader: null` for a resign, and the next leader.
 * break_moves_term: an operator's break ends the leader's lease (its
 *   renew is lease_lost) and the next term is above the broken one.
 * listing: GET /v1/locks lists an election as kind "election" by its name;
 *   /metrics counts the election endpoints apart.
 * deposed_leader_in_fenced_kv: a leader that paused past its TTL writes
 *   with its term after the next leader did: fenced-kv refuses it.
 * bad_input: a value too long or with control characters, a name too
 *   long, a lock's member, a proclaim without a value: 400. */
#include "picketd_common.h"
#include "sse.h"

static void setup(void) { setup_default(); }

static harness_resp el(const char *method, const char *name, const char *action,
                       const char *body) {
  return family_call("elections", method, name, action, body);
}

typedef struct {
  char lease[33];
  int64_t term;
} leadership;

static leadership win(const char *name, const char *body) {
  leadership l;
  harness_resp r = el("POST", name, "campaign", body);
  ck_assert_msg(r.status == 200, "campaign %s %s: %ld %s", name, body, r.status, r.body);
  snprintf(l.lease, sizeof l.lease, "%s", harness_json_str(r.json, "lease"));
  l.term = harness_json_int(r.json, "term");
  ck_assert_str_eq(harness_json_str(r.json, "election"), name);
  ck_assert_int_gt(l.term, 0);
  harness_resp_free(&r);
  return l;
}

static long lease_call(const char *name, const char *action, const char *lease) {
  char body[80];
  snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
  harness_resp r = el("POST", name, action, body);
  long st = r.status;
  harness_resp_free(&r);
  return st;
}

/* GET's leader member must be null (want_term 0) or lead with want_term. */
static json_t *leader_now(const char *name, harness_resp *r) {
  *r = el("GET", name, NULL, NULL);
  ck_assert_msg(r->status == 200, "%s", r->body);
  return json_object_get(r->json, "leader");
}

START_TEST(campaign_and_leader) {
  leadership a = win("sched", "{\"ttl_ms\":20000,\"value\":\"10.0.0.1:8080\",\"owner\":\"node-a\"}");
  harness_resp r;
  json_t *l = leader_now("sched", &r);
  ck_assert_msg(json_is_object(l), "%s", r.body);
  ck_assert_int_eq(harness_json_int(l, "term"), a.term);
  ck_assert_str_eq(harness_json_str(l, "value"), "10.0.0.1:8080");
  ck_assert_str_eq(harness_json_str(l, "owner"), "node-a");
  ck_assert_int_gt(harness_json_int(l, "since"), 1700000000000LL);
  ck_assert_int_gt(harness_json_int(l, "ttl_ms"), 0);
  ck_assert_int_eq(harness_json_int(r.json, "term"), a.term);
  ck_assert_msg(strstr(r.body, a.lease) == NULL, "GET shows the lease: %s", r.body);
  harness_resp_free(&r);
  r = el("POST", "sched", "campaign", "{\"ttl_ms\":20000,\"value\":\"10.0.0.2:8080\"}");
  expect_error(&r, 409, "leader_exists");
  json_t *e = json_object_get(r.json, "error");
  ck_assert_int_gt(harness_json_int(e, "retry_after_ms"), 0);
  ck_assert_str_eq(harness_json_str(e, "owner"), "node-a");
  harness_resp_free(&r);
  /* the same lease again: the same term (a retry after a lost reply), and
   * the value its campaign says, as the reply says */
  char body[160];
  snprintf(body, sizeof body, "{\"ttl_ms\":20000,\"lease\":\"%s\",\"value\":\"10.0.0.9:8080\"}",
           a.lease);
  leadership again = win("sched", body);
  ck_assert_int_eq(again.term, a.term);
  l = leader_now("sched", &r);
  ck_assert_str_eq(harness_json_str(l, "value"), "10.0.0.9:8080");
  harness_resp_free(&r);
  snprintf(body, sizeof body, "{\"ttl_ms\":20000,\"lease\":\"%s\"}", a.lease);
  again = win("sched", body);
  l = leader_now("sched", &r);
  ck_assert_msg(json_is_null(json_object_get(l, "value")), "a retry without a value: %s", r.body);
  harness_resp_free(&r);
  ck_assert_int_eq(lease_call("sched", "resign", a.lease), 200);
  l = leader_now("sched", &r);
  ck_assert_msg(json_is_null(l), "%s", r.body);
  harness_resp_free(&r);
}
END_TEST

START_TEST(resign_hands_over) {
  leadership a = win("handover", "{\"ttl_ms\":20000}");
  bg_post b;
  bg_post_start(&b, "/v1/elections/handover/campaign",
                "{\"ttl_ms\":20000,\"wait_ms\":15000,\"value\":\"b\"}");
  harness_resp r;
  for (int64_t t0 = harness_now_ms(); harness_now_ms() - t0 < 5000; harness_sleep_ms(10)) {
    r = el("GET", "handover", NULL, NULL);
    int64_t n = harness_json_int(r.json, "candidates");
    harness_resp_free(&r);
    if (n == 1) break;
  }
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(lease_call("handover", "resign", a.lease), 200);
  bg_post_join(&b);
  ck_assert_msg(b.r.status == 200, "the waiting candidate: %ld %s", b.r.status, b.r.body);
  /* at once, not at the leader's TTL (20 s) */
  ck_assert_msg(b.done_ms - t0 < 2000 * harness_time_scale(), "led %lld ms after the resign",
                (long long)(b.done_ms - t0));
  ck_assert_int_gt(harness_json_int(b.r.json, "term"), a.term);
  ck_assert_str_eq(harness_json_str(b.r.json, "value"), "b");
  ck_assert_int_eq(lease_call("handover", "resign", a.lease), 409);
  ck_assert_int_eq(lease_call("handover", "resign", harness_json_str(b.r.json, "lease")), 200);
  harness_resp_free(&b.r);
}
END_TEST

START_TEST(proclaim) {
  leadership a = win("pro", "{\"ttl_ms\":7000,\"value\":\"v1\"}");
  char body[200];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"value\":\"v2\"}", a.lease);
  harness_resp r = el("POST", "pro", "proclaim", body);
  ck_assert_msg(r.status == 200 && harness_json_int(r.json, "term") == a.term &&
                    strcmp(harness_json_str(r.json, "value"), "v2") == 0 &&
                    harness_json_int(r.json, "ttl_ms") == 7000,
                "%s", r.body);
  harness_resp_free(&r);
  json_t *l = leader_now("pro", &r);
  ck_assert_str_eq(harness_json_str(l, "value"), "v2");
  ck_assert_int_eq(harness_json_int(l, "term"), a.term);
  harness_resp_free(&r);
  /* null clears it; ttl_ms renews with another TTL */
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"value\":null,\"ttl_ms\":9000}", a.lease);
  r = el("POST", "pro", "proclaim", body);
  ck_assert_msg(r.status == 200 && json_is_null(json_object_get(r.json, "value")) &&
                    harness_json_int(r.json, "ttl_ms") == 9000,
                "%s", r.body);
  harness_resp_free(&r);
  l = leader_now("pro", &r);
  ck_assert_msg(json_is_null(json_object_get(l, "value")), "%s", r.body);
  harness_resp_free(&r);
  /* a lease that does not lead proclaims nothing */
  r = el("POST", "pro", "proclaim",
         "{\"lease\":\"0123456789abcdef0123456789abcdef\",\"value\":\"usurper\"}");
  expect_error(&r, 409, "lease_lost");
  harness_resp_free(&r);
  l = leader_now("pro", &r);
  ck_assert_msg(json_is_null(json_object_get(l, "value")), "%s", r.body);
  harness_resp_free(&r);
  /* renew keeps the value */
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"value\":\"v3\"}", a.lease);
  r = el("POST", "pro", "proclaim", body);
  harness_resp_free(&r);
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":5000}", a.lease);
  r = el("POST", "pro", "renew", body);
  ck_assert_msg(r.status == 200 && harness_json_int(r.json, "term") == a.term, "%s", r.body);
  harness_resp_free(&r);
  /* renewals of the leader's lease at once: every one takes */
  ck_assert_int_eq(calls_at_once_ok("/v1/elections/pro/renew", body, 8, 4), 32);
  l = leader_now("pro", &r);
  ck_assert_str_eq(harness_json_str(l, "value"), "v3");
  harness_resp_free(&r);
}
END_TEST

START_TEST(terms_increase_and_namespaces) {
  int64_t last = 0;
  for (int i = 0; i < 3; i++) {
    leadership l = win("terms", "{\"ttl_ms\":20000}");
    ck_assert_msg(l.term > last, "term %lld after %lld", (long long)l.term, (long long)last);
    last = l.term;
    ck_assert_int_eq(lease_call("terms", "resign", l.lease), 200);
  }
  /* a lock named like the election is another thing */
  leadership e = win("shared-name", "{\"ttl_ms\":20000}");
  char lease[33];
  acquire_ok("shared-name", "{\"ttl_ms\":20000}", lease);
  ck_assert_int_eq(family_release("locks", "shared-name", lease), 200);
  ck_assert_int_eq(lease_call("shared-name", "resign", e.lease), 200);
}
END_TEST

static int64_t jint(json_t *d, const char *k) { return json_integer_value(json_object_get(d, k)); }

START_TEST(observe) {
  leadership a = win("obs", "{\"ttl_ms\":20000,\"value\":\"first\",\"owner\":\"a\"}");
  stream s;
  ck_assert_int_eq(stream_open_path(P, "/v1/elections/obs/observe", &s), 200);
  json_t *d = expect_event(&s, "leader", 3000);
  json_t *l = json_object_get(d, "leader");
  ck_assert_str_eq(harness_json_str(d, "election"), "obs");
  ck_assert_int_eq(jint(l, "term"), a.term);
  ck_assert_str_eq(harness_json_str(l, "value"), "first");
  json_decref(d);
  char body[200];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"value\":\"second\"}", a.lease);
  harness_resp r = el("POST", "obs", "proclaim", body);
  harness_resp_free(&r);
  d = expect_event(&s, "leader", 5000);
  l = json_object_get(d, "leader");
  ck_assert_int_eq(jint(l, "term"), a.term);
  ck_assert_str_eq(harness_json_str(l, "value"), "second");
  json_decref(d);
  ck_assert_int_eq(lease_call("obs", "resign", a.lease), 200);
  d = expect_event(&s, "leader", 5000);
  ck_assert_msg(json_is_null(json_object_get(d, "leader")), "after a resign: a leader");
  ck_assert_int_eq(jint(d, "term"), a.term);
  json_decref(d);
  leadership b = win("obs", "{\"ttl_ms\":20000,\"owner\":\"b\"}");
  d = expect_event(&s, "leader", 5000);
  l = json_object_get(d, "leader");
  ck_assert_int_eq(jint(l, "term"), b.term);
  ck_assert_str_eq(harness_json_str(l, "owner"), "b");
  ck_assert_msg(json_is_null(json_object_get(l, "value")), "b proclaimed nothing");
  json_decref(d);
  /* a renewal changes nothing a stream shows */
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", b.lease);
  r = el("POST", "obs", "renew", body);
  harness_resp_free(&r);
  char type[32];
  d = next_event(&s, type, 1500);
  ck_assert_msg(d == NULL || strcmp(type, "heartbeat") == 0, "a renewal sent %s", type);
  json_decref(d);
  stream_close(&s);
  /* a lock's path for events is not an election's */
  r = el("GET", "obs", "events", NULL);
  expect_error(&r, 404, "not_found");
  harness_resp_free(&r);
}
END_TEST

START_TEST(break_moves_term) {
  leadership a = win("brk", "{\"ttl_ms\":20000}");
  harness_resp r = el("POST", "brk", "break", NULL);
  ck_assert_msg(r.status == 200 && json_is_true(json_object_get(r.json, "broken")) &&
                    harness_json_int(r.json, "term") > a.term,
                "%s", r.body);
  int64_t moved = harness_json_int(r.json, "term");
  harness_resp_free(&r);
  ck_assert_int_eq(lease_call("brk", "renew", a.lease), 409);
  leadership b = win("brk", "{\"ttl_ms\":20000}");
  ck_assert_int_gt(b.term, moved);
}
END_TEST

START_TEST(listing) {
  win("listed.one", "{\"ttl_ms\":20000,\"owner\":\"o\"}");
  harness_resp r;
  call("GET", "/v1/locks?prefix=listed.", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  json_t *locks = json_object_get(r.json, "locks");
  ck_assert_msg(json_array_size(locks) == 1, "%s", r.body);
  json_t *e = json_array_get(locks, 0);
  ck_assert_str_eq(harness_json_str(e, "kind"), "election");
  ck_assert_str_eq(harness_json_str(e, "name"), "listed.one");
  harness_resp_free(&r);
  call("GET", "/metrics", NULL, &r);
  ck_assert_msg(r.body && strstr(r.body, "endpoint=\"election_campaign\",status=\"200\"") &&
                    strstr(r.body, "endpoint=\"election_resign\",status=\"200\""),
                "no election endpoints in /metrics");
  harness_resp_free(&r);
}
END_TEST

START_TEST(deposed_leader_in_fenced_kv) {
  fkv_start();
  leadership old = win("scheduler", "{\"ttl_ms\":1000}");
  ck_assert_int_eq(fkv_put("next-run", "scheduler", old.term, "old"), 200);
  /* the old leader pauses past its TTL; the next one is elected... */
  harness_resp r = el("POST", "scheduler", "campaign", "{\"ttl_ms\":20000,\"wait_ms\":10000}");
  ck_assert_msg(r.status == 200, "%s", r.body);
  int64_t term = harness_json_int(r.json, "term");
  harness_resp_free(&r);
  ck_assert_int_gt(term, old.term);
  ck_assert_int_eq(fkv_put("next-run", "scheduler", term, "new"), 200);
  /* ...and the old leader wakes and writes: refused */
  ck_assert_int_eq(fkv_put("next-run", "scheduler", old.term, "old again"), 409);
  ck_assert_int_eq(lease_call("scheduler", "renew", old.lease), 409);
  fkv_stop();
}
END_TEST

START_TEST(bad_input) {
  char big[4200 + 40];
  int n = snprintf(big, sizeof big, "{\"value\":\"");
  memset(big + n, 'v', 4097);
  snprintf(big + n + 4097, sizeof big - (size_t)n - 4097, "\"}");
  expect_bad_field("/v1/elections/bad/campaign", big, "value");
  expect_bad_field("/v1/elections/bad/campaign", "{\"value\":\"a\\nb\"}", "value");
  expect_bad_field("/v1/elections/bad/campaign", "{\"value\":7}", "value");
  expect_bad_field("/v1/elections/bad/campaign", "{\"lock_delay_ms\":10}", "lock_delay_ms");
  expect_bad_field("/v1/elections/bad/proclaim", "{\"lease\":\"0123456789abcdef0123456789abcdef\"}",
                   "value");
  char name[200], path[300];
  memset(name, 'n', 198);
  name[198] = '\0';
  snprintf(path, sizeof path, "/v1/elections/%s/campaign", name);
  expect_bad_field(path, "{}", "197");
  harness_resp r = el("POST", "bad", "acquire", "{}");
  expect_error(&r, 404, "not_found");
  harness_resp_free(&r);
  /* the longest value is fine, and nothing above changed anything */
  json_t *l = leader_now("bad", &r);
  ck_assert_msg(json_is_null(l) && harness_json_int(r.json, "term") == 0, "%s", r.body);
  harness_resp_free(&r);
  memset(big + n, 'v', 4096);
  snprintf(big + n + 4096, sizeof big - (size_t)n - 4096, "\"}");
  win("bad", big);
}
END_TEST

int main(void) {
  Suite *s = suite_create("elections");
  TCase *tc = tcase_create("elections");
  tcase_add_unchecked_fixture(tc, setup, stop_both);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, campaign_and_leader);
  tcase_add_test(tc, resign_hands_over);
  tcase_add_test(tc, proclaim);
  tcase_add_test(tc, terms_increase_and_namespaces);
  tcase_add_test(tc, observe);
  tcase_add_test(tc, break_moves_term);
  tcase_add_test(tc, listing);
  tcase_add_test(tc, deposed_leader_in_fenced_kv);
  tcase_add_test(tc, bad_input);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
