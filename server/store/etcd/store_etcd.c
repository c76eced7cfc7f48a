/* store_etcd.c: the lock store on etcd (store.h), reached through the
 * backend table at the end of this file (store/backend.h): startup,
 * /readyz, and where each call goes. It stands on top of the others: the
 * calls themselves live in one file per family, and what they share in
 * grant.c, leases.c and common.c (common.h draws the layers).
 *
 * Why etcd: its revision is decided by Raft, so a fence taken from it
 * (the create_revision of the key a grant writes) is strictly increasing
 * across the cluster with no clock and no counter to lose. picketd speaks
 * its JSON gateway (libcurl and jansson) for everything, and gRPC (Debian's
 * libgrpc and protobuf-c) for the txns of every cycle (etcd_client.c says
 * why).
 *
 * Each thread that calls etcd owns one client (common.c). A loop's calls
 * go to its pipe (pipe.c), whose worker threads make them, so the loop
 * never waits on etcd for them; the calls still made directly (store_run's:
 * a waiter's retry, an undo; store_list, store_break) run on the calling
 * thread. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "batch.h"
#include "common.h"
#include "etcd_grpc.h"
#include "feed.h"
#include "locks.h"
#include "log.h"
#include "metrics.h"
#include "pipe.h"
#include "pool.h"
#include "rwlock.h"
#include "semaphore.h"
#include "store_events.h"

static void store_etcd_run(store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  etcd_client *c = store_etcd_client(&op->r);
  if (c == NULL) {
    op->st = STORE_EUNAVAIL;
    return;
  }
  if (op->kind <= STORE_OP_INSPECT) {
    store_etcd_lock(c, op);
  } else if (op->kind <= STORE_OP_SEM_INSPECT) {
    store_etcd_semaphore(c, op);
  } else if (op->kind <= STORE_OP_RW_FORGET) {
    store_etcd_rwlock(c, op);
  } else { /* a break and a list have calls of their own (admin.c) */
    snprintf(op->r.err, sizeof op->r.err, "etcd: no such call");
    op->st = STORE_EREPLY;
  }
  metrics_gauge_set(G_STORE_UP, op->st != STORE_EUNAVAIL);
}

static store_status store_etcd_ready(int detail, store_result *r, json_t **body);

/* The etcd store's counters on /metrics, one table: the shared leases
 * (pool.c), the batches (batch.c) and the txns over gRPC (etcd_grpc.c). */
static void counters(metrics_buf *b, int all_tenants) {
  (void)all_tenants; /* no series names a token */
  long v[7];
  store_etcd_pool_counts(&v[0], &v[1], &v[2]);
  store_etcd_batch_counts(&v[3], &v[4]);
  etcd_grpc_counts(&v[5], &v[6]);
  static const char *const rows[7][2] = {
      {"picket_etcd_pool_leases_total",
       "etcd leases picketd granted for its grants (shared ones, and one per grant of a TTL "
       "seldom used)."},
      {"picket_etcd_pool_grants_total", "Grants, renewals and lock-delays that needed an etcd lease."},
      {"picket_etcd_pool_shared_total",
       "Of those, the ones put on a lease that other grants share (no lease granted for them)."},
      {"picket_etcd_txn_requests_total",
       "Requests that carried grants' and releases' txns to etcd (several txns each when many "
       "clients call at once)."},
      {"picket_etcd_txns_total", "The txns those requests carried."},
      {"picket_etcd_grpc_requests_total", "Txn requests etcd answered over gRPC."},
      {"picket_etcd_grpc_failures_total",
       "Txn requests that failed over gRPC and went through etcd's JSON gateway instead."}};
  for (int i = 0; i < 7; i++)
    metrics_put(b, "# HELP %s %s\n# TYPE %s counter\n%s %ld\n", rows[i][0], rows[i][1],
                rows[i][0], rows[i][0], v[i]);
}

static int store_etcd_init(const config *cfg, char *err, size_t errlen) {
  store_etcd_cfg = cfg;
  int members = 1; /* what the locks are kept in; main.c then logs where picketd listens */
  for (const char *c = cfg->etcd_list; *c; c++) members += *c == ',';
  LOG(LOG_INFO, "locks are kept in etcd, %d member%s named", members, members == 1 ? "" : "s");
  store_etcd_opts = (etcd_client_opts){
      .endpoints = cfg->etcd_list, .timeout_ms = cfg->etcd_timeout_ms,
      .ca_file = cfg->etcd_ca_file, .cert_file = cfg->etcd_cert_file,
      .key_file = cfg->etcd_key_file, .user = cfg->etcd_user, .password = cfg->etcd_password};
  if (store_etcd_clients_init() != 0) {
    snprintf(err, errlen, "pthread_key_create failed");
    return -1;
  }
  store_result r = {0};
  etcd_client *cl = store_etcd_client(&r);
  if (cl == NULL) {
    snprintf(err, errlen, "%s", r.err);
    return -1;
  }
  json_t *body = NULL;
  if (store_etcd_ready(1, &r, &body) != STORE_OK)
    LOG(LOG_WARN, "%s; serving 503 until etcd answers", r.err);
  json_decref(body);
  metrics_add_families(store_etcd_pipe_metrics);
  metrics_add_families(counters);
  LOG(LOG_INFO, "fences are etcd revisions: strictly increasing, with no clock assumption");
  return 0;
}

static store_status store_etcd_ready(int detail, store_result *r, json_t **body) {
  *body = NULL;
  etcd_client *c = store_etcd_client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  etcd_status_info si;
  int rc = etcd_status(c, &si);
  if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
  if (si.leader == 0) {
    snprintf(r->err, sizeof r->err, "etcd: the member has no leader (quorum lost?)");
    return STORE_EUNAVAIL;
  }
  /* A status needs no credentials and no quorum's read: ready only once a
   * linearizable read with picketd's own credentials succeeds, as a lock
   * call's would. */
  char key[STORE_ETCD_KEY_MAX];
  store_etcd_key(key, sizeof key, 'f', "");
  etcd_op probe = {.kind = ETCD_OP_RANGE, .key = key, .limit = 1, .count_only = 1};
  etcd_op_result pr = {0};
  rc = etcd_range(c, &probe, &pr);
  etcd_op_result_clear(&pr);
  if (rc != ETCD_OK) return store_etcd_failed(c, rc, r);
  store_etcd_min_ttl_learn(c);
  etcd_member *m = NULL;
  int n = 0;
  if (etcd_member_list(c, &m, &n) != ETCD_OK) n = 1;
  free(m);
  r->replicas = n > 0 ? n - 1 : 0;
  *body = detail ? json_pack("{s:s, s:i, s:s}", "status", "ready", "replicas", r->replicas,
                             "primary", etcd_client_endpoint(c))
                 : json_pack("{s:s, s:i}", "status", "ready", "replicas", r->replicas);
  return STORE_OK;
}

static void store_etcd_stop(void) {}

/* Every call is piped (pipe.c): a call on a worker leaves the loop free
 * for its other connections, with or without company. */
static int store_etcd_pipeline_enabled(void) { return 1; }
static store_pipe *store_etcd_pipe_new_run(void) {
  return store_etcd_pipe_new(store_etcd_run, store_etcd_cfg->etcd_calls_in_flight);
}
/* A worker's call goes out as soon as it is appended: nothing to flush. */
static void store_etcd_pipe_flush(store_pipe *p) {}
/* Nothing for the loop to time out: etcd_client ends each call within
 * --etcd-timeout-ms on its worker, which then queues it back as any
 * other, and a worker's blocking request could not be cut short from the
 * loop's thread anyway. */
static int64_t store_etcd_pipe_timeout_ms(const store_pipe *p) { return -1; }
static void store_etcd_pipe_expire(store_pipe *p) {}

const store_backend store_etcd_backend = {
    .name = "etcd",
    .init = store_etcd_init,
    .thread_done = store_etcd_thread_done,
    .ready = store_etcd_ready,
    .stop = store_etcd_stop,
    .feed_start = store_etcd_feed_start,
    .feed_want = store_etcd_feed_want,
    .feed_stop = store_etcd_feed_stop,
    .run = store_etcd_run,
    .pipeline_enabled = store_etcd_pipeline_enabled,
    .pipe_new = store_etcd_pipe_new_run,
    .pipe_connect = store_etcd_pipe_connect,
    .pipe_free = store_etcd_pipe_free,
    .pipe_append = store_etcd_pipe_append,
    .pipe_flush = store_etcd_pipe_flush,
    .pipe_fd = store_etcd_pipe_fd,
    .pipe_read = store_etcd_pipe_read,
    .pipe_timeout_ms = store_etcd_pipe_timeout_ms,
    .pipe_expire = store_etcd_pipe_expire,
    .list = store_etcd_list,
    .break_lock = store_etcd_break,
    .events_new = store_etcd_events_new,
    .events_free = store_etcd_events_free,
    .events_add = store_etcd_events_add,
    .events_remove = store_etcd_events_remove,
    .events_run = store_etcd_events_run,
    .events_fd = store_etcd_events_fd,
};
