/* test_redis_faults.c: picketd while its one Redis fails (issue 6).
 *
 * sigkill_under_load: six client threads hammer three locks (acquire then
 *   release) while Redis is SIGKILLed, kept down past every lease's TTL and
 *   restarted from its AOF (appendfsync always). While Redis is down every
 *   call must be a 503 store_unavailable, never a grant and never a broken
 *   connection; after it returns every lock must be granted again within
 *   1 s (asserted with a 3x margin for small CI machines), every fence
 *   granted after the crash must lie above every fence granted before it,
 *   and a long lease taken before the crash must still be held and renew.
 * slow_redis: Redis blocked by DEBUG SLEEP longer than --redis-timeout-ms.
 *   The request gets 503 close to the timeout instead of hanging, picketd
 *   reconnects by itself once Redis wakes, and the acquire that timed out
 *   turns out to have been granted anyway (Redis ran the queued script after
 *   the sleep): a 503 is "unknown", and a retry with the same client-chosen
 *   lease id is what recovers that grant.
 * restart_without_aof_under_load, flushall_under_load: the same clients
 *   while every fence counter is destroyed (Redis restarted with no AOF and
 *   no RDB; FLUSHALL), with --fence-floor clock: across the loss no fence of
 *   a lock repeats, and every grant is above every grant made before it. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "fault_util.h"

#define LOCKS 3
#define CLIENTS 6
#define RECS 16384
#define TTL_MS 800     /* shorter than the outage, so no lease outlives it */
#define DOWN_MS 1500

typedef struct {
  int lock;
  int release;  /* 0: acquire, 1: release */
  fault_call c;
} rec;

typedef struct {
  const char *base;
  int lock;
  rec *recs;
  int n;
} client;

static atomic_int stop_load;

static void add(client *cl, int release, const fault_call *c) {
  if (cl->n < RECS) cl->recs[cl->n++] = (rec){cl->lock, release, *c};
}

static void *client_main(void *arg) {
  client *cl = arg;
  char name[16];
  snprintf(name, sizeof name, "k%d", cl->lock);
  while (!atomic_load(&stop_load) && cl->n < RECS - 2) {
    fault_call a, r;
    fault_acquire(cl->base, name, TTL_MS, NULL, &a);
    add(cl, 0, &a);
    if (a.status == 200) {
      fault_lease_call(cl->base, name, "release", a.lease, &r);
      add(cl, 1, &r);
    } else {
      harness_sleep_ms(a.status == 409 ? 2 : 5); /* do not spin on a dead store */
    }
  }
  return NULL;
}

/* Starts the CLIENTS load threads against base, recording into cl. */
static void load_start(const char *base, client cl[CLIENTS], pthread_t t[CLIENTS]) {
  fault_call warm; /* the first HTTP call initialises libcurl, in one thread */
  ck_assert_int_eq(fault_lock(base, "k0", NULL, NULL, &warm), 200);
  atomic_store(&stop_load, 0);
  for (int i = 0; i < CLIENTS; i++) {
    cl[i] = (client){base, i % LOCKS, calloc(RECS, sizeof(rec)), 0};
    ck_assert_ptr_nonnull(cl[i].recs);
    pthread_create(&t[i], NULL, client_main, &cl[i]);
  }
}

START_TEST(sigkill_under_load) {
  harness_redis_opts ro = {.appendonly = 1};
  harness_redis *R = harness_redis_start(&ro);
  ck_assert_ptr_nonnull(R);
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), NULL);
  ck_assert_ptr_nonnull(P);

  static client cl[CLIENTS];
  pthread_t t[CLIENTS];
  load_start(harness_picketd_url(P), cl, t);
  /* a long lease taken before the crash must survive it (AOF) */
  fault_call kept;
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "kept", 60000, NULL, &kept), 200);
  harness_sleep_ms(1000);
  int64_t kill0 = harness_now_ms();
  harness_redis_stop(R, SIGKILL); /* returns once the process is reaped */
  int64_t kill1 = harness_now_ms();
  harness_sleep_ms(DOWN_MS / 2);
  /* the process serves (healthz) but says it cannot lock (readyz) */
  harness_resp hr;
  ck_assert_int_eq(harness_http(harness_picketd_url(P), "GET", "/healthz", NULL, &hr), 0);
  long healthz = hr.status;
  harness_resp_free(&hr);
  ck_assert_int_eq(harness_http(harness_picketd_url(P), "GET", "/readyz", NULL, &hr), 0);
  long readyz = hr.status;
  char readyz_code[40];
  const char *code = harness_error_code(&hr);
  snprintf(readyz_code, sizeof readyz_code, "%s", code ? code : "");
  harness_resp_free(&hr);
  harness_sleep_ms(DOWN_MS - DOWN_MS / 2);
  int64_t up0 = harness_now_ms();
  ck_assert_int_eq(harness_redis_restart(R), 0); /* returns once it answers PING */
  int64_t up1 = harness_now_ms();
  harness_sleep_ms(2000);
  atomic_store(&stop_load, 1);
  for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL);
  ck_assert_msg(fault_child_alive(harness_picketd_pid(P)), "picketd died");
  fault_call k;
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "kept", 60000, NULL, &k), 409);
  ck_assert_int_eq(fault_lease_call(harness_picketd_url(P), "kept", "renew", kept.lease, &k), 200);
  ck_assert_int_eq(k.fence, kept.fence);
  ck_assert_int_eq(healthz, 200);
  ck_assert_int_eq(readyz, 503);
  ck_assert_str_eq(readyz_code, "store_unavailable");

  int64_t max_before[LOCKS] = {0}, first_after[LOCKS], min_after[LOCKS];
  int grants_before[LOCKS] = {0}, grants_after[LOCKS] = {0};
  int down_calls = 0, down_grants = 0, down_other = 0, transport = 0;
  char other[200] = "";
  for (int l = 0; l < LOCKS; l++) first_after[l] = min_after[l] = INT64_MAX;
  for (int i = 0; i < CLIENTS; i++)
    for (int j = 0; j < cl[i].n; j++) {
      const rec *x = &cl[i].recs[j];
      const fault_call *c = &x->c;
      if (c->status == 0) transport++;
      if (c->t0 >= kill1 && c->t1 <= up0) { /* wholly inside the outage */
        down_calls++;
        if (c->status == 200) down_grants++;
        if (c->status != 503 || strcmp(c->code, "store_unavailable") != 0) {
          down_other++;
          snprintf(other, sizeof other, "%s: %ld %s", x->release ? "release" : "acquire",
                   c->status, c->code);
        }
      }
      if (x->release || c->status != 200) continue;
      ck_assert_int_gt(c->fence, 0);
      if (c->t0 < up0) { /* granted by the Redis that crashed */
        if (c->fence > max_before[x->lock]) max_before[x->lock] = c->fence;
        grants_before[x->lock]++;
      } else {
        if (c->fence < min_after[x->lock]) min_after[x->lock] = c->fence;
        if (c->t1 < first_after[x->lock]) first_after[x->lock] = c->t1;
        grants_after[x->lock]++;
      }
    }
  int64_t recovery = 0;
  for (int l = 0; l < LOCKS; l++) {
    printf("lock k%d: %d grants before the crash (max fence %lld), %d after (min fence %lld), "
           "first grant %lld ms after Redis answered\n",
           l, grants_before[l], (long long)max_before[l], grants_after[l],
           (long long)min_after[l], (long long)(first_after[l] - up1));
    ck_assert_msg(grants_before[l] > 0 && grants_after[l] > 0, "lock k%d saw no grants", l);
    ck_assert_msg(min_after[l] > max_before[l],
                  "lock k%d: fence %lld after the crash, %lld granted before", l,
                  (long long)min_after[l], (long long)max_before[l]);
    if (first_after[l] - up1 > recovery) recovery = first_after[l] - up1;
  }
  printf("kill took %lld ms; outage: %d calls, %d grants, %d not store_unavailable; "
         "restart took %lld ms; every lock granted again %lld ms after Redis answered\n",
         (long long)(kill1 - kill0), down_calls, down_grants, down_other,
         (long long)(up1 - up0), (long long)recovery);
  ck_assert_msg(transport == 0, "%d calls got no HTTP reply", transport);
  ck_assert_msg(down_calls >= 20, "only %d calls during the outage", down_calls);
  ck_assert_msg(down_grants == 0, "%d grants while Redis was down", down_grants);
  ck_assert_msg(down_other == 0, "%d calls during the outage were not 503 store_unavailable, "
                "e.g. %s", down_other, other);
  ck_assert_msg(recovery < 3000 * harness_time_scale(), "serving again took %lld ms",
                (long long)recovery);

  /* every grant of one lock, across the crash, has its own fence: the AOF
   * kept each acknowledged INCR */
  for (int l = 0; l < LOCKS; l++) {
    int n = 0;
    int64_t *f = calloc((size_t)CLIENTS * RECS, sizeof *f);
    for (int i = 0; i < CLIENTS; i++)
      for (int j = 0; j < cl[i].n; j++)
        if (cl[i].recs[j].lock == l && !cl[i].recs[j].release && cl[i].recs[j].c.status == 200)
          f[n++] = cl[i].recs[j].c.fence;
    for (int a = 0; a < n; a++)
      for (int b = a + 1; b < n; b++)
        ck_assert_msg(f[a] != f[b], "lock k%d: fence %lld granted twice", l, (long long)f[a]);
    free(f);
  }
  for (int i = 0; i < CLIENTS; i++) free(cl[i].recs);
  harness_picketd_free(P);
  harness_redis_free(R);
}
END_TEST

#define REDIS_TIMEOUT_MS 300

START_TEST(slow_redis) {
  const int64_t scale = harness_time_scale();
  const int64_t sleep_ms = 1500 * scale, margin_ms = 1000 * scale; /* margin < sleep */
  harness_redis *R = harness_redis_start(NULL);
  ck_assert_ptr_nonnull(R);
  /* one worker thread, so "recovered" means the very connection that timed
   * out was replaced, not that another worker served */
  const char *args[] = {"--redis-timeout-ms", "300", "--threads", "1", NULL};
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(P);
  const char *url = harness_picketd_url(P);
  fault_call c;
  ck_assert_int_eq(fault_acquire(url, "slow-a", 60000, NULL, &c), 200);

  /* DEBUG SLEEP sent (not awaited) on a connection of our own; Redis is
   * asleep once it has read it, well before picketd's request comes */
  redisContext *sleeper = harness_redis_connect(R);
  ck_assert_ptr_nonnull(sleeper);
  struct timeval tv = {(time_t)(sleep_ms / 1000 + 10), 0};
  redisSetTimeout(sleeper, tv);
  ck_assert_int_eq(redisAppendCommand(sleeper, "DEBUG SLEEP %.3f", sleep_ms / 1000.0), REDIS_OK);
  int done = 0;
  while (!done) ck_assert_int_eq(redisBufferWrite(sleeper, &done), REDIS_OK);
  harness_sleep_ms(50);
  char lease[33];
  fault_lease_id(lease);
  fault_acquire(url, "slow-b", 60000, lease, &c);
  int64_t took = c.t1 - c.t0;
  printf("acquire during DEBUG SLEEP %lld ms: %ld %s after %lld ms (timeout %d ms)\n",
         (long long)sleep_ms, c.status, c.code, (long long)took, REDIS_TIMEOUT_MS);
  ck_assert_int_eq(c.status, 503);
  ck_assert_str_eq(c.code, "store_unavailable");
  ck_assert_msg(took >= REDIS_TIMEOUT_MS - 50, "503 after %lld ms: Redis was not slow?",
                (long long)took);
  ck_assert_msg(took < REDIS_TIMEOUT_MS + margin_ms, "503 after %lld ms", (long long)took);
  /* still asleep: the reconnect attempt must time out too, not hang */
  fault_lock(url, "slow-a", NULL, NULL, &c);
  printf("inspect during the sleep: %ld %s after %lld ms\n", c.status, c.code,
         (long long)(c.t1 - c.t0));
  ck_assert_int_eq(c.status, 503);
  ck_assert_msg(c.t1 - c.t0 < REDIS_TIMEOUT_MS + margin_ms, "503 after %lld ms",
                (long long)(c.t1 - c.t0));
  redisReply *x = NULL;
  ck_assert_int_eq(redisGetReply(sleeper, (void **)&x), REDIS_OK);
  ck_assert_msg(x && x->type == REDIS_REPLY_STATUS, "DEBUG SLEEP failed");
  freeReplyObject(x);
  redisFree(sleeper);
  int64_t woke = harness_now_ms();

  long st = 0;
  while (st != 200 && harness_now_ms() - woke < 5000 * scale) {
    st = fault_acquire(url, "slow-c", 60000, NULL, &c);
    if (st != 200) harness_sleep_ms(10);
  }
  int64_t back = harness_now_ms() - woke;
  printf("served again %lld ms after DEBUG SLEEP returned\n", (long long)back);
  ck_assert_int_eq(st, 200);
  ck_assert_msg(back < 2000 * scale, "recovery took %lld ms", (long long)back);
  ck_assert_msg(fault_child_alive(harness_picketd_pid(P)), "picketd died");

  /* The acquire that got 503 reached Redis before the timeout; Redis ran it
   * when it woke, so the lock is held by a lease nobody was told about. The
   * same lease id recovers that grant (same fence) instead of waiting out
   * its TTL. */
  ck_assert_int_eq(fault_lock(url, "slow-b", NULL, NULL, &c), 200);
  printf("after the timeout, slow-b held=%d fence=%lld\n", c.held, (long long)c.fence);
  ck_assert_msg(c.held == 1 && harness_fence_follows(0, c.fence, 0),
                "the timed-out acquire was not applied late");
  int64_t late = c.fence;
  ck_assert_int_eq(fault_acquire(url, "slow-b", 60000, NULL, &c), 409);
  ck_assert_int_eq(fault_acquire(url, "slow-b", 60000, lease, &c), 200);
  ck_assert_int_eq(c.fence, late);
  ck_assert_int_eq(fault_lease_call(url, "slow-b", "release", lease, &c), 200);
  harness_picketd_free(P);
  harness_redis_free(R);
}
END_TEST

/* ---- counters destroyed under load (--fence-floor clock) ----------------- */

typedef struct {
  int64_t t1, fence;
} done_grant;

static int by_t1(const void *a, const void *b) {
  const done_grant *x = a, *y = b;
  return x->t1 < y->t1 ? -1 : x->t1 > y->t1;
}

static int by_fence64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Checks the n grants of one lock (fence, request sent t0, reply t1): no
 * fence twice, and whenever one grant's reply came before another's request
 * was sent, the later has the higher fence. Returns the number of ordered
 * pairs, or -1 with the offending fences in *bad_a, *bad_b (equal: twice). */
static long long fences_follow_time(int n, const int64_t *fence, const int64_t *t0,
                                    const int64_t *t1, int64_t *bad_a, int64_t *bad_b) {
  done_grant *g = malloc(sizeof *g * (size_t)(n + 1));
  int64_t *sorted = malloc(sizeof *sorted * (size_t)(n + 1)), *prefix_max = malloc(sizeof *sorted * (size_t)(n + 1));
  ck_assert(g && sorted && prefix_max);
  for (int i = 0; i < n; i++) g[i] = (done_grant){t1[i], fence[i]}, sorted[i] = fence[i];
  qsort(g, (size_t)n, sizeof *g, by_t1);
  qsort(sorted, (size_t)n, sizeof *sorted, by_fence64);
  long long pairs = 0;
  for (int i = 1; i < n; i++)
    if (sorted[i] == sorted[i - 1]) {
      *bad_a = *bad_b = sorted[i];
      pairs = -1;
    }
  for (int i = 0; i < n; i++) prefix_max[i] = i && prefix_max[i - 1] > g[i].fence ? prefix_max[i - 1] : g[i].fence;
  for (int b = 0; b < n && pairs >= 0; b++) {
    int lo = 0, hi = n; /* how many replies came before t0[b] */
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (g[mid].t1 < t0[b]) lo = mid + 1; else hi = mid;
    }
    pairs += lo;
    if (lo > 0 && prefix_max[lo - 1] >= fence[b]) {
      *bad_a = prefix_max[lo - 1], *bad_b = fence[b];
      pairs = -1;
    }
  }
  free(g), free(sorted), free(prefix_max);
  return pairs;
}

/* The six clients run on three locks against a Redis without persistence
 * and a picketd with the clock floor; `destroy` wipes every fence counter
 * in the middle. Every grant is recorded, and for every two grants of one
 * lock where the first reply came before the second request was sent, the
 * second fence must be the higher: a lost counter never sends a lock's
 * fences back, nor repeats one. */
static void counters_lost_under_load(void (*destroy)(harness_redis *), const char *what) {
  harness_redis *R = harness_redis_start(NULL); /* appendonly no, no RDB */
  ck_assert_ptr_nonnull(R);
  const char *args[] = {"--fence-floor", "clock", NULL};
  harness_picketd *P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(P);
  static client cl[CLIENTS];
  pthread_t t[CLIENTS];
  load_start(harness_picketd_url(P), cl, t);
  harness_sleep_ms(700);
  int64_t ev0 = harness_now_ms();
  destroy(R);
  int64_t ev1 = harness_now_ms();
  harness_sleep_ms(1500);
  atomic_store(&stop_load, 1);
  for (int i = 0; i < CLIENTS; i++) pthread_join(t[i], NULL);
  ck_assert_msg(fault_child_alive(harness_picketd_pid(P)), "picketd died");

  int64_t *fence = malloc(sizeof(int64_t) * CLIENTS * RECS);
  int64_t *t0 = malloc(sizeof(int64_t) * CLIENTS * RECS), *t1 = malloc(sizeof(int64_t) * CLIENTS * RECS);
  ck_assert(fence && t0 && t1);
  long long pairs = 0;
  for (int l = 0; l < LOCKS; l++) {
    int n = 0, before = 0, after = 0;
    int64_t max_before = 0, min_after = INT64_MAX;
    for (int i = 0; i < CLIENTS; i++)
      for (int j = 0; j < cl[i].n; j++) {
        const rec *x = &cl[i].recs[j];
        if (x->lock != l || x->release || x->c.status != 200) continue;
        fence[n] = x->c.fence, t0[n] = x->c.t0, t1[n] = x->c.t1, n++;
        if (x->c.t1 < ev0) {
          before++;
          if (x->c.fence > max_before) max_before = x->c.fence;
        } else if (x->c.t0 > ev1) {
          after++;
          if (x->c.fence < min_after) min_after = x->c.fence;
        }
      }
    printf("%s: lock k%d: %d grants before (max fence %lld), %d after (min fence %lld)\n", what,
           l, before, (long long)max_before, after, (long long)min_after);
    ck_assert_msg(before > 0 && after > 0, "%s: lock k%d saw no grants on one side", what, l);
    int64_t a = 0, b = 0;
    long long p = fences_follow_time(n, fence, t0, t1, &a, &b);
    ck_assert_msg(p >= 0, "%s: lock k%d: fence %lld granted after fence %lld", what, l,
                  (long long)b, (long long)a);
    pairs += p;
  }
  printf("%s: %lld ordered pairs of grants checked, %lld ms to destroy the counters\n", what,
         pairs, (long long)(ev1 - ev0));
  free(fence), free(t0), free(t1);
  for (int i = 0; i < CLIENTS; i++) free(cl[i].recs);
  harness_picketd_free(P);
  harness_redis_free(R);
}

static void restart_empty(harness_redis *r) {
  harness_redis_stop(r, SIGKILL);
  ck_assert_int_eq(harness_redis_restart(r), 0); /* no AOF, no RDB: every key is gone */
}

static void flushall(harness_redis *r) {
  redisReply *x = harness_redis_cmd(r, "FLUSHALL");
  ck_assert_msg(x && x->type == REDIS_REPLY_STATUS, "FLUSHALL failed");
  freeReplyObject(x);
}

START_TEST(restart_without_aof_under_load) {
  counters_lost_under_load(restart_empty, "restart without AOF");
}
END_TEST

START_TEST(flushall_under_load) { counters_lost_under_load(flushall, "FLUSHALL"); }
END_TEST

int main(void) {
  const TTest *tests[] = {sigkill_under_load, slow_redis, restart_without_aof_under_load,
                          flushall_under_load};
  return fault_run("fault_redis", tests, 4);
}
