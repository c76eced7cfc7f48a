/* test_silent_drop.c: picketd's connections to Redis silently lost
 * (issue 6).
 *
 * picketd reaches Redis over TCP through a proxy (tests/fault/fault_proxy)
 * that, at one moment, loses every connection the way a middlebox that
 * lost its state does: Redis sees its clients go, picketd sees nothing (no
 * FIN, no RST; keepalive probes are still answered). This is what a TCP
 * load balancer or a NAT in front of Redis can do.
 *
 * The lock calls notice through the command timeout: the first call gets
 * a 503 and every worker reconnects before its next call. The release channel (one SUBSCRIBE
 * connection that waits for messages with no timeout) must notice too:
 * otherwise a waiting acquire is no longer woken by a release and waits
 * for the holder's TTL instead. The test measures how long a waiter takes
 * to get a lock after its holder releases it, before and after the drop. */
#include <pthread.h>
#include <signal.h>

#include "fault_proxy.h"
#include "fault_util.h"

#define HOLD_TTL_MS 6000
#define WAIT_MS 10000

typedef struct {
  const char *url;
  const char *name;
  int wait_ms;
  fault_call c;
} waiter_run;

static void *waiter_main(void *arg) {
  waiter_run *w = arg;
  char body[80];
  snprintf(body, sizeof body, "{\"ttl_ms\":5000,\"wait_ms\":%d}", w->wait_ms);
  fault_lock(w->url, w->name, "acquire", body, &w->c);
  return NULL;
}

/* A holder takes "q", a waiter queues behind it, the holder releases after
 * 300 ms: returns how long after that release the waiter got the lock
 * (asserts it did), and releases it. */
static int64_t wake_latency(const char *url) {
  fault_call h, c;
  ck_assert_int_eq(fault_acquire(url, "q", HOLD_TTL_MS, NULL, &h), 200);
  waiter_run w = {url, "q", WAIT_MS, {0}};
  pthread_t t;
  pthread_create(&t, NULL, waiter_main, &w);
  harness_sleep_ms(300);
  ck_assert_int_eq(fault_lease_call(url, "q", "release", h.lease, &c), 200);
  int64_t released = c.t1;
  pthread_join(t, NULL);
  ck_assert_msg(w.c.status == 200, "the waiter got %ld %s", w.c.status, w.c.code);
  ck_assert_int_eq(fault_lease_call(url, "q", "release", w.c.lease, &c), 200);
  return w.c.t1 - released;
}

START_TEST(release_channel_silently_lost) {
  harness_redis_opts ro = {.tcp = 1};
  harness_redis *R = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(R);
  fault_proxy *net = fault_proxy_start(harness_redis_port(R));
  char redis_url[64];
  snprintf(redis_url, sizeof redis_url, "redis://127.0.0.1:%d", fault_proxy_port(net));
  const char *args[] = {"--redis-timeout-ms", "300", "--threads", "2", NULL};
  harness_picketd *P = harness_picketd_start(redis_url, args);
  ck_assert_ptr_nonnull(P);
  const char *url = harness_picketd_url(P);
  fault_call c;
  /* The release channel subscribes while somebody waits: keep a waiter on
   * another lock for the whole test, so the channel that the drop loses
   * is the one picketd must notice (not one it would drop anyway when
   * idle and open afresh). */
  fault_call keeper;
  ck_assert_int_eq(fault_acquire(url, "keep", 30000, NULL, &keeper), 200);
  waiter_run kw = {url, "keep", 60000, {0}};
  pthread_t kt;
  pthread_create(&kt, NULL, waiter_main, &kw);
  int64_t t0 = harness_now_ms();
  for (;;) {
    redisReply *x = harness_redis_cmd(R, "PUBSUB NUMSUB picket:release");
    long long subs = x && x->type == REDIS_REPLY_ARRAY && x->elements == 2 ? x->element[1]->integer : 0;
    if (x) freeReplyObject(x);
    if (subs == 1) break;
    ck_assert_msg(harness_now_ms() - t0 < 5000, "picketd never subscribed");
    harness_sleep_ms(20);
  }
  int64_t before = wake_latency(url);
  printf("before the drop: the waiter got the lock %lld ms after the release\n",
         (long long)before);
  ck_assert_msg(before < 1000 * harness_time_scale(), "wake took %lld ms", (long long)before);

  fault_proxy_drop_silently(net);
  /* the first call times out (503); the worker that saw it reopens its
   * connection, and the other workers reopen theirs before their next call */
  int errors = 0;
  t0 = harness_now_ms();
  for (int ok = 0; ok < 6 && harness_now_ms() - t0 < 10000;) {
    if (fault_lock(url, "probe", NULL, NULL, &c) == 200) {
      ok++;
    } else {
      ck_assert_int_eq(c.status, 503);
      errors++;
    }
  }
  printf("after the drop: %d calls got 503 before every worker had reconnected (%lld ms)\n",
         errors, (long long)(harness_now_ms() - t0));
  ck_assert_int_le(errors, 1); /* one in all, not one per worker thread */
  harness_sleep_ms(1000); /* time for a health check of the channel, were there one */

  int64_t after = wake_latency(url);
  printf("after the drop: the waiter got the lock %lld ms after the release\n",
         (long long)after);
  ck_assert_msg(after < 2000 * harness_time_scale(),
                "the waiter got the lock %lld ms after the release: the release channel was "
                "lost silently and never noticed (the waiter woke at the holder's expiry)",
                (long long)after);
  ck_assert_int_eq(fault_lease_call(url, "keep", "release", keeper.lease, &c), 200);
  pthread_join(kt, NULL);
  ck_assert_msg(kw.c.status == 200, "the keep waiter got %ld %s", kw.c.status, kw.c.code);
  harness_picketd_free(P);
  fault_proxy_free(net);
  harness_redis_free(R);
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* the proxy writes to sockets that may close */
  const TTest *tests[] = {release_channel_silently_lost};
  return fault_run("fault_silent_drop", tests, 1);
}
