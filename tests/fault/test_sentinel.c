/* test_sentinel.c: picketd in Sentinel mode (--sentinel) through real
 * failovers, under load.
 *
 * A Sentinel group (sentinel_group.h: a primary, two replicas, three
 * redis-sentinel processes configured from deploy/sentinel/sentinel.conf)
 * and one picketd that finds the primary through the Sentinels. Eight
 * client threads cycle acquire / renew / release on four locks (TTL 3 s,
 * no waiting), each call with a short client timeout, and every call is
 * recorded: lock, lease, fence, status, error code, sent and received
 * times. After each run the record is checked:
 *
 *  - no (lock, fence) was granted to two different leases;
 *  - one holder at a time, by Redis's own account: no renew or release of
 *    a lease succeeded when it was sent after the reply of a grant of the
 *    same lock with a newer fence had been received (two Redis primaries
 *    in use at once, or a connection left on the old one, shows as this);
 *  - fences rise in real time: a grant sent after another grant of the
 *    lock was received has a higher fence;
 *  - the switch time, the longest stretch after the fault with no
 *    successful call, is under a generous bound (several times the
 *    figures measured here, times harness_time_scale()).
 * and after each failover picketd has switched primaries exactly once
 * (picket_redis_failovers_total): never back to the old primary, which
 * after a forced failover is still a master that takes writes the new one
 * never sees.
 * Each run prints `sentinel: <case> switch_ms=N errors=N lost_grants=N`
 * (errors: 5xx and calls with no reply; a lost grant: a grant whose later
 * renew or release got lease_lost while its TTL had not run out).
 *
 * Cases, in this order on one shared group (one process, CK_NOFORK, so the
 * group outlives a case; each case starts by waiting until it is whole,
 * which after a failover takes Sentinel about 20 s: sentinel_group.h):
 *  forced_failover         SENTINEL FAILOVER under load, default flags.
 *  waiter_across_failover  a blocking acquire parked across a forced
 *                          failover is granted once, on the new primary.
 *  primary_killed          the primary SIGKILLed under load; then it is
 *                          started again and rejoins as a replica while
 *                          the load goes on.
 *  sentinels_lost          one Sentinel, then all three killed: picketd
 *                          serves on with one gone, and refuses lock calls
 *                          (503, /readyz too) once the sentinels' lease on
 *                          the primary runs out with all gone; ready again
 *                          once they are back, and it follows the next
 *                          failover at once.
 *  sentinels_lost_no_lease the same with --sentinel-lease=false: it serves
 *                          on from the primary it knows and says so.
 *  failback_unheard        failover A -> B, then back B -> A while picketd
 *                          is cut off from every sentinel (through
 *                          proxies): once it hears them again it uses A,
 *                          which it had been holding off as deposed.
 *  leader_frozen_mid_failover the failover's leader SIGSTOPped between
 *                          its promotion and its +switch-master, under
 *                          load: picketd stays on the promoted node.
 * and on groups of their own whose replicas follow through proxies (a
 * failover repoints the replicas directly, so each gets a fresh group):
 *  lagging_replicas_lossy  both replicas partitioned, the primary killed,
 *                          --min-replicas 0 --fence-floor none: the lost
 *                          grants' fences are handed out again (shown).
 *  lagging_replicas_refused the same with the default --min-replicas 1:
 *                          grants in the lag are 503 not_replicated and no
 *                          fence repeats.
 *
 * A holder whose renew or release gets no answer from Redis (503, no
 * reply) tries again until its TTL is over, as a real client would; left
 * to expire, the leases would stretch every switch time to a TTL.
 *
 * The load's calls use libcurl directly, not harness_http (whose timeout
 * is 120 s, too long for a call into a failover); so they are not in the
 * contract log. /readyz and /metrics go through harness_http and are.
 * $SENTINEL_TRACE=1 prints every call of every run (times from the fault);
 * $SG_DEBUG=1 what the group waits for. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <strings.h>

#include "fault_http.h"
#include "fault_util.h"
#include "sentinel_group.h"
#include "sse.h"

/* ---- bounds (ms, times harness_time_scale()) ---------------------------
 * Measured on the 2-core test machine (see the printed figures): a forced
 * failover's switch 1.0-1.3 s (picketd refuses lock calls from the moment
 * Sentinel starts the failover until it names the new primary); a killed
 * primary's 2.7-2.9 s (down-after 1500 ms, the vote, the promotion). */
#define FORCED_SWITCH_BOUND 10000
#define KILLED_SWITCH_BOUND 15000
#define FOLLOW_BOUND 10000 /* picketd's /readyz names the primary the Sentinels agree on */

#define CLIENTS 8
#define LOCKS 4
#define TTL_MS 3000
#define MAX_RECS 40000

/* ---- one HTTP call with its own timeout -------------------------------- */

typedef enum { OP_ACQUIRE, OP_RENEW, OP_RELEASE } op_kind;
static const char *const op_name[] = {"acquire", "renew", "release"};

typedef struct {
  short client, lock;
  op_kind op;
  char lease[33];
  int64_t fence;    /* acquire: the granted fence; renew/release: its grant's */
  long status;      /* 0: no reply (transport error or client timeout) */
  char code[32];
  int64_t t0, t1;   /* sent, received (monotonic ms) */
  int64_t deadline; /* renew/release: sent time of the lease's last success + TTL */
} rec;

/* POST base/v1/locks/NAME/ACTION with body, at most timeout_ms. Fills
 * status, code, fence (when the reply has one), t0, t1 of *r; the lease of
 * an acquire reply into r->lease. Keeps the connection for the next call. */
static void post(fault_http *h, const char *base, const char *name, const char *action,
                 const char *body, long timeout_ms, rec *r) {
  char url[300];
  json_t *j;
  snprintf(url, sizeof url, "%s/v1/locks/%s/%s", base, name, action);
  r->status = fault_http_post(h, url, body, timeout_ms, &r->t0, &r->t1, r->code, sizeof r->code, &j);
  if (r->status == 0) return;
  json_t *f = json_object_get(j, "fence");
  if (json_is_integer(f)) r->fence = (int64_t)json_integer_value(f);
  const char *lease = json_string_value(json_object_get(j, "lease"));
  if (lease && r->op == OP_ACQUIRE && r->status == 200) snprintf(r->lease, sizeof r->lease, "%s", lease);
  json_decref(j);
}

/* A new lease id; fault_random_lease's failure aborts (no Check assert:
 * it runs in the load threads). */
static void lease_id(char out[33]) {
  if (fault_random_lease(out) != 0) abort();
}

/* ---- the load ------------------------------------------------------------ */

typedef struct {
  int id;
  const char *base;
  unsigned seed;
  fault_http h;
  rec *recs;
  int n;
} client;

static atomic_int stop_load;
static client clients[CLIENTS];
static pthread_t threads[CLIENTS];
static int load_running;

static const char *lock_name(int i) {
  static const char *const names[LOCKS] = {"sen-a", "sen-b", "sen-c", "sen-d"};
  return names[i];
}

static rec *next_rec(client *c) {
  if (c->n >= MAX_RECS) return NULL;
  rec *r = &c->recs[c->n];
  memset(r, 0, sizeof *r);
  r->client = (short)c->id;
  r->fence = -1;
  return r;
}

static void pause_ms(client *c, int lo, int hi) {
  harness_sleep_ms(lo + (int)(rand_r(&c->seed) % (unsigned)(hi - lo + 1)));
}

static void *client_main(void *arg) {
  client *c = arg;
  long timeout = 5000 * (long)harness_time_scale();
  char body[160];
  while (!atomic_load(&stop_load)) {
    int lock = (int)(rand_r(&c->seed) % LOCKS);
    rec *r = next_rec(c);
    if (r == NULL) break;
    r->lock = (short)lock;
    r->op = OP_ACQUIRE;
    lease_id(r->lease);
    snprintf(body, sizeof body, "{\"ttl_ms\":%d,\"wait_ms\":0,\"lease\":\"%s\"}", TTL_MS, r->lease);
    post(&c->h, c->base, lock_name(lock), "acquire", body, timeout, r);
    c->n++;
    if (r->status != 200) {
      pause_ms(c, r->status == 409 ? 10 : 50, r->status == 409 ? 40 : 100);
      continue;
    }
    /* held: two renewals, then the release. A call with no answer from
     * Redis (503, no reply) is tried again until the lease's TTL is
     * surely over, so leases are not left to expire in an outage (that
     * would stretch the switch time to a TTL); lease_lost ends the hold. */
    char lease[33];
    int64_t fence = r->fence, deadline = r->t0 + TTL_MS;
    snprintf(lease, sizeof lease, "%s", r->lease);
    int step = 0; /* 0, 1: renew; 2: release */
    while (step < 3 && !atomic_load(&stop_load) && harness_now_ms() < deadline) {
      pause_ms(c, 30, 150);
      op_kind op = step < 2 ? OP_RENEW : OP_RELEASE;
      r = next_rec(c);
      if (r == NULL) break;
      r->lock = (short)lock;
      r->op = op;
      r->deadline = deadline;
      snprintf(r->lease, sizeof r->lease, "%s", lease);
      if (op == OP_RENEW)
        snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":%d}", lease, TTL_MS);
      else
        snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
      post(&c->h, c->base, lock_name(lock), op_name[op], body, timeout, r);
      r->fence = fence; /* the reply's fence is the grant's; keep the grant's */
      c->n++;
      if (r->status == 200) {
        if (op == OP_RENEW) deadline = r->t0 + TTL_MS;
        step++;
      } else if (r->status == 409) {
        break;
      }
    }
  }
  return NULL;
}

static void load_start(const char *base) {
  atomic_store(&stop_load, 0);
  for (int i = 0; i < CLIENTS; i++) {
    client *c = &clients[i];
    free(c->recs);
    memset(c, 0, sizeof *c);
    c->id = i;
    c->base = base;
    c->seed = (unsigned)(harness_now_ms() * 31 + i);
    c->recs = calloc(MAX_RECS, sizeof *c->recs);
    ck_assert_ptr_nonnull(c->recs);
  }
  for (int i = 0; i < CLIENTS; i++)
    ck_assert_int_eq(pthread_create(&threads[i], NULL, client_main, &clients[i]), 0);
  load_running = 1;
}

static void load_stop(void) {
  if (!load_running) return;
  atomic_store(&stop_load, 1);
  for (int i = 0; i < CLIENTS; i++) {
    pthread_join(threads[i], NULL);
    fault_http_done(&clients[i].h);
  }
  load_running = 0;
}

/* ---- the checks ----------------------------------------------------------- */

typedef struct {
  rec *all;
  int n;
  int grants, successes;
  int dup_fences;     /* (lock, fence) pairs granted to two leases */
  int stale_holders;  /* renew/release of L succeeded after a newer grant's reply */
  int fence_regress;  /* a grant sent after another's reply with a fence not above it */
  int errors, unavailable, not_replicated, transport, lost_grants;
  int64_t switch_ms;  /* longest stretch after the fault with no success */
  int64_t first_ok_ms; /* fault to the first success sent after it; -1: none */
} report;

static int by_t1(const void *a, const void *b) {
  const rec *x = a, *y = b;
  return x->t1 < y->t1 ? -1 : x->t1 > y->t1;
}

/* Collects every client's calls and checks them (t_fault: when the fault
 * was injected; 0: none). Prints the first few violations of each kind. */
static report check_run(const char *name, int64_t t_fault) {
  report R = {0};
  for (int i = 0; i < CLIENTS; i++) R.n += clients[i].n;
  R.all = calloc((size_t)R.n + 1, sizeof *R.all);
  ck_assert_ptr_nonnull(R.all);
  int k = 0;
  for (int i = 0; i < CLIENTS; i++)
    for (int j = 0; j < clients[i].n; j++) R.all[k++] = clients[i].recs[j];
  qsort(R.all, (size_t)R.n, sizeof *R.all, by_t1);
  rec *a = R.all;
  int shown_dup = 0, shown_stale = 0, shown_regress = 0;
  for (int i = 0; i < R.n; i++) {
    if (a[i].status == 200) R.successes++;
    if (a[i].status == 0 || a[i].status >= 500) {
      R.errors++;
      R.transport += a[i].status == 0;
      R.unavailable += strcmp(a[i].code, "store_unavailable") == 0;
      R.not_replicated += strcmp(a[i].code, "not_replicated") == 0;
    }
    if (a[i].op == OP_ACQUIRE && a[i].status == 200) R.grants++;
  }
  for (int i = 0; i < R.n; i++) {
    const rec *g = &a[i];
    if (g->op != OP_ACQUIRE || g->status != 200) continue;
    int lost = 0;
    for (int j = 0; j < R.n; j++) {
      const rec *x = &a[j];
      if (x->lock != g->lock || j == i) continue;
      /* 1: the same fence to another lease */
      if (x->op == OP_ACQUIRE && x->status == 200 && j > i && x->fence == g->fence &&
          strcmp(x->lease, g->lease) != 0) {
        R.dup_fences++;
        if (shown_dup++ < 5)
          printf("%s: lock %s fence %lld granted twice: lease %.8s (client %d, reply at %lld) "
                 "and %.8s (client %d, reply at %lld)\n",
                 name, lock_name(g->lock), (long long)g->fence, g->lease, g->client,
                 (long long)g->t1, x->lease, x->client, (long long)x->t1);
      }
      /* 2: a holder that Redis still honoured after g was granted */
      if (x->op != OP_ACQUIRE && x->status == 200 && x->t0 > g->t1 && g->fence > x->fence &&
          strcmp(x->lease, g->lease) != 0) {
        R.stale_holders++;
        if (shown_stale++ < 5)
          printf("%s: lock %s: %s of lease %.8s (fence %lld) succeeded, sent %lld ms after "
                 "the grant of fence %lld to lease %.8s was received\n",
                 name, lock_name(g->lock), op_name[x->op], x->lease, (long long)x->fence,
                 (long long)(x->t0 - g->t1), (long long)g->fence, g->lease);
      }
      /* 3: fences rise in real time */
      if (x->op == OP_ACQUIRE && x->status == 200 && x->t0 > g->t1 && x->fence <= g->fence) {
        R.fence_regress++;
        if (shown_regress++ < 5)
          printf("%s: lock %s: fence %lld granted after fence %lld had been\n", name,
                 lock_name(g->lock), (long long)x->fence, (long long)g->fence);
      }
      /* a lost grant: lease_lost for it while its TTL had not run out */
      if (x->op != OP_ACQUIRE && strcmp(x->lease, g->lease) == 0 && x->status == 409 &&
          strcmp(x->code, "lease_lost") == 0 && x->t1 < x->deadline)
        lost = 1;
    }
    R.lost_grants += lost;
  }
  if (getenv("SENTINEL_TRACE")) /* every call, in reply order, times from the fault */
    for (int i = 0; i < R.n; i++)
      printf("%s: %+6lld..%+6lld client %d %-7s %s lease %.8s fence %lld -> %ld %s\n", name,
             (long long)(a[i].t0 - t_fault), (long long)(a[i].t1 - t_fault), a[i].client,
             op_name[a[i].op], lock_name(a[i].lock), a[i].lease, (long long)a[i].fence,
             a[i].status, a[i].code);
  R.first_ok_ms = -1;
  if (t_fault > 0) {
    int64_t prev = t_fault;
    for (int i = 0; i < R.n; i++) {
      if (a[i].status != 200 || a[i].t1 <= t_fault) continue;
      if (a[i].t1 - prev > R.switch_ms) R.switch_ms = a[i].t1 - prev;
      prev = a[i].t1;
      if (R.first_ok_ms < 0 && a[i].t0 >= t_fault) R.first_ok_ms = a[i].t1 - t_fault;
    }
    if (R.first_ok_ms < 0) R.switch_ms = -1; /* nothing succeeded after the fault */
  }
  printf("sentinel: %s switch_ms=%lld errors=%d lost_grants=%d\n", name, (long long)R.switch_ms,
         R.errors, R.lost_grants);
  printf("sentinel: %s: %d calls, %d successes, %d grants; errors: %d store_unavailable, "
         "%d not_replicated, %d no reply; fences granted twice %d, stale holders %d, fence "
         "regressions %d\n",
         name, R.n, R.successes, R.grants, R.unavailable, R.not_replicated, R.transport,
         R.dup_fences, R.stale_holders, R.fence_regress);
  return R;
}

/* The checks every run but the lossy one must pass. */
static void assert_safe(const report *R, const char *name) {
  ck_assert_msg(R->dup_fences == 0, "%s: %d fences granted to two leases", name, R->dup_fences);
  ck_assert_msg(R->stale_holders == 0, "%s: %d renewals/releases honoured after a newer grant",
                name, R->stale_holders);
  ck_assert_msg(R->fence_regress == 0, "%s: %d fences not above an earlier grant's", name,
                R->fence_regress);
  ck_assert_msg(R->grants > 0, "%s: no grant at all", name);
}

/* ---- picketd and the group ---------------------------------------------- */

static sg_group *G;       /* the shared group */
static harness_picketd *P; /* the case's picketd; freed by the teardown */

/* The shared group, started on first use, whole again on later ones. */
static sg_group *group(void) {
  if (G == NULL) {
    G = sg_start(NULL);
  } else {
    int64_t ms = sg_heal(G, 60000 * harness_time_scale());
    printf("group whole again after %lld ms\n", (long long)ms);
  }
  return G;
}

static void drop_group(void) {
  sg_free(G);
  G = NULL;
}

static void waiter_join(void);

static int case_done; /* set as a case's last step: the teardown knows it passed */

static void setup(void) { case_done = 0; }

/* Stops the load and picketd; after a failure, shows picketd's log (its
 * dir is removed with it, unless $HARNESS_KEEP). */
static void teardown(void) {
  load_stop();
  waiter_join();
  if (P && !case_done) {
    fprintf(stderr, "---- picketd log (%s), last lines:\n", harness_picketd_log(P));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "tail -n 40 %s >&2", harness_picketd_log(P));
    if (system(cmd) != 0) { /* nothing more to show */ }
  }
  harness_picketd_free(P);
  P = NULL;
}

/* picketd --sentinel LIST --sentinel-master picket [extra...]. */
static const char *start_picketd(sg_group *g, const char *const *extra) {
  const char *args[24] = {"--sentinel", sg_sentinel_list(g), "--sentinel-master", SG_MASTER};
  int n = 4;
  for (int i = 0; extra && extra[i] && n < 23; i++) args[n++] = extra[i];
  args[n] = NULL;
  P = harness_picketd_start(NULL, args);
  ck_assert_msg(P != NULL, "picketd did not start in Sentinel mode");
  return harness_picketd_url(P);
}

typedef struct {
  long status;
  char primary[64];
  int replicas;
  int reachable; /* -1: no "sentinel" member */
  char message[200];
  char body[400];
} readyz;

static readyz get_readyz(const char *base) {
  readyz z = {.reachable = -1};
  harness_resp r;
  if (harness_http(base, "GET", "/readyz", NULL, &r) == 0) {
    z.status = r.status;
    snprintf(z.body, sizeof z.body, "%s", r.body);
    const char *p = harness_json_str(r.json, "primary");
    if (p) snprintf(z.primary, sizeof z.primary, "%s", p);
    z.replicas = (int)harness_json_int(r.json, "replicas");
    json_t *s = json_object_get(r.json, "sentinel");
    json_t *reach = json_object_get(s, "reachable");
    if (json_is_boolean(reach)) z.reachable = json_is_true(reach);
    const char *m = harness_json_str(s, "message");
    if (m) snprintf(z.message, sizeof z.message, "%s", m);
  }
  harness_resp_free(&r);
  return z;
}

/* Waits until picketd's /readyz is 200 naming `addr` as its primary;
 * returns the ms. */
static int64_t wait_follows(const char *base, const char *addr) {
  int64_t t0 = harness_now_ms();
  readyz z = get_readyz(base);
  while (!(z.status == 200 && strcmp(z.primary, addr) == 0)) {
    ck_assert_msg(harness_now_ms() - t0 < FOLLOW_BOUND * harness_time_scale(),
                  "picketd's /readyz does not name the primary %s after %d ms: %ld %s", addr,
                  FOLLOW_BOUND, z.status, z.body);
    harness_sleep_ms(20);
    z = get_readyz(base);
  }
  return harness_now_ms() - t0;
}

/* 1 when `hay` contains `needle`, ignoring ASCII case. */
static int has_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return 1;
  return 0;
}

/* 1 when one line of the log contains every word (ignoring case). */
static int log_has(const char *log, const char *w1, const char *w2, const char *w3) {
  FILE *f = fopen(log, "r");
  if (f == NULL) return 0;
  char line[2048];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    found = has_ci(line, w1) && (!w2 || has_ci(line, w2)) && (!w3 || has_ci(line, w3));
  fclose(f);
  return found;
}

/* Prints the lines of picketd's log that say "switched". */
static void show_switches(const char *log) {
  FILE *f = fopen(log, "r");
  char line[2048];
  while (f && fgets(line, sizeof line, f))
    if (has_ci(line, "switched")) fprintf(stderr, "  picketd: %s", line);
  if (f) fclose(f);
}

/* After `failovers` failovers of the case: /metrics names the primary the
 * Sentinels name now, and picketd switched primaries exactly that many
 * times: one switch per failover, never back to the primary Sentinel took
 * away (with the old primary alive, as after a forced failover, going back
 * sends lock calls to a node whose writes the new primary never sees). A
 * Sentinel failover after the case's own is said, not failed. */
static void expect_metrics_follow(sg_group *g, const char *base, int expected, int failovers) {
  int now = sg_primary(g);
  if (now >= 0 && now != expected) {
    printf("note: the primary changed again, %s -> %s (another failover)\n",
           sg_node_addr(g, expected), sg_node_addr(g, now));
    failovers = -1; /* how many is Sentinel's business then */
  }
  if (now >= 0) wait_follows(base, sg_node_addr(g, now));
  const char *addr = sg_node_addr(g, now >= 0 ? now : expected);
  char sample[120];
  snprintf(sample, sizeof sample, "picket_redis_primary_info{addr=\"%s\"}", addr);
  double info = harness_metric(base, sample);
  double switches = harness_metric(base, "picket_redis_failovers_total");
  ck_assert_msg(info == 1, "/metrics: %s is %g, want 1", sample, info);
  if (failovers >= 0 && switches != failovers) {
    show_switches(harness_picketd_log(P));
    ck_abort_msg("picketd switched primaries %g times (picket_redis_failovers_total) in %d "
                 "failover(s), want one each (more: it went back to a primary Sentinel had "
                 "failed over; the switches are above)",
                 switches, failovers);
  }
}

/* ---- the cases ------------------------------------------------------------ */

/* One failover under load, shared by forced_failover and primary_killed:
 * picketd on the group's primary, the load running, the fault 1.5 s in
 * (`kill`: the primary SIGKILLed; else SENTINEL FAILOVER), the load going
 * on 2.5 s after picketd follows; then the record is checked (safety, the
 * switch time under `bound`) and picketd has switched exactly once. */
typedef struct {
  int old, now;     /* the group's nodes, before and after */
  const char *base; /* picketd */
} failover_run;

static failover_run failover_under_load(sg_group *g, const char *name, int kill, int64_t bound) {
  failover_run f = {.old = sg_primary(g)};
  ck_assert_int_ge(f.old, 0);
  f.base = start_picketd(g, NULL);
  printf("picketd follows %s %lld ms after its start\n", sg_node_addr(g, f.old),
         (long long)wait_follows(f.base, sg_node_addr(g, f.old)));
  load_start(f.base);
  /* a lock's event stream across the failover; a name of the case's own,
   * since the lease it takes outlives the case */
  char ev_lock[64], ev_path[128];
  snprintf(ev_lock, sizeof ev_lock, "sen-events-%s", name);
  snprintf(ev_path, sizeof ev_path, "/v1/locks/%s/acquire", ev_lock);
  stream ev;
  watch(P, ev_lock, &ev);
  harness_sleep_ms(1500);
  int64_t t_fault = harness_now_ms(), agreed_ms;
  if (kill) {
    sg_kill_node(g, f.old);
    f.now = sg_wait_primary(g, f.old, 30000 * harness_time_scale(), &agreed_ms);
  } else {
    /* Led by the last Sentinel of picketd's list, not the first, which
     * picketd asks first: until the others hear of the promotion (up to
     * 2 s after it), they still name the old primary, and it is still a
     * master. */
    agreed_ms = sg_failover(g, SG_SENTINELS - 1);
    f.now = sg_primary(g);
  }
  int64_t follow_ms = wait_follows(f.base, sg_node_addr(g, f.now)) + agreed_ms;
  /* picketd subscribes again on the new primary: the stream is told the
   * state afresh (events may have been missed), then hears events there */
  json_decref(expect_event(&ev, "state", 15000 * harness_time_scale()));
  harness_resp gr;
  ck_assert_int_eq(harness_http(f.base, "POST", ev_path, "{}", &gr), 0);
  ck_assert_msg(gr.status == 200, "acquire after the failover: %ld %s", gr.status, gr.body);
  json_t *granted = expect_event(&ev, "granted", 5000 * harness_time_scale());
  ck_assert_int_eq(json_integer_value(json_object_get(granted, "fence")),
                   harness_json_int(gr.json, "fence"));
  json_decref(granted);
  harness_resp_free(&gr);
  stream_close(&ev);
  harness_sleep_ms(2500);
  load_stop();
  printf("%s %s -> %s: the Sentinels agreed after %lld ms, picketd's /readyz named the new "
         "primary after %lld ms\n", kill ? "primary killed" : "forced failover",
         sg_node_addr(g, f.old), sg_node_addr(g, f.now), (long long)agreed_ms,
         (long long)follow_ms);
  report R = check_run(name, t_fault);
  assert_safe(&R, name);
  ck_assert_msg(R.switch_ms >= 0, "no lock call succeeded after the failover");
  ck_assert_msg(R.switch_ms < bound * harness_time_scale(), "switch took %lld ms",
                (long long)R.switch_ms);
  free(R.all);
  expect_metrics_follow(g, f.base, f.now, 1);
  return f;
}

START_TEST(forced_failover) {
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  failover_run f = failover_under_load(g, "forced_failover", 0, FORCED_SWITCH_BOUND);
  ck_assert_msg(log_has(harness_picketd_log(P), "switched", sg_node_addr(g, f.old),
                        sg_node_addr(g, f.now)),
                "picketd's log has no line with 'switched', %s and %s", sg_node_addr(g, f.old),
                sg_node_addr(g, f.now));
  /* A forced failover flags nothing down: the lease ends on the leader's
   * +try-failover (or its failover_in_progress flag), heard on that
   * sentinel's own link, before the watcher thread hears +selected-slave. */
  ck_assert_msg(log_has(harness_picketd_log(P), "refusing lock calls", "a failover may be under way",
                        NULL),
                "picketd's log does not say the sentinel lease ended when the failover started");
  printf("forced_failover took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

/* B's blocking acquire, in a thread of its own (static: a failed case's
 * teardown joins it). */
typedef struct {
  const char *base;
  char lease[33];
  rec r;
  atomic_int done;
} waiter;

static waiter W;
static pthread_t W_thread;
static int W_running;

static void *waiter_main(void *arg) {
  waiter *w = arg;
  fault_http h = {0};
  char body[160];
  snprintf(body, sizeof body, "{\"ttl_ms\":10000,\"wait_ms\":20000,\"lease\":\"%s\"}", w->lease);
  w->r.op = OP_ACQUIRE;
  w->r.fence = -1;
  post(&h, w->base, "sen-waiter", "acquire", body, 40000L * (long)harness_time_scale(), &w->r);
  fault_http_done(&h);
  atomic_store(&w->done, 1);
  return NULL;
}

static void waiter_join(void) {
  if (W_running) pthread_join(W_thread, NULL);
  W_running = 0;
}

START_TEST(waiter_across_failover) {
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  int old = sg_primary(g);
  ck_assert_int_ge(old, 0);
  const char *base = start_picketd(g, NULL);
  wait_follows(base, sg_node_addr(g, old));

  /* A holds the lock, on both replicas too */
  fault_call a;
  ck_assert_int_eq(fault_acquire(base, "sen-waiter", 15000, NULL, &a), 200);
  fault_wait_replicating(sg_node(g, old), SG_NODES - 1);

  /* B parks */
  memset(&W, 0, sizeof W);
  waiter *w = &W;
  w->base = base;
  lease_id(w->lease);
  ck_assert_int_eq(pthread_create(&W_thread, NULL, waiter_main, w), 0);
  W_running = 1;
  int64_t t0 = harness_now_ms();
  while (harness_metric(base, "picket_waiters") < 1) {
    if (atomic_load(&w->done) || harness_now_ms() - t0 > 5000 * harness_time_scale()) {
      waiter_join();
      ck_abort_msg("B never parked: %ld %s", w->r.status, w->r.code);
    }
    harness_sleep_ms(20);
  }

  int64_t fo_ms = sg_failover(g, -1);
  int now = sg_primary(g);
  int64_t follow_ms = wait_follows(base, sg_node_addr(g, now));
  printf("waiter: forced failover %s -> %s in %lld ms, picketd followed %lld ms later\n",
         sg_node_addr(g, old), sg_node_addr(g, now), (long long)fo_ms, (long long)follow_ms);
  if (atomic_load(&w->done)) {
    waiter_join();
    ck_abort_msg("B's acquire ended during the failover: %ld %s", w->r.status, w->r.code);
  }

  fault_call rel;
  int64_t t_rel = harness_now_ms();
  long st = fault_lease_call(base, "sen-waiter", "release", a.lease, &rel);
  waiter_join();
  printf("waiter: A's release %ld %s; B's acquire %ld %s, fence %lld (A's %lld), %lld ms after "
         "the release\n",
         st, rel.code, w->r.status, w->r.code, (long long)w->r.fence, (long long)a.fence,
         (long long)(w->r.t1 - t_rel));
  ck_assert_msg(st == 200, "A's release on the new primary: %ld %s (its grant was on both "
                "replicas)", st, rel.code);
  ck_assert_msg(w->r.status == 200, "B: %ld %s", w->r.status, w->r.code);
  ck_assert_msg(w->r.fence > a.fence, "B's fence %lld is not above A's %lld", (long long)w->r.fence,
                (long long)a.fence);
  ck_assert_msg(w->r.t1 - t_rel < 5000 * harness_time_scale(),
                "B granted %lld ms after A's release", (long long)(w->r.t1 - t_rel));

  /* on the new primary, by Redis's own account */
  redisReply *x = harness_redis_cmd(sg_node(g, now), "HGETALL picket:{sen-waiter}:lease");
  ck_assert_ptr_nonnull(x);
  const char *lease = NULL, *fence = NULL;
  for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i + 1 < x->elements; i += 2) {
    if (strcmp(x->element[i]->str, "lease") == 0) lease = x->element[i + 1]->str;
    if (strcmp(x->element[i]->str, "fence") == 0) fence = x->element[i + 1]->str;
  }
  ck_assert_msg(lease && strcmp(lease, w->lease) == 0, "new primary's lease is %s, B's %s",
                lease ? lease : "(none)", w->lease);
  ck_assert_msg(fence && atoll(fence) == w->r.fence, "new primary's fence %s, B's %lld",
                fence ? fence : "(none)", (long long)w->r.fence);
  freeReplyObject(x);
  fault_call c;
  ck_assert_int_eq(fault_lock(base, "sen-waiter", NULL, NULL, &c), 200);
  ck_assert_int_eq(c.fence, w->r.fence);
  ck_assert_int_eq(harness_metric(base, "picket_waiters"), 0);
  expect_metrics_follow(g, base, now, 1);
  ck_assert_int_eq(fault_lease_call(base, "sen-waiter", "release", w->lease, &c), 200);
  printf("waiter_across_failover took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

START_TEST(primary_killed) {
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  failover_run f = failover_under_load(g, "primary_killed", 1, KILLED_SWITCH_BOUND);
  int old = f.old, now = f.now;
  const char *base = f.base;

  /* the dead node comes back, a stale primary until Sentinel turns it into
   * a replica: picketd must stay where the Sentinels point, under load */
  load_start(base);
  int64_t rejoin_ms = sg_restart_node(g, old);
  load_stop();
  printf("node %s rejoined as a replica %lld ms after its restart\n", sg_node_addr(g, old),
         (long long)rejoin_ms);
  report R = check_run("primary_killed_rejoin", 0);
  assert_safe(&R, "primary_killed_rejoin");
  free(R.all);
  readyz z = get_readyz(base);
  ck_assert_msg(z.status == 200 && strcmp(z.primary, sg_node_addr(g, now)) == 0,
                "after the rejoin: %ld %s", z.status, z.body);
  printf("primary_killed took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

/* One Sentinel killed, then all three, then all back. lease: picketd's
 * default --sentinel-lease (true), under which lock calls stop once the
 * sentinels' last confirmation of the primary runs out (half of
 * down-after-milliseconds, 750 ms here); =false: they go on at the primary
 * the sentinels named last. */
static void sentinels_lost_case(int lease) {
  const char *name = lease ? "sentinels_lost" : "sentinels_lost_no_lease";
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  int prim = sg_primary(g);
  ck_assert_int_ge(prim, 0);
  const char *off[] = {"--sentinel-lease=false", NULL};
  const char *base = start_picketd(g, lease ? NULL : off);
  wait_follows(base, sg_node_addr(g, prim));
  readyz z = get_readyz(base);
  ck_assert_msg(z.reachable == 1, "/readyz before: %s", z.body);
  load_start(base);
  harness_sleep_ms(1000);
  int64_t t_one = harness_now_ms();
  sg_kill_sentinel(g, 0);
  harness_sleep_ms(2000);
  z = get_readyz(base);
  ck_assert_msg(z.status == 200 && z.reachable == 1 && strcmp(z.primary, sg_node_addr(g, prim)) == 0,
                "one Sentinel down: /readyz %ld %s", z.status, z.body);

  for (int s = 1; s < SG_SENTINELS; s++) sg_kill_sentinel(g, s);
  int64_t t_all = harness_now_ms();
  if (lease) {
    /* Two of the three sentinels (quorum 2) must confirm the primary: with
     * none, /readyz and every lock call are 503 once the lease runs out. */
    while (!(z = get_readyz(base), z.status == 503)) {
      ck_assert_msg(harness_now_ms() - t_all < 5000 * harness_time_scale(),
                    "no Sentinel for 5 s and /readyz still says %ld: %s", z.status, z.body);
      harness_sleep_ms(20);
    }
    int64_t refused_ms = harness_now_ms() - t_all;
    printf("all Sentinels killed: /readyz 503 after %lld ms: %s\n", (long long)refused_ms, z.body);
    ck_assert_msg(strstr(z.body, "store_unavailable") && strstr(z.body, "sentinels"),
                  "/readyz without Sentinels: %s", z.body);
    int64_t t_log = harness_now_ms();
    while (!log_has(harness_picketd_log(P), "refusing lock calls", "sentinels", NULL)) {
      ck_assert_msg(harness_now_ms() - t_log < 5000 * harness_time_scale(),
                    "picketd's log does not say it refuses lock calls (%s)",
                    harness_picketd_log(P));
      harness_sleep_ms(50);
    }
    harness_sleep_ms(1000);
    load_stop();
    report R = check_run(name, t_one);
    assert_safe(&R, name);
    ck_assert_msg(R.unavailable > 0, "without Sentinels no lock call was refused");
    free(R.all);
  } else {
    while (!(z = get_readyz(base), z.status == 200 && z.reachable == 0)) {
      ck_assert_msg(z.status == 200, "no Sentinel: /readyz %ld %s (it knows its primary)",
                    z.status, z.body);
      ck_assert_msg(harness_now_ms() - t_all < 10000 * harness_time_scale(),
                    "no Sentinel for 10 s and /readyz still says reachable: %s", z.body);
      harness_sleep_ms(50);
    }
    int64_t unreach_ms = harness_now_ms() - t_all;
    printf("all Sentinels killed: /readyz said unreachable after %lld ms: %s\n",
           (long long)unreach_ms, z.body);
    ck_assert_str_eq(z.primary, sg_node_addr(g, prim));
    ck_assert_msg(z.message[0] != '\0', "/readyz gives no message: %s", z.body);
    int64_t t_log = harness_now_ms();
    while (!log_has(harness_picketd_log(P), "sentinel", "unreachable", NULL)) {
      ck_assert_msg(harness_now_ms() - t_log < 5000 * harness_time_scale(),
                    "picketd's log has no line with 'Sentinel' and 'unreachable' (%s)",
                    harness_picketd_log(P));
      harness_sleep_ms(50);
    }
    harness_sleep_ms(2000);
    load_stop();
    report R = check_run(name, t_one);
    assert_safe(&R, name);
    /* lock calls never need a Sentinel: none may fail for want of one */
    ck_assert_msg(R.unavailable == 0 && R.transport == 0,
                  "with Sentinels gone: %d store_unavailable, %d calls with no reply",
                  R.unavailable, R.transport);
    ck_assert_msg(R.switch_ms >= 0 && R.switch_ms < 5000 * harness_time_scale(),
                  "lock calls stalled %lld ms without the Sentinels", (long long)R.switch_ms);
    free(R.all);
  }

  for (int s = 0; s < SG_SENTINELS; s++) sg_restart_sentinel(g, s);
  int64_t t_back = harness_now_ms();
  while (!(z = get_readyz(base), z.status == 200 && z.reachable == 1)) {
    ck_assert_msg(harness_now_ms() - t_back < 15000 * harness_time_scale(),
                  "Sentinels back for 15 s and /readyz still says: %ld %s", z.status, z.body);
    harness_sleep_ms(50);
  }
  printf("Sentinels restarted: /readyz ready and reachable again after %lld ms\n",
         (long long)(harness_now_ms() - t_back));
  ck_assert_str_eq(z.primary, sg_node_addr(g, prim));

  /* and it hears them again, not only reaches them: it follows a failover
   * as soon as they agree. (Deaf, it would go on writing to the old
   * primary, which stays a master until Sentinel demotes it ~10 s later.) */
  int64_t fo_ms = sg_failover(g, -1);
  int now = sg_primary(g);
  int64_t follow_ms = wait_follows(base, sg_node_addr(g, now));
  printf("after the Sentinels came back: forced failover %s -> %s in %lld ms, picketd followed "
         "%lld ms later\n",
         sg_node_addr(g, prim), sg_node_addr(g, now), (long long)fo_ms, (long long)follow_ms);
  ck_assert_msg(follow_ms < 5000 * harness_time_scale(),
                "picketd followed the failover only %lld ms after the Sentinels agreed",
                (long long)follow_ms);
  expect_metrics_follow(g, base, now, 1);
  printf("%s took %lld ms\n", name, (long long)(harness_now_ms() - t_case));
  case_done = 1;
}

START_TEST(sentinels_lost) { sentinels_lost_case(1); }
END_TEST

START_TEST(sentinels_lost_no_lease) { sentinels_lost_case(0); }
END_TEST

/* A failover back to a primary picketd saw deposed, while picketd was
 * cut off from every sentinel. picketd holds a deposed primary off for
 * Sentinel's failover-timeout (180 s): sentinels that have not heard of
 * the promotion still name it. A failover back that picketd did not hear
 * shows in the sentinels' config-epoch, which each successful failover
 * raises: a node named under an epoch newer than the hold is the primary
 * again. The sentinels are reached through proxies that the case cuts;
 * the third node is stopped for the failover back, so that the node
 * Sentinel promotes is the deposed one (sg_heal starts it again). */
START_TEST(failback_unheard) {
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  int first = sg_primary(g);
  ck_assert_int_ge(first, 0);
  fault_proxy *px[SG_SENTINELS];
  char list[200] = "";
  for (int s = 0; s < SG_SENTINELS; s++) {
    px[s] = fault_proxy_start(sg_sentinel_port(g, s));
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s127.0.0.1:%d", s ? "," : "",
             fault_proxy_port(px[s]));
  }
  const char *args[] = {"--sentinel", list, "--sentinel-master", SG_MASTER, NULL};
  P = harness_picketd_start(NULL, args);
  ck_assert_msg(P != NULL, "picketd did not start in Sentinel mode");
  const char *base = harness_picketd_url(P);
  wait_follows(base, sg_node_addr(g, first));

  sg_failover(g, -1);
  int second = sg_primary(g);
  wait_follows(base, sg_node_addr(g, second));
  /* the deposed node must be a replica again, able to be promoted */
  int64_t ms = sg_wait_healthy(g, 60000 * harness_time_scale());
  printf("failback_unheard: %s -> %s, group whole after %lld ms\n", sg_node_addr(g, first),
         sg_node_addr(g, second), (long long)ms);

  for (int s = 0; s < SG_SENTINELS; s++) fault_proxy_partition(px[s]);
  int third = 3 - first - second;
  sg_kill_node(g, third);
  harness_sleep_ms(2500); /* past down-after (1500): no sentinel would pick it */
  int64_t fo_ms = sg_failover(g, -1);
  ck_assert_msg(sg_primary(g) == first, "Sentinel failed over to %s, not back to %s",
                sg_node_addr(g, sg_primary(g)), sg_node_addr(g, first));
  for (int s = 0; s < SG_SENTINELS; s++) fault_proxy_heal(px[s]);
  int64_t t_heal = harness_now_ms();
  readyz z = get_readyz(base);
  while (!(z.status == 200 && strcmp(z.primary, sg_node_addr(g, first)) == 0)) {
    /* measured ~10 s: its next ask (every 5 s) and the 6 s a sentinel
     * not heard for a while waits before it counts for the lease */
    ck_assert_msg(harness_now_ms() - t_heal < 40000 * harness_time_scale(),
                  "the sentinels failed over back to %s while picketd could not hear them; "
                  "40 s after it hears them again /readyz says %ld %s",
                  sg_node_addr(g, first), z.status, z.body);
    harness_sleep_ms(50);
    z = get_readyz(base);
  }
  printf("failback_unheard: failed over back to %s in %lld ms, unheard; picketd used it %lld ms "
         "after it heard the sentinels again\n",
         sg_node_addr(g, first), (long long)fo_ms, (long long)(harness_now_ms() - t_heal));
  ck_assert_msg(log_has(harness_picketd_log(P), "failed over back", sg_node_addr(g, first), NULL),
                "picketd's log does not say it lifted the hold on %s", sg_node_addr(g, first));
  harness_picketd_free(P);
  P = NULL;
  for (int s = 0; s < SG_SENTINELS; s++) fault_proxy_free(px[s]);
  printf("failback_unheard took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

/* A failover's leader is the one sentinel that knows of the promotion
 * before its own +switch-master, a second or more later: in between, its
 * SENTINEL MASTER names the deposed primary under the failover's new
 * config-epoch, flagged failover_in_progress. picketd once took that for a
 * failover back to the deposed node that it had not heard, lifted its hold
 * and switched back to it (a CI run of primary_killed, 3 switches in one
 * failover). Here the leader is frozen (SIGSTOP) in that window, under
 * load, and the other sentinels never learn of the failover, so picketd
 * sees both answers for as long as the case runs: it must
 * stay on the promoted node, never go back to the old primary (still a
 * master after a forced failover, taking writes the new one never sees). */
START_TEST(leader_frozen_mid_failover) {
  int64_t t_case = harness_now_ms();
  sg_group *g = group();
  int L = SG_SENTINELS - 1; /* the leader: a forced failover is led by the sentinel asked */
  /* picketd compares config-epochs with the one of its hold, and a group
   * that never failed over has config-epoch 0, which it ignores: run on
   * its own, the case fails over once first. */
  redisReply *r = sg_sentinel_cmd(g, L, "SENTINEL MASTER %s", SG_MASTER);
  const char *epoch = r ? sg_field(r, "config-epoch") : NULL;
  int never = epoch == NULL || strcmp(epoch, "0") == 0;
  if (r) freeReplyObject(r);
  if (never) {
    sg_failover(g, -1);
    sg_heal(g, 60000 * harness_time_scale());
  }
  int old = sg_primary(g);
  ck_assert_int_ge(old, 0);
  const char *base = start_picketd(g, NULL);
  wait_follows(base, sg_node_addr(g, old)); /* the leader: a forced failover is led by the sentinel asked */
  redisContext *sub = redisConnect("127.0.0.1", sg_sentinel_port(g, L));
  ck_assert_msg(sub && !sub->err, "cannot reach sentinel %d", L);
  struct timeval tv = {(time_t)(30 * harness_time_scale()), 0};
  redisSetTimeout(sub, tv);
  r = redisCommand(sub, "SUBSCRIBE +promoted-slave");
  ck_assert_msg(r != NULL, "SUBSCRIBE: %s", sub->errstr);
  freeReplyObject(r);
  load_start(base);
  harness_sleep_ms(500);
  /* The other sentinels, down through the failover, never hear of it from
   * the frozen leader: started again, they name the old primary, the
   * answer that makes picketd look for a failover back. (Paused instead,
   * they would find the leader's news in their sockets.) */
  for (int s = 0; s < L; s++) sg_kill_sentinel(g, s);
  r = sg_sentinel_cmd(g, L, "SENTINEL FAILOVER %s", SG_MASTER);
  ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
                r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
  freeReplyObject(r);
  r = NULL;
  ck_assert_msg(redisGetReply(sub, (void **)&r) == REDIS_OK && r, "no +promoted-slave: %s",
                sub->errstr);
  char named_new[64] = "", host[40];
  int port = 0;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
      sscanf(r->element[2]->str, "slave %*s %39s %d", host, &port) == 2)
    snprintf(named_new, sizeof named_new, "%s:%d", host, port);
  freeReplyObject(r);
  ck_assert_msg(port > 0, "odd +promoted-slave message");
  redisFree(sub);
  /* The leader ends the failover at its first INFO from the other replica
   * that shows it following the promoted node: 0 to 1 s after the
   * promotion (a CI run's was 200 ms, over before the leader was frozen).
   * Paused, that replica answers no INFO, which holds the failover open
   * for down-after-milliseconds (1.5 s); resumed once the leader is
   * frozen, it runs the SLAVEOF the leader sent it. */
  int other = -1;
  for (int i = 0; i < SG_NODES; i++)
    if (i != old && strcmp(sg_node_addr(g, i), named_new) != 0) other = i;
  ck_assert_int_ge(other, 0);
  sg_pause_node(g, other, 1);
  /* past picketd's next look at the leader (every 100 ms at most) */
  harness_sleep_ms(250);
  r = sg_sentinel_cmd(g, L, "SENTINEL MASTER %s", SG_MASTER);
  sg_pause_sentinel(g, L, 1);
  sg_pause_node(g, other, 0);
  const char *ip = sg_field(r, "ip"), *port_s = sg_field(r, "port"), *fl = sg_field(r, "flags");
  char named[64], flags[200];
  snprintf(named, sizeof named, "%s:%s", ip ? ip : "?", port_s ? port_s : "?");
  snprintf(flags, sizeof flags, "%s", fl ? fl : "(no answer)");
  if (r) freeReplyObject(r);
  for (int s = 0; s < L; s++) sg_restart_sentinel(g, s);
  printf("leader_frozen_mid_failover: sentinel %d frozen naming %s, flags %s\n", L, named, flags);
  ck_assert_msg(strcmp(named, sg_node_addr(g, old)) == 0 && strstr(flags, "failover_in_progress"),
                "the leader had finished the failover 250 ms after the promotion (names %s, flags "
                "%s): the case needs it frozen before", named, flags);
  /* picketd asks the sentinels every 5 s and on trouble: watch for 12 s.
   * It follows the promoted node, and refuses lock calls (503) while the
   * sentinels do not agree on a primary. */
  int64_t t0 = harness_now_ms();
  char was[120], now[120];
  snprintf(was, sizeof was, "picket_redis_primary_info{addr=\"%s\"}", sg_node_addr(g, old));
  snprintf(now, sizeof now, "picket_redis_primary_info{addr=\"%s\"}", named_new);
  int followed = 0;
  while (harness_now_ms() - t0 < 12000) {
    followed |= harness_metric(base, now) == 1;
    ck_assert_msg(!followed || harness_metric(base, was) != 1,
                  "picketd went back to the deposed primary %s while the failover's leader was "
                  "frozen", sg_node_addr(g, old));
    harness_sleep_ms(20);
  }
  readyz z = get_readyz(base);
  printf("leader_frozen_mid_failover: at the end /readyz says %ld %s\n", z.status, z.body);
  load_stop();
  ck_assert_msg(followed, "picketd never followed the promotion");
  report R = check_run("leader_frozen_mid_failover", t0);
  assert_safe(&R, "leader_frozen_mid_failover");
  free(R.all);
  double switches = harness_metric(base, "picket_redis_failovers_total");
  if (switches != 1) show_switches(harness_picketd_log(P));
  ck_assert_msg(switches == 1, "picketd switched primaries %g times in one failover", switches);
  sg_pause_sentinel(g, L, 0);
  printf("leader_frozen_mid_failover took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

/* A lagging run: both replicas partitioned (behind their proxies) for
 * 1.5 s under load, then the primary killed, so Sentinel promotes a
 * replica that missed what the lag wrote. Besides the load, two locks it
 * never uses: sen-kept, granted before the partition (and on both
 * replicas) and renewed in the lag and after the failover, and sen-lag,
 * acquired in the lag and again after the failover. */
typedef struct {
  report R; /* the load's; the caller frees R.all */
  int64_t t_part, t_kill;
  fault_call kept, kept_lag, kept_after, lag, after;
} lagging;

/* A call after the failover: tried again while the new primary has no
 * replica to acknowledge it yet (its resync) or picketd none to send it to. */
static long settled(const char *base, const char *name, const char *action, const char *lease,
                    fault_call *c) {
  int64_t t0 = harness_now_ms();
  long st;
  for (;;) {
    st = lease ? fault_lease_call(base, name, action, lease, c)
               : fault_acquire(base, name, 60000, NULL, c);
    if (st != 503 || harness_now_ms() - t0 > 10000 * harness_time_scale()) return st;
    harness_sleep_ms(50);
  }
}

static lagging lagging_failover(const char *name, const char *const *flags) {
  lagging L;
  memset(&L, 0, sizeof L);
  drop_group(); /* the shared one is done with; one group at a time */
  sg_opts o = {.proxied = 1};
  sg_group *g = G = sg_start(&o);
  int old = sg_primary(g);
  ck_assert_int_eq(old, 0);
  const char *base = start_picketd(g, flags);
  wait_follows(base, sg_node_addr(g, old));
  ck_assert_int_eq(fault_acquire(base, "sen-kept", 60000, NULL, &L.kept), 200);
  fault_wait_replicating(sg_node(g, old), SG_NODES - 1);
  load_start(base);
  harness_sleep_ms(1000);

  L.t_part = harness_now_ms();
  sg_partition_replicas(g);
  fault_acquire(base, "sen-lag", 60000, NULL, &L.lag);
  fault_lease_call(base, "sen-kept", "renew", L.kept.lease, &L.kept_lag);
  int64_t left = L.t_part + 1500 - harness_now_ms();
  if (left > 0) harness_sleep_ms(left);

  L.t_kill = harness_now_ms();
  sg_kill_node(g, old);
  int64_t detect_ms;
  int now = sg_wait_primary(g, old, 30000 * harness_time_scale(), &detect_ms);
  int64_t follow_ms = wait_follows(base, sg_node_addr(g, now)) + detect_ms;
  harness_sleep_ms(2500);
  load_stop();
  printf("%s: replicas partitioned, primary %s killed: Sentinels agreed on %s after %lld ms, "
         "picketd followed after %lld ms\n",
         name, sg_node_addr(g, old), sg_node_addr(g, now), (long long)detect_ms,
         (long long)follow_ms);
  settled(base, "sen-lag", "acquire", NULL, &L.after);
  settled(base, "sen-kept", "renew", L.kept.lease, &L.kept_after);
  printf("%s: sen-lag in the lag %ld %s fence %lld, after the failover %ld %s fence %lld; "
         "sen-kept (fence %lld) renewed in the lag %ld %s, after %ld %s\n",
         name, L.lag.status, L.lag.code, (long long)L.lag.fence, L.after.status, L.after.code,
         (long long)L.after.fence, (long long)L.kept.fence, L.kept_lag.status, L.kept_lag.code,
         L.kept_after.status, L.kept_after.code);
  L.R = check_run(name, L.t_kill);
  return L;
}

START_TEST(lagging_replicas_lossy) {
  int64_t t_case = harness_now_ms();
  const char *flags[] = {"--min-replicas", "0", "--fence-floor", "none", NULL};
  lagging L = lagging_failover("lagging_replicas_lossy", flags);
  /* the loss the default prevents: what was granted in the lag died with
   * the primary, and the promoted replica hands those fences out again,
   * while their first holders still believe they hold the locks */
  ck_assert_msg(L.lag.status == 200, "sen-lag in the lag: %ld %s", L.lag.status, L.lag.code);
  ck_assert_msg(L.after.status == 200, "sen-lag after: %ld %s", L.after.status, L.after.code);
  ck_assert_msg(L.after.fence == L.lag.fence,
                "sen-lag: fence %lld in the lag, %lld after the failover: not handed out again",
                (long long)L.lag.fence, (long long)L.after.fence);
  ck_assert_msg(L.R.dup_fences > 0, "the load saw no fence handed out twice in a lossy failover");
  ck_assert_msg(L.R.switch_ms >= 0, "no lock call succeeded after the failover");
  free(L.R.all);
  printf("lagging_replicas_lossy took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

START_TEST(lagging_replicas_refused) {
  int64_t t_case = harness_now_ms();
  const char *flags[] = {"--fence-floor", "none", NULL}; /* --min-replicas 1: the default */
  lagging L = lagging_failover("lagging_replicas_refused", flags);
  report *R = &L.R;
  int refused = 0, granted_in_lag = 0;
  for (int i = 0; i < R->n; i++) {
    const rec *x = &R->all[i];
    if (x->t0 <= L.t_part || x->t1 >= L.t_kill) continue; /* in the lag, before the kill */
    if (x->op == OP_RELEASE) continue; /* a release waits for no replica */
    refused += x->status == 503 && strcmp(x->code, "not_replicated") == 0;
    granted_in_lag += x->status == 200;
  }
  printf("lagging_replicas_refused: the load in the lag: %d calls refused not_replicated, %d "
         "succeeded\n",
         refused, granted_in_lag);
  ck_assert_msg(granted_in_lag == 0, "%d grants or renewals succeeded while no replica could "
                "take them", granted_in_lag);
  ck_assert_msg(L.lag.status == 503 && strcmp(L.lag.code, "not_replicated") == 0,
                "sen-lag in the lag: %ld %s", L.lag.status, L.lag.code);
  ck_assert_msg(L.kept_lag.status == 503 && strcmp(L.kept_lag.code, "not_replicated") == 0,
                "sen-kept renewed in the lag: %ld %s", L.kept_lag.status, L.kept_lag.code);
  /* the refused grant's counter died with the primary: sen-lag's first
   * grant is 1, handed out once; the acknowledged grant survived */
  ck_assert_msg(L.after.status == 200 && L.after.fence == 1, "sen-lag after: %ld %s fence %lld",
                L.after.status, L.after.code, (long long)L.after.fence);
  ck_assert_msg(L.kept_after.status == 200 && L.kept_after.fence == L.kept.fence,
                "sen-kept renewed after: %ld %s fence %lld (granted %lld)", L.kept_after.status,
                L.kept_after.code, (long long)L.kept_after.fence, (long long)L.kept.fence);
  assert_safe(R, "lagging_replicas_refused");
  ck_assert_msg(R->switch_ms >= 0, "no lock call succeeded after the failover");
  ck_assert_msg(R->switch_ms < KILLED_SWITCH_BOUND * harness_time_scale(), "switch took %lld ms",
                (long long)R->switch_ms);
  free(R->all);
  printf("lagging_replicas_refused took %lld ms\n", (long long)(harness_now_ms() - t_case));
  case_done = 1;
}
END_TEST

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* the proxies write to sockets that may close */
  setvbuf(stdout, NULL, _IOLBF, 0);
  curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread uses libcurl */
  const TTest *tests[] = {forced_failover,         waiter_across_failover, primary_killed,
                          sentinels_lost,          sentinels_lost_no_lease,
                          failback_unheard,        leader_frozen_mid_failover,
                          lagging_replicas_lossy,
                          lagging_replicas_refused};
  Suite *s = suite_create("fault_sentinel");
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    TCase *tc = tcase_create(tests[i]->name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
  }
  /* One process: the group and its servers outlive each case (a forked
   * case would take the servers it restarted with it). */
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_NOFORK);
  int64_t t0 = harness_now_ms();
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  drop_group();
  for (int i = 0; i < CLIENTS; i++) free(clients[i].recs);
  curl_global_cleanup();
  printf("fault_sentinel: %lld ms in all\n", (long long)(harness_now_ms() - t0));
  return failed ? 1 : 0;
}
