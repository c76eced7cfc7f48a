/* test_etcd_client.c: the etcd gateway client (server/store/etcd) against a
 * real three-member etcd cluster on loopback ports (tests/harness/
 * harness_etcd.h), started once for the suite to keep CI time low.
 *
 * The suite runs without fork (CK_NOFORK): the cluster's members are
 * children of this process, and a test that kills and restarts one must
 * leave the restarted member to the suite, not to a forked child that
 * exits. Each test therefore starts by healing the cluster (restarting a
 * member an earlier, failed test left down), and every test works on keys
 * of its own. The auth test enables auth, so it runs on a one-member
 * cluster of its own.
 *
 * The figures the design note quotes (docs/etcd-design.md) are printed as
 * "measure: ..." lines. */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_client.h"
#include "etcd_grpc.h"
#include "harness.h"
#include "harness_etcd.h"

static harness_etcd *E;

static void heal(void) {
  for (int i = 0; i < harness_etcd_size(E); i++) {
    harness_etcd_signal(E, i, SIGCONT);
    if (harness_etcd_pid(E, i) == 0) ck_assert_int_eq(harness_etcd_restart(E, i), 0);
  }
  ck_assert_int_ge(harness_etcd_wait_leader(E, 20000), 0);
}

static etcd_client *client_for(const char *endpoints, long timeout_ms) {
  etcd_client_opts o = {.endpoints = endpoints, .timeout_ms = timeout_ms};
  char err[256];
  etcd_client *c = etcd_client_new(&o, err, sizeof err);
  ck_assert_msg(c != NULL, "etcd_client_new: %s", err);
  return c;
}

/* A key no other test (nor an earlier run on the same cluster) uses. */
static void unique_key(char *out, size_t cap, const char *what) {
  static int seq;
  snprintf(out, cap, "test/%s/%lld-%d", what, (long long)harness_now_ms(), ++seq);
}

/* The lock store's acquire: put key=value (on lease, 0: none) if it does not
 * exist, else read it. Returns the txn's code; *r is the caller's to clear. */
static int create(etcd_client *c, const char *key, const char *value, int64_t lease,
                  etcd_txn_result *r) {
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL, .number = 0};
  etcd_op put = {.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = lease};
  etcd_op get = {.kind = ETCD_OP_RANGE, .key = key};
  etcd_txn_req t = {&cmp, 1, &put, 1, &get, 1};
  return etcd_txn(c, &t, r);
}

static int del(etcd_client *c, const char *key, int prefix) {
  etcd_op d = {.kind = ETCD_OP_DELETE, .key = key, .prefix = prefix};
  etcd_txn_req t = {NULL, 0, &d, 1, NULL, 0};
  etcd_txn_result r;
  int rc = etcd_txn(c, &t, &r);
  etcd_txn_result_clear(&r);
  return rc;
}

/* The kv of key (1) or 0 when there is none; kv is the caller's to free. */
static int get(etcd_client *c, const char *key, etcd_op_result *r) {
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
  int rc = etcd_range(c, &op, r);
  ck_assert_msg(rc == ETCD_OK, "range: %s", etcd_client_errstr(c));
  return r->nkvs;
}

static int64_t store_revision(etcd_client *c) {
  etcd_op_result r;
  get(c, "test/none", &r);
  int64_t rev = r.revision;
  etcd_op_result_clear(&r);
  ck_assert_int_gt(rev, 0);
  return rev;
}

/* ---- key-value ----------------------------------------------------------- */

START_TEST(txn_creates_once) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "once");
  etcd_txn_result a, b;
  ck_assert_int_eq(create(c, key, "{\"owner\":\"a\"}", 0, &a), ETCD_OK);
  ck_assert_int_eq(a.succeeded, 1);
  ck_assert_int_eq(a.nresults, 1);
  ck_assert_int_eq(a.results[0].kind, ETCD_OP_PUT);
  ck_assert_int_gt(a.revision, 0);
  /* The second compare-and-put fails and hands back the holder's kv. */
  ck_assert_int_eq(create(c, key, "{\"owner\":\"b\"}", 0, &b), ETCD_OK);
  ck_assert_int_eq(b.succeeded, 0);
  ck_assert_int_eq(b.nresults, 1);
  ck_assert_int_eq(b.results[0].nkvs, 1);
  etcd_kv *kv = &b.results[0].kvs[0];
  ck_assert_str_eq(kv->key, key);
  ck_assert_str_eq(kv->value, "{\"owner\":\"a\"}");
  ck_assert_uint_eq(kv->value_len, strlen("{\"owner\":\"a\"}"));
  /* The fence: the key's create_revision is the grant's txn revision. */
  ck_assert_int_eq(kv->create_revision, a.revision);
  ck_assert_int_eq(kv->mod_revision, a.revision);
  ck_assert_int_eq(kv->version, 1);
  ck_assert_int_eq(kv->lease, 0);
  ck_assert_int_eq(b.results[0].count, 1);
  ck_assert_int_ge(b.revision, a.revision);
  etcd_txn_result_clear(&a);
  etcd_txn_result_clear(&b);
  /* A prefix range and a count. */
  char prefix[160];
  snprintf(prefix, sizeof prefix, "%s/", key);
  for (int i = 0; i < 3; i++) {
    char sub[192];
    snprintf(sub, sizeof sub, "%s%d", prefix, i);
    ck_assert_int_eq(create(c, sub, "x", 0, &a), ETCD_OK);
    etcd_txn_result_clear(&a);
  }
  etcd_op_result r;
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = prefix, .prefix = 1, .limit = 2};
  ck_assert_int_eq(etcd_range(c, &op, &r), ETCD_OK);
  ck_assert_int_eq(r.nkvs, 2);
  ck_assert_int_eq(r.count, 3);
  ck_assert_int_eq(r.more, 1);
  ck_assert_str_eq(r.kvs[1].key + strlen(prefix), "1");
  etcd_op_result_clear(&r);
  op.count_only = 1;
  op.limit = 0;
  ck_assert_int_eq(etcd_range(c, &op, &r), ETCD_OK);
  ck_assert_int_eq(r.nkvs, 0);
  ck_assert_int_eq(r.count, 3);
  etcd_op_result_clear(&r);
  ck_assert_int_eq(del(c, prefix, 1), ETCD_OK);
  ck_assert_int_eq(get(c, key, &r), 1); /* the prefix "key/" spares "key" */
  etcd_op_result_clear(&r);
  etcd_client_free(c);
}
END_TEST

/* A batch of three txns (etcd_txn_batch) over gRPC and through the
 * gateway: the same outcomes, each txn its own compare, one revision for
 * all; etcd_grpc_counts says which way went. A batch that writes one key
 * twice is refused whole, either way. */
static void batch_round(int no_grpc) {
  etcd_client_opts o = {.endpoints = harness_etcd_urls(E), .timeout_ms = 5000, .no_grpc = no_grpc};
  char err[256], a[96], b[96];
  etcd_client *c = etcd_client_new(&o, err, sizeof err);
  ck_assert_msg(c != NULL, "%s", err);
  unique_key(a, sizeof a, "batch-a");
  unique_key(b, sizeof b, "batch-b");
  etcd_txn_result first;
  ck_assert_int_eq(create(c, a, "there", 0, &first), ETCD_OK); /* a exists, b does not */
  etcd_txn_result_clear(&first);
  long ok0, failed0, ok1, failed1;
  etcd_grpc_counts(&ok0, &failed0);
  etcd_compare ca = {.key = a, .target = ETCD_CMP_CREATE}, cb = {.key = b, .target = ETCD_CMP_CREATE};
  etcd_op pa = {.kind = ETCD_OP_PUT, .key = a, .value = "x"}, pb = {.kind = ETCD_OP_PUT, .key = b, .value = "y"};
  etcd_op ga = {.kind = ETCD_OP_RANGE, .key = a}, gb = {.kind = ETCD_OP_RANGE, .key = b};
  etcd_op pre = {.kind = ETCD_OP_RANGE, .key = "test/batch-", .prefix = 1, .count_only = 1};
  etcd_txn_req t1 = {&ca, 1, &pa, 1, &ga, 1}, t2 = {&cb, 1, &pb, 1, &gb, 1}, t3 = {NULL, 0, &pre, 1, NULL, 0};
  const etcd_txn_req *ts[3] = {&t1, &t2, &t3};
  etcd_txn_result out[3];
  ck_assert_msg(etcd_txn_batch(c, ts, 3, out) == ETCD_OK, "%s", etcd_client_errstr(c));
  etcd_grpc_counts(&ok1, &failed1);
  ck_assert_int_eq(ok1 - ok0, no_grpc ? 0 : 1);
  ck_assert_int_eq(failed1, failed0);
  /* a is there: t1's failure branch read it; b was not: t2 wrote it */
  ck_assert_int_eq(out[0].succeeded, 0);
  ck_assert_int_eq(out[0].nresults, 1);
  ck_assert_int_eq(out[0].results[0].nkvs, 1);
  ck_assert_str_eq(out[0].results[0].kvs[0].value, "there");
  ck_assert_int_eq(out[1].succeeded, 1);
  ck_assert_int_eq(out[1].nresults, 1);
  ck_assert_int_eq(out[2].succeeded, 1);
  ck_assert_int_ge(out[2].results[0].count, 2);
  ck_assert_int_gt(out[1].revision, 0);
  ck_assert_int_eq(out[0].revision, out[1].revision);
  ck_assert_int_eq(out[2].revision, out[1].revision);
  etcd_op_result got;
  ck_assert_int_eq(get(c, b, &got), 1);
  ck_assert_int_eq(got.kvs[0].create_revision, out[1].revision); /* its fence */
  etcd_op_result_clear(&got);
  for (int i = 0; i < 3; i++) etcd_txn_result_clear(&out[i]);
  /* two txns that put one key: refused whole, nothing written */
  etcd_compare none = {.key = b, .target = ETCD_CMP_VERSION, .result = ETCD_CMP_GREATER};
  etcd_op pb2 = {.kind = ETCD_OP_PUT, .key = b, .value = "z"};
  etcd_txn_req u1 = {&none, 1, &pb2, 1, NULL, 0}, u2 = {NULL, 0, &pb2, 1, NULL, 0};
  const etcd_txn_req *us[2] = {&u1, &u2};
  ck_assert_int_ne(etcd_txn_batch(c, us, 2, out), ETCD_OK);
  ck_assert_int_eq(get(c, b, &got), 1);
  ck_assert_str_eq(got.kvs[0].value, "y");
  etcd_op_result_clear(&got);
  etcd_client_free(c);
}

START_TEST(batch_over_grpc_and_gateway) {
  batch_round(0);
  batch_round(1);
}
END_TEST

START_TEST(create_revision_rises) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "rise");
  int64_t prev = 0;
  for (int i = 0; i < 10; i++) {
    etcd_txn_result r;
    ck_assert_int_eq(create(c, key, "v", 0, &r), ETCD_OK);
    ck_assert_int_eq(r.succeeded, 1);
    ck_assert_int_gt(r.revision, prev);
    etcd_op_result g;
    ck_assert_int_eq(get(c, key, &g), 1);
    ck_assert_int_eq(g.kvs[0].create_revision, r.revision);
    prev = r.revision;
    etcd_op_result_clear(&g);
    etcd_txn_result_clear(&r);
    ck_assert_int_eq(del(c, key, 0), ETCD_OK);
    ck_assert_int_eq(get(c, key, &g), 0);
    etcd_op_result_clear(&g);
  }
  /* A compare on mod_revision guards a release: the wrong one deletes nothing. */
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key, "v", 0, &r), ETCD_OK);
  int64_t mine = r.revision;
  etcd_txn_result_clear(&r);
  etcd_compare cmp = {
      .key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL, .number = mine - 1};
  etcd_op d = {.kind = ETCD_OP_DELETE, .key = key};
  etcd_txn_req t = {&cmp, 1, &d, 1, NULL, 0};
  ck_assert_int_eq(etcd_txn(c, &t, &r), ETCD_OK);
  ck_assert_int_eq(r.succeeded, 0);
  etcd_txn_result_clear(&r);
  cmp.number = mine;
  ck_assert_int_eq(etcd_txn(c, &t, &r), ETCD_OK);
  ck_assert_int_eq(r.succeeded, 1);
  ck_assert_int_eq(r.results[0].count, 1);
  etcd_txn_result_clear(&r);
  /* Compares on value and version. */
  ck_assert_int_eq(create(c, key, "w", 0, &r), ETCD_OK);
  etcd_txn_result_clear(&r);
  etcd_compare both[] = {
      {.key = key, .target = ETCD_CMP_VALUE, .result = ETCD_CMP_EQUAL, .value = "w"},
      {.key = key, .target = ETCD_CMP_VERSION, .result = ETCD_CMP_LESS, .number = 2}};
  etcd_op put = {.kind = ETCD_OP_PUT, .key = key, .value = "w2"};
  etcd_txn_req t2 = {both, 2, &put, 1, NULL, 0};
  ck_assert_int_eq(etcd_txn(c, &t2, &r), ETCD_OK);
  ck_assert_int_eq(r.succeeded, 1);
  etcd_txn_result_clear(&r);
  ck_assert_int_eq(etcd_txn(c, &t2, &r), ETCD_OK); /* the value is w2 now */
  ck_assert_int_eq(r.succeeded, 0);
  etcd_txn_result_clear(&r);
  ck_assert_int_eq(del(c, key, 0), ETCD_OK);
  etcd_client_free(c);
}
END_TEST

/* ---- leases -------------------------------------------------------------- */

START_TEST(lease_lifecycle) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  int64_t id, granted, ttl, gttl;
  /* etcd raises a TTL under its minimum: ask for 1 s and see. */
  ck_assert_int_eq(etcd_lease_grant(c, 1, &id, &granted), ETCD_OK);
  printf(
      "measure: etcd minimum lease TTL (heartbeat 50 ms, election 500 ms): asked 1 s, granted %lld "
      "s\n",
      (long long)granted);
  ck_assert_int_ge(granted, 1);
  ck_assert_int_eq(etcd_lease_revoke(c, id), ETCD_OK);
  ck_assert_int_eq(etcd_lease_grant(c, 30, &id, &granted), ETCD_OK);
  ck_assert_int_eq(granted, 30);
  ck_assert_int_gt(id, 0);
  ck_assert_int_eq(etcd_lease_keepalive_once(c, id, &ttl), ETCD_OK);
  ck_assert_int_eq(ttl, 30);
  ck_assert_int_eq(etcd_lease_timetolive(c, id, &ttl, &gttl), ETCD_OK);
  ck_assert_int_eq(gttl, 30);
  ck_assert_int_gt(ttl, 25);
  ck_assert_int_le(ttl, 30);
  /* A key on the lease goes with it. */
  char key[128];
  unique_key(key, sizeof key, "lease");
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key, "held", id, &r), ETCD_OK);
  ck_assert_int_eq(r.succeeded, 1);
  etcd_txn_result_clear(&r);
  etcd_op_result g;
  ck_assert_int_eq(get(c, key, &g), 1);
  ck_assert_int_eq(g.kvs[0].lease, id);
  etcd_op_result_clear(&g);
  ck_assert_int_eq(etcd_lease_revoke(c, id), ETCD_OK);
  ck_assert_int_eq(get(c, key, &g), 0);
  etcd_op_result_clear(&g);
  ck_assert_int_eq(etcd_lease_keepalive_once(c, id, &ttl), ETCD_OK);
  ck_assert_int_eq(ttl, 0);
  ck_assert_int_eq(etcd_lease_timetolive(c, id, &ttl, &gttl), ETCD_OK);
  ck_assert_int_eq(ttl, -1);
  ck_assert_int_eq(etcd_lease_revoke(c, id), ETCD_ENOTFOUND);
  /* A put on a gone lease is refused as such. */
  ck_assert_int_eq(create(c, key, "late", id, &r), ETCD_ENOTFOUND);
  etcd_txn_result_clear(&r);
  etcd_client_free(c);
}
END_TEST

START_TEST(lease_expiry_deletes_key) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  int64_t id, granted;
  ck_assert_int_eq(etcd_lease_grant(c, 1, &id, &granted), ETCD_OK);
  char key[128];
  unique_key(key, sizeof key, "expiry");
  etcd_txn_result r;
  int64_t t0 = harness_now_ms();
  ck_assert_int_eq(create(c, key, "short", id, &r), ETCD_OK);
  etcd_txn_result_clear(&r);
  etcd_op_result g;
  ck_assert_int_eq(get(c, key, &g), 1);
  etcd_op_result_clear(&g);
  int64_t gone_at = -1;
  while (harness_now_ms() - t0 < (granted * 1000 + 5000) * harness_time_scale()) {
    int n = get(c, key, &g);
    etcd_op_result_clear(&g);
    if (n == 0) {
      gone_at = harness_now_ms() - t0;
      break;
    }
    harness_sleep_ms(20);
  }
  printf("measure: a %lld s lease's key was deleted %lld ms after its put\n", (long long)granted,
         (long long)gone_at);
  ck_assert_msg(gone_at >= 0, "the key outlived its lease");
  /* Never before its TTL (less the leader's 1 s lease-check granularity at worst). */
  ck_assert_int_ge(gone_at, granted * 1000 - 1000);
  etcd_client_free(c);
}
END_TEST

/* ---- watches ------------------------------------------------------------- */

static etcd_client_opts opts_for(const char *endpoints, long timeout_ms) {
  etcd_client_opts o = {.endpoints = endpoints, .timeout_ms = timeout_ms};
  return o;
}

/* Reads until n events came or timeout_ms passed; returns how many. */
static int collect(etcd_watch *w, etcd_event *ev, int n, long timeout_ms) {
  int got = 0;
  int64_t until = harness_now_ms() + timeout_ms;
  while (got < n && harness_now_ms() < until) {
    int k = etcd_watch_next(w, ev + got, n - got, 200);
    ck_assert_msg(k >= 0, "watch: %s (%s)", etcd_strerror(k), etcd_watch_errstr(w));
    got += k;
  }
  return got;
}

START_TEST(watch_put_then_delete) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  etcd_client_opts o = opts_for(harness_etcd_urls(E), 5000);
  char prefix[128], key[160];
  unique_key(prefix, sizeof prefix, "watch");
  snprintf(key, sizeof key, "%s/k", prefix);
  int64_t from = store_revision(c) + 1;
  etcd_watch *w;
  char err[256];
  ck_assert_msg(etcd_watch_open(&o, prefix, 1, from, &w, err, sizeof err) == ETCD_OK, "%s", err);
  etcd_event ev[4];
  ck_assert_int_eq(etcd_watch_next(w, ev, 4, 100), 0); /* nothing yet: a timeout */
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key, "v", 0, &r), ETCD_OK);
  int64_t put_rev = r.revision;
  etcd_txn_result_clear(&r);
  ck_assert_int_eq(del(c, key, 0), ETCD_OK);
  ck_assert_int_eq(collect(w, ev, 2, 5000), 2);
  ck_assert_int_eq(ev[0].type, ETCD_EVENT_PUT);
  ck_assert_str_eq(ev[0].key, key);
  ck_assert_int_eq(ev[0].mod_revision, put_rev);
  ck_assert_int_eq(ev[0].create_revision, put_rev);
  ck_assert_int_eq(ev[1].type, ETCD_EVENT_DELETE);
  ck_assert_str_eq(ev[1].key, key);
  ck_assert_int_gt(ev[1].mod_revision, put_rev);
  ck_assert_int_eq(etcd_watch_last_revision(w), ev[1].mod_revision);
  etcd_watch_free(w);
  etcd_client_free(c);
}
END_TEST

/* A watch of a fresh prefix sees its first put and is closed (after
 * member `victim` is killed under it, when victim >= 0: its stream must end
 * at once); three more puts follow while nobody watches; a watch reopened
 * from the last revision + 1 gets exactly those three, in order. */
static void watch_resume(const char *endpoints, int victim) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  etcd_client_opts o = opts_for(endpoints, 3000);
  char prefix[128], key[4][160];
  unique_key(prefix, sizeof prefix, "resume");
  for (int i = 0; i < 4; i++) snprintf(key[i], sizeof key[i], "%s/%d", prefix, i);
  etcd_watch *w;
  char err[256];
  ck_assert_int_eq(etcd_watch_open(&o, prefix, 1, store_revision(c) + 1, &w, err, sizeof err),
                   ETCD_OK);
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key[0], "0", 0, &r), ETCD_OK);
  etcd_txn_result_clear(&r);
  etcd_event ev[4];
  ck_assert_int_eq(collect(w, ev, 1, 5000), 1);
  ck_assert_str_eq(ev[0].key, key[0]);
  if (victim >= 0) {
    harness_etcd_signal(E, victim, SIGKILL);
    int64_t t0 = harness_now_ms();
    int rc = etcd_watch_next(w, ev, 4, 5000);
    printf("measure: a watch on a member killed by SIGKILL returned %s after %lld ms\n",
           etcd_strerror(rc), (long long)(harness_now_ms() - t0));
    ck_assert_int_eq(rc, ETCD_EUNAVAIL);
    ck_assert_int_lt(harness_now_ms() - t0, 1000 * harness_time_scale());
  }
  int64_t last = etcd_watch_last_revision(w);
  etcd_watch_free(w);
  int64_t revs[3];
  for (int i = 1; i < 4; i++) {
    ck_assert_int_eq(create(c, key[i], "x", 0, &r), ETCD_OK);
    revs[i - 1] = r.revision;
    etcd_txn_result_clear(&r);
  }
  ck_assert_int_eq(etcd_watch_open(&o, prefix, 1, last + 1, &w, err, sizeof err), ETCD_OK);
  ck_assert_int_eq(collect(w, ev, 3, 5000), 3);
  for (int i = 0; i < 3; i++) {
    ck_assert_str_eq(ev[i].key, key[i + 1]);
    ck_assert_int_eq(ev[i].mod_revision, revs[i]);
  }
  ck_assert_int_eq(etcd_watch_next(w, ev, 4, 300), 0);
  etcd_watch_free(w);
  if (victim >= 0) ck_assert_int_eq(harness_etcd_restart(E, victim), 0);
  ck_assert_int_eq(del(c, prefix, 1), ETCD_OK);
  etcd_client_free(c);
}

START_TEST(watch_resumes_after_reopen) { watch_resume(harness_etcd_urls(E), -1); }
END_TEST

START_TEST(watch_compacted) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  etcd_client_opts o = opts_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "compact");
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key, "1", 0, &r), ETCD_OK);
  int64_t old = r.revision;
  etcd_txn_result_clear(&r);
  ck_assert_int_eq(del(c, key, 0), ETCD_OK);
  int64_t now = store_revision(c);
  char body[96];
  snprintf(body, sizeof body, "{\"revision\":\"%lld\",\"physical\":true}", (long long)now);
  harness_resp resp;
  ck_assert_int_eq(harness_http(harness_etcd_url(E, 0), "POST", "/v3/kv/compaction", body, &resp),
                   0);
  ck_assert_int_eq(resp.status, 200);
  harness_resp_free(&resp);
  etcd_watch *w;
  char err[256];
  ck_assert_int_eq(etcd_watch_open(&o, key, 0, old, &w, err, sizeof err), ETCD_OK);
  etcd_event ev[2];
  int rc = 0;
  for (int i = 0; i < 50 && rc == 0; i++) rc = etcd_watch_next(w, ev, 2, 100);
  ck_assert_int_eq(rc, ETCD_ECOMPACTED);
  ck_assert_int_eq(etcd_watch_compact_revision(w), now);
  etcd_watch_free(w);
  /* A read at a compacted revision says so too. */
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key, .revision = old};
  etcd_op_result g;
  ck_assert_int_eq(etcd_range(c, &op, &g), ETCD_ECOMPACTED);
  etcd_op_result_clear(&g);
  etcd_client_free(c);
}
END_TEST

typedef struct {
  etcd_watch *w;
  int rc;
  int64_t returned_at;
} blocked_watch;

static void *watch_thread(void *arg) {
  blocked_watch *b = arg;
  etcd_event ev[1];
  b->rc = etcd_watch_next(b->w, ev, 1, 30000);
  b->returned_at = harness_now_ms();
  return NULL;
}

START_TEST(watch_stop_wakes_a_blocked_next) {
  etcd_client_opts o = opts_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "stop");
  blocked_watch b = {.rc = 1};
  char err[256];
  ck_assert_int_eq(etcd_watch_open(&o, key, 0, 0, &b.w, err, sizeof err), ETCD_OK);
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, watch_thread, &b), 0);
  harness_sleep_ms(300);
  int64_t asked = harness_now_ms();
  etcd_watch_stop(b.w);
  pthread_join(t, NULL);
  ck_assert_int_eq(b.rc, ETCD_ESTOPPED);
  ck_assert_int_lt(b.returned_at - asked, 500 * harness_time_scale());
  etcd_event ev[1];
  ck_assert_int_eq(etcd_watch_next(b.w, ev, 1, 10), ETCD_ESTOPPED);
  etcd_watch_free(b.w);
}
END_TEST

/* A watch from now (no start revision) knows the revision it started
 * after, so a reopen from etcd_watch_last_revision + 1 starts there: it
 * used to say 0 until an event came, and a reopen then replayed the
 * whole history from revision 1. */
START_TEST(watch_from_now_knows_its_revision) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  etcd_client_opts o = opts_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "now");
  int64_t before = store_revision(c);
  etcd_watch *w;
  char err[256];
  ck_assert_msg(etcd_watch_open(&o, key, 0, 0, &w, err, sizeof err) == ETCD_OK, "%s", err);
  ck_assert_int_ge(etcd_watch_last_revision(w), before);
  etcd_watch_free(w);
  etcd_client_free(c);
}
END_TEST

/* ---- faults -------------------------------------------------------------- */

/* Endpoints with member `first` first, so the client talks to it until it fails. */
static void urls_from(int first, char *out, size_t cap) {
  int n = harness_etcd_size(E);
  size_t off = 0;
  for (int k = 0; k < n; k++)
    off += (size_t)snprintf(out + off, cap - off, "%s%s", k ? "," : "",
                            harness_etcd_url(E, (first + k) % n));
}

/* One lock granted and released over and over through a client that talks
 * to the leader first; after 20 grants the leader gets `sig`. Every grant's
 * fence (its create_revision) must exceed the last, across the fault, and
 * calls must go on through another member within a few seconds. */
static void leader_fault(int sig) {
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  char urls[512];
  urls_from(leader, urls, sizeof urls);
  etcd_client *c = client_for(urls, 3000);
  char lock[128];
  unique_key(lock, sizeof lock, "leader");
  int64_t fence = 0, last_fence = 0, kill_at = 0, back_after = -1;
  int grants = 0, failures = 0;
  int64_t until = harness_now_ms() + 15000 * harness_time_scale();
  while (harness_now_ms() < until && (back_after < 0 || grants < 40)) {
    if (grants == 20 && kill_at == 0) {
      harness_etcd_signal(E, leader, sig);
      kill_at = harness_now_ms();
    }
    etcd_txn_result r;
    int rc = create(c, lock, "holder", 0, &r);
    if (rc != ETCD_OK) {
      ck_assert_int_eq(rc, ETCD_EUNAVAIL);
      failures++;
      etcd_txn_result_clear(&r);
      continue;
    }
    /* A txn retried on another member after a lost reply may find its own
     * first run's grant: that is the same grant, not a new fence. */
    ck_assert_msg(r.succeeded || r.results[0].nkvs == 1, "neither granted nor held");
    fence = r.succeeded ? r.revision : r.results[0].kvs[0].create_revision;
    etcd_txn_result_clear(&r);
    ck_assert_msg(fence > last_fence || (!r.succeeded && fence == last_fence),
                  "fence %lld after %lld", (long long)fence, (long long)last_fence);
    if (fence > last_fence) grants++;
    last_fence = fence;
    if (kill_at && back_after < 0) back_after = harness_now_ms() - kill_at;
    rc = del(c, lock, 0);
    ck_assert_msg(rc == ETCD_OK || rc == ETCD_EUNAVAIL, "delete: %s", etcd_client_errstr(c));
    if (rc != ETCD_OK) { /* the lock stays held: the next create reads it */
      failures++;
    }
  }
  printf(
      "measure: after %s of the leader, the first call succeeded %lld ms later (%d calls failed)\n",
      sig == SIGKILL ? "SIGKILL" : "SIGSTOP", (long long)back_after, failures);
  ck_assert_int_ge(back_after, 0);
  ck_assert_int_lt(back_after, 5000 * harness_time_scale());
  ck_assert_int_ge(grants, 40);
  ck_assert_str_ne(etcd_client_endpoint(c), harness_etcd_url(E, leader));
  if (sig == SIGKILL)
    ck_assert_int_eq(harness_etcd_restart(E, leader), 0);
  else
    harness_etcd_signal(E, leader, SIGCONT);
  etcd_client_free(c);
}

START_TEST(leader_killed) { leader_fault(SIGKILL); }
END_TEST

START_TEST(leader_paused) { leader_fault(SIGSTOP); }
END_TEST

START_TEST(watch_member_killed) {
  /* The watch streams from a follower (so the cluster keeps its leader),
   * and its reopen goes on to the next endpoint. */
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  char urls[512];
  urls_from((leader + 1) % 3, urls, sizeof urls);
  watch_resume(urls, (leader + 1) % 3);
}
END_TEST

START_TEST(quorum_lost_and_back) {
  int leader = harness_etcd_leader(E);
  ck_assert_int_ge(leader, 0);
  int a = (leader + 1) % 3, b = (leader + 2) % 3;
  etcd_client *c = client_for(harness_etcd_urls(E), 2000);
  char key[128];
  unique_key(key, sizeof key, "quorum");
  etcd_txn_result r;
  ck_assert_int_eq(create(c, key, "before", 0, &r), ETCD_OK);
  etcd_txn_result_clear(&r);
  /* One member crashed, one paused (its kernel still accepts connections). */
  harness_etcd_signal(E, a, SIGKILL);
  harness_etcd_signal(E, b, SIGSTOP);
  for (int i = 0; i < 3; i++) {
    int64_t t0 = harness_now_ms();
    etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
    etcd_op_result g;
    int rc = i < 2 ? create(c, key, "during", 0, &r) : etcd_range(c, &op, &g);
    int64_t took = harness_now_ms() - t0;
    if (i < 2)
      etcd_txn_result_clear(&r);
    else
      etcd_op_result_clear(&g);
    ck_assert_msg(rc == ETCD_EUNAVAIL, "call %d: %s: %s", i, etcd_strerror(rc),
                  etcd_client_errstr(c));
    ck_assert_int_le(took, 2000 + 500 * harness_time_scale());
    printf("measure: without quorum, a call failed with ETCD_EUNAVAIL after %lld ms: %s\n",
           (long long)took, etcd_client_errstr(c));
  }
  harness_etcd_signal(E, b, SIGCONT);
  ck_assert_int_eq(harness_etcd_restart(E, a), 0);
  int64_t t0 = harness_now_ms(), ok_after = -1;
  while (harness_now_ms() - t0 < 10000 * harness_time_scale()) {
    etcd_op_result g;
    etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
    int rc = etcd_range(c, &op, &g);
    int n = g.nkvs;
    etcd_op_result_clear(&g);
    if (rc == ETCD_OK) {
      ck_assert_int_eq(n, 1);
      ok_after = harness_now_ms() - t0;
      break;
    }
  }
  ck_assert_int_ge(ok_after, 0);
  ck_assert_int_eq(del(c, key, 0), ETCD_OK);
  etcd_client_free(c);
}
END_TEST

START_TEST(no_endpoint_answers) {
  int port = harness_free_port(); /* nobody listens there */
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
  etcd_client *c = client_for(url, 500);
  int64_t t0 = harness_now_ms();
  etcd_status_info st;
  ck_assert_int_eq(etcd_status(c, &st), ETCD_EUNAVAIL);
  ck_assert_int_lt(harness_now_ms() - t0, 1500);
  ck_assert_ptr_nonnull(strstr(etcd_client_errstr(c), "no endpoint answered"));
  etcd_client_free(c);
  /* Bad options are refused before anything is sent. */
  char err[256];
  etcd_client_opts bad = {.endpoints = "ftp://127.0.0.1:1"};
  ck_assert_ptr_null(etcd_client_new(&bad, err, sizeof err));
  ck_assert_ptr_nonnull(strstr(err, "ftp://"));
  etcd_client_opts half = {.endpoints = url, .user = "root"};
  ck_assert_ptr_null(etcd_client_new(&half, err, sizeof err));
  etcd_client_opts none = {.endpoints = " , "};
  ck_assert_ptr_null(etcd_client_new(&none, err, sizeof err));
}
END_TEST

START_TEST(status_and_members) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  etcd_status_info st;
  ck_assert_int_eq(etcd_status(c, &st), ETCD_OK);
  ck_assert_uint_ne(st.leader, 0);
  ck_assert_uint_ne(st.member_id, 0);
  ck_assert_uint_gt(st.raft_term, 0);
  ck_assert_int_gt(st.db_size, 0);
  ck_assert_str_eq(st.version, "3.4.23");
  etcd_member *m;
  int n;
  ck_assert_int_eq(etcd_member_list(c, &m, &n), ETCD_OK);
  ck_assert_int_eq(n, 3);
  int leader_listed = 0;
  for (int i = 0; i < n; i++) {
    leader_listed |= m[i].id == st.leader;
    ck_assert_ptr_nonnull(strstr(harness_etcd_urls(E), m[i].client_url));
  }
  ck_assert_int_eq(leader_listed, 1);
  free(m);
  etcd_client_free(c);
}
END_TEST

START_TEST(txn_latency) {
  etcd_client *c = client_for(harness_etcd_urls(E), 5000);
  char key[128];
  unique_key(key, sizeof key, "latency");
  enum { N = 200 };
  int64_t us[N];
  for (int i = 0; i < N; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    etcd_txn_result r;
    ck_assert_int_eq(create(c, key, "v", 0, &r), ETCD_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    etcd_txn_result_clear(&r);
    us[i] = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
    ck_assert_int_eq(del(c, key, 0), ETCD_OK);
  }
  for (int i = 1; i < N; i++) /* insertion sort: 200 numbers */
    for (int k = i; k > 0 && us[k - 1] > us[k]; k--) {
      int64_t t = us[k];
      us[k] = us[k - 1];
      us[k - 1] = t;
    }
  printf(
      "measure: one acquire txn on the 3-member loopback cluster: median %lld us, p90 %lld us, max "
      "%lld us\n",
      (long long)us[N / 2], (long long)us[N * 9 / 10], (long long)us[N - 1]);
  ck_assert_int_lt(us[N / 2], 200000 * harness_time_scale());
  etcd_client_free(c);
}
END_TEST

/* ---- auth (a cluster of its own) ----------------------------------------- */

static const char PASSWORD[] = "s3cret-Pa55word";

static void gateway(const char *url, const char *path, const char *body, const char *token) {
  char auth[300];
  snprintf(auth, sizeof auth, "Authorization: %s", token ? token : "");
  const char *headers[] = {auth, NULL};
  harness_resp r;
  ck_assert_int_eq(harness_http_h(url, "POST", path, body, token ? headers : NULL, &r), 0);
  ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
  harness_resp_free(&r);
}

static void assert_no_secret(const char *msg) {
  ck_assert_msg(strstr(msg, PASSWORD) == NULL, "the password is in a message: %s", msg);
  ck_assert_msg(strstr(msg, "Pa55") == NULL, "part of the password is in a message: %s", msg);
}

static harness_etcd *ONE; /* the auth test's cluster; main frees it even after a failure */

START_TEST(auth_user_password) {
  harness_etcd *one = ONE = harness_etcd_start(1);
  ck_assert_ptr_nonnull(one);
  const char *url = harness_etcd_url(one, 0);
  char body[200];
  snprintf(body, sizeof body, "{\"name\":\"root\",\"password\":\"%s\"}", PASSWORD);
  gateway(url, "/v3/auth/user/add", body, NULL);
  gateway(url, "/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}", NULL);
  gateway(url, "/v3/auth/enable", "{}", NULL);

  /* No user: refused, and said so. */
  etcd_client *anon = client_for(url, 2000);
  etcd_op_result g;
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = "k"};
  ck_assert_int_eq(etcd_range(anon, &op, &g), ETCD_EAUTH);
  ck_assert_ptr_nonnull(strstr(etcd_client_errstr(anon), "no user is configured"));
  etcd_client_free(anon);

  /* A wrong password: refused; neither password appears anywhere. */
  char err[256];
  etcd_client_opts o = {
      .endpoints = url, .timeout_ms = 2000, .user = "root", .password = "wrong-Pa55"};
  etcd_client *bad = etcd_client_new(&o, err, sizeof err);
  ck_assert_ptr_nonnull(bad);
  ck_assert_int_eq(etcd_range(bad, &op, &g), ETCD_EAUTH);
  ck_assert_ptr_nonnull(strstr(etcd_client_errstr(bad), "refused user 'root'"));
  assert_no_secret(etcd_client_errstr(bad));
  ck_assert_ptr_null(strstr(etcd_client_errstr(bad), "wrong-"));
  etcd_watch *w;
  ck_assert_int_eq(etcd_watch_open(&o, "k", 0, 0, &w, err, sizeof err), ETCD_EAUTH);
  ck_assert_ptr_null(strstr(err, "wrong-"));
  etcd_client_free(bad);

  /* The right one: calls and watches work. */
  o.password = PASSWORD;
  etcd_client *c = etcd_client_new(&o, err, sizeof err);
  ck_assert_ptr_nonnull(c);
  etcd_txn_result r;
  ck_assert_int_eq(create(c, "k", "v", 0, &r), ETCD_OK);
  ck_assert_int_eq(r.succeeded, 1);
  etcd_txn_result_clear(&r);
  ck_assert_msg(etcd_watch_open(&o, "k", 0, 1, &w, err, sizeof err) == ETCD_OK, "%s", err);
  etcd_event ev[1];
  ck_assert_int_eq(collect(w, ev, 1, 3000), 1);
  ck_assert_str_eq(ev[0].key, "k");
  etcd_watch_free(w);

  /* A restart forgets etcd's simple tokens: the client authenticates again
   * by itself, once. */
  ck_assert_int_eq(harness_etcd_restart(one, 0), 0);
  ck_assert_int_eq(get(c, "k", &g), 1);
  etcd_op_result_clear(&g);

  /* A failure after authentication names neither the password nor the token. */
  harness_etcd_signal(one, 0, SIGKILL);
  ck_assert_int_eq(etcd_range(c, &op, &g), ETCD_EUNAVAIL);
  assert_no_secret(etcd_client_errstr(c));
  ck_assert_int_eq(etcd_watch_open(&o, "k", 0, 0, &w, err, sizeof err), ETCD_EUNAVAIL);
  assert_no_secret(err);
  etcd_client_free(c);
}
END_TEST

int main(void) {
  /* etcd's exchanges are not picketd's: keep them out of the contract log. */
  unsetenv("PICKET_CONTRACT_LOG");
  setvbuf(stdout, NULL, _IOLBF, 0);
  Suite *s = suite_create("etcd_client");
  TCase *tc = tcase_create("cluster");
  tcase_add_checked_fixture(tc, heal, NULL);
  tcase_add_test(tc, txn_creates_once);
  tcase_add_test(tc, create_revision_rises);
  tcase_add_test(tc, batch_over_grpc_and_gateway);
  tcase_add_test(tc, lease_lifecycle);
  tcase_add_test(tc, lease_expiry_deletes_key);
  tcase_add_test(tc, watch_put_then_delete);
  tcase_add_test(tc, watch_resumes_after_reopen);
  tcase_add_test(tc, watch_compacted);
  tcase_add_test(tc, watch_stop_wakes_a_blocked_next);
  tcase_add_test(tc, watch_from_now_knows_its_revision);
  tcase_add_test(tc, status_and_members);
  tcase_add_test(tc, txn_latency);
  tcase_add_test(tc, no_endpoint_answers);
  tcase_add_test(tc, leader_killed);
  tcase_add_test(tc, leader_paused);
  tcase_add_test(tc, watch_member_killed);
  tcase_add_test(tc, quorum_lost_and_back);
  suite_add_tcase(s, tc);
  TCase *auth = tcase_create("auth");
  tcase_add_test(auth, auth_user_password);
  suite_add_tcase(s, auth);
  /* Started and freed here rather than in an unchecked fixture, so that the
   * members and their dirs go whatever the tests did. */
  E = harness_etcd_start(3);
  if (E == NULL) {
    fprintf(stderr, "test_etcd_client: no etcd cluster\n");
    return 1;
  }
  SRunner *sr = srunner_create(s);
  /* No fork: the cluster's members are this process's children (see the top). */
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  harness_etcd_free(ONE);
  harness_etcd_free(E);
  return failed ? 1 : 0;
}
