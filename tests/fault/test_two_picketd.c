/* test_two_picketd.c: two picketd on one Redis, one SIGKILLed mid-load
 * (issue 6).
 *
 * picketd is stateless: every lock lives in Redis, so a second picketd is a
 * hot standby and clients only need to switch. Six clients take turns on
 * three locks, half of them through each picketd, half of them with
 * blocking acquires (wait_ms) that park in picketd. Each acquire carries a
 * client-chosen lease id, so a client whose picketd died with the request
 * in flight retries the same acquire on the other one and gets the grant
 * it may already have (the retry is idempotent), never a second grant.
 *
 * The bookkeeping is the test's own: per lock, who holds a live lease now
 * (set on a 200, cleared before the release is sent, expired at the
 * holder's local deadline) and the last fence granted. No 200 may arrive
 * while another client's live lease is recorded, and the fences of one
 * lock must rise strictly in the order the grants were recorded. A monitor
 * reads every lock through the surviving picketd and checks that the fence
 * it reports never goes down. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "fault_util.h"

#define LOCKS 3
#define CLIENTS 6
#define TTL_MS 2000

typedef struct {
  pthread_mutex_t mu;
  int holder;          /* client id, -1 when free */
  int64_t deadline;    /* holder's local deadline (request sent + TTL) */
  int64_t last_fence;
  int grants, grants_after_kill;
} lock_book;

static lock_book book[LOCKS];
static const char *server[2];
static atomic_int stop_load;
static atomic_llong killed_at; /* 0 until picketd A is killed */
static atomic_int violations;
static char violation[300];

typedef struct {
  int id, lock, s; /* s: index of the picketd it talks to now */
  int wait_ms;     /* > 0: a blocking acquire, parked in picketd while it waits */
  int grants_after_kill, switches, errors, lost; /* lost: calls with no reply */
  char why[200];
} client;

static void violate(const char *fmt, long long a, long long b, long long c) {
  if (atomic_fetch_add(&violations, 1) == 0) snprintf(violation, sizeof violation, fmt, a, b, c);
}

/* One call with failover: on no reply or a 503, switch to the other
 * picketd and send the very same request again (up to 4 tries). Sets
 * *lost when some attempt got no reply (it may have been applied). */
static long call_failover(client *cl, const char *name, const char *action, const char *lease,
                          fault_call *c, int *lost) {
  *lost = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    char body[120];
    snprintf(body, sizeof body, "{\"ttl_ms\":%d,\"wait_ms\":%d,\"lease\":\"%s\"}", TTL_MS,
             cl->wait_ms, lease);
    long st = strcmp(action, "acquire") == 0
                  ? fault_lock(server[cl->s], name, "acquire", body, c)
                  : fault_lease_call(server[cl->s], name, action, lease, c);
    if (st != 0 && st != 503) return st;
    if (st == 0) {
      *lost = 1;
      cl->lost++;
    }
    cl->s ^= 1;
    cl->switches++;
  }
  return c->status;
}

static void *client_main(void *arg) {
  client *cl = arg;
  char name[16];
  snprintf(name, sizeof name, "k%d", cl->lock);
  lock_book *b = &book[cl->lock];
  while (!atomic_load(&stop_load)) {
    char lease[33];
    fault_call c;
    int lost;
    fault_lease_id(lease);
    long st = call_failover(cl, name, "acquire", lease, &c, &lost);
    if (st == 409) {
      harness_sleep_ms(2);
      continue;
    }
    if (st != 200) {
      cl->errors++;
      snprintf(cl->why, sizeof cl->why, "acquire: %ld %s", st, c.code);
      harness_sleep_ms(10);
      continue;
    }
    int64_t start = c.t0; /* of the last attempt: the grant is no older */
    pthread_mutex_lock(&b->mu);
    if (b->holder >= 0 && harness_now_ms() < b->deadline)
      violate("lock %lld granted to client %lld while client %lld holds a live lease",
              cl->lock, cl->id, b->holder);
    if (c.fence <= b->last_fence)
      violate("lock %lld: fence %lld granted after fence %lld", cl->lock, c.fence, b->last_fence);
    b->holder = cl->id;
    b->deadline = start + TTL_MS;
    b->last_fence = c.fence;
    b->grants++;
    if (atomic_load(&killed_at) && c.t0 > atomic_load(&killed_at)) {
      b->grants_after_kill++;
      cl->grants_after_kill++;
    }
    pthread_mutex_unlock(&b->mu);
    harness_sleep_ms(2); /* the work the lock protects */
    pthread_mutex_lock(&b->mu);
    if (b->holder == cl->id) b->holder = -1; /* done before the release is sent */
    pthread_mutex_unlock(&b->mu);
    st = call_failover(cl, name, "release", lease, &c, &lost);
    /* lease_lost is right only when a lost reply may have released it */
    if (st != 200 && !(st == 409 && lost)) {
      cl->errors++;
      snprintf(cl->why, sizeof cl->why, "release: %ld %s", st, c.code);
    }
  }
  return NULL;
}

static int monitor_decreases, monitor_reads;

static void *monitor_main(void *arg) {
  (void)arg;
  int64_t last[LOCKS] = {0};
  while (!atomic_load(&stop_load)) {
    for (int l = 0; l < LOCKS; l++) {
      char name[16];
      fault_call c;
      snprintf(name, sizeof name, "k%d", l);
      if (fault_lock(server[1], name, NULL, NULL, &c) != 200) continue;
      monitor_reads++;
      if (c.fence < last[l]) monitor_decreases++;
      last[l] = c.fence;
    }
    harness_sleep_ms(20);
  }
  return NULL;
}

START_TEST(one_of_two_killed_mid_load) {
  harness_redis *R = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(R);
  harness_picketd *A = harness_picketd_start(harness_redis_url(R), NULL);
  harness_picketd *B = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_ptr_nonnull(A);
  ck_assert_ptr_nonnull(B);
  server[0] = harness_picketd_url(A);
  server[1] = harness_picketd_url(B);
  fault_call warm; /* the first HTTP call initialises libcurl, in one thread */
  ck_assert_int_eq(fault_lock(server[1], "k0", NULL, NULL, &warm), 200);
  for (int l = 0; l < LOCKS; l++) {
    pthread_mutex_init(&book[l].mu, NULL);
    book[l].holder = -1;
  }
  static client cl[CLIENTS];
  pthread_t t[CLIENTS], mon;
  for (int i = 0; i < CLIENTS; i++) {
    /* clients 3..5 wait in picketd for the lock (wait_ms): killing A also
     * drops the acquires parked in it */
    cl[i] = (client){.id = i, .lock = i % LOCKS, .s = i % 2, .wait_ms = i >= 3 ? 1000 : 0};
    pthread_create(&t[i], NULL, client_main, &cl[i]);
  }
  pthread_create(&mon, NULL, monitor_main, NULL);
  harness_sleep_ms(1000);
  int before = 0;
  for (int l = 0; l < LOCKS; l++) before += book[l].grants;
  atomic_store(&killed_at, harness_now_ms());
  harness_picketd_stop(A, SIGKILL);
  harness_sleep_ms(1500);
  atomic_store(&stop_load, 1);
  for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL);
  pthread_join(mon, NULL);

  int after = 0;
  for (int l = 0; l < LOCKS; l++) after += book[l].grants_after_kill;
  printf("grants: %d before the kill, %d after (all through B); monitor: %d reads\n", before,
         after, monitor_reads);
  for (int i = 0; i < CLIENTS; i++)
    printf("client %d (lock k%d, started on %s): %d switches, %d calls without a reply, "
           "%d grants after the kill\n", i, cl[i].lock, i % 2 ? "B" : "A", cl[i].switches,
           cl[i].lost, cl[i].grants_after_kill);
  ck_assert_msg(atomic_load(&violations) == 0, "%d violations, first: %s",
                atomic_load(&violations), violation);
  for (int i = 0; i < CLIENTS; i++) {
    ck_assert_msg(cl[i].errors == 0, "client %d: %d errors, last %s", i, cl[i].errors, cl[i].why);
    ck_assert_msg(cl[i].grants_after_kill > 0, "client %d got no grant after the kill", i);
    if (i % 2 == 0) ck_assert_msg(cl[i].switches > 0, "client %d never switched", i);
  }
  for (int l = 0; l < LOCKS; l++) ck_assert_msg(book[l].grants > 10, "lock k%d: few grants", l);
  ck_assert_int_gt(monitor_reads, 10);
  ck_assert_int_eq(monitor_decreases, 0);
  ck_assert_msg(fault_child_alive(harness_picketd_pid(B)), "picketd B died");
  /* Redis agrees with the book: each counter is the last fence recorded */
  for (int l = 0; l < LOCKS; l++) {
    redisReply *x = harness_redis_cmd(R, "GET picket:{k%d}:fence", l);
    ck_assert_msg(x && x->type == REDIS_REPLY_STRING, "no fence counter for k%d", l);
    ck_assert_int_eq(atoll(x->str), book[l].last_fence);
    freeReplyObject(x);
  }
  harness_picketd_free(B);
  harness_picketd_free(A);
  harness_redis_free(R);
}
END_TEST

int main(void) {
  const TTest *tests[] = {one_of_two_killed_mid_load};
  return fault_run("fault_two_picketd", tests, 1);
}
