/* test_failover.c: a Redis failover under picketd (issue 6), with and
 * without --min-replicas.
 *
 * A primary and a replica; the replica follows the primary through a small
 * TCP proxy in this test, which is the network between them. Grants are
 * made and replicated; then the network is partitioned (the proxy stops
 * forwarding, so the primary still counts the replica as connected but its
 * writes never arrive); more grants are made on the primary; the primary is
 * SIGKILLed, the replica promoted with REPLICAOF NO ONE and a new picketd
 * started against it.
 *
 * Why a proxy: SIGSTOP or DEBUG SLEEP on the replica does not lose
 * anything. The primary's writes wait in the replica's socket buffer and
 * are applied as soon as it resumes, even after the primary is dead (tried:
 * a write made while the replica was stopped was there after REPLICAOF NO
 * ONE). Dropping the bytes in a proxy makes the loss certain.
 *
 * Without --min-replicas the test shows the loss: the grants made during
 * the partition vanish, and the promoted replica hands out the same fence
 * again to someone else while the first holder still believes it holds
 * the lock. With --min-replicas 1 those grants are refused with 503
 * not_replicated (and undone), and no fence is ever handed out twice.
 * Those two use --fence-floor none, the plain counter; with the clock floor
 * the lossy failover loses the grants but no fence is handed out twice. */
#include <signal.h>

#include "fault_proxy.h"
#include "fault_util.h"

/* ---- a primary and its replica ----------------------------------------- */

static harness_redis *primary, *replica;
static fault_proxy *net;

/* Waits until the replica has applied everything the primary has written. */
static void wait_replicated(void) {
  long long want = fault_info_int(primary, "master_repl_offset");
  int64_t until = harness_now_ms() + 10000;
  while (fault_info_int(replica, "slave_repl_offset") < want && harness_now_ms() < until)
    harness_sleep_ms(10);
  ck_assert_msg(fault_info_int(replica, "slave_repl_offset") >= want, "replica did not catch up");
}

static void start_pair(void) {
  harness_redis_opts po = {.tcp = 1, .extra_conf = "repl-diskless-sync-delay 0"};
  primary = harness_redis_start(&po);
  ck_assert_ptr_nonnull(primary);
  net = fault_proxy_start(harness_redis_port(primary));
  char conf[100];
  snprintf(conf, sizeof conf, "replicaof 127.0.0.1 %d", fault_proxy_port(net));
  harness_redis_opts ro = {.extra_conf = conf};
  replica = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(replica);
  printf("replica acknowledging writes after %lld ms\n",
         (long long)fault_wait_replicating(primary, 1));
}

/* The primary dies, the network goes, the replica is promoted. */
static void fail_over(void) {
  harness_redis_stop(primary, SIGKILL);
  fault_proxy_free(net);
  net = NULL;
  redisReply *x = harness_redis_cmd(replica, "REPLICAOF NO ONE");
  ck_assert_msg(x && x->type == REDIS_REPLY_STATUS, "REPLICAOF NO ONE failed");
  freeReplyObject(x);
  ck_assert_int_eq(fault_info_int(replica, "connected_slaves"), 0);
}

static void stop_pair(void) {
  fault_proxy_free(net);
  harness_redis_free(replica);
  harness_redis_free(primary);
  net = NULL;
  replica = primary = NULL;
}

/* ---- bookkeeping of every fence handed out ----------------------------- */

#define GRANTS 64

static struct {
  char lock[16];
  int64_t fence;
  char lease[33];
  const char *where;
} granted[GRANTS];
static int ngranted;

/* acquire on `base`; a 200 goes into the book. Returns the status. */
static long grant(const char *base, const char *where, const char *lock, fault_call *c) {
  long st = fault_acquire(base, lock, 60000, NULL, c);
  if (st == 200) {
    ck_assert_int_lt(ngranted, GRANTS);
    snprintf(granted[ngranted].lock, sizeof granted[0].lock, "%s", lock);
    granted[ngranted].fence = c->fence;
    snprintf(granted[ngranted].lease, 33, "%s", c->lease);
    granted[ngranted++].where = where;
  }
  return st;
}

/* How many (lock, fence) pairs were handed out to two different leases;
 * each one is printed. */
static int fences_handed_out_twice(void) {
  int dup = 0;
  for (int a = 0; a < ngranted; a++)
    for (int b = a + 1; b < ngranted; b++)
      if (strcmp(granted[a].lock, granted[b].lock) == 0 && granted[a].fence == granted[b].fence &&
          strcmp(granted[a].lease, granted[b].lease) != 0) {
        printf("lock %s: fence %lld handed out twice: lease %.8s... (%s), lease %.8s... (%s)\n",
               granted[a].lock, (long long)granted[a].fence, granted[a].lease, granted[a].where,
               granted[b].lease, granted[b].where);
        dup++;
      }
  return dup;
}

static long long readyz_replicas(const char *base) {
  harness_resp r;
  ck_assert_int_eq(harness_http(base, "GET", "/readyz", NULL, &r), 0);
  ck_assert_int_eq(r.status, 200);
  long long n = harness_json_int(r.json, "replicas");
  harness_resp_free(&r);
  return n;
}

/* Phase 1, common to the tests: lock "fo" granted and released twice
 * (fences 1, 2 with --fence-floor none), all replicated. */
static void replicated_grants(const char *a) {
  fault_call c;
  int64_t prev = 0;
  for (int i = 1; i <= 2; i++) {
    ck_assert_int_eq(grant(a, "primary, replicated", "fo", &c), 200);
    ck_assert_int_gt(c.fence, prev);
    prev = c.fence;
    ck_assert_int_eq(fault_lease_call(a, "fo", "release", c.lease, &c), 200);
  }
}

/* The classic counter (--fence-floor none), which the first two tests show
 * losing fences in a failover; the clock floor is the third's. */
static const char *const floor_none[] = {"--fence-floor", "none", NULL};

START_TEST(failover_without_min_replicas_loses_grants) {
  ngranted = 0;
  start_pair();
  harness_picketd *A = harness_picketd_start(harness_redis_url(primary), floor_none);
  ck_assert_ptr_nonnull(A);
  const char *a = harness_picketd_url(A);
  ck_assert_int_eq(readyz_replicas(a), 1);
  replicated_grants(a);
  wait_replicated();

  fault_proxy_partition(net);
  fault_call h2, x;
  ck_assert_int_eq(grant(a, "primary, partitioned", "fo", &h2), 200);
  ck_assert_int_eq(h2.fence, 3);
  ck_assert_int_eq(grant(a, "primary, partitioned", "fo2", &x), 200);
  ck_assert_int_eq(x.fence, 1);
  ck_assert_int_eq(readyz_replicas(a), 1); /* the primary cannot tell */

  fail_over();
  harness_picketd *B = harness_picketd_start(harness_redis_url(replica), floor_none);
  ck_assert_ptr_nonnull(B);
  const char *b = harness_picketd_url(B);
  fault_call c;
  /* fo's holder still believes it holds fence 3, yet fo is free again */
  ck_assert_int_eq(grant(b, "promoted replica", "fo", &c), 200);
  ck_assert_int_eq(grant(b, "promoted replica", "fo2", &c), 200);
  int dup = fences_handed_out_twice();
  ck_assert_msg(dup == 2, "expected fo's fence 3 and fo2's fence 1 handed out twice, saw %d", dup);
  /* and the first holders find out only when they next talk to picketd */
  ck_assert_int_eq(fault_lease_call(b, "fo", "renew", h2.lease, &c), 409);
  ck_assert_str_eq(c.code, "lease_lost");
  harness_picketd_free(B);
  harness_picketd_free(A);
  stop_pair();
}
END_TEST

START_TEST(failover_with_min_replicas_never_repeats_a_fence) {
  ngranted = 0;
  start_pair();
  /* 1 s, not the default 100 ms: on a loaded 2-core CI machine a healthy
   * replica was seen to take over 200 ms to acknowledge */
  const char *args[] = {"--min-replicas", "1", "--replica-timeout-ms", "1000",
                        "--fence-floor", "none", NULL};
  harness_picketd *A = harness_picketd_start(harness_redis_url(primary), args);
  ck_assert_ptr_nonnull(A);
  const char *a = harness_picketd_url(A);
  ck_assert_int_eq(readyz_replicas(a), 1);
  replicated_grants(a);
  fault_call kept, c;
  ck_assert_int_eq(grant(a, "primary, replicated", "fo3", &kept), 200);

  fault_proxy_partition(net);
  /* every grant and renewal now fails WAIT: 503, and the grant is undone */
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(grant(a, "primary, partitioned", "fo", &c), 503);
    ck_assert_str_eq(c.code, "not_replicated");
    ck_assert_msg(c.t1 - c.t0 >= 950, "not_replicated after %lld ms, before WAIT's 1000 ms",
                  (long long)(c.t1 - c.t0));
    ck_assert_msg(c.t1 - c.t0 < 3000 * harness_time_scale(), "not_replicated after %lld ms",
                  (long long)(c.t1 - c.t0));
  }
  printf("partitioned: acquire is 503 not_replicated after %lld ms\n", (long long)(c.t1 - c.t0));
  ck_assert_int_eq(grant(a, "primary, partitioned", "fo2", &c), 503);
  ck_assert_str_eq(c.code, "not_replicated");
  ck_assert_int_eq(fault_lease_call(a, "fo3", "renew", kept.lease, &c), 503);
  ck_assert_str_eq(c.code, "not_replicated");
  ck_assert_int_eq(fault_lock(a, "fo", NULL, NULL, &c), 200);
  ck_assert_msg(c.held == 0, "a refused grant stayed");

  fail_over();
  harness_picketd *B = harness_picketd_start(harness_redis_url(replica), floor_none);
  ck_assert_ptr_nonnull(B);
  const char *b = harness_picketd_url(B);
  ck_assert_int_eq(grant(b, "promoted replica", "fo", &c), 200);
  ck_assert_int_eq(c.fence, 3); /* the refused grants' INCRs died with the primary */
  ck_assert_int_eq(grant(b, "promoted replica", "fo2", &c), 200);
  ck_assert_int_eq(c.fence, 1);
  /* the acknowledged grant survived the failover, and its holder renews */
  ck_assert_int_eq(grant(b, "promoted replica", "fo3", &c), 409);
  ck_assert_int_eq(fault_lease_call(b, "fo3", "renew", kept.lease, &c), 200);
  ck_assert_int_eq(c.fence, kept.fence);
  ck_assert_int_eq(fences_handed_out_twice(), 0);
  printf("with --min-replicas 1: %d fences handed out across the failover, none twice\n",
         ngranted);
  harness_picketd_free(B);
  harness_picketd_free(A);
  stop_pair();
}
END_TEST

/* The first test's lossy failover (--min-replicas 0) with the clock floor:
 * the grants made during the partition still vanish with the primary, and
 * their holders still believe they hold the locks, but the promoted
 * replica's next fences are above them, so no fence is handed out twice
 * and fenced storage refuses the stranded holders once the new ones write. */
START_TEST(failover_with_clock_floor_never_repeats_a_fence) {
  ngranted = 0;
  start_pair();
  const char *args[] = {"--fence-floor", "clock", "--min-replicas", "0", NULL};
  harness_picketd *A = harness_picketd_start(harness_redis_url(primary), args);
  ck_assert_ptr_nonnull(A);
  const char *a = harness_picketd_url(A);
  replicated_grants(a);
  wait_replicated();

  fault_proxy_partition(net);
  fault_call h2, x, c;
  ck_assert_int_eq(grant(a, "primary, partitioned", "fo", &h2), 200);
  ck_assert_int_eq(grant(a, "primary, partitioned", "fo2", &x), 200);

  fail_over();
  harness_picketd *B = harness_picketd_start(harness_redis_url(replica), args);
  ck_assert_ptr_nonnull(B);
  const char *b = harness_picketd_url(B);
  /* the partitioned grants were lost: both locks are free again ... */
  ck_assert_int_eq(grant(b, "promoted replica", "fo", &c), 200);
  ck_assert_msg(c.fence > h2.fence, "fo: fence %lld after the lost %lld", (long long)c.fence,
                (long long)h2.fence);
  ck_assert_int_eq(grant(b, "promoted replica", "fo2", &c), 200);
  ck_assert_msg(c.fence > x.fence, "fo2: fence %lld after the lost %lld", (long long)c.fence,
                (long long)x.fence);
  /* ... but with fences above the lost ones: none handed out twice */
  ck_assert_int_eq(fences_handed_out_twice(), 0);
  ck_assert_int_eq(fault_lease_call(b, "fo", "renew", h2.lease, &c), 409);
  printf("with --fence-floor clock and --min-replicas 0: %d fences handed out across a lossy "
         "failover, none twice\n", ngranted);
  harness_picketd_free(B);
  harness_picketd_free(A);
  stop_pair();
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* the proxy writes to sockets that may close */
  const TTest *tests[] = {failover_without_min_replicas_loses_grants,
                          failover_with_min_replicas_never_repeats_a_fence,
                          failover_with_clock_floor_never_repeats_a_fence};
  return fault_run("fault_failover", tests, 3);
}
