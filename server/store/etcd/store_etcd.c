/* store_etcd.c: the lock store on etcd (store.h), reached through the
 * backend table at the end of this file (store/backend.h). WORK IN
 * PROGRESS on the etcd branch (issue 29): locks (acquire, renew, release,
 * inspect), /readyz and the release feed; semaphores, read/write locks,
 * lock-delay, the hold cap, quotas, listing, breaking and events are not
 * here yet and answer "not supported on etcd yet".
 *
 * The data model (docs/etcd-design.md): for lock NAME under the key
 * prefix P,
 *  - P l/NAME holds the grant as JSON {lease, owner, ttl_ms, at, renewals},
 *    attached to an etcd lease of the grant's TTL (whole seconds, rounded
 *    up; etcd raises it to its minimum). Its create_revision is the fence:
 *    the revision of the txn that wrote it, which Raft makes strictly
 *    increasing across the cluster, with no clock and no counter.
 *  - P f/NAME is put in the same txn, with no lease: its mod_revision is
 *    the last fence issued, which inspect reports after a release.
 * Each thread that calls etcd owns one client (a pthread key holds it),
 * as each thread owns its Redis connection in store_redis.c. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "etcd_client.h"
#include "log.h"

static const config *cfg;
static etcd_client_opts opts;
static pthread_key_t client_key;

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void client_destroy(void *c) { etcd_client_free(c); }

/* The calling thread's client, made on first use; NULL with r->err set. */
static etcd_client *client(store_result *r) {
  etcd_client *c = pthread_getspecific(client_key);
  if (c) return c;
  char err[200];
  c = etcd_client_new(&opts, err, sizeof err);
  if (c == NULL) {
    snprintf(r->err, sizeof r->err, "etcd: %s", err);
    return NULL;
  }
  pthread_setspecific(client_key, c);
  return c;
}

/* An etcd failure as a store status, with its message in r->err. */
static store_status failed(etcd_client *c, int code, store_result *r) {
  snprintf(r->err, sizeof r->err, "etcd: %.200s", etcd_client_errstr(c));
  if (code == ETCD_EUNAVAIL) return STORE_EUNAVAIL;
  if (code == ETCD_ENOSPACE) return STORE_EFULL;
  return STORE_EREPLY;
}

static void key_of(char *out, size_t cap, char kind, const char *name) {
  snprintf(out, cap, "%s%c/%s", cfg->key_prefix, kind, name);
}

static int64_t ttl_seconds(int64_t ttl_ms) { return ttl_ms <= 0 ? 1 : (ttl_ms + 999) / 1000; }

/* The grant a P l/NAME value describes. */
typedef struct {
  char lease[PICKET_PROTO_LEASE_LEN + 1];
  char owner[PICKET_PROTO_OWNER_BYTES_MAX + 1];
  int64_t at, renewals;
} grant;

static int grant_parse(const etcd_kv *kv, grant *g) {
  memset(g, 0, sizeof *g);
  json_t *j = json_loadb(kv->value, kv->value_len, 0, NULL);
  if (j == NULL) return -1;
  const char *lease = json_string_value(json_object_get(j, "lease"));
  const char *owner = json_string_value(json_object_get(j, "owner"));
  snprintf(g->lease, sizeof g->lease, "%s", lease ? lease : "");
  snprintf(g->owner, sizeof g->owner, "%s", owner ? owner : "");
  g->at = json_integer_value(json_object_get(j, "at"));
  g->renewals = json_integer_value(json_object_get(j, "renewals"));
  json_decref(j);
  return lease ? 0 : -1;
}

/* The value of a grant (malloc'd), or NULL. */
static char *grant_value(const char *lease, const char *owner, int64_t ttl_ms, int64_t at,
                         int64_t renewals) {
  json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I}", "lease", lease, "owner", owner, "ttl_ms",
                        (json_int_t)ttl_ms, "at", (json_int_t)at, "renewals",
                        (json_int_t)renewals);
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

/* Reads P l/NAME: 1 with *kv filled (the caller clears res), 0 when there
 * is no grant, or a negative etcd code. */
static int read_grant(etcd_client *c, const char *key, etcd_op_result *res, etcd_kv **kv) {
  etcd_op op = {.kind = ETCD_OP_RANGE, .key = key};
  int rc = etcd_range(c, &op, res);
  if (rc != ETCD_OK) return rc;
  *kv = res->nkvs > 0 ? &res->kvs[0] : NULL;
  return *kv != NULL;
}

static store_status lock_acquire(etcd_client *c, store_op *op, store_result *r) {
  char key[PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 8], fkey[sizeof key];
  key_of(key, sizeof key, 'l', op->name);
  key_of(fkey, sizeof fkey, 'f', op->name);
  int64_t lease_id = 0, granted_s = 0;
  int rc = etcd_lease_grant(c, ttl_seconds(op->ttl_ms), &lease_id, &granted_s);
  if (rc != ETCD_OK) return failed(c, rc, r);
  int64_t at = wall_ms();
  char *value = grant_value(op->lease, op->owner ? op->owner : "", granted_s * 1000, at, 0);
  if (value == NULL) {
    etcd_lease_revoke(c, lease_id);
    snprintf(r->err, sizeof r->err, "out of memory");
    return STORE_EREPLY;
  }
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
  etcd_op put[2] = {{.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = lease_id},
                    {.kind = ETCD_OP_PUT, .key = fkey, .value = ""}};
  etcd_op get = {.kind = ETCD_OP_RANGE, .key = key};
  etcd_txn_req t = {&cmp, 1, put, 2, &get, 1};
  etcd_txn_result res = {0};
  rc = etcd_txn(c, &t, &res);
  free(value);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = failed(c, rc, r);
  } else if (res.succeeded) {
    r->fence = res.revision; /* the key's create_revision */
    r->ttl_ms = granted_s * 1000;
    r->created = 1;
    r->at = at;
    lease_id = 0; /* the grant's now */
  } else if (res.nresults < 1 || res.results[0].nkvs < 1) {
    /* released between the compare and the read: the caller retries */
    r->ttl_ms = 1;
    st = STORE_HELD;
  } else {
    etcd_kv *kv = &res.results[0].kvs[0];
    grant g;
    if (grant_parse(kv, &g) < 0) {
      snprintf(r->err, sizeof r->err, "etcd: %.200s holds no picket grant", key);
      st = STORE_EREPLY;
    } else if (strcmp(g.lease, op->lease) == 0) {
      /* a retry of this lease's own acquire (its reply was lost, or the
       * txn ran twice across a failover): the same grant, kept alive */
      int64_t ttl_s = 0;
      rc = etcd_lease_keepalive_once(c, kv->lease, &ttl_s);
      if (rc != ETCD_OK) st = failed(c, rc, r);
      r->fence = kv->create_revision;
      r->ttl_ms = ttl_s * 1000;
      r->at = g.at;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
    } else {
      int64_t left_s = 0, of_s = 0;
      if (etcd_lease_timetolive(c, kv->lease, &left_s, &of_s) != ETCD_OK || left_s < 1)
        left_s = 1;
      r->ttl_ms = left_s * 1000;
      snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      st = STORE_HELD;
    }
  }
  etcd_txn_result_clear(&res);
  if (lease_id) etcd_lease_revoke(c, lease_id); /* granted for nothing */
  return st;
}

static store_status lock_renew(etcd_client *c, store_op *op, store_result *r) {
  char key[PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 8];
  key_of(key, sizeof key, 'l', op->name);
  etcd_op_result res = {0};
  etcd_kv *kv;
  int rc = read_grant(c, key, &res, &kv);
  if (rc < 0) {
    etcd_op_result_clear(&res);
    return failed(c, rc, r);
  }
  grant g;
  if (rc == 0 || grant_parse(kv, &g) < 0 || strcmp(g.lease, op->lease) != 0) {
    etcd_op_result_clear(&res);
    return STORE_LOST;
  }
  int64_t want_s = ttl_seconds(op->ttl_ms), left_s = 0, of_s = 0;
  store_status st = STORE_OK;
  rc = etcd_lease_timetolive(c, kv->lease, &left_s, &of_s);
  if (rc != ETCD_OK) {
    st = failed(c, rc, r);
  } else if (left_s < 0) {
    st = STORE_LOST;
  } else if (want_s <= of_s) {
    /* An etcd lease keeps the TTL it was granted: a renewal that asks no
     * more is a keepalive (never shorter than asked). */
    int64_t ttl_s = 0;
    rc = etcd_lease_keepalive_once(c, kv->lease, &ttl_s);
    if (rc != ETCD_OK) st = failed(c, rc, r);
    else if (ttl_s == 0) st = STORE_LOST;
    r->ttl_ms = ttl_s * 1000;
  } else {
    /* A longer TTL needs a new etcd lease: the same grant (and fence: a
     * put keeps create_revision) moves to it, then the old one ends. */
    int64_t id = 0, granted_s = 0;
    rc = etcd_lease_grant(c, want_s, &id, &granted_s);
    char *value = rc == ETCD_OK ? grant_value(g.lease, g.owner, granted_s * 1000, g.at,
                                              g.renewals + 1)
                                : NULL;
    if (rc != ETCD_OK) {
      st = failed(c, rc, r);
    } else if (value == NULL) {
      snprintf(r->err, sizeof r->err, "out of memory");
      st = STORE_EREPLY;
    } else {
      etcd_compare cmp = {.key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
                          .number = kv->mod_revision};
      etcd_op put = {.kind = ETCD_OP_PUT, .key = key, .value = value, .lease = id};
      etcd_txn_req t = {&cmp, 1, &put, 1, NULL, 0};
      etcd_txn_result tr = {0};
      rc = etcd_txn(c, &t, &tr);
      if (rc != ETCD_OK) st = failed(c, rc, r);
      else if (!tr.succeeded) st = STORE_LOST;
      etcd_txn_result_clear(&tr);
    }
    free(value);
    if (st == STORE_OK) {
      etcd_lease_revoke(c, kv->lease); /* its key has moved: this deletes nothing */
      r->ttl_ms = granted_s * 1000;
    } else if (id) {
      etcd_lease_revoke(c, id);
    }
  }
  r->fence = kv->create_revision;
  r->at = g.at;
  etcd_op_result_clear(&res);
  return st;
}

static store_status lock_release(etcd_client *c, store_op *op, store_result *r) {
  char key[PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 8];
  key_of(key, sizeof key, 'l', op->name);
  etcd_op_result res = {0};
  etcd_kv *kv;
  int rc = read_grant(c, key, &res, &kv);
  if (rc < 0) {
    etcd_op_result_clear(&res);
    return failed(c, rc, r);
  }
  grant g;
  if (rc == 0 || grant_parse(kv, &g) < 0 || strcmp(g.lease, op->lease) != 0) {
    etcd_op_result_clear(&res);
    return STORE_LOST;
  }
  /* Deleted only if it is still the grant just read: a stale release
   * cannot end a newer holder's lease. */
  etcd_compare cmp = {.key = key, .target = ETCD_CMP_MOD, .result = ETCD_CMP_EQUAL,
                      .number = kv->mod_revision};
  etcd_op del = {.kind = ETCD_OP_DELETE, .key = key};
  etcd_txn_req t = {&cmp, 1, &del, 1, NULL, 0};
  etcd_txn_result tr = {0};
  store_status st = STORE_OK;
  rc = etcd_txn(c, &t, &tr);
  if (rc != ETCD_OK) st = failed(c, rc, r);
  else if (!tr.succeeded) st = STORE_LOST;
  etcd_txn_result_clear(&tr);
  if (st == STORE_OK) etcd_lease_revoke(c, kv->lease);
  r->fence = kv->create_revision;
  r->at = g.at;
  etcd_op_result_clear(&res);
  return st;
}

static store_status lock_inspect(etcd_client *c, store_op *op, store_result *r) {
  char key[PICKET_PROTO_KEY_PREFIX_MAX + PICKET_PROTO_NAME_MAX + 8], fkey[sizeof key];
  key_of(key, sizeof key, 'l', op->name);
  key_of(fkey, sizeof fkey, 'f', op->name);
  /* One txn with no compare: both keys read at one revision. */
  etcd_op get[2] = {{.kind = ETCD_OP_RANGE, .key = key}, {.kind = ETCD_OP_RANGE, .key = fkey}};
  etcd_txn_req t = {NULL, 0, get, 2, NULL, 0};
  etcd_txn_result tr = {0};
  int rc = etcd_txn(c, &t, &tr);
  store_status st = STORE_OK;
  if (rc != ETCD_OK) {
    st = failed(c, rc, r);
  } else if (tr.nresults == 2) {
    if (tr.results[1].nkvs > 0) r->fence = tr.results[1].kvs[0].mod_revision;
    grant g;
    if (tr.results[0].nkvs > 0 && grant_parse(&tr.results[0].kvs[0], &g) == 0) {
      int64_t left_s = 0, of_s = 0;
      if (etcd_lease_timetolive(c, tr.results[0].kvs[0].lease, &left_s, &of_s) == ETCD_OK &&
          left_s >= 0) {
        r->held = 1;
        r->ttl_ms = left_s > 0 ? left_s * 1000 : 1;
        r->at = g.at;
        r->renewals = g.renewals;
        snprintf(r->owner, sizeof r->owner, "%s", g.owner);
      }
    }
  }
  etcd_txn_result_clear(&tr);
  return st;
}

static void store_etcd_run(store_op *op) {
  memset(&op->r, 0, sizeof op->r);
  etcd_client *c = client(&op->r);
  if (c == NULL) {
    op->st = STORE_EUNAVAIL;
    return;
  }
  switch (op->kind) {
    case STORE_OP_ACQUIRE: op->st = lock_acquire(c, op, &op->r); break;
    case STORE_OP_RENEW: op->st = lock_renew(c, op, &op->r); break;
    case STORE_OP_RELEASE: op->st = lock_release(c, op, &op->r); break;
    case STORE_OP_INSPECT: op->st = lock_inspect(c, op, &op->r); break;
    default:
      snprintf(op->r.err, sizeof op->r.err, "not supported on etcd yet");
      op->st = STORE_EREPLY;
  }
}

/* ---- the release feed: one prefix watch over P l/ ------------------------ */

#define FEED_LINGER_MS 3000
static void (*released)(const char *key);
static pthread_mutex_t feed_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t feed_cv = PTHREAD_COND_INITIALIZER;
static int feed_wanted, feed_stopping, feed_started;
static int64_t feed_idle_since;
static etcd_watch *feed_watch; /* guarded by feed_mu, so stop can stop it */
static pthread_t feed_thread;

static void *feed_main(void *arg) {
  char prefix[sizeof cfg->key_prefix + 4];
  snprintf(prefix, sizeof prefix, "%sl/", cfg->key_prefix);
  size_t plen = strlen(prefix);
  int64_t from = 0;
  for (;;) {
    pthread_mutex_lock(&feed_mu);
    while (!feed_stopping && !feed_wanted) pthread_cond_wait(&feed_cv, &feed_mu);
    int stop = feed_stopping;
    pthread_mutex_unlock(&feed_mu);
    if (stop) break;
    etcd_watch *w = NULL;
    char err[200];
    if (etcd_watch_open(&opts, prefix, 1, from, &w, err, sizeof err) != ETCD_OK) {
      LOG(LOG_DEBUG, "release feed: %s", err);
      struct timespec ts = {0, 200 * 1000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    pthread_mutex_lock(&feed_mu);
    feed_watch = w;
    stop = feed_stopping;
    pthread_mutex_unlock(&feed_mu);
    if (from == 0) released(NULL); /* what was released while not watching */
    etcd_event ev[64];
    int n = 0;
    while (!stop) {
      n = etcd_watch_next(w, ev, 64, 1000);
      if (n < 0) break;
      for (int i = 0; i < n; i++)
        if (ev[i].type == ETCD_EVENT_DELETE && ev[i].key_len > plen)
          released(ev[i].key + plen);
      pthread_mutex_lock(&feed_mu);
      stop = feed_stopping ||
             (!feed_wanted && mono_ms() - feed_idle_since >= FEED_LINGER_MS);
      pthread_mutex_unlock(&feed_mu);
    }
    from = n == ETCD_EUNAVAIL ? etcd_watch_last_revision(w) + 1 : 0;
    if (n == ETCD_ECOMPACTED) released(NULL);
    pthread_mutex_lock(&feed_mu);
    feed_watch = NULL;
    pthread_mutex_unlock(&feed_mu);
    etcd_watch_free(w);
  }
  return arg;
}

static int store_etcd_feed_start(void (*on_released)(const char *key)) {
  released = on_released;
  if (pthread_create(&feed_thread, NULL, feed_main, NULL) != 0) return -1;
  feed_started = 1;
  return 0;
}

static void store_etcd_feed_want(int on) {
  pthread_mutex_lock(&feed_mu);
  if (on && !feed_wanted) pthread_cond_signal(&feed_cv);
  if (!on && feed_wanted) feed_idle_since = mono_ms();
  feed_wanted = on;
  pthread_mutex_unlock(&feed_mu);
}

static void store_etcd_feed_stop(void) {
  if (!feed_started) return;
  pthread_mutex_lock(&feed_mu);
  feed_stopping = 1;
  if (feed_watch) etcd_watch_stop(feed_watch);
  pthread_cond_broadcast(&feed_cv);
  pthread_mutex_unlock(&feed_mu);
  pthread_join(feed_thread, NULL);
  feed_started = 0;
}

/* ---- the rest of store.h --------------------------------------------------- */

static int store_etcd_init(const config *c, char *err, size_t errlen) {
  cfg = c;
  opts = (etcd_client_opts){.endpoints = cfg->etcd_list, .timeout_ms = cfg->etcd_timeout_ms,
                            .ca_file = cfg->etcd_ca_file, .cert_file = cfg->etcd_cert_file,
                            .key_file = cfg->etcd_key_file, .user = cfg->etcd_user,
                            .password = cfg->etcd_password};
  if (pthread_key_create(&client_key, client_destroy) != 0) {
    snprintf(err, errlen, "pthread_key_create failed");
    return -1;
  }
  store_result r = {0};
  etcd_client *cl = client(&r);
  if (cl == NULL) {
    snprintf(err, errlen, "%s", r.err);
    return -1;
  }
  etcd_status_info si;
  if (etcd_status(cl, &si) != ETCD_OK)
    LOG(LOG_WARN, "etcd: %s; serving 503 until a member answers", etcd_client_errstr(cl));
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
  etcd_client *c = client(r);
  if (c == NULL) return STORE_EUNAVAIL;
  etcd_status_info si;
  int rc = etcd_status(c, &si);
  if (rc != ETCD_OK) return failed(c, rc, r);
  if (si.leader == 0) {
    snprintf(r->err, sizeof r->err, "etcd: the member has no leader (quorum lost?)");
    return STORE_EUNAVAIL;
  }
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

static store_status store_etcd_list(const char *prefix, int limit, store_cursor *at, int *more,
                                    store_result *r) {
  *more = 0;
  snprintf(r->err, sizeof r->err, "listing is not supported on etcd yet");
  return STORE_EREPLY;
}

static store_status store_etcd_break(const char *name, const char *who, store_result *r) {
  snprintf(r->err, sizeof r->err, "break is not supported on etcd yet");
  return STORE_EREPLY;
}

/* Events: not yet; a follower that never reports a name ready. */
struct store_events {
  int unused;
};
static store_events *store_etcd_events_new(const store_events_hooks *hooks, void *ctx) {
  return calloc(1, sizeof(store_events));
}
static void store_etcd_events_free(store_events *e) { free(e); }
static int store_etcd_events_add(store_events *e, const char *name) { return 0; }
static void store_etcd_events_remove(store_events *e, const char *name) {}
static int64_t store_etcd_events_run(store_events *e, int readable) { return mono_ms() + 1000; }
static int store_etcd_events_fd(const store_events *e) { return -1; }

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
