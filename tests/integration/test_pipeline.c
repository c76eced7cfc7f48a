/* test_pipeline.c: picketd's pipelined Redis calls (--redis-pipeline).
 *
 * While several requests are in flight, each of picketd's HTTP event loops
 * suspends the connections whose lock calls it meets, writes the calls of
 * one pass to its own Redis connection at once, and completes them as the
 * replies come in order. Batching
 * must change no outcome, and the new moving parts (suspend/resume, one
 * shared connection, the drain at shutdown) must fail as cleanly as the
 * direct path does. Each case runs its own redis-server and picketd:
 *
 * load_on: 16 clients in acquire + release cycles on 4 locks, every call
 *   piped: each acquire 200 or (lock busy) 409 lock_held, each release 200,
 *   each lock's fences exactly 1..n (clock floor: rising) in grant order (the holder before a
 *   grant had sent its release before that grant's reply came), GET's
 *   fence == grants, and the metrics show calls sharing round trips.
 * no_mode_blocks_the_loop: with one loop and Redis stopped, under `auto`
 *   and `off`, an acquire, a listing, a break and /readyz are out at the store
 *   while /healthz is answered (every call goes through the runner,
 *   server/call.c: `auto` pipes, `off` hands calls to --store-workers).
 * off_and_min_replicas: the same load with `off` never uses the pipeline;
 *   `on` with --min-replicas does (a WAIT after the batch): with no
 *   replica the grant is refused not_replicated and taken back.
 * waits_are_not_timeouts: --min-replicas 1 with no replica, 32 clients
 *   whose acquires arrive spread out, so every lane carries several WAITs
 *   and calls queue behind them: each is 503 not_replicated, never
 *   store_unavailable (a call's timeout counts the WAITs ahead of it).
 * noscript_in_batch: SCRIPT FLUSH, then one batch of acquires and releases
 *   that all meet NOSCRIPT: each is re-run and answers as without the flush.
 * redis_killed_mid_batch: Redis SIGKILLed while calls wait in the
 *   pipeline: each is a 503 store_unavailable at once (not at the Redis
 *   timeout), none was granted, and picketd serves again after a restart.
 * sigterm_finishes_piped_calls: SIGTERM while acquires wait in the
 *   pipeline: each gets its grant (and keeps it), picketd exits 0.
 * sigterm_drains_pipeline: the same past --shutdown-timeout-ms, so the
 *   calls are still queued when picketd drains the pipeline: it waits for
 *   them, answers them before the daemon stops, and exits 0; each client
 *   gets its grant and the grant stays.
 * half_closed_client: a client that half-closes or closes while its
 *   acquire is in the pipeline gets no grant, and the lock is not held.
 * stopped_redis_times_out: with Redis stopped, piped calls end at
 *   --redis-timeout-ms with 503, and the event loops serve meanwhile.
 * pipe_setup_never_waits: with one loop, calls that meet NOSCRIPT are sent
 *   again on the pipe (no connection is opened for them), and a pipe
 *   reopened while Redis is stopped waits for its setup's replies while
 *   /healthz is answered.
 *
 * Why SIGSTOP and not DEBUG SLEEP to hold calls in the pipeline: a stopped
 * Redis stays stopped until the test has seen (picket_http_inflight_requests)
 * that every call is inside picketd, so nothing depends on a sleep being
 * long enough. picketd's --redis-timeout-ms is raised above any wait here,
 * so a timeout never stands in for the outcome under test. */
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include "picketd_common.h"
#include "../fault/fault_util.h" /* fault_lock & co., fault_stop_process, fault_log_has */

/* far above every wait below: a piped call must end by the event under
 * test, never by this timeout */
#define REDIS_TIMEOUT "30000"

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double metric(const char *sample) { return harness_metric(harness_picketd_url(P), sample); }

/* Waits until `n` requests besides the /metrics probe itself (which the
 * gauge counts too) are in picketd. */
static void await_inflight(int n) {
  int64_t until = harness_now_ms() + 10000 * harness_time_scale();
  double v = -1;
  while ((v = metric("picket_http_inflight_requests")) != n + 1 && harness_now_ms() < until)
    harness_sleep_ms(5);
  ck_assert_msg(v == n + 1, "%g requests in flight, want %d (and the probe)", v - 1, n);
}

static void redis_freeze(void) { fault_stop_process(harness_redis_pid(R)); }
static void redis_thaw(void) { kill(harness_redis_pid(R), SIGCONT); }

/* ---- one lock call on a thread of its own --------------------------- */

typedef struct {
  const char *name;   /* a lock's name, or a path ("/v1/...": a GET of it) */
  const char *action; /* NULL: GET */
  char body[120];
  fault_call c;
  pthread_t t;
  atomic_int done;
} shot;

static void *shot_main(void *arg) {
  shot *s = arg;
  if (s->name[0] == '/') {
    harness_resp r;
    s->c.status = harness_http(harness_picketd_url(P), "GET", s->name, NULL, &r) == 0 ? r.status : 0;
    harness_resp_free(&r);
  } else {
    fault_lock(harness_picketd_url(P), s->name, s->action, s->body, &s->c);
  }
  atomic_store(&s->done, 1);
  return NULL;
}

static void shot_fire(shot *s, const char *name, const char *action, const char *body) {
  atomic_store(&s->done, 0);
  s->name = name;
  s->action = action;
  snprintf(s->body, sizeof s->body, "%s", body);
  pthread_create(&s->t, NULL, shot_main, s);
}

static const char *const lock_names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"};

/* ---- a load of acquire/release cycles ------------------------------- */

enum { THREADS = 16, LOCKS = 4, CYCLES = 40 };

typedef struct {
  int lock;
  int64_t fence;
  int64_t got_us, release_us; /* acquire's reply received, release sent */
} grant;

typedef struct {
  int id, n;
  grant g[CYCLES];
  char why[200];
} loader;

static void *loader_main(void *arg) {
  loader *l = arg;
  for (int i = 0; i < CYCLES; i++) {
    grant *g = &l->g[l->n];
    g->lock = (l->id + i) % LOCKS;
    fault_call a, r;
    /* A long TTL: a hold ends by its release only, so holds of one lock
     * never overlap. No wait_ms: while the lock is busy the client itself
     * retries, so this load tests the pipeline and not wait.c (where a
     * release that races a waiter's parking can be missed, leaving the
     * waiter asleep until the holder's TTL). */
    while (fault_lock(harness_picketd_url(P), lock_names[g->lock], "acquire",
                      "{\"ttl_ms\":60000}", &a) == 409 && strcmp(a.code, "lock_held") == 0)
      harness_sleep_ms(1);
    g->got_us = now_us();
    if (a.status != 200) {
      snprintf(l->why, sizeof l->why, "acquire %s: %ld %s", lock_names[g->lock], a.status, a.code);
      return NULL;
    }
    g->fence = a.fence;
    g->release_us = now_us();
    if (fault_lease_call(harness_picketd_url(P), lock_names[g->lock], "release", a.lease, &r) !=
        200) {
      snprintf(l->why, sizeof l->why, "release %s: %ld %s", lock_names[g->lock], r.status, r.code);
      return NULL;
    }
    l->n++;
  }
  return NULL;
}

static int by_fence(const void *a, const void *b) {
  const grant *x = a, *y = b;
  return x->fence < y->fence ? -1 : x->fence > y->fence;
}

/* Runs the load and checks what any mode must give; returns the grants. */
static int run_load(void) {
  static loader l[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    l[i] = (loader){.id = i};
    pthread_create(&t[i], NULL, loader_main, &l[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    ck_assert_msg(l[i].n == CYCLES, "client %d: %d cycles, then %s", i, l[i].n, l[i].why);

  static grant all[THREADS * CYCLES];
  int total = 0;
  for (int lock = 0; lock < LOCKS; lock++) {
    int n = 0;
    for (int i = 0; i < THREADS; i++)
      for (int j = 0; j < l[i].n; j++)
        if (l[i].g[j].lock == lock) all[n++] = l[i].g[j];
    qsort(all, (size_t)n, sizeof all[0], by_fence);
    for (int k = 0; k < n; k++) {
      /* one count per grant: no fence twice, none skipped (with the clock
       * floor: no fence twice) */
      ck_assert_msg(harness_fence_follows(k ? all[k - 1].fence : 0, all[k].fence, 0),
                    "%s: grant %d of %d has fence %lld", lock_names[lock], k + 1, n,
                    (long long)all[k].fence);
      /* the holder before this grant had sent its release before this
       * grant's reply came back: fences rise in the order of the holds */
      if (k > 0)
        ck_assert_msg(all[k - 1].release_us <= all[k].got_us,
                      "%s: fence %lld granted %lld us before fence %lld was released",
                      lock_names[lock], (long long)all[k].fence,
                      (long long)(all[k - 1].release_us - all[k].got_us),
                      (long long)all[k - 1].fence);
    }
    fault_call g;
    ck_assert_int_eq(fault_lock(harness_picketd_url(P), lock_names[lock], NULL, NULL, &g), 200);
    ck_assert_msg(g.fence == all[n - 1].fence && g.held == 0, "%s after %d grants: fence %lld held %d",
                  lock_names[lock], n, (long long)g.fence, g.held);
    total += n;
  }
  return total;
}

static void start(const char *mode, const char *const *more) {
  const char *args[16] = {"--redis-pipeline", mode, "--redis-timeout-ms", REDIS_TIMEOUT};
  for (int i = 0; more && more[i]; i++) args[4 + i] = more[i];
  start_both(NULL, args);
}

START_TEST(load_on) {
  start("on", NULL);
  int64_t t0 = harness_now_ms();
  int grants = run_load();
  double batches = metric("picket_redis_pipeline_batches_total");
  double calls = metric("picket_redis_pipeline_calls_total");
  printf("load_on: %d grants in %lld ms, %.0f calls in %.0f batches\n", grants,
         (long long)(harness_now_ms() - t0), calls, batches);
  /* `on`: every acquire's first attempt and every release is piped (a
   * waiter's retries run on its loop's direct connection) */
  ck_assert_msg(calls >= 2.0 * grants, "%.0f piped calls for %d grants", calls, grants);
  ck_assert_msg(batches > 0 && calls > batches, "%.0f calls in %.0f batches: none shared one",
                calls, batches);
  stop_both();
}
END_TEST

/* Every store call goes through the runner (server/call.c), so no mode
 * makes a loop wait on the store: with one loop and Redis frozen, an
 * acquire, a listing and a break are out at the store while /healthz is
 * answered. (Before issue 41, `auto` made a lone client's call on the
 * loop's own connection and `off` every call, and listings and breaks
 * always: the loop served nothing until Redis answered.) */
static void loop_never_waits(const char *mode) {
  const char *one[] = {"--threads", "1", NULL};
  start(mode, one);
  /* the loop's pipe connects once the loop runs (a blocking connect and
   * script load, with Redis up): a first call waits for it */
  fault_call warm;
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "nw.warm", 30000, NULL, &warm), 200);
  shot acquire, list, brk, ready;
  redis_freeze();
  shot_fire(&acquire, "nw.a", "acquire", "{\"ttl_ms\":30000}");
  shot_fire(&list, "/v1/locks?limit=5", NULL, "");
  shot_fire(&brk, "nw.c", "break", "{}");
  shot_fire(&ready, "/readyz", NULL, "");
  await_inflight(4); /* all four are in picketd, their store calls out */
  harness_resp h;
  ck_assert_int_eq(harness_http(harness_picketd_url(P), "GET", "/healthz", NULL, &h), 0);
  ck_assert_int_eq(h.status, 200);
  harness_resp_free(&h);
  int waited = atomic_load(&acquire.done) + atomic_load(&list.done) + atomic_load(&brk.done) +
               atomic_load(&ready.done);
  redis_thaw();
  pthread_join(acquire.t, NULL);
  pthread_join(list.t, NULL);
  pthread_join(brk.t, NULL);
  pthread_join(ready.t, NULL);
  ck_assert_msg(waited == 0, "%s: /healthz was answered only after %d store call(s) ended", mode,
                waited);
  ck_assert_msg(acquire.c.status == 200, "%s: acquire %ld %s", mode, acquire.c.status, acquire.c.code);
  ck_assert_msg(list.c.status == 200, "%s: listing %ld", mode, list.c.status);
  ck_assert_msg(brk.c.status == 200, "%s: break %ld %s", mode, brk.c.status, brk.c.code);
  ck_assert_msg(ready.c.status == 200, "%s: /readyz %ld", mode, ready.c.status);
  stop_both();
}

START_TEST(no_mode_blocks_the_loop) {
  loop_never_waits("auto");
  loop_never_waits("off");
}
END_TEST

START_TEST(off_and_min_replicas) {
  start("off", NULL);
  run_load();
  ck_assert_int_eq((int)metric("picket_redis_pipeline_batches_total"), 0);
  ck_assert_int_eq((int)metric("picket_redis_pipeline_calls_total"), 0);
  harness_picketd_free(P);
  /* --min-replicas keeps `on`: the pipe writes a WAIT after the batch.
   * No replica here, so the grant is refused and taken back (the undo is
   * a call of the pipe's own, so wait for it to land). */
  const char *args[] = {"--redis-pipeline", "on", "--min-replicas", "1",
                        "--replica-timeout-ms", "50", NULL};
  P = harness_picketd_start(harness_redis_url(R), args);
  ck_assert_ptr_nonnull(P);
  fault_call c;
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "mr", 30000, NULL, &c), 503);
  ck_assert_str_eq(c.code, "not_replicated");
  ck_assert_int_ge((int)metric("picket_redis_pipeline_batches_total"), 1);
  int64_t until = harness_now_ms() + 5000 * harness_time_scale();
  for (;;) {
    ck_assert_int_eq(fault_lock(harness_picketd_url(P), "mr", NULL, NULL, &c), 200);
    if (!c.held || harness_now_ms() > until) break;
    harness_sleep_ms(10);
  }
  ck_assert_msg(c.held == 0, "the refused grant was not taken back");
  stop_both();
}
END_TEST

/* ---- calls queued behind WAITs ----------------------------------------- */

#define WQ_CLIENTS 32
#define WQ_RUN_MS 2500

typedef struct {
  int id, refused, other;
  char why[96];
} wq_client;

static void *wq_main(void *arg) {
  wq_client *w = arg;
  char name[32];
  unsigned seed = (unsigned)w->id * 2654435761u;
  int64_t until = harness_now_ms() + WQ_RUN_MS;
  for (int n = 0; harness_now_ms() < until; n++) {
    fault_call c;
    /* a name per call: a refused grant is taken back by a call of the
     * pipe's own, which the next acquire could overtake */
    snprintf(name, sizeof name, "wq.%d.%d", w->id, n);
    long st = fault_acquire(harness_picketd_url(P), name, 30000, NULL, &c);
    if (st == 503 && strcmp(c.code, "not_replicated") == 0) w->refused++;
    else if (w->other++ == 0) snprintf(w->why, sizeof w->why, "%ld %s", st, c.code);
    /* spread the arrivals, so the loop's passes are many and small and
     * the lanes fill with WAITs */
    harness_sleep_ms((int)(rand_r(&seed) % 40));
  }
  return NULL;
}

START_TEST(waits_are_not_timeouts) {
  /* a WAIT takes 300 ms (no replica ever acknowledges); the command
   * timeout, 700 ms, is less than three of them: a call behind three WAITs
   * on its lane met it before the fix */
  const char *args[] = {"--redis-pipeline", "on", "--threads", "1", "--min-replicas", "1",
                        "--replica-timeout-ms", "300", "--redis-timeout-ms", "700", NULL};
  start_both(NULL, args);
  static wq_client w[WQ_CLIENTS];
  pthread_t t[WQ_CLIENTS];
  for (int i = 0; i < WQ_CLIENTS; i++) {
    w[i] = (wq_client){.id = i};
    pthread_create(&t[i], NULL, wq_main, &w[i]);
  }
  int refused = 0, other = 0;
  const char *why = NULL;
  for (int i = 0; i < WQ_CLIENTS; i++) {
    pthread_join(t[i], NULL);
    refused += w[i].refused;
    other += w[i].other;
    if (w[i].other && why == NULL) why = w[i].why;
  }
  printf("waits_are_not_timeouts: %d acquires refused not_replicated, %d otherwise; %.0f batches\n",
         refused, other, metric("picket_redis_pipeline_batches_total"));
  ck_assert_msg(other == 0, "%d of %d acquires were not refused not_replicated (the first: %s)", other,
                refused + other, why);
  ck_assert_int_ge(refused, WQ_CLIENTS);
  stop_both();
}
END_TEST

START_TEST(noscript_in_batch) {
  const char *four[] = {"--threads", "4", NULL};
  start("on", four);
  /* Every event loop's pipe connects (and loads every script) as its
   * thread starts: one that got there after the SCRIPT FLUSH below would
   * load them all again, and nothing would meet NOSCRIPT (seen once on a
   * loaded CI machine). So flush only once all four (--threads 4) have. */
  int64_t until = harness_now_ms() + 5000 * harness_time_scale();
  while (metric("picket_redis_reconnects_total") < 4 && harness_now_ms() < until)
    harness_sleep_ms(10);
  ck_assert_msg(metric("picket_redis_reconnects_total") >= 4, "the event loops' pipes did not connect");
  char held[33];
  ck_assert(harness_fence_follows(0, acquire_ok("ns-held", "{\"ttl_ms\":60000}", held), 0));
  redisReply *x = harness_redis_cmd(R, "SCRIPT FLUSH");
  ck_assert_ptr_nonnull(x);
  freeReplyObject(x);
  double batches0 = metric("picket_redis_pipeline_batches_total");
  /* The first call goes out alone and waits on the stopped Redis; the rest
   * queue behind it and go out as one batch of acquires and releases,
   * whose scripts are all gone by then (the first reloads only its own). */
  redis_freeze();
  enum { N = 16 };
  shot s[N];
  char other[33], bogus[60];
  fault_lease_id(other);
  snprintf(bogus, sizeof bogus, "{\"lease\":\"%s\"}", other);
  for (int i = 0; i < N; i++) {
    if (i < 8)
      shot_fire(&s[i], lock_names[i], "acquire", "{\"ttl_ms\":60000}");
    else if (i < 12)
      shot_fire(&s[i], "ns-held", "acquire", "{\"ttl_ms\":60000}");
    else
      shot_fire(&s[i], "ns-held", "release", bogus);
    if (i == 0) await_inflight(1);
  }
  await_inflight(N);
  redis_thaw();
  for (int i = 0; i < N; i++) {
    pthread_join(s[i].t, NULL);
    const fault_call *c = &s[i].c;
    if (i < 8)
      ck_assert_msg(c->status == 200 && harness_fence_follows(0, c->fence, 0), "acquire %s: %ld %s fence %lld", s[i].name,
                    c->status, c->code, (long long)c->fence);
    else
      ck_assert_msg(c->status == 409 && strcmp(c->code, i < 12 ? "lock_held" : "lease_lost") == 0,
                    "%s ns-held: %ld %s", s[i].action, c->status, c->code);
  }
  ck_assert_msg(metric("picket_redis_pipeline_batches_total") >= batches0 + 2,
                "the calls did not go out in two batches or more");
  ck_assert(fault_log_has(harness_picketd_log(P), "reloading"));
  harness_resp r;
  ck_assert_int_eq(lock_call("ns-held", "release", held, &r), 200);
  harness_resp_free(&r);
  stop_both();
}
END_TEST

/* Acquires `name` until granted, with Redis back after a fault (picketd
 * reconnects within its backoff): fails after 5 s. */
static void acquire_once_back(const char *name, fault_call *c) {
  int64_t t0 = harness_now_ms();
  while (fault_acquire(harness_picketd_url(P), name, 60000, NULL, c) != 200 &&
         harness_now_ms() - t0 < 5000 * harness_time_scale())
    harness_sleep_ms(20);
  ck_assert_msg(c->status == 200, "acquire %s with Redis back: %ld %s", name, c->status, c->code);
}

START_TEST(redis_killed_mid_batch) {
  harness_redis_opts aof = {.appendonly = 1}; /* so a grant made before the kill would show */
  const char *args[] = {"--redis-pipeline", "on", "--redis-timeout-ms", REDIS_TIMEOUT, NULL};
  start_both(&aof, args);
  char lease[33];
  int64_t first = acquire_ok("rk", "{}", lease);
  ck_assert(harness_fence_follows(0, first, 0));
  harness_resp r;
  ck_assert_int_eq(lock_call("rk", "release", lease, &r), 200);
  harness_resp_free(&r);
  redis_freeze();
  enum { N = 8 };
  shot s[N];
  for (int i = 0; i < N; i++) shot_fire(&s[i], lock_names[i], "acquire", "{\"ttl_ms\":60000}");
  await_inflight(N);
  /* SIGKILL the stopped process directly: harness_redis_stop sends SIGCONT
   * first, which could let Redis run the queued scripts before it dies */
  int64_t killed = harness_now_ms();
  kill(harness_redis_pid(R), SIGKILL);
  harness_redis_stop(R, SIGKILL); /* reaps it */
  for (int i = 0; i < N; i++) {
    pthread_join(s[i].t, NULL);
    const fault_call *c = &s[i].c;
    ck_assert_msg(c->status == 503 && strcmp(c->code, "store_unavailable") == 0,
                  "acquire %s with Redis killed: %ld %s", s[i].name, c->status, c->code);
    /* the lost connection ends them, not --redis-timeout-ms */
    ck_assert_msg(c->t1 - killed < 2000 * harness_time_scale(), "a 503 came %lld ms after the kill",
                  (long long)(c->t1 - killed));
  }
  ck_assert_int_eq(harness_redis_restart(R), 0);
  fault_call c;
  acquire_once_back("rk", &c);
  ck_assert_msg(harness_fence_follows(first, c.fence, 0), "fence %lld after the restart (AOF kept %lld)",
                (long long)c.fence, (long long)first);
  /* none of the failed acquires reached Redis: never granted, fence 0 */
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(fault_lock(harness_picketd_url(P), lock_names[i], NULL, NULL, &c), 200);
    ck_assert_msg(c.fence == 0 && c.held == 0, "%s: fence %lld held %d after a 503",
                  lock_names[i], (long long)c.fence, c.held);
  }
  stop_both();
}
END_TEST

/* With Redis stopped, every piped call ends at --redis-timeout-ms with 503
 * store_unavailable, and meanwhile the event loops go on serving: /healthz
 * answers on fresh connections (landing on any loop) while the calls are
 * still in flight. A loop that waited on Redis would answer only once the
 * calls had timed out, with none left in flight. */
START_TEST(stopped_redis_times_out) {
  char timeout[16];
  int64_t timeout_ms = 2000 * harness_time_scale();
  snprintf(timeout, sizeof timeout, "%lld", (long long)timeout_ms);
  const char *args[] = {"--redis-pipeline", "on", "--redis-timeout-ms", timeout, NULL};
  start_both(NULL, args);
  ck_assert(harness_fence_follows(0, acquire_ok("st", "{}", NULL), 0));
  redis_freeze();
  enum { N = 8 };
  shot s[N];
  for (int i = 0; i < N; i++) shot_fire(&s[i], lock_names[i], "acquire", "{\"ttl_ms\":60000}");
  await_inflight(N);
  for (int i = 0; i < 8; i++) {
    harness_resp r;
    ck_assert_int_eq(harness_http(harness_picketd_url(P), "GET", "/healthz", NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    harness_resp_free(&r);
    /* at least: a /healthz just answered may still count for a moment */
    double v = metric("picket_http_inflight_requests");
    ck_assert_msg(v >= N + 1, "/healthz #%d answered with %g requests in flight, want the %d calls",
                  i, v - 1, N);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(s[i].t, NULL);
    const fault_call *c = &s[i].c;
    ck_assert_msg(c->status == 503 && strcmp(c->code, "store_unavailable") == 0,
                  "acquire %s with Redis stopped: %ld %s", s[i].name, c->status, c->code);
    ck_assert_msg(c->t1 - c->t0 >= timeout_ms - 50, "a 503 after %lld ms, before the timeout",
                  (long long)(c->t1 - c->t0));
  }
  redis_thaw();
  /* the pipes reconnect; the calls that timed out granted nothing, or a
   * grant made as Redis resumed is one the client never saw: either way
   * the next acquire gets an answer */
  fault_call c;
  acquire_once_back("st2", &c);
  stop_both();
}
END_TEST

enum { AT_TERM = 4 };

/* Acquires of p0.. wait in the pipeline (Redis stopped) when picketd gets
 * SIGTERM; Redis resumes once picketd's log shows `mark`. picketd must
 * exit 0, soon. Returns the calls' outcomes in s and the lease that holds
 * each lock in Redis afterwards in live ("" when none). */
static void sigterm_with_calls_waiting(const char *shutdown_timeout_ms, const char *mark,
                                       shot s[AT_TERM], char live[AT_TERM][33]) {
  const char *more[] = {"--shutdown-timeout-ms", shutdown_timeout_ms, NULL};
  start("on", more);
  ck_assert(harness_fence_follows(0, acquire_ok("td", "{}", NULL), 0));
  redis_freeze();
  for (int i = 0; i < AT_TERM; i++) shot_fire(&s[i], lock_names[i], "acquire", "{\"ttl_ms\":60000}");
  await_inflight(AT_TERM);
  kill(harness_picketd_pid(P), SIGTERM);
  int64_t until = harness_now_ms() + 10000 * harness_time_scale();
  while (!fault_log_has(harness_picketd_log(P), mark) && harness_now_ms() < until)
    harness_sleep_ms(10);
  ck_assert_msg(fault_log_has(harness_picketd_log(P), mark), "picketd never logged \"%s\"", mark);
  redis_thaw();
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(harness_picketd_stop(P, SIGTERM), 0);
  ck_assert_msg(harness_now_ms() - t0 < 5000 * harness_time_scale(), "stop took %lld ms",
                (long long)(harness_now_ms() - t0));
  for (int i = 0; i < AT_TERM; i++) {
    pthread_join(s[i].t, NULL);
    redisReply *x = harness_redis_cmd(R, "HGET picket:{%s}:lease lease", lock_names[i]);
    ck_assert_ptr_nonnull(x);
    snprintf(live[i], 33, "%s", x->type == REDIS_REPLY_STRING ? x->str : "");
    freeReplyObject(x);
  }
}

/* Within --shutdown-timeout-ms (default 10 s) in-flight requests finish:
 * each piped acquire gets its grant, and the grant stays. */
START_TEST(sigterm_finishes_piped_calls) {
  shot s[AT_TERM];
  char live[AT_TERM][33];
  sigterm_with_calls_waiting("10000", "got SIGTERM", s, live);
  for (int i = 0; i < AT_TERM; i++) {
    ck_assert_msg(s[i].c.status == 200, "%s: %ld %s", s[i].name, s[i].c.status, s[i].c.code);
    ck_assert_msg(strcmp(live[i], s[i].c.lease) == 0, "%s: granted, but Redis holds lease \"%s\"",
                  s[i].name, live[i]);
  }
  stop_both();
}
END_TEST

/* Past --shutdown-timeout-ms picketd closes what is still running, but
 * must first drain the pipeline: the HTTP daemon cannot stop with
 * connections suspended on it. */
START_TEST(sigterm_drains_pipeline) {
  shot s[AT_TERM];
  char live[AT_TERM][33];
  sigterm_with_calls_waiting("100", "still running after", s, live);
  for (int i = 0; i < AT_TERM; i++) {
    const fault_call *c = &s[i].c;
    printf("%s, SIGTERM past the shutdown timeout: %ld %s, %s in Redis\n", s[i].name, c->status,
           c->code, !live[i][0] ? "not held" : strcmp(live[i], c->lease) == 0 ? "its lease" : "held");
    /* drained, the calls are answered before the daemon stops (a grace
     * of 1 s for the replies to go out): each is a grant that stays */
    ck_assert_msg(c->status == 200, "%s: %ld %s", s[i].name, c->status, c->code);
    ck_assert_msg(strcmp(live[i], c->lease) == 0, "%s: granted, but Redis holds lease \"%s\"",
                  s[i].name, live[i]);
  }
  stop_both();
}
END_TEST

/* Sends a whole acquire request for `name` over a fresh connection and
 * returns the socket, still open. */
static int send_acquire(const char *name) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)harness_picketd_port(P)),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  char req[300];
  int n = snprintf(req, sizeof req,
                   "POST /v1/locks/%s/acquire HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n"
                   "{\"ttl_ms\":60000}",
                   name);
  ck_assert_int_eq(write(fd, req, (size_t)n), n);
  return fd;
}

START_TEST(half_closed_client) {
  start("on", NULL);
  ck_assert(harness_fence_follows(0, acquire_ok("hc", "{}", NULL), 0));
  redis_freeze();
  int half = send_acquire(lock_names[0]), gone = send_acquire(lock_names[1]);
  await_inflight(2); /* both acquires are with the pipeline */
  shutdown(half, SHUT_WR);
  close(gone);
  redis_thaw();
  /* picketd closes the half-closed connection unanswered: the grant made
   * for it was not delivered */
  struct timeval tv = {(time_t)(10 * harness_time_scale()), 0};
  setsockopt(half, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  ssize_t got = read(half, buf, sizeof buf - 1);
  buf[got > 0 ? got : 0] = '\0';
  close(half);
  ck_assert_msg(got == 0, "the half-closed client read %zd bytes: %.80s", got, buf);
  for (int i = 0; i < 2; i++) {
    /* the acquire reached Redis (its first fence) and was given back at once,
     * not after its 60 s TTL */
    fault_call c;
    int64_t t0 = harness_now_ms();
    while (fault_lock(harness_picketd_url(P), lock_names[i], NULL, NULL, &c) == 200 &&
           c.held != 0 && harness_now_ms() - t0 < 5000 * harness_time_scale())
      harness_sleep_ms(20);
    ck_assert_msg(c.status == 200 && c.held == 0 && harness_fence_follows(0, c.fence, 0),
                  "%s: %ld held %d fence %lld", lock_names[i], c.status, c.held, (long long)c.fence);
    int64_t next = acquire_ok(lock_names[i], "{}", NULL);
    ck_assert_msg(harness_fence_follows(c.fence, next, 0), "fence %lld after %lld", (long long)next,
                  (long long)c.fence);
  }
  ck_assert(fault_log_has(harness_picketd_log(P), "was not delivered; releasing it"));
  stop_both();
}
END_TEST

/* The pipe never makes its loop wait (issue 41, item 2, Redis side). Before,
 * a call that met NOSCRIPT was run again on the loop's direct connection,
 * which the loop opened (connect, SCRIPT LOADs, INFO) and waited on; and
 * a pipe's connection was reopened with a blocking connect and setup, so
 * a loop whose pipe broke served nothing until a stopped Redis answered. */
START_TEST(pipe_setup_never_waits) {
  const char *one[] = {"--threads", "1", NULL};
  start("on", one);
  fault_call c;
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "ps.warm", 30000, NULL, &c), 200);
  /* NOSCRIPT: the acquire is sent again behind a SCRIPT LOAD on the pipe;
   * the only connection picketd opened so far is the pipe's */
  double opens = metric("picket_redis_reconnects_total");
  redisReply *x = harness_redis_cmd(R, "SCRIPT FLUSH");
  ck_assert_ptr_nonnull(x);
  freeReplyObject(x);
  ck_assert_int_eq(fault_acquire(harness_picketd_url(P), "ps.a", 30000, NULL, &c), 200);
  ck_assert(fault_log_has(harness_picketd_log(P), "reloading"));
  ck_assert_msg(metric("picket_redis_reconnects_total") == opens,
                "a connection was opened for the call that met NOSCRIPT (%g, was %g)",
                metric("picket_redis_reconnects_total"), opens);
  /* The pipe's connection killed, seen by picketd (the loop reads the
   * close), then Redis stopped: the next call reopens it */
  x = harness_redis_cmd(R, "CLIENT KILL TYPE normal");
  ck_assert_ptr_nonnull(x);
  freeReplyObject(x);
  int64_t until = harness_now_ms() + 5000 * harness_time_scale();
  while (metric("picket_redis_up") != 0 && harness_now_ms() < until) harness_sleep_ms(5);
  ck_assert_msg(metric("picket_redis_up") == 0, "picketd did not see its connection killed");
  redis_freeze();
  shot acquire;
  shot_fire(&acquire, "ps.b", "acquire", "{\"ttl_ms\":30000}");
  await_inflight(1);
  harness_resp h;
  ck_assert_int_eq(harness_http(harness_picketd_url(P), "GET", "/healthz", NULL, &h), 0);
  ck_assert_int_eq(h.status, 200);
  harness_resp_free(&h);
  int waited = atomic_load(&acquire.done);
  redis_thaw();
  pthread_join(acquire.t, NULL);
  ck_assert_msg(waited == 0, "/healthz was answered only after the acquire ended");
  ck_assert_msg(acquire.c.status == 200, "acquire after the reopen: %ld %s", acquire.c.status,
                acquire.c.code);
  stop_both();
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  /* once, before any test starts HTTP calls on several threads */
  curl_global_init(CURL_GLOBAL_ALL);
  Suite *s = suite_create("pipeline");
  const TTest *tests[] = {load_on,          off_and_min_replicas, waits_are_not_timeouts,
                          noscript_in_batch, redis_killed_mid_batch, sigterm_finishes_piped_calls,
                          sigterm_drains_pipeline, half_closed_client,
                          no_mode_blocks_the_loop, stopped_redis_times_out, pipe_setup_never_waits};
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    TCase *tc = tcase_create(tests[i]->name);
    /* a hang (a call never resumed, a drain that never ends) fails here */
    tcase_set_timeout(tc, 60.0 * (double)harness_time_scale());
    tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
  }
  return harness_run_suite(s);
}
