/* test_min_replicas.c: --min-replicas at its edges (issue 6).
 *
 * readyz_follows_min_replicas: proto/openapi.yaml says /readyz is "200 when
 *   Redis answers (and, with --min-replicas, enough replicas are
 *   connected); otherwise 503". A picketd whose every grant would be
 *   refused with not_replicated must not tell a load balancer it is ready.
 *   So: with --min-replicas 1 and no replica, /readyz is 503 not_replicated
 *   and so is an acquire; once a replica is online both succeed; once the
 *   replica is gone (killed), 503 again. A same-lease retry refused for
 *   want of a replica keeps the grant it refreshes (only new grants are
 *   undone).
 * wait_longer_than_redis_timeout: WAIT blocks for --replica-timeout-ms on
 *   purpose; when that is longer than --redis-timeout-ms the caller must
 *   still get not_replicated (and the grant undone), not store_unavailable
 *   from a command timeout that mistook the WAIT for a dead Redis. */
#include <signal.h>

#include "fault_util.h"

static void expect_readyz(const char *base, long status, const char *code, long long replicas) {
  harness_resp r;
  ck_assert_int_eq(harness_http(base, "GET", "/readyz", NULL, &r), 0);
  ck_assert_msg(r.status == status, "/readyz: %ld %s, want %ld", r.status, r.body, status);
  if (code) {
    ck_assert_ptr_nonnull(harness_error_code(&r));
    ck_assert_str_eq(harness_error_code(&r), code);
  } else {
    ck_assert_int_eq(harness_json_int(r.json, "replicas"), replicas);
  }
  harness_resp_free(&r);
}

START_TEST(readyz_follows_min_replicas) {
  harness_redis_opts po = {.tcp = 1, .extra_conf = "repl-diskless-sync-delay 0"};
  harness_redis *primary = harness_redis_start(&po);
  ck_assert_ptr_nonnull(primary);
  const char *args[] = {"--min-replicas", "1", "--replica-timeout-ms", "500", NULL};
  harness_picketd *P = harness_picketd_start(harness_redis_url(primary), args);
  ck_assert_ptr_nonnull(P);
  const char *url = harness_picketd_url(P);
  fault_call c;

  /* no replica: not ready, and indeed no grant */
  expect_readyz(url, 503, "not_replicated", 0);
  ck_assert_int_eq(fault_acquire(url, "r", 10000, NULL, &c), 503);
  ck_assert_str_eq(c.code, "not_replicated");

  /* a replica online: ready (within 10 s of its start), and grants */
  char conf[100];
  snprintf(conf, sizeof conf, "replicaof 127.0.0.1 %d", harness_redis_port(primary));
  harness_redis_opts ro = {.extra_conf = conf};
  harness_redis *replica = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(replica);
  int64_t t0 = harness_now_ms();
  long st = 0;
  while (st != 200 && harness_now_ms() - t0 < 10000) {
    harness_resp r;
    ck_assert_int_eq(harness_http(url, "GET", "/readyz", NULL, &r), 0);
    st = r.status;
    harness_resp_free(&r);
    if (st != 200) harness_sleep_ms(20);
  }
  printf("ready %lld ms after the replica started\n", (long long)(harness_now_ms() - t0));
  expect_readyz(url, 200, NULL, 1);
  /* Redis 7 starts streaming to a freshly synced replica only at its first
   * REPLCONF ACK (sent once a second), though INFO already says online: a
   * grant in that second may be refused. Seen: the first WAIT after a sync
   * took 584 ms; later ones well under 1 ms. */
  t0 = harness_now_ms();
  do {
    fault_acquire(url, "r", 10000, NULL, &c);
  } while (c.status == 503 && strcmp(c.code, "not_replicated") == 0 &&
           harness_now_ms() - t0 < 5000 * harness_time_scale());
  ck_assert_msg(c.status == 200, "acquire with a replica: %ld %s", c.status, c.code);
  printf("granted %lld ms after /readyz said ready\n", (long long)(harness_now_ms() - t0));

  /* the replica stalled: a same-lease retry of that replicated grant is
   * refused (not_replicated) but does not take the grant away */
  char lease[33];
  snprintf(lease, sizeof lease, "%s", c.lease);
  kill(harness_redis_pid(replica), SIGSTOP);
  ck_assert_int_eq(fault_acquire(url, "r", 10000, lease, &c), 503);
  ck_assert_str_eq(c.code, "not_replicated");
  ck_assert_int_eq(fault_lock(url, "r", NULL, NULL, &c), 200);
  ck_assert_msg(c.held == 1, "a refused same-lease retry undid the replicated grant");
  kill(harness_redis_pid(replica), SIGCONT);

  /* the replica killed: the primary sees its link close at once */
  harness_redis_stop(replica, SIGKILL);
  t0 = harness_now_ms();
  while (fault_info_int(primary, "connected_slaves") > 0 && harness_now_ms() - t0 < 5000)
    harness_sleep_ms(20);
  expect_readyz(url, 503, "not_replicated", 0);
  harness_redis_free(replica);
  harness_picketd_free(P);
  harness_redis_free(primary);
}
END_TEST

START_TEST(wait_longer_than_redis_timeout) {
  harness_redis *R = harness_redis_start(NULL); /* no replica at all */
  ck_assert_ptr_nonnull(R);
  const char *args[] = {"--min-replicas", "1", "--replica-timeout-ms", "600",
                        "--redis-timeout-ms", "300", NULL};
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(P);
  const char *url = harness_picketd_url(P);
  fault_call c;
  fault_acquire(url, "w", 10000, NULL, &c);
  printf("WAIT 600 ms under a 300 ms command timeout: %ld %s after %lld ms\n", c.status, c.code,
         (long long)(c.t1 - c.t0));
  ck_assert_int_eq(c.status, 503);
  ck_assert_str_eq(c.code, "not_replicated");
  ck_assert_msg(c.t1 - c.t0 >= 550, "not_replicated after %lld ms, before WAIT's 600 ms",
                (long long)(c.t1 - c.t0));
  ck_assert_int_eq(fault_lock(url, "w", NULL, NULL, &c), 200);
  ck_assert_msg(c.held == 0, "the refused grant was not undone");
  harness_picketd_free(P);
  harness_redis_free(R);
}
END_TEST

int main(void) {
  const TTest *tests[] = {readyz_follows_min_replicas, wait_longer_than_redis_timeout};
  return fault_run("fault_min_replicas", tests, 2);
}
