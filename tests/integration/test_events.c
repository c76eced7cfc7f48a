/* Integration tests of lock event streams (GET /v1/locks/{name}/events,
 * server/events.c, proto/redis/events.lua) against a real redis-server and
 * real picketd processes.
 *
 * lifecycle: state first, then granted, renewed, released, and a break's
 *   broken (the broken lease's fence and the fence it moved to), each with
 *   the right fence, owner and ttl.
 * expired: a lease that is not renewed is reported expired, with its
 *   fence, within a second of its TTL.
 * other_picketd: a grant and a break made through a second picketd reach
 *   a stream opened on the first (the events go through Redis).
 * unwatched_publishes_nothing: a subscriber of the channel hears nothing
 *   of a lock nobody streams (the scripts publish only while watched).
 * heartbeat_and_hangup: a quiet stream gets heartbeats; a client that
 *   hangs up is noticed while its stream is suspended (the gauge drops).
 * bounds: --max-watchers-per-client gives 429 too_many_watchers, and
 *   --max-watchers 503; a bad name is 400, POST 405, and only locks
 *   have events (a semaphore's path is 404).
 * older_than_state: messages published before a stream's state was read
 *   but delivered after it (made here with PUBLISH: an earlier lease's
 *   grant and release, and the live lease's own grant) are not sent; the
 *   next real events are (a break of the free lock, fence 0, too). A keeper
 *   took such a grant for a loss.
 * redis_restart: when Redis restarts (the subscription is lost, and with it
 *   the events meanwhile), the stream gets a new state, then events again.
 * stops_with_streams_open: SIGTERM ends open streams and picketd stops promptly. */
#include <hiredis/hiredis.h>

#include "picketd_common.h"
#include "sse.h"

static int64_t jint(json_t *d, const char *k) { return json_integer_value(json_object_get(d, k)); }

static int64_t gauge_streams(harness_picketd *p) {
  harness_resp r;
  ck_assert_int_eq(harness_http(harness_picketd_url(p), "GET", "/metrics", NULL, &r), 0);
  const char *at = r.body ? strstr(r.body, "\npicket_event_streams ") : NULL;
  int64_t v = at ? strtoll(at + 22, NULL, 10) : -1;
  harness_resp_free(&r);
  return v;
}

static void setup(void) { setup_default(); }
static void teardown(void) { stop_both(); }

START_TEST(lifecycle) {
  int64_t f0 = acquire_ok("ev1", "{\"ttl_ms\":30000}", NULL); /* a fence before the stream */
  harness_resp r;
  char lease0[33];
  call("GET", "/v1/locks/ev1", NULL, &r);
  harness_resp_free(&r);
  stream s;
  ck_assert_int_eq(stream_open(P, "ev1", &s), 200);
  json_t *d = expect_event(&s, "state", 3000);
  ck_assert(json_is_true(json_object_get(d, "held")));
  ck_assert_int_eq(jint(d, "fence"), f0);
  json_decref(d);
  (void)lease0;
  /* a break of the lease held before the stream opened */
  call("POST", "/v1/locks/ev1/break", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  int64_t moved = harness_json_int(r.json, "fence");
  harness_resp_free(&r);
  d = expect_event(&s, "broken", 2000);
  ck_assert_int_eq(jint(d, "fence"), f0);
  ck_assert_int_eq(jint(d, "next_fence"), moved);
  ck_assert_str_eq(json_string_value(json_object_get(d, "by")), "address loopback");
  json_decref(d);

  char lease[33];
  int64_t f1 = acquire_ok("ev1", "{\"ttl_ms\":20000,\"owner\":\"w 1\"}", lease);
  ck_assert_int_gt(f1, moved);
  d = expect_event(&s, "granted", 2000);
  ck_assert_int_eq(jint(d, "fence"), f1);
  ck_assert_int_eq(jint(d, "ttl_ms"), 20000);
  ck_assert_str_eq(json_string_value(json_object_get(d, "owner")), "w 1");
  ck_assert_str_eq(json_string_value(json_object_get(d, "name")), "ev1");
  ck_assert_int_gt(jint(d, "time"), 1700000000000LL);
  json_decref(d);
  ck_assert_int_eq(lock_call("ev1", "renew", lease, &r), 200);
  harness_resp_free(&r);
  d = expect_event(&s, "renewed", 2000);
  ck_assert_int_eq(jint(d, "fence"), f1);
  json_decref(d);
  ck_assert_int_eq(lock_call("ev1", "release", lease, &r), 200);
  harness_resp_free(&r);
  d = expect_event(&s, "released", 2000);
  ck_assert_int_eq(jint(d, "fence"), f1);
  json_decref(d);
  /* a lease that is not this lock's is none of its events */
  acquire_ok("ev1-other", "{\"ttl_ms\":20000}", NULL);
  char type[32];
  d = next_event(&s, type, 300);
  ck_assert_msg(d == NULL || strcmp(type, "heartbeat") == 0, "an event of another lock: %s", type);
  json_decref(d);
  stream_close(&s);
}
END_TEST

START_TEST(expired) {
  stream s;
  watch(P, "ev2", &s);
  int64_t f = acquire_ok("ev2", "{\"ttl_ms\":300}", NULL);
  json_t *d = expect_event(&s, "granted", 2000);
  int64_t ttl = jint(d, "ttl_ms"); /* 300, or on etcd whole seconds */
  json_decref(d);
  int64_t t0 = harness_now_ms();
  d = expect_event(&s, "expired", 3000 + ttl);
  int64_t after = harness_now_ms() - t0;
  ck_assert_int_eq(jint(d, "fence"), f);
  json_decref(d);
  ck_assert_msg(after >= ttl - 100 && after < (ttl + 1000) * harness_time_scale(),
                "expired %lld ms after a %lld ms grant", (long long)after, (long long)ttl);
  stream_close(&s);
}
END_TEST

START_TEST(other_picketd) {
  harness_picketd *q = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_ptr_nonnull(q);
  stream s;
  watch(P, "ev3", &s);
  harness_resp r;
  ck_assert_int_eq(harness_http(harness_picketd_url(q), "POST", "/v1/locks/ev3/acquire",
                                "{\"ttl_ms\":20000}", &r), 0);
  ck_assert_int_eq(r.status, 200);
  int64_t f = harness_json_int(r.json, "fence");
  harness_resp_free(&r);
  json_t *d = expect_event(&s, "granted", 2000);
  ck_assert_int_eq(jint(d, "fence"), f);
  json_decref(d);
  ck_assert_int_eq(harness_http(harness_picketd_url(q), "POST", "/v1/locks/ev3/break", NULL, &r), 0);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  d = expect_event(&s, "broken", 2000);
  ck_assert_int_eq(jint(d, "fence"), f);
  json_decref(d);
  stream_close(&s);
  harness_picketd_free(q);
}
END_TEST

START_TEST(unwatched_publishes_nothing) {
  redisContext *c = redisConnectUnix(harness_redis_socket(R));
  ck_assert(c && !c->err);
  redisReply *x = redisCommand(c, "SUBSCRIBE picket:{ev4}:events");
  ck_assert(x && x->type == REDIS_REPLY_ARRAY);
  freeReplyObject(x);
  struct timeval t = {0, 300000};
  redisSetTimeout(c, t);
  char lease[33];
  harness_resp r;
  acquire_ok("ev4", "{\"ttl_ms\":20000}", lease);
  ck_assert_int_eq(lock_call("ev4", "renew", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert_int_eq(lock_call("ev4", "release", lease, &r), 200);
  harness_resp_free(&r);
  ck_assert_msg(redisGetReply(c, (void **)&x) != REDIS_OK, "a message while nobody watched");
  redisFree(c);
  /* and once a stream watches it, the same calls publish */
  c = redisConnectUnix(harness_redis_socket(R));
  x = redisCommand(c, "SUBSCRIBE picket:{ev4}:events");
  freeReplyObject(x);
  redisSetTimeout(c, (struct timeval){2, 0});
  stream s;
  watch(P, "ev4", &s);
  acquire_ok("ev4", "{\"ttl_ms\":20000}", NULL);
  ck_assert_int_eq(redisGetReply(c, (void **)&x), REDIS_OK);
  ck_assert_str_eq(x->element[0]->str, "message");
  ck_assert_msg(x->element[2]->str[0] == 'g', "message %s", x->element[2]->str);
  freeReplyObject(x);
  redisFree(c);
  stream_close(&s);
}
END_TEST

START_TEST(older_than_state) {
  char lease[33];
  harness_resp r;
  int64_t f1 = acquire_ok("ev5", "{\"ttl_ms\":30000}", lease);
  ck_assert_int_eq(lock_call("ev5", "release", lease, &r), 200);
  harness_resp_free(&r);
  int64_t f2 = acquire_ok("ev5", "{\"ttl_ms\":30000,\"owner\":\"now\"}", lease);
  stream s;
  ck_assert_int_eq(stream_open(P, "ev5", &s), 200);
  json_t *d = expect_event(&s, "state", 3000);
  ck_assert_int_eq(jint(d, "fence"), f2);
  json_decref(d);
  /* what events.lua would have published for those calls, arriving late */
  redisContext *c = redisConnectUnix(harness_redis_socket(R));
  ck_assert(c && !c->err);
  const char *late[] = {"g %lld 30000 1 old", "r %lld 0 1 ", "g %lld 30000 1 now"};
  long long fences[] = {f1, f1, f2};
  for (int i = 0; i < 3; i++) {
    char msg[64];
    snprintf(msg, sizeof msg, late[i], fences[i]);
    redisReply *x = redisCommand(c, "PUBLISH picket:{ev5}:events %s", msg);
    ck_assert_msg(x && x->type == REDIS_REPLY_INTEGER && x->integer == 1,
                  "picketd is not subscribed to ev5's events");
    freeReplyObject(x);
  }
  redisFree(c);
  ck_assert_int_eq(lock_call("ev5", "release", lease, &r), 200);
  harness_resp_free(&r);
  char type[32];
  d = next_event(&s, type, 2000);
  ck_assert_msg(d != NULL && strcmp(type, "released") == 0 && jint(d, "fence") == f2,
                "after a state with fence %lld the next event is %s with fence %lld",
                (long long)f2, d ? type : "none", d ? (long long)jint(d, "fence") : -1LL);
  json_decref(d);
  /* a break of the free lock carries fence 0: it is placed by the fence it
   * moved the counter to, and is sent */
  call("POST", "/v1/locks/ev5/break", NULL, &r);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  d = expect_event(&s, "broken", 2000);
  ck_assert_int_eq(jint(d, "fence"), 0);
  ck_assert_int_gt(jint(d, "next_fence"), f2);
  json_decref(d);
  stream_close(&s);
}
END_TEST

START_TEST(heartbeat_and_hangup) {
  stop_both();
  const char *args[] = {"--events-heartbeat-ms", "200", NULL};
  start_both(NULL, args);
  stream s;
  watch(P, "ev5", &s);
  json_t *d = expect_event(&s, "heartbeat", 1500);
  ck_assert_int_gt(jint(d, "time"), 1700000000000LL);
  json_decref(d);
  json_decref(expect_event(&s, "heartbeat", 1500));
  ck_assert_int_eq(gauge_streams(P), 1);
  stream_close(&s);
  int64_t t0 = harness_now_ms();
  while (gauge_streams(P) != 0 && harness_now_ms() - t0 < 5000) harness_sleep_ms(20);
  ck_assert_int_eq(gauge_streams(P), 0);
}
END_TEST

START_TEST(bounds) {
  stop_both();
  const char *args[] = {"--max-watchers-per-client", "2", "--max-watchers", "3", NULL};
  start_both(NULL, args);
  stream a, b, c;
  ck_assert_int_eq(stream_open(P, "ev6", &a), 200);
  ck_assert_int_eq(stream_open(P, "ev6", &b), 200);
  harness_resp r;
  call("GET", "/v1/locks/ev6/events", NULL, &r);
  expect_error(&r, 429, "too_many_watchers");
  harness_resp_free(&r);
  stream_close(&b);
  int64_t t0 = harness_now_ms();
  while (gauge_streams(P) != 1 && harness_now_ms() - t0 < 5000) harness_sleep_ms(20);
  watch(P, "ev6b", &c);
  stream_close(&a);
  stream_close(&c);

  call("GET", "/v1/locks/bad%2Fname/events", NULL, &r);
  expect_error(&r, 400, "invalid_argument");
  harness_resp_free(&r);
  call("POST", "/v1/locks/ev6/events", "{}", &r);
  ck_assert_int_eq(r.status, 405);
  harness_resp_free(&r);
  call("GET", "/v1/semaphores/ev6/events", NULL, &r);
  ck_assert_int_eq(r.status, 404);
  harness_resp_free(&r);
}
END_TEST

START_TEST(redis_restart) {
  stream s;
  watch(P, "ev8", &s);
  ck_assert_int_eq(harness_redis_restart(R), 0);
  json_t *d;
  /* Redis: the subscription was lost, so the stream tells the state again.
   * etcd: the watch resumes from the revision after the last it saw and
   * misses nothing, so no state is owed; events go on. */
  if (!harness_backend_etcd()) {
    d = expect_event(&s, "state", 10000);
    ck_assert(json_is_false(json_object_get(d, "held")));
    json_decref(d);
  }
  int64_t f = 0, until = harness_now_ms() + 10000;
  while (f == 0) { /* picketd serves again once the store is back */
    harness_resp r;
    call("POST", "/v1/locks/ev8/acquire", "{\"ttl_ms\":20000}", &r);
    if (r.status == 200) f = harness_json_int(r.json, "fence");
    harness_resp_free(&r);
    ck_assert_msg(f || harness_now_ms() < until, "not served 10 s after the restart");
    if (!f) harness_sleep_ms(100);
  }
  d = expect_event(&s, "granted", 3000);
  ck_assert_int_eq(jint(d, "fence"), f);
  json_decref(d);
  stream_close(&s);
}
END_TEST

START_TEST(stops_with_streams_open) {
  stream s;
  watch(P, "ev7", &s);
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(harness_picketd_stop(P, SIGTERM), 0);
  int64_t took = harness_now_ms() - t0;
  ck_assert_msg(took < 5000, "picketd took %lld ms to stop with a stream open", (long long)took);
  char type[32];
  json_t *d = next_event(&s, type, 2000); /* the stream ended: EOF, no event */
  ck_assert_ptr_null(d);
  stream_close(&s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("events");
  TCase *tc = tcase_create("events");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, lifecycle);
  tcase_add_test(tc, expired);
  tcase_add_test(tc, other_picketd);
  REDIS_CASE(tc, unwatched_publishes_nothing);
  tcase_add_test(tc, heartbeat_and_hangup);
  tcase_add_test(tc, bounds);
  REDIS_CASE(tc, older_than_state);
  tcase_add_test(tc, redis_restart);
  tcase_add_test(tc, stops_with_streams_open);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
