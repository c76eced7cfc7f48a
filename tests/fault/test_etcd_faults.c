/* test_etcd_faults.c: picketd on a real three-member etcd cluster, under
 * load, while members die, pause and come back (issue 29).
 *
 * Every case runs the same load: four clients take turns on one lock
 * through two picketd (both given all three members), each acquire with a
 * lease id of its own (a retry on the other picketd after a lost reply is
 * idempotent), and each holder writes to a real fenced-kv under the fence
 * it got before it releases. The test keeps its own book: the fences in
 * the order the grants arrived, who holds a live lease, and every write
 * fenced-kv refused. Then a fault, and the checks every case makes:
 *  - no fence granted twice, and fences rise in the order of the grants;
 *  - no grant while another client's lease is live (as the clients know it);
 *  - fenced-kv refused no holder's write (it would have, had a stale fence
 *    been granted after a newer one), and it refuses a real zombie's: a
 *    holder whose lease ran out while it slept, writing after the next
 *    holder has.
 * watch_member_paused (no load): a waiter on picketd 0, whose release
 * feed watches etcd's first member, is granted within 8 s of a release
 * made through picketd 1 after that member was paused (SIGSTOP), where
 * it used to wait for the holder's 30 s TTL: the paused member's stream
 * stays open and silent, so the watch now asks a silent stream's member
 * for a read and reopens on the next member when it gets no answer.
 * What each fault must cost is each case's own check: a leader's death and
 * a pause about a second (an election), the loss of quorum a 503 until it
 * is back. Network partitions are the chaos suite's (tests/chaos, the etcd
 * topology): they need network namespaces. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "fault_util.h"
#include "harness_etcd.h"
#include "../integration/picketd_common.h" /* fkv_start, fkv_stop: a real fenced-kv */

#define CLIENTS 4
#define TTL_MS 2000
#define MAX_GRANTS 20000

static harness_etcd *E;
static harness_picketd *PD[2];
static const char *server[2];

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t fences[MAX_GRANTS];
static int64_t granted_at[MAX_GRANTS]; /* monotonic ms of each grant's reply */
static int ngrants;
static int holder = -1;       /* client with a live lease, as the clients know it */
static int64_t holder_deadline;
static atomic_int stop_load;
static atomic_int violations, refused_writes, errors;
static char violation[300], last_error[200];

static void violate(const char *fmt, long long a, long long b, long long c) {
  if (atomic_fetch_add(&violations, 1) == 0) snprintf(violation, sizeof violation, fmt, a, b, c);
}

/* PUT /kv/KEY under lock `job` with `fence`; the status (0: no reply). */
static long kv_put(const char *key, int64_t fence, const char *value) {
  char path[128], h2[64];
  snprintf(path, sizeof path, "/kv/%s", key);
  snprintf(h2, sizeof h2, "Picket-Fence: %lld", (long long)fence);
  const char *headers[] = {"Picket-Lock: job", h2, NULL};
  harness_resp r;
  if (harness_http_h(fkv_url, "PUT", path, value, headers, &r) != 0) return 0;
  long st = r.status;
  harness_resp_free(&r);
  return st;
}

static void setup(void) {
  E = harness_etcd_start(3);
  ck_assert_msg(E != NULL, "etcd did not start");
  const char *args[] = {"--etcd", harness_etcd_urls(E), "--etcd-timeout-ms", "2000", NULL};
  for (int i = 0; i < 2; i++) {
    PD[i] = harness_picketd_start(NULL, args);
    ck_assert_msg(PD[i] != NULL, "picketd did not start");
    server[i] = harness_picketd_url(PD[i]);
  }
  fkv_start();
  ngrants = 0;
  holder = -1;
  atomic_store(&stop_load, 0);
  atomic_store(&violations, 0);
  atomic_store(&refused_writes, 0);
  atomic_store(&errors, 0);
}

static void teardown(void) {
  for (int i = 0; i < 2; i++) harness_picketd_free(PD[i]);
  harness_etcd_free(E);
  fkv_stop();
}

/* One call with failover: on no reply or a 503, the other picketd gets the
 * very same request (up to 6 tries, 100 ms apart). *lost is set when an
 * attempt got no reply (it may have been applied). */
static long call_failover(int *s, const char *action, const char *lease, fault_call *c, int *lost) {
  *lost = 0;
  for (int attempt = 0; attempt < 6; attempt++) {
    char body[160];
    snprintf(body, sizeof body, "{\"ttl_ms\":%d,\"wait_ms\":1500,\"lease\":\"%s\"}", TTL_MS,
             lease);
    long st = strcmp(action, "acquire") == 0 ? fault_lock(server[*s], "job", "acquire", body, c)
                                             : fault_lease_call(server[*s], "job", action, lease, c);
    if (st != 0 && st != 503) return st;
    if (st == 0) *lost = 1;
    *s ^= 1;
    harness_sleep_ms(100);
  }
  return c->status;
}

static void *client_main(void *arg) {
  int id = (int)(intptr_t)arg, s = id % 2;
  while (!atomic_load(&stop_load)) {
    char lease[33], key[16], value[64];
    fault_call c;
    int lost;
    fault_lease_id(lease);
    long st = call_failover(&s, "acquire", lease, &c, &lost);
    if (st == 409) continue; /* the wait ended: try again */
    if (st != 200) {
      atomic_fetch_add(&errors, 1);
      snprintf(last_error, sizeof last_error, "acquire: %ld %s", st, c.code);
      harness_sleep_ms(50);
      continue;
    }
    pthread_mutex_lock(&mu);
    int64_t now = harness_now_ms();
    if (holder >= 0 && now < holder_deadline)
      violate("granted to client %lld while client %lld holds a live lease", id, holder, 0);
    if (ngrants > 0 && c.fence <= fences[ngrants - 1])
      violate("fence %lld granted after fence %lld (grant %lld)", c.fence, fences[ngrants - 1],
              ngrants);
    if (ngrants < MAX_GRANTS) {
      granted_at[ngrants] = now;
      fences[ngrants++] = c.fence;
    }
    holder = id;
    holder_deadline = c.t0 + TTL_MS;
    pthread_mutex_unlock(&mu);
    /* the work the lock protects: a write under the fence */
    snprintf(key, sizeof key, "w%d", id);
    snprintf(value, sizeof value, "%lld", (long long)c.fence);
    long w = kv_put(key, c.fence, value);
    if (w == 409) {
      atomic_fetch_add(&refused_writes, 1);
      violate("fenced-kv refused the write of a live holder (fence %lld)", c.fence, 0, 0);
    }
    pthread_mutex_lock(&mu);
    if (holder == id) holder = -1; /* done before the release is sent */
    pthread_mutex_unlock(&mu);
    st = call_failover(&s, "release", lease, &c, &lost);
    if (st != 200 && !(st == 409 && lost)) {
      atomic_fetch_add(&errors, 1);
      snprintf(last_error, sizeof last_error, "release: %ld %s", st, c.code);
    }
  }
  return NULL;
}

static pthread_t threads[CLIENTS];

static void load_start(void) {
  for (intptr_t i = 0; i < CLIENTS; i++)
    ck_assert_int_eq(pthread_create(&threads[i], NULL, client_main, (void *)i), 0);
}

static void load_stop(void) {
  atomic_store(&stop_load, 1);
  for (int i = 0; i < CLIENTS; i++) pthread_join(threads[i], NULL);
}

/* Grants that arrived after `t` (monotonic ms). */
static int grants_after(int64_t t) {
  pthread_mutex_lock(&mu);
  int n = 0;
  for (int i = 0; i < ngrants; i++) n += granted_at[i] > t;
  pthread_mutex_unlock(&mu);
  return n;
}

/* The first grant after `t`: its time, or -1. */
static int64_t first_grant_after(int64_t t) {
  pthread_mutex_lock(&mu);
  int64_t at = -1;
  for (int i = 0; i < ngrants && at < 0; i++)
    if (granted_at[i] > t) at = granted_at[i];
  pthread_mutex_unlock(&mu);
  return at;
}

/* The checks every case makes, after its load stopped. */
static void check_book(const char *what) {
  ck_assert_msg(atomic_load(&violations) == 0, "%s: %d violation(s), the first: %s", what,
                atomic_load(&violations), violation);
  for (int i = 1; i < ngrants; i++)
    ck_assert_msg(fences[i] > fences[i - 1], "%s: fence %lld after %lld", what,
                  (long long)fences[i], (long long)fences[i - 1]);
  /* A zombie: its lease runs out while it sleeps, the next holder writes,
   * then the zombie writes with its old fence. fenced-kv refuses it. */
  char lease[33];
  fault_call c;
  fault_lease_id(lease);
  ck_assert_int_eq(fault_acquire(server[0], "zombie", 1000, lease, &c), 200);
  int64_t old = c.fence;
  /* (under a lock of its own, "zombie": fenced-kv keeps a highest fence per lock) */
  char h2[64];
  snprintf(h2, sizeof h2, "Picket-Fence: %lld", (long long)old);
  const char *hz[] = {"Picket-Lock: zombie", h2, NULL};
  harness_resp r;
  ck_assert_int_eq(harness_http_h(fkv_url, "PUT", "/kv/z", "first", hz, &r), 0);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  int64_t until = harness_now_ms() + 10000;
  long st;
  do {
    harness_sleep_ms(200);
    st = fault_acquire(server[1], "zombie", 5000, NULL, &c);
  } while (st == 409 && harness_now_ms() < until);
  ck_assert_msg(st == 200, "%s: the zombie's lock was not free again: %ld", what, st);
  ck_assert_int_gt(c.fence, old);
  char h3[64];
  snprintf(h3, sizeof h3, "Picket-Fence: %lld", (long long)c.fence);
  const char *hn[] = {"Picket-Lock: zombie", h3, NULL};
  ck_assert_int_eq(harness_http_h(fkv_url, "PUT", "/kv/z", "next", hn, &r), 0);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
  ck_assert_int_eq(harness_http_h(fkv_url, "PUT", "/kv/z", "zombie", hz, &r), 0);
  ck_assert_msg(r.status == 409, "%s: fenced-kv admitted the zombie's write: %ld", what, r.status);
  ck_assert_str_eq(harness_error_code(&r), "stale_fence");
  harness_resp_free(&r);
  printf("%s: %d grants, %d client errors (last: %s)\n", what, ngrants, atomic_load(&errors),
         atomic_load(&errors) ? last_error : "none");
}

START_TEST(leader_killed_under_load) {
  load_start();
  harness_sleep_ms(1500);
  int before = grants_after(0);
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  int64_t t_kill = harness_now_ms();
  harness_etcd_signal(E, leader, SIGKILL);
  /* grants go on once the other two elect a leader (measured ~1 s) */
  int64_t until = t_kill + 15000;
  while (first_grant_after(t_kill + 1) < 0 && harness_now_ms() < until) harness_sleep_ms(50);
  int64_t back = first_grant_after(t_kill + 1);
  ck_assert_msg(back > 0, "no grant within 15 s of the leader's death");
  printf("leader_killed_under_load: first grant %lld ms after the kill\n",
         (long long)(back - t_kill));
  harness_sleep_ms(1000);
  ck_assert_int_eq(harness_etcd_restart(E, leader), 0);
  int64_t t_back = harness_now_ms();
  harness_sleep_ms(1500);
  load_stop();
  ck_assert_int_gt(before, 5);
  ck_assert_msg(grants_after(t_back) > 0, "no grant after the old leader came back");
  check_book("leader_killed_under_load");
}
END_TEST

START_TEST(leader_paused_under_load) {
  load_start();
  harness_sleep_ms(1000);
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  int64_t t_pause = harness_now_ms();
  /* a paused leader is a partitioned one, as its peers and clients see it:
   * the others elect a new leader; on SIGCONT it finds a newer term and
   * steps down, and nothing it had in flight may grant again */
  harness_etcd_signal(E, leader, SIGSTOP);
  int64_t until = t_pause + 15000;
  while (first_grant_after(t_pause + 1) < 0 && harness_now_ms() < until) harness_sleep_ms(50);
  int64_t back = first_grant_after(t_pause + 1);
  ck_assert_msg(back > 0, "no grant within 15 s of the leader's pause");
  printf("leader_paused_under_load: first grant %lld ms after the pause\n",
         (long long)(back - t_pause));
  harness_sleep_ms(2000);
  harness_etcd_signal(E, leader, SIGCONT);
  int64_t t_cont = harness_now_ms();
  harness_sleep_ms(2000);
  load_stop();
  ck_assert_msg(grants_after(t_cont) > 0, "no grant after the old leader woke");
  check_book("leader_paused_under_load");
}
END_TEST

START_TEST(follower_restarted_under_load) {
  load_start();
  harness_sleep_ms(1000);
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  int f = (leader + 1) % 3;
  harness_etcd_signal(E, f, SIGKILL);
  harness_sleep_ms(1500);
  int64_t t_kill = harness_now_ms();
  ck_assert_msg(grants_after(t_kill - 1000) > 0, "no grant while a follower was down");
  ck_assert_int_eq(harness_etcd_restart(E, f), 0);
  harness_sleep_ms(1500);
  load_stop();
  /* the restarted member serves: a picketd given only it reads the lock
   * as the others do (a linearizable read) */
  const char *args[] = {"--etcd", harness_etcd_url(E, f), NULL};
  harness_picketd *solo = harness_picketd_start(NULL, args);
  ck_assert_ptr_nonnull(solo);
  fault_call a, b;
  ck_assert_int_eq(fault_lock(harness_picketd_url(solo), "job", NULL, NULL, &a), 200);
  ck_assert_int_eq(fault_lock(server[0], "job", NULL, NULL, &b), 200);
  ck_assert_int_eq(a.fence, b.fence);
  ck_assert_int_eq(a.fence, fences[ngrants - 1]);
  harness_picketd_free(solo);
  check_book("follower_restarted_under_load");
}
END_TEST

START_TEST(quorum_lost_is_503_then_served) {
  char lease[33];
  fault_call c;
  fault_lease_id(lease);
  ck_assert_int_eq(fault_acquire(server[0], "q", 5000, lease, &c), 200);
  int64_t before = c.fence;
  ck_assert_int_eq(fault_lease_call(server[0], "q", "release", lease, &c), 200);
  /* two of three gone: no majority, no write, no linearizable read */
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  int a = (leader + 1) % 3, b = (leader + 2) % 3;
  harness_etcd_signal(E, a, SIGKILL);
  harness_etcd_signal(E, b, SIGKILL);
  fault_lease_id(lease);
  long st = fault_acquire(server[0], "q", 5000, lease, &c);
  ck_assert_msg(st == 503, "acquire without a quorum: %ld %s", st, c.code);
  ck_assert_str_eq(c.code, "store_unavailable");
  /* refused within the call's bound (--etcd-timeout-ms 2000), never hung */
  ck_assert_msg(c.t1 - c.t0 < 2000 * 4, "the refusal took %lld ms", (long long)(c.t1 - c.t0));
  printf("quorum_lost_is_503_then_served: 503 after %lld ms\n", (long long)(c.t1 - c.t0));
  ck_assert_int_eq(fault_lock(server[1], "q", NULL, NULL, &c), 503);
  harness_resp r;
  ck_assert_int_eq(harness_http(server[0], "GET", "/readyz", NULL, &r), 0);
  ck_assert_int_eq(r.status, 503);
  harness_resp_free(&r);
  /* the quorum back: served again, and the fence goes on from above */
  ck_assert_int_eq(harness_etcd_restart(E, a), 0);
  ck_assert_int_eq(harness_etcd_restart(E, b), 0);
  ck_assert_int_ge(harness_etcd_wait_leader(E, 15000), 0);
  int64_t until = harness_now_ms() + 15000;
  do {
    st = fault_acquire(server[0], "q", 5000, lease, &c);
    if (st != 200) harness_sleep_ms(100);
  } while (st != 200 && harness_now_ms() < until);
  ck_assert_msg(st == 200, "not served again after the quorum came back: %ld %s", st, c.code);
  ck_assert_int_gt(c.fence, before);
  ck_assert_int_eq(harness_http(server[0], "GET", "/readyz", NULL, &r), 0);
  ck_assert_int_eq(r.status, 200);
  harness_resp_free(&r);
}
END_TEST

static fault_call waited;

static void *waiter_main(void *arg) {
  fault_lock(server[0], "pw", "acquire", "{\"ttl_ms\":30000,\"wait_ms\":40000}", &waited);
  return arg;
}

START_TEST(watch_member_paused) {
  char lease[33];
  fault_call c;
  fault_lease_id(lease);
  ck_assert_int_eq(fault_acquire(server[1], "pw", 30000, lease, &c), 200);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, waiter_main, NULL), 0);
  /* the waiter waits, so picketd 0's release feed watches, on the first
   * member: every client starts at the first endpoint named */
  int64_t until = harness_now_ms() + 10000;
  while (harness_metric(server[0], "picket_waiters") < 1 && harness_now_ms() < until)
    harness_sleep_ms(50);
  ck_assert_msg(harness_metric(server[0], "picket_waiters") >= 1, "the waiter did not wait");
  harness_sleep_ms(1000);
  harness_etcd_signal(E, 0, SIGSTOP);
  ck_assert_int_eq(fault_lease_call(server[1], "pw", "release", lease, &c), 200);
  int64_t released = c.t1;
  pthread_join(t, NULL);
  harness_etcd_signal(E, 0, SIGCONT);
  ck_assert_msg(waited.status == 200, "the waiter: %ld %s", waited.status, waited.code);
  int64_t took = waited.t1 - released;
  printf("measure: a waiter whose watch's member is paused granted %lld ms after the release\n",
         (long long)took);
  ck_assert_msg(took <= 8000 * harness_time_scale(), "granted %lld ms after the release (TTL 30 s)",
                (long long)took);
}
END_TEST

int main(void) {
  Suite *s = suite_create("etcd_faults");
  TCase *tc = tcase_create("faults");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, leader_killed_under_load);
  tcase_add_test(tc, leader_paused_under_load);
  tcase_add_test(tc, follower_restarted_under_load);
  tcase_add_test(tc, quorum_lost_is_503_then_served);
  suite_add_tcase(s, tc);
  TCase *tw = tcase_create("watch");
  tcase_add_checked_fixture(tw, setup, teardown);
  tcase_set_timeout(tw, 120);
  tcase_add_test(tw, watch_member_paused);
  suite_add_tcase(s, tw);
  return harness_run_suite(s);
}
