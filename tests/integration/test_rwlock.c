/* Integration tests of read/write locks (/v1/rwlocks, proto/redis/rwlock.lua)
 * against a real redis-server and picketd.
 *
 * readers_share: reads are granted together, with the fence of the write
 *   epoch they read; GET lists them (no lease ids).
 * writer_excludes: a write waits for the readers, a read for the writer;
 *   a write's fence is above every earlier grant's; a read after it reads
 *   its epoch (the same fence).
 * writer_not_starved: with a writer waiting, new readers are refused
 *   (lock_held, "a writer is waiting"), the writer is granted when the
 *   readers it waited for leave, and a reader that waited gets in after it.
 * writer_gives_up: a writer whose wait ends lets readers in again.
 * writer_hangs_up: a waiting writer whose client goes away stops keeping
 *   readers out at once, not at the end of the wait it asked for.
 * stale_writer_in_fenced_kv: a real fenced-kv, written under fence_lock,
 *   refuses a paused writer's late write once another writer came.
 * renew_and_release: both modes; lease_lost for leases that hold nothing.
 * lock_delay: an expired write lease's lock-delay keeps readers out.
 * read_lock_delay: an expired read lease's lock-delay keeps writers out
 *   (409 lock_held, "readers hold it", as while it was live) until the
 *   delay has run, then a writer is granted; a read lease released before
 *   its expiry leaves no delay behind (issue 42: etcd kept none).
 * bad_input: mode missing or bad, a limit, a name too long: 400. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "picketd_common.h"

static void setup(void) { setup_default(); }

static harness_resp rw(const char *method, const char *name, const char *action,
                       const char *body) {
  return family_call("rwlocks", method, name, action, body);
}

typedef struct {
  char lease[33];
  int64_t fence;
} grant;

/* An acquire of `name`, tried every 50 ms while it is held (on etcd a
 * lease ends in whole seconds, at its leader's next sweep), for at most
 * bound_ms; the reply (the caller frees it). */
static harness_resp acquire_within(const char *name, const char *body, int64_t bound_ms) {
  int64_t until = harness_now_ms() + bound_ms;
  for (;;) {
    harness_resp r = rw("POST", name, "acquire", body);
    if (r.status != 409 || strcmp(harness_error_code(&r), "lock_held") != 0 ||
        harness_now_ms() >= until)
      return r;
    harness_resp_free(&r);
    harness_sleep_ms(50);
  }
}

static grant take(const char *name, const char *body) {
  grant g;
  harness_resp r = acquire_within(name, body, 0);
  ck_assert_msg(r.status == 200, "acquire %s %s: %ld %s", name, body, r.status, r.body);
  snprintf(g.lease, sizeof g.lease, "%s", harness_json_str(r.json, "lease"));
  g.fence = harness_json_int(r.json, "fence");
  char want[210];
  snprintf(want, sizeof want, "%s:rw", name);
  ck_assert_str_eq(harness_json_str(r.json, "fence_lock"), want);
  harness_resp_free(&r);
  return g;
}

static long give_back(const char *name, const char *lease) {
  return family_release("rwlocks", name, lease);
}

/* An acquire that must be refused, and why (a part of the message). */
static void refused(const char *name, const char *body, const char *why) {
  harness_resp r = rw("POST", name, "acquire", body);
  expect_error(&r, 409, "lock_held");
  ck_assert_msg(strstr(r.body, why), "refusal of %s does not say '%s': %s", body, why, r.body);
  ck_assert_int_gt(harness_json_int(json_object_get(r.json, "error"), "retry_after_ms"), 0);
  harness_resp_free(&r);
}

#define READ "{\"mode\":\"read\",\"ttl_ms\":20000}"
#define WRITE "{\"mode\":\"write\",\"ttl_ms\":20000}"

START_TEST(readers_share) {
  grant a = take("rw1", "{\"mode\":\"read\",\"ttl_ms\":20000,\"owner\":\"reader-a\"}");
  grant b = take("rw1", READ);
  ck_assert_int_eq(a.fence, b.fence);
  harness_resp r = rw("GET", "rw1", NULL, NULL);
  ck_assert_msg(r.status == 200 && harness_json_int(r.json, "readers") == 2 &&
                    json_is_null(json_object_get(r.json, "writer")),
                "%s", r.body);
  ck_assert_int_eq(json_array_size(json_object_get(r.json, "read_leases")), 2);
  ck_assert_msg(strstr(r.body, a.lease) == NULL, "GET shows a lease id: %s", r.body);
  harness_resp_free(&r);
}
END_TEST

START_TEST(writer_excludes) {
  grant r1 = take("rw2", READ);
  refused("rw2", WRITE, "readers hold it");
  ck_assert_int_eq(give_back("rw2", r1.lease), 200);
  grant w = take("rw2", WRITE);
  ck_assert_msg(w.fence > r1.fence, "write fence %lld not above the read's %lld",
                (long long)w.fence, (long long)r1.fence);
  refused("rw2", READ, "a writer holds it");
  refused("rw2", WRITE, "a writer holds it");
  ck_assert_int_eq(give_back("rw2", w.lease), 200);
  grant r2 = take("rw2", READ);
  ck_assert_int_eq(r2.fence, w.fence); /* the write epoch it reads */
  ck_assert_int_eq(give_back("rw2", r2.lease), 200);
  grant w2 = take("rw2", WRITE);
  ck_assert_int_gt(w2.fence, w.fence);
}
END_TEST

static int64_t field_now(const char *name, const char *key) {
  harness_resp r = rw("GET", name, NULL, NULL);
  int64_t n = harness_json_int(r.json, key);
  harness_resp_free(&r);
  return n;
}

START_TEST(writer_not_starved) {
  grant a = take("rw3", READ);
  bg_post w, rd;
  bg_post_start(&w, "/v1/rwlocks/rw3/acquire",
                "{\"mode\":\"write\",\"ttl_ms\":20000,\"wait_ms\":15000}");
  while (field_now("rw3", "writers_waiting") < 1) harness_sleep_ms(10);
  /* a stream of new readers would starve it: they are kept out */
  refused("rw3", READ, "a writer is waiting");
  bg_post_start(&rd, "/v1/rwlocks/rw3/acquire",
                "{\"mode\":\"read\",\"ttl_ms\":20000,\"wait_ms\":15000}");
  while (field_now("rw3", "waiters") < 2) harness_sleep_ms(10);
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(give_back("rw3", a.lease), 200);
  bg_post_join(&w);
  ck_assert_msg(w.r.status == 200, "the waiting writer: %ld %s", w.r.status, w.r.body);
  ck_assert_msg(w.done_ms - t0 < 2000 * harness_time_scale(), "writer woken %lld ms after",
                (long long)(w.done_ms - t0));
  ck_assert_int_eq(field_now("rw3", "readers"), 0); /* the waiting reader is not in */
  ck_assert_int_eq(give_back("rw3", harness_json_str(w.r.json, "lease")), 200);
  bg_post_join(&rd);
  ck_assert_msg(rd.r.status == 200, "the waiting reader: %ld %s", rd.r.status, rd.r.body);
  ck_assert_int_eq(harness_json_int(rd.r.json, "fence"), harness_json_int(w.r.json, "fence"));
  harness_resp_free(&w.r);
  harness_resp_free(&rd.r);
}
END_TEST

START_TEST(writer_gives_up) {
  take("rw4", READ);
  harness_resp r = rw("POST", "rw4", "acquire", "{\"mode\":\"write\",\"ttl_ms\":20000,\"wait_ms\":300}");
  expect_error(&r, 409, "lock_held");
  harness_resp_free(&r);
  ck_assert_int_eq(field_now("rw4", "writers_waiting"), 0);
  take("rw4", READ); /* readers are let in again at once */
}
END_TEST

START_TEST(writer_hangs_up) {
  take("rw9", READ);
  static const char body[] = "{\"mode\":\"write\",\"ttl_ms\":20000,\"wait_ms\":30000}";
  char req[512];
  int len = snprintf(req, sizeof req,
                     "POST /v1/rwlocks/rw9/acquire HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)harness_picketd_port(P)),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(write(fd, req, (size_t)len), len);
  while (field_now("rw9", "writers_waiting") < 1) harness_sleep_ms(10);
  close(fd); /* the writer's client is gone 29 s before its wait would end */
  int64_t t0 = harness_now_ms();
  while (field_now("rw9", "writers_waiting") > 0 && harness_now_ms() - t0 < 10000)
    harness_sleep_ms(20);
  ck_assert_int_eq(field_now("rw9", "writers_waiting"), 0);
  take("rw9", READ);
}
END_TEST

START_TEST(stale_writer_in_fenced_kv) {
  fkv_start();
  grant w1 = take("prices", "{\"mode\":\"write\",\"ttl_ms\":300}");
  ck_assert_int_eq(fkv_put("price", "prices:rw", w1.fence, "10"), 200);
  /* w1 pauses past its TTL */
  harness_resp x = acquire_within("prices", WRITE, 5000);
  ck_assert_msg(x.status == 200, "%s", x.body);
  grant w2 = {.fence = harness_json_int(x.json, "fence")};
  harness_resp_free(&x);
  ck_assert_int_eq(fkv_put("price", "prices:rw", w2.fence, "11"), 200);
  ck_assert_int_eq(fkv_put("price", "prices:rw", w1.fence, "9"), 409); /* w1 wakes: refused */
  fkv_stop();
}
END_TEST

START_TEST(renew_and_release) {
  grant r = take("rw5", "{\"mode\":\"read\",\"ttl_ms\":500}");
  char body[120];
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", r.lease);
  harness_resp x = rw("POST", "rw5", "renew", body);
  ck_assert_msg(x.status == 200 && strcmp(harness_json_str(x.json, "mode"), "read") == 0 &&
                    harness_json_int(x.json, "fence") == r.fence &&
                    harness_json_int(x.json, "ttl_ms") == 20000,
                "%s", x.body);
  harness_resp_free(&x);
  harness_sleep_ms(700);
  ck_assert_int_eq(field_now("rw5", "readers"), 1);
  ck_assert_int_eq(give_back("rw5", r.lease), 200);
  ck_assert_int_eq(give_back("rw5", r.lease), 409);
  grant w = take("rw5", WRITE);
  snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":15000}", w.lease);
  x = rw("POST", "rw5", "renew", body);
  ck_assert_msg(x.status == 200 && strcmp(harness_json_str(x.json, "mode"), "write") == 0, "%s",
                x.body);
  harness_resp_free(&x);
  /* renewals of one lease at once: every one takes */
  ck_assert_int_eq(calls_at_once_ok("/v1/rwlocks/rw5/renew", body, 8, 4), 32);
  x = rw("POST", "rw5", "renew", "{\"lease\":\"0123456789abcdef0123456789abcdef\"}");
  expect_error(&x, 409, "lease_lost");
  harness_resp_free(&x);
  ck_assert_int_eq(give_back("rw5", w.lease), 200);
}
END_TEST

START_TEST(lock_delay) {
  take("rw6", "{\"mode\":\"write\",\"ttl_ms\":200,\"lock_delay_ms\":1500}");
  /* held until it expires, then its delay keeps readers out */
  harness_resp r = acquire_within("rw6", READ, 5000);
  expect_error(&r, 409, "lock_delay");
  harness_resp_free(&r);
}
END_TEST

START_TEST(read_lock_delay) {
  enum { DELAY_MS = 3000 };
  int64_t t0 = harness_now_ms();
  take("rw7", "{\"mode\":\"read\",\"ttl_ms\":200,\"lock_delay_ms\":3000}");
  /* held by the reader, then by its delay: refused as while it was live */
  refused("rw7", WRITE, "readers hold it");
  harness_resp r = acquire_within("rw7", WRITE, 20000 * harness_time_scale());
  int64_t took = harness_now_ms() - t0;
  ck_assert_msg(r.status == 200, "the writer after the delay: %ld %s", r.status, r.body);
  ck_assert_msg(took >= DELAY_MS, "a writer was granted %lld ms after a read lease with a %d ms "
                "lock-delay was taken: before its delay had run", (long long)took, DELAY_MS);
  harness_resp_free(&r);
  /* released before its expiry: no delay */
  grant a = take("rw8", "{\"mode\":\"read\",\"ttl_ms\":20000,\"lock_delay_ms\":30000}");
  ck_assert_int_eq(give_back("rw8", a.lease), 200);
  take("rw8", WRITE);
}
END_TEST

static void expect_bad(const char *name, const char *body, const char *field) {
  char path[300];
  snprintf(path, sizeof path, "/v1/rwlocks/%s/acquire", name);
  expect_bad_field(path, body, field);
}

START_TEST(bad_input) {
  expect_bad("rwbad", "{}", "mode");
  expect_bad("rwbad", "{\"mode\":\"both\"}", "mode");
  expect_bad("rwbad", "{\"mode\":1}", "mode");
  expect_bad("rwbad", "{\"mode\":\"read\",\"limit\":2}", "limit");
  expect_bad("rwbad", "{\"mode\":\"read\",\"lock_delay_ms\":-1}", "lock_delay_ms");
  char name[200];
  memset(name, 'n', 198);
  name[198] = '\0';
  expect_bad(name, "{\"mode\":\"read\"}", "197");
  harness_resp r = rw("GET", "rwbad", NULL, NULL);
  ck_assert_msg(r.status == 200 && harness_json_int(r.json, "readers") == 0 &&
                    harness_json_int(r.json, "fence") == 0,
                "%s", r.body);
  harness_resp_free(&r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("rwlock");
  TCase *tc = tcase_create("rwlock");
  tcase_add_unchecked_fixture(tc, setup, stop_both);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, readers_share);
  tcase_add_test(tc, writer_excludes);
  tcase_add_test(tc, writer_not_starved);
  tcase_add_test(tc, writer_gives_up);
  tcase_add_test(tc, writer_hangs_up);
  tcase_add_test(tc, stale_writer_in_fenced_kv);
  tcase_add_test(tc, renew_and_release);
  tcase_add_test(tc, lock_delay);
  tcase_add_test(tc, read_lock_delay);
  tcase_add_test(tc, bad_input);
  suite_add_tcase(s, tc);
  return harness_run_suite(s);
}
