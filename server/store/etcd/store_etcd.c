/* store_etcd.c: the lock store on etcd (store.h), reached through the
 * backend table at the end of this file (store/backend.h): the client each
 * thread owns, startup, /readyz, and where each call goes. The calls
 * themselves live in one file per family (store_etcd.h lists them).
 *
 * Why etcd: its revision is decided by Raft, so a fence taken from it
 * (the create_revision of the key a grant writes) is strictly increasing
 * across the cluster with no clock and no counter to lose. Why its JSON
 * gateway: Debian 12 packages no C gRPC client for etcd, and the gateway
 * needs only libcurl and jansson, which picket already links
 * (etcd_client.c).
 *
 * Each thread that calls etcd owns one client (a pthread key holds it), as
 * each thread owns its Redis connection in store_redis.c. There is no
 * pipelining: a loop's call is made directly, on the loop's thread. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "store_etcd.h"

const config *store_etcd_cfg;
etcd_client_opts store_etcd_opts;
static pthread_key_t client_key;

static void client_destroy(void *c) { etcd_client_free(c); }

etcd_client *store_etcd_client(store_result *r) {
  etcd_client *c = pthread_getspecific(client_key);
  if (c) return c;
  char err[200];
  c = etcd_client_new(&store_etcd_opts, err, sizeof err);
  if (c == NULL) {
    snprintf(r->err, sizeof r->err, "etcd: %s", err);
    return NULL;
  }
  pthread_setspecific(client_key, c);
  return c;
}

store_status store_etcd_failed(etcd_client *c, int code, store_result *r) {
  snprintf(r->err, sizeof r->err, "%.250s", etcd_client_errstr(c)); /* it names etcd */
  /* credentials etcd refuses make it unreachable for picketd, as a Redis
   * that refuses AUTH does: 503, with the reason in the log */
  if (code == ETCD_EUNAVAIL || code == ETCD_EAUTH) return STORE_EUNAVAIL;
  if (code == ETCD_ENOSPACE) return STORE_EFULL;
  return STORE_EREPLY;
}

void store_etcd_key(char *out, size_t cap, char kind, const char *name) {
  snprintf(out, cap, "%s%c/%s", store_etcd_cfg->key_prefix, kind, name);
}

static _Atomic int64_t min_ttl_s; /* 0 until learned */

int64_t store_etcd_min_ttl_s(void) {
  int64_t m = min_ttl_s;
  return m > 0 ? m : 1;
}

void store_etcd_min_ttl_seen(int64_t asked_s, int64_t given_s) {
  /* etcd raises a TTL under its minimum to it, and gives any other as asked */
  if (given_s > asked_s) min_ttl_s = given_s;
  else if (asked_s == 1 && given_s == 1) min_ttl_s = 1;
}

/* Learns etcd's minimum once, by granting a 1 s lease: at startup and, if
 * etcd did not answer then, at the next /readyz; never on a lock call. */
static void min_ttl_learn(etcd_client *c) {
  int64_t id = 0, given = 0;
  if (min_ttl_s > 0 || etcd_lease_grant(c, 1, &id, &given) != ETCD_OK) return;
  etcd_lease_revoke(c, id);
  store_etcd_min_ttl_seen(1, given);
}

int64_t store_etcd_ttl_s(int64_t ttl_ms) {
  int64_t s = ttl_ms <= 0 ? 1 : (ttl_ms + 999) / 1000, m = store_etcd_min_ttl_s();
  return s < m ? m : s;
}

int store_etcd_grant_parse(const etcd_kv *kv, store_etcd_grant *g) {
  memset(g, 0, sizeof *g);
  json_t *j = json_loadb(kv->value, kv->value_len, 0, NULL);
  if (j == NULL) return -1;
  const char *lease = json_string_value(json_object_get(j, "lease"));
  const char *owner = json_string_value(json_object_get(j, "owner"));
  const char *token = json_string_value(json_object_get(j, "qt"));
  const char *value = json_string_value(json_object_get(j, "val"));
  snprintf(g->value, sizeof g->value, "%s", value ? value : "");
  snprintf(g->lease, sizeof g->lease, "%s", lease ? lease : "");
  snprintf(g->owner, sizeof g->owner, "%s", owner ? owner : "");
  snprintf(g->token, sizeof g->token, "%s", token ? token : "");
  g->at = json_integer_value(json_object_get(j, "at"));
  g->exp = json_integer_value(json_object_get(j, "exp"));
  g->renewals = json_integer_value(json_object_get(j, "renewals"));
  g->ttl_ms = json_integer_value(json_object_get(j, "ttl_ms"));
  g->cap = json_integer_value(json_object_get(j, "cap"));
  g->delay_ms = json_integer_value(json_object_get(j, "delay"));
  g->delay_lease = json_integer_value(json_object_get(j, "dl"));
  g->limit = json_integer_value(json_object_get(j, "limit"));
  g->write = json_is_true(json_object_get(j, "write"));
  g->fence = json_integer_value(json_object_get(j, "fence"));
  json_decref(j);
  return lease ? 0 : -1;
}

char *store_etcd_grant_value(const store_etcd_grant *g) {
  json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "lease", g->lease, "owner", g->owner,
                        "ttl_ms", (json_int_t)g->ttl_ms, "at", (json_int_t)g->at, "renewals",
                        (json_int_t)g->renewals, "exp", (json_int_t)g->exp);
  /* the rest only when set, so a plain grant stays short */
  if (j && g->token[0]) json_object_set_new(j, "qt", json_string(g->token));
  if (j && g->cap) json_object_set_new(j, "cap", json_integer(g->cap));
  if (j && g->delay_ms) json_object_set_new(j, "delay", json_integer(g->delay_ms));
  if (j && g->delay_lease) json_object_set_new(j, "dl", json_integer(g->delay_lease));
  if (j && g->limit) json_object_set_new(j, "limit", json_integer(g->limit));
  if (j && g->write) json_object_set_new(j, "write", json_true());
  if (j && g->fence) json_object_set_new(j, "fence", json_integer(g->fence));
  if (j && g->value[0]) json_object_set_new(j, "val", json_string(g->value));
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

int store_etcd_read(etcd_client *c, const char *key, etcd_op_result *res, etcd_kv **kv) {
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
  int rc = etcd_range(c, &op, res);
  if (rc != ETCD_OK) return rc;
  *kv = res->nkvs > 0 ? &res->kvs[0] : NULL;
  return *kv != NULL;
}

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

static int store_etcd_init(const config *cfg, char *err, size_t errlen) {
  store_etcd_cfg = cfg;
  metrics_gauge_omit(G_REDIS_UP);
  metrics_gauge_omit(G_REDIS_USED_MEMORY);
  metrics_gauge_omit(G_REDIS_DB_KEYS);
  store_etcd_opts = (etcd_client_opts){
      .endpoints = cfg->etcd_list, .timeout_ms = cfg->etcd_timeout_ms,
      .ca_file = cfg->etcd_ca_file, .cert_file = cfg->etcd_cert_file,
      .key_file = cfg->etcd_key_file, .user = cfg->etcd_user, .password = cfg->etcd_password};
  if (pthread_key_create(&client_key, client_destroy) != 0) {
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
  LOG(LOG_INFO, "fences are etcd revisions: strictly increasing, with no clock assumption");
  return 0;
}

static void store_etcd_thread_done(void) {
  etcd_client *c = pthread_getspecific(client_key);
  etcd_client_free(c);
  pthread_setspecific(client_key, NULL);
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
  min_ttl_learn(c);
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

/* No pipelining over etcd yet: each call is direct. */
static int store_etcd_pipeline_enabled(void) { return 0; }
static int store_etcd_pipeline_forced(void) { return 0; }
static store_pipe *store_etcd_pipe_new(void) { return NULL; }
static int store_etcd_pipe_connect(store_pipe *p) { return -1; }
static void store_etcd_pipe_free(store_pipe *p) {}
static int store_etcd_pipe_append(store_pipe *p, store_op *op) {
  store_etcd_run(op);
  return -1;
}
static void store_etcd_pipe_flush(store_pipe *p) {}
static int store_etcd_pipe_fd(const store_pipe *p, unsigned long *opens) { return -1; }
static void store_etcd_pipe_read(store_pipe *p) {}
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
    .pipeline_forced = store_etcd_pipeline_forced,
    .pipe_new = store_etcd_pipe_new,
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
