/* test_client_election.c: libpicket's leader elections (client/election.c,
 * and the lease, keeper and watch machinery it routes to) against a real
 * redis-server and a real picketd (tests/harness).
 *
 *   election_campaign     a campaign's term, value, owner, lease and local
 *                         deadline; picket_leader agrees; the same lease id
 *                         again is the same leadership (same term); a bad
 *                         name or value is PICKET_EINVAL before any request;
 *                         lock "x" and election "x" do not block each other
 *   election_leader_exists  a second candidate without a wait gets
 *                         PICKET_ELEADER with the leader's owner and
 *                         retry_after_ms; one with a short wait too, after it
 *   election_proclaim     a new value (term unchanged) and a cleared one, seen
 *                         by picket_leader; a proclaim renews
 *   election_renew_resign renew moves the deadline; a waiting candidate leads
 *                         within a second of the resign, with a higher term;
 *                         the old leader's renew, proclaim and resign are then
 *                         PICKET_ELOST; a leadership made from the lease id
 *                         (picket_leadership_new) proclaims and resigns
 *   election_lost         a leadership left to expire: renew is PICKET_ELOST,
 *                         and another candidate leads with a higher term; a
 *                         keeper on a leadership renews it past several TTLs,
 *                         and reports the loss at once when the election is
 *                         broken (its watch of the leader events)
 *   election_observe      picket_observe_open: the first leader event is the
 *                         election now; a proclaim is a leader event with the
 *                         same term and the new value; a resign one with no
 *                         leader; picket_event_ends on them
 *
 * Each test uses its own election names. Upper bounds on time are
 * multiplied by harness_time_scale(). */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "picket/picket.h"

static harness_redis *redis;
static harness_picketd *picketd;

static void servers_start(void) {
  ck_assert_int_eq(harness_servers_start(NULL, NULL, &redis, &picketd), 0);
}
static void servers_stop(void) { harness_servers_free(redis, picketd); }

static picket_client *client(void) {
  picket_client *c = NULL;
  ck_assert_int_eq(picket_client_new(harness_picketd_url(picketd), NULL, &c), 0);
  return c;
}

static picket_leadership *campaign(picket_client *c, const char *name, int64_t ttl_ms,
                                   const char *owner, const char *value) {
  picket_campaign_opts o = {.ttl_ms = ttl_ms, .owner = owner, .value = value};
  picket_leadership *l = NULL;
  int err = picket_campaign(c, name, &o, &l);
  ck_assert_msg(err == 0, "campaign %s: %s (%s)", name, picket_err_name(err),
                picket_client_error_message(c));
  return l;
}

static void leader_of(picket_client *c, const char *name, picket_leader_info *info) {
  int err = picket_leader(c, name, info);
  ck_assert_msg(err == 0, "leader %s: %s (%s)", name, picket_err_name(err),
                picket_client_error_message(c));
}

START_TEST(election_campaign) {
  picket_client *c = client();
  int64_t before = picket_now_ms();
  char id[] = "0123456789abcdef0123456789abcdef";
  picket_campaign_opts o = {.ttl_ms = 5000, .owner = "node-1", .value = "10.0.0.1:5432",
                            .lease_id = id};
  picket_leadership *l = NULL;
  ck_assert_int_eq(picket_campaign(c, "el-camp", &o, &l), 0);
  ck_assert_str_eq(picket_leadership_election(l), "el-camp");
  ck_assert_int_gt(picket_leadership_term(l), 0);
  ck_assert_str_eq(picket_leadership_value(l), "10.0.0.1:5432");
  ck_assert_ptr_null(picket_leadership_token(l)); /* picketd signs nothing here */
  picket_lease *lease = picket_leadership_lease(l);
  ck_assert(picket_lease_is_election(lease));
  ck_assert(!picket_lease_is_permit(lease) && !picket_lease_is_rwlock(lease));
  ck_assert_str_eq(picket_lease_id(lease), id);
  ck_assert_int_eq(picket_lease_fence(lease), picket_leadership_term(l));
  ck_assert_str_eq(picket_lease_fence_lock(lease), "el-camp");
  ck_assert_str_eq(picket_lease_owner(lease), "node-1");
  ck_assert_int_eq(picket_lease_ttl_ms(lease), 5000);
  ck_assert(picket_lease_valid(lease));
  int64_t deadline = picket_leadership_deadline_ms(l);
  ck_assert_int_ge(deadline, before + 4900);
  ck_assert_int_le(deadline, picket_now_ms() + 5000);

  picket_leader_info info;
  leader_of(c, "el-camp", &info);
  ck_assert_int_eq(info.has_leader, 1);
  ck_assert_int_eq(info.term, picket_leadership_term(l));
  ck_assert_int_eq(info.last_term, info.term);
  ck_assert_int_eq(info.has_value, 1);
  ck_assert_str_eq(info.value, "10.0.0.1:5432");
  ck_assert_int_eq(info.has_owner, 1);
  ck_assert_str_eq(info.owner, "node-1");
  ck_assert_int_gt(info.since_ms, 1700000000000LL);
  ck_assert_int_gt(info.ttl_ms, 0);
  ck_assert_int_le(info.ttl_ms, 5000);
  ck_assert_int_eq(info.candidates, 0);

  /* The same lease id again: the same leadership, not a new term. */
  picket_leadership *again = NULL;
  ck_assert_int_eq(picket_campaign(c, "el-camp", &o, &again), 0);
  ck_assert_int_eq(picket_leadership_term(again), picket_leadership_term(l));
  picket_leadership_free(again);

  /* Elections and locks are separate namespaces. */
  picket_lease *lock = NULL;
  ck_assert_int_eq(picket_acquire(c, "el-camp", &(picket_acquire_opts){.ttl_ms = 5000}, &lock), 0);
  ck_assert_int_eq(picket_release(c, lock), 0);
  picket_lease_free(lock);

  /* A name of 198 bytes, a value of 4097 bytes or with a control
   * character: refused here, before any request (status 0). */
  char name[200], *big = malloc(PICKET_ELECTION_VALUE_MAX + 2);
  memset(name, 'n', 198); /* one more than PICKET_ELECTION_NAME_MAX */
  name[198] = '\0';
  memset(big, 'v', PICKET_ELECTION_VALUE_MAX + 1);
  big[PICKET_ELECTION_VALUE_MAX + 1] = '\0';
  picket_leadership *bad = NULL;
  ck_assert_int_eq(picket_campaign(c, name, NULL, &bad), PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_int_eq(picket_campaign(c, "el-camp-2", &(picket_campaign_opts){.value = big}, &bad),
                   PICKET_EINVAL);
  ck_assert_int_eq(picket_client_status(c), 0);
  ck_assert_int_eq(
      picket_campaign(c, "el-camp-2", &(picket_campaign_opts){.value = "a\nb"}, &bad),
      PICKET_EINVAL);
  ck_assert_ptr_null(bad);
  /* ...and the longest value is fine. */
  big[PICKET_ELECTION_VALUE_MAX] = '\0';
  picket_leadership *longest = campaign(c, "el-camp-2", 5000, NULL, big);
  leader_of(c, "el-camp-2", &info);
  ck_assert_str_eq(info.value, big);
  ck_assert_int_eq(info.has_owner, 0);
  free(big);

  ck_assert_int_eq(picket_resign(c, longest), 0);
  ck_assert_int_eq(picket_resign(c, l), 0);
  ck_assert(!picket_lease_valid(picket_leadership_lease(l)));
  leader_of(c, "el-camp", &info);
  ck_assert_int_eq(info.has_leader, 0);
  ck_assert_int_eq(info.term, 0);
  ck_assert_int_eq(info.last_term, picket_leadership_term(l));
  picket_leadership_free(longest);
  picket_leadership_free(l);
  picket_leadership_free(NULL);
  picket_client_free(c);
}
END_TEST

START_TEST(election_leader_exists) {
  picket_client *c = client(), *d = client();
  picket_leadership *l = campaign(c, "el-exists", 10000, "node-a", "a"), *m = NULL;
  ck_assert_int_eq(picket_campaign(d, "el-exists", &(picket_campaign_opts){.owner = "node-b"}, &m),
                   PICKET_ELEADER);
  ck_assert_ptr_null(m);
  ck_assert_int_eq(picket_client_status(d), 409);
  ck_assert_str_eq(picket_client_error_code(d), "leader_exists");
  ck_assert_str_eq(picket_client_holder(d), "node-a");
  ck_assert_int_gt(picket_client_retry_after_ms(d), 0);
  ck_assert_int_le(picket_client_retry_after_ms(d), 10000);
  ck_assert_str_eq(picket_err_name(PICKET_ELEADER), "ELEADER");
  ck_assert_ptr_nonnull(strstr(picket_strerror(PICKET_ELEADER), "leader"));

  /* A short wait runs out the same way, after the wait. */
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_campaign(d, "el-exists", &(picket_campaign_opts){.wait_ms = 300}, &m),
                   PICKET_ELEADER);
  int64_t waited = picket_now_ms() - t0;
  ck_assert_msg(waited >= 250 && waited < 3000 * harness_time_scale(),
                "a wait of 300 ms gave up after %lld ms", (long long)waited);
  ck_assert_int_eq(picket_resign(c, l), 0);
  picket_leadership_free(l);
  picket_client_free(c);
  picket_client_free(d);
}
END_TEST

START_TEST(election_proclaim) {
  picket_client *c = client();
  picket_leadership *l = campaign(c, "el-proclaim", 3000, NULL, "first");
  int64_t term = picket_leadership_term(l);
  picket_leader_info info;

  harness_sleep_ms(300);
  int64_t before = picket_leadership_deadline_ms(l);
  ck_assert_int_eq(picket_proclaim(c, l, "second", 0), 0);
  ck_assert_str_eq(picket_leadership_value(l), "second");
  ck_assert_int_eq(picket_leadership_term(l), term);
  ck_assert_int_gt(picket_leadership_deadline_ms(l), before); /* it renewed */
  leader_of(c, "el-proclaim", &info);
  ck_assert_int_eq(info.term, term);
  ck_assert_str_eq(info.value, "second");

  ck_assert_int_eq(picket_proclaim(c, l, NULL, 4000), 0);
  ck_assert_ptr_null(picket_leadership_value(l));
  ck_assert_int_eq(picket_lease_ttl_ms(picket_leadership_lease(l)), 4000);
  leader_of(c, "el-proclaim", &info);
  ck_assert_int_eq(info.has_leader, 1);
  ck_assert_int_eq(info.has_value, 0);
  ck_assert_int_eq(picket_proclaim(c, l, "bad\x01value", 0), PICKET_EINVAL);
  ck_assert_ptr_null(picket_leadership_value(l));

  ck_assert_int_eq(picket_resign(c, l), 0);
  ck_assert_int_eq(picket_proclaim(c, l, "late", 0), PICKET_ELOST);
  picket_leadership_free(l);
  picket_client_free(c);
}
END_TEST

/* A candidate that campaigns with a wait, on its own thread. */
typedef struct {
  const char *name;
  int64_t wait_ms;
  int err;
  int64_t done_ms;
  picket_leadership *l;
} candidate;

static void *candidate_main(void *arg) {
  candidate *k = arg;
  picket_client *c = NULL;
  if (picket_client_new(harness_picketd_url(picketd), NULL, &c) != 0) {
    k->err = PICKET_ENOMEM;
    return NULL;
  }
  k->err = picket_campaign(c, k->name, &(picket_campaign_opts){.ttl_ms = 10000,
                                                               .wait_ms = k->wait_ms,
                                                               .owner = "candidate"},
                           &k->l);
  k->done_ms = picket_now_ms();
  picket_client_free(c);
  return NULL;
}

START_TEST(election_renew_resign) {
  picket_client *c = client();
  picket_leadership *l = campaign(c, "el-resign", 2000, "first", NULL);
  int64_t term = picket_leadership_term(l);
  harness_sleep_ms(200);
  int64_t before = picket_leadership_deadline_ms(l);
  ck_assert_int_eq(picket_renew_leadership(c, l, 6000), 0);
  ck_assert_int_gt(picket_leadership_deadline_ms(l), before);
  ck_assert_int_eq(picket_lease_ttl_ms(picket_leadership_lease(l)), 6000);
  ck_assert_int_eq(picket_leadership_term(l), term);

  candidate k = {.name = "el-resign", .wait_ms = 20000};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, candidate_main, &k), 0);
  /* until the candidate waits in line */
  picket_leader_info info;
  for (int i = 0; i < 200; i++) {
    leader_of(c, "el-resign", &info);
    if (info.candidates == 1) break;
    harness_sleep_ms(10);
  }
  ck_assert_int_eq(info.candidates, 1);
  /* the renew kept the first leader past its first TTL */
  harness_sleep_ms(2000);
  leader_of(c, "el-resign", &info);
  ck_assert_int_eq(info.has_leader, 1);
  ck_assert_int_eq(info.term, term);

  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(picket_resign(c, l), 0);
  pthread_join(t, NULL);
  ck_assert_msg(k.err == 0, "the waiting candidate: %s", picket_err_name(k.err));
  int64_t handover = k.done_ms - t0;
  printf("election_renew_resign: resign to the next leader's grant: %lld ms\n",
         (long long)handover);
  ck_assert_int_lt(handover, 1000 * harness_time_scale());
  ck_assert_int_gt(picket_leadership_term(k.l), term);

  /* The old leader's calls: lost. */
  ck_assert_int_eq(picket_renew_leadership(c, l, 0), PICKET_ELOST);
  ck_assert_int_eq(picket_proclaim(c, l, "zombie", 0), PICKET_ELOST);
  ck_assert_int_eq(picket_resign(c, l), PICKET_ELOST);
  leader_of(c, "el-resign", &info);
  ck_assert_int_eq(info.term, picket_leadership_term(k.l));
  ck_assert_str_eq(info.owner, "candidate");

  /* The new leader's lease handed over by id. */
  picket_leadership *h = NULL;
  ck_assert_int_eq(picket_leadership_new("el-resign", "xyz", &h), PICKET_EINVAL);
  ck_assert_int_eq(
      picket_leadership_new("el-resign", picket_lease_id(picket_leadership_lease(k.l)), &h), 0);
  ck_assert_int_eq(picket_leadership_term(h), 0);
  ck_assert(!picket_lease_valid(picket_leadership_lease(h)));
  ck_assert_int_eq(picket_proclaim(c, h, "handed", 0), 0);
  ck_assert_int_eq(picket_leadership_term(h), picket_leadership_term(k.l));
  ck_assert(picket_lease_valid(picket_leadership_lease(h)));
  ck_assert_int_eq(picket_resign(c, h), 0);
  leader_of(c, "el-resign", &info);
  ck_assert_int_eq(info.has_leader, 0);
  picket_leadership_free(h);
  picket_leadership_free(k.l);
  picket_leadership_free(l);
  picket_client_free(c);
}
END_TEST

static atomic_int lost_err;
static _Atomic int64_t lost_at;
static void on_lost(picket_lease *lease, int err, void *arg) {
  atomic_store(&lost_at, picket_now_ms());
  atomic_store(&lost_err, err);
}

/* A leadership renewed, or proclaimed, with a shorter TTL: the local
 * deadline comes down to the new one (picketd's expiry), not kept at the
 * longer one. */
START_TEST(election_shorter_renewal) {
  picket_client *c = client();
  picket_leadership *l = campaign(c, "el-shorter", 10000, "first", NULL);
  picket_lease *lease = picket_leadership_lease(l);
  ck_assert_int_gt(picket_lease_remaining_ms(lease), 9000);
  int64_t before = picket_now_ms();
  ck_assert_int_eq(picket_renew_leadership(c, l, 1000), 0);
  int64_t after = picket_now_ms();
  ck_assert_int_eq(picket_lease_ttl_ms(lease), 1000);
  ck_assert_int_ge(picket_leadership_deadline_ms(l), before + 1000 - 12);
  ck_assert_int_le(picket_leadership_deadline_ms(l), after + 1000);
  ck_assert_int_le(picket_lease_remaining_ms(lease), 1000);

  ck_assert_int_eq(picket_renew_leadership(c, l, 10000), 0);
  ck_assert_int_gt(picket_lease_remaining_ms(lease), 9000);
  ck_assert_int_eq(picket_proclaim(c, l, "shorter", 1000), 0);
  ck_assert_int_eq(picket_lease_ttl_ms(lease), 1000);
  ck_assert_int_le(picket_lease_remaining_ms(lease), 1000);
  ck_assert_int_eq(picket_resign(c, l), 0);
  picket_leadership_free(l);
  picket_client_free(c);
}
END_TEST

START_TEST(election_lost) {
  picket_client *c = client(), *d = client();
  /* Left to expire: lost, and another leads with a higher term. */
  picket_leadership *l = campaign(c, "el-lost", 300, NULL, NULL);
  harness_sleep_ms(600);
  ck_assert(!picket_lease_valid(picket_leadership_lease(l)));
  picket_leadership *m = campaign(d, "el-lost", 5000, NULL, NULL);
  ck_assert_int_gt(picket_leadership_term(m), picket_leadership_term(l));
  ck_assert_int_eq(picket_renew_leadership(c, l, 0), PICKET_ELOST);
  ck_assert_int_eq(picket_resign(d, m), 0);
  picket_leadership_free(l);
  picket_leadership_free(m);

  /* A keeper keeps a leadership past several TTLs... */
  l = campaign(c, "el-keep", 900, NULL, NULL);
  picket_keeper_options ko;
  picket_keeper_options_init(&ko);
  ko.on_lost = on_lost;
  atomic_store(&lost_err, 0);
  picket_keeper *k = NULL;
  ck_assert_int_eq(picket_keeper_start(c, picket_leadership_lease(l), &ko, &k), 0);
  harness_sleep_ms(2500);
  ck_assert_int_eq(picket_keeper_lost(k), 0);
  ck_assert_int_ge(picket_keeper_renewals(k), 3);
  ck_assert_int_eq(picket_keeper_watching(k), 1); /* the election's leader events */
  picket_leader_info info;
  leader_of(d, "el-keep", &info);
  ck_assert_int_eq(info.term, picket_leadership_term(l));
  /* ...and reports its loss at once when the election is broken: the
   * leader event says so, long before the next renewal would. */
  ck_assert_int_eq(picket_keeper_stop(k), 0);
  ck_assert_int_eq(picket_renew_leadership(c, l, 30000), 0);
  ko.ttl_ms = 30000;
  ck_assert_int_eq(picket_keeper_start(c, picket_leadership_lease(l), &ko, &k), 0);
  for (int i = 0; i < 300 && picket_keeper_watching(k) != 1; i++) harness_sleep_ms(10);
  ck_assert_int_eq(picket_keeper_watching(k), 1);
  harness_resp r;
  int64_t t0 = picket_now_ms();
  ck_assert_int_eq(harness_http(harness_picketd_url(picketd), "POST", "/v1/elections/el-keep/break",
                                "{}", &r), 0);
  ck_assert_msg(r.status == 200, "break: %ld %s", r.status, r.body);
  harness_resp_free(&r);
  for (int i = 0; i < 500 && atomic_load(&lost_err) == 0; i++) harness_sleep_ms(10);
  int err = atomic_load(&lost_err);
  int64_t took = atomic_load(&lost_at) - t0;
  ck_assert_msg(err == PICKET_ELOST, "on_lost after the break: %s", picket_err_name(err));
  printf("election_lost: break to the keeper's on_lost: %lld ms\n", (long long)took);
  ck_assert_int_lt(took, 2000 * harness_time_scale());
  ck_assert_int_eq(picket_keeper_stop(k), PICKET_ELOST);
  ck_assert_int_eq(picket_renew_leadership(c, l, 0), PICKET_ELOST);
  picket_leadership_free(l);
  picket_client_free(c);
  picket_client_free(d);
}
END_TEST

static void next_leader(picket_watch *w, picket_event *ev) {
  int err;
  do {
    err = picket_watch_next(w, ev, 3000 * harness_time_scale());
    ck_assert_msg(err == 0, "no event: %s (%s)", picket_err_name(err),
                  picket_watch_error_message(w));
  } while (ev->type == PICKET_EVENT_HEARTBEAT);
  ck_assert_int_eq(ev->type, PICKET_EVENT_LEADER);
  ck_assert_str_eq(ev->type_name, "leader");
  ck_assert_str_eq(ev->name, "el-observe");
  ck_assert_int_gt(ev->time_ms, 1700000000000LL);
}

START_TEST(election_observe) {
  picket_client *c = client();
  picket_watch *w = NULL;
  picket_event ev;
  picket_leader_info info;
  char name[200];
  memset(name, 'n', 198); /* one more than PICKET_ELECTION_NAME_MAX */
  name[198] = '\0';
  ck_assert_int_eq(picket_observe_open(c, name, &w), PICKET_EINVAL);

  ck_assert_int_eq(picket_observe_open(c, "el-observe", &w), 0);
  next_leader(w, &ev); /* the election now: nobody, never */
  ck_assert_int_eq(ev.held, 0);
  ck_assert_int_eq(ev.fence, 0);
  ck_assert_int_eq(picket_event_leader(&ev, &info), 0);
  ck_assert_int_eq(info.has_leader, 0);
  ck_assert_int_eq(info.candidates, -1);

  picket_leadership *l = campaign(c, "el-observe", 5000, "obs", "v1");
  int64_t term = picket_leadership_term(l);
  next_leader(w, &ev);
  ck_assert_int_eq(ev.held, 1);
  ck_assert_int_eq(ev.fence, term);
  ck_assert_int_eq(ev.has_owner, 1);
  ck_assert_str_eq(ev.owner, "obs");
  ck_assert_int_gt(ev.ttl_ms, 0);
  ck_assert(!picket_event_ends(&ev, term));
  ck_assert_int_eq(picket_event_leader(&ev, &info), 0);
  ck_assert_int_eq(info.term, term);
  ck_assert_str_eq(info.value, "v1");

  ck_assert_int_eq(picket_proclaim(c, l, "v2", 0), 0);
  next_leader(w, &ev); /* a proclaim: same term, new value */
  ck_assert_int_eq(ev.fence, term);
  ck_assert_int_eq(picket_event_leader(&ev, &info), 0);
  ck_assert_str_eq(info.value, "v2");
  ck_assert(!picket_event_ends(&ev, term));

  ck_assert_int_eq(picket_resign(c, l), 0);
  next_leader(w, &ev);
  ck_assert_int_eq(ev.held, 0);
  ck_assert_int_eq(ev.fence, term); /* no leader: the last term issued */
  ck_assert(picket_event_ends(&ev, term));
  picket_event other = {.type = PICKET_EVENT_HEARTBEAT};
  ck_assert_int_eq(picket_event_leader(&other, &info), PICKET_EINVAL);
  picket_leadership_free(l);
  picket_client_free(c);
  picket_watch_close(w); /* it has its own connection */
}
END_TEST

static Suite *election_suite(void) {
  const TTest *const tests[] = {election_campaign,     election_leader_exists, election_proclaim,
                                election_renew_resign, election_lost,          election_observe,
                                election_shorter_renewal};
  Suite *s = suite_create("election");
  TCase *t = tcase_create("election");
  tcase_set_timeout(t, 60);
  tcase_add_unchecked_fixture(t, servers_start, servers_stop);
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) tcase_add_test(t, tests[i]);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  return harness_run_suite(election_suite());
}
